# SPDX-License-Identifier: MIT
"""stoker.Loader over an ImageFolder holding files that are not regular files (a FIFO x.JPEG, a
socket, a symlink to /dev/zero): the epoch ends (it used to wait for ever on the FIFO), every
index once, the regular images delivered and the three named in stats()["errors"] with their
kind. And a timeout names the read that stalls: StokerTimeout's message names the record being
read for longest. Every loader runs with timeout=, so a hang fails instead of blocking CI."""

import os
import socket

import numpy as np
import pytest

from conftest import jpeg_bytes

SPECIAL = {"x.JPEG": "FIFO", "s.jpg": "socket", "z.jpg": "character device"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("special"))
    rng = np.random.default_rng(11)
    for c in ("a", "b"):
        os.makedirs(os.path.join(root, c))
        for i in range(4):
            with open(os.path.join(root, c, "img%d.jpg" % i), "wb") as f:
                f.write(jpeg_bytes(rng, 40 + 8 * i, 36))
    a = os.path.join(root, "a")
    os.mkfifo(os.path.join(a, "x.JPEG"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.path.join(a, "s.jpg"))
    s.close()
    os.symlink("/dev/zero", os.path.join(a, "z.jpg"))
    return root


def test_loader_names_special_files_and_delivers_the_rest(stoker_mod, folder):
    # 3 of 11 records are special files: above the default max_bad_fraction, which would stop
    # the epoch this test follows to its end
    with stoker_mod.Loader(folder, 4, size=32, workers=2, shuffle=False, return_index=True,
                           timeout=30, max_bad_fraction=1.0) as loader:
        seen = []
        for images, labels, idx in loader:
            seen.extend(idx.tolist())
        st = loader.stats()
    assert sorted(seen) == list(range(11))
    # the loader already prefetches epoch 1 when epoch 0 ends: epoch 0's errors only
    e0 = [e for e in st["errors"] if e["epoch"] == 0]
    assert len(e0) == 3, st["errors"]
    for e in e0:
        name = os.path.basename(e["where"])
        assert name in SPECIAL, e
        assert "not a regular file: " + SPECIAL[name] in e["reason"], e
        assert e["status_name"] == "STK_E_IO", e


@pytest.mark.parametrize("layout", ["folder", "shards"])
def test_timeout_names_the_stalled_read(stoker_mod, folder, tmp_path, layout):
    lib = stoker_mod._lib
    path = folder
    if layout == "shards":
        path = str(tmp_path / "ds")
        stoker_mod.pack(folder, path)
    # every read is held up 3 s (injected latency): no batch within 0.5 s
    opts = {lib.P_FAULT_DELAY_PPM: 1000000, lib.P_FAULT_DELAY_US: 3000000}
    with stoker_mod.Loader(path, 4, size=32, workers=1, shuffle=False, io_backend="pread",
                           timeout=0.5, options=opts) as loader:
        with pytest.raises(stoker_mod.StokerTimeout) as ei:
            next(iter(loader))
    msg = str(ei.value)
    assert "oldest read in flight, for" in msg, msg
    if layout == "folder":
        assert folder in msg and ".jpg" in msg, msg
    else:
        assert "shard-00000.lmdb key" in msg, msg
