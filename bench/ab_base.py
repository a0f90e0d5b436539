#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Issue 26: "everything stoker ran before: no slower" — this tree against a base commit's.

  git worktree add /tmp/base f22a41e && (cd /tmp/base && BUILD_DIR=build bash scripts/build.sh)
  /usr/bin/python3 bench/ab_base.py --base /tmp/base [--data DIR] [--pairs 4] [--seconds 2]
      [--json FILE]

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
images/s is timed from the loader's creation to its last batch (imports not timed).
Data: --data DIR/imnet, made with /work/shared/tools/make-imagenet-like --count 400 --classes 10
when absent.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MAKE = os.path.join(REPO, "..", "shared", "tools", "make-imagenet-like")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def child(args):
    import warnings
    train = args.mode == "train"
    if args.row == "Loader":
        import stoker
        t0 = time.perf_counter()
        dl = stoker.Loader(args.root, 64, train=train, workers=2)
    else:
        import torchvision.transforms as T
        from torchvision.datasets import ImageFolder
        import stoker
        steps = ([T.RandomResizedCrop(224), T.RandomHorizontalFlip()] if train else
                 [T.Resize(256), T.CenterCrop(224)])
        ds = ImageFolder(args.root, T.Compose(steps + [T.ToTensor(), T.Normalize(MEAN, STD)]))
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dl = stoker.DataLoader(ds, batch_size=64, shuffle=train, num_workers=2)
    n = 0
    for x, y in dl:
        n += int(x.shape[0])
    dt = time.perf_counter() - t0
    print(json.dumps({"images": n, "img_s": n / dt}))


def run_loaderbench(tree, mode, root, seconds, cache):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([os.path.join(tree, "build", "loaderbench"), "--workers", "2",
                        "--layouts", "files,shards-buffered", "--mode", mode, "--size", "224",
                        "--device", "cpu", "--seconds", str(seconds), "--quiet",
                        "--cache-dir", cache, "--json", f.name, root],
                       check=True, capture_output=True, text=True)
        out = json.load(open(f.name))
    return {("loaderbench-%s %s" % (mode, p["layout"])): p.get("images_per_s") or p["img_s"]
            for p in out["points"]}


def run_python(tree, row, mode, root):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(tree, "bindings", "python")
    env["STOKER_LIBRARY"] = os.path.join(tree, "build", "libstoker.so")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--row", row,
                          "--mode", mode, "--root", root], env=env, check=True,
                         capture_output=True, text=True)
    return {"%s-%s" % (row, mode): json.loads(out.stdout.strip().splitlines()[-1])["img_s"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", help="the base commit's worktree, built (required)")
    ap.add_argument("--data", default="/tmp/pytail-bench")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--json")
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
                for side in ("A", "B") if pair % 2 == 0 else ("B", "A"):
                    if what == "loaderbench":
                        got = run_loaderbench(trees[side], mode, root, args.seconds, caches[side])
                    else:
                        got = run_python(trees[side], what, mode, root)
                    for row, v in got.items():
                        runs.setdefault(row, {"A": [], "B": []})[side].append(v)
                        print("pair %d %-32s %s %8.1f img/s" % (pair, row, side, v), flush=True)
    print("\n| row | base img/s (median) | this tree img/s (median) | same-pair ratio B/A: "
          "median (min-max) |\n|---|---|---|---|")
    for row, v in runs.items():
        ratios = [b / a for a, b in zip(v["A"], v["B"])]
        print("| %s | %.0f | %.0f | %.3f (%.2f-%.2f) |" % (
            row, statistics.median(v["A"]), statistics.median(v["B"]),
            statistics.median(ratios), min(ratios), max(ratios)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
