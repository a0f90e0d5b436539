/* SPDX-License-Identifier: MIT */
/*
 * loader_stream.c — an s3:// dataset read through the cache shard by shard (docs/S3.md
 * "Streaming"): the fetch thread walks the run's order ahead of the reader, window by window of the
 * shard-window order (order.c), and queues each shard it will need in that order; it begins them in
 * that order (room taken in the cache: remote.c) while a download slot is free and the cache has
 * room, download threads fetch up to STOKER_S3_SHARDS + 1 of them at once (sharing the request
 * slots: the last begun waits for those the others free, so the next shard's first request leaves
 * as soon as a request slot is free, not once a shard has ended), and the fetch thread finishes
 * each as it comes back (placed, opened, every record checked: attached); WORK (loader_pipeline.c)
 * hands out a position only once its shard is attached. A shard is detached — and so becomes
 * evictable — once the reader has handed out the last position of the last window that lists it and
 * every sample of it has been processed (a count per shard: +1 in WORK, -1 when a decode worker is
 * done with the sample, a substitute drawn from the same shard included: loader_bad.c). No thread
 * holds h->mu across a fetch; a fatal fetch error becomes the pipeline's error (the consumer's next
 * fails with it, naming the shard and the endpoint).
 */
#include "loader_internal.h"
#include "remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING 64 /* windows the fetch thread may be ahead */

/* A download slot: a shard begun, downloaded by a download thread, finished by the fetch
 * thread (all fields under h->mu but the job while RUNNING, which its download thread owns). */
enum { SLOT_FREE, SLOT_BEGUN, SLOT_RUNNING, SLOT_DONE };
typedef struct dl_slot {
    int state, rc;
    stk__remote_job job;
    char err[STK__ERRLEN];
} dl_slot;

struct stk__stream {
    uint32_t *queue;     /* shards to begin, in the order the run reads them: [qhead, qtail) */
    uint64_t qhead, qtail;
    uint8_t *queued;     /* per shard: in the queue or in a slot */
    dl_slot *slot;
    int nslot, nthreads, stop;
    pthread_t *th;
    pthread_cond_t cv;   /* download threads wait on it (with h->mu) */
};

static uint64_t key_of(uint64_t epoch, uint64_t pos) { return (epoch << 40) | pos; }

/* The W largest shards' cache bytes (each with its side files' reserve, as a fetch takes them):
 * what the W shards read at once may need at most. */
static uint64_t largest_window(const stk_loader *h, uint32_t w)
{
    uint32_t n = h->sw_tab.n;
    uint64_t *b = malloc(n * sizeof *b), sum = 0;
    if (!b)
        return UINT64_MAX;
    for (uint32_t s = 0; s < n; s++)
        b[s] = stk__remote_shard_bytes(h->ds, s);
    for (uint32_t k = 0; k < w && k < n; k++) { /* w small: selection */
        uint32_t m = k;
        for (uint32_t s = k + 1; s < n; s++)
            if (b[s] > b[m])
                m = s;
        uint64_t t = b[k];
        b[k] = b[m];
        b[m] = t;
        sum += b[k];
    }
    free(b);
    return sum;
}

int stk__loader_stream_config(stk_loader *h)
{
    h->streaming = stk__remote_streaming(h->ds);
    if (!h->streaming)
        return STK_OK;
    uint64_t limit = stk__remote_limit(h->ds), big = largest_window(h, 1);
    if (h->rcfg.backend == STK_IO_MMAP)
        return stk__err(h->err, STK_E_INVALID, "STK_IO_MMAP cannot read an s3:// dataset "
                        "streamed through a cache smaller than itself (its shards come and go)");
    if (!h->sw_window) { /* two windows in the cache: one read, the next fetched */
        uint64_t fit = big && limit ? limit / big / 2 : 1;
        h->sw_window = (uint32_t)STK__MAX(1, STK__MIN(fit, STK__MAX_WINDOW));
    }
    uint64_t need = largest_window(h, h->sw_window);
    if (limit && need > limit) /* limit 0: none (streamed by request: a window set at open) */
        return stk__err(h->err, STK_E_TOO_LARGE, "the cache limit (%llu bytes) cannot hold a "
                        "window of %u shards (the %u largest, each with the 64 KiB its fetch "
                        "reserves for side files: %llu bytes): lower "
                        "STK_P_SHUFFLE_WINDOW or raise the cache limit",
                        (unsigned long long)limit, h->sw_window, h->sw_window,
                        (unsigned long long)need);
    uint32_t n = h->sw_tab.n;
    if (!h->st_resident) {
        h->st_resident = calloc(n, 1);
        h->st_inflight = calloc(n, sizeof *h->st_inflight);
        h->st_ring = calloc((size_t)RING * (h->sw_window + 2), sizeof *h->st_ring);
        h->st_ring_w = h->sw_window;
        if (!h->st_resident || !h->st_inflight || !h->st_ring)
            return stk__err(h->err, STK_E_NOMEM, "out of memory");
        stk__cond_init_monotonic(&h->st_cv); /* timed_wait: CLOCK_MONOTONIC */
        h->st_cv_ok = 1;
    }
    if (!h->st_x) { /* the fetch thread's queue and download slots */
        struct stk__stream *x = calloc(1, sizeof *x);
        /* STOKER_S3_SHARDS downloads, and one more begun ahead that waits for the request
         * slots they free: the link does not idle while a download ends and the next begins */
        int nslot = STK__MIN(stk__remote_shards_inflight(h->ds) + 1, (int)n);
        if (x && (x->queue = calloc(n, sizeof *x->queue)) && (x->queued = calloc(n, 1)) &&
            (x->slot = calloc((size_t)nslot, sizeof *x->slot)) &&
            (x->th = calloc((size_t)nslot, sizeof *x->th))) {
            x->nslot = nslot;
            pthread_cond_init(&x->cv, NULL);
            h->st_x = x;
        } else {
            if (x) {
                free(x->queue);
                free(x->queued);
                free(x->slot);
            }
            free(x);
            return stk__err(h->err, STK_E_NOMEM, "out of memory");
        }
    }
    if (h->st_ring_w < h->sw_window) {
        uint64_t *nr = realloc(h->st_ring, (size_t)RING * (h->sw_window + 2) * sizeof *nr);
        if (!nr)
            return stk__err(h->err, STK_E_NOMEM, "out of memory");
        h->st_ring = nr;
        h->st_ring_w = h->sw_window;
    }
    return STK_OK;
}

void stk__loader_stream_free(stk_loader *h)
{
    if (h->st_resident)
        for (uint32_t s = 0; s < h->sw_tab.n; s++)
            if (h->st_resident[s])
                stk__remote_detach(h->ds, s);
    if (h->st_x) {
        pthread_cond_destroy(&h->st_x->cv);
        free(h->st_x->queue);
        free(h->st_x->queued);
        free(h->st_x->slot);
        free(h->st_x->th);
        free(h->st_x);
        h->st_x = NULL;
    }
    free(h->st_resident);
    free(h->st_inflight);
    free(h->st_ring);
    if (h->st_cv_ok)
        pthread_cond_destroy(&h->st_cv);
    h->st_resident = NULL;
    h->st_inflight = NULL;
    h->st_ring = NULL;
    h->st_cv_ok = 0;
}

/* ring entry E: [0] = end key, [1] = shard count, [2..] shards */
static uint64_t *entry(const stk_loader *h, uint64_t e) { return h->st_ring + (e % RING) * (h->st_ring_w + 2); }

/* Detach every attached shard that no window still ahead of the reader needs and that has no
 * read out (h->mu held; the detach itself is quick: close calls). Returns how many. */
static int release_done(stk_loader *h)
{
    /* windows wholly handed out; their shards' samples still out are counted per shard below
     * (staggered windows share shards: a window's shards are mostly still read in the next) */
    while (h->st_head < h->st_tail && entry(h, h->st_head)[0] <= h->st_cursor)
        h->st_head++;
    int n = 0;
    for (uint32_t s = 0; s < h->sw_tab.n; s++) {
        if (!h->st_resident[s] || atomic_load(&h->st_inflight[s]))
            continue;
        int needed = 0;
        for (uint64_t e = h->st_head; e < h->st_tail && !needed; e++) {
            const uint64_t *en = entry(h, e);
            for (uint64_t i = 0; i < en[1] && !needed; i++)
                needed = en[2 + i] == s;
        }
        if (needed)
            continue;
        pthread_mutex_lock(&h->stats_mu); /* stk_loader_stats reads its descriptors */
        stk__remote_detach(h->ds, s);
        pthread_mutex_unlock(&h->stats_mu);
        h->st_resident[s] = 0;
        n++;
    }
    return n;
}

static void timed_wait(stk_loader *h, int ms)
{
    struct timespec ts;
    stk__deadline(&ts, ms);
    pthread_cond_timedwait(&h->st_cv, &h->mu, &ts);
}

static void fail(stk_loader *h, int rc, const char *msg)
{
    if (!h->pipe_status) {
        h->pipe_status = rc;
        snprintf(h->pipe_msg, sizeof h->pipe_msg, "%s", msg);
    }
    pthread_cond_broadcast(&h->ready_cv);
    pthread_cond_broadcast(&h->space_cv);
    pthread_cond_broadcast(&h->st_cv);
}

static int reads_out(const stk_loader *h)
{
    for (uint32_t k = 0; k < h->sw_tab.n; k++)
        if (atomic_load(&h->st_inflight[k]))
            return 1;
    return 0;
}

/* A download thread: takes begun slots, downloads them without h->mu, hands them back DONE. */
static void *download_main(void *arg)
{
    stk_loader *h = arg;
    struct stk__stream *x = h->st_x;
    pthread_mutex_lock(&h->mu);
    while (!x->stop) {
        dl_slot *sl = NULL;
        for (int i = 0; i < x->nslot && !sl; i++)
            if (x->slot[i].state == SLOT_BEGUN)
                sl = &x->slot[i];
        if (!sl) {
            pthread_cond_wait(&x->cv, &h->mu);
            continue;
        }
        sl->state = SLOT_RUNNING;
        sl->err[0] = '\0';
        pthread_mutex_unlock(&h->mu);
        int rc = stk__remote_download(h->ds, &sl->job, sl->err);
        pthread_mutex_lock(&h->mu);
        sl->rc = rc;
        sl->state = SLOT_DONE;
        pthread_cond_broadcast(&h->st_cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Finish every downloaded slot (h->mu held on entry and exit): attached, or the run fails.
 * -1 = failed, else how many were attached. */
static int finish_done(stk_loader *h)
{
    struct stk__stream *x = h->st_x;
    int n = 0;
    for (int i = 0; i < x->nslot; i++) {
        dl_slot *sl = &x->slot[i];
        if (sl->state != SLOT_DONE)
            continue;
        uint32_t s = sl->job.shard;
        int rc = sl->rc;
        if (rc == STK_OK) {
            sl->err[0] = '\0';
            pthread_mutex_unlock(&h->mu);
            /* the shard's descriptors are set while stk_loader_stats may read them (the
             * reader's info: O_DIRECT in use), under stats_mu */
            pthread_mutex_lock(&h->stats_mu);
            rc = stk__remote_finish(h->ds, &sl->job, sl->err);
            pthread_mutex_unlock(&h->stats_mu);
            pthread_mutex_lock(&h->mu);
        } else {
            stk__remote_abandon(h->ds, &sl->job);
        }
        sl->state = SLOT_FREE;
        x->queued[s] = 0;
        if (rc != STK_OK) {
            fail(h, rc, sl->err);
            return -1;
        }
        h->st_resident[s] = 1;
        pthread_cond_broadcast(&h->space_cv); /* WORK may wait for it */
        n++;
    }
    return n;
}

/* Begin the queued shards in order while a slot is free and the cache has room (h->mu held on
 * entry and exit). -1 = failed, else how many were begun. */
static int begin_queued(stk_loader *h)
{
    struct stk__stream *x = h->st_x;
    char err[STK__ERRLEN];
    int n = 0;
    while (x->qhead < x->qtail && !h->halting && !h->pipe_status) {
        uint32_t s = x->queue[x->qhead % h->sw_tab.n];
        dl_slot *sl = NULL;
        for (int i = 0; i < x->nslot && !sl; i++)
            if (x->slot[i].state == SLOT_FREE)
                sl = &x->slot[i];
        if (!sl)
            break;
        err[0] = '\0';
        pthread_mutex_unlock(&h->mu);
        int rc = stk__remote_begin(h->ds, s, &sl->job, err);
        pthread_mutex_lock(&h->mu);
        if (rc == STK_OK) {
            x->qhead++;
            sl->rc = STK_OK;
            sl->state = sl->job.hit ? SLOT_DONE : SLOT_BEGUN; /* a hit is finished at once */
            pthread_cond_signal(&x->cv);
            n++;
            continue;
        }
        if (rc != STK_E_TOO_LARGE) {
            fail(h, rc, err);
            return -1;
        }
        if (release_done(h))
            continue;
        /* no room and nothing to give back: wait for the reader, unless it waits for this very
         * shard with no read out and nothing of ours in flight — then no room will ever come
         * (another user holds the cache) */
        int busy = 0;
        for (int i = 0; i < x->nslot; i++)
            busy |= x->slot[i].state != SLOT_FREE;
        if (h->st_want == s && !busy && !reads_out(h)) {
            fail(h, rc, err);
            return -1;
        }
        break;
    }
    return n;
}

/* Walk the run's order one window further (h->mu held): its ring entry, its shards queued.
 * 0 = walked, 1 = the run's order is all walked, 2 = the ring is full. */
static int walk_window(stk_loader *h, stk__plan *p, uint64_t *e, uint64_t *pos, uint64_t *end)
{
    struct stk__stream *x = h->st_x;
    if (*pos >= *end) {
        if (!h->epoch_end)
            return 1;
        ++*e;
        *pos = 0;
        *end = h->epoch_end;
        stk__loader_plan(h, p, *e);
    }
    if (h->st_tail - h->st_head >= RING) {
        release_done(h);
        if (h->st_tail - h->st_head >= RING)
            return 2;
    }
    stk__plan_index(p, *pos); /* loads the window POS is in */
    uint64_t xw = (*pos + p->skip) % p->local, wend = *pos + (p->win_hi - xw);
    wend = STK__MIN(wend, *end);
    uint64_t *en = entry(h, h->st_tail);
    en[0] = key_of(*e, wend);
    en[1] = p->win_n;
    for (uint32_t i = 0; i < p->win_n; i++) {
        uint32_t s = p->win_shard[i];
        en[2 + i] = s;
        if (!h->st_resident[s] && !x->queued[s]) {
            x->queued[s] = 1;
            x->queue[x->qtail++ % h->sw_tab.n] = s;
        }
    }
    h->st_tail++;
    *pos = wend;
    return 0;
}

static void *fetch_main(void *arg)
{
    stk_loader *h = arg;
    struct stk__stream *x = h->st_x;
    pthread_mutex_lock(&h->mu);
    x->stop = 0;
    x->qhead = x->qtail = 0;
    memset(x->queued, 0, h->sw_tab.n);
    for (int i = 0; i < x->nslot; i++)
        x->slot[i].state = SLOT_FREE;
    x->nthreads = 0;
    for (int i = 0; i < x->nslot; i++) {
        if (pthread_create(&x->th[i], NULL, download_main, h) != 0)
            break;
        x->nthreads++;
    }
    if (!x->nthreads)
        fail(h, STK_E_NOMEM, "cannot start a download thread");
    uint64_t e = h->r_e0, pos = h->r_s0, end = h->r_end0;
    stk__plan p;
    stk__loader_plan(h, &p, e);
    if (h->r_base)
        stk__plan_resume(&p, h->r_base);
    int walked = 0;
    while (!h->halting && !h->pipe_status) {
        int got = finish_done(h);
        if (got < 0)
            break;
        int begun = begin_queued(h);
        if (begun < 0)
            break;
        int w = 2;
        if (!walked && x->qhead == x->qtail) { /* every shard walked so far is begun: walk on */
            w = walk_window(h, &p, &e, &pos, &end);
            walked = w == 1;
        }
        int busy = 0;
        for (int i = 0; i < x->nslot; i++)
            busy |= x->slot[i].state != SLOT_FREE;
        if (walked && !busy && x->qhead == x->qtail)
            break; /* the whole run is attached */
        if (!got && !begun && w != 0)
            timed_wait(h, 20);
    }
    /* stop the download threads: a run that ends early (halt, failure) cancels the downloads in
     * progress rather than wait for them; give back what is unfinished */
    x->stop = 1;
    pthread_cond_broadcast(&x->cv);
    int cancel = h->halting || h->pipe_status;
    pthread_mutex_unlock(&h->mu);
    if (cancel)
        stk__remote_cancel(h->ds, 1);
    for (int i = 0; i < x->nthreads; i++)
        pthread_join(x->th[i], NULL);
    stk__remote_cancel(h->ds, 0);
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < x->nslot; i++) {
        if (x->slot[i].state != SLOT_FREE) {
            x->queued[x->slot[i].job.shard] = 0;
            stk__remote_abandon(h->ds, &x->slot[i].job);
        }
        x->slot[i].state = SLOT_FREE;
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

int stk__loader_stream_launch(stk_loader *h)
{
    if (!h->streaming)
        return STK_OK;
    pthread_mutex_lock(&h->mu);
    h->st_head = h->st_tail = 0;
    h->st_cursor = key_of(h->r_e0, h->r_s0);
    h->st_want = UINT32_MAX;
    h->st_wait_ns = 0;
    for (uint32_t s = 0; s < h->sw_tab.n; s++) /* nothing is out after a halt */
        atomic_store(&h->st_inflight[s], 0);
    pthread_mutex_unlock(&h->mu);
    int e = pthread_create(&h->st_th, NULL, fetch_main, h);
    if (e != 0)
        return stk__err(h->err, -e, "cannot start the fetch thread");
    h->st_running = 1;
    return STK_OK;
}

void stk__loader_stream_halt(stk_loader *h)
{
    if (!h->st_running)
        return;
    pthread_mutex_lock(&h->mu);
    pthread_cond_broadcast(&h->st_cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->st_th, NULL);
    h->st_running = 0;
}

/* The shard holding record INDEX: over the dataset's shards (h->sw_all), not h->sw_tab, which
 * a subset makes a table of its list's positions (loader_order.c). */
static uint32_t shard_of(const stk_loader *h, uint64_t index)
{
    return stk__table_shard_of(&h->sw_all, index);
}

stk__pool stk__loader_stream_pool(const stk_loader *h, uint64_t index)
{
    uint32_t s = shard_of(h, index);
    if (h->subset)
        return (stk__pool){h->sw_sub + h->sw_sfirst[s], 0, h->sw_scount[s]};
    return (stk__pool){NULL, h->sw_first[s], h->sw_count[s]};
}

int stk__loader_stream_gate(stk_loader *h, uint64_t index)
{
    uint32_t s = shard_of(h, index);
    if (h->st_resident[s]) {
        h->st_want = UINT32_MAX;
        if (h->st_wait_ns) { /* the time the reader had nothing to read: the fetch's starved */
            uint64_t waited = stk__now_ns() - h->st_wait_ns;
            stk__remote_starved(h->ds, (double)waited * 1e-9);
            h->st_waited_ns += waited;
            h->st_wait_ns = 0;
        }
        return 1;
    }
    if (!h->st_wait_ns)
        h->st_wait_ns = stk__now_ns();
    h->st_want = s;
    pthread_cond_broadcast(&h->st_cv);
    return 0;
}

void stk__loader_stream_out(stk_loader *h, uint64_t epoch, uint64_t pos, uint64_t index)
{
    atomic_fetch_add(&h->st_inflight[shard_of(h, index)], 1);
    h->st_cursor = key_of(epoch, pos + 1);
    if (h->st_head < h->st_tail && entry(h, h->st_head)[0] <= h->st_cursor)
        pthread_cond_broadcast(&h->st_cv); /* a window handed out: the fetch thread may detach */
}

void stk__loader_stream_back(stk_loader *h, uint64_t index)
{
    /* the last sample of a shard done: wake the fetch thread (without h->mu, which the decode
     * worker does not take here: a wake-up lost between its check and its wait costs one timed
     * wait, 20 ms) */
    if (atomic_fetch_sub(&h->st_inflight[shard_of(h, index)], 1) == 1)
        pthread_cond_broadcast(&h->st_cv);
}
