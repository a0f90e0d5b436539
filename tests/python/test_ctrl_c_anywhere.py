# SPDX-License-Identifier: MIT
"""Ctrl-C at any point of an iteration leaves the loader usable: SIGINT is raised at each line
stoker's own Python code runs during a pass (every batch kept by reference, so slots are detached
and released inside next()), one interruption per pass; after each, a whole epoch delivers every
record exactly once and no library call is refused. A KeyboardInterrupt that struck between a
library call and the binding's record of it (a batch released or detached in the library but
still listed as held) made the next pass fail with "stk_loader_detach: not a batch held"."""

import os
import signal
import sys

import stoker

PKG = os.path.dirname(os.path.abspath(stoker.__file__))


class Striker:
    """A trace function counting the line events in stoker's files; at event number AT it
    raises SIGINT in this process (the handler then runs where Python checks for signals)."""

    def __init__(self, at):
        self.at = at
        self.count = 0

    def __call__(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(PKG):
            return None
        return self.local

    def local(self, frame, event, arg):
        if event == "line":
            self.count += 1
            if self.count == self.at:
                signal.raise_signal(signal.SIGINT)
        return self.local


def one_pass(loader, kept, striker=None):
    seen = []
    sys.settrace(striker)
    try:
        for _x, _y, idx in loader:
            kept.append(_x)              # held by reference: the ring must detach it
            seen.extend(idx.tolist())
    finally:
        sys.settrace(None)
    return seen


def test_interrupt_anywhere_in_a_pass(stoker_mod, shards):
    path, labels = shards
    every = list(range(len(labels)))
    with stoker_mod.Loader(path, 4, size=16, workers=1, return_index=True, prefetch=2,
                           array="numpy") as loader:
        counter = Striker(0)
        assert sorted(one_pass(loader, [], counter)) == every
        total = counter.count
        assert total > 50, total
        step = max(1, total // 150)
        interrupted = 0
        for at in range(1, total, step):
            kept = []
            try:
                one_pass(loader, kept, Striker(at))
            except KeyboardInterrupt:
                interrupted += 1
            seen = one_pass(loader, kept)
            assert sorted(seen) == every, "after an interrupt at line event %d" % at
            del kept
        assert interrupted > (total // step) // 2, (interrupted, total, step)
