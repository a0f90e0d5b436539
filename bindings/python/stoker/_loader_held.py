# SPDX-License-Identifier: MIT
"""Batches a stoker.Loader hands out by reference (zero copy): giving a ring slot back when the
last reference to its batch is gone, after the CUDA work queued on it; detaching a batch still
referenced when its slot is needed, and before a seek or close. A mixin of stoker.Loader, run in
the consuming thread (the Loader docstring's "Batch lifetime")."""

import ctypes
import signal
import threading
import warnings

from . import _lib
from . import errors as _errors


class sigint_deferred:
    """Ctrl-C arriving inside is raised at the end instead: a library call that hands out, gives
    back or detaches a batch and the binding's record of it are one step, so a KeyboardInterrupt
    never leaves a batch released in the library and listed as held here (or the reverse).
    Only the main thread gets Python's SIGINT handler; elsewhere, or when SIGINT is not handled
    by a Python function (ignored, default), this does nothing. Nested uses hold it once."""

    __slots__ = ("_old", "_got")

    def __enter__(self):
        self._old = self._got = None
        if threading.current_thread() is threading.main_thread():
            old = signal.getsignal(signal.SIGINT)
            if callable(old):
                self._old = old
                signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum, frame):
        self._got = (signum, frame)

    def __exit__(self, *exc):
        old, got = self._old, self._got
        if old is not None:
            signal.signal(signal.SIGINT, old)
            if got is not None:
                old(*got)             # raises KeyboardInterrupt here, between two steps
        return False


class HeldBatches:
    """stoker.Loader's handling of the batches it handed out by reference."""

    def _recover_slot(self):
        """A batch next() handed out that never reached the caller (Ctrl-C right after the
        call): give it back."""
        with sigint_deferred():
            addr = self._slot.value
            if addr and not any(r.addr == addr and not r.done for r in self._held.values()):
                self._slot.value = None
                self._check(self._lib.stk_loader_release(self._h, addr, self._stream()),
                            "stk_loader_release")
            self._slot.value = None

    def _give_back(self, rec, wait=False):
        """Release REC (its last reference is gone). Page-locked memory may still be read by an
        asynchronous copy queued on the current CUDA stream: it is released once an event
        recorded there has passed (at once when WAIT)."""
        if rec.done:
            return
        torch = self._torch
        if rec.pinned and not rec.device and torch is not None and torch.cuda.is_available():
            ev = torch.cuda.Event()
            ev.record(torch.cuda.current_stream())
            if not wait:
                self._pending.append((rec, ev))
                return
            ev.synchronize()
        self._release(rec)

    def _release(self, rec):
        with sigint_deferred():
            rec.done = True
            self._held.pop(rec.seq, None)
            stream = self._stream() if rec.device else None
            rc = self._lib.stk_loader_release(self._h, rec.addr, stream)
        self._check(rc, "stk_loader_release")

    def _drain(self):
        """Release the batches whose references are gone (iterating thread only)."""
        self._recover_slot()
        while self._freed:
            self._give_back(self._freed.popleft())
        if self._pending:
            keep = []
            for rec, ev in self._pending:
                if ev.query():
                    self._release(rec)
                else:
                    keep.append((rec, ev))
            self._pending = keep

    def _detach(self, rec):
        """Move REC's images out of the ring: the caller keeps them, the slot gets new memory."""
        with sigint_deferred():
            with self._mu:
                if not rec.alive or rec.done:
                    return                   # its finaliser queued it in _freed
                rec.busy = True
            ptr = ctypes.c_void_p()
            rc = self._lib.stk_loader_detach(self._h, rec.addr, ctypes.byref(ptr))
            with self._mu:
                rec.busy = False
                if rc == _lib.STK_OK:
                    rec.done = True
                    rec.ptr = ptr.value
                    self._held.pop(rec.seq, None)
                    if not rec.alive:
                        self._lib.stk_images_free(rec.ptr)
                        rec.ptr = None
                elif not rec.alive:
                    self._freed.append(rec)
        self._check(rc, "stk_loader_detach")

    def _make_room(self):
        """Before batch number _seq: the batch K earlier shares its slot (device buffer), and
        the one after it the next. Batches still referenced there are detached (host) or, for
        device batches, reported: device memory cannot change hands."""
        self._drain()
        if not self._held:
            return
        limit = self._seq - self._ring + 1
        for rec in sorted(self._held.values(), key=lambda r: r.seq):
            if rec.seq > limit:
                break
            pend = [p for p in self._pending if p[0] is rec]
            if pend:
                self._pending = [p for p in self._pending if p[0] is not rec]
                pend[0][1].synchronize()
                self._release(rec)
            elif rec.device:
                if rec.seq <= self._seq - self._ring:
                    raise _errors.StateError(
                        "device batch %d is still referenced and its buffer is needed for batch "
                        "%d: with device=cuda at most device_buffers - 1 = %d batches can be kept "
                        "by reference; clone() the ones you keep or raise device_buffers"
                        % (rec.seq, self._seq, self._ring - 1), _lib.STK_E_STATE, "STK_E_STATE")
            else:
                self._detach(rec)

    def _settle_all(self):
        """Before a seek (the library wants every batch back): detach what is still referenced."""
        self._drain()
        for rec in list(self._pending):
            rec[1].synchronize()
            self._release(rec[0])
        self._pending = []
        for rec in sorted(self._held.values(), key=lambda r: r.seq):
            if rec.device:
                if rec.alive:
                    raise _errors.StateError(
                        "%d device batches are still referenced; the loader cannot change its "
                        "position under them (drop or clone() them first)" % sum(
                            1 for r in self._held.values() if r.device and r.alive),
                        _lib.STK_E_STATE, "STK_E_STATE")
                self._release(rec)
            else:
                self._detach(rec)
        self._drain()

    def _keep_held(self):
        """close(): host batches still referenced outlive the loader."""
        try:
            self._drain()
            for rec, ev in self._pending:
                ev.synchronize()
            self._pending = []
            dev = 0
            for rec in sorted(self._held.values(), key=lambda r: r.seq):
                if rec.device:
                    dev += rec.alive
                elif not rec.done:
                    self._detach(rec)
            if dev:
                warnings.warn("stoker: close() with %d device batches still referenced: their "
                              "memory is freed (clone() device batches that must outlive the "
                              "loader)" % dev, stacklevel=3)
        except _errors.StokerError as e:   # close() must go on: the batches then die with it
            warnings.warn("stoker: close(): could not keep the batches still referenced: %s" % e)
