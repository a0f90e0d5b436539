# SPDX-License-Identifier: MIT
"""Bad records: counted and listed in stats() by default (the epoch goes on, full batches;
the dataset is 3 of 14 bad, so max_bad_fraction is raised above the default 1%); strict=True
raises DataError naming the record."""

import os
import re

import numpy as np
import pytest

from conftest import jpeg_bytes, write_dataset


@pytest.fixture(scope="module")
def bad_dataset(tmp_path_factory, stoker_mod):
    rng = np.random.default_rng(3)
    items = [(jpeg_bytes(rng, 64 + k, 60), k % 2) for k in range(14)]
    good = items[2][0]
    bad = {
        3: b"this is not a JPEG at all" * 10,     # not a JPEG
        7: good[: len(good) // 3],                # truncated inside the entropy-coded data
        11: good[:120],                           # truncated inside the headers
    }
    for k, payload in bad.items():
        items[k] = (payload, items[k][1])
    dst = os.path.join(str(tmp_path_factory.mktemp("bad")), "ds")
    write_dataset(dst, items, classes=["even", "odd"])
    return dst, sorted(bad), len(items)


def test_bad_records_are_reported_and_the_epoch_goes_on(stoker_mod, bad_dataset):
    path, bad, n = bad_dataset
    with stoker_mod.Loader(path, 4, size=32, workers=2, return_index=True, train=False,
                           resize=40, max_bad_fraction=1.0) as loader:
        seen = []
        for images, labels, idx in loader:
            assert images.shape[0] == len(idx)
            seen.extend(idx.tolist())
        assert sorted(seen) == list(range(n))
        st = loader.stats()
    # the loader already prefetches epoch 1 when epoch 0 ends: count epoch 0's records only
    e0 = [e for e in st["errors"] if e["epoch"] == 0]
    assert sorted(e["index"] for e in e0) == bad, st["errors"]
    assert st["error_count"] >= len(bad) and st["substituted"] >= len(bad)
    for e in st["errors"]:
        assert e["index"] in bad and e["epoch"] in (0, 1)
        assert e["where"].startswith("shard-00000.lmdb key %d" % e["index"]), e
        assert e["reason"] and e["status"] < 0 and e["status_name"].startswith("STK_E_")
    # str(stats) is the report, taken a moment later (the prefetch may have found more)
    m = re.search(r"bad records: (\d+)", str(st))
    assert m and int(m.group(1)) >= st["error_count"], str(st)


def test_strict_mode_raises_naming_the_record(stoker_mod, bad_dataset):
    path, bad, _n = bad_dataset
    with stoker_mod.Loader(path, 4, size=32, workers=2, strict=True, shuffle=False) as loader:
        with pytest.raises(stoker_mod.DataError) as ei:
            for _batch in loader:
                pass
    msg = str(ei.value)
    assert ei.value.status < 0
    # the first bad record in order is record 3: the message names its shard and key
    assert "shard-00000.lmdb key 3" in msg, msg
