#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Issue 26: what stoker.DataLoader costs when part of the pipeline runs in Python.

  /usr/bin/python3 bench/pytail.py [--data DIR] [--count 2000] [--repeats 3] [--workers 2]
      [--batch 64] [--epochs 1] [--json FILE]

Rows (each: stoker.DataLoader and torch's DataLoader given the same dataset and arguments,
num_workers=--workers, shuffle=True, --epochs epochs [1] with one loader):
  tail      ImageFolder with RandomResizedCrop(176), RandomHorizontalFlip(), ToTensor(),
            Normalize(ImageNet), Lambda(x * 1.0 + 0.0): stoker runs everything up to Normalize
            in C and the Lambda in its Python workers (stoker.pytail), torch everything in its
            workers. Target: stoker >= 1.5x torch.
  fallback  a Dataset with its own __getitem__ (ImageFolder + the same Compose, no Lambda,
            wrapped): stoker cannot read it and runs torch's own DataLoader. Target: within 5%
            of torch.
--overhead: instead, the fallback's own cost without decoding (a pass over an in-memory
Dataset, and the construction), stoker.DataLoader against torch's, in this process.
Every (row, loader) is one child process (this script with --child) that builds the loader,
runs --epochs epochs and prints one JSON line (imports are not timed); runs are interleaved,
the order alternating per repeat (stoker torch, torch stoker, ...), so both see the same
machine weather. CPU ms/img: CPU time of the process and of its joined worker processes per
image, over the same span: the work, much less sensitive than img/s to a shared machine. images/s is timed from the loader's creation to its
last batch. The table gives medians over --repeats and the median of the same-repeat ratios.

Data: --data DIR/imnet-COUNT (DIR/imnet for --count 400, the set earlier figures used), made
once with /work/shared/tools/make-imagenet-like --count COUNT --classes 10 when absent (real
photos, ImageNet-like sizes).

Epoch size. Both loaders are timed from creation to the last batch, so what a loader costs once
is spread over --count images. stoker's tail has such costs that torch's DataLoader has not
(the library's ring and the tail's two shared-memory rings are first written in the first pass;
docs/PERFORMANCE.md has the measured share), large beside the per-image work of a 400-image
epoch. The default, 2000 images (31 batches of 64), measures mostly the work per image, as a
training epoch does; --count 400 gives the earlier, start-up-heavy figure, and --epochs N
runs N epochs per loader (start-up counted once, each epoch's worker start counted). The
work and the timed span are the same for both loaders.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MAKE = os.path.join(REPO, "..", "shared", "tools", "make-imagenet-like")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _scale(x):
    return x * 1.0 + 0.0


class Wrapped:
    """A user's Dataset over an ImageFolder (its own __getitem__)."""

    def __init__(self, inner):
        self.inner = inner

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        return self.inner[i]


class Constant:
    """A user's in-memory Dataset (its own __getitem__): a 3x8x8 tensor and a label per index,
    so that a loader's own cost per batch, not decoding, is what a pass takes."""

    def __init__(self, n):
        import torch
        self.n, self.x = n, torch.zeros(3, 8, 8)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.x, i % 10


def overhead(args):
    """The fallback's own cost, without decoding: stoker.DataLoader over a Dataset it cannot
    read (torch's DataLoader runs it) against torch's DataLoader, num_workers=0, over
    Constant(4096) in batches of 64; construction and one pass timed alternately in this
    process, --repeats x 10 times each. Prints the medians and the minima (microseconds; on a
    shared machine the minimum is the closer estimate of a loader's own cost)."""
    import warnings
    import torch
    import stoker
    ds = Constant(4096)
    times = {"stoker": {"build": [], "pass": []}, "torch": {"build": [], "pass": []}}
    for k in range(args.repeats * 10):
        for name in (("stoker", "torch") if k % 2 == 0 else ("torch", "stoker")):
            t0 = time.perf_counter()
            if name == "stoker":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    dl = stoker.DataLoader(ds, batch_size=64)
            else:
                dl = torch.utils.data.DataLoader(ds, batch_size=64)
            t1 = time.perf_counter()
            for x, y in dl:
                pass
            t2 = time.perf_counter()
            times[name]["build"].append((t1 - t0) * 1e6)
            times[name]["pass"].append((t2 - t1) * 1e6)
    print("\n| fallback's own cost (Constant(4096), batch 64, num_workers=0) | stoker.DataLoader"
          " | torch DataLoader | ratio |\n|---|---|---|---|")
    for what in ("build", "pass"):
        for how, f in (("median", statistics.median), ("min", min)):
            s, t = (f(times[n][what]) for n in ("stoker", "torch"))
            print("| %s (%s us) | %.0f | %.0f | %.3f |" % (what, how, s, t, s / t))


def _cpu():
    """CPU seconds of this process (all threads) and of its reaped children (the worker
    processes, once joined)."""
    import resource
    a, b = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _load():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def child(args):
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    steps = [T.RandomResizedCrop(176), T.RandomHorizontalFlip(), T.ToTensor(),
             T.Normalize(MEAN, STD)]
    if args.row == "tail":
        ds = ImageFolder(args.root, T.Compose(steps + [T.Lambda(_scale)]))
    else:
        ds = Wrapped(ImageFolder(args.root, T.Compose(steps)))
    if args.loader == "stoker":
        import warnings
        import stoker                     # imported once per script, as a user's script does
    torch.manual_seed(0)
    cpu0, t0 = _cpu(), time.perf_counter()
    if args.loader == "stoker":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dl = stoker.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                   num_workers=args.workers)
    else:
        dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                         num_workers=args.workers)
    n = 0
    for _ in range(args.epochs):
        for x, y in dl:
            n += int(x.shape[0])
    dt = time.perf_counter() - t0
    del x, y, dl
    import gc
    gc.collect()                  # worker processes joined: their CPU time is counted below
    cpu = _cpu() - cpu0
    print(json.dumps({"row": args.row, "loader": args.loader, "images": n, "seconds": dt,
                      "img_s": n / dt, "cpu_ms_img": 1e3 * cpu / n}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/tmp/pytail-bench")
    ap.add_argument("--count", type=int, default=2000,
                    help="images in the data set (see the module doc) [2000]")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per loader, timed together (start-up counted once) [1]")
    ap.add_argument("--json")
    ap.add_argument("--only", help="comma-separated rows: tail, fallback [both]")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--row")
    ap.add_argument("--loader")
    ap.add_argument("--root")
    ap.add_argument("--overhead", action="store_true",
                    help="only the fallback's own cost without decoding (see overhead())")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.overhead:
        return overhead(args)
    root = os.path.join(args.data, "imnet" if args.count == 400 else "imnet-%d" % args.count)
    if os.path.isdir(root):
        have = sum(len(f) for _, _, f in os.walk(root))
        if have != args.count:
            sys.exit("%s holds %d files, not --count %d: remove it or give another --data"
                     % (root, have, args.count))
    else:
        subprocess.run([MAKE, "--count", str(args.count), "--classes", "10", "--jobs", "1",
                        root], check=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "bindings", "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    runs = []
    print("data %s (%d images), batch %d, %d workers, %d epoch(s); load average %s" % (
        root, args.count, args.batch, args.workers, args.epochs, _load()), flush=True)
    for rep in range(args.repeats):
        for row in ("tail", "fallback"):
            if args.only and row not in args.only.split(","):
                continue
            for loader in ("stoker", "torch") if rep % 2 == 0 else ("torch", "stoker"):
                cmd = [sys.executable, os.path.abspath(__file__), "--child", "--row", row,
                       "--loader", loader, "--root", root, "--workers", str(args.workers),
                       "--batch", str(args.batch), "--epochs", str(args.epochs)]
                out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                r["repeat"] = rep
                runs.append(r)
                print("repeat %d %-8s %-6s %7.1f img/s %6.2f CPU ms/img" % (
                    rep, row, loader, r["img_s"], r["cpu_ms_img"]), flush=True)
    print("load average at the end: %s" % _load())
    for key, unit in (("img_s", "img/s"), ("cpu_ms_img", "CPU ms/img")):
        print("\n| row | stoker %s | torch %s | ratio of medians | same-repeat ratio "
              "stoker/torch (min-max) |\n|---|---|---|---|---|" % (unit, unit))
        for row in ("tail", "fallback"):
            s = [r[key] for r in runs if r["row"] == row and r["loader"] == "stoker"]
            t = [r[key] for r in runs if r["row"] == row and r["loader"] == "torch"]
            if not s:
                continue
            same = [a / b for a, b in zip(s, t)]
            print("| %s | %.2f | %.2f | %.2fx | %.2fx (%.2f-%.2f) |" % (
                row, statistics.median(s), statistics.median(t),
                statistics.median(s) / statistics.median(t), statistics.median(same),
                min(same), max(same)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
