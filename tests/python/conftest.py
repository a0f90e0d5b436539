# SPDX-License-Identifier: MIT
"""Shared fixtures of stoker's Python tests.

Run through ctest (tests/python/run_pytest.sh sets PYTHONPATH and STOKER_LIBRARY) or standalone:
    /usr/bin/python3 -m pytest tests/python            # uses build/ or build-*/libstoker.so
Datasets are generated small (JPEGs written with PIL) and packed with stoker.pack once per session.
"""

import glob
import hashlib
import io
import os
import signal
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG_DIR = os.path.join(REPO, "bindings", "python")
if PKG_DIR not in sys.path:
    sys.path.insert(0, PKG_DIR)
if not os.environ.get("STOKER_LIBRARY"):
    # standalone run: the newest libstoker.so of a build directory in the repository
    found = sorted((p for p in glob.glob(os.path.join(REPO, "build*", "libstoker.so"))
                    if "san" not in os.path.basename(os.path.dirname(p))), key=os.path.getmtime)
    if found:
        os.environ["STOKER_LIBRARY"] = found[-1]

# the environment a subprocess needs to `import stoker` the same way
SUBPROCESS_ENV = dict(os.environ)
SUBPROCESS_ENV["PYTHONPATH"] = PKG_DIR + (os.pathsep + os.environ["PYTHONPATH"]
                                          if os.environ.get("PYTHONPATH") else "")
SUBPROCESS_ENV["PYTHONDONTWRITEBYTECODE"] = "1"

CLASSES = ["ant", "bee", "cat"]


def jpeg_bytes(rng, w, h, *, gray=False, subsampling=2, quality=90, progressive=False):
    """A deterministic smooth-plus-noise test JPEG of W×H made with PIL."""
    from PIL import Image
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([xx / max(w - 1, 1) * 255, yy / max(h - 1, 1) * 255,
                     (xx + yy) / max(w + h - 2, 1) * 255], axis=-1)
    noise = rng.integers(0, 60, size=(h, w, 3)).astype(np.float32)
    phase = rng.uniform(0, 6.28)
    wave = (np.sin(xx / 5.0 + phase) * 40)[..., None]
    img = np.clip(base * 0.7 + noise + wave, 0, 255).astype(np.uint8)
    im = Image.fromarray(img, "RGB")
    if gray:
        im = im.convert("L")
    out = io.BytesIO()
    kw = {"quality": quality, "progressive": progressive}
    if not gray:
        kw["subsampling"] = subsampling
    im.save(out, "JPEG", **kw)
    return out.getvalue()


def make_imagefolder(root, per_class=(13, 11, 12), seed=1):
    """CLASSES dirs of JPEGs with varied sizes/subsampling/grayscale/progressive.
    Returns {sha1(bytes): label}."""
    rng = np.random.default_rng(seed)
    truth = {}
    for label, (name, n) in enumerate(zip(CLASSES, per_class)):
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        for i in range(n):
            w, h = int(rng.integers(48, 160)), int(rng.integers(48, 160))
            data = jpeg_bytes(rng, w, h, gray=(i % 7 == 3), subsampling=int(i % 3),
                              progressive=(i % 5 == 4))
            with open(os.path.join(d, "img%03d.jpg" % i), "wb") as f:
                f.write(data)
            truth[hashlib.sha1(data).hexdigest()] = label
    return truth


@pytest.fixture(scope="session")
def stoker_mod():
    import stoker
    return stoker


@pytest.fixture(scope="session")
def imagefolder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("imagefolder"))
    truth = make_imagefolder(root)
    return root, truth


@pytest.fixture(scope="session")
def shards(tmp_path_factory, imagefolder, stoker_mod):
    """A packed copy of the ImageFolder: (path, {dataset index: label from the source file})."""
    src, truth = imagefolder
    dst = os.path.join(str(tmp_path_factory.mktemp("shards")), "ds")
    res = stoker_mod.pack(src, dst, threads=2)
    assert res["records"] == len(truth)
    labels = {}
    with stoker_mod.Dataset(dst) as ds:
        for i in range(len(ds)):
            payload, label = ds.read(i)
            labels[i] = truth[hashlib.sha1(payload).hexdigest()]
    return dst, labels


def torch_or_skip():
    """torch, or skip. Also tells tests/tools/stk-augops whose arithmetic to reproduce
    (STK_AUGOPS_TORCH: that of this torch, as the Loader gets it from the binding)."""
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not importable")
    if "STK_AUGOPS_TORCH" not in os.environ:
        from stoker.augment import torch_arithmetic
        os.environ["STK_AUGOPS_TORCH"] = str(torch_arithmetic(torch))
    return torch


def free_port():
    """A TCP port of 127.0.0.1 that is free now (a rendezvous's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(tmp_path, script, args, nproc=2, launcher_args=(), log_dir="logs"):
    """SCRIPT ARGS as NPROC local ranks of `python -m torch.distributed.run` (gloo on this
    machine); asserts that it exited 0 and returns its CompletedProcess (text). A static
    rendezvous on a free port: much quicker to start than --standalone's c10d. --redirects and
    --tee 1: torch 1.13's Std.from_str("0") (their default) returns None under Python 3.11
    (IntFlag no longer iterates the 0 member) and the launcher dies; "1" parses. RANK and
    WORLD_SIZE of this process are not passed on; one OpenMP thread per rank."""
    env = {k: v for k, v in SUBPROCESS_ENV.items() if k not in ("RANK", "WORLD_SIZE")}
    env["OMP_NUM_THREADS"] = "1"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--master_addr",
                        "127.0.0.1", "--master_port", str(free_port()), "--nproc_per_node",
                        str(nproc), "--redirects", "1", "--tee", "1", *launcher_args,
                        "--log_dir", str(tmp_path / log_dir), str(script), *map(str, args)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def slow_loader(stoker, path):
    """A Loader over PATH whose every read waits 50 ms: its first batch of 12 takes >= 0.6 s,
    an epoch of the `shards` dataset about 2 s, so a Ctrl-C lands while next() blocks. Batches:
    (images, labels, indices)."""
    from stoker import _lib
    slow = {_lib.P_FAULT_DELAY_PPM: 1000000, _lib.P_FAULT_DELAY_US: 50000}
    return stoker.Loader(path, 12, size=16, workers=1, queue_depth=4, options=slow,
                         return_index=True, prefetch=2)


def sigint_after(seconds):
    """SIGINT to this process (Ctrl-C) in SECONDS: the started threading.Timer (join() it)."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def loader_epochs(stoker, path, n, batch=8, **kw):
    """N epochs of stoker.Loader(PATH, BATCH, return_index=True, **KW): the delivered images,
    their record indices and the epoch of each, concatenated (host batches, copied out)"""
    out = []
    with stoker.Loader(path, batch, return_index=True, **kw) as ld:
        for e in range(n):
            ld.set_epoch(e)
            for images, _, index in ld:
                out.append((images.numpy().copy(), index.numpy().copy(), np.full(len(index), e)))
    return tuple(np.concatenate([o[k] for o in out]) for k in range(3))


def assert_same_for_workers_and_resume(open_loader, counts=(1, 2)):
    """OPEN_LOADER(workers=N) -> a Loader (images, labels, index): one epoch with each of COUNTS
    workers gives the same batches, and an epoch resumed from the state after its second batch
    (2 workers) gives the rest of them"""
    def epoch(loader):
        return [(np.array(i.numpy(), copy=True), l.numpy().copy(), x.numpy().copy()) for i, l, x in loader]

    def same(xs, ys):
        assert len(xs) == len(ys)
        for x, y in zip(xs, ys):
            assert all(np.array_equal(u, v) for u, v in zip(x, y))

    runs = []
    for n in counts:
        with open_loader(workers=n) as ld:
            runs.append(epoch(ld))
    assert len(runs[0]) > 2
    for r in runs[1:]:
        same(runs[0], r)
    with open_loader(workers=2) as d:
        for k, _ in enumerate(d):
            if k == 1:
                state = d.state_dict()
                break
    with open_loader(workers=2) as e:
        e.load_state_dict(state)
        same(runs[0][2:], epoch(e))


def write_dataset(dst, items, classes=None):
    """A dataset written record by record with the C writer (stk_writer_*): ITEMS are
    (payload bytes, label); any bytes are accepted, so bad records can be planted."""
    import ctypes
    from stoker import _lib
    lib = _lib.get()
    w = ctypes.c_void_p()
    assert lib.stk_writer_create(ctypes.byref(w)) == 0
    try:
        def ok(rc, what):
            assert rc == 0, "%s: %s" % (what, _lib.text(lib.stk_writer_last_error(w)))
        if classes:
            names = (ctypes.c_char_p * len(classes))(*[c.encode() for c in classes])
            ok(lib.stk_writer_set_classes(w, names, len(classes)), "set_classes")
        ok(lib.stk_writer_open(w, os.fsencode(dst)), "open")
        for k, (payload, label) in enumerate(items):
            ok(lib.stk_writer_add(w, payload, len(payload), int(label), b"item%d" % k), "add")
        ok(lib.stk_writer_finish(w), "finish")
    finally:
        lib.stk_writer_destroy(w)
    return dst


def pytest_sessionfinish(session, exitstatus):
    """A file whose tests all skipped (no GPU, no torch, ...) exits 77: ctest reports a skip,
    as for the C tests, rather than a pass. (pytest 9 reports a module skipped at import, e.g.
    by importorskip, as 5, no tests collected; with a skip recorded that is a skip too.)"""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus not in (0, 5):
        return
    stats = reporter.stats
    ran = sum(len(stats.get(k, [])) for k in ("passed", "failed", "error", "xpassed"))
    if ran == 0 and stats.get("skipped"):
        session.exitstatus = 77
