/* SPDX-License-Identifier: MIT */
/* test_dist_exact: STK_DIST_EXACT gives every sample to exactly one rank. The sampler alone
 * (large N, shuffled and not, N < W) and the whole loader on a real dataset (every dataset index
 * delivered once over all ranks, per-rank sizes ceil((N - r) / W), two epochs, drop_last off)
 * for several (N, W) including N < W, where some ranks get nothing and only see STK_END. */
#include "test_loader_util.h"

#include "order.h"

static void check_plan(uint64_t n, uint32_t world, int shuffle)
{
    uint32_t *count = calloc(n, sizeof(uint32_t));
    T_CHECK(count, "oom");
    uint64_t total = 0;
    for (uint32_t r = 0; r < world; r++) {
        stk__plan p;
        T_OK(stk__plan_init(&p, n, 11, 2, shuffle, r, world, STK_DIST_EXACT));
        uint64_t want = r < n ? (n - r + world - 1) / world : 0;
        T_CHECK(p.per_rank == want, "n %llu world %u rank %u: per_rank %llu, want %llu",
                (unsigned long long)n, world, r, (unsigned long long)p.per_rank,
                (unsigned long long)want);
        for (uint64_t i = 0; i < p.per_rank; i++) {
            uint64_t idx = stk__plan_index(&p, i);
            T_CHECK(idx < n, "index %llu out of range", (unsigned long long)idx);
            count[idx]++;
        }
        total += p.per_rank;
    }
    T_CHECK(total == n, "n %llu world %u: %llu samples over all ranks", (unsigned long long)n, world,
            (unsigned long long)total);
    for (uint64_t i = 0; i < n; i++)
        T_CHECK(count[i] == 1, "n %llu world %u shuffle %d: sample %llu seen %u times",
                (unsigned long long)n, world, shuffle, (unsigned long long)i, count[i]);
    free(count);
}

/* The loader on D, WORLD ranks, batch BS: every record once per epoch over all ranks. */
static void check_loader(const tl_data *d, uint32_t world, int bs)
{
    uint32_t *count = calloc(d->n, sizeof(uint32_t));
    T_CHECK(count, "oom");
    for (int epoch = 0; epoch < 2; epoch++) {
        memset(count, 0, d->n * sizeof(uint32_t));
        for (uint32_t r = 0; r < world; r++) {
            stk_loader *h;
            T_OK(stk_loader_create(&h));
            T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, bs));
            T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
            T_OK(stk_loader_set(h, STK_P_IO_THREADS, 2));
            T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
            T_OK(stk_loader_set(h, STK_P_SEED, 5));
            T_OK(stk_loader_set(h, STK_P_EPOCH, epoch));
            T_OK(stk_loader_set(h, STK_P_RANK, r));
            T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, world));
            T_OK(stk_loader_set(h, STK_P_DIST_MODE, STK_DIST_EXACT));
            T_OK(stk_loader_open(h, d->path));
            uint64_t want = r < d->n ? (d->n - r + world - 1) / world : 0;
            T_CHECK(stk_loader_samples_per_epoch(h) == want, "n %zu world %u rank %u: %llu samples, want %llu",
                    d->n, world, r, (unsigned long long)stk_loader_samples_per_epoch(h),
                    (unsigned long long)want);
            T_CHECK(stk_loader_batches_per_epoch(h) == (want + (uint64_t)bs - 1) / (uint64_t)bs,
                    "batches per epoch %llu", (unsigned long long)stk_loader_batches_per_epoch(h));
            T_OK(stk_loader_start(h));
            tl_epoch e;
            int rc = tl_run(h, &e, -1);
            T_CHECK(rc == STK_END, "rank %u: ended with %s", r, stk_status_name(rc));
            T_CHECK(e.n == want, "rank %u delivered %zu samples, want %llu", r, e.n, (unsigned long long)want);
            for (size_t i = 0; i < e.n; i++) {
                T_CHECK(e.index[i] < d->n, "index %llu", (unsigned long long)e.index[i]);
                count[e.index[i]]++;
                T_CHECK(e.label[i] == d->label[e.index[i]], "label of %llu", (unsigned long long)e.index[i]);
            }
            tl_epoch_free(&e);
            stk_loader_destroy(h);
        }
        for (size_t i = 0; i < d->n; i++)
            T_CHECK(count[i] == 1, "n %zu world %u epoch %d: record %zu delivered %u times", d->n, world,
                    epoch, i, count[i]);
    }
    free(count);
}

int main(void)
{
    const uint64_t ns[] = {1, 2, 3, 7, 64, 1000, 1001, 4099};
    const uint32_t ws[] = {1, 2, 3, 4, 7, 8, 13};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
            for (int sh = 0; sh < 2; sh++)
                check_plan(ns[i], ws[j], sh);

    const size_t dn[] = {3, 10, 23};
    const uint32_t dw[] = {1, 2, 4, 5};
    for (size_t i = 0; i < sizeof dn / sizeof dn[0]; i++) {
        tl_data d;
        tl_data_make(&d, "dist_exact", dn[i]);
        tl_write(&d);
        for (size_t j = 0; j < sizeof dw / sizeof dw[0]; j++)
            check_loader(&d, dw[j], 4);
        tl_data_free(&d);
    }
    printf("test_dist_exact: ok\n");
    return 0;
}
