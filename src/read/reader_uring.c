/* SPDX-License-Identifier: MIT */
/*
 * reader_uring.c — the io_uring backend (STK_IO_URING, and STK_IO_AUTO when a ring can be set
 * up): two threads. The submitter calls WORK, takes a pool buffer, prepares one IORING_OP_READ
 * and submits it, keeping at most eff_qd reads and cfg->inflight_bytes bytes in flight, and then
 * takes the completions already on the ring itself: a buffered read of cached data completes
 * inside io_uring_enter, so with a warm page cache the submitter verifies and delivers it at once
 * (bytes still in its cache) and no other thread wakes. The reaper handles what is left in flight
 * (cold data, O_DIRECT): it sleeps on cv_sub until the submitter leaves reads in flight, waits
 * for them in the kernel, resubmits short reads and EINTR/EAGAIN results, verifies, and calls
 * SINK. One thread produces SQEs at a time (sq_mu) and one consumes CQEs at a time (cq_mu). WORK
 * may block (the loader gates there) without holding up completions: the reaper is awake
 * whenever reads are in flight. Wake-ups are batched: once out of buffers the submitter sleeps
 * until eff_qd / 2 are free and then refills in a burst (docs/PERFORMANCE.md, read). When WORK
 * has no more, the submitter reaps with the reaper until nothing is in flight before it exits:
 * the kernel finishes a cold buffered read as task work of the thread that submitted it.
 *
 * Built only with liburing (STK_HAVE_URING); reader_uring_none.c stands in without it.
 */
#include "reader_uring.h"

#include "reader_pool.h"
#include "reader_verify.h"

#include <errno.h>
#include <liburing.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

struct stk__uring {
    struct io_uring ring;
    pthread_mutex_t sq_mu;  /* putting SQEs on the ring */
    pthread_mutex_t cq_mu;  /* taking CQEs off the ring: submitter (inline completions) and reaper */
};

/* Queue the next request of S. Returns 0, or -errno when it cannot be submitted. */
static int uring_submit(stk__reader *r, rslot *s)
{
    /* S belongs to the kernel and then the reaper once submitted: take what is needed first */
    s->cur_len = stk__rd_next_len(s);
    uint32_t len = s->cur_len;
    int direct = s->direct;
    int rc = 0;
    pthread_mutex_lock(&r->ur->sq_mu);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ur->ring);
    if (!sqe) { /* SQ full: flush and try once more */
        io_uring_submit(&r->ur->ring);
        sqe = io_uring_get_sqe(&r->ur->ring);
    }
    if (!sqe) {
        rc = -EBUSY;
    } else {
        if (r->fixed && s->buf_index >= 0)
            io_uring_prep_read_fixed(sqe, s->fd, s->mem + s->done, s->cur_len, s->base_off + s->done,
                                     s->buf_index);
        else
            io_uring_prep_read(sqe, s->fd, s->mem + s->done, s->cur_len, s->base_off + s->done);
        io_uring_sqe_set_data(sqe, s);
        for (int tries = 0;; tries++) {
            int n = io_uring_submit(&r->ur->ring);
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
    pthread_mutex_unlock(&r->ur->sq_mu);
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
    stk__rd_inflight_dec(r);
    stk__rd_busy(s, 0);
    /* wake the submitter when a few slots are free (not at each completion: a context switch
     * per read costs more CPU than the slightly lower average depth) */
    if (r->fl_waiting) {
        uint32_t refill = STK__MAX(1u, r->eff_qd / 8);
        if (r->inflight == 0 || (r->inflight + refill <= r->eff_qd &&
                                 r->inflight_bytes_now + r->fl_need <= r->cfg.inflight_bytes))
            pthread_cond_signal(&r->cv_fl);
    }
    /* the submitter finished this one and is about to stk__rd_deliver it (SINK may block): reads it left
     * in flight are then the reaper's */
    if (r->inflight > 0 && r->reaper_idle)
        pthread_cond_signal(&r->cv_sub);
    pthread_mutex_unlock(&r->mu);
}

/* Handle the result RES of slot S's request: resubmit (short read, EINTR/EAGAIN), or finish and
 * stk__rd_deliver. Either thread that took the CQE calls this. */
static void uring_complete(stk__reader *r, rslot *s, int64_t res)
{
    uint64_t t0 = stk__now_ns();
    /* the slot was written before its submission under sq_mu; the completion orders it for
     * real, this makes the order visible to ThreadSanitizer too (uncontended, cheap) */
    pthread_mutex_lock(&r->ur->sq_mu);
    pthread_mutex_unlock(&r->ur->sq_mu);
    int again = stk__rd_on_result(r, s, res);
    if (again) {
        int src = uring_submit(r, s);
        if (src == 0) {
            stk__clock_add(&r->clock.busy_ns, stk__now_ns() - t0);
            return;
        }
        stk__rd_fail(s, src, -src, "io_uring resubmit of read at %llu: %s",
                     (unsigned long long)(s->base_off + s->done), strerror(-src));
    }
    s->rd.disk_bytes = s->direct ? s->req : s->vlen;
    uring_finished(r, s);
    stk__clock_add(&r->clock.busy_ns, stk__now_ns() - t0);
    stk__rd_deliver(r, s, 1);
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
        pthread_mutex_lock(&r->ur->cq_mu);
        unsigned n = io_uring_peek_batch_cqe(&r->ur->ring, cqes, BATCH);
        for (unsigned i = 0; i < n; i++) {
            slot[i] = io_uring_cqe_get_data(cqes[i]);
            res[i] = cqes[i]->res;
        }
        if (n)
            io_uring_cq_advance(&r->ur->ring, n);
        pthread_mutex_unlock(&r->ur->cq_mu);
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
    pthread_mutex_lock(&r->ur->sq_mu);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ur->ring);
    if (sqe) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data(sqe, NULL);
        for (int tries = 0; tries < MAX_RETRIES; tries++) {
            int n = io_uring_submit(&r->ur->ring);
            if (n >= 0 || (n != -EINTR && n != -EAGAIN && n != -EBUSY))
                break;
            sched_yield();
        }
    }
    pthread_mutex_unlock(&r->ur->sq_mu);
}

/* Wait for room in flight for S: depth and bytes (one read always fits when nothing is in
 * flight); then count it in. The wait from T0 is starved time, as is an injected delay. Returns
 * the time the wait ended. */
static uint64_t wait_room(stk__reader *r, rslot *s, uint64_t t0)
{
    pthread_mutex_lock(&r->mu);
    while (r->inflight > 0 && !atomic_load(&r->stopping) &&
           (r->inflight >= r->eff_qd || r->inflight_bytes_now + s->req > r->cfg.inflight_bytes)) {
        r->fl_waiting = 1;
        r->fl_need = s->req;
        pthread_cond_wait(&r->cv_fl, &r->mu);
    }
    r->fl_waiting = 0;
    pthread_mutex_unlock(&r->mu);
    stk__rd_busy(s, 1); /* the read begins (an injected latency is part of it) */
    if (s->fault_delay)
        stk__rd_sleep_us(r->cfg.fault_delay_us);
    uint64_t t1 = stk__now_ns();
    stk__clock_add(&r->clock.starved_ns, t1 - t0);
    pthread_mutex_lock(&r->mu);
    r->inflight++;
    s->acct = s->req;
    r->inflight_bytes_now += s->acct;
    stk__rd_inflight_inc(r);
    pthread_mutex_unlock(&r->mu);
    return t1;
}

/* Plan, wait for room and submit the work item S, then take what completed inline. */
static void submit_one(stk__reader *r, rslot *s)
{
    uint64_t t1 = stk__now_ns();
    int rc = stk__rd_plan(r, s);
    if (rc != STK_OK) {
        s->rd.status = rc;
        stk__rd_deliver(r, s, 0);
        return;
    }
    stk__rd_draw_faults(r, s);
    s->rd.disk_bytes = s->req;
    uint64_t t2 = stk__now_ns();
    stk__clock_add(&r->clock.busy_ns, t2 - t1);
    uint64_t t3 = wait_room(r, s, t2);
    rc = uring_submit(r, s);
    if (rc < 0) {
        uring_finished(r, s);
        stk__rd_fail(s, rc, -rc, "io_uring submit of read at %llu: %s", (unsigned long long)s->base_off,
                     strerror(-rc));
        stk__rd_deliver(r, s, 0);
        return;
    }
    stk__clock_add(&r->clock.busy_ns, stk__now_ns() - t3);
    uring_reap(r);
    pthread_mutex_lock(&r->mu);
    if (r->inflight > 0 && r->reaper_idle)
        pthread_cond_signal(&r->cv_sub);
    pthread_mutex_unlock(&r->mu);
}

/* Wait in the kernel until the ring holds a completion (or a signal interrupts), at most 20 ms
 * where the kernel takes a timeout with the wait (IORING_FEAT_EXT_ARG): the caller then looks
 * again. The bound matters where this thread's wait can hold up the submitter, whose reads or
 * final no-op would end it: under valgrind, whose io_uring_enter keeps its scheduler lock while
 * the kernel waits, the unbounded wait deadlocked `stoker verify`. */
static void uring_wait(stk__reader *r)
{
    int rc;
    if (r->ur->ring.features & IORING_FEAT_EXT_ARG) {
        struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
        struct io_uring_getevents_arg arg = {.sigmask = 0, .sigmask_sz = _NSIG / 8, .ts = (uint64_t)(uintptr_t)&ts};
        rc = io_uring_enter2((unsigned)r->ur->ring.ring_fd, 0, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                             (sigset_t *)(void *)&arg, sizeof arg);
    } else {
        rc = io_uring_enter((unsigned)r->ur->ring.ring_fd, 0, 1, IORING_ENTER_GETEVENTS, NULL);
    }
    if (rc == -1)
        rc = -errno;
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME)
        stk__rd_sleep_us(1000); /* transient kernel trouble: do not spin */
}

/* Reads in flight now. */
static uint32_t inflight_left(stk__reader *r)
{
    pthread_mutex_lock(&r->mu);
    uint32_t left = r->inflight;
    pthread_mutex_unlock(&r->mu);
    return left;
}

/* uring_wait, its time counted as starved (waiting for storage). */
static void uring_wait_counted(stk__reader *r)
{
    uint64_t t0 = stk__now_ns();
    uring_wait(r);
    stk__clock_add(&r->clock.starved_ns, stk__now_ns() - t0);
}

/* The submitter also reaps: a buffered read of cached data completes inside io_uring_enter, so
 * the submitter finds its completion on the ring as soon as io_uring_submit returns, verifies it
 * (the bytes are still in its cache) and delivers it. The reaper is woken only when reads are
 * left in flight (cold data, O_DIRECT): with a warm page cache it sleeps, and a read costs no
 * context switch at all. */
void *stk__uring_submitter(void *arg)
{
    stk__reader *r = arg;
    pthread_setname_np(pthread_self(), "stk-submit");
    while (!atomic_load(&r->stopping)) {
        int skip;
        rslot *s = stk__rd_take_work(r, &skip);
        if (!s)
            break;
        if (!skip)
            submit_one(r, s);
    }
    /* The kernel finishes a buffered read of uncached data as task work of the thread that
     * submitted it: once this thread has exited, such a read fails with EFAULT. Stay, and reap
     * along with the reaper, until nothing is in flight. */
    while (inflight_left(r))
        if (!uring_reap(r))
            uring_wait_counted(r);
    pthread_mutex_lock(&r->mu);
    r->submit_done = 1;
    int idle = r->reaper_idle;
    pthread_cond_broadcast(&r->cv_sub);
    pthread_mutex_unlock(&r->mu);
    if (!idle) /* the reaper may wait in the kernel for a completion the submitter took */
        uring_kick(r);
    return NULL;
}

void *stk__uring_reaper(void *arg)
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
        /* nothing on the ring: wait for storage. A read the submitter reaps meanwhile still
         * wakes this wait; so does the no-op the submitter posts when it is done. */
        if (!uring_reap(r))
            uring_wait_counted(r);
    }
    return NULL;
}

/* Register the pool's buffers with the ring (IORING_OP_READ_FIXED: the kernel pins them once
 * instead of per read, a visible share of the read path's CPU). Optional: on failure
 * (RLIMIT_MEMLOCK: ENOMEM, or no READ_FIXED) plain reads are used and the reason is kept. */
void stk__uring_register(stk__reader *r)
{
    struct io_uring_probe *p = io_uring_get_probe_ring(&r->ur->ring);
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
    int rc = io_uring_register_buffers(&r->ur->ring, iov, r->nslots);
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

int stk__uring_built(void) { return 1; }

int stk__uring_setup(stk__reader *r, const char **why)
{
    const char *dis = getenv("STOKER_DISABLE_URING");
    if (dis && strcmp(dis, "1") == 0) {
        *why = "STOKER_DISABLE_URING=1";
        return -ENOSYS;
    }
    struct stk__uring *ur = calloc(1, sizeof *ur);
    if (!ur) {
        *why = "out of memory";
        return STK_E_NOMEM;
    }
    unsigned entries = 1;
    while (entries < (unsigned)STK__MAX(r->cfg.queue_depth, 1) && entries < 4096)
        entries <<= 1;
    int rc = io_uring_queue_init(entries, &ur->ring, 0);
    if (rc < 0) {
        free(ur);
        *why = "io_uring_queue_init";
        return rc;
    }
    struct io_uring_probe *p = io_uring_get_probe_ring(&ur->ring);
    int ok = p && io_uring_opcode_supported(p, IORING_OP_READ);
    if (p)
        io_uring_free_probe(p);
    if (!ok) {
        io_uring_queue_exit(&ur->ring);
        free(ur);
        *why = "no IORING_OP_READ";
        return STK_E_UNSUPPORTED;
    }
    pthread_mutex_init(&ur->sq_mu, NULL);
    pthread_mutex_init(&ur->cq_mu, NULL);
    r->ur = ur;
    ring_reuse_order();
    return 0;
}

void stk__uring_destroy(stk__reader *r)
{
    if (!r->ur)
        return;
    ring_reuse_order();
    io_uring_queue_exit(&r->ur->ring);
    pthread_mutex_destroy(&r->ur->sq_mu);
    pthread_mutex_destroy(&r->ur->cq_mu);
    free(r->ur);
    r->ur = NULL;
}
