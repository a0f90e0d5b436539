/* SPDX-License-Identifier: MIT */
/*
 * loader_bad.c — bad records are never silent and never poison a step.
 *
 * A bad record (corrupt, truncated, empty, not a JPEG, over the pixel limit, CRC mismatch,
 * unreadable) is replaced by another good record of the epoch's record set (of its own shard on
 * a streamed s3:// dataset, the one shard sure to be attached: loader_stream.c), drawn from the key
 * (seed, epoch, bad record's index) with its own Philox counter range: a pure function of the
 * sample, so the batch is the same for any worker count and after a seek or resume. The worker
 * reads the substitute itself (stk_dataset_read, synchronous: bad records are rare), decodes and
 * augments it with the bad record's crop key, and delivers it with its own label, target and
 * index. A drawn record that is bad too is drawn again (STK_SUBSTITUTE_TRIES); none good fails
 * the batch.
 *
 * Workers count each batch's bad records per reason class and keep the text of the lowest bad
 * sample; the consumer, as stk_loader_next hands a batch out, tallies them into the epoch, logs
 * the loader's first bad record and each epoch's summary (in delivery order, so the messages
 * do not depend on the worker count), and checks STK_P_MAX_BAD_FRACTION. Messages go out after
 * the loader's mutex is released (stk_loader_set_log).
 */
#include "loader_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUBST_CTR0 0xD0000000u /* the substitute draws: their own counter range of the key */

static const char *const class_name[STK__BADK] = {
    "not a JPEG", "cannot be decoded", "over the pixel limit (STK_P_MAX_PIXELS)", "CRC32C mismatch",
    "truncated", "empty", "corrupt record", "unreadable",
};
static const int class_status[STK__BADK] = {
    STK_E_NOT_JPEG, STK_E_DECODE, STK_E_TOO_LARGE, STK_E_CRC, STK_E_TRUNCATED, STK_E_EMPTY, STK_E_CORRUPT, STK_E_IO,
};

/* snprintf that may truncate (messages are cut to their buffer on purpose). */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

int stk__bad_class(int status)
{
    switch (status) {
    case STK_E_NOT_JPEG: return STK__BAD_NOT_JPEG;
    case STK_E_DECODE: return STK__BAD_DECODE;
    case STK_E_TOO_LARGE: return STK__BAD_TOO_LARGE;
    case STK_E_CRC: return STK__BAD_CRC;
    case STK_E_TRUNCATED: return STK__BAD_TRUNCATED;
    case STK_E_EMPTY: return STK__BAD_EMPTY;
    case STK_E_CORRUPT:
    case STK_E_FORMAT: return STK__BAD_CORRUPT;
    default: return STK__BAD_READ;
    }
}

void stk__bad_reset(stk__slot *s)
{
    for (int c = 0; c < STK__BADK; c++)
        atomic_store(&s->badk[c], 0);
    memset(s->badi.k, 0, sizeof s->badi.k);
    s->badi.first_i = UINT32_MAX;
    s->badi.nosub = 0;
    s->badi.first_status = 0;
    s->badi.first[0] = '\0';
}

void stk__bad_note(stk_loader *h, stk__slot *s, uint32_t i, const stk__read *rd, int status,
                   const char *reason, uint64_t sub_index, int found)
{
    atomic_fetch_add(&s->badk[stk__bad_class(status)], 1);
    char where[256];
    if (stk_dataset_record_name(h->ds, rd->index, where, sizeof where) != STK_OK)
        fmt(where, sizeof where, "record %llu", (unsigned long long)rd->index);
    pthread_mutex_lock(&h->mu);
    if (found == 0)
        s->badi.nosub = 1;
    if (i < s->badi.first_i) { /* the lowest sample: the same whatever the worker count */
        s->badi.first_i = i;
        s->badi.first_status = status;
        char sub[96];
        if (found > 0)
            fmt(sub, sizeof sub, "replaced by record %llu", (unsigned long long)sub_index);
        else if (found < 0)
            fmt(sub, sizeof sub, "not replaced (read-only stage: no image)");
        else
            fmt(sub, sizeof sub, "no good record found to replace it in %d draws", STK_SUBSTITUTE_TRIES);
        fmt(s->badi.first, sizeof s->badi.first, "bad record %s (dataset index %llu, epoch %llu): %s; %s", where,
            (unsigned long long)rd->index, (unsigned long long)rd->epoch, reason, sub);
    }
    pthread_mutex_unlock(&h->mu);
}

/* Read record J into the worker's buffer (grown to fit): STK_OK with *LEN and *INFO. */
static int read_record(stk_loader *h, stk__worker *w, uint64_t j, size_t *len, stk_record_info *info)
{
    pthread_mutex_lock(&h->sub_mu);
    int rc = stk_dataset_read(h->ds, j, w->sub_buf, w->sub_cap, len, info);
    if (rc == STK_E_RANGE && *len > w->sub_cap && *len <= UINT32_MAX) {
        size_t cap = *len < 65536 ? 65536 : *len;
        uint8_t *b = realloc(w->sub_buf, cap);
        if (b) {
            w->sub_buf = b;
            w->sub_cap = cap;
            rc = stk_dataset_read(h->ds, j, w->sub_buf, w->sub_cap, len, info);
        } else {
            rc = STK_E_NOMEM;
        }
    }
    pthread_mutex_unlock(&h->sub_mu);
    return rc;
}

/* The records a substitute for bad record INDEX is drawn from: the epoch's record set (the
 * dataset, or the subset's list), or on a streamed dataset its shard's (loader_stream.c). */
static stk__pool substitute_pool(const stk_loader *h, uint64_t index)
{
    if (h->streaming)
        return stk__loader_stream_pool(h, index);
    return (stk__pool){h->subset, 0, h->subset ? h->nsubset : h->n};
}

int stk__bad_draw(stk_loader *h, stk__worker *w, const stk__read *rd, uint8_t *o, uint64_t *index,
                  int32_t *label)
{
    const stk__pool pool = substitute_pool(h, rd->index);
    stk__rng g;
    stk__rng_init(&g, h->seed, rd->epoch, rd->index);
    g.ctr[0] = SUBST_CTR0;
    int last = STK_E_EMPTYSET;
    for (int t = 0; t < STK_SUBSTITUTE_TRIES && pool.n > 0; t++) {
        uint64_t u = stk__rng_below(&g, pool.n);
        uint64_t j = pool.list ? pool.list[u] : pool.base + u;
        if (j == rd->index)
            continue;
        size_t n = 0;
        stk_record_info info;
        int rc = read_record(h, w, j, &n, &info);
        if (rc == STK_OK && n == 0)
            rc = STK_E_EMPTY;
        if (rc == STK_OK && o) {
            int warn = 0;
            char err[STK__ERRLEN] = "";
            rc = stk__process_sample(w->ctx, &h->aug, h->seed, rd->epoch, rd->index, w->sub_buf, n, o, &warn,
                                     err);
            if (warn > 0)
                atomic_fetch_add(&h->tel.decode_warnings, (uint64_t)warn);
        }
        if (rc != STK_OK) {
            last = rc;
            continue;
        }
        *index = j;
        *label = info.label;
        return STK_OK;
    }
    return last;
}

/* "32 not a JPEG, 2 CRC32C mismatch" (the three commonest), and the commonest class in *TOP. */
static void reasons(const uint64_t *k, char *buf, size_t cap, int *top)
{
    int order[STK__BADK];
    for (int c = 0; c < STK__BADK; c++)
        order[c] = c;
    for (int a = 1; a < STK__BADK; a++) /* insertion sort, by count then class */
        for (int b = a; b > 0 && k[order[b]] > k[order[b - 1]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    *top = order[0];
    size_t at = 0;
    buf[0] = '\0';
    for (int r = 0; r < 3 && k[order[r]] && at < cap; r++) {
        int n = snprintf(buf + at, cap - at, "%s%llu %s", r ? ", " : "", (unsigned long long)k[order[r]],
                         class_name[order[r]]);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

static const char *hint(int top)
{
    return top == STK__BAD_NOT_JPEG
               ? ": the loader reads JPEG, PNG, WebP, GIF, BMP, TIFF, PPM; pack the folder with "
                 "`stoker pack` (it lists what it cannot read) or use stoker.DataLoader"
               : "";
}

static void queue(stk_loader *h, const char *msg)
{
    if (h->nlog < 2)
        fmt(h->logq[h->nlog++], sizeof h->logq[0], "%s", msg);
}

int stk__bad_account(stk_loader *h, uint64_t epoch, uint64_t first, uint32_t size, const stk__badinfo *b)
{
    if (epoch != h->t_epoch) {
        h->t_epoch = epoch;
        h->t_seen = h->t_bad = 0;
        memset(h->t_k, 0, sizeof h->t_k);
    }
    uint32_t nbad = 0;
    for (int c = 0; c < STK__BADK; c++) {
        nbad += b->k[c];
        h->t_k[c] += b->k[c];
    }
    h->t_seen += size;
    h->t_bad += nbad;
    int last = first + size >= stk__loader_epoch_end(h, epoch);
    char text[STK__ERRLEN + 128];
    if (nbad && !h->warned) {
        h->warned = 1;
        fmt(text, sizeof text, "%s (later bad records are replaced the same way, listed by "
            "stk_loader_error_get / stats()['errors'] and summed up at the end of each epoch)", b->first);
        queue(h, text);
    }
    if (!h->t_bad)
        return STK_OK;
    char why[256];
    int top;
    reasons(h->t_k, why, sizeof why, &top);
    if (b->nosub)
        return stk__err(h->err, b->first_status ? b->first_status : class_status[top],
                        "%s; %llu of %llu records of epoch %llu so far are bad (%s)%s", b->first,
                        (unsigned long long)h->t_bad, (unsigned long long)h->t_seen, (unsigned long long)epoch,
                        why, hint(top));
    if ((last || h->t_seen >= STK_BAD_CHECK_MIN) && (double)h->t_bad > h->max_bad * (double)h->t_seen)
        return stk__err(h->err, class_status[top],
                        "%llu of %llu records of epoch %llu are bad (%s), above STK_P_MAX_BAD_FRACTION %g "
                        "(max_bad_fraction)%s", (unsigned long long)h->t_bad, (unsigned long long)h->t_seen,
                        (unsigned long long)epoch, why, h->max_bad, hint(top));
    if (last) {
        fmt(text, sizeof text, "epoch %llu: %llu of %llu records were bad and replaced by good ones (%s)",
            (unsigned long long)epoch, (unsigned long long)h->t_bad, (unsigned long long)h->t_seen, why);
        queue(h, text);
    }
    return STK_OK;
}

void stk__bad_flush(stk_log_fn fn, void *user, int n, char msgs[][STK__ERRLEN + 256])
{
    for (int i = 0; i < n; i++) {
        if (fn)
            fn(user, STK_LOG_WARNING, msgs[i]);
        else
            fprintf(stderr, "stoker: %s\n", msgs[i]);
    }
}

int stk_loader_set_log(stk_loader *h, stk_log_fn fn, void *user)
{
    if (!h)
        return STK_E_INVALID;
    pthread_mutex_lock(&h->mu);
    int started = h->state == STK__LS_STARTED;
    if (!started) {
        h->log_fn = fn;
        h->log_user = user;
    }
    pthread_mutex_unlock(&h->mu);
    if (started)
        return stk__err(h->err, STK_E_STATE, "stk_loader_set_log: before stk_loader_start (or after stop)");
    return STK_OK;
}
