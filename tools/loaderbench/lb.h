/* SPDX-License-Identifier: MIT */
/*
 * lb.h — loaderbench's own declarations (the tool is split by job: options and the sweep in
 * loaderbench.c, the embedded default sample in synth.c, one measured point in point.c, the
 * table / verdict / JSON / CSV / SVG in report.c). loaderbench uses only the public stoker.h.
 */
#ifndef LB_H
#define LB_H

#include "gpu_step.h"
#include "stoker.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LB_MAX_WORKERS 64 /* entries in a --workers list */
#define LB_MAX_REPEAT 101
#define LB_BUDGET_S 48.0       /* the default run's target, set-up included */
#define LB_RUN_OVERHEAD_S 0.6  /* a run's open + start + first batch + stop, about */
#define LB_MIN_RUN_S 0.75      /* shortest automatic measuring window */
#define LB_CAL_MAX_MS 1000.0   /* the GPU step's calibration kernel: --step-ms, at most this */

/* Exit codes. */
enum { LB_EXIT_OK = 0, LB_EXIT_FAIL = 1, LB_EXIT_USAGE = 2 };

/* The layouts loaderbench compares. */
enum lb_layout {
    LB_FILES = 0,           /* one file per image (ImageFolder), open/read/close per record */
    LB_SHARDS_BUFFERED = 1, /* stoker shards / LMDB through the page cache */
    LB_SHARDS_DIRECT = 2,   /* stoker shards / LMDB with O_DIRECT */
    LB_LMDB_MMAP = 3,       /* LMDB's own mmap read path: the reference */
    LB_NLAYOUTS = 4
};
extern const char *const lb_layout_names[LB_NLAYOUTS];

/* How the simulated trainer (--step-ms) consumes a batch; decided once at start-up. */
enum lb_step_mode {
    LB_STEP_NONE = 0,  /* no --step-ms: batches are released at once */
    LB_STEP_SLEEP = 1, /* the trainer thread sleeps MS per batch (no usable GPU: step_reason) */
    LB_STEP_GPU = 2    /* a GPU kernel of MS per batch on the trainer's stream (gpu_step.cu) */
};
extern const char *const lb_step_mode_names[3]; /* NULL, "sleep", "gpu-kernel" */

/* What the user's DATASET is. */
enum lb_kind { LB_KIND_DEFAULT = 0, LB_KIND_SHARDS, LB_KIND_FOLDER, LB_KIND_LMDB };

typedef struct lb_config {
    const char *dataset;  /* user's path, or NULL for the embedded default */
    const char *cache_dir;
    int workers[LB_MAX_WORKERS];
    int nworkers;
    int layouts[LB_NLAYOUTS]; /* in the order given */
    int nlayouts;
    int layouts_given;    /* --layouts was on the command line */
    int cold;             /* --cache cold */
    int batch_size;
    int mode;             /* STK_MODE_* */
    int stage;            /* STK_STAGE_* */
    int repeat;
    double seconds;       /* per run; 0 = automatic */
    int epochs;           /* per run; 0 = use seconds */
    double step_ms;       /* simulated trainer step */
    int autotune;
    int device;           /* -1 host batches, >= 0 CUDA device; -2 = automatic */
    int size;             /* output side */
    int sample_images;    /* images in the embedded default */
    int read_delay_us;    /* injected delay before every read (slow-storage stand-in), 0 = none */
    uint64_t seed;
    const char *json_path, *csv_path, *plot_path;
    int quiet;
    int cores;
    /* the simulated trainer, decided by main before the sweep (lb_trainer_setup) */
    int step_mode;              /* lb_step_mode */
    char step_reason[320];      /* why the trainer sleeps ("" in gpu-kernel mode) */
    int step_device;            /* CUDA device the step kernel runs on, -1 */
    double step_cal_target_ms;  /* calibration kernel asked for (min(MS, LB_CAL_MAX_MS)), 0 = none */
    double step_cal_ms;         /* its length measured with CUDA events, < 0 = none */
    lb_gpu *gpu;                /* the trainer's device, stream and events (gpu-kernel mode) */
} lb_config;

/* One measured point (median of its repeats). Shares are fractions 0..1; a share < 0 means the
 * stage did not run (e.g. the stager with --stage decode). */
typedef struct lb_stage_share {
    double busy, starved, blocked;
    uint32_t threads;
} lb_stage_share;

/* An s3:// dataset's fetch figures for one run (fetch.c); all zero for a local dataset. */
typedef struct lb_fetch {
    stk_fetch_stats st; /* the loader's dataset at the run's end (cumulative since its open) */
    double open_s;      /* stk_loader_open: listing, cache lookups and the download */
} lb_fetch;

typedef struct lb_point {
    int layout, workers;
    int repeat;
    double runs[LB_MAX_REPEAT]; /* images/s of each repeat */
    double images_per_s, images_per_s_min, images_per_s_max; /* median, min, max */
    double mb_per_s;
    double cpu_cores;
    lb_stage_share read, decode, stager;
    double wait_fraction;          /* consumer time in stk_loader_next / wall (loader stats) */
    double trainer_wait_fraction;  /* < 0 when step_ms == 0 */
    double step_kernel_ms;         /* mean event-timed step kernel in the window, < 0 = none */
    uint64_t steps, steps_on_batch; /* trainer steps in the window; of them, kernels that read a
                                       device batch (the rest only spun: host batches) */
    double wall_s;                 /* measured window of the median run */
    uint64_t samples, batches;     /* in that window */
    uint64_t bad_records;
    uint64_t disk_read_bytes;      /* fetched from storage by this process (/proc/self/io) */
    uint64_t record_errors;        /* stk_loader_error_count at the end of the run */
    char first_bad[400];           /* where and why of the first record error, "" if none */
    int io_backend, io_direct;
    char io_note[96];
    uint64_t host_ring_bytes, pinned_bytes, device_bytes, reader_pool_bytes;
    int device;
    lb_fetch fetch;         /* s3://: the median run's fetch (fetch.c) */
    stk_verdict verdict;    /* the library's classifier over the median run's window */
    const char *bottleneck; /* its name here: "read", "decode", "stager", "trainer" */
    int failed;             /* the point could not run */
    char error[512];
    void *detail;           /* per-run figures between init and finish (point.c) */
} lb_point;

typedef struct lb_dataset {
    int kind;               /* lb_kind */
    char path[4096];        /* what the user gave, or the default's shard dir */
    char folder[4096];      /* ImageFolder for the files layout ("" when none) */
    char shards[4096];      /* shards / LMDB for the shard layouts ("" when none) */
    uint64_t records;
    uint64_t payload_bytes;
    uint32_t shard_count;
    int available[LB_NLAYOUTS];
    char why_not[LB_NLAYOUTS][160];
} lb_dataset;

typedef struct lb_autotune {
    int done;
    int layout;
    int workers;           /* fewest workers that keep the trainer fed, 0 = none did */
    int max_tried;
    double wait_fraction;  /* at that count */
    double best_ips;       /* best images/s seen */
} lb_autotune;

typedef struct lb_results {
    lb_point *points;
    size_t npoints;
    lb_autotune tune;
    char verdict[2048];
    const char *bottleneck;
    uint64_t peak_ring, peak_pinned, peak_device, peak_pool;
    long max_rss_kb;
    double total_s;
    double load_start, load_end; /* 1-minute load average before and after the sweep */
} lb_results;

/* ---- synth.c: the embedded default sample ---- */
/* Make (or reuse) the default ImageFolder and its shards under CACHE_DIR; fill DS. */
int lb_default_dataset(const lb_config *cfg, lb_dataset *ds);
/* Pack the ImageFolder SRC into shards at DST with stk_pack, or reuse a complete DST. */
int lb_ensure_packed(const lb_config *cfg, const char *src, const char *dst, uint64_t expect);
/* Synthesise image I of the default sample as a JPEG (malloc'd, *len set). Deterministic. */
uint8_t *lb_synth_jpeg(uint64_t seed, uint64_t i, size_t *len, int *w, int *h);

/* ---- point.c: one measured point ---- */
/* A point is initialised, run --repeat times (the sweep interleaves the repeats of all points,
 * so that a drift of the machine touches every point alike), then finished: median, min, max,
 * and the other figures from the run closest to the median. */
void lb_point_init(const lb_config *cfg, lb_point *pt, int layout, int workers);
int lb_point_run(const lb_config *cfg, const lb_dataset *ds, lb_point *pt, int rep, const char *label);
void lb_point_finish(const lb_config *cfg, lb_point *pt);
/* Read every file of the dataset once (warm cache) / drop it from the page cache (cold). */
void lb_warm_cache(const char *path);
int lb_drop_cache(const char *path);

/* ---- report.c ---- */
void lb_print_table(FILE *f, const lb_config *cfg, const lb_dataset *ds, const lb_results *r);
void lb_make_verdict(const lb_config *cfg, const lb_dataset *ds, lb_results *r);
int lb_write_json(const char *path, const lb_config *cfg, const lb_dataset *ds, const lb_results *r);
int lb_write_csv(const char *path, const lb_config *cfg, const lb_dataset *ds, const lb_results *r);
int lb_write_svg(const char *path, const lb_config *cfg, const lb_dataset *ds, const lb_results *r);
const char *lb_point_bottleneck(const lb_config *cfg, const lb_point *p);

/* ---- fetch.c: s3:// datasets ---- */
int lb_is_s3(const char *path);
/* --cache cold on s3://: an empty cache directory of this run's own under cfg->cache_dir. */
int lb_fetch_cold_dir(const lb_config *cfg, char *dir, size_t cap);
void lb_fetch_cold_done(const char *dir);
/* The loader's fetch figures at a run's end; OPEN_S: the time stk_loader_open took. */
void lb_fetch_record(stk_loader *h, double open_s, lb_fetch *out);
void lb_fetch_table(FILE *f, const lb_results *r);
void lb_fetch_json(FILE *f, const lb_point *p);
/* The CSV's fetch columns (each followed by a comma; all empty for a local dataset). */
#define LB_FETCH_CSV_HEADER                                                                                   \
    "fetch_shards,fetch_cache_hits,fetch_cache_misses,fetch_hit_rate,fetch_bytes,fetch_requests,"            \
    "fetch_retries,fetch_busy_s,fetch_starved_s,fetch_link_bytes_per_s,fetch_inflight,fetch_open_s,"
void lb_fetch_csv(FILE *f, const lb_point *p);
/* The fetch-bound verdict of point B in words, like snprintf. */
size_t lb_fetch_verdict(const lb_config *cfg, const lb_point *b, char *out, size_t cap);

/* ---- the simulated trainer (loaderbench.c) ---- */
/* Decide how --step-ms consumes a batch: a GPU kernel when CUDA is built and a device answers
 * (calibrated once), else a sleep, with the reason. */
void lb_trainer_setup(lb_config *cfg);
/* What a point's step kernels read: "device-batch", "none" (host batches: the kernel only spins),
 * "mixed", or NULL outside gpu-kernel mode. */
const char *lb_step_input(const lb_config *cfg, const lb_point *p);

/* ---- small helpers (loaderbench.c) ---- */
double lb_now(void);
void lb_progress(const lb_config *cfg, int final, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lb_note(const lb_config *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *lb_human_bytes(uint64_t b, char *buf, size_t cap);
int lb_mkdirs(const char *path);

#endif
