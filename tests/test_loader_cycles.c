/* SPDX-License-Identifier: MIT */
/*
 * test_loader_cycles.c — lifecycles under stress (the long run's short form): 1 000 start /
 * stop / destroy cycles stopped at random points mid-epoch (100 under a sanitizer), with open
 * file descriptors and RSS checked for growth; cancel() fired from another thread at random
 * moments while the consumer reads (every CANCELLED is followed by the same batch, nothing lost);
 * two loaders running at once in one process give the same batches as each alone.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "test_loader_util.h"

#include <dirent.h>
#include <unistd.h>

#define N 48
#define BS 6

static tl_data D;

static void test_cycles(void)
{
    int cycles = tl_sanitized() ? 100 : 1000;
    stk__rng rng;
    stk__rng_init(&rng, 42, 0, 0);
    int fds0 = -1;
    long rss0 = 0;
    stk_loader *h = NULL;
    double t0 = stk__now();
    for (int i = 0; i < cycles; i++) {
        if (!h) {
            h = tl_loader(D.path, BS, 1 + (int)stk__rng_below(&rng, 3));
            T_OK(stk_loader_set(h, STK_P_PREFETCH, 2 + (int)stk__rng_below(&rng, 3)));
            if (stk__rng_below(&rng, 4) == 0)
                T_OK(stk_loader_set(h, STK_P_IO_BACKEND, STK_IO_PREAD));
            T_OK(stk_loader_set(h, STK_P_IO_DIRECT, (int64_t)stk__rng_below(&rng, 2)));
        }
        T_OK(stk_loader_start(h));
        const stk_batch *held[2] = {NULL, NULL};
        int nb = (int)stk__rng_below(&rng, 5); /* 0..4 batches, then stop mid-epoch */
        for (int k = 0; k < nb; k++) {
            const stk_batch *b;
            int rc = stk_loader_next(h, NULL, 30000, &b);
            T_CHECK(rc == STK_OK || rc == STK_END, "cycle %d: next %s", i, stk_strerror(rc));
            if (rc != STK_OK)
                continue;
            if (k < 2 && stk__rng_below(&rng, 3) == 0) {
                held[k] = b; /* keep it: stop/destroy with batches held */
                break;
            }
            T_OK(stk_loader_release(h, b, NULL));
        }
        if (stk__rng_below(&rng, 4) == 0 && !held[0] && !held[1]) {
            uint64_t e = stk__rng_below(&rng, 3), s = stk__rng_below(&rng, N + 1);
            T_OK(stk_loader_seek(h, e, s));
        }
        switch (stk__rng_below(&rng, 3)) {
        case 0: /* destroy straight away, threads running */
            stk_loader_destroy(h);
            h = NULL;
            break;
        case 1: /* stop, then destroy */
            T_OK(stk_loader_stop(h));
            stk_loader_destroy(h);
            h = NULL;
            break;
        default: /* stop and start again on the same handle */
            T_OK(stk_loader_stop(h));
            break;
        }
        if (i == cycles / 10) {
            fds0 = t_count_fds();
            rss0 = t_rss_kb();
        }
    }
    stk_loader_destroy(h);
    double dt = stk__now() - t0;
    int fds1 = t_count_fds();
    long rss1 = t_rss_kb();
    printf("cycles: %d in %.2f s; fds %d -> %d; RSS %ld -> %ld KiB\n", cycles, dt, fds0, fds1, rss0, rss1);
    T_CHECK(fds1 <= fds0, "file descriptors leak: %d -> %d", fds0, fds1);
    if (!tl_sanitized())
        T_CHECK(rss1 - rss0 < 16 * 1024, "RSS grew by %ld KiB over %d cycles", rss1 - rss0, cycles);
}

typedef struct canceller {
    stk_loader *h;
    _Atomic int stop;
    int fired;
} canceller;

static void *cancel_main(void *arg)
{
    canceller *c = arg;
    stk__rng r;
    stk__rng_init(&r, 9, 9, 9);
    while (!atomic_load(&c->stop)) {
        usleep((useconds_t)(200 + stk__rng_below(&r, 3000)));
        stk_loader_cancel(c->h);
        c->fired++;
    }
    return NULL;
}

static void test_cancel_storm(void)
{
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_start(h));
    tl_epoch ref;
    T_CHECK(tl_run(h, &ref, -1) == STK_END, "reference epoch 0");
    T_OK(stk_loader_set_epoch(h, 0));
    canceller c = {h, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, cancel_main, &c);
    int epochs = tl_sanitized() ? 3 : 10, cancelled = 0;
    for (int ep = 0; ep < epochs; ep++) {
        T_OK(stk_loader_set_epoch(h, 0));
        size_t n = 0;
        for (;;) {
            const stk_batch *b;
            int rc = stk_loader_next(h, NULL, -1, &b);
            if (rc == STK_E_CANCELLED) {
                cancelled++;
                continue;
            }
            if (rc == STK_END)
                break;
            T_OK(rc);
            T_CHECK(b->first_sample == n, "no batch lost or repeated after a cancel");
            T_CHECK(memcmp(b->indices, ref.index + n, b->size * 8) == 0, "same records");
            T_CHECK(memcmp(b->images, ref.images + n * ref.sample_bytes, b->image_bytes) == 0, "same pixels");
            n += b->size;
            T_OK(stk_loader_release(h, b, NULL));
        }
        T_CHECK(n == N, "whole epoch despite cancels");
    }
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    printf("cancel storm: %d cancels fired, %d next() calls cancelled\n", c.fired, cancelled);
    stk_loader_destroy(h);
    tl_epoch_free(&ref);
}

typedef struct twin {
    int seed;
    tl_epoch e[2];
} twin;

static void *twin_main(void *arg)
{
    twin *t = arg;
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_SEED, t->seed));
    T_OK(stk_loader_start(h));
    for (int i = 0; i < 2; i++) {
        T_CHECK(tl_run(h, &t->e[i], -1) == STK_END, "twin epoch");
        tl_check_cover(&t->e[i], &D);
    }
    stk_loader_destroy(h);
    return NULL;
}

static void test_two_loaders(void)
{
    twin alone[2] = {{11, {{0}}}, {12, {{0}}}}, together[2] = {{11, {{0}}}, {12, {{0}}}};
    twin_main(&alone[0]);
    twin_main(&alone[1]);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, twin_main, &together[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        for (int ep = 0; ep < 2; ep++) {
            tl_epoch *a = &alone[i].e[ep], *b = &together[i].e[ep];
            T_CHECK(a->n == b->n && memcmp(a->index, b->index, a->n * 8) == 0 &&
                        memcmp(a->images, b->images, a->n * a->sample_bytes) == 0,
                    "loader %d epoch %d: the same alone and side by side", i, ep);
            tl_epoch_free(a);
            tl_epoch_free(b);
        }
}

int main(void)
{
    tl_data_make(&D, "loadercyc", N);
    tl_write(&D);
    test_two_loaders();
    test_cancel_storm();
    test_cycles();
    tl_data_free(&D);
    printf("test_loader_cycles: ok\n");
    return 0;
}
