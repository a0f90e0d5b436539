# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""timm's RandomErasing (timm.data.random_erasing: probability, min/max area, aspect range,
mode 'const' / 'rand' / 'pixel', min_count / max_count) in stoker.Loader, on the delivered
normalised float sample.

- the boxes stoker draws (src/decode/augops.c stk__erase_boxes, printed by tests/tools/stk-augops)
  follow timm's own _erase, run on a recording image: the same distribution of box counts, box
  heights, widths, areas and positions (two-sample chi-square at about 1e-6, moments);
- each sample differs from the same loader's output without erasing only inside the boxes the
  tool prints for its (seed, epoch, index); inside: exact zeros ('const'), one value per channel
  and box ('rand'), a value per element ('pixel'); the noise has mean 0 and std 1;
- 1 and 2 workers give the same tensors; counts out of range, an unknown mode are refused.
timm is needed for the distribution test and the create_transform test only (Debian has no timm:
run them with STOKER_TEST_PYTHON=/path/to/venv/bin/python, which has timm); the others use a
stand-in object of timm's class name.
"""
import math
import os
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import loader_epochs, torch_or_skip

TOOL = Path(os.environ.get("TEST_TOOLS_DIR", "")) / "stk-augops"
SIZE = 40
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SEED = 9


def _tool_or_skip():
    if not TOOL.is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")


def stoker_boxes(p, area, aspect, count, seed, epoch, n, h, w):
    out = subprocess.run([str(TOOL), "erase", repr(p), repr(area[0]), repr(area[1]), repr(aspect[0]),
                          repr(aspect[1]), str(count[0]), str(count[1]), str(seed), str(epoch), str(n), str(h),
                          str(w)], check=True, timeout=120, capture_output=True, text=True).stdout
    boxes = []
    for line in out.splitlines():
        f = list(map(int, line.split()))
        boxes.append([tuple(f[1 + 4 * j:5 + 4 * j]) for j in range(f[0])])  # (y, x, h, w)
    assert len(boxes) == n
    return boxes


class _Recorder:
    """Stands in for the image timm's _erase writes to: records each box it fills."""

    def __init__(self):
        self.boxes = []

    def __setitem__(self, key, value):
        _, ys, xs = key
        self.boxes.append((ys.start, xs.start, ys.stop - ys.start, xs.stop - xs.start))


def timm_boxes(er, n, h, w):
    torch = torch_or_skip()
    random.seed(1234)
    out = []
    for _ in range(n):
        rec = _Recorder()
        er._erase(rec, 3, h, w, torch.float32)
        out.append(rec.boxes)
    return out


def two_sample_chi2(a, b, min_cell=10):
    """Homogeneity chi-square of two count dicts; sparse cells pooled into one. (x2, df)"""
    keys = sorted(set(a) | set(b))
    na, nb = sum(a.values()), sum(b.values())
    cells, pool = [], [0, 0]
    for k in keys:
        ca, cb = a.get(k, 0), b.get(k, 0)
        if ca + cb >= min_cell:
            cells.append((ca, cb))
        else:
            pool[0] += ca
            pool[1] += cb
    if sum(pool):
        cells.append(tuple(pool))
    ka, kb = math.sqrt(nb / na), math.sqrt(na / nb)
    x2 = sum((ca * ka - cb * kb) ** 2 / (ca + cb) for ca, cb in cells if ca + cb)
    return x2, len(cells) - 1


def chi2_crit(df, z=4.75):
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def _hist(values):
    d = {}
    for v in values:
        d[v] = d.get(v, 0) + 1
    return d


@pytest.mark.parametrize("kw", [dict(probability=0.7, max_count=3),
                                dict(probability=0.5, min_area=0.1, max_area=0.6, min_aspect=0.5, max_aspect=3.0),
                                dict(probability=1.0, min_count=2, max_count=4, min_aspect=0.2)])
def test_boxes_follow_timm(kw):
    _tool_or_skip()
    torch_or_skip()
    re_mod = pytest.importorskip("timm.data.random_erasing")
    er = re_mod.RandomErasing(device="cpu", **kw)
    h, w, n = 48, 40, 30000
    lo, hi = er.log_aspect_ratio
    ours = stoker_boxes(er.probability, (er.min_area, er.max_area), (math.exp(lo), math.exp(hi)),
                        (er.min_count, er.max_count), 5, 1, n, h, w)
    ref = timm_boxes(er, n, h, w)
    features = {
        "boxes per sample": lambda bs: [len(b) for b in bs],
        "box height": lambda bs: [b[2] for s in bs for b in s],
        "box width": lambda bs: [b[3] for s in bs for b in s],
        "box area / 8": lambda bs: [b[2] * b[3] // 8 for s in bs for b in s],
        "top": lambda bs: [b[0] for s in bs for b in s],
        "left": lambda bs: [b[1] for s in bs for b in s],
        "centre row / 4": lambda bs: [(2 * b[0] + b[2]) // 8 for s in bs for b in s],
    }
    for name, f in features.items():
        a, b = f(ours), f(ref)
        x2, df = two_sample_chi2(_hist(a), _hist(b))
        assert x2 < chi2_crit(df), f"{kw}: {name}: chi-square {x2:.1f} over {chi2_crit(df):.1f} (df {df})"
        if len(a) > 100:
            ma, mb, sa = np.mean(a), np.mean(b), np.std(b)
            assert abs(ma - mb) < 5 * sa * math.sqrt(1 / len(a) + 1 / len(b)), (name, ma, mb)
    for s in ours:
        for (y, x, bh, bw) in s:
            assert 0 < bh < h and 0 < bw < w and 0 <= y <= h - bh and 0 <= x <= w - bw


def _standin(mode="const", probability=0.8, min_count=1, max_count=3, min_area=0.02, max_area=1 / 3,
             min_aspect=0.3):
    cls = type("RandomErasing", (), {})
    cls.__module__ = "timm.data.random_erasing"
    obj = cls()
    obj.__dict__.update(probability=probability, min_area=min_area, max_area=max_area,
                        log_aspect_ratio=(math.log(min_aspect), math.log(1 / min_aspect)), min_count=min_count,
                        max_count=max_count, num_splits=0, mode=mode, device="cuda")
    return obj


def _epochs(stoker, path, n, **kw):
    args = dict(size=SIZE, workers=2, dtype="float32", mean=MEAN, std=STD, seed=SEED)
    args.update(kw)
    return loader_epochs(stoker, path, n, **args)


@pytest.mark.parametrize("mode", ["const", "rand", "pixel"])
def test_loader_erases_timm_boxes(stoker_mod, shards, mode):
    _tool_or_skip()
    torch_or_skip()
    path, labels = shards
    er = _standin(mode)
    got, gi, ge = _epochs(stoker_mod, path, 4, augment=[er])
    ref, ri, _ = _epochs(stoker_mod, path, 4)
    assert np.array_equal(gi, ri)
    n = len(labels)
    lo, hi = er.log_aspect_ratio
    boxes = {e: stoker_boxes(er.probability, (er.min_area, er.max_area), (math.exp(lo), math.exp(hi)),
                             (er.min_count, er.max_count), SEED, e, n, SIZE, SIZE) for e in range(4)}
    noise, erased, multi = [], 0, 0
    for k in range(len(gi)):
        bs = boxes[int(ge[k])][int(gi[k])]
        inside = np.zeros((SIZE, SIZE), bool)
        for (y, x, bh, bw) in bs:
            inside[y:y + bh, x:x + bw] = True
        assert np.array_equal(got[k][:, ~inside], ref[k][:, ~inside]), f"sample {gi[k]}: changed outside its boxes"
        erased += bool(bs)
        multi += len(bs) > 1
        for j, (y, x, bh, bw) in enumerate(bs):
            own = np.zeros((SIZE, SIZE), bool)
            own[y:y + bh, x:x + bw] = True
            for (y2, x2, bh2, bw2) in bs[j + 1:]:           # later boxes overwrite earlier ones
                own[y2:y2 + bh2, x2:x2 + bw2] = False
            if not own.any():
                continue
            vals = got[k][:, own]                           # C x pixels of this box
            if mode == "const":
                assert np.all(vals == 0), f"sample {gi[k]} box {j}: not zeros"
            elif mode == "rand":
                assert np.all(vals == vals[:, :1]), f"sample {gi[k]} box {j}: not one value per channel"
                noise.extend(vals[:, 0].tolist())
            else:
                noise.extend(vals.ravel().tolist())
    assert erased > 0.6 * len(gi) and multi > 0.2 * len(gi), (erased, multi, len(gi))
    if mode != "const":
        z = np.array(noise, np.float64)
        m, s = z.mean(), z.std()
        assert abs(m) < 5 / math.sqrt(len(z)), (m, len(z))
        assert abs(s - 1) < 5 * math.sqrt(0.5 / len(z)), (s, len(z))
        if mode == "pixel":
            kurt = float(np.mean(((z - m) / s) ** 4))
            assert abs(kurt - 3) < 0.2, kurt


def test_timm_erasing_same_for_any_workers(stoker_mod, shards):
    torch_or_skip()
    a = _epochs(stoker_mod, shards[0], 2, workers=1, augment=[_standin("pixel")])
    b = _epochs(stoker_mod, shards[0], 2, workers=2, augment=[_standin("pixel")])
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    c = _epochs(stoker_mod, shards[0], 2, workers=2, augment=[_standin("rand")])
    d = _epochs(stoker_mod, shards[0], 2, workers=1, augment=[_standin("rand")])
    assert all(np.array_equal(x, y) for x, y in zip(c, d))


def test_timm_erasing_specs_and_refusals(stoker_mod):
    from stoker import augment
    spec = augment.spec_for(_standin("rand", min_count=2, max_count=5), 6)
    assert spec["op"] == "random_erasing" and spec["value"] == "random_channel" and spec["count"] == (2, 5)
    assert spec["p"] == 0.8 and spec["scale"] == (0.02, 1 / 3)
    assert abs(spec["ratio"][0] - 0.3) < 1e-12 and abs(spec["ratio"][1] - 1 / 0.3) < 1e-12
    assert augment.spec_for(_standin("pixel"), 6)["value"] == "random"
    assert augment.spec_for(_standin(""), 6)["value"] == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="transform 6 .*mode='noise'"):
        augment.spec_for(_standin("noise"), 6)
    with pytest.raises(ValueError, match="transform 6 .*1 <= min <= max <= 16"):
        augment.spec_for(_standin(max_count=17), 6)
    with pytest.raises(ValueError, match="transform 6 .*1 <= min <= max <= 16"):
        augment.spec_for(_standin(min_count=3, max_count=2), 6)


def test_timm_create_transform_with_erasing_accepted(stoker_mod, tmp_path):
    """timm's training recipe with re_prob / re_mode / re_count parses to one erasing spec."""
    torch_or_skip()
    timm_data = pytest.importorskip("timm.data")
    from stoker.dataloader import parse_transform
    tf = timm_data.create_transform(32, is_training=True, color_jitter=None, re_prob=0.25, re_mode="pixel",
                                    re_count=3, interpolation="bilinear")
    kw = parse_transform(tf)
    er = [s for s in kw["augment"] if s["op"] == "random_erasing"]
    assert er == [{"op": "random_erasing", "p": 0.25, "scale": (0.02, 1 / 3),
                   "ratio": er[0]["ratio"], "value": "random", "count": (1, 3)}]
    assert abs(er[0]["ratio"][0] - 0.3) < 1e-12


def test_count_range_checked_at_start(stoker_mod, shards):
    """The library itself refuses min_count > max_count (raw parameters, no spec check)."""
    from stoker import _lib
    opts = {_lib.P_ERASE_PROB: 0.5, _lib.P_ERASE_MIN_COUNT: 3, _lib.P_ERASE_MAX_COUNT: 2}
    with pytest.raises(Exception, match="STK_P_ERASE_MIN_COUNT = 3 must not exceed STK_P_ERASE_MAX_COUNT = 2"):
        with stoker_mod.Loader(shards[0], 8, size=SIZE, dtype="float32", options=opts) as ld:
            next(iter(ld))
