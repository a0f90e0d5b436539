/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's analysis: the hook's events (batches, iterators, saves, per-step counters) and
 * the sampler's ticks become the figures of the seven points (the training window, the steps'
 * distribution, evaluation passes apart, CPU by role, writes, copies, GPU); doctor_rules.c then
 * picks the one stage that bounds the job, doctor_report.c prints and writes them.
 */
#include "doctor_result.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double dr_quant(double *v, size_t n, double q)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_d);
    size_t i = (size_t)ceil(q * (double)n) - (q * (double)n > 0 ? 1 : 0);
    return v[i < n ? i : n - 1];
}

double dr_result_window(const dr_result *a, int64_t *t0, int64_t *t1)
{
    *t0 = a->w0;
    *t1 = a->w1;
    return a->wall;
}

void dr_result_verdict(const dr_result *a, const char **stage, const char **figures, const char **next)
{
    *stage = a->verdict;
    *figures = a->figures;
    *next = a->next;
}

const char *dr_verdict_line(const dr_result *a)
{
    return a->line;
}

int dr_result_evals(const dr_result *a, const int64_t **t0, const int64_t **t1)
{
    *t0 = a->ev0;
    *t1 = a->ev1;
    return a->nev;
}

int dr_unhooked(const dr_run *r, const dr_pyproc **out, int cap)
{
    int n = 0;
    for (int i = 0; i < r->npyseen && n < cap; i++) {
        int hooked = 0;
        for (int j = 0; j < r->npy; j++)
            hooked |= r->py_pids[j] == r->pyseen[i].pid;
        if (!hooked)
            out[n++] = &r->pyseen[i];
    }
    return n;
}

void dr_result_free(dr_result *a)
{
    free(a);
}

static void analyse_steps(const dr_run *r, dr_result *a)
{
    size_t n = 0;
    double *w = malloc((r->nsteps + 1) * sizeof *w), *bt = malloc((r->nsteps + 1) * sizeof *bt),
           *ws = malloc((r->nsteps + 1) * sizeof *ws);
    if (!w || !bt || !ws) {
        free(w);
        free(bt);
        free(ws);
        return;
    }
    size_t nb = 0, nws = 0;
    int64_t prev_t1 = 0, prev_t0 = 0;
    size_t it = 0;
    int have_first = 0;
    double epoch_cost = 0;
    int bs_seen[8] = {0}, bs_cnt[8] = {0};
    int eval_between = 0; /* an evaluation batch since the previous training batch */
    for (size_t i = 0; i < r->nsteps; i++) {
        const dr_step *s = &r->steps[i];
        if (s->pid != r->main_pid || s->t0 < a->w0 || s->t1 > a->w1)
            continue;
        if (s->lid != a->train_lid) {
            a->eval_batches++;
            eval_between = 1;
            continue;
        }
        /* first batch of an iterator: an I of this process between the previous batch and this;
         * or the first after an evaluation pass (the gap holds the evaluation) */
        int first = !prev_t1 || eval_between;
        eval_between = 0;
        while (it < r->niters && r->iters[it].t0 <= s->t0) {
            const dr_iter *I = &r->iters[it];
            if (I->pid == r->main_pid && I->lid == a->train_lid && I->t0 >= prev_t0) {
                first = 1;
                a->iter_total += (double)(I->t1 - I->t0) / 1e9;
                epoch_cost += (double)(I->t1 - I->t0) / 1e9;
                a->nepochs++;
                a->workers = I->workers;
                a->pin = I->pin;
                a->mem = I->mem;
                a->persistent = I->persistent;
                snprintf(a->kind, sizeof a->kind, "%s", I->kind);
            }
            it++;
        }
        double wait = (double)(s->t1 - s->t0) / 1e9;
        a->wait_total += wait;
        w[n++] = wait;
        if (first) {
            epoch_cost += wait;
            if (!have_first) {
                a->first_batch = wait;
                have_first = 1;
            }
        } else {
            ws[nws++] = wait;
            bt[nb++] = (double)(s->t1 - prev_t1) / 1e9;
        }
        /* counters of the steps that began with this batch's block (the hook drops the set-up's,
         * before the first batch; the steps of autocast, not its entries, are counted) */
        for (int k = 0; k < 4; k++)
            a->calls[k] += (double)s->c[k];
        a->calls_dev += (double)s->c[4];
        a->h2d_pin += (double)s->c[5];
        a->h2d_page += (double)s->c[6];
        a->h2d_bytes += (double)s->c[7];
        a->sync_time += (double)s->c[8] / 1e9;
        a->ac16 += (int)s->c[9];
        a->acbf += (int)s->c[10];
        for (int k = 0; k < 8; k++)
            if (bs_seen[k] == s->bs || !bs_cnt[k]) {
                bs_seen[k] = s->bs;
                bs_cnt[k]++;
                break;
            }
        snprintf(a->dtype, sizeof a->dtype, "%s", s->dtype);
        prev_t1 = s->t1;
        prev_t0 = s->t0;
        a->nsteps++;
    }
    /* the counters a process has when it exits come with the exit event */
    a->csteps = a->nsteps > 0 ? a->nsteps : 1;
    if (r->x_t && a->nsteps) {
        for (int k = 0; k < 4; k++)
            a->calls[k] += (double)r->x_c[k];
        a->calls_dev += (double)r->x_c[4];
        a->h2d_pin += (double)r->x_c[5];
        a->h2d_page += (double)r->x_c[6];
        a->h2d_bytes += (double)r->x_c[7];
        a->sync_time += (double)r->x_c[8] / 1e9;
    }
    int best = 0;
    for (int k = 1; k < 8; k++)
        if (bs_cnt[k] > bs_cnt[best])
            best = k;
    a->bs = bs_seen[best];
    a->epoch_start_mean = a->nepochs ? epoch_cost / a->nepochs : 0;
    a->wait_med = dr_quant(ws, nws, 0.5);
    a->wait_p99 = dr_quant(ws, nws, 0.99);
    a->between_med = dr_quant(bt, nb, 0.5);
    a->between_p99 = dr_quant(bt, nb, 0.99);
    if (!nws) { /* a single batch per epoch: the waits are all first batches */
        a->wait_med = dr_quant(w, n, 0.5);
        a->wait_p99 = dr_quant(w, n, 0.99);
    }
    free(w);
    free(bt);
    free(ws);
}

/* the training loader: the one whose batches the main process took most of (validation and
 * test loaders are iterated too, and are kept apart by the hook's number per loader object) */
static void pick_train_loader(const dr_run *r, dr_result *a)
{
    enum { MAXL = 64 };
    int cnt[MAXL] = {0};
    for (size_t i = 0; i < r->nsteps; i++) {
        const dr_step *s = &r->steps[i];
        if (s->pid == r->main_pid && s->lid >= 0 && s->lid < MAXL && s->t0 >= a->w0 && s->t1 <= a->w1)
            cnt[s->lid]++;
    }
    int best = 0;
    for (int l = 0; l < MAXL; l++) {
        a->nloaders += cnt[l] > 0;
        if (cnt[l] > cnt[best])
            best = l;
    }
    a->train_lid = best;
}

/* evaluation passes: from an evaluation iterator's creation to the next training batch asked for */
static void eval_spans(const dr_run *r, dr_result *a)
{
    int64_t open = 0;
    size_t j = 0;
    for (size_t i = 0; i < r->niters; i++) {
        const dr_iter *I = &r->iters[i];
        if (I->pid != r->main_pid || I->lid == a->train_lid || I->t0 < a->w0 || I->t0 >= a->w1 ||
            I->t0 < open)
            continue;
        int64_t end = a->w1;
        for (j = 0; j < r->nsteps; j++) {
            const dr_step *s = &r->steps[j];
            if (s->pid == r->main_pid && s->lid == a->train_lid && s->t0 > I->t0) {
                end = s->t0 < a->w1 ? s->t0 : a->w1;
                break;
            }
        }
        for (size_t k = 0; k < r->niters; k++) /* or the training loader's next iterator */
            if (r->iters[k].pid == r->main_pid && r->iters[k].lid == a->train_lid && r->iters[k].t0 > I->t0 &&
                r->iters[k].t0 < end)
                end = r->iters[k].t0;
        a->eval_s += (double)(end - I->t0) / 1e9;
        if (a->nev < 64) {
            a->ev0[a->nev] = I->t0;
            a->ev1[a->nev++] = end;
        }
        a->eval_passes++;
        open = end;
    }
}

/* the overlap of (a, b] with the batch waits of the main process, in ns */
static double wait_overlap(const dr_run *r, int64_t a, int64_t b, size_t *from)
{
    double o = 0;
    while (*from < r->nsteps && (r->steps[*from].pid != r->main_pid || r->steps[*from].t1 <= a))
        (*from)++;
    for (size_t i = *from; i < r->nsteps; i++) {
        const dr_step *s = &r->steps[i];
        if (s->pid != r->main_pid)
            continue;
        if (s->t0 >= b)
            break;
        int64_t lo = s->t0 > a ? s->t0 : a, hi = s->t1 < b ? s->t1 : b;
        if (hi > lo)
            o += (double)(hi - lo);
    }
    return o;
}

static void analyse_ticks(const dr_run *r, dr_result *a)
{
    double T = 0, mw = 0, mbusy = 0, mrq = 0, md = 0;
    size_t from = 0;
    int gpu_n = 0;
    a->mem_avail_min = -1;
    for (size_t i = 0; i < r->nticks; i++) {
        const dr_tick *k = &r->ticks[i];
        int64_t tb = r->t_start + (int64_t)(k->t * 1e9), ta = tb - (int64_t)(k->dt * 1e9);
        if (tb <= a->w0 || ta >= a->w1)
            continue;
        a->nticks++;
        T += k->dt;
        for (int j = 0; j < DR_NROLES; j++) {
            a->cpu[j] += k->cpu[j] * k->dt;
            a->rq[j] += k->rq[j] * k->dt;
            a->dth[j] += k->dthreads[j] * k->dt;
            a->nth[j] += k->nthreads[j] * k->dt;
        }
        a->ndec += k->ndec * k->dt;
        for (int j = 0; j < 3; j++)
            a->psi[j] += k->psi[j] * k->dt;
        a->sys_cores += k->sys_cores * k->dt;
        a->rd_bps += k->rd_bps * k->dt;
        a->wr_bps += k->wr_bps * k->dt;
        a->rd_iops += k->rd_iops * k->dt;
        a->wr_iops += k->wr_iops * k->dt;
        a->job_rd += k->job_rd_bps * k->dt;
        a->job_wr += k->job_wr_bps * k->dt;
        a->net_rx += k->net_rx_bps * k->dt;
        a->net_tx += k->net_tx_bps * k->dt;
        if (a->mem_avail_min < 0 || k->mem_avail < a->mem_avail_min)
            a->mem_avail_min = k->mem_avail;
        if (k->swap_used > a->swap_used_max)
            a->swap_used_max = k->swap_used;
        if (k->rss > a->rss_max)
            a->rss_max = k->rss;
        for (int g = 0; g < r->ngpu; g++) {
            a->gutil[g] += k->gpu_util[g];
            if (k->gpu_util[g] > a->gutil_max[g])
                a->gutil_max[g] = k->gpu_util[g];
            if (k->gpu_mem[g] > a->gmem[g])
                a->gmem[g] = k->gpu_mem[g];
        }
        gpu_n++;
        /* the main thread while the loop waits for a batch (the loader when num_workers=0) */
        double f = wait_overlap(r, ta, tb, &from) / (double)(tb - ta);
        mw += f * k->dt;
        mbusy += f * k->dt * k->cpu[DR_MAIN];
        mrq += f * k->dt * k->rq[DR_MAIN];
        md += f * k->dt * (k->main_state == 'D');
    }
    a->tick_s = T;
    a->main_wait_cpu = mbusy;
    if (T > 0) {
        for (int j = 0; j < DR_NROLES; j++) {
            a->cpu[j] /= T;
            a->rq[j] /= T;
            a->dth[j] /= T;
            a->nth[j] /= T;
            a->cpu_total += a->cpu[j];
            a->rq_total += a->rq[j];
        }
        for (int j = 0; j < 3; j++)
            a->psi[j] /= T;
        a->ndec /= T;
        a->sys_cores /= T;
        a->rd_bps /= T;
        a->wr_bps /= T;
        a->rd_iops /= T;
        a->wr_iops /= T;
        a->net_rx /= T;
        a->net_tx /= T;
    }
    for (int g = 0; g < r->ngpu && gpu_n; g++)
        a->gutil[g] /= gpu_n;
    if (a->mem_avail_min < 0)
        a->mem_avail_min = 0;

    /* the loading role */
    if (!strcmp(a->kind, "stoker")) {
        for (int i = 0; i < r->nstk; i++)
            if (r->stk[i].pid == r->main_pid && r->stk[i].lid == a->train_lid)
                a->stk = &r->stk[i];
        if (!a->workers && a->stk)
            a->workers = a->stk->dthreads;
        if (!a->workers)
            a->workers = (int)(a->ndec + 0.5);
        double n = a->workers > 0 ? a->workers : 1;
        snprintf(a->loader_role, sizeof a->loader_role, "stoker's threads (%d decode)", a->workers);
        a->ld_n = n;
        a->ld_busy = a->cpu[DR_STOKER] / n;
        a->ld_rq = a->rq[DR_STOKER] / n;
        a->ld_disk = a->dth[DR_STOKER] / n;
    } else if (a->workers > 0) {
        snprintf(a->loader_role, sizeof a->loader_role, "%d DataLoader worker process%s", a->workers,
                 a->workers == 1 ? "" : "es");
        double n = a->workers;
        a->ld_n = n;
        a->ld_busy = a->cpu[DR_WORKER] / n;
        a->ld_rq = a->rq[DR_WORKER] / n;
        a->ld_disk = a->dth[DR_WORKER] / n;
    } else {
        snprintf(a->loader_role, sizeof a->loader_role, !strcmp(a->kind, "loop") ? "the main thread (no loader)"
                                                                                 : "the main thread (num_workers=0)");
        a->ld_n = 1;
        if (mw > 0) {
            a->ld_busy = mbusy / mw;
            a->ld_rq = mrq / mw;
            a->ld_disk = md / mw;
        }
    }
}

/* the job's own file writes (the hook's counters 11-17, on the batches of the main process, the
 * set-up's left out by the hook, and at its exit): a checkpoint's writes join the save call that
 * serialised it, so a save is serialisation + write + fsync */
static void analyse_writes(const dr_run *r, dr_result *a)
{
    int seen = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        const dr_step *s = &r->steps[i];
        if (s->pid != r->main_pid || s->t0 < a->w0 || s->t1 > a->w1)
            continue;
        seen++;
        for (int k = 0; k < 3; k++) {
            a->wr_s[k] += (double)s->c[11 + 2 * k] / 1e9;
            a->wr_b[k] += (double)s->c[12 + 2 * k];
        }
        a->ckpt_opens += (double)s->c[17];
    }
    if (r->x_t && seen) {
        for (int k = 0; k < 3; k++) {
            a->wr_s[k] += (double)r->x_c[11 + 2 * k] / 1e9;
            a->wr_b[k] += (double)r->x_c[12 + 2 * k];
        }
        a->ckpt_opens += (double)r->x_c[17];
    }
    a->save_call_s = a->save_total;
    a->save_total += a->wr_s[0];
    /* checkpoint files the job wrote itself are saves of their own (pickle.dump into a .pkl);
     * without such files, the checkpoint writes are buffers a save call filled (Lightning) */
    if (a->ckpt_opens > 0) {
        int calls = a->nsave;
        a->save_bytes += a->wr_b[0];
        a->nsave += (int)a->ckpt_opens;
        if (!calls)
            a->steps_per_save = (double)a->nsteps / a->nsave;
    } else if (a->wr_b[0] > a->save_bytes) {
        a->save_bytes = a->wr_b[0];
    }
}

/* The job's CPU per step as a distribution: the window's ticks cut into chunks of at least 20
 * steps (about 9 chunks), whole ticks, each chunk's CPU (all roles) over its steps; the median and
 * the chunks' lowest and highest. A mean over the window lets one slow stretch (workers starting,
 * a pause) move the figure a rule compares with its line; the median does not. Fewer than 3
 * chunks: none (the rules take the mean). The main process's training batches are in time order. */
static void step_cpu_chunks(const dr_run *r, dr_result *a)
{
    enum { MAXC = 64 };
    double v[MAXC], cpu = 0;
    int nc = 0, steps = 0, target = a->nsteps / 9 > 20 ? a->nsteps / 9 : 20;
    size_t si = 0;
    if (a->nsteps < 3 * 20)
        return;
    for (size_t i = 0; i < r->nticks && nc < MAXC; i++) {
        const dr_tick *k = &r->ticks[i];
        int64_t tb = r->t_start + (int64_t)(k->t * 1e9), ta = tb - (int64_t)(k->dt * 1e9);
        if (tb <= a->w0 || ta >= a->w1)
            continue;
        for (int j = 0; j < DR_NROLES; j++)
            cpu += k->cpu[j] * k->dt;
        for (; si < r->nsteps; si++) { /* other processes' blocks may come first in the file */
            const dr_step *s = &r->steps[si];
            if (s->pid != r->main_pid)
                continue;
            if (s->t1 > tb)
                break;
            steps += s->lid == a->train_lid && s->t0 >= a->w0 && s->t1 <= a->w1;
        }
        if (steps >= target) {
            v[nc++] = cpu / steps;
            cpu = 0;
            steps = 0;
        }
    }
    if (nc < 3)
        return;
    a->cpu_step_chunks = nc;
    a->cpu_step_med = dr_quant(v, (size_t)nc, 0.5);
    a->cpu_step_lo = v[0];
    a->cpu_step_hi = v[nc - 1];
}

dr_result *dr_analyse(const dr_run *r)
{
    dr_result *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    int64_t end = r->t_end ? r->t_end : r->t_start;
    a->run_s = (double)(end - r->t_start) / 1e9;
    a->w0 = end;
    for (size_t i = 0; i < r->niters; i++)
        if (r->iters[i].pid == r->main_pid && r->iters[i].t0 < a->w0)
            a->w0 = r->iters[i].t0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (r->steps[i].pid == r->main_pid && r->steps[i].t0 < a->w0)
            a->w0 = r->steps[i].t0;
    a->w1 = end;
    if (r->x_t && r->x_t < a->w1)
        a->w1 = r->x_t;
    if (r->t_stop && r->t_stop < a->w1)
        a->w1 = r->t_stop;
    if (a->w0 >= a->w1) { /* no loader: the whole run */
        a->w0 = r->t_start;
        a->w1 = end;
    }
    a->wall = (double)(a->w1 - a->w0) / 1e9;
    snprintf(a->kind, sizeof a->kind, "-");
    pick_train_loader(r, a);
    analyse_steps(r, a);
    eval_spans(r, a);
    a->calls_total = a->calls[0] + a->calls[1] + a->calls[2] + a->calls[3];
    int64_t last_save_step = -1;
    double gaps = 0;
    int ngaps = 0;
    for (size_t i = 0; i < r->nsaves; i++) {
        const dr_save *s = &r->saves[i];
        if (s->pid != r->main_pid || s->t0 < a->w0 || s->t0 > a->w1)
            continue;
        a->nsave++;
        a->nsave_kind[!strcmp(s->kind, "np.save") ? 1 : !strcmp(s->kind, "safetensors") ? 2 : 0]++;
        a->save_total += (double)((s->t1 < a->w1 ? s->t1 : a->w1) - s->t0) / 1e9;
        a->save_bytes += (double)s->bytes;
        int64_t k = 0; /* batches before this save */
        for (size_t j = 0; j < r->nsteps; j++)
            if (r->steps[j].pid == r->main_pid && r->steps[j].lid == a->train_lid && r->steps[j].t1 <= s->t0 &&
                r->steps[j].t1 >= a->w0)
                k++;
        if (last_save_step >= 0) {
            gaps += (double)(k - last_save_step);
            ngaps++;
        } else {
            gaps += (double)k;
            ngaps++;
        }
        last_save_step = k;
    }
    a->steps_per_save = ngaps ? gaps / ngaps : 0;
    analyse_writes(r, a);
    a->gpu_used = r->gpu_ctx == 1 || a->calls_dev > 0 || a->h2d_pin + a->h2d_page > 0;
    analyse_ticks(r, a);
    step_cpu_chunks(r, a);
    dr_decide(r, a);
    snprintf(a->line, sizeof a->line, "verdict: %s: %s; next: %s", a->verdict, a->figures, a->next);
    return a;
}

