# SPDX-License-Identifier: MIT
"""The CPU the doctor's in-process hook adds per training step, measured in one process so that
the load of a shared machine cancels out: each wrapper the hook installs (batch __next__, .item())
is rebuilt around a trivial function and timed against that function alone, in interleaved blocks;
medians of the blocks.

    /usr/bin/python3 bench/doctor_hook_cost.py            (needs torch)
"""
import os
import statistics
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(HERE, os.pardir, "tools", "stoker", "doctor_hook.py")


def rewrap(wrapper, inner):
    """wrapper's code with its captured `orig` replaced by inner"""
    names = wrapper.__code__.co_freevars
    cells = tuple(types.CellType(inner) if n == "orig" else c
                  for n, c in zip(names, wrapper.__closure__))
    return types.FunctionType(wrapper.__code__, wrapper.__globals__, "w", None, cells)


def per_call_ns(fn, arg, n=2000, blocks=41):
    out = []
    for _ in range(blocks):
        t = time.perf_counter_ns()
        for _ in range(n):
            fn(arg)
        out.append((time.perf_counter_ns() - t) / n)
    return out


def main():
    fd, ev = tempfile.mkstemp(prefix="stoker-hook-cost-")
    os.close(fd)
    os.environ["STOKER_DOCTOR_EVENTS"] = ev
    src = open(HOOK).read()
    exec(compile(src, HOOK, "exec"), {"__name__": "stk_doctor_hook", "__file__": HOOK})
    import torch
    import torch.utils.data.dataloader as D
    torch.set_num_threads(1)
    batch = (torch.zeros(32, 3, 8, 8), torch.zeros(32, dtype=torch.int64))

    def plain_next(self):
        return batch
    hooked_next = rewrap(D._BaseDataLoaderIter.__next__, plain_next)
    t = torch.zeros(())
    plain_item = torch._C._TensorBase.item
    hooked_item = rewrap(torch.Tensor.item, plain_item)

    res = {}
    for name, a, b, arg in (("batch __next__", plain_next, hooked_next, None),
                            (".item()", plain_item, hooked_item, t)):
        pa, pb = [], []
        for _ in range(3):   # interleave
            pa += per_call_ns(a, arg)
            pb += per_call_ns(b, arg)
        res[name] = statistics.median(pb) - statistics.median(pa)
        print("%-15s plain %7.0f ns, hooked %7.0f ns: +%.2f us per call (medians of %d blocks)"
              % (name, statistics.median(pa), statistics.median(pb), res[name] / 1e3, len(pa)))
    os.unlink(ev)
    per_step = res["batch __next__"] + res[".item()"]
    print("hook per step with one .item(): %.1f us = %.3f%% of a 10 ms step, %.4f%% of a 100 ms step"
          % (per_step / 1e3, 100 * per_step / 1e7, 100 * per_step / 1e8))


if __name__ == "__main__":
    sys.exit(main())
