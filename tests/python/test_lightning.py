# SPDX-License-Identifier: MIT
"""stoker.DataLoader under real Lightning 2.x on CPU (tests/python/lightning_job.py, run as a
script so that strategy="ddp" launches its second rank as Lightning does): single device, 2
epochs → every epoch the full batch count, train and val, and with limit_train_batches /
limit_val_batches (passes abandoned mid-way) each epoch that many batches, a new order each; DDP over 2 processes (gloo) →
Lightning's injected DistributedSampler gives disjoint shares whose union is the dataset, equal
counts, epoch 1 runs, and validation is sharded exactly as with torch's own DataLoader; a
checkpoint saved mid-epoch resumes with exactly the rest of that epoch. Needs Lightning (the
torch 2.x venv): skipped under Debian's torch 1.13."""

import json
import os
import subprocess
import sys

import pytest

from conftest import SUBPROCESS_ENV, make_imagefolder, torch_or_skip

torch_or_skip()
pytest.importorskip("lightning", reason="Lightning is not installed for this Python (it runs "
                    "in the torch 2.x venv: scripts/venv-torch2.sh)")
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lightning_job.py")
N = 18   # samples; batch 4: 5 batches on one device, 3 per rank on two


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = tmp_path_factory.mktemp("lightning") / "data"
    make_imagefolder(str(r), per_class=(7, 6, 5), seed=11)
    return str(r)


def _run(root, out, kind, devices, epochs, extra=None):
    os.makedirs(out, exist_ok=True)
    cmd = [sys.executable, JOB, root, str(out), kind, str(devices), str(epochs)]
    if extra:
        cmd.append(extra)
    env = dict(SUBPROCESS_ENV, PL_DISABLE_FORK="1")
    p = subprocess.run(cmd, cwd=str(out), env=env, capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    return [json.load(open(os.path.join(out, "rank%d.json" % r))) for r in range(devices)]


def test_single_device_two_epochs(root, tmp_path):
    (r,) = _run(root, tmp_path / "one", "stoker", 1, 2)
    assert r["train_batches"] == 5 and r["val_batches"] == [5]
    for split in ("train", "val"):
        for e in ("0", "1"):
            seen = r["seen"][split][e]
            assert len(seen) == N and len(set(seen)) == N, (split, e)


def test_ddp_two_processes(root, tmp_path):
    ours = _run(root, tmp_path / "ddp_stoker", "stoker", 2, 2)
    ref = _run(root, tmp_path / "ddp_torch", "torch", 2, 2)
    for split in ("train", "val"):
        for e in ("0", "1"):
            a, b = (ours[k]["seen"][split][e] for k in (0, 1))
            assert len(a) == len(b) == N // 2, (split, e)
            assert not set(a) & set(b) and len(set(a) | set(b)) == N, (split, e)
    for k in (0, 1):   # validation: exactly the shares (and order) of torch's DataLoader
        assert ours[k]["seen"]["val"] == ref[k]["seen"]["val"]
        assert ours[k]["train_batches"] == ref[k]["train_batches"] == 3


def test_resume_mid_epoch(root, tmp_path):
    (full,) = _run(root, tmp_path / "r1", "stoker", 1, 2, "2")   # saves after batch 2, epoch 1
    (rest,) = _run(root, tmp_path / "r2", "stoker", 1, 2,
                   "resume:" + str(tmp_path / "r1" / "mid.ckpt"))
    assert list(rest["seen"]["train"]) == ["1"]
    assert rest["seen"]["train"]["1"] == full["seen"]["train"]["1"][12:]


def test_limit_batches(root, tmp_path):
    (r,) = _run(root, tmp_path / "limit", "stoker", 1, 2, "limit")
    tr, va = r["seen"]["train"], r["seen"]["val"]
    assert len(tr["0"]) == len(tr["1"]) == 12 and tr["0"] != tr["1"]
    assert len(va["0"]) == len(va["1"]) == 8 and va["0"] == va["1"]
