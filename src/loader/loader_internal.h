/* SPDX-License-Identifier: MIT */
/*
 * loader_internal.h — the loader's private state, shared by loader.c (public API, consumer side),
 * loader_pipeline.c (reader WORK/SINK, decode workers, stager thread, launch/halt),
 * loader_report.c (stats and the one-screen report), loader_params.c (the setters) and
 * loader_errors.c (the record-error list).
 * Internal.
 *
 * Vocabulary
 *   run         the pipeline between one launch and the next halt. It starts at (r_e0, r_s0)
 *               and runs on through later epochs without stopping.
 *   run batch k the k-th batch of the run (k = 0, 1, ...). Epoch r_e0 has r_nb0 batches starting
 *               at sample r_s0; every later epoch has bpe batches starting at sample 0.
 *   slot        one of K host batch slots; batch k lives in slot k % K. A slot whose `seq` is k
 *               is free for (or being filled with, or holding) batch k; releasing it adds K.
 *   dev buffer  one of nbuf device buffers (stager); device batch k lives in buffer k % nbuf.
 *
 * How the pieces meet (docs/ARCHITECTURE.md, "Host batch ring and stager"):
 *
 *   reader threads ── WORK() ──► (pos, index, epoch)    gated on ring space: sample pos of run
 *        │                                              batch k is handed out only when slot
 *        │                                              k % K is free for batch k
 *        └── SINK() ──► decode queue ──► T workers ──► slot k % K, sample pos - first
 *                                                           │ last sample written: done
 *                       (device path) stager thread ◄───────┘ in order: H2D, then frees the slot
 *   next() ◄── batch k: host slot (done) or device buffer k % nbuf (ready)
 *   release() ── host: slot seq += K (space for batch k + K); device: buffer seq += nbuf
 */
#ifndef STK_LOADER_INTERNAL_H
#define STK_LOADER_INTERNAL_H

#include "augment.h"
#include "augops.h"
#include "convert.h"
#include "common.h"
#include "dataset.h"
#include "loader_errors.h"
#include "order.h"
#include "params.h"
#include "reader.h"
#include "stager.h"

/* ---- parameters (the table: core/params.c) ------------------------------------------------ */

typedef union stk__pval {
    int64_t i;
    double d;
} stk__pval;

/* ---- bad records (loader_bad.c) ----------------------------------------------------------- */

/* Reason classes of bad records, counted per batch for the epoch summary and the limit. */
enum { STK__BAD_NOT_JPEG, STK__BAD_DECODE, STK__BAD_TOO_LARGE, STK__BAD_CRC, STK__BAD_TRUNCATED,
       STK__BAD_EMPTY, STK__BAD_CORRUPT, STK__BAD_READ, STK__BADK };

/* A batch's bad records as the consumer accounts them: per class, the lowest sample's text, and
 * whether one had no good substitute. */
typedef struct stk__badinfo {
    uint32_t k[STK__BADK];
    uint32_t first_i;            /* lowest bad sample (UINT32_MAX: none) */
    int nosub;                   /* a bad record found no good substitute: the batch fails */
    int first_status;
    char first[STK__ERRLEN];     /* the lowest bad sample: name, index, reason, substitute */
} stk__badinfo;

/* ---- ring, device buffers, workers --------------------------------------------------------- */

typedef struct stk__slot {
    /* guarded by h->mu */
    uint64_t seq;        /* run batch this slot is for */
    int started;         /* metadata set by WORK for batch `seq` */
    int done;            /* every sample written */
    int held;            /* handed to the consumer (host batches) */
    int fail_status;     /* strict mode: first bad record's status (lowest sample) */
    uint32_t fail_i;
    char fail_msg[STK__ERRLEN];
    /* set by WORK (under h->mu) before any sample of the batch is handed out */
    uint64_t epoch, number, first;
    uint32_t size;
    _Atomic uint32_t remaining;
    _Atomic uint32_t bad;
    _Atomic uint32_t badk[STK__BADK]; /* bad records per class */
    stk__badinfo badi;   /* first_i, nosub, first (guarded by h->mu); k copied at hand-out */
    /* storage, allocated once at start */
    uint8_t *images;     /* NULL for STK_STAGE_READ */
    uint8_t *targets;    /* bs rows of h->tout_row bytes; NULL without targets */
    int32_t *labels;
    uint64_t *indices;
    uint8_t *substituted;
    uint32_t *payload;
    stk_batch batch;     /* what next() hands out */
} stk__slot;

typedef struct stk__devbuf {
    /* guarded by h->mu */
    uint64_t seq;        /* run batch this buffer is for */
    int ready, held;
    int fail_status;
    char fail_msg[STK__ERRLEN];
    uint64_t epoch, number, first;
    uint32_t size, bad;
    stk__badinfo badi;
    uint8_t *targets;
    int32_t *labels;
    uint64_t *indices;
    uint8_t *substituted;
    uint32_t *payload;
    stk_batch batch;
} stk__devbuf;

typedef struct stk__worker {
    stk_loader *h;
    pthread_t th;
    int running;
    stk__worker_ctx *ctx;
    uint8_t *scratch;    /* uint8 HWC sample when the slot needs a conversion */
    uint8_t *aug_scratch; /* a sample for the augmentation ops (STK_P_AUG_POLICY), else NULL */
    double *aug_tmp;      /* a sample of doubles for GaussianBlur or AugMix, else NULL */
    uint8_t *sub_buf;     /* a substitute's payload (allocated at the first bad record) */
    size_t sub_cap;
    char err[STK__ERRLEN];
} stk__worker;

/* ---- telemetry: the counters behind stk_loader_stats (loader_report.c), reset at start ---- */

typedef struct stk__loader_tel {
    stk__stage_clock dec_clock, stg_clock;
    /* guarded by stats_mu */
    stk_stage_stats read_acc;    /* counters of readers already destroyed (earlier runs) */
    uint64_t read_disk_acc;
    uint32_t inflight_max_acc;
    stk__reader_info last_rinfo; /* info of the latest reader (kept after it is destroyed) */
    int have_rinfo;
    double t_start, cpu_u0, cpu_s0;
    /* any thread */
    _Atomic uint64_t wait_ns, batches_out, samples_out;
    _Atomic uint64_t crc_errors, io_errors, decode_errors, substituted, decode_warnings;
    /* decode workers: wall time in the per-sample augmentation (policy / steps, erasing), a
     * part of dec_clock.busy_ns, and the samples it ran on; untouched without augmentation */
    _Atomic uint64_t aug_ns, aug_items;
} stk__loader_tel;

/* ---- the loader ---------------------------------------------------------------------------- */

enum { STK__LS_CREATED = 0, STK__LS_OPENED = 1, STK__LS_STARTED = 2 };

struct stk_loader {
    int state;                   /* STK__LS_*; changed by the consumer thread only */
    stk__pval *pv;               /* parameter values, indexed like stk__param_table */
    float mean[3], std[3];
    int have_mean, have_std;
    float *lut;                  /* STK_P_LUT: 3 x 256 float outputs, or NULL */
    uint64_t *subset;            /* stk_loader_set_indices: the records an epoch covers, or NULL */
    uint64_t nsubset;
    char *cache_dir;             /* stk_loader_set_cache_dir (s3:// datasets), or NULL */
    /* the shard-window order (loader_order.c): STK_P_SHUFFLE_WINDOW and the shard table */
    uint32_t sw_window;
    uint64_t *sw_first, *sw_count;
    stk__shard_table sw_all;     /* the dataset's shards (sw_first, sw_count): record -> shard */
    stk__shard_table sw_tab;
    /* with stk_loader_set_indices in the shard-window order (stk__loader_order_subset): the
     * list's records grouped by shard (stable), the subset's table (first / count in positions
     * of sw_sub, only the shards holding a listed record dealt); sw_tab then points at it */
    uint64_t *sw_sub, *sw_sfirst, *sw_scount;
    uint32_t *sw_live;
    /* epoch sw_rest_epoch resumed from another world size (stk_loader_resume_segments): what
     * the earlier runs left of it and the segments that tell so (under mu; replaced only while
     * no thread runs, freed by order_free) */
    stk__rest *sw_rest;
    uint64_t sw_rest_epoch;
    uint64_t sw_hist[3 * STK__MAX_SEGS];
    uint32_t sw_nhist;
    /* stk_loader_resume_segments before start: where the next start begins (consumer thread) */
    uint64_t sw_pend[3 * (STK__MAX_SEGS + 1)], sw_pend_epoch;
    uint32_t sw_npend;
    int sw_pend_set;
    /* streaming an s3:// dataset through a smaller cache (loader_stream.c; under mu) */
    int streaming;
    uint8_t *st_resident;        /* per shard: attached */
    _Atomic uint32_t *st_inflight; /* per shard: reads handed out by WORK, not yet decoded */
    uint64_t *st_ring;           /* windows fetched ahead: [head, tail) */
    uint32_t st_ring_w;
    uint64_t st_head, st_tail, st_cursor; /* cursor: key of the next position WORK hands out */
    uint32_t st_want;            /* shard WORK waits for, or UINT32_MAX */
    uint64_t st_wait_ns;         /* since when WORK waits for a shard (0: it does not) */
    uint64_t st_waited_ns;       /* WORK's ended waits for a shard, summed since the open */
    /* stats fetch_max_wait_us: the consumer's longest wait for a batch counted only while WORK
     * waited for a shard, in the epoch of the last batch handed out (written under mu); a
     * batch's wait is summed over the stk_loader_next calls that timed out waiting for it
     * (Python polls) */
    uint64_t fw_epoch, fw_k, fw_acc_ns;
    _Atomic uint64_t fw_max_ns;
    pthread_cond_t st_cv;
    int st_cv_ok, st_running;
    pthread_t st_th;
    struct stk__stream *st_x;    /* the fetch thread's queue and download slots (loader_stream.c) */
    stk__augprog augprog;        /* STK_P_AUG_STEPS (n = 0: none) */
    stk_vexp_fn vexp;            /* stk_loader_set_vexp (NULL: the built-in exp), copied into augprog */
    int64_t vexp_arg;
    stk__timmaa timmaa;          /* STK_P_TIMM_AUTO_POLICY (nsub = 0: none) */
    float erase_value[3];        /* STK_P_ERASE_VALUE */
    stk_dataset *ds;
    char err[STK__ERRLEN];       /* last_error (consumer thread) */
    stk_cpu_budget budget;       /* measured at create: STK_P_WORKERS' default and its note */

    /* fixed at start */
    uint64_t n;                  /* dataset records */
    uint64_t per_rank, epoch_end, bpe; /* samples per rank, samples used per epoch, batches per epoch */
    uint32_t bs, K;
    int drop_last;
    int stage, device_path, direct_out, normalize, nbuf, workers_n, out_dtype, out_layout;
    int dev_id;
    stk_target_info tout;        /* the targets as handed out (multi-hot: float32 x classes) */
    size_t tout_row;             /* bytes of one sample's target as handed out; 0: none */
    int resizable;               /* STK_P_MAX_OUT_* set: the output size may change per epoch */
    int max_h, max_w;            /* the ring, scratch and device buffers are sized for these */
    uint64_t seed;
    int64_t draw_key;            /* STK_P_DRAW_KEY: -1 record index, else base + position */
    int shuffle, dist_mode;
    uint32_t rank, world;
    stk__aug_config aug;
    stk__augpolicy augp;         /* STK_P_AUG_*: policy STK__AUGP_NONE when off */
    int aug_on;                  /* a policy or steps to apply */
    stk__erase erase;            /* STK_P_ERASE_*: p = 0 when off */
    int erase_random;
    stk__reader_config rcfg;
    size_t host_sample_bytes;    /* bytes per sample in a host slot */
    size_t out_sample_bytes;     /* bytes per sample handed out */
    size_t ring_bytes;           /* K slots of images, each its own allocation (detachable) */
    size_t slot_bytes;
    int ring_pinned;             /* every slot page-locked */
    int pin_reason;              /* STK_P_PIN_HOST asked and not honoured: why (status) */
    _Atomic uint64_t detached;   /* batches detached since start */
    stk__slot *slots;
    stk__devbuf *devs;
    stk__worker *workers;
    stk__stager *stager;
    int fallback_reason;
    stk__queue dq;               /* reads waiting for decode */
    int dq_ok;

    /* the run; guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t space_cv;     /* slots / device buffers freed, halting */
    pthread_cond_t ready_cv;     /* batch done / device batch ready / cancel / pipeline error */
    pthread_cond_t stage_cv;     /* stager: host batch done or device buffer released */
    int halting;
    _Atomic int halt_flag;       /* mirror of halting, read by workers without the lock */
    int running;                 /* a run is launched */
    uint64_t r_e0, r_s0, r_nb0;
    uint64_t r_base, r_end0;     /* epoch r_e0: global positions [0, r_base) delivered before this
                                    run (elastic resume, else 0); this rank's samples in it */
    uint64_t gate_end;           /* resizable loaders: WORK starts no batch of an epoch >= this
                                    until the consumer asks for that epoch (UINT64_MAX: no gate) */
    /* WORK cursor */
    uint64_t w_k, w_epoch, w_pos, w_bend;
    stk__plan w_plan;
    /* consumer cursor */
    uint64_t c_k, c_epoch, c_next;
    uint32_t held_host, held_dev;
    int failed;                  /* sticky strict-mode failure status, 0 = none */
    int pipe_status;             /* fatal pipeline error (stager), 0 = none */
    char pipe_msg[STK__ERRLEN];
    int cancel_pending;
    /* consumer entry, any thread (loader.c, "Consumer entry") */
    int closing;                 /* stop/destroy under way: next wakes with STK_E_CANCELLED and
                                    no consumer call enters */
    int in_next;                 /* a thread is inside stk_loader_next */
    uint32_t inside;             /* threads inside next / detach / seek (stop waits for 0) */
    pthread_cond_t idle_cv;      /* `inside` fell to 0, or a stop finished */
    /* threads */
    stk__reader *reader;
    pthread_t stager_th;
    int stager_running;
    int reader_started;

    /* telemetry */
    pthread_mutex_t stats_mu;    /* guards the reader pointer for snapshots, tel's accumulators
                                    and a streamed shard's open and close (loader_stream.c);
                                    taken after mu, never mu after it */
    stk__loader_tel tel;
    _Atomic uint64_t pos_epoch, pos_next; /* tell(), readable from any thread */

    stk__errlist errs;           /* bad records (loader_errors.c) */

    /* bad records (loader_bad.c) */
    stk_log_fn log_fn;           /* stk_loader_set_log; NULL: stderr */
    void *log_user;
    double max_bad;              /* STK_P_MAX_BAD_FRACTION, fixed at start */
    pthread_mutex_t sub_mu;      /* substitute reads (stk_dataset_read sets the dataset's error) */
    /* consumer side, guarded by mu */
    int warned;                  /* the loader's first bad record was logged */
    uint64_t t_epoch;            /* the epoch tallied (UINT64_MAX: none) */
    uint64_t t_seen, t_bad, t_k[STK__BADK];
    int nlog;                    /* messages to log when next() leaves (after the unlock) */
    char logq[2][STK__ERRLEN + 256];
};

/* loader_params.c: records an epoch covers (the stk_loader_set_indices list, else the dataset) */
uint64_t stk__loader_records(const stk_loader *h);
/* loader_pipeline.c */
int stk__loader_launch(stk_loader *h, uint64_t epoch, uint64_t sample);
/* launch with epoch EPOCH's global positions [0, BASE) counted as delivered (elastic resume) */
int stk__loader_launch_at(stk_loader *h, uint64_t epoch, uint64_t sample, uint64_t base);
/* samples of this rank in epoch EPOCH of the run (the run's first epoch may be a resumed rest) */
uint64_t stk__loader_epoch_end(const stk_loader *h, uint64_t epoch);
/* samples of this rank in epoch EPOCH when its global positions [0, BASE) were delivered before
 * (the share of the rest, STK_P_DROP_LAST applied); BASE 0: a whole epoch */
uint64_t stk__loader_rest_end(const stk_loader *h, uint64_t epoch, uint64_t base);
void stk__loader_halt(stk_loader *h);
/* run batch K -> epoch, first sample, size (h->bpe > 0 or K < r_nb0) */
void stk__loader_geom(const stk_loader *h, uint64_t k, uint64_t *epoch, uint64_t *first, uint32_t *size);

/* loader_bad.c */
int stk__bad_class(int status);
/* Reset a batch's bad-record info (WORK, when the batch starts). */
void stk__bad_reset(stk__slot *s);
/* Sample I of slot S (record RD) is bad with STATUS / REASON: note it for the consumer (its class;
 * its text when it is the lowest bad sample so far) (takes h->mu). FOUND: 1 replaced by record
 * SUB_INDEX, 0 no good record found (the batch fails), -1 not replaced (read-only stage). */
void stk__bad_note(stk_loader *h, stk__slot *s, uint32_t i, const stk__read *rd, int status,
                   const char *reason, uint64_t sub_index, int found);
/* Draw a good substitute for bad record RD into the sample at O (decoded, augmented with RD's
 * key; O may be NULL in the read-only stage): STK_OK with *INDEX and *LABEL of the record used, or the status of the last draw when STK_SUBSTITUTE_TRIES found none. */
int stk__bad_draw(stk_loader *h, stk__worker *w, const stk__read *rd, uint8_t *o, uint64_t *index,
                  int32_t *label);
/* The consumer hands out a batch (h->mu held): tally it into its epoch, queue the first-bad and
 * summary messages, check STK_P_MAX_BAD_FRACTION. STK_OK, or the failure (h->err set). */
int stk__bad_account(stk_loader *h, uint64_t epoch, uint64_t first, uint32_t size, const stk__badinfo *b);
/* Log the queued messages (after h->mu is released; FN, USER and the texts copied under it). */
void stk__bad_flush(stk_log_fn fn, void *user, int n, char msgs[][STK__ERRLEN + 256]);

/* loader_report.c */
void stk__loader_stats_reset(stk_loader *h);
/* loader_fetch.c: the dataset's fetch counters into *OUT; the report's fetch line (empty for
 * a local dataset) and its fetch-bound verdict line, both like snprintf. */
void stk__loader_fetch_stats(const stk_loader *h, stk_stats *out);
size_t stk__loader_fetch_line(const stk_loader *h, const stk_stats *st, char *buf, size_t cap);
size_t stk__loader_fetch_verdict(const stk_loader *h, const stk_stats *st, char *buf, size_t cap);
/* next() waited TIMEOUT_MS for batch K in vain: STK_TIMEOUT, with h->err naming the read in
 * flight the longest, when one is (h->mu held). */
int stk__loader_timed_out(stk_loader *h, uint64_t k, int timeout_ms);
/* loader_order.c: the shard table of an opened dataset (none for the files layout); the plan of
 * EPOCH with the configured parameters (epoch sw_rest_epoch on sw_rest, when set), or with the
 * ones given (WINDOW 0: the global order; STK_E_INVALID for a window without shards). */
int stk__loader_order_open(stk_loader *h);
void stk__loader_order_free(stk_loader *h);
/* With a subset (a dataset of shards), lay out the subset's shard table (sw_tab, sw_sub), which
 * the shard-window order plans on; else sw_tab is the dataset's. At stk_loader_set_indices and
 * at configure. STK_E_NOMEM. */
int stk__loader_order_subset(stk_loader *h);
/* The record at position V of the epoch's plan (the list's entry, for a subset; the grouped list
 * in the shard-window order). After configure. */
static inline uint64_t stk__loader_record_at(const stk_loader *h, uint64_t v)
{
    return !h->subset ? v : h->sw_window && h->sw_sub ? h->sw_sub[v] : h->subset[v];
}
/* Forget an elastic resume's rest (no thread may run). */
void stk__loader_rest_drop(stk_loader *h);
/* loader_consume.c: start at the position stk_loader_resume_segments left before start
 * (h->sw_pend_set; cleared). */
int stk__loader_launch_pending(stk_loader *h);
int stk__loader_plan(const stk_loader *h, stk__plan *p, uint64_t epoch);
int stk__loader_plan_of(const stk_loader *h, stk__plan *p, uint64_t n, uint64_t seed,
                        uint64_t epoch, int shuffle, uint32_t rank, uint32_t world, int mode,
                        uint32_t window);
/* loader_stream.c: streaming set up at configure (after sw_window; may choose it), the fetch
 * thread started after a launch and joined by halt, freed by destroy; WORK's gate (h->mu held:
 * 1 when INDEX's shard is attached, else it records the wait and returns 0), a read handed out
 * and back. */
int stk__loader_stream_config(stk_loader *h);
void stk__loader_stream_free(stk_loader *h);
int stk__loader_stream_launch(stk_loader *h);
void stk__loader_stream_halt(stk_loader *h);
int stk__loader_stream_gate(stk_loader *h, uint64_t index);
void stk__loader_stream_out(stk_loader *h, uint64_t epoch, uint64_t pos, uint64_t index);
void stk__loader_stream_back(stk_loader *h, uint64_t index);
/* The records a bad record's substitute is drawn from (loader_bad.c): the U-th (U < N) is
 * LIST[U], or BASE + U when LIST is NULL. */
typedef struct stk__pool {
    const uint64_t *list;
    uint64_t base, n;
} stk__pool;
/* The pool of a bad record INDEX of a streamed dataset: the records of its own shard (the
 * subset's entries in it, with a subset), the only shard sure to stay attached while its sample
 * is processed (the worker calls stk__loader_stream_back after it). */
stk__pool stk__loader_stream_pool(const stk_loader *h, uint64_t index);
/* Shared by loader.c and loader_consume.c: an integer parameter's value; the caller-owned image
 * block of stk_loader_detach (freed by stk_images_free); bytes per sample handed out and per
 * sample in a host slot at output size OUT_H x OUT_W. */
int64_t stk__loader_pget(const stk_loader *h, int key);
int stk__loader_images_alloc(size_t bytes, int device, uint8_t **out, int *pinned, char *err);
void stk__loader_sample_bytes(stk_loader *h, int out_h, int out_w, size_t *out_b, size_t *host_b);

#endif
