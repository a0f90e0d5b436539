/* SPDX-License-Identifier: MIT */
/*
 * recorded.c — builds the jobs of recorded.h and checks the doctor's verdict line on them.
 */
#include "recorded.h"

#include <stdio.h>
#include <string.h>

void rec_job(dr_run *r, dr_iter *it, int workers, int bs, double allowed)
{
    memset(r, 0, sizeof *r);
    memset(it, 0, sizeof *it);
    r->pid = r->main_pid = REC_PID;
    r->hooked = 1;
    r->interval = 0.1;
    r->ncpu_online = r->affinity = (int)allowed;
    r->allowed = allowed;
    r->mem_total = 64.0 * 1073741824.0;
    r->t_start = REC_T0;
    it->pid = REC_PID;
    it->t0 = REC_T0 + 500000000LL;
    it->t1 = it->t0 + 100000;
    snprintf(it->kind, sizeof it->kind, "torch");
    it->workers = workers;
    it->bs = bs;
    it->lid = 1;
    r->iters = it;
    r->niters = 1;
}

void rec_steps(dr_run *r, dr_step *steps, int n, int64_t between_ns, int64_t wait_ns)
{
    int64_t prev = r->iters[0].t1;
    memset(steps, 0, (size_t)n * sizeof *steps);
    for (int i = 0; i < n; i++) {
        dr_step *s = &steps[i];
        s->pid = REC_PID;
        s->lid = 1;
        s->bs = r->iters[0].bs;
        snprintf(s->dtype, sizeof s->dtype, "float32");
        s->t1 = prev + (i ? between_ns : wait_ns);
        s->t0 = s->t1 - wait_ns;
        prev = s->t1;
    }
    r->steps = steps;
    r->nsteps = (size_t)n;
    r->x_t = prev + 1000000;
    r->t_end = r->x_t + 50000000;
}

void rec_ticks(dr_run *r, dr_tick *ticks, size_t cap, const dr_tick *sample)
{
    double run = (double)(r->t_end - r->t_start) / 1e9;
    r->nticks = 0;
    for (size_t k = 0; k < cap && (double)(k + 1) * 0.1 <= run + 0.1; k++) {
        dr_tick *t = &ticks[r->nticks++];
        *t = *sample;
        t->t = (double)(k + 1) * 0.1;
        t->dt = 0.1;
    }
    r->ticks = ticks;
}

void rec_expect(dr_run *r, const char *what, const char *const *want, const char *not_want, int *failures)
{
    dr_result *a = dr_analyse(r);
    if (!a) {
        printf("FAIL %s: dr_analyse returned NULL\n", what);
        ++*failures;
        return;
    }
    const char *line = dr_verdict_line(a);
    int ok = !(not_want && strstr(line, not_want));
    for (const char *const *w = want; *w; w++)
        ok = ok && strstr(line, *w) != NULL;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        printf("     got    %s\n", line);
        for (const char *const *w = want; *w; w++)
            printf("     wanted \"%s\"\n", *w);
        if (not_want)
            printf("     not    \"%s\"\n", not_want);
        ++*failures;
    }
    dr_result_free(a);
}
