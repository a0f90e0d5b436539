# SPDX-License-Identifier: MIT
"""Reading a torchvision (v1 or v2) or timm transform as stoker.Loader settings.

parse_transform reads the flattened Compose step by step: geometry, per-sample augmentations
(_augment_step), conversion and values, then RandomErasing (_erasing_step), and returns the
Loader keyword arguments that reproduce it exactly. Whatever it cannot reproduce exactly is
refused with ValueError naming the step, its position and what to use instead: nothing is
approximated behind the caller's back. stoker.DataLoader (dataloader.py) calls it on the
dataset's transform.
"""

import sys

import numpy as np

from . import augment as _augment
from . import mix as _mix
from .loader import Loader

SUPPORTED = """stoker.DataLoader runs in C (everything else runs in Python or on torch's DataLoader,
see stoker.pytail; strict=True refuses it instead):
  dataset: torchvision.datasets.ImageFolder (default loader, no target_transform), a subclass
           of it that overrides no loading (__getitem__, loader, find_classes, make_dataset),
           torch.utils.data.Subset of one, or stoker.ImageFolder (an ImageFolder root or a
           packed copy from `stoker pack`)
  transform: a Compose (torchvision.transforms or .v2, nested ones flattened, timm's
           create_transform output) of, in this order:
      geometry, train: RandomResizedCrop(size, scale, ratio, interpolation=BILINEAR | BICUBIC
                       | NEAREST) or timm's RandomResizedCropAndInterpolation (one
                       interpolation, or 'random': BILINEAR or BICUBIC per image)
                       [, RandomHorizontalFlip(p)]
                eval:  Resize(int | (h, w), interpolation=BILINEAR | BICUBIC | NEAREST,
                       max_size=None) [, CenterCrop(size)]
    then per-sample augmentations, in order: TrivialAugmentWide, RandAugment, AutoAugment
           (IMAGENET, CIFAR10, SVHN), AugMix, timm's RandAugment ('rand-m9-mstd0.5-inc1' etc.),
           timm's AutoAugment ('original-mstd0.5', 'originalr', 'v0', 'v0r'; one policy at
           most), ColorJitter, RandomGrayscale, RandomVerticalFlip, GaussianBlur, RandomAffine,
           RandomRotation (expand=False, center=None)
    then conversion: ToTensor() | timm MaybeToTensor() | timm ToTensor()
        |  PILToTensor() | v2.ToImage()  [, ConvertImageDtype(float32 | float16)
                                          | v2.ToDtype(float32 | float16, scale=...)]
    then [Normalize(mean, std)] [, RandomErasing(p, scale, ratio, value) | timm's RandomErasing
           (mode const / rand / pixel, min_count, max_count)] [, v2.ToPureTensor()]
  sampler: None, SequentialSampler, RandomSampler (no replacement, no num_samples),
           torch DistributedSampler, stoker.ExactDistributedSampler: ordered in C; any other
           sampler, and a batch_sampler with a batch_size: drawn in Python once per pass
  in_order: True or False (the order is deterministic either way)
  collate_fn / batch_transform: MixUp, CutMix, RandomChoice of them (stoker's, torchvision
           v2's, timm's Mixup), applied to each batch in place: labels become soft targets
  not in C: other collate_fn (run in Python), worker_init_fn (called in the
           Python workers), batch_size=None (torch's DataLoader), a custom ImageFolder loader,
           a Dataset with its own __getitem__ (torch's DataLoader), target_transform, other
           per-sample transforms (RandomPerspective, ElasticTransform, RandomApply, Lambda,
           timm's AugMixAugment, timm's '3a' AutoAugment, ...: from the first of them on,
           the steps run in Python); strict=True refuses each by name and position"""


# Where the list of what runs in C is (printed there once, not in every message).
SEE_ALSO = ("What stoker runs in C: bindings/python/README.md (\"What runs where\"), or "
            "print(stoker.transforms.SUPPORTED).")


class Refusal(ValueError):
    """What stoker cannot reproduce exactly: the message (str), ``at`` (the position of the
    step it concerns in the flattened list, None when it is no one step) and ``cause`` (the
    message's first line, without the advice)."""

    def __init__(self, text, at=None, cause=None):
        super().__init__(text)
        self.at, self.cause = at, cause or text


def _refuse(what, why=None, instead=None, at=None):
    """Refusal (a ValueError): WHAT cannot be reproduced exactly [, WHY] [, what to use
    INSTEAD]; AT is the position of the step concerned, if any."""
    cause = "%s%s" % (what, (": %s" % why) if why else "")
    text = "stoker.DataLoader cannot reproduce %s exactly, so it refuses it" % what
    text += (": %s." % why) if why else "."
    if instead:
        text += "\nInstead: %s." % instead
    raise Refusal("%s\n%s" % (text, SEE_ALSO), at=at, cause=cause)


def _tv():
    try:
        import torchvision.transforms as T
        import torchvision.datasets as D
    except ImportError as e:
        raise ImportError("stoker.DataLoader needs torchvision (%s)" % e) from None
    return T, D


# ---- recognising a step ----------------------------------------------------------------------
# A step is recognised by its class: the class torchvision.transforms, torchvision.transforms.v2
# or timm exports under that name (looked up by module, since v2 and timm need not be importable
# here). A subclass, even of a known class, is another transform (it may override the call).

_PUBLIC = {"v1": "torchvision.transforms", "v2": "torchvision.transforms.v2"}


def _family(step):
    """"v1", "v2" or "timm" when STEP's class is that library's own, else None."""
    cls = type(step)
    mod = getattr(cls, "__module__", "") or ""
    if mod == "torchvision.transforms.v2" or mod.startswith("torchvision.transforms.v2."):
        fam = "v2"
    elif mod.startswith("torchvision.transforms."):
        fam = "v1"
    elif mod.startswith("timm.data."):
        return "timm" if getattr(sys.modules.get(mod), cls.__name__, None) is cls else None
    else:
        return None
    public = sys.modules.get(_PUBLIC[fam])
    return fam if getattr(public, cls.__name__, None) is cls else None


def _kind(step):
    """(family, class name) of a recognised step, else (None, class name)."""
    return _family(step), type(step).__name__


def _full_name(step):
    """The class as users import it: torchvision.transforms.v2.TrivialAugmentWide."""
    fam, name = _kind(step)
    if fam in _PUBLIC:
        return "%s.%s" % (_PUBLIC[fam], name)
    cls = type(step)
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _is(step, names, families=("v1", "v2")):
    fam, name = _kind(step)
    return fam in families and name in names


def _is_compose(step):
    return _is(step, ("Compose",))


def _compose_label(step):
    fam = _family(step)
    return {"v1": "transforms.Compose", "v2": "transforms.v2.Compose"}.get(fam, "Compose")


class _PresetTemplate:
    def __call__(self, img):
        return self.transforms(img)


def code_shape(code):
    """CODE's instructions as comparable tuples: local variables by number, globals and closure
    variables by kind only (code_refs gives their values), the rest by value — so that two
    functions written alike compare equal on every Python version."""
    import dis
    skip = ("RESUME", "NOP", "CACHE", "COPY_FREE_VARS", "MAKE_CELL", "PRECALL")
    out = []
    for i in dis.get_instructions(code):
        if i.opname in skip:
            continue
        if i.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLASSDEREF"):
            out.append(("REF", (i.argrepr or "").startswith("NULL")))
        elif "FAST" in i.opname:
            out.append((i.opname, i.arg))
        else:
            out.append((i.opname, i.argval))
    return out


def code_refs(fn):
    """The values of the globals and closure variables FN's code loads, in the order loaded
    (None for a name that is not bound)."""
    import dis
    code = fn.__code__
    cells = dict(zip(code.co_freevars, [c.cell_contents for c in fn.__closure__ or ()]))
    glob = getattr(fn, "__globals__", {})
    builtins = glob.get("__builtins__", {})
    builtins = getattr(builtins, "__dict__", builtins)
    out = []
    for i in dis.get_instructions(code):
        if i.opname == "LOAD_DEREF" or i.opname == "LOAD_CLASSDEREF":
            out.append(cells.get(i.argval))
        elif i.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            out.append(glob.get(i.argval, builtins.get(i.argval)))
    return out


def _same_code(a, b):
    return code_shape(a) == code_shape(b)


def unwrap_preset(transform):
    """The Compose inside TRANSFORM when TRANSFORM is an object that only holds one and calls
    it — torchvision references' ClassificationPresetTrain / ClassificationPresetEval: a
    ``transforms`` attribute that is a Compose and a ``__call__`` that is exactly
    ``return self.transforms(img)``; else None."""
    inner = getattr(transform, "transforms", None)
    if inner is None or _family(transform) is not None or not _is_compose(inner):
        return None
    call = getattr(type(transform), "__call__", None)
    code = getattr(call, "__code__", None)
    if code is None or code.co_argcount != 2 or code.co_flags & 0x0C:   # *args / **kwargs
        return None
    return inner if _same_code(code, _PresetTemplate.__call__.__code__) else None


def _flatten(transform):
    """The steps of TRANSFORM, nested Compose flattened in order (an object that only holds
    and calls a Compose, unwrap_preset, read through); and the text that names the whole list
    in messages ("transforms.v2.Compose([RandomResizedCrop, ...])")."""
    steps, nested = [], False
    inner = unwrap_preset(transform)
    if inner is not None:
        transform = inner

    def walk(t, depth):
        nonlocal nested
        if _is_compose(t):
            nested = nested or depth > 0
            for s in t.transforms:
                walk(s, depth + 1)
        else:
            steps.append(t)
    walk(transform, 0)
    names = ", ".join(type(s).__name__ for s in steps)
    if _is_compose(transform):
        whole = "%s([%s])%s" % (_compose_label(transform), names,
                                " (nested Compose flattened)" if nested else "")
    else:
        whole = "the transform %s" % names
    return steps, whole


class _Ctx:
    """Where the parser is: the steps, the list's name, the position."""

    def __init__(self, steps, whole):
        self.steps, self.whole, self.i = steps, whole, 0

    def peek(self):
        return self.steps[self.i] if self.i < len(self.steps) else None

    def at(self, names, families=("v1", "v2")):
        s = self.peek()
        return s is not None and _is(s, names, families)

    def where(self, i=None):
        i = self.i if i is None else i
        return "position %d of %s" % (i, self.whole)

    def refuse(self, what, instead, i=None):
        """ValueError: WHAT (about the step at I) at its position, and what to use INSTEAD."""
        i = self.i if i is None else i
        step = self.steps[i] if i < len(self.steps) else None
        head = "%s at %s" % (_full_name(step), self.where(i)) if step is not None else \
            "the end of %s" % self.whole
        _refuse(head, what, instead, at=i)


# ---- geometry --------------------------------------------------------------------------------

def _interp_name(interp):
    """'bilinear', 'bicubic', 'nearest', ... for an InterpolationMode, its string value or a PIL
    constant; a tuple or list (timm's 'random') stays a tuple of names."""
    if isinstance(interp, (tuple, list)):
        return tuple(_interp_name(x) for x in interp)
    value = getattr(interp, "value", interp)
    if isinstance(value, str):
        return value.lower()
    pil = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
    return pil.get(value, str(interp))


def _loader_knows(kwarg):
    import inspect
    return kwarg in inspect.signature(Loader.__init__).parameters


def _interp_kw(mode, where):
    """Loader keyword arguments for a resampling MODE other than bilinear, or ValueError."""
    if mode in ("bicubic", "nearest", "random") and _loader_knows("interpolation"):
        return {"interpolation": mode}
    _refuse(where, "stoker resizes with BILINEAR only",
            "interpolation=InterpolationMode.BILINEAR, or torch's DataLoader")


def _interp(ctx, interp):
    mode = _interp_name(interp)
    if isinstance(mode, tuple):
        # timm's interpolation='random': random.choice((BILINEAR, BICUBIC)) per image
        if sorted(mode) != ["bicubic", "bilinear"]:
            ctx.refuse("interpolation='random' among %s per image" % (list(mode),),
                       "one interpolation, or timm's ('bilinear', 'bicubic') pair")
        mode = "random"
    if mode == "bilinear":
        return {}
    return _interp_kw(mode, "%s(interpolation=%s) at %s" % (_full_name(ctx.peek()), interp,
                                                             ctx.where()))


def _hw(size, what):
    if isinstance(size, int):
        return size, size
    size = tuple(size)
    if len(size) == 1:
        return int(size[0]), int(size[0])
    if len(size) == 2:
        return int(size[0]), int(size[1])
    _refuse("%s with size %r" % (what, size))


def _geometry(ctx, kw):
    step = ctx.peek()
    if ctx.at(("RandomResizedCrop",)) or ctx.at(("RandomResizedCropAndInterpolation",), ("timm",)):
        kw.update(_interp(ctx, step.interpolation))
        kw.update(train=True, size=_hw(step.size, type(step).__name__),
                  scale=tuple(float(x) for x in step.scale),
                  ratio=tuple(float(x) for x in step.ratio), flip_prob=0.0)
        ctx.i += 1
        if ctx.at(("RandomHorizontalFlip",)):
            kw["flip_prob"] = float(ctx.peek().p)
            ctx.i += 1
        return
    if ctx.at(("Resize",)):
        _resize(ctx, step, kw)
        return
    if step is None:
        _refuse("an empty transform (PIL images of varying size cannot be batched)", at=0)
    if _conversion_kind(step) is not None:
        ctx.refuse("the conversion comes before the crop: the crop and resize then run on "
                   "tensors (torch's resampling), not on PIL images as stoker reproduces them",
                   "RandomResizedCrop or Resize + CenterCrop first, then %s" % type(step).__name__)
    if len(ctx.steps) == 1 and _family(step) is None and \
            getattr(step, "transforms", None) is not None:
        ctx.refuse("the transform is a %s object holding transforms, whose __call__ stoker "
                   "cannot see into (it reads through an object whose __call__ is exactly "
                   "`return self.transforms(img)`)" % type(step).__qualname__,
                   "give the dataset the Compose it holds, or such a wrapper")
    ctx.refuse("stoker needs the crop first", "RandomResizedCrop(...) [+ RandomHorizontalFlip] "
               "for training or Resize(int) + CenterCrop(size) for evaluation as the first steps")


def _resize(ctx, rs, kw):
    if getattr(rs, "max_size", None) is not None:
        ctx.refuse("max_size=%r" % (rs.max_size,), "Resize(int) without max_size")
    size = rs.size
    if isinstance(size, (list, tuple)) and len(size) == 1:
        size = size[0]
    interp = _interp(ctx, rs.interpolation)
    resize_i = ctx.i
    ctx.i += 1
    if isinstance(size, (list, tuple)):
        hw = _hw(size, "Resize")
        if not _loader_knows("interpolation"):   # the resize=(h, w) engine ships with it
            ctx.refuse("Resize(%r) resizes to a fixed height and width; stoker resizes the "
                       "shorter side only" % (list(size),),
                       "Resize(int) + CenterCrop(size)", i=resize_i)
        resize = hw
    else:
        resize = int(size)
    kw.update(interp)
    kw.update(train=False, resize=resize, dct_scaling=False)
    if ctx.at(("CenterCrop",)):
        kw["size"] = _hw(ctx.peek().size, "CenterCrop")
        ctx.i += 1
    elif isinstance(resize, tuple):
        kw["size"] = resize                      # Resize((h, w)) alone: the whole image
    else:
        ctx.refuse("Resize without a CenterCrop leaves images of varying size, which cannot be "
                   "batched", "Resize(%d) followed by CenterCrop(size)" % resize, i=resize_i)


# ---- per-sample augmentations ---------------------------------------------------------------

_AUGMENT_NAMES = {
    "TrivialAugmentWide", "RandAugment", "AutoAugment", "AugMix", "ColorJitter",
    "RandomGrayscale", "GaussianBlur", "RandomVerticalFlip", "RandomRotation", "RandomAffine",
    "RandomPerspective", "RandomPosterize", "RandomSolarize", "RandomAdjustSharpness",
    "RandomAutocontrast", "RandomEqualize", "RandomInvert", "RandomChannelPermutation",
    "RandomPhotometricDistort", "ElasticTransform", "RandomApply", "RandomChoice",
    "RandomOrder", "Grayscale", "GaussianNoise", "RandomErasing"}


def _augment_step(step, position, names):
    """The Loader's spec for the per-sample augmentation STEP (at POSITION of the list NAMES),
    or ValueError naming it and what to use instead."""
    at = "%s at position %d of %s" % (_full_name(step), position, names)
    try:
        spec = _augment.spec_for(step, position)
    except _augment.Unsupported as e:
        _refuse(at, str(e), "change it as said, or keep torch's DataLoader for this recipe",
                at=position)
    if spec is not None:
        return spec
    fam, name = _kind(step)
    if name in ("MixUp", "CutMix", "Mixup") and (fam is not None or isinstance(
            step, (_mix._Base, _mix.RandomChoice))):
        _refuse(at, "%s mixes batches (images and labels together), not one image: in the "
                "dataset's transform torchvision raises on it too" % name,
                "pass it as collate_fn= (or batch_transform=) to the DataLoader", at=position)
    if fam is not None and (name in _AUGMENT_NAMES or fam == "timm"):
        _refuse(at, "a per-sample augmentation stoker does not run yet",
                "remove it, or keep torch's DataLoader for this recipe", at=position)
    _refuse(at, "a transform stoker does not know",
            "the steps stoker runs, or torch's DataLoader for this pipeline", at=position)


def _erasing_step(step, position, names):
    """The Loader's spec for RandomErasing STEP after the conversion and Normalize, or
    ValueError naming it."""
    spec = _augment.spec_for(step, position)
    if spec is not None:
        return spec
    _refuse("%s at position %d of %s" % (_full_name(step), position, names),
            "stoker does not erase yet", "remove it, or keep torch's DataLoader for this recipe",
            at=position)


# ---- conversion and values -------------------------------------------------------------------

def _conversion_kind(step):
    """How STEP turns a PIL image into a tensor: "float" (ToTensor: x / 255), "uint8"
    (PILToTensor, v2.ToImage), "raw" (timm's ToTensor: x as float, unscaled), "numpy" (timm's
    ToNumpy), or None when it is no conversion."""
    if _is(step, ("ToTensor",)) or _is(step, ("MaybeToTensor",), ("timm",)):
        return "float"
    if _is(step, ("PILToTensor",)) or _is(step, ("ToImage",), ("v2",)) or \
            _is(step, ("MaybePILToTensor",), ("timm",)):
        return "uint8"
    if _is(step, ("ToTensor",), ("timm",)):
        return "raw"
    if _is(step, ("ToNumpy",), ("timm",)):
        return "numpy"
    return None


def _is_erasing(step):
    return _is(step, ("RandomErasing",), ("v1", "v2", "timm"))


def _is_dtype_step(step):
    return _is(step, ("ConvertImageDtype",)) or _is(step, ("ToDtype",), ("v2",))


def _dtype_of(ctx, step):
    """The torch dtype a ConvertImageDtype / ToDtype step converts images to."""
    want = step.dtype
    if isinstance(want, dict):   # v2.ToDtype({tv_tensors.Image: dtype, "others": ...})
        img = [v for k, v in want.items() if getattr(k, "__name__", k) in ("Image", "others")]
        if len(set(img)) != 1:
            ctx.refuse("dtype=%r (no single dtype for images)" % (want,),
                       "ToDtype(torch.float32, scale=True)")
        want = img[0]
    return want


def _values(ctx, kw):
    """Conversion, dtype and Normalize (and augmentations on uint8 tensors between them):
    return the steps that map each 8-bit value to the output value, in order."""
    step = ctx.peek()
    kind = _conversion_kind(step) if step is not None else None
    if kind is None:
        return None
    if kind == "numpy":
        ctx.refuse("it yields NumPy arrays for timm's prefetcher collate",
                   "create_transform(..., use_prefetcher=False) (MaybeToTensor)")
    chain = [step]
    ctx.i += 1
    floats = kind != "uint8"
    import torch
    while ctx.peek() is not None:
        s = ctx.peek()
        if _is_dtype_step(s):
            want = _dtype_of(ctx, s)
            if want not in (torch.float32, torch.float16, torch.uint8):
                ctx.refuse("dtype %s" % (want,), "torch.float32 or torch.float16")
            floats = floats or want != torch.uint8
            chain.append(s)
        elif _is(s, ("Normalize",)):
            if not floats:
                ctx.refuse("Normalize on uint8 images (torchvision refuses it too)",
                           "ConvertImageDtype(torch.float32) / v2.ToDtype(torch.float32, "
                           "scale=True) before Normalize")
            chain.append(s)
        elif _is(s, ("ToPureTensor",), ("v2",)):
            pass              # stoker's batches are plain tensors already
        elif not floats and _conversion_kind(s) is None and not _is_erasing(s):
            kw.setdefault("augment", []).append(_augment_step(s, ctx.i, ctx.whole))
        else:
            break
        ctx.i += 1
    return chain


def _value_table(ctx, chain):
    """Run CHAIN (a conversion, then dtype and Normalize steps) on an image holding every 8-bit
    value in each channel: the loader then looks the values up, so its output equals
    torchvision's bit for bit. Returns (dtype name, 3x256 float32 table or None)."""
    import torch
    from PIL import Image
    ramp = np.repeat(np.arange(256, dtype=np.uint8).reshape(1, 256, 1), 3, axis=2)
    x = Image.fromarray(ramp, "RGB")
    try:
        for s in chain:
            x = s(x)
    except Exception as e:   # noqa: BLE001 — torchvision's own complaint, passed on
        ctx.refuse("torchvision fails on it (%s: %s)" % (type(e).__name__, e),
                   "Normalize(mean, std) with 1 or 3 channels", i=ctx.steps.index(s))
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != (3, 1, 256):
        ctx.refuse("the conversion gives %r, not a 3-channel image tensor" % (type(x),),
                   "ToTensor() or PILToTensor()", i=ctx.steps.index(chain[0]))
    out_type = type(x)
    x = x.as_subclass(torch.Tensor) if type(x) is not torch.Tensor else x
    names = {torch.uint8: "uint8", torch.float32: "float32", torch.float16: "float16"}
    if x.dtype not in names:
        ctx.refuse("output dtype %s" % (x.dtype,), "float32, float16 or uint8",
                   i=ctx.steps.index(chain[-1]))
    if x.dtype == torch.uint8:
        if not torch.equal(x.reshape(3, 256), torch.arange(256, dtype=torch.uint8).repeat(3, 1)):
            ctx.refuse("it changes 8-bit values", "PILToTensor()", i=ctx.steps.index(chain[-1]))
        return "uint8", None, out_type
    table = x.reshape(3, 256).float().contiguous().numpy().astype(np.float32)
    if not np.isfinite(table).all():
        ctx.refuse("it gives non-finite values (a zero std?)", "Normalize with std > 0",
                   i=ctx.steps.index(chain[-1]))
    return names[x.dtype], table, out_type


def parse_transform(transform):
    """The library's settings for a torchvision (v1 or v2) or timm transform, or ValueError
    (Refusal) naming the step that is not supported, its position and what to use instead.
    Returns a dict of stoker.Loader keyword arguments (with "train")."""
    _tv()
    if transform is None:
        _refuse("a dataset without a transform (PIL images of varying size cannot be batched)")
    steps, whole = _flatten(transform)
    return _parse(steps, whole, open_end=False)[0]


def _parse(steps, whole, open_end):
    """(Loader keyword arguments, the type each sample has after STEPS: PIL's Image class when
    they end before the conversion — only with OPEN_END —, else the tensor class) or Refusal
    with ``at`` set to the position of the step it is about."""
    ctx = _Ctx(steps, whole)
    try:
        return _parse_ctx(ctx, open_end)
    except Refusal as e:
        if e.at is None:
            e.at = min(ctx.i, len(steps))
        raise


def _parse_ctx(ctx, open_end):
    kw, whole = {}, ctx.whole
    _geometry(ctx, kw)                          # crop / resize [+ flip]
    while ctx.peek() is not None and _conversion_kind(ctx.peek()) is None and not _is_erasing(
            ctx.peek()):
        kw.setdefault("augment", []).append(_augment_step(ctx.peek(), ctx.i, whole))
        ctx.i += 1
    chain = _values(ctx, kw)                    # ToTensor / PILToTensor ... [+ Normalize]
    if chain is None:
        if open_end and ctx.peek() is None:     # PIL images (uint8 HWC) go on to Python
            from PIL import Image
            kw.update(dtype="uint8", layout="NHWC")
            return kw, Image.Image
        ctx.refuse("stoker needs a conversion to a tensor after the crop%s" % (
            " and augmentations" if kw.get("augment") else ""),
            "ToTensor() [+ Normalize], PILToTensor() [+ ConvertImageDtype], v2.ToImage() "
            "[+ v2.ToDtype(torch.float32, scale=True)], or timm's MaybeToTensor()")
    pure = False
    while ctx.peek() is not None:              # after the values: RandomErasing, ToPureTensor
        s = ctx.peek()
        if _is_erasing(s):
            kw.setdefault("augment", []).append(_erasing_step(s, ctx.i, whole))
        elif _is(s, ("ToPureTensor",), ("v2",)):
            pure = True
        else:
            if _conversion_kind(s) is not None or _is_dtype_step(s) or _is(s, ("Normalize",)):
                ctx.refuse("a second conversion or a Normalize after RandomErasing",
                           "one conversion, then Normalize, then RandomErasing")
            if _is(s, _AUGMENT_NAMES) or _family(s) == "timm":
                ctx.refuse("an augmentation on float images after the conversion",
                           "put it before ToTensor / ConvertImageDtype (on PIL or uint8)")
            _augment_step(s, ctx.i, whole)    # names it (unknown transform)
        ctx.i += 1
    kw["dtype"], table, out_type = _value_table(ctx, chain)
    if table is not None:
        kw["value_table"] = table
    if pure or any(_is(s, ("ToPureTensor",), ("v2",)) for s in ctx.steps[:ctx.steps.index(
            chain[0])]):
        import torch
        out_type = torch.Tensor
    return kw, out_type


class Split:
    """A transform cut in two (split_transform): ``kw``, the stoker.Loader keyword arguments of
    the longest prefix stoker reproduces exactly (None when not even the crop is: then nothing
    runs in C); ``tail``, the remaining steps, run in Python on each sample; ``sample_type``,
    what each sample is when the tail gets it (PIL.Image.Image before the conversion, else the
    tensor class, e.g. torchvision.tv_tensors.Image after v2.ToImage); ``names`` the prefix's
    and tail's step names; ``reason``, why the cut is where it is (None without a tail)."""

    def __init__(self, steps, whole, cut, kw, sample_type, reason):
        self.steps, self.whole, self.cut = steps, whole, cut
        self.kw, self.sample_type, self.reason = kw, sample_type, reason
        self.prefix, self.tail = steps[:cut], steps[cut:]

    @property
    def names(self):
        return ([type(s).__name__ for s in self.prefix], [type(s).__name__ for s in self.tail])

    def __repr__(self):
        c, p = self.names
        return "Split(C: %s | Python: %s)" % (", ".join(c) or "-", ", ".join(p) or "-")


def split_transform(transform):
    """The transform cut where stoker stops reproducing it exactly (a Split): the longest
    prefix that runs in C (decode, crop or resize, the known augmentations, the conversion,
    Normalize, RandomErasing) and the tail of steps after it, which torch's semantics run on
    each sample in Python. Never raises for an unknown step: the first one starts the tail."""
    _tv()
    if transform is None:
        return Split([], "no transform", 0, None, None,
                     "a dataset without a transform (PIL images of varying size)")
    steps, whole = _flatten(transform)
    n, reason = len(steps), None
    while n > 0:
        try:
            kw, sample_type = _parse(steps[:n], whole, open_end=True)
            return Split(steps, whole, n, kw, sample_type, reason)
        except Refusal as e:
            reason = e.cause
            n = e.at if e.at is not None and e.at < n else 0
    if reason is None:
        reason = "an empty transform (PIL images of varying size)"
    return Split(steps, whole, 0, None, None, reason)
