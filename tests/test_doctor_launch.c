/* SPDX-License-Identifier: MIT */
/*
 * test_doctor_launch.c — stoker doctor's launch-bound rule (tools/stoker/doctor_verdict.c, linked
 * in) on figures as the sampler and the hook record them: a GPU job's batches and the NVML
 * utilisation and memory of its ticks, built here because no GPU runs these tests. A GPU busy
 * 25% of the time with steps of 1 ms and a loader that keeps up is "too small for the GPU
 * (launch-bound)", with the batch that would fill it (within its memory), merged steps and CUDA
 * graphs as the next step and no worker advice; each condition taken away on its own (the GPU busy
 * 55%, steps of 2.5 ms, a loader that waits 40% of the time, no NVML) gives another verdict.
 */
#include "doctor/recorded.h"

#include <stdio.h>

#define GIB 1073741824.0

typedef struct fig {
    double util;      /* GPU busy, % (every tick) */
    double mem_gib;   /* GPU memory in use, GiB (of 80) */
    double step_ms;   /* from one batch handed over to the next */
    double wait_ms;   /* of which waiting for the loader */
    int nvml;         /* NVML loaded */
} fig;

static int failures;

/* 2000 steps of batch 64 on 8 cores; ticks with the main thread on a CPU 90% of the time */
static void expect(const char *what, fig f, const char *want, const char *not_want)
{
    static dr_step steps[2000];
    static dr_tick ticks[400];
    dr_iter it;
    dr_run r;
    rec_job(&r, &it, 0, 64, 8);
    r.gpu_ctx = 1;
    r.nvml = f.nvml;
    r.ngpu = f.nvml ? 1 : 0;
    snprintf(r.gpus[0].name, sizeof r.gpus[0].name, "Recorded GPU");
    r.gpus[0].mem_total = 80 * GIB;
    rec_steps(&r, steps, 2000, (int64_t)(f.step_ms * 1e6), (int64_t)(f.wait_ms * 1e6));
    dr_tick t = {.cpu[DR_MAIN] = 0.9, .nthreads[DR_MAIN] = 1, .main_state = 'R', .mem_avail = 32 * GIB};
    t.gpu_util[0] = (float)f.util;
    t.gpu_mem[0] = f.mem_gib * GIB;
    rec_ticks(&r, ticks, sizeof ticks / sizeof *ticks, &t);
    const char *w[] = {want, NULL};
    rec_expect(&r, what, w, not_want, &failures);
}

int main(void)
{
    const fig base = {.util = 25, .mem_gib = 2, .step_ms = 1.0, .wait_ms = 0.02, .nvml = 1};
    fig f;

    expect("launch-bound", base,
           "verdict: too small for the GPU (launch-bound): GPU busy 25% of the time while a step takes 1.00 ms "
           "(median between batches, of which 0.02 ms waiting for data): about 0.25 ms of GPU work a step; "
           "the main thread on a CPU 90% of the time",
           "workers 0 ->");
    /* 64 * 90 / 25 = 230 -> 256; 2 of 80 GiB allows 64 * 0.8 * 40 */
    expect("launch-bound: next", base,
           "next: batch 64 -> 256 (scale the learning rate with it; 2.0 of 80.0 GiB in use), merge several "
           "steps' work into one (fewer, larger kernels), or launch the step as a CUDA graph "
           "(torch.compile(mode=\"reduce-overhead\"), torch.cuda.CUDAGraph); not more loader workers: the "
           "loader keeps up (waiting 2% of the time)", NULL);
    f = base;
    f.util = 49;
    expect("busy 49%: still launch-bound, at least twice the batch", f, "next: batch 64 -> 128 (", NULL);
    f = base;
    f.util = 10;
    f.mem_gib = 30; /* 64 * 90 / 10 = 576 -> 1024; the memory: 64 * 0.8 * 80 / 30 = 136 -> 128 */
    expect("memory caps the batch", f, "next: batch 64 -> 128 (scale the learning rate with it; 30.0 of 80.0", NULL);
    f.mem_gib = 60; /* 64 * 0.8 * 80 / 60 = 68: no power of two above 64 fits */
    expect("no larger batch fits", f,
           "next: launch the step as a CUDA graph (torch.compile(mode=\"reduce-overhead\"), "
           "torch.cuda.CUDAGraph): a larger batch does not fit (60.0 of 80.0 GiB in use at batch 64)",
           "batch 64 ->");

    f = base;
    f.util = 55;
    expect("busy 55%: not launch-bound", f, "verdict: ", "launch-bound");
    f = base;
    f.step_ms = 2.5;
    expect("steps of 2.5 ms: too small for the GPU, not launch-bound", f,
           "verdict: too small for the GPU: GPU busy 25% of the time, 2.0 of 80.0 GiB in use", "launch-bound");
    f = base;
    f.wait_ms = 0.4;
    expect("the loader waits 40%: not launch-bound", f, "verdict: ", "launch-bound");
    f = base;
    f.nvml = 0;
    expect("no NVML: not launch-bound", f, "verdict: ", "launch-bound");

    if (failures)
        printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
