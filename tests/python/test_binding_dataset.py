# SPDX-License-Identifier: MIT
"""stoker.pack / stoker.info / stoker.Dataset / stoker.decode through the binding."""

import hashlib
import io
import os

import numpy as np
import pytest

from conftest import CLASSES, jpeg_bytes


def test_pack_info_and_records(stoker_mod, imagefolder, shards):
    src, truth = imagefolder
    path, labels = shards
    info = stoker_mod.info(path)
    assert info["layout"] == "shards" and info["format_version"] == 2
    assert info["records"] == len(truth) and info["classes"] == CLASSES
    assert info["shards"] == len(info["shard_paths"]) >= 1
    assert info["shard_formats"] == [2] * info["shards"]
    assert all(os.path.exists(p) for p in info["shard_paths"])
    with stoker_mod.Dataset(path) as ds:
        assert len(ds) == len(truth)
        total = 0
        for i in range(len(ds)):
            payload, label = ds[i]
            assert truth[hashlib.sha1(payload).hexdigest()] == label == labels[i]
            rec = ds.record(i)
            assert rec["length"] == len(payload) and rec["label"] == label and rec["has_crc"]
            total += len(payload)
            assert "shard-" in ds.name(i)
        assert total == info["payload_bytes"]
        with pytest.raises(IndexError):
            ds[len(ds)]
    # the ImageFolder itself opens as the "files" layout with the same records
    finfo = stoker_mod.info(src)
    assert finfo["layout"] == "files" and finfo["records"] == len(truth)


def test_pack_progress_existing_destination_and_strict(stoker_mod, imagefolder, tmp_path):
    src, truth = imagefolder
    seen = []
    res = stoker_mod.pack(src, str(tmp_path / "a"), progress=seen.append)
    assert res["records"] == len(truth) and res["skipped"] == 0
    assert seen and seen[-1]["files_done"] == seen[-1]["files_total"] == len(truth)
    with pytest.raises(stoker_mod.DatasetExists):
        stoker_mod.pack(src, str(tmp_path / "a"))
    assert stoker_mod.pack(src, str(tmp_path / "a"), force=True)["records"] == len(truth)
    # a file that is not a JPEG: skipped by default, fatal (named) with strict
    bad_src = tmp_path / "src"
    for c in CLASSES[:2]:
        (bad_src / c).mkdir(parents=True)
        (bad_src / c / "ok.jpg").write_bytes(jpeg_bytes(np.random.default_rng(1), 40, 30))
    (bad_src / CLASSES[1] / "notes.jpg").write_bytes(b"plain text, not an image\n" * 4)
    res = stoker_mod.pack(str(bad_src), str(tmp_path / "b"))
    assert res["records"] == 2 and res["skipped"] == 1
    with pytest.raises(stoker_mod.StokerError) as ei:
        stoker_mod.pack(str(bad_src), str(tmp_path / "c"), strict=True)
    assert "notes.jpg" in str(ei.value)


def test_decode_equals_pil(stoker_mod):
    from PIL import Image
    rng = np.random.default_rng(5)
    for k, kw in enumerate([{}, {"subsampling": 0}, {"subsampling": 1}, {"progressive": True},
                            {"gray": True}]):
        data = jpeg_bytes(rng, 77 + k, 53, **kw)
        ours = stoker_mod.decode(data)
        ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert ours.shape == ref.shape and ours.dtype == np.uint8
        assert np.array_equal(ours, ref), kw
        assert stoker_mod.image_info(data)[:2] == (77 + k, 53)
    # a crop window at half scale: ceil(w/2) x ceil(h/2)
    data = jpeg_bytes(rng, 96, 80)
    part = stoker_mod.decode(data, crop=(16, 8, 33, 41), scale=4)
    assert part.shape == (21, 17, 3)
    with pytest.raises(stoker_mod.DataError):
        stoker_mod.decode(b"\xff\xd8 not really a jpeg")
    with pytest.raises(ValueError):
        stoker_mod.decode(data, scale=3)
