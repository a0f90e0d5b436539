# SPDX-License-Identifier: MIT
"""An ImageFolder of PNGs, and a folder of JPEGs with one PNG named .jpg, through stoker.Loader
(which decodes JPEG only): never silent grey images. The first bad record is warned about
(stoker.BadRecordWarning, naming the file and "not a JPEG"); a folder of PNGs raises at once
(no good record to replace them with), naming the reason and what to do; a mixed folder above
max_bad_fraction raises at the end of the pass, below it the PNG's sample is a good JPEG's, with
that JPEG's label, and the pass ends with a summary warning."""

import io
import os
import warnings

import numpy as np
import pytest

from conftest import jpeg_bytes


def png_bytes(rng, w, h):
    from PIL import Image
    img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(img, "RGB").save(out, "PNG")
    return out.getvalue()


def write_folder(root, files):
    """FILES: {relative path: bytes}"""
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    return root


def test_png_folder_warns_then_raises_naming_the_reason(stoker_mod, tmp_path):
    rng = np.random.default_rng(5)
    root = write_folder(str(tmp_path / "png"), {"c%d/img%02d.png" % (k % 2, k): png_bytes(rng, 40, 30)
                                                 for k in range(32)})
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker_mod.Loader(root, 32, size=16, workers=2, train=False, resize=20) as loader:
            with pytest.raises(stoker_mod.DataError) as ei:
                for _batch in loader:
                    pytest.fail("a batch of PNGs was delivered")
    msg = str(ei.value)
    assert "32 of 32" in msg and "not a JPEG" in msg, msg
    assert "stoker pack" in msg and "stoker.DataLoader" in msg, msg
    assert ei.value.status_name == "STK_E_NOT_JPEG"
    bad = [w for w in got if issubclass(w.category, stoker_mod.BadRecordWarning)]
    assert len(bad) == 1, [str(w.message) for w in got]
    text = str(bad[0].message)
    assert ".png" in text and "not a JPEG" in text and "dataset index" in text, text
    assert bad[0].filename == __file__   # points at the loop, not inside stoker


def mixed_folder(tmp_path):
    rng = np.random.default_rng(6)
    files = {"c%d/img%02d.jpg" % (k % 2, k): jpeg_bytes(rng, 40 + k, 30) for k in range(40)}
    files["c1/img07.jpg"] = png_bytes(rng, 40, 30)          # a PNG named .jpg: 1 of 40
    return write_folder(str(tmp_path / "mixed"), files)


def test_mixed_folder_above_the_limit_raises_at_the_end(stoker_mod, tmp_path):
    root = mixed_folder(tmp_path)
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


def test_mixed_folder_below_the_limit_replaces_the_png(stoker_mod, tmp_path):
    root = mixed_folder(tmp_path)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker_mod.Loader(root, 8, size=16, workers=2, train=False, resize=20, shuffle=False,
                               max_bad_fraction=0.05, return_index=True, array="numpy") as loader:
            batches = [(x.copy(), y.copy(), i.copy()) for x, y, i in loader]
    images = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    index = np.concatenate([b[2] for b in batches])
    assert list(index) == list(range(40))
    # ImageFolder order: c0/img00, c0/img02, ..., c1/img01, c1/img03, ... : find the PNG's index
    names = sorted("c%d/img%02d.jpg" % (k % 2, k) for k in range(40))
    bad = names.index("c1/img07.jpg")
    same = [k for k in range(40) if k != bad and np.array_equal(images[k], images[bad])]
    assert len(same) == 1, "the PNG's sample is one good JPEG's sample"
    assert labels[bad] == labels[same[0]] and labels[bad] >= 0
    msgs = [str(w.message) for w in got if issubclass(w.category, stoker_mod.BadRecordWarning)]
    assert len(msgs) == 2, msgs
    assert "img07.jpg" in msgs[0] and "not a JPEG" in msgs[0]
    assert "epoch 0: 1 of 40 records were bad" in msgs[1] and "1 not a JPEG" in msgs[1], msgs[1]
