#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The PyTorch baseline of bench/pipeline_vs_torch.sh: torchvision ImageFolder + DataLoader.

  /usr/bin/python3 bench/torch_dataloader.py ROOT [--mode train|eval] [--workers 2]
                                                   [--batch 256] [--epochs 3] [--threads 1]

train: RandomResizedCrop(224) + RandomHorizontalFlip() + PILToTensor(), shuffled;
eval:  Resize(256) + CenterCrop(224) + PILToTensor(), in order.
Images/s per epoch (the consumer only touches one byte per sample, like pipebench), images per
CPU-second (CPU time of the main process plus its reaped worker processes, os.times(): robust when
other processes share the cores; needs non-persistent workers, which are reaped each epoch), and the
memory of the whole DataLoader — the main process plus its worker processes — as the sum of
their PSS from /proc/PID/smaps_rollup, sampled every 0.2 s by a thread of the main process;
the peak of that sum is reported. The last line is machine-readable:
  RESULT mode=train workers=2 images_per_s=.. images_per_cpu_s=.. peak_pss_mib=.. pss_first_mib=..
         pss_last_mib=..
images_per_s is the median over epochs 2..E (epoch 1 includes starting the workers), or epoch 1
if E = 1. Workers are started per epoch (persistent_workers=False, the default); pass
--persistent to keep them.
"""
import argparse
import os
import statistics
import sys
import threading
import time

import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def tree_pss_kib(pid):
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += pss_kib(p)
        todo.extend(children(p))
    return total


class PssSampler(threading.Thread):
    def __init__(self, interval=0.2):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = 0
        self.last = 0
        self.stop = threading.Event()

    def run(self):
        me = os.getpid()
        while not self.stop.is_set():
            self.last = tree_pss_kib(me)
            self.peak = max(self.peak, self.last)
            self.stop.wait(self.interval)


def cpu_s():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--mode", choices=["train", "eval"], default="train")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in the main process")
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.mode == "train":
        tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                 transforms.PILToTensor()])
    else:
        tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
    dl = DataLoader(ds, batch_size=a.batch, shuffle=(a.mode == "train"), num_workers=a.workers,
                    persistent_workers=a.persistent and a.workers > 0)
    sampler = PssSampler()
    sampler.start()
    rates, cpu_rates, pss_first, checksum = [], [], 0, 0
    for e in range(a.epochs):
        t0, c0 = time.monotonic(), cpu_s()
        n = 0
        for images, labels in dl:
            b = images.shape[0]
            flat = images.view(b, -1)
            checksum += int(flat[torch.arange(b), (torch.arange(b) + e) % flat.shape[1]].sum())
            n += b
        del flat, images, labels
        dt, dc = time.monotonic() - t0, cpu_s() - c0
        rates.append(n / dt)
        cpu_rates.append(n / dc)
        pss = sampler.last / 1024
        if e == 0:
            pss_first = pss
        if not a.quiet:
            print(f"epoch {e + 1}: {n} images in {dt:.2f} s = {n / dt:.1f} images/s; {dc:.2f} CPU-s = "
                  f"{n / dc:.1f} images per CPU-second; "
                  f"PSS (main + workers) {pss:.1f} MiB, peak {sampler.peak / 1024:.1f} MiB", flush=True)
    sampler.stop.set()
    sampler.join()
    med = statistics.median(rates[1:] if len(rates) > 1 else rates)
    cmed = statistics.median(cpu_rates[1:] if len(cpu_rates) > 1 else cpu_rates)
    print(f"RESULT mode={a.mode} workers={a.workers} images_per_s={med:.1f} images_per_cpu_s={cmed:.1f} "
          f"peak_pss_mib={sampler.peak / 1024:.1f} "
          f"pss_first_mib={pss_first:.1f} pss_last_mib={sampler.last / 1024:.1f} checksum={checksum}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
