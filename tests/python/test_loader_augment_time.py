# SPDX-License-Identifier: MIT
"""stats()'s augment figure (stk_stats augment_s / augment_items): the decode workers' time in the
per-sample augmentation, timed apart inside their busy time.

- no augmentation: augment_s is exactly 0.0 and augment_items 0 (no clock is read for it), and
  the report has no augment row;
- TrivialAugmentWide, or RandomErasing alone: augment_s > 0, one augment item per decoded
  sample, augment_s a part of decode busy_s, ms_per_img / augment_per_decode / the report
  derived from them;
- no double counting: with a blur about as costly as the decode, the augment time agrees with
  an independent estimate, the growth of the workers' busy time over the same loader without
  augmentation (same seed, same crops), and decode without augmentation agrees with that
  loader's decode time; busy + starved never exceed the workers' wall time.

stk-test: serial (it compares times)
"""
import re
import time

import numpy as np
import pytest

from conftest import CLASSES, jpeg_bytes, torch_or_skip, write_dataset

SIZE = 64
BS = 8


def _tv():
    torch_or_skip()
    from torchvision import transforms as T
    return T


def _run(stoker, path, epochs=1, **kw):
    args = dict(size=SIZE, workers=1, seed=3, dtype="float32", mean=(0.5, 0.5, 0.5),
                std=(0.25, 0.25, 0.25))
    args.update(kw)
    with stoker.Loader(path, BS, **args) as ld:
        n = 0
        for e in range(epochs):
            ld.set_epoch(e)
            for images, _labels in ld:
                n += images.shape[0]
        return _settled(ld), n


def _settled(ld):
    """stats() once the workers have stopped prefetching (the ring is full): two snapshots in a
    row with the same counts, so the figures and the report describe the same samples."""
    prev = None
    for _ in range(100):
        st = ld.stats()
        key = (st["decode"]["items"], st["decode"]["busy_s"], st["augment_items"], st["augment_s"])
        if key == prev and st["augment_items"] in (0, st["decode"]["items"]):
            return st
        prev = key
        time.sleep(0.05)
    raise AssertionError("the loader never settled: %r" % (prev,))


def test_no_augmentation_is_exactly_zero(stoker_mod, shards):
    st, n = _run(stoker_mod, shards[0])
    assert st["decode"]["items"] >= n and st["decode"]["busy_s"] > 0
    assert st["augment_s"] == 0.0 and st["augment_items"] == 0
    ms = st["ms_per_img"]
    assert ms["augment"] == 0.0 and st["augment_per_decode"] == 0.0
    assert ms["decode"] == pytest.approx(1e3 * st["decode"]["busy_s"] / st["decode"]["items"])
    assert "augment" not in str(st)


@pytest.mark.parametrize("which", ["trivialaugment", "erasing"])
def test_augmentation_is_timed_per_sample(stoker_mod, shards, which):
    T = _tv()
    aug = [T.TrivialAugmentWide()] if which == "trivialaugment" else [T.RandomErasing(p=1.0)]
    st, n = _run(stoker_mod, shards[0], epochs=2, augment=aug)
    dec = st["decode"]
    assert st["augment_s"] > 0
    assert st["augment_items"] == dec["items"] >= n      # and what was prefetched beyond
    assert st["augment_s"] < dec["busy_s"]
    ms, k = st["ms_per_img"], dec["items"]
    assert ms["augment"] == pytest.approx(1e3 * st["augment_s"] / k)
    assert ms["decode"] == pytest.approx(1e3 * (dec["busy_s"] - st["augment_s"]) / k)
    assert st["augment_per_decode"] == pytest.approx(ms["augment"] / ms["decode"])
    row = re.search(r"^\s+augment .*per sample ([0-9.]+) ms augment, ([0-9.]+) ms decode without "
                    r"it \(augment/decode ([0-9]+)%\)$", str(st), re.M)
    assert row, str(st)
    assert float(row.group(1)) == pytest.approx(ms["augment"], abs=2e-3)
    assert float(row.group(2)) == pytest.approx(ms["decode"], abs=2e-3)


def _busy(st):
    """decode busy ms per image (the workers' whole busy time)"""
    return 1e3 * st["decode"]["busy_s"] / st["decode"]["items"]


@pytest.fixture(scope="module")
def large(tmp_path_factory, stoker_mod):
    """24 JPEGs of 480x360: decoded at full scale (dct_scaling off), their decode costs about
    as much as the blur below, so that either one counted as the other shows."""
    rng = np.random.default_rng(4)
    items = [(jpeg_bytes(rng, 480, 360), i % len(CLASSES)) for i in range(24)]
    return write_dataset(str(tmp_path_factory.mktemp("large") / "ds"), items, classes=CLASSES)


def test_decode_and_augment_account_for_the_workers_time(stoker_mod, large):
    """With a blur about as costly as the decode: augment ms/img must match the independent
    estimate (busy with it) - (busy without it), and decode without augmentation the loader
    without it. Timing on shared cores is noisy: medians of five interleaved pairs, a factor
    of 1.6 either way for the augmentation, 2.5 for the decode (which, after the blur, runs on
    colder caches: 1.1-1.4 times the plain loader's busy time was seen). Counting the decode
    as augmentation (decode without it falls to the convert alone, about 0.15 of it) or the
    augmentation twice (busy + starved exceed the wall time) is off by more."""
    T = _tv()
    blur = [T.GaussianBlur(kernel_size=31, sigma=8.0)]
    aug, base = [], []
    for _ in range(5):
        a, n = _run(stoker_mod, large, epochs=4, augment=blur, dct_scaling=False)
        b, m = _run(stoker_mod, large, epochs=4, dct_scaling=False)
        assert n == m
        for st in (a, b):
            d = st["decode"]
            assert d["busy_s"] + d["starved_s"] <= d["threads"] * st["wall_s"] * 1.02 + 0.01, st
        aug.append(a)
        base.append(b)

    def med(vals):
        return sorted(vals)[len(vals) // 2]

    augment = med([a["ms_per_img"]["augment"] for a in aug])
    grown = med([_busy(a) - _busy(b) for a, b in zip(aug, base)])
    decode_only = med([a["ms_per_img"]["decode"] for a in aug])
    plain = med([_busy(b) for b in base])
    assert grown / 1.6 <= augment <= grown * 1.6, (augment, grown)
    assert plain / 2.5 <= decode_only <= plain * 2.5, (decode_only, plain)
