# SPDX-License-Identifier: MIT
"""Per-sample augmentation specs: what a torchvision (or timm) augmentation object asks for, as a
plain dict the Loader turns into the library's STK_P_AUG_* parameters.

``spec_for(step, position)`` looks at one step of a transform pipeline and returns

  * a spec dict for what stoker reproduces exactly (equal byte for byte to torchvision's tensor
    implementation on a uint8 image; tests/python/test_augops_equal_*.py):
      {"op": "trivialaugment", "num_magnitude_bins": 31, "interpolation": "nearest", "fill": None}
      {"op": "randaugment", "num_ops": 2, "magnitude": 9, "num_magnitude_bins": 31, ...}
      {"op": "autoaugment", "policy": "imagenet" | "cifar10" | "svhn", ...}
    ``interpolation`` is "nearest", "bilinear" or "bicubic" (torch's grid_sample bicubic, which
    torchvision's own tensor F.affine / F.rotate refuse: what they would compute without that
    check, rounded and clamped to 0..255); ``fill`` None (torchvision's fill=None: zeros) or an
    (r, g, b) tuple of integers 0..255;
  * for timm's RandAugment (equal byte for byte to timm's PIL ops, Pillow 9.4 to 13;
    tests/python/test_timm_randaugment.py):
      {"op": "timm_randaugment", "num_layers": 2, "magnitude": 9.0, "magnitude_std": 0.5,
       "magnitude_max": 10.0, "prob": 0.5, "increasing": True, "weighted": False,
       "interpolation": "bilinear", "fill": (124, 116, 104), "translate_pct": 0.45}
    ``interpolation`` "bilinear", "bicubic", "nearest" or "random" (timm's default: BILINEAR or
    BICUBIC per geometric op); ``magnitude_std`` inf: uniform in [0, magnitude];
  * for timm's AutoAugment (auto_augment_transform: 'original', 'originalr', 'v0', 'v0r', any
    '-mstd'; the same ops and hparams, tests/python/test_timm_autoaugment.py):
      {"op": "timm_autoaugment", "policy": [[("PosterizeOriginal", 0.4, 8), ("Rotate", 0.6, 9)],
       ...], "magnitude_std": 0.5, "magnitude_max": 10.0, "interpolation": "random",
       "fill": (124, 116, 104), "translate_pct": 0.45}
    one sub-policy uniformly per sample, each (op, prob, magnitude) as timm's AugmentOp;
  * None when STEP is not an augmentation this module knows (the caller decides what it is);
      {"op": "augmix", "severity": 3, "mixture_width": 3, "chain_depth": -1, "alpha": 1.0,
       "all_ops": True, ...}
  * or raises ``Unsupported`` (a ValueError) when STEP is a known augmentation with settings
    stoker does not reproduce — the message names the step, its position and what to use instead.

Recognised without importing torchvision or timm, by module and class name: torchvision's
``transforms.TrivialAugmentWide / RandAugment / AutoAugment / AugMix`` (v1,
``torchvision.transforms.autoaugment``) and the same classes of ``torchvision.transforms.v2``;
timm's ``timm.data.auto_augment.RandAugment`` with timm's rand / rand-inc transform lists or
'tweights' (rand_augment_transform's 'm', 'n', 'p', 'mstd', 'mmax', 'inc', 'tweights'
sections); timm's ``AutoAugment`` whose policy is made of those ops and 'PosterizeOriginal' (its
'original', 'originalr', 'v0', 'v0r' policies); timm's ``AugMixAugment``, the '3a' transform sets
and policies with other ops (Desaturate, GaussianBlurRand, TranslateX ...) are refused by name.

Also recognised: ``ColorJitter``, ``RandomGrayscale``, ``RandomVerticalFlip``, ``GaussianBlur``,
``RandomAffine``, ``RandomRotation`` (specs "color_jitter", "grayscale", "vflip", "gaussian_blur",
"affine", "rotation"; the last two with expand=False and center=None only; v2's GaussianBlur
gives "api": "v2", its softmax kernel, which differs from v1's exp / sum) and ``RandomErasing`` of torchvision
and of timm ("random_erasing", which must come last: it works on the normalised image; timm's adds
"count": (min_count, max_count), and its modes give value (0, 0, 0), "random" ('pixel') or
"random_channel" ('rand')).

Everything runs in the decode worker after RandomResizedCrop / Resize + CenterCrop and the flip,
on the uint8 image, in the order of the list given to ``Loader(augment=...)``, drawn from (seed,
epoch, sample index): the output does not depend on the worker count and resumes exactly. The
random choices follow torchvision's distributions, not torch's random stream.
``commutes_with_flip(spec)`` says which specs may stand before the flip in the user's pipeline.
"""

import math
import warnings

POLICIES = ("trivialaugment", "randaugment", "autoaugment", "augmix", "timm_randaugment", "timm_autoaugment")
STEPS = ("vflip", "grayscale", "color_jitter", "gaussian_blur", "affine", "rotation")
ERASING = "random_erasing"
AUTO_POLICIES = ("imagenet", "cifar10", "svhn")  # AutoAugmentPolicy values
_ERASE_MAX_COUNT = 16  # STK_ERASE_MAX_COUNT
_INTERPS = ("nearest", "bilinear", "bicubic")  # STK_AUG_INTERP_* by index
_MAX_OPS = 65535  # STK_P_AUG_NUM_OPS's bound: RandAugment's num_ops, timm's num_layers
_MAX_BINS = 1 << 24  # STK_P_AUG_BINS's bound (float32 counts the bins exactly up to it)
_FLT_MAX = 3.4028234663852886e38  # STK_P_ERASE_SCALE_* / _RATIO_*: finite float32

_TV_CLASSES = {"TrivialAugmentWide": "trivialaugment", "RandAugment": "randaugment",
               "AutoAugment": "autoaugment", "AugMix": "augmix"}
_TIMM_CLASSES = ("AugMixAugment",)
# timm.data.auto_augment's _RAND_TRANSFORMS and _RAND_INCREASING_TRANSFORMS, in its order
_TIMM_RAND_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd",
                  "Color", "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel",
                  "TranslateYRel")
_TIMM_RAND_INC_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing",
                      "SolarizeIncreasing", "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing",
                      "BrightnessIncreasing", "SharpnessIncreasing", "ShearX", "ShearY", "TranslateXRel",
                      "TranslateYRel")
# _RAND_WEIGHTED_0 ('tweights'): its ops in order and their weights
_TIMM_WEIGHTED = (("Rotate", 3), ("ShearX", 2), ("ShearY", 2), ("TranslateXRel", 1), ("TranslateYRel", 1),
                  ("ColorIncreasing", .25), ("SharpnessIncreasing", 0.25), ("AutoContrast", 0.25),
                  ("SolarizeIncreasing", .05), ("SolarizeAdd", .05), ("ContrastIncreasing", .05),
                  ("BrightnessIncreasing", .05), ("Equalize", .05), ("PosterizeIncreasing", 0.05), ("Invert", 0.05))
_TIMM_KEYS = {"op", "num_layers", "magnitude", "magnitude_std", "magnitude_max", "prob", "increasing",
              "weighted", "interpolation", "fill", "translate_pct"}
_TIMM_AUTO_KEYS = {"op", "policy", "magnitude_std", "magnitude_max", "interpolation", "fill", "translate_pct"}
# the ops stoker has (STK_P_TIMM_AUTO_POLICY's numbers: the index); _lib.TIMM_OPS, without importing it
_TIMM_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "PosterizeIncreasing", "Solarize",
             "SolarizeIncreasing", "SolarizeAdd", "Color", "ColorIncreasing", "Contrast", "ContrastIncreasing",
             "Brightness", "BrightnessIncreasing", "Sharpness", "SharpnessIncreasing", "ShearX", "ShearY",
             "TranslateXRel", "TranslateYRel", "PosterizeOriginal")
_TV_STEPS = {"RandomVerticalFlip": "vflip", "RandomGrayscale": "grayscale", "ColorJitter": "color_jitter",
             "GaussianBlur": "gaussian_blur"}
_TV_GEOMETRY = {"RandomAffine": "affine", "RandomRotation": "rotation"}
_JITTER = (("brightness", 1.0), ("contrast", 1.0), ("saturation", 1.0), ("hue", 0.0))


class Unsupported(ValueError):
    """A known augmentation with settings stoker does not reproduce."""


def _where(step, position):
    return "transform %s (%s)" % (position, type(step).__name__)


def _is_torchvision(mod):
    return mod == "torchvision.transforms" or mod.startswith("torchvision.transforms.")


def _interp_name(step, position, value):
    """InterpolationMode (v1 / v2), its string value or a PIL resample constant -> name."""
    v = getattr(value, "value", value)
    if isinstance(v, str):
        name = v.lower()
    elif isinstance(v, int):  # PIL: NEAREST 0, BILINEAR 2, BICUBIC 3 (v2 accepts them)
        name = {0: "nearest", 2: "bilinear", 3: "bicubic", 1: "lanczos", 4: "box", 5: "hamming"}.get(v, str(v))
    else:
        name = str(v)
    if name not in ("nearest", "bilinear", "bicubic"):
        raise Unsupported("%s: interpolation=%s is not reproduced (stoker's geometric ops are torch's "
                          "grid_sample: NEAREST, BILINEAR, BICUBIC)" % (_where(step, position), name.upper()))
    return name


def _fill(step, position, fill, interp):
    """fill=None, a number or a sequence of 1 or 3 -> None or an (r, g, b) tuple of ints."""
    if isinstance(fill, dict):  # v2: {type: value}; one value for every type is the same thing
        vals = list(fill.values())
        if not vals or any(v != vals[0] for v in vals[1:]):
            raise Unsupported("%s: a fill that differs per input type (%r) is not reproduced; "
                              "give one fill" % (_where(step, position), fill))
        fill = vals[0]
    if fill is None:
        return None
    if isinstance(fill, (int, float)):
        fill = [fill]
    vals = [float(v) for v in fill]
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3 or not all(math.isfinite(v) and 0.0 <= v <= 255.0 for v in vals):
        raise Unsupported("%s: fill=%r must be one or three values in 0..255"
                          % (_where(step, position), fill))
    out = []
    for v in vals:
        if v != int(v):
            if interp != "nearest":
                raise Unsupported("%s: a fractional fill (%r) with %s is not reproduced; "
                                  "give integers" % (_where(step, position), fill, interp.upper()))
            v = float(round(v))  # NEAREST rounds the fill half to even, as torch.round
        out.append(int(v))
    return tuple(out)


def _common(step, position):
    interp = _interp_name(step, position, getattr(step, "interpolation", "nearest"))
    return {"interpolation": interp, "fill": _fill(step, position, getattr(step, "fill", None), interp)}


def _bins(step, position, bins):
    """num_magnitude_bins as torchvision takes it; 1 only where torchvision itself fails."""
    if bins == 1:
        raise Unsupported("%s: num_magnitude_bins=1: torchvision's Posterize table then divides 0 by 0 "
                          "(8 - int(nan)) and F.posterize raises ValueError whenever the policy draws "
                          "Posterize; use 2 or more bins" % _where(step, position))
    if bins < 1:
        raise Unsupported("%s: num_magnitude_bins=%d: torchvision's magnitude tables are empty and it raises "
                          "when it draws an op" % (_where(step, position), bins))
    return bins


def _torchvision_spec(step, position, kind):
    spec = {"op": kind}
    if kind == "augmix":
        spec.update(severity=int(step.severity), mixture_width=int(step.mixture_width),
                    chain_depth=int(step.chain_depth), alpha=float(step.alpha), all_ops=bool(step.all_ops))
    elif kind == "trivialaugment":
        spec["num_magnitude_bins"] = _bins(step, position, int(step.num_magnitude_bins))
    elif kind == "randaugment":
        bins = _bins(step, position, int(step.num_magnitude_bins)) if int(step.num_ops) > 0 else 31
        mag = int(step.magnitude)
        if int(step.num_ops) > 0 and not -bins <= mag < bins:
            raise Unsupported("%s: magnitude=%d indexes past num_magnitude_bins=%d: torchvision raises "
                              "IndexError as soon as it draws an op with magnitudes"
                              % (_where(step, position), mag, bins))
        # range(num_ops) of a negative count is no op; magnitudes[-k] is the k-th bin from the end
        spec.update(num_ops=max(0, int(step.num_ops)), magnitude=mag % bins if int(step.num_ops) > 0 else 0,
                    num_magnitude_bins=bins)
    else:
        policy = getattr(step, "policy", "imagenet")
        name = str(getattr(policy, "value", policy)).lower()
        if name not in AUTO_POLICIES:
            raise Unsupported("%s: policy %s is not implemented; stoker has AutoAugmentPolicy.%s"
                              % (_where(step, position), name.upper(),
                                 ", ".join(p.upper() for p in AUTO_POLICIES)))
        spec["policy"] = name
    spec.update(_common(step, position))
    check(spec, _where(step, position))
    return spec


def _range(step, position, name, value, center):
    """ColorJitter's stored range (v1 / v2: a (min, max) pair or None) -> (min, max)."""
    if value is None:
        return (center, center)
    if isinstance(value, (int, float)):  # never stored like this by torchvision; accept it
        value = (center - value, center + value) if name == "hue" else (max(0.0, center - value), center + value)
    lo, hi = float(value[0]), float(value[1])
    if name == "hue" and not -0.5 <= lo <= hi <= 0.5 or name != "hue" and not 0.0 <= lo <= hi:
        raise Unsupported("%s: %s range %r is out of torchvision's bounds" % (_where(step, position), name, value))
    return (lo, hi)


def _step_spec(step, position, kind):
    if kind in ("vflip", "grayscale"):
        p = float(getattr(step, "p", 0.5 if kind == "vflip" else 0.1))
        spec = {"op": kind, "p": p}
    elif kind == "gaussian_blur":
        ks, sg = step.kernel_size, step.sigma
        ks = (int(ks), int(ks)) if isinstance(ks, (int, float)) else (int(ks[0]), int(ks[1]))
        sg = (float(sg), float(sg)) if isinstance(sg, (int, float)) else (float(sg[0]), float(sg[1]))
        spec = {"op": kind, "kernel_size": ks, "sigma": sg}
        if (getattr(type(step), "__module__", "") or "").startswith("torchvision.transforms.v2"):
            spec["api"] = "v2"        # v2's kernel: a softmax, not exp / sum (since 0.5)
    else:
        spec = {"op": kind}
        for name, center in _JITTER:
            spec[name] = _range(step, position, name, getattr(step, name, None), center)
    return check(spec, _where(step, position))


_TIMM_ERASE_MODES = {"const": (0.0, 0.0, 0.0), "": (0.0, 0.0, 0.0), "pixel": "random", "rand": "random_channel"}


def _timm_erasing_spec(step, position):
    """timm.data.random_erasing.RandomErasing -> a random_erasing spec with its count range.
    Its num_splits only skips part of a batch, which a per-sample transform never sees; its
    device is where it draws the noise (stoker erases the host sample)."""
    mode = str(getattr(step, "mode", "const")).lower()
    if mode not in _TIMM_ERASE_MODES:
        raise Unsupported("%s: mode=%r (timm has 'const', 'rand' and 'pixel')" % (_where(step, position), mode))
    lo, hi = sorted(step.log_aspect_ratio)  # random.uniform(a, b) takes its bounds in either order
    area = sorted((float(step.min_area), float(step.max_area)))
    if area[0] < 0:
        raise Unsupported("%s: min_area=%r: timm's math.sqrt of a negative area raises ValueError"
                          % (_where(step, position), step.min_area))
    spec = {"op": ERASING, "p": float(step.probability), "scale": tuple(area),
            "ratio": (math.exp(lo), math.exp(hi)), "value": _TIMM_ERASE_MODES[mode],
            "count": (int(step.min_count), int(step.max_count))}
    return check(spec, _where(step, position))


def _pair(step, position, name, value, lo=None):
    """(a, b) of floats from a sequence of two, checked ordered (and >= LO)."""
    a, b = float(value[0]), float(value[1])
    if not (math.isfinite(a) and math.isfinite(b) and a <= b and (lo is None or a >= lo)):
        raise Unsupported("%s: %s %r is not an ordered range" % (_where(step, position), name, value))
    return (a, b)


def _geometry_spec(step, position, kind):
    """RandomAffine / RandomRotation (v1, v2) -> an "affine" / "rotation" spec: torchvision's
    get_params draws and F.affine / F.rotate's tensor path; expand=False and center=None only."""
    where = _where(step, position)
    if getattr(step, "center", None) is not None:
        raise Unsupported("%s: center=%r is not reproduced; use center=None (the image centre)"
                          % (where, step.center))
    if kind == "rotation" and getattr(step, "expand", False):
        raise Unsupported("%s: expand=True (a larger output holding the whole rotated image) is not "
                          "reproduced: every sample keeps the crop's size; use expand=False" % where)
    spec = {"op": kind, "degrees": _pair(step, position, "degrees", step.degrees)}
    if kind == "affine":
        tr, sc, sh = step.translate, step.scale, step.shear
        spec["translate"] = None if tr is None else (float(tr[0]), float(tr[1]))
        spec["scale"] = None if sc is None else _pair(step, position, "scale", sc)
        if sh is None:
            spec["shear"] = None
        else:
            sh = [float(v) for v in sh]
            spec["shear"] = tuple(sh) if len(sh) == 4 else (sh[0], sh[1], 0.0, 0.0)
    spec.update(_common(step, position))
    return check(spec, where)
def _timm_resample(step, position, value):
    """AugmentOp's resample kwarg (a PIL filter or timm's (BILINEAR, BICUBIC) pair) -> name."""
    names = {0: "nearest", 2: "bilinear", 3: "bicubic"}
    if isinstance(value, (list, tuple)):
        got = sorted(int(v) for v in value)
        if got == [2, 3]:
            return "random"
    elif int(value) in names:
        return names[int(value)]
    raise Unsupported("%s: resample=%r is not reproduced (stoker has Pillow's BILINEAR, BICUBIC, NEAREST "
                      "and timm's random choice); use interpolation='bilinear', 'bicubic', 'nearest' or 'random'"
                      % (_where(step, position), value))


def _timm_shared(step, position, ops, kind, maker):
    """The spec entries timm's AugmentOps OPS (of timm's KIND, made by MAKER) share: magnitude
    noise and bound, filter, fill, translate_pct; and one(get, what), the one value of another
    attribute. Unsupported where the ops differ."""
    where = _where(step, position)

    def one(get, what):
        vals = [get(op) for op in ops]
        if any(v != vals[0] for v in vals[1:]):
            raise Unsupported("%s: the ops of timm's %s differ in %s (%r); stoker takes one value for all, as "
                              "%s makes them" % (where, kind, what, sorted(set(map(repr, vals))), maker))
        return vals[0]

    mstd = float(one(lambda op: getattr(op, "magnitude_std", 0) or 0, "magnitude_std"))
    mmax = one(lambda op: getattr(op, "magnitude_max", None), "magnitude_max")
    fill = one(lambda op: op.kwargs.get("fillcolor", (128, 128, 128)), "fillcolor")
    fill = (fill,) * 3 if isinstance(fill, (int, float)) else tuple(fill)
    if len(fill) != 3 or not all(float(v) == int(v) and 0 <= int(v) <= 255 for v in fill):
        raise Unsupported("%s: img_mean / fillcolor %r must be three integers 0..255" % (where, fill))
    shared = {"magnitude_std": mstd if mstd > 0 else 0.0,
              "magnitude_max": float(mmax) if mmax else 10.0,  # timm: magnitude_max or _LEVEL_DENOM
              "interpolation": _timm_resample(step, position, one(lambda op: op.kwargs.get("resample"), "resample")),
              "fill": tuple(int(v) for v in fill),
              "translate_pct": float(one(lambda op: op.hparams.get("translate_pct", 0.45), "translate_pct"))}
    return shared, one


def _timm_randaugment_spec(step, position):
    """timm's RandAugment object (rand_augment_transform) -> a timm_randaugment spec."""
    where = _where(step, position)
    ops = list(getattr(step, "ops", []) or [])
    names = tuple(getattr(op, "name", None) for op in ops)
    weights = getattr(step, "choice_weights", None)
    weighted = weights is not None
    if weighted:
        total = sum(w for _, w in _TIMM_WEIGHTED)
        if names != tuple(n for n, _ in _TIMM_WEIGHTED) or len(weights) != len(names) or any(
                abs(float(p) - w / total) > 1e-9 for p, (_, w) in zip(weights, _TIMM_WEIGHTED)):
            raise Unsupported("%s: timm's RandAugment with choice weights other than 'tweights' "
                              "(_RAND_WEIGHTED_0) is not reproduced" % where)
    elif names not in (_TIMM_RAND_OPS, _TIMM_RAND_INC_OPS):
        raise Unsupported("%s: timm's RandAugment with the transform list %r is not reproduced; stoker has "
                          "timm's default lists ('rand-...' with inc0 or inc1) and 'tweights'" % (where, names))

    shared, one = _timm_shared(step, position, ops, "RandAugment", "rand_augment_transform")
    spec = {"op": "timm_randaugment", "num_layers": int(step.num_layers),
            "magnitude": float(one(lambda op: op.magnitude, "magnitude")),
            "prob": min(1.0, max(0.0, float(one(lambda op: op.prob, "prob")))),
            "increasing": names == _TIMM_RAND_INC_OPS, "weighted": weighted, **shared}
    try:
        return check(spec, where)
    except ValueError as e:
        raise Unsupported(str(e))


def _timm_autoaugment_spec(step, position):
    """timm's AutoAugment object (auto_augment_transform) -> a timm_autoaugment spec: its policy
    as read from the object (any policy of stoker's ops), the hparams its ops share."""
    where = _where(step, position)
    subs = list(getattr(step, "policy", None) or [])
    if not subs:
        raise Unsupported("%s: timm's AutoAugment without a policy" % where)
    ops, policy = [], []
    for s, sub in enumerate(subs):
        row = []
        for j, op in enumerate(sub):
            name = getattr(op, "name", None)
            if name not in _TIMM_OPS:
                raise Unsupported(
                    "%s: timm's AutoAugment sub-policy %d op %d is %r, which stoker does not reproduce "
                    "(it has %s); use auto_augment='original', 'originalr', 'v0' or 'v0r' (with any "
                    "'-mstd'), or timm's RandAugment ('rand-m9-mstd0.5-inc1')"
                    % (where, s, j, name, ", ".join(_TIMM_OPS)))
            row.append((name, min(1.0, max(0.0, float(op.prob))), float(op.magnitude)))
            ops.append(op)
        policy.append(row)

    shared, _ = _timm_shared(step, position, ops, "AutoAugment", "auto_augment_transform")
    spec = {"op": "timm_autoaugment", "policy": policy, **shared}
    try:
        return check(spec, where)
    except ValueError as e:
        raise Unsupported(str(e))


def spec_for(step, position):
    """The spec dict for STEP (at POSITION in its pipeline, for messages), None if STEP is not an
    augmentation this module knows, or Unsupported if it is one stoker does not reproduce."""
    cls = type(step)
    mod, name = getattr(cls, "__module__", "") or "", cls.__name__
    if _is_torchvision(mod) and name in _TV_CLASSES:
        return _torchvision_spec(step, position, _TV_CLASSES[name])
    if _is_torchvision(mod) and name in _TV_STEPS:
        return _step_spec(step, position, _TV_STEPS[name])
    if _is_torchvision(mod) and name in _TV_GEOMETRY:
        return _geometry_spec(step, position, _TV_GEOMETRY[name])
    if _is_torchvision(mod) and name == "RandomErasing":
        value = step.value
        if isinstance(value, str):
            if value != "random":
                raise Unsupported("%s: value=%r (torchvision takes a number, a sequence or 'random')"
                                  % (_where(step, position), value))
        else:
            value = [value] if isinstance(value, (int, float)) else list(value)
            value = tuple(float(v) for v in (value * 3 if len(value) == 1 else value))
        scale, ratio = tuple(map(float, step.scale)), tuple(map(float, step.ratio))
        for name, (a, b) in (("scale", scale), ("ratio", ratio)):
            if a > b:  # torchvision only warns at construction
                raise Unsupported("%s: %s=%r is not a (min, max) range: torchvision raises RuntimeError "
                                  "(uniform_ expects from <= to) on every image it erases"
                                  % (_where(step, position), name, (a, b)))
        if ratio[0] <= 0:
            raise Unsupported("%s: ratio=%r: torchvision draws in log(ratio), and log(%r) = -inf makes its "
                              "uniform_ raise RuntimeError on every image it erases"
                              % (_where(step, position), ratio, ratio[0]))
        return check({"op": ERASING, "p": float(step.p), "scale": scale,
                      "ratio": ratio, "value": value}, _where(step, position))
    if mod.startswith("timm.") and name == "RandomErasing":
        return _timm_erasing_spec(step, position)
    if mod.startswith("timm.") and name == "RandAugment":
        return _timm_randaugment_spec(step, position)
    if mod.startswith("timm.") and name == "AutoAugment":
        return _timm_autoaugment_spec(step, position)
    if mod.startswith("timm.") and name in _TIMM_CLASSES:
        raise Unsupported(
            "%s: timm's %s (timm.data.auto_augment) is not implemented in stoker; use timm's "
            "RandAugment (auto_augment='rand-m9-mstd0.5-inc1') or AutoAugment ('original-mstd0.5'), "
            "or torchvision's TrivialAugmentWide() / AutoAugment()" % (_where(step, position), name))
    return None


def commutes_with_flip(spec):
    """Whether SPEC gives the same pixels before or after a horizontal flip, so that a pipeline
    with it before RandomHorizontalFlip (or before the crop's flip) is reproduced by the loader,
    which runs every spec after the flip: the per-pixel ops (ColorJitter, RandomGrayscale) and
    RandomVerticalFlip exactly, GaussianBlur within its one level; not the policies (their
    shears, rotations and translations are not mirror-symmetric) nor RandomErasing."""
    return spec["op"] in ("color_jitter", "grayscale", "vflip", "gaussian_blur")


def check(spec, where="augment"):
    """Validate a spec dict (as spec_for returns, or written by hand); raises ValueError."""
    if not isinstance(spec, dict) or spec.get("op") not in POLICIES + STEPS + (ERASING,):
        raise ValueError("%s: an augment spec is a dict with 'op' one of %s, got %r"
                         % (where, ", ".join(POLICIES + STEPS + (ERASING,)), spec))
    if spec["op"] == ERASING:
        v = spec.get("value", (0.0, 0.0, 0.0))
        (s0, s1), (r0, r1) = spec.get("scale", (0.02, 0.33)), spec.get("ratio", (0.3, 3.3))
        c0, c1 = spec.get("count", (1, 1))
        if set(spec) - {"op", "p", "scale", "ratio", "value", "count"} or not 0.0 <= float(spec.get("p", 0.5)) <= 1.0 \
                or not 0 <= s0 <= s1 <= _FLT_MAX or not 0 < r0 <= r1 <= _FLT_MAX or \
                not (v in ("random", "random_channel") or (not isinstance(v, str) and len(v) == 3)):
            raise ValueError("%s: random_erasing takes p in [0, 1], scale (min, max) with 0 <= min <= max "
                             "(torchvision: max <= 1; timm: any), ratio (min, max) with 0 < min <= max and "
                             "value (3 numbers), 'random' or 'random_channel', got %r" % (where, spec))
        if not 1 <= int(c0) <= int(c1) <= _ERASE_MAX_COUNT:
            raise ValueError("%s: random_erasing's count (min_count, max_count) must satisfy 1 <= min <= max "
                             "<= %d, got %r" % (where, _ERASE_MAX_COUNT, (c0, c1)))
        return spec
    if spec["op"] in ("vflip", "grayscale"):
        if set(spec) - {"op", "p"} or not 0.0 <= float(spec.get("p", 0.5)) <= 1.0:
            raise ValueError("%s: %s takes 'p' in [0, 1], got %r" % (where, spec["op"], spec))
        return spec
    if spec["op"] in ("affine", "rotation"):
        return _check_geometry(spec, where)
    if spec["op"] == "gaussian_blur":
        kx, ky = spec.get("kernel_size", (0, 0))
        lo, hi = spec.get("sigma", (0.1, 2.0))
        odd = all(k % 2 == 1 and 1 <= k <= 255 for k in (kx, ky))
        if set(spec) - {"op", "kernel_size", "sigma", "api"} or not odd or not 0 < lo <= hi \
                or spec.get("api", "v1") not in ("v1", "v2"):
            raise ValueError("%s: gaussian_blur takes kernel_size (kx, ky), odd 1..255, sigma (min, max) with "
                             "0 < min <= max and api 'v1' or 'v2' (whose kernel), got %r" % (where, spec))
        return spec
    if spec["op"] == "color_jitter":
        if set(spec) - {"op", "brightness", "contrast", "saturation", "hue"}:
            raise ValueError("%s: color_jitter takes brightness, contrast, saturation, hue" % where)
        for name, center in _JITTER:
            lo, hi = spec.get(name) or (center, center)
            ok = -0.5 <= lo <= hi <= 0.5 if name == "hue" else 0.0 <= lo <= hi
            if not ok:
                raise ValueError("%s: color_jitter %s range (%r, %r) is invalid" % (where, name, lo, hi))
        return spec
    if spec["op"] == "timm_randaugment":
        return _check_timm(spec, where)
    if spec["op"] == "timm_autoaugment":
        return _check_timm_auto(spec, where)
    known = {"op", "interpolation", "fill", "num_magnitude_bins", "num_ops", "magnitude", "policy", "severity",
             "mixture_width", "chain_depth", "alpha", "all_ops"}
    extra = set(spec) - known
    if extra:
        raise ValueError("%s: unknown augment spec keys %s" % (where, sorted(extra)))
    _check_interp_fill(spec, where)
    bins = int(spec.get("num_magnitude_bins", 31))
    if not 2 <= bins <= _MAX_BINS:
        raise ValueError("%s: num_magnitude_bins must be 2..%d, not %d" % (where, _MAX_BINS, bins))
    if spec["op"] == "randaugment":
        if not 0 <= int(spec.get("num_ops", 2)) <= _MAX_OPS:
            raise ValueError("%s: num_ops must be 0..%d, not %r" % (where, _MAX_OPS, spec.get("num_ops")))
        if not 0 <= int(spec.get("magnitude", 9)) < bins:
            raise ValueError("%s: magnitude must be 0..num_magnitude_bins - 1 = %d, not %r"
                             % (where, bins - 1, spec.get("magnitude")))
    if spec["op"] == "augmix":
        if not (1 <= int(spec.get("severity", 3)) <= 10 and 1 <= int(spec.get("mixture_width", 3)) <= 8
                and int(spec.get("chain_depth", -1)) <= 8 and float(spec.get("alpha", 1.0)) > 0):
            raise ValueError("%s: augmix takes severity 1..10, mixture_width 1..8, chain_depth <= 8 and "
                             "alpha > 0, got %r" % (where, spec))
    if spec["op"] == "autoaugment" and spec.get("policy", "imagenet") not in AUTO_POLICIES:
        raise ValueError("%s: the AutoAugment policy must be one of %s, not %r"
                         % (where, ", ".join(AUTO_POLICIES), spec.get("policy")))
    return spec


def _check_interp_fill(spec, where):
    """The torchvision ops' interpolation (NEAREST, BILINEAR or BICUBIC) and fill (None or a colour)."""
    if spec.get("interpolation", "nearest") not in _INTERPS:
        raise ValueError("%s: interpolation must be 'nearest', 'bilinear' or 'bicubic', not %r"
                         % (where, spec.get("interpolation")))
    fill = spec.get("fill")
    if fill is not None and (len(fill) != 3 or not all(isinstance(v, int) and 0 <= v <= 255 for v in fill)):
        raise ValueError("%s: fill must be None or three integers 0..255, not %r" % (where, fill))


def _check_geometry(spec, where):
    keys = {"op", "degrees", "interpolation", "fill"} | ({"translate", "scale", "shear"} if spec["op"] == "affine"
                                                         else set())
    bad = set(spec) - keys
    d = spec.get("degrees", (0.0, 0.0))
    tr, sc, sh = spec.get("translate"), spec.get("scale"), spec.get("shear")
    ok = not bad and len(d) == 2 and all(math.isfinite(v) for v in d) and d[0] <= d[1]
    ok = ok and (tr is None or len(tr) == 2 and all(0.0 <= v <= 1.0 for v in tr))
    ok = ok and (sc is None or len(sc) == 2 and 0.0 < sc[0] <= sc[1] and math.isfinite(sc[1]))
    ok = ok and (sh is None or len(sh) == 4 and all(math.isfinite(v) for v in sh) and sh[0] <= sh[1]
                 and sh[2] <= sh[3])
    if not ok:
        raise ValueError("%s: %s takes degrees (min, max)%s, interpolation and fill, got %r"
                         % (where, spec["op"], ", translate (a, b) in [0, 1] or None, scale (min, max) > 0 or "
                            "None, shear (x0, x1, y0, y1) or None" if spec["op"] == "affine" else "", spec))
    _check_interp_fill(spec, where)
    return spec


def _geometry_program(s):
    """STK_P_AUG_STEPS values of an affine (6) or rotation (7) step."""
    tail = [_INTERPS.index(s.get("interpolation", "nearest"))]
    fill = s.get("fill")
    tail += [0, 0, 0, 0] if fill is None else [1, *fill]
    if s["op"] == "rotation":
        return [7, *s["degrees"], *tail]
    sh = s.get("shear") or (0.0, 0.0, 0.0, 0.0)
    return [6, *s["degrees"], *(s.get("translate") or (0.0, 0.0)), *(s.get("scale") or (1.0, 1.0)), *sh, *tail]
def _check_timm(spec, where):
    extra = set(spec) - _TIMM_KEYS
    if extra:
        raise ValueError("%s: unknown timm_randaugment spec keys %s" % (where, sorted(extra)))
    fill = spec.get("fill", (128, 128, 128))
    mstd = float(spec.get("magnitude_std", 0.0))
    if spec.get("weighted") and int(spec.get("num_layers", 2)) > 15:
        raise ValueError("%s: num_layers=%d with 'tweights': timm chooses the ops without replacement among "
                         "15 (np.random.choice(..., replace=False) raises ValueError above 15)"
                         % (where, int(spec["num_layers"])))
    ok = (0 <= int(spec.get("num_layers", 2)) <= _MAX_OPS
          and 0.0 <= float(spec.get("magnitude", 10.0)) <= 1000.0 and (mstd == math.inf or 0.0 <= mstd <= 1e6)
          and 0.0 <= float(spec.get("magnitude_max", 10.0)) <= 1000.0
          and 0.0 <= float(spec.get("prob", 0.5)) <= 1.0 and 0.0 <= float(spec.get("translate_pct", 0.45)) <= 1.0
          and spec.get("interpolation", "random") in ("bilinear", "bicubic", "nearest", "random")
          and len(fill) == 3 and all(isinstance(v, int) and 0 <= v <= 255 for v in fill))
    if not ok:
        raise ValueError("%s: timm_randaugment takes num_layers 0..65535 (0..15 weighted), magnitude 0..1000, "
                         "magnitude_std 0..1e6 or inf, magnitude_max 0..1000, prob 0..1, translate_pct 0..1, "
                         "interpolation 'bilinear' / 'bicubic' / 'nearest' / 'random' and fill (three integers "
                         "0..255), got %r" % (where, spec))
    return spec


def _check_timm_auto(spec, where):
    extra = set(spec) - _TIMM_AUTO_KEYS
    if extra:
        raise ValueError("%s: unknown timm_autoaugment spec keys %s" % (where, sorted(extra)))
    policy = spec.get("policy") or []
    for s, sub in enumerate(policy):
        for j, op in enumerate(sub):
            if len(op) != 3 or op[0] not in _TIMM_OPS or not 0.0 <= float(op[1]) <= 1.0 \
                    or not 0.0 <= float(op[2]) <= 1000.0:
                raise ValueError("%s: timm_autoaugment policy[%d][%d] = %r: an (op, prob 0..1, magnitude "
                                 "0..1000) with op one of %s" % (where, s, j, op, ", ".join(_TIMM_OPS)))
    ok = (1 <= len(policy) <= 64 and all(1 <= len(sub) <= 16 for sub in policy)
          and sum(len(sub) for sub in policy) <= 128 and len(_timm_auto_program(policy)) <= 256)
    if not ok:
        raise ValueError("%s: timm_autoaugment takes 1..64 sub-policies of 1..16 ops, at most 128 ops "
                         "in all, got %d sub-policies" % (where, len(policy)))
    rest = dict(spec, op="timm_randaugment")
    del rest["policy"]
    _check_timm(rest, where)
    return spec


def _timm_auto_program(policy):
    """STK_P_TIMM_AUTO_POLICY values: per sub-policy its op count, then (op number, prob,
    magnitude) per op."""
    prog = []
    for sub in policy:
        prog.append(len(sub))
        for name, prob, mag in sub:
            prog += [_TIMM_OPS.index(name), float(prob), float(mag)]
    return prog


def _timm_params(s):
    """STK_P_TIMM_* for a timm_randaugment spec."""
    from . import _lib
    fill = s.get("fill", (128, 128, 128))
    mstd = float(s.get("magnitude_std", 0.0))
    resample = {"bilinear": _lib.INTERP_BILINEAR, "bicubic": _lib.INTERP_BICUBIC,
                "nearest": _lib.INTERP_NEAREST, "random": -1}
    return [(_lib.P_AUG_POLICY, _lib.AUG_TIMM_RAND, "augment"),
            (_lib.P_AUG_NUM_OPS, int(s.get("num_layers", 2)), "timm RandAugment num_layers"),
            (_lib.P_AUG_FILL, (fill[0] << 16) | (fill[1] << 8) | fill[2], "timm RandAugment img_mean"),
            (_lib.P_TIMM_MAGNITUDE, float(s.get("magnitude", 10.0)), "timm RandAugment magnitude"),
            (_lib.P_TIMM_MSTD, 0.0 if mstd == math.inf else mstd, "timm RandAugment magnitude_std"),
            (_lib.P_TIMM_UNIFORM, int(mstd == math.inf), "timm RandAugment magnitude_std"),
            (_lib.P_TIMM_MMAX, float(s.get("magnitude_max", 10.0)), "timm RandAugment magnitude_max"),
            (_lib.P_TIMM_PROB, float(s.get("prob", 0.5)), "timm RandAugment prob"),
            (_lib.P_TIMM_INCREASING, int(bool(s.get("increasing", False))), "timm RandAugment increasing"),
            (_lib.P_TIMM_WEIGHTED, int(bool(s.get("weighted", False))), "timm RandAugment weights"),
            (_lib.P_TIMM_RESAMPLE, resample[s.get("interpolation", "random")], "timm RandAugment interpolation"),
            (_lib.P_TIMM_TRANSLATE_PCT, float(s.get("translate_pct", 0.45)), "timm RandAugment translate_pct")]


_arith_cache = {}


def _cpu_capability(torch):
    """The CPU kernels torch runs: "AVX512", "AVX2", "DEFAULT", ... (torch 2.x asks
    torch.backends.cpu; torch 1.x only prints it in torch.__config__.show())."""
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if get is not None:
        return str(get()).upper()
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip().upper()
    return "AVX2"


def torch_arithmetic(torch=None):
    """STK_AUG_TORCH_* (the Loader's STK_P_AUG_TORCH) for TORCH, the torch module (imported when
    None): whose float32 arithmetic the augmentation reproduces. torch >= 2.0 (with torchvision
    >= 0.15) computes torch.linspace point by point and ends adjust_hue with
    convert_image_dtype; torch 1.x vectorises linspace, 8 or 16 lanes by its CPU kernels (torch
    2.x's lanes show in transforms.v2.GaussianBlur's softmax sum only). With AUG_TORCH_GRID_FMA
    added when torch's bmm computes the geometric ops' affine grid with its product fused
    (_grid_fused). None when torch cannot be imported: the library's default (torch 1.x, AVX2)
    then stands."""
    if torch is None:
        try:
            import torch
        except ImportError:
            return None
    from . import _lib
    key = id(torch)
    if key not in _arith_cache:
        try:
            major = int(str(torch.__version__).split(".")[0])
        except ValueError:
            major = 2
        avx512 = _cpu_capability(torch) == "AVX512"
        if major >= 2:
            arith = _lib.AUG_TORCH_2_AVX512 if avx512 else _lib.AUG_TORCH_2
        else:
            arith = _lib.AUG_TORCH_1_AVX512 if avx512 else _lib.AUG_TORCH_1
        _arith_cache[key] = arith | (_lib.AUG_TORCH_GRID_FMA if _grid_fused(torch) else 0)
    return _arith_cache[key]


_grid_warned = []


def _grid_fused(torch):
    """Whether TORCH's bmm computes torchvision's affine grid (_gen_affine_grid: N x 3 points by
    the 3 x 2 rescaled matrix) as fma(y, r1, x * r0) + r2 — Intel MKL's AVX-512 sgemm on some
    CPUs (torch built with MKL: the PyPI x86-64 wheels), which MKL chooses at run time (MKL_CBWR
    can choose for it) — rather than (x * r0 + y * r1) + r2, each step rounded (MKL's AVX2
    kernels, torch without MKL). Asked of torch itself, once per process, on a 30-degree
    rotation's grid of 64 x 48 points, where the two differ in about a fifth of the values. If
    it matches neither, a RuntimeWarning says so and the unfused form stands (the geometric ops
    may then be one level off at some pixels)."""
    import numpy as np
    ow, oh = 64, 48
    c, s = math.cos(math.radians(30.0)), math.sin(math.radians(30.0))
    theta = torch.tensor([[c, -s, 3.0], [s, c, -2.0]], dtype=torch.float32).reshape(1, 2, 3)
    base = torch.empty(1, oh, ow, 3, dtype=torch.float32)
    base[..., 0].copy_(torch.linspace(-ow * 0.5 + 0.5, ow * 0.5 - 0.5, steps=ow))
    base[..., 1].copy_(torch.linspace(-oh * 0.5 + 0.5, oh * 0.5 - 0.5, steps=oh).unsqueeze_(-1))
    base[..., 2].fill_(1)
    rt = theta.transpose(1, 2) / torch.tensor([0.5 * ow, 0.5 * oh], dtype=torch.float32)
    got = base.view(1, oh * ow, 3).bmm(rt)[0].numpy()
    b, r = base.view(oh * ow, 3).numpy(), rt[0].numpy()
    x, y = b[:, :1], b[:, 1:2]
    plain = (x * r[0] + y * r[1]) + r[2]              # float32, each step rounded
    xr = (x * r[0]).astype(np.float64)                # y * r1 exact in float64, one rounding
    fused = (y.astype(np.float64) * r[1].astype(np.float64) + xr).astype(np.float32) + r[2]
    if np.array_equal(got, plain):
        return False
    if np.array_equal(got, fused):
        return True
    if not _grid_warned:
        _grid_warned.append(1)
        warnings.warn("stoker: torch's bmm computes the affine grid of ShearX/Y, TranslateX/Y, Rotate, "
                      "RandomAffine and RandomRotation in an order stoker does not repeat: their "
                      "pixels may be one level off torchvision's at some places", RuntimeWarning)
    return False


VEXP = "vexp"   # params()'s key for GaussianBlur's exp: the Loader calls stk_loader_set_vexp with it
_vexp_warned = []


def torch_vexp(torch=None):
    """The vector exp TORCH's torch.exp runs on float32 CPU tensors when it is Intel MKL's vmsExp
    (torch built with MKL: the PyPI x86-64 wheels), taken from libtorch_cpu.so and checked against
    torch.exp: a ``TorchVexp`` (``.library``, ``.symbol``, ``.arg`` the VML mode, ``.address``),
    which the Loader hands to the library for transforms.GaussianBlur's kernel so that it equals
    torchvision byte for byte. None without torch, for a torch without MKL (its exp is SLEEF's)
    or when the function cannot be used (``torch_vexp_problem`` says why)."""
    if torch is None:
        try:
            import torch
        except ImportError:
            return None
    from . import _vexp
    return _vexp.resolve(torch)[0]


def torch_vexp_problem(torch=None):
    """Why a torch with MKL gets no ``torch_vexp`` (a sentence), else None."""
    if torch is None:
        try:
            import torch
        except ImportError:
            return None
    from . import _vexp
    return _vexp.resolve(torch)[1]


def _vexp_param(resolved):
    """[(VEXP, TorchVexp, name)] when a transforms (v1) GaussianBlur is among RESOLVED and torch.exp
    is MKL's; warns once per process when torch has MKL but its exp cannot be had (the blur is then
    within one level of torchvision's, not equal)."""
    if not any(s["op"] == "gaussian_blur" and s.get("api", "v1") == "v1" for s in resolved):
        return []
    v = torch_vexp()
    if v is None:
        why = torch_vexp_problem()
        if why and not _vexp_warned:
            import warnings
            _vexp_warned.append(why)
            warnings.warn("stoker: GaussianBlur cannot use torch's own exp (%s): glibc's expf stands in, so a "
                          "blurred value can be one level off torchvision's" % why, RuntimeWarning, stacklevel=4)
        return []
    return [(VEXP, v, "GaussianBlur's exp (%s)" % v.symbol)]


def params(specs):
    """[(STK_P_* key, value, name)] for the Loader: SPECS is None, a spec, a torchvision object or
    a list of them, applied in that order (at most one policy: the library applies one per sample;
    the steps go to STK_P_AUG_STEPS as a list of floats)."""
    from . import _lib
    if specs is None:
        return []
    if isinstance(specs, dict) or not isinstance(specs, (list, tuple)):
        specs = [specs]
    resolved = []
    for i, s in enumerate(specs):
        if not isinstance(s, dict):
            obj, s = s, spec_for(s, i)
            if s is None:
                raise ValueError("augment[%d]: %s is not an augmentation stoker knows (give a spec "
                                 "dict or TrivialAugmentWide / RandAugment / AutoAugment)"
                                 % (i, type(obj).__name__))
        resolved.append(check(s, "augment[%d]" % i))
    erasing = [k for k, s in enumerate(resolved) if s["op"] == ERASING]
    if erasing and erasing != [len(resolved) - 1]:
        raise ValueError("augment: random_erasing works on the delivered (normalised) image: it must "
                         "come last, once")
    out = []
    if erasing:
        e = resolved.pop()
        v = e.get("value", (0.0, 0.0, 0.0))
        out += [(_lib.P_ERASE_PROB, float(e.get("p", 0.5)), "RandomErasing p"),
                (_lib.P_ERASE_SCALE_MIN, float(e.get("scale", (0.02, 0.33))[0]), "RandomErasing scale"),
                (_lib.P_ERASE_SCALE_MAX, float(e.get("scale", (0.02, 0.33))[1]), "RandomErasing scale"),
                (_lib.P_ERASE_RATIO_MIN, float(e.get("ratio", (0.3, 3.3))[0]), "RandomErasing ratio"),
                (_lib.P_ERASE_RATIO_MAX, float(e.get("ratio", (0.3, 3.3))[1]), "RandomErasing ratio")]
        if v == "random":
            out.append((_lib.P_ERASE_RANDOM, _lib.ERASE_RANDOM_PIXEL, "RandomErasing value"))
        elif v == "random_channel":
            out.append((_lib.P_ERASE_RANDOM, _lib.ERASE_RANDOM_CHANNEL, "RandomErasing mode"))
        else:
            out.append((_lib.P_ERASE_VALUE, [float(x) for x in v], "RandomErasing value"))
        if "count" in e:
            out += [(_lib.P_ERASE_MIN_COUNT, int(e["count"][0]), "RandomErasing min_count"),
                    (_lib.P_ERASE_MAX_COUNT, int(e["count"][1]), "RandomErasing max_count")]
    arith = torch_arithmetic() if resolved else None
    if arith is not None:
        out.append((_lib.P_AUG_TORCH, arith, "the torch arithmetic (stoker.augment.torch_arithmetic)"))
    out += _vexp_param(resolved)
    policies = [s for s in resolved if s["op"] in POLICIES]
    if len(policies) > 1:
        raise ValueError("augment: one policy per loader, got %d (%s)"
                         % (len(policies), ", ".join(s["op"] for s in policies)))
    if len(resolved) > 16:
        raise ValueError("augment: at most 16 steps, got %d" % len(resolved))
    if len(resolved) > len(policies):      # steps: a program for STK_P_AUG_STEPS, in order
        prog = []
        for s in resolved:
            if s["op"] in POLICIES:
                prog.append(4)
            elif s["op"] == "gaussian_blur":
                prog += [8 if s.get("api") == "v2" else 5, *s["kernel_size"], *s["sigma"]]
            elif s["op"] in ("affine", "rotation"):
                prog += _geometry_program(s)
            elif s["op"] == "color_jitter":
                prog.append(3)
                for name, center in _JITTER:
                    prog.extend(s.get(name) or (center, center))
            else:
                prog += [1 if s["op"] == "vflip" else 2, float(s.get("p", 0.5))]
        out.append((_lib.P_AUG_STEPS, prog, "augment"))
    if not policies:
        return out
    s = policies[0]
    if s["op"] == "timm_randaugment":
        return out + _timm_params(s)
    if s["op"] == "timm_autoaugment":  # RandAugment's hparams, the policy; the RandAugment-only keys unused
        common = {_lib.P_AUG_FILL, _lib.P_TIMM_MSTD, _lib.P_TIMM_UNIFORM, _lib.P_TIMM_MMAX, _lib.P_TIMM_RESAMPLE,
                  _lib.P_TIMM_TRANSLATE_PCT}
        rest = dict(s, op="timm_randaugment")
        del rest["policy"]
        return out + [(_lib.P_AUG_POLICY, _lib.AUG_TIMM_AUTO, "augment"),
                      (_lib.P_TIMM_AUTO_POLICY, _timm_auto_program(s["policy"]), "timm AutoAugment policy")] + [
            (k, v, n.replace("RandAugment", "AutoAugment")) for k, v, n in _timm_params(rest) if k in common]
    policy = {"trivialaugment": _lib.AUG_TRIVIAL, "randaugment": _lib.AUG_RAND,
              "autoaugment": _lib.AUG_AUTO, "augmix": _lib.AUG_AUGMIX}[s["op"]]
    fill = s.get("fill")
    out += [(_lib.P_AUG_POLICY, policy, "augment"),
           (_lib.P_AUG_BINS, int(s.get("num_magnitude_bins", 31)), "augment num_magnitude_bins"),
           (_lib.P_AUG_INTERP, _INTERPS.index(s.get("interpolation", "nearest")), "augment interpolation"),
           (_lib.P_AUG_FILL, -1 if fill is None else (fill[0] << 16) | (fill[1] << 8) | fill[2],
            "augment fill")]
    if s["op"] == "augmix":
        out += [(_lib.P_AUGMIX_SEVERITY, int(s.get("severity", 3)), "AugMix severity"),
                (_lib.P_AUGMIX_WIDTH, int(s.get("mixture_width", 3)), "AugMix mixture_width"),
                (_lib.P_AUGMIX_DEPTH, max(-1, int(s.get("chain_depth", -1))), "AugMix chain_depth"),
                (_lib.P_AUGMIX_ALPHA, float(s.get("alpha", 1.0)), "AugMix alpha"),
                (_lib.P_AUGMIX_ALL_OPS, int(bool(s.get("all_ops", True))), "AugMix all_ops")]
    if s["op"] == "autoaugment":
        out.append((_lib.P_AUG_AUTO_POLICY, AUTO_POLICIES.index(s.get("policy", "imagenet")),
                    "AutoAugment policy"))
    if s["op"] == "randaugment":
        out += [(_lib.P_AUG_NUM_OPS, int(s.get("num_ops", 2)), "augment num_ops"),
                (_lib.P_AUG_MAGNITUDE, int(s.get("magnitude", 9)), "augment magnitude")]
    return out
