#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The plain loop's images/s with batches safe to hold, against the previous zero-copy binding.

    /usr/bin/python3 bench/python_hold_overhead.py --data DIR --baseline REV [--repeats 5]
        [--images 2560] [--batch-size 128] [--workers 2] [--dtype float32]

The previous binding (stoker.Loader at git revision REV, whose batches were overwritten at the
next step) and the current one (finalisers, release when the last reference goes, detach when a
batch is still referenced) run the same loop — `for images, labels in loader: images.sum()`,
train 224, DIR read as it is — in alternating subprocesses (old, new, old, new, ...), so that
both see the same machine weather; each prints its images/s from the first batch to the last
(start-up excluded) and the process CPU time per image over the same span (decode threads
included: less sensitive to other jobs' load than the wall clock). The last lines give the
medians and the ratios new / old. Both load the same
libstoker (the newest build, or $STOKER_LIBRARY).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import torch, stoker
data, images, bs, workers, dtype = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
kw = dict(train=True, size=224, workers=workers, seed=1, dtype=dtype)
import os
if os.environ.get("PREFETCH"): kw["prefetch"] = int(os.environ["PREFETCH"])
if dtype != "uint8":
    kw.update(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
torch.set_num_threads(1)
loader = stoker.Loader(data, bs, **kw)
n, t_first, n_first, sink = 0, None, 0, 0.0
done = False
while not done:
    for x, y in loader:
        sink += float(x[:, :, 0, 0].sum())   # touch the batch, as a step would
        n += x.shape[0]
        if t_first is None:
            t_first, n_first = time.perf_counter(), n
            r0 = resource.getrusage(resource.RUSAGE_SELF)
        if n >= images:
            done = True
            break
t = time.perf_counter() - t_first
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
st = loader.stats()
print(json.dumps({"ips": (n - n_first) / t, "cpu_ms": 1000.0 * cpu / (n - n_first), "images": n,
                  "detached": st.get("detached", 0)}))
loader.close()
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="ImageFolder root or packed dataset")
    ap.add_argument("--baseline", required=True, help="git revision of the previous binding")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--images", type=int, default=2560)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be >= 3 (medians)")

    old = tempfile.mkdtemp(prefix="stoker-old-binding-")
    tar = subprocess.run(["git", "-C", REPO, "archive", args.baseline, "bindings/python/stoker"],
                         check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", old], input=tar, check=True)
    paths = {"old": os.path.join(old, "bindings", "python"),
             "new": os.path.join(REPO, "bindings", "python")}
    res = {"old": [], "new": []}
    for r in range(args.repeats):
        for name in ("old", "new"):
            out = subprocess.run([sys.executable, "-c", CHILD, paths[name], args.data,
                                  str(args.images), str(args.batch_size), str(args.workers),
                                  args.dtype], check=True, capture_output=True, text=True)
            d = json.loads(out.stdout.strip().splitlines()[-1])
            res[name].append(d)
            print("repeat %d %s: %.1f images/s, %.3f CPU-ms/image (%d images, %d detached)"
                  % (r, name, d["ips"], d["cpu_ms"], d["images"], d["detached"]), flush=True)
    med = {k: statistics.median(d["ips"] for d in v) for k, v in res.items()}
    ratios = [n["ips"] / o["ips"] for o, n in zip(res["old"], res["new"])]
    print("median images/s: old %.1f, new %.1f; ratio new/old %.3f (median of per-pair ratios "
          "%.3f, %d repeats)" % (med["old"], med["new"], med["new"] / med["old"],
                                 statistics.median(ratios), args.repeats))
    cpu = {k: statistics.median(d["cpu_ms"] for d in v) for k, v in res.items()}
    print("median CPU-ms/image (all threads): old %.3f, new %.3f; ratio new/old %.3f"
          % (cpu["old"], cpu["new"], cpu["new"] / cpu["old"]))
    subprocess.run(["rm", "-rf", old])


if __name__ == "__main__":
    main()
