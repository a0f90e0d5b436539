/* SPDX-License-Identifier: MIT */
/*
 * test_loader_bad_limit.c — STK_P_MAX_BAD_FRACTION (since 0.5). 1 bad record in 40 (2.5%):
 * with the default limit (1%) the epoch's first batches are delivered and the last one fails
 * (checked at the epoch's end: a short epoch), with the commonest reason's status and a message
 * naming the count, the reason and what to do; the failure is sticky until a seek; a limit of 5%
 * lets the epoch end. A long epoch (stk_loader_set_indices: 12000 samples cycling over the 40
 * records, an empty record among them, read-only stage) fails mid-epoch once STK_BAD_CHECK_MIN
 * samples were handed out, not at its end. A limit of 1 never fails, even with half the records
 * bad.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "test_loader_util.h"

#define N 40

static stk_loader *mk(const char *path, int bs, double limit)
{
    stk_loader *h = tl_loader(path, bs, 2);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    if (limit >= 0)
        T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, limit));
    return h;
}

static void quiet(void *user, int level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void set_bad(tl_data *d, size_t k, const char *payload)
{
    free(d->payload[k]);
    d->payload[k] = (uint8_t *)strdup(payload);
    d->len[k] = strlen(payload);
}

int main(void)
{
    stk_loader *h;
    double def = 0;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_get(h, STK_P_MAX_BAD_FRACTION, &def));
    T_CHECK(def == 0.01, "default limit %g", def);
    stk_loader_destroy(h);

    tl_data d;
    tl_data_make(&d, "badlimit", N);
    set_bad(&d, 13, "plain text, not an image");
    tl_write(&d);

    /* default limit: the last batch of the epoch fails */
    h = mk(d.path, 8, -1);
    T_OK(stk_loader_set_log(h, quiet, NULL));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    int rc = tl_run(h, &e, -1);
    const char *msg = stk_loader_last_error(h);
    T_CHECK(rc == STK_E_NOT_JPEG, "the epoch fails with the commonest reason: %s: %s", stk_status_name(rc), msg);
    T_CHECK(e.n == 32, "4 of 5 batches delivered before (%zu samples)", e.n);
    T_CHECK(strstr(msg, "1 of 40 records of epoch 0 are bad (1 not a JPEG)") &&
                strstr(msg, "STK_P_MAX_BAD_FRACTION 0.01") && strstr(msg, "stoker pack"),
            "message: %s", msg);
    tl_epoch_free(&e);
    const stk_batch *b;
    T_CHECK(stk_loader_next(h, NULL, -1, &b) == STK_E_NOT_JPEG, "sticky");
    T_OK(stk_loader_seek(h, 1, 0));
    T_CHECK(stk_loader_next(h, NULL, -1, &b) == STK_OK, "a seek restarts: %s", stk_loader_last_error(h));
    T_OK(stk_loader_release(h, b, NULL));
    stk_loader_destroy(h);

    /* 5%: the epoch ends */
    h = mk(d.path, 8, 0.05);
    T_OK(stk_loader_set_log(h, quiet, NULL));
    T_OK(stk_loader_start(h));
    rc = tl_run(h, &e, -1);
    T_CHECK(rc == STK_END && e.n == N, "5%%: %s", stk_loader_last_error(h));
    tl_epoch_free(&e);
    stk_loader_destroy(h);

    /* a long epoch fails mid-way: 12000 samples over the 40 records, record 21 empty (2.5%) */
    tl_data l;
    tl_data_make(&l, "badlimit-long", N);
    set_bad(&l, 21, "");
    tl_write(&l);
    uint64_t *idx = malloc(12000 * sizeof *idx);
    for (size_t i = 0; i < 12000; i++)
        idx[i] = i % N;
    h = mk(l.path, 500, -1);
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_set_indices(h, idx, 12000));
    T_OK(stk_loader_set_log(h, quiet, NULL));
    T_OK(stk_loader_start(h));
    rc = tl_run(h, &e, -1);
    msg = stk_loader_last_error(h);
    T_CHECK(rc == STK_E_EMPTY, "the long epoch fails: %s: %s", stk_status_name(rc), msg);
    T_CHECK(e.n == STK_BAD_CHECK_MIN - 500, "it fails at the batch reaching %d samples (%zu delivered)",
            STK_BAD_CHECK_MIN, e.n);
    T_CHECK(strstr(msg, "250 of 10000 records of epoch 0 are bad (250 empty)"), "message: %s", msg);
    tl_epoch_free(&e);
    stk_loader_destroy(h);
    free(idx);

    /* a limit of 1 never fails */
    for (size_t k = 0; k < N; k += 2)
        set_bad(&l, k, "no");
    t_rmtree(l.path);
    tl_write(&l);
    h = mk(l.path, 8, 1.0);
    T_OK(stk_loader_set_log(h, quiet, NULL));
    T_OK(stk_loader_start(h));
    rc = tl_run(h, &e, -1);
    T_CHECK(rc == STK_END && e.n == N, "limit 1, half bad: %s", stk_loader_last_error(h));
    size_t nsub = 0;
    for (size_t i = 0; i < N; i++)
        nsub += e.subst[i];
    T_CHECK(nsub == N / 2 + 1, "%zu substituted (the even records and record 21)", nsub);
    tl_epoch_free(&e);
    stk_loader_destroy(h);

    tl_data_free(&l);
    tl_data_free(&d);
    printf("test_loader_bad_limit: ok\n");
    return 0;
}
