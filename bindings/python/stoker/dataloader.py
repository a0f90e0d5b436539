# SPDX-License-Identifier: MIT
"""stoker.DataLoader: torch.utils.data.DataLoader's signature over stoker.Loader.

The dataset is a torchvision ImageFolder (a subclass that loads as it does, a Subset of one, or
a stoker.ImageFolder, which also reads a packed copy) whose transform is one of the ImageNet
recipes, written with torchvision.transforms, .v2 or timm; the loader reads the same files, in
the same sample order and with the same labels, and hands out what torchvision's DataLoader
would (float32 / float16 NCHW from the conversion [+ Normalize], uint8 from PILToTensor; int64
labels). The transform is read by stoker.transforms.parse_transform.
"""

import io
import os
import warnings

from . import _lib
from .dataset import Dataset
from . import mix as _mix
from .loader import Loader
# parse_transform and SUPPORTED moved to stoker.transforms; imported here so that
# `from stoker.dataloader import parse_transform` keeps working.
from .transforms import SUPPORTED, _refuse, _tv, parse_transform  # noqa: F401
from . import pytail as _pytail
from . import transforms as _tf

class ImageFolder:
    """An image dataset stoker reads: an ImageFolder root or a packed copy of one
    (``stoker pack ROOT DST``), with torchvision ImageFolder's ``root``, ``classes``,
    ``class_to_idx``, ``transform``, ``target_transform`` and ``len``. ``ds[i]`` decodes record
    i with PIL and applies the transforms, so the same object also feeds torch's DataLoader —
    with worker processes too: it pickles without its library handle (spawn, forkserver) and
    each process, a fork() child included, opens the dataset again on first use.
    Pass it to stoker.DataLoader to read the packed copy."""

    def __init__(self, root, transform=None, target_transform=None):
        self.root = _lib.path_arg(root)
        self.transform = transform
        self.target_transform = target_transform
        self._handle, self._pid = Dataset(self.root), os.getpid()
        self.classes = self._handle.classes
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self._len = len(self._handle)

    @property
    def _ds(self):
        """This process's handle: the one opened here, else a new one (after fork or unpickling)."""
        if self._handle is None or self._pid != os.getpid():
            self._handle, self._pid = Dataset(self.root), os.getpid()
        return self._handle

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handle"], state["_pid"] = None, None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __len__(self):
        return self._len

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


# DatasetFolder / ImageFolder methods that decide which files, which labels and which pixels a
# sample has: a subclass that overrides one is no longer what stoker reads.
_LOADING = ("__getitem__", "__getitems__", "__len__", "find_classes", "make_dataset", "loader")


def _resolve_dataset(dataset):
    """(the ImageFolder stoker reads, the Subset's dataset indices or None) for DATASET, or
    ValueError naming what stoker cannot read exactly."""
    import torch.utils.data as tud
    _, D = _tv()
    indices = None
    while type(dataset) is tud.Subset:          # a Subset of a Subset composes the lists
        idx = [int(i) for i in dataset.indices]
        indices = idx if indices is None else [idx[i] for i in indices]
        dataset = dataset.dataset
        if not idx:
            _refuse("an empty Subset (no sample to batch)")
    if isinstance(dataset, ImageFolder):
        if type(dataset) is not ImageFolder:
            _refuse("a subclass of stoker.ImageFolder (%s)" % type(dataset).__qualname__)
        return dataset, _subset_indices(indices, len(dataset))
    if not isinstance(dataset, D.ImageFolder):
        own = "its own __getitem__" if hasattr(type(dataset), "__getitem__") else \
            "no __getitem__ stoker knows"
        _refuse("dataset %s" % type(dataset).__name__,
                "a dataset with %s: stoker reads and decodes the files of an ImageFolder "
                "itself and cannot run a dataset's own code" % own,
                "torchvision.datasets.ImageFolder, a Subset of one, or stoker.ImageFolder "
                "(a packed copy); without strict=True torch's DataLoader runs it unchanged")
    cls = type(dataset)
    if cls is not D.ImageFolder:
        for klass in cls.__mro__:
            if klass is D.ImageFolder:
                break
            over = [m for m in _LOADING if m in vars(klass)]
            if over:
                _refuse("%s.%s" % (klass.__module__, klass.__qualname__),
                        "a subclass of ImageFolder that overrides %s, while stoker reads the "
                        "files, labels and pixels as ImageFolder does" % ", ".join(over),
                        "a subclass that overrides none of %s, or torch's DataLoader"
                        % ", ".join(_LOADING))
    if dataset.loader is not D.folder.default_loader:
        name = getattr(dataset.loader, "__qualname__", None) or repr(dataset.loader)
        mod = getattr(dataset.loader, "__module__", "") or ""
        if mod.startswith("torchvision.io") or name in ("decode_image", "read_image"):
            _refuse("ImageFolder(loader=%s.%s)" % (mod, name),
                    "the transforms then run on uint8 tensors, resized by torch's interpolation "
                    "rather than PIL's (and a grayscale JPEG stays one channel)",
                    "the default loader (PIL), whose pixels stoker reproduces")
        _refuse("ImageFolder(loader=%r) (instead: the default loader)" % (dataset.loader,))
    return dataset, _subset_indices(indices, len(dataset))


def _subset_indices(indices, n):
    """A Subset's indices into a dataset of N samples, negative ones counted from the end as
    dataset[-1] does; ValueError for one outside it."""
    if indices is None:
        return None
    if not all(-n <= i < n for i in indices):
        raise ValueError("stoker.DataLoader: a Subset with an index outside its dataset's %d "
                         "samples" % n)
    return [i + n if i < 0 else i for i in indices]


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
    collate_fn may be default_collate, a MixUp / CutMix / RandomChoice object itself, or a
    function that is exactly ``mix(*default_collate(batch))`` (stoker.pytail.collate_mix)."""
    default = collate_fn is None or collate_fn is getattr(torch.utils.data, "default_collate", None)
    if batch_transform is not None and not default:
        _refuse("collate_fn=%r together with batch_transform=%r" % (collate_fn, batch_transform))
    if default:
        return None if batch_transform is None else _mix.as_mix(batch_transform)
    found = _pytail.collate_mix(collate_fn)
    if found is not None:
        return found
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
    runs in Python instead, with torch's semantics (stoker.pytail: the transform's steps after
    the C prefix, target_transform and an unknown collate_fn in num_workers worker processes; a
    dataset stoker cannot read on torch's own DataLoader), said in one warning; with
    ``strict=True`` it raises ValueError naming it (see stoker.transforms.SUPPORTED).

    Arguments as DataLoader's, with these meanings:
      num_workers: decode threads. 0 (DataLoader's "load in this process") means the library's
        default count: stoker always decodes in threads of this process, never in worker
        processes, so 0 does not mean one thread. A Python tail (above) runs in num_workers
        worker processes, as torch's DataLoader would (0: in this process).
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
      in_order (torch >= 2.6): True or False, same batches: stoker's order never depends on
        which decode thread finishes first, so there is nothing out of order to allow.
      dataset: a torch.utils.data.Subset delivers exactly its indices (each epoch a permutation
        of them with shuffle, their order without), with the labels of the dataset below it.
      collate_fn / batch_transform: None / default_collate, or a batch mix (stoker.MixUp,
        stoker.CutMix, stoker.RandomChoice, torchvision v2's MixUp / CutMix / RandomChoice,
        timm's Mixup): each batch is mixed in place and yields (images, soft targets N x
        classes float32), as ``mix(*default_collate(batch))`` would (stoker.Loader's mix=);
        so is a function that is exactly ``mix(*default_collate(batch))``. Any other
        collate_fn is called in Python on the list of (sample, target) pairs, as torch does.
      strict: refuse (ValueError) whatever does not run entirely in C, instead of running it
        in Python.
    Batches may be kept as long as wanted (list(loader), prefetching wrappers): see
    stoker.Loader on batch lifetime.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True, max_size=None, batch_transform=None, strict=False):
        import torch
        _, D = _tv()
        # ---- pytail: what runs in Python (stoker.pytail) --------------------------------
        self._strict, self._plan, self._tail, self._torch_dl = bool(strict), None, None, None
        if not strict:
            self._plan = plan = _pytail.plan(dataset, collate_fn, batch_transform,
                                             _resolve_dataset) if batch_size is not None else \
                _pytail.Plan("torch", reason="batch_size=None (unbatched samples)")
            _pytail.warn(plan, num_workers)
            if plan.mode == "torch":
                self._torch_dl = _pytail.torch_loader(
                    dataset, batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                    batch_sampler=batch_sampler, num_workers=num_workers,
                    collate_fn=collate_fn, pin_memory=pin_memory, drop_last=drop_last,
                    timeout=timeout, worker_init_fn=worker_init_fn,
                    multiprocessing_context=multiprocessing_context, generator=generator,
                    prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                    pin_memory_device=pin_memory_device, in_order=in_order)
                self._h, self._closed, self.dataset = None, True, dataset
                self.batch_size, self.num_workers = batch_size, num_workers
                self.sampler, self.collate_fn = self._torch_dl.sampler, collate_fn
                self.worker_init_fn, self.generator = worker_init_fn, generator
                return
            worker_init_fn_, multiprocessing_context_ = worker_init_fn, multiprocessing_context
            worker_init_fn = multiprocessing_context = None
            collate_fn, batch_transform = None, plan.mix
        # ---- end pytail -------------------------------------------------------------------
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

        if in_order not in (True, False):
            raise ValueError("in_order must be True or False, not %r" % (in_order,))
        if self._plan is not None:                                  # pytail
            base, indices, kw = self._plan.base, self._plan.indices, dict(self._plan.kw)
        else:
            base, indices = _resolve_dataset(dataset)
            if base.target_transform is not None:
                _refuse("target_transform=%r" % (base.target_transform,))
            kw = parse_transform(base.transform)
        root = base.root
        self._tf_size = (kw["size"], kw.get("resize"))
        shuffle_, seed, rank, world, mode = _sampler_args(sampler, shuffle, generator, dataset)
        train = kw.pop("train")
        super().__init__(root, batch_size, train=train, workers=num_workers or None,
                         shuffle=shuffle_, seed=seed, drop_last=drop_last, rank=rank,
                         world_size=world, dist_mode=mode, strict=True,
                         timeout=timeout or None, prefetch=prefetch_factor,
                         pin_memory=pin_memory, max_size=max_size, target="label",
                         indices=indices, mix=mix, **kw)
        if len(self.dataset) != len(base) or list(self.dataset.classes) != list(base.classes):
            n_lib, n_tv = len(self.dataset), len(base)
            self.close()
            _refuse("this dataset: libstoker lists %d samples in %d classes at %s, the dataset "
                    "object %d in %d classes (a custom is_valid_file or extensions?)"
                    % (n_lib, len(self.dataset.classes), root, n_tv, len(base.classes)))
        self._base = base
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
        self.in_order = in_order
        self.multiprocessing_context = None
        self.worker_init_fn = None
        self._user_sampler = sampler
        self._last_sampler_epoch = None
        if self._plan is not None and self._plan.mode == "tail":     # pytail
            self._tail = _pytail.TailRunner(
                self._plan, batch_size, self._max_size or self.size, dataset, dict(
                    num_workers=num_workers, worker_init_fn=worker_init_fn_,
                    multiprocessing_context=multiprocessing_context_, generator=generator,
                    prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                    pin_memory=pin_memory, pin_memory_device=pin_memory_device,
                    timeout=timeout))
            self.worker_init_fn, self.multiprocessing_context = (worker_init_fn_,
                                                                 multiprocessing_context_)
            self.collate_fn = self._plan.collate_fn

    @property
    def decode_threads(self):
        """The library's decode threads (num_workers=0 picks the library's default)."""
        return self._threads

    def _follow_transform(self):
        """Progressive resizing as with torchvision: a crop size changed in the dataset's
        transform since the last pass (``dataset.transform.transforms[0].size = 192``) reaches
        the library as Loader.set_size, re-read at every ``for``."""
        kw = (parse_transform(self._base.transform) if self._strict else
              _tf.split_transform(self._base.transform).kw)
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
        if self._torch_dl is not None:                                # pytail: torch runs it
            return iter(self._torch_dl)
        if self._tail is not None:                                    # pytail: Python tail
            self._tail.end_pass()
            return self._tail.iterate(self._iter_c(), len(self))
        return self._iter_c()

    def __len__(self):
        return len(self._torch_dl) if self._torch_dl is not None else Loader.__len__(self)

    def close(self):
        if getattr(self, "_tail", None) is not None:
            self._tail.close()
        if getattr(self, "_torch_dl", None) is None:
            Loader.close(self)

    def _iter_c(self):
        self._usable()
        with self._consuming():         # one consumer thread; reentrant for this one
            self._check_no_live_iter()   # before set_epoch / a new size would end it
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
        if self._torch_dl is not None:
            return "stoker.DataLoader(%r, on torch's DataLoader)" % (self.dataset,)
        return "stoker.DataLoader(%r, batch_size=%d, num_workers=%d, %s)" % (
            self.dataset, self.batch_size, self.num_workers, Loader.__repr__(self))
