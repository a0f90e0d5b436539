# SPDX-License-Identifier: MIT
"""Ctrl-C: SIGINT sent while a process is blocked in iteration (a pipeline slowed by injected
read delays) raises KeyboardInterrupt before the first batch exists (the wait is interrupted, not
run out); the process then closes the loader and exits cleanly, also when the KeyboardInterrupt is
not caught. No wall-clock bound but hang guards: the signal is sent once the child's main thread
sleeps in next() (its /proc state), and "before the batch" is the loader's own count."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import SUBPROCESS_ENV

CHILD = textwrap.dedent(r'''
    import sys, time
    import stoker
    from stoker import _lib
    path, catch = sys.argv[1], sys.argv[2] == "catch"
    # every read waits 5 s: the first batch (4 reads, one reader) exists 20 s after the start at
    # the earliest, far beyond any delay a busy machine puts on the signal
    slow = {_lib.P_FAULT_DELAY_PPM: 1000000, _lib.P_FAULT_DELAY_US: 5000000}
    loader = stoker.Loader(path, 4, size=16, workers=1, queue_depth=2, options=slow,
                           array="numpy")
    try:
        print("iterating", flush=True)
        for batch in loader:
            print("got a batch: the pipeline was not slow enough", flush=True)
    except KeyboardInterrupt:
        # the batches next() had handed over when the interrupt came: 0 when it cut the wait
        print("KeyboardInterrupt batches=%d" % loader.stats()["batches"], file=sys.stderr, flush=True)
        if not catch:
            raise
        print("KeyboardInterrupt %.6f" % time.monotonic(), flush=True)
        t = time.monotonic()
        loader.close()
        print("closed in %.2f s" % (time.monotonic() - t), flush=True)
''')


HANG = 300   # a guard against a hang only: a loaded machine may be slow, never this slow


def wait_blocked(pid):
    """until the main thread of PID sleeps (state S: in next(), waiting for a batch)"""
    t0 = time.monotonic()
    while time.monotonic() - t0 < HANG:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                return
        time.sleep(0.01)
    raise AssertionError("the child never blocked in next()")


@pytest.mark.parametrize("catch", ["catch", "uncaught"])
def test_sigint_interrupts_a_blocked_iteration(shards, catch):
    path, _ = shards
    p = subprocess.Popen([sys.executable, "-c", CHILD, path, catch], env=SUBPROCESS_ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "iterating", line + p.stderr.read()
        wait_blocked(p.pid)
        p.send_signal(signal.SIGINT)
        if catch == "catch":
            line = p.stdout.readline()
            assert line.startswith("KeyboardInterrupt"), line + p.stderr.read()
            assert p.stdout.readline().startswith("closed")
            assert p.wait(timeout=HANG) == 0, p.stderr.read()
            err = p.stderr.read()
        else:
            # the atexit hook closes the loader (joins the threads) and the process leaves
            rc = p.wait(timeout=HANG)
            err = p.stderr.read()
            assert "Traceback" in err and "\nKeyboardInterrupt" in err, err
            assert rc in (-signal.SIGINT, 1, 130), (rc, err)
            assert "Fatal" not in err and "Segmentation" not in err, err
        # the interrupt cut the wait for the first batch: no batch was handed over before it
        assert "KeyboardInterrupt batches=0" in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_loader_usable_after_keyboard_interrupt(stoker_mod, shards):
    """In-process: SIGINT while blocked in next(); afterwards a new `for` runs a whole epoch."""
    from stoker import _lib
    path, labels = shards
    # every read waits 100 ms: a batch of 12 takes >= 1.2 s, an epoch (3 batches) >= 3.6 s. The
    # signal is sent once the first batch has been handed over (the loader's own count), so it
    # comes while the loop waits in next() for a later one, however late a busy machine runs the
    # sending thread within the >= 2.4 s left of the epoch
    slow = {_lib.P_FAULT_DELAY_PPM: 1000000, _lib.P_FAULT_DELAY_US: 100000}
    with stoker_mod.Loader(path, 12, size=16, workers=1, queue_depth=4, options=slow,
                           return_index=True, prefetch=2) as loader:
        def interrupt():
            while not loader.stats().get("batches"):
                time.sleep(0.005)
            os.kill(os.getpid(), signal.SIGINT)
        timer = threading.Thread(target=interrupt)
        timer.start()
        got = 0
        with pytest.raises(KeyboardInterrupt):
            for _batch in loader:
                got += 1
        assert got < len(labels) // 12, got    # interrupted inside the epoch
        timer.join()
        seen = [i for _x, _y, idx in loader for i in idx.tolist()]
        assert sorted(seen) == list(range(len(labels)))
