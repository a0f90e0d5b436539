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
#include "doctor/recorded.h"

#include <stdio.h>

static int failures;

/* 600 batches of 8 with W workers on C cores: per tick of 100 ms the workers run
 * min(W, C * cb/(cb+sc)) cores, which sets the rate, and the main thread sc per batch; the
 * workers beyond the cores wait for one. The verdict is input-bound and has WANT, not NOT_WANT */
static void expect(const char *what, int W, double C, const char *want, const char *not_want)
{
    static dr_step steps[600];
    static dr_tick ticks[2000];
    const double cb = 0.020, sc = 0.002;
    double wcpu = C * cb / (cb + sc) < W ? C * cb / (cb + sc) : W, rate = wcpu / cb;
    dr_iter it;
    dr_run r;
    rec_job(&r, &it, W, 8, C);
    rec_steps(&r, steps, 600, (int64_t)(1e9 / rate), (int64_t)(1e9 / rate - sc * 1e9));
    dr_tick t = {.main_state = 'S', .sys_cores = C, .mem_avail = 32.0 * 1073741824.0};
    t.cpu[DR_MAIN] = rate * sc;
    t.cpu[DR_WORKER] = wcpu;
    t.rq[DR_WORKER] = W > C ? W - C : 0.5;
    t.nthreads[DR_MAIN] = 1;
    t.nthreads[DR_WORKER] = (float)W;
    rec_ticks(&r, ticks, sizeof ticks / sizeof *ticks, &t);
    const char *w[] = {"verdict: input-bound (", want, NULL};
    rec_expect(&r, what, w, not_want, &failures);
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
