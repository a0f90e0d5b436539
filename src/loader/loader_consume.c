/* SPDX-License-Identifier: MIT */
/*
 * loader_consume.c — the consumer side of the host batch ring: next, release, detach, the batch's
 * targets, and where the consumer is in the epoch (tell, seek, resume, set_epoch, output size,
 * cancel). A sample's place in the ring is a function of its position, so the bytes of every
 * batch are the same for any worker count and any completion order (loader_internal.h).
 */
#include "loader_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *stk_loader_last_error(const stk_loader *h) { return h ? h->err : "invalid handle"; }

/* ---- consumer entry ------------------------------------------------------------------------ */

/*
 * stk_loader_stop and stk_loader_destroy may come from any thread while the consumer is blocked
 * in next (a Python close() from another thread, a shutdown handler). A consumer call that drops
 * h->mu while it works (next waits on ready_cv, detach allocates, seek halts and relaunches)
 * counts itself in `inside`; stop sets `closing` (nothing enters any more, a waiting next wakes
 * with STK_E_CANCELLED), waits until `inside` is 0, and only then halts and frees. release holds
 * h->mu from its check to its end, so checking under it is enough. Two threads in next at once
 * would wait for, and hand out, the same batch: the second gets STK_E_STATE instead.
 * What stays the caller's: a call that *starts* after destroy began uses freed memory, as after
 * free(); and stop waits for a seek in another thread, which joins the reader.
 */

/* Enter consumer call FN (NEXT: stk_loader_next). (h->mu held) */
static int consumer_enter(stk_loader *h, const char *fn, int next)
{
    if (h->state != STK__LS_STARTED)
        return stk__err(h->err, STK_E_STATE, "%s: the loader is not started", fn);
    if (h->closing)
        return stk__err(h->err, next ? STK_E_CANCELLED : STK_E_STATE,
                        "%s: the loader is being stopped (stk_loader_stop or stk_loader_destroy "
                        "in another thread)", fn);
    if (next && h->in_next)
        return stk__err(h->err, STK_E_STATE,
                        "stk_loader_next: another thread is in stk_loader_next (one consumer "
                        "thread per loader)");
    h->in_next |= next;
    h->inside++;
    return STK_OK;
}

/* (h->mu held) */
static void consumer_leave(stk_loader *h, int next)
{
    if (next)
        h->in_next = 0;
    if (--h->inside == 0)
        pthread_cond_broadcast(&h->idle_cv);
}

/* ---- consumer ------------------------------------------------------------------------------ */

static void set_pos(stk_loader *h, uint64_t epoch, uint64_t next)
{
    h->c_epoch = epoch;
    h->c_next = next;
    atomic_store(&h->pos_epoch, epoch);
    atomic_store(&h->pos_next, next);
}

/* Fill the public view of a host slot or device buffer. */
static void fill_batch(stk_loader *h, stk_batch *b, uint64_t epoch, uint64_t number,
                       uint64_t first, uint32_t size, uint32_t bad, void *images, int device,
                       const int32_t *labels, const uint64_t *indices, const uint8_t *subst,
                       const uint32_t *payload)
{
    memset(b, 0, sizeof(*b));
    b->epoch = epoch;
    b->number = number;
    b->first_sample = first;
    b->size = size;
    b->capacity = h->bs;
    b->dtype = h->out_dtype;
    b->layout = h->out_layout;
    b->device = device;
    b->channels = 3;
    b->height = (uint32_t)h->aug.out_h;
    b->width = (uint32_t)h->aug.out_w;
    b->sample_bytes = h->out_sample_bytes;
    b->images = h->stage == STK_STAGE_READ ? NULL : images;
    b->image_bytes = b->images ? (size_t)size * h->out_sample_bytes : 0;
    b->labels = labels;
    b->indices = indices;
    b->substituted = subst;
    b->payload_bytes = payload;
    b->bad = bad;
}

/* Is run batch K ready to hand out? (h->mu held) */
static int batch_ready(const stk_loader *h, uint64_t k)
{
    if (h->device_path) {
        const stk__devbuf *d = &h->devs[k % (uint64_t)h->nbuf];
        return d->seq == k && d->ready && !d->held;
    }
    const stk__slot *s = &h->slots[k % h->K];
    return s->seq == k && s->done && !s->held;
}

/* The steps of stk_loader_next, each with h->mu held; STK_OK goes on to the next. */

/* A cancel or an earlier failure pending; the end of the epoch (STK_END: the next batch belongs
 * to a later epoch, or there are none); else the consumer enters the epoch of batch c_k. */
static int next_gate(stk_loader *h)
{
    if (h->cancel_pending) {
        h->cancel_pending = 0;
        return stk__err(h->err, STK_E_CANCELLED, "stk_loader_next: cancelled");
    }
    if (h->failed)
        return h->failed; /* h->err still names the record */
    uint64_t e, first;
    uint32_t size;
    if (h->bpe == 0 && h->c_k >= h->r_nb0)
        e = h->c_epoch + 1;
    else
        stk__loader_geom(h, h->c_k, &e, &first, &size);
    if (e > h->c_epoch) {
        set_pos(h, h->c_epoch + 1, 0);
        return STK_END;
    }
    if (h->gate_end <= e) { /* resizable: the consumer enters epoch e, its size is now fixed */
        h->gate_end = e + 1;
        pthread_cond_broadcast(&h->space_cv);
    }
    return STK_OK;
}

/* Room to hand batch c_k out: fewer batches held than buffers, and not the one whose buffer batch
 * c_k goes into (waiting for it while it is held would never end). */
static int next_room(stk_loader *h)
{
    uint32_t held = h->device_path ? h->held_dev : h->held_host;
    uint32_t limit = h->device_path ? (uint32_t)h->nbuf : h->K;
    uint64_t k = h->c_k;
    if (held >= limit)
        return stk__err(h->err, STK_E_STATE,
                        "stk_loader_next: %u batches are held; release one first (the limit is %u)", held, limit);
    int blocked_by_held = h->device_path ? h->devs[k % (uint64_t)h->nbuf].held : h->slots[k % h->K].held;
    if (blocked_by_held)
        return stk__err(h->err, STK_E_STATE,
                        "stk_loader_next: batch %llu is still held and its buffer is needed next "
                        "(at most %u consecutive batches can be held); release it first",
                        (unsigned long long)(k >= limit ? k - limit : 0), limit);
    return STK_OK;
}

/* WORK's waits for a shard of a streamed dataset until NOW, summed since the open (h->mu held:
 * st_waited_ns and st_wait_ns are WORK's, written under it). */
static uint64_t fetch_waited(const stk_loader *h, uint64_t now)
{
    return h->st_waited_ns + (h->st_wait_ns && now > h->st_wait_ns ? now - h->st_wait_ns : 0);
}

/* Wait (TIMEOUT_MS < 0: without limit) until batch c_k is ready: STK_OK, STK_TIMEOUT,
 * STK_E_CANCELLED, or the pipeline's fatal error (sticky). Of the time waited for batch c_k, the
 * part during which WORK waited for a shard is summed in h->fw_acc_ns over the calls that wait
 * for it (a call that times out and the next): the consumer's wait for the fetch. The rest is
 * the pipeline's own pace (an instant consumer waits about a batch's time for every batch). */
static int next_wait(stk_loader *h, int timeout_ms)
{
    uint64_t k = h->c_k;
    if (h->fw_k != k) {
        h->fw_k = k;
        h->fw_acc_ns = 0;
    }
    if (!batch_ready(h, k) && !h->pipe_status) {
        uint64_t t0 = stk__now_ns(), f0 = fetch_waited(h, t0);
        struct timespec dl;
        if (timeout_ms >= 0)
            stk__deadline(&dl, timeout_ms);
        int timed_out = 0;
        while (!batch_ready(h, k) && !h->pipe_status && !h->cancel_pending && !h->closing) {
            if (timeout_ms < 0) {
                pthread_cond_wait(&h->ready_cv, &h->mu);
            } else if (pthread_cond_timedwait(&h->ready_cv, &h->mu, &dl) == ETIMEDOUT) {
                timed_out = !batch_ready(h, k);
                break;
            }
        }
        uint64_t t1 = stk__now_ns();
        atomic_fetch_add(&h->tel.wait_ns, t1 - t0);
        h->fw_acc_ns += fetch_waited(h, t1) - f0;
        if (h->closing)
            return stk__err(h->err, STK_E_CANCELLED,
                            "stk_loader_next: the loader is being stopped (stk_loader_stop or "
                            "stk_loader_destroy in another thread)");
        if (h->cancel_pending && !batch_ready(h, k)) {
            h->cancel_pending = 0;
            return stk__err(h->err, STK_E_CANCELLED, "stk_loader_next: cancelled");
        }
        if (timed_out && !h->pipe_status)
            return stk__loader_timed_out(h, k, timeout_ms);
    }
    if (!batch_ready(h, k)) { /* fatal pipeline error */
        h->failed = stk__err(h->err, h->pipe_status, "%s", h->pipe_msg);
        return h->failed;
    }
    return STK_OK;
}

/* Hand ready batch c_k out into *B (device buffers: after the caller's stream is made to wait for
 * it); a strict-mode failure recorded with the batch, or a stager error, is sticky. */
static int next_hand_out(stk_loader *h, void *cuda_stream, const stk_batch **b)
{
    uint64_t k = h->c_k;
    if (h->device_path) {
        stk__devbuf *d = &h->devs[k % (uint64_t)h->nbuf];
        int buf = (int)(k % (uint64_t)h->nbuf);
        char cerr[STK__ERRLEN] = "";
        int rc;
        if (d->fail_status) {
            snprintf(h->err, sizeof h->err, "%s", d->fail_msg);
            return h->failed = d->fail_status;
        }
        if ((rc = stk__bad_account(h, d->epoch, d->first, d->size, &d->badi)) != STK_OK)
            return h->failed = rc;
        if ((rc = stk__stager_hand_out(h->stager, buf, cuda_stream, cerr)) != STK_OK)
            return h->failed = stk__err(h->err, rc, "handing out batch %llu: %s", (unsigned long long)d->number, cerr);
        fill_batch(h, &d->batch, d->epoch, d->number, d->first, d->size, d->bad, stk__stager_buffer(h->stager, buf),
                   h->dev_id, d->labels, d->indices, d->substituted, d->payload);
        d->held = 1;
        h->held_dev++;
        *b = &d->batch;
        return STK_OK;
    }
    stk__slot *s = &h->slots[k % h->K];
    if (s->fail_status) {
        snprintf(h->err, sizeof h->err, "%s", s->fail_msg);
        return h->failed = s->fail_status;
    }
    for (int c = 0; c < STK__BADK; c++)
        s->badi.k[c] = atomic_load(&s->badk[c]);
    int rc = stk__bad_account(h, s->epoch, s->first, s->size, &s->badi);
    if (rc != STK_OK)
        return h->failed = rc;
    fill_batch(h, &s->batch, s->epoch, s->number, s->first, s->size, atomic_load(&s->bad), s->images, -1,
               s->labels, s->indices, s->substituted, s->payload);
    s->held = 1;
    h->held_host++;
    *b = &s->batch;
    return STK_OK;
}

int stk_loader_next(stk_loader *h, void *cuda_stream, int timeout_ms, const stk_batch **out)
{
    if (out)
        *out = NULL;
    if (!h || !out)
        return STK_E_INVALID;
    const stk_batch *b = NULL;
    pthread_mutex_lock(&h->mu);
    int rc = consumer_enter(h, "stk_loader_next", 1);
    if (rc != STK_OK) {
        pthread_mutex_unlock(&h->mu);
        return rc;
    }
    rc = next_gate(h);
    if (rc == STK_OK)
        rc = next_room(h);
    if (rc == STK_OK)
        rc = next_wait(h, timeout_ms);
    if (rc == STK_OK)
        rc = next_hand_out(h, cuda_stream, &b);
    if (rc == STK_OK) {
        if (b->epoch != h->fw_epoch) { /* the first batch of an epoch: a new maximum */
            h->fw_epoch = b->epoch;
            atomic_store(&h->fw_max_ns, 0);
        }
        if (h->fw_acc_ns > atomic_load(&h->fw_max_ns))
            atomic_store(&h->fw_max_ns, h->fw_acc_ns);
        h->c_k++;
        set_pos(h, b->epoch, b->first_sample + b->size);
        atomic_fetch_add(&h->tel.batches_out, 1);
        atomic_fetch_add(&h->tel.samples_out, b->size);
        *out = b;
    }
    consumer_leave(h, 1);
    /* the log messages go out after the unlock (the callback may query the loader) */
    char msgs[2][STK__ERRLEN + 256];
    int nlog = h->nlog;
    stk_log_fn fn = h->log_fn;
    void *user = h->log_user;
    for (int i = 0; i < nlog; i++)
        memcpy(msgs[i], h->logq[i], sizeof msgs[i]);
    h->nlog = 0;
    pthread_mutex_unlock(&h->mu);
    stk__bad_flush(fn, user, nlog, msgs);
    return rc;
}

/* The consumer gives host slot S back: it becomes free for the batch K later. (h->mu held) */
static void slot_give_back(stk_loader *h, stk__slot *s)
{
    s->held = 0;
    s->done = 0;
    s->started = 0;
    s->seq += h->K;
    h->held_host--;
    pthread_cond_broadcast(&h->space_cv);
}

/* The host slot or device buffer BATCH was handed out from, or NULL when BATCH is not one of H's
 * (compared by address: a foreign pointer is never subtracted from the ring's). */
static stk__slot *slot_of(const stk_loader *h, const stk_batch *batch)
{
    for (uint32_t i = 0; h->slots && i < h->K; i++)
        if (batch == &h->slots[i].batch)
            return &h->slots[i];
    return NULL;
}

static stk__devbuf *devbuf_of(const stk_loader *h, const stk_batch *batch)
{
    for (int i = 0; h->devs && i < h->nbuf; i++)
        if (batch == &h->devs[i].batch)
            return &h->devs[i];
    return NULL;
}

int stk_loader_release(stk_loader *h, const stk_batch *batch, void *cuda_stream)
{
    if (!h || !batch)
        return STK_E_INVALID;
    pthread_mutex_lock(&h->mu);
    if (h->state != STK__LS_STARTED || h->closing) {
        int closing = h->closing;
        pthread_mutex_unlock(&h->mu);
        return stk__err(h->err, STK_E_STATE, "stk_loader_release: the loader is %s",
                        closing ? "being stopped (held batches are invalid)" : "not started");
    }
    int rc = STK_OK;
    if (h->device_path) {
        stk__devbuf *d = devbuf_of(h, batch);
        if (!d || !d->held) {
            pthread_mutex_unlock(&h->mu);
            return stk__err(h->err, STK_E_INVALID, "stk_loader_release: not a batch held from this loader");
        }
        char cerr[STK__ERRLEN] = "";
        rc = stk__stager_release(h->stager, (int)(d - h->devs), cuda_stream, cerr);
        if (rc != STK_OK)
            stk__err(h->err, rc, "releasing batch %llu: %s", (unsigned long long)d->number, cerr);
        d->held = 0;
        d->ready = 0;
        d->seq += (uint64_t)h->nbuf;
        h->held_dev--;
        pthread_cond_broadcast(&h->stage_cv);
    } else {
        stk__slot *s = slot_of(h, batch);
        if (!s || !s->held) {
            pthread_mutex_unlock(&h->mu);
            return stk__err(h->err, STK_E_INVALID, "stk_loader_release: not a batch held from this loader");
        }
        slot_give_back(h, s);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static int detach_inside(stk_loader *h, const stk_batch *batch, void **images)
{
    if (h->device_path)
        return stk__err(h->err, STK_E_UNSUPPORTED,
                        "stk_loader_detach: device batches cannot be detached (release them)");
    pthread_mutex_lock(&h->mu);
    stk__slot *s = slot_of(h, batch);
    int ok = s && s->held;
    pthread_mutex_unlock(&h->mu);
    if (!ok)
        return stk__err(h->err, STK_E_INVALID, "stk_loader_detach: not a batch held from this loader");
    if (!s->images)
        return stk__err(h->err, STK_E_INVALID, "stk_loader_detach: the batch has no images (STK_STAGE_READ)");
    /* The slot is held: no worker writes it and only this (consumer) thread may give it back,
     * so its buffer can be replaced outside the lock. The replacement is of the same kind. */
    char err[STK__ERRLEN] = "";
    int pinned = 0;
    uint8_t *fresh = NULL;
    int rc = stk__loader_images_alloc(h->slot_bytes, h->ring_pinned ? (h->device_path ? h->dev_id : 0) : -1,
                          &fresh, &pinned, err);
    if (rc != STK_OK)
        return stk__err(h->err, rc, "stk_loader_detach: cannot allocate a replacement buffer (%zu bytes): %s",
                        h->slot_bytes, *err ? err : stk_strerror(rc));
    pthread_mutex_lock(&h->mu);
    *images = s->images;
    s->images = fresh;
    atomic_fetch_add(&h->detached, 1);
    slot_give_back(h, s);
    pthread_mutex_unlock(&h->mu);
    return STK_OK;
}

int stk_loader_detach(stk_loader *h, const stk_batch *batch, void **images)
{
    if (images)
        *images = NULL;
    if (!h || !batch || !images)
        return STK_E_INVALID;
    pthread_mutex_lock(&h->mu);
    int rc = consumer_enter(h, "stk_loader_detach", 0);
    pthread_mutex_unlock(&h->mu);
    if (rc != STK_OK)
        return rc;
    rc = detach_inside(h, batch, images);
    pthread_mutex_lock(&h->mu);
    consumer_leave(h, 0);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

const void *stk_loader_batch_targets(const stk_loader *h, const stk_batch *batch, stk_target_info *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (!h || !batch || h->state != STK__LS_STARTED || !h->tout_row)
        return NULL;
    const stk__devbuf *d = h->device_path ? devbuf_of(h, batch) : NULL;
    const stk__slot *s = h->device_path ? NULL : slot_of(h, batch);
    const uint8_t *t = d ? d->targets : s ? s->targets : NULL;
    if (t && info)
        *info = h->tout;
    return t;
}

int stk_loader_tell(const stk_loader *h, uint64_t *epoch, uint64_t *next_sample)
{
    if (!h)
        return STK_E_INVALID;
    uint64_t e, s;
    if (h->state == STK__LS_STARTED) {
        e = atomic_load(&((stk_loader *)h)->pos_epoch);
        s = atomic_load(&((stk_loader *)h)->pos_next);
    } else {
        e = (uint64_t)stk__loader_pget(h, STK_P_EPOCH);
        s = 0;
    }
    if (epoch)
        *epoch = e;
    if (next_sample)
        *next_sample = s;
    return STK_OK;
}

/* An elastic resume in the shard-window order (stk_loader_resume_segments): what the earlier
 * runs left of the epoch (owned; NULL: the whole epoch) and the segments that say so. */
typedef struct seg_resume {
    stk__rest *rest;
    const uint64_t *hist;
    uint32_t nhist;
} seg_resume;

/* Continue at sample NEXT_SAMPLE of this rank's share of epoch EPOCH, the epoch's global
 * positions [0, BASE) counted as delivered (BASE = 0: a plain seek). With SR: the epoch is what
 * SR->rest holds and BASE / world the samples this rank's list there was taken already. */
static int seek_at(stk_loader *h, const char *fn, uint64_t epoch, uint64_t base,
                   uint64_t next_sample, seg_resume *sr)
{
    if (h->state != STK__LS_STARTED)
        return stk__err(h->err, STK_E_STATE, "%s: the loader is not started", fn);
    if (epoch > (uint64_t)INT64_MAX)
        return stk__err(h->err, STK_E_RANGE, "%s: epoch %llu is out of range", fn,
                        (unsigned long long)epoch);
    if (!sr && base && h->sw_window && (base % h->world || base / h->world > h->per_rank))
        return stk__err(h->err, STK_E_RANGE,
                        "%s: consumed %llu: in the shard-window order (STK_P_SHUFFLE_WINDOW; an "
                        "s3:// dataset streamed through a smaller cache) a resume takes k x world "
                        "size from a run of the same world size (%u), k <= %llu; from another "
                        "world size use stk_loader_tell_segments / stk_loader_resume_segments", fn,
                        (unsigned long long)base, h->world, (unsigned long long)h->per_rank);
    if (!sr && base > h->n)
        return stk__err(h->err, STK_E_RANGE,
                        "%s: %llu samples consumed, but the epoch has %llu", fn,
                        (unsigned long long)base, (unsigned long long)h->n);
    uint64_t end = sr ? 0 : stk__loader_rest_end(h, epoch, base);
    if (next_sample > end)
        return stk__err(h->err, STK_E_RANGE,
                        "%s: sample %llu is past the end of the epoch (%llu samples)", fn,
                        (unsigned long long)next_sample, (unsigned long long)end);
    pthread_mutex_lock(&h->mu);
    if (h->held_host || h->held_dev) {
        uint32_t held = h->held_host + h->held_dev;
        pthread_mutex_unlock(&h->mu);
        return stk__err(h->err, STK_E_STATE, "%s: %u batches are still held; release them first",
                        fn, held);
    }
    int keep = 0;
    /* a resumed epoch (its rest installed) is left only by a relaunch */
    int rested = h->sw_rest && epoch == h->sw_rest_epoch;
    if (!sr && !rested && !h->failed && !h->pipe_status && h->running) {
        uint64_t cur_base = h->c_epoch == h->r_e0 ? h->r_base : 0;
        if (epoch == h->c_epoch && next_sample == h->c_next && base == cur_base) {
            keep = 1;
        } else if (epoch == h->c_epoch + 1 && next_sample == 0 && base == 0 &&
                   h->c_next == stk__loader_epoch_end(h, h->c_epoch)) {
            /* the caller moves on without reading STK_END: skip it */
            set_pos(h, epoch, 0);
            keep = 1;
        }
    }
    pthread_mutex_unlock(&h->mu);
    if (keep)
        return STK_OK;
    stk__loader_halt(h);
    pthread_mutex_lock(&h->mu);
    h->failed = 0;
    h->pipe_status = 0;
    h->t_epoch = UINT64_MAX; /* the bad-record tally starts again where the run does */
    stk__loader_rest_drop(h); /* nothing runs: no plan holds the rest */
    if (sr) {
        h->sw_rest = sr->rest;
        sr->rest = NULL;
        h->sw_rest_epoch = epoch;
        h->sw_nhist = sr->nhist;
        memcpy(h->sw_hist, sr->hist, 3 * sr->nhist * sizeof *sr->hist);
    }
    pthread_mutex_unlock(&h->mu);
    int rc = stk__loader_launch_at(h, epoch, next_sample, base);
    if (rc != STK_OK) {
        /* nothing runs now: next() keeps returning this error until a seek succeeds */
        pthread_mutex_lock(&h->mu);
        h->failed = rc;
        pthread_mutex_unlock(&h->mu);
    }
    return rc;
}

/* seek_at as a consumer call: a stop in another thread waits for it */
static int seek_entered(stk_loader *h, const char *fn, uint64_t epoch, uint64_t base,
                        uint64_t next_sample, seg_resume *sr)
{
    pthread_mutex_lock(&h->mu);
    int rc = consumer_enter(h, fn, 0);
    pthread_mutex_unlock(&h->mu);
    if (rc != STK_OK)
        return rc;
    rc = seek_at(h, fn, epoch, base, next_sample, sr);
    pthread_mutex_lock(&h->mu);
    consumer_leave(h, 0);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int stk_loader_seek(stk_loader *h, uint64_t epoch, uint64_t next_sample)
{
    if (!h)
        return STK_E_INVALID;
    return seek_entered(h, "stk_loader_seek", epoch, 0, next_sample, NULL);
}

int stk_loader_resume(stk_loader *h, uint64_t epoch, uint64_t consumed, uint64_t next_sample)
{
    if (!h)
        return STK_E_INVALID;
    return seek_entered(h, "stk_loader_resume", epoch, consumed, next_sample, NULL);
}

int stk_loader_tell_global(const stk_loader *h, uint64_t *epoch, uint64_t *consumed, uint64_t *base)
{
    if (!h)
        return STK_E_INVALID;
    uint64_t e = (uint64_t)stk__loader_pget(h, STK_P_EPOCH), c = 0, b = 0;
    if (h->state == STK__LS_STARTED) {
        stk_loader *m = (stk_loader *)h;
        pthread_mutex_lock(&m->mu);
        e = m->c_epoch;
        b = e == m->r_e0 ? m->r_base : 0;
        stk__plan p;
        stk__loader_plan(m, &p, e);
        if (b)
            stk__plan_resume(&p, b);
        c = stk__plan_consumed(&p, m->c_next);
        pthread_mutex_unlock(&m->mu);
    }
    if (epoch)
        *epoch = e;
    if (consumed)
        *consumed = c;
    if (base)
        *base = b;
    return STK_OK;
}

int stk_loader_tell_segments(const stk_loader *h, uint64_t *epoch, uint64_t *segs, uint32_t cap,
                             uint32_t *nsegs)
{
    if (!h || (cap && !segs))
        return STK_E_INVALID;
    uint64_t e = (uint64_t)stk__loader_pget(h, STK_P_EPOCH);
    uint32_t n = 0;
    uint64_t mine[3 * (STK__MAX_SEGS + 1)];
    stk_loader *m = (stk_loader *)h; /* the lock and last_error */
    if (h->state == STK__LS_STARTED) {
        if (!h->sw_window)
            return stk__err(m->err, STK_E_INVALID, "stk_loader_tell_segments: the loader is not "
                            "in the shard-window order (STK_P_SHUFFLE_WINDOW, or an s3:// "
                            "dataset streamed through a smaller cache); use stk_loader_tell_global");
        pthread_mutex_lock(&m->mu);
        e = m->c_epoch;
        if (m->sw_rest && e == m->sw_rest_epoch) {
            n = m->sw_nhist;
            memcpy(mine, m->sw_hist, 3 * n * sizeof *mine);
        }
        stk__plan p;
        stk__loader_plan(m, &p, e);
        if (e == m->r_e0 && m->r_base)
            stk__plan_resume(&p, m->r_base);
        mine[3 * n] = m->world;
        mine[3 * n + 1] = m->sw_window;
        mine[3 * n + 2] = p.skip + m->c_next;
        n++;
        pthread_mutex_unlock(&m->mu);
    }
    if (epoch)
        *epoch = e;
    if (nsegs)
        *nsegs = n;
    if (n > cap)
        return stk__err(m->err, STK_E_RANGE, "stk_loader_tell_segments: %u segments, room for %u",
                        n, cap);
    if (n)
        memcpy(segs, mine, 3 * n * sizeof *segs);
    return STK_OK;
}

/* Validate SEGS and build what they left of EPOCH for this loader (started, or being started:
 * configured). *SR: the rest (NULL: none) and the segments it holds; *SKIP: this rank's
 * position in its list on it. Errors set h->err. */
static int segs_prepare(stk_loader *h, const char *fn, uint64_t epoch, const uint64_t *segs,
                        uint32_t nsegs, seg_resume *sr, uint64_t *skip)
{
    if (!h->sw_window)
        return stk__err(h->err, STK_E_INVALID, "%s: the loader is not in the shard-window order "
                        "(STK_P_SHUFFLE_WINDOW, or an s3:// dataset streamed through a smaller "
                        "cache); use stk_loader_resume", fn);
    /* the last segment's own world and window: continue its lists (as stk_loader_resume does);
     * else split what every segment left */
    uint32_t apply = nsegs;
    *skip = 0;
    if (nsegs && segs[3 * (nsegs - 1)] == h->world && segs[3 * (nsegs - 1) + 1] == h->sw_window) {
        apply = nsegs - 1;
        *skip = segs[3 * (nsegs - 1) + 2];
    }
    if (apply > STK__MAX_SEGS)
        return stk__err(h->err, STK_E_RANGE, "%s: %u segments to split the rest of, at most %d "
                        "(resume at the world size of the last run, or at an epoch boundary)",
                        fn, apply, STK__MAX_SEGS);
    *sr = (seg_resume){NULL, segs, apply};
    int rc = STK_OK;
    if (apply) {
        sr->rest = malloc(sizeof *sr->rest);
        rc = sr->rest ? stk__rest_init(sr->rest, &h->sw_tab) : STK_E_NOMEM;
        if (rc != STK_OK) {
            free(sr->rest);
            sr->rest = NULL;
            return stk__err(h->err, rc, "%s: out of memory", fn);
        }
        for (uint32_t i = 0; i < apply && rc == STK_OK; i++) {
            rc = stk__rest_take(sr->rest, &h->sw_tab, (uint32_t)segs[3 * i + 1], h->seed, epoch,
                                h->shuffle, (uint32_t)segs[3 * i], segs[3 * i + 2]);
            if (rc != STK_OK)
                stk__err(h->err, rc, "%s: segment %u (world size %llu, window %llu, %llu samples "
                         "taken per rank): %s", fn, i, (unsigned long long)segs[3 * i],
                         (unsigned long long)segs[3 * i + 1], (unsigned long long)segs[3 * i + 2],
                         rc == STK_E_RANGE ? "more samples than any rank's share there (or fewer "
                         "shards than ranks)" : stk_strerror(rc));
        }
    }
    if (rc == STK_OK) { /* this rank's list on the rest must hold SKIP */
        stk__plan p;
        rc = stk__plan_init_rest(&p, &h->sw_tab, sr->rest, h->sw_window, h->seed, epoch,
                                 h->shuffle, h->rank, h->world, h->dist_mode);
        if (rc != STK_OK)
            stk__err(h->err, rc, "%s: cannot split what is left of epoch %llu among %u ranks",
                     fn, (unsigned long long)epoch, h->world);
        else /* EXACT: a rank with a smaller share took all of it */
            *skip = STK__MIN(*skip, p.per_rank);
    }
    if (rc != STK_OK && sr->rest) {
        stk__rest_free(sr->rest);
        free(sr->rest);
        sr->rest = NULL;
    }
    return rc;
}

int stk__loader_launch_pending(stk_loader *h)
{
    static const char fn[] = "stk_loader_resume_segments";
    seg_resume sr = {NULL, NULL, 0};
    uint64_t skip, epoch = h->sw_pend_epoch;
    h->sw_pend_set = 0; /* one start takes it */
    int rc = segs_prepare(h, fn, epoch, h->sw_pend, h->sw_npend, &sr, &skip);
    if (rc != STK_OK)
        return rc;
    stk__loader_rest_drop(h); /* no thread runs yet */
    h->sw_rest = sr.rest;
    h->sw_rest_epoch = epoch;
    h->sw_nhist = sr.nhist;
    memcpy(h->sw_hist, sr.hist, 3 * sr.nhist * sizeof *sr.hist);
    return stk__loader_launch_at(h, epoch, 0, skip * h->world);
}

int stk_loader_resume_segments(stk_loader *h, uint64_t epoch, const uint64_t *segs,
                               uint32_t nsegs)
{
    static const char fn[] = "stk_loader_resume_segments";
    if (!h || (nsegs && !segs))
        return STK_E_INVALID;
    if (epoch > (uint64_t)INT64_MAX)
        return stk__err(h->err, STK_E_RANGE, "%s: epoch %llu is out of range", fn,
                        (unsigned long long)epoch);
    if (nsegs > STK__MAX_SEGS + 1)
        return stk__err(h->err, STK_E_RANGE, "%s: %u segments, at most %d", fn, nsegs,
                        STK__MAX_SEGS + 1);
    for (uint32_t i = 0; i < nsegs; i++) {
        uint64_t w = segs[3 * i], win = segs[3 * i + 1];
        if (w < 1 || w > UINT32_MAX || win < 1 || win > STK__MAX_WINDOW)
            return stk__err(h->err, STK_E_INVALID, "%s: segment %u: world size %llu, window "
                            "%llu (1..%d) out of range", fn, i, (unsigned long long)w,
                            (unsigned long long)win, STK__MAX_WINDOW);
    }
    if (h->state != STK__LS_STARTED) { /* the next start begins there: nothing fetched before */
        memcpy(h->sw_pend, segs, 3 * nsegs * sizeof *segs);
        h->sw_npend = nsegs;
        h->sw_pend_epoch = epoch;
        h->sw_pend_set = 1;
        return STK_OK;
    }
    seg_resume sr = {NULL, NULL, 0};
    uint64_t skip;
    int rc = segs_prepare(h, fn, epoch, segs, nsegs, &sr, &skip);
    if (rc == STK_OK)
        rc = seek_entered(h, fn, epoch, skip * h->world, 0, &sr);
    if (sr.rest) {
        stk__rest_free(sr.rest);
        free(sr.rest);
    }
    return rc;
}

int stk_loader_set_output_size(stk_loader *h, uint32_t height, uint32_t width)
{
    if (!h)
        return STK_E_INVALID;
    if (height < 1 || height > 65535 || width < 1 || width > 65535)
        return stk__err(h->err, STK_E_INVALID,
                        "stk_loader_set_output_size: %u x %u is out of range [1, 65535]", height,
                        width);
    if (h->state != STK__LS_STARTED) {
        int64_t mh = stk__loader_pget(h, STK_P_MAX_OUT_HEIGHT), mw = stk__loader_pget(h, STK_P_MAX_OUT_WIDTH);
        if ((mh > 0 && height > (uint64_t)mh) || (mw > 0 && width > (uint64_t)mw))
            return stk__err(h->err, STK_E_INVALID,
                            "stk_loader_set_output_size: %u x %u is above STK_P_MAX_OUT_HEIGHT x "
                            "STK_P_MAX_OUT_WIDTH = %lld x %lld", height, width, (long long)mh,
                            (long long)mw);
        h->pv[stk__param_find(STK_P_OUT_HEIGHT)].i = height;
        h->pv[stk__param_find(STK_P_OUT_WIDTH)].i = width;
        return STK_OK;
    }
    if (!h->resizable)
        return stk__err(h->err, STK_E_STATE,
                        "stk_loader_set_output_size: the loader was started without "
                        "STK_P_MAX_OUT_HEIGHT / STK_P_MAX_OUT_WIDTH; set them before start to "
                        "change the output size between epochs (or stop, set, start)");
    if ((int)height > h->max_h || (int)width > h->max_w)
        return stk__err(h->err, STK_E_INVALID,
                        "stk_loader_set_output_size: %u x %u is above STK_P_MAX_OUT_HEIGHT x "
                        "STK_P_MAX_OUT_WIDTH = %d x %d (the ring is sized for that)", height, width,
                        h->max_h, h->max_w);
    pthread_mutex_lock(&h->mu);
    const char *why = NULL;
    if (h->held_host || h->held_dev)
        why = "batches are still held; release them first";
    else if (h->failed || h->pipe_status)
        why = "the loader failed; seek or set_epoch first";
    else if (h->gate_end > h->c_epoch)
        why = "only between epochs: after stk_loader_next returned STK_END, or after start, "
              "set_epoch, seek or resume, before the next stk_loader_next";
    int rc = STK_OK;
    if (why) {
        rc = stk__err(h->err, STK_E_STATE, "stk_loader_set_output_size: %s (epoch %llu, sample %llu)",
                      why, (unsigned long long)h->c_epoch, (unsigned long long)h->c_next);
    } else if (h->device_path) {
        char err[STK__ERRLEN] = "";
        rc = stk__stager_set_size(h->stager, (int)height, (int)width, err);
        if (rc != STK_OK)
            stk__err(h->err, rc, "stk_loader_set_output_size: %s", err);
    }
    if (rc == STK_OK) {
        /* nothing of the coming epoch is read or decoded yet (WORK waits at the gate) and every
         * earlier batch is released: no thread uses the size until the gate opens */
        h->aug.out_h = (int)height;
        h->aug.out_w = (int)width;
        stk__loader_sample_bytes(h, h->aug.out_h, h->aug.out_w, &h->out_sample_bytes, &h->host_sample_bytes);
        h->pv[stk__param_find(STK_P_OUT_HEIGHT)].i = height;
        h->pv[stk__param_find(STK_P_OUT_WIDTH)].i = width;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int stk_loader_set_epoch(stk_loader *h, uint64_t epoch)
{
    if (h && h->state != STK__LS_STARTED)
        return stk__err(h->err, STK_E_STATE, "stk_loader_set_epoch: the loader is not started");
    return stk_loader_seek(h, epoch, 0);
}

int stk_loader_cancel(stk_loader *h)
{
    if (!h)
        return STK_E_INVALID;
    pthread_mutex_lock(&h->mu);
    h->cancel_pending = 1;
    pthread_cond_broadcast(&h->ready_cv);
    pthread_mutex_unlock(&h->mu);
    return STK_OK;
}
