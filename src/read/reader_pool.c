/* SPDX-License-Identifier: MIT */
/*
 * reader_pool.c — the reader's buffers: one page-aligned allocation at create, in two size
 * classes. Normal buffers are sized for 99% of the records' read spans; if some records are
 * larger, 2 to 8 large buffers sized for the largest span serve them (a read waits for one when
 * all are busy). There is no malloc per record. With io_uring the pool is registered with the
 * ring (reader_uring.c). A buffer belongs to the consumer from SINK until
 * stk__reader_release().
 */
#include "reader_pool.h"

#include "reader_verify.h"

#include <stdlib.h>
#include <string.h>

/* Bytes a read of record I needs in its buffer. */
static uint64_t need_of(const stk__reader *r, uint64_t i)
{
    const stk__rec *rec = &r->ds->recs[i];
    if (!r->files && r->bk != BK_MMAP && r->cfg.direct && r->ds->shards[rec->shard].fd_direct >= 0)
        return stk__rd_span(rec->off, rec->len);
    return rec->len;
}

/* Size classes from the table: normal = the 99th percentile of needs, leaving out at least the
 * largest record (4 KiB granularity, histogram up to 64 MiB); large = the maximum. Image sizes
 * have a long tail: sizing every buffer for a higher percentile multiplies the pool
 * (docs/PERFORMANCE.md, read). */
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

int stk__rd_pool_create(stk__reader *r, uint32_t inflight_slots, char *err)
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
    int large = need > r->normal_cap && r->n_large;
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

rslot *stk__rd_take_work(stk__reader *r, int *skip)
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
    if (need > s->cap) {
        /* a record larger than every one the table held when the pool was sized: a shard of an
         * s3:// dataset streamed through a small cache is opened (its records' sizes known) only
         * while the run goes on. The buffer grows, with memory of its own (not a registered
         * io_uring buffer), and stays grown. */
        size_t cap = stk__round_up(need, ALIGN);
        uint8_t *m = stk__alloc_aligned(ALIGN, cap);
        if (m) {
            stk__free_aligned(s->own);
            s->own = s->mem = m;
            s->cap = cap;
            s->buf_index = -1;
        } else {
            stk__rd_fail(s, STK_E_NOMEM, 0, "no memory for a %llu-byte read buffer",
                         (unsigned long long)need);
            stk__rd_deliver(r, s, 0);
            *skip = 1;
            return s;
        }
    }
    if (index >= r->ds->count) {
        stk__rd_fail(s, STK_E_RANGE, 0, "index %llu past the end (%llu records)",
                     (unsigned long long)index, (unsigned long long)r->ds->count);
        stk__rd_deliver(r, s, 0);
        *skip = 1;
    }
    return s;
}
