# SPDX-License-Identifier: MIT
"""Constructed training jobs for test_doctor_scenarios.py: each is bounded by one known stage.

    /usr/bin/python3 doctor_jobs.py MODE [--data DIR] [--workers N] [--out FILE]

MODE: decode, storage (ImageFolder of JPEGs, RandomResizedCrop, tiny model), checkpoint (a large
torch.save every few steps), compute (a long step, batches from memory), starved (4 DataLoader
workers, a ColorJitter before the crop; the test runs it on one core), sync (.item() on every sample of every step), crash
(raises after 3 steps), noloader (never iterates a loader), fail (exits 3 with a message before
any step), stokerdl (the decode job through stoker.DataLoader, --workers decode threads), tiny (a sub-millisecond step on an in-memory TensorDataset), slicing (a loop that
slices batches out of a tensor, no DataLoader), tinyloop (the same with a tiny MLP on --batch
samples), augment (~3 ms of CPU per sample in the Dataset,
--workers N), epochs (the same in epochs of 32 samples, its workers started anew at each),
augstep (the augment loader behind a ~0.1 s step: compute-bound on the CPU), pool (the
compute job on batches of 256, for --threads N), lightning (the checkpoint job saving as Lightning does: torch.save into a BytesIO,
then write + fsync), npsave (np.save and a pickled file every 5 steps), logging (a CSV line
per step, flushed and fsynced), sweep (the augment job's batches/s at each of --counts worker counts), traineval
(3 epochs of a training loader, each followed by a validation pass of another loader), launch (a
step well under a millisecond on pre-made batches: loading costs next to nothing; the stand-in for
a GPU job whose kernels are too short, test_doctor_nvml.sh). The job runs --steps steps or until
it is stopped (SIGINT -> KeyboardInterrupt) and then writes its own measurements to --out as JSON: the
reference the doctor's figures are checked against.
"""
import argparse
import io
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn


def image_loader(args, size=64):
    import torchvision
    import torchvision.transforms as T
    tf = [T.RandomResizedCrop(size), T.ToTensor()]
    if args.mode == "starved":
        # a strong augmentation on the full image first (~3-5 ms of CPU a sample, 4-5x the
        # crop's): the workers need far more CPU per batch than the main process's step (> 10x),
        # so on one core shared fairly by 4 workers and the main process the workers are the slow
        # side and stay runnable; with the crop alone (~1 ms a sample, a batch 4-5x the step)
        # the step kept up only just, and under torch 2.15 the workers sat idle behind a full
        # prefetch queue often enough to take their wait for the CPU below half the window
        tf.insert(0, T.ColorJitter(0.4, 0.4, 0.4, 0.1))
    tf = T.Compose(tf)
    ds = torchvision.datasets.ImageFolder(args.data, tf)
    return torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                       num_workers=args.workers, drop_last=True,
                                       persistent_workers=args.workers > 0)


def memory_loader(n, shape, batch):
    g = torch.Generator().manual_seed(0)
    x = torch.randn((n,) + shape, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch,
                                       shuffle=True, num_workers=0, drop_last=True)


class Augment(torch.utils.data.Dataset):
    """heavy per-sample CPU work (~3 ms: 40 small matmuls), as a strong augmentation pipeline is"""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        a = torch.randn(48, 48, generator=g)
        for _ in range(40):
            a = torch.tanh(a @ a * 0.1)
        return a[0, :32].clone(), i % 10


def compute_model():
    return nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.ReLU()) for _ in range(8)], nn.Linear(512, 10))


def compute_step_cpu_s():
    """CPU seconds (process time: what load on the machine does not stretch) of one step of the
    compute job, the median of 5 after one warm-up: a test sizes the job's step count with it
    (torch 1.13's step on this CPU took 7x torch 2.15's)"""
    torch.set_num_threads(1)
    model, x = compute_model(), torch.randn(32, 512)
    times = []
    for _ in range(6):
        t = time.process_time()
        model(x).sum().backward()
        times.append(time.process_time() - t)
    return sorted(times[1:])[2]


def augment_loader(workers, batch):
    return torch.utils.data.DataLoader(Augment(), batch_size=batch, shuffle=False, num_workers=workers,
                                       drop_last=True)


def sweep(args):
    """batches/s of the augment job at each worker count (--counts), in interleaved rounds; the
    best round of each count (other processes' load only ever lowers a rate)"""
    counts = [int(c) for c in args.counts.split(",")]
    model = nn.Linear(32, 10)
    rates = {c: [] for c in counts}
    for _ in range(args.rounds):
        for c in counts:
            it = iter(augment_loader(c, args.batch))
            for _ in range(2 * c + 2):          # the workers started and their first batches in
                next(it)
            t0 = time.monotonic()
            for _ in range(args.steps):
                x, y = next(it)
                model(x).sum().backward()
            rates[c].append(args.steps / (time.monotonic() - t0))
            del it
    with open(args.out, "w") as f:
        json.dump({"best": {c: max(r) for c, r in rates.items()}, "all": rates}, f)
    return 0


def traineval(args):
    """--steps training batches per epoch, then a validation pass of 4 batches, 3 epochs"""
    train = memory_loader(32 * args.steps, (128,), 32)
    val = memory_loader(32 * 4, (128,), 32)
    model = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    me = {"mode": "traineval", "steps": 0, "epochs": 0, "val_batches": 0}
    for _ in range(3):
        for x, y in train:
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.01)                   # a step long enough not to be "too small"
        me["epochs"] += 1
        with torch.no_grad():
            for x, y in val:
                model(x)
                me["val_batches"] += 1
    me["steps"] = args.steps
    if args.out:
        with open(args.out, "w") as f:
            json.dump(me, f)
    return 0


def slicing(args):
    """a training loop without a DataLoader: batches sliced out of an in-memory tensor (tinyloop:
    a tiny MLP on batches of --batch, the job a new user writes first)"""
    g = torch.Generator().manual_seed(0)
    d = 512 if args.mode == "slicing" else 32
    x, y = torch.randn(4096, d, generator=g), torch.randint(0, 10, (4096,), generator=g)
    if args.mode == "slicing":
        model = nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.ReLU()) for _ in range(4)],
                              nn.Linear(512, 10))
        bs = 32
    else:
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
        bs = args.batch
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    me = {"mode": "slicing", "steps": 0, "step_s": []}
    t_start = time.monotonic()
    try:
        while me["steps"] < args.steps:
            i = (me["steps"] * bs) % (4096 - bs)
            t0 = time.monotonic()
            loss = loss_fn(model(x[i:i + bs]), y[i:i + bs])
            opt.zero_grad()
            loss.backward()
            opt.step()
            me["step_s"].append(time.monotonic() - t0)
            me["steps"] += 1
    except KeyboardInterrupt:
        pass
    me["wall_s"] = time.monotonic() - t_start
    if args.out:
        with open(args.out, "w") as f:
            json.dump(me, f)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("--data")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: when stopped)")
    ap.add_argument("--out")
    ap.add_argument("--counts", default="1,2,3,4,8", help="sweep: the worker counts")
    ap.add_argument("--rounds", type=int, default=2, help="sweep: rounds over the counts")
    ap.add_argument("--threads", type=int, default=1, help="torch's intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    m = args.mode
    if m == "noloader":
        time.sleep(1.0)
        return 0
    if m == "fail":  # a job that dies before its first step, as one with a wrong path does
        print("doctor_jobs: constructed failure: no dataset at /nonexistent/data", file=sys.stderr)
        return 3
    if m in ("slicing", "tinyloop"):
        return slicing(args)
    if m == "sweep":
        return sweep(args)
    if m == "traineval":
        return traineval(args)
    if m in ("decode", "storage", "starved"):
        loader = image_loader(args)
        model = nn.Sequential(nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(3 * 64, 10))
    elif m == "stokerdl":  # the decode job through stoker.DataLoader (--workers: its decode threads)
        import stoker
        import torchvision
        import torchvision.transforms as T
        ds = torchvision.datasets.ImageFolder(args.data, T.Compose([T.RandomResizedCrop(64), T.ToTensor()]))
        loader = stoker.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                   drop_last=True)
        model = nn.Sequential(nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(3 * 64, 10))
    elif m in ("compute", "pool"):  # pool: batches large enough for --threads to split each operator
        loader = memory_loader(1024, (512,), 32 if m == "compute" else 256)
        model = compute_model()
    elif m == "epochs":  # short epochs (32 samples) of the augment Dataset, workers not persistent
        loader = torch.utils.data.DataLoader(torch.utils.data.Subset(Augment(), range(32)), batch_size=args.batch,
                                             num_workers=args.workers, drop_last=True)
        model = nn.Linear(32, 10)
    elif m == "augment":
        loader = augment_loader(args.workers, args.batch)
        model = nn.Linear(32, 10)
    elif m == "augstep":  # the augment loader behind a step that is longer than its batches' CPU
        loader = augment_loader(args.workers, args.batch)
        model = nn.Sequential(nn.Linear(32, 2048), nn.ReLU(),
                              *[nn.Sequential(nn.Linear(2048, 2048), nn.ReLU()) for _ in range(6)],
                              nn.Linear(2048, 10))
    elif m in ("npsave", "logging"):
        import numpy as np
        import pickle
        loader = memory_loader(512, (256,), 32)
        model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        arr = np.random.default_rng(0).standard_normal(4 * 1024 * 1024)      # 32 MB
        ckpt = os.path.join(tempfile.gettempdir(), "stoker-doctor-%s-%d" % (m, os.getpid()))
        if m == "logging":
            log = open(ckpt + ".csv", "w")
    elif m == "tiny":  # a step of a fraction of a millisecond: per-batch overheads are the job
        loader = memory_loader(4096, (32,), 16)
        model = nn.Linear(32, 10)
    elif m in ("checkpoint", "lightning"):
        loader = memory_loader(512, (256,), 32)
        model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        blob = {"weights": torch.randn(12 * 1024 * 1024)}   # 48 MB "optimizer state"
        ckpt = os.path.join(tempfile.gettempdir(), "stoker-doctor-ckpt-%d.%s" % (os.getpid(),
                            "pt" if m == "checkpoint" else "ckpt"))
    elif m in ("sync", "launch"):  # pre-made batches: loading costs next to nothing
        g = torch.Generator().manual_seed(0)
        n = 256 if m == "sync" else 64
        batches = [(torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g))
                   for _ in range(16)]
        loader = torch.utils.data.DataLoader(batches, batch_size=None, shuffle=True)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    else:  # crash
        loader = memory_loader(4096, (64,), 64)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    me = {"mode": m, "steps": 0, "wait_s": 0.0, "save_s": 0.0, "saves": 0, "log_s": 0.0, "item_calls": 0,
          "cpu_calls": 0, "step_s": []}
    t_start = time.monotonic()
    try:
        while not args.steps or me["steps"] < args.steps:
            it = iter(loader)
            while True:
                t0 = time.monotonic()
                try:
                    x, y = next(it)
                except StopIteration:
                    break
                t1 = time.monotonic()
                me["wait_s"] += t1 - t0
                if m == "lightning":
                    # the step's own CPU work (~10 ms, a sort: the same under torch 1.13 and 2.15,
                    # where a matmul is 7x apart): one save ends 5 such steps before the next
                    # starts, many pixels apart on the plot however a loaded machine stretches
                    # the run (0.6 ms steps put two saves within a pixel when the file was
                    # written quickly: the plot drew them as one shade)
                    torch.sort(torch.rand(1 << 17))
                out = model(x)
                loss = loss_fn(out, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                me["steps"] += 1
                if m == "sync":
                    total = 0.0
                    for v in out[:, 0]:            # the per-sample .item() anti-pattern
                        total += v.item()
                        me["item_calls"] += 1
                    out.detach().cpu()
                    me["cpu_calls"] += 1
                if m in ("checkpoint", "lightning") and me["steps"] % 5 == 0:
                    ts = time.monotonic()
                    try:
                        state = {"model": model.state_dict(), "blob": blob}
                        if m == "checkpoint":
                            torch.save(state, ckpt)
                        else:                      # as Lightning: serialise to memory, then write
                            buf = io.BytesIO()
                            torch.save(state, buf)
                            with open(ckpt, "wb") as f:
                                f.write(buf.getvalue())
                                f.flush()
                                os.fsync(f.fileno())
                    finally:                       # a save cut by the stop counts too
                        me["save_s"] += time.monotonic() - ts
                        me["saves"] += 1
                if m == "npsave" and me["steps"] % 5 == 0:
                    ts = time.monotonic()
                    np.save(ckpt + ".npy", arr)            # numpy's own save
                    with open(ckpt + ".pkl", "wb") as f:   # a pickled state
                        pickle.dump({"arr": arr}, f, protocol=4)
                    me["save_s"] += time.monotonic() - ts
                    me["saves"] += 2
                if m == "logging":                         # a metrics line per step, synced
                    ts = time.monotonic()
                    log.write("%d,%.6f\n" % (me["steps"], loss.item()))
                    log.flush()
                    os.fsync(log.fileno())
                    me["log_s"] += time.monotonic() - ts
                if m == "crash" and me["steps"] == 3:
                    raise RuntimeError("constructed crash after 3 steps")
                me["step_s"].append(time.monotonic() - t1)
                if args.steps and me["steps"] >= args.steps:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        me["wall_s"] = time.monotonic() - t_start
        if m in ("checkpoint", "lightning") and os.path.exists(ckpt):
            os.unlink(ckpt)
        if m in ("npsave", "logging"):
            for ext in (".npy", ".pkl", ".csv"):
                if os.path.exists(ckpt + ext):
                    os.unlink(ckpt + ext)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(me, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
