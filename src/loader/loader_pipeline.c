/* SPDX-License-Identifier: MIT */
/*
 * loader_pipeline.c — the threads of a run: the reader's WORK and SINK callbacks, the decode
 * workers, the stager thread, and launch/halt.
 *
 * Flow control. WORK hands out positions in order, and the positions of run batch k only once
 * slot k % K is free for k (its seq is k): the reader blocks there while the ring is full, so at
 * most K batches are ever in flight or held, and reads run at most K batches ahead of the
 * consumer. SINK pushes completed reads into a bounded queue that the T workers drain; a worker
 * writes sample i of batch k into slot k % K at offset i — no two workers ever touch the same
 * bytes, and nothing is copied between stages. The worker that writes the last sample of a batch
 * marks it done (an atomic countdown, then the mutex so the consumer sees every write).
 */
#include "loader_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* snprintf that may truncate (messages are cut to their buffer on purpose). */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

/* ---- geometry of a run --------------------------------------------------------------------- */

uint64_t stk__loader_epoch_end(const stk_loader *h, uint64_t epoch)
{
    return epoch == h->r_e0 ? h->r_end0 : h->epoch_end;
}

uint64_t stk__loader_rest_end(const stk_loader *h, uint64_t epoch, uint64_t base)
{
    if (!base && !(h->sw_rest && epoch == h->sw_rest_epoch))
        return h->epoch_end;
    stk__plan p;
    stk__loader_plan(h, &p, epoch);
    stk__plan_resume(&p, base);
    return h->drop_last ? p.per_rank / h->bs * h->bs : p.per_rank;
}

void stk__loader_geom(const stk_loader *h, uint64_t k, uint64_t *epoch, uint64_t *first, uint32_t *size)
{
    uint64_t e, f, end;
    if (k < h->r_nb0) {
        e = h->r_e0;
        f = h->r_s0 + k * h->bs;
        end = h->r_end0;
    } else {
        uint64_t k2 = k - h->r_nb0;
        e = h->r_e0 + 1 + k2 / h->bpe;
        f = (k2 % h->bpe) * h->bs;
        end = h->epoch_end;
    }
    uint64_t left = end - f;
    *epoch = e;
    *first = f;
    *size = (uint32_t)(left < h->bs ? left : h->bs);
}

/* Run batch holding sample POS of EPOCH. */
static uint64_t run_batch_of(const stk_loader *h, uint64_t epoch, uint64_t pos)
{
    if (epoch == h->r_e0)
        return (pos - h->r_s0) / h->bs;
    return h->r_nb0 + (epoch - h->r_e0 - 1) * h->bpe + pos / h->bs;
}

static int have_batch(const stk_loader *h, uint64_t k) { return k < h->r_nb0 || h->bpe > 0; }

/* Point the WORK cursor at the start of run batch K (h->mu held). */
static void work_cursor(stk_loader *h, uint64_t k)
{
    h->w_k = k;
    if (!have_batch(h, k))
        return;
    uint64_t e, f;
    uint32_t size;
    stk__loader_geom(h, k, &e, &f, &size);
    if (k == 0 || e != h->w_epoch) {
        stk__loader_plan(h, &h->w_plan, e);
        if (e == h->r_e0 && h->r_base)
            stk__plan_resume(&h->w_plan, h->r_base);
    }
    h->w_epoch = e;
    h->w_pos = f;
    h->w_bend = f + size;
}

/* ---- reader callbacks ---------------------------------------------------------------------- */

static int work_fn(void *user, uint64_t *pos, uint64_t *index, uint64_t *epoch)
{
    stk_loader *h = user;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        if (h->halting) {
            pthread_mutex_unlock(&h->mu);
            return 0;
        }
        if (have_batch(h, h->w_k) && h->slots[h->w_k % h->K].seq == h->w_k &&
            h->w_epoch < h->gate_end) {
            if (!h->streaming)
                break;
            if (h->pipe_status) { /* the fetch thread failed: the consumer gets its error */
                pthread_mutex_unlock(&h->mu);
                return 0;
            }
            if (stk__loader_stream_gate(h, stk__loader_record_at(
                    h, stk__plan_index(&h->w_plan, h->w_pos))))
                break;
        }
        pthread_cond_wait(&h->space_cv, &h->mu);
    }
    stk__slot *s = &h->slots[h->w_k % h->K];
    if (!s->started) {
        uint64_t e, f;
        uint32_t size;
        stk__loader_geom(h, h->w_k, &e, &f, &size);
        s->epoch = e;
        s->first = f;
        s->size = size;
        s->number = f / h->bs;
        s->done = 0;
        s->fail_status = 0;
        s->fail_i = UINT32_MAX;
        s->fail_msg[0] = '\0';
        atomic_store(&s->remaining, size);
        atomic_store(&s->bad, 0);
        stk__bad_reset(s);
        s->started = 1;
    }
    *pos = h->w_pos;
    *epoch = h->w_epoch;
    *index = stk__loader_record_at(h, stk__plan_index(&h->w_plan, h->w_pos));
    if (h->streaming)
        stk__loader_stream_out(h, *epoch, *pos, *index);
    if (++h->w_pos == h->w_bend)
        work_cursor(h, h->w_k + 1);
    pthread_mutex_unlock(&h->mu);
    return 1;
}

static int sink_fn(void *user, stk__read *rd)
{
    stk_loader *h = user;
    /* the reader counts the time spent here as its blocked time */
    return stk__queue_push(&h->dq, rd, NULL);
}

/* ---- decode workers ------------------------------------------------------------------------ */

static void convert(const stk_loader *h, const uint8_t *src, void *dst)
{
    if (h->lut)
        stk__convert_sample_lut(src, h->aug.out_h, h->aug.out_w, h->out_dtype, h->out_layout, h->lut, dst);
    else
        stk__convert_sample(src, h->aug.out_h, h->aug.out_w, h->out_dtype, h->out_layout, h->normalize,
                            h->mean, h->std, dst);
}

/* What keys RD's random draws besides (seed, epoch): its record index, or with STK_P_DRAW_KEY
 * B >= 0 the number B + its position in this rank's epoch (a record listed twice draws twice) */
static uint64_t draw_key(const stk_loader *h, const stk__read *rd)
{
    return h->draw_key < 0 ? rd->index : (uint64_t)h->draw_key + rd->pos;
}

/* RandomErasing (torchvision's, or timm's with its box count and modes) on the delivered sample
 * at DST (host batches): each box in turn, filled with STK_P_ERASE_VALUE, a normal per element
 * (value='random', timm's 'pixel') or a normal per channel (timm's 'rand') */
static void erase(const stk_loader *h, const stk__read *rd, void *dst)
{
    stk__erase_box b[STK__ERASE_MAX_COUNT];
    stk__rng r;
    int n = stk__erase_boxes(&h->erase, h->seed, rd->epoch, draw_key(h, rd), h->aug.out_h, h->aug.out_w, b, &r);
    for (int i = 0; i < n; i++) {
        float v[3];
        const float *value = h->erase_value;
        if (h->erase_random == STK_ERASE_RANDOM_CHANNEL) {
            stk__erase_channel_values(&r, v);
            value = v;
        }
        stk__erase_sample(dst, h->aug.out_h, h->aug.out_w, h->out_dtype, h->out_layout, b[i].y, b[i].x, b[i].h,
                          b[i].w, value, h->erase_random == STK_ERASE_RANDOM_PIXEL ? &r : NULL);
    }
}

/* Substitute (and convert) the bad sample at DST. */
static void substitute(stk_loader *h, stk__worker *w, uint8_t *dst)
{
    if (!dst)
        return;
    if (h->direct_out) {
        stk__substitute(&h->aug, dst);
    } else {
        stk__substitute(&h->aug, w->scratch);
        convert(h, w->scratch, dst);
    }
}

static void strict_fail(stk_loader *h, stk__slot *s, uint32_t i, const stk__read *rd, int status,
                        const char *reason)
{
    char where[256];
    if (stk_dataset_record_name(h->ds, rd->index, where, sizeof where) != STK_OK)
        snprintf(where, sizeof where, "record %llu", (unsigned long long)rd->index);
    pthread_mutex_lock(&h->mu);
    if (!s->fail_status || i < s->fail_i) { /* the lowest sample wins: deterministic */
        s->fail_status = status;
        s->fail_i = i;
        fmt(s->fail_msg, sizeof s->fail_msg,
                 "strict mode: bad record %s (dataset index %llu, epoch %llu, batch %llu): %s: %s", where,
                 (unsigned long long)rd->index, (unsigned long long)rd->epoch,
                 (unsigned long long)s->number, stk_status_name(status),
                 reason && *reason ? reason : stk_strerror(status));
    }
    pthread_mutex_unlock(&h->mu);
}

/* Sample I's target in slot S: the dataset's row of record INDEX, or its multi-hot expansion. */
static void put_target(stk_loader *h, stk__slot *s, uint32_t i, uint64_t index)
{
    uint8_t *dst = s->targets + h->tout_row * i;
    const stk_dataset *ds = h->ds;
    if (h->tout.size == ds->tinfo.size && h->tout.dtype == ds->tinfo.dtype) {
        memcpy(dst, ds->targets + ds->trow * index, ds->trow);
        return;
    }
    float *hot = (float *)(void *)dst;
    memset(hot, 0, h->tout_row);
    for (uint32_t j = 0; j < ds->tinfo.size; j++) {
        int32_t c;
        memcpy(&c, ds->targets + ds->trow * index + 4 * (size_t)j, 4);
        if (c >= 0 && (uint32_t)c < h->tout.size)
            hot[c] = 1.0f;
    }
}

/* The augmentation, conversion and erasing of a decoded sample at O (the slot's DST, or the
 * worker's scratch converted into DST), keyed by RD's epoch and draw key (draw_key). */
static void finish(stk__worker *w, const stk__read *rd, uint8_t *o, uint8_t *dst)
{
    stk_loader *h = w->h;
    /* the augmentation's time (stats augment_s), without the convert between its two parts; no
     * clock is read when there is no augmentation */
    int erasing = h->erase.p > 0 && dst;
    uint64_t aug_ns = 0;
    if (h->aug_on) {
        uint64_t t0 = stk__now_ns();
        stk__augprog_apply(&h->augprog, &h->augp, h->seed, rd->epoch, draw_key(h, rd), o, h->aug.out_h, h->aug.out_w,
                           w->aug_scratch, w->aug_tmp);
        aug_ns = stk__now_ns() - t0;
    }
    if (!h->direct_out)
        convert(h, w->scratch, dst);
    if (erasing) {
        uint64_t t0 = stk__now_ns();
        erase(h, rd, dst);
        aug_ns += stk__now_ns() - t0;
    }
    if (h->aug_on || erasing) {
        stk__clock_add(&h->tel.aug_ns, aug_ns);
        atomic_fetch_add(&h->tel.aug_items, 1);
    }
}

static void process(stk__worker *w, stk__read *rd)
{
    stk_loader *h = w->h;
    uint64_t k = run_batch_of(h, rd->epoch, rd->pos);
    stk__slot *s = &h->slots[k % h->K];
    uint32_t i = (uint32_t)(rd->pos - s->first);
    uint8_t *dst = s->images ? s->images + (size_t)i * h->host_sample_bytes : NULL;
    uint8_t *o = h->stage == STK_STAGE_READ ? NULL : h->direct_out ? dst : w->scratch;
    int status = rd->status;
    const char *reason = rd->detail;
    int32_t label = rd->label;
    uint64_t target_of = rd->index; /* the record whose label and target the sample carries */
    if (status != STK_OK) {
        if (label < 0)
            label = stk__dataset_static_label(h->ds, rd->index);
        atomic_fetch_add(status == STK_E_CRC ? &h->tel.crc_errors : &h->tel.io_errors, 1);
    } else if (o) {
        int warn = 0;
        w->err[0] = '\0';
        status = stk__process_sample(w->ctx, &h->aug, h->seed, rd->epoch, draw_key(h, rd), rd->data, rd->len,
                                     o, &warn, w->err);
        if (warn > 0)
            atomic_fetch_add(&h->tel.decode_warnings, (uint64_t)warn);
        if (status != STK_OK) {
            reason = w->err;
            atomic_fetch_add(&h->tel.decode_errors, 1);
        } else {
            finish(w, rd, o, dst);
        }
    }
    if (status != STK_OK) {
        s->substituted[i] = 1;
        atomic_fetch_add(&s->bad, 1);
        atomic_fetch_add(&h->tel.substituted, 1);
        atomic_fetch_add(&h->tel.dec_clock.errors, 1);
        char why[STK__ERRLEN];
        fmt(why, sizeof why, "%s: %s", stk_status_name(status),
                 reason && *reason ? reason : stk_strerror(status));
        int sys_errno = rd->status != STK_OK ? rd->sys_errno : 0;
        if (h->aug.strict) {
            stk__errlist_add(&h->errs, h->ds, rd->index, rd->epoch, status, sys_errno, why);
            substitute(h, w, dst);
            strict_fail(h, s, i, rd, status, reason);
        } else {
            /* another good record of the epoch, with its own label and target; indices[i] stays
             * the position's record, so the order is the epoch's. The read-only stage delivers
             * no image: nothing to replace (and `stoker verify` reads each record once). */
            uint64_t j = 0;
            int32_t lj = -1;
            int found = !o ? -1 : stk__bad_draw(h, w, rd, o, &j, &lj) == STK_OK;
            if (found == 1) {
                if (o)
                    finish(w, rd, o, dst);
                label = lj;
                target_of = j;
            } else if (!found) {
                substitute(h, w, dst); /* the batch fails: defined bytes all the same */
            }
            stk__bad_note(h, s, i, rd, status, why, j, found);
            stk__errlist_add(&h->errs, h->ds, rd->index, rd->epoch, status, sys_errno, why);
        }
    } else {
        s->substituted[i] = 0;
    }
    s->indices[i] = rd->index;
    s->labels[i] = label;
    if (s->targets)
        put_target(h, s, i, target_of);
    s->payload[i] = rd->status == STK_OK ? rd->len : 0;
    atomic_fetch_add(&h->tel.dec_clock.items, 1);
    atomic_fetch_add(&h->tel.dec_clock.bytes, rd->status == STK_OK ? rd->len : 0);
    if (atomic_fetch_sub(&s->remaining, 1) == 1) {
        pthread_mutex_lock(&h->mu);
        s->done = 1;
        pthread_cond_broadcast(&h->ready_cv);
        pthread_cond_broadcast(&h->stage_cv);
        pthread_mutex_unlock(&h->mu);
    }
}

static void *worker_main(void *arg)
{
    stk__worker *w = arg;
    stk_loader *h = w->h;
    char name[16];
    snprintf(name, sizeof name, "stk-dec%d", (int)(w - h->workers) % 1000);
    pthread_setname_np(pthread_self(), name);
    for (;;) {
        void *item = NULL;
        uint64_t starved = 0;
        int rc = stk__queue_pop(&h->dq, &item, &starved);
        stk__clock_add(&h->tel.dec_clock.starved_ns, starved);
        if (rc != STK_OK)
            break;
        stk__read *rd = item;
        if (!atomic_load(&h->halt_flag)) {
            uint64_t t0 = stk__now_ns();
            process(w, rd);
            stk__clock_add(&h->tel.dec_clock.busy_ns, stk__now_ns() - t0);
        }
        if (h->streaming) /* its shard stays attached until now: a substitute is read from it */
            stk__loader_stream_back(h, rd->index);
        stk__reader_release(h->reader, rd);
    }
    return NULL;
}

/* ---- stager thread ------------------------------------------------------------------------- */

/*
 * Device path. The stager thread takes done host batches in order, waits until device buffer
 * k % nbuf is free for k (its previous batch released by the consumer), submits the H2D copy and
 * conversion, waits until the copy out of the host slot is complete (not the conversion), copies
 * the small per-sample arrays beside the device buffer, frees the host slot and marks the device
 * batch ready. The slot is thus free again as soon as its bytes are on the GPU.
 */

static void *stager_main(void *arg)
{
    stk_loader *h = arg;
    uint64_t j = 0;
    pthread_setname_np(pthread_self(), "stk-stage");
    pthread_mutex_lock(&h->mu);
    for (;;) {
        stk__slot *s = &h->slots[j % h->K];
        stk__devbuf *d = &h->devs[j % (uint64_t)h->nbuf];
        uint64_t t0 = stk__now_ns();
        while (!h->halting && !(s->seq == j && s->done))
            pthread_cond_wait(&h->stage_cv, &h->mu);
        uint64_t t1 = stk__now_ns();
        stk__clock_add(&h->tel.stg_clock.starved_ns, t1 - t0);
        while (!h->halting && !(d->seq == j && !d->ready && !d->held))
            pthread_cond_wait(&h->stage_cv, &h->mu);
        stk__clock_add(&h->tel.stg_clock.blocked_ns, stk__now_ns() - t1);
        if (h->halting)
            break;
        d->epoch = s->epoch;
        d->number = s->number;
        d->first = s->first;
        d->size = s->size;
        d->bad = atomic_load(&s->bad);
        d->fail_status = s->fail_status;
        memcpy(d->fail_msg, s->fail_msg, sizeof d->fail_msg);
        d->badi = s->badi;
        for (int c = 0; c < STK__BADK; c++)
            d->badi.k[c] = atomic_load(&s->badk[c]);
        memcpy(d->labels, s->labels, s->size * sizeof(*d->labels));
        if (d->targets)
            memcpy(d->targets, s->targets, s->size * h->tout_row);
        memcpy(d->indices, s->indices, s->size * sizeof(*d->indices));
        memcpy(d->substituted, s->substituted, s->size * sizeof(*d->substituted));
        memcpy(d->payload, s->payload, s->size * sizeof(*d->payload));
        int fail = s->fail_status;
        uint32_t n = s->size;
        pthread_mutex_unlock(&h->mu);

        int rc = STK_OK;
        char err[STK__ERRLEN] = "";
        uint64_t t2 = stk__now_ns();
        if (!fail) {
            int buf = (int)(j % (uint64_t)h->nbuf);
            rc = stk__stager_submit(h->stager, buf, s->images, n, err);
            if (rc == STK_OK)
                rc = stk__stager_wait_copied(h->stager, buf, err);
        }
        stk__clock_add(&h->tel.stg_clock.busy_ns, stk__now_ns() - t2);

        pthread_mutex_lock(&h->mu);
        if (rc != STK_OK) {
            h->pipe_status = rc;
            fmt(h->pipe_msg, sizeof h->pipe_msg, "CUDA stager, batch %llu of epoch %llu: %s",
                     (unsigned long long)d->number, (unsigned long long)d->epoch,
                     *err ? err : stk_strerror(rc));
            pthread_cond_broadcast(&h->ready_cv);
            break;
        }
        atomic_fetch_add(&h->tel.stg_clock.items, 1);
        atomic_fetch_add(&h->tel.stg_clock.bytes, (uint64_t)n * h->host_sample_bytes);
        s->done = 0;
        s->started = 0;
        s->seq += h->K;
        d->ready = 1;
        pthread_cond_broadcast(&h->space_cv);
        pthread_cond_broadcast(&h->ready_cv);
        j++;
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- launch / halt ------------------------------------------------------------------------- */

/*
 * Halt. Set `halting` (WORK returns 0, the stager leaves its wait), close the decode queue (SINK
 * returns STK_E_CANCELLED so the reader recycles the buffer; workers drop what is still queued,
 * returning every buffer), join the workers, stop and destroy the reader, join the stager. The
 * ring's memory stays; launch resets the slot sequence numbers for the new run.
 */

static void accumulate_reader(stk_loader *h)
{
    if (!h->reader)
        return;
    stk_stage_stats rs;
    stk__clock_snapshot(stk__reader_clock(h->reader), &rs);
    stk__reader_info info;
    stk__reader_get_info(h->reader, &info);
    h->tel.read_acc.busy_s += rs.busy_s;
    h->tel.read_acc.starved_s += rs.starved_s;
    h->tel.read_acc.blocked_s += rs.blocked_s;
    h->tel.read_acc.items += rs.items;
    h->tel.read_acc.bytes += rs.bytes;
    h->tel.read_acc.errors += rs.errors;
    h->tel.read_acc.threads = rs.threads;
    h->tel.read_disk_acc += info.disk_bytes;
    if (info.inflight_max > h->tel.inflight_max_acc)
        h->tel.inflight_max_acc = info.inflight_max;
    h->tel.last_rinfo = info;
    h->tel.last_rinfo.inflight_now = 0;
    h->tel.have_rinfo = 1;
}

void stk__loader_halt(stk_loader *h)
{
    pthread_mutex_lock(&h->mu);
    h->halting = 1;
    atomic_store(&h->halt_flag, 1);
    pthread_cond_broadcast(&h->space_cv);
    pthread_cond_broadcast(&h->ready_cv);
    pthread_cond_broadcast(&h->stage_cv);
    pthread_mutex_unlock(&h->mu);
    if (h->dq_ok)
        stk__queue_close(&h->dq);
    for (int i = 0; h->workers && i < h->workers_n; i++) {
        if (h->workers[i].running) {
            pthread_join(h->workers[i].th, NULL);
            h->workers[i].running = 0;
        }
    }
    stk__loader_stream_halt(h); /* before the reader's info reads the shards it attaches */
    if (h->reader) {
        if (h->reader_started)
            stk__reader_stop(h->reader);
        h->reader_started = 0;
        pthread_mutex_lock(&h->stats_mu);
        accumulate_reader(h);
        stk__reader *r = h->reader;
        h->reader = NULL;
        pthread_mutex_unlock(&h->stats_mu);
        stk__reader_destroy(r);
    }
    if (h->stager_running) {
        pthread_join(h->stager_th, NULL);
        h->stager_running = 0;
    }
    pthread_mutex_lock(&h->mu);
    h->running = 0;
    pthread_mutex_unlock(&h->mu);
}

int stk__loader_launch(stk_loader *h, uint64_t epoch, uint64_t sample)
{
    stk__loader_rest_drop(h); /* a start begins where STK_P_EPOCH says, whole */
    return stk__loader_launch_at(h, epoch, sample, 0);
}

int stk__loader_launch_at(stk_loader *h, uint64_t epoch, uint64_t sample, uint64_t base)
{
    uint64_t end0 = stk__loader_rest_end(h, epoch, base);
    pthread_mutex_lock(&h->mu);
    h->halting = 0;
    atomic_store(&h->halt_flag, 0);
    h->r_e0 = epoch;
    h->r_s0 = sample;
    h->r_base = base;
    h->r_end0 = end0;
    /* a resizable loader fixes an epoch's size when the consumer asks for its first batch:
     * nothing of it is prefetched before */
    h->gate_end = !h->resizable ? UINT64_MAX : epoch;
    uint64_t left = end0 - sample;
    h->r_nb0 = h->drop_last ? left / h->bs : (left + h->bs - 1) / h->bs;
    for (uint32_t i = 0; i < h->K; i++) {
        stk__slot *s = &h->slots[i];
        s->seq = i;
        s->started = s->done = s->held = 0;
        s->fail_status = 0;
    }
    for (int i = 0; h->devs && i < h->nbuf; i++) {
        stk__devbuf *d = &h->devs[i];
        d->seq = (uint64_t)i;
        d->ready = d->held = 0;
        d->fail_status = 0;
    }
    h->held_host = h->held_dev = 0;
    h->c_k = 0;
    h->fw_k = UINT64_MAX; /* no batch waited for yet in this run (stats fetch_max_wait_us) */
    h->c_epoch = epoch;
    h->c_next = sample;
    atomic_store(&h->pos_epoch, epoch);
    atomic_store(&h->pos_next, sample);
    h->w_epoch = UINT64_MAX;
    work_cursor(h, 0);
    h->running = 1;
    pthread_mutex_unlock(&h->mu);
    stk__queue_reset(&h->dq);
    if (!have_batch(h, 0))
        return STK_OK; /* no batch in any epoch (drop_last with fewer samples than a batch) */

    char err[STK__ERRLEN] = "";
    stk__reader *r = NULL;
    int rc = stk__reader_create(&r, h->ds, &h->rcfg, err);
    if (rc != STK_OK) {
        stk__err(h->err, rc, "cannot set up the reader: %s", *err ? err : stk_strerror(rc));
        stk__loader_halt(h);
        return rc;
    }
    pthread_mutex_lock(&h->stats_mu);
    h->reader = r;
    pthread_mutex_unlock(&h->stats_mu);
    atomic_store(&h->tel.dec_clock.threads, (uint32_t)h->workers_n);
    for (int i = 0; i < h->workers_n; i++) {
        int e = pthread_create(&h->workers[i].th, NULL, worker_main, &h->workers[i]);
        if (e != 0) {
            rc = stk__err(h->err, -e, "cannot start decode worker %d", i);
            stk__loader_halt(h);
            return rc;
        }
        h->workers[i].running = 1;
    }
    if (h->device_path) {
        atomic_store(&h->tel.stg_clock.threads, 1);
        int e = pthread_create(&h->stager_th, NULL, stager_main, h);
        if (e != 0) {
            rc = stk__err(h->err, -e, "cannot start the stager thread");
            stk__loader_halt(h);
            return rc;
        }
        h->stager_running = 1;
    }
    if ((rc = stk__loader_stream_launch(h)) != STK_OK) {
        stk__loader_halt(h);
        return rc;
    }
    err[0] = '\0';
    rc = stk__reader_start(r, work_fn, sink_fn, h, err);
    if (rc != STK_OK) {
        stk__err(h->err, rc, "cannot start the reader: %s", *err ? err : stk_strerror(rc));
        stk__loader_halt(h);
        return rc;
    }
    h->reader_started = 1;
    return STK_OK;
}
