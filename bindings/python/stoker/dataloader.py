# SPDX-License-Identifier: MIT
"""stoker.DataLoader: torch.utils.data.DataLoader's signature over stoker.Loader.

The dataset is a torchvision ImageFolder (or a stoker.ImageFolder, which also reads a packed
copy) whose transform is one of the ImageNet recipes; the loader reads the same files, in the
same sample order and with the same labels, and hands out what torchvision's DataLoader would
(float32 NCHW from ToTensor [+ Normalize], uint8 from PILToTensor; int64 labels). Whatever it
cannot reproduce exactly is refused with ValueError naming it: nothing is approximated behind
the caller's back.
"""

import io
import os
import sys
import warnings

import numpy as np

from . import _lib
from .dataset import Dataset
from . import mix as _mix
from .loader import Loader

SUPPORTED = """stoker.DataLoader supports:
  dataset: torchvision.datasets.ImageFolder (default loader, no target_transform) or
           stoker.ImageFolder (an ImageFolder root or a packed copy from `stoker pack`)
  transform: Compose of
      train: RandomResizedCrop(size, scale, ratio, interpolation=BILINEAR[, antialias])
             [, RandomHorizontalFlip(p)]
      eval:  Resize(int, interpolation=BILINEAR, max_size=None), CenterCrop(size)
    then:  ToTensor() [, Normalize(mean, std)]              -> float32
        |  PILToTensor() [, ConvertImageDtype(torch.float32) [, Normalize(mean, std)]]
                                                             -> uint8 / float32
  sampler: None, SequentialSampler, RandomSampler (no replacement, no num_samples),
           torch DistributedSampler, stoker.ExactDistributedSampler
  collate_fn / batch_transform: MixUp, CutMix, RandomChoice of them (stoker's, torchvision
           v2's, timm's Mixup), applied to each batch in place: labels become soft targets
  not supported: batch_sampler, other collate_fn, worker_init_fn, multiprocessing_context,
           batch_size=None, a custom ImageFolder loader or is_valid_file"""


def _refuse(what):
    raise ValueError("stoker.DataLoader cannot reproduce %s exactly, so it refuses it.\n%s"
                     % (what, SUPPORTED))


def _tv():
    try:
        import torchvision.transforms as T
        import torchvision.datasets as D
    except ImportError as e:
        raise ImportError("stoker.DataLoader needs torchvision (%s)" % e) from None
    return T, D


def _bilinear(interp):
    T, _ = _tv()
    mode = getattr(T, "InterpolationMode", None)
    if mode is not None and interp == mode.BILINEAR:
        return True
    return interp == 2   # PIL.Image.BILINEAR, accepted by older torchvision


def _hw(size, what):
    if isinstance(size, int):
        return size, size
    size = tuple(size)
    if len(size) == 1:
        return int(size[0]), int(size[0])
    if len(size) == 2:
        return int(size[0]), int(size[1])
    _refuse("%s with size %r" % (what, size))


def parse_transform(transform):
    """The library's settings for a torchvision transform, or ValueError naming what is not
    supported. Returns a dict of stoker.Loader keyword arguments."""
    T, _ = _tv()
    torch = sys.modules.get("torch")
    steps = list(transform.transforms) if isinstance(transform, T.Compose) else [transform]
    if transform is None or not steps:
        _refuse("a dataset without a transform (PIL images of varying size cannot be batched)")
    names = [type(t).__name__ for t in steps]
    kw = {}
    i = 0

    def at(cls):
        return i < len(steps) and type(steps[i]) is cls

    # geometry
    if at(T.RandomResizedCrop):
        rrc = steps[i]
        if not _bilinear(rrc.interpolation):
            _refuse("RandomResizedCrop(interpolation=%s)" % (rrc.interpolation,))
        kw.update(train=True, size=_hw(rrc.size, "RandomResizedCrop"),
                  scale=tuple(float(x) for x in rrc.scale),
                  ratio=tuple(float(x) for x in rrc.ratio), flip_prob=0.0)
        i += 1
        if at(T.RandomHorizontalFlip):
            kw["flip_prob"] = float(steps[i].p)
            i += 1
    elif at(T.Resize):
        rs = steps[i]
        size = rs.size
        if isinstance(size, (list, tuple)):
            if len(size) != 1:
                _refuse("Resize(%r) (a fixed height and width; only Resize(int), the shorter "
                        "side, is supported)" % (list(size),))
            size = size[0]
        if getattr(rs, "max_size", None) is not None:
            _refuse("Resize(max_size=%r)" % rs.max_size)
        if not _bilinear(rs.interpolation):
            _refuse("Resize(interpolation=%s)" % (rs.interpolation,))
        i += 1
        if not at(T.CenterCrop):
            _refuse("Resize without a CenterCrop right after it (transforms: %s)" % names)
        kw.update(train=False, resize=int(size), size=_hw(steps[i].size, "CenterCrop"),
                  dct_scaling=False)
        i += 1
    else:
        _refuse("the transform %s first (transforms: %s)" % (names[0] if names else None, names))

    # conversion
    dtype, normalize = None, None
    if at(T.ToTensor):
        dtype = "float32"
        i += 1
    elif at(T.PILToTensor):
        dtype = "uint8"
        i += 1
        if at(T.ConvertImageDtype):
            want = steps[i].dtype
            if torch is not None and want == torch.float32:
                dtype = "float32"
            elif torch is not None and want == torch.uint8:
                pass
            else:
                _refuse("ConvertImageDtype(%s) (float32 or uint8 only)" % (want,))
            i += 1
    else:
        _refuse("the transform %s after the crop (transforms: %s)"
                % (names[i] if i < len(names) else "(none)", names))
    if at(T.Normalize):
        if dtype != "float32":
            _refuse("Normalize on uint8 images")
        normalize = steps[i]
        i += 1
    if i != len(steps):
        _refuse("the transform %s at position %d (transforms: %s)" % (names[i], i, names))
    kw["dtype"] = dtype
    if normalize is not None:
        kw["value_table"] = _normalize_table(normalize)
    elif dtype == "float32":
        kw["mean"], kw["std"] = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)   # x / 255, as ToTensor
    return kw


def _normalize_table(norm):
    """Normalize(ToTensor(x)) for every 8-bit value x and channel, computed by torchvision
    itself: the loader looks values up, so its floats equal torchvision's bit for bit."""
    import torch
    x = torch.arange(256, dtype=torch.float32).div(255)        # ToTensor / ConvertImageDtype
    mean = list(norm.mean) if np.ndim(norm.mean) else [float(norm.mean)]
    if len(mean) not in (1, 3) or np.ndim(norm.std) and len(list(norm.std)) not in (1, 3):
        _refuse("Normalize with %d channels (RGB images have 3)" % len(mean))
    img = x.view(1, 1, 256).repeat(3, 1, 1)
    out = norm(img.clone())
    return out.reshape(3, 256).contiguous().numpy().astype(np.float32)


class ImageFolder:
    """An image dataset stoker reads: an ImageFolder root or a packed copy of one
    (``stoker pack ROOT DST``), with torchvision ImageFolder's ``root``, ``classes``,
    ``class_to_idx``, ``transform``, ``target_transform`` and ``len``. ``ds[i]`` decodes record
    i with PIL and applies the transforms, so the same object also feeds torch's DataLoader.
    Pass it to stoker.DataLoader to read the packed copy."""

    def __init__(self, root, transform=None, target_transform=None):
        self.root = os.fspath(root)
        self.transform = transform
        self.target_transform = target_transform
        self._ds = Dataset(self.root)
        self.classes = self._ds.classes
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return len(self._ds)

    def __getitem__(self, i):
        from PIL import Image
        data, label = self._ds.read(i)
        img = Image.open(io.BytesIO(data)).convert("RGB")
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return img, label

    def __repr__(self):
        return "stoker.ImageFolder(%r, %d records, %d classes)" % (
            self.root, len(self), len(self.classes))


def _exact_sampler_class():
    from torch.utils.data.distributed import DistributedSampler

    class ExactDistributedSampler(DistributedSampler):
        """DistributedSampler without padding or dropping: rank r gets the epoch's positions
        r, r + W, r + 2W, ... below N, so the ranks' parts (sizes differing by at most one)
        hold every sample exactly once — for validation that counts each sample once.

        Ranks may then run different numbers of batches: never use it where every step runs
        a collective (DDP training), only in eval loops that gather once at the end. Works
        with torch's DataLoader too; stoker.DataLoader maps it to the library's EXACT mode."""

        def __init__(self, dataset, num_replicas=None, rank=None, shuffle=False, seed=0):
            super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                             seed=seed, drop_last=False)
            n = len(self.dataset)
            self.num_samples = len(range(self.rank, n, self.num_replicas))
            self.total_size = n

        def __iter__(self):
            import torch
            n = len(self.dataset)
            if self.shuffle:
                g = torch.Generator()
                g.manual_seed(self.seed + self.epoch)
                order = torch.randperm(n, generator=g).tolist()
            else:
                order = list(range(n))
            return iter(order[self.rank:n:self.num_replicas])

        def __len__(self):
            return self.num_samples

    return ExactDistributedSampler


_EXACT = {}


def __getattr__(name):   # stoker.ExactDistributedSampler needs torch: built on first use
    if name == "ExactDistributedSampler":
        if "cls" not in _EXACT:
            _EXACT["cls"] = _exact_sampler_class()
        return _EXACT["cls"]
    raise AttributeError(name)


def _sampler_args(sampler, shuffle, generator, dataset):
    """(shuffle, seed, rank, world_size, dist_mode) for SAMPLER, or ValueError."""
    import torch
    from torch.utils.data import RandomSampler, SequentialSampler
    from torch.utils.data.distributed import DistributedSampler
    if generator is not None and not isinstance(generator, torch.Generator):
        _refuse("generator=%r (a torch.Generator)" % (generator,))
    if sampler is None:
        if shuffle:
            seed = generator.initial_seed() if generator is not None else int(
                torch.empty((), dtype=torch.int64).random_().item())
        else:
            seed = 0
        return bool(shuffle), seed, 0, 1, "pad"
    if shuffle:
        raise ValueError("DataLoader option shuffle is mutually exclusive with sampler "
                         "(as torch's DataLoader)")
    if type(sampler) is SequentialSampler:
        return False, 0, 0, 1, "pad"
    if type(sampler) is RandomSampler:
        if sampler.replacement or getattr(sampler, "_num_samples", None) is not None:
            _refuse("RandomSampler(replacement=%s, num_samples=%s)"
                    % (sampler.replacement, getattr(sampler, "_num_samples", None)))
        gen = sampler.generator if sampler.generator is not None else generator
        seed = gen.initial_seed() if gen is not None else int(
            torch.empty((), dtype=torch.int64).random_().item())
        return True, seed, 0, 1, "pad"
    exact = __getattr__("ExactDistributedSampler")
    if type(sampler) in (DistributedSampler, exact):
        if sampler.dataset is not dataset:
            _refuse("a DistributedSampler over another dataset than the DataLoader's")
        mode = "exact" if type(sampler) is exact else ("drop" if sampler.drop_last else "pad")
        return (bool(sampler.shuffle), int(sampler.seed), int(sampler.rank),
                int(sampler.num_replicas), mode)
    _refuse("sampler=%s" % type(sampler).__name__)


def _batch_mix(collate_fn, batch_transform, torch):
    """The batch-level mix of collate_fn / batch_transform (stoker.mix.as_mix), or None.
    collate_fn may be default_collate, or a MixUp / CutMix / RandomChoice object itself;
    a function wrapping one (``lambda b: mix(*default_collate(b))``) cannot be looked into."""
    default = collate_fn is None or collate_fn is getattr(torch.utils.data, "default_collate", None)
    if batch_transform is not None and not default:
        _refuse("collate_fn=%r together with batch_transform=%r" % (collate_fn, batch_transform))
    if default:
        return None if batch_transform is None else _mix.as_mix(batch_transform)
    try:
        return _mix.as_mix(collate_fn)
    except ValueError:
        pass
    _refuse("collate_fn=%r (for MixUp / CutMix pass the object itself as collate_fn= or "
            "batch_transform=: stoker.MixUp, stoker.CutMix, stoker.RandomChoice, torchvision "
            "v2's MixUp / CutMix / RandomChoice or timm's Mixup)" % (collate_fn,))


class DataLoader(Loader):
    """``torch.utils.data.DataLoader`` for an ImageFolder, decoded and augmented by libstoker:
    ``from stoker import DataLoader`` is the one changed line of a training script.

    Yields (images, labels) as torchvision's DataLoader does for the same dataset: images an
    N×3×H×W float32 tensor (ToTensor [+ Normalize]) or uint8 (PILToTensor), labels int64, the
    same sample order without shuffling. Eval transforms (Resize + CenterCrop) give the same
    values bit for bit; train transforms draw RandomResizedCrop and the flip from the same
    distributions (the crop is decoded at a reduced DCT scale when that covers it, so pixels
    differ from a full decode by the PSNR the tests bound). What it cannot reproduce exactly
    raises ValueError naming it (see stoker.dataloader.SUPPORTED).

    Arguments as DataLoader's, with these meanings:
      num_workers: decode threads. 0 (DataLoader's "load in this process") means the library's
        default count: stoker always decodes in threads of this process, never in worker
        processes, so 0 does not mean one thread.
      shuffle / generator / sampler: the order is a keyed permutation of (seed, epoch) computed
        in the library (not torch's randperm): the seed is generator.initial_seed(), the
        sampler's generator or seed, else drawn from torch's global RNG (torch.manual_seed makes
        it reproducible). Each ``for`` runs the next epoch (new order and augmentation) unless
        a DistributedSampler is given: then each ``for`` runs ``sampler.epoch`` (call
        ``sampler.set_epoch(e)`` every epoch, as DistributedSampler requires).
      DistributedSampler: its rank, num_replicas, shuffle, seed and drop_last (pad or drop);
        stoker.ExactDistributedSampler: unequal parts, every sample once (eval only).
      pin_memory: page-locked batches when CUDA is usable, so .to("cuda", non_blocking=True)
        is asynchronous; otherwise a warning and ``loader.pin_memory_reason`` say why.
      prefetch_factor: batches prepared ahead (library ring slots, 2..64; default 4).
      persistent_workers: the library's threads always persist between epochs.
      timeout: seconds to wait for a batch (0 = no limit).
      collate_fn / batch_transform: None / default_collate, or a batch mix (stoker.MixUp,
        stoker.CutMix, stoker.RandomChoice, torchvision v2's MixUp / CutMix / RandomChoice,
        timm's Mixup): each batch is mixed in place and yields (images, soft targets N x
        classes float32), as ``mix(*default_collate(batch))`` would (stoker.Loader's mix=).
    Batches may be kept as long as wanted (list(loader), prefetching wrappers): see
    stoker.Loader on batch lifetime.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 max_size=None, batch_transform=None):
        import torch
        _, D = _tv()
        if batch_sampler is not None:
            _refuse("batch_sampler=%s (give batch_size, drop_last and sampler)"
                    % type(batch_sampler).__name__)
        if batch_size is None:
            _refuse("batch_size=None (unbatched samples)")
        mix = _batch_mix(collate_fn, batch_transform, torch)
        if worker_init_fn is not None:
            _refuse("worker_init_fn=%r (stoker has no worker processes)" % (worker_init_fn,))
        if multiprocessing_context is not None:
            _refuse("multiprocessing_context=%r (stoker has no worker processes)"
                    % (multiprocessing_context,))
        if pin_memory_device not in ("", "cuda") and not str(pin_memory_device).startswith(
                "cuda:"):
            _refuse("pin_memory_device=%r" % (pin_memory_device,))
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")

        if isinstance(dataset, ImageFolder):
            root = dataset.root
        elif type(dataset) is D.ImageFolder:
            root = dataset.root
            if dataset.loader is not D.folder.default_loader:
                _refuse("ImageFolder(loader=%r)" % (dataset.loader,))
        else:
            _refuse("dataset %s" % type(dataset).__name__)
        if dataset.target_transform is not None:
            _refuse("target_transform=%r" % (dataset.target_transform,))
        kw = parse_transform(dataset.transform)
        self._tf_size = (kw["size"], kw.get("resize"))
        shuffle_, seed, rank, world, mode = _sampler_args(sampler, shuffle, generator, dataset)
        train = kw.pop("train")
        super().__init__(root, batch_size, train=train, workers=num_workers or None,
                         shuffle=shuffle_, seed=seed, drop_last=drop_last, rank=rank,
                         world_size=world, dist_mode=mode, strict=True,
                         timeout=timeout or None, prefetch=prefetch_factor,
                         pin_memory=pin_memory, max_size=max_size, target="label", mix=mix,
                         **kw)
        if len(self.dataset) != len(dataset) or list(self.dataset.classes) != list(
                dataset.classes):
            n_lib, n_tv = len(self.dataset), len(dataset)
            self.close()
            _refuse("this dataset: libstoker lists %d samples in %d classes at %s, the dataset "
                    "object %d in %d classes (a custom is_valid_file or extensions?)"
                    % (n_lib, len(self.dataset.classes), root, n_tv, len(dataset.classes)))
        self._threads = self.num_workers
        self.dataset = dataset
        if sampler is not None:
            self.sampler = sampler
        self.num_workers = num_workers
        self.batch_sampler = None
        self.collate_fn = None
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device
        self.multiprocessing_context = None
        self.worker_init_fn = None
        self._user_sampler = sampler
        self._last_sampler_epoch = None

    @property
    def decode_threads(self):
        """The library's decode threads (num_workers=0 picks the library's default)."""
        return self._threads

    def _follow_transform(self):
        """Progressive resizing as with torchvision: a crop size changed in the dataset's
        transform since the last pass (``dataset.transform.transforms[0].size = 192``) reaches
        the library as Loader.set_size, re-read at every ``for``."""
        kw = parse_transform(self.dataset.transform)
        size, resize = kw["size"], kw.get("resize")
        if (size, resize) == self._tf_size:
            return
        if resize != self._tf_size[1]:
            _refuse("Resize(%r) changed to Resize(%r) between epochs (only the crop size may "
                    "change; build a new DataLoader)" % (self._tf_size[1], resize))
        if self._started and self._max_size is None:
            raise ValueError("the transform's crop size changed to %r, but this DataLoader was "
                             "built without max_size: pass stoker.DataLoader(..., max_size="
                             "largest (height, width)) to change the size between epochs"
                             % (size,))
        self._end_iteration()            # a new `for` ends the previous pass anyway
        self.set_size(*size)
        self._tf_size = (size, resize)

    def __iter__(self):
        self._follow_transform()
        s = self._user_sampler
        if s is not None and hasattr(s, "set_epoch"):
            e = int(getattr(s, "epoch", 0))
            if e == self._last_sampler_epoch and self.train:
                warnings.warn("stoker.DataLoader: sampler.epoch is still %d: this pass repeats "
                              "the order and the augmentation of the last one (call "
                              "sampler.set_epoch(epoch) every epoch)" % e, stacklevel=2)
            self._last_sampler_epoch = e
            self.set_epoch(e)
        return super().__iter__()

    def __repr__(self):
        return "stoker.DataLoader(%r, batch_size=%d, num_workers=%d, %s)" % (
            self.dataset, self.batch_size, self.num_workers, Loader.__repr__(self))
