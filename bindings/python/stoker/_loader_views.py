# SPDX-License-Identifier: MIT
"""What a stoker.Loader shows as DataLoader's ``dataset`` and ``sampler``, and the process hooks
that close every open loader at exit and forget the parent's loaders in a fork() child."""

import atexit
import os
import threading
import weakref

_live = weakref.WeakSet()   # every open Loader of this process


class LoaderDataset:
    """``loader.dataset`` of a stoker.Loader: what a training script reads of an ImageFolder
    (``len``, ``root``, ``classes``, ``class_to_idx``). Items are not readable through it (the
    loader reads them); use stoker.Dataset or stoker.ImageFolder for that."""

    def __init__(self, root, classes, n):
        self.root = root
        self.classes = list(classes)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self._n = n

    def __len__(self):
        return self._n

    def __repr__(self):
        return "stoker.LoaderDataset(root=%r, %d records, %d classes)" % (
            self.root, self._n, len(self.classes))


class RankSampler:
    """``loader.sampler`` of a stoker.Loader: ``len()`` is this rank's samples per epoch (as
    DistributedSampler's); ``set_epoch(e)`` is ``loader.set_epoch(e)``. The order itself is
    computed in the library (a keyed permutation of (seed, epoch)), so it is not iterable."""

    def __init__(self, loader, n):
        self._loader = weakref.ref(loader)
        self._n = n
        self.num_replicas, self.rank = loader.world_size, loader.rank
        self.shuffle, self.seed = loader.shuffle, loader.seed
        self.drop_last = loader.dist_mode == "drop"

    def __len__(self):
        return self._n

    @property
    def epoch(self):
        loader = self._loader()
        return loader.epoch if loader is not None else 0

    def set_epoch(self, epoch):
        loader = self._loader()
        if loader is not None:
            loader.set_epoch(epoch)

    def __iter__(self):
        raise TypeError("a stoker.Loader's sampler is not iterable: the library computes the "
                        "order (pass return_index=True to see each batch's dataset indices)")


def _after_fork_in_child():
    # The parent's loaders must not be destroyed here (their threads are not in this process):
    # forget the handles so that close()/__del__ do nothing but mark them closed.
    for loader in list(_live):
        loader._closed = True
        loader._h = None
        loader._entry = threading.Condition(threading.Lock())  # a parent thread may hold it
        loader._consumer = None
    _live.clear()


def _close_all_at_exit():
    for loader in list(_live):
        try:
            loader.close()
        except Exception:   # noqa: BLE001
            pass


atexit.register(_close_all_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
