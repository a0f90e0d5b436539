# SPDX-License-Identifier: MIT
"""One record's stored label changed in the shard file (1 -> 4, a label the dataset has): in a
format-2 shard the record checksum covers the label, so the record is bad everywhere it is
read — `stoker verify` (with and without --decode), stoker.Dataset.read, the loader (listed in
stats() by default, DataError naming it with strict=True). Before format 2 the change passed
all of them and the loader delivered label 4."""

import os
import struct
import subprocess

import numpy as np
import pytest

from conftest import jpeg_bytes, write_dataset

N = 160          # 1 bad record of 160: under any default bad-record limit of 1%
FLIP = 37        # its index


def stoker_cli():
    exe = os.environ.get("STOKER")
    if not exe or not os.path.exists(exe):
        pytest.skip("STOKER (the CLI) not set")
    return exe


@pytest.fixture(scope="module")
def flipped(tmp_path_factory, stoker_mod):
    rng = np.random.default_rng(27)
    items = [(jpeg_bytes(rng, 24 + k % 9, 20 + k % 7), k % 5) for k in range(N)]
    dst = os.path.join(str(tmp_path_factory.mktemp("flip")), "ds")
    write_dataset(dst, items, classes=["a", "b", "c", "d", "e"])
    shard = os.path.join(dst, "shard-00000.lmdb")
    data = bytearray(open(shard, "rb").read())
    payload = items[FLIP][0]
    assert items[FLIP][1] == 2
    pos = data.find(payload)
    assert pos > 16 and data.find(payload, pos + 1) < 0
    magic, label, _crc, length = struct.unpack("<4siII", bytes(data[pos - 16:pos]))
    assert magic == b"STK2" and label == 2 and length == len(payload)
    data[pos - 12] = 4          # the label's low byte: 2 -> 4
    with open(shard, "r+b") as f:
        f.seek(pos - 12)
        f.write(bytes([4]))
    return dst


@pytest.mark.parametrize("decode", [False, True])
def test_verify_finds_the_changed_label(flipped, decode):
    exe = stoker_cli()
    r = subprocess.run([exe, "verify", flipped] + (["--decode"] if decode else []),
                       capture_output=True, text=True)
    assert r.returncode == 3, r.stdout + r.stderr
    bad = [l for l in r.stdout.splitlines() if l.startswith("BAD\t")]
    assert len(bad) == 1 and bad[0].startswith("BAD\t%d\tshard-00000.lmdb key %d (item%d)\t" % (FLIP, FLIP, FLIP)), r.stdout
    assert "label 4" in bad[0] and "changed" in bad[0], bad[0]
    assert "shard-00000.lmdb: stoker-shard 2 (crc32c of payload, label and target)" in r.stdout
    assert "%d records, 1 bad" % N in r.stdout


def test_dataset_read_refuses_it(flipped, stoker_mod):
    with stoker_mod.Dataset(flipped) as ds:
        assert ds.read(FLIP - 1)[1] == (FLIP - 1) % 5
        with pytest.raises(stoker_mod.StokerError) as ei:
            ds.read(FLIP)
    assert "key %d" % FLIP in str(ei.value) and "label" in str(ei.value), str(ei.value)


def test_loader_strict_raises_naming_it(flipped, stoker_mod):
    with stoker_mod.Loader(flipped, 16, size=16, workers=2, strict=True, shuffle=False,
                           train=False, resize=20) as loader:
        with pytest.raises(stoker_mod.DataError) as ei:
            for _batch in loader:
                pass
    msg = str(ei.value)
    assert "shard-00000.lmdb key %d" % FLIP in msg and "label 4" in msg, msg


def test_loader_default_lists_it(flipped, stoker_mod):
    """Default mode: the record is a bad record, listed with its reason (what is delivered in its
    place is the substitution's business, tests/python/test_loader_badrecords.py); every other
    record comes with its own label."""
    with stoker_mod.Loader(flipped, 16, size=16, workers=2, shuffle=False, train=False,
                           resize=20, return_index=True) as loader:
        seen = 0
        for _images, labels, idx in loader:
            for lab, i in zip(labels.tolist(), idx.tolist()):
                if i != FLIP:
                    assert lab == i % 5
            seen += len(idx)
            if seen >= N:
                break
        st = loader.stats()
    bad = {e["index"] for e in st["errors"] if e["epoch"] == 0}
    assert bad == {FLIP}, st["errors"]
    e = [e for e in st["errors"] if e["index"] == FLIP][0]
    assert e["status_name"] == "STK_E_CRC" and "label 4" in e["reason"], e
