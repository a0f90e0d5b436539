# SPDX-License-Identifier: MIT
"""A job built the way timm's train.py builds its loaders (timm.data.create_dataset +
create_loader), unchanged, for test_launch_timm.py: run once plainly and once under
`python -m stoker`. Saves each loader's batches (torch.save) to OUT.
Usage: launch_timm_job.py ROOT OUT"""
import random
import sys

import torch
from timm.data import create_dataset, create_loader

root, out = sys.argv[1], sys.argv[2]
# timm's own RandAugment draws (the plain run; workers seeded from torch's generator): fixed, so
# that the run does not depend on a draw timm's posterize turns into 0 bits, which Pillow >= 11
# refuses ("bits must be between or equal to 1 and 8")
torch.manual_seed(0)
random.seed(0)
cpu = torch.device("cpu")
ds = create_dataset("", root=root, split="")
remapped = create_dataset("", root=root, split="", class_map={"cat": 0, "bee": 1, "ant": 2})
got = {}
for name, pre in (("eval", False), ("eval_prefetch", True)):
    loader = create_loader(ds, input_size=(3, 32, 32), batch_size=4, is_training=False,
                           use_prefetcher=pre, device=cpu, num_workers=1,
                           interpolation="bilinear", crop_pct=0.875)
    got[name] = [list(loader), list(loader)]
loader = create_loader(ds, input_size=(3, 32, 32), batch_size=4, is_training=True,
                       use_prefetcher=True, device=cpu, num_workers=1, re_prob=0.25,
                       auto_augment="rand-m9-mstd0.5-inc1")
got["train_prefetch"] = [list(loader), list(loader)]
loader = create_loader(remapped, input_size=(3, 32, 32), batch_size=4, is_training=False,
                       use_prefetcher=False, device=cpu, num_workers=0)
got["remapped"] = [list(loader)]
torch.save(got, out)
print("JOB OK")
