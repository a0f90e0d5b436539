# SPDX-License-Identifier: MIT
"""Ctrl-C: SIGINT sent while a process is blocked in iteration (a pipeline slowed by injected
read delays) raises KeyboardInterrupt within ~1 s; the process then closes the loader and exits
cleanly, also when the KeyboardInterrupt is not caught."""

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import SUBPROCESS_ENV, sigint_after, slow_loader

CHILD = textwrap.dedent(r'''
    import sys, time
    import stoker
    from stoker import _lib
    path, catch = sys.argv[1], sys.argv[2] == "catch"
    slow = {_lib.P_FAULT_DELAY_PPM: 1000000, _lib.P_FAULT_DELAY_US: 1500000}
    loader = stoker.Loader(path, 4, size=16, workers=1, queue_depth=2, options=slow,
                           array="numpy")
    print("iterating", flush=True)
    try:
        for batch in loader:
            print("got a batch: the pipeline was not slow enough", flush=True)
    except KeyboardInterrupt:
        if not catch:
            raise
        print("KeyboardInterrupt %.6f" % time.monotonic(), flush=True)
        t = time.monotonic()
        loader.close()
        print("closed in %.2f s" % (time.monotonic() - t), flush=True)
''')


@pytest.mark.parametrize("catch", ["catch", "uncaught"])
def test_sigint_interrupts_a_blocked_iteration(shards, catch):
    path, _ = shards
    p = subprocess.Popen([sys.executable, "-c", CHILD, path, catch], env=SUBPROCESS_ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "iterating", line + p.stderr.read()
        time.sleep(0.5)                       # now blocked in next()
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        if catch == "catch":
            line = p.stdout.readline()
            assert line.startswith("KeyboardInterrupt"), line + p.stderr.read()
            latency = float(line.split()[1]) - sent     # CLOCK_MONOTONIC is system-wide
            assert latency < 1.0, "KeyboardInterrupt %.2f s after SIGINT" % latency
            assert p.stdout.readline().startswith("closed")
            assert p.wait(timeout=30) == 0, p.stderr.read()
        else:
            rc = p.wait(timeout=30)
            exit_latency = time.monotonic() - sent
            err = p.stderr.read()
            assert "KeyboardInterrupt" in err, err
            assert rc in (-signal.SIGINT, 1, 130), (rc, err)
            assert "Fatal" not in err and "Segmentation" not in err, err
            # the atexit hook closed the loader (joined the threads) and the process left
            assert exit_latency < 10.0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_loader_usable_after_keyboard_interrupt(stoker_mod, shards):
    """In-process: SIGINT while blocked in next(); afterwards a new `for` runs a whole epoch."""
    path, labels = shards
    with slow_loader(stoker_mod, path) as loader:
        timer = sigint_after(0.2)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            for _batch in loader:
                pass
        assert time.monotonic() - t0 < 1.5
        timer.join()
        seen = [i for _x, _y, idx in loader for i in idx.tolist()]
        assert sorted(seen) == list(range(len(labels)))
