# SPDX-License-Identifier: MIT
"""stoker.Loader over raw folders that are not all JPEG (since 0.5): a folder of PNGs (RGB,
RGBA, palette, gray), one of each format pack reads (WebP, GIF, BMP, TIFF) and a folder of JPEGs
with a PNG named .jpg decode with pack's decoders: every sample equals torchvision's eval
transform (Resize + CenterCrop) of Pillow's Image.open(f).convert("RGB"), with its ImageFolder
label, and nothing is warned about. Files the loader cannot read at all are never silent grey
images: the first is warned about (stoker.BadRecordWarning, naming the file and "not a JPEG"),
and a folder of them raises naming the reason and what to do."""

import io
import os
import warnings

import numpy as np
import pytest

from conftest import jpeg_bytes, torch_or_skip


def need_decoders(stoker, *names):
    have = stoker.version_string().split("(")[-1]
    missing = [n for n in names if n not in have]
    if missing:
        pytest.skip("this build has no decoder for " + " ".join(missing))


def image_bytes(rng, w, h, fmt, mode="RGB"):
    from PIL import Image
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([xx * 255 / w, yy * 255 / h, (xx + yy) * 127 / (w + h)], axis=-1)
    img = np.clip(img + rng.integers(0, 50, size=(h, w, 3)), 0, 255).astype(np.uint8)
    im = Image.fromarray(img, "RGB")
    if mode == "RGBA":
        a = rng.integers(0, 256, size=(h, w), dtype=np.uint8)
        im = Image.fromarray(np.dstack([img, a]), "RGBA")
    elif mode == "P":
        im = im.quantize(64)
    elif mode == "L":
        im = im.convert("L")
    out = io.BytesIO()
    im.save(out, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    return out.getvalue()


def write_folder(root, files):
    """FILES: {relative path: bytes}"""
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    return root


def reference(root, size, resize):
    """torchvision's ImageFolder + Resize(resize) + CenterCrop(size) over ROOT: uint8 HWC, labels."""
    torch_or_skip()
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.Resize(resize), transforms.CenterCrop(size),
                             transforms.PILToTensor()])
    ds = datasets.ImageFolder(root, transform=tf)
    xs, ys = zip(*[ds[i] for i in range(len(ds))])
    return np.stack([x.permute(1, 2, 0).numpy() for x in xs]), np.array(ys)


def loader_epoch(stoker, root, size, resize):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker.Loader(root, 7, size=size, resize=resize, train=False, shuffle=False,
                           workers=2, layout="NHWC", array="numpy") as loader:
            out = [(x.copy(), y.copy()) for x, y in loader]
    bad = [str(w.message) for w in got if issubclass(w.category, stoker.BadRecordWarning)]
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out]), bad


def assert_equal_to_pillow(stoker, root, size=24, resize=28):
    images, labels, bad = loader_epoch(stoker, root, size, resize)
    want, want_labels = reference(root, size, resize)
    assert not bad, bad
    np.testing.assert_array_equal(labels, want_labels)
    for k in range(len(want)):
        np.testing.assert_array_equal(images[k], want[k], err_msg="sample %d" % k)


def test_png_folder_decodes_as_pillow(stoker_mod, tmp_path):
    need_decoders(stoker_mod, "png")
    rng = np.random.default_rng(5)
    modes = ("RGB", "RGBA", "P", "L")
    files = {"c%d/img%02d.png" % (k % 3, k): image_bytes(rng, 40 + k, 30 + k % 5, "PNG", modes[k % 4])
             for k in range(16)}
    assert_equal_to_pillow(stoker_mod, write_folder(str(tmp_path / "png"), files))


def test_every_format_pack_reads_decodes_as_pillow(stoker_mod, tmp_path):
    need_decoders(stoker_mod, "png", "webp", "gif", "tiff", "bmp")
    rng = np.random.default_rng(6)
    files = {}
    for k, (fmt, ext) in enumerate([("WEBP", "webp"), ("GIF", "gif"), ("BMP", "bmp"), ("TIFF", "tif"),
                                    ("PNG", "png"), ("WEBP", "webp"), ("GIF", "gif"), ("TIFF", "tif")]):
        files["c%d/img%02d.%s" % (k % 2, k, ext)] = image_bytes(rng, 50 - k, 36 + k, fmt)
    assert_equal_to_pillow(stoker_mod, write_folder(str(tmp_path / "formats"), files))


def test_png_named_jpg_in_a_jpeg_folder(stoker_mod, tmp_path):
    need_decoders(stoker_mod, "png")
    rng = np.random.default_rng(7)
    files = {"c%d/img%02d.jpg" % (k % 2, k): jpeg_bytes(rng, 40 + k, 30) for k in range(20)}
    files["c1/img07.jpg"] = image_bytes(rng, 40, 30, "PNG")          # a PNG named .jpg
    # the JPEGs equal Pillow's at DCT scale 8/8: a 28-pixel resize of 40-pixel images decodes
    # at 8/8 only when the scale cannot shrink below the output, so compare with scaling off
    root = write_folder(str(tmp_path / "mixed"), files)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker_mod.Loader(root, 6, size=24, resize=28, train=False, shuffle=False, workers=2,
                               layout="NHWC", array="numpy", dct_scaling=False) as loader:
            out = [(x.copy(), y.copy()) for x, y in loader]
    assert not [w for w in got if issubclass(w.category, stoker_mod.BadRecordWarning)]
    images = np.concatenate([o[0] for o in out])
    want, want_labels = reference(root, 24, 28)
    np.testing.assert_array_equal(np.concatenate([o[1] for o in out]), want_labels)
    np.testing.assert_array_equal(images, want)


def text_folder(tmp_path, n, per_text=None):
    rng = np.random.default_rng(8)
    files = {}
    for k in range(n):
        bad = per_text is None or k in per_text
        files["c%d/img%02d.jpg" % (k % 2, k)] = (b"plain text, not an image\n" * 4 if bad
                                                  else jpeg_bytes(rng, 40 + k, 30))
    return write_folder(str(tmp_path / "text"), files)


def test_unreadable_folder_warns_then_raises_naming_the_reason(stoker_mod, tmp_path):
    root = text_folder(tmp_path, 32)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker_mod.Loader(root, 32, size=16, workers=2, train=False, resize=20) as loader:
            with pytest.raises(stoker_mod.DataError) as ei:
                for _batch in loader:
                    pytest.fail("a batch of unreadable files was delivered")
    msg = str(ei.value)
    assert "32 of 32" in msg and "not a JPEG" in msg, msg
    assert "stoker pack" in msg and "stoker.DataLoader" in msg, msg
    assert ei.value.status_name == "STK_E_NOT_JPEG"
    bad = [w for w in got if issubclass(w.category, stoker_mod.BadRecordWarning)]
    assert len(bad) == 1, [str(w.message) for w in got]
    text = str(bad[0].message)
    assert ".jpg" in text and "not a JPEG" in text and "dataset index" in text, text
    assert bad[0].filename == __file__   # points at the loop, not inside stoker


def test_one_unreadable_file_in_40_raises_at_the_pass_end(stoker_mod, tmp_path):
    root = text_folder(tmp_path, 40, per_text={7})
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker_mod.Loader(root, 8, size=16, workers=2, train=False, resize=20,
                               shuffle=False) as loader:
            n = 0
            with pytest.raises(stoker_mod.DataError) as ei:
                for images, _labels in loader:
                    n += len(images)
    assert n == 32, "the batches before the last were delivered (%d samples)" % n
    msg = str(ei.value)
    assert "1 of 40" in msg and "not a JPEG" in msg and "max_bad_fraction" in msg, msg
    bad = [str(w.message) for w in got if issubclass(w.category, stoker_mod.BadRecordWarning)]
    assert len(bad) == 1 and "img07.jpg" in bad[0], bad
