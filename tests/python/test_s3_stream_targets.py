# SPDX-License-Identifier: MIT
"""Targets on a streamed s3:// dataset from Python (docs/S3.md "Streaming"), against the `s3`
fixture's radosgw: a manifest packed with a box (float32 x 4) per image by stoker.pack, uploaded
with boto3, read by stoker.Loader(url, cache_bytes=a quarter, shuffle_window=2, target="both"):
every record once per epoch, its label and target equal to the local Dataset's read of it, and
the same batches (indices, images, labels, targets) as the same Loader on the local shards, over
two epochs; state_dict() after 2 batches resumes exactly in a new Loader; one byte of a record's
target changed in the bucket is an error naming that record's shard and key (a CRC32C mismatch),
and no batch before it carries a wrong target."""

import json
import os
import shutil

import numpy as np
import pytest

from conftest import jpeg_bytes
from s3_link import server_env, upload

N = 120


def boxes(n):
    rng = np.random.default_rng(17)
    return rng.uniform(-50, 500, size=(n, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def bucket_set(stoker_mod, tmp_path_factory):
    """(url, local shards, total bytes, bucket): N JPEGs of about 100 kB with a box each in
    shards of 1 MiB."""
    server_env()
    src = tmp_path_factory.mktemp("tgsrc")
    rng = np.random.default_rng(5)
    lines = []
    for i, b in enumerate(boxes(N)):
        rel = "img%03d.jpg" % i
        with open(src / rel, "wb") as f:
            f.write(jpeg_bytes(rng, 320 + i, 300, quality=95))
        lines.append(json.dumps({"path": rel, "label": i % 3, "box": [float(v) for v in b]}))
    manifest = src / "m.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    local = str(tmp_path_factory.mktemp("tgshards") / "ds")
    res = stoker_mod.pack(str(manifest), local, shard_bytes=1 << 20, target_fields="box",
                          target_type="float32", threads=2)
    assert res["records"] == N
    with stoker_mod.Dataset(local) as ds:
        assert ds.info()["shards"] >= 8, ds.info()
    total = sum(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local)
                if n.startswith("shard-") and n.endswith(".lmdb"))
    bucket = "stk-pytg-%d" % os.getpid()
    return upload(local, bucket), local, total, bucket


def epoch(ld, stop=None):
    """(indices, images, labels, targets, state after STOP batches or None)."""
    idx, imgs, labels, tgs, state = [], [], [], [], None
    for k, (x, y, t, i) in enumerate(ld):
        idx += i.tolist()
        imgs.append(np.asarray(x).copy())
        labels.append(np.asarray(y).copy())
        tgs.append(np.asarray(t).copy())
        if stop is not None and k + 1 == stop:
            state = ld.state_dict()
            break
    return idx, np.concatenate(imgs), np.concatenate(labels), np.concatenate(tgs), state


def kwargs(cache, total):
    return dict(size=32, resize=36, seed=3, workers=2, shuffle_window=2, return_index=True,
                target="both", cache=cache, cache_bytes=total // 4)


def test_targets_stream_through_a_quarter_cache(stoker_mod, bucket_set, tmp_path):
    url, local, total, _ = bucket_set
    kw = kwargs(str(tmp_path / "c1"), total)
    with stoker_mod.Dataset(local) as ds:
        want_t = ds.targets()
        want_l = np.array([ds.read(i)[1] for i in range(len(ds))])
    np.testing.assert_array_equal(want_t, boxes(N))
    with stoker_mod.Loader(url, 4, **kw) as ld:
        assert ld.fetch_stats()["shards_fetched"] == 0, "the open fetched shards"
        ti = ld.target_info
        assert ti["kind"] == "values" and ti["size"] == 4 and ti["dtype"] == np.float32, ti
        runs = []
        for e in range(2):
            ld.set_epoch(e)
            runs.append(epoch(ld))
        st = ld.fetch_stats()
    assert st["shards_fetched"] > st["shards"], "a quarter cache refetches: %r" % st
    local_kw = dict(kw)
    del local_kw["cache"], local_kw["cache_bytes"]
    with stoker_mod.Loader(local, 4, **local_kw) as ld:
        refs = []
        for e in range(2):
            ld.set_epoch(e)
            refs.append(epoch(ld))
    for e in range(2):
        idx, imgs, labels, tgs, _ = runs[e]
        assert sorted(idx) == list(range(N)), "every record once per epoch"
        np.testing.assert_array_equal(tgs, want_t[idx])
        np.testing.assert_array_equal(labels, want_l[idx])
        r_idx, r_imgs, r_labels, r_tgs, _ = refs[e]
        assert idx == r_idx, "epoch %d: the order differs from the local Loader's" % e
        assert np.array_equal(imgs, r_imgs) and np.array_equal(labels, r_labels)
        assert tgs.tobytes() == r_tgs.tobytes(), "targets not byte-equal to the local Loader's"
    assert runs[0][0] != runs[1][0]

    # state_dict after 2 batches: a new Loader delivers exactly the rest
    with stoker_mod.Loader(url, 4, **kwargs(str(tmp_path / "c2"), total)) as ld:
        pre, _, _, _, state = epoch(ld, stop=2)
    assert pre == runs[0][0][:8]
    with stoker_mod.Loader(url, 4, **kwargs(str(tmp_path / "c3"), total)) as ld:
        ld.load_state_dict(state)
        rest, _, _, rest_t, _ = epoch(ld)
    assert rest == runs[0][0][8:]
    assert rest_t.tobytes() == runs[0][3][8:].tobytes()


def test_a_changed_target_byte_is_a_named_error(stoker_mod, bucket_set, tmp_path):
    url, local, total, bucket = bucket_set
    bad = str(tmp_path / "bad")
    shutil.copytree(local, bad)
    victim = 77
    row = boxes(N)[victim].tobytes()
    hit = None
    for name in sorted(os.listdir(bad)):
        if not (name.startswith("shard-") and name.endswith(".lmdb")):
            continue
        path = os.path.join(bad, name)
        data = bytearray(open(path, "rb").read())
        at = data.find(row)
        if at >= 0:
            assert data.find(row, at + 1) < 0
            data[at + 2] ^= 0x10
            open(path, "wb").write(bytes(data))
            hit = name
            break
    assert hit, "record %d's target not found in the shards" % victim
    with stoker_mod.Dataset(local) as ds:
        rec = ds.record(victim)
        want_t = ds.targets()
    where = "%s key %d" % (hit, rec["key"])
    badurl = upload(bad, bucket, prefix="bad/ds/")
    delivered = []
    with pytest.raises(Exception) as ex:
        with stoker_mod.Loader(badurl, 4, **kwargs(str(tmp_path / "c"), total)) as ld:
            for _x, _y, t, i in ld:
                delivered.append((i.tolist(), np.asarray(t).copy()))
    msg = str(ex.value)
    assert where in msg and "CRC32C" in msg and "target" in msg, msg
    for idx, t in delivered:
        assert victim not in idx
        np.testing.assert_array_equal(t, want_t[idx])
