#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Train torchvision's ResNet-18 for a few steps, fed by PyTorch's DataLoader or by stoker's.

    /usr/bin/python3 examples/train.py --data /work/data/imagenet-like --loader stoker
    /usr/bin/python3 examples/train.py --data /work/data/imagenet-like --loader torch

The script is written for torch.utils.data.DataLoader; --loader stoker changes one line, the
import (`from stoker import DataLoader`): same ImageFolder, same transforms, same arguments.
--data is an ImageFolder root, or a copy packed with `stoker pack ROOT DST` (read through
stoker.ImageFolder, which torch's DataLoader can read too). Without --data a tiny ImageFolder is
generated in a temporary directory. Defaults are tiny so that it runs on a CPU in seconds
(--steps 5 --batch-size 16 --size 112); on a machine with a GPU the model and batches go to cuda.

Prints per step the time spent waiting for data and computing, then images/s and the fraction of
step time spent waiting for data (the first --warmup steps are left out of the summary).
"""

import argparse
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "bindings", "python"))

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def tiny_imagefolder(root, classes=4, per_class=12):
    """A few small JPEGs per class (PIL), for a run without --data."""
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    for c in range(classes):
        d = os.path.join(root, "class%d" % c)
        os.makedirs(d, exist_ok=True)
        for i in range(per_class):
            h, w = int(rng.integers(120, 200)), int(rng.integers(120, 200))
            img = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
            img[:, :, c % 3] = np.linspace(0, 255, w, dtype=np.uint8)[None, :]
            Image.fromarray(img).save(os.path.join(d, "%03d.jpg" % i), quality=90)
    return root


def make_loader(args, device):
    """The data pipeline of a torchvision training script; --loader picks the DataLoader."""
    if args.loader == "stoker":
        from stoker import DataLoader
    else:
        from torch.utils.data import DataLoader
    import torchvision.transforms as T
    tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    if any(f.endswith(".lmdb") for f in os.listdir(args.data)):   # a packed copy
        import stoker
        ds = stoker.ImageFolder(args.data, tf)
    else:
        ds = torchvision.datasets.ImageFolder(args.data, tf)
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, drop_last=True,
                        pin_memory=device.type == "cuda", persistent_workers=args.workers > 0)
    return loader, len(ds.classes) or args.classes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="ImageFolder root, or a stoker dataset for --loader stoker")
    ap.add_argument("--loader", choices=("stoker", "torch"), default="stoker")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="steps left out of the summary")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--workers", type=int, default=2,
                    help="num_workers: torch's worker processes; stoker's decode threads")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", type=int, default=1000, help="if the dataset names none")
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        ap.error("--steps must be larger than --warmup")

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(args.seed)

    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="stoker-train-")
        args.data = tiny_imagefolder(tmp.name)
        print("no --data: generated a tiny ImageFolder in %s" % args.data)

    loader, classes = make_loader(args, device)
    model = torchvision.models.resnet18(num_classes=classes).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    print("loader=%s device=%s batch=%d size=%d workers=%d steps=%d, %d batches per epoch"
          % (args.loader, device, args.batch_size, args.size, args.workers, args.steps,
             len(loader)))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    step, epoch = 0, 0
    waits, computes, images_done = [], [], []
    sync()
    t_prev = time.perf_counter()
    while step < args.steps:
        for images, labels in loader:
            t_data = time.perf_counter()
            images = images.to(device, non_blocking=True).contiguous(
                memory_format=torch.channels_last)
            labels = labels.to(device, non_blocking=True)
            out = model(images)
            loss = loss_fn(out, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sync()
            t_done = time.perf_counter()
            wait, compute = t_data - t_prev, t_done - t_data
            print("step %d: loss %.3f, waited %.3f s for data, computed %.3f s"
                  % (step, loss.item(), wait, compute), flush=True)
            if step >= args.warmup:
                waits.append(wait)
                computes.append(compute)
                images_done.append(images.shape[0])
            step += 1
            t_prev = time.perf_counter()
            if step >= args.steps:
                break
        epoch += 1

    total = sum(waits) + sum(computes)
    print("summary (%s, %d steps after %d warm-up): %.1f images/s, %.1f%% of step time "
          "waiting for data" % (args.loader, len(waits), args.warmup,
                                sum(images_done) / total, 100.0 * sum(waits) / total))
    if args.loader == "stoker":
        print(loader.stats())
        loader.close()
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
