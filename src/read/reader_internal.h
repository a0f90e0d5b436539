/* SPDX-License-Identifier: MIT */
/*
 * reader_internal.h — the reader's state, shared by the files of the read stage: reader.c
 * (lifecycle), reader_pool.c (buffers and work intake), reader_verify.c (one read from plan to
 * delivery), reader_threads.c (pread / files / mmap thread pools), reader_uring.c (io_uring).
 * Internal to src/read.
 */
#ifndef STK_READER_INTERNAL_H
#define STK_READER_INTERNAL_H

#include "reader.h"

#include <lmdb.h>
#include <stdatomic.h>

#define ALIGN 4096u
#define MAX_RETRIES 100 /* EINTR/EAGAIN or no-progress resubmits of one read */

enum { BK_URING = 1, BK_PREAD, BK_FILES, BK_MMAP };

struct stk__uring;

/* A pool buffer and the read it carries. */
typedef struct rslot {
    stk__read rd; /* what SINK gets; rd.priv points back here */
    uint8_t *mem;
    size_t cap;
    int large;
    int buf_index;     /* index of its registered buffer (io_uring fixed buffers); -1: grown */
    uint8_t *own;      /* grown past its class (stk__rd_take_work): its own memory, or NULL */
    struct rslot *next;
    /* the read in progress */
    uint32_t shard;
    int fd;
    int direct;
    uint64_t base_off; /* file offset of mem[0] */
    uint64_t voff;     /* file offset of the value */
    uint32_t vlen;     /* value length (table) */
    uint32_t vskip;    /* voff - base_off */
    uint32_t want;     /* bytes needed from base_off: vskip + vlen */
    uint32_t req;      /* bytes requested from base_off (aligned span for O_DIRECT) */
    uint32_t done;     /* bytes at mem[0..done) valid */
    uint32_t cur_len;  /* length of the request now in flight */
    uint32_t acct;     /* bytes counted in inflight_bytes_now for it */
    int retries;
    int fault_eio, fault_short, fault_delay;
    _Atomic uint64_t busy_since; /* when the read of busy_index began (ns), 0 = none in flight: */
    _Atomic uint64_t busy_index; /* a loader's timeout names the oldest (stk__reader_oldest) */
} rslot;

struct stk__reader {
    stk_dataset *ds;
    stk__reader_config cfg;
    int bk;               /* BK_* */
    int backend;          /* STK_IO_* reported */
    int fallback_reason;
    char note[96];
    int files;            /* files layout */
    uint32_t eff_qd;
    uint32_t nthreads;    /* threads started */

    /* pool */
    uint8_t *pool_mem;
    size_t pool_bytes;
    rslot *slots;
    uint32_t nslots, n_normal, n_large;
    size_t normal_cap, large_cap;
    rslot *free_normal, *free_large;
    uint32_t free_n[2];     /* free buffers per class, [1] = large (under mu) */
    uint32_t wait_n[2];     /* threads waiting in pool_get per class (under mu) */
    uint32_t wake_at;       /* a normal-class waiter is woken once this many are free */

    pthread_mutex_t mu;
    pthread_cond_t cv_free[2]; /* a buffer of that class came back ([1] = large) */
    pthread_cond_t cv_fl;   /* in-flight space (io_uring submitter) */
    pthread_cond_t cv_sub;  /* something submitted / submitter done (io_uring reaper) */
    uint32_t inflight;      /* io_uring reads in flight (under mu) */
    int fl_waiting;         /* the submitter waits on cv_fl for room ... */
    uint32_t fl_need;       /* ... for a read of this many bytes */
    uint64_t inflight_bytes_now;
    int submit_done;
    int reaper_idle;        /* the io_uring reaper sleeps on cv_sub (under mu) */
    _Atomic int stopping;
    int running;

    _Atomic int *refused;   /* per shard: O_DIRECT refused (EINVAL) */
    MDB_env **menv;         /* mmap backend: own environment per shard */
    MDB_dbi *mdbi;
    _Atomic uint32_t inflight_now, inflight_max;
    _Atomic uint64_t disk_bytes;
    _Atomic uint64_t direct_reads;
    _Atomic uint64_t resubmits;

    pthread_t *threads;
    stk__work_fn work;
    stk__sink_fn sink;
    void *user;

    struct stk__uring *ur;  /* io_uring backend state (reader_uring.c); NULL for the others */
    int fixed;              /* pool registered with the ring: READ_FIXED, no page pinning per read */
    int fixed_err;          /* why registration failed (-errno), 0 = not tried or fine */
    stk__stage_clock clock;
};

/* Bytes of the ALIGN-aligned span that encloses [off, off + len). */
static inline uint64_t stk__rd_span(uint64_t off, uint64_t len)
{
    uint64_t a = off / ALIGN * ALIGN;
    return stk__round_up(off + len, ALIGN) - a;
}

static inline void stk__rd_inflight_inc(stk__reader *r)
{
    uint32_t now = atomic_fetch_add(&r->inflight_now, 1) + 1;
    uint32_t mx = atomic_load(&r->inflight_max);
    while (now > mx && !atomic_compare_exchange_weak(&r->inflight_max, &mx, now))
        ;
}

static inline void stk__rd_inflight_dec(stk__reader *r) { atomic_fetch_sub(&r->inflight_now, 1); }

/* S's read begins (ON) or ends: what stk__reader_oldest sees. */
static inline void stk__rd_busy(rslot *s, int on)
{
    if (on)
        atomic_store(&s->busy_index, s->rd.index);
    atomic_store(&s->busy_since, on ? STK__MAX(stk__now_ns(), 1) : 0);
}

#endif
