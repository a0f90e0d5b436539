/* SPDX-License-Identifier: MIT */
/*
 * reader.c — the read stage: (position, dataset index) work items in, verified payload bytes out.
 *
 * Why not LMDB's own read path. mdb_get() on a cold shard is one page fault at a time per thread
 * (plus readahead that drags in neighbours nobody asked for). The dataset's offset table
 * (dataset.c) already knows {shard, file offset, length} of every value, so the reader issues the
 * reads itself: many in flight, exactly the bytes wanted, into buffers it owns. LMDB stays the
 * container (any LMDB tool opens a shard); STK_IO_MMAP keeps LMDB's path for comparison.
 *
 * Backends
 *   io_uring (STK_IO_URING, and STK_IO_AUTO when io_uring can be set up): two threads. The
 *     submitter calls WORK, takes a pool buffer, prepares one IORING_OP_READ and submits it,
 *     keeping at most eff_qd reads and cfg->inflight_bytes bytes in flight, and then takes the
 *     completions already on the ring itself: a buffered read of cached data completes inside
 *     io_uring_enter, so with a warm page cache the submitter verifies and delivers it at once
 *     (bytes still in its cache) and no other thread wakes. The reaper handles what is left in
 *     flight (cold data, O_DIRECT): it sleeps on cv_sub until the submitter leaves reads in
 *     flight, waits for them in the kernel, resubmits short reads and EINTR/EAGAIN results,
 *     verifies, and calls SINK. One thread produces SQEs at a time (sq_mu) and one consumes CQEs
 *     at a time (cq_mu). WORK may block (the loader gates there) without holding up completions:
 *     the reaper is awake whenever reads are in flight.
 *     Wake-ups are batched: once out of buffers the submitter sleeps until eff_qd / 2 are free and
 *     then refills in a burst (measured on the warm 10 000-image set, train, 2 decode workers:
 *     context switches from 6.5 to 0.4 per image).
 *   pread pool (STK_IO_PREAD, and the fallback): cfg->io_threads threads, each WORK -> pread ->
 *     verify -> SINK.
 *   files (the files layout): the same pool with open/read/close per record.
 *   mmap (STK_IO_MMAP): the same pool; mdb_get() in a read transaction per thread and shard and a
 *     memcpy out of the map. The reader opens its own environment per shard (MDB_RDONLY |
 *     MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD; no lock file, so closing it cannot drop the
 *     dataset's fcntl locks) and opens the database handle in a committed transaction: a handle
 *     opened in the dataset's long-lived, never-committed transaction is valid only in that one.
 *     Foreign databases have arbitrary keys, so there the value is found at the table's offset in
 *     the same map.
 *
 * O_DIRECT (cfg->direct, shards and foreign LMDB): the read covers the 4096-aligned range that
 * encloses the value, into a page-aligned buffer; the value is sliced out. A shard whose O_DIRECT
 * descriptor is -1 (refused at open) is read buffered; a read that fails with EINVAL marks the
 * shard refused and is redone buffered. Short reads are resubmitted from the last aligned point;
 * a read that reaches end of file before the value's end is STK_E_TRUNCATED (the shard shrank).
 *
 * Buffers: one page-aligned allocation at create, in two size classes. Normal buffers are sized
 * for 99% of the records' read spans; if some records are larger, 2 to 8 large buffers sized for
 * the largest span serve them (a read waits for one when all are busy). There is no malloc per
 * record. With io_uring the pool is registered with the ring (fixed buffers: pinned once, not per
 * read) when the kernel and RLIMIT_MEMLOCK allow; the note says which. A buffer belongs to the consumer from SINK until stk__reader_release().
 *
 * Verification (stoker shards): the 16-byte record header must have the magic and a payload
 * length equal to the table length - 16; the payload's CRC32C must match unless
 * cfg->verify_crc = 0. Foreign LMDB values and files have neither. An error never stops the
 * reader: the work item is delivered to SINK with status, sys_errno and a detail (offset, sizes).
 *
 * Fault injection (tests, issue 8): per work item a draw from stk__rng keyed by
 * (fault_seed, epoch, index) decides, each with its rate in parts per million, whether the read
 * fails with EIO (the read is issued, its result replaced by -EIO), is cut short (the first
 * request asks for about half the bytes, so the resubmit path runs), or is delayed by
 * fault_delay_us (before it is issued). Same seed, same faults.
 *
 * Stage clock (summed over the reader's threads):
 *   busy    = CPU work: preparing and submitting reads, header and CRC checks, bookkeeping;
 *   starved = waiting for storage: for a completion with reads in flight (io_uring), inside
 *             pread/open/read/close, in the memcpy that faults the map in (mmap), injected delay;
 *   blocked = waiting on the consumer: inside WORK, inside SINK, and for a free pool buffer.
 *   The io_uring reaper's idle time while nothing is in flight (it waits for the submitter, which
 *   is then in WORK) is not counted. items/bytes/errors = records delivered / payload bytes /
 *   error deliveries.
 *
 * STOKER_DISABLE_URING=1 in the environment makes io_uring setup fail as if
 * io_uring_queue_init() returned -ENOSYS (tests force the fallback path with it).
 *
 * Files that change under the reader. A shard that shrinks mid-epoch gives STK_E_TRUNCATED for
 * the values past its new end (a read reaches end of file); one that is unlinked is still read
 * through the open descriptors; an image file removed after open gives -ENOENT. The mmap backend
 * refuses a shard whose size is below the size at open before it touches the map, but like any
 * LMDB reader it cannot survive a shard truncated between that check and the copy (SIGBUS): it
 * is the reference path for benchmarks, not the default.
 *
 * Measured (bench/reader_vs_fio.sh, the 10 000-image ImageNet-like set packed into one 1.1 GB
 * shard, cold cache, 5 interleaved rounds, medians, this 2-core VM under a load of ~16): io_uring
 * O_DIRECT qd 32 read the whole shard in random order at 1.24x fio's MB/s (fio: io_uring,
 * O_DIRECT, randread, same mean block size, depth and bytes). CPU-s per GB: 0.36 with the CRC32C
 * of every payload, 0.23 without; fio 0.41 for its whole process, 0.26 for its job thread alone
 * (so with CRC the reader is 0.87x fio's process but 1.40x its job thread). A random 10% of the
 * records: 7.2x the records/s of mdb_get with default readahead (which pulled 10.3x the payload
 * bytes into the cache) and ~16x mdb_get with MDB_NORDAHEAD.
 */
#include "reader.h"

#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef STK_HAVE_URING
#include <liburing.h>
#endif

#define ALIGN 4096u
#define MAX_RETRIES 100 /* EINTR/EAGAIN or no-progress resubmits of one read */

enum { BK_URING = 1, BK_PREAD, BK_FILES, BK_MMAP };

typedef struct rslot {
    stk__read rd; /* what SINK gets; rd.priv points back here */
    uint8_t *mem;
    size_t cap;
    int large;
    int buf_index;     /* index of its registered buffer (io_uring fixed buffers) */
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
} rslot;

typedef struct mmap_shard {
    MDB_txn *txn;
    const uint8_t *base; /* map base (foreign: value pointer - table offset) */
} mmap_shard;

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

#ifdef STK_HAVE_URING
    struct io_uring ring;
    int ring_ok;
    int fixed;              /* pool registered with the ring: READ_FIXED, no page pinning per read */
    int fixed_err;          /* why registration failed (-errno), 0 = not tried or fine */
    pthread_mutex_t sq_mu;
    pthread_mutex_t cq_mu;  /* taking CQEs off the ring: submitter (inline completions) and reaper */
#endif
    stk__stage_clock clock;
};

/* ---- small helpers ------------------------------------------------------------------------ */

static inline uint64_t span_of(uint64_t off, uint64_t len)
{
    uint64_t a = off / ALIGN * ALIGN;
    return stk__round_up(off + len, ALIGN) - a;
}

static int wants_direct(const stk__reader *r, uint32_t shard)
{
    if (!r->cfg.direct || r->files || r->bk == BK_MMAP)
        return 0;
    const stk__shard *sh = &r->ds->shards[shard];
    return sh->fd_direct >= 0 && !atomic_load(&r->refused[shard]);
}

static void inflight_inc(stk__reader *r)
{
    uint32_t now = atomic_fetch_add(&r->inflight_now, 1) + 1;
    uint32_t mx = atomic_load(&r->inflight_max);
    while (now > mx && !atomic_compare_exchange_weak(&r->inflight_max, &mx, now))
        ;
}

static void inflight_dec(stk__reader *r) { atomic_fetch_sub(&r->inflight_now, 1); }

static void sleep_us(uint32_t us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- pool --------------------------------------------------------------------------------- */

/* Bytes a read of record I needs in its buffer. */
static uint64_t need_of(const stk__reader *r, uint64_t i)
{
    const stk__rec *rec = &r->ds->recs[i];
    if (!r->files && r->bk != BK_MMAP && r->cfg.direct && r->ds->shards[rec->shard].fd_direct >= 0)
        return span_of(rec->off, rec->len);
    return rec->len;
}

/* Size classes from the table: normal = the 99th percentile of needs, leaving out at least the
 * largest record (4 KiB granularity, histogram up to 64 MiB); large = the maximum. Image sizes
 * have a long tail (the ImageNet-like set: p99 527 KB, p99.9 1.6 MB, max 3 MB): sizing every
 * buffer for the 99.9th percentile tripled the pool. */
static void pool_sizes(const stk__reader *r, size_t *normal, size_t *large, uint64_t *n_over)
{
    enum { GRAN = 4096, NB = (64u << 20) / GRAN };
    uint64_t n = r->ds->count, mx = 0;
    uint64_t *hist = calloc(NB + 1, sizeof(uint64_t));
    if (!hist) { /* no histogram: everything normal-sized */
        for (uint64_t i = 0; i < n; i++)
            mx = STK__MAX(mx, need_of(r, i));
        *normal = *large = stk__round_up(STK__MAX(mx, 1), GRAN);
        *n_over = 0;
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t nd = need_of(r, i);
        mx = STK__MAX(mx, nd);
        uint64_t b = (nd + GRAN - 1) / GRAN;
        hist[b > NB ? NB : b]++;
    }
    /* the top 1% (at least one record) may go to the large class */
    uint64_t goal = n > 1 ? n - STK__MAX(n / 100, 1) : n, cum = 0, b = 0;
    for (b = 0; b <= NB; b++) {
        cum += hist[b];
        if (cum >= goal)
            break;
    }
    free(hist);
    size_t nc = b >= NB ? stk__round_up(STK__MAX(mx, 1), GRAN) : (size_t)STK__MAX(b, 1) * GRAN;
    size_t lc = stk__round_up(STK__MAX(mx, 1), GRAN);
    if (lc <= nc)
        lc = nc;
    uint64_t over = 0;
    if (lc > nc)
        for (uint64_t i = 0; i < n; i++)
            over += need_of(r, i) > nc;
    *normal = nc;
    *large = lc;
    *n_over = over;
}

static int pool_create(stk__reader *r, uint32_t inflight_slots, char *err)
{
    size_t nc, lc;
    uint64_t over;
    pool_sizes(r, &nc, &lc, &over);
    r->normal_cap = nc;
    r->large_cap = lc;
    if (r->bk == BK_URING) {
        uint64_t by_bytes = r->cfg.inflight_bytes / nc;
        r->eff_qd = (uint32_t)STK__MAX(1, STK__MIN((uint64_t)r->cfg.queue_depth, by_bytes));
        inflight_slots = r->eff_qd;
    }
    uint32_t hold = r->cfg.hold_buffers ? r->cfg.hold_buffers : STK__MAX(inflight_slots, 16u);
    r->n_normal = inflight_slots + hold;
    /* large buffers: about 4x the share of large records among the normal ones, 2 to 8 */
    uint64_t want_large = (over * r->n_normal * 4 + r->ds->count - 1) / r->ds->count;
    r->n_large = lc > nc ? (uint32_t)STK__MIN(over, STK__MIN(8, STK__MAX(2, want_large))) : 0;
    r->nslots = r->n_normal + r->n_large;
    r->pool_bytes = (size_t)r->n_normal * nc + (size_t)r->n_large * lc;
    r->slots = calloc(r->nslots, sizeof(rslot));
    r->pool_mem = stk__alloc_aligned(ALIGN, r->pool_bytes);
    if (!r->slots || !r->pool_mem)
        return stk__err(err, STK_E_NOMEM, "reader: cannot allocate a %zu-byte buffer pool", r->pool_bytes);
    uint8_t *p = r->pool_mem;
    for (uint32_t i = 0; i < r->nslots; i++) {
        rslot *s = &r->slots[i];
        s->large = i >= r->n_normal;
        s->cap = s->large ? lc : nc;
        s->mem = p;
        s->buf_index = (int)i;
        p += s->cap;
        s->rd.priv = s;
        if (s->large) {
            s->next = r->free_large;
            r->free_large = s;
        } else {
            s->next = r->free_normal;
            r->free_normal = s;
        }
        r->free_n[s->large]++;
    }
    /* io_uring: the submitter, once out of normal buffers, sleeps until half the in-flight
     * allowance is free again and then refills in a burst (one wake-up per eff_qd / 2 reads, not
     * one per buffer the consumer returns). Safe: a consumer that holds at most hold_buffers
     * leaves eff_qd normal buffers to come back. The thread pools wake at the first one. */
    r->wake_at = r->bk == BK_URING ? STK__MAX(1u, r->eff_qd / 2) : 1;
    return STK_OK;
}

/* A buffer that holds NEED bytes; waits while none is free. NULL once stopping. */
static rslot *pool_get(stk__reader *r, uint64_t need)
{
    int large = need > r->normal_cap;
    uint64_t t0 = stk__now_ns(), t1 = t0;
    pthread_mutex_lock(&r->mu);
    rslot **fl = large ? &r->free_large : &r->free_normal;
    if (!*fl) {
        uint32_t want = large ? 1 : r->wake_at;
        r->wait_n[large]++;
        while ((!*fl || r->free_n[large] < want) && !atomic_load(&r->stopping))
            pthread_cond_wait(&r->cv_free[large], &r->mu);
        r->wait_n[large]--;
        t1 = stk__now_ns();
    }
    rslot *s = *fl;
    if (s) {
        *fl = s->next;
        r->free_n[large]--;
    }
    pthread_mutex_unlock(&r->mu);
    if (t1 != t0)
        stk__clock_add(&r->clock.blocked_ns, t1 - t0);
    if (s) {
        memset(&s->rd, 0, sizeof(s->rd));
        s->rd.priv = s;
        s->rd.label = -1;
        s->next = NULL;
        s->fd = -1;
        s->direct = 0;
        s->shard = 0;
        s->base_off = s->voff = 0;
        s->vlen = s->vskip = s->want = s->req = s->done = s->cur_len = 0;
        s->retries = 0;
        s->fault_eio = s->fault_short = s->fault_delay = 0;
    }
    return s;
}

void stk__reader_release(stk__reader *r, stk__read *rd)
{
    if (!r || !rd)
        return;
    rslot *s = rd->priv;
    int c = s->large;
    pthread_mutex_lock(&r->mu);
    if (c) {
        s->next = r->free_large;
        r->free_large = s;
    } else {
        s->next = r->free_normal;
        r->free_normal = s;
    }
    r->free_n[c]++;
    /* wake only a thread that waits for this class, and only at its wake-up mark; one per
     * buffer (the thread pools' waiters each take one: a broadcast woke them all for one) */
    if (r->wait_n[c] && r->free_n[c] >= (c ? 1 : r->wake_at))
        pthread_cond_signal(&r->cv_free[c]);
    pthread_mutex_unlock(&r->mu);
}

/* ---- planning, verification, delivery ----------------------------------------------------- */

/* Set up slot S for record INDEX (shards / foreign). Returns STK_OK or an error status with the
 * detail filled in (delivered without I/O). */
static int plan_read(stk__reader *r, rslot *s)
{
    const stk__rec *rec = &r->ds->recs[s->rd.index];
    const stk__shard *sh = &r->ds->shards[rec->shard];
    s->shard = rec->shard;
    s->voff = rec->off;
    s->vlen = rec->len;
    s->done = 0;
    s->retries = 0;
    if (rec->off > sh->file_size || rec->len > sh->file_size - rec->off) {
        snprintf(s->rd.detail, sizeof(s->rd.detail), "value at %llu (%u bytes) outside the file (%llu bytes)",
                 (unsigned long long)rec->off, rec->len, (unsigned long long)sh->file_size);
        return STK_E_CORRUPT;
    }
    s->direct = wants_direct(r, rec->shard);
    if (s->direct) {
        s->fd = sh->fd_direct;
        s->base_off = rec->off / ALIGN * ALIGN;
        s->req = (uint32_t)span_of(rec->off, rec->len);
    } else {
        s->fd = sh->fd;
        s->base_off = rec->off;
        s->req = rec->len;
    }
    s->vskip = (uint32_t)(rec->off - s->base_off);
    s->want = s->vskip + rec->len;
    if (s->req > s->cap) { /* cannot happen: the pool was sized from the table */
        snprintf(s->rd.detail, sizeof(s->rd.detail), "read of %u bytes exceeds the %zu-byte buffer",
                 s->req, s->cap);
        return STK_E_RANGE;
    }
    return STK_OK;
}

/* Redo a direct read buffered (the filesystem refused O_DIRECT). */
static void to_buffered(stk__reader *r, rslot *s)
{
    atomic_store(&r->refused[s->shard], 1);
    s->direct = 0;
    s->fd = r->ds->shards[s->shard].fd;
    s->base_off = s->voff;
    s->req = s->vlen;
    s->vskip = 0;
    s->want = s->vlen;
    s->done = 0;
}

/* Length of the next request: the rest of the span; a fault-injected short read asks for about
 * half of it the first time (aligned for O_DIRECT). */
static uint32_t next_len(rslot *s)
{
    uint32_t rest = s->req - s->done;
    if (s->fault_short && s->done == 0 && s->retries == 0) {
        uint32_t half = rest / 2;
        if (s->direct)
            half = half / ALIGN * ALIGN;
        if (half > 0)
            rest = half;
        s->fault_short = 0;
    }
    return rest;
}

static void draw_faults(const stk__reader *r, rslot *s)
{
    const stk__reader_config *c = &r->cfg;
    s->fault_eio = s->fault_short = s->fault_delay = 0;
    if (!c->fault_eio_ppm && !c->fault_short_ppm && !c->fault_delay_ppm)
        return;
    stk__rng g;
    stk__rng_init(&g, c->fault_seed, s->rd.epoch, s->rd.index);
    s->fault_eio = stk__rng_below(&g, 1000000) < c->fault_eio_ppm;
    s->fault_short = stk__rng_below(&g, 1000000) < c->fault_short_ppm;
    s->fault_delay = stk__rng_below(&g, 1000000) < c->fault_delay_ppm;
}

/* Check the bytes of a completed read and fill rd (data, len, label, status). */
static void verify(stk__reader *r, rslot *s)
{
    stk__read *rd = &s->rd;
    const uint8_t *v = s->mem + s->vskip;
    uint32_t vlen = s->vlen;
    if (r->files || r->ds->shards[s->shard].foreign) {
        rd->label = stk__dataset_static_label(r->ds, rd->index);
        if (vlen == 0) {
            rd->status = STK_E_EMPTY;
            snprintf(rd->detail, sizeof(rd->detail), "empty %s", r->files ? "file" : "value");
            return;
        }
        rd->data = v;
        rd->len = vlen;
        return;
    }
    int32_t label;
    uint32_t crc, plen;
    int rc = stk__rec_header_decode(v, vlen, &label, &crc, &plen);
    if (rc != STK_OK) {
        rd->status = rc;
        if (rc == STK_E_FORMAT)
            snprintf(rd->detail, sizeof(rd->detail), "record header at %llu: bad magic %02x%02x%02x%02x",
                     (unsigned long long)s->voff, vlen > 0 ? v[0] : 0, vlen > 1 ? v[1] : 0,
                     vlen > 2 ? v[2] : 0, vlen > 3 ? v[3] : 0);
        else
            snprintf(rd->detail, sizeof(rd->detail), "record header at %llu: value of %u bytes too short",
                     (unsigned long long)s->voff, vlen);
        return;
    }
    rd->label = label;
    if ((uint64_t)plen + STK__REC_HDR != vlen) {
        rd->status = STK_E_CORRUPT;
        snprintf(rd->detail, sizeof(rd->detail), "record header at %llu: payload %u bytes, table says %u",
                 (unsigned long long)s->voff, plen, vlen - STK__REC_HDR);
        return;
    }
    if (plen == 0) {
        rd->status = STK_E_EMPTY;
        snprintf(rd->detail, sizeof(rd->detail), "empty payload at %llu", (unsigned long long)s->voff);
        return;
    }
    if (r->cfg.verify_crc) {
        uint32_t got = stk__crc32c(0, v + STK__REC_HDR, plen);
        if (got != crc) {
            rd->status = STK_E_CRC;
            snprintf(rd->detail, sizeof(rd->detail),
                     "crc32c %08x, stored %08x (payload %u bytes at offset %llu)", got, crc, plen,
                     (unsigned long long)(s->voff + STK__REC_HDR));
            return;
        }
    }
    rd->data = v + STK__REC_HDR;
    rd->len = plen;
}

/* Hand S to SINK (status already set, or verify first when status is OK). */
static void deliver(stk__reader *r, rslot *s, int do_verify)
{
    stk__read *rd = &s->rd;
    uint64_t t0 = stk__now_ns();
    if (do_verify && rd->status == STK_OK)
        verify(r, s);
    if (rd->status != STK_OK) {
        rd->data = NULL;
        rd->len = 0;
        if (r->files || (r->ds->nshards && r->ds->shards[s->shard].foreign))
            rd->label = stk__dataset_static_label(r->ds, rd->index);
        atomic_fetch_add(&r->clock.errors, 1);
    } else {
        atomic_fetch_add(&r->clock.items, 1);
        atomic_fetch_add(&r->clock.bytes, rd->len);
    }
    uint64_t t1 = stk__now_ns();
    stk__clock_add(&r->clock.busy_ns, t1 - t0);
    int rc = r->sink(r->user, rd);
    stk__clock_add(&r->clock.blocked_ns, stk__now_ns() - t1);
    if (rc != STK_OK)
        stk__reader_release(r, rd);
}

static void fail(rslot *s, int status, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(rslot *s, int status, int sys_errno, const char *fmt, ...)
{
    s->rd.status = status;
    s->rd.sys_errno = sys_errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->rd.detail, sizeof(s->rd.detail), fmt, ap);
    va_end(ap);
}

/* Common handling of one read result RES (bytes or -errno) for slot S. Returns 1 when another
 * request is needed (s->done / fd / lengths updated), 0 when finished (rd.status says how). */
static int on_result_(stk__reader *r, rslot *s, int64_t res);
static int on_result(stk__reader *r, rslot *s, int64_t res)
{
    int again = on_result_(r, s, res);
    if (again)
        atomic_fetch_add(&r->resubmits, 1);
    return again;
}

static int on_result_(stk__reader *r, rslot *s, int64_t res)
{
    if (s->fault_eio) {
        s->fault_eio = 0;
        fail(s, -EIO, EIO, "injected EIO: read at %llu (%u bytes)",
             (unsigned long long)(s->base_off + s->done), s->cur_len);
        return 0;
    }
    if (res < 0) {
        int e = (int)-res;
        if ((e == EINTR || e == EAGAIN) && ++s->retries < MAX_RETRIES)
            return 1;
        if (e == EINVAL && s->direct) {
            to_buffered(r, s);
            return 1;
        }
        fail(s, (int)res, e, "read at %llu (%u bytes) of value at %llu: %s",
             (unsigned long long)(s->base_off + s->done), s->cur_len, (unsigned long long)s->voff,
             strerror(e));
        return 0;
    }
    if (res == 0) {
        fail(s, STK_E_TRUNCATED, 0, "end of file at %llu: value at %llu needs %u bytes (file shrank?)",
             (unsigned long long)(s->base_off + s->done), (unsigned long long)s->voff, s->vlen);
        return 0;
    }
    uint32_t before = s->done;
    s->done += (uint32_t)res;
    if (s->done >= s->want)
        return 0;
    if (s->direct)
        s->done = s->done / ALIGN * ALIGN; /* O_DIRECT: resume at an aligned point */
    if (s->done <= before && ++s->retries >= MAX_RETRIES) {
        fail(s, STK_E_TRUNCATED, 0, "short reads make no progress at %llu (value at %llu, %u bytes)",
             (unsigned long long)(s->base_off + s->done), (unsigned long long)s->voff, s->vlen);
        return 0;
    }
    return 1;
}

/* ---- thread-pool backends: pread, files, mmap --------------------------------------------- */

static void read_pread(stk__reader *r, rslot *s)
{
    int rc = plan_read(r, s);
    if (rc != STK_OK) {
        s->rd.status = rc;
        return;
    }
    if (s->fault_delay)
        sleep_us(r->cfg.fault_delay_us);
    for (;;) {
        s->cur_len = next_len(s);
        atomic_fetch_add(&r->disk_bytes, s->cur_len);
        if (s->direct)
            atomic_fetch_add(&r->direct_reads, 1);
        ssize_t n = pread(s->fd, s->mem + s->done, s->cur_len, (off_t)(s->base_off + s->done));
        if (!on_result(r, s, n < 0 ? -(int64_t)errno : (int64_t)n))
            return;
    }
}

static void read_file(stk__reader *r, rslot *s)
{
    const char *path = r->ds->files.paths[s->rd.index];
    s->vskip = 0;
    s->voff = 0;
    s->vlen = 0;
    if (s->fault_delay)
        sleep_us(r->cfg.fault_delay_us);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        fail(s, -e, e, "open: %s", strerror(e));
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        fail(s, -e, e, "fstat: %s", strerror(e));
        close(fd);
        return;
    }
    if ((uint64_t)st.st_size > s->cap) {
        fail(s, STK_E_CHANGED, 0, "file is %lld bytes, %u when the dataset was opened",
             (long long)st.st_size, r->ds->recs[s->rd.index].len);
        close(fd);
        return;
    }
    s->base_off = 0;
    s->want = s->req = (uint32_t)st.st_size;
    s->done = 0;
    s->retries = 0;
    s->direct = 0;
    s->fd = fd;
    while (s->done < s->want) {
        s->cur_len = next_len(s);
        atomic_fetch_add(&r->disk_bytes, s->cur_len);
        ssize_t n = pread(fd, s->mem + s->done, s->cur_len, (off_t)s->done);
        if (!on_result(r, s, n < 0 ? -(int64_t)errno : (int64_t)n))
            break;
    }
    if (s->rd.status == STK_OK && s->fault_eio) { /* an empty file never issued a read */
        s->fault_eio = 0;
        fail(s, -EIO, EIO, "injected EIO");
    }
    s->vlen = s->done < s->want ? s->done : s->want;
    close(fd);
}

static void read_mmap(stk__reader *r, rslot *s, mmap_shard *ms)
{
    const stk__rec *rec = &r->ds->recs[s->rd.index];
    stk__shard *sh = &r->ds->shards[rec->shard];
    mmap_shard *m = &ms[rec->shard];
    s->shard = rec->shard;
    s->voff = rec->off;
    s->vlen = rec->len;
    s->vskip = 0;
    s->direct = 0;
    if (s->fault_delay)
        sleep_us(r->cfg.fault_delay_us);
    MDB_dbi dbi = r->mdbi[rec->shard];
    if (!m->txn) {
        int rc = mdb_txn_begin(r->menv[rec->shard], NULL, MDB_RDONLY, &m->txn);
        if (rc != MDB_SUCCESS) {
            m->txn = NULL;
            fail(s, STK_E_LMDB, 0, "mdb_txn_begin: %s", mdb_strerror(rc));
            return;
        }
        if (sh->foreign && sh->count > 0) { /* map base from the shard's first value */
            MDB_cursor *c;
            MDB_val k, v;
            if (mdb_cursor_open(m->txn, dbi, &c) == MDB_SUCCESS) {
                if (mdb_cursor_get(c, &k, &v, MDB_FIRST) == MDB_SUCCESS)
                    m->base = (const uint8_t *)v.mv_data - r->ds->recs[sh->first].off;
                mdb_cursor_close(c);
            }
        }
    }
    /* never touch map pages past the end of the file (SIGBUS), B-tree pages included: refuse a
     * shard that shrank since open */
    struct stat st = {0};
    if (fstat(sh->fd, &st) != 0 || (uint64_t)st.st_size < sh->file_size) {
        fail(s, STK_E_TRUNCATED, 0, "shard shrank from %llu to %lld bytes (value at %llu, %u bytes)",
             (unsigned long long)sh->file_size, (long long)st.st_size, (unsigned long long)rec->off,
             rec->len);
        return;
    }
    const uint8_t *src;
    if (sh->foreign) {
        if (!m->base) {
            fail(s, STK_E_LMDB, 0, "cannot locate the map of %s", sh->name);
            return;
        }
        src = m->base + rec->off;
    } else {
        uint8_t kb[8];
        stk__rec_key(kb, s->rd.index - sh->first);
        MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
        int rc = mdb_get(m->txn, dbi, &k, &v);
        if (rc != MDB_SUCCESS) {
            fail(s, STK_E_LMDB, 0, "mdb_get key %llu: %s",
                 (unsigned long long)(s->rd.index - sh->first), mdb_strerror(rc));
            return;
        }
        if (v.mv_size != rec->len) {
            fail(s, STK_E_CHANGED, 0, "mdb_get: value is %zu bytes, table says %u", v.mv_size, rec->len);
            return;
        }
        src = v.mv_data;
    }
    if (rec->len > s->cap) {
        fail(s, STK_E_RANGE, 0, "value of %u bytes exceeds the %zu-byte buffer", rec->len, s->cap);
        return;
    }
    atomic_fetch_add(&r->disk_bytes, rec->len);
    memcpy(s->mem, src, rec->len);
    if (s->fault_short) /* the map has no short reads: account the fault as resolved */
        s->fault_short = 0;
    if (s->fault_eio) {
        s->fault_eio = 0;
        fail(s, -EIO, EIO, "injected EIO: value at %llu (%u bytes)", (unsigned long long)rec->off,
             rec->len);
    }
}

/* The next work item in a pool slot sized for it: NULL when there is no more work (stop). An
 * index past the end is delivered as an STK_E_RANGE error here and *skip set. Time waiting in
 * WORK is the stage's blocked time. */
static rslot *take_work(stk__reader *r, int *skip)
{
    uint64_t pos, index, epoch;
    uint64_t t0 = stk__now_ns();
    int more = r->work(r->user, &pos, &index, &epoch);
    stk__clock_add(&r->clock.blocked_ns, stk__now_ns() - t0);
    *skip = 0;
    if (!more)
        return NULL;
    uint64_t need = index < r->ds->count ? need_of(r, index) : 1;
    rslot *s = pool_get(r, need);
    if (!s)
        return NULL;
    s->rd.pos = pos;
    s->rd.index = index;
    s->rd.epoch = epoch;
    if (index >= r->ds->count) {
        fail(s, STK_E_RANGE, 0, "index %llu past the end (%llu records)",
             (unsigned long long)index, (unsigned long long)r->ds->count);
        deliver(r, s, 0);
        *skip = 1;
    }
    return s;
}

static void *pool_thread(void *arg)
{
    stk__reader *r = arg;
    pthread_setname_np(pthread_self(), r->bk == BK_FILES ? "stk-files" : r->bk == BK_MMAP ? "stk-mmap" : "stk-pread");
    mmap_shard *ms = NULL;
    if (r->bk == BK_MMAP)
        ms = calloc(r->ds->nshards, sizeof(*ms)); /* per thread, once per start */
    while (!atomic_load(&r->stopping)) {
        int skip;
        rslot *s = take_work(r, &skip);
        if (!s)
            break;
        if (skip)
            continue;
        if (r->bk == BK_MMAP && !ms) {
            fail(s, STK_E_NOMEM, 0, "mmap reader: out of memory");
            deliver(r, s, 0);
            continue;
        }
        draw_faults(r, s);
        uint64_t t1 = stk__now_ns();
        inflight_inc(r);
        if (r->bk == BK_FILES)
            read_file(r, s);
        else if (r->bk == BK_MMAP)
            read_mmap(r, s, ms);
        else
            read_pread(r, s);
        inflight_dec(r);
        stk__clock_add(&r->clock.starved_ns, stk__now_ns() - t1);
        s->rd.disk_bytes = s->direct ? s->req : s->vlen;
        deliver(r, s, 1);
    }
    if (ms) {
        for (uint32_t i = 0; i < r->ds->nshards; i++)
            if (ms[i].txn)
                mdb_txn_abort(ms[i].txn);
        free(ms);
    }
    return NULL;
}

/* ---- io_uring ----------------------------------------------------------------------------- */

#ifdef STK_HAVE_URING
/* Queue the next request of S. Returns 0, or -errno when it cannot be submitted. */
static int uring_submit(stk__reader *r, rslot *s)
{
    /* S belongs to the kernel and then the reaper once submitted: take what is needed first */
    s->cur_len = next_len(s);
    uint32_t len = s->cur_len;
    int direct = s->direct;
    int rc = 0;
    pthread_mutex_lock(&r->sq_mu);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (!sqe) { /* SQ full: flush and try once more */
        io_uring_submit(&r->ring);
        sqe = io_uring_get_sqe(&r->ring);
    }
    if (!sqe) {
        rc = -EBUSY;
    } else {
        if (r->fixed)
            io_uring_prep_read_fixed(sqe, s->fd, s->mem + s->done, s->cur_len, s->base_off + s->done,
                                     s->buf_index);
        else
            io_uring_prep_read(sqe, s->fd, s->mem + s->done, s->cur_len, s->base_off + s->done);
        io_uring_sqe_set_data(sqe, s);
        for (int tries = 0;; tries++) {
            int n = io_uring_submit(&r->ring);
            if (n >= 0)
                break;
            if ((n == -EINTR || n == -EAGAIN || n == -EBUSY) && tries < MAX_RETRIES) {
                sched_yield();
                continue;
            }
            /* the SQE stays in the ring and would go out with the next submit: make it a no-op
             * without a slot (the reaper skips completions without one) and report the error */
            io_uring_prep_nop(sqe);
            io_uring_sqe_set_data(sqe, NULL);
            rc = n;
            break;
        }
    }
    pthread_mutex_unlock(&r->sq_mu);
    if (rc == 0) {
        atomic_fetch_add(&r->disk_bytes, len);
        if (direct)
            atomic_fetch_add(&r->direct_reads, 1);
    }
    return rc;
}

/* Account one finished read (its in-flight slot is free again). */
static void uring_finished(stk__reader *r, rslot *s)
{
    pthread_mutex_lock(&r->mu);
    r->inflight--;
    r->inflight_bytes_now -= s->acct;
    inflight_dec(r);
    /* wake the submitter when a few slots are free (not at each completion: a context switch
     * per read costs more CPU than the slightly lower average depth) */
    if (r->fl_waiting) {
        uint32_t refill = STK__MAX(1u, r->eff_qd / 8);
        if (r->inflight == 0 || (r->inflight + refill <= r->eff_qd &&
                                 r->inflight_bytes_now + r->fl_need <= r->cfg.inflight_bytes))
            pthread_cond_signal(&r->cv_fl);
    }
    /* the submitter finished this one and is about to deliver it (SINK may block): reads it left
     * in flight are then the reaper's */
    if (r->inflight > 0 && r->reaper_idle)
        pthread_cond_signal(&r->cv_sub);
    pthread_mutex_unlock(&r->mu);
}

/* Handle the result RES of slot S's request: resubmit (short read, EINTR/EAGAIN), or finish and
 * deliver. Either thread that took the CQE calls this. */
static void uring_complete(stk__reader *r, rslot *s, int64_t res)
{
    uint64_t t0 = stk__now_ns();
    /* the slot was written before its submission under sq_mu; the completion orders it for
     * real, this makes the order visible to ThreadSanitizer too (uncontended, cheap) */
    pthread_mutex_lock(&r->sq_mu);
    pthread_mutex_unlock(&r->sq_mu);
    int again = on_result(r, s, res);
    if (again) {
        int src = uring_submit(r, s);
        if (src == 0) {
            stk__clock_add(&r->clock.busy_ns, stk__now_ns() - t0);
            return;
        }
        fail(s, src, -src, "io_uring resubmit of read at %llu: %s",
             (unsigned long long)(s->base_off + s->done), strerror(-src));
    }
    s->rd.disk_bytes = s->direct ? s->req : s->vlen;
    uring_finished(r, s);
    stk__clock_add(&r->clock.busy_ns, stk__now_ns() - t0);
    deliver(r, s, 1);
}

/* Take the completions that are on the ring now and handle them. Returns how many were taken,
 * no-ops included (the reaper must see that it took the submitter's final no-op); 0 at once when
 * the ring is empty. */
static uint32_t uring_reap(stk__reader *r)
{
    enum { BATCH = 32 };
    struct io_uring_cqe *cqes[BATCH];
    rslot *slot[BATCH];
    int64_t res[BATCH];
    uint32_t total = 0;
    for (;;) {
        pthread_mutex_lock(&r->cq_mu);
        unsigned n = io_uring_peek_batch_cqe(&r->ring, cqes, BATCH);
        for (unsigned i = 0; i < n; i++) {
            slot[i] = io_uring_cqe_get_data(cqes[i]);
            res[i] = cqes[i]->res;
        }
        if (n)
            io_uring_cq_advance(&r->ring, n);
        pthread_mutex_unlock(&r->cq_mu);
        if (!n)
            return total;
        total += n;
        for (unsigned i = 0; i < n; i++)
            if (slot[i]) /* NULL: a no-op (wake-up, or a request that could not be submitted) */
                uring_complete(r, slot[i], res[i]);
    }
}

/* Submit a no-op without a slot: its completion wakes the reaper if it waits in the kernel. */
static void uring_kick(stk__reader *r)
{
    pthread_mutex_lock(&r->sq_mu);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (sqe) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data(sqe, NULL);
        for (int tries = 0; tries < MAX_RETRIES; tries++) {
            int n = io_uring_submit(&r->ring);
            if (n >= 0 || (n != -EINTR && n != -EAGAIN && n != -EBUSY))
                break;
            sched_yield();
        }
    }
    pthread_mutex_unlock(&r->sq_mu);
}

/* The submitter also reaps: a buffered read of cached data completes inside io_uring_enter, so
 * the submitter finds its completion on the ring as soon as io_uring_submit returns, verifies it
 * (the bytes are still in its cache) and delivers it. The reaper is woken only when reads are
 * left in flight (cold data, O_DIRECT): with a warm page cache it sleeps, and a read costs no
 * context switch at all. */
static void *uring_submitter(void *arg)
{
    stk__reader *r = arg;
    pthread_setname_np(pthread_self(), "stk-submit");
    while (!atomic_load(&r->stopping)) {
        int skip;
        rslot *s = take_work(r, &skip);
        if (!s)
            break;
        if (skip)
            continue;
        uint64_t t1 = stk__now_ns();
        int rc = plan_read(r, s);
        if (rc != STK_OK) {
            s->rd.status = rc;
            deliver(r, s, 0);
            continue;
        }
        draw_faults(r, s);
        s->rd.disk_bytes = s->req;
        /* room in flight: depth and bytes (one read always fits when nothing is in flight) */
        uint64_t t2 = stk__now_ns();
        stk__clock_add(&r->clock.busy_ns, t2 - t1);
        pthread_mutex_lock(&r->mu);
        while (r->inflight > 0 && !atomic_load(&r->stopping) &&
               (r->inflight >= r->eff_qd || r->inflight_bytes_now + s->req > r->cfg.inflight_bytes)) {
            r->fl_waiting = 1;
            r->fl_need = s->req;
            pthread_cond_wait(&r->cv_fl, &r->mu);
        }
        r->fl_waiting = 0;
        pthread_mutex_unlock(&r->mu);
        if (s->fault_delay)
            sleep_us(r->cfg.fault_delay_us);
        uint64_t t3 = stk__now_ns();
        stk__clock_add(&r->clock.starved_ns, t3 - t2);
        pthread_mutex_lock(&r->mu);
        r->inflight++;
        s->acct = s->req;
        r->inflight_bytes_now += s->acct;
        inflight_inc(r);
        pthread_mutex_unlock(&r->mu);
        rc = uring_submit(r, s);
        if (rc < 0) {
            uring_finished(r, s);
            fail(s, rc, -rc, "io_uring submit of read at %llu: %s", (unsigned long long)s->base_off,
                 strerror(-rc));
            deliver(r, s, 0);
            continue;
        }
        stk__clock_add(&r->clock.busy_ns, stk__now_ns() - t3);
        uring_reap(r);
        pthread_mutex_lock(&r->mu);
        if (r->inflight > 0 && r->reaper_idle)
            pthread_cond_signal(&r->cv_sub);
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_lock(&r->mu);
    r->submit_done = 1;
    int idle = r->reaper_idle;
    pthread_cond_broadcast(&r->cv_sub);
    pthread_mutex_unlock(&r->mu);
    if (!idle) /* the reaper may wait in the kernel for a completion the submitter took */
        uring_kick(r);
    return NULL;
}

/* Wait in the kernel until the ring holds a completion (or a signal interrupts), at most 20 ms
 * where the kernel takes a timeout with the wait (IORING_FEAT_EXT_ARG): the caller then looks
 * again. The bound matters where this thread's wait can hold up the submitter, whose reads or
 * final no-op would end it: under valgrind, whose io_uring_enter keeps its scheduler lock while
 * the kernel waits, the unbounded wait deadlocked `stoker verify`. */
static void uring_wait(stk__reader *r)
{
    int rc;
    if (r->ring.features & IORING_FEAT_EXT_ARG) {
        struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
        struct io_uring_getevents_arg arg = {.sigmask = 0, .sigmask_sz = _NSIG / 8, .ts = (uint64_t)(uintptr_t)&ts};
        rc = io_uring_enter2((unsigned)r->ring.ring_fd, 0, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                             (sigset_t *)(void *)&arg, sizeof arg);
    } else {
        rc = io_uring_enter((unsigned)r->ring.ring_fd, 0, 1, IORING_ENTER_GETEVENTS, NULL);
    }
    if (rc == -1)
        rc = -errno;
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME)
        sleep_us(1000); /* transient kernel trouble: do not spin */
}

static void *uring_reaper(void *arg)
{
    stk__reader *r = arg;
    pthread_setname_np(pthread_self(), "stk-reap");
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (r->inflight == 0 && !r->submit_done) {
            r->reaper_idle = 1;
            pthread_cond_wait(&r->cv_sub, &r->mu);
        }
        r->reaper_idle = 0;
        int finish = r->inflight == 0 && r->submit_done;
        pthread_mutex_unlock(&r->mu);
        if (finish)
            break;
        if (uring_reap(r))
            continue;
        /* nothing on the ring: wait for storage. A read the submitter reaps meanwhile still
         * wakes this wait; so does the no-op the submitter posts when it is done. */
        uint64_t t0 = stk__now_ns();
        uring_wait(r);
        stk__clock_add(&r->clock.starved_ns, stk__now_ns() - t0);
    }
    return NULL;
}

/* Register the pool's buffers with the ring (IORING_OP_READ_FIXED: the kernel pins them once
 * instead of per read; about a tenth of the read path's CPU here). Optional: on failure
 * (RLIMIT_MEMLOCK: ENOMEM, or no READ_FIXED) plain reads are used and the reason is kept. */
static void uring_register(stk__reader *r)
{
    struct io_uring_probe *p = io_uring_get_probe_ring(&r->ring);
    int ok = p && io_uring_opcode_supported(p, IORING_OP_READ_FIXED);
    if (p)
        io_uring_free_probe(p);
    if (!ok) {
        r->fixed_err = STK_E_UNSUPPORTED;
        return;
    }
    struct iovec *iov = calloc(r->nslots, sizeof(*iov));
    if (!iov) {
        r->fixed_err = -ENOMEM;
        return;
    }
    for (uint32_t i = 0; i < r->nslots; i++) {
        iov[i].iov_base = r->slots[i].mem;
        iov[i].iov_len = r->slots[i].cap;
    }
    int rc = io_uring_register_buffers(&r->ring, iov, r->nslots);
    free(iov);
    if (rc == 0)
        r->fixed = 1;
    else
        r->fixed_err = rc;
}

/* Ring memory is mapped by the kernel and may come back at the address of a ring that another
 * loader's reader (another thread, no other synchronisation) just unmapped. ThreadSanitizer does
 * not see those mappings change and reported that loader's old SQE writes as racing with the new
 * ones (test_longrun's twin loaders). The old ring is unmapped after this lock is released
 * (destroy) and the new one mapped before it is taken (setup): the lock carries the order that
 * the address reuse implies. Two uncontended lock operations per reader. */
static pthread_mutex_t ring_reuse_mu = PTHREAD_MUTEX_INITIALIZER;

static void ring_reuse_order(void)
{
    pthread_mutex_lock(&ring_reuse_mu);
    pthread_mutex_unlock(&ring_reuse_mu);
}

/* Set up the ring. 0, or -errno / STK_E_UNSUPPORTED with WHY set. */
static int uring_setup(stk__reader *r, const char **why)
{
    const char *dis = getenv("STOKER_DISABLE_URING");
    if (dis && strcmp(dis, "1") == 0) {
        *why = "STOKER_DISABLE_URING=1";
        return -ENOSYS;
    }
    unsigned entries = 1;
    while (entries < (unsigned)STK__MAX(r->cfg.queue_depth, 1) && entries < 4096)
        entries <<= 1;
    int rc = io_uring_queue_init(entries, &r->ring, 0);
    if (rc < 0) {
        *why = "io_uring_queue_init";
        return rc;
    }
    struct io_uring_probe *p = io_uring_get_probe_ring(&r->ring);
    int ok = p && io_uring_opcode_supported(p, IORING_OP_READ);
    if (p)
        io_uring_free_probe(p);
    if (!ok) {
        io_uring_queue_exit(&r->ring);
        *why = "no IORING_OP_READ";
        return STK_E_UNSUPPORTED;
    }
    r->ring_ok = 1;
    ring_reuse_order();
    return 0;
}
#endif

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* mmap backend: an environment per shard and its database handle, made valid for every
 * transaction by opening it in a committed one. */
static int mmap_setup(stk__reader *r, char *err)
{
    uint32_t n = r->ds->nshards;
    r->menv = calloc(n, sizeof(*r->menv));
    r->mdbi = calloc(n, sizeof(*r->mdbi));
    if (!r->menv || !r->mdbi)
        return stk__err(err, STK_E_NOMEM, "reader: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        const stk__shard *sh = &r->ds->shards[i];
        struct stat st;
        int dir = stat(sh->path, &st) == 0 && S_ISDIR(st.st_mode);
        unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD | (dir ? 0 : MDB_NOSUBDIR);
        MDB_txn *txn;
        int rc = mdb_env_create(&r->menv[i]);
        if (rc == 0) {
            mdb_env_set_maxdbs(r->menv[i], 8);
            mdb_env_set_maxreaders(r->menv[i], 512);
            rc = mdb_env_open(r->menv[i], sh->path, flags, 0644);
        }
        if (rc == 0)
            rc = mdb_txn_begin(r->menv[i], NULL, MDB_RDONLY, &txn);
        if (rc == 0) {
            rc = mdb_dbi_open(txn, sh->foreign ? NULL : STK__DB_RECORDS, 0, &r->mdbi[i]);
            if (rc == 0)
                rc = mdb_txn_commit(txn);
            else
                mdb_txn_abort(txn);
        }
        if (rc != 0)
            return stk__err(err, STK_E_LMDB, "reader (mmap): %s: %s", sh->path, mdb_strerror(rc));
    }
    return STK_OK;
}

static void set_note(stk__reader *r, const char *reason_text)
{
    const char *dio = "";
    if (r->bk == BK_URING || r->bk == BK_PREAD)
        dio = r->cfg.direct ? ", O_DIRECT" : ", buffered";
    switch (r->bk) {
    case BK_URING:
#ifdef STK_HAVE_URING
        if (r->fixed)
            snprintf(r->note, sizeof(r->note), "io_uring%s, qd %u, fixed buffers", dio, r->eff_qd);
        else
            snprintf(r->note, sizeof(r->note), "io_uring%s, qd %u, buffers not registered: %s", dio, r->eff_qd,
                     stk_status_name(r->fixed_err));
#endif
        break;
    case BK_PREAD:
        if (reason_text)
            snprintf(r->note, sizeof(r->note), "pread pool (io_uring unavailable: %s)%s", reason_text, dio);
        else
            snprintf(r->note, sizeof(r->note), "pread pool, %d threads%s", r->cfg.io_threads, dio);
        break;
    case BK_FILES:
        snprintf(r->note, sizeof(r->note), "files: open/read/close, %d threads", r->cfg.io_threads);
        break;
    default:
        snprintf(r->note, sizeof(r->note), "mmap: LMDB mdb_get + memcpy, %d threads", r->cfg.io_threads);
        break;
    }
}

int stk__reader_create(stk__reader **out, stk_dataset *ds, const stk__reader_config *cfg, char *err)
{
    if (!out || !ds || !cfg)
        return stk__err(err, STK_E_INVALID, "reader: NULL argument");
    *out = NULL;
    if (!ds->opened || !ds->recs)
        return stk__err(err, STK_E_STATE, "reader: dataset is not open");
    if (ds->count == 0)
        return stk__err(err, STK_E_EMPTYSET, "reader: %s has no records", ds->path ? ds->path : "dataset");
    if (cfg->backend < STK_IO_AUTO || cfg->backend > STK_IO_MMAP)
        return stk__err(err, STK_E_INVALID, "reader: unknown I/O backend %d", cfg->backend);
    if (cfg->queue_depth < 1 || cfg->queue_depth > 4096)
        return stk__err(err, STK_E_INVALID, "reader: queue depth %d outside 1..4096", cfg->queue_depth);
    if (cfg->io_threads < 1 || cfg->io_threads > 256)
        return stk__err(err, STK_E_INVALID, "reader: %d I/O threads outside 1..256", cfg->io_threads);
    if (cfg->fault_eio_ppm > 1000000 || cfg->fault_short_ppm > 1000000 || cfg->fault_delay_ppm > 1000000)
        return stk__err(err, STK_E_INVALID, "reader: fault rates are parts per million (0..1000000)");
    int files = ds->layout == STK_LAYOUT_FILES;
    if (files && cfg->backend == STK_IO_MMAP)
        return stk__err(err, STK_E_INVALID, "reader: the mmap backend reads LMDB shards, not a folder of files");

    stk__reader *r = calloc(1, sizeof(*r));
    if (!r)
        return stk__err(err, STK_E_NOMEM, "reader: out of memory");
    r->ds = ds;
    r->cfg = *cfg;
    if (r->cfg.inflight_bytes == 0)
        r->cfg.inflight_bytes = (size_t)64 << 20;
    r->files = files;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv_free[0], NULL);
    pthread_cond_init(&r->cv_free[1], NULL);
    pthread_cond_init(&r->cv_fl, NULL);
    pthread_cond_init(&r->cv_sub, NULL);
#ifdef STK_HAVE_URING
    pthread_mutex_init(&r->sq_mu, NULL);
    pthread_mutex_init(&r->cq_mu, NULL);
#endif
    r->refused = calloc(ds->nshards ? ds->nshards : 1, sizeof(*r->refused));
    if (!r->refused) {
        stk__reader_destroy(r);
        return stk__err(err, STK_E_NOMEM, "reader: out of memory");
    }

    const char *reason_text = NULL;
    char reason_buf[48];
    if (files) {
        r->bk = BK_FILES;
        r->backend = STK_IO_PREAD;
    } else if (cfg->backend == STK_IO_MMAP) {
        r->bk = BK_MMAP;
        r->backend = STK_IO_MMAP;
    } else if (cfg->backend == STK_IO_PREAD) {
        r->bk = BK_PREAD;
        r->backend = STK_IO_PREAD;
    } else {
#ifdef STK_HAVE_URING
        const char *why = "";
        int rc = uring_setup(r, &why);
        if (rc == 0) {
            r->bk = BK_URING;
            r->backend = STK_IO_URING;
        } else if (cfg->backend == STK_IO_URING) {
            stk__reader_destroy(r);
            if (rc == STK_E_UNSUPPORTED)
                return stk__err(err, rc, "reader: io_uring cannot read files here (%s)", why);
            return stk__err(err, rc, "reader: io_uring unavailable (%s)", why);
        } else {
            r->bk = BK_PREAD;
            r->backend = STK_IO_PREAD;
            r->fallback_reason = rc;
            snprintf(reason_buf, sizeof(reason_buf), "%s", rc == STK_E_UNSUPPORTED ? why : stk_status_name(rc));
            reason_text = reason_buf;
        }
#else
        if (cfg->backend == STK_IO_URING) {
            stk__reader_destroy(r);
            return stk__err(err, STK_E_UNSUPPORTED, "reader: this build has no io_uring (liburing)");
        }
        r->bk = BK_PREAD;
        r->backend = STK_IO_PREAD;
        r->fallback_reason = STK_E_UNSUPPORTED;
        snprintf(reason_buf, sizeof(reason_buf), "built without liburing");
        reason_text = reason_buf;
#endif
    }
    int rc = r->bk == BK_MMAP ? mmap_setup(r, err) : STK_OK;
    if (rc == STK_OK)
        rc = pool_create(r, r->bk == BK_URING ? 0 : (uint32_t)cfg->io_threads, err);
#ifdef STK_HAVE_URING
    if (rc == STK_OK && r->bk == BK_URING)
        uring_register(r);
#endif
    if (rc != STK_OK) {
        stk__reader_destroy(r);
        return rc;
    }
    set_note(r, reason_text);
    *out = r;
    return STK_OK;
}

int stk__reader_start(stk__reader *r, stk__work_fn work, stk__sink_fn sink, void *user, char *err)
{
    if (!r || !work || !sink)
        return stk__err(err, STK_E_INVALID, "reader: NULL argument");
    if (r->running)
        return stk__err(err, STK_E_STATE, "reader: already started");
    r->work = work;
    r->sink = sink;
    r->user = user;
    atomic_store(&r->stopping, 0);
    r->submit_done = 0;
    r->inflight = 0;
    r->inflight_bytes_now = 0;
    uint32_t n = r->bk == BK_URING ? 2 : (uint32_t)r->cfg.io_threads;
    free(r->threads);
    r->threads = calloc(n, sizeof(pthread_t));
    if (!r->threads)
        return stk__err(err, STK_E_NOMEM, "reader: out of memory");
    r->nthreads = 0;
    for (uint32_t i = 0; i < n; i++) {
        void *(*fn)(void *) = pool_thread;
#ifdef STK_HAVE_URING
        if (r->bk == BK_URING)
            fn = i == 0 ? uring_submitter : uring_reaper;
#endif
        int prc = pthread_create(&r->threads[i], NULL, fn, r);
        if (prc != 0) {
            /* wind down what started: the submitter's WORK is the caller's; stop it through
             * stopping, and end the reaper by marking submission done */
            atomic_store(&r->stopping, 1);
            pthread_mutex_lock(&r->mu);
            if (r->bk == BK_URING && i == 1) {
                r->submit_done = 1; /* the reaper never started: nothing may be left in flight */
            }
            pthread_cond_broadcast(&r->cv_free[0]);
            pthread_cond_broadcast(&r->cv_free[1]);
            pthread_cond_broadcast(&r->cv_fl);
            pthread_mutex_unlock(&r->mu);
            r->running = 1;
            r->nthreads = i;
            return stk__err(err, -prc, "reader: cannot start thread %u of %u (call stop)", i + 1, n);
        }
        r->nthreads = i + 1;
    }
    atomic_store(&r->clock.threads, n);
    r->running = 1;
    return STK_OK;
}

void stk__reader_stop(stk__reader *r)
{
    if (!r || !r->running)
        return;
    atomic_store(&r->stopping, 1);
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->cv_free[0]);
    pthread_cond_broadcast(&r->cv_free[1]);
    pthread_cond_broadcast(&r->cv_fl);
    pthread_mutex_unlock(&r->mu);
#ifdef STK_HAVE_URING
    if (r->bk == BK_URING && r->nthreads == 1) {
        /* the reaper failed to start: drain what the submitter put in flight here */
        pthread_join(r->threads[0], NULL);
        r->nthreads = 0;
        for (;;) {
            pthread_mutex_lock(&r->mu);
            uint32_t left = r->inflight;
            pthread_mutex_unlock(&r->mu);
            if (!left)
                break;
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(&r->ring, &cqe) < 0)
                continue;
            rslot *s = io_uring_cqe_get_data(cqe);
            io_uring_cqe_seen(&r->ring, cqe);
            if (s) {
                uring_finished(r, s);
                stk__reader_release(r, &s->rd);
            }
        }
    }
#endif
    for (uint32_t i = 0; i < r->nthreads; i++)
        pthread_join(r->threads[i], NULL);
    r->nthreads = 0;
    atomic_store(&r->clock.threads, 0);
    r->running = 0;
}

void stk__reader_destroy(stk__reader *r)
{
    if (!r)
        return;
    stk__reader_stop(r);
#ifdef STK_HAVE_URING
    if (r->ring_ok) {
        ring_reuse_order();
        io_uring_queue_exit(&r->ring);
    }
    pthread_mutex_destroy(&r->sq_mu);
    pthread_mutex_destroy(&r->cq_mu);
#endif
    free(r->threads);
    free(r->slots);
    stk__free_aligned(r->pool_mem);
    free((void *)r->refused);
    if (r->menv) {
        for (uint32_t i = 0; i < r->ds->nshards; i++)
            if (r->menv[i])
                mdb_env_close(r->menv[i]);
        free(r->menv);
    }
    free(r->mdbi);
    pthread_cond_destroy(&r->cv_sub);
    pthread_cond_destroy(&r->cv_fl);
    pthread_cond_destroy(&r->cv_free[1]);
    pthread_cond_destroy(&r->cv_free[0]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void stk__reader_get_info(stk__reader *r, stk__reader_info *out)
{
    memset(out, 0, sizeof(*out));
    if (!r)
        return;
    out->backend = r->backend;
    int direct = 0;
    if (r->cfg.direct && (r->bk == BK_URING || r->bk == BK_PREAD))
        for (uint32_t i = 0; i < r->ds->nshards && !direct; i++)
            direct = wants_direct(r, i);
    out->direct = direct;
    out->fallback_reason = r->fallback_reason;
    snprintf(out->note, sizeof(out->note), "%s", r->note);
    if (r->cfg.direct && !direct && (r->bk == BK_URING || r->bk == BK_PREAD)) {
        /* O_DIRECT was asked for but every shard refused it */
        char *c = strstr(out->note, ", O_DIRECT");
        if (c) {
            char tail[96];
            snprintf(tail, sizeof(tail), "%s", c + strlen(", O_DIRECT"));
            snprintf(c, sizeof(out->note) - (size_t)(c - out->note), ", buffered (O_DIRECT refused)%s", tail);
        }
    }
    out->inflight_now = atomic_load(&r->inflight_now);
    out->inflight_max = atomic_load(&r->inflight_max);
    out->disk_bytes = atomic_load(&r->disk_bytes);
    out->pool_bytes = r->pool_bytes;
    out->resubmits = atomic_load(&r->resubmits);
    out->direct_reads = atomic_load(&r->direct_reads);
    out->normal_buffer = r->normal_cap;
    out->large_buffer = r->n_large ? r->large_cap : 0;
    out->normal_buffers = r->n_normal;
    out->large_buffers = r->n_large;
}

const stk__stage_clock *stk__reader_clock(const stk__reader *r) { return r ? &r->clock : NULL; }
