#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Issue 21's recipes: stoker.DataLoader against torch's DataLoader with the same Compose.

  /usr/bin/python3 bench/recipes.py [--data DIR] [--count 1500] [--repeats 3] [--workers 2]
      [--batch 128] [--torch2-python /work/venv-torch2/bin/python]
      [--timm-python /work/venv-timm/bin/python] [--only NAME,...] [--json FILE]

Recipes (each a Compose handed unchanged to both loaders, over the same ImageFolder):
  tv       torchvision's reference train recipe, v1 transforms: RandomResizedCrop(176),
           RandomHorizontalFlip(), TrivialAugmentWide(), PILToTensor(),
           ConvertImageDtype(float32), Normalize(ImageNet), RandomErasing(0.1)
           (--only reference: this one)
  tv-noaug the same without TrivialAugmentWide: besides stoker's measured augment stage
           (below), the augment cost is also ESTIMATED as tv minus tv-noaug, in workers' busy
           ms/img and in process CPU ms/img (the latter holds better when the cores are shared)
  tv-decode  RandomResizedCrop(176), RandomHorizontalFlip(), PILToTensor(): the decode (crop
           decode + resize + flip, uint8) that the augment estimate is compared with
  tv-v2    tv written with torchvision.transforms.v2 (ToImage, ToDtype(float32, scale=True),
           ..., ToPureTensor); run by --torch2-python only (torchvision 0.14 has no usable v2)
  timm     timm.data.create_transform(224, is_training=True, auto_augment='rand-m9-mstd0.5',
           interpolation='bilinear'); needs an interpreter with timm (--timm-python,
           --torch2-python). When stoker.DataLoader refuses the Compose, the run prints
           "refused: <message>" and only torch's DataLoader is timed.
  timm-deit  DeiT's training transform as timm's train.py builds it: create_transform(224,
           is_training=True, auto_augment='rand-m9-mstd0.5-inc1', interpolation='random',
           re_prob=0.25, re_mode='pixel'); timm as above
  timm-aa  create_transform(224, is_training=True, auto_augment='original-mstd0.5'): timm's
           AutoAugment, original policy; timm as above

Every (interpreter, recipe, loader) is one child process (this script with --child) that
builds the loader, runs one epoch (shuffle=True, --workers: stoker's decode threads / torch's
worker processes, batch --batch) and prints one JSON line. Runs are interleaved (stoker, torch,
stoker, torch, ... for every recipe, then the next repeat) so both see the same machine
weather; the table gives medians over --repeats, the ratio of the medians and the median of
the same-repeat ratios (stoker / torch of one repeat). images/s is timed from the loader's
creation to its last batch (worker start-up counts for torch, thread start-up for stoker); CPU ms/img
is the child's user+sys CPU time including reaped worker processes (torch's workers exit at
the epoch's end), divided by the images. For stoker the per-stage ms/img are stats()
"ms_per_img": busy time divided by the images the stage handled (read: I/O threads; decode:
the decode workers without the augmentation: crop decode, resize, flip, convert; augment: the
per-sample augmentation in the same workers, TrivialAugmentWide and RandomErasing), and
aug/dec = augment / decode of the same run (stats() "augment_per_decode"; median over the
repeats). Busy time is wall time inside the work, so it grows when other processes share the
cores.
"steady" is the rate after the first batch (flattering torch, whose workers have prefetched
several batches by then); the ratio uses the whole-epoch rate.

Data: --data DIR/imnet, made once with /work/shared/tools/make-imagenet-like --count COUNT
--classes 10 when absent (real photos, ImageNet-like sizes).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PKG = os.path.join(REPO, "bindings", "python")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


# ---- child: one loader over one recipe, one epoch ---------------------------------------------

def build_transform(recipe):
    import torch
    if recipe == "tv-decode":
        from torchvision import transforms as T
        return T.Compose([T.RandomResizedCrop(176), T.RandomHorizontalFlip(), T.PILToTensor()])
    if recipe in ("tv", "tv-noaug"):
        from torchvision import transforms as T
        steps = [T.RandomResizedCrop(176), T.RandomHorizontalFlip()]
        if recipe == "tv":
            steps.append(T.TrivialAugmentWide())
        steps += [T.PILToTensor(), T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD),
                  T.RandomErasing(0.1)]
        return T.Compose(steps)
    if recipe == "tv-v2":
        from torchvision.transforms import v2
        return v2.Compose([v2.RandomResizedCrop(176, antialias=True), v2.RandomHorizontalFlip(),
                           v2.TrivialAugmentWide(), v2.ToImage(),
                           v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD),
                           v2.RandomErasing(0.1), v2.ToPureTensor()])
    if recipe == "timm":
        from timm.data import create_transform
        return create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5",
                                interpolation="bilinear")
    if recipe == "timm-aa":
        from timm.data import create_transform
        return create_transform(224, is_training=True, auto_augment="original-mstd0.5")
    if recipe == "timm-deit":
        from timm.data import create_transform
        return create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
                                interpolation="random", re_prob=0.25, re_mode="pixel")
    raise SystemExit("unknown recipe %r" % recipe)


def cpu_s():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def child(a):
    import torch
    import torchvision
    torch.set_num_threads(1)
    out = {"recipe": a.recipe, "loader": a.loader, "python": sys.executable,
           "torch": torch.__version__, "torchvision": torchvision.__version__}
    tf = build_transform(a.recipe)
    ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
    torch.manual_seed(0)
    t0, c0 = time.perf_counter(), cpu_s()
    if a.loader == "stoker":
        import stoker
        try:
            dl = stoker.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
        except ValueError as e:
            out["refused"] = str(e)
            print("RESULT " + json.dumps(out), flush=True)
            return 0
    else:
        dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers)
    n, t_first, n_first, checksum = 0, None, 0, 0.0
    for images, labels in dl:
        checksum += float(images[:, 0, 0, 0].sum())   # touch the batch, as a training step would
        n += images.shape[0]
        if t_first is None:
            t_first, n_first = time.perf_counter(), n
        out["shape"] = list(images.shape)
        out["dtype"] = str(images.dtype)
    t1, c1 = time.perf_counter(), cpu_s()
    out.update(images=n, wall_s=t1 - t0, cpu_s=c1 - c0, images_per_s=n / (t1 - t0),
               steady_images_per_s=(n - n_first) / max(t1 - t_first, 1e-9),
               cpu_ms_per_img=1e3 * (c1 - c0) / n)
    if a.loader == "stoker":
        st = dl.stats()
        for stage in ("read", "decode"):
            s = st[stage]
            out[stage + "_threads"] = s["threads"]
            out[stage + "_items"] = s["items"]
        out["workers_busy_ms_per_img"] = 1e3 * st["decode"]["busy_s"] / max(st["decode"]["items"], 1)
        for stage, ms in st["ms_per_img"].items():     # read, decode (without augment), augment
            out[stage + "_ms_per_img"] = ms
        out["augment_per_decode"] = st["augment_per_decode"]
        out["io_backend"] = st.get("io_backend_note") or st.get("io_backend_name")
        dl.close()
    print("RESULT " + json.dumps(out), flush=True)
    return 0


# ---- driver ----------------------------------------------------------------------------------

def library_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if not env.get("STOKER_LIBRARY"):
        lib = os.path.join(REPO, "build", "libstoker.so")
        if os.path.exists(lib):
            env["STOKER_LIBRARY"] = lib
    return env


def ensure_data(a):
    root = os.path.join(a.data, "imnet")
    if not os.path.isdir(root):
        os.makedirs(a.data, exist_ok=True)
        subprocess.run([a.make_data, "--count", str(a.count), "--classes", "10", "--jobs", "1",
                        root], check=True)
    return root


def run_one(py, recipe, loader, root, a, env):
    cmd = [py, os.path.abspath(__file__), "--child", "--recipe", recipe, "--loader", loader,
           "--root", root, "--workers", str(a.workers), "--batch", str(a.batch)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"recipe": recipe, "loader": loader, "python": py, "failed": tail}


def configs(a):
    """(label, interpreter, recipe) in the order they are interleaved."""
    out = [("t1.13", sys.executable, "tv"), ("t1.13", sys.executable, "tv-noaug"),
           ("t1.13", sys.executable, "tv-decode")]
    if a.timm_python and os.path.exists(a.timm_python):
        out.append(("t1.13+timm", a.timm_python, "timm"))
    if a.torch2_python and os.path.exists(a.torch2_python):
        out += [("t2", a.torch2_python, "tv"), ("t2", a.torch2_python, "tv-v2"),
                ("t2", a.torch2_python, "timm"), ("t2", a.torch2_python, "timm-deit"),
                ("t2", a.torch2_python, "timm-aa")]
    if a.only:
        keep = {"tv" if k == "reference" else k for k in a.only.split(",")}
        out = [c for c in out if "%s:%s" % (c[0], c[2]) in keep or c[2] in keep]
    return out


def med(rows, key):
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else None


def report(results, cfgs):
    print("\nmedians over repeats (images/s from creation to last batch; CPU ms/img incl. "
          "worker processes; stoker stages = stats() busy ms/img, decode without augment)")
    print("%-11s %-9s %-7s %9s %9s %9s %9s %9s %9s %8s %8s" % (
        "python", "recipe", "loader", "img/s", "steady/s", "cpu ms/im", "read ms", "dec ms",
        "aug ms", "aug/dec", "ratio"))
    summary = {}
    for label, _py, recipe in cfgs:
        row = {}
        for loader in ("stoker", "torch"):
            rs = results[(label, recipe, loader)]
            ok = [r for r in rs if "images_per_s" in r]
            if not ok:
                why = rs[0].get("refused") or rs[0].get("failed") if rs else "not run"
                kind = "refused" if rs and "refused" in rs[0] else "failed"
                print("%-11s %-9s %-7s %s: %s" % (label, recipe, loader, kind, why))
                row[loader] = {kind: why}
                continue
            m = {k: med(ok, k) for k in ("images_per_s", "steady_images_per_s", "cpu_ms_per_img",
                                          "read_ms_per_img", "decode_ms_per_img",
                                          "augment_ms_per_img", "augment_per_decode",
                                          "workers_busy_ms_per_img")}
            m["runs"] = [round(r["images_per_s"], 1) for r in ok]
            row[loader] = m
        s, t = row.get("stoker", {}), row.get("torch", {})
        ratio = (s["images_per_s"] / t["images_per_s"]
                 if "images_per_s" in s and "images_per_s" in t else None)
        row["ratio"] = ratio
        pairs = [x["images_per_s"] / y["images_per_s"]
                 for x, y in zip(results[(label, recipe, "stoker")],
                                 results[(label, recipe, "torch")])
                 if "images_per_s" in x and "images_per_s" in y]
        row["pair_ratios"] = pairs
        for loader in ("stoker", "torch"):
            m = row[loader]
            if "images_per_s" not in m:
                continue
            def f(v, digits=2):
                return "%9.*f" % (digits, v) if v is not None else "%9s" % "-"
            extra = ""
            if loader == "stoker" and pairs:
                extra = "  same-repeat ratios %s, median %.2fx" % (
                    ["%.2f" % x for x in pairs], statistics.median(pairs))
            share = m["augment_per_decode"]
            print("%-11s %-9s %-7s %9.1f %9.1f %s %s %s %s %9s %8s   runs %s%s" % (
                label, recipe, loader, m["images_per_s"], m["steady_images_per_s"],
                f(m["cpu_ms_per_img"]), f(m["read_ms_per_img"], 3), f(m["decode_ms_per_img"]),
                f(m["augment_ms_per_img"], 3),
                ("%.1f%%" % (100 * share)) if share is not None else "-",
                ("%.2fx" % ratio) if (ratio and loader == "stoker") else "", m["runs"], extra))
        summary["%s:%s" % (label, recipe)] = row
    for label, _py, recipe in cfgs:
        m = summary.get("%s:%s" % (label, recipe), {}).get("stoker", {})
        if m.get("augment_per_decode"):
            print("%s stoker %s augment stage (measured, stats()): read %.3f, decode %.2f, augment "
                  "%.2f ms/img; augment / decode = %.1f%% (target <= 25%%)" % (
                      label, recipe, m["read_ms_per_img"], m["decode_ms_per_img"],
                      m["augment_ms_per_img"], 100 * m["augment_per_decode"]))
    for label in sorted({c[0] for c in cfgs}):
        full = summary.get("%s:tv" % label, {}).get("stoker", {})
        noaug = summary.get("%s:tv-noaug" % label, {}).get("stoker", {})
        dec = summary.get("%s:tv-decode" % label, {}).get("stoker", {})
        for key, what in (("workers_busy_ms_per_img", "decode workers' busy"),
                          ("cpu_ms_per_img", "process CPU")):
            if not (full.get(key) and noaug.get(key)):
                continue
            aug = full[key] - noaug[key]
            line = ("%s stoker TrivialAugmentWide cost ESTIMATE, %s ms/img: tv %.2f - tv-noaug "
                    "%.2f = %.2f ms/img" % (label, what, full[key], noaug[key], aug))
            est = {"augment_ms": aug, "tv_ms": full[key], "tv_noaug_ms": noaug[key]}
            if dec.get(key):
                line += "; tv-decode %.2f ms/img: augment = %.0f%% of decode (target <= 25%%)" % (
                    dec[key], 100 * aug / dec[key])
                est.update(decode_ms=dec[key], share=aug / dec[key])
            print(line)
            summary["%s:augment_estimate:%s" % (label, key)] = est
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/tmp/stoker-recipes-data")
    ap.add_argument("--count", type=int, default=1500)
    ap.add_argument("--make-data", default="/work/shared/tools/make-imagenet-like")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--torch2-python", default="/work/venv-torch2/bin/python",
                    help="interpreter with torch 2.x (+ timm); '' to skip")
    ap.add_argument("--timm-python", default="/work/venv-timm/bin/python",
                    help="interpreter with torch 1.13 and timm; '' to skip")
    ap.add_argument("--only", default="", help="comma list of recipes or LABEL:recipe")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per child run")
    ap.add_argument("--json", default="", help="also write all runs and medians here")
    # the child's options
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--recipe", help=argparse.SUPPRESS)
    ap.add_argument("--loader", choices=["stoker", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)

    root = ensure_data(a)
    env = library_env()
    cfgs = configs(a)
    print("data %s; library %s; load %s" % (root, env.get("STOKER_LIBRARY", "(default search)"),
                                           " ".join("%.2f" % x for x in os.getloadavg())))
    results = {(c[0], c[2], l): [] for c in cfgs for l in ("stoker", "torch")}
    for rep in range(a.repeats):
        for label, py, recipe in cfgs:
            for loader in ("stoker", "torch"):
                if rep and results[(label, recipe, loader)] and \
                        "refused" in results[(label, recipe, loader)][0]:
                    continue            # a refusal does not change between repeats
                r = run_one(py, recipe, loader, root, a, env)
                results[(label, recipe, loader)].append(r)
                what = ("refused: " + r["refused"]) if "refused" in r else (
                    "FAILED: " + r["failed"]) if "failed" in r else (
                    "%.1f img/s, %.2f CPU ms/img" % (r["images_per_s"], r["cpu_ms_per_img"]))
                print("rep %d %-11s %-9s %-7s %s  (load %.2f)" % (
                    rep + 1, label, recipe, loader, what, os.getloadavg()[0]), flush=True)
    summary = report(results, cfgs)
    print("load at the end %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": {"|".join(k): v for k, v in results.items()},
                       "medians": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
