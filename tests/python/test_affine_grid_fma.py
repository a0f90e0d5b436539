# SPDX-License-Identifier: MIT
"""The geometric ops' affine grid as the torch at hand computes it (STK_AUG_TORCH_GRID_FMA,
stoker.augment._grid_fused): torchvision's _gen_affine_grid is a bmm of the N x 3 points by the
3 x 2 matrix, which Intel MKL's AVX-512 sgemm computes as fma(y, r1, x * r0) + r2 on some CPUs
and its AVX2 kernels (and torch without MKL) as (x * r0 + y * r1) + r2. MKL picks its kernels at
run time; MKL_CBWR makes it pick. Under each branch this machine can run, in a fresh process:
the binding's choice makes Rotate and ShearX equal to torchvision's tensor path byte for byte,
and the other choice does not (so the flag is what makes them equal). Without MKL (Debian's
torch 1.13) the one branch there is, in this process.

stk-test: pixels
"""
import json
import os
import subprocess
import sys

import pytest

from augops_ref import photo, reference, run_ops, tool_or_skip
from conftest import torch_or_skip

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [(op, mag, interp, None) for op, mags in (("Rotate", (-135.0, -30.0, 7.5, 29.0, 88.0)),
                                                  ("ShearX", (-0.3, 0.17, 0.29)))
         for mag in mags for interp in ("nearest", "bilinear")]

PROBE = r"""
import json, os, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
from stoker import _lib
from stoker.augment import torch_arithmetic
arith = torch_arithmetic(torch)
from augops_ref import photo, reference, run_ops
from test_affine_grid_fma import CASES
out = {"arith": arith, "differs": []}
img = photo(224, 224, 7)
want = [reference(img, *c) for c in CASES]
for flag in (0, _lib.AUG_TORCH_GRID_FMA):
    os.environ["STK_AUGOPS_TORCH"] = str((arith & ~_lib.AUG_TORCH_GRID_FMA) | flag)
    got = run_ops(Path(tempfile.mkdtemp()), img, CASES)
    out["differs"].append(sum(int((g != w).sum()) for g, w in zip(got, want)))
print(json.dumps(out))
"""


def probe(env):
    p = subprocess.run([sys.executable, "-c", PROBE, HERE], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def check(res):
    """The binding's choice equal, the other one not."""
    from stoker import _lib
    fused = bool(res["arith"] & _lib.AUG_TORCH_GRID_FMA)
    mine, other = (res["differs"][1], res["differs"][0]) if fused else res["differs"]
    assert mine == 0, res
    assert other > 0, res


def test_grid_as_this_process_computes_it():
    tool_or_skip()
    torch = torch_or_skip()
    env = dict(os.environ)
    env.pop("STK_AUGOPS_TORCH", None)
    res = probe(env)
    print("this process's torch %s: %s" % (torch.__version__, res))
    check(res)


@pytest.mark.parametrize("branch", ["AVX2", "AVX512"])
def test_grid_under_each_mkl_branch(branch):
    tool_or_skip()
    torch = torch_or_skip()
    if not torch.backends.mkl.is_available():
        pytest.skip("torch without MKL: one branch only (test_grid_as_this_process_computes_it)")
    from stoker.augment import _cpu_capability
    if branch == "AVX512" and _cpu_capability(torch) != "AVX512":
        pytest.skip("no AVX-512 on this CPU")
    env = dict(os.environ, MKL_CBWR=branch)
    env.pop("STK_AUGOPS_TORCH", None)
    res = probe(env)
    print("MKL_CBWR=%s: %s" % (branch, res))
    check(res)
