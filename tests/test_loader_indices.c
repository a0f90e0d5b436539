/* SPDX-License-Identifier: MIT */
/* test_loader_indices: stk_loader_set_indices. An epoch over a list of records (in any order,
 * with a repeat) delivers exactly those records with their labels: in the list's order without
 * shuffle (also after a seek into the epoch, and with two workers), as a permutation of the list
 * with shuffle (two epochs differ), split over two ranks as the whole list would be; the per-epoch
 * counts follow the list. Errors: before open or after start STK_E_STATE, an index past the
 * dataset STK_E_RANGE naming the entry, an empty non-NULL list STK_E_INVALID; (NULL, 0) restores
 * the whole dataset. */
#include "test_loader_util.h"

#define NIDX 7
static const uint64_t IDX[NIDX] = {17, 3, 3, 20, 0, 9, 22};

static stk_loader *mk(const tl_data *d, int shuffle, int workers, int rank, int world)
{
    stk_loader *h = tl_loader(d->path, 3, workers);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, shuffle));
    T_OK(stk_loader_set(h, STK_P_RANK, rank));
    T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, world));
    T_OK(stk_loader_set_indices(h, IDX, NIDX));
    return h;
}

/* E's records are the list's, each as often as listed, with the dataset's labels and sizes. */
static void check_multiset(const tl_epoch *e, const tl_data *d, size_t want_n)
{
    T_CHECK(e->n == want_n, "%zu samples, want %zu", e->n, want_n);
    int left[32] = {0};
    for (size_t j = 0; j < NIDX; j++)
        left[IDX[j]]++;
    for (size_t i = 0; i < e->n; i++) {
        uint64_t r = e->index[i];
        T_CHECK(r < d->n && left[r] > 0, "record %llu is not (or no more) in the list", (unsigned long long)r);
        left[r]--;
        T_CHECK(e->label[i] == d->label[r] && e->payload[i] == d->len[r], "label/size of record %llu",
                (unsigned long long)r);
    }
}

int main(void)
{
    tl_data d;
    tl_data_make(&d, "indices", 23);
    tl_write(&d);

    /* in order, 1 and 2 workers: exactly the list */
    for (int workers = 1; workers <= 2; workers++) {
        stk_loader *h = mk(&d, 0, workers, 0, 1);
        T_CHECK(stk_loader_samples_per_epoch(h) == NIDX && stk_loader_batches_per_epoch(h) == 3, "counts");
        T_OK(stk_loader_start(h));
        tl_epoch e;
        T_CHECK(tl_run(h, &e, -1) == STK_END, "epoch");
        check_multiset(&e, &d, NIDX);
        for (size_t i = 0; i < NIDX; i++)
            T_CHECK(e.index[i] == IDX[i], "position %zu: record %llu, want %llu", i,
                    (unsigned long long)e.index[i], (unsigned long long)IDX[i]);
        /* a seek into the epoch continues the list */
        T_OK(stk_loader_seek(h, 0, 4));
        tl_epoch rest;
        T_CHECK(tl_run(h, &rest, -1) == STK_END, "rest");
        T_CHECK(rest.n == NIDX - 4, "rest has %zu samples", rest.n);
        for (size_t i = 0; i < rest.n; i++)
            T_CHECK(rest.index[i] == IDX[4 + i], "after seek, position %zu", 4 + i);
        tl_epoch_free(&rest);
        tl_epoch_free(&e);
        stk_loader_destroy(h);
    }

    /* shuffled: a permutation of the list, another one next epoch */
    stk_loader *h = mk(&d, 1, 2, 0, 1);
    T_OK(stk_loader_start(h));
    tl_epoch e0, e1;
    T_CHECK(tl_run(h, &e0, -1) == STK_END, "epoch 0");
    T_CHECK(tl_run(h, &e1, -1) == STK_END, "epoch 1");
    check_multiset(&e0, &d, NIDX);
    check_multiset(&e1, &d, NIDX);
    T_CHECK(memcmp(e0.index, e1.index, NIDX * sizeof(uint64_t)) != 0, "two epochs, one order");
    tl_epoch_free(&e0);
    tl_epoch_free(&e1);
    stk_loader_destroy(h);

    /* two ranks (PAD): 4 + 4 samples; together every listed record, one repeated by the padding */
    tl_epoch parts[2];
    for (int r = 0; r < 2; r++) {
        h = mk(&d, 1, 1, r, 2);
        T_CHECK(stk_loader_samples_per_epoch(h) == 4, "rank %d samples", r);
        T_OK(stk_loader_start(h));
        T_CHECK(tl_run(h, &parts[r], -1) == STK_END, "rank %d epoch", r);
        stk_loader_destroy(h);
    }
    tl_epoch all = parts[0];
    all.index = malloc(8 * sizeof(uint64_t));
    all.label = malloc(8 * sizeof(int32_t));
    all.payload = malloc(8 * sizeof(uint32_t));
    for (size_t i = 0; i < 4; i++)
        for (int r = 0; r < 2; r++) {
            all.index[2 * i + (size_t)r] = parts[r].index[i];
            all.label[2 * i + (size_t)r] = parts[r].label[i];
            all.payload[2 * i + (size_t)r] = parts[r].payload[i];
        }
    all.n = NIDX;   /* global positions 0..6 are the permutation; position 7 wraps to position 0 */
    check_multiset(&all, &d, NIDX);
    T_CHECK(all.index[7] == all.index[0], "the padding repeats the first position");
    free(all.index);
    free(all.label);
    free(all.payload);
    tl_epoch_free(&parts[0]);
    tl_epoch_free(&parts[1]);

    /* errors */
    stk_loader *c;
    T_OK(stk_loader_create(&c));
    T_CHECK(stk_loader_set_indices(c, IDX, NIDX) == STK_E_STATE, "before open");
    stk_loader_destroy(c);
    h = tl_loader(d.path, 3, 1);
    const uint64_t bad[2] = {0, 23};
    T_CHECK(stk_loader_set_indices(h, bad, 2) == STK_E_RANGE, "index past the dataset");
    T_CHECK(strstr(stk_loader_last_error(h), "entry 1 is record 23"), "names it: %s", stk_loader_last_error(h));
    T_CHECK(stk_loader_set_indices(h, IDX, 0) == STK_E_INVALID, "empty list");
    T_OK(stk_loader_set_indices(h, IDX, NIDX));
    T_CHECK(stk_loader_samples_per_epoch(h) == NIDX, "subset count");
    T_OK(stk_loader_set_indices(h, NULL, 0));
    T_CHECK(stk_loader_samples_per_epoch(h) == 23, "whole dataset again");
    T_OK(stk_loader_set_indices(h, IDX, NIDX));
    T_OK(stk_loader_start(h));
    T_CHECK(stk_loader_set_indices(h, IDX, NIDX) == STK_E_STATE, "after start");
    stk_loader_destroy(h);

    tl_data_free(&d);
    printf("PASS\n");
    return 0;
}
