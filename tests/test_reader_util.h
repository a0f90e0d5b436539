/* SPDX-License-Identifier: MIT */
/*
 * test_reader_util.h — shared by the reader tests: expected records, and a harness that runs one
 * epoch through a stk__reader the way the loader does (WORK hands out the plan's positions, SINK
 * queues completed reads to a consumer thread that checks and releases them).
 */
#ifndef STK_TEST_READER_UTIL_H
#define STK_TEST_READER_UTIL_H

#include "common.h"
#include "dataset.h"
#include "order.h"
#include "reader.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct t_expect {
    size_t n;
    uint8_t **data;
    uint32_t *len;
    int32_t *label;
    int *want_status; /* expected status per index (STK_OK unless a test breaks it), or
                       * T_OK_OR(status): either is accepted */
} t_expect;

/* want_status value accepting STK_OK or status S (a fault that may come before or after the read) */
#define T_OK_OR(s) (1 << 30 | ((-(s)) & 0xffff))
#define T_IS_OK_OR(w) ((w) > 0 && ((w) >> 30) == 1)
#define T_OK_OR_STATUS(w) (-((w) & 0xffff))

/* N payloads of 200..24000 bytes (one of ~300 KB at n/3, so that large buffers are used when
 * n >= 1000), starting like a JPEG (FF D8 FF), random after that; labels i % 5. */
static inline void t_expect_make(t_expect *e, size_t n, uint64_t seed)
{
    memset(e, 0, sizeof(*e));
    e->n = n;
    e->data = calloc(n, sizeof(*e->data));
    e->len = calloc(n, sizeof(*e->len));
    e->label = calloc(n, sizeof(*e->label));
    e->want_status = calloc(n, sizeof(*e->want_status));
    T_CHECK(e->data && e->len && e->label && e->want_status, "oom");
    stk__rng g;
    stk__rng_init(&g, seed, 1, 2);
    for (size_t i = 0; i < n; i++) {
        uint32_t len = 200 + (uint32_t)stk__rng_below(&g, 24000);
        if (i == n / 3)
            len = 300000 + (uint32_t)stk__rng_below(&g, 5000);
        e->len[i] = len;
        e->data[i] = malloc(len);
        T_CHECK(e->data[i], "oom");
        for (uint32_t j = 0; j < len; j++)
            e->data[i][j] = (uint8_t)stk__rng_u32(&g);
        e->data[i][0] = 0xFF;
        e->data[i][1] = 0xD8;
        e->data[i][2] = 0xFF;
        e->label[i] = (int32_t)(i % 5);
    }
}

static inline void t_expect_free(t_expect *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->data[i]);
    free(e->data);
    free(e->len);
    free(e->label);
    free(e->want_status);
}

/* Pack E into a dataset of 1 MiB shards at DIR (labels e->label). */
static inline void t_make_shards(const char *dir, const t_expect *e)
{
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, dir));
    for (size_t i = 0; i < e->n; i++)
        T_OK(stk_writer_add(w, e->data[i], e->len[i], e->label[i], NULL));
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
}

static inline stk_dataset *t_open_ds(const char *path, int layout)
{
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set(ds, STK_P_LAYOUT, layout));
    if (layout == STK_LAYOUT_LMDB)
        T_OK(stk_dataset_set(ds, STK_P_FOREIGN_LABEL, 7));
    int rc = stk_dataset_open(ds, path);
    if (rc != STK_OK)
        T_FAIL("open %s: %s", path, stk_dataset_last_error(ds));
    return ds;
}

/* Pack E into shards at TMP/NAME (t_make_shards) and open them. */
static inline stk_dataset *t_shards_at(const char *tmp, const char *name, const t_expect *e)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", tmp, name);
    t_make_shards(path, e);
    return t_open_ds(path, STK_LAYOUT_SHARDS);
}

static inline stk__reader_config t_default_config(void)
{
    stk__reader_config c;
    memset(&c, 0, sizeof(c));
    c.backend = STK_IO_AUTO;
    c.direct = 1;
    c.queue_depth = 32;
    c.inflight_bytes = (size_t)64 << 20;
    c.verify_crc = 1;
    c.io_threads = 4;
    c.fault_delay_us = 1000;
    return c;
}

/* 1 when an io_uring reader can be created for DS here. */
static inline int t_uring_works(stk_dataset *ds)
{
    stk__reader_config c = t_default_config();
    c.backend = STK_IO_URING;
    stk__reader *r = NULL;
    char err[STK__ERRLEN];
    int rc = stk__reader_create(&r, ds, &c, err);
    stk__reader_destroy(r);
    if (rc != STK_OK)
        printf("io_uring reader: %s\n", err);
    return rc == STK_OK;
}

typedef struct t_run_opts {
    uint64_t bad_index_every; /* every Nth work item names an index past the end */
    int corrupt_ok;           /* OK deliveries with wrong bytes are counted, not fatal */
    int check_faults;         /* expect -EIO exactly where the reader's fault draw says so */
    uint64_t cancel_after;    /* stop handing out work after this many deliveries (0 = never) */
    int no_shuffle;
    uint64_t progress_at;                 /* after this many deliveries ... */
    void (*at_progress)(void *ctx);       /* ... the consumer calls this once */
    void *ctx;
} t_run_opts;

typedef struct t_run_result {
    uint64_t ok, errors, crc_errors, range_errors, eio, truncated, mismatched, delivered, other;
    char first_error[256];
    stk__reader_info info;
    stk_stage_stats clock;
} t_run_result;

typedef struct t_run {
    stk_dataset *ds;
    const t_expect *e;
    const stk__reader_config *cfg;
    t_run_opts o;
    stk__plan plan;
    uint64_t epoch;
    pthread_mutex_t mu;
    uint64_t issued, real_next;
    int exhausted;
    _Atomic int cancel;
    _Atomic uint64_t processed;
    uint32_t *seen;
    stk__queue q;
    pthread_t consumer;
    stk__reader *r;
    t_run_result *res;
} t_run;

static inline int t_work(void *user, uint64_t *pos, uint64_t *index, uint64_t *epoch)
{
    t_run *t = user;
    pthread_mutex_lock(&t->mu);
    int more = 0;
    if (!atomic_load(&t->cancel) && !t->exhausted) {
        uint64_t every = t->o.bad_index_every;
        if (every && t->issued % every == every - 1) {
            *pos = t->issued;
            *index = t->ds->count + t->issued;
            more = 1;
        } else if (t->real_next < t->plan.per_rank) {
            *pos = t->real_next;
            *index = stk__plan_index(&t->plan, t->real_next);
            t->real_next++;
            more = 1;
        }
    }
    if (more) {
        *epoch = t->epoch;
        t->issued++;
    } else {
        t->exhausted = 1;
    }
    pthread_mutex_unlock(&t->mu);
    return more;
}

static inline int t_sink(void *user, stk__read *rd)
{
    t_run *t = user;
    if (atomic_load(&t->cancel))
        return STK_E_CANCELLED;
    if (stk__queue_push(&t->q, rd, NULL) != STK_OK)
        return STK_E_CANCELLED;
    return STK_OK;
}

static inline int t_fault_eio(const stk__reader_config *c, uint64_t epoch, uint64_t index)
{
    stk__rng g;
    stk__rng_init(&g, c->fault_seed, epoch, index);
    return stk__rng_below(&g, 1000000) < c->fault_eio_ppm;
}

static inline void t_note_error(t_run *t, const stk__read *rd)
{
    pthread_mutex_lock(&t->mu);
    if (!t->res->first_error[0])
        snprintf(t->res->first_error, sizeof(t->res->first_error), "index %llu: %s: %s",
                 (unsigned long long)rd->index, stk_status_name(rd->status), rd->detail);
    pthread_mutex_unlock(&t->mu);
}

static inline void *t_consumer(void *arg)
{
    t_run *t = arg;
    const t_expect *e = t->e;
    void *item;
    while (stk__queue_pop(&t->q, &item, NULL) == STK_OK) {
        stk__read *rd = item;
        t_run_result *res = t->res;
        T_CHECK(rd->epoch == t->epoch, "epoch %llu, expected %llu", (unsigned long long)rd->epoch,
                (unsigned long long)t->epoch);
        if (rd->index >= e->n) {
            T_CHECK(rd->status == STK_E_RANGE && !rd->data, "index %llu past the end: status %d",
                    (unsigned long long)rd->index, rd->status);
            res->range_errors++;
            res->errors++;
            t_note_error(t, rd);
        } else {
            uint64_t i = rd->index;
            T_CHECK(stk__plan_index(&t->plan, rd->pos) == i, "pos %llu carries index %llu",
                    (unsigned long long)rd->pos, (unsigned long long)i);
            t->seen[i]++;
            T_CHECK(t->seen[i] == 1, "index %llu delivered %u times", (unsigned long long)i, t->seen[i]);
            int want = e->want_status[i];
            if (t->o.check_faults && t_fault_eio(t->cfg, t->epoch, i))
                want = -EIO;
            if (T_IS_OK_OR(want) && (rd->status == STK_OK || rd->status == T_OK_OR_STATUS(want)))
                want = rd->status;
            if (rd->status != want)
                T_FAIL("index %llu: status %s (%s), expected %s", (unsigned long long)i,
                       stk_status_name(rd->status), rd->detail, stk_status_name(want));
            if (rd->status == STK_OK) {
                T_CHECK(rd->data && rd->len == e->len[i], "index %llu: len %u, expected %u",
                        (unsigned long long)i, rd->len, e->len[i]);
                T_CHECK(rd->label == e->label[i], "index %llu: label %d, expected %d",
                        (unsigned long long)i, rd->label, e->label[i]);
                T_CHECK(rd->disk_bytes >= rd->len, "index %llu: disk bytes %u < %u",
                        (unsigned long long)i, rd->disk_bytes, rd->len);
                if (memcmp(rd->data, e->data[i], rd->len) != 0) {
                    T_CHECK(t->o.corrupt_ok, "index %llu: wrong bytes", (unsigned long long)i);
                    res->mismatched++;
                }
                res->ok++;
            } else {
                T_CHECK(!rd->data && rd->detail[0], "index %llu: error without detail",
                        (unsigned long long)i);
                res->errors++;
                res->crc_errors += rd->status == STK_E_CRC;
                res->truncated += rd->status == STK_E_TRUNCATED;
                res->other += rd->status != STK_E_TRUNCATED && rd->status != STK_E_CRC && rd->status != -EIO;
                if (rd->status == -EIO) {
                    T_CHECK(rd->sys_errno == EIO, "EIO without sys_errno");
                    res->eio++;
                }
                t_note_error(t, rd);
            }
        }
        res->delivered++;
        stk__reader_release(t->r, rd);
        uint64_t done = atomic_fetch_add(&t->processed, 1) + 1;
        if (t->o.cancel_after && done >= t->o.cancel_after)
            atomic_store(&t->cancel, 1);
        if (t->o.at_progress && done == t->o.progress_at)
            t->o.at_progress(t->o.ctx);
    }
    return NULL;
}

static inline void t_run_begin(t_run *t, stk_dataset *ds, stk__reader *r, const t_expect *e,
                        const stk__reader_config *cfg, uint64_t epoch, const t_run_opts *o,
                        t_run_result *res)
{
    memset(t, 0, sizeof(*t));
    memset(res, 0, sizeof(*res));
    t->ds = ds;
    t->r = r;
    t->e = e;
    t->cfg = cfg;
    if (o)
        t->o = *o;
    t->epoch = epoch;
    t->res = res;
    T_OK(stk__plan_init(&t->plan, ds->count, 1234, epoch, !t->o.no_shuffle, 0, 1, 0));
    pthread_mutex_init(&t->mu, NULL);
    t->seen = calloc(ds->count, sizeof(uint32_t));
    T_CHECK(t->seen, "oom");
    T_OK(stk__queue_init(&t->q, 8));
    T_CHECK(pthread_create(&t->consumer, NULL, t_consumer, t) == 0, "thread");
    char err[STK__ERRLEN];
    int rc = stk__reader_start(r, t_work, t_sink, t, err);
    if (rc != STK_OK)
        T_FAIL("reader start: %s", err);
}

/* Wait until WORK is exhausted (or cancelled) and everything issued was processed, then stop. */
static inline void t_run_end(t_run *t)
{
    double t0 = stk__now();
    for (;;) {
        pthread_mutex_lock(&t->mu);
        int ex = t->exhausted;
        uint64_t issued = t->issued;
        pthread_mutex_unlock(&t->mu);
        if (atomic_load(&t->cancel) || (ex && atomic_load(&t->processed) >= issued))
            break;
        T_CHECK(stk__now() - t0 < 60, "epoch hangs: issued %llu processed %llu",
                (unsigned long long)issued, (unsigned long long)atomic_load(&t->processed));
        usleep(1000);
    }
    atomic_store(&t->cancel, 1); /* WORK returns 0, SINK cancels from here on */
    stk__reader_stop(t->r);
    stk__queue_close(&t->q);
    pthread_join(t->consumer, NULL);
    stk__reader_get_info(t->r, &t->res->info);
    stk__clock_snapshot(stk__reader_clock(t->r), &t->res->clock);
    T_CHECK(t->res->info.inflight_now == 0, "reads still in flight after stop: %u", t->res->info.inflight_now);
    stk__queue_destroy(&t->q);
    pthread_mutex_destroy(&t->mu);
}

/* Check every index was delivered exactly once (after t_run_end of a whole epoch). */
static inline void t_run_check_all(t_run *t)
{
    for (uint64_t i = 0; i < t->ds->count; i++)
        T_CHECK(t->seen[i] == 1, "index %llu delivered %u times", (unsigned long long)i, t->seen[i]);
    free(t->seen);
    t->seen = NULL;
}

/* A whole epoch with a fresh reader. */
static inline void t_run_epoch(stk_dataset *ds, const t_expect *e, const stk__reader_config *cfg,
                        uint64_t epoch, const t_run_opts *o, t_run_result *res)
{
    stk__reader *r = NULL;
    char err[STK__ERRLEN];
    int rc = stk__reader_create(&r, ds, cfg, err);
    if (rc != STK_OK)
        T_FAIL("reader create (backend %d): %s", cfg->backend, err);
    t_run t;
    t_run_begin(&t, ds, r, e, cfg, epoch, o, res);
    t_run_end(&t);
    t_run_check_all(&t);
    stk__reader_destroy(r);
}

/* Stop after a third of the epoch, then run a whole epoch on the same reader: every buffer must
 * have come back (the pool is small) and start must work again. */
static inline void t_stop_midway(stk_dataset *ds, const t_expect *e, const stk__reader_config *cfg)
{
    stk__reader *r = NULL;
    char err[STK__ERRLEN];
    if (stk__reader_create(&r, ds, cfg, err) != STK_OK)
        T_FAIL("reader create: %s", err);
    t_run t;
    t_run_result res;
    t_run_opts o = {.cancel_after = ds->count / 3};
    t_run_begin(&t, ds, r, e, cfg, 1, &o, &res);
    t_run_end(&t);
    T_CHECK(res.delivered >= ds->count / 3 && res.delivered < ds->count,
            "cancelled run delivered %llu", (unsigned long long)res.delivered);
    free(t.seen);
    for (int round = 0; round < 2; round++) {
        t_run_begin(&t, ds, r, e, cfg, 2 + (uint64_t)round, NULL, &res);
        t_run_end(&t);
        t_run_check_all(&t);
        T_CHECK(res.ok == ds->count, "after restart: %llu ok of %llu (%s)", (unsigned long long)res.ok,
                (unsigned long long)ds->count, res.first_error);
    }
    printf("  stop midway + restart x2 (%s): ok\n", res.info.note);
    stk__reader_destroy(r);
}

#endif
