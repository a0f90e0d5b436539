/* SPDX-License-Identifier: MIT */
/*
 * test_loader_substitute.c — a bad record's substitute is a pure function of (seed, epoch,
 * record) (since 0.5). Train mode, shuffled, 6 of 48 records bad: the epoch's indices, labels,
 * substituted flags and pixels are the same with 1 and 4 decode workers, and a loader seeked to
 * the middle delivers the same rest; every substitute carries a good record's label (>= 0) and
 * is not a grey image. With every record bad there is nothing to substitute: the first batch
 * fails naming the record and the reason, also for a one-record dataset.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "test_loader_util.h"

#define N 48
#define BS 8

static const int BAD[] = {1, 7, 8, 20, 33, 47};

static stk_loader *mk(const char *path, int workers)
{
    stk_loader *h = tl_loader(path, BS, workers);
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 0.2));
    T_OK(stk_loader_set(h, STK_P_EPOCH, 3));
    return h;
}

static void set_bad(tl_data *d, size_t k)
{
    free(d->payload[k]);
    d->payload[k] = (uint8_t *)strdup("plain text, not an image");
    d->len[k] = strlen((char *)d->payload[k]);
}

static void same(const tl_epoch *a, size_t off, const tl_epoch *b, const char *what)
{
    for (size_t i = 0; i < b->n; i++) {
        T_CHECK(a->index[off + i] == b->index[i] && a->label[off + i] == b->label[i] &&
                    a->subst[off + i] == b->subst[i],
                "%s: sample %zu", what, off + i);
        T_CHECK(memcmp(a->images + (off + i) * a->sample_bytes, b->images + i * b->sample_bytes, a->sample_bytes) == 0,
                "%s: pixels of sample %zu", what, off + i);
    }
}

int main(void)
{
    tl_data d;
    tl_data_make(&d, "substitute", N);
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++)
        set_bad(&d, (size_t)BAD[k]);
    tl_write(&d);

    tl_epoch one, four, rest;
    stk_loader *h = mk(d.path, 1);
    T_OK(stk_loader_start(h));
    T_CHECK(tl_run(h, &one, -1) == STK_END && one.n == N, "1 worker: %s", stk_loader_last_error(h));
    stk_loader_destroy(h);
    h = mk(d.path, 4);
    T_OK(stk_loader_start(h));
    T_CHECK(tl_run(h, &four, -1) == STK_END && four.n == N, "4 workers: %s", stk_loader_last_error(h));
    stk_loader_destroy(h);
    T_CHECK(one.n == four.n, "same count");
    same(&one, 0, &four, "1 vs 4 workers");
    h = mk(d.path, 3);
    T_OK(stk_loader_start(h));
    T_OK(stk_loader_seek(h, 3, N / 2));
    T_CHECK(tl_run(h, &rest, -1) == STK_END && rest.n == N / 2, "after a seek: %s", stk_loader_last_error(h));
    stk_loader_destroy(h);
    same(&one, N / 2, &rest, "seek to the middle");

    size_t nsub = 0;
    for (size_t i = 0; i < one.n; i++) {
        int bad = 0;
        for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++)
            bad |= one.index[i] == (uint64_t)BAD[k];
        T_CHECK(one.subst[i] == bad, "substituted[%zu] = %d for record %llu", i, one.subst[i],
                (unsigned long long)one.index[i]);
        if (!bad)
            continue;
        nsub++;
        T_CHECK(one.label[i] >= 0 && one.label[i] < 5, "substitute's label %d", one.label[i]);
        size_t grey = 0;
        for (size_t k = 0; k < one.sample_bytes; k++)
            grey += one.images[i * one.sample_bytes + k] == 128;
        T_CHECK(grey < one.sample_bytes, "sample %zu is not grey", i);
    }
    T_CHECK(nsub == sizeof BAD / sizeof BAD[0], "%zu substituted", nsub);
    tl_epoch_free(&one);
    tl_epoch_free(&four);
    tl_epoch_free(&rest);
    tl_data_free(&d);

    /* every record bad: nothing to substitute */
    for (size_t n = 1; n <= 16; n += 15) {
        tl_data a;
        tl_data_make(&a, "substitute-none", n);
        for (size_t k = 0; k < n; k++)
            set_bad(&a, k);
        tl_write(&a);
        h = mk(a.path, 2);
        T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0));
        T_OK(stk_loader_start(h));
        const stk_batch *b;
        int rc = stk_loader_next(h, NULL, -1, &b);
        const char *msg = stk_loader_last_error(h);
        T_CHECK(rc == STK_E_NOT_JPEG, "%zu bad records: %s: %s", n, stk_status_name(rc), msg);
        T_CHECK(strstr(msg, "bad record shard-00000.lmdb key ") && strstr(msg, "no good record found to replace it") &&
                    strstr(msg, "not a JPEG") && strstr(msg, "stoker pack"),
                "message: %s", msg);
        stk_loader_destroy(h);
        tl_data_free(&a);
    }
    printf("test_loader_substitute: ok\n");
    return 0;
}
