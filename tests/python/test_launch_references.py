# SPDX-License-Identifier: MIT
"""The reference training scripts, unmodified, under `python -m stoker`: torchvision's
references/classification/train.py (v1 and --use-v2) with the ResNet-50 v2 recipe's data flags,
timm's train.py through create_loader with RandAugment, RandomErasing and Mixup, and a Lightning
DataModule (launch_lightning_job.py). Each runs on CPU (resnet18 or a linear model, 32x32 crops,
40 training and 20 validation images, so a few steps) and must complete; the launcher must report
each loader once, at the level EXPECTED below says.

The scripts are not in this repository (their code stays upstream): tests/upstream/README.md
names the commits and where to put them; without them these tests skip and say so.

EXPECTED holds what each loader gets on this branch; tighten it when stoker runs more of a
recipe (a level is "full", "partly" or "not"; the reason's substring may be None).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, SUBPROCESS_ENV, jpeg_bytes, torch_or_skip
from launch_util import check_levels, loader_lines, restarts

UPSTREAM = os.environ.get("STOKER_UPSTREAM_DIR") or os.path.join(REPO, "tests", "upstream")
TV_TRAIN = os.path.join(UPSTREAM, "torchvision", "train.py")
TIMM_TRAIN = os.path.join(UPSTREAM, "timm", "train.py")

# {loader number in order of first pass: (the line that builds it, level, part of the reason)}
# torchvision's loaders, v1 and v2, are "full" (the preset read through, the closure's mix run
# in C); timm's are stoker's too (its ImageDataset read through, stoker._timm).
EXPECTED = {
    "torchvision-v1": {
        # the closure collate_fn(batch): mixup_cutmix(*default_collate(batch)); the preset
        # object ClassificationPresetTrain holding the Compose comes after it
        1: ("train.py:235", "full", None),
        2: ("train.py:243", "full", None),
    },
    "torchvision-v2": {
        1: ("train.py:235", "full", None),
        2: ("train.py:243", "full", None),
    },
    "lightning": {
        1: ("launch_lightning_job.py:27", "full", None),     # train_dataloader
        2: ("launch_lightning_job.py:30", "full", None),     # val_dataloader
    },
    "timm": {
        # timm's ImageDataset read through; the train loader's collate_fn is the
        # prefetcher's FastCollateMixup (mixes uint8 images: run in Python), the eval
        # loader's fast_collate (default_collate on uint8 tensors)
        1: ("train.py:805", "partly", "FastCollateMixup"),
        2: ("train.py:879", "full", None),
    },
}

# loaders whose later pass stoker could not start, so that torch's DataLoader ran them from then
# on: none (Lightning keeps the exhausted iterator of a pass alive while it asks for the next
# one; a new pass ends the old one)
RESTARTS = {"lightning": []}

CLASSES = 5            # torchvision's train.py reports top-5 accuracy: at least 5 classes


@pytest.fixture(scope="module")
def tiny_imagenet(tmp_path_factory):
    """ROOT/{train,val}/CLASS/*.jpg: 8 training and 4 validation JPEGs a class, 40..90 px."""
    root = tmp_path_factory.mktemp("tiny-imagenet")
    rng = np.random.default_rng(26)
    for split, n in (("train", 8), ("val", 4)):
        for c in range(CLASSES):
            d = root / split / ("n%08d" % c)
            d.mkdir(parents=True)
            for i in range(n):
                w, h = (int(x) for x in rng.integers(40, 90, size=2))
                (d / ("%d.jpg" % i)).write_bytes(jpeg_bytes(rng, w, h))
    return str(root)


def _run(script, args, tmp_path, upstream=True):
    if upstream and not os.path.exists(script):
        pytest.skip("%s is not here: fetch it as tests/upstream/README.md says" % script)
    env = dict(SUBPROCESS_ENV, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID"):
        env.pop(k, None)                 # the scripts go distributed when they see these
    p = subprocess.run([sys.executable, "-m", "stoker", script] + args, cwd=str(tmp_path),
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "rc %d\n%s\n%s" % (p.returncode, p.stdout[-4000:], p.stderr[-6000:])
    return p


@pytest.mark.parametrize("variant", ["v1", "v2"])
def test_torchvision_reference_train(variant, tiny_imagenet, tmp_path):
    torch_or_skip()
    tv = pytest.importorskip("torchvision")
    if variant == "v2":
        try:
            from torchvision.transforms import v2
            v2.MixUp  # noqa: B018 — torchvision >= 0.16
        except (ImportError, AttributeError):
            pytest.skip("--use-v2 needs torchvision.transforms.v2.MixUp (torchvision >= 0.16; "
                        "this is %s)" % tv.__version__)
    out = tmp_path / "out"
    args = ["--data-path", tiny_imagenet, "--model", "resnet18", "--device", "cpu", "-b", "8",
            "--epochs", "1", "-j", "2", "--train-crop-size", "32", "--val-resize-size", "36",
            "--val-crop-size", "32", "--print-freq", "1", "--output-dir", str(out),
            "--auto-augment", "ta_wide", "--random-erase", "0.1", "--mixup-alpha", "0.2",
            "--cutmix-alpha", "1.0", "--ra-sampler"]
    if variant == "v2":
        args.append("--use-v2")
    p = _run(TV_TRAIN, args, tmp_path)
    assert "Training time" in p.stdout, p.stdout[-3000:]
    assert (out / "checkpoint.pth").exists()
    check_levels(loader_lines(p.stderr), EXPECTED["torchvision-" + variant], p.stderr)


def test_timm_train_create_loader(tiny_imagenet, tmp_path):
    torch_or_skip()
    pytest.importorskip("torchvision")
    timm = pytest.importorskip("timm", reason="timm is not installed for this Python")
    if not hasattr(__import__("timm.data", fromlist=["x"]), "create_naflex_loader"):
        pytest.skip("timm's train.py (2026) needs timm >= 1.0.31 (this is %s)" % timm.__version__)
    out = tmp_path / "out"
    args = ["--data-dir", tiny_imagenet, "--train-split", "train", "--val-split", "val",
            "--model", "resnet18", "--num-classes", str(CLASSES), "--device", "cpu", "-b", "8",
            "--epochs", "1", "-j", "2", "--img-size", "32", "--log-interval", "1",
            "--output", str(out), "--aa", "rand-m9-mstd0.5-inc1", "--reprob", "0.25",
            "--mixup", "0.8"]
    p = _run(TIMM_TRAIN, args, tmp_path)
    assert "*** Best metric" in p.stdout + p.stderr, (p.stdout + p.stderr)[-3000:]
    check_levels(loader_lines(p.stderr), EXPECTED["timm"], p.stderr)


def test_lightning_datamodule(tiny_imagenet, tmp_path):
    torch_or_skip()
    pytest.importorskip("torchvision")
    pytest.importorskip("lightning", reason="Lightning is not installed for this Python")
    job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_lightning_job.py")
    p = _run(job, [tiny_imagenet], tmp_path, upstream=False)
    seen = [ln for ln in p.stdout.splitlines() if ln.startswith("BATCHES ")]
    assert seen, p.stdout[-3000:]
    import json
    # 40 training images in batches of 8, 20 validation images: every epoch whole
    assert json.loads(seen[-1][8:]) == {"train": [5, 5], "val": [3, 3]}, seen
    check_levels(loader_lines(p.stderr), EXPECTED["lightning"], p.stderr)
    assert restarts(p.stderr) == RESTARTS.get("lightning", []), p.stderr
