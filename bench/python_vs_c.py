#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Python binding overhead and the ratio against PyTorch's DataLoader, measured side by side.

    /usr/bin/python3 bench/python_vs_c.py [--data /work/data/python-shards]
        [--folder /work/data/imagenet-like] [--repeats 3] [--batch-size 256] [--workers 2]

Three loaders run the same work — --images images (default 5120 = 20 batches; 0 = a whole
epoch of 10 000) of the train pipeline (RandomResizedCrop 224 + horizontal flip, uint8, batch
256, 2 decode threads / worker processes) — in interleaved repeats (c, py, torch, c, py, torch,
...) so that they see the same machine weather; the table gives medians. Shorter runs and more
repeats resist the load swings of a shared machine better than a few long runs.

  c      the C API, driven through ctypes with nothing else: stk_loader_next / _release in a
         loop, no wrapping (a few microseconds of ctypes per 256-image batch, ~0.01 % of the
         batch time), i.e. the library's own speed on this pipeline.
  py     stoker.Loader: `for images, labels in loader` yielding torch tensors (zero-copy
         images, int64 labels), as a training loop sees them.
  pb     (optional, --only pb,py --images 0) bench/tools/pipebench, the C program over the
         public API, one whole epoch per run; its images/s is its own in-process figure.
  torch  torch.utils.data.DataLoader over torchvision's ImageFolder with
         RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor, 2 workers, batch 256
         (the CPU-pipeline issue's baseline), reading the unpacked ImageFolder.

Each run is timed from the loader's creation (open, threads / worker processes) to its last
batch, so start-up costs count for everyone; "steady" is the rate after the first batch. CPU seconds
include DataLoader's worker processes (RUSAGE_CHILDREN; the workers exit at the epoch's end).
The stoker runs read the packed copy (`stoker pack` of the folder) with the library's default
reader (io_uring + O_DIRECT, so the page cache does not help either stoker run).
"""

import argparse
import ctypes
import importlib.util
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "bindings", "python"))


def _cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def run_c(args):
    import stoker
    from stoker import _lib
    lib = _lib.get()
    h = ctypes.c_void_p()
    t0, c0 = time.perf_counter(), _cpu()        # like run_py: creation and open included
    assert lib.stk_loader_create(ctypes.byref(h)) == 0
    try:
        for key, value in ((_lib.P_BATCH_SIZE, args.batch_size), (_lib.P_WORKERS, args.workers),
                           (_lib.P_OUT_HEIGHT, 224), (_lib.P_OUT_WIDTH, 224),
                           (_lib.P_SEED, args.seed), (_lib.P_MODE, _lib.MODE_TRAIN)):
            rc = lib.stk_loader_set(h, key, value)
            assert rc == 0, (key, stoker.strerror(rc))
        rc = lib.stk_loader_open(h, os.fsencode(args.data))
        assert rc == 0, _lib.text(lib.stk_loader_last_error(h))
        assert lib.stk_loader_start(h) == 0
        bp = ctypes.c_void_p()
        addr = ctypes.addressof(bp)
        nxt, rel = lib.stk_loader_next, lib.stk_loader_release
        n = 0
        t_first = None
        n_first = 0
        while True:
            rc = nxt(h, None, -1, addr)
            if rc == _lib.STK_END:
                break
            assert rc == 0, _lib.text(lib.stk_loader_last_error(h))
            n += _lib.Batch.from_address(bp.value).size
            if t_first is None:
                t_first, n_first = time.perf_counter(), n
            rel(h, bp, None)
            if args.images and n >= args.images:
                break
        t1, c1 = time.perf_counter(), _cpu()
    finally:
        lib.stk_loader_destroy(h)
    return n, t1 - t0, (n - n_first) / (t1 - t_first), c1 - c0


def run_py(args):
    import stoker
    t0, c0 = time.perf_counter(), _cpu()
    with stoker.Loader(args.data, args.batch_size, train=True, size=224, workers=args.workers,
                       seed=args.seed) as loader:
        n = 0
        t_first = None
        n_first = 0
        for images, labels in loader:
            n += images.shape[0]
            if t_first is None:
                t_first, n_first = time.perf_counter(), n
            if args.images and n >= args.images:
                break
        t1 = time.perf_counter()
    c1 = _cpu()
    return n, t1 - t0, (n - n_first) / (t1 - t_first), c1 - c0


def run_pb(args):
    """The loader engineer's bench/tools/pipebench (a C program over the public API): one
    epoch, NCHW, O_DIRECT as the library's default, as the py runner's whole-epoch runs."""
    import subprocess
    t0, c0 = time.perf_counter(), _cpu()
    r = subprocess.run([args.pipebench, args.data, "--mode", "train", "--workers",
                        str(args.workers), "--batch", str(args.batch_size), "--size", "224",
                        "--epochs", "1", "--layout", "nchw", "--direct", "1", "--quiet"],
                       capture_output=True, text=True, check=True)
    t1, c1 = time.perf_counter(), _cpu()
    res = dict(kv.split("=", 1) for kv in r.stdout.strip().splitlines()[-1].split()[1:])
    rate = float(res["images_per_s"])
    # wall and CPU around the process (includes its exec and open, a fraction of a second)
    return args.records, t1 - t0, rate, c1 - c0


def run_torch(args):
    import torch
    import torchvision
    import torchvision.transforms as T
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(args.folder, tf)
    if args.images and args.images < len(ds):
        # a fixed random subset of the same size as the stoker runs' share of the epoch
        pick = torch.randperm(len(ds), generator=torch.Generator().manual_seed(args.seed))
        ds = torch.utils.data.Subset(ds, pick[:args.images].tolist())
    t0, c0 = time.perf_counter(), _cpu()
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers)
    n = 0
    t_first = None
    n_first = 0
    for images, labels in loader:
        n += images.shape[0]
        if t_first is None:
            t_first, n_first = time.perf_counter(), n
    t1 = time.perf_counter()
    del loader
    c1 = _cpu()
    return n, t1 - t0, (n - n_first) / (t1 - t_first), c1 - c0


def _wait_ring_full(stats_fn, samples, timeout=180.0):
    """Until SAMPLES more samples than delivered are decoded (every ring slot holds a ready
    batch), and a little longer."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        st = stats_fn()
        if st["decode"]["items"] - st["samples"] >= samples:
            time.sleep(0.2)
            return True
        time.sleep(0.1)
    return False


def per_batch_overhead(args, slots=8):
    """Seconds per next()+release of a batch that is already waiting: the C API through ctypes
    vs the stoker.Loader iterator (wrap as torch tensors). Independent of the decode speed, so
    it holds on a busy machine: divided by the batch time it is the Python layer's share."""
    import stoker
    from stoker import _lib
    out = {}
    with stoker.Loader(args.data, args.batch_size, train=True, size=224, workers=args.workers,
                       seed=args.seed, prefetch=slots) as loader:
        it = iter(loader)
        if not _wait_ring_full(loader.stats, slots * args.batch_size):
            return None
        t = []
        for _ in range(slots - 1):
            t0 = time.perf_counter()
            next(it)
            t.append(time.perf_counter() - t0)
        out["py"] = statistics.median(t)
        # the same loader, same state of readiness, through the bare C calls
        loader._release_held()
        lib = _lib.get()
        h = loader._h
        bp = ctypes.c_void_p()
        addr = ctypes.addressof(bp)
        if not _wait_ring_full(loader.stats, slots * args.batch_size):
            return None
        t = []
        for _ in range(slots - 1):
            t0 = time.perf_counter()
            rc = lib.stk_loader_next(h, None, -1, addr)
            lib.stk_loader_release(h, bp, None)
            t.append(time.perf_counter() - t0)
            if rc != 0:
                break
        out["c"] = statistics.median(t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/data/python-shards", help="packed dataset")
    ap.add_argument("--folder", default="/work/data/imagenet-like",
                    help="the same images as an ImageFolder (for DataLoader; packed into "
                         "--data first if --data does not exist)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="c,py,torch", help="comma list of c, py, torch")
    ap.add_argument("--images", type=int, default=5120,
                    help="images per run (0 = a whole epoch): stoker runs stop after the batch "
                         "that reaches it, DataLoader runs a fixed random subset of this size")
    ap.add_argument("--json", help="write the raw runs here")
    ap.add_argument("--no-overhead", action="store_true",
                    help="skip the per-batch overhead measurement")
    ap.add_argument("--pipebench", help="bench/tools/pipebench binary for --only ...,pb "
                                        "(default: next to the loaded libstoker)")
    args = ap.parse_args()

    import stoker
    # imported before timing (stoker.Loader imports torch on first use if it is present)
    for mod in ("torch", "torchvision"):
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod)
    if not os.path.exists(args.data):
        print("packing %s -> %s" % (args.folder, args.data), flush=True)
        print(stoker.pack(args.folder, args.data, threads=args.workers), flush=True)
    info = stoker.info(args.data)
    args.records = info["records"]
    print("stoker %s (%s); dataset %s: %d records, %.0f MB; folder %s"
          % (stoker.__version__, stoker.library_path, args.data, info["records"],
             info["payload_bytes"] / 1e6, args.folder))
    print("cores online: %d; load average before: %s"
          % (os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())), flush=True)

    runners = {"c": run_c, "py": run_py, "torch": run_torch, "pb": run_pb}
    if "pb" in args.only:
        if args.images:
            ap.error("pb (pipebench) runs whole epochs: use --images 0")
        if not args.pipebench:
            args.pipebench = os.path.join(os.path.dirname(stoker.library_path), "pipebench")
        if not os.access(args.pipebench, os.X_OK):
            ap.error("pipebench not found at %s (--pipebench PATH)" % args.pipebench)
    names = [x for x in args.only.split(",") if x]
    runs = {k: [] for k in names}
    for rep in range(args.repeats):
        for k in names:
            n, wall, steady, cpu = runners[k](args)
            runs[k].append({"images": n, "wall_s": wall, "images_per_s": n / wall,
                            "steady_images_per_s": steady, "cpu_s": cpu})
            print("repeat %d %-5s %6d images %7.2f s  %7.1f images/s (steady %7.1f)  "
                  "CPU %.1f s" % (rep, k, n, wall, n / wall, steady, cpu), flush=True)

    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    print("\nmedians of %d interleaved repeats (%s images per run, batch %d, %d workers, "
          "train 224 uint8):" % (args.repeats, args.images or "all", args.batch_size,
                                  args.workers))
    print("%-6s %10s %10s %12s %14s" % ("loader", "images/s", "steady/s", "CPU s", "CPU ms/image"))
    for k, m in med.items():
        print("%-6s %10.1f %10.1f %12.1f %14.3f" % (k, m["images_per_s"],
                                                      m["steady_images_per_s"], m["cpu_s"],
                                                      1000 * m["cpu_s"] / m["images"]))
    if "c" in med and "py" in med:
        r = med["py"]["images_per_s"] / med["c"]["images_per_s"]
        print("py / c   = %.4f  (Python iterator within %.1f%% of the C API; target: within 3%%)"
              % (r, abs(1 - r) * 100))
        pr = [p["images_per_s"] / c["images_per_s"] for p, c in zip(runs["py"], runs["c"])]
        print("         per repeat: %s" % " ".join("%.4f" % x for x in pr))
        cpu = [(p["cpu_s"] / p["images"]) / (c["cpu_s"] / c["images"])
               for p, c in zip(runs["py"], runs["c"])]
        print("CPU per image py / c = %.4f (median of the per-repeat ratios)"
              % statistics.median(cpu))
    if "pb" in med and "py" in med:
        print("py / pb  = %.4f  (wall clock around each run; pb's own in-process figure: py / pb "
              "= %.4f)" % (med["py"]["images_per_s"] / med["pb"]["images_per_s"],
                           med["py"]["images_per_s"] / med["pb"]["steady_images_per_s"]))
    if "torch" in med:
        for k in ("py", "c", "pb"):
            if k in med:
                print("%s / torch = %.2fx  (target >= 2.5x)"
                      % (k, med[k]["images_per_s"] / med["torch"]["images_per_s"]))
    if "py" in names and not args.no_overhead:
        ov = per_batch_overhead(args)
        if ov:
            batch_s = args.batch_size / med["py"]["images_per_s"]
            print("per-batch cost of a ready batch (median of 7): C API %.1f us, stoker.Loader "
                  "%.1f us; the Python layer adds %.1f us = %.3f%% of a %d-image batch at the "
                  "measured %.0f images/s" % (ov["c"] * 1e6, ov["py"] * 1e6,
                                              (ov["py"] - ov["c"]) * 1e6,
                                              100 * (ov["py"] - ov["c"]) / batch_s,
                                              args.batch_size, med["py"]["images_per_s"]))
            med["overhead_s"] = ov
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs, "medians": med}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
