# SPDX-License-Identifier: MIT
"""The CPU the doctor's in-process hook adds per batch, on a real (tiny) training job: a
TensorDataset in memory, a torch DataLoader (num_workers=0), Linear(32, 10), SGD and loss.item()
each step (~0.3 ms of CPU a step). The job runs in a fresh interpreter, alternately plain and with
the hook loaded exactly as `stoker doctor` loads it (sitecustomize.py first on PYTHONPATH, events
to a file), without the doctor's sampler. Each run reports the CPU time of its own loop
(getrusage, user + system: a loaded machine stretches the wall clock, not this) divided by its
batches, and the median wall time of its steps and of its loss.item() calls (a median within a
run shrugs off the moments the machine's load takes the CPU away; run-to-run CPU totals do not);
over the runs, the medians and the fastest run of each (load only adds). Also the events file's
bytes per batch.

On a machine shared with other work the load moves from one run to the next by more than the
hook costs, so the same job also runs in one hooked process with the hook's per-step wrappers
(DataLoader's __next__, Tensor.item/.cpu/.numpy/.to/.cuda) switched off and on (the originals
they wrap put back, then the wrappers) every --chunk steps: each pair of adjacent chunks sees
about the same load, and the median of the pairs' differences of their median step is the hook's
cost per step, repeatable to a microsecond or two where the runs apart differ by tens.

    /usr/bin/python3 bench/doctor_hook_cost.py [--runs 7] [--batches 20000] [--chunk 128] [--hook FILE]
    (needs torch; --hook: another version of tools/stoker/doctor_hook.py, to compare)
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(HERE, os.pardir, "tools", "stoker", "doctor_hook.py")

# the model, data and loader both jobs time: a 0.3 ms step
SETUP = r"""ds = torch.utils.data.TensorDataset(torch.randn(4096, 32), torch.randint(0, 10, (4096,)))
dl = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True, num_workers=0)
model = torch.nn.Linear(32, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
lossf = torch.nn.CrossEntropyLoss()
pc = time.perf_counter_ns
"""

JOB = r"""
import resource, statistics, sys, time, torch
torch.set_num_threads(1)
n = int(sys.argv[1])
{setup}
steps, items = [], []

def run(k):
    done = 0
    while done < k:
        t = pc()
        for x, y in dl:
            opt.zero_grad()
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            a = pc()
            loss.item()
            b = pc()
            steps.append(b - t)
            items.append(b - a)
            t = b
            done += 1
            if done == k:
                break

run(300)                                   # warm-up: imports, first iterator, allocator
del steps[:], items[:]
r0 = resource.getrusage(resource.RUSAGE_SELF)
run(n)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / n * 1e6,
      statistics.median(steps) / 1e3, statistics.median(items) / 1e3)
""".replace("{setup}\n", SETUP)


# the same job in one hooked process, the hook's wrappers off and on in alternating chunks
JOB_AB = r"""
import statistics, sys, time, torch
import torch.utils.data.dataloader as dlm
torch.set_num_threads(1)
n, chunk = int(sys.argv[1]), int(sys.argv[2])


def unwrap(f):
    # the function a wrapper of the hook wraps: its closure's orig* variable
    while True:
        names = getattr(getattr(f, "__code__", None), "co_freevars", ())
        o = [i for i, v in enumerate(names) if v.startswith("orig")]
        if not o:
            return f
        f = f.__closure__[o[0]].cell_contents


T, It = torch.Tensor, dlm._BaseDataLoaderIter
on = [(T, k, T.__dict__[k]) for k in ("item", "cpu", "numpy", "to", "cuda")] + [(It, "__next__", It.__next__)]
off = [(c, k, unwrap(f)) for c, k, f in on]
assert all(a[2] is not b[2] for a, b in zip(on, off)), "the hook is not loaded"
{setup}
it = iter(dl)


def steps(k):
    global it
    out = []
    t = pc()
    for _ in range(k):
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(dl)
            x, y = next(it)
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        b = pc()
        out.append(b - t)
        t = b
    return out


steps(300)
walls, cpu, diffs = {0: [], 1: []}, {0: 0, 1: 0}, []
for r in range(max(n // chunk // 2, 1)):
    med = {}
    for h in ((0, 1) if r % 2 else (1, 0)):
        for c, k, f in (on if h else off):
            setattr(c, k, f)
        c0 = time.thread_time_ns()
        o = steps(chunk)
        cpu[h] += time.thread_time_ns() - c0
        walls[h] += o
        med[h] = statistics.median(o)
    diffs.append(med[1] - med[0])
k = len(walls[0])
print(statistics.median(walls[0]) / 1e3, statistics.median(walls[1]) / 1e3, statistics.median(diffs) / 1e3,
      cpu[0] / k / 1e3, cpu[1] / k / 1e3)
""".replace("{setup}\n", SETUP)


def one(batches, hookdir, events):
    env = dict(os.environ)
    env.pop("STOKER_DOCTOR_EVENTS", None)
    if hookdir:
        env["PYTHONPATH"] = hookdir + os.pathsep + env.get("PYTHONPATH", "")
        env["STOKER_DOCTOR_EVENTS"] = events
        open(events, "w").close()
    out = subprocess.run([sys.executable, "-c", JOB, str(batches)], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return [float(v) for v in out.split()[-3:]]


def ab(batches, chunk, hookdir, events):
    env = dict(os.environ)
    env["PYTHONPATH"] = hookdir + os.pathsep + env.get("PYTHONPATH", "")
    env["STOKER_DOCTOR_EVENTS"] = events
    open(events, "w").close()
    out = subprocess.run([sys.executable, "-c", JOB_AB, str(batches), str(chunk)], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return [float(v) for v in out.split()[-5:]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--batches", type=int, default=20000)
    ap.add_argument("--chunk", type=int, default=128, help="steps a chunk, in one process")
    ap.add_argument("--hook", default=HOOK, help="the hook to measure [tools/stoker/doctor_hook.py]")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stoker-hook-cost-")
    try:
        shutil.copy(a.hook, os.path.join(tmp, "sitecustomize.py"))
        events = os.path.join(tmp, "events")
        plain, hooked = [], []
        for _ in range(a.runs):            # alternate, so that the machine's load drifts evenly
            plain.append(one(a.batches, None, events))
            hooked.append(one(a.batches, tmp, events))
            ev_bytes = os.path.getsize(events)
        for k, what in ((0, "CPU per batch (getrusage)"), (1, "step wall, the run's median"),
                        (2, "loss.item() wall, the run's median")):
            pv, hv = [v[k] for v in plain], [v[k] for v in hooked]
            p, h = statistics.median(pv), statistics.median(hv)
            print("%-36s plain %s | hooked %s us" % (what, " ".join("%.1f" % v for v in pv),
                                                     " ".join("%.1f" % v for v in hv)))
            print("%-36s %+.1f us (medians), %+.1f us (fastest runs)" % ("", h - p, min(hv) - min(pv)))
        print("events: %.1f bytes per batch" % (ev_bytes / (a.batches + 300)))
        rows = [ab(a.batches, a.chunk, tmp, events) for _ in range(a.runs)]
        print("in one process, off/on every %d steps (%d steps a run, %d runs):" % (a.chunk, a.batches, a.runs))
        for k, what in ((0, "step wall, off"), (1, "step wall, on"), (2, "paired chunks: on - off"),
                        (3, "thread CPU per step, off"), (4, "thread CPU per step, on")):
            v = [r[k] for r in rows]
            print("  %-34s %s us, median %.1f" % (what, " ".join("%.1f" % x for x in v), statistics.median(v)))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
