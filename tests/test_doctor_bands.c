/* SPDX-License-Identifier: MIT */
/*
 * test_doctor_bands.c — stoker doctor's margin bands (tools/stoker/doctor_rules.c, linked in), on
 * figures as the sampler and the hook record them: a figure just under its line and one just over
 * it, both inside the line's band, give the same verdict (the same stage, and the same next step
 * but for its figures), which says "borderline" and names both stages; figures clearly on one side
 * give that side's stage alone; a slow stretch of the run does not move the CPU per step the tiny
 * rule reads (the median of the run's stretches). Lines: the tiny step's CPU (1 ms), the wait for batches (25%),
 * host-syncing calls per step (32), the intra-op pool's share of the main thread's CPU (10%).
 * The bands are in docs/doctor.md, "Margins".
 */
#include "doctor/recorded.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

typedef struct fig {
    double cpu_ms;    /* the job's CPU per step */
    double wait;      /* share of the step waiting for the loader */
    int calls;        /* .item() per step */
    double other;     /* the main process's other threads' CPU against the main thread's */
    double step_ms;   /* between batches */
    double slow;      /* the first such share of the ticks runs 4x the CPU (workers starting, a pause) */
    double held;      /* cores' worth the job's threads waited for a CPU (other processes held them) */
} fig;

/* a CPU-only job on 2 cores, 2000 batches from an in-memory torch loader (num_workers=0) */
static dr_result *run(fig f)
{
    static dr_step steps[2000];
    static dr_tick ticks[1000];
    dr_iter it;
    dr_run r;
    rec_job(&r, &it, 0, 16, 2);
    it.mem = 1;
    int64_t between = (int64_t)(f.step_ms * 1e6);
    rec_steps(&r, steps, 2000, between, (int64_t)(f.wait * (double)between));
    for (int i = 0; i < 2000; i++)
        steps[i].c[0] = f.calls;
    double cores = f.cpu_ms / f.step_ms; /* the job's CPU per step over the step's wall time */
    dr_tick t = {.main_state = 'R', .sys_cores = 2, .mem_avail = 32.0 * 1073741824.0};
    t.cpu[DR_MAIN] = cores / (1 + f.other);
    t.cpu[DR_OTHER] = cores - t.cpu[DR_MAIN];
    t.nthreads[DR_MAIN] = 1;
    t.nthreads[DR_OTHER] = 2;
    t.rq[DR_MAIN] = f.held;
    rec_ticks(&r, ticks, sizeof ticks / sizeof *ticks, &t);
    for (size_t k = 6; k < 6 + (size_t)(f.slow * (double)r.nticks); k++) { /* the window opens at 0.5 s */
        ticks[k].cpu[DR_MAIN] *= 4;
        ticks[k].cpu[DR_OTHER] *= 4;
    }
    return dr_analyse(&r);
}

/* S with every run of digits and dots as one '#' */
static void shape(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 1 < cap; s++) {
        if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) {
            if (!o || out[o - 1] != '#')
                out[o++] = '#';
        } else {
            out[o++] = *s;
        }
    }
    out[o] = 0;
}

/* A and B: the same stage (exactly) and the same next step but for its figures; the stage has
 * each of WANT (NULL-terminated) */
static void same(const char *what, fig a, fig b, const char *const *want)
{
    dr_result *x = run(a), *y = run(b);
    const char *sx, *fx, *nx, *sy, *fy, *ny;
    dr_result_verdict(x, &sx, &fx, &nx);
    dr_result_verdict(y, &sy, &fy, &ny);
    static char px[2048], py[2048];
    shape(nx, px, sizeof px);
    shape(ny, py, sizeof py);
    int ok = !strcmp(sx, sy) && !strcmp(px, py);
    for (const char *const *w = want; *w; w++)
        ok = ok && strstr(sx, *w);
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok || getenv("SHOW")) {
        printf("     under  %s\n", dr_verdict_line(x));
        printf("     over   %s\n", dr_verdict_line(y));
        for (const char *const *w = want; *w; w++)
            printf("     wanted \"%s\" in both stages\n", *w);
        failures++;
    }
    dr_result_free(x);
    dr_result_free(y);
}

/* F's stage is STAGE exactly (not borderline) */
static void clear(const char *what, fig f, const char *stage)
{
    dr_result *x = run(f);
    const char *s, *fi, *n;
    dr_result_verdict(x, &s, &fi, &n);
    int ok = !strcmp(s, stage);
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        printf("     got    %s\n     wanted stage \"%s\"\n", dr_verdict_line(x), stage);
        failures++;
    }
    dr_result_free(x);
}

int main(void)
{
    const fig base = {.cpu_ms = 0.5, .wait = 0.02, .calls = 1, .other = 0, .step_ms = 1.5};
    fig a = base, b = base;

    /* the tiny step: 1 ms of CPU per step, band 0.83-1.2 ms */
    a.cpu_ms = 0.95;
    b.cpu_ms = 1.05;
    same("CPU per step 0.95 / 1.05 ms: one verdict", a, b,
         (const char *const[]){"borderline: ", "too small for the hardware", "compute-bound", NULL});
    a.cpu_ms = 0.85;
    b.cpu_ms = 1.18;
    same("CPU per step 0.85 / 1.18 ms: one verdict", a, b, (const char *const[]){"borderline: ", NULL});
    a.cpu_ms = 0.7;
    clear("CPU per step 0.7 ms: too small", a, "too small for the hardware");
    a.cpu_ms = 1.4;
    clear("CPU per step 1.4 ms: compute", a, "compute-bound");

    /* the median of the run's stretches, not the mean: a first 15% of the run at 4x the CPU
     * (0.7 ms a step, a mean of 1.1 ms) is still clearly too small */
    a = base;
    a.cpu_ms = 0.7;
    a.slow = 0.15;
    clear("0.7 ms a step, a slow first stretch: the median is read", a, "too small for the hardware");

    /* the wait for batches: 25% of the window, band 20-30% (a 20 ms step: not tiny) */
    const fig step20 = {.cpu_ms = 15, .wait = 0.02, .calls = 1, .step_ms = 20};
    a = b = step20;
    a.wait = 0.23;
    b.wait = 0.27;
    same("waiting 23% / 27%: one verdict", a, b,
         (const char *const[]){"borderline: ", "input-bound", "compute-bound", NULL});
    a.wait = 0.15;
    clear("waiting 15%: compute", a, "compute-bound");

    /* host-syncing calls per step: 32, band 25.6-40 (a CPU-only job: all of them count) */
    a = b = step20;
    a.calls = 30;
    b.calls = 34;
    same("30 / 34 host-syncing calls per step: one verdict", a, b,
         (const char *const[]){"borderline: ", "sync-bound", "compute-bound", NULL});
    b.calls = 20;
    clear("20 calls per step: compute", b, "compute-bound");
    b.calls = 48;
    clear("48 calls per step: sync", b, "sync-bound");

    /* the intra-op pool beside a tiny step: 10% of the main thread's CPU, band 8-12%: the stage
     * does not move, the next step is the same on both sides (OMP_NUM_THREADS=1 first) */
    a = b = base;
    a.other = 0.09;
    b.other = 0.11;
    same("the pool at 9% / 11% of the main thread: one next step", a, b,
         (const char *const[]){"too small for the hardware", NULL});
    dr_result *x = run(a);
    const char *s, *fi, *n;
    dr_result_verdict(x, &s, &fi, &n);
    int ok = !strncmp(n, "OMP_NUM_THREADS=1", 17) && strstr(fi, "borderline");
    printf("%s the pool at 9%%: OMP_NUM_THREADS=1 first, the band named in the figures\n", ok ? "ok  " : "FAIL");
    if (!ok) {
        printf("     got    %s\n", dr_verdict_line(x));
        failures++;
    }
    dr_result_free(x);

    /* a tiny step whose pool is idle, on 2 cores that other processes hold (the job waits for one
     * 0.7 cores' worth): OMP_NUM_THREADS=1 before the larger batch, whose operators the pool would
     * split between threads waiting for cores */
    a = base;
    a.held = 0.7;
    x = run(a);
    dr_result_verdict(x, &s, &fi, &n);
    ok = !strcmp(s, "too small for the hardware") && !strncmp(n, "OMP_NUM_THREADS=1", 17) && strstr(n, "batch 16 -> 128");
    printf("%s a tiny step on held cores: OMP_NUM_THREADS=1 before the larger batch\n", ok ? "ok  " : "FAIL");
    if (!ok) {
        printf("     got    %s\n", dr_verdict_line(x));
        failures++;
    }
    dr_result_free(x);
    a.held = 0;
    x = run(a);
    dr_result_verdict(x, &s, &fi, &n);
    ok = !strncmp(n, "batch 16 -> 128", 15);
    printf("%s a tiny step on free cores: the batch first\n", ok ? "ok  " : "FAIL");
    if (!ok) {
        printf("     got    %s\n", dr_verdict_line(x));
        failures++;
    }
    dr_result_free(x);

    if (failures)
        printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
