/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's analysis: the hook's events (batches, iterators, saves, per-step counters) and
 * the sampler's ticks become the figures of the seven points, and the rules below pick the one
 * stage that bounds the job. The rules and their thresholds are written out in docs/doctor.md;
 * they are the constants here, in the order they are tried:
 *   input    waiting for the next batch (plus iterator creation) >= 25% of the training window;
 *            then which: the loading role (DataLoader workers, stoker's threads, or the main
 *            thread while it waits when num_workers=0) waits for a CPU >= 25% of the time, more
 *            than it runs, and the job has more runnable threads than cores it may use:
 *            CPU-starved; else in disk wait >= 25%: storage; else running or runnable >= 50%:
 *            decode; else it waits on something else.
 *   checkpoint  torch.save >= 20% of the window.
 *   sync     time inside host-syncing calls >= 15%, or >= 32 such calls per step.
 * The largest share wins among input, checkpoint and (time-based) sync. Without any of them:
 *   launch   a GPU job whose GPU is busy < 50% of the time (NVML) while a step takes < 2 ms:
 *            too small for the GPU (launch-bound): the kernels are too short to fill it and the
 *            Python loop that launches them is the step; batch size, merged steps, CUDA graphs;
 * then too small for the hardware (CPU per step < 1 ms), too small for the GPU (GPU used, mean
 * utilisation < 50%, < 50% of its memory), else compute; a CPU-only compute-bound step whose
 * intra-op threads wait for cores other processes hold gets "one thread per core the job got"
 * first.
 */
#include "doctor.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define TH_INPUT 0.25
#define TH_CKPT 0.20
#define TH_SYNC_SHARE 0.15
#define TH_SYNC_PER_STEP 32.0
#define TH_LOG 0.15
#define TH_CONTENTION 0.20 /* others' hold on the CPU named above this share of the allowed cores */ /* writes to log files (or other non-checkpoint files) */
#define TH_POOL 0.10      /* the main process's other threads compute: this share of the main thread's CPU ... */
#define TH_POOL_WAIT 0.5  /* ... and its threads waited for a CPU this share of the time they ran */
#define TH_STARVED 0.25
#define TH_STORAGE 0.25
#define TH_DECODE 0.50
#define TH_GPU_SMALL_UTIL 50.0
#define TH_GPU_SMALL_MEM 0.50
#define TH_LAUNCH_UTIL 50.0 /* a GPU busy under this share (%, NVML's mean over the window) ... */
#define TH_LAUNCH_STEP 2e-3 /* ... while the median time between batches is under this: launch-bound */
#define TH_LAUNCH_FILL 90.0 /* the GPU busy share the suggested batch size aims for */
#define LAUNCH_MEM_USE 0.80 /* ... in at most this share of the GPU's memory */
#define TH_TINY_STEP 1e-3  /* the job's CPU per step, loading included, under this: too small ... */
#define TH_TINY_WALL 5e-3  /* ... when the wall time between batches (median) is also under this */
#define TH_TINY_STEPS 20    /* ... over at least this many steps */
#define TH_OUTSIDE_TICKS 5 /* samples needed to judge a job without batches from outside */
#define TH_OUTSIDE_BUSY 0.5 /* ... compute-bound: cores used or waited for */
#define TH_OUTSIDE_DISK 0.25 /* ... I/O-bound: threads in disk wait */
#define GPU_SPEEDUP_LO 20.0 /* a CPU-only job's step on a GPU: assumed this many times faster ... */
#define GPU_SPEEDUP_HI 50.0 /* ... to this many (--gpu-step-ms replaces the assumption) */
#define CKPT_TARGET 0.02 /* the checkpoint share the suggested interval aims for */

struct dr_result {
    int64_t w0, w1;
    double wall;                  /* the training window, s */
    double run_s;                 /* the whole job, s */
    int nsteps;
    double csteps;                /* steps the counters cover (see analyse_steps) */
    /* data */
    double wait_total, iter_total, input_share;
    double wait_med, wait_p99, between_med, between_p99, step_med;
    double first_batch, epoch_start_mean;
    int nepochs, first_included;
    int train_lid, nloaders;      /* the training loader (most batches), loaders iterated */
    int eval_batches, eval_passes; /* batches and iterators of the other loaders (evaluation) */
    double eval_s;                /* time in evaluation passes: out of the verdict's window */
    int workers, pin, bs;
    char kind[8], dtype[16];
    char loader_role[48];
    double ld_n, ld_busy, ld_rq, ld_disk;
    double tick_s, main_wait_cpu; /* seconds of ticks in the window; main-thread CPU-s during waits */
    /* writes */
    int nsave, nsave_kind[3];     /* save calls: torch.save, np.save, safetensors */
    double save_total, save_share, save_bytes, steps_per_save;
    double save_call_s;           /* inside the save calls (serialisation, or all of a save to a path) */
    double wr_s[3], wr_b[3];      /* the job's own file writes + fsync: checkpoint, log, other files */
    double ckpt_opens;            /* checkpoint files opened for writing outside a save call */
    double log_share, other_share;
    /* copies */
    double calls[4], calls_total, calls_dev, sync_time, sync_share;
    double h2d_pin, h2d_page, h2d_bytes;
    int ac16, acbf;
    /* system */
    double cpu[DR_NROLES], rq[DR_NROLES], dth[DR_NROLES], nth[DR_NROLES], cpu_total, rq_total, ndec;
    double psi[3], sys_cores, mem_avail_min, swap_used_max, rss_max;
    double rd_bps, wr_bps, rd_iops, wr_iops, job_rd, job_wr, net_rx, net_tx;
    int nticks;
    /* GPU */
    double gutil[DR_MAXGPU], gutil_max[DR_MAXGPU], gmem[DR_MAXGPU];
    int gpu_used;
    /* verdict */
    char verdict[48], figures[900], next[640], line[1600 + 48];
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quant(double *v, size_t n, double q)
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

void dr_result_free(dr_result *a)
{
    free(a);
}

static const char *role_name[DR_NROLES] = {"main thread", "loader workers", "stoker threads", "other"};

/* 1, 2, 5 x 10^k at or above v */
static long nice_up(double v)
{
    double p = 1;
    while (p * 10 <= v)
        p *= 10;
    for (int m = 1; m <= 10; m = m == 1 ? 2 : m == 2 ? 5 : 10)
        if (m * p >= v)
            return (long)(m * p);
    return (long)(10 * p);
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
    a->wait_med = quant(ws, nws, 0.5);
    a->wait_p99 = quant(ws, nws, 0.99);
    a->between_med = quant(bt, nb, 0.5);
    a->between_p99 = quant(bt, nb, 0.99);
    if (!nws) { /* a single batch per epoch: the waits are all first batches */
        a->wait_med = quant(w, n, 0.5);
        a->wait_p99 = quant(w, n, 0.99);
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
        snprintf(a->loader_role, sizeof a->loader_role, "the main thread (num_workers=0)");
        a->ld_n = 1;
        if (mw > 0) {
            a->ld_busy = mbusy / mw;
            a->ld_rq = mrq / mw;
            a->ld_disk = md / mw;
        }
    }
}

/* "4 torch.save into memory + file writes" / "3 np.save, 1 pickled file" */
static void save_kinds(const dr_result *a, char *out, size_t cap)
{
    static const char *nm[3] = {"torch.save", "np.save", "safetensors"};
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < 3 && o < cap; k++)
        if (a->nsave_kind[k])
            o += (size_t)snprintf(out + o, cap - o, "%s%d %s", o ? ", " : "", a->nsave_kind[k], nm[k]);
    if (a->ckpt_opens > 0 && o < cap)
        o += (size_t)snprintf(out + o, cap - o, "%s%.0f written as files (pickle, ...)", o ? ", " : "",
                              a->ckpt_opens);
    if (a->wr_s[0] > 0 && a->nsave_kind[0] && o < cap)
        snprintf(out + o, cap - o, "; serialised, then written by the job");
}

/* "exited with code 3" / "was killed by signal 9 (Killed)" */
static void job_status(const dr_run *r, char *out, size_t cap)
{
    if (r->exited)
        snprintf(out, cap, "exited with code %d", r->exit_code);
    else
        snprintf(out, cap, "was killed by signal %d (%s)", r->term_signal, strsignal(r->term_signal));
}

/* the last line of the job's stderr */
static const char *last_err_line(const dr_run *r)
{
    const char *p = strrchr(r->err_tail, '\n');
    return p ? p + 1 : r->err_tail;
}

static double allowed_int(const dr_run *r)
{
    double c = floor(r->allowed + 0.01);
    return c < 1 ? 1 : c;
}

/* no batch seen: a job that failed, else a verdict from the outside figures alone */
static void decide_outside(const dr_run *r, dr_result *a)
{
    char *v = a->verdict, *f = a->figures, *nx = a->next;
    size_t vc = sizeof a->verdict, fc = sizeof a->figures, nc = sizeof a->next;
    const char *why = !r->hooked ? "no Python process of the job loaded the hook (not Python, or run with -I/-S/-E)"
                                 : "the job never iterated a torch DataLoader or a stoker.Loader";
    if (r->failed) {
        char how[96];
        job_status(r, how, sizeof how);
        snprintf(v, vc, "the job failed");
        snprintf(f, fc, "it %s after %.1f s, before any training step: %.400s", how, a->run_s,
                 r->err_tail[0] ? last_err_line(r) : "(nothing on stderr)");
        snprintf(nx, nc, "fix the error its last stderr lines show (above), then run it under the doctor again");
        return;
    }
    double T = a->nticks * r->interval, busy = a->cpu_total + a->rq_total, disk = 0;
    for (int j = 0; j < DR_NROLES; j++)
        disk += a->dth[j];
    double gu = 0;
    for (int g = 0; g < r->ngpu; g++)
        gu = a->gutil[g] > gu ? a->gutil[g] : gu;
    if (a->nticks < TH_OUTSIDE_TICKS) {
        snprintf(v, vc, "unknown");
        snprintf(f, fc, "no training step seen: %s; the job ran %.1f s, too short to judge from outside", why,
                 a->run_s);
        snprintf(nx, nc, "run the training loop itself under the doctor, for a few seconds at least");
        return;
    }
    snprintf(f, fc, "no training step seen (%s); from outside, over %.1f s: its processes used %.2f of the %g "
             "core%s they may use (main thread %.2f), waited for a CPU %.2f, had %.2f threads in disk wait%s",
             why, T, a->cpu_total, r->allowed, r->allowed == 1 ? "" : "s", a->cpu[DR_MAIN], a->rq_total, disk,
             a->gpu_used || r->gpu_ctx == 1 ? "" : "; no GPU");
    if (r->gpu_ctx == 1 && gu >= TH_GPU_SMALL_UTIL) {
        snprintf(v, vc, "compute-bound");
        snprintf(f + strlen(f), fc - strlen(f), "; GPU busy %.0f%%", gu);
        snprintf(nx, nc, "mixed precision (torch.autocast), or a faster GPU");
    } else if (disk >= TH_OUTSIDE_DISK && disk > busy) {
        snprintf(v, vc, "I/O-bound");
        snprintf(nx, nc, "read larger sequential blocks (pack the data into shards), or faster storage");
    } else if (busy >= TH_OUTSIDE_BUSY) {
        snprintf(v, vc, "compute-bound");
        if (busy < r->allowed - 0.5 && a->cpu[DR_MAIN] + a->rq[DR_MAIN] >= 0.8 * busy) /* one thread works */
            snprintf(nx, nc, "its work runs on one thread of %g allowed cores: more threads "
                     "(torch.set_num_threads(%d)), or run it on a GPU", r->allowed, (int)allowed_int(r));
        else
            snprintf(nx, nc, "run it on a GPU, or give it more cores");
    } else {
        snprintf(v, vc, "unknown");
        snprintf(f + strlen(f), fc - strlen(f), ": it neither computed nor read much (sleeps, network, locks?)");
        snprintf(nx, nc, "run the training loop itself under the doctor");
    }
}

static void decide_steps(const dr_run *r, dr_result *a);

/* The loading model behind every worker count the doctor suggests. From CPU accounting (exact,
 * and unmoved by other processes' load): cb, the loader's CPU-seconds per batch (the worker
 * processes' CPU, or with num_workers=0 the main thread's CPU while it waits), and sc, the
 * main process's CPU-seconds per step outside the waits. On C allowed cores, with W workers that
 * each deliver 1/cb batches/s while they have a core, the job runs at
 *     rate(W) = min(1/step, W/cb, C/(sc + cb))
 * so the count that feeds the step is the smallest W reaching the minimum of the other two terms;
 * more only share the same cores. When C/(sc+cb) is the smaller term no count can feed the step. */
typedef struct wmodel {
    double cb, sc, step;        /* s per batch: loader CPU, main CPU, the step itself */
    double rate_step, rate_cores, rate_now, rate_want;
    int want, cpu_bound;
} wmodel;

static int worker_model(const dr_run *r, const dr_result *a, wmodel *m)
{
    memset(m, 0, sizeof *m);
    if (a->nsteps < 4 || a->tick_s <= 0 || strcmp(a->kind, "torch"))
        return 0;
    double n = a->nsteps, load, main = a->cpu[DR_MAIN] * a->tick_s;
    if (a->workers > 0) {
        load = a->cpu[DR_WORKER] * a->tick_s;
    } else {
        load = a->main_wait_cpu;
        main -= load;
    }
    m->cb = load / n;
    m->sc = main > 0 ? main / n : 0;
    if (m->cb <= 1e-5)
        return 0;
    m->step = m->sc > 1e-4 ? m->sc : 1e-4;
    if (a->gpu_used && a->between_med - a->wait_med > m->step) /* a GPU step is not CPU time */
        m->step = a->between_med - a->wait_med;
    m->rate_step = 1 / m->step;
    m->rate_cores = r->allowed / (m->sc + m->cb);
    double best = m->rate_step < m->rate_cores ? m->rate_step : m->rate_cores;
    m->cpu_bound = m->rate_cores < m->rate_step;
    m->want = (int)ceil(m->cb * best * 0.98);
    if (m->want < 1)
        m->want = 1;
    /* cores the limit, two or more of them: the count that balances the model leaves a core idle
     * whenever one of its workers waits on its queue or on the main process's hand-off. Two to
     * four workers per core keep the cores busy (docs/doctor.md, "Worker counts"): fewer than two
     * per core become two, a count in that range stays, more than four become four. On one core
     * the step and the worker take turns whatever the count. */
    if (m->cpu_bound && r->allowed >= 2) {
        int two = (int)ceil(2 * r->allowed), four = (int)floor(4 * r->allowed);
        int W = a->workers;
        m->want = W < two ? two : W > four ? four : W;
    }
    /* num_workers=0: the main thread loads in line, so loading and the step take turns */
    double now = a->workers > 0 ? a->workers / m->cb : 1 / (m->sc + m->cb);
    m->rate_now = now < best ? now : best;
    m->rate_want = m->want / m->cb < best ? m->want / m->cb : best;
    return 1;
}

/* "workers W -> N: <why>" from the model; 0 when it has nothing to say */
static int worker_advice(const dr_run *r, const dr_result *a, char *nx, size_t nc)
{
    wmodel m;
    if (!worker_model(r, a, &m))
        return 0;
    int W = a->workers;
    if (m.want > W || (m.want < W && m.cpu_bound)) {
        int n = snprintf(nx, nc, "workers %d -> %d: the loader needs %.1f ms of CPU per batch, the step %.1f ms; ",
                         W, m.want, 1e3 * m.cb, 1e3 * m.sc);
        if (n < 0 || (size_t)n >= nc)
            return 1;
        if (m.cpu_bound)
            snprintf(nx + n, nc - n, "on the %g core%s the job may use that is at most %.0f batches/s, which %d "
                     "worker%s deliver%s (now %.0f/s)%s; the step alone could take %.0f/s: beyond that, more cores "
                     "or lighter augmentation", r->allowed, r->allowed == 1 ? "" : "s", m.rate_cores, m.want,
                     m.want == 1 ? "" : "s",
                     m.want == 1 ? "s" : "", m.rate_now,
                     m.want < W ? ", more only share the same cores" : "", m.rate_step);
        else
            snprintf(nx + n, nc - n, "%d worker%s deliver%s %.0f batches/s (now %.0f/s), as many as the step takes",
                     m.want, m.want == 1 ? "" : "s", m.want == 1 ? "s" : "", m.rate_want, m.rate_now);
        return 1;
    }
    if (m.cpu_bound) {
        snprintf(nx, nc, "more cores or lighter augmentation: the loader needs %.1f ms of CPU per batch and the "
                 "step %.1f ms, so the %g cores the job may use give at most %.0f batches/s, which %d worker%s "
                 "already deliver", 1e3 * m.cb, 1e3 * m.sc, r->allowed, m.rate_cores, W, W == 1 ? "" : "s");
        return 1;
    }
    return 0;
}

/* steps under a millisecond with the loader keeping up: the per-batch overheads are the job */
static void decide_tiny(dr_result *a, double cpu_step)
{
    snprintf(a->verdict, sizeof a->verdict, "too small for the hardware");
    snprintf(a->figures, sizeof a->figures,
             "a step takes %.2f ms of CPU, loading included (%.2f ms between batches, median, of which %.2f ms "
             "waiting for the loader): the fixed costs of each batch (the Python loop, collate, "
             "operator dispatch, kernel launches) are as large as its work",
             1e3 * cpu_step, 1e3 * a->between_med, 1e3 * a->wait_med);
    int b = a->bs > 0 ? a->bs : 1;
    snprintf(a->next, sizeof a->next,
             "batch %d -> %d or more (the per-batch cost stays, the work per batch grows), merge several "
             "steps' work into one, or run on a smaller device; not more loader processes: each would add "
             "an inter-process hop per batch that costs more than the step",
             b, b * 8);
}

/* the busiest GPU's mean utilisation (%), and the memory in use (max) and in all, bytes */
static double gpu_busy(const dr_run *r, const dr_result *a, double *used, double *total)
{
    double gu = 0;
    *used = *total = 0;
    for (int g = 0; g < r->ngpu; g++) {
        gu = a->gutil[g] > gu ? a->gutil[g] : gu;
        *used += a->gmem[g];
        *total += r->gpus[g].mem_total;
    }
    return gu;
}

static long pow2_up(double v)
{
    long p = 1;
    while (p < v && p < (1L << 30))
        p *= 2;
    return p;
}

/* short steps on a GPU that is mostly idle, the loader keeping up: each step launches its kernels
 * one by one from Python, and they finish faster than the next is launched. The GPU's work per
 * step grows with the batch while the launches stay as many, so the batch that would keep it busy
 * is about B * TH_LAUNCH_FILL / busy%, within the memory it has */
static void decide_launch(const dr_run *r, dr_result *a, double gu, double input)
{
    double gm, gt;
    gpu_busy(r, a, &gm, &gt);
    double step = a->between_med, gpu_ms = 1e3 * step * gu / 100;
    snprintf(a->verdict, sizeof a->verdict, "too small for the GPU (launch-bound)");
    snprintf(a->figures, sizeof a->figures,
             "GPU busy %.0f%% of the time while a step takes %.2f ms (median between batches, of which %.2f ms "
             "waiting for data): about %.2f ms of GPU work a step; the main thread on a CPU %.0f%% of the "
             "time: the GPU waits for the Python loop to launch kernels that are too short to fill it",
             gu, 1e3 * step, 1e3 * a->wait_med, gpu_ms, 100 * a->cpu[DR_MAIN]);
    const char *graph = "launch the step as a CUDA graph (torch.compile(mode=\"reduce-overhead\"), "
                        "torch.cuda.CUDAGraph)";
    int b = a->bs;
    long want = 0;
    if (b > 0) {
        want = pow2_up(b * TH_LAUNCH_FILL / (gu > 1 ? gu : 1));
        if (want < 2L * b)
            want = 2L * b;
        double cap = gm > 0 && gt > 0 ? b * LAUNCH_MEM_USE * gt / gm : 0; /* all of it grows with B: an underestimate */
        if (cap > 0 && want > cap) {
            want = 1;
            while (want * 2 <= cap)
                want *= 2;
        }
    }
    size_t n;
    if (b <= 0)
        n = (size_t)snprintf(a->next, sizeof a->next, "a larger batch, merge several steps' work into one (fewer, "
                             "larger kernels), or %s", graph);
    else if (want > b)
        n = (size_t)snprintf(a->next, sizeof a->next, "batch %d -> %ld (scale the learning rate with it; %.1f of "
                             "%.1f GiB in use), merge several steps' work into one (fewer, larger kernels), or %s",
                             b, want, gm / 1073741824.0, gt / 1073741824.0, graph);
    else
        n = (size_t)snprintf(a->next, sizeof a->next, "%s: a larger batch does not fit (%.1f of %.1f GiB in use "
                             "at batch %d)", graph, gm / 1073741824.0, gt / 1073741824.0, b);
    if (n < sizeof a->next)
        snprintf(a->next + n, sizeof a->next - n, "; not more loader workers: the loader keeps up (waiting %.0f%% "
                 "of the time)", 100 * input);
}

/* a CPU-only compute-bound job: would its input side keep up with the step on a GPU? */
static void gpu_projection(const dr_run *r, const dr_result *a, char *nx, size_t nc)
{
    double step = a->between_med - a->wait_med, lo, hi;
    char as[160];
    if (r->gpu_step_ms > 0) {
        lo = hi = r->gpu_step_ms / 1e3;
        snprintf(as, sizeof as, "%.1f ms, as --gpu-step-ms says", 1e3 * lo);
    } else {
        lo = step / GPU_SPEEDUP_HI;
        hi = step / GPU_SPEEDUP_LO;
        snprintf(as, sizeof as, "%.1f-%.1f ms, assuming it runs %.0f-%.0fx faster than this CPU's %.1f ms "
                 "(--gpu-step-ms sets it)", 1e3 * lo, 1e3 * hi, GPU_SPEEDUP_LO, GPU_SPEEDUP_HI, 1e3 * step);
    }
    wmodel m;
    if (!worker_model(r, a, &m)) {
        snprintf(nx, nc, "run the step on a GPU (there it would take %s)", as);
        return;
    }
    int W = a->workers;
    /* on a GPU the main process's CPU is small: each worker delivers 1/cb while it has a core;
     * with num_workers=0 the main thread loads in line, between the steps */
    double cores = r->allowed - 1 > 1 ? r->allowed - 1 : 1;
    double deliver = W > 0 ? (W < cores ? W : cores) / m.cb : 1 / m.cb;
    double share = W > 0 ? (1 / deliver > lo ? 1 - lo / (1 / deliver) : 0) : m.cb / (m.cb + lo);
    if (share < TH_INPUT) {
        if (W > 0)
            snprintf(nx, nc, "run the step on a GPU: there it would take %s; the input side keeps up (the loader "
                     "needs %.1f ms of CPU per batch, %d worker%s deliver %.0f batches/s)", as, 1e3 * m.cb, W,
                     W == 1 ? "" : "s", deliver);
        else
            snprintf(nx, nc, "run the step on a GPU: there it would take %s; the input side keeps up (the main "
                     "thread loads each batch in %.1f ms of CPU, %.0f%% of such a step)", as, 1e3 * m.cb,
                     100 * share);
        return;
    }
    int want = (int)ceil(m.cb / lo);
    char now[160];
    if (W > 0)
        snprintf(now, sizeof now, "%d worker%s deliver %.0f batches/s against the %.0f/s the GPU could take", W,
                 W == 1 ? "" : "s", deliver, 1 / lo);
    else
        snprintf(now, sizeof now, "the main thread loads each batch in line, between the steps: %.0f%% of the "
                 "time waiting", 100 * share);
    if (want > W)
        snprintf(nx, nc, "run the step on a GPU, and then the input side: there the step would take %s, but the "
                 "loader needs %.1f ms of CPU per batch (%s): workers %d -> %d%s", as, 1e3 * m.cb, now, W, want,
                 want + 1 > r->allowed ? ", which needs more cores than the job may use now, or lighter augmentation"
                                       : "");
    else /* the workers are already enough; the cores they can have are not: fewer would deliver less */
        snprintf(nx, nc, "run the step on a GPU, and then the input side: there the step would take %s, but the "
                 "loader needs %.1f ms of CPU per batch (%s): %d worker%s would keep up on %d free cores, beside "
                 "the main process; the job may use %g: more cores or lighter augmentation, not fewer workers",
                 as, 1e3 * m.cb, now, want, want == 1 ? "" : "s", want, r->allowed);
}

/* A CPU-only step on a machine whose other processes hold the CPU: when the step runs on several
 * threads (torch's intra-op pool: the main process's other threads compute) and they wait for a
 * core about as long as they run, every operator waits for its slowest thread, so one thread per
 * core the job actually gets is faster than the pool sized for the cores it may use. The GPU
 * projection would start from that slowed step, so it is left for the next run. */
static int threads_advice(const dr_run *r, const dr_result *a, char *nx, size_t nc)
{
    double free_cores = r->allowed - a->cpu_total, c = a->rq_total < free_cores ? a->rq_total : free_cores;
    double run = a->cpu[DR_MAIN] + a->cpu[DR_OTHER], wait = a->rq[DR_MAIN] + a->rq[DR_OTHER];
    if (!a->nticks || c < TH_CONTENTION * r->allowed || a->cpu[DR_OTHER] < TH_POOL * a->cpu[DR_MAIN] ||
        wait < TH_POOL_WAIT * run)
        return 0;
    int k = (int)floor(a->cpu_total + 0.25);
    if (k < 1)
        k = 1;
    snprintf(nx, nc, "OMP_NUM_THREADS=%d (or torch.set_num_threads(%d)): the step's threads ran %.2f cores and "
             "waited for one %.2f cores' worth while other processes held the CPU; they meet at every operator, "
             "so each waits for the slowest, and %d thread%s for the %.2f cores the job got wait%s for none; "
             "then run the doctor again (a GPU's step is projected from this CPU's)",
             k, k, run, wait, k, k == 1 ? "" : "s", a->cpu_total, k == 1 ? "s" : "");
    return 1;
}

/* other processes holding the CPU: the job's threads waited for one while it ran on fewer cores
 * than it may use (its own oversubscription is not counted: that part is the job's) */
static void contention(const dr_run *r, dr_result *a)
{
    double free_cores = r->allowed - a->cpu_total, c = a->rq_total < free_cores ? a->rq_total : free_cores;
    if (!a->nticks || c < TH_CONTENTION * r->allowed)
        return;
    size_t n = strlen(a->figures);
    snprintf(a->figures + n, sizeof a->figures - n, "; other processes held the CPU: the job ran on %.2f of its "
             "%g core%s and waited for one %.2f cores' worth", a->cpu_total, r->allowed, r->allowed == 1 ? "" : "s", c);
    if (r->psi_ok) {
        n = strlen(a->figures);
        snprintf(a->figures + n, sizeof a->figures - n, " (CPU pressure %.0f%%)", 100 * a->psi[0]);
    }
}

static void decide(const dr_run *r, dr_result *a)
{
    decide_steps(r, a);
    if (!r->failed || a->nsteps)
        contention(r, a);
    if (r->failed && a->nsteps) {
        char how[96];
        size_t n = strlen(a->figures);
        job_status(r, how, sizeof how);
        snprintf(a->figures + n, sizeof a->figures - n, "; then the job failed: it %s after %.1f s: %.200s", how,
                 a->run_s, r->err_tail[0] ? last_err_line(r) : "(nothing on stderr)");
    }
}

static void decide_steps(const dr_run *r, dr_result *a)
{
    char *v = a->verdict, *f = a->figures, *nx = a->next;
    size_t vc = sizeof a->verdict, fc = sizeof a->figures, nc = sizeof a->next;
    if (!a->nsteps) {
        decide_outside(r, a);
        return;
    }
    double W = a->wall - a->eval_s > 0 ? a->wall - a->eval_s : 1; /* training only */
    double input = (a->wait_total + a->iter_total) / W;
    a->input_share = input;
    a->save_share = a->save_total / W;
    a->log_share = a->wr_s[1] / W;
    a->other_share = a->wr_s[2] / W;
    a->sync_share = a->sync_time / W;
    double steps = a->csteps > 0 ? a->csteps : 1;
    double per_step = a->calls_total / steps;
    int gpu = a->gpu_used;
    double calls_used = gpu ? a->calls_dev / steps : per_step;
    int sync_count = calls_used >= TH_SYNC_PER_STEP;

    double best = 0;
    int pick = 0; /* 1 input, 2 checkpoint, 3 sync */
    if (input >= TH_INPUT && input > best) {
        best = input;
        pick = 1;
    }
    if (a->save_share >= TH_CKPT && a->save_share > best) {
        best = a->save_share;
        pick = 2;
    }
    if (a->sync_share >= TH_SYNC_SHARE && a->sync_share > best) {
        best = a->sync_share;
        pick = 3;
    }
    if (a->log_share >= TH_LOG && a->log_share > best) {
        best = a->log_share;
        pick = 4;
    }
    if (a->other_share >= TH_LOG && a->other_share > best) {
        best = a->other_share;
        pick = 5;
    }
    if (!pick && sync_count)
        pick = 3;
    /* the job's CPU per step (the loader's included): CPU accounting, which a loaded machine does
     * not stretch as it stretches the wall clock between batches */
    double cpu_step = a->cpu_total * a->tick_s / a->nsteps;
    double gm, gt, gu = gpu_busy(r, a, &gm, &gt);
    if (!pick && gpu && r->nvml && r->ngpu && a->nticks >= TH_OUTSIDE_TICKS && a->nsteps >= TH_TINY_STEPS &&
        gu < TH_LAUNCH_UTIL && a->between_med > 0 && a->between_med < TH_LAUNCH_STEP) {
        decide_launch(r, a, gu, input);
        return;
    }
    if (pick <= 1 && a->nsteps >= TH_TINY_STEPS && a->tick_s > 0 && cpu_step < TH_TINY_STEP &&
        a->between_med < TH_TINY_WALL) {
        decide_tiny(a, cpu_step);
        return;
    }
    int torch = strcmp(a->kind, "stoker") != 0;
    int cores = (int)allowed_int(r);
    if (pick == 1) {
        const char *sub;
        /* the job's own runnable threads (running or waiting) against the cores it may use:
         * a loader that waits for a CPU because the job oversubscribes its cores is starved; one
         * that waits because other processes hold the machine is still doing CPU (decode) work */
        double runnable = a->cpu_total + a->rq_total;
        /* the wait judged against the cores the loader can have: with more workers than cores,
         * each worker's share of waiting stays small however starved the cores are */
        double ld_cores = a->ld_n < r->allowed ? a->ld_n : r->allowed;
        int waits = a->ld_rq >= TH_STARVED || a->ld_rq * a->ld_n >= TH_STARVED * ld_cores;
        if (waits && a->ld_rq >= a->ld_busy && runnable > r->allowed) {
            sub = "CPU-starved";
            if (!(torch && worker_advice(r, a, nx, nc)))
                snprintf(nx, nc, "give the job more cores (it may use %g; its loader waits for one)", r->allowed);
        } else if (a->ld_disk >= TH_STORAGE) {
            sub = "storage";
            snprintf(nx, nc, torch ? "pack into shards and use stoker.DataLoader (large sequential reads)"
                                   : "put the shards on faster storage or in the page cache");
        } else if (a->ld_busy + a->ld_rq >= TH_DECODE) {
            sub = "decode";
            if (torch && worker_advice(r, a, nx, nc))
                ;
            else if (torch && a->workers < cores)
                snprintf(nx, nc, "workers %d -> %d", a->workers, cores);
            else if (torch)
                snprintf(nx, nc, "pack into shards and use stoker.DataLoader (stoker.Loader decodes only the crop)");
            else
                snprintf(nx, nc, "more cores for stoker's decode threads");
        } else {
            sub = "loader waits";
            snprintf(nx, nc, "look at the Dataset's __getitem__: the loader is neither on a CPU nor in disk wait");
        }
        snprintf(v, vc, "input-bound (%s)", sub);
        snprintf(f, fc,
                 "waiting for the next batch %.0f%% of the time (median %.1f ms, p99 %.1f ms per step; "
                 "epoch starts %.0f%% of the wait); "
                 "the loader (%s): on a CPU %.0f%%, waiting for a CPU %.0f%%, in disk wait %.0f%%",
                 100 * input, 1e3 * a->wait_med, 1e3 * a->wait_p99,
                 a->wait_total + a->iter_total > 0
                     ? 100 * a->epoch_start_mean * a->nepochs / (a->wait_total + a->iter_total) : 0,
                 a->loader_role, 100 * a->ld_busy,
                 100 * a->ld_rq, 100 * a->ld_disk);
    } else if (pick == 2) {
        snprintf(v, vc, "checkpoint-bound");
        double each = a->nsave ? a->save_total / a->nsave : 0;
        double stepc = a->between_med - a->wait_med;
        if (stepc <= 0)
            stepc = a->between_med > 0 ? a->between_med : 1e-3;
        long every = (long)(a->steps_per_save + 0.5);
        if (every < 1)
            every = 1;
        long want = nice_up(each * (1 - CKPT_TARGET) / CKPT_TARGET / stepc);
        if (want <= every)
            want = nice_up(every * 2.0);
        char kinds[96];
        save_kinds(a, kinds, sizeof kinds);
        snprintf(f, fc, "checkpoints %.0f%% of the time: %d saves (%s) of %.1f MB, %.0f ms each (%.0f ms in the "
                 "save calls, %.0f ms in the job's own writes and fsync to the file), every %ld steps",
                 100 * a->save_share, a->nsave, kinds, a->nsave ? a->save_bytes / a->nsave / 1e6 : 0, 1e3 * each,
                 a->nsave ? 1e3 * a->save_call_s / a->nsave : 0, a->nsave ? 1e3 * a->wr_s[0] / a->nsave : 0, every);
        snprintf(nx, nc, "checkpoint every %ld steps instead of %ld (saves then take ~%.0f%%), or save in the "
                 "background so the step does not wait: torch.distributed.checkpoint.async_save (torch >= 2.3), "
                 "or a thread that writes a CPU copy of the state dict", want, every, 100 * CKPT_TARGET);
    } else if (pick == 4 || pick == 5) {
        int k = pick == 4 ? 1 : 2;
        snprintf(v, vc, pick == 4 ? "logging-bound" : "write-bound");
        snprintf(f, fc, "writing %s %.0f%% of the time: %.1f MB in %.1f s (%.2f ms per step), outside any checkpoint",
                 pick == 4 ? "log files (.log .csv .txt .json, TensorBoard events)" : "files (not checkpoints or logs)",
                 100 * (pick == 4 ? a->log_share : a->other_share), a->wr_b[k] / 1e6, a->wr_s[k],
                 1e3 * a->wr_s[k] / steps);
        snprintf(nx, nc, "write every N steps (aggregate on the device, log the mean), without flush/fsync per "
                 "line, or hand the writes to a background thread");
    } else if (pick == 3) {
        snprintf(v, vc, "sync-bound");
        snprintf(f, fc,
                 "%.0f host-syncing calls per step%s (.item() %.0f, .cpu() %.0f, .numpy() %.0f, "
                 "cuda.synchronize %.0f), %.1f%% of the time inside them",
                 calls_used, gpu ? " on GPU tensors" : "", a->calls[0] / steps, a->calls[1] / steps,
                 a->calls[2] / steps, a->calls[3] / steps, 100 * a->sync_share);
        if (gpu && a->h2d_page > a->h2d_pin && a->h2d_page > 0)
            snprintf(nx, nc, "pin memory (pin_memory=True): %.0f pageable host-to-device copies per step",
                     a->h2d_page / steps);
        else
            snprintf(nx, nc, "keep per-step values on the device and read them every 100 steps, not every step");
    } else {
        double compute = 1 - input - a->save_share - a->sync_share - a->log_share - a->other_share;
        if (gpu && r->nvml && r->ngpu && gu < TH_GPU_SMALL_UTIL && gt > 0 && gm / gt < TH_GPU_SMALL_MEM) {
            snprintf(v, vc, "too small for the GPU");
            snprintf(f, fc, "GPU busy %.0f%% of the time, %.1f of %.1f GiB in use, while the job waits for "
                     "data only %.0f%% of the time", gu, gm / 1073741824.0, gt / 1073741824.0, 100 * input);
            snprintf(nx, nc, "batch %d -> %d", a->bs, a->bs * 2 > 0 ? a->bs * 2 : 2);
        } else {
            snprintf(v, vc, "compute-bound");
            snprintf(f, fc, "the step computes %.0f%% of the time (median %.1f ms between batches, of which %.1f ms "
                     "waiting for data)%s", 100 * compute, 1e3 * a->between_med, 1e3 * a->wait_med,
                     gpu && r->ngpu ? "" : "; on the CPU");
            if (gpu && !a->ac16 && !a->acbf)
                snprintf(nx, nc, "mixed precision: torch.autocast(\"cuda\", dtype=torch.bfloat16)");
            else if (gpu)
                snprintf(nx, nc, "a faster GPU or more GPUs: the input side keeps up");
            else if (!threads_advice(r, a, nx, nc))
                gpu_projection(r, a, nx, nc);
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
    decide(r, a);
    snprintf(a->line, sizeof a->line, "verdict: %s: %s; next: %s", a->verdict, a->figures, a->next);
    return a;
}

/* ---- the text report ------------------------------------------------------------------------- */
static double mb(double b)
{
    return b / 1e6;
}

static double gib(double b)
{
    return b / 1073741824.0;
}

void dr_report(const dr_run *r, const dr_result *a, FILE *f)
{
    fprintf(f, "\n== stoker doctor: `");
    for (char **p = r->argv; *p; p++)
        fprintf(f, "%s%s", p == r->argv ? "" : " ", *p);
    fprintf(f, "`\n");
    if (r->t_stop)
        fprintf(f, "   ran %.1f s; stopped by the doctor after %.1f s (%s)", a->run_s,
                (double)(r->t_stop - r->t_start) / 1e9,
                r->stop_signal == SIGINT ? "SIGINT" : r->stop_signal == SIGTERM ? "SIGINT, then SIGTERM"
                                                                               : "SIGINT, SIGTERM, then SIGKILL");
    else
        fprintf(f, "   ran %.1f s", a->run_s);
    if (r->exited)
        fprintf(f, "; exit status %d\n", r->exit_code);
    else
        fprintf(f, "; killed by signal %d (%s)\n", r->term_signal, strsignal(r->term_signal));
    if (r->failed) {
        char how[96];
        job_status(r, how, sizeof how);
        fprintf(f, "   FAILED     the job %s after %.1f s (%d training step%s)%s\n", how, a->run_s, a->nsteps,
                a->nsteps == 1 ? "" : "s", r->err_tail[0] ? "; its last stderr lines:" : "; it wrote nothing to stderr");
        for (const char *p = r->err_tail; *p;) {
            const char *e = strchr(p, '\n');
            int n = e ? (int)(e - p) : (int)strlen(p);
            fprintf(f, "              | %.*s\n", n, p);
            p += n + (e ? 1 : 0);
        }
        if (r->exited && r->exit_code == 2)
            fprintf(f, "              (the doctor exits 125 for it: its own exit status 2 means a usage error)\n");
    }
    fprintf(f, "   training window %.1f s, %d batches", a->wall, a->nsteps);
    if (!r->hooked)
        fprintf(f, " (no Python process of the job loaded the hook)");
    fprintf(f, "\n");

    fprintf(f, "1. GPU        ");
    if (!r->nvml)
        fprintf(f, "no GPU figures: %s%s\n", r->nvml_why,
                r->nvidia_dev ? "" : "; no /dev/nvidia0");
    else if (!r->ngpu)
        fprintf(f, "%s\n", r->nvml_why);
    else
        for (int g = 0; g < r->ngpu; g++)
            fprintf(f, "%sGPU%d %s: busy %.0f%% on average (max %.0f%%), memory %.1f of %.1f GiB at most\n",
                    g ? "              " : "", g, r->gpus[g].name, a->gutil[g], a->gutil_max[g], gib(a->gmem[g]),
                    gib(r->gpus[g].mem_total));
    fprintf(f, "              the job %s a GPU (%s)\n",
            r->gpu_ctx == 1 ? "holds a context on" : a->gpu_used ? "uses" : "does not use",
            r->gpu_ctx == 1 ? "NVML lists its process, or it has /dev/nvidiaN open" : a->gpu_used ? "CUDA tensors in the steps" : "no GPU device file open, no CUDA tensor");

    if (!a->nticks)
        fprintf(f, "   (the job ended before the first sample, %.0f ms after its start: no CPU, memory, disk "
                "or GPU figures)\n", 1e3 * r->interval);
    fprintf(f, "2. CPU        the job may use %g core%s (affinity %d of %d", r->allowed, r->allowed == 1 ? "" : "s",
            r->affinity, r->ncpu_online);
    if (r->quota > 0)
        fprintf(f, ", cgroup quota %.2f", r->quota);
    else
        fprintf(f, ", no cgroup quota");
    fprintf(f, "); it used %.2f on average, the machine %.2f\n", a->cpu_total, a->sys_cores);
    fprintf(f, "              ");
    for (int j = 0; j < DR_NROLES; j++)
        fprintf(f, "%s%s (%.0f thr) %.2f", j ? ", " : "", role_name[j], a->nth[j], a->cpu[j]);
    fprintf(f, " cores\n              waiting for a CPU: %.2f cores' worth of runnable threads", a->rq_total);
    if (r->psi_ok)
        fprintf(f, "; pressure (some): cpu %.0f%%, io %.0f%%, memory %.0f%%\n", 100 * a->psi[0], 100 * a->psi[1],
                100 * a->psi[2]);
    else
        fprintf(f, "; no /proc/pressure on this kernel\n");
    fprintf(f, "   memory     %.1f GiB available at least (of %.1f GiB)", gib(a->mem_avail_min), gib(r->mem_total));
    if (r->mem_limit > 0)
        fprintf(f, ", cgroup limit %.1f GiB", gib(r->mem_limit));
    fprintf(f, ", swap in use %.2f GiB; job RSS %.2f GiB at most (summed over its processes)\n",
            gib(a->swap_used_max), gib(a->rss_max));
    fprintf(f, "   disk       the job read %.1f MB and wrote %.1f MB of storage (its processes, /proc/PID/io); "
            "devices, totals of all processes:", mb(a->job_rd), mb(a->job_wr));
    int any = 0;
    for (int i = 0; i < r->ndevs; i++) {
        const dr_dev *d = &r->devs[i];
        double ri = (double)(d->r1[0] - d->r0[0]), rs = (double)(d->r1[1] - d->r0[1]) * 512;
        double wi = (double)(d->r1[2] - d->r0[2]), ws = (double)(d->r1[3] - d->r0[3]) * 512;
        if (!d->touched && ri + wi == 0)
            continue;
        double t = a->run_s > 0 ? a->run_s : 1;
        fprintf(f, "\n              %s%s: read %.1f MB/s (%.0f IOPS), write %.1f MB/s (%.0f IOPS)", d->name,
                d->touched ? " (job's files)" : "", mb(rs) / t, ri / t, mb(ws) / t, wi / t);
        any = 1;
    }
    fprintf(f, "%s\n", any ? "" : " none active");
    fprintf(f, "   network    received %.2f MB/s, sent %.2f MB/s, without lo (%s)\n", mb(a->net_rx), mb(a->net_tx),
            r->net_shared == 0 ? "the job's own network namespace"
                               : "namespace total: the job shares its network namespace with the doctor and other "
                                 "processes, whose traffic this includes");

    fprintf(f, "3. data       ");
    if (!a->nsteps)
        fprintf(f, "no batches seen (%s)\n", r->hooked ? "no DataLoader / stoker.Loader iterated" : "no hook");
    else {
        fprintf(f, "%s loader, %s %d%s: waiting for the next batch %.0f%% of the time\n", a->kind,
                strcmp(a->kind, "stoker") ? "num_workers" : "decode threads", a->workers,
                a->pin ? ", pinned" : "", 100 * a->input_share);
        fprintf(f, "              per step: wait median %.1f ms, p99 %.1f ms; between batches median %.1f ms, "
                "p99 %.1f ms\n", 1e3 * a->wait_med, 1e3 * a->wait_p99, 1e3 * a->between_med, 1e3 * a->between_p99);
        fprintf(f, "              first batch %.0f ms; %d epoch start%s, %.0f ms each (iterator + first batch)\n",
                1e3 * a->first_batch, a->nepochs, a->nepochs == 1 ? "" : "s", 1e3 * a->epoch_start_mean);
        fprintf(f, "              the loader (%s): on a CPU %.0f%%, waiting for a CPU %.0f%%, in disk wait %.0f%%\n",
                a->loader_role, 100 * a->ld_busy, 100 * a->ld_rq, 100 * a->ld_disk);
        if (a->eval_batches)
            fprintf(f, "              evaluation: %d batch%s from %d other loader%s in %d pass%s, %.1f s (%.0f%% of "
                    "the window); the figures above and the verdict are the training loader's\n",
                    a->eval_batches, a->eval_batches == 1 ? "" : "es", a->nloaders - 1, a->nloaders == 2 ? "" : "s",
                    a->eval_passes, a->eval_passes == 1 ? "" : "es", a->eval_s,
                    a->wall > 0 ? 100 * a->eval_s / a->wall : 0);
    }
    fprintf(f, "4. batch      ");
    if (a->nsteps)
        fprintf(f, "batch size %d (%s)", a->bs, a->dtype);
    else
        fprintf(f, "no batches seen");
    if (r->nvml && r->ngpu)
        for (int g = 0; g < r->ngpu; g++)
            fprintf(f, "; GPU%d headroom %.1f GiB", g, gib(r->gpus[g].mem_total - a->gmem[g]));
    else
        fprintf(f, "; GPU memory headroom unknown (no NVML)");
    fprintf(f, "\n");
    double steps = a->csteps > 0 ? a->csteps : 1;
    fprintf(f, "5. copies     per step: .item() %.1f, .cpu() %.1f, .numpy() %.1f, cuda.synchronize %.1f "
            "(%.1f on GPU tensors); %.1f%% of the time inside them\n", a->calls[0] / steps, a->calls[1] / steps,
            a->calls[2] / steps, a->calls[3] / steps, a->calls_dev / steps, 100 * a->sync_share);
    fprintf(f, "              host-to-device copies per step: %.1f pinned, %.1f pageable (%.1f MB)\n",
            a->h2d_pin / steps, a->h2d_page / steps, mb(a->h2d_bytes / steps));
    if (a->nsave) {
        char kinds[96];
        save_kinds(a, kinds, sizeof kinds);
        fprintf(f, "   writes     checkpoints: %d (%s), %.1f MB and %.0f ms each (save call %.0f ms, file write + "
                "fsync %.0f ms), every %.0f steps: %.0f%% of the time\n", a->nsave, kinds,
                mb(a->save_bytes / a->nsave), 1e3 * a->save_total / a->nsave, 1e3 * a->save_call_s / a->nsave,
                1e3 * a->wr_s[0] / a->nsave, a->steps_per_save, 100 * a->save_share);
    } else {
        fprintf(f, "   writes     no checkpoint (torch.save, np.save, safetensors, a .pt/.ckpt/.npy/.pkl/... file)\n");
    }
    fprintf(f, "              log files %.1f MB in %.2f s (%.1f%%), other files %.1f MB in %.2f s (%.1f%%); "
            "the job's processes wrote %.1f MB of storage (/proc/PID/io)\n", mb(a->wr_b[1]), a->wr_s[1],
            100 * a->log_share, mb(a->wr_b[2]), a->wr_s[2], 100 * a->other_share, mb(a->job_wr));
    fprintf(f, "6. precision  ");
    if (a->nsteps)
        fprintf(f, "autocast fp16 in %d, bf16 in %d of %.0f steps; batches are %s\n", a->ac16, a->acbf,
                a->csteps, a->dtype);
    else
        fprintf(f, "no steps seen\n");
    if (r->hook_fail[0])
        fprintf(f, "   note       the hook could not patch everything: %s\n", r->hook_fail);
    fprintf(f, "7. %s\n", a->line);
    double job = a->run_s > 0 ? a->run_s : 1;
    fprintf(f, "   (watching cost: the doctor used %.2f s of CPU in %.1f s, %.2f%% of one core", r->self_cpu_s,
            a->run_s, 100 * r->self_cpu_s / job);
    if (r->hook_timed) {
        long long k = r->hook_timed < 1024 ? r->hook_timed : 1024;
        fprintf(f, "; the hook's batch path %.1f us per batch in the job's thread, median of %lld batch%s it timed",
                1e-3 * (double)r->hook_ns, k, k == 1 ? "" : "es");
    }
    fprintf(f, ")\n");
}

/* ---- JSON ------------------------------------------------------------------------------------- */
static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void jnum(FILE *f, const char *k, double v, int comma)
{
    if (!isfinite(v))
        v = 0;
    fprintf(f, "\"%s\": %.12g%s", k, v, comma ? ", " : "");
}

int dr_json(const dr_run *r, const dr_result *a, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double steps = a->csteps > 0 ? a->csteps : 1;
    fprintf(f, "{\n  \"command\": [");
    for (char **p = r->argv; *p; p++) {
        fprintf(f, "%s", p == r->argv ? "" : ", ");
        jstr(f, *p);
    }
    fprintf(f, "],\n  \"job\": {");
    jnum(f, "run_s", a->run_s, 1);
    jnum(f, "window_s", a->wall, 1);
    jnum(f, "stopped_after_s", r->t_stop ? (double)(r->t_stop - r->t_start) / 1e9 : 0, 1);
    jnum(f, "stop_signal", r->stop_signal, 1);
    fprintf(f, "\"exited\": %s, ", r->exited ? "true" : "false");
    jnum(f, "exit_code", r->exit_code, 1);
    jnum(f, "term_signal", r->term_signal, 1);
    fprintf(f, "\"failed\": %s, \"stderr_tail\": ", r->failed ? "true" : "false");
    jstr(f, r->err_tail);
    fprintf(f, ", ");
    jnum(f, "python_processes_hooked", r->hooked, 1);
    jnum(f, "batches", a->nsteps, 0);
    fprintf(f, "},\n  \"gpu\": {\"nvml\": %s, \"why\": ", r->nvml ? "true" : "false");
    jstr(f, r->nvml_why);
    fprintf(f, ", \"job_holds_context\": %d, \"job_uses_gpu\": %s, \"devices\": [", r->gpu_ctx,
            a->gpu_used ? "true" : "false");
    for (int g = 0; g < r->ngpu; g++) {
        fprintf(f, "%s{\"name\": ", g ? ", " : "");
        jstr(f, r->gpus[g].name);
        fprintf(f, ", ");
        jnum(f, "util_mean_pct", a->gutil[g], 1);
        jnum(f, "util_max_pct", a->gutil_max[g], 1);
        jnum(f, "mem_used_max_bytes", a->gmem[g], 1);
        jnum(f, "mem_total_bytes", r->gpus[g].mem_total, 0);
        fprintf(f, "}");
    }
    fprintf(f, "]},\n  \"cpu\": {");
    jnum(f, "allowed_cores", r->allowed, 1);
    jnum(f, "affinity_cores", r->affinity, 1);
    jnum(f, "online_cores", r->ncpu_online, 1);
    jnum(f, "cgroup_quota_cores", r->quota, 1);
    jnum(f, "used_cores", a->cpu_total, 1);
    jnum(f, "machine_busy_cores", a->sys_cores, 1);
    jnum(f, "runqueue_wait_cores", a->rq_total, 1);
    static const char *rk[DR_NROLES] = {"main", "workers", "stoker", "other"};
    fprintf(f, "\"roles\": {");
    for (int j = 0; j < DR_NROLES; j++) {
        fprintf(f, "%s\"%s\": {", j ? ", " : "", rk[j]);
        jnum(f, "cores", a->cpu[j], 1);
        jnum(f, "runqueue_wait_cores", a->rq[j], 1);
        jnum(f, "threads_in_disk_wait", a->dth[j], 1);
        jnum(f, "threads", a->nth[j], 0);
        fprintf(f, "}");
    }
    fprintf(f, "}, \"psi_some\": {");
    jnum(f, "available", r->psi_ok, 1);
    jnum(f, "cpu", a->psi[0], 1);
    jnum(f, "io", a->psi[1], 1);
    jnum(f, "memory", a->psi[2], 0);
    fprintf(f, "}},\n  \"memory\": {");
    jnum(f, "total_bytes", r->mem_total, 1);
    jnum(f, "available_min_bytes", a->mem_avail_min, 1);
    jnum(f, "swap_total_bytes", r->swap_total, 1);
    jnum(f, "swap_used_max_bytes", a->swap_used_max, 1);
    jnum(f, "cgroup_limit_bytes", r->mem_limit, 1);
    jnum(f, "job_rss_max_bytes", a->rss_max, 0);
    fprintf(f, "},\n  \"disk\": {");
    jnum(f, "job_read_bytes", a->job_rd, 1);
    jnum(f, "job_write_bytes", a->job_wr, 1);
    jnum(f, "read_bytes_per_s", a->rd_bps, 1);
    jnum(f, "write_bytes_per_s", a->wr_bps, 1);
    jnum(f, "read_iops", a->rd_iops, 1);
    jnum(f, "write_iops", a->wr_iops, 1);
    fprintf(f, "\"devices\": [");
    int first = 1;
    for (int i = 0; i < r->ndevs; i++) {
        const dr_dev *d = &r->devs[i];
        double t = a->run_s > 0 ? a->run_s : 1;
        if (!d->touched && d->r1[0] == d->r0[0] && d->r1[2] == d->r0[2])
            continue;
        fprintf(f, "%s{\"name\": ", first ? "" : ", ");
        first = 0;
        jstr(f, d->name);
        fprintf(f, ", \"job_files\": %s, ", d->touched ? "true" : "false");
        jnum(f, "read_bytes_per_s", (double)(d->r1[1] - d->r0[1]) * 512 / t, 1);
        jnum(f, "read_iops", (double)(d->r1[0] - d->r0[0]) / t, 1);
        jnum(f, "write_bytes_per_s", (double)(d->r1[3] - d->r0[3]) * 512 / t, 1);
        jnum(f, "write_iops", (double)(d->r1[2] - d->r0[2]) / t, 0);
        fprintf(f, "}");
    }
    fprintf(f, "]},\n  \"network\": {");
    fprintf(f, "\"namespace_shared\": %s, ", r->net_shared == 0 ? "false" : "true");
    jnum(f, "rx_bytes_per_s", a->net_rx, 1);
    jnum(f, "tx_bytes_per_s", a->net_tx, 0);
    fprintf(f, "},\n  \"data\": {\"loader\": ");
    jstr(f, a->kind);
    fprintf(f, ", ");
    jnum(f, "num_workers", a->workers, 1);
    jnum(f, "pin_memory", a->pin, 1);
    jnum(f, "wait_share", a->input_share, 1);
    jnum(f, "wait_total_s", a->wait_total, 1);
    jnum(f, "iterator_creation_total_s", a->iter_total, 1);
    jnum(f, "wait_median_s", a->wait_med, 1);
    jnum(f, "wait_p99_s", a->wait_p99, 1);
    jnum(f, "between_batches_median_s", a->between_med, 1);
    jnum(f, "between_batches_p99_s", a->between_p99, 1);
    jnum(f, "first_batch_s", a->first_batch, 1);
    jnum(f, "epochs_started", a->nepochs, 1);
    jnum(f, "epoch_start_mean_s", a->epoch_start_mean, 1);
    jnum(f, "loaders", a->nloaders, 1);
    jnum(f, "eval_batches", a->eval_batches, 1);
    jnum(f, "eval_passes", a->eval_passes, 1);
    jnum(f, "eval_s", a->eval_s, 1);
    fprintf(f, "\"loader_role\": ");
    jstr(f, a->loader_role);
    fprintf(f, ", ");
    jnum(f, "loader_on_cpu_share", a->ld_busy, 1);
    jnum(f, "loader_waiting_for_cpu_share", a->ld_rq, 1);
    jnum(f, "loader_disk_wait_share", a->ld_disk, 0);
    fprintf(f, "},\n  \"batch\": {");
    jnum(f, "size", a->bs, 1);
    fprintf(f, "\"dtype\": ");
    jstr(f, a->dtype);
    fprintf(f, "},\n  \"copies\": {");
    jnum(f, "item_per_step", a->calls[0] / steps, 1);
    jnum(f, "cpu_per_step", a->calls[1] / steps, 1);
    jnum(f, "numpy_per_step", a->calls[2] / steps, 1);
    jnum(f, "cuda_synchronize_per_step", a->calls[3] / steps, 1);
    jnum(f, "sync_calls_per_step", a->calls_total / steps, 1);
    jnum(f, "sync_calls_on_gpu_per_step", a->calls_dev / steps, 1);
    jnum(f, "sync_time_share", a->sync_share, 1);
    jnum(f, "h2d_pinned_per_step", a->h2d_pin / steps, 1);
    jnum(f, "h2d_pageable_per_step", a->h2d_page / steps, 1);
    jnum(f, "h2d_bytes_per_step", a->h2d_bytes / steps, 0);
    fprintf(f, "},\n  \"writes\": {");
    jnum(f, "saves", a->nsave, 1);
    jnum(f, "save_total_s", a->save_total, 1);
    jnum(f, "save_share", a->save_share, 1);
    jnum(f, "save_bytes", a->save_bytes, 1);
    jnum(f, "steps_per_save", a->steps_per_save, 1);
    jnum(f, "save_call_s", a->save_call_s, 1);
    jnum(f, "checkpoint_write_s", a->wr_s[0], 1);
    jnum(f, "checkpoint_write_bytes", a->wr_b[0], 1);
    jnum(f, "checkpoint_files_written", a->ckpt_opens, 1);
    jnum(f, "log_write_s", a->wr_s[1], 1);
    jnum(f, "log_write_bytes", a->wr_b[1], 1);
    jnum(f, "log_share", a->log_share, 1);
    jnum(f, "other_write_s", a->wr_s[2], 1);
    jnum(f, "other_write_bytes", a->wr_b[2], 1);
    jnum(f, "other_share", a->other_share, 0);
    fprintf(f, "},\n  \"precision\": {");
    jnum(f, "autocast_fp16_steps", a->ac16, 1);
    jnum(f, "autocast_bf16_steps", a->acbf, 0);
    fprintf(f, "},\n  \"verdict\": {\"stage\": ");
    jstr(f, a->verdict);
    fprintf(f, ", \"figures\": ");
    jstr(f, a->figures);
    fprintf(f, ", \"next\": ");
    jstr(f, a->next);
    fprintf(f, "},\n  \"watching\": {");
    jnum(f, "doctor_cpu_s", r->self_cpu_s, 1);
    jnum(f, "interval_s", r->interval, 1);
    jnum(f, "samples", (double)r->nticks, r->hook_timed != 0);
    if (r->hook_timed)
        jnum(f, "hook_us_per_batch", 1e-3 * (double)r->hook_ns, 0);
    fprintf(f, "}\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}
