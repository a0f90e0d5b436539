# SPDX-License-Identifier: MIT
"""One consumer thread per stoker.Loader: the library's consumer calls (next, release, detach,
seek, start) come from one thread at a time, and close() from any thread wakes the one blocked
in the library and waits until it has left before the handle is freed (the Loader docstring's
"Threads"). A mixin of stoker.Loader."""

import contextlib
import os
import threading

from . import _lib
from . import errors as _errors
from ._loader_held import sigint_deferred


class ConsumerThread:
    @contextlib.contextmanager
    def _consuming(self, closed_ok=False):
        """The body runs as the loader's one consumer thread: the library's consumer calls
        (next, release, detach, seek, start) come from one thread at a time, and close() from
        another thread waits until the body has left before it destroys the handle. Another
        thread inside meanwhile: RuntimeError naming it. Closed or closing: StateError, or
        (CLOSED_OK) the body gets False and ends the pass."""
        if os.getpid() != self._pid:
            self._usable()                # the fork() child's error, before "closed"
        me = threading.current_thread()
        entered = False
        try:
            with sigint_deferred():     # Ctrl-C must not leave _entry held or the count wrong
                with self._entry:
                    entered = ok = self._enter(me, closed_ok)
            yield ok
        finally:
            if entered:
                with sigint_deferred(), self._entry:
                    self._consumer[1] -= 1
                    if not self._consumer[1]:
                        self._consumer = None
                        self._entry.notify_all()

    def _enter(self, me, closed_ok):
        """_consuming's entry, under _entry: True when ME is now (again) the consumer."""
        if self._closing or self._h is None:
            if not closed_ok:
                self._usable()
                raise _errors.StateError("the loader is closed", _lib.STK_E_STATE,
                                         "STK_E_STATE")
            return False
        owner = self._consumer
        if owner is not None and owner[0] is not me:
            raise RuntimeError(
                "stoker.Loader is being iterated by thread %r (ident %d); one consumer "
                "thread per loader: iterate it from one thread, or give each thread its "
                "own Loader" % (owner[0].name, owner[0].ident))
        if owner is None:
            self._consumer = owner = [me, 0]
        owner[1] += 1
        return True

    def _quiesce(self):
        """close(): no consumer call enters from now on; wake the one blocked in the library
        (stk_loader_cancel) and wait until it has left. Its pass then ends (StopIteration)."""
        me = threading.current_thread()
        with self._entry:
            self._closing = True
            owner, h = self._consumer, self._h
        if owner is None or owner[0] is me:
            return
        if h is not None and self._started and os.getpid() == self._pid:
            self._lib.stk_loader_cancel(h)
        with self._entry:
            while self._consumer is not None and self._consumer[0] is not me:
                self._entry.wait()
