# SPDX-License-Identifier: MIT
"""Ctrl-C while blocked in next(), with the traceback kept (as Jupyter keeps it in
sys.last_traceback, which holds the interrupted iterator's frame): the loader can be iterated
again at once, and that pass is a whole epoch; the interrupted iterator then ends."""

import os
import signal
import sys
import threading

import pytest


def test_loader_iterable_while_the_traceback_is_kept(stoker_mod, shards):
    from stoker import _lib
    path, labels = shards
    # every read waits 50 ms: the first batch of 12 takes >= 0.6 s
    slow = {_lib.P_FAULT_DELAY_PPM: 1000000, _lib.P_FAULT_DELAY_US: 50000}
    with stoker_mod.Loader(path, 12, size=16, workers=1, queue_depth=4, options=slow,
                           return_index=True, prefetch=2) as loader:
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        it = iter(loader)
        try:
            with pytest.raises(KeyboardInterrupt) as ei:
                for _batch in it:
                    pass
            timer.join()
            # what Jupyter does: keep the last traceback, and with it every frame in it
            sys.last_type, sys.last_value, sys.last_traceback = ei.type, ei.value, ei.tb
            frames = []
            tb = ei.tb
            while tb is not None:
                frames.append(tb.tb_frame.f_code.co_name)
                tb = tb.tb_next
            assert "__next__" in frames      # the interrupted iterator is alive in the traceback
            seen = [i for _x, _y, idx in loader for i in idx.tolist()]
            assert sorted(seen) == list(range(len(labels)))
            with pytest.raises(StopIteration):   # the new pass ended the interrupted one
                next(it)
        finally:
            timer.cancel()
            sys.last_type = sys.last_value = sys.last_traceback = None
