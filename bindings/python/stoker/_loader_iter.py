# SPDX-License-Identifier: MIT
"""A stoker.Loader's passes: positioning the pipeline at a pass's start (start, set_epoch,
resume, a new size), the iterator, waiting for the next batch (timeout, Ctrl-C, close() from
another thread), and turning the library's batch into the tensors yielded: images by reference
or copied, labels, targets, indices, MixUp / CutMix. A mixin of stoker.Loader."""

import ctypes
import time
import warnings
import weakref

import numpy as np

from . import _lib
from . import errors as _errors
from . import mix as _mix
from ._loader_args import _CAI_TYPESTR, _NP_DTYPE
from ._loader_batches import _CudaView, _Held, _Iter, _on_free
from ._loader_held import sigint_deferred

_POLL_MS = 100  # next() waits at most this long per call, so that Ctrl-C is seen promptly


class PassIteration:
    def _check_no_live_iter(self):
        """A second iter() while a pass is live would end it silently (one pipeline per
        loader): refuse, naming the live one."""
        it = self._active() if self._active is not None else None
        if it is not None and not it.done and not it.interrupted and it._gen == self._gen:
            raise RuntimeError(
                "an iterator of this stoker.Loader is live (epoch %d, batch %d of %d); finish it, "
                "or call it.close() / del it first (a Loader runs one pass at a time; set_epoch() "
                "or load_state_dict() also end it)" % (it.epoch, it.batches, len(self)))

    def _stream(self):
        if self.device >= 0 and self._torch is not None:
            return ctypes.c_void_p(self._torch.cuda.current_stream(self.device).cuda_stream)
        return None

    def _ensure_position(self, epoch, sample, base=0):
        lib = self._lib
        segs = self._resume_segs if self._resume is not None else None
        if segs:
            return self._ensure_segments(epoch, segs)
        if not self._started:
            self._apply_size(before_start=True)
            self._set(_lib.P_EPOCH, epoch, "epoch")
            self._check(lib.stk_loader_start(self._h), "start")
            self._started = True
            self._after_start()
            if sample or base:
                self._check(lib.stk_loader_resume(self._h, epoch, base, sample),
                            "resume epoch %d at sample %d after %d consumed"
                            % (epoch, sample, base))
            return
        if self._tell() == (epoch, sample) and self._tell_global()[2] == base:
            if self._apply_size():
                return
            # the library keeps what it prefetched here, at the old size: move away, so that
            # positioning below restarts the pipeline (a rare case: batches prefetched at the
            # position the next `for` starts from)
            self._check(lib.stk_loader_set_epoch(self._h, epoch + 1), "set_epoch(%d)" % (epoch + 1))
        self._settle_all()
        if sample == 0 and base == 0:
            self._check(lib.stk_loader_set_epoch(self._h, epoch), "set_epoch(%d)" % epoch)
        else:
            self._check(lib.stk_loader_resume(self._h, epoch, base, sample),
                        "resume epoch %d at sample %d after %d consumed" % (epoch, sample, base))
        if not self._apply_size():
            self._check(lib.stk_loader_set_output_size(self._h, *self._pending_size),
                        "set_size%r" % (self._pending_size,))

    def _ensure_segments(self, epoch, segs):
        """Position at the history SEGS of EPOCH (the shard-window order of a streamed
        dataset: docs/S3.md "Elastic resume inside a streamed epoch"). Before start the start
        itself begins there, so that nothing of the epoch's start is fetched."""
        lib = self._lib
        flat = [int(v) for seg in segs for v in seg]
        arr = (ctypes.c_uint64 * max(1, len(flat)))(*flat)
        what = "resume epoch %d from the segments %r" % (epoch, [list(s) for s in segs])
        if not self._started:
            self._apply_size(before_start=True)
            self._set(_lib.P_EPOCH, epoch, "epoch")
            self._check(lib.stk_loader_resume_segments(self._h, epoch, arr, len(segs)), what)
            self._check(lib.stk_loader_start(self._h), "start (%s)" % what)
            self._started = True
            self._after_start()
            return
        cur = self._tell_segments()
        want = [list(s) for s in segs]
        if (self._tell()[0] == epoch and cur is not None
                and (cur == want or (cur[:-1] == want and cur[-1][2] == 0))):
            if self._apply_size():
                return                    # already there (start() was called before the `for`)
            # prefetched at the old size: move away so that the resume below relaunches
            self._check(lib.stk_loader_set_epoch(self._h, epoch + 1), "set_epoch(%d)" % (epoch + 1))
        self._settle_all()
        self._check(lib.stk_loader_resume_segments(self._h, epoch, arr, len(segs)), what)
        if not self._apply_size():
            self._check(lib.stk_loader_set_output_size(self._h, *self._pending_size),
                        "set_size%r" % (self._pending_size,))

    def _tell_segments(self):
        """The current epoch's history [[world, window, taken], ...], or None in the global
        order."""
        e, n = ctypes.c_uint64(), ctypes.c_uint32()
        arr = (ctypes.c_uint64 * (3 * 17))()
        rc = self._lib.stk_loader_tell_segments(self._h, ctypes.byref(e), arr, 17, ctypes.byref(n))
        if rc == _lib.STK_E_INVALID:
            return None
        self._check(rc, "stk_loader_tell_segments")
        return [[int(arr[3 * i]), int(arr[3 * i + 1]), int(arr[3 * i + 2])] for i in range(n.value)]

    def _apply_size(self, before_start=False):
        """Apply the size set_size() asked for; False if the library refuses it here (state)."""
        if self._pending_size is None:
            return True
        if not before_start:
            self._settle_all()            # the library resizes with no batch held
        rc = self._lib.stk_loader_set_output_size(self._h, *self._pending_size)
        if rc == _lib.STK_E_STATE and not before_start:
            return False
        self._check(rc, "set_size%r" % (self._pending_size,))
        self.height, self.width = self._pending_size
        self._pending_size = None
        return True

    def _tell_global(self):
        e, c, b = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        self._check(self._lib.stk_loader_tell_global(self._h, ctypes.byref(e), ctypes.byref(c),
                                                     ctypes.byref(b)), "stk_loader_tell_global")
        return int(e.value), int(c.value), int(b.value)

    def _after_start(self):
        st = _lib.Stats()
        self._check(self._lib.stk_loader_stats(self._h, ctypes.byref(st)), "stats")
        dev = st.device >= 0
        v = ctypes.c_double()
        key = _lib.P_DEVICE_BUFFERS if dev else _lib.P_PREFETCH
        self._check(self._lib.stk_loader_get(self._h, key, ctypes.byref(v)), "get")
        self._ring = int(v.value)
        self.pinned = bool(st.pinned_bytes) and not dev
        if self.pin_memory and self.device < 0 and not self.pinned:
            why = {_lib.STK_E_UNSUPPORTED: "libstoker was built without CUDA",
                   _lib.STK_E_NODEVICE: "no usable CUDA device"}.get(
                       st.pin_reason, "cudaHostAlloc failed: %s" % _errors.strerror(st.pin_reason))
            self.pin_memory_reason = why
            warnings.warn("stoker: pin_memory=True but batches are in pageable memory (%s); "
                          "see loader.pin_memory_reason" % why, stacklevel=3)

    def _tell(self):
        e, s = ctypes.c_uint64(), ctypes.c_uint64()
        self._check(self._lib.stk_loader_tell(self._h, ctypes.byref(e), ctypes.byref(s)),
                    "stk_loader_tell")
        return int(e.value), int(s.value)

    def _in_progress(self):
        it = self._active() if self._active is not None else None
        return it is not None and not it.done and it._gen == self._gen

    def _end_iteration(self):
        """A new pass or a change of position ends the pass in progress."""
        self._gen += 1
        self._active = None

    def __iter__(self):
        self._usable()
        with self._consuming():
            self._check_no_live_iter()
            return self._iter_inside()

    def _iter_inside(self):
        self._drain()
        self._end_iteration()
        if self._resume is not None:
            epoch, sample, base = self._resume
        else:
            epoch, sample, base = self._epoch, 0, 0
        self._ensure_position(epoch, sample, base)
        self._resume = None
        self._epoch = epoch + 1           # the `for` after this one runs the next epoch
        it = _Iter(self, self._gen, epoch, self._asked)
        self._asked = False
        self._active = weakref.ref(it)
        return it

    def _next(self, it):
        with self._consuming(closed_ok=True) as ok:
            if not ok or it.done or it._gen != self._gen:
                it.done = True            # closed, or ended while this thread waited to enter
                raise StopIteration
            self._usable()
            return self._next_inside(it)

    def _next_inside(self, it):
        lib = self._lib
        with sigint_deferred():
            self._make_room()
        stream = self._stream()
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            wait = _POLL_MS
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:  # the last poll's detail names the read in flight the longest
                    detail = self._detail()
                    raise _errors.StokerTimeout(
                        "no batch within timeout=%gs (epoch %d)%s" % (
                            self.timeout, it.epoch, ": " + detail if detail else ""),
                        _lib.STK_TIMEOUT, "STK_TIMEOUT")
                wait = max(1, min(_POLL_MS, int(left * 1000)))
            # the batch pointer lands in self._slot: if Ctrl-C strikes right after the call, the
            # next step still finds and releases it
            rc = lib.stk_loader_next(self._h, stream, wait, self._slot_addr)
            if rc != _lib.STK_TIMEOUT or self._closing:
                break
        # Ctrl-C is seen in the wait above; from the batch's arrival to its record in _held
        # (or its release) it waits until the step is done
        with sigint_deferred():
            return self._after_wait(it, rc)

    def _after_wait(self, it, rc):
        self._badlog.warn(stacklevel=5)   # < _next_inside < _next < _Iter.__next__ < the loop
        if self._closing and rc != _lib.STK_OK:   # close() in another thread woke us
            it.done = True
            raise StopIteration
        if rc == _lib.STK_END:
            it.done = True
            raise StopIteration
        if rc != _lib.STK_OK:
            it.done = True
            raise _errors.make(rc, self._detail(), "epoch %d" % it.epoch)
        return self._wrap(_lib.Batch.from_address(self._slot.value), self._slot.value)

    def _wrap(self, b, addr):
        n = int(b.size)
        c, hgt, wid = int(b.channels), int(b.height), int(b.width)
        shape = (n, c, hgt, wid) if b.layout == _lib.NCHW else (n, hgt, wid, c)
        torch = self._torch
        labels = (np.ctypeslib.as_array(b.labels, (n,)).astype(np.int64) if self._want_labels
                  else None)
        idx = (np.ctypeslib.as_array(b.indices, (n,)).astype(np.int64) if self.return_index
               else None)
        targets = self._targets(addr, n) if self._want_targets else None
        seq = self._seq
        self._seq += 1
        device = b.device >= 0
        rec = _Held(addr, seq, device, self.pinned)
        self._held[seq] = rec
        self._slot.value = None           # from here on the batch is found through _held
        if device:
            view = _CudaView(b.images, shape, _CAI_TYPESTR[b.dtype])
            images = torch.as_tensor(view, device="cuda:%d" % b.device)
            if b.dtype == _lib.DTYPE_BFLOAT16:
                images = images.view(torch.bfloat16)
            live = sum(1 for r in self._held.values() if r.device and r.alive and not r.done)
            if self.copy or live >= self._ring:
                # keeping this one by reference would leave no buffer to stage the next into
                if not self.copy:
                    self._copied += 1
                    if not self._warned_copy:
                        self._warned_copy = True
                        warnings.warn("stoker: %d device batches are kept by reference "
                                      "(device_buffers=%d): the next ones are handed out as "
                                      "copies (counted in stats()['copied'])"
                                      % (live - 1, self._ring), stacklevel=3)
                images = images.clone()
                del view
                rec.alive = False
                self._release(rec)
            else:
                weakref.finalize(view, _on_free, self._mu, self._freed, rec,
                                 self._lib.stk_images_free).atexit = False
                del view
        else:
            if self.device >= 0 and not self._warned_fallback:
                self._warned_fallback = True
                warnings.warn("stoker: device=cuda:%d requested but the library hands out host "
                              "batches (%s)" % (self.device, self._fallback_text()))
            nbytes = int(b.image_bytes)
            if nbytes:
                buf = (ctypes.c_char * nbytes).from_address(b.images)
                arr = np.frombuffer(buf, dtype=_NP_DTYPE[b.dtype]).reshape(shape)
            else:
                arr = np.zeros(shape, dtype=_NP_DTYPE[b.dtype])
            if self.copy or not nbytes:
                arr = arr.copy()
                rec.alive = False
                self._release(rec)
            else:
                weakref.finalize(arr, _on_free, self._mu, self._freed, rec,
                                 self._lib.stk_images_free).atexit = False
            if torch is not None:
                images = torch.from_numpy(arr)
                if b.dtype == _lib.DTYPE_BFLOAT16:
                    images = images.view(torch.bfloat16)
            else:
                images = arr.view(np.uint16) if b.dtype == _lib.DTYPE_BFLOAT16 else arr
            del arr
        out = [images]
        for a in (labels, targets, idx):
            if a is not None:
                out.append(torch.from_numpy(a) if torch is not None else a)
        if self._mix is not None:
            self._apply_mix(out, b)
        return tuple(out)

    def _mix_class_count(self):
        """mix's class count: its num_classes, else the targets' columns (per batch), else the
        dataset's classes."""
        if self._torch is None:
            raise ImportError("stoker.Loader(mix=...) needs torch, which cannot be imported")
        if self._mix.num_classes is not None:
            return self._mix.num_classes
        if self._want_targets:
            return None
        if not self.classes:
            raise ValueError("mix=%r: the dataset has no classes; give num_classes" % (self._mix,))
        return len(self.classes)

    def _apply_mix(self, out, b):
        """Mix the batch in OUT in place: images, and the labels (or targets, when yielded)
        replaced by the soft targets."""
        i = 2 if self._want_labels and self._want_targets else 1
        n = self._mix_classes or int(out[i].shape[1])
        rng = _mix.generator(self.seed, b.epoch, self.rank, b.first_sample)
        out[0], out[i] = _mix.apply(self._mix, out[0], out[i], n, self.layout, rng)

    def _targets(self, addr, n):
        """A copy of batch ADDR's N x K targets (the batch may be released right after)."""
        info = _lib.TargetInfo()
        ptr = self._lib.stk_loader_batch_targets(self._h, addr, ctypes.byref(info))
        if not ptr or info.dtype != self._tinfo.dtype or info.size != self._tinfo.size:
            raise _errors.StokerError("stk_loader_batch_targets gave no targets (or another shape "
                                      "than at open) for a batch of %s" % self.path)
        nbytes = n * self._trow
        if not nbytes:
            return np.zeros((n, int(info.size)), dtype=self._tdtype)
        buf = (ctypes.c_char * nbytes).from_address(ptr)
        return np.frombuffer(buf, dtype=self._tdtype).reshape(n, int(info.size)).copy()

    def _fallback_text(self):
        try:
            st = self.stats()
        except _errors.StokerError:
            return "no detail"
        if st.get("fallback_reason"):
            return _errors.strerror(st["fallback_reason"])
        return "no usable CUDA device"
