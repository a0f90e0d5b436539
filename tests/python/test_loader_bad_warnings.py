# SPDX-License-Identifier: MIT
"""Bad records are never silent: the loader's first bad record is warned about once
(stoker.BadRecordWarning naming the record — shard, key, dataset index — and the reason), and
every epoch that had bad records ends with one summary warning (count, commonest reasons);
a loader over a clean dataset warns about nothing."""

import warnings

import numpy as np

from conftest import jpeg_bytes, write_dataset


def test_first_bad_record_and_a_summary_per_epoch(stoker_mod, tmp_path):
    rng = np.random.default_rng(4)
    items = [(jpeg_bytes(rng, 40, 40), k % 2) for k in range(20)]
    items[6] = (b"plain text, not an image" * 3, 0)
    items[13] = (items[13][0][:200], 1)
    path = write_dataset(str(tmp_path / "ds"), items)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker_mod.Loader(path, 5, size=16, workers=2, max_bad_fraction=0.2) as loader:
            for epoch in range(3):
                loader.set_epoch(epoch)
                n = sum(len(y) for _x, y in loader)
                assert n == 20
    msgs = [str(w.message) for w in got if issubclass(w.category, stoker_mod.BadRecordWarning)]
    first = [m for m in msgs if "bad record shard-00000.lmdb key" in m]
    summary = [m for m in msgs if "records were bad and replaced" in m]
    assert len(first) == 1 and len(summary) == 3 and len(msgs) == 4, msgs
    assert "(dataset index " in first[0] and "replaced by record" in first[0], first[0]
    assert ("key 6 " in first[0] and "not a JPEG" in first[0]) or \
           ("key 13 " in first[0] and "STK_E_" in first[0]), first[0]
    for e, m in enumerate(summary):
        assert m.startswith("stoker: epoch %d: 2 of 20 records were bad" % e), m
        assert "1 not a JPEG" in m, m


def test_clean_dataset_warns_nothing(stoker_mod, shards):
    path, _labels = shards
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with stoker_mod.Loader(path, 8, size=16, workers=2) as loader:
            for _ in loader:
                pass
    assert not [w for w in got if issubclass(w.category, stoker_mod.BadRecordWarning)]
