#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""(b) of bench/device/check.sh, the baseline: the same synthetic trainer as idle_gap.c, fed by a
per-batch ``torch.Tensor.cuda()`` instead of stoker's stager.

    torch_idle.py --step-ns N [--batch 256] [--side 224] [--steps 120]

The host batches are ready-made uint8 NHWC tensors in ordinary (pageable) memory, cycled: the
best case for the baseline, since no decoding competes with the copy. Each step copies the batch
with ``.cuda()``, converts it to float16 NCHW normalised on the GPU (what stoker's stager does),
then runs a GPU kernel of fixed length (``torch.cuda._sleep``, calibrated to N ns). The GPU's idle
time is measured with CUDA events around each step kernel: the sum of the gaps between one step's
end and the next one's start, as a fraction of the span from the first start to the last end.
Variant "pin": ``.pin_memory().cuda(non_blocking=True)`` per batch.
Prints RESULT lines. Exit 77 without a GPU.
"""
import argparse
import sys
import time


def calibrate_sleep(torch, ns):
    """Cycles for torch.cuda._sleep that take about NS nanoseconds."""
    cycles = 1_000_000
    for _ in range(4):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(cycles)
        b.record()
        b.synchronize()
        took_ns = a.elapsed_time(b) * 1e6
        cycles = max(1000, int(cycles * ns / max(took_ns, 1.0)))
    return cycles


def run(torch, host, steps, cycles, mean, std, pin):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        x = host[i % len(host)]
        if pin:
            x = x.pin_memory().cuda(non_blocking=True)
        else:
            x = x.cuda()
        y = x.permute(0, 3, 1, 2).float().sub_(mean).div_(std).half()
        starts[i].record()
        torch.cuda._sleep(cycles)  # the step; it would read y
        ends[i].record()
        del y
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    gaps = [ends[i].elapsed_time(starts[i + 1]) for i in range(steps - 1)]
    span = starts[0].elapsed_time(ends[-1])
    steps_ms = sum(starts[i].elapsed_time(ends[i]) for i in range(steps))
    idle = sum(max(g, 0.0) for g in gaps)
    gaps.sort()
    return {"wall_s": wall, "span_ms": span, "steps_ms": steps_ms, "idle_fraction": idle / span,
            "median_gap_us": 1e3 * gaps[len(gaps) // 2], "max_gap_us": 1e3 * gaps[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--step-ns", type=int, required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--side", type=int, default=224)
    ap.add_argument("--steps", type=int, default=120)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_idle: no torch: nothing measured")
        return 77
    if not torch.cuda.is_available():
        print("torch_idle: no GPU (torch.cuda.is_available() is False): nothing measured")
        return 77
    g = torch.Generator().manual_seed(0)
    host = [torch.randint(0, 256, (a.batch, a.side, a.side, 3), dtype=torch.uint8, generator=g)
            for _ in range(4)]
    mean = torch.tensor([123.675, 116.28, 103.53], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375], device="cuda").view(1, 3, 1, 1)
    cycles = calibrate_sleep(torch, a.step_ns)
    run(torch, host, 5, cycles, mean, std, False)  # warm-up
    print("device %s; batch %d x %d x %d x 3 uint8 (%.1f MB) per step; step %.2f ms"
          % (torch.cuda.get_device_name(0), a.batch, a.side, a.side,
             a.batch * a.side * a.side * 3 / 1e6, a.step_ns / 1e6))
    for name, pin in (("cuda", False), ("pin_cuda", True)):
        r = run(torch, host, a.steps, cycles, mean, std, pin)
        print("torch %-9s %d steps: wall %.3f s, GPU idle between steps %.3f%% "
              "(median gap %.1f us, max %.1f us)"
              % (name, a.steps, r["wall_s"], 100 * r["idle_fraction"], r["median_gap_us"],
                 r["max_gap_us"]))
        print("RESULT idle_torch_%s idle_fraction=%.6f median_gap_us=%.1f step_ms=%.3f"
              % (name, r["idle_fraction"], r["median_gap_us"], r["steps_ms"] / a.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
