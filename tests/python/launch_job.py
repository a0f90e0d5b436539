# SPDX-License-Identifier: MIT
"""A training script's data side, run by tests/python/test_launch.py under `python -m stoker`,
`stoker run -- python` and torchrun: nothing in it names stoker's DataLoader. It checks what it
gets from torch.utils.data.DataLoader and prints "JOB OK"; the test reads the launcher's lines.

    launch_job.py ROOT single CONTEXT    three loaders (stoker's, torch's with workers, a subclass)
    launch_job.py ROOT ddp               one loader with a DistributedSampler per rank (gloo)
"""
import os
import sys

import torch
import torch.utils.data as tud
from torch.utils.data import DataLoader          # after start-up, as scripts do
import torchvision.transforms as T
from torchvision.datasets import ImageFolder

EVAL = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()])


def ident(x):
    return x


def double(x):
    return x * 2


def check_worker(_):
    # a worker process (spawn: a new interpreter) has the launcher too
    import torch.utils.data as t
    assert getattr(t.DataLoader, "_stoker_torch_original", None) is not None, "no launcher here"


class Mine(DataLoader):
    """A user's subclass: torch's, untouched."""


def torch_loader():
    # torch's own class, by the back door a test may use (never the script's way)
    return tud.DataLoader._stoker_torch_original


def single(root, ctx):
    ds = ImageFolder(root, EVAL)
    a = DataLoader(ds, batch_size=4)
    assert isinstance(a, tud.DataLoader) and isinstance(a, torch_loader())
    ref = torch_loader()(ds, batch_size=4)
    for _ in range(2):                              # two passes, each equal to torch's
        got, want = list(a), list(ref)
        assert len(got) == len(want) == len(a), (len(got), len(want), len(a))
        for (x, y), (u, v) in zip(got, want):
            assert torch.equal(x, u) and torch.equal(y, v)
    assert a.stoker_loader is not None

    b = DataLoader(ImageFolder(root, T.Compose([T.Lambda(ident), EVAL])), batch_size=4,
                   num_workers=1 if ctx == "spawn" else 2, multiprocessing_context=ctx,
                   worker_init_fn=check_worker)
    got = [x for x, _ in b]
    assert sum(x.shape[0] for x in got) == len(ds)
    assert b.stoker_loader is None

    c = Mine(ds, batch_size=5)
    assert sum(x.shape[0] for x, _ in c) == len(ds)

    # a Python step after what stoker runs in C: torch's values either way
    dds = ImageFolder(root, T.Compose([EVAL, T.Lambda(double)]))
    d = DataLoader(dds, batch_size=4, num_workers=2)
    for (x, y), (u, v) in zip(d, torch_loader()(dds, batch_size=4)):
        assert torch.equal(x, u) and torch.equal(y, v)

    import inspect                  # torch's signature, for code that reads it
    assert inspect.signature(DataLoader.__init__) == inspect.signature(torch_loader().__init__)
    print("JOB OK", flush=True)


def ddp(root):
    import torch.distributed as dist
    dist.init_process_group("gloo")
    ds = ImageFolder(root, EVAL)
    s = tud.distributed.DistributedSampler(ds, shuffle=False)
    a = DataLoader(ds, batch_size=4, sampler=s)
    labels = torch.cat([y for _, y in a])
    want = torch.tensor([ds.targets[i] for i in s])
    assert torch.equal(labels, want), (labels, want)
    dist.barrier()
    dist.destroy_process_group()
    print("JOB OK rank %s" % os.environ.get("RANK"), flush=True)


if __name__ == "__main__":
    if sys.argv[2] == "single":
        single(sys.argv[1], sys.argv[3])
    else:
        ddp(sys.argv[1])
