# SPDX-License-Identifier: MIT
"""Fidelity and cost of `stoker pack` on non-JPEG sources: N photos (a make-imagenet-like tree)
re-saved by Pillow as PNG, lossless WebP, BMP, TIFF (LZW) and GIF (256 colours), each set packed
with `stoker pack` (stored as JPEG at --quality, 4:4:4); per kind: pack time, stored bytes per
image, PSNR of the stored JPEG against Pillow's convert("RGB") of the source (median, min). Also
what 4:2:0 would give at the same quality (Pillow's encoder = the same libjpeg-turbo).
usage: /usr/bin/python3 bench/pack_formats_fidelity.py STOKER IMAGENET_LIKE_ROOT [N] [QUALITY]"""
import io, os, struct, subprocess, sys, tempfile, time
import numpy as np
import lmdb
from PIL import Image

stoker, root = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 40
q = int(sys.argv[4]) if len(sys.argv) > 4 else 95
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".JPEG"))[:n]
photos = [np.asarray(Image.open(f).convert("RGB")) for f in files]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def payloads(dst):
    out = []
    for s in sorted(p for p in os.listdir(dst) if p.endswith(".lmdb")):
        env = lmdb.open(os.path.join(dst, s), subdir=False, readonly=True, lock=False, max_dbs=3)
        with env.begin() as t:
            for _, v in t.cursor(db=env.open_db(b"records", txn=t, create=False)):
                out.append(bytes(v[16:]))
        env.close()
    return out


kinds = {"PNG": ("png", {}), "WebP lossless": ("webp", {"lossless": True}), "BMP": ("bmp", {}),
         "TIFF LZW": ("tif", {"compression": "tiff_lzw"}), "GIF": ("gif", {})}
print(f"{len(photos)} photos, quality {q}; PSNR of the stored JPEG vs Pillow's decode of the source")
print(f"{'source':14s} {'src MB':>7s} {'pack s':>7s} {'stored MB':>9s} {'PSNR med':>8s} {'PSNR min':>8s} "
      f"{'4:2:0 med':>9s}")
with tempfile.TemporaryDirectory() as tmp:
    for name, (ext, kw) in kinds.items():
        src = os.path.join(tmp, ext, "c")
        os.makedirs(src)
        refs = []
        for i, a in enumerate(photos):
            im = Image.fromarray(a, "RGB")
            if ext == "gif":
                im = im.quantize(256)
            p = os.path.join(src, f"{i:05d}.{ext if ext != 'gif' else 'png'}")
            # GIF: ImageFolder does not list .gif; the bytes are GIF whatever the name
            im.save(p, "GIF" if ext == "gif" else ext.upper().replace("TIF", "TIFF"), **kw)
            refs.append(np.asarray(Image.open(p).convert("RGB")))
        srcmb = sum(os.path.getsize(os.path.join(src, f)) for f in os.listdir(src)) / 1e6
        dst = os.path.join(tmp, ext + "-ds")
        t0 = time.perf_counter()
        subprocess.run([stoker, "pack", os.path.dirname(src), dst, "--quiet", "--quality", str(q)], check=True)
        dt = time.perf_counter() - t0
        pl = payloads(dst)
        ps = [psnr(np.asarray(Image.open(io.BytesIO(b)).convert("RGB")), r) for b, r in zip(pl, refs)]
        ps420 = []
        for r in refs:
            b = io.BytesIO()
            Image.fromarray(r).save(b, "JPEG", quality=q, subsampling=2)
            ps420.append(psnr(np.asarray(Image.open(b)), r))
        print(f"{name:14s} {srcmb:7.1f} {dt:7.2f} {sum(map(len, pl)) / 1e6:9.2f} {np.median(ps):8.2f} "
              f"{min(ps):8.2f} {np.median(ps420):9.2f}")
