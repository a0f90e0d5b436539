# SPDX-License-Identifier: MIT
"""Loader.stats()["verdict"]: the library's bottleneck classifier (stk_loader_verdict) seen from
Python: the same bottleneck as the report's verdict line and as stk_stats_verdict on the same
stats, with the shares behind it."""

import ctypes

import numpy as np  # noqa: F401  (the loader yields NumPy arrays without torch)

LINES = {"consumer": "verdict: the loader keeps up", "read": "verdict: storage-bound",
         "decode": "verdict: decode-bound", "stage": "verdict: transfer-bound"}


def test_verdict_in_stats(stoker_mod, shards):
    from stoker import _lib
    path, labels = shards
    with stoker_mod.Loader(path, 8, size=32, workers=1) as loader:
        st = loader.stats()
        assert st.get("verdict") is None  # not started
        n = sum(len(lab) for _x, lab in loader)
        assert n == len(labels)
        st = loader.stats()
        v = st["verdict"]
        assert v is not None and v["bottleneck_name"] in LINES, v
        assert v["bottleneck"] == {"none": 0, "consumer": 1, "read": 2, "decode": 3,
                                   "stage": 4}[v["bottleneck_name"]]
        assert 0 <= v["wait_share"] and 0 <= v["decode_busy"] and v["decode_threads"] == 1, v
        assert v["cpus_online"] >= 1 and isinstance(v["cpu_starved"], bool), v
        assert LINES[v["bottleneck_name"]] in str(st), (v, str(st))
    # the pure classifier on a built stats snapshot: a consumer that never waited keeps up
    lib = _lib.get()
    s = _lib.Stats()
    s.wall_s, s.batches, s.wait_s = 10.0, 5, 0.1
    out = _lib.Verdict()
    out.size = ctypes.sizeof(_lib.Verdict)
    assert lib.stk_stats_verdict(ctypes.byref(s), 2, ctypes.byref(out)) == 0
    assert out.bottleneck == _lib.BOTTLENECK_CONSUMER and abs(out.wait_share - 0.01) < 1e-12
    assert _lib.text(lib.stk_bottleneck_name(out.bottleneck)) == "consumer"
