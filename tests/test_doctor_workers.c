/* SPDX-License-Identifier: MIT */
/*
 * test_doctor_workers.c — the worker count stoker doctor advises when the cores are the limit
 * (tools/stoker/doctor_verdict.c, linked in), on figures as the sampler and the hook record them:
 * a torch DataLoader of W workers needing 20 ms of CPU per batch and a 2 ms step, each worker on a
 * core while it can have one. On two or more cores, fewer than two workers per
 * core become two, two to four per core stay (the advice is more cores or lighter augmentation,
 * which W workers already deliver), more than four become four; on one core the count is 1. The
 * sweeps behind the range are in docs/doctor.md, "The loading model".
 */
#include "doctor.h"

#include <stdio.h>
#include <string.h>

#define T0 1000000000LL /* the job's start, ns */

static int failures;

/* 600 batches of loader 1 (process 100), W workers on C cores: per tick of 100 ms the workers run
 * min(W, C * cb/(cb+sc)) cores, which sets the rate, and the main thread sc per batch; the workers
 * beyond the cores wait for one */
static dr_result *analyse(int W, double C)
{
    enum { NSTEPS = 600 };
    static dr_step steps[NSTEPS];
    static dr_tick ticks[2000];
    const double cb = 0.020, sc = 0.002;
    double wcpu = C * cb / (cb + sc) < W ? C * cb / (cb + sc) : W, rate = wcpu / cb;
    dr_iter it;
    dr_run r;
    memset(&r, 0, sizeof r);
    memset(&it, 0, sizeof it);
    memset(steps, 0, sizeof steps);
    memset(ticks, 0, sizeof ticks);
    r.pid = r.main_pid = 100;
    r.hooked = 1;
    r.interval = 0.1;
    r.ncpu_online = r.affinity = (int)C;
    r.allowed = C;
    r.mem_total = 64.0 * 1073741824.0;
    r.t_start = T0;
    it.pid = 100;
    it.t0 = T0 + 500000000LL;
    it.t1 = it.t0 + 100000;
    snprintf(it.kind, sizeof it.kind, "torch");
    it.workers = W;
    it.bs = 8;
    it.lid = 1;
    r.iters = &it;
    r.niters = 1;
    int64_t prev = it.t1, between = (int64_t)(1e9 / rate), step = (int64_t)(sc * 1e9);
    for (int i = 0; i < NSTEPS; i++) {
        dr_step *s = &steps[i];
        s->pid = 100;
        s->lid = 1;
        s->bs = 8;
        snprintf(s->dtype, sizeof s->dtype, "float32");
        s->t1 = prev + between;
        s->t0 = prev + step;
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
        t->cpu[DR_MAIN] = rate * sc;
        t->cpu[DR_WORKER] = wcpu;
        t->rq[DR_WORKER] = W > C ? W - C : 0.5;
        t->nthreads[DR_MAIN] = 1;
        t->nthreads[DR_WORKER] = (float)W;
        t->main_state = 'S';
        t->sys_cores = C;
        t->mem_avail = 32.0 * 1073741824.0;
    }
    r.ticks = ticks;
    return dr_analyse(&r);
}

static void expect(const char *what, int W, double C, const char *want, const char *not_want)
{
    dr_result *a = analyse(W, C);
    if (!a) {
        printf("FAIL %s: dr_analyse returned NULL\n", what);
        failures++;
        return;
    }
    const char *line = dr_verdict_line(a);
    int ok = strstr(line, "verdict: input-bound (") && strstr(line, want) &&
             !(not_want && strstr(line, not_want));
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        printf("     got    %s\n", line);
        printf("     wanted CPU-starved, \"%s\"%s%s%s\n", want, not_want ? ", not \"" : "", not_want ? not_want : "",
               not_want ? "\"" : "");
        failures++;
    }
    dr_result_free(a);
}

int main(void)
{
    expect("2 cores, 1 worker: two per core", 1, 2, "next: workers 1 -> 4: the loader needs 20.", NULL);
    expect("2 cores, 3 workers: two per core", 3, 2, "next: workers 3 -> 4:", NULL);
    expect("2 cores, 4 workers: stays", 4, 2, "next: more cores or lighter augmentation: the loader needs 20.",
           "workers 4 ->");
    expect("2 cores, 4 workers: already enough", 4, 2, "which 4 workers already deliver", NULL);
    expect("2 cores, 8 workers: stays", 8, 2, "which 8 workers already deliver", "workers 8 ->");
    expect("2 cores, 20 workers: four per core", 20, 2, "next: workers 20 -> 8:", NULL);
    expect("2 cores, 20 workers: fewer only share the cores", 20, 2, "more only share the same cores", NULL);
    expect("4 cores, 40 workers: four per core", 40, 4, "next: workers 40 -> 16:", NULL);
    expect("1 core, 4 workers: one", 4, 1, "next: workers 4 -> 1:", NULL);

    if (failures)
        printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
