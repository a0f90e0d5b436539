# SPDX-License-Identifier: MIT
"""stoker.DataLoader: torch.utils.data.DataLoader's signature over stoker.Loader.

The dataset is a torchvision ImageFolder (a subclass that loads as it does, a Subset of one,
timm's ImageDataset over a folder (stoker._timm), or a stoker.ImageFolder, which also reads a
packed copy) whose transform is one of the ImageNet
recipes, written with torchvision.transforms, .v2 or timm; the loader reads the same files, in
the same sample order and with the same labels, and hands out what torchvision's DataLoader
would (float32 / float16 NCHW from the conversion [+ Normalize], uint8 from PILToTensor; int64
labels). The transform is read by stoker.transforms.parse_transform.
"""

import io
import os
import sys
import warnings
import weakref

import numpy as np

from . import _lib
from .dataset import Dataset
from . import mix as _mix
from .loader import Loader
# parse_transform and SUPPORTED moved to stoker.transforms; imported here so that
# `from stoker.dataloader import parse_transform` keeps working.
from .transforms import SUPPORTED, _refuse, _tv, parse_transform  # noqa: F401
from . import pytail as _pytail
from . import _timm
from . import transforms as _tf

class ImageFolder:
    """An image dataset stoker reads: an ImageFolder root or a packed copy of one
    (``stoker pack ROOT DST``), with torchvision ImageFolder's ``root``, ``classes``,
    ``class_to_idx``, ``transform``, ``target_transform`` and ``len``. ``ds[i]`` decodes record
    i with PIL and applies the transforms, so the same object also feeds torch's DataLoader —
    with worker processes too: it pickles without its library handle (spawn, forkserver) and
    each process, a fork() child included, opens the dataset again on first use.
    Pass it to stoker.DataLoader to read the packed copy. ROOT may be ``"s3://bucket/prefix"``
    (since 0.5): fetched into the cache directory CACHE (limit CACHE_BYTES; docs/S3.md), which
    stoker.DataLoader uses too. SHUFFLE_WINDOW=W (an s3:// ROOT): stoker.DataLoader reads in the
    shard-window order (stoker.Loader's ``shuffle_window``), streaming: nothing is fetched here,
    the loader's first epoch fetches the shards as it reads them (``classes`` is then empty until
    a loader has read the first shard; ``ds[i]`` reads only shards a loader has cached)."""

    def __init__(self, root, transform=None, target_transform=None, *, cache=None,
                 cache_bytes=None, shuffle_window=None):
        self.root = _lib.path_arg(root)
        self.transform = transform
        self.target_transform = target_transform
        self.cache, self.cache_bytes = cache, cache_bytes
        self.shuffle_window = shuffle_window
        self._handle, self._pid = self._open(), os.getpid()
        self.classes = self._handle.classes
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self._len = len(self._handle)

    @property
    def _ds(self):
        """This process's handle: the one opened here, else a new one (after fork or unpickling)."""
        if self._handle is None or self._pid != os.getpid():
            self._handle, self._pid = self._open(), os.getpid()
        return self._handle

    def _open(self):
        return Dataset(self.root, cache=getattr(self, "cache", None),
                      cache_bytes=getattr(self, "cache_bytes", None),
                      stream=bool(getattr(self, "shuffle_window", None)))

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


def __getattr__(name):   # stoker.ExactDistributedSampler / DataLoader need torch: built on first use
    if name == "ExactDistributedSampler":
        if "cls" not in _EXACT:
            _EXACT["cls"] = _exact_sampler_class()
        return _EXACT["cls"]
    if name == "DataLoader":     # a torch.utils.data.DataLoader subclass
        if "dl" not in _EXACT:
            _EXACT["dl"] = _dataloader_class()
        return _EXACT["dl"]
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
    if _timm.is_timm_dataset(dataset):         # timm's ImageDataset over a folder: read through
        idx = _subset_indices(indices, len(dataset))
        base, order = _timm.resolve(dataset)
        return base, (order if idx is None else [order[i] for i in idx])
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


def _streamed(base):
    """Whether BASE (a stoker.ImageFolder over s3://) is read streaming, in the shard-window
    order (docs/S3.md "Streaming"): a shuffle_window, or a cache limit below its bytes."""
    if not isinstance(base, ImageFolder) or not str(base.root).startswith("s3://"):
        return False
    if getattr(base, "shuffle_window", None):
        return True
    limit = base._ds.fetch_stats()["cache_limit"]
    return 0 < limit < base._ds.info()["file_bytes"]


def _sampler_args(sampler, shuffle, generator, dataset):
    """(shuffle, seed, rank, world_size, dist_mode) for a SAMPLER whose order the library
    computes itself (None, SequentialSampler, RandomSampler without replacement or num_samples,
    DistributedSampler, stoker.ExactDistributedSampler), or None for any other sampler: its
    indices are then drawn in Python once per pass (_draw_mode)."""
    import torch
    from torch.utils.data import RandomSampler, SequentialSampler
    from torch.utils.data.distributed import DistributedSampler
    if generator is not None and not isinstance(generator, torch.Generator):
        _refuse("generator=%r (a torch.Generator)" % (generator,))
    if sampler is None:
        # no sampler: under an initialised process group rank and world come from
        # torch.distributed (stoker.Loader's default), as DistributedSampler's would; the ranks
        # must then share the seed: a generator's (seeded alike on every rank), else
        # DistributedSampler's default, 0 (each rank's global RNG may differ)
        from .loader import resolve_distributed
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = resolve_distributed(None, None)
        else:
            rank, world = 0, 1
        if shuffle and generator is not None:
            seed = generator.initial_seed()
        elif shuffle and world == 1:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        else:
            seed = 0
        return bool(shuffle), seed, rank, world, "pad"
    if shuffle:
        raise ValueError("DataLoader option shuffle is mutually exclusive with sampler "
                         "(as torch's DataLoader)")
    if type(sampler) is SequentialSampler:
        return False, 0, 0, 1, "pad"
    if type(sampler) is RandomSampler:
        if sampler.replacement or getattr(sampler, "_num_samples", None) is not None:
            return None
        gen = sampler.generator if sampler.generator is not None else generator
        seed = gen.initial_seed() if gen is not None else int(
            torch.empty((), dtype=torch.int64).random_().item())
        return True, seed, 0, 1, "pad"
    exact = __getattr__("ExactDistributedSampler")
    if type(sampler) in (DistributedSampler, exact) and sampler.dataset is dataset:
        mode = "exact" if type(sampler) is exact else ("drop" if sampler.drop_last else "pad")
        return (bool(sampler.shuffle), int(sampler.seed), int(sampler.rank),
                int(sampler.num_replicas), mode)
    return None


def _draw_key_base(sampler):
    """STK_P_DRAW_KEY for a sampler drawn in Python: the draws are keyed by position in this
    rank's pass, offset by rank << 40 so that two ranks (RASampler hands copies of one image
    to several ranks at the same position) never draw alike."""
    from .loader import resolve_distributed
    rank = getattr(sampler, "rank", None)
    if not isinstance(rank, int) or rank < 0:
        dist = sys.modules.get("torch.distributed")
        up = dist is not None and dist.is_available() and dist.is_initialized()
        rank = resolve_distributed(None, None)[0] if up else 0
    return int(rank) << 40


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


class _Pass:
    """iter(stoker.DataLoader): one pass, begun lazily at the first next(): frameworks create
    the epoch's iterator before they call sampler.set_epoch(epoch) (Lightning does), so the
    sampler's epoch is read then, not at iter(). The library runs one pass at a time: a pass
    that begins ends the earlier one, so a pass abandoned (limit_train_batches) or exhausted
    but still referenced never blocks the next. Stepping an ended pass again: StopIteration if
    it had delivered all its batches, else RuntimeError (its epoch would be cut short)."""

    __slots__ = ("_dl", "_it", "ended", "__weakref__")

    def __init__(self, dl):
        self._dl = dl
        self._it = None
        self.ended = False                # a later pass began

    def __iter__(self):
        return self

    def __next__(self):
        if self.ended:
            it = self._it
            if it is None or it.batches < len(self._dl):
                raise RuntimeError(
                    "this stoker.DataLoader iterator (%s) was ended by a later iter() of the same "
                    "DataLoader: stoker runs one pass at a time; finish a pass before the next "
                    "one begins" % ("not begun" if it is None else "epoch %d, batch %d of %d"
                                    % (it.epoch, it.batches, len(self._dl))))
            raise StopIteration
        if self._it is None:
            self._it = self._dl._begin_pass(self)
        return next(self._it)

    def __len__(self):
        return len(self._dl)

    def close(self):
        """End this pass now (as leaving the ``for`` does)."""
        if self._it is not None:
            self._it.close()
        else:
            self._it = _Closed

    def __repr__(self):
        return "<stoker.DataLoader iterator: %s>" % (
            "not begun" if self._it is None else repr(self._it)[1:-1])


def _batch_sampler_size(bs):
    """The batch size a batch sampler BS yields: its ``batch_size``, else that of the batch
    sampler it wraps (``.batch_sampler``: Accelerate's SkipBatchSampler has none of its own),
    divided by ``num_processes`` where a level splits each batch across processes
    (Accelerate's BatchSamplerShard(split_batches=True)); None when none is found."""
    div = 1
    for _ in range(32):
        if bs is None:
            return None
        if getattr(bs, "split_batches", False):
            procs = getattr(bs, "num_processes", None)
            if not isinstance(procs, int) or procs < 1:
                return None
            div *= procs
        size = getattr(bs, "batch_size", None)
        if isinstance(size, int) and size >= 1:
            return size // div if size % div == 0 else None
        bs = getattr(bs, "batch_sampler", None)
    return None


# ---- Hugging Face Accelerate ------------------------------------------------------------------
# Accelerate's prepare() and skip_first_batches() rebuild a DataLoader from its dataset, a batch
# sampler wrapping the original one (BatchSamplerShard: this process's share; SkipBatchSampler)
# and its other arguments, read as attributes, by calling the name DataLoader of
# accelerate.data_loader. stoker.DataLoader replaces that name (once accelerate.data_loader is
# imported: at once or, if later, through a one-shot import hook) by _accelerate_dataloader,
# which builds a stoker.DataLoader when the batch sampler wraps that of a stoker.DataLoader
# (_ACCEL: its batch_sampler -> the stoker-only arguments), else calls the DataLoader that was
# there (torch's, or stoker.launch's). The new stoker.DataLoader draws the sharded batch sampler
# in Python at each pass, so stoker decodes exactly Accelerate's share.
_ACCEL = weakref.WeakKeyDictionary()
_ACCEL_STATE = {"hook": None}


def _accelerate_dataloader(prior):
    def DataLoader(dataset, *args, **kwargs):
        bsamp = kwargs.get("batch_sampler")
        extra = None
        for _ in range(32):
            if bsamp is None:
                break
            try:
                extra = _ACCEL.get(bsamp)
            except TypeError:        # not weak-referenceable: not one of ours
                extra = None
            if extra is not None:
                break
            bsamp = getattr(bsamp, "batch_sampler", None)
        if extra is None or args:
            return prior(dataset, *args, **kwargs)
        kw = dict(kwargs)
        kw.update(extra)
        return __getattr__("DataLoader")(dataset, **kw)
    DataLoader._stoker_prior = prior
    DataLoader.__doc__ = ("accelerate.data_loader.DataLoader as replaced by stoker.DataLoader: "
                          "a stoker.DataLoader for a batch sampler that wraps one's, else %r"
                          % (prior,))
    return DataLoader


def _patch_accelerate(module):
    cur = getattr(module, "DataLoader", None)
    if cur is None or getattr(cur, "_stoker_prior", None) is not None:
        return
    module.DataLoader = _accelerate_dataloader(cur)


class _AccelerateImportHook:
    """A one-shot meta path finder: patches accelerate.data_loader right after it executes."""

    def find_spec(self, name, path=None, target=None):
        if name != "accelerate.data_loader":
            return None
        import importlib.util
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        _ACCEL_STATE["hook"] = None
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch_accelerate(module)
        spec.loader.exec_module = exec_module
        return spec


def _accelerate_register(dl, extra):
    """Make Accelerate's rebuilds of stoker.DataLoader DL stoker's (see _ACCEL)."""
    bs = getattr(dl, "batch_sampler", None)
    if bs is None:
        return
    try:
        _ACCEL[bs] = extra
    except TypeError:
        return
    mod = sys.modules.get("accelerate.data_loader")
    if mod is not None:
        _patch_accelerate(mod)
    elif _ACCEL_STATE["hook"] is None:
        hook = _ACCEL_STATE["hook"] = _AccelerateImportHook()
        sys.meta_path.insert(0, hook)


class _ClosedPass:
    """The inner iterator of a pass closed before it began."""
    epoch, batches = -1, 0

    def __next__(self):
        raise StopIteration


_Closed = _ClosedPass()


# stoker.DataLoader sets its own attributes with object.__setattr__: Lightning records every
# setattr made outside a wrapped __init__ and replays it on the DataLoader it rebuilds (with a
# DistributedSampler), which would hand the new one the old one's stoker.Loader
_own = object.__setattr__


def _dataloader_class():
    try:
        import torch.utils.data as tud
    except ImportError as e:
        raise ImportError("stoker.DataLoader is a torch.utils.data.DataLoader and needs torch "
                          "(%s); stoker.Loader works without it" % e) from None
    import inspect

    torch_params = set(inspect.signature(tud.DataLoader.__init__).parameters)

    class DataLoader(tud.DataLoader):
        """``torch.utils.data.DataLoader`` for an ImageFolder, decoded and augmented by
        libstoker: ``from stoker import DataLoader`` is the one changed line of a training
        script. It is a torch DataLoader (isinstance holds; dataset, sampler, batch_sampler,
        batch_size, drop_last, collate_fn... are torch's attributes), so frameworks that
        inspect or rebuild one (Lightning's sampler injection, Accelerate) can; the batches
        come from a stoker.Loader it owns (``.loader``), whose methods it forwards: stats(),
        report(), state_dict() / load_state_dict(), set_epoch(), set_size(), close(), ...

        Yields (images, labels) as torchvision's DataLoader does for the same dataset: images
        an N×3×H×W float32 tensor (ToTensor [+ Normalize]) or uint8 (PILToTensor), labels
        int64, the same sample order without shuffling. Eval transforms (Resize + CenterCrop)
        give the same values bit for bit; train transforms draw RandomResizedCrop and the flip
        from the same distributions (the crop is decoded at a reduced DCT scale when that
        covers it, so pixels differ from a full decode by the PSNR the tests bound). What it
        cannot reproduce exactly runs in Python instead, with torch's semantics
        (stoker.pytail: the transform's steps after the C prefix, target_transform and an
        unknown collate_fn in num_workers worker processes; a dataset stoker cannot read on
        torch's own DataLoader), said in one warning; with ``strict=True`` it raises
        ValueError naming it (see stoker.transforms.SUPPORTED).

        Arguments as DataLoader's, with these meanings:
          num_workers: decode threads. 0 (DataLoader's "load in this process") means the
            library's default count: stoker always decodes in threads of this process, never
            in worker processes, so 0 does not mean one thread. A Python tail (above) runs in
            num_workers worker processes, as torch's DataLoader would (0: in this process).
          shuffle / generator: the order is a keyed permutation of (seed, epoch) computed in
            the library (not torch's randperm): the seed is generator.initial_seed(), else
            drawn from torch's global RNG (torch.manual_seed makes it reproducible). Each
            ``for`` runs the next epoch (new order and augmentation).
          no sampler under an initialised torch.distributed process group (torchrun + DDP):
            this rank's disjoint share, as stoker.Loader (rank and world from
            torch.distributed; every rank the same count, padded as DistributedSampler); the
            ranks share the seed: the generator's (seed it alike on every rank), else 0.
          sampler: SequentialSampler, RandomSampler (no replacement), DistributedSampler,
            stoker.ExactDistributedSampler: the order is computed in the library; with a
            DistributedSampler each ``for`` runs ``sampler.epoch`` (read at the pass's first
            batch: call ``sampler.set_epoch(e)`` before or after iter(), as Lightning does).
            Any other sampler (WeightedRandomSampler, RandomSampler(replacement=True or
            num_samples=), torchvision's RASampler, your own) and any batch_sampler: its
            indices are drawn in Python once per pass, at the pass's first batch, and the
            library reads exactly that order; a sampler with set_epoch() gets it first. The
            per-sample random draws are then keyed by (seed, epoch, rank, position in the
            pass), so a repeated index (RASampler's copies) is augmented differently per
            copy, the same for any num_workers and across a resume (which redraws the pass:
            exact when the sampler's draw depends only on its seed and epoch).
          pin_memory: page-locked batches when CUDA is usable, so .to("cuda",
            non_blocking=True) is asynchronous; otherwise a warning and
            ``loader.pin_memory_reason`` say why.
          prefetch_factor: batches prepared ahead (library ring slots, 2..64; default 4;
            with a Python tail, default 2 library slots, and torch's prefetch_factor
            for its worker processes).
          persistent_workers: the library's threads always persist between epochs.
          timeout: seconds to wait for a batch (0 = no limit).
          in_order (torch >= 2.6): True or False, same batches: stoker's order never depends
            on which decode thread finishes first.
          dataset: a torch.utils.data.Subset delivers exactly its indices (each epoch a
            permutation of them with shuffle, their order without), with the labels of the
            dataset below it. timm's ImageDataset over a folder is read in timm's order with
            timm's labels (stoker._timm).
          Accelerate: prepare() and skip_first_batches() rebuild the loader as a
            stoker.DataLoader over Accelerate's batch sampler (see _accelerate_dataloader).
          collate_fn / batch_transform: None / default_collate, or a batch mix (stoker.MixUp,
            stoker.CutMix, stoker.RandomChoice, torchvision v2's MixUp / CutMix / RandomChoice,
            timm's Mixup): each batch is mixed in place and yields (images, soft targets N x
            classes float32), as ``mix(*default_collate(batch))`` would; so is a function
            that is exactly ``mix(*default_collate(batch))``. Any other collate_fn is called
            in Python on the list of (sample, target) pairs, as torch does.
          strict: refuse (ValueError) whatever does not run entirely in C, instead of running
            it in Python.
        Passes: each iter() is one pass, begun at its first next(); a pass that begins ends
        an earlier one (abandoned, or exhausted but still referenced) instead of failing;
        stepping that earlier iterator again raises RuntimeError if it had batches left
        (StopIteration if not). set_epoch(e) twice leaves the pass of e going.
        Batches may be kept as long as wanted (list(loader), prefetching wrappers): see
        stoker.Loader on batch lifetime.
        """

        def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None,
                     batch_sampler=None, num_workers=0, collate_fn=None, pin_memory=False,
                     drop_last=False, timeout=0, worker_init_fn=None,
                     multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                     persistent_workers=False, pin_memory_device="", in_order=True,
                     max_size=None, batch_transform=None, strict=False):
            import torch
            _tv()
            _own(self, '_loader', None)
            accel_extra = dict(max_size=max_size, batch_transform=batch_transform, strict=strict)
            # ---- what runs in Python (stoker.pytail) ------------------------------------
            _own(self, '_strict', bool(strict))
            _own(self, '_plan', None)
            _own(self, '_tail', None)
            _own(self, '_torch_mode', False)
            if not strict:
                plan = (_pytail.plan(dataset, collate_fn, batch_transform, _resolve_dataset)
                        if batch_size is not None or batch_sampler is not None else
                        _pytail.Plan("torch", reason="batch_size=None (unbatched samples)"))
                _own(self, '_plan', plan)
                _pytail.warn(plan, num_workers)
                if plan.mode == "torch":         # torch's own DataLoader runs it, unchanged
                    targs = dict(dataset=dataset, batch_size=batch_size, shuffle=shuffle,
                                 sampler=sampler, batch_sampler=batch_sampler,
                                 num_workers=num_workers, collate_fn=collate_fn,
                                 pin_memory=pin_memory, drop_last=drop_last, timeout=timeout,
                                 worker_init_fn=worker_init_fn,
                                 multiprocessing_context=multiprocessing_context,
                                 generator=generator, prefetch_factor=prefetch_factor,
                                 persistent_workers=persistent_workers,
                                 pin_memory_device=pin_memory_device, in_order=in_order)
                    if prefetch_factor is None:
                        targs.pop("prefetch_factor")
                    if not pin_memory_device:
                        targs.pop("pin_memory_device")
                    super().__init__(**{k: v for k, v in targs.items() if k in torch_params})
                    _own(self, '_torch_mode', True)
                    return
                worker_init_fn_, multiprocessing_context_ = worker_init_fn, multiprocessing_context
                worker_init_fn = multiprocessing_context = None
                collate_fn_ = collate_fn
                collate_fn, batch_transform = None, plan.mix
            # ---- end of the Python part's set-up ----------------------------------------
            if batch_size is None and batch_sampler is None:
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
            if self._plan is not None:
                base, indices, kw = self._plan.base, self._plan.indices, dict(self._plan.kw)
            else:
                base, indices = _resolve_dataset(dataset)
                if base.target_transform is not None:
                    _refuse("target_transform=%r" % (base.target_transform,))
                kw = parse_transform(base.transform)

            # torch's own constructor: its checks (shuffle with sampler, batch_sampler with
            # batch_size...) and its attributes; worker settings are kept as given below
            targs = dict(dataset=dataset, batch_size=batch_size, shuffle=shuffle,
                         sampler=sampler, batch_sampler=batch_sampler, num_workers=0,
                         collate_fn=collate_fn, pin_memory=pin_memory, drop_last=drop_last,
                         timeout=timeout, generator=generator, in_order=in_order)
            if pin_memory_device:
                targs["pin_memory_device"] = pin_memory_device
            super().__init__(**{k: v for k, v in targs.items() if k in torch_params})
            for name, value in (("num_workers", num_workers),
                                ("prefetch_factor", prefetch_factor),
                                ("persistent_workers", persistent_workers)):
                _own(self, name, value)
            _own(self, 'worker_init_fn', None)
            if "in_order" not in torch_params:
                _own(self, 'in_order', in_order)

            # which sampler gives the order: the library's (known kinds) or drawn in Python
            bs, last = batch_size, drop_last
            order_sampler = sampler
            _own(self, "_batches_from", None)
            if batch_sampler is not None:
                if type(batch_sampler) is tud.BatchSampler:
                    order_sampler = batch_sampler.sampler
                    bs, last = batch_sampler.batch_size, batch_sampler.drop_last
                else:
                    bs = _batch_sampler_size(batch_sampler)
                    if bs is None:
                        _refuse("batch_sampler=%s without a batch_size attribute (stoker "
                                "delivers batches of one size, the last one shorter)"
                                % type(batch_sampler).__name__)
                    _own(self, '_batches_from', batch_sampler)
                    order_sampler, last = batch_sampler, False
            known = (None if self._batches_from is not None else
                     _sampler_args(order_sampler, shuffle, generator, dataset))
            _own(self, '_subset', indices)
            _own(self, '_draw', None)
            options = {}
            if known is not None:
                shuffle_, seed, rank, world, mode = known
                lib_indices = indices
            else:
                _own(self, '_draw', order_sampler)
                try:
                    n = len(order_sampler)
                except TypeError:
                    _refuse("sampler=%s without len() (stoker needs the pass's length up front)"
                            % type(order_sampler).__name__)
                if self._batches_from is not None:
                    n = n * bs            # batches: at most this many samples
                if n < 1:
                    _refuse("a sampler of length 0 (no sample to batch)")
                count = len(indices) if indices is not None else len(base)
                lib_indices = [(indices[i % count] if indices is not None else i % count)
                               for i in range(n)]   # a placeholder: each pass draws its own
                shuffle_, rank, world, mode = False, 0, 1, "pad"
                if _streamed(base):
                    # the library can read the draws only in the shard-window order over them
                    shuffle_ = bool(kw["train"])
                    warnings.warn(
                        "stoker.DataLoader: %s draws its indices in Python each pass, but %s "
                        "is streamed from its bucket in the shard-window order: each pass reads "
                        "that pass's draws (each index as often as drawn) %s, not in the "
                        "sampler's order (docs/S3.md \"Subsets of a streamed dataset\"); for "
                        "the sampler's own order give the dataset a cache that holds it "
                        "(cache_bytes of at least its size, no shuffle_window)"
                        % (type(order_sampler).__name__, base.root,
                           "shuffled within windows of shards" if shuffle_ else
                           "shard by shard in name order, in the draw's order within a shard"),
                        stacklevel=2)
                gen = generator if generator is not None else getattr(order_sampler,
                                                                      "generator", None)
                seed = gen.initial_seed() if isinstance(gen, torch.Generator) else int(
                    torch.empty((), dtype=torch.int64).random_().item())
                options[_lib.P_DRAW_KEY] = _draw_key_base(order_sampler)
            _own(self, '_epoch_sampler', order_sampler if hasattr(order_sampler, "set_epoch") else None)
            train = kw.pop("train")
            # a tail copies each batch out of the library's ring at once (its own ring,
            # in shared memory, holds the batches in flight): two library slots suffice
            tail = self._plan is not None and self._plan.mode == "tail"
            _own(self, '_tf_size', (kw["size"], kw.get("resize")))
            L = Loader(base.root, bs, train=train, workers=num_workers or None,
                       shuffle=shuffle_, seed=seed, drop_last=last, rank=rank,
                       world_size=world, dist_mode=mode, strict=True,
                       timeout=timeout or None, prefetch=(
                           2 if prefetch_factor is None and tail else prefetch_factor),
                       pin_memory=pin_memory, max_size=max_size, target="label",
                       indices=lib_indices, mix=mix, options=options,
                       cache=getattr(base, "cache", None),
                       cache_bytes=getattr(base, "cache_bytes", None),
                       shuffle_window=getattr(base, "shuffle_window", None), **kw)
            ds = L.dataset
            if len(ds) != len(base) or list(ds.classes) != list(base.classes):
                n_lib, n_tv = len(ds), len(base)
                L.close()
                _refuse("this dataset: libstoker lists %d samples in %d classes at %s, the "
                        "dataset object %d in %d classes (a custom is_valid_file or "
                        "extensions?)" % (n_lib, len(ds.classes), base.root, n_tv,
                                          len(base.classes)))
            if self._draw is not None:
                L._dataset_id()          # the state's identity: the dataset and pass length
            _own(self, '_loader', L)
            _own(self, '_base', base)
            _own(self, '_current', None)
            _own(self, '_last_sampler_epoch', None)
            if self._plan is not None and self._plan.mode == "tail":
                _own(self, '_tail', _pytail.TailRunner(
                    self._plan, bs, L._max_size or L.size, dataset, dict(
                        num_workers=num_workers, worker_init_fn=worker_init_fn_,
                        multiprocessing_context=multiprocessing_context_, generator=generator,
                        prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                        pin_memory=pin_memory, pin_memory_device=pin_memory_device,
                        timeout=timeout)))
                _own(self, 'worker_init_fn', worker_init_fn_)
                _own(self, 'multiprocessing_context', multiprocessing_context_)
                _own(self, 'collate_fn', collate_fn_)
            elif self._plan is not None and collate_fn_ is not None:
                _own(self, 'collate_fn', collate_fn_)   # the mix given, as torch would keep it
            _accelerate_register(self, accel_extra)

        # ---- the owned stoker.Loader ----------------------------------------------------
        @property
        def loader(self):
            """The stoker.Loader that makes the batches."""
            return self._loader

        def __getattr__(self, name):
            # what torch's DataLoader lacks comes from the stoker.Loader (stoker.DataLoader was
            # one until 0.5: every Loader attribute stays reachable)
            if not name.startswith("__"):
                L = self.__dict__.get("_loader")
                if L is not None:
                    return getattr(L, name)
            raise AttributeError("%r object has no attribute %r"
                                 % (type(self).__name__, name))

        @property
        def decode_threads(self):
            """The library's decode threads (num_workers=0 picks the library's default)."""
            return self._loader.num_workers

        def close(self):
            """Stop the library's threads and free its memory, and the Python part's worker
            processes (idempotent)."""
            if self.__dict__.get("_tail") is not None:
                self._tail.close()
            if self.__dict__.get("_loader") is not None:
                self._loader.close()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()
            return False

        def __len__(self):
            if self._torch_mode:
                return super().__len__()
            return len(self._loader)

        def state_dict(self):
            """stoker.Loader.state_dict() of the owned loader (Lightning saves it in its
            checkpoints and loads it on resume: the epoch goes on at the saved batch)."""
            if self._torch_mode:
                return {}                      # torch's DataLoader keeps no position either
            return self._loader.state_dict()

        def load_state_dict(self, state):
            """stoker.Loader.load_state_dict(): the next pass continues STATE's epoch."""
            if self._torch_mode:
                if state:
                    raise ValueError("stoker.DataLoader: this loader runs on torch's DataLoader "
                                     "(see its warning) and cannot resume a stoker state")
                return
            self._loader.load_state_dict(state)

        def set_epoch(self, epoch):
            """stoker.Loader.set_epoch(): the next pass runs EPOCH (a pass of EPOCH in
            progress goes on). Asking again for the epoch of the last pass, once that pass
            is over, repeats its order and augmentation: a warning says so (train or shuffle)."""
            if self._torch_mode:               # torch's DataLoader: its sampler's epoch
                if hasattr(self.sampler, "set_epoch"):
                    self.sampler.set_epoch(epoch)
                return
            L = self._loader
            if ((L.train or L.shuffle) and L._started and not L._in_progress() and L._resume is None
                    and int(epoch) == L._epoch - 1):
                warnings.warn("stoker.DataLoader.set_epoch(%d): the last pass ran epoch %d; the "
                              "next one repeats its order and augmentation" % (epoch, epoch),
                              stacklevel=2)
            L.set_epoch(epoch)

        # ---- passes ---------------------------------------------------------------------
        def _follow_transform(self, apply=True):
            """Progressive resizing as with torchvision: a crop size changed in the dataset's
            transform since the last pass (``dataset.transform.transforms[0].size = 192``)
            reaches the library as Loader.set_size, re-read at every pass."""
            kw = (parse_transform(self._base.transform) if self._strict else
                  _tf.split_transform(self._base.transform).kw)
            size, resize = kw["size"], kw.get("resize")
            if (size, resize) == self._tf_size:
                return
            if resize != self._tf_size[1]:
                _refuse("Resize(%r) changed to Resize(%r) between epochs (only the crop size "
                        "may change; build a new DataLoader)" % (self._tf_size[1], resize))
            L = self._loader
            if L._started and L._max_size is None:
                raise ValueError("the transform's crop size changed to %r, but this DataLoader "
                                 "was built without max_size: pass stoker.DataLoader(..., "
                                 "max_size=largest (height, width)) to change the size between "
                                 "epochs" % (size,))
            hw = L._hw(size, "size")
            if L._max_size is not None and (hw[0] > L._max_size[0] or hw[1] > L._max_size[1]):
                raise ValueError("the transform's crop size %r is above max_size=%r (the batch "
                                 "ring is sized for max_size; build the DataLoader with a larger "
                                 "one)" % (size, L._max_size))
            if not apply:
                return
            L.set_size(*size)
            _own(self, '_tf_size', (size, resize))

        def _drawn_order(self):
            """This pass's record order from the sampler (or batch sampler) drawn in Python."""
            s = self._draw
            if self._batches_from is not None:
                batches = [list(b) for b in s]
                bs = self._loader.batch_size
                for k, b in enumerate(batches):
                    if len(b) != bs and not (k == len(batches) - 1 and 0 < len(b) < bs):
                        raise ValueError(
                            "batch_sampler %s yielded a batch of %d samples at position %d "
                            "(stoker delivers batches of batch_size=%d, only the last one "
                            "shorter)" % (type(s).__name__, len(b), k, bs))
                order = [i for b in batches for i in b]
            else:
                order = list(s)
            n = len(self._subset) if self._subset is not None else len(self._base)
            out = np.empty(len(order), dtype=np.int64)
            for k, i in enumerate(order):
                i = int(i)
                if not -n <= i < n:
                    raise ValueError("the sampler drew index %d at position %d, outside the "
                                     "dataset's %d samples" % (i, k, n))
                i = i + n if i < 0 else i
                out[k] = self._subset[i] if self._subset is not None else i
            return out

        def _begin_pass(self, p):
            L = self._loader
            L._usable()
            with L._consuming():
                old = self._current() if self._current is not None else None
                if old is not None and old is not p:
                    old.ended = True       # an earlier pass, abandoned or exhausted, ends
                if L._in_progress():
                    L._drain()
                    L._end_iteration()
                _own(self, "_current", weakref.ref(p))
                self._follow_transform()
                s = self._epoch_sampler
                if s is not None:
                    e = int(getattr(s, "epoch", 0))
                    if L._resume is not None and L._resume[0] == e:
                        pass               # load_state_dict: the saved epoch goes on
                    else:
                        if e == self._last_sampler_epoch and L.train:
                            warnings.warn(
                                "stoker.DataLoader: sampler.epoch is still %d: this pass "
                                "repeats the order and the augmentation of the last one (call "
                                "sampler.set_epoch(epoch) every epoch)" % e, stacklevel=3)
                        L.set_epoch(e)
                    _own(self, '_last_sampler_epoch', e)
                if self._draw is not None:
                    L._set_order(self._drawn_order())
                return Loader.__iter__(L)

        def __iter__(self):
            if self._torch_mode:                   # a dataset or pipeline stoker cannot read
                return super().__iter__()
            self._loader._usable()
            with self._loader._consuming():    # another thread inside: RuntimeError naming it
                self._follow_transform(apply=False)   # a refused size change fails at iter()
            if self._tail is not None:             # the Python part on the C prefix's batches
                self._tail.end_pass()
                return self._tail.iterate(_Pass(self), len(self))
            return _Pass(self)

        def __del__(self):
            try:
                self.close()
            except Exception:   # noqa: BLE001 - never raise from a finaliser
                pass

        def __repr__(self):
            L = self.__dict__.get("_loader")
            if self.__dict__.get("_torch_mode"):
                return "stoker.DataLoader(%r, on torch's DataLoader)" % (self.dataset,)
            return "stoker.DataLoader(%r, batch_size=%s, num_workers=%d, %s)" % (
                self.dataset, self.batch_size, self.num_workers,
                Loader.__repr__(L) if L is not None else "not built")

    DataLoader.__module__ = __name__
    DataLoader.__qualname__ = "DataLoader"
    return DataLoader
