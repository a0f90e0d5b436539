/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor — shared types of the CLI's `doctor` command (doctor*.c). The sampler
 * (doctor_sample.c) reads /proc, cgroup files and NVML from outside the job; the job's Python
 * reports its events through the hook (doctor_hook.py, embedded at build time); doctor_verdict.c
 * turns both into figures, doctor_rules.c into the verdict, doctor_report.c into the report and
 * --json, doctor_svg.c into the timeline. Design: docs/doctor.md.
 */
#ifndef STOKER_DOCTOR_H
#define STOKER_DOCTOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define DR_MAXGPU 8
#define DR_MAXDEV 16
#define DR_ERR_LINES 5
#define DR_NC 18           /* per-step counters (doctor_hook.py, docs/doctor.md) */

/* thread roles */
enum { DR_MAIN, DR_WORKER, DR_STOKER, DR_OTHER, DR_NROLES };

/* one sampling interval (t - dt, t] */
typedef struct dr_tick {
    double t, dt;                  /* seconds since the job started */
    double cpu[DR_NROLES];         /* cores in use, per role */
    double rq[DR_NROLES];          /* cores' worth of runnable threads waiting for a CPU */
    float dthreads[DR_NROLES];     /* threads in uninterruptible (disk) wait at the sample */
    float nthreads[DR_NROLES];
    char main_state;               /* the main thread's state letter at the sample */
    float ndec;                    /* stoker decode threads (stk-decN) */
    double sys_cores;              /* cores busy machine-wide */
    double psi[3];                 /* share of the interval with some task stalled: cpu, io, mem */
    double rd_bps, wr_bps, rd_iops, wr_iops; /* block devices (whole devices, summed) */
    double job_rd_bps, job_wr_bps;           /* the job's storage bytes (/proc/PID/io) */
    double net_rx_bps, net_tx_bps;
    double mem_avail, swap_used, rss;        /* bytes */
    float gpu_util[DR_MAXGPU];               /* percent */
    double gpu_mem[DR_MAXGPU];               /* bytes used */
} dr_tick;

/* events from the hook */
typedef struct dr_step {           /* N: one batch handed to the training loop */
    int pid;
    int64_t t0, t1;                /* __next__ called, returned (CLOCK_MONOTONIC ns) */
    int bs;
    int lid;                       /* the loader it came from (the hook's number per loader object) */
    char dtype[16];
    int64_t c[DR_NC];              /* counters since the previous batch (see doctor_hook.py) */
} dr_step;

typedef struct dr_iter {           /* I: an iterator created (epoch start) */
    int pid;
    int64_t t0, t1;
    char kind[8];                  /* torch | stoker | loop (no loader: each backward() a step) */
    int workers, bs, pin;
    int lid;                       /* the loader */
    int mem;                       /* its data is already in memory (TensorDataset, a list; the loop's) */
    int persistent;                /* DataLoader(persistent_workers=True) */
} dr_iter;

typedef struct dr_stkstats {      /* L: a stoker loader's own stats (cumulative; the last one counts) */
    int pid, lid;
    int rthreads, dthreads;        /* read and decode threads */
    double rbusy, rstarved, dbusy, dstarved, wall; /* seconds, summed over each stage's threads */
    long long errors, substituted; /* bad records, and those replaced */
    char bottleneck[16];           /* the library's own verdict (stk_bottleneck_name) */
    /* an s3:// dataset's fetch (cumulative since the loader's open, its download included) */
    long long fbytes, fhits, fmisses; /* bytes received; shard lookups found in / fetched into the cache */
    double fbusy, fstarved;        /* requests in flight; the loader waited for the fetch */
} dr_stkstats;
#define DR_MAXSTK 8

typedef struct dr_save {           /* S: a save call (torch.save, np.save, safetensors) */
    int pid;
    int64_t t0, t1, bytes;
    char kind[16];
} dr_save;

typedef struct dr_pyproc {       /* a Python interpreter seen in the job's tree (once a second) */
    int pid;
    char cmd[112];                 /* its command line, cut */
    char why[200];                 /* if it never loads the hook: the likely reason, from its flags and environment */
} dr_pyproc;
#define DR_MAXPY 16

typedef struct dr_gpu {
    char name[96];
    double mem_total;
} dr_gpu;

typedef struct dr_dev {
    unsigned maj, min;
    char name[32];
    int touched;                   /* the job had a file open on it */
    int have0;
    uint64_t r0[4], r1[4];         /* diskstats rd ios, rd sectors, wr ios, wr sectors at start/end */
} dr_dev;

typedef struct dr_run {
    /* the job */
    char **argv;
    pid_t pid;                     /* the command's process (leader of its process group) */
    int64_t t_start, t_end;        /* ns, CLOCK_MONOTONIC */
    int64_t t_stop;                /* when the doctor began stopping it (0: it ended by itself) */
    int stop_signal;               /* the last signal the doctor sent, 0 if none */
    int exited, exit_code, term_signal;
    int failed;                    /* it failed by itself: a non-zero status or a signal the doctor did not send */
    char err_tail[1024];           /* its last stderr lines (up to DR_ERR_LINES), '\n'-separated */
    double seconds;                /* --seconds (0: none) */
    double interval;               /* sampling interval, s */
    double gpu_step_ms;            /* --gpu-step-ms: the step on a GPU, for a CPU-only job (0: assume) */

    /* limits */
    int ncpu_online, affinity;     /* cores online, cores in the job's affinity mask */
    double quota;                  /* cgroup cpu quota in cores (0: none) */
    double allowed;                /* cores the job may use */
    double mem_total, swap_total, mem_limit;  /* bytes; mem_limit 0: none */
    int psi_ok;
    int net_shared;                /* 1: the job's network namespace is the doctor's (shared); 0 its own; -1 unknown */

    /* samples */
    dr_tick *ticks;
    size_t nticks, capticks;

    /* events */
    dr_step *steps;
    size_t nsteps, capsteps;
    dr_iter *iters;
    size_t niters, capiters;
    dr_save *saves;
    size_t nsaves, capsaves;
    dr_save *ckfiles;              /* C: checkpoint files written by the job (open..close) */
    size_t nckfiles, capckfiles;
    int64_t x_t;                   /* X: the main Python process's atexit, 0 if none */
    int64_t x_c[DR_NC];
    int64_t e_count;               /* E: iterators exhausted */
    int hooked;                    /* H events seen */
    int py_pids[64];
    int npy;
    int main_pid;                  /* the Python process that iterates (first N), else first H */
    dr_stkstats stk[DR_MAXSTK];    /* per stoker loader of the main process */
    int nstk;
    dr_pyproc pyseen[DR_MAXPY];    /* Python processes the sampler saw (not forks of one) */
    int npyseen;
    int worker_pids[256];
    int nworkers_seen;
    int max_workers;               /* largest num_workers of an iterator */
    char hook_fail[256];           /* F: a patch failed */
    int64_t hook_timed, hook_ns;   /* K: batches the hook timed its own work on, its median ns */

    /* devices, GPUs */
    dr_dev devs[DR_MAXDEV];
    int ndevs;
    int nvml;                      /* 1: NVML loaded */
    char nvml_why[160];
    int ngpu;
    dr_gpu gpus[DR_MAXGPU];
    int gpu_ctx;                   /* 1: a job process holds a GPU context; 0 no; -1 unknown */
    int nvidia_dev;                /* /dev/nvidia0 exists */

    /* the doctor's own cost */
    double self_cpu_s;
} dr_run;

/* doctor_sample.c */
typedef struct dr_sampler dr_sampler;
dr_sampler *dr_sampler_create(dr_run *r);
void dr_sampler_tick(dr_sampler *s, dr_run *r, int64_t now);
void dr_sampler_limits(dr_sampler *s, dr_run *r);
void dr_sampler_finish(dr_sampler *s, dr_run *r);
void dr_sampler_destroy(dr_sampler *s);
int64_t dr_now(void);
/* Write N bytes of DATA to PATH (mode 0600; EXCL: O_EXCL, a file already there fails, else
 * truncated), retrying short writes and EINTR: 0, or -1 with errno (the temporary files of
 * doctor and run). */
int dr_write_file(const char *path, const void *data, size_t n, int excl);

/* the Python processes seen without the hook (no H event from their pid): up to `cap` into out */
int dr_unhooked(const dr_run *r, const dr_pyproc **out, int cap);

/* doctor_verdict.c (analysis), doctor_rules.c (verdict), doctor_report.c (report, --json) */
typedef struct dr_result dr_result;
dr_result *dr_analyse(const dr_run *r);
void dr_report(const dr_run *r, const dr_result *a, FILE *f);
int dr_json(const dr_run *r, const dr_result *a, const char *path);
const char *dr_verdict_line(const dr_result *a);
void dr_result_free(dr_result *a);

/* doctor_svg.c */
int dr_svg(const dr_run *r, const dr_result *a, const char *path);

/* analysis results the SVG needs */
double dr_result_window(const dr_result *a, int64_t *t0, int64_t *t1);
void dr_result_verdict(const dr_result *a, const char **stage, const char **figures, const char **next);
int dr_result_evals(const dr_result *a, const int64_t **t0, const int64_t **t1); /* evaluation passes */

/* doctor.c */
int cmd_doctor(int argc, char **argv);

#endif
