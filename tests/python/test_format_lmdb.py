# SPDX-License-Identifier: MIT
"""docs/FORMAT.md is enough: python-lmdb alone reads a shard that `stoker pack` wrote, with only
the rules written there (key encoding, 16-byte header, CRC32C, meta keys, sources db), and gets
back every source file's bytes and label. Format 2 (written since 0.5: the checksum covers
payload, label and target) and format 1 (tests/data/v0.1-dataset, payload only) both."""

import os
import struct
import subprocess

import numpy as np
import pytest

from conftest import jpeg_bytes

lmdb = pytest.importorskip("lmdb")


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def test_crc32c_reference():
    # the check value FORMAT.md quotes
    assert crc32c(b"123456789") == 0xE3069283


def stoker_cli():
    exe = os.environ.get("STOKER")
    if not exe or not os.path.exists(exe):
        pytest.skip("STOKER (the CLI) not set")
    return exe


def test_read_shards_with_python_lmdb(tmp_path):
    exe = stoker_cli()
    rng = np.random.default_rng(5)
    src = tmp_path / "src"
    classes = ["Zebra", "ant", "bee-2", "bee"]
    expected = []  # (relpath, label, bytes) in torchvision order
    for label, c in enumerate(sorted(classes)):
        d = src / c
        d.mkdir(parents=True)
        for i in range(12):
            data = jpeg_bytes(rng, 60 + (i * 37) % 360, 50 + (i * 53) % 330,
                              gray=(i % 5 == 4), subsampling=i % 3, progressive=(i % 4 == 1))
            name = "img_%02d.jpg" % i
            (d / name).write_bytes(data)
            expected.append(("%s/%s" % (c, name), label, data))
    (src / "bee" / "broken.jpg").write_bytes(b"GIF89a....")
    dst = tmp_path / "ds"
    r = subprocess.run([exe, "pack", str(src), str(dst), "--shard-size", "1M", "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # GIF bytes cut after the signature: a GIF (packed as JPEG when whole), listed as corrupt
    report = (dst / "pack-report.tsv").read_text()
    assert report.startswith("%s\tGIF: " % (src / "bee" / "broken.jpg")) and report.count("\n") == 1, report
    assert not (dst / ".stoker-pack-incomplete").exists()

    shards = sorted(p for p in os.listdir(dst) if p.startswith("shard-") and p.endswith(".lmdb"))
    assert shards and shards[0] == "shard-00000.lmdb"
    got = []
    first = 0
    for n, name in enumerate(shards):
        assert name == "shard-%05d.lmdb" % n
        env = lmdb.open(str(dst / name), subdir=False, readonly=True, lock=False, max_dbs=3)
        records = env.open_db(b"records", create=False)
        meta = env.open_db(b"meta", create=False)
        sources = env.open_db(b"sources", create=False)
        with env.begin() as txn:
            assert txn.get(b"format", db=meta) == b"stoker-shard 2"
            assert txn.get(b"classes", db=meta).decode().split("\n") == sorted(classes)
            count = int(txn.get(b"count", db=meta))
            assert int(txn.get(b"first_index", db=meta)) == first
            assert txn.get(b"last_shard", db=meta) == (b"1" if n == len(shards) - 1 else b"0")
            payload_sum = 0
            k = 0
            for key, value in txn.cursor(db=records):
                assert len(key) == 8 and struct.unpack(">Q", key)[0] == k
                magic, label, crc, length = struct.unpack("<4siII", value[:16])
                assert magic == b"STK2"
                assert length == len(value) - 16
                payload = bytes(value[16:])
                # format 2: CRC32C(payload || label as 4 bytes LE); no targets in this dataset
                assert crc32c(payload + bytes(value[4:8])) == crc
                assert crc32c(payload) != crc
                src_rel = txn.get(key, db=sources).decode()
                got.append((src_rel, label, payload))
                payload_sum += length
                k += 1
            assert k == count
            assert int(txn.get(b"payload_bytes", db=meta)) == payload_sum
        env.close()
        first += count
    assert len(shards) >= 2, "1 MiB shards: the test wants several"
    assert got == expected


@pytest.mark.parametrize("subdir", [True, False])
def test_foreign_lmdb(tmp_path, subdir):
    """A foreign LMDB (LSUN layout: main database, key -> image bytes) written by python-lmdb:
    `stoker info/ls/get/verify` read it as it is, records in key order, label -1, no CRC."""
    exe = stoker_cli()
    rng = np.random.default_rng(9)
    path = tmp_path / ("lsun" if subdir else "lsun.lmdb")
    items = {("%040x" % (i * 7919)).encode(): jpeg_bytes(rng, 30 + i, 20 + 2 * i) for i in range(7)}
    env = lmdb.open(str(path), subdir=subdir, map_size=1 << 24)
    with env.begin(write=True) as txn:
        for k, v in items.items():
            txn.put(k, v)
    env.close()
    keys = sorted(items)
    r = subprocess.run([exe, "info", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "foreign LMDB" in r.stdout and "records:       7" in r.stdout
    r = subprocess.run([exe, "ls", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = [l.split("\t") for l in r.stdout.splitlines()]
    assert [int(l[0]) for l in lines] == list(range(7))
    assert all(l[2] == "-1" and l[4] == "-" for l in lines)
    assert [int(l[3]) for l in lines] == [len(items[k]) for k in keys]
    for i, k in enumerate(keys):
        g = subprocess.run([exe, "get", str(path), str(i)], capture_output=True)
        assert g.returncode == 0 and g.stdout == items[k]
    r = subprocess.run([exe, "verify", str(path), "--decode"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def record_checks(path):
    """(format, [(label, crc ok)]) of one shard by FORMAT.md's rules, python-lmdb alone."""
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False, max_dbs=4)
    records = env.open_db(b"records", create=False)
    meta = env.open_db(b"meta", create=False)
    out = []
    with env.begin() as txn:
        has_targets = txn.get(b"target_dtype", db=meta) is not None
    tdb = env.open_db(b"targets", create=False) if has_targets else None
    with env.begin() as txn:
        fmt = bytes(txn.get(b"format", db=meta))
        version = {b"stoker-shard 1": 1, b"stoker-shard 2": 2}[fmt]
        for key, value in txn.cursor(db=records):
            magic, label, crc, length = struct.unpack("<4siII", value[:16])
            assert magic == b"STK%d" % version and length == len(value) - 16
            data = bytes(value[16:])
            if version == 2:
                data += bytes(value[4:8]) + (bytes(txn.get(key, db=tdb)) if tdb is not None else b"")
            out.append((label, crc32c(data) == crc))
    env.close()
    return version, out


def test_format2_checksum_covers_targets(tmp_path):
    """A manifest with a value target: the record checksum is CRC32C(payload || label || target
    row), as FORMAT.md writes it; a target row changed in the file no longer matches."""
    exe = stoker_cli()
    rng = np.random.default_rng(11)
    (tmp_path / "img").mkdir()
    lines = ["path,label,box"]
    for i in range(6):
        (tmp_path / "img" / ("%d.jpg" % i)).write_bytes(jpeg_bytes(rng, 40 + i, 30 + i))
        lines.append("img/%d.jpg,%d,%d.5 %d" % (i, i % 3, i, 2 * i))
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    dst = tmp_path / "ds"
    r = subprocess.run([exe, "pack", str(tmp_path / "m.csv"), str(dst), "--target-field", "box",
                        "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    version, recs = record_checks(dst / "shard-00000.lmdb")
    assert version == 2 and [l for l, _ in recs] == [i % 3 for i in range(6)]
    assert all(ok for _, ok in recs)
    # record 3's target row [3.5, 6.0] changed to [3.5, 7.0] in the file: a bad record
    shard = dst / "shard-00000.lmdb"
    data = shard.read_bytes()
    row = struct.pack("<ff", 3.5, 6.0)
    pos = data.find(row)
    assert pos > 0 and data.find(row, pos + 1) < 0
    shard.write_bytes(data[:pos] + struct.pack("<ff", 3.5, 7.0) + data[pos + 8:])
    _version, recs = record_checks(shard)
    assert [ok for _, ok in recs] == [True, True, True, False, True, True]
    r = subprocess.run([exe, "verify", str(dst)], capture_output=True, text=True)
    assert r.returncode == 3 and "BAD\t3\t" in r.stdout and "or target changed" in r.stdout, r.stdout


def test_format1_shard_reads_by_the_v1_rule():
    """The 0.1.0 dataset in tests/data: format 1, checksum of the payload alone."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "data", "v0.1-dataset", "shard-00000.lmdb")
    version, recs = record_checks(path)
    assert version == 1 and recs and all(ok for _, ok in recs)


def test_format1_info_from_the_binding(stoker_mod):
    """stoker.info says which format each shard is."""
    here = os.path.dirname(os.path.abspath(__file__))
    info = stoker_mod.info(os.path.join(here, "..", "data", "v0.1-dataset"))
    assert info["format_version"] == 1 and info["shard_formats"] == [1]
