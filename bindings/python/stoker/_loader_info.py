# SPDX-License-Identifier: MIT
"""What a stoker.Loader tells about itself: the dataset's classes, what opening an s3:// path
fetched, the library's report and counters (stats()). A mixin of stoker.Loader; stats() and
report() may be called from any thread."""

import ctypes

from . import _lib
from . import dataset as _dataset
from . import errors as _errors
from ._loader_batches import LoaderStats, _fetch_dict, _per_image, _stage_dict


class LoaderInfo:
    @property
    def classes(self):
        """Class names (label = position), as ImageFolder.classes; [] if the dataset has none."""
        self._usable()
        ds = self._lib.stk_loader_dataset(self._h)
        if not ds:
            return []
        info = _lib.DatasetInfo()
        self._check(self._lib.stk_dataset_info_get(ds, ctypes.byref(info)), "dataset info")
        return [_lib.text(self._lib.stk_dataset_class_name(ds, i)) for i in range(info.classes)]

    def fetch_stats(self):
        """The s3:// dataset's fetch counters since the open, its download included (see
        stoker.Dataset.fetch_stats; docs/S3.md "Fetch stats"); all 0 for a local path. Since 0.5."""
        self._usable()
        return _dataset._fetch_stats(self._lib, self._lib.stk_loader_dataset(self._h))

    def report(self):
        """The library's one-screen report: stages, waits, the bottleneck and what would help."""
        self._usable()
        with self._lock:
            if not self._started or self._h is None:
                return ""
            need = self._lib.stk_loader_report(self._h, None, 0)
            buf = ctypes.create_string_buffer(int(need) + 1)
            self._lib.stk_loader_report(self._h, buf, len(buf))
            return _lib.text(buf.value)

    def stats(self, max_errors=1024):
        """A dict of the library's counters (stk_stats: per-stage busy/starved/blocked seconds,
        wait_s = time this process waited for data, bytes, errors, memory), plus "errors": the
        bad records kept (dicts with index, epoch, status, where, reason), "error_count",
        "workers_note": how the number of decode workers was chosen, and "verdict"
        (stk_loader_verdict: bottleneck, bottleneck_name, the shares behind it).
        "augment_s" is the part of decode's busy_s spent in the per-sample augmentation (policy,
        steps, RandomErasing; 0.0 without any); "ms_per_img" gives busy milliseconds per image
        for "read", "decode" (without the augmentation) and "augment" (busy time is wall time
        inside the work, summed over a stage's threads), and "augment_per_decode" the ratio of
        the last two (0.0 without augmentation). For an s3:// dataset (since 0.5), fetch_bytes,
        fetch_busy_s, fetch_starved_s, cache_hits and cache_misses are the library's fetch
        counters, cumulative since the open (its download included), and "fetch" sums them up:
        bytes, busy_s, starved_s (the loader waited for the fetch), hits, misses, hit_rate and
        link_mb_per_s, the link's measured rate (bytes / busy_s; all zero for a local path),
        and max_wait_s: the longest time this consumer waited for one batch while the reader
        waited for a shard to arrive (the batch's decode not counted), in the epoch of the last
        batch handed out (0.0 for a local path or a fetch that kept ahead; compare it with the
        epoch's time per batch; never above starved_s).
        str(stats) is the library's report. Any thread."""
        self._usable()
        lib = self._lib
        with self._lock:
            base = {"started": self._started, "samples_per_epoch": self._samples,
                    "batches_per_epoch": self._batches, "copied": self._copied,
                    "held": sum(1 for r in list(self._held.values()) if not r.done),
                    "pin_memory_reason": self.pin_memory_reason}
            if not self._started or self._h is None:
                return LoaderStats(base, "")
            st = _lib.Stats()
            self._check(lib.stk_loader_stats(self._h, ctypes.byref(st)), "stats")
            d = dict(base)
            for name, _t in _lib.Stats._fields_:
                if name in ("reserved",):
                    continue
                v = getattr(st, name)
                if isinstance(v, _lib.StageStats):
                    v = _stage_dict(v)
                elif isinstance(v, bytes):
                    v = _lib.text(v)
                d[name] = v
            d["io_backend_name"] = _lib.IO_NAMES.get(st.io_backend, str(st.io_backend))
            d["ms_per_img"], d["augment_per_decode"] = _per_image(st)
            d["fetch"] = _fetch_dict(st)
            d["workers_note"] = _lib.workers_note(lib, self._h)
            count = int(lib.stk_loader_error_count(self._h))
            d["error_count"] = count
            errs = []
            e = _lib.RecordError()
            for i in range(min(count, 1024, max_errors)):
                if lib.stk_loader_error_get(self._h, i, ctypes.byref(e)) != _lib.STK_OK:
                    break
                errs.append({"index": e.index, "epoch": e.epoch, "status": e.status,
                             "status_name": _errors.status_name(e.status),
                             "errno": e.sys_errno, "where": _lib.text(e.where),
                             "reason": _lib.text(e.reason)})
            d["errors"] = errs
            d["verdict"] = _lib.loader_verdict(lib, self._h)
            need = lib.stk_loader_report(self._h, None, 0)
            buf = ctypes.create_string_buffer(int(need) + 1)
            lib.stk_loader_report(self._h, buf, len(buf))
            return LoaderStats(d, _lib.text(buf.value))
