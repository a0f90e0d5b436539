# SPDX-License-Identifier: MIT
"""timm's create_dataset + create_loader (what timm's train.py builds) under `python -m stoker`:
timm's ImageDataset over a folder is read through (its own file order, natural sort, and labels),
so its loaders are stoker's: the eval loaders, with and without timm's prefetcher
(fast_collate + PrefetchLoader normalising on the CPU), give the batches torch's DataLoader
gives bit for bit, and say "accelerated fully"; the train loader (RandAugment, prefetcher
random erasing) is stoker's, its epochs each the dataset's labels; a class map that renumbers
the folders is not read through (it says why) and gives torch's batches.
Needs timm (the torch 2.x venv): skipped where it is not installed."""
import os
import subprocess
import sys

import pytest

from conftest import SUBPROCESS_ENV, make_imagefolder, torch_or_skip
from launch_util import check_levels, loader_lines

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "launch_timm_job.py")

torch = torch_or_skip()
pytest.importorskip("timm", reason="timm is not installed for this Python (it runs in the "
                    "torch 2.x venv: scripts/venv-torch2.sh)")


def _run(cmd):
    p = subprocess.run(cmd, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "JOB OK" in p.stdout, "rc %d\n%s\n%s" % (
        p.returncode, p.stdout[-3000:], p.stderr[-6000:])
    return p


def test_timm_create_loader_is_stokers(tmp_path):
    root = tmp_path / "data"
    make_imagefolder(str(root), per_class=(7, 6, 6), seed=3)
    # names whose natural order (timm's) is not their plain order (torchvision's)
    ant = root / "ant"
    for k, name in enumerate(sorted(os.listdir(ant))):
        os.rename(ant / name, ant / ("a%d.jpg" % (k * 5)))
    plain, launched = tmp_path / "plain.pt", tmp_path / "launched.pt"
    _run([sys.executable, JOB, str(root), str(plain)])
    p = _run([sys.executable, "-m", "stoker", JOB, str(root), str(launched)])
    check_levels(loader_lines(p.stderr), {
        1: ("launch_timm_job.py:23", "full", None),
        2: ("launch_timm_job.py:23", "full", None),
        3: ("launch_timm_job.py:27", "full", None),
        4: ("launch_timm_job.py:31", "not", "class indices")}, p.stderr)
    want = torch.load(plain, weights_only=False)
    got = torch.load(launched, weights_only=False)
    for name in ("eval", "eval_prefetch", "remapped"):
        for epoch_w, epoch_g in zip(want[name], got[name]):
            assert len(epoch_w) == len(epoch_g) == 5, name
            for (xw, yw), (xg, yg) in zip(epoch_w, epoch_g):
                assert xw.dtype == xg.dtype and torch.equal(xw, xg), name
                assert torch.equal(yw, yg), name
    labels = sorted(y for x, ys in want["eval"][0] for y in ys.tolist())
    for epoch in got["train_prefetch"]:
        assert len(epoch) == 4                                 # drop_last when training
        for x, y in epoch:
            assert x.dtype == torch.float32 and tuple(x.shape) == (4, 3, 32, 32)
        seen = sorted(y for x, ys in epoch for y in ys.tolist())
        assert len(seen) == 16 and all(seen.count(c) <= labels.count(c) for c in set(seen))
    assert not torch.equal(got["train_prefetch"][0][0][0], got["train_prefetch"][1][0][0])
