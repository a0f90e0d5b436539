# SPDX-License-Identifier: MIT
"""stoker.Loader and stoker.DataLoader against misuse from threads:
- close() from another thread while a `for` is blocked in the library ends that `for` cleanly
  (StopIteration) and frees nothing under it (the old binding crashed: use-after-free);
- a second thread stepping the same iterator while the first is inside gets RuntimeError naming
  the first thread, and the first still delivers every record exactly once; two threads sharing
  an iterator and retrying get each batch of the epoch once between them;
- a second iter() while a pass is live raises RuntimeError naming the live pass (zip(L, L) used to
  yield nothing), while break-then-iterate-again, exhausted, closed or dropped passes still work.
The thread cases run in a child process under a timeout, so a crash or a hang fails the test.
A pipeline is made slow for certain by injected read delays (STK_P_FAULT_DELAY_*); the tests
wait for the consumer thread to be inside the loader (Loader._consumer) rather than sleep."""

import subprocess
import sys
import textwrap

import pytest

from conftest import SUBPROCESS_ENV, CLASSES

# the child: build a Loader (or a DataLoader) on argv[1] whose every read waits DELAY_US
PRELUDE = textwrap.dedent(r'''
    import sys, threading, time
    import stoker
    from stoker import _lib
    path, kind, delay_us = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def make():
        if kind == "loader":
            L = stoker.Loader(path, 4, size=16, workers=1, train=False, return_index=True,
                              array="numpy", io_backend="pread")
        else:
            import torchvision.transforms as T
            from torchvision.datasets import ImageFolder
            tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])
            L = stoker.DataLoader(ImageFolder(path, tf), batch_size=4)
        L._set(_lib.P_IO_THREADS, 8, "io_threads")
        L._set(_lib.P_FAULT_DELAY_PPM, 1000000, "fault_delay_ppm")
        L._set(_lib.P_FAULT_DELAY_US, delay_us, "fault_delay_us")
        return L

    def wait_consumer(L, thread):
        deadline = time.monotonic() + 60
        while L._consumer is None or L._consumer[0] is not thread:
            assert time.monotonic() < deadline, "the consumer thread never entered the loader"
            time.sleep(0.001)
''')

CLOSE_CHILD = PRELUDE + textwrap.dedent(r'''
    L = make()
    out = []
    def loop():
        try:
            for _b in L:
                out.append("batch")
            out.append("end")
        except BaseException as e:   # noqa: BLE001
            out.append(repr(e))
    t = threading.Thread(target=loop, name="trainer")
    t.start()
    wait_consumer(L, t)
    time.sleep(0.3)                  # not needed for correctness: lets it block in next()
    t0 = time.monotonic()
    L.close()
    t.join(120)                      # a hang guard: "alive" fails the test
    print("result", out, "alive" if t.is_alive() else "joined", "%.2f" % (time.monotonic() - t0),
          flush=True)
''')

SHARED_CHILD = PRELUDE + textwrap.dedent(r'''
    L = make()
    it = iter(L)
    got, out = [], []
    def loop():
        try:
            for b in it:
                got.append(b)
            out.append("end")
        except BaseException as e:   # noqa: BLE001
            out.append(repr(e))
    t = threading.Thread(target=loop, name="first-consumer")
    t.start()
    wait_consumer(L, t)              # the first batch needs DELAY_US: the thread is inside
    errors = []
    for attempt in (lambda: next(it), lambda: iter(L), lambda: L.set_epoch(3)):
        try:
            attempt()
            errors.append("no error")
        except RuntimeError as e:
            errors.append(str(e))
    t.join(120)
    print("errors", errors, flush=True)
    print("result", out, len(got), len(L), flush=True)
    if kind == "loader":
        idx = sorted(int(i) for b in got for i in b[-1])
        print("indices", idx == list(range(len(L.dataset))), flush=True)
    else:
        print("samples", sum(len(b[1]) for b in got), len(L.dataset), flush=True)
    L.close()
''')

# two threads share one iterator and retry when the other is inside: together they get each
# batch of the epoch once (the old binding gave an extra batch of the next epoch, or crashed)
HAMMER_CHILD = PRELUDE + textwrap.dedent(r'''
    L = stoker.Loader(path, 1, size=16, workers=2, train=False, return_index=True,
                      array="numpy")
    for epoch in range(3):
        it = iter(L)
        got, busy = [], [0]
        def loop():
            while True:
                try:
                    b = next(it)
                except RuntimeError:
                    busy[0] += 1
                    continue
                except StopIteration:
                    return
                got.append(int(b[-1][0]))
        ts = [threading.Thread(target=loop) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        print("epoch%d" % epoch, len(got), len(L), sorted(got) == list(range(len(L))), flush=True)
    L.close()
''')

N = sum((13, 11, 12))


def _run(child, path, kind, delay_us, timeout=180):
    p = subprocess.run([sys.executable, "-c", child, path, kind, str(delay_us)],
                       env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "child exited %d\n%s%s" % (p.returncode, p.stdout, p.stderr)
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in p.stdout.splitlines()
            if " " in line}


def _source(kind, shards, imagefolder):
    if kind == "dataloader":
        pytest.importorskip("torch")
        pytest.importorskip("torchvision")
        return imagefolder[0]
    return shards[0]


@pytest.mark.parametrize("kind", ["loader", "dataloader"])
def test_close_from_another_thread_ends_a_blocked_for(kind, shards, imagefolder):
    res = _run(CLOSE_CHILD, _source(kind, shards, imagefolder), kind, 2000000)
    assert "result" in res, res
    result = res["result"]
    # StopIteration, no batch, no crash: close() ended the for while its first batch was still
    # being read (every read waits 2 s), and the thread returned (joined: within the hang guard,
    # not a wall-clock bound a loaded machine could break)
    assert result.startswith("['end'] joined"), result


@pytest.mark.parametrize("kind", ["loader", "dataloader"])
def test_second_thread_gets_a_clear_error_first_delivers_all(kind, shards, imagefolder):
    res = _run(SHARED_CHILD, _source(kind, shards, imagefolder), kind, 1000000)
    errors = eval(res["errors"])        # noqa: S307 - our own child's repr of a list of str
    for e in errors:
        assert "being iterated by thread 'first-consumer'" in e, errors
        assert "one consumer thread per loader" in e, errors
    out, n_got, n_len = res["result"].rsplit(" ", 2)
    assert out == "['end']" and int(n_got) == int(n_len), res["result"]
    if kind == "loader":
        assert res["indices"] == "True", res     # every record exactly once
    else:
        got, total = res["samples"].split()
        assert int(got) == int(total) == N, res


def _loader(kind, stoker_mod, shards, imagefolder):
    if kind == "loader":
        return stoker_mod.Loader(shards[0], 5, size=16, workers=1, train=False,
                                 return_index=True, array="numpy")
    pytest.importorskip("torch")
    tv = pytest.importorskip("torchvision")
    tf = tv.transforms.Compose([tv.transforms.Resize(20), tv.transforms.CenterCrop(16),
                                tv.transforms.PILToTensor()])
    return stoker_mod.DataLoader(tv.datasets.ImageFolder(imagefolder[0], tf), batch_size=5)


def _count(batches):
    return sum(len(b[1]) for b in batches)


def test_dataloader_later_pass_ends_the_earlier(stoker_mod, shards, imagefolder):
    # stoker.DataLoader (issue 26): a pass that begins ends the earlier one instead of
    # raising (Lightning keeps an exhausted iterator while it asks for the next; its
    # limit_train_batches abandons one mid-pass); stepping the ended one mid-way raises
    with _loader("dataloader", stoker_mod, shards, imagefolder) as L:
        nb = len(L)
        with pytest.raises(RuntimeError, match=r"\(epoch 0, batch 1 of %d\) was ended by a "
                                               r"later iter\(\)" % nb):
            list(zip(L, L))
        assert _count(list(L)) == N
        it = iter(L)
        next(it)
        assert _count(list(L)) == N          # a later pass, in full
        with pytest.raises(RuntimeError, match=r"ended by a later iter"):
            next(it)
        it = iter(L)
        done = [next(it) for _ in range(nb)]  # every batch, StopIteration not yet seen
        assert _count(list(L)) == N
        with pytest.raises(StopIteration):    # it had delivered all: it just ends
            next(it)
        assert _count(done) == N


@pytest.mark.parametrize("kind", ["loader"])
def test_second_iter_of_a_live_pass_raises(kind, stoker_mod, shards, imagefolder):
    with _loader(kind, stoker_mod, shards, imagefolder) as L:
        nb = len(L)
        with pytest.raises(RuntimeError, match=r"iterator of this stoker.Loader is live "
                                               r"\(epoch 0, batch 0 of %d\)" % nb):
            list(zip(L, L))
        # the first iterator of that zip is gone with it: a new pass runs (epoch 1) in full
        assert _count(list(L)) == N
        it = iter(L)
        next(it)
        with pytest.raises(RuntimeError, match=r"live \(epoch 2, batch 1 of %d\)" % nb):
            iter(L)
        assert _count(list(it)) == N - 5      # the live pass goes on undisturbed
        # exhausted: iter() again is fine
        assert _count(list(L)) == N


@pytest.mark.parametrize("kind", ["loader", "dataloader"])
def test_break_close_or_drop_then_iterate_again(kind, stoker_mod, shards, imagefolder):
    with _loader(kind, stoker_mod, shards, imagefolder) as L:
        for _epoch in range(3):              # break out of each epoch early
            for k, _b in enumerate(L):
                if k == 1:
                    break
        assert L.epoch == 3
        assert _count(list(L)) == N          # then a whole epoch
        it = iter(L)
        next(it)
        it.close()                           # closed: a new pass may start
        assert _count(list(L)) == N
        it = iter(L)
        next(it)
        del it                               # dropped: a new pass may start
        assert _count(list(L)) == N
        it = iter(L)
        next(it)
        L.set_epoch(9)                       # set_epoch ends the live pass, as documented
        with pytest.raises(StopIteration):
            next(it)
        assert _count(list(L)) == N


def test_two_threads_sharing_an_iterator_get_each_batch_once(shards):
    res = _run(HAMMER_CHILD, shards[0], "loader", 0)
    for epoch in range(3):
        got, n, exact = res["epoch%d" % epoch].split()
        assert int(got) == int(n) == N and exact == "True", (epoch, res)
