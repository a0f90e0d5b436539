# SPDX-License-Identifier: MIT
"""What stoker.DataLoader runs in Python: the steps after the C prefix, and what C cannot read.

stoker.DataLoader never refuses what torch's DataLoader accepts (unless strict=True). plan()
decides, once per loader, where each part runs:
  "c"      everything in the library (the pipeline stoker reproduces exactly);
  "tail"   the library reads, decodes and runs the longest prefix it reproduces exactly
           (stoker.transforms.split_transform); the remaining steps (the "tail"),
           target_transform and a collate_fn it does not know run in Python, with torch's
           semantics, in num_workers worker processes;
  "torch"  a dataset stoker cannot read at all (its own __getitem__, a custom loader): torch's
           own DataLoader runs it, unchanged.
describe() is the one warning per loader that says so.

The tail engine (TailRunner) is torch's own DataLoader over a view of a shared-memory ring:
each batch the library delivers is copied once into a slot of the ring (torch tensors in shared
memory, allocated before the workers start), and torch's DataLoader — its worker processes,
worker_init_fn, seeding, get_worker_info, collate_fn, pin_memory, timeout — runs the tail on
each (sample, target) of it and collates, exactly as it would have on the dataset. Only slot
and row numbers are pickled to the workers. A batch's slot is reused only after torch has
handed out that batch: torch keeps at most prefetch_factor x num_workers batches in flight, and
the ring has one slot more. With worker processes and default_collate, the workers stack each
batch's images into an out ring that is reused too (TailRunner), not into a new shared-memory
file per batch. What runs where, for users: bindings/python/README.md.
"""

import warnings

from . import mix as _mix
from . import transforms as _tf

__all__ = ["Plan", "plan", "TailRunner", "collate_mix", "describe"]


# ---- collate_fn: the batch mixes stoker runs in place ------------------------------------------

def _tpl_closure(mix, default_collate):
    def collate_fn(batch):
        return mix(*default_collate(batch))
    return collate_fn


_TPL_MIX = _TPL_DC = None


def _tpl_global(batch):
    return _TPL_MIX(*_TPL_DC(batch))      # only its code is compared


def _tpl_mix_closure(mix):
    def collate_fn(batch):
        return mix(*_TPL_DC(batch))
    return collate_fn


def _tpl_dc_closure(default_collate):
    def collate_fn(batch):
        return _TPL_MIX(*default_collate(batch))
    return collate_fn


def _templates():
    """The code shapes of ``mix(*default_collate(batch))``, each name a closure variable or a
    global."""
    return [_tf.code_shape(f.__code__) for f in (
        _tpl_closure(None, None), _tpl_global, _tpl_mix_closure(None), _tpl_dc_closure(None))]


def _default_collates():
    import torch.utils.data as tud
    found = {getattr(tud, "default_collate", None)}
    try:
        from torch.utils.data._utils.collate import default_collate
        found.add(default_collate)
    except ImportError:
        pass
    return found - {None}


def _timm_fast_collate(fn):
    """True for timm's fast_collate (timm.data.loader; create_loader's collate_fn with
    use_prefetcher): on uint8 CHW tensor samples with class-index targets it returns what
    default_collate does (the images stacked as uint8, the targets as int64)."""
    return (getattr(fn, "__qualname__", None) == "fast_collate" and
            getattr(fn, "__module__", None) == "timm.data.loader")


def _reference_mix(obj):
    """torchvision references' own RandomMixUp / RandomCutMix (references/classification/
    transforms.py, v1 path; RandomMixup / RandomCutmix before 0.16), recognised by class name,
    attributes and by the fact that they are not torchvision's or timm's classes: stoker's
    MixUp / CutMix of the same alpha, or None. Their p must be 1.0 (the script's own value);
    an object that deviates is left to Python."""
    cls = type(obj)
    name = cls.__name__
    if name not in ("RandomMixUp", "RandomCutMix", "RandomMixup", "RandomCutmix"):
        return None
    mod = getattr(cls, "__module__", "") or ""
    if mod.startswith(("torchvision.", "timm.", "stoker")):
        return None
    try:
        import torch
        if not isinstance(obj, torch.nn.Module):
            return None
    except ImportError:
        return None
    need = ("num_classes", "p", "alpha", "inplace")
    if not all(hasattr(obj, a) for a in need) or float(obj.p) != 1.0:
        return None              # inplace only decides whether they clone first: same result
    fwd = getattr(cls, "forward", None)
    code = getattr(fwd, "__code__", None)
    if code is None or code.co_argcount != 3:        # forward(self, batch, target)
        return None
    kind = _mix.MixUp if name.lower().startswith("randommix") else _mix.CutMix
    return kind(float(obj.alpha), int(obj.num_classes))


def _as_known_mix(obj):
    """stoker's mix for OBJ (stoker's, torchvision v2's, timm's, the references'), or None."""
    try:
        return _mix.as_mix(obj)
    except ValueError:
        pass
    found = _reference_mix(obj)
    if found is not None:
        return found
    # torchvision.transforms.RandomChoice (v1) of the references' classes
    if type(obj).__name__ == "RandomChoice" and isinstance(getattr(obj, "transforms", None),
                                                             (list, tuple)):
        inner = [_as_known_mix(t) for t in obj.transforms]
        p = getattr(obj, "p", None)
        if inner and all(m is not None for m in inner):
            return _mix.RandomChoice(inner, p)
    return None


def collate_mix(collate_fn):
    """stoker's in-place batch mix for COLLATE_FN, or None when it is something else: a mix
    object itself, or a function that is exactly ``mix(*default_collate(batch))`` (a closure
    or a global ``mix``, as torchvision's reference train.py writes it) — checked
    instruction by instruction and by the values its names hold, so anything else, however
    close, runs as the function it is."""
    if collate_fn is None:
        return None
    found = _as_known_mix(collate_fn)
    if found is not None:
        return found
    code = getattr(collate_fn, "__code__", None)
    if code is None or code.co_argcount != 1 or code.co_flags & 0x0C or \
            getattr(collate_fn, "__defaults__", None):
        return None
    shape = _tf.code_shape(code)
    if shape not in _templates():
        return None
    refs = _tf.code_refs(collate_fn)
    if len(refs) != 2 or refs[1] not in _default_collates():
        return None
    return _as_known_mix(refs[0])


class _MixCollate:
    """collate_fn for a known mix when the batch is collated in Python (a tail runs first):
    ``mix(*default_collate(batch))`` as the user meant it — torchvision v2's and timm's objects
    are called, stoker's own are applied with a generator drawn from the worker's torch RNG."""

    def __init__(self, obj, num_classes):
        self.obj, self.num_classes = obj, num_classes

    def __call__(self, batch):
        import numpy as np
        import torch
        from torch.utils.data import default_collate
        images, labels = default_collate(batch)
        if callable(self.obj):
            return self.obj(images, labels)
        m = _as_known_mix(self.obj)
        n = m.num_classes or self.num_classes
        rng = np.random.default_rng(int(torch.randint(0, 2 ** 62, ()).item()))
        return _mix.apply(m, images, labels, n, "NCHW", rng)


# ---- the plan ---------------------------------------------------------------------------------

class Plan:
    """Where a stoker.DataLoader's work runs (see the module's doc).

    mode: "c", "tail" or "torch". base, indices: the ImageFolder stoker reads and the Subset's
    indices (not for "torch"). split: the transform's Split (stoker.transforms). kw: the
    stoker.Loader keyword arguments of the C part (with "train"). mix: the batch mix the library
    applies in place ("c" only). collate_fn: what the tail engine collates with ("tail" only).
    target_transform: run on each label ("tail"). python: the steps that run in Python, as
    text; reason: why (the first one stoker does not reproduce)."""

    def __init__(self, mode, **kw):
        self.mode = mode
        self.base = self.indices = self.split = self.kw = self.mix = None
        self.collate_fn = self.target_transform = None
        self.python, self.reason = [], None
        self.__dict__.update(kw)


def plan(dataset, collate_fn, batch_transform, resolve_dataset):
    """The Plan for a stoker.DataLoader over DATASET (non-strict). RESOLVE_DATASET is
    dataloader._resolve_dataset: (ImageFolder, Subset indices) or ValueError."""
    import torch
    try:
        base, indices = resolve_dataset(dataset)
    except _tf.Refusal as e:
        return Plan("torch", reason=getattr(e, "cause", None) or str(e).split("\n")[0],
                    python=["the whole dataset (%s)" % type(dataset).__name__])
    split = _tf.split_transform(base.transform)
    if split.kw is None:
        return Plan("torch", reason=split.reason, split=split,
                    python=["the whole transform (%s)" % split.whole])
    default = (collate_fn is None or collate_fn in _default_collates() or
               (_timm_fast_collate(collate_fn) and not split.tail and
                split.kw.get("dtype") == "uint8"))
    if batch_transform is not None and not default:
        raise ValueError("stoker.DataLoader: collate_fn=%r together with batch_transform=%r: "
                         "give one" % (collate_fn, batch_transform))
    mix_obj = batch_transform if batch_transform is not None else (None if default else
                                                                  collate_fn)
    mix = None
    if mix_obj is not None:
        mix = collate_mix(mix_obj)
        if mix is None and batch_transform is not None:
            mix = _mix.as_mix(batch_transform)        # its own error names it
    python, why = [], split.reason
    if split.tail:
        python.append("%s (transform steps %d..%d, on each %s)" % (
            ", ".join(split.names[1]), split.cut, len(split.steps) - 1,
            "PIL image" if split.sample_type is not None and
            split.sample_type.__module__.startswith("PIL") else "tensor"))
    if base.target_transform is not None:
        python.append("target_transform %s" % _name(base.target_transform))
    custom = mix_obj is not None and mix is None
    if custom:
        python.append("collate_fn %s" % _name(collate_fn))
        why = why or "collate_fn %s is not a batch mix stoker runs in C" % _name(collate_fn)
    if not python:
        return Plan("c", base=base, indices=indices, split=split, kw=dict(split.kw), mix=mix)
    if mix is not None and _as_known_mix(mix_obj) is None:
        collate = mix_obj      # mix(*default_collate(batch)) itself, called as torch would
        python.append("collate_fn %s (the batch mix, after the steps above)" % _name(mix_obj))
    elif mix is not None:      # a mix object after a Python tail: collated in Python too
        collate = _MixCollate(mix_obj if callable(mix_obj) else mix, len(base.classes))
        python.append("the batch mix %s (after the steps above)" % _name(mix_obj))
    else:
        collate = collate_fn if collate_fn is not None else torch.utils.data.default_collate
    if why is None:
        why = "target_transform is Python code"
    return Plan("tail", base=base, indices=indices, split=split, kw=dict(split.kw),
                collate_fn=collate, target_transform=base.target_transform, python=python,
                reason=why)


def _name(obj):
    n = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return "<lambda>" if n.endswith("<lambda>") else n


def describe(p, num_workers):
    """The one warning text of a stoker.DataLoader with plan P."""
    if p.mode == "torch":
        return ("stoker.DataLoader: runs on torch's own DataLoader (nothing in C), because "
                "of %s. Same speed as torch's DataLoader; "
                "strict=True refuses instead." % p.reason)
    c = ["read, decode"] + p.split.names[0]
    where = ("%d worker processes (num_workers=%d)" % (num_workers, num_workers)
             if num_workers else "this process (num_workers=0)")
    return ("stoker.DataLoader: C runs %s; Python runs %s in %s (why: %s). Cost: one copy of each batch into shared memory plus the Python "
            "steps' own time; strict=True refuses instead."
            % (", ".join(c), "; ".join(p.python), where, p.reason))


def warn(p, num_workers, stacklevel=3):
    if p.mode != "c":
        warnings.warn(describe(p, num_workers), stacklevel=stacklevel)


def torch_loader(dataset, **kwargs):
    """torch's own DataLoader with the arguments given (those its version knows, None dropped
    where torch wants them absent) — the "torch" mode's engine."""
    import inspect
    import torch.utils.data as tud
    known = inspect.signature(tud.DataLoader.__init__).parameters
    kw = {k: v for k, v in kwargs.items() if k in known}
    if not kw.get("num_workers") or kw.get("prefetch_factor") is None:
        kw.pop("prefetch_factor", None)
    if kw.get("in_order", True) is True:
        kw.pop("in_order", None)
    return tud.DataLoader(dataset, **kw)


# ---- the tail engine ---------------------------------------------------------------------------

class _OutIndex(int):
    """The first index of a batch whose images _RingCollate stacks into an out-ring slot: the
    index itself and where the slot's file is: the main process's pid and descriptor (a worker
    opens /proc/PID/fd/FD, the file itself, no descriptor passed or left behind), its identity
    (st_dev, st_ino: checked, a descriptor number reused for another file is not taken) and
    its size."""

    def __new__(cls, i, pid, fd, key, nbytes):
        self = int.__new__(cls, i)
        self.pid, self.fd, self.key, self.nbytes = int(pid), int(fd), tuple(key), int(nbytes)
        return self

    def __reduce__(self):
        return _OutIndex, (int(self), self.pid, self.fd, self.key, self.nbytes)


class _RingDataset:
    """What torch's DataLoader indexes in tail mode: item k * batch_size + row is that row of
    the pass's batch k (input-ring slot k % in_slots), as the tail's input (a PIL image or a
    tensor), with its label; the tail, then target_transform, run on it. Attributes it does not
    have come from the user's dataset (get_worker_info().dataset.transform etc.). The _OutIndex
    of a batch says where _RingCollate stacks its images (out-ring slot k % out_slots)."""

    def __init__(self, ring, header, labels, batch, pil, sample_type, tail, target_transform,
                 dataset, out_slots):
        self.ring, self.header, self.labels, self.batch = ring, header, labels, batch
        self.pil, self.sample_type, self.tail = pil, sample_type, tail
        self.target_transform, self.dataset, self.out_slots = target_transform, dataset, out_slots
        self._out = None          # the out-ring storage of the batch being read (a worker's)
        self._out_maps = {}       # out slot -> (file identity, storage): each file mapped once

    def __getstate__(self):       # a spawned worker: its own maps
        d = dict(self.__dict__)
        d["_out"], d["_out_maps"] = None, {}
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("dataset", "_out", "_out_maps"):
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __len__(self):
        return self.ring.shape[0] * self.batch

    def _map_out(self, k, i):
        """The storage of the out-ring file that _OutIndex I of batch K names, or None (no
        such file any more: default_collate's own memory then)."""
        import os
        import torch
        s = k % self.out_slots
        have = self._out_maps.get(s)
        if have is not None and have[0] == i.key:
            return have[1]
        fd = os.open("/proc/%d/fd/%d" % (i.pid, i.fd), os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != i.key or st.st_size < i.nbytes:
                return None
            store = torch.UntypedStorage._new_shared_fd_cpu(fd, i.nbytes)
        finally:
            os.close(fd)
        self._out_maps[s] = (i.key, store)
        return store

    def __getitem__(self, i):
        import torch
        k, row = divmod(int(i), self.batch)
        slot = k % self.ring.shape[0]
        if row == 0:
            self._out = None
            if isinstance(i, _OutIndex):
                try:
                    self._out = self._map_out(k, i)
                except OSError:               # no out slot: default_collate's own memory
                    pass
        n, h, w, code = (int(v) for v in self.header[slot].tolist())
        if row >= n:
            raise IndexError("stoker tail: row %d of a batch of %d" % (row, n))
        if self.pil:
            from PIL import Image
            arr = self.ring[slot, :n * h * w * 3].view(n, h, w, 3)[row].numpy()
            x = Image.fromarray(arr.copy(), "RGB")
        else:
            _dtype_codes()
            dtype = _DTYPES[code]
            x = self.ring[slot].view(dtype)[:n * 3 * h * w].view(n, 3, h, w)[row].clone()
            if self.sample_type is not None and self.sample_type is not torch.Tensor:
                x = x.as_subclass(self.sample_type)
        for t in self.tail:
            x = t(x)
        y = int(self.labels[slot, row])
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y


class _RingCollate:
    """default_collate for a tail with worker processes: a batch of (tensor, int) pairs of one
    shape and dtype (what a tail on tensors gives) is collated exactly as default_collate does
    — [images stacked, labels as int64] — but the images are stacked into the batch's out-ring
    slot, shared memory the worker has already mapped, instead of into a new shared-memory
    file per batch (a file made, its pages faulted in and zeroed, mapped again by the main
    process and freed there: the larger part of a tail's own cost). Anything else goes to
    default_collate itself."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, batch):
        import torch
        from torch.utils.data import get_worker_info
        info = get_worker_info()
        ds = getattr(info, "dataset", None) if info is not None else None
        store = ds.__dict__.get("_out") if isinstance(ds, _RingDataset) else None
        if store is None or not batch:
            return self.collate(batch)
        ds._out = None
        x0 = batch[0][0] if type(batch[0]) is tuple and len(batch[0]) == 2 else None
        if type(x0) is not torch.Tensor or x0.requires_grad:
            return self.collate(batch)
        shape, dtype = x0.shape, x0.dtype
        for s in batch:
            if (type(s) is not tuple or len(s) != 2 or type(s[0]) is not torch.Tensor or
                    type(s[1]) is not int or s[0].shape != shape or s[0].dtype != dtype or
                    s[0].requires_grad):
                return self.collate(batch)
        n = len(batch)
        nbytes = n * x0.numel() * x0.element_size()
        if nbytes > store.nbytes() or x0.device.type != "cpu":
            return self.collate(batch)
        out = torch.empty(0, dtype=torch.uint8).set_(store)[:nbytes].view(dtype).view(
            (n,) + tuple(shape))
        torch.stack([s[0] for s in batch], 0, out=out)
        return [out, torch.tensor([s[1] for s in batch])]


_DTYPES = {}


def _dtype_codes():
    import torch
    if not _DTYPES:
        _DTYPES.update({0: torch.uint8, 1: torch.float16, 2: torch.float32})
    return {v: k for k, v in _DTYPES.items()}


_FED = "fed"      # an out slot's batch was sent to a worker and not yet handed to the user


class _Feeder:
    """The batch_sampler of the inner torch DataLoader: each index list it yields is one batch
    of the library's pass, copied into the next input-ring slot just before torch sends the
    list to a worker (torch asks for it in this process). With an out ring, the list's first
    index carries the out slot's file; a slot whose last batch the user may still hold (or that
    was never handed out: a pass left early) gets a new file first, so no batch handed out is
    ever written again."""

    def __init__(self, runner):
        self.runner = runner

    def __len__(self):
        return self.runner.batches

    def __iter__(self):
        import os
        r = self.runner
        src, r.source = r.source, None
        if src is None:
            return
        codes = _dtype_codes()
        B = r.batch_size
        k = 0
        for batch in src:
            slot = k % r.slots
            images, labels = batch[0], batch[1]
            n = int(images.shape[0])
            if r.pil:
                h, w = int(images.shape[1]), int(images.shape[2])
            else:
                h, w = int(images.shape[2]), int(images.shape[3])
            nbytes = images.numel() * images.element_size()
            if n > B or nbytes > r.ring.shape[1]:
                raise ValueError("stoker tail: a batch of %s does not fit the ring's slot of "
                                 "%d bytes (set_size above max_size?)" % (tuple(images.shape),
                                                                          r.ring.shape[1]))
            r.ring[slot].view(images.dtype)[:images.numel()].view(images.shape).copy_(images)
            r.labels[slot, :n].copy_(labels)
            r.header[slot, 0], r.header[slot, 1], r.header[slot, 2] = n, h, w
            r.header[slot, 3] = codes[images.dtype]
            del images, labels, batch          # the library's slot goes back
            first = k * B
            where = r._out_file(k % r.out_slots) if r.out_fds is not None else None
            if where is not None:
                first = _OutIndex(first, os.getpid(), where[0], where[1], r.ring.shape[1])
            yield [first] + list(range(k * B + 1, k * B + n))
            k += 1


class _TailIter:
    """The iterator a tail pass hands out: torch's, noting each batch handed out (a weak
    reference to its images' storage) so that its out slot is reused only once it is gone."""

    def __init__(self, runner, it):
        self.runner, self.it, self.k = runner, it, 0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.it)

    def __next__(self):
        batch = next(self.it)
        r = self.runner
        if r.out_fds is not None:
            s = self.k % r.out_slots
            x = batch[0] if isinstance(batch, (list, tuple)) and batch else None
            r.out_state[s] = _storage_ref(x)
        self.k += 1
        return batch

    def __getattr__(self, name):                 # torch's iterator's own attributes
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["it"], name)


def _storage_ref(x):
    """A weak reference to tensor X's storage (torch's own, as its multiprocessing uses), or
    None when X is not a tensor (then nothing of the out slot was handed out)."""
    import torch
    if not isinstance(x, torch.Tensor):
        return None
    from torch.multiprocessing.reductions import StorageWeakRef
    st = x.untyped_storage() if hasattr(x, "untyped_storage") else x.storage()
    return StorageWeakRef(st)


class TailRunner:
    """Runs a Plan's Python part on the batches of the C prefix, with torch's DataLoader.

    TailRunner(plan, batch_size, max_hw, dtype, dataset, loader_kwargs): loader_kwargs are
    torch's DataLoader arguments that apply to the Python part (num_workers, worker_init_fn,
    multiprocessing_context, generator, prefetch_factor, persistent_workers, pin_memory,
    pin_memory_device, timeout). iterate(batches, n) takes the library's iterator of
    (images, labels) and its batch count and returns the iterator the user's ``for`` gets.
    One pass at a time, as stoker.Loader. close() ends the workers.

    Rings. The input ring holds the batches torch has in flight: torch sends at most
    prefetch_factor x num_workers index lists ahead and sends the next one while it hands out
    a batch whose rows have all been read, so that many slots suffice (one more: margin). With
    worker processes and default_collate, an out ring of two slots more holds the collated
    images: batch k's slot is next written by batch k + out_slots, fed while the user holds
    batch k + out_slots - 1 - prefetch_factor x num_workers (a ``for`` holds the last one), so
    in a plain loop the slot is free; a batch still referenced then (list(loader)) keeps its
    file and the slot gets a new one."""

    def __init__(self, p, batch_size, max_hw, dataset, loader_kwargs):
        self.plan, self.batch_size, self.max_hw = p, int(batch_size), tuple(max_hw)
        self.pil = p.split.kw.get("layout") == "NHWC"
        self.loader_kwargs = dict(loader_kwargs)
        self.dataset = dataset
        nw = int(self.loader_kwargs.get("num_workers") or 0)
        pf = self.loader_kwargs.get("prefetch_factor") or 2
        self.slots = (pf * nw if nw else 1) + 1
        self.out_slots = pf * nw + 2
        self.ring = self.inner = self.out_fds = None
        self.source, self.batches = None, 0

    def _out_ring_usable(self):
        import os
        import torch.multiprocessing as tmp
        nw = int(self.loader_kwargs.get("num_workers") or 0)
        return (nw > 0 and not self.pil and self.plan.collate_fn in _default_collates() and
                hasattr(os, "memfd_create") and
                tmp.get_sharing_strategy() == "file_descriptor")

    def _out_file(self, s):
        """(descriptor, identity) of out slot S's file for the next batch written there: a
        new file when the slot's last batch may still be held or was never handed out; None
        when files cannot be made here."""
        import os
        st = self.out_state[s]
        if self.out_fds[s] is None or st is _FED or (st is not None and not st.expired()):
            fd = None
            try:
                fd = os.memfd_create("stoker-tail-out", getattr(os, "MFD_CLOEXEC", 0))
                os.ftruncate(fd, self.ring.shape[1])
            except OSError:      # no memfd here (a sandbox): collated as torch's workers do
                if fd is not None:
                    os.close(fd)
                self.close_out()
                return None
            if self.out_fds[s] is not None:
                os.close(self.out_fds[s])      # a batch still held keeps its own mapping
            self.out_fds[s] = fd
            info = os.fstat(fd)
            self.out_keys[s] = (info.st_dev, info.st_ino)
        self.out_state[s] = _FED
        return self.out_fds[s], self.out_keys[s]

    def _allocate(self):
        import torch
        item = {"uint8": 1, "float16": 2, "float32": 4}[self.plan.split.kw.get("dtype",
                                                                               "uint8")]
        h, w = self.max_hw
        slot = self.batch_size * 3 * h * w * item
        slot = (slot + 63) // 64 * 64
        # in shared memory from the start (not zeros then share_memory_(), which fills and
        # copies the whole ring up front): a page is made when a batch is first copied in
        store = torch.UntypedStorage._new_shared(self.slots * slot)
        self.ring = torch.empty(0, dtype=torch.uint8).set_(store).view(self.slots, slot)
        self.header = torch.zeros((self.slots, 4), dtype=torch.int64).share_memory_()
        self.labels = torch.zeros((self.slots, self.batch_size),
                                  dtype=torch.int64).share_memory_()
        collate = self.plan.collate_fn
        if self._out_ring_usable():
            self.out_fds = [None] * self.out_slots
            self.out_keys = [None] * self.out_slots
            self.out_state = [None] * self.out_slots
            collate = _RingCollate(collate)
        ds = _RingDataset(self.ring, self.header, self.labels, self.batch_size, self.pil,
                          self.plan.split.sample_type, list(self.plan.split.tail),
                          self.plan.target_transform, self.dataset, self.out_slots)
        self.inner = torch_loader(ds, batch_sampler=_Feeder(self), collate_fn=collate,
                                  **self.loader_kwargs)

    def end_pass(self):
        """End the library's pass the last iterate() fed from (a ``for`` left early leaves it
        referenced by torch's iterator): call before the library's next pass starts."""
        cur, self.current = getattr(self, "current", None), None
        if cur is not None and hasattr(cur, "close"):
            cur.close()

    def iterate(self, batches, n):
        if self.inner is None:
            self._allocate()
        self.source, self.current, self.batches = batches, batches, int(n)
        it = iter(self.inner)
        return _TailIter(self, it) if self.out_fds is not None else it

    def close_out(self):
        """Stop using the out ring (batches already handed out keep their memory)."""
        import os
        fds, self.out_fds = self.out_fds, None
        for fd in fds or ():
            if fd is not None:
                os.close(fd)

    def close(self):
        it = getattr(self.inner, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        self.inner = None
        self.close_out()
