# SPDX-License-Identifier: MIT
"""stoker.Loader's state_dict / load_state_dict: where a loader goes on, as a plain dict, and
resuming from it on the same or another world size. A mixin of stoker.Loader."""

import ctypes
import hashlib
import os

from . import _lib


class ResumeState:
    """stoker.Loader's state_dict and load_state_dict."""

    STATE_VERSION = 3
    _resume_segs = None   # the segments of a pending load_state_dict (shard-window order)

    def _config(self):
        return {"seed": self.seed, "batch_size": self.batch_size, "shuffle": self.shuffle,
                "drop_last": self.drop_last, "rank": self.rank, "world_size": self.world_size,
                "samples_per_epoch": self._samples, "train": self.train}

    def _dataset_id(self):
        """{"count", "fingerprint"}: the record count and a hash of the dataset's identity —
        record count, payload bytes, class names and shard file names (not their directory, so
        a copy elsewhere matches); with ``indices`` their count and the list. For an s3://
        dataset the class names are left out: streamed through a smaller cache, they are
        known only once shard 0 is in it (never on a rank that does not read shard 0)."""
        if self._fingerprint is None:
            lib = self._lib
            ds = lib.stk_loader_dataset(self._h)
            info = _lib.DatasetInfo()
            self._check(lib.stk_dataset_info_get(ds, ctypes.byref(info)), "dataset info")
            h = hashlib.sha256(b"stoker-dataset-v1")
            h.update(b"%d %d %d" % (info.records, info.payload_bytes, info.layout))
            p = self.path
            if not (p.startswith("s3://") if isinstance(p, str) else p.startswith(b"s3://")):
                for i in range(info.classes):
                    h.update(b"\0c" + (lib.stk_dataset_class_name(ds, i) or b""))
            if info.layout == _lib.LAYOUT_SHARDS:
                for i in range(info.shards):
                    h.update(b"\0s" + os.path.basename(lib.stk_dataset_shard_path(ds, i) or b""))
            count = int(info.records)
            if self.indices is not None:     # a subset: its records are the epoch's
                h.update(b"\0i" + self.indices.tobytes())
                count = int(self.indices.size)
            self._fingerprint = {"count": count, "fingerprint": h.hexdigest()[:32]}
        return dict(self._fingerprint)

    def _consumed(self, epoch_base, sample):
        n = self._dataset_id()["count"]
        return epoch_base + min(sample * self.world_size, n - epoch_base)

    def state_dict(self):
        """Where this loader goes on, as a plain dict (save it in the loop to resume mid-epoch):
        inside a ``for``, the sample after the last batch yielded; outside, where the next
        ``for`` starts. It resumes on any world size (load_state_dict). Format, version 3:

          version       3
          dataset       {"count": records, "fingerprint": hash of records, payload bytes,
                        classes and shard names} — a resume on another dataset is refused
          seed, shuffle the order's key — must match
          epoch         the epoch to continue
          world_size, rank, dist_mode, batch_size, drop_last: this run's split
          next_sample   this rank's position in its share of the epoch
          base          global positions the epoch had consumed when this run began it (0, or
                        the ``consumed`` of the state this run resumed from)
          consumed      the epoch's global positions delivered once every rank is at
                        next_sample: base + min(next_sample * world_size, count - base)
          segments      None in the global order; in the shard-window order (an s3://
                        dataset streamed through a smaller cache) the epoch's history:
                        [[world_size, window, samples each rank took], ...], the runs that
                        read part of it, this one last (docs/S3.md "Elastic resume inside a
                        streamed epoch") — what a resume on another world size needs there
          samples_per_epoch, train: for information
        Version 1 and 2 states are still accepted by load_state_dict (version 1: same world
        size only; version 2, which has no segments: in a streamed epoch, same world size
        only)."""
        self._usable()
        base, segs = 0, None
        if self._in_progress():
            epoch, sample = self._tell()
            if epoch != self._active().epoch:   # the library already moved past the epoch end
                epoch, sample = self._active().epoch + 1, 0
            else:
                base = self._tell_global()[2]
                segs = self._tell_segments()
        elif self._resume is not None:
            epoch, sample, base = self._resume
            segs = self._resume_segs
        else:
            epoch, sample = self._epoch, 0
        state = {"version": self.STATE_VERSION, "dataset": self._dataset_id(),
                 "epoch": int(epoch), "next_sample": int(sample), "base": int(base),
                 "consumed": int(self._consumed(base, sample)),
                 "dist_mode": self.dist_mode,
                 "segments": [list(x) for x in segs] if segs else None}
        state.update(self._config())
        return state

    @staticmethod
    def _field(state, key, kind, where="state_dict"):
        if key not in state:
            raise ValueError("%s: field %r is missing (not a stoker.Loader state_dict?)"
                             % (where, key))
        v = state[key]
        ok = isinstance(v, bool) if kind is bool else (isinstance(v, kind)
                                                      and not isinstance(v, bool))
        if not ok:
            raise ValueError("%s: field %r must be %s, got %r" % (where, key, kind.__name__, v))
        return v

    def _check_state(self, state, where):
        """Validate one version-2 state against this loader; returns it."""
        f = self._field
        ds = f(state, "dataset", dict, where)
        mine = self._dataset_id()
        cnt, fp = ds.get("count"), ds.get("fingerprint")
        if not isinstance(cnt, int) or not isinstance(fp, str):
            raise ValueError("%s: field 'dataset' must be {'count': int, 'fingerprint': str}, "
                             "got %r" % (where, ds))
        if cnt != mine["count"] or fp != mine["fingerprint"]:
            raise ValueError("%s: field 'dataset' is from another dataset (saved %d records, "
                             "fingerprint %s; this loader's %s: %d records, %s)"
                             % (where, cnt, fp, self.path, mine["count"], mine["fingerprint"]))
        seed = f(state, "seed", int, where)
        if seed != self.seed:
            raise ValueError("%s: field 'seed' = %d, this loader's seed is %d (the order would "
                             "differ)" % (where, seed, self.seed))
        shuffle = f(state, "shuffle", bool, where)
        if shuffle != self.shuffle:
            raise ValueError("%s: field 'shuffle' = %r, this loader's is %r"
                             % (where, shuffle, self.shuffle))
        epoch = f(state, "epoch", int, where)
        world = f(state, "world_size", int, where)
        rank = f(state, "rank", int, where)
        sample = f(state, "next_sample", int, where)
        base = f(state, "base", int, where)
        consumed = f(state, "consumed", int, where)
        n = mine["count"]
        if epoch < 0:
            raise ValueError("%s: field 'epoch' = %d is negative" % (where, epoch))
        if world < 1 or not 0 <= rank < world:
            raise ValueError("%s: fields 'rank' = %d / 'world_size' = %d are not a rank of a "
                             "world" % (where, rank, world))
        if not 0 <= base <= n:
            raise ValueError("%s: field 'base' = %d is outside 0..%d" % (where, base, n))
        if sample < 0 or consumed != base + min(sample * world, n - base):
            raise ValueError("%s: field 'consumed' = %d does not follow from base %d, "
                             "next_sample %d and world_size %d (expected %d)"
                             % (where, consumed, base, sample, world,
                                base + min(max(sample, 0) * world, n - base)))
        if state.get("version") == 3:
            self._check_segments(state, where)
        return state

    @staticmethod
    def _check_segments(state, where):
        """Version 3's 'segments': None, or the shard-window history, its last segment this
        state's own run."""
        if "segments" not in state:
            raise ValueError("%s: field 'segments' is missing (a version-3 state has it, None "
                             "in the global order)" % where)
        segs = state["segments"]
        if segs is None:
            return
        ok = isinstance(segs, (list, tuple)) and 1 <= len(segs) <= 17 and all(
            isinstance(x, (list, tuple)) and len(x) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in x)
            and x[0] >= 1 and 1 <= x[1] <= 256 and x[2] >= 0 for x in segs)
        if not ok:
            raise ValueError("%s: field 'segments' must be None or 1..17 lists [world_size >= 1, "
                             "window 1..256, taken >= 0], got %r" % (where, segs))


    def load_state_dict(self, state):
        """Continue from STATE (from state_dict()): the next ``for`` yields the rest of that
        epoch. STATE may come from a run with another world size (elastic resume): then the
        epoch's global positions [0, consumed) count as delivered and the rest is split among
        this run's ranks, rank r taking consumed + r, consumed + r + W, ... (dist_mode "pad"
        repeats the rest's first samples so that every rank has as many; "drop" leaves out the
        rest's last (count - consumed) mod W). Across the two runs every sample of the epoch is
        delivered once, those tail rules aside. With the same world size, split and batch size
        the rest is exactly what the uninterrupted run would have delivered.

        Every rank may load the same state (rank 0's, say): under DDP all ranks are at the same
        step. A list of every rank's states is accepted too and checked to agree; states whose
        ranks took different numbers of samples are refused (what was delivered is then not a
        prefix of the epoch's order). A state from another dataset, seed or shuffle, or a
        malformed one, raises ValueError naming the field."""
        self._usable()
        if isinstance(state, (list, tuple)):
            state = self._merge_states(state)
        if not isinstance(state, dict):
            raise ValueError("state_dict must be a dict (or a list of every rank's), got %s"
                             % type(state).__name__)
        version = self._field(state, "version", int)
        segs = None
        if version == 1:
            epoch, sample, base = self._load_v1(state)
        elif version in (2, self.STATE_VERSION):
            self._check_state(state, "state_dict")
            segs = state.get("segments") if version == 3 else None
            if segs:
                # the shard-window order: the history positions the run
                # (stk_loader_resume_segments); sample and base are then 0 (a state_dict
                # before the next `for` gives back the same history)
                epoch, sample, base = state["epoch"], 0, 0
                if (len(segs) == 1 and segs[0][0] == self.world_size
                        and state["next_sample"] >= self._samples):
                    epoch, segs = epoch + 1, None   # this rank's share is done
            else:
                epoch, sample, base = self._resume_point(state)
        else:
            raise ValueError("state_dict: field 'version' = %d is not supported (this stoker "
                             "reads versions 1 to %d)" % (version, self.STATE_VERSION))
        with self._consuming():
            self._drain()
            self._end_iteration()
            self._resume = (epoch, sample, base)
            self._resume_segs = [list(x) for x in segs] if segs else None
            self._epoch = epoch
            self._asked = False

    def _merge_states(self, states):
        if not states:
            raise ValueError("state_dict: an empty list of rank states")
        for i, st in enumerate(states):
            if not isinstance(st, dict):
                raise ValueError("state_dict[%d] is not a dict" % i)
            if self._field(st, "version", int, "state_dict[%d]" % i) not in (2, 3):
                raise ValueError("state_dict[%d]: field 'version' must be 2 or %d in a list of "
                                 "rank states" % (i, self.STATE_VERSION))
            self._check_state(st, "state_dict[%d]" % i)
        first = states[0]
        world = first["world_size"]
        ranks = sorted(st["rank"] for st in states)
        if ranks != list(range(world)):
            raise ValueError("state_dict: the list holds ranks %r, not every rank of world size "
                             "%d once" % (ranks, world))
        for key in ("version", "epoch", "world_size", "base", "seed", "dist_mode", "batch_size",
                    "drop_last", "segments"):
            vals = sorted({repr(st.get(key)) for st in states})
            if len(vals) > 1:
                raise ValueError("state_dict: field %r differs between the ranks' states (%s)"
                                 % (key, ", ".join(vals)))
        ks = {st["next_sample"] for st in states}
        if len(ks) > 1:
            raise ValueError("state_dict: field 'next_sample' differs between ranks (%s): the "
                             "ranks took different numbers of samples, so what was delivered "
                             "is not a prefix of the epoch's order; save the states at the same "
                             "step on every rank" % sorted(ks))
        return first

    def _resume_point(self, state):
        """(epoch, next_sample, base) this rank continues at."""
        n = self._dataset_id()["count"]
        epoch = state["epoch"]
        same_split = (state["world_size"] == self.world_size
                      and state.get("dist_mode") == self.dist_mode
                      and state.get("batch_size") == self.batch_size
                      and state.get("drop_last") == self.drop_last)
        if same_split:
            # exactly the uninterrupted continuation (padding included)
            base, sample = state["base"], state["next_sample"]
            if base == 0 and sample >= self._samples:
                return epoch + 1, 0, 0          # this rank's share is done
        else:
            base, sample = state["consumed"], 0
        if base >= n and sample == 0:
            return epoch + 1, 0, 0              # nothing of the epoch is left
        return epoch, sample, base

    def _load_v1(self, state):
        if "epoch" not in state or "next_sample" not in state:
            raise ValueError("not a stoker.Loader state_dict: %r" % (state,))
        mine = self._config()
        diff = ["%s: saved %r, this loader %r" % (k, state[k], v) for k, v in mine.items()
                if k in state and state[k] != v]
        if diff:
            raise ValueError("state_dict does not match this loader (" + "; ".join(diff) + ")")
        epoch, sample = int(state["epoch"]), int(state["next_sample"])
        if epoch < 0 or not 0 <= sample <= self._samples:
            raise ValueError("state_dict position out of range: epoch %d, next_sample %d "
                             "(samples per epoch %d)" % (epoch, sample, self._samples))
        if sample == self._samples:
            epoch, sample = epoch + 1, 0
        return epoch, sample, 0
