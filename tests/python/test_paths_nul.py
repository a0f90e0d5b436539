# SPDX-License-Identifier: MIT
"""A path with a NUL byte is refused with ValueError, as os.open refuses it, by every entry point
of the binding that takes a path; before, C read it only up to the NUL, so Loader("ds\\0x")
opened the dataset ds."""

import os
import pathlib

import pytest


def _variants(path):
    """The same NUL-carrying path as str, bytes and os.PathLike."""
    bad = path + "\0x"
    return [bad, os.fsencode(bad), pathlib.PurePosixPath(path + "\0x")]


def test_loader_refuses_nul(stoker_mod, shards):
    dst, _ = shards
    with stoker_mod.Loader(dst, 4, train=False, size=32, resize=32) as ld:  # the real path opens
        assert len(ld.dataset) > 0
    for bad in _variants(dst):
        with pytest.raises(ValueError, match="null byte"):
            stoker_mod.Loader(bad, 4, train=False, size=32, resize=32)


def test_dataset_info_imagefolder_refuse_nul(stoker_mod, shards):
    dst, labels = shards
    with stoker_mod.Dataset(dst) as ds:
        assert len(ds) == len(labels)
    for bad in _variants(dst):
        with pytest.raises(ValueError, match="null byte"):
            stoker_mod.Dataset(bad)
        with pytest.raises(ValueError, match="null byte"):
            stoker_mod.info(bad)
        with pytest.raises(ValueError, match="null byte"):
            stoker_mod.ImageFolder(bad)


def test_dataloader_refuses_nul(stoker_mod, shards):
    dst, _ = shards
    with pytest.raises(ValueError, match="null byte"):
        stoker_mod.DataLoader(stoker_mod.ImageFolder(dst + "\0x"), batch_size=4)


def test_pack_refuses_nul(stoker_mod, imagefolder, tmp_path):
    src, _ = imagefolder
    out = str(tmp_path / "out")
    for bad in _variants(src):
        with pytest.raises(ValueError, match="null byte"):
            stoker_mod.pack(bad, out, threads=1)
    assert not os.path.exists(out)
    for bad in _variants(out):
        with pytest.raises(ValueError, match="null byte"):
            stoker_mod.pack(src, bad, threads=1)
    assert not os.path.exists(out)  # not packed into the path before the NUL
    classes = tmp_path / "classes.txt"
    classes.write_text("ant\nbee\ncat\n")
    for bad in _variants(str(classes)):
        with pytest.raises(ValueError, match="null byte"):
            stoker_mod.pack(src, out, threads=1, classes=bad)
    assert not os.path.exists(out)
