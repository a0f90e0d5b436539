# SPDX-License-Identifier: MIT
"""Ctrl-C while blocked in next(), with the traceback kept (as Jupyter keeps it in
sys.last_traceback, which holds the interrupted iterator's frame): the loader can be iterated
again at once, and that pass is a whole epoch; the interrupted iterator then ends."""

import sys

import pytest

from conftest import sigint_after, slow_loader


def test_loader_iterable_while_the_traceback_is_kept(stoker_mod, shards):
    path, labels = shards
    with slow_loader(stoker_mod, path) as loader:
        timer = sigint_after(0.2)
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
