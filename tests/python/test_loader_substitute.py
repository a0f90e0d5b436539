# SPDX-License-Identifier: MIT
"""A bad record (not a JPEG, truncated, CRC mismatch, empty) is replaced by another good record of
the epoch with that record's own label: no grey image, no label -1, and a plain
torch.nn.CrossEntropyLoss over the batch works (it raised IndexError on label -1 before)."""

import os

import numpy as np

from conftest import jpeg_bytes, torch_or_skip, write_dataset


def bad_dataset(tmp_path, stoker):
    rng = np.random.default_rng(9)
    items = [(jpeg_bytes(rng, 48 + k, 40), k % 3) for k in range(30)]
    good = items[4][0]
    items[5] = (b"not a JPEG" * 20, items[5][1])
    items[11] = (good[: len(good) // 3], items[11][1])
    items[17] = (b"", items[17][1])
    dst = write_dataset(str(tmp_path / "ds"), items, classes=["a", "b", "c"])
    # a payload byte of record 23 flipped on disk: a CRC mismatch
    with stoker.Dataset(dst) as ds:
        info = ds.record(23)
    shard = os.path.join(dst, "shard-00000.lmdb")
    with open(shard, "r+b") as f:
        f.seek(info["offset"] + info["length"] // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x5A]))
    return dst, [it[1] for it in items], {5, 11, 17, 23}


def test_substitute_is_a_good_sample_with_its_own_label(stoker_mod, tmp_path):
    path, labels, bad = bad_dataset(tmp_path, stoker_mod)
    with stoker_mod.Loader(path, 6, size=24, train=False, resize=28, shuffle=False, workers=2,
                           max_bad_fraction=0.5, array="numpy", return_index=True) as loader:
        out = [(x.copy(), y.copy(), i.copy()) for x, y, i in loader]
        st = loader.stats()
    images = np.concatenate([o[0] for o in out])
    got = np.concatenate([o[1] for o in out])
    index = np.concatenate([o[2] for o in out])
    assert list(index) == list(range(30))          # the epoch's order: the positions' records
    assert sorted({e["index"] for e in st["errors"] if e["epoch"] == 0}) == sorted(bad)
    for k in range(30):
        assert not (images[k] == 128).all(), "record %d is a grey image" % k
        if k not in bad:
            assert got[k] == labels[k]
            continue
        same = [j for j in range(30) if j not in bad and np.array_equal(images[j], images[k])]
        assert len(same) == 1, "bad record %d: its sample is no good record's" % k
        assert got[k] == labels[same[0]] >= 0, (k, got[k], same)


def test_cross_entropy_over_substituted_batches(stoker_mod, tmp_path):
    torch = torch_or_skip()
    path, _labels, bad = bad_dataset(tmp_path, stoker_mod)
    loss_fn = torch.nn.CrossEntropyLoss()
    seen_bad = 0
    with stoker_mod.Loader(path, 10, size=16, train=True, workers=2, dtype="float32",
                           max_bad_fraction=0.5, return_index=True) as loader:
        for images, target, idx in loader:
            seen_bad += sum(int(i) in bad for i in idx)
            logits = images.flatten(1)[:, :3]
            loss = loss_fn(logits, target)          # label -1 raised IndexError here before
            assert torch.isfinite(loss)
    assert seen_bad == len(bad)
