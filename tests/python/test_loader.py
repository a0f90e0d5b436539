# SPDX-License-Identifier: MIT
"""stoker.Loader on a small packed dataset: coverage and labels, determinism, resume, epochs,
equality with the C API, torchvision-equal float output, zero-copy lifetime, stats, close, fork."""

import ctypes
import os
import time

import numpy as np
import pytest

from conftest import torch_or_skip

SIZE = 32
BS = 8


def _loader(stoker, path, **kw):
    batch_size = kw.pop("batch_size", BS)
    args = dict(size=SIZE, workers=2, return_index=True)
    args.update(kw)
    return stoker.Loader(path, batch_size, **args)


def _epoch(loader, copy=True):
    """All batches of one `for` as NumPy copies: [(images, labels, indices)]."""
    out = []
    for batch in loader:
        out.append(tuple(np.array(t.numpy() if hasattr(t, "numpy") else t, copy=True)
                         for t in batch))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert u.shape == v.shape and np.array_equal(u, v)


def test_every_sample_once_per_epoch_with_its_label(stoker_mod, shards):
    path, labels = shards
    n = len(labels)
    with _loader(stoker_mod, path) as loader:
        assert len(loader) == -(-n // BS)
        assert loader.samples_per_epoch == n
        assert loader.classes == ["ant", "bee", "cat"]
        orders = []
        for _epoch_no in range(2):
            seen = []
            batches = 0
            for images, lab, idx in loader:
                assert images.shape[1:] == (3, SIZE, SIZE)
                assert str(images.dtype) == "torch.uint8"
                assert str(lab.dtype) == "torch.int64"
                for i, y in zip(idx.tolist(), lab.tolist()):
                    assert labels[i] == y, "sample %d has label %d, its source file says %d" % (
                        i, y, labels[i])
                seen.extend(idx.tolist())
                batches += 1
            assert batches == len(loader)
            assert sorted(seen) == list(range(n))
            orders.append(seen)
        assert orders[0] != orders[1], "shuffle gave the same order in epochs 0 and 1"


def test_eval_without_shuffle_is_in_dataset_order(stoker_mod, shards):
    path, labels = shards
    with _loader(stoker_mod, path, train=False, resize=40) as loader:
        seen = [i for _x, _y, idx in loader for i in idx.tolist()]
    assert seen == list(range(len(labels)))


def test_same_seed_same_tensors_whatever_the_workers(stoker_mod, shards):
    path, _ = shards
    with _loader(stoker_mod, path, seed=7, workers=1) as a, \
            _loader(stoker_mod, path, seed=7, workers=2) as b, \
            _loader(stoker_mod, path, seed=8, workers=2) as c:
        ea, eb, ec = _epoch(a), _epoch(b), _epoch(c)
    _same(ea, eb)
    assert not all(np.array_equal(x[0], y[0]) for x, y in zip(ea, ec)), "seed had no effect"


def test_resume_from_state_dict_mid_epoch_equals_the_uninterrupted_epoch(stoker_mod, shards):
    path, _ = shards
    with _loader(stoker_mod, path, seed=3) as ref:
        ref.set_epoch(1)
        full = _epoch(ref)
    with _loader(stoker_mod, path, seed=3) as a:
        a.set_epoch(1)
        state = None
        for k, _batch in enumerate(a):
            if k == 1:
                state = a.state_dict()          # after two batches
                break
        assert state["epoch"] == 1 and state["next_sample"] == 2 * BS
        # the same loader, after having wandered off to another epoch
        _epoch(a)
        a.load_state_dict(state)
        assert a.epoch == 1
        _same(_epoch(a), full[2:])
        # after the resumed `for`, the next one runs epoch 2 from its start
        assert a.state_dict()["epoch"] == 2 and a.state_dict()["next_sample"] == 0
    with _loader(stoker_mod, path, seed=3) as b:     # a fresh process-like loader
        b.load_state_dict(state)
        _same(_epoch(b), full[2:])
    with _loader(stoker_mod, path, seed=4) as other:
        with pytest.raises(ValueError, match="seed"):
            other.load_state_dict(state)


def test_break_then_next_epoch_and_set_epoch(stoker_mod, shards):
    path, _ = shards
    with _loader(stoker_mod, path, seed=5) as ref:
        e0, e1 = _epoch(ref), _epoch(ref)       # consecutive `for`s: epochs 0 and 1
    with _loader(stoker_mod, path, seed=5) as a:
        for k, _batch in enumerate(a):
            if k == 1:
                break
        assert a.epoch == 1                     # the broken epoch 0 is abandoned
        _same(_epoch(a), e1)
        a.set_epoch(0)
        _same(_epoch(a), e0)
        it = iter(a)
        next(it)
        a.set_epoch(1)                          # ends the pass in progress
        with pytest.raises(StopIteration):
            next(it)
        _same(_epoch(a), e1)


def _c_api_epoch(path, params):
    """The same pipeline driven through the C API directly (ctypes, no stoker.Loader):
    [(image bytes, labels, indices, shape)]."""
    from stoker import _lib
    lib = _lib.get()
    h = ctypes.c_void_p()
    assert lib.stk_loader_create(ctypes.byref(h)) == 0
    try:
        for key, value in params.items():
            assert lib.stk_loader_set(h, key, value) == 0, key
        assert lib.stk_loader_open(h, os.fsencode(path)) == 0
        assert lib.stk_loader_start(h) == 0
        out = []
        bp = ctypes.c_void_p()
        while True:
            rc = lib.stk_loader_next(h, None, -1, ctypes.addressof(bp))
            if rc == _lib.STK_END:
                break
            assert rc == 0, _lib.text(lib.stk_loader_last_error(h))
            b = _lib.Batch.from_address(bp.value)
            img = ctypes.string_at(b.images, b.image_bytes)
            lab = np.ctypeslib.as_array(b.labels, (b.size,)).copy()
            idx = np.ctypeslib.as_array(b.indices, (b.size,)).copy()
            out.append((img, lab, idx, (b.size, b.channels, b.height, b.width)))
            assert lib.stk_loader_release(h, bp, None) == 0
        return out
    finally:
        lib.stk_loader_destroy(h)


@pytest.mark.parametrize("train", [True, False])
def test_uint8_output_equals_the_c_api(stoker_mod, shards, train):
    from stoker import _lib
    from stoker.loader import installed_pillow_passes
    path, _ = shards
    params = {_lib.P_BATCH_SIZE: BS, _lib.P_OUT_HEIGHT: SIZE, _lib.P_OUT_WIDTH: SIZE,
              _lib.P_SEED: 11, _lib.P_WORKERS: 2, _lib.P_RESIZE: 40,
              _lib.P_MODE: _lib.MODE_TRAIN if train else _lib.MODE_EVAL,
              _lib.P_SHUFFLE: int(train),
              # the pass order Loader sets for the installed Pillow (its one default taken from
              # the environment; STK_P_RESIZE_PASSES)
              _lib.P_RESIZE_PASSES: installed_pillow_passes()}
    c = _c_api_epoch(path, params)
    with _loader(stoker_mod, path, seed=11, train=train, resize=40) as py:
        p = _epoch(py)
    assert len(c) == len(p) == -(-len(shards[1]) // BS)
    for (img, lab, idx, shape), (pimg, plab, pidx) in zip(c, p):
        assert pimg.shape == shape
        assert pimg.tobytes() == img
        assert np.array_equal(plab, lab) and np.array_equal(pidx, idx)


MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def test_float_output_equals_torchvision_normalize_of_the_uint8_output(stoker_mod, shards):
    torch = torch_or_skip()
    tv = pytest.importorskip("torchvision.transforms")
    path, _ = shards
    with _loader(stoker_mod, path, seed=2) as u8, \
            _loader(stoker_mod, path, seed=2, dtype=torch.float32) as f32, \
            _loader(stoker_mod, path, seed=2, dtype="float32", mean=MEAN, std=STD) as norm, \
            _loader(stoker_mod, path, seed=2, dtype=np.float16, mean=MEAN, std=STD) as f16, \
            _loader(stoker_mod, path, seed=2, dtype=torch.bfloat16, mean=MEAN, std=STD) as bf16, \
            _loader(stoker_mod, path, seed=2, dtype="float32", mean=MEAN, std=STD,
                    layout="NHWC") as nhwc:
        normalize = tv.Normalize(MEAN, STD)
        worst = {"x/255": 0.0, "normalize": 0.0}
        for (a, _, ia), (b, _, ib), (c, _, ic), (d, _, _), (e, _, _), (f, _, _) in zip(
                u8, f32, norm, f16, bf16, nhwc):
            assert torch.equal(ia, ib) and torch.equal(ia, ic)
            assert b.dtype == torch.float32 and c.dtype == torch.float32
            assert d.dtype == torch.float16 and e.dtype == torch.bfloat16
            ref_unit = a.float() / 255                  # torchvision's ToTensor
            ref_norm = normalize(ref_unit)              # Normalize(mean, std)(x/255)
            worst["x/255"] = max(worst["x/255"], (b - ref_unit).abs().max().item())
            worst["normalize"] = max(worst["normalize"], (c - ref_norm).abs().max().item())
            # float16/bfloat16: the float32 result rounded to the narrower type
            assert (d.float() - ref_norm).abs().max().item() <= 2.0 ** -8 * 3
            assert (e.float() - ref_norm).abs().max().item() <= 2.0 ** -5 * 3
            assert torch.equal(f, c.permute(0, 2, 3, 1))
        # float32: (x - 255 m) / (255 s) against ((x / 255) - m) / s: the same value computed in
        # a different order; at most a few float32 ulps (|values| < 3)
        print("max |difference| float32 vs torchvision:", worst)
        assert worst["x/255"] <= 1e-6
        assert worst["normalize"] <= 2e-6


def test_zero_copy_views_and_copy_option(stoker_mod, shards):
    torch = torch_or_skip()
    from stoker import _lib
    path, _ = shards
    with _loader(stoker_mod, path, seed=9) as loader:
        ptrs = set()
        for images, _lab, _idx in loader:
            b = _lib.Batch.from_address(loader._held[loader._seq - 1].addr)
            assert images.data_ptr() == b.images        # a view of the library's batch slot
            ptrs.add(images.data_ptr())
        assert len(ptrs) <= 4 + 1                        # slots are reused (prefetch ring)
    with _loader(stoker_mod, path, seed=9) as ref, _loader(stoker_mod, path, seed=9,
                                                           copy=True) as cp:
        expect = _epoch(ref)
        kept = [batch for batch in cp]                   # copies stay valid after the epoch
        _epoch(cp)                                       # ... and after the ring was reused
        for (x, y, i), (px, py, pi) in zip(expect, kept):
            assert np.array_equal(px.numpy(), x) and torch.equal(pi, torch.from_numpy(i))


def test_drop_last_and_short_last_batch(stoker_mod, shards):
    path, labels = shards
    n = len(labels)
    with _loader(stoker_mod, path, drop_last=True) as loader:
        sizes = [len(lab) for _x, lab, _i in loader]
        assert sizes == [BS] * (n // BS) and len(loader) == n // BS
    with _loader(stoker_mod, path) as loader:
        sizes = [len(lab) for _x, lab, _i in loader]
        assert sizes[-1] == n % BS and sum(sizes) == n


def test_stats_dict_and_report(stoker_mod, shards):
    path, labels = shards
    with _loader(stoker_mod, path) as loader:
        assert loader.stats()["started"] is False
        _epoch(loader)
        st = loader.stats()
        assert st["samples"] == len(labels) and st["batches"] == len(loader)
        assert st["decode"]["items"] >= len(labels) and st["read"]["threads"] >= 1
        assert st["error_count"] == 0 and st["errors"] == []
        assert st["io_backend_name"] in ("io_uring", "pread", "mmap")
        assert st["wait_s"] >= 0 and st["wall_s"] > 0
        text = str(st)                                   # the library's report
        assert text.startswith("stoker loader") and "decode" in text and "read" in text
        assert loader.report().startswith("stoker loader")


def _threads(expect=None):
    """Threads of this process. With EXPECT, wait for the count to come down to it: a joined
    thread's /proc/self/task entry can outlive pthread_join briefly (the kernel clears the tid the
    joiner waits on before it reaps the task), longer on a loaded machine. The 60 s are a hang
    guard, not a bound: the wait ends as soon as the count is down."""
    deadline = time.monotonic() + 60.0
    while True:
        n = len(os.listdir("/proc/self/task"))
        if expect is None or n <= expect or time.monotonic() > deadline:
            return n
        time.sleep(0.01)


def test_close_joins_threads_and_is_idempotent(stoker_mod, shards):
    path, _ = shards
    before = _threads()
    loader = _loader(stoker_mod, path, workers=2)
    it = iter(loader)
    next(it)
    assert _threads() > before
    loader.close()
    assert _threads(before) == before
    loader.close()
    with pytest.raises(stoker_mod.StateError):
        iter(loader)
    with pytest.raises(StopIteration):
        next(it)
    with _loader(stoker_mod, path) as loader:
        for _batch in loader:
            break
    assert _threads(before) == before
    # garbage collection closes too
    loader = _loader(stoker_mod, path)
    next(iter(loader))
    del loader
    import gc
    gc.collect()
    assert _threads(before) == before


def test_fork_child_refuses_clearly_parent_goes_on(stoker_mod, shards):
    path, labels = shards
    with _loader(stoker_mod, path, seed=1) as loader:
        it = iter(loader)
        next(it)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # child: never touch the parent's threads; report and leave at once
            msg = b"no error"
            try:
                next(it)
            except stoker_mod.StokerError as e:
                msg = str(e).encode()
            except BaseException as e:   # noqa: BLE001
                msg = repr(e).encode()
            os.write(w, msg)
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            msg = f.read().decode()
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert "fork() child" in msg and "new stoker.Loader" in msg, msg
        rest = sum(len(b[1]) for b in it)                # the parent is unaffected
        assert rest == len(labels) - BS


def test_timeout_raises_stoker_timeout(stoker_mod, shards):
    from stoker import _lib
    path, _ = shards
    slow = {_lib.P_FAULT_DELAY_PPM: 1000000, _lib.P_FAULT_DELAY_US: 300000}
    with _loader(stoker_mod, path, timeout=0.05, options=slow, workers=1) as loader:
        with pytest.raises(stoker_mod.StokerTimeout) as ei:
            next(iter(loader))
        assert isinstance(ei.value, TimeoutError)


def test_numpy_arrays_on_request(stoker_mod, shards):
    path, labels = shards
    with _loader(stoker_mod, path, array="numpy", dtype="float16") as loader:
        images, lab, idx = next(iter(loader))
        assert isinstance(images, np.ndarray) and images.dtype == np.float16
        assert lab.dtype == np.int64 and idx.dtype == np.int64
        assert 0.0 <= float(images.min()) and float(images.max()) <= 1.0
        assert all(labels[i] == y for i, y in zip(idx.tolist(), lab.tolist()))


def test_rank_and_world_size_from_the_environment(stoker_mod, shards, monkeypatch):
    path, labels = shards
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with _loader(stoker_mod, path, shuffle=False) as loader:
        assert (loader.rank, loader.world_size) == (1, 3)
        seen = [i for _x, _y, idx in loader for i in idx.tolist()]
    assert seen == list(range(1, len(labels), 3))
    with pytest.raises(ValueError):
        _loader(stoker_mod, path, rank=3, world_size=3)


def _rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_no_memory_left_behind_by_create_iterate_close_cycles(stoker_mod, shards):
    path, _ = shards
    before_threads = _threads()

    def cycle():
        with _loader(stoker_mod, path, batch_size=16, size=64, prefetch=4) as loader:
            for _batch in loader:
                pass
    for _ in range(3):
        cycle()                                  # warm up allocator arenas
    base = _rss_kb()
    for _ in range(20):
        cycle()
    grown = _rss_kb() - base
    # one loader's ring is 4 x 16 x 3 x 64 x 64 = 786 KiB (+ reader pool); 20 leaked ones
    # would add well over 16 MiB
    assert grown < 4096, "RSS grew by %d KiB over 20 loader lifetimes" % grown
    assert _threads(before_threads) == before_threads


def test_imagefolder_root_directly(stoker_mod, imagefolder, shards):
    """An unpacked ImageFolder is read through the same loader: same records, same labels, and
    the same tensors as the packed copy (order and augmentation depend on (seed, epoch, index))."""
    src, _ = imagefolder
    path, labels = shards
    with _loader(stoker_mod, src, seed=21) as folder, _loader(stoker_mod, path, seed=21) as packed:
        assert folder.classes == packed.classes
        a, b = _epoch(folder), _epoch(packed)
    _same(a, b)
    assert sorted(i for _x, _y, idx in a for i in idx.tolist()) == list(range(len(labels)))
    assert all(labels[i] == y for _x, lab, idx in a for i, y in zip(idx.tolist(), lab.tolist()))


def test_cuda_device_without_a_gpu_is_refused_clearly(stoker_mod, shards):
    torch = torch_or_skip()
    if torch.cuda.is_available():
        pytest.skip("a GPU is present (test_loader_cuda covers it)")
    with pytest.raises(stoker_mod.Unsupported, match="no CUDA device"):
        stoker_mod.Loader(shards[0], 4, device="cuda")
    with pytest.raises(ValueError):
        stoker_mod.Loader(shards[0], 4, device="tpu")


def test_stats_from_another_thread_while_iterating(stoker_mod, shards):
    import threading
    path, labels = shards
    with _loader(stoker_mod, path, batch_size=4) as loader:
        loader.start()
        seen, stop, errors = [], threading.Event(), []

        def watch():
            try:
                while not stop.is_set():
                    seen.append(loader.stats()["samples"])
                    loader.report()
            except BaseException as e:   # noqa: BLE001
                errors.append(e)
        t = threading.Thread(target=watch)
        t.start()
        for _epoch_no in range(3):
            assert sum(len(b[1]) for b in loader) == len(labels)
        stop.set()
        t.join()
    assert not errors and seen and seen == sorted(seen)     # counters only grow
