#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One streamed first epoch from a bucket, two builds of libstoker side by side: A, B, A, B, ...
each run a fresh process, ratios pair by pair (docs/S3.md "Connections kept, larger reads").

    eval "$(bash scripts/s3-server.sh env SRV)"           # AWS_* of a running test server
    PY=VENV/bin/python                                     # torch and boto3 importable
    $PY bench/s3_first_ab.py s3://BUCKET/PREFIX LIB_A LIB_B [--pairs 8] [--window 4]
        [--rate-mbit 1000 --delay-ms 20 | --direct] [--work DIR]

The dataset is stoker shards already in the bucket (bench/s3_stream.py puts them there). Each
run is `stoker.Loader(URL, 64, size=224, workers=2, seed=1, cache=EMPTY DIR,
shuffle_window=WINDOW)`: decode, RandomResizedCrop 224, flip; timed from the construction to the
last batch, with its CPU time (the process's); the cache is removed after each run. The link is
tests/s3_fault_proxy.py at --rate-mbit and --delay-ms (as bench/s3_stream.py's), or with
--direct the endpoint itself (AWS_ENDPOINT_URL: http, or https with AWS_CA_BUNDLE).
Prints each run, then per pair B/A for images/s and CPU per image, and their medians.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from s3_stream import start_proxy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

RUN = r"""
import json, resource, sys, time
import stoker, torch   # imported before the clock, as in a training script
url, cache, window = sys.argv[1], sys.argv[2], int(sys.argv[3])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0, t0, n = cpu(), time.monotonic(), 0
with stoker.Loader(url, 64, size=224, workers=2, seed=1, cache=cache, shuffle_window=window) as ld:
    for images, labels in ld:
        n += len(labels)
print(json.dumps({"images": n, "seconds": time.monotonic() - t0, "cpu_s": cpu() - c0}))
"""


def one(lib, url, window, env, work):
    cache = tempfile.mkdtemp(prefix="ab-cache-", dir=work)
    try:
        r = subprocess.run([sys.executable, "-c", RUN, url, cache, str(window)],
                           env=dict(env, STOKER_LIBRARY=lib), capture_output=True, text=True,
                           timeout=600)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if r.returncode != 0:
        raise SystemExit("run with %s failed:\n%s" % (lib, r.stderr[-3000:]))
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return d["images"] / d["seconds"], d["cpu_s"] * 1e3 / d["images"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("lib_a")
    ap.add_argument("lib_b")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--rate-mbit", type=float, default=1000.0)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--direct", action="store_true", help="no proxy: the endpoint itself")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="s3ab-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    proxy = None
    if not args.direct:   # the link as bench/s3_stream.py makes it
        proxy, env["AWS_ENDPOINT_URL"] = start_proxy(args, work)
    link = "the endpoint %s directly" % env["AWS_ENDPOINT_URL"] if args.direct else \
        "the proxy at %g Mbit/s, %g ms per request" % (args.rate_mbit, args.delay_ms)
    print("%s, window %d, %d pairs, through %s; load average %s" % (
        args.url, args.window, args.pairs, link, " ".join("%.1f" % x for x in os.getloadavg())))
    ratios, cpus = [], []
    try:
        for i in range(args.pairs):
            a = one(args.lib_a, args.url, args.window, env, work)
            b = one(args.lib_b, args.url, args.window, env, work)
            ratios.append(b[0] / a[0])
            cpus.append(b[1] / a[1])
            print("pair %d: A %.1f img/s %.2f CPU-ms/img, B %.1f img/s %.2f CPU-ms/img, B/A %.3f" % (
                i + 1, a[0], a[1], b[0], b[1], b[0] / a[0]), flush=True)
    finally:
        if proxy:
            proxy.terminate()
            proxy.wait()
    print("B/A images/s per pair: %s; median %.3f" % (" ".join("%.2f" % r for r in ratios),
                                                     statistics.median(ratios)))
    print("B/A CPU per image per pair: %s; median %.3f" % (" ".join("%.2f" % r for r in cpus),
                                                          statistics.median(cpus)))
    print("load average at the end: %s" % " ".join("%.1f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
