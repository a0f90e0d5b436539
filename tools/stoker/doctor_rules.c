/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's rules: from the figures doctor_verdict.c made, the one stage that bounds the
 * job and the next step (written out in docs/doctor.md, "The verdict rules"; the thresholds are
 * the constants below), in the order they are tried:
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
 * After all of these, fetch: a stoker loader over an s3:// dataset that waited for the object
 * store (its own fetch_starved_s, the open's download included) >= 25% of its time (wall plus
 * that wait) and no less than the checkpoint, sync or write shares is fetch-bound, with the
 * link's measured rate and what to change (decide_fetch).
 */
#include "doctor_result.h"

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
#define TH_EPOCH_START 0.25 /* epoch starts (worker start + first batch) this share of the wait: persistent_workers */
#define TH_GPU_PROJ_MIN 1e-4 /* a projected GPU step under this (s): too short to advise a GPU for */
#define CKPT_TARGET 0.02 /* the checkpoint share the suggested interval aims for */
#define TH_FETCH 0.25 /* a stoker loader waited for the object store this share of its time: fetch-bound */

/* The margin band around each line (docs/doctor.md, "Margins"): half-widths in the figure's own
 * unit (shares, GPU %), or a factor for times and counts (the band is line/f .. line*f) */
#define M_SHARE 0.05      /* input, CPU-starved, storage, epoch starts, outside disk wait */
#define M_CKPT 0.04       /* checkpoint share */
#define M_SYNC 0.03       /* sync-call, log and other-write shares */
#define M_DECODE 0.10     /* the loader on a CPU or waiting for one; outside, cores busy */
#define M_GPU_UTIL 4.0    /* GPU busy, % points */
#define M_GPU_MEM 0.05    /* GPU memory share */
#define M_POOL 0.02       /* the main process's other threads' CPU against the main thread's */
#define M_POOL_WAIT 0.10  /* their wait for a CPU against their run */
#define M_CONTENTION 0.05 /* others' hold, as a share of the allowed cores */
#define F_TIME 1.2        /* step times (tiny CPU and wall, launch step, projected GPU step) */
#define F_COUNT 1.25      /* host-syncing calls per step */

/* Each decision on a figure near its line is made twice by dr_decide: once with every figure
 * inside its band on the side where its rule fires (lean 1), once on the other (lean 0); the
 * figures seen inside a band are noted. The analysis runs in one thread per result; the state
 * is per thread. */
static _Thread_local struct {
    int lean;
    char notes[480];
} band;

/* 1 when X lies inside the open band LO..HI around its line TH, noted once as WHAT X (line TH,
 * band LO-HI) in UNIT after multiplying by SCALE */
static int in_band(const char *what, double x, double th, double lo, double hi, double scale, const char *unit)
{
    if (!(x > lo && x < hi))
        return 0;
    size_t n = strlen(band.notes);
    if (!strstr(band.notes, what) && n < sizeof band.notes)
        snprintf(band.notes + n, sizeof band.notes - n, "%s%s %.3g%s (line %.3g%s, band %.3g-%.3g%s)",
                 n ? ", " : "", what, scale * x, unit, scale * th, unit, scale * lo, scale * hi, unit);
    return 1;
}

/* the rule "X >= TH" / "X < TH" with an absolute band of +-M (shares: noted in %) */
static int ge_share(const char *what, double x, double th, double m)
{
    return in_band(what, x, th, th - m, th + m, 100, "%") ? band.lean : x >= th;
}

static int lt_share(const char *what, double x, double th, double m, double scale, const char *unit)
{
    return in_band(what, x, th, th - m, th + m, scale, unit) ? band.lean : x < th;
}

/* the rule "X >= TH" / "X < TH" with a band of a factor F (times in ms, counts) */
static int ge_rel(const char *what, double x, double th, double f, double scale, const char *unit)
{
    return in_band(what, x, th, th / f, th * f, scale, unit) ? band.lean : x >= th;
}

static int lt_rel(const char *what, double x, double th, double f, double scale, const char *unit)
{
    return in_band(what, x, th, th / f, th * f, scale, unit) ? band.lean : x < th;
}

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

/* "4 torch.save into memory + file writes" / "3 np.save, 1 pickled file" */
void dr_save_kinds(const dr_result *a, char *out, size_t cap)
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
void dr_job_status(const dr_run *r, char *out, size_t cap)
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
    const dr_pyproc *up[1];
    char whybuf[400];
    const char *why = "the job never iterated a torch DataLoader or a stoker.Loader";
    if (dr_unhooked(r, up, 1)) {
        snprintf(whybuf, sizeof whybuf, "Python process %d (`%.80s`) ran without the hook: %s", up[0]->pid, up[0]->cmd,
                 up[0]->why);
        why = whybuf;
    } else if (!r->hooked)
        why = r->npyseen ? "no Python process of the job loaded the hook"
                         : "no Python process of the job loaded the hook (none was seen: not Python, or one that "
                           "ended within a sampling interval)";
    if (r->failed) {
        char how[96];
        dr_job_status(r, how, sizeof how);
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
    if (r->gpu_ctx == 1 && !lt_share("GPU busy", gu, TH_GPU_SMALL_UTIL, M_GPU_UTIL, 1, "%")) {
        snprintf(v, vc, "compute-bound");
        snprintf(f + strlen(f), fc - strlen(f), "; GPU busy %.0f%%", gu);
        snprintf(nx, nc, "mixed precision (torch.autocast), or a faster GPU");
    } else if (ge_share("threads in disk wait", disk, TH_OUTSIDE_DISK, M_SHARE) && disk > busy) {
        snprintf(v, vc, "I/O-bound");
        snprintf(nx, nc, "read larger sequential blocks (pack the data into shards), or faster storage");
    } else if (ge_share("cores busy or waited for", busy, TH_OUTSIDE_BUSY, M_DECODE)) {
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
    if (a->nsteps < 4 || a->tick_s <= 0 || strcmp(a->kind, "torch") || a->mem)
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
static void decide_tiny(const dr_run *r, dr_result *a, double cpu_step)
{
    snprintf(a->verdict, sizeof a->verdict, "too small for the hardware");
    char dist[96] = "";
    if (a->cpu_step_chunks)
        snprintf(dist, sizeof dist, " (median of %d stretches of the run, %.2f-%.2f ms)", a->cpu_step_chunks,
                 1e3 * a->cpu_step_lo, 1e3 * a->cpu_step_hi);
    snprintf(a->figures, sizeof a->figures,
             "a step takes %.2f ms of CPU%s, loading included (%.2f ms between batches, median, of which %.2f ms "
             "waiting for the loader): the fixed costs of each batch (the Python loop, collate, "
             "operator dispatch, kernel launches) are as large as its work",
             1e3 * cpu_step, dist, 1e3 * a->between_med, 1e3 * a->wait_med);
    int b = a->bs > 0 ? a->bs : 1;
    size_t n = 0;
    /* torch's intra-op pool on such a step: each operator is split between threads that meet at
     * its end, for microseconds of work; one thread does it without the meeting */
    if (r->allowed >= 2 && a->cpu[DR_MAIN] > 0 &&
        ge_share("the other threads' CPU against the main thread's", a->cpu[DR_OTHER] / a->cpu[DR_MAIN], TH_POOL,
                 M_POOL))
        n = (size_t)snprintf(a->next, sizeof a->next,
                             "OMP_NUM_THREADS=1 (or torch.set_num_threads(1)): the step's other threads ran %.2f "
                             "cores beside the main thread's %.2f, splitting operators too small to share; and ",
                             a->cpu[DR_OTHER], a->cpu[DR_MAIN]);
    /* the pool idle at this batch, but other processes hold the cores: a larger batch's operators
     * are split between threads that each wait for a core (batch 1 -> 8 on 2 shared cores ran 7x
     * slower with torch's 2 threads, 2.5-8x faster with one: docs/doctor.md, real scripts) */
    double free_cores = r->allowed - a->cpu_total, held = a->rq_total < free_cores ? a->rq_total : free_cores;
    if (!n && r->allowed >= 2 && a->nticks &&
        ge_share("others' hold on the cores", held / r->allowed, TH_CONTENTION, M_CONTENTION))
        n = (size_t)snprintf(a->next, sizeof a->next,
                             "OMP_NUM_THREADS=1 (or torch.set_num_threads(1)) before a larger batch: other processes "
                             "held the CPU (the job waited for one %.2f cores' worth), and a larger batch's operators "
                             "are split between torch's threads, each waiting for a core; and ", held);
    if (n < sizeof a->next)
        snprintf(a->next + n, sizeof a->next - n,
                 "batch %d -> %d or more (the per-batch cost stays, the work per batch grows)%s, merge several "
                 "steps' work into one, or run on a smaller device; not more loader processes: %s",
                 b, b * 8, b == 1 ? " — batch size 1: every step pays the whole fixed cost for one sample" : "",
                 a->mem || !strcmp(a->kind, "loop") ? "the data is in memory already"
                                                   : "each would add an inter-process hop per batch that costs more "
                                                     "than the step");
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
    /* a step of a few ms on this CPU is a fraction of a ms on a GPU: shorter than the kernel
     * launches it would take; a projection of "0.0 ms" helps nobody */
    if (r->gpu_step_ms <= 0 && lt_rel("the projected GPU step", hi, TH_GPU_PROJ_MIN, F_TIME, 1e3, " ms")) {
        int b = a->bs > 0 ? a->bs : 1;
        snprintf(nx, nc, "batch %d -> %d or more (scale the learning rate with it), or merge several steps' work "
                 "into one: a step of %.2f ms on this CPU is too short for a GPU to gain much (its kernel launches "
                 "alone take about that)%s", b, b * 8, 1e3 * step,
                 b == 1 ? "; batch size 1 pays the whole fixed cost of a step for one sample" : "");
        return;
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
    if (!ge_share("the wait projected on a GPU", share, TH_INPUT, M_SHARE)) {
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
    if (!a->nticks || !ge_share("others' hold on the cores", c / r->allowed, TH_CONTENTION, M_CONTENTION) ||
        a->cpu[DR_MAIN] <= 0 || run <= 0 ||
        !ge_share("the other threads' CPU against the main thread's", a->cpu[DR_OTHER] / a->cpu[DR_MAIN], TH_POOL,
                  M_POOL) ||
        !ge_share("the step's threads' wait for a CPU against their run", wait / run, TH_POOL_WAIT, M_POOL_WAIT))
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
    if (!a->nticks || !ge_share("others' hold on the cores", c / r->allowed, TH_CONTENTION, M_CONTENTION))
        return;
    size_t n = strlen(a->figures);
    snprintf(a->figures + n, sizeof a->figures - n, "; other processes held the CPU: the job ran on %.2f of its "
             "%g core%s and waited for one %.2f cores' worth", a->cpu_total, r->allowed, r->allowed == 1 ? "" : "s", c);
    if (r->psi_ok) {
        n = strlen(a->figures);
        snprintf(a->figures + n, sizeof a->figures - n, " (CPU pressure %.0f%%)", 100 * a->psi[0]);
    }
}

/* stoker's loader over s3:// waited for the fetch (its own stats, cumulative since its open, so
 * a download at open that came before the training window counts): fetch-bound when that is a
 * large share of the loader's time and no other cause outside the input weighs more */
static void decide_fetch(const dr_run *r, dr_result *a)
{
    (void)r;
    const dr_stkstats *k = a->stk;
    if (!k || k->fstarved <= 0 || k->wall + k->fstarved <= 0)
        return;
    double share = k->fstarved / (k->wall + k->fstarved);
    if (!ge_share("fetch wait", share, TH_FETCH, M_SHARE) || share < a->save_share || share < a->sync_share || share < a->log_share ||
        share < a->other_share)
        return;
    double rate = k->fbusy > 0 ? k->fbytes / k->fbusy / 1e6 : 0;
    long long look = k->fhits + k->fmisses;
    snprintf(a->verdict, sizeof a->verdict, "input-bound (fetch-bound)");
    snprintf(a->figures, sizeof a->figures,
             "stoker's loader waited for the object store %.1f s, %.0f%% of its %.1f s (the open's download "
             "included; its own stats): link %.1f MB/s measured (%.1f MB in %.1f s with requests in flight); "
             "cache hits %lld of %lld shard lookups (%.0f%%); the job waited for the next batch %.0f%% of the "
             "training time", k->fstarved, 100 * share, k->wall + k->fstarved, rate, k->fbytes / 1e6, k->fbusy,
             k->fhits, look, look ? 100.0 * k->fhits / look : 0, 100 * a->input_share);
    snprintf(a->next, sizeof a->next,
             "the link (%.1f MB/s here) is the limit: more requests in flight (STOKER_S3_INFLIGHT) if the "
             "link is not full, a cache that holds the dataset (cache= / STOKER_CACHE_BYTES) so the next epochs "
             "and runs read it locally, bigger shards (fewer first-byte waits), or a bucket in a region closer "
             "to this machine", rate);
}

static void decide_once(const dr_run *r, dr_result *a)
{
    decide_steps(r, a);
    decide_fetch(r, a);
    if (!r->failed || a->nsteps)
        contention(r, a);
}

/* Decided twice: every figure inside its band on the side where its rule fires (into A), then on
 * the other (into a copy). The same stage and next step: the band did not matter. Another stage:
 * "borderline: A / B", the figures of A, the next step of A and then B's; the same stage with
 * another next step: the firing side's, whose extra step (OMP_NUM_THREADS, persistent_workers,
 * the input side on a GPU, a larger batch) does no harm on the other side. The figures end with
 * the band's figures whenever the verdict moved with them. */
void dr_decide(const dr_run *r, dr_result *a)
{
    dr_result *b = malloc(sizeof *b);
    band.notes[0] = 0;
    if (b)
        *b = *a;
    band.lean = 1;
    decide_once(r, a);
    a->borderline[0] = 0;
    if (b) {
        band.lean = 0;
        decide_once(r, b);
        int stage = strcmp(a->verdict, b->verdict) != 0, next = strcmp(a->next, b->next) != 0;
        if (stage || next)
            snprintf(a->borderline, sizeof a->borderline, "%s", band.notes);
        if (stage) {
            char fire[sizeof a->verdict], fnext[sizeof a->next];
            snprintf(fire, sizeof fire, "%s", a->verdict);
            snprintf(fnext, sizeof fnext, "%s", a->next);
            /* two kinds of one stage, "input-bound (CPU-starved)" and "input-bound (decode)", are
             * "input-bound (borderline: CPU-starved / decode)" */
            size_t p = 0, open = 0, la = strlen(fire), lb = strlen(b->verdict);
            while (fire[p] && fire[p] == b->verdict[p])
                open = fire[p++] == '(' ? p : open;
            if (open && la > open && lb > open && fire[la - 1] == ')' && b->verdict[lb - 1] == ')')
                snprintf(a->verdict, sizeof a->verdict, "%.*sborderline: %.*s / %.40s", (int)open, fire,
                         (int)(la - 1 - open), fire + open, b->verdict + open);
            else
                snprintf(a->verdict, sizeof a->verdict, "borderline: %.48s / %.48s", fire, b->verdict);
            if (next)
                snprintf(a->next, sizeof a->next, "%.680s; or, if it is %.50s: %.620s", fnext, b->verdict, b->next);
        }
        if (stage || next) {
            size_t n = strlen(a->figures);
            snprintf(a->figures + n, sizeof a->figures - n, "; borderline, so %s: %s",
                     stage ? "both stages are named" : "the next step holds on both sides", a->borderline);
        }
        free(b);
    }
    if (r->failed && a->nsteps) {
        char how[96];
        size_t n = strlen(a->figures);
        dr_job_status(r, how, sizeof how);
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
    int sync_count = ge_rel("host-syncing calls per step", calls_used, TH_SYNC_PER_STEP, F_COUNT, 1, "");

    double best = 0;
    int pick = 0; /* 1 input, 2 checkpoint, 3 sync */
    if (ge_share("the wait for batches", input, TH_INPUT, M_SHARE) && input > best) {
        best = input;
        pick = 1;
    }
    if (ge_share("checkpoints", a->save_share, TH_CKPT, M_CKPT) && a->save_share > best) {
        best = a->save_share;
        pick = 2;
    }
    if (ge_share("host-syncing calls' time", a->sync_share, TH_SYNC_SHARE, M_SYNC) && a->sync_share > best) {
        best = a->sync_share;
        pick = 3;
    }
    if (ge_share("log writes", a->log_share, TH_LOG, M_SYNC) && a->log_share > best) {
        best = a->log_share;
        pick = 4;
    }
    if (ge_share("other writes", a->other_share, TH_LOG, M_SYNC) && a->other_share > best) {
        best = a->other_share;
        pick = 5;
    }
    if (!pick && sync_count)
        pick = 3;
    /* the job's CPU per step (the loader's included): CPU accounting, which a loaded machine does
     * not stretch as it stretches the wall clock between batches */
    double cpu_step = a->cpu_step_chunks ? a->cpu_step_med : a->cpu_total * a->tick_s / a->nsteps;
    double gm, gt, gu = gpu_busy(r, a, &gm, &gt);
    if (!pick && gpu && r->nvml && r->ngpu && a->nticks >= TH_OUTSIDE_TICKS && a->nsteps >= TH_TINY_STEPS &&
        lt_share("GPU busy", gu, TH_LAUNCH_UTIL, M_GPU_UTIL, 1, "%") && a->between_med > 0 &&
        lt_rel("the step's time between batches", a->between_med, TH_LAUNCH_STEP, F_TIME, 1e3, " ms")) {
        decide_launch(r, a, gu, input);
        return;
    }
    if (pick <= 1 && a->nsteps >= TH_TINY_STEPS && a->tick_s > 0 &&
        lt_rel("CPU per step", cpu_step, TH_TINY_STEP, F_TIME, 1e3, " ms") &&
        lt_rel("the time between batches", a->between_med, TH_TINY_WALL, F_TIME, 1e3, " ms")) {
        decide_tiny(r, a, cpu_step);
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
        int waits = ge_share("the loader's wait for a CPU", a->ld_rq, TH_STARVED, M_SHARE) ||
                    (ld_cores > 0 && ge_share("the loader's wait for a CPU, of its cores", a->ld_rq * a->ld_n / ld_cores,
                                              TH_STARVED, M_SHARE));
        if (waits && ge_rel("the loader's wait against its run", a->ld_rq / (a->ld_busy > 1e-9 ? a->ld_busy : 1e-9),
                            1, F_TIME, 1, "x") &&
            ge_rel("the job's runnable threads against its cores", runnable / r->allowed, 1, 1.1, 1, "x")) {
            sub = "CPU-starved";
            if (!(torch && worker_advice(r, a, nx, nc)))
                snprintf(nx, nc, "give the job more cores (it may use %g; its loader waits for one)", r->allowed);
        } else if (ge_share("the loader in disk wait", a->ld_disk, TH_STORAGE, M_SHARE)) {
            sub = "storage";
            snprintf(nx, nc, torch ? "pack into shards and use stoker.DataLoader (large sequential reads)"
                                   : "put the shards on faster storage or in the page cache");
        } else if (ge_share("the loader on a CPU or waiting for one", a->ld_busy + a->ld_rq, TH_DECODE, M_DECODE)) {
            sub = "decode";
            if (torch && worker_advice(r, a, nx, nc))
                ;
            else if (torch && a->mem)
                snprintf(nx, nc, "index whole batches at once (a BatchSampler, or slice the tensors yourself) or batch "
                         "%d -> %d: the data is in memory already, so the wait is the per-sample indexing and collate in "
                         "the main thread; not more workers, which would copy the tensors between processes",
                         a->bs > 0 ? a->bs : 1, 8 * (a->bs > 0 ? a->bs : 1));
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
        const dr_stkstats *k = torch ? NULL : a->stk;
        if (k && (!strcmp(k->bottleneck, "decode") || !strcmp(k->bottleneck, "read") ||
                  !strcmp(k->bottleneck, "stage"))) {
            /* stoker's loader: its own stage accounting names the stage, in its own words */
            double db = k->wall > 0 && k->dthreads ? k->dbusy / (k->wall * k->dthreads) : 0;
            double rb = k->wall > 0 && k->rthreads ? k->rbusy / (k->wall * k->rthreads) : 0;
            if (!strcmp(k->bottleneck, "decode")) {
                sub = "decode-bound";
                snprintf(nx, nc, "more cores for stoker's %d decode threads (busy %.0f%% of the loader's time, its own "
                         "stats; the job may use %g cores), or less to decode: smaller stored images (`stoker pack "
                         "--max-side`) or lighter augmentation", k->dthreads, 100 * db, r->allowed);
            } else if (!strcmp(k->bottleneck, "read")) {
                sub = "read-bound";
                snprintf(nx, nc, "faster storage or the page cache for the shards: stoker's %d read thread%s busy "
                         "%.0f%%, its decode threads starved for records %.1f s", k->rthreads,
                         k->rthreads == 1 ? "" : "s", 100 * rb, k->dstarved);
            } else {
                sub = "stage-bound";
                snprintf(nx, nc, "the host-to-device stage: pinned memory (pin_memory=True) and a device-side batch");
            }
        }
        /* the workers started again at every epoch start: a large part of the wait */
        double est = a->wait_total + a->iter_total > 0
                         ? a->epoch_start_mean * a->nepochs / (a->wait_total + a->iter_total) : 0;
        if (torch && a->workers > 0 && !a->persistent && a->nepochs >= 2 &&
            ge_share("epoch starts, of the wait", est, TH_EPOCH_START, M_SHARE)) {
            char rest[sizeof a->next];
            snprintf(rest, sizeof rest, "%s", nx);
            int kp = snprintf(nx, nc, "persistent_workers=True: the %d workers start again at each of the %d epoch "
                             "starts, %.0f ms each, %.0f%% of the wait; then ", a->workers, a->nepochs,
                             1e3 * a->epoch_start_mean, 100 * est);
            if (kp > 0 && (size_t)kp < nc)
                snprintf(nx + kp, nc - (size_t)kp, "%.*s", (int)(nc - (size_t)kp - 1), rest);
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
        if (k) {
            size_t fl = strlen(f);
            snprintf(f + fl, fc - fl, "; stoker's own stats: read %d thread%s busy %.1f s, decode %d thread%s busy "
                     "%.1f s and starved %.1f s, %lld bad record%s; its verdict: %s", k->rthreads,
                     k->rthreads == 1 ? "" : "s", k->rbusy, k->dthreads, k->dthreads == 1 ? "" : "s", k->dbusy,
                     k->dstarved, k->errors, k->errors == 1 ? "" : "s", k->bottleneck);
        }
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
        dr_save_kinds(a, kinds, sizeof kinds);
        char evs[48]; /* two saves in one step are "2.0 a step", not "every 0 steps" */
        if (a->steps_per_save > 0 && a->steps_per_save < 0.95)
            snprintf(evs, sizeof evs, "%.1f a step", 1 / a->steps_per_save);
        else
            snprintf(evs, sizeof evs, "every %ld steps", every);
        snprintf(f, fc, "checkpoints %.0f%% of the time: %d saves (%s) of %.1f MB, %.0f ms each (%.0f ms in the "
                 "save calls, %.0f ms in the job's own writes and fsync to the file), %s",
                 100 * a->save_share, a->nsave, kinds, a->nsave ? a->save_bytes / a->nsave / 1e6 : 0, 1e3 * each,
                 a->nsave ? 1e3 * a->save_call_s / a->nsave : 0, a->nsave ? 1e3 * a->wr_s[0] / a->nsave : 0, evs);
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
        if (gpu && r->nvml && r->ngpu && lt_share("GPU busy", gu, TH_GPU_SMALL_UTIL, M_GPU_UTIL, 1, "%") && gt > 0 &&
            lt_share("GPU memory in use", gm / gt, TH_GPU_SMALL_MEM, M_GPU_MEM, 100, "%")) {
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

