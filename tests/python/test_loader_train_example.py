# SPDX-License-Identifier: MIT
"""examples/train.py really trains (ResNet-18, CPU, a few tiny steps) with either loader and
prints images/s and the fraction of step time spent waiting for data. Both runs share one
subprocess (importing torch and torchvision is most of the cost here)."""

import os
import re
import subprocess
import sys
import textwrap

from conftest import REPO, SUBPROCESS_ENV, torch_or_skip

EXAMPLES = os.path.join(REPO, "examples")

DRIVER = textwrap.dedent(r'''
    import sys
    sys.path.insert(0, sys.argv[1])
    import train
    common = ["--steps", "3", "--warmup", "1", "--batch-size", "4", "--size", "32",
              "--device", "cpu"]
    assert train.main(["--data", sys.argv[2], "--loader", "stoker", "--workers", "1"] + common) == 0
    assert train.main(["--data", sys.argv[3], "--loader", "torch", "--workers", "0"] + common) == 0
''')


def test_train_example_runs_with_both_loaders(imagefolder, shards):
    torch_or_skip()
    src, _ = imagefolder
    r = subprocess.run([sys.executable, "-c", DRIVER, EXAMPLES, shards[0], src],
                       env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    runs = r.stdout.split("loader=")[1:]
    assert [x.split()[0] for x in runs] == ["stoker", "torch"]
    for name, out in zip(("stoker", "torch"), runs):
        steps = re.findall(r"^step (\d+): loss ([0-9.]+), waited", out, re.M)
        assert [s for s, _ in steps] == ["0", "1", "2"], out
        assert all(float(loss) > 0 for _, loss in steps)
        m = re.search(r"summary \((\w+), 2 steps after 1 warm-up\): ([0-9.]+) images/s, "
                      r"([0-9.]+)% of step time waiting for data", out)
        assert m and m.group(1) == name, out
        assert float(m.group(2)) > 0 and 0 <= float(m.group(3)) <= 100
