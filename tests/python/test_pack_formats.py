# SPDX-License-Identifier: MIT
"""`stoker pack` takes PNG (8/16-bit, gray, palette, alpha, interlaced), WebP (lossy, lossless,
animated), GIF (animated: the first frame), BMP, TIFF, PPM/PGM besides JPEG (gray and CMYK kept
byte for byte), known by content (a PNG named .JPEG). Each one is packed, read back with
python-lmdb and checked against Pillow's Image.open(f).convert("RGB") of the source:

- exactly: the payload decodes (Pillow) to the same pixels as Pillow's own JPEG encode of the
  reference RGB at stoker's settings (quality 95, 4:4:4) — equal encoder input, so stoker's
  decode of the source equals Pillow's byte for byte;
- a PSNR bound of the stored JPEG against the source pixels (PSNR_MIN at quality 95);
- `stoker verify --decode` decodes every record with the loader's decoder.

Corrupt and truncated files of each format, and other formats, are listed with a reason in
pack-report.tsv and on stderr; nothing is skipped silently. The inputs are made here with Pillow.
"""

import io
import os
import struct
import subprocess
import zlib

import numpy as np
import pytest

lmdb = pytest.importorskip("lmdb")
Image = pytest.importorskip("PIL.Image")

PSNR_MIN = 36.0  # dB, stored JPEG (quality 95, 4:4:4) vs the source pixels: these synthetic images (gradients + noise sigma 4) measure 37.7-45.8 dB
QUALITY = 95


def stoker_cli():
    exe = os.environ.get("STOKER")
    if not exe or not os.path.exists(exe):
        pytest.skip("STOKER (the CLI) not set")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    missing = [f for f in ("png", "webp", "gif", "tiff", "bmp") if f not in version.split("(")[-1]]
    if missing:
        pytest.skip("this build has no decoder for " + " ".join(missing) + " (" + version.strip() + ")")
    return exe


def picture(rng, w, h):
    """Smooth colour gradients, a few edges and mild noise: photo-like, not white noise."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([xx / max(w - 1, 1) * 255, yy / max(h - 1, 1) * 255,
                     (xx + yy) / max(w + h - 2, 1) * 255], axis=-1)
    wave = (np.sin(xx / 7.0 + rng.uniform(0, 6.28)) * 30)[..., None]
    img = base * 0.8 + wave + rng.normal(0, 4, (h, w, 3))
    img[h // 3:h // 2, w // 4:w // 2] = (30, 200, 90)
    return np.clip(img, 0, 255).astype(np.uint8)


def save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def png_raw(arr, ctype, depth=16):
    """A PNG written by hand for what Pillow cannot write (16-bit RGB / RGBA / LA)."""
    h, w = arr.shape[:2]
    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_sources(rng):
    """(name, bytes, how stored: 'copy' or 'jpeg')"""
    W, H = 67, 45
    rgb = picture(rng, W, H)
    im = Image.fromarray(rgb, "RGB")
    alpha = rng.integers(0, 256, (H, W), dtype=np.uint8)
    alpha[:5] = 0
    rgba = Image.fromarray(np.dstack([rgb, alpha]), "RGBA")
    gray = im.convert("L")
    pal = im.quantize(64)
    out = []
    out.append(("png_rgb8.png", save(im, "PNG"), "jpeg"))
    out.append(("png_rgba.png", save(rgba, "PNG"), "jpeg"))
    out.append(("png_la.png", save(Image.merge("LA", (gray, Image.fromarray(alpha))), "PNG"), "jpeg"))
    out.append(("png_gray8.png", save(gray, "PNG"), "jpeg"))
    out.append(("png_gray1.png", save(gray.convert("1"), "PNG"), "jpeg"))
    out.append(("png_palette.png", save(pal, "PNG"), "jpeg"))
    out.append(("png_palette_trns.png", save(pal, "PNG", transparency=3), "jpeg"))
    c16 = (rgb.astype(np.uint16) * 257 + rng.integers(0, 256, rgb.shape)).astype(np.uint16)
    out.append(("png_rgb16.png", png_raw(c16, 2), "jpeg"))
    a16 = np.dstack([c16, (alpha.astype(np.uint16) * 257)])
    out.append(("png_rgba16.png", png_raw(a16, 6), "jpeg"))
    g16 = (np.asarray(gray).astype(np.uint16) * 3).astype(np.uint16)  # some values over 255
    out.append(("png_gray16.png", png_raw(g16, 0), "jpeg"))
    la16 = np.dstack([np.asarray(gray).astype(np.uint16) * 257, alpha.astype(np.uint16) * 257])
    out.append(("png_la16.png", png_raw(la16, 4), "jpeg"))
    out.append(("webp_lossy.webp", save(im, "WEBP", quality=90), "jpeg"))
    out.append(("webp_lossless_rgba.webp", save(rgba, "WEBP", lossless=True, exact=True), "jpeg"))
    out.append(("webp_lossy_rgba.webp", save(rgba, "WEBP", quality=80), "jpeg"))
    frames = [Image.fromarray(picture(rng, W, H), "RGB") for _ in range(3)]
    out.append(("webp_animated.webp", save(frames[0], "WEBP", save_all=True, append_images=frames[1:],
                                           duration=100, lossless=True), "jpeg"))
    gframes = [f.quantize(32) for f in frames]
    out.append(("gif_animated.gif", save(gframes[0], "GIF", save_all=True, append_images=gframes[1:],
                                         duration=100, loop=0), "jpeg"))
    out.append(("gif_transparent.gif", save(pal, "GIF", transparency=5), "jpeg"))
    out.append(("gif_interlaced.gif", save(pal, "GIF", interlace=True), "jpeg"))
    out.append(("bmp_rgb24.bmp", save(im, "BMP"), "jpeg"))
    out.append(("bmp_palette8.bmp", save(pal, "BMP"), "jpeg"))
    out.append(("bmp_gray.bmp", save(gray, "BMP"), "jpeg"))
    out.append(("tiff_rgb.tif", save(im, "TIFF"), "jpeg"))
    out.append(("tiff_lzw.tiff", save(im, "TIFF", compression="tiff_lzw"), "jpeg"))
    out.append(("tiff_rgba.tif", save(rgba, "TIFF"), "jpeg"))
    out.append(("tiff_gray.tif", save(gray, "TIFF", compression="tiff_deflate"), "jpeg"))
    out.append(("tiff_palette.tif", save(pal, "TIFF"), "jpeg"))
    out.append(("tiff_cmyk.tif", save(im.convert("CMYK"), "TIFF"), "jpeg"))
    out.append(("ppm_rgb.ppm", save(im, "PPM"), "jpeg"))
    out.append(("pgm_gray.pgm", save(gray, "PPM"), "jpeg"))
    # maxval other than 255 (Pillow scales every sample to its mode's range, ties to even), and
    # 16-bit samples (a PGM opens as mode I, whose RGB clamps at 255); with a "# comment"
    for kind, maxval in (("P5", 100), ("P6", 100), ("P5", 1000), ("P6", 1000), ("P5", 65535), ("P6", 65535),
                         ("P5", 256)):
        chans = 1 if kind == "P5" else 3
        src = np.asarray(gray, dtype=np.float64) if chans == 1 else rgb.astype(np.float64)
        v = np.round(src / 255.0 * maxval).astype(np.int64)   # the picture at that maxval
        body = v.astype(">u2" if maxval > 255 else "u1").tobytes()
        head = ("%s\n# made by test_pack_formats\n%d %d\n%d\n" % (kind, W, H, maxval)).encode()
        out.append(("pnm_%s_max%d.%s" % (kind, maxval, "pgm" if chans == 1 else "ppm"), head + body, "jpeg"))
    out.append(("png_disguised.JPEG", save(im, "PNG"), "jpeg"))
    out.append(("jpeg_gray.jpg", save(gray, "JPEG", quality=90), "copy"))
    out.append(("jpeg_cmyk.jpg", save(im.convert("CMYK"), "JPEG", quality=90), "copy"))
    out.append(("jpeg_rgb.jpg", save(im, "JPEG", quality=90), "copy"))
    return out


def make_bad(rng):
    """(name, bytes, words the reason must contain)"""
    W, H = 40, 30
    im = Image.fromarray(picture(rng, W, H), "RGB")
    png = save(im, "PNG")
    i = png.index(b"IDAT") + 20
    png_corrupt = png[:i] + bytes(b ^ 0x5A for b in png[i:i + 16]) + png[i + 16:]
    webp = save(im, "WEBP", quality=90)
    gif = save(im.quantize(16), "GIF")
    bmp = save(im, "BMP")
    tif = save(im, "TIFF")
    return [
        ("bad_png_truncated.png", png[:len(png) // 2], ["PNG", "truncated"]),
        ("bad_png_corrupt.png", png_corrupt, ["PNG"]),
        ("bad_webp_truncated.webp", webp[:len(webp) // 2], ["WebP"]),
        ("bad_gif_truncated.gif", gif[:len(gif) // 2], ["GIF"]),
        ("bad_bmp_truncated.bmp", bmp[:len(bmp) // 3], ["BMP"]),
        ("bad_tiff_truncated.tif", tif[:len(tif) // 3], ["TIFF"]),
        ("bad_text.jpg", b"<html><body>not an image</body></html>\n", ["not an image", "text"]),
        ("bad_heif.jpg", b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(64), ["HEIF"]),
        ("bad_empty.png", b"", ["empty"]),
    ]


def pillow_rgb(data):
    with Image.open(io.BytesIO(data)) as f:
        return np.asarray(f.convert("RGB"))


def pillow_jpeg_pixels(rgb):
    """Pillow's (libjpeg-turbo's) encode of RGB at stoker's settings, decoded again."""
    return pillow_rgb(save(Image.fromarray(rgb, "RGB"), "JPEG", quality=QUALITY, subsampling=0))


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def read_records(dst):
    recs = []
    for name in sorted(p for p in os.listdir(dst) if p.startswith("shard-") and p.endswith(".lmdb")):
        env = lmdb.open(str(dst / name), subdir=False, readonly=True, lock=False, max_dbs=3)
        with env.begin() as txn:
            r, s = env.open_db(b"records", txn=txn, create=False), env.open_db(b"sources", txn=txn, create=False)
            for key, value in txn.cursor(db=r):
                recs.append((txn.get(key, db=s).decode(), struct.unpack("<i", value[4:8])[0], value[16:]))
        env.close()
    return recs


def test_every_format_packed_and_loaded(tmp_path):
    exe = stoker_cli()
    rng = np.random.default_rng(15)
    src = tmp_path / "src"
    src.mkdir()
    good, bad = make_sources(rng), make_bad(rng)
    lines = []
    for i, (name, data, _) in enumerate(good):
        (src / name).write_bytes(data)
        lines.append(f"{name}\t{i}")
    for name, data, _ in bad:
        (src / name).write_bytes(data)
        lines.append(f"{name}\t{999}")
    (src / "list.tsv").write_text("\n".join(lines) + "\n")
    dst = tmp_path / "ds"
    r = subprocess.run([exe, "pack", str(src / "list.tsv"), str(dst)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    recs = read_records(dst)
    by_name = {n: (label, payload) for n, label, payload in recs}
    assert [n for n, _, _ in recs] == [n for n, _, _ in good], "every good file once, in list order"

    report = dict(line.split("\t", 1) for line in (dst / "pack-report.tsv").read_text().splitlines())
    assert set(os.path.basename(p) for p in report) == {n for n, _, _ in bad}
    for name, _, words in bad:
        reason = next(v for p, v in report.items() if p.endswith(name))
        for w in words:
            assert w.lower() in reason.lower(), (name, reason)
        assert name in r.stderr and reason in r.stderr, f"{name} not listed on stderr"

    rows = []
    for i, (name, data, how) in enumerate(good):
        label, payload = by_name[name]
        assert label == i
        if how == "copy":
            assert payload == data, f"{name}: a JPEG is stored byte for byte"
            continue
        assert payload[:3] == b"\xff\xd8\xff", f"{name}: stored as JPEG"
        ref = pillow_rgb(data)
        got = pillow_rgb(payload)
        assert got.shape == ref.shape, name
        # exact: stoker's decode of the source == Pillow's (same JPEG encoder input)
        assert np.array_equal(got, pillow_jpeg_pixels(ref)), f"{name}: decoded pixels differ from Pillow's"
        p = psnr(got, ref)
        rows.append((name, p))
        assert p >= PSNR_MIN, f"{name}: PSNR {p:.1f} dB < {PSNR_MIN}"
    print("\n".join(f"{n:28s} {p:6.2f} dB" for n, p in rows))

    v = subprocess.run([exe, "verify", str(dst), "--decode"], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr


def test_max_side_resize_matches_pillow(tmp_path):
    """--max-side: a larger image becomes Pillow's resize((w', h'), BILINEAR) of it (before the
    JPEG encode: checked exactly as above), a smaller JPEG stays byte for byte, and so does a
    large JPEG that does not decode cleanly when --keep-damaged keeps it (the loader names it; a
    re-encode would hide it)."""
    exe = stoker_cli()
    rng = np.random.default_rng(16)
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    big = Image.fromarray(picture(rng, 300, 171), "RGB")
    small = save(Image.fromarray(picture(rng, 90, 60), "RGB"), "JPEG", quality=90)
    big_jpeg = save(big, "JPEG", quality=95)
    cut = big_jpeg[:len(big_jpeg) // 2]
    files = {"a_big.jpg": big_jpeg, "b_big.png": save(big, "PNG"), "c_small.jpg": small,
             "d_tall.png": save(big.transpose(Image.Transpose.ROTATE_90), "PNG"), "e_cut.jpg": cut}
    for n, d in files.items():
        (src / n).write_bytes(d)
    dst = tmp_path / "ds"
    r = subprocess.run([exe, "pack", str(tmp_path / "src"), str(dst), "--max-side", "128", "--quality",
                        str(QUALITY), "--keep-damaged"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "3 images resized" in r.stdout, r.stdout
    assert "e_cut.jpg\tkept-damaged: " in (dst / "pack-report.tsv").read_text()
    recs = {os.path.basename(n): p for n, _, p in read_records(dst)}
    assert recs["c_small.jpg"] == small
    assert recs["e_cut.jpg"] == cut
    for n, size in (("a_big.jpg", (128, 73)), ("b_big.png", (128, 73)), ("d_tall.png", (73, 128))):
        ref = np.asarray(Image.open(io.BytesIO(files[n])).convert("RGB").resize(size, Image.BILINEAR))
        got = pillow_rgb(recs[n])
        assert got.shape == ref.shape, n
        assert np.array_equal(got, pillow_jpeg_pixels(ref)), f"{n}: resize differs from Pillow's"
