#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""stoker over an emulated link vs local shards, and vs MosaicML Streaming and WebDataset on the
same server, link, images, cores and work per image (docs/S3.md, "Measured: over a slow link").

    eval "$(scripts/s3-server.sh start /tmp/s3)"          # the S3 server: AWS_* in the env
    /usr/bin/python3 -m venv --system-site-packages VENV   # Debian's torch, PIL, boto3 inside
    VENV/bin/pip install --no-deps mosaicml-streaming==0.7.6 webdataset braceexpand xxhash zstd \
        catalogue python-snappy cramjam Brotli regex tqdm transformers==4.40.2 \
        huggingface_hub==0.23.4 tokenizers==0.19.1 typing_extensions   # Streaming's imports
    PY=VENV/bin/python STOKER_LIBRARY=build/libstoker.so
    $PY bench/s3_stream.py IMAGEFOLDER WORKDIR [--rate-mbit 1000] [--delay-ms 20] [--repeat 3]
        [--shard-mb 4] [--window 4] [--quarter-epochs 3]

IMAGEFOLDER (e.g. ../shared/tools/make-imagenet-like) is written three ways, shards of about
--shard-mb MB each: stoker shards (stoker.pack), Streaming's MDS (MDSWriter, image bytes +
label) and WebDataset tars (ShardWriter); each is uploaded with boto3 straight to the server
(unless an earlier run put an object of that name and size there).
The loaders then read through tests/s3_fault_proxy.py as the link (no faults; every answer
delayed --delay-ms, the RTT a request costs; all answers together at --rate-mbit: see that file
for exactly what it emulates). Every run is a fresh process; per repeat, in turn:
  local        stoker.Loader on the local shards, --quarter-epochs epochs in one run: the first
               (from the construction) for the first-epoch ratios, the others as the steady
               local rate for the quarter cache's
  s3-first     stoker.Loader("s3://...", shuffle_window=--window) over an empty cache that
               could hold the set: streamed, several shards fetched at once ahead of the reader
  s3-first-global  stoker.Loader("s3://...") over an empty cache, the exact global shuffle: the
               open fetches the whole set (every shard in flight), then the epoch
  s3-cached    a new stoker.Loader on the cache the s3-first run filled: one epoch
  quarter      stoker.Loader("s3://...", cache_bytes=a quarter of the shards' bytes) over an
               empty cache: --quarter-epochs epochs in one run (streamed, every epoch fetches);
               each epoch's rate, the longest gap between two batches after an epoch's first
               batch and the longest single wait for the fetch (Loader.stats()["fetch"]
               ["max_wait_s"]), each against that epoch's mean time per batch
  streaming    StreamingDataset(remote="s3://...", local=empty dir) + torch DataLoader
  streaming-cached  the same on the local dir the streaming run filled (its second epoch)
  wds          WebDataset("pipe:... boto3 get ... -") + torch DataLoader
A first epoch is timed from the loader's construction to its last batch (imports before: torch
too, which stoker.Loader would otherwise import inside its constructor and a training script has
imported long before; until 2026-12-05 it was inside stoker's timed region only), and
its CPU time taken (the run's process and its children: on a machine shared with other work,
CPU per image is the steadier figure; wall-clock rates follow how many threads each loader runs
against the other load). The same work per image:
decode, RandomResizedCrop(SIZE) (scale 0.08-1, ratio 3/4-4/3), horizontal flip, uint8 CHW;
stoker with 2 decode threads, the others with 2 DataLoader workers (PIL + torchvision);
batches of 64. Reported: medians over the repeats and, from the same run, the ratios the issue
asks for: s3-first / min(link rate in images/s, local), s3-cached / local, the quarter cache's
steady epochs (all but the first) / min(link, local) and its longest stall / one batch's time,
and stoker's first epoch / the faster of Streaming and WebDataset. The load average is printed
at the start and the end (a shared machine: the ratios are within one run).
The link as emulated is also measured directly, before the runs and after them: stoker's shard
objects downloaded whole through the proxy, --probe-streams at once (boto3, no decoding, in this
process), reported as "the link carries X MB/s = Y images/s"; the first-epoch ratios are printed
against that rate too (the Python proxy delivers less than its nominal rate on a busy CPU).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROXY = os.path.join(ROOT, "tests", "s3_fault_proxy.py")

S3CAT = """
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ.get("AWS_REGION"))
body = s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2])["Body"]
out = sys.stdout.buffer
for chunk in iter(lambda: body.read(1 << 20), b""):
    out.write(chunk)
"""

# one measured epoch, in a fresh process: prints {"images": N, "seconds": S, ...}
RUN = r"""
import json, os, resource, sys, time
kind, arg, size = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
if kind in ("local", "s3-first", "s3-first-global", "s3-cached", "quarter"):   # imports first
    import stoker
    import torch   # as a training script has (and the other loaders' runs below): not timed
else:
    import io
    import torch
    from PIL import Image
    from torchvision import transforms as T
    if kind.startswith("streaming"):
        from streaming import StreamingDataset
    else:
        import webdataset as wds
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
c0 = cpu()
t0 = time.monotonic()
n, extra = 0, {}
if kind in ("local", "s3-first", "s3-first-global", "s3-cached", "quarter"):
    kw = {k: arg[k] for k in ("cache", "cache_bytes", "shuffle_window") if k in arg}
    epochs = []
    with stoker.Loader(arg["path"], 64, size=size, workers=2, seed=1, **kw) as ld:
        t_iter = time.monotonic()   # the open (and, unless streamed, its download) before
        for e in range(arg.get("epochs", 1)):
            ts, m = [time.monotonic()], 0
            for images, labels in ld:
                m += len(labels)
                ts.append(time.monotonic())
            n += m
            gaps = [b - a for a, b in zip(ts[1:], ts[2:])]   # after the epoch's first batch
            fetch = ld.stats(max_errors=0)["fetch"]   # max_wait_s: of this epoch
            epochs.append({"images": m, "seconds": ts[-1] - ts[0], "batches": len(ts) - 1,
                           "max_wait_s": fetch["max_wait_s"],
                           "first_batch_s": ts[1] - ts[0] if len(ts) > 1 else 0.0,
                           "max_gap_s": max(gaps) if gaps else 0.0,
                           "mean_gap_s": sum(gaps) / len(gaps) if gaps else 0.0})
        st = ld.stats(max_errors=0)
        fs = ld.fetch_stats()
        extra = {"fetch": st["fetch"], "verdict": st["verdict"]["bottleneck_name"],
                 "first_epoch_s": t_iter - t0 + epochs[0]["seconds"],
                 "epochs": epochs, "shards_fetched": fs["shards_fetched"]}
else:
    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.PILToTensor()])
    if kind.startswith("streaming"):
        class DS(StreamingDataset):
            def __getitem__(self, i):
                s = super().__getitem__(i)
                return tf(Image.open(io.BytesIO(s["image"])).convert("RGB")), s["label"]

        ds = DS(remote=arg["remote"], local=arg["local"], shuffle=False, batch_size=64)
    else:
        ds = (wds.WebDataset(arg["urls"], shardshuffle=False)
              .decode("pil").to_tuple("jpg", "cls").map_tuple(lambda im: tf(im.convert("RGB")), int))
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2):
        n += len(labels)
t1 = time.monotonic()
import gc
gc.collect()  # the exhausted DataLoader iterator has joined its workers: their CPU counts
print(json.dumps(dict(images=n, seconds=t1 - t0, cpu_s=cpu() - c0, **extra)))
"""


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def prepare(args, s3):
    """Write and upload the three formats; returns (n images, {kind: (prefix, names, bytes)})."""
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import stoker
    import webdataset as wds
    from streaming import MDSWriter
    work, src = args.work, args.images
    shard = args.shard_mb << 20
    out = {}
    d = os.path.join(work, "stoker")
    if not os.path.isdir(d):
        stoker.pack(src, d, threads=2, shard_bytes=shard)
    classes = sorted(e for e in os.listdir(src) if os.path.isdir(os.path.join(src, e)))
    files = [(os.path.join(src, c, f), k) for k, c in enumerate(classes)
             for f in sorted(os.listdir(os.path.join(src, c)))]
    m = os.path.join(work, "mds")
    if not os.path.isdir(m):
        with MDSWriter(out=m, columns={"image": "bytes", "label": "int"}, size_limit=shard) as w:
            for p, k in files:
                w.write({"image": open(p, "rb").read(), "label": k})
    t = os.path.join(work, "wds")
    if not os.path.isdir(t):
        os.makedirs(t)
        with wds.ShardWriter(os.path.join(t, "shard-%06d.tar"), maxsize=shard) as w:
            for i, (p, k) in enumerate(files):
                w.write({"__key__": "%06d" % i, "jpg": open(p, "rb").read(), "cls": k})
    from botocore.exceptions import ClientError
    try:
        s3.create_bucket(Bucket=args.bucket)
    except ClientError as e:   # made by an earlier run on this server
        if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    there = {}   # objects already uploaded by an earlier run on this server: not again
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args.bucket):
        there.update((o["Key"], o["Size"]) for o in page.get("Contents", []))
    for kind, folder in (("stoker", d), ("mds", m), ("wds", t)):
        names = sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f))
                       and not f.endswith("-lock") and f != "stoker.lock")
        if kind == "stoker":
            names = [f for f in names if f.startswith("shard-") and f.endswith(".lmdb")]
        size = 0
        for f in names:
            fs = os.path.getsize(os.path.join(folder, f))
            if there.get(kind + "/" + f) != fs:
                s3.upload_file(os.path.join(folder, f), args.bucket, kind + "/" + f)
            size += fs
        out[kind] = (kind, names, size)
    return len(files), out


def start_proxy(args, work):
    host, up = os.environ["AWS_ENDPOINT_URL"].rstrip("/").split("//", 1)[1].rsplit(":", 1)
    pf = os.path.join(work, "proxy.port")
    if os.path.exists(pf):
        os.unlink(pf)
    env = dict(os.environ, STK_PROXY_RATE_MBIT=str(args.rate_mbit), STK_PROXY_DELAY_MS=str(args.delay_ms),
               STK_PROXY_UPSTREAM_HOST=host)
    p = subprocess.Popen([sys.executable, PROXY, up, pf, os.path.join(work, "proxy.log"), "0"], env=env)
    while not os.path.exists(pf):
        time.sleep(0.05)
    return p, "http://127.0.0.1:%s" % open(pf).read().strip()


def probe_link(endpoint, bucket, names, streams):
    """Download the objects NAMES whole through ENDPOINT, STREAMS at once: (bytes, seconds)."""
    import boto3
    from botocore.config import Config
    from concurrent.futures import ThreadPoolExecutor
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION"),
                      config=Config(max_pool_connections=streams))

    def get(key):
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        n = 0
        for chunk in iter(lambda: body.read(1 << 20), b""):
            n += len(chunk)
        return n

    s3.head_bucket(Bucket=bucket)   # the connection set up before the clock
    t0 = time.monotonic()
    with ThreadPoolExecutor(streams) as ex:
        total = sum(ex.map(get, names))
    return total, time.monotonic() - t0


def one(kind, arg, size, env):
    """One epoch in a fresh process: images, seconds, cpu_s (the epoch's CPU, imports excluded:
    the process and its reaped children, DataLoader workers and WebDataset's pipes)."""
    r = subprocess.run([sys.executable, "-c", RUN, kind, json.dumps(arg), str(size)], env=env,
                       capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (kind, r.stderr[-3000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("images")
    ap.add_argument("work")
    ap.add_argument("--bucket", default="stk-bench-stream")
    ap.add_argument("--rate-mbit", type=float, default=1000.0)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--link-mbit", type=float, default=0.0,
                    help="with --rate-mbit 0: the rate of a link shaped outside the proxy "
                         "(bench/s3_netns.sh), for the nominal ratios")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--shard-mb", type=int, default=4)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--quarter-epochs", type=int, default=3)
    ap.add_argument("--probe-streams", type=int, default=8,
                    help="downloads at once when the link is measured directly")
    ap.add_argument("--only", default="local,s3-first,s3-first-global,s3-cached,quarter,streaming,"
                                      "streaming-cached,wds")
    args = ap.parse_args()
    if not (args.rate_mbit or args.link_mbit):
        ap.error("--rate-mbit 0 needs --link-mbit: the rate of the link shaped outside the proxy")
    import boto3
    os.makedirs(args.work, exist_ok=True)
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ.get("AWS_REGION"))
    n, sets = prepare(args, s3)
    print("load average at the start: %s" % " ".join("%.1f" % x for x in os.getloadavg()), flush=True)
    proxy, endpoint = start_proxy(args, args.work)
    cat = os.path.join(args.work, "s3cat.py")
    with open(cat, "w") as f:
        f.write(S3CAT)
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, S3_ENDPOINT_URL=endpoint,
               PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    kinds = args.only.split(",")
    res = {k: [] for k in kinds}
    keys = ["stoker/" + x for x in sets["stoker"][1]]
    probes = []

    def probe(when):
        b, t = probe_link(endpoint, args.bucket, keys, args.probe_streams)
        probes.append(b / t)
        print("the link carries %.1f MB/s = %.1f images/s (%s: %d shard objects, %.1f MB, %d at once, "
              "%.2f s)" % (b / t / 1e6, n * b / t / sets["stoker"][2], when, len(keys), b / 1e6,
                           args.probe_streams, t), flush=True)
    try:
        probe("before the runs")
        for rep in range(args.repeat):
            tmp = tempfile.mkdtemp(prefix="s3stream-", dir=args.work)
            for k in kinds:
                s3url = "s3://%s/stoker" % args.bucket
                if k == "local":   # as many epochs as the quarter run: its steady rate too
                    arg = {"path": os.path.join(args.work, "stoker"), "epochs": args.quarter_epochs}
                elif k == "s3-first":
                    arg = {"path": s3url, "cache": os.path.join(tmp, "cache"),
                           "shuffle_window": args.window}
                elif k == "s3-first-global":
                    arg = {"path": s3url, "cache": os.path.join(tmp, "cache-global")}
                elif k == "s3-cached":
                    arg = {"path": s3url, "cache": os.path.join(tmp, "cache")}
                elif k == "quarter":
                    arg = {"path": s3url, "cache": os.path.join(tmp, "cache-quarter"),
                           "cache_bytes": sets["stoker"][2] // 4, "epochs": args.quarter_epochs}
                elif k.startswith("streaming"):
                    arg = {"remote": "s3://%s/mds" % args.bucket, "local": os.path.join(tmp, "mds")}
                else:
                    names = sets["wds"][1]
                    arg = {"urls": ["pipe:%s %s %s wds/%s" % (sys.executable, cat, args.bucket, x) for x in names]}
                r = one(k, arg, args.size, env)
                ne = arg.get("epochs", 1)
                assert r["images"] == n * ne, (k, r)
                r["ips"] = n / r["first_epoch_s"] if "first_epoch_s" in r else n * ne / r["seconds"]
                r["cpu_s"] /= ne
                if k in ("quarter", "local") and ne > 1:   # the steady epochs: all but the first
                    steady = r["epochs"][1:] or r["epochs"]
                    r["steady_ips"] = sum(e["images"] for e in steady) / sum(e["seconds"] for e in steady)
                    r["stall"] = max(e["max_gap_s"] / e["mean_gap_s"] for e in steady if e["mean_gap_s"])
                res[k].append(r)
                more = ""
                if k.startswith("s3") or k == "quarter":
                    f = r["fetch"]
                    more = "link %.1f MB/s, waited %.2f s, %d shards fetched" % (
                        f["link_mb_per_s"], f["starved_s"], r["shards_fetched"])
                if k in ("local", "s3-first", "s3-first-global", "s3-cached", "quarter"):
                    r["stall_all"] = max((e["max_gap_s"] / e["mean_gap_s"] for e in r["epochs"]
                                          if e["mean_gap_s"]), default=0.0)
                if "epochs" in r:   # the longest wait for the fetch / the epoch's time per batch
                    r["wait_all"] = [e["max_wait_s"] / (e["seconds"] / e["batches"])
                                     for e in r["epochs"] if e["batches"]]
                if k.startswith("s3") or k == "quarter":
                    more += "; longest wait for the fetch %s s = %s batch times" % (
                        ", ".join("%.3f" % e["max_wait_s"] for e in r["epochs"]),
                        ", ".join("%.2f" % w for w in r["wait_all"]))
                if k == "quarter":
                    more += "; epochs %s img/s; longest gap / mean gap per epoch %s" % (
                        ", ".join("%.1f" % (e["images"] / e["seconds"]) for e in r["epochs"]),
                        ", ".join("%.2f" % (e["max_gap_s"] / e["mean_gap_s"]) for e in r["epochs"]
                                  if e["mean_gap_s"]))
                print("repeat %d %-16s %7.1f img/s  %6.2f s  %5.2f CPU-ms/img  %s" % (
                    rep + 1, k, r["ips"], r["seconds"], 1e3 * r["cpu_s"] / n, more), flush=True)
            shutil.rmtree(tmp, ignore_errors=True)
        probe("after the runs")
    finally:
        proxy.kill()
        proxy.wait()
    med = {k: statistics.median(r["ips"] for r in v) for k, v in res.items() if v}
    mbit = args.rate_mbit or args.link_mbit  # the proxy's rate, or a link shaped outside it
    link_ips = n / (sets["stoker"][2] / (mbit * 1e6 / 8))
    print("\n%d images, stoker shards %.1f MB, MDS %.1f MB, tars %.1f MB; link %g Mbit/s, %g ms per request"
          % (n, sets["stoker"][2] / 1e6, sets["mds"][2] / 1e6, sets["wds"][2] / 1e6, mbit, args.delay_ms))
    cpu = {k: statistics.median(1e3 * r["cpu_s"] / n for r in v) for k, v in res.items() if v}
    for k, v in med.items():
        print("median %-16s %7.1f img/s  %5.2f CPU-ms/img  (runs: %s)" % (
            k, v, cpu[k], ", ".join("%.1f" % r["ips"] for r in res[k])))
    print("load average at the end: %s" % " ".join("%.1f" % x for x in os.getloadavg()))
    print("link rate in images/s (nominal): %.1f" % link_ips)
    if "s3-first" in med and "local" in med:
        links = [r["fetch"]["link_mb_per_s"] for r in res["s3-first"]]
        print("stoker's measured link: %s MB/s" % ", ".join("%.1f" % x for x in links))
        print("ratio s3-first / min(link, local) = %.2f" % (med["s3-first"] / min(link_ips, med["local"])))
        carried = n * statistics.mean(probes) / sets["stoker"][2]
        print("the link as measured carries %.1f images/s (mean of %s MB/s): ratio s3-first / "
              "min(link measured, local) = %.2f; per repeat %s" % (
                  carried, ", ".join("%.1f" % (x / 1e6) for x in probes),
                  med["s3-first"] / min(carried, med["local"]),
                  ", ".join("%.2f" % (a["ips"] / min(carried, b["ips"]))
                            for a, b in zip(res["s3-first"], res["local"]))))
    if "s3-first" in med:
        print("s3-first: the longest single wait for the fetch (stats max_wait_s) / the epoch's mean "
              "time per batch: %s" % ", ".join("%.2f" % r["wait_all"][0] for r in res["s3-first"]))
    if "s3-first-global" in med and "local" in med:
        print("ratio s3-first-global / min(link, local) = %.2f" % (
            med["s3-first-global"] / min(link_ips, med["local"])))
    if "s3-cached" in med and "local" in med:
        print("ratio s3-cached / local = %.2f" % (med["s3-cached"] / med["local"]))
    if "s3-first" in med and "local" in med:
        print("per repeat (runs side by side): s3-first / min(link, local) = %s; s3-cached / local = %s" % (
            ", ".join("%.2f" % (a["ips"] / min(link_ips, b["ips"])) for a, b in zip(res["s3-first"], res["local"])),
            ", ".join("%.2f" % (a["ips"] / b["ips"]) for a, b in zip(res.get("s3-cached", []), res["local"]))))
    if "quarter" in med and "local" in med and "steady_ips" in res["local"][0]:
        steady = statistics.median(r["steady_ips"] for r in res["quarter"])
        lsteady = statistics.median(r["steady_ips"] for r in res["local"])
        print("steady epochs (2..%d in one run): quarter cache %.1f img/s (runs: %s), local %.1f (runs: %s)"
              % (args.quarter_epochs, steady, ", ".join("%.1f" % r["steady_ips"] for r in res["quarter"]),
                 lsteady, ", ".join("%.1f" % r["steady_ips"] for r in res["local"])))
        print("ratio quarter steady / min(link, local steady) = %.2f; per repeat %s" % (
            steady / min(link_ips, lsteady), ", ".join(
                "%.2f" % (a["steady_ips"] / min(link_ips, b["steady_ips"]))
                for a, b in zip(res["quarter"], res["local"]))))
        if probes:
            carried = n * statistics.mean(probes) / sets["stoker"][2]
            print("ratio quarter steady / min(link measured, local steady) = %.2f" % (
                steady / min(carried, lsteady)))
        print("quarter cache: longest gap between batches after an epoch's first / that epoch's mean "
              "batch time: steady epochs %s; all epochs %s" % (
                  ", ".join("%.2f" % r["stall"] for r in res["quarter"]),
                  ", ".join("%.2f" % r["stall_all"] for r in res["quarter"])))
        print("the same for local shards (this machine's noise floor): %s" % (
              ", ".join("%.2f" % r["stall_all"] for r in res.get("local", []))))
        print("quarter cache: the longest single wait for the fetch (stats max_wait_s) / that "
              "epoch's mean time per batch: steady epochs %s; first epochs %s" % (
                  ", ".join("%.2f" % max(r["wait_all"][1:] or [0.0]) for r in res["quarter"]),
                  ", ".join("%.2f" % r["wait_all"][0] for r in res["quarter"])))
    others = [med[k] for k in ("streaming", "wds") if k in med]
    if others and "s3-first" in med:
        print("ratio stoker s3-first / max(streaming, wds) = %.2f" % (med["s3-first"] / max(others)))
    if "streaming-cached" in med and "s3-cached" in med:
        print("ratio stoker s3-cached / streaming-cached = %.2f" % (med["s3-cached"] / med["streaming-cached"]))
    for k in ("streaming", "streaming-cached", "wds"):
        mine = "s3-cached" if k.endswith("cached") else "s3-first"
        if k in cpu and mine in cpu:
            print("CPU per image: %s / stoker %s = %.2f" % (k, mine, cpu[k] / cpu[mine]))


if __name__ == "__main__":
    main()
