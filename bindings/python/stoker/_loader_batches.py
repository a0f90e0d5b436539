# SPDX-License-Identifier: MIT
"""The pieces of a stoker.Loader pass: the iterator of one pass, the record of a batch handed out
by reference and its finaliser, a device batch's __cuda_array_interface__, the stats dict."""

from ._loader_held import sigint_deferred


class _CudaView:
    """A device batch described by __cuda_array_interface__ (v2: the caller's stream already
    waits for the batch, so no stream is named and consumers need not synchronise)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
            "strides": None, "version": 2,
        }


class LoaderStats(dict):
    """stats() result: a dict of the library's counters; str() is the library's report."""

    def __init__(self, values, report_text):
        super().__init__(values)
        self.report = report_text

    def __str__(self):
        return self.report or dict.__repr__(self)


def _stage_dict(s):
    return {"busy_s": s.busy_s, "starved_s": s.starved_s, "blocked_s": s.blocked_s,
            "items": s.items, "bytes": s.bytes, "errors": s.errors, "threads": s.threads}


def _per_image(st):
    """Busy ms per image of read, decode without augmentation and augment; augment / decode."""
    decode_s = max(st.decode.busy_s - st.augment_s, 0.0)
    n = max(st.decode.items, 1)
    ms = {"read": 1e3 * st.read.busy_s / max(st.read.items, 1), "decode": 1e3 * decode_s / n,
          "augment": 1e3 * st.augment_s / n}
    return ms, (st.augment_s / decode_s if decode_s > 0 else 0.0)


def _fetch_dict(st):
    """The fetch counters of a Stats (cumulative since the open) as Loader.stats()["fetch"]."""
    look = st.cache_hits + st.cache_misses
    return {"bytes": st.fetch_bytes, "busy_s": st.fetch_busy_s, "starved_s": st.fetch_starved_s,
            "hits": st.cache_hits, "misses": st.cache_misses,
            "hit_rate": st.cache_hits / look if look else 0.0,
            "link_mb_per_s": st.fetch_bytes / st.fetch_busy_s / 1e6 if st.fetch_busy_s > 0 else 0.0,
            "max_wait_s": st.fetch_max_wait_us / 1e6}


class _Held:
    """A batch handed out by reference: the library's batch (ADDR) until it is released or its
    image memory detached (PTR, freed by the last reference's finaliser)."""

    __slots__ = ("addr", "seq", "device", "pinned", "ptr", "alive", "busy", "done")

    def __init__(self, addr, seq, device, pinned):
        self.addr, self.seq, self.device, self.pinned = addr, seq, device, pinned
        self.ptr = None
        self.alive = True    # a reference to the images exists
        self.busy = False    # the consumer is detaching it right now
        self.done = False    # released or detached: the library no longer holds it for us


def _on_free(mu, freed, rec, images_free):
    """Finaliser of a batch's images (any thread): a held batch goes to FREED, where the
    iterating thread releases it; detached memory is freed here."""
    with sigint_deferred(), mu:          # run wherever garbage is collected: never half done
        rec.alive = False
        if rec.busy:
            return                       # the detaching thread frees it
        if rec.done:
            if rec.ptr:
                images_free(rec.ptr)
                rec.ptr = None
            return
        freed.append(rec)


class _Iter:
    """One pass over the loader (one epoch, or the rest of it after load_state_dict). While it
    is live (not exhausted, not closed, still referenced) the loader refuses another iter()."""

    __slots__ = ("_loader", "_gen", "epoch", "done", "batches", "interrupted", "asked",
                 "__weakref__")

    def __init__(self, loader, gen, epoch, asked=False):
        self._loader = loader
        self._gen = gen
        self.epoch = epoch
        self.asked = asked   # its epoch was given by set_epoch()
        self.done = False
        self.batches = 0     # handed out by this pass
        self.interrupted = False  # KeyboardInterrupt left the last next(): not "live"

    def __iter__(self):
        return self

    def __next__(self):
        if self.done or self._loader._gen != self._gen:
            self.done = True
            raise StopIteration
        self.interrupted = False
        try:
            out = self._loader._next(self)
        except KeyboardInterrupt:
            # the traceback (Jupyter keeps it) holds this frame and so this iterator: it must not
            # keep the loader from a new `for` (which ends this pass); next(it) still goes on
            self.interrupted = True
            raise
        self.batches += 1
        return out

    def __len__(self):
        return len(self._loader)

    def close(self):
        """End this pass now (as leaving the ``for`` does): the loader may be iterated again."""
        self.done = True

    def __repr__(self):
        return "<stoker.Loader iterator: epoch %d, batch %d of %d%s>" % (
            self.epoch, self.batches, len(self._loader), ", done" if self.done else "")
