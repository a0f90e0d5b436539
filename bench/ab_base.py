#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Issue 26: "everything stoker ran before: no slower" — this tree against a base commit's.

  git worktree add /tmp/base f22a41e && (cd /tmp/base && BUILD_DIR=build bash scripts/build.sh)
  /usr/bin/python3 bench/ab_base.py --base /tmp/base [--data DIR] [--pairs 4] [--seconds 2]
      [--json FILE] [--only ROW,ROW]

Rows (each run one child process, the same data; A = base, B = this tree, run interleaved
A B A B ... so that both see the same machine weather; the table gives each side's median and
the median of the same-pair ratios B/A with their range):
  loaderbench-train / -eval   the C CLI: --workers 2 --layouts files,shards-buffered --size 224
                              --device cpu --seconds S (each layout a row; shards packed into
                              a cache directory per tree)
  Loader-train / -eval        stoker.Loader(ROOT, 64, train=..., workers=2): one epoch
  DataLoader-train / -eval    stoker.DataLoader(torchvision ImageFolder(ROOT, RandomResizedCrop
                              + flip | Resize + CenterCrop, ToTensor, Normalize), 64,
                              shuffle=train, num_workers=2): one epoch
images/s is timed from the loader's creation to its last batch (imports not timed). CPU
ms/img is the process's CPU time (user + system, all its threads) over the same span per image
(loaderbench: its cpu_cores / images_per_s): the work per image, much less sensitive than
images/s to other jobs on a shared machine.
Data: --data DIR/imnet, made with /work/shared/tools/make-imagenet-like --count 400 --classes 10
when absent.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MAKE = os.path.join(REPO, "..", "shared", "tools", "make-imagenet-like")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _cpu():
    """This process's CPU seconds so far: user + system, all threads (the library's too)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def child(args):
    import warnings
    train = args.mode == "train"
    if args.row == "Loader":
        import stoker
        cpu0, t0 = _cpu(), time.perf_counter()
        dl = stoker.Loader(args.root, 64, train=train, workers=2)
    else:
        import torchvision.transforms as T
        from torchvision.datasets import ImageFolder
        import stoker
        steps = ([T.RandomResizedCrop(224), T.RandomHorizontalFlip()] if train else
                 [T.Resize(256), T.CenterCrop(224)])
        ds = ImageFolder(args.root, T.Compose(steps + [T.ToTensor(), T.Normalize(MEAN, STD)]))
        cpu0, t0 = _cpu(), time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dl = stoker.DataLoader(ds, batch_size=64, shuffle=train, num_workers=2)
    n = 0
    for x, y in dl:
        n += int(x.shape[0])
    dt = time.perf_counter() - t0
    cpu = _cpu() - cpu0
    print(json.dumps({"images": n, "img_s": n / dt, "cpu_ms_img": 1e3 * cpu / n}))


def run_loaderbench(tree, mode, root, seconds, cache):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([os.path.join(tree, "build", "loaderbench"), "--workers", "2",
                        "--layouts", "files,shards-buffered", "--mode", mode, "--size", "224",
                        "--device", "cpu", "--seconds", str(seconds), "--quiet",
                        "--cache-dir", cache, "--json", f.name, root],
                       check=True, capture_output=True, text=True)
        out = json.load(open(f.name))
    return {("loaderbench-%s %s" % (mode, p["layout"])): (
        p["images_per_s"], 1e3 * p["cpu_cores"] / p["images_per_s"]) for p in out["points"]}


def run_python(tree, row, mode, root):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(tree, "bindings", "python")
    env["STOKER_LIBRARY"] = os.path.join(tree, "build", "libstoker.so")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--row", row,
                          "--mode", mode, "--root", root], env=env, check=True,
                         capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"%s-%s" % (row, mode): (r["img_s"], r["cpu_ms_img"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", help="the base commit's worktree, built (required)")
    ap.add_argument("--data", default="/tmp/pytail-bench")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--json")
    ap.add_argument("--only", help="comma-separated: run only these of loaderbench-train, "
                    "loaderbench-eval, Loader-train, Loader-eval, DataLoader-train, "
                    "DataLoader-eval")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--row")
    ap.add_argument("--mode")
    ap.add_argument("--root")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if not args.base:
        ap.error("--base DIR is required")
    root = os.path.join(args.data, "imnet")
    if not os.path.isdir(root):
        subprocess.run([MAKE, "--count", "400", "--classes", "10", "--jobs", "1", root],
                       check=True)
    trees = {"A": os.path.abspath(args.base), "B": REPO}
    caches = {k: tempfile.mkdtemp(prefix="ab-%s-" % k) for k in trees}
    runs = {}                          # row -> {"A": [...], "B": [...]}
    for pair in range(args.pairs):
        for mode in ("train", "eval"):
            for what in ("loaderbench", "Loader", "DataLoader"):
                if args.only and "%s-%s" % (what, mode) not in args.only.split(","):
                    continue
                for side in ("A", "B") if pair % 2 == 0 else ("B", "A"):
                    if what == "loaderbench":
                        got = run_loaderbench(trees[side], mode, root, args.seconds, caches[side])
                    else:
                        got = run_python(trees[side], what, mode, root)
                    for row, (v, c) in got.items():
                        runs.setdefault(row, {"A": [], "B": [], "cpuA": [], "cpuB": []})
                        runs[row][side].append(v)
                        runs[row]["cpu" + side].append(c)
                        print("pair %d %-32s %s %8.1f img/s %7.2f CPU ms/img" % (
                            pair, row, side, v, c), flush=True)
    for unit, a_key, b_key in (("img/s", "A", "B"), ("CPU ms/img", "cpuA", "cpuB")):
        print("\n| row | base %s (median) | this tree %s (median) | same-pair ratio this/base:"
              " median (min-max) |\n|---|---|---|---|" % (unit, unit))
        for row, v in runs.items():
            ratios = [b / a for a, b in zip(v[a_key], v[b_key])]
            print("| %s | %.2f | %.2f | %.3f (%.2f-%.2f) |" % (
                row, statistics.median(v[a_key]), statistics.median(v[b_key]),
                statistics.median(ratios), min(ratios), max(ratios)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
