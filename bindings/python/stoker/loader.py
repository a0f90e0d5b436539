# SPDX-License-Identifier: MIT
"""stoker.Loader: the whole C pipeline behind a DataLoader-like Python iterator.

The class lives here with its construction, epochs and sizes, and lifetime; its other concerns
are modules of their own: the arguments' parsing (_loader_args), the pass iterator and batch
records (_loader_batches), a pass from positioning to the yielded tensors (_loader_iter), the
one-consumer-thread rule and close() from another thread (_loader_consumer), batches held by
reference (_loader_held), classes / stats / report (_loader_info), state_dict /
load_state_dict (_loader_state), ``dataset`` / ``sampler`` and the process hooks
(_loader_views). The names other modules and tests import from here stay importable here."""

import collections
import ctypes
import os
import threading

import numpy as np

from . import _lib
from . import augment as _augment
from . import dataset as _dataset
from . import errors as _errors
from . import mix as _mix
from ._loader_bad import BadRecordLog
from ._loader_args import (DTYPE_NAMES, INTERP_NAMES, _CAI_TYPESTR, _NP_DTYPE,  # noqa: F401
                           _TARGET_NP, _torch, installed_pillow_passes, normalization,
                           parse_device, parse_dtype, parse_interpolation, parse_layout,
                           parse_resize, parse_resize_passes, resolve_distributed)
from ._loader_batches import (LoaderStats, _CudaView, _Held, _Iter, _on_free,  # noqa: F401
                              _per_image, _stage_dict)
from ._loader_consumer import ConsumerThread
from ._loader_held import HeldBatches
from ._loader_info import LoaderInfo
from ._loader_iter import _POLL_MS, PassIteration  # noqa: F401
from ._loader_state import ResumeState
from ._loader_views import LoaderDataset, RankSampler, _live  # noqa: F401


class Loader(PassIteration, ConsumerThread, LoaderInfo, HeldBatches, ResumeState):
    """Batches of decoded, augmented images from a stoker dataset — a drop-in replacement for
    ``torch.utils.data.DataLoader(ImageFolder(...), ...)`` in a training loop.

    ``for images, labels in loader`` yields one epoch of batches: ``images`` is an N×3×H×W
    (``layout="NCHW"``) or N×H×W×3 (``"NHWC"``) tensor of ``dtype``, ``labels`` an int64 tensor
    of N labels (with ``return_index=True`` a last int64 tensor holds each sample's dataset
    index). They are torch tensors when torch can be imported, NumPy arrays otherwise (or as
    ``array="numpy"`` / ``"torch"`` asks). N = ``batch_size`` except for a short last batch
    (``drop_last=False``).

    A dataset packed from a manifest with several labels per image or with value fields
    (``stoker.pack(..., multi_label=True)`` / ``target_fields=``) carries a target per record:
    then ``for images, targets in loader`` yields them in place of the labels, an N×K tensor of
    the dataset's target type (float32 → torch.float32, int64 → torch.int64, uint8, int32,
    float64 likewise; ``loader.target_info`` describes it). A label list comes as int32 class
    indices padded with -1, or with ``multi_hot=True`` as float32 rows of the class count (1.0
    for each of the record's labels, else 0.0). ``target`` chooses what is yielded:
    ``"auto"`` (default) the targets when the dataset has them, else the labels; ``"label"``
    the labels only (as before targets existed); ``"both"`` ``(images, labels, targets)``.
    With ``return_index=True`` the indices come last. Targets, like labels, are copies in host
    memory (also for CUDA batches).

    Arguments (keyword-only after ``batch_size``):
      path: a directory of shards (``stoker.pack``), one shard file, a foreign LMDB or an
        ImageFolder root (JPEG; PNG, WebP, GIF, BMP, TIFF and PPM files are decoded too, with
        pack's decoders: slower than JPEG, equal to torchvision's pipeline on Pillow); or
        ``"s3://bucket/prefix"`` (since 0.5): the shards there are fetched into the cache
        directory first (docs/S3.md; credentials as the AWS tools read them).
      train: RandomResizedCrop(size) + horizontal flip (True) or Resize(resize)+CenterCrop(size).
      size: output side, or (height, width). resize: eval's shorter side before the crop
        (Resize(int)), or (height, width): the whole image to exactly that size (Resize((h, w)),
        STK_P_RESIZE_HEIGHT/WIDTH), then the centre crop to ``size`` (none when equal).
      interpolation: "bilinear" (default), "bicubic" or "nearest" (or torchvision's
        InterpolationMode, or PIL.Image.BILINEAR / BICUBIC / NEAREST), the filter of train's
        RandomResizedCrop and eval's Resize: Pillow's, byte for byte at DCT scale 8/8
        (STK_P_INTERP). "nearest" always decodes at 8/8. "random" is timm's
        interpolation='random': bilinear or bicubic with equal odds per sample, drawn from
        (seed, epoch, index) like the crop.
      resize_passes: whose order of the resize's two passes to follow, "pillow12" (horizontal
        first, Pillow 12 and older) or "pillow13" (vertical first where the height shrinks by
        more than twice as many pixels as the width, Pillow 13); the last bit of some pixels
        differs between the two (STK_P_RESIZE_PASSES). Default: the installed Pillow's, else
        "pillow12".
      mix: batch-level MixUp / CutMix applied to each batch in place (stoker.MixUp,
        stoker.CutMix, stoker.RandomChoice([...]), torchvision v2's MixUp / CutMix /
        RandomChoice or timm's Mixup): the labels (or float targets) become soft N x classes
        float32 targets; the draws are keyed (seed, epoch, rank, batch position) (stoker.mix).
      workers: decode threads (default: the usable cores — affinity mask, cgroup CPU quota —
        divided among $LOCAL_WORLD_SIZE local ranks; stats()["workers_note"] says how).
        prefetch: host batch slots (default 5 for host batches: the library's 4 plus the one
        the loop variable holds while the next batch is awaited).
      shuffle: permute each epoch (default: ``train``). seed: order and augmentation seed;
        everything is a pure function of (seed, epoch, sample), whatever ``workers`` is.
      drop_last: drop a short last batch (default False, as DataLoader).
      device: "cpu", "cuda", "cuda:N" (a torch.device works too). CUDA batches are converted and
        normalised on the GPU and handed out on torch's current stream.
      dtype: uint8 (default), float16, bfloat16 or float32, as a torch or NumPy dtype or a name.
        Float output follows torchvision: without mean/std it is x/255 (ToTensor); with them it
        is Normalize(mean, std)(x/255); mean/std are in 0..1 units, e.g. (0.485, 0.456, 0.406).
      layout: "NCHW" (default) or "NHWC".
      rank, world_size: this process's part of the dataset; default from torch.distributed when
        initialised, else the RANK / WORLD_SIZE environment variables. Every rank gets the same
        number of batches (dist_mode="pad" wraps around as DistributedSampler; "drop" drops the
        remainder).
      strict: a bad record (corrupt, truncated, empty, not a JPEG, too large, CRC mismatch,
        unreadable) raises DataError naming it. By default it is replaced by another, good record
        of the epoch (drawn from (seed, epoch, index): the same for any ``workers`` and after a
        resume; decoded and augmented as the bad one's sample would have been) with that
        record's own label and target — never a grey image or label -1; the batch's dataset
        index stays the bad record's. It is counted and listed in stats()["errors"]; the
        loader's first bad record and, at the end of each epoch that had one, a summary (count,
        commonest reasons) are warned about (``stoker.BadRecordWarning``). If no good record is
        found in 64 draws, the pass raises naming the record.
      max_bad_fraction: the largest share of bad records an epoch may have [0.01]: above it the
        iteration raises (DataError, or StokerIOError for unreadable records) naming the
        commonest reasons. Checked once 10000 samples of the epoch were yielded and at its last
        batch (a short epoch: at its end). 1.0 never raises (STK_P_MAX_BAD_FRACTION).
      return_index: also yield the dataset indices (last).
      target: "auto", "label" or "both" (see above). multi_hot: label lists as float32
        multi-hot rows (STK_P_MULTI_HOT); InvalidArgument for a dataset without label lists.
      copy: yield copies instead of views of the library's batch memory (see below).
      timeout: seconds to wait for one batch before raising StokerTimeout (None: no limit);
        its message names the read in flight the longest (shard and key, or file), if any.
      epoch: the epoch the first ``for`` runs.
      max_size: the largest ``size`` that ``set_size()`` may ask for later (int or (height,
        width)); the batch ring is sized for it. Without it the size is fixed once started.
      io_backend ("auto", "io_uring", "pread", "mmap"), direct (O_DIRECT), queue_depth,
      verify_crc, max_pixels, flip_prob, scale, ratio, dist_mode, max_pinned_bytes,
      device_buffers: the library's parameters of the same meaning (include/stoker.h).
      dist_mode="exact": ranks get parts of unequal size that together hold every sample once
        (STK_DIST_EXACT) — for evaluation that gathers at the end; collectives per step hang.
      pin_memory: host batches in page-locked memory when CUDA is usable (``.pinned``);
        otherwise a warning at start and ``.pin_memory_reason`` say why.
      dct_scaling: decode at the smallest covering DCT scale (library default True; False gives
        torchvision's pixels exactly). value_table: 3x256 float outputs per channel and 8-bit
        value instead of mean/std (STK_P_LUT).
    Attributes as DataLoader's: ``dataset`` (len, root, classes, class_to_idx), ``sampler``
    (len = this rank's samples per epoch), ``batch_size``, ``num_workers`` (decode threads),
    ``pin_memory``, ``drop_last``, ``len(loader)`` (batches per epoch).
      indices: read only these records (dataset indices; entries may repeat): every epoch is
        then over the list as torch.utils.data.Subset is, in the list's order without shuffle,
        a permutation of it with (stk_loader_set_indices). In the shard-window order
        (``shuffle_window``, or an s3:// path streamed through a smaller cache; since 0.5) the
        epoch is that order over the list's entries grouped by shard: each entry once, only the
        shards holding one fetched, resumable with state_dict (docs/S3.md "Subsets of a
        streamed dataset").
      augment: a per-sample augmentation policy applied after the crop and flip, on the uint8
        image, equal byte for byte to torchvision's tensor implementation: a spec dict of
        ``stoker.augment`` (``{"op": "trivialaugment" | "randaugment" | "autoaugment", ...}``),
        or the torchvision object itself (``TrivialAugmentWide()``, ``RandAugment(...)``,
        ``AutoAugment(policy)`` IMAGENET, CIFAR10 or SVHN; NEAREST or BILINEAR; fill), timm's
        ``RandAugment`` and ``AutoAugment`` (Pillow's arithmetic: {"op": "timm_randaugment" |
        "timm_autoaugment", ...}), and ``ColorJitter``,
        ``RandomGrayscale``, ``RandomVerticalFlip``, ``GaussianBlur``, ``RandomAffine``,
        ``RandomRotation`` (objects or specs), a list of them run in its order (one policy at
        most), then ``RandomErasing`` (torchvision's or timm's) last. Drawn from (seed, epoch, sample) like the crop
        (STK_P_AUG_*).
      options: more raw parameters, {STK_P_* number: value}.
      cache, cache_bytes: for s3:// paths, the cache directory (default STOKER_CACHE_DIR, else
        ~/.cache/stoker) and its size limit in bytes (default STOKER_CACHE_BYTES, else none;
        a limit below one shard is an error naming it; a limit below the dataset streams it).
      shuffle_window: W >= 1 = the shard-window order (STK_P_SHUFFLE_WINDOW; docs/S3.md "The
        shard-window shuffle"): shards in a seeded order per epoch (dealt to ranks by shard),
        each shard's records spread over W consecutive windows that each mix slices of W shards
        (one shard comes in and one goes out per window; at most W shards read at once). On an
        s3:// path it also asks
        for streaming even when the cache could hold the whole set: the first epoch starts at
        once and reads at the link's pace, several shards fetched at once ahead of the reader,
        and every shard stays in the cache for later epochs. None/0 = the exact global shuffle,
        whose first epoch from a bucket waits until the whole set is fetched (all shards in
        flight) — unless the cache limit is below the dataset, which streams with W chosen as
        limit / largest shard / 2.

    Epochs (as DataLoader): every ``for`` over the loader runs one epoch from its start.
    Which epoch: the one given to ``set_epoch()``, else the one after the previous ``for``'s
    (starting at ``epoch``). Breaking out of a ``for`` abandons the rest of that epoch; the
    next ``for`` runs the next epoch. After ``load_state_dict()`` the next ``for`` continues
    the saved epoch at the saved sample, exactly as the uninterrupted epoch would have gone on.

    Batch lifetime (zero copy, safe to hold): the images of a host batch lie in the library's
    batch ring and stay valid as long as any reference to them (the tensor, a view, a NumPy
    array of it) exists, as with DataLoader: ``list(loader)``, prefetching wrappers and batches
    kept across epochs or after ``close()`` all see their own data. The ring slot goes back to
    the library when the last reference is dropped (the loop's previous batch, typically); a
    batch still referenced when its slot is needed again (``prefetch`` batches later) is
    detached from the ring instead: the library gives the slot new memory and the batch keeps
    its own (no copy; one allocation; stats()["detached"] counts them). Memory is then the ring
    plus what the caller keeps. With ``pin_memory``, a freed batch's slot is reused only after
    the work queued on the current CUDA stream at that time (an asynchronous copy from it) has
    passed. ``copy=True`` hands out copies instead. Labels and indices are always int64 copies,
    targets always copies.

    CUDA batches: ``next`` and ``release`` are called with ``torch.cuda.current_stream()``; the
    stream waits for the batch on the GPU (no host sync). A device buffer is released when the
    batch's last reference is dropped (an event on the current stream orders its reuse after
    the work queued there); up to ``device_buffers - 1`` batches may be kept by reference, later
    ones are handed out as copies (stats()["copied"], warned once); device memory cannot be
    detached, so keeping a device batch while ``device_buffers`` newer ones are read raises
    StateError (clone() what you keep), as does closing or seeking with device batches held.

    Threads: one thread iterates at a time (another thread stepping it meanwhile gets
    RuntimeError naming the first); ``stats()``, ``report()``, ``cancel()`` and ``close()`` may
    be called from any thread (``close()`` wakes a blocked ``for``, which ends with
    StopIteration). One pass at a time: ``iter()`` while an earlier iterator is live (not
    exhausted, closed or dropped) raises RuntimeError naming it. Ctrl-C interrupts a blocked
    iteration within ~0.1 s (KeyboardInterrupt); the loader stays usable: a new ``for`` runs the
    next epoch even while the traceback (and so the interrupted iterator) is kept, as Jupyter
    keeps it; ``next()`` on the interrupted iterator goes on with its pass until then.

    fork(): the loader's threads do not exist in a fork() child. In the child every method
    raises StokerError (create a new Loader there); the parent's loader is unaffected.
    ``close()`` (also by ``with``, garbage collection or interpreter exit) stops and joins the
    threads and frees all memory.
    """

    def __init__(self, path, batch_size, *, train=True, size=224, resize=256, workers=None,
                 shuffle=None, seed=0, drop_last=False, device="cpu", dtype=None,
                 layout="NCHW", mean=None, std=None, rank=None, world_size=None, prefetch=None,
                 strict=False, return_index=False, copy=False, timeout=None, epoch=0,
                 array="auto", io_backend=None, direct=None, queue_depth=None,
                 verify_crc=None, max_pixels=None, flip_prob=None, scale=None, ratio=None,
                 dist_mode="pad", max_pinned_bytes=None, device_buffers=None, max_size=None,
                 pin_memory=False, dct_scaling=None, value_table=None, target="auto",
                 multi_hot=False, indices=None, interpolation="bilinear", mix=None,
                 augment=None, resize_passes=None, max_bad_fraction=None, options=None,
                 cache=None, cache_bytes=None, shuffle_window=None):
        self._h = None
        self._pid = os.getpid()
        self._closed = False
        lib = self._lib = _lib.get()
        self.path = _lib.path_arg(path)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1, got %r" % (batch_size,))
        self.train = bool(train)
        self.shuffle = self.train if shuffle is None else bool(shuffle)
        self.seed = int(seed)
        if not -(1 << 63) <= self.seed < (1 << 63):
            raise ValueError("seed must fit in a signed 64-bit integer")
        self.drop_last = bool(drop_last)
        if target not in ("auto", "label", "both"):
            raise ValueError("target must be 'auto', 'label' or 'both', not %r" % (target,))
        self._augment = _augment.params(augment)   # validated before any handle exists
        self.multi_hot = bool(multi_hot)
        if self.multi_hot and target == "label":
            raise ValueError("multi_hot=True expands the targets, which target='label' does not "
                             "yield: use target='auto' or 'both'")
        self.return_index = bool(return_index)
        self._mix = None if mix is None else _mix.as_mix(mix)
        self.copy = bool(copy)
        self.strict = bool(strict)
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be > 0 seconds or None")
        self.timeout = timeout
        self._dtype = parse_dtype(dtype)
        if self._mix is not None:
            _mix.check_dtype(self._mix, self._dtype != _lib.DTYPE_UINT8)
        self.dtype = DTYPE_NAMES[self._dtype]
        self._layout = parse_layout(layout)
        self.layout = "NCHW" if self._layout == _lib.NCHW else "NHWC"
        self.device = parse_device(device)
        self._norm = normalization(self._dtype, mean, std)
        if value_table is not None:
            if mean is not None or std is not None:
                raise ValueError("value_table replaces mean/std: give one or the other")
            if self._dtype == _lib.DTYPE_UINT8:
                raise ValueError("value_table needs a float dtype")
            self._norm = None
        self.rank, self.world_size = resolve_distributed(rank, world_size)
        if isinstance(size, (tuple, list)):
            if len(size) != 2:
                raise ValueError("size must be an int or (height, width), got %r" % (size,))
            self.height, self.width = int(size[0]), int(size[1])
        else:
            self.height = self.width = int(size)
        self._max_size = None if max_size is None else self._hw(max_size, "max_size")
        self.interpolation = [k for k, v in INTERP_NAMES.items()
                              if v == parse_interpolation(interpolation)][0]
        resize_short, resize_hw = parse_resize(resize)
        self.resize = resize_hw if resize_hw is not None else resize_short
        self._pending_size = None         # from set_size(), applied by the next `for`
        if array not in ("auto", "torch", "numpy"):
            raise ValueError("array must be 'auto', 'torch' or 'numpy', not %r" % (array,))
        self._torch = None
        if self._mix is not None and array == "numpy":
            raise ValueError("mix= works on torch tensors: not with array='numpy'")
        if array in ("auto", "torch"):
            self._torch = _torch()
            if self._torch is None and (array == "torch" or self.device >= 0):
                raise ImportError("stoker.Loader(array=%r, device=%r) needs torch, which cannot "
                                  "be imported" % (array, device))
        if self.device >= 0 and self._torch is not None and not self._torch.cuda.is_available():
            raise _errors.Unsupported("device=%r: torch sees no CUDA device" % (device,),
                                      _lib.STK_E_NODEVICE, "STK_E_NODEVICE")
        if dist_mode not in ("pad", "drop", "exact"):
            raise ValueError("dist_mode must be 'pad', 'drop' or 'exact', not %r" % (dist_mode,))
        self.dist_mode = dist_mode
        self.pin_memory = bool(pin_memory)
        self.pinned = False               # the host ring is page-locked (known after start)
        self.pin_memory_reason = None     # why pin_memory=True was not honoured

        self._epoch = int(epoch)          # the epoch the next `for` runs
        if self._epoch < 0:
            raise ValueError("epoch must be >= 0")
        self._resume = None               # (epoch, next_sample) from load_state_dict
        self._asked = False               # the next pass's epoch was given by set_epoch()
        self._started = False
        self._gen = 0
        self._active = None               # weakref to the iterator in progress
        self._slot = ctypes.c_void_p()    # next() writes the batch here (Ctrl-C safe)
        self._slot_addr = ctypes.addressof(self._slot)
        self._mu = threading.RLock()      # guards _Held flags against finalisers in any thread
        self._held = {}                   # seq -> _Held: batches handed out by reference
        self._freed = collections.deque() # _Held whose last reference is gone (to release)
        self._pending = []                # (_Held, cuda event): released once the event passed
        self._seq = 0                     # batches handed out
        self._ring = 0                    # K (host slots) or device buffers, after start
        self._copied = 0                  # device batches handed out as copies
        self._warned_copy = False
        self._warned_fallback = False
        self._lock = threading.Lock()     # guards close() against stats() from other threads
        # one consumer thread at a time; close() from any thread waits for it (see _consuming)
        self._entry = threading.Condition(threading.Lock())
        self._consumer = None             # [thread, depth] inside a consumer call, or None
        self._closing = False             # close() began: no consumer call enters any more

        h = ctypes.c_void_p()
        self._check(lib.stk_loader_create(ctypes.byref(h)), "stk_loader_create")
        self._h = h
        _live.add(self)
        self._badlog = BadRecordLog()
        self._check(self._badlog.install(lib, h), "stk_loader_set_log")

        sets = [
            (_lib.P_BATCH_SIZE, self.batch_size, "batch_size"),
            (_lib.P_MODE, _lib.MODE_TRAIN if self.train else _lib.MODE_EVAL, "train"),
            (_lib.P_OUT_HEIGHT, self.height, "size"),
            (_lib.P_OUT_WIDTH, self.width, "size"),
            (_lib.P_INTERP, INTERP_NAMES[self.interpolation], "interpolation"),
            (_lib.P_RESIZE_PASSES, parse_resize_passes(resize_passes), "resize_passes"),
            (_lib.P_SHUFFLE, int(self.shuffle), "shuffle"),
            (_lib.P_SEED, self.seed, "seed"),
            (_lib.P_DROP_LAST, int(self.drop_last), "drop_last"),
            (_lib.P_DTYPE, self._dtype, "dtype"),
            (_lib.P_OUT_LAYOUT, self._layout, "layout"),
            (_lib.P_DEVICE, self.device, "device"),
            (_lib.P_RANK, self.rank, "rank"),
            (_lib.P_WORLD_SIZE, self.world_size, "world_size"),
            (_lib.P_DIST_MODE, {"pad": _lib.DIST_PAD, "drop": _lib.DIST_DROP,
                                "exact": _lib.DIST_EXACT}[dist_mode], "dist_mode"),
            (_lib.P_STRICT, int(self.strict), "strict"),
            (_lib.P_EPOCH, self._epoch, "epoch"),
        ]
        if self._max_size is not None:
            sets += [(_lib.P_MAX_OUT_HEIGHT, self._max_size[0], "max_size"),
                     (_lib.P_MAX_OUT_WIDTH, self._max_size[1], "max_size")]
        if prefetch is None and self.device < 0:
            # the loop variable keeps the previous batch while the next is awaited, so its slot
            # is not free then: one slot more than the library's default keeps the same depth
            # of work ahead as a loop that gives each batch back before asking for the next
            v = ctypes.c_double()
            self._check(lib.stk_loader_get(self._h, _lib.P_PREFETCH, ctypes.byref(v)), "prefetch")
            prefetch = min(64, int(v.value) + 1)
        opt = [(_lib.P_WORKERS, workers, "workers"), (_lib.P_PREFETCH, prefetch, "prefetch"),
               (_lib.P_IO_DIRECT, None if direct is None else int(bool(direct)), "direct"),
               (_lib.P_QUEUE_DEPTH, queue_depth, "queue_depth"),
               (_lib.P_VERIFY_CRC, None if verify_crc is None else int(bool(verify_crc)),
                "verify_crc"),
               (_lib.P_MAX_PIXELS, max_pixels, "max_pixels"),
               (_lib.P_MAX_PINNED_BYTES, max_pinned_bytes, "max_pinned_bytes"),
               (_lib.P_DEVICE_BUFFERS, device_buffers, "device_buffers")]
        sets.extend(o for o in opt if o[1] is not None)
        if resize_hw is not None:
            sets += [(_lib.P_RESIZE_HEIGHT, resize_hw[0], "resize"),
                     (_lib.P_RESIZE_WIDTH, resize_hw[1], "resize")]
        else:
            sets.append((_lib.P_RESIZE, resize_short, "resize"))
        if self.pin_memory and self.device < 0:
            sets.append((_lib.P_PIN_HOST, 1, "pin_memory"))
        if io_backend is not None:
            names = {v: k for k, v in _lib.IO_NAMES.items()}
            names["uring"] = _lib.IO_URING
            if io_backend not in names:
                raise ValueError("io_backend must be one of auto, io_uring, pread, mmap")
            sets.append((_lib.P_IO_BACKEND, names[io_backend], "io_backend"))
        for key, value, name in sets:
            self._set(key, value, name)
        if max_bad_fraction is not None:
            if not 0.0 <= float(max_bad_fraction) <= 1.0:
                raise ValueError("max_bad_fraction must be in [0, 1], got %r" % (max_bad_fraction,))
            self._set(_lib.P_MAX_BAD_FRACTION, float(max_bad_fraction), "max_bad_fraction")
        if flip_prob is not None:
            self._set(_lib.P_FLIP_PROB, float(flip_prob), "flip_prob")
        if scale is not None:
            self._set(_lib.P_SCALE_MIN, float(scale[0]), "scale")
            self._set(_lib.P_SCALE_MAX, float(scale[1]), "scale")
        if ratio is not None:
            self._set(_lib.P_RATIO_MIN, float(ratio[0]), "ratio")
            self._set(_lib.P_RATIO_MAX, float(ratio[1]), "ratio")
        if self._norm is not None:
            for key, vals, name in ((_lib.P_MEAN, self._norm[0], "mean"),
                                    (_lib.P_STD, self._norm[1], "std")):
                arr = (ctypes.c_float * 3)(*vals)
                self._check(lib.stk_loader_set_floats(self._h, key, arr, 3), "%s=%r" % (name, vals))
        if dct_scaling is not None:
            self._set(_lib.P_DCT_SCALING, int(bool(dct_scaling)), "dct_scaling")
        if value_table is not None:
            vt = np.ascontiguousarray(value_table, dtype=np.float32).reshape(-1)
            if vt.size != 768:
                raise ValueError("value_table must hold 3 x 256 values, got %d" % vt.size)
            self._check(lib.stk_loader_set_floats(self._h, _lib.P_LUT, vt.ctypes.data_as(
                ctypes.POINTER(ctypes.c_float)), 768), "value_table")
        if self.multi_hot:
            self._set(_lib.P_MULTI_HOT, 1, "multi_hot")
        for key, value, name in self._augment:
            if key == _augment.VEXP:        # torch's own exp for GaussianBlur (stoker.augment.torch_vexp)
                self._check(lib.stk_loader_set_vexp(self._h, value.address, value.arg), name)
            elif key in (_lib.P_AUG_STEPS, _lib.P_ERASE_VALUE, _lib.P_TIMM_AUTO_POLICY):
                arr = (ctypes.c_float * len(value))(*value)
                self._check(lib.stk_loader_set_floats(self._h, key, arr, len(value)), name)
            else:
                self._set(key, value, name)
        for key, value in (options or {}).items():
            self._set(int(key), value, "options[%d]" % int(key))

        if cache is not None:   # s3:// datasets: the cache directory and its limit
            self._check(lib.stk_loader_set_cache_dir(self._h, _lib.fspath(cache)), "cache")
        if cache_bytes is not None:
            self._set(_lib.P_CACHE_BYTES, int(cache_bytes), "cache_bytes")
        if shuffle_window is not None:   # before the open: an s3:// dataset then streams
            self._set(_lib.P_SHUFFLE_WINDOW, int(shuffle_window), "shuffle_window")
        self._check(lib.stk_loader_open(self._h, _lib.fspath(path)), "open %s" % self.path)
        self.indices = None
        if indices is not None:
            idx = np.asarray(indices)
            if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu" or (idx < 0).any():
                raise ValueError("indices must be a non-empty list of record numbers >= 0")
            idx = np.ascontiguousarray(idx, dtype=np.uint64)
            self._check(lib.stk_loader_set_indices(self._h, idx.ctypes.data_as(
                ctypes.POINTER(ctypes.c_uint64)), idx.size), "indices")
            self.indices = idx.astype(np.int64)
        self._setup_targets(target)
        self._mix_classes = self._mix_class_count() if self._mix is not None else None
        self._samples = int(lib.stk_loader_samples_per_epoch(self._h))
        self._batches = int(lib.stk_loader_batches_per_epoch(self._h))
        self._fingerprint = None
        v = ctypes.c_double()
        self._check(lib.stk_loader_get(self._h, _lib.P_WORKERS, ctypes.byref(v)), "workers")
        self.num_workers = int(v.value)   # decode threads
        self.dataset = LoaderDataset(self.path, self.classes,
                                     int(lib.stk_dataset_count(lib.stk_loader_dataset(self._h))))
        self.sampler = RankSampler(self, self._rank_samples(
            len(self.indices) if self.indices is not None else self.dataset.__len__()))

    def _setup_targets(self, target):
        """What the batches carry besides the images, from TARGET and the dataset's targets."""
        t = _lib.TargetInfo()
        self._check(self._lib.stk_dataset_target_info(self._lib.stk_loader_dataset(self._h),
                                                      ctypes.byref(t)), "target info")
        has = t.dtype != _lib.TDT_NONE
        if self.multi_hot and not (has and t.kind == _lib.TARGET_LABELS):
            raise _errors.InvalidArgument(
                "multi_hot=True needs a dataset whose records carry a label list (stoker.pack(..., "
                "multi_label=True)); %s has %s" % (self.path, "value targets" if has else
                                                   "no targets"),
                _lib.STK_E_INVALID, "STK_E_INVALID")
        if target == "both" and not has:
            raise _errors.InvalidArgument(
                "target='both': %s has no targets (packed without a manifest's label lists or "
                "value fields); use target='label'" % self.path, _lib.STK_E_INVALID,
                "STK_E_INVALID")
        self.target = target
        self._want_labels = target == "label" or target == "both" or not has
        self._want_targets = has and target != "label"
        if self.multi_hot:
            t = _lib.TargetInfo(_lib.TDT_FLOAT32, _lib.TARGET_VALUES, t.classes, 0)
        self._tinfo = t
        self._tdtype = _TARGET_NP.get(t.dtype)
        self._trow = int(t.size) * (self._tdtype.itemsize if self._tdtype is not None else 0)

    @property
    def target_info(self):
        """The targets as this loader yields them: {dtype (a NumPy dtype or None), kind
        ("values", "labels" or "none"), size (K), classes}; multi_hot rows are float32 values of
        size = the class count. Kind "none" when the dataset has none (or target='label'
        ignores them)."""
        if not self._want_targets:
            return {"dtype": None, "kind": "none", "size": 0, "classes": 0}
        return _dataset.target_info_dict(self._tinfo)

    # ---- plumbing ------------------------------------------------------------------------
    def _detail(self):
        if self._h is None:
            return ""
        return _lib.text(self._lib.stk_loader_last_error(self._h))

    def _check(self, rc, what):
        if rc < 0:
            raise _errors.make(rc, self._detail(), what)
        return rc

    def _set(self, key, value, name):
        if isinstance(value, float) or key in _lib.DOUBLE_PARAMS:
            rc = self._lib.stk_loader_set_double(self._h, key, float(value))
        else:
            rc = self._lib.stk_loader_set(self._h, key, int(value))
        self._check(rc, "%s=%r" % (name, value))

    def _usable(self):
        if os.getpid() != self._pid:
            raise _errors.StokerError(
                "this stoker.Loader was created in process %d; this is a fork() child (pid %d) "
                "where its threads do not exist. Create a new stoker.Loader in the child."
                % (self._pid, os.getpid()))
        if self._closed or self._h is None:
            raise _errors.StateError("the loader is closed", _lib.STK_E_STATE, "STK_E_STATE")

    # ---- batches per epoch ---------------------------------------------------------------
    def __len__(self):
        """Batches per epoch on this rank."""
        return self._batches

    def _rank_samples(self, n):
        """This rank's samples per epoch before drop_last cuts the batches (DistributedSampler's
        len)."""
        r, w = self.rank, self.world_size
        if self.dist_mode == "drop":
            return n // w
        if self.dist_mode == "exact":
            return (n - r + w - 1) // w if r < n else 0
        return (n + w - 1) // w

    @property
    def samples_per_epoch(self):
        """Samples per epoch on this rank (padded or dropped to be equal on every rank)."""
        return self._samples

    # ---- epochs and resume ---------------------------------------------------------------
    def set_epoch(self, epoch):
        """The next ``for`` runs EPOCH from its start (as DistributedSampler.set_epoch).
        A pass in progress ends (its next step raises StopIteration), except one that an
        earlier set_epoch(EPOCH) began: set_epoch twice with the same epoch changes nothing."""
        epoch = int(epoch)
        if epoch < 0:
            raise ValueError("epoch must be >= 0")
        self._usable()
        with self._consuming():
            if self._in_progress() and self._active().epoch == epoch and self._active().asked:
                return                  # set_epoch(EPOCH) twice: its pass goes on
            self._drain()
            self._end_iteration()
            self._resume = None
            self._epoch = epoch
            self._asked = True

    def _set_order(self, idx):
        """(stoker.DataLoader) The records the next pass reads, in this order (IDX, from a
        sampler drawn in Python). The library takes a list only while stopped
        (stk_loader_set_indices), and the order is known only when the pass begins, so a
        started pipeline is stopped and restarted at the pass's start: a thread join and the
        ring's allocation once per epoch, next to the restart every set_epoch makes anyway.
        Batches still referenced are detached first (they keep their memory). Consumer thread,
        no pass in progress."""
        idx = np.ascontiguousarray(idx, dtype=np.uint64)
        if idx.ndim != 1 or idx.size == 0:
            raise ValueError("the sampler drew no sample for this pass")
        if self.indices is not None and idx.size == self.indices.size and np.array_equal(
                idx, self.indices):
            return
        lib = self._lib
        if self._started:
            self._settle_all()
            self._check(lib.stk_loader_stop(self._h), "stop")
            self._started = False
        self._check(lib.stk_loader_set_indices(self._h, idx.ctypes.data_as(
            ctypes.POINTER(ctypes.c_uint64)), idx.size), "indices")
        self.indices = idx.astype(np.int64)
        self._samples = int(lib.stk_loader_samples_per_epoch(self._h))
        self._batches = int(lib.stk_loader_batches_per_epoch(self._h))

    @property
    def epoch(self):
        """The epoch of the pass in progress, else the one the next ``for`` runs."""
        if self._in_progress():
            return self._active().epoch
        return self._resume[0] if self._resume is not None else self._epoch

    # ---- resolution per epoch ------------------------------------------------------------
    @staticmethod
    def _hw(size, name):
        if isinstance(size, (tuple, list)):
            if len(size) != 2:
                raise ValueError("%s must be an int or (height, width), got %r" % (name, size))
            hw = int(size[0]), int(size[1])
        else:
            hw = int(size), int(size)
        if not (1 <= hw[0] <= 65535 and 1 <= hw[1] <= 65535):
            raise ValueError("%s must be 1..65535 pixels, got %r" % (name, size))
        return hw

    def set_size(self, height, width=None):
        """Output size of the batches from the next ``for`` on (progressive resizing:
        ``set_size(160)`` for the first epochs, then ``set_size(192)``...), without rebuilding
        the loader: no thread is restarted, nothing reallocated, the dataset stays open. The
        batches equal those of a loader built at that size (same seed, epoch and position).

        Allowed between passes, i.e. whenever no ``for`` is in progress (after one ended or was
        left, or before the first); during a pass it raises StateError. Above ``max_size`` (the
        size the ring was built for) it raises ValueError; once started, a loader built without
        ``max_size`` raises StateError (before the first ``for`` any size is accepted)."""
        self._usable()
        hw = self._hw((height, height if width is None else width), "size")
        if self._in_progress():
            raise _errors.StateError(
                "set_size(%d, %d) during a pass: the size changes between epochs; call it after "
                "the `for` ends (or set_epoch() / load_state_dict() first)" % hw,
                _lib.STK_E_STATE, "STK_E_STATE")
        if self._max_size is not None and (hw[0] > self._max_size[0] or hw[1] > self._max_size[1]):
            raise ValueError("set_size(%d, %d) is above max_size=%r (the batch ring is sized for "
                             "max_size; build the loader with a larger one)" % (hw + (self._max_size,)))
        if self._started and self._max_size is None:
            raise _errors.StateError(
                "set_size(%d, %d): this loader was built without max_size, so its size is fixed "
                "once started; pass max_size=(largest height, width) to stoker.Loader" % hw,
                _lib.STK_E_STATE, "STK_E_STATE")
        if not self._started:
            self._pending_size = hw       # applied (as the size parameters) at start
            self.height, self.width = hw
        else:
            self._pending_size = None if hw == (self.height, self.width) else hw

    @property
    def size(self):
        """(height, width) of the batches the next ``for`` yields (or the one in progress)."""
        return self._pending_size if self._pending_size is not None else (self.height, self.width)

    # ---- threads -------------------------------------------------------------------------
    def start(self):
        """Start the threads now (the first ``for`` otherwise does it), prefetching the epoch
        the next ``for`` runs."""
        self._usable()
        with self._consuming():
            if not self._started:
                epoch, sample, base = (self._resume if self._resume is not None
                                       else (self._epoch, 0, 0))
                self._ensure_position(epoch, sample, base)
        return self

    def cancel(self):
        """Wake the thread blocked in the iteration (it raises Cancelled). Any thread."""
        self._usable()
        with self._lock:
            if self._started and self._h is not None:
                self._check(self._lib.stk_loader_cancel(self._h), "cancel")

    # ---- lifetime ------------------------------------------------------------------------
    def close(self):
        """Stop and join the threads and free all memory. Host batches still referenced keep
        their memory (it is detached from the ring first); device batches still referenced
        become invalid (a warning says so). Idempotent. Any thread: a pass blocked in another
        thread is woken and ends (its ``next`` raises StopIteration), and the handle is freed
        only after that thread has left the library. In a fork() child it only forgets the
        parent's handle."""
        if getattr(self, "_entry", None) is not None and os.getpid() == self._pid:
            self._quiesce()
        with self._lock:
            if self._h is not None and os.getpid() == self._pid and self._started:
                self._keep_held()
            h, self._h = self._h, None
            self._closed = True
            self._gen += 1
            if h is None:
                return
            _live.discard(self)
            if os.getpid() != self._pid:
                return   # the threads live in the parent; destroying here would wait forever
            self._slot.value = None   # destroy frees a batch still handed out
            self._lib.stk_loader_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            if getattr(self, "_h", None) is not None:
                self.close()
        except Exception:   # noqa: BLE001 - never raise from a finaliser
            pass

    def __repr__(self):
        state = "closed" if self._closed else ("started" if self._started else "open")
        return ("stoker.Loader(%r, batch_size=%d, train=%s, size=(%d, %d), dtype=%s, layout=%s, "
                "device=%s, rank=%d/%d, %s)" % (self.path, self.batch_size, self.train,
                                                self.height, self.width, self.dtype, self.layout,
                                                "cpu" if self.device < 0 else
                                                "cuda:%d" % self.device, self.rank,
                                                self.world_size, state))
