/* SPDX-License-Identifier: MIT */
/*
 * reader.c — the read stage: (position, dataset index) work items in, verified payload bytes out.
 * This file: choosing the backend, creating, starting, stopping and destroying the reader, and
 * its figures.
 *
 * Why not LMDB's own read path. mdb_get() on a cold shard is one page fault at a time per thread
 * (plus readahead that drags in neighbours nobody asked for). The dataset's offset table
 * (src/dataset/walk.c) already knows {shard, file offset, length} of every value, so the reader
 * issues the reads itself: many in flight, exactly the bytes wanted, into buffers it owns
 * (reader_pool.c). LMDB stays the container (any LMDB tool opens a shard); STK_IO_MMAP keeps
 * LMDB's path for comparison. Backends: io_uring (reader_uring.c), the pread, files and mmap
 * thread pools (reader_threads.c); what every read goes through (plan, result, verification,
 * delivery) is reader_verify.c.
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
 */
#include "reader.h"

#include "reader_internal.h"
#include "reader_pool.h"
#include "reader_threads.h"
#include "reader_uring.h"
#include "reader_verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_note(stk__reader *r, const char *reason_text)
{
    const char *dio = "";
    if (r->bk == BK_URING || r->bk == BK_PREAD)
        dio = r->cfg.direct ? ", O_DIRECT" : ", buffered";
    switch (r->bk) {
    case BK_URING:
        if (r->fixed)
            snprintf(r->note, sizeof(r->note), "io_uring%s, qd %u, fixed buffers", dio, r->eff_qd);
        else
            snprintf(r->note, sizeof(r->note), "io_uring%s, qd %u, buffers not registered: %s", dio, r->eff_qd,
                     stk_status_name(r->fixed_err));
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

static int check_config(const stk_dataset *ds, const stk__reader_config *cfg, char *err)
{
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
    if (ds->layout == STK_LAYOUT_FILES && cfg->backend == STK_IO_MMAP)
        return stk__err(err, STK_E_INVALID, "reader: the mmap backend reads LMDB shards, not a folder of files");
    return STK_OK;
}

/* A reader with its locks and per-shard state, no backend yet; NULL when out of memory. */
static stk__reader *reader_alloc(stk_dataset *ds, const stk__reader_config *cfg)
{
    stk__reader *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->ds = ds;
    r->cfg = *cfg;
    if (r->cfg.inflight_bytes == 0)
        r->cfg.inflight_bytes = (size_t)64 << 20;
    r->files = ds->layout == STK_LAYOUT_FILES;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv_free[0], NULL);
    pthread_cond_init(&r->cv_free[1], NULL);
    pthread_cond_init(&r->cv_fl, NULL);
    pthread_cond_init(&r->cv_sub, NULL);
    r->refused = calloc(ds->nshards ? ds->nshards : 1, sizeof(*r->refused));
    if (!r->refused) {
        stk__reader_destroy(r);
        return NULL;
    }
    return r;
}

static void use(stk__reader *r, int bk, int backend)
{
    r->bk = bk;
    r->backend = backend;
}

/* io_uring where asked for or (AUTO) where it can be set up, else the pread pool with the reason
 * in *reason_text (REASON_BUF, CAP bytes). */
static int choose_uring(stk__reader *r, char *reason_buf, size_t cap, const char **reason_text, char *err)
{
    int want = r->cfg.backend == STK_IO_URING;
    if (!stk__uring_built()) {
        if (want)
            return stk__err(err, STK_E_UNSUPPORTED, "reader: this build has no io_uring (liburing)");
        use(r, BK_PREAD, STK_IO_PREAD);
        r->fallback_reason = STK_E_UNSUPPORTED;
        snprintf(reason_buf, cap, "built without liburing");
        *reason_text = reason_buf;
        return STK_OK;
    }
    const char *why = "";
    int rc = stk__uring_setup(r, &why);
    if (rc == 0) {
        use(r, BK_URING, STK_IO_URING);
        return STK_OK;
    }
    if (want && rc == STK_E_UNSUPPORTED)
        return stk__err(err, rc, "reader: io_uring cannot read files here (%s)", why);
    if (want)
        return stk__err(err, rc, "reader: io_uring unavailable (%s)", why);
    use(r, BK_PREAD, STK_IO_PREAD);
    r->fallback_reason = rc;
    snprintf(reason_buf, cap, "%s", rc == STK_E_UNSUPPORTED ? why : stk_status_name(rc));
    *reason_text = reason_buf;
    return STK_OK;
}

/* The backend (r->bk) and what the stats report (r->backend). */
static int choose_backend(stk__reader *r, char *reason_buf, size_t cap, const char **reason_text, char *err)
{
    if (r->files)
        use(r, BK_FILES, STK_IO_PREAD);
    else if (r->cfg.backend == STK_IO_MMAP)
        use(r, BK_MMAP, STK_IO_MMAP);
    else if (r->cfg.backend == STK_IO_PREAD)
        use(r, BK_PREAD, STK_IO_PREAD);
    else
        return choose_uring(r, reason_buf, cap, reason_text, err);
    return STK_OK;
}

int stk__reader_create(stk__reader **out, stk_dataset *ds, const stk__reader_config *cfg, char *err)
{
    if (!out || !ds || !cfg)
        return stk__err(err, STK_E_INVALID, "reader: NULL argument");
    *out = NULL;
    int rc = check_config(ds, cfg, err);
    if (rc != STK_OK)
        return rc;
    stk__reader *r = reader_alloc(ds, cfg);
    if (!r)
        return stk__err(err, STK_E_NOMEM, "reader: out of memory");
    const char *reason_text = NULL;
    char reason_buf[48];
    rc = choose_backend(r, reason_buf, sizeof reason_buf, &reason_text, err);
    if (rc == STK_OK && r->bk == BK_MMAP)
        rc = stk__rd_mmap_setup(r, err);
    if (rc == STK_OK)
        rc = stk__rd_pool_create(r, r->bk == BK_URING ? 0 : (uint32_t)cfg->io_threads, err);
    if (rc == STK_OK && r->bk == BK_URING)
        stk__uring_register(r);
    if (rc != STK_OK) {
        stk__reader_destroy(r);
        return rc;
    }
    set_note(r, reason_text);
    *out = r;
    return STK_OK;
}

/* Thread I of N could not be started (PRC): wind down what started. The submitter's WORK is the
 * caller's: stop it through stopping. An io_uring submitter whose reaper never started reaps
 * what it left in flight itself before it exits. */
static int start_failed(stk__reader *r, uint32_t i, uint32_t n, int prc, char *err)
{
    atomic_store(&r->stopping, 1);
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->cv_free[0]);
    pthread_cond_broadcast(&r->cv_free[1]);
    pthread_cond_broadcast(&r->cv_fl);
    pthread_mutex_unlock(&r->mu);
    r->running = 1;
    r->nthreads = i;
    return stk__err(err, -prc, "reader: cannot start thread %u of %u (call stop)", i + 1, n);
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
        void *(*fn)(void *) = stk__rd_pool_thread;
        if (r->bk == BK_URING)
            fn = i == 0 ? stk__uring_submitter : stk__uring_reaper;
        int prc = pthread_create(&r->threads[i], NULL, fn, r);
        if (prc != 0)
            return start_failed(r, i, n, prc, err);
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
    stk__uring_destroy(r);
    free(r->threads);
    for (uint32_t i = 0; r->slots && i < r->nslots; i++)
        stk__free_aligned(r->slots[i].own);
    free(r->slots);
    stk__free_aligned(r->pool_mem);
    free((void *)r->refused);
    stk__rd_mmap_close(r);
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
            direct = stk__rd_wants_direct(r, i);
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

int stk__reader_oldest(stk__reader *r, uint64_t *index, uint64_t *age_ns)
{
    uint64_t best = 0;
    for (uint32_t i = 0; r && r->slots && i < r->nslots; i++) {
        rslot *s = &r->slots[i];
        uint64_t since = atomic_load(&s->busy_since);
        if (since && (!best || since < best)) {
            best = since;
            *index = atomic_load(&s->busy_index);
        }
    }
    if (!best)
        return STK_E_RANGE;
    uint64_t now = stk__now_ns();
    *age_ns = now > best ? now - best : 0;
    return STK_OK;
}
