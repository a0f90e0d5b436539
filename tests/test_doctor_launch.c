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
#include "doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0
#define T0 1000000000LL /* the job's start, ns */

typedef struct fig {
    double util;      /* GPU busy, % (every tick) */
    double mem_gib;   /* GPU memory in use, GiB (of 80) */
    double step_ms;   /* from one batch handed over to the next */
    double wait_ms;   /* of which waiting for the loader */
    int nvml;         /* NVML loaded */
} fig;

static int failures;

/* 2000 steps of loader 1 in process 100 after an iter() at 0.5 s, then its exit; ticks of 100 ms
 * over the whole run with the main thread on a CPU 90% of the time */
static dr_result *analyse(fig f)
{
    enum { NSTEPS = 2000 };
    static dr_step steps[NSTEPS];
    static dr_tick ticks[400];
    dr_iter it;
    dr_run r;
    memset(&r, 0, sizeof r);
    memset(&it, 0, sizeof it);
    memset(steps, 0, sizeof steps);
    memset(ticks, 0, sizeof ticks);
    r.pid = 100;
    r.main_pid = 100;
    r.hooked = 1;
    r.interval = 0.1;
    r.ncpu_online = r.affinity = 8;
    r.allowed = 8;
    r.mem_total = 64 * GIB;
    r.gpu_ctx = 1;
    r.nvml = f.nvml;
    r.ngpu = f.nvml ? 1 : 0;
    snprintf(r.gpus[0].name, sizeof r.gpus[0].name, "Recorded GPU");
    r.gpus[0].mem_total = 80 * GIB;
    r.t_start = T0;
    it.pid = 100;
    it.t0 = T0 + 500000000LL;
    it.t1 = it.t0 + 100000;
    snprintf(it.kind, sizeof it.kind, "torch");
    it.bs = 64;
    it.lid = 1;
    r.iters = &it;
    r.niters = 1;
    int64_t prev = it.t1, step = (int64_t)(f.step_ms * 1e6), wait = (int64_t)(f.wait_ms * 1e6);
    for (int i = 0; i < NSTEPS; i++) {
        dr_step *s = &steps[i];
        s->pid = 100;
        s->lid = 1;
        s->bs = 64;
        snprintf(s->dtype, sizeof s->dtype, "float32");
        s->t1 = prev + (i ? step : wait);
        s->t0 = s->t1 - wait;
        prev = s->t1;
    }
    r.steps = steps;
    r.nsteps = NSTEPS;
    r.x_t = prev + 1000000;
    r.t_end = r.x_t + 50000000;
    double run = (double)(r.t_end - T0) / 1e9;
    for (size_t k = 0; k < sizeof ticks / sizeof *ticks && (double)(k + 1) * 0.1 <= run + 0.1; k++) {
        dr_tick *t = &ticks[r.nticks++];
        t->t = (double)(k + 1) * 0.1;
        t->dt = 0.1;
        t->cpu[DR_MAIN] = 0.9;
        t->nthreads[DR_MAIN] = 1;
        t->main_state = 'R';
        t->mem_avail = 32 * GIB;
        t->gpu_util[0] = (float)f.util;
        t->gpu_mem[0] = f.mem_gib * GIB;
    }
    r.ticks = ticks;
    return dr_analyse(&r);
}

static void expect(const char *what, fig f, const char *want, const char *not_want)
{
    dr_result *a = analyse(f);
    if (!a) {
        printf("FAIL %s: dr_analyse returned NULL\n", what);
        failures++;
        return;
    }
    const char *line = dr_verdict_line(a);
    int ok = strstr(line, want) != NULL && !(not_want && strstr(line, not_want));
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        printf("     got    %s\n", line);
        printf("     wanted \"%s\"%s%s%s\n", want, not_want ? ", not \"" : "", not_want ? not_want : "",
               not_want ? "\"" : "");
        failures++;
    }
    dr_result_free(a);
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
