/* SPDX-License-Identifier: MIT */
/* test_loader_draw_key: STK_P_DRAW_KEY. A list with a record three times in a row
 * (stk_loader_set_indices, as a RASampler draws) in train mode: keyed by record index (-1, the
 * default) the three copies are the same crop; keyed by position (B >= 0) they differ, the
 * output is the same for 1 and 3 workers and after a seek into the epoch, and another base B
 * (another rank) draws other crops. Out of range values are STK_E_INVALID. */
#include "test_loader_util.h"

#define NIDX 6
static const uint64_t IDX[NIDX] = {4, 4, 4, 9, 9, 9};

static void run(const tl_data *d, int64_t key, int workers, tl_epoch *e, uint64_t from)
{
    stk_loader *h = tl_loader(d->path, 3, workers);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_set(h, STK_P_DRAW_KEY, key));
    T_OK(stk_loader_set_indices(h, IDX, NIDX));
    T_OK(stk_loader_start(h));
    if (from)
        T_OK(stk_loader_seek(h, 0, from));
    T_CHECK(tl_run(h, e, -1) == STK_END, "epoch");
    T_CHECK(e->n == NIDX - from, "%zu samples", e->n);
    stk_loader_destroy(h);
}

static int same(const tl_epoch *a, size_t i, const tl_epoch *b, size_t j)
{
    return memcmp(a->images + i * a->sample_bytes, b->images + j * b->sample_bytes, a->sample_bytes) == 0;
}

int main(void)
{
    tl_data d;
    tl_data_make(&d, "drawkey", 12);
    tl_write(&d);

    tl_epoch byrec, pos1, pos3, rest, other;
    run(&d, -1, 2, &byrec, 0);
    T_CHECK(same(&byrec, 0, &byrec, 1) && same(&byrec, 1, &byrec, 2), "by record: copies alike");
    run(&d, 0, 1, &pos1, 0);
    run(&d, 0, 3, &pos3, 0);
    for (size_t k = 0; k < NIDX; k += 3)
        T_CHECK(!same(&pos1, k, &pos1, k + 1) || !same(&pos1, k + 1, &pos1, k + 2),
                "by position: the copies at %zu are alike", k);
    for (size_t i = 0; i < NIDX; i++) {
        T_CHECK(same(&pos1, i, &pos3, i), "position %zu differs between 1 and 3 workers", i);
        T_CHECK(pos1.index[i] == IDX[i], "position %zu: record %llu", i, (unsigned long long)pos1.index[i]);
    }
    run(&d, 0, 2, &rest, 4);
    for (size_t i = 0; i < rest.n; i++)
        T_CHECK(same(&rest, i, &pos1, i + 4), "after the seek, position %zu", i + 4);
    run(&d, (int64_t)1 << 40, 2, &other, 0);
    T_CHECK(!same(&other, 0, &pos1, 0), "another base (rank) draws the same crop");

    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_CHECK(stk_loader_set(h, STK_P_DRAW_KEY, -2) == STK_E_INVALID, "-2");
    T_CHECK(stk_loader_set(h, STK_P_DRAW_KEY, ((int64_t)1 << 62) + 1) == STK_E_INVALID, "2^62 + 1");
    stk_loader_destroy(h);

    tl_epoch_free(&byrec);
    tl_epoch_free(&pos1);
    tl_epoch_free(&pos3);
    tl_epoch_free(&rest);
    tl_epoch_free(&other);
    tl_data_free(&d);
    printf("PASS\n");
    return 0;
}
