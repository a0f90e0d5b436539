#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""(c) of bench/device/check.sh: stoker vs PyTorch's DataLoader, images/s into the GPU, with all
CPU cores, on the same ImageFolder (and stoker also on the same images packed into shards).

    throughput.py --folder ROOT [--shards DIR] [--batch 256] [--workers N] [--epochs 3]
                  [--rounds 3] [--device cuda|cpu]

Both produce what a ResNet trainer consumes: RandomResizedCrop(224) + horizontal flip, float16
NCHW normalised with ImageNet's mean/std, on the device.
  DataLoader: torchvision ImageFolder (Pillow decode), PILToTensor, num_workers = N,
              pin_memory, then .to(device, non_blocking=True) and the float conversion on the GPU.
  stoker:     stoker.Loader(..., device=device, dtype=float16, mean, std, workers=N): conversion
              on the GPU by the stager.
In each of ROUNDS rounds every loader runs alone: created, one warm-up epoch, EPOCHS timed epochs
back to back, closed. The figure is the median over the rounds. Prints RESULT lines. --device cpu runs the same on the CPU
(a smoke test where there is no GPU).
"""
import argparse
import os
import statistics
import sys
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def run_torch(torch, dl, device, mean, std, epochs):
    n = 0
    for x, _ in dl:  # warm-up epoch: workers started, files cached
        pass
    t0 = time.perf_counter()
    for _ in range(epochs):
        for x, _ in dl:
            x = x.to(device, non_blocking=True).float().div_(255).sub_(mean).div_(std).half()
            n += x.shape[0]
    if device.type == "cuda":
        torch.cuda.synchronize()
    return n / (time.perf_counter() - t0), n // epochs


def run_stoker(torch, loader, device, epochs):
    n = 0
    for x, _ in loader:  # warm-up epoch
        pass
    t0 = time.perf_counter()
    for _ in range(epochs):
        for x, _ in loader:
            n += x.shape[0]
    if device.type == "cuda":
        torch.cuda.synchronize()
    return n / (time.perf_counter() - t0), n // epochs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folder", required=True)
    ap.add_argument("--shards")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    try:
        import torch
        import torchvision
        from torchvision import transforms
    except ImportError as e:
        print("throughput: %s: nothing measured" % e)
        return 77
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("throughput: no GPU (torch.cuda.is_available() is False): nothing measured")
        return 77
    import stoker

    device = torch.device(a.device)
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(a.folder, transform=tf)
    sources = [("stoker_files", a.folder)]
    if a.shards:
        sources.append(("stoker_shards", a.shards))
    rates = {name: [] for name in ["dataloader"] + [n for n, _ in sources]}
    count = {}
    # Rounds; in each, every loader runs alone (created, one warm-up epoch, EPOCHS timed epochs
    # back to back, closed), so none competes with another for the CPU or gets ahead by
    # prefetching while another is timed.
    for r in range(a.rounds):
        dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers,
                                         pin_memory=device.type == "cuda",
                                         persistent_workers=True)
        rate, count["dataloader"] = run_torch(torch, dl, device, mean, std, a.epochs)
        rates["dataloader"].append(rate)
        del dl
        for name, path in sources:
            with stoker.Loader(path, a.batch, train=True, size=224, workers=a.workers,
                               device=a.device, dtype="float16", mean=MEAN, std=STD) as loader:
                rate, count[name] = run_stoker(torch, loader, device, a.epochs)
            rates[name].append(rate)
        print("round %d: %s" % (r, ", ".join("%s %.0f img/s" % (k, v[-1]) for k, v in rates.items())),
              flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print("device %s, %d workers, batch %d, %d images per epoch (%s); medians of %d rounds of "
          "%d epochs after a warm-up epoch"
          % (torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu", a.workers, a.batch,
             count["dataloader"], a.folder, a.rounds, a.epochs))
    for k, v in med.items():
        print("%-14s %8.0f images/s  (%.2fx DataLoader)" % (k, v, v / med["dataloader"]))
    print("RESULT throughput %s" % " ".join("%s_images_per_s=%.1f" % (k, v) for k, v in med.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
