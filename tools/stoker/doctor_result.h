/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's analysis, shared by its three parts: doctor_verdict.c (the hook's events and
 * the sampler's ticks become figures), doctor_rules.c (the rules that pick the stage and the
 * next step), doctor_report.c (the text report and --json). Internal to the CLI.
 */
#ifndef STOKER_DOCTOR_RESULT_H
#define STOKER_DOCTOR_RESULT_H

#include "doctor.h"


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
    int64_t ev0[64], ev1[64];     /* the first 64 evaluation passes (for the plot) */
    int nev;
    int workers, pin, bs;
    int mem;                      /* the training loader's data is in memory already: no worker helps */
    int persistent;               /* its workers persist across epochs */
    const dr_stkstats *stk;       /* a stoker training loader's own stats, or NULL */
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
    /* the job's CPU per step over chunks of the window (doctor_verdict.c): median, the chunks'
     * lowest and highest, how many chunks (0: too few steps or ticks; the mean is used) */
    double cpu_step_med, cpu_step_lo, cpu_step_hi;
    int cpu_step_chunks;
    /* verdict; borderline: the figures that lay inside the margin band around their line and
     * changed the stage or the next step (empty when none did) */
    char verdict[112], figures[1200], next[1400], line[112 + 1200 + 1400 + 32];
    char borderline[480];
};

/* doctor_verdict.c */
double dr_quant(double *v, size_t n, double q);   /* sorts v */

/* doctor_rules.c: the verdict into a->verdict, figures, next */
void dr_decide(const dr_run *r, dr_result *a);
void dr_save_kinds(const dr_result *a, char *out, size_t cap);
void dr_job_status(const dr_run *r, char *out, size_t cap);

#endif
