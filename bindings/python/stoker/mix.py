# SPDX-License-Identifier: MIT
"""Batch-level MixUp / CutMix applied to stoker's batch tensor in place, with torch ops.

torchvision's v2.MixUp / v2.CutMix (>= 0.16) and timm's Mixup work on a collated batch; stoker
has the batch already, in its ring: the images are mixed there (MixUp one rolled copy, CutMix
only the box), the labels become soft N x classes float32 targets, nothing goes back to Python
objects. The draws come from a generator keyed (seed, epoch, rank, first sample of the batch),
so a run is reproducible and a resumed epoch mixes as the uninterrupted one would have;
the distributions and arithmetic are torchvision's (roll by 1) or timm's (flip, label
smoothing), so a batch equals what those classes give for the same draws.
"""
import math
import sys

import numpy as np

__all__ = ["MixUp", "CutMix", "RandomChoice", "as_mix", "generator"]

_M64 = (1 << 64) - 1


def generator(seed, epoch, rank, first_sample):
    """The NumPy generator of one batch's draws: a pure function of its position."""
    return np.random.default_rng(np.random.SeedSequence(
        [int(seed) & _M64, int(epoch), int(rank), int(first_sample), 0x6D6978]))


def _one_hot(labels, num_classes, on=1.0, off=0.0):
    import torch
    if labels.ndim == 2:                     # already per-class rows (soft or multi-hot)
        if labels.shape[1] != num_classes:
            raise ValueError("targets have %d columns, num_classes is %d"
                             % (labels.shape[1], num_classes))
        return labels if labels.dtype.is_floating_point else labels.float()
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ValueError("a label is outside 0..num_classes-1 = %d" % (num_classes - 1))
    out = torch.full((labels.shape[0], num_classes), off, dtype=torch.float32,
                     device=labels.device)
    return out.scatter_(1, labels.long().view(-1, 1), on)


def _hw_dims(layout):
    return (1, 2) if layout == "NHWC" else (2, 3)


def _box(images, layout, y1, y2, x1, x2):
    if layout == "NHWC":
        return (slice(None), slice(y1, y2), slice(x1, x2))
    return (slice(None), slice(None), slice(y1, y2), slice(x1, x2))


def check_dtype(mix, floating):
    """MixUp blends pixels: it needs float images (CutMix only copies, any dtype does)."""
    if mix.blends and not floating:
        raise ValueError("%r: MixUp blends pixels, which needs float images: give the loader a "
                         "float dtype (e.g. dtype=torch.float32), or use CutMix only" % (mix,))


class _Base:
    """One mixing transform: draw(rng, batch, h, w) -> params; apply(images, labels, params)."""

    def __init__(self, alpha=1.0, num_classes=None, label_smoothing=0.0):
        self.alpha = float(alpha)
        if not self.alpha > 0:
            raise ValueError("%s: alpha must be > 0, got %r" % (type(self).__name__, alpha))
        self.num_classes = None if num_classes is None else int(num_classes)
        self.label_smoothing = float(label_smoothing)
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError("label_smoothing must be in [0, 1)")

    def _targets(self, labels, lam, num_classes, partner):
        """lam * y + (1 - lam) * y[partner], y the (smoothed) one-hot rows; torchvision's order
        of operations: y.roll(1, 0).mul_(1 - lam).add_(y.mul(lam))."""
        off = self.label_smoothing / num_classes
        y = _one_hot(labels, num_classes, 1.0 - self.label_smoothing + off, off)
        return partner(y).mul_(1.0 - lam).add_(y.mul(lam))

    blends = False             # mixes pixel values (needs float images)

    def __repr__(self):
        return "stoker.%s(alpha=%g, num_classes=%r)" % (type(self).__name__, self.alpha,
                                                        self.num_classes)


def _roll(t):
    return t.roll(1, 0)


class MixUp(_Base):
    """torchvision.transforms.v2.MixUp on stoker's batch: lam ~ Beta(alpha, alpha),
    images = lam * x + (1 - lam) * x.roll(1, 0), targets the same mix of one-hot rows (N x
    num_classes float32; num_classes defaults to the dataset's class count). Needs float images.
    label_smoothing (not in torchvision): the one-hot rows are smoothed first, as timm does."""

    blends = True

    def draw(self, rng, h, w):
        return {"lam": float(rng.beta(self.alpha, self.alpha))}

    def apply(self, images, labels, p, num_classes, layout):
        lam = p["lam"]
        rolled = images.roll(1, 0).mul_(1.0 - lam)          # the one copy
        images.mul_(lam).add_(rolled)
        return images, self._targets(labels, lam, num_classes, _roll)


class CutMix(_Base):
    """torchvision.transforms.v2.CutMix on stoker's batch: lam ~ Beta(alpha, alpha), a box of
    sides sqrt(1 - lam) * (W, H) centred at a uniform pixel and clipped to the image is pasted
    from x.roll(1, 0); lam is then 1 - box area / image area and the targets are lam * y +
    (1 - lam) * y.roll(1, 0). Works on uint8 and float images (only the box is copied)."""

    def draw(self, rng, h, w):
        lam = float(rng.beta(self.alpha, self.alpha))
        r_x, r_y = int(rng.integers(w)), int(rng.integers(h))
        r = 0.5 * math.sqrt(1.0 - lam)
        rw, rh = int(r * w), int(r * h)
        x1, y1 = max(r_x - rw, 0), max(r_y - rh, 0)
        x2, y2 = min(r_x + rw, w), min(r_y + rh, h)
        return {"box": (x1, y1, x2, y2), "lam": float(1.0 - (x2 - x1) * (y2 - y1) / (w * h))}

    def apply(self, images, labels, p, num_classes, layout):
        x1, y1, x2, y2 = p["box"]
        idx = _box(images, layout, y1, y2, x1, x2)
        images[idx] = images[idx].roll(1, 0)              # a copy of the box only
        return images, self._targets(labels, p["lam"], num_classes, _roll)


class RandomChoice:
    """torchvision.transforms.v2.RandomChoice([MixUp(...), CutMix(...)], p): one of them per
    batch, with probabilities p (default equal)."""

    def __init__(self, transforms, p=None):
        self.transforms = [as_mix(t) for t in transforms]
        if not self.transforms:
            raise ValueError("RandomChoice needs at least one transform")
        p = [1.0] * len(self.transforms) if p is None else [float(v) for v in p]
        if len(p) != len(self.transforms) or min(p) < 0 or sum(p) <= 0:
            raise ValueError("RandomChoice: p must hold one non-negative weight per transform")
        self.p = [v / sum(p) for v in p]

    @property
    def blends(self):
        return any(t.blends for t in self.transforms)

    def draw(self, rng, h, w):
        i = int(rng.choice(len(self.transforms), p=self.p))
        return {"which": i, "inner": self.transforms[i].draw(rng, h, w)}

    def apply(self, images, labels, p, num_classes, layout):
        return self.transforms[p["which"]].apply(images, labels, p["inner"], num_classes, layout)

    @property
    def num_classes(self):
        found = {t.num_classes for t in self.transforms} - {None}
        return found.pop() if len(found) == 1 else None

    def __repr__(self):
        return "stoker.RandomChoice(%r, p=%r)" % (self.transforms, self.p)


def _flip(t):
    return t.flip(0)


def _timm_bbox_style(mod):
    """(full_cut, last_origin) of the timm.data.mixup module MOD: whether its rand_bbox spans
    cut_h // 2 + (cut_h + 1) // 2 rows (the whole cut; older timm: 2 * (cut_h // 2), one short
    when odd) and whether rand_bbox_minmax draws its origin from 0..H - cut_h inclusive (older:
    exclusive). timm changed both in its mixup / cutmix bbox fixes of August 2026 (pull
    requests 2739 and 2740), after 1.0.28. Found by running the two functions once on NumPy's
    global generator, whose state is put back."""
    if not (hasattr(mod, "rand_bbox") and hasattr(mod, "rand_bbox_minmax")):
        return False, False                   # no timm module at hand: the older arithmetic
    np_mod = getattr(mod, "np", np)
    state = np_mod.random.get_state()
    try:
        np_mod.random.seed(0)
        # cut = int(64 * 3.5 / 64) = 3 rows, the centre kept 3 rows from the border (margin 1)
        yl, yh, _, _ = mod.rand_bbox((64, 64), 1.0 - (3.5 / 64) ** 2, margin=1.0)
        np_mod.random.seed(0)
        # cut_h = 9 of 10: the origin is 0 (older) or 0 / 1
        yl2, _, _, _ = mod.rand_bbox_minmax((10, 10), (0.9, 1.0), count=64)
    finally:
        np_mod.random.set_state(state)
    return int(yh) - int(yl) == 3, bool((np.asarray(yl2) == 1).any())


class TimmMixup(_Base):
    """timm.data.Mixup (mode='batch') on stoker's batch: with probability `prob` a batch is
    mixed, by CutMix with probability switch_prob when both alphas are > 0; the partner is
    x.flip(0); CutMix's box is timm's rand_bbox (or rand_bbox_minmax) and lam is corrected to
    the box area when correct_lam; targets are timm's mixup_target (label smoothing).
    full_cut and last_origin choose the box arithmetic of timm <= 1.0.28 (False, the default)
    or of the later timm (True; _timm_bbox_style reads them from the timm at hand)."""

    def __init__(self, mixup_alpha=1.0, cutmix_alpha=0.0, cutmix_minmax=None, prob=1.0,
                 switch_prob=0.5, mode="batch", correct_lam=True, label_smoothing=0.1,
                 num_classes=1000, full_cut=False, last_origin=False):
        if mode != "batch":
            raise ValueError("timm Mixup(mode=%r): stoker mixes whole batches (mode='batch') "
                             "only" % (mode,))
        _Base.__init__(self, 1.0, num_classes, label_smoothing)
        self.mixup_alpha, self.cutmix_alpha = float(mixup_alpha), float(cutmix_alpha)
        self.cutmix_minmax = cutmix_minmax
        if cutmix_minmax is not None:
            if len(cutmix_minmax) != 2:
                raise ValueError("cutmix_minmax must be (min, max)")
            self.cutmix_alpha = 1.0                   # as timm
        if not (self.mixup_alpha > 0 or self.cutmix_alpha > 0):
            raise ValueError("timm Mixup with mixup_alpha = cutmix_alpha = 0 mixes nothing")
        self.prob, self.switch_prob = float(prob), float(switch_prob)
        self.correct_lam = bool(correct_lam)
        self.full_cut, self.last_origin = bool(full_cut), bool(last_origin)

    @property
    def blends(self):
        return self.mixup_alpha > 0 and self.prob > 0

    def draw(self, rng, h, w):
        lam, cut = 1.0, False
        if rng.random() < self.prob:
            if self.mixup_alpha > 0 and self.cutmix_alpha > 0:
                cut = rng.random() < self.switch_prob
                a = self.cutmix_alpha if cut else self.mixup_alpha
            else:
                cut = self.cutmix_alpha > 0
                a = self.cutmix_alpha if cut else self.mixup_alpha
            lam = float(rng.beta(a, a))
        p = {"lam": lam, "box": None}
        if lam == 1.0 or not cut:
            return p
        if self.cutmix_minmax is not None:
            lo, hi = self.cutmix_minmax
            ch = int(rng.integers(int(h * lo), int(h * hi)))
            cw = int(rng.integers(int(w * lo), int(w * hi)))
            last = 1 if self.last_origin else 0
            yl, xl = int(rng.integers(0, h - ch + last)), int(rng.integers(0, w - cw + last))
            yh, xh = yl + ch, xl + cw
        else:
            ratio = math.sqrt(1 - lam)
            ch, cw = int(h * ratio), int(w * ratio)
            cy, cx = int(rng.integers(0, h)), int(rng.integers(0, w))
            up = 1 if self.full_cut else 0
            yl, yh = min(max(cy - ch // 2, 0), h), min(max(cy + (ch + up) // 2, 0), h)
            xl, xh = min(max(cx - cw // 2, 0), w), min(max(cx + (cw + up) // 2, 0), w)
        if self.correct_lam or self.cutmix_minmax is not None:
            p["lam"] = 1.0 - (yh - yl) * (xh - xl) / float(h * w)
        p["box"] = (xl, yl, xh, yh)
        return p

    def apply(self, images, labels, p, num_classes, layout):
        if len(images) % 2:
            raise ValueError("timm's Mixup needs an even batch size (as timm asserts), got %d: "
                             "use an even batch_size and drop_last=True" % len(images))
        lam = p["lam"]
        if p["box"] is not None:
            x1, y1, x2, y2 = p["box"]
            idx = _box(images, layout, y1, y2, x1, x2)
            images[idx] = images[idx].flip(0)
        elif lam != 1.0:
            flipped = images.flip(0).mul_(1.0 - lam)
            images.mul_(lam).add_(flipped)
        return images, self._targets(labels, lam, num_classes, _flip)

    def __repr__(self):
        return ("stoker.mix.TimmMixup(mixup_alpha=%g, cutmix_alpha=%g, prob=%g, switch_prob=%g, "
                "label_smoothing=%g, num_classes=%r)" % (self.mixup_alpha, self.cutmix_alpha,
                                                         self.prob, self.switch_prob,
                                                         self.label_smoothing, self.num_classes))


def _foreign(obj):
    """torchvision v2 / timm objects by module and class name (neither is a dependency, and
    Debian's torchvision 0.14 has no v2): stoker's equivalent, or None."""
    cls = type(obj)
    mod, name = getattr(cls, "__module__", "") or "", cls.__name__
    if mod.startswith("torchvision.transforms.v2"):
        if name in ("MixUp", "CutMix"):
            getter = getattr(getattr(obj, "_labels_getter", None), "__name__", None)
            if getter not in (None, "_find_labels_default_heuristic"):
                raise ValueError("v2.%s(labels_getter=...): stoker passes the batch's labels "
                                 "itself; use the default labels_getter" % name)
            return (MixUp if name == "MixUp" else CutMix)(obj.alpha, obj.num_classes)
        if name == "RandomChoice":
            return RandomChoice(obj.transforms, getattr(obj, "p", None))
    if mod.startswith("timm.data") and name == "Mixup":
        if getattr(obj, "multi_label", False):
            raise ValueError("timm Mixup(multi_label=True): stoker mixes class-index labels "
                             "(one-hot rows, smoothed as timm does), not dense multi-label "
                             "targets; use multi_label=False")
        full_cut, last_origin = _timm_bbox_style(sys.modules.get(cls.__module__))
        return TimmMixup(obj.mixup_alpha, obj.cutmix_alpha, obj.cutmix_minmax,
                         getattr(obj, "mix_prob", 1.0) if getattr(obj, "mixup_enabled", True)
                         else 0.0, obj.switch_prob, obj.mode, obj.correct_lam,
                         obj.label_smoothing, obj.num_classes, full_cut, last_origin)
    return None


def as_mix(obj):
    """stoker's mixing transform for OBJ: stoker.MixUp / CutMix / RandomChoice as they are,
    torchvision v2's MixUp / CutMix / RandomChoice of them and timm's Mixup translated. Anything
    else raises ValueError naming it."""
    if isinstance(obj, (_Base, RandomChoice)):
        return obj
    found = _foreign(obj)
    if found is None:
        raise ValueError("%r is not a batch mix stoker applies: use stoker.MixUp, stoker.CutMix, "
                         "stoker.RandomChoice([...]), torchvision.transforms.v2's MixUp / CutMix "
                         "/ RandomChoice of them, or timm.data.Mixup (mode='batch')" % (obj,))
    return found


def apply(mix, images, labels, num_classes, layout, rng):
    """Mix one batch in place: (images, soft targets N x num_classes float32)."""
    hd, wd = _hw_dims(layout)
    p = mix.draw(rng, int(images.shape[hd]), int(images.shape[wd]))
    return mix.apply(images, labels, p, num_classes, layout)
