/* SPDX-License-Identifier: MIT */
/*
 * test_loader_set_size.c — stk_loader_set_output_size: a resizable loader (STK_P_MAX_OUT_*) run
 * at 160 → 192 → 128 → 144x176 px over four epochs gives, epoch by epoch, the same bytes, indices
 * and labels as a fresh loader started at that size and epoch; train (uint8 NCHW: the convert
 * path) and eval (uint8 NHWC: decoded straight into the ring). The loader's threads are the same
 * ones before and after (no restart), the ring keeps its size, and the calls that are not allowed
 * (mid-epoch, a batch held, above the maximum, a loader without STK_P_MAX_OUT_*) are refused with
 * STK_E_STATE / STK_E_INVALID and change nothing. After a seek to mid-epoch the new size applies
 * from there, equal to a fresh loader seeked to the same place. With a GPU, the device path
 * (the stager's buffers sized for the maximum) is checked against fresh host loaders too.
 * stk-test: concurrency
 */
#include "test_loader_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 23, BS = 5 };

static stk_loader *make(const char *path, int mode, int h, int w, int max_h, int max_w, uint64_t epoch)
{
    stk_loader *L;
    T_OK(stk_loader_create(&L));
    T_OK(stk_loader_set(L, STK_P_BATCH_SIZE, BS));
    T_OK(stk_loader_set(L, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(L, STK_P_SEED, 7));
    T_OK(stk_loader_set(L, STK_P_QUEUE_DEPTH, 8));
    T_OK(stk_loader_set(L, STK_P_IO_THREADS, 2));
    T_OK(stk_loader_set(L, STK_P_MODE, mode));
    T_OK(stk_loader_set(L, STK_P_SHUFFLE, 1));
    T_OK(stk_loader_set(L, STK_P_EPOCH, (int64_t)epoch));
    T_OK(stk_loader_set(L, STK_P_OUT_LAYOUT, mode == STK_MODE_TRAIN ? STK_NCHW : STK_NHWC));
    T_OK(stk_loader_set(L, STK_P_RESIZE, 150));
    T_OK(stk_loader_set(L, STK_P_OUT_HEIGHT, h));
    T_OK(stk_loader_set(L, STK_P_OUT_WIDTH, w));
    if (max_h)
        T_OK(stk_loader_set(L, STK_P_MAX_OUT_HEIGHT, max_h));
    if (max_w)
        T_OK(stk_loader_set(L, STK_P_MAX_OUT_WIDTH, max_w));
    T_OK(stk_loader_open(L, path));
    return L;
}

/* Thread ids of the loader's threads (names stk-*), sorted; returns how many. */
static size_t stk_threads(long *tids, size_t cap)
{
    DIR *d = opendir("/proc/self/task");
    T_CHECK(d, "opendir /proc/self/task");
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char p[300], comm[64] = "";
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        if (!fgets(comm, sizeof comm, f))
            comm[0] = '\0';
        fclose(f);
        if (strncmp(comm, "stk-", 4) == 0 && n < cap)
            tids[n++] = atol(de->d_name);
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && tids[j - 1] > tids[j]; j--) {
            long t = tids[j];
            tids[j] = tids[j - 1];
            tids[j - 1] = t;
        }
    return n;
}

/* stk_threads once the list holds still: a thread of a loader just destroyed stays listed in
 * /proc/self/task for a moment after pthread_join returns (the kernel clears its tid before it
 * releases the task), so two equal snapshots 20 ms apart are taken as the loader's threads. */
static size_t stk_threads_settled(long *tids, size_t cap)
{
    long again[64];
    size_t n = stk_threads(tids, cap);
    for (int tries = 0; tries < 250; tries++) {
        usleep(20000);
        size_t m = stk_threads(again, cap < 64 ? cap : 64);
        if (m == n && memcmp(again, tids, n * sizeof(long)) == 0)
            return n;
        memcpy(tids, again, m * sizeof(long));
        n = m;
    }
    return n;
}

static void same_epoch(const tl_epoch *a, const tl_epoch *b, int h, int w, const char *what)
{
    T_CHECK(a->n == b->n && a->nbatches == b->nbatches, "%s %dx%d: %zu samples / %zu batches, fresh %zu / %zu",
            what, h, w, a->n, a->nbatches, b->n, b->nbatches);
    T_CHECK(a->sample_bytes == (size_t)h * w * 3 && b->sample_bytes == a->sample_bytes,
            "%s %dx%d: sample bytes %zu, fresh %zu", what, h, w, a->sample_bytes, b->sample_bytes);
    for (size_t i = 0; i < a->n; i++)
        T_CHECK(a->index[i] == b->index[i] && a->label[i] == b->label[i],
                "%s %dx%d: sample %zu index %llu label %d, fresh %llu %d", what, h, w, i,
                (unsigned long long)a->index[i], a->label[i], (unsigned long long)b->index[i],
                b->label[i]);
    for (size_t i = 0; i < a->n; i++)
        T_CHECK(memcmp(a->images + i * a->sample_bytes, b->images + i * a->sample_bytes,
                       a->sample_bytes) == 0,
                "%s %dx%d epoch %llu: sample %zu (index %llu) differs from a loader built at that size",
                what, h, w, (unsigned long long)a->epoch, i, (unsigned long long)a->index[i]);
}

static void run_mode(const tl_data *d, int mode)
{
    const char *what = mode == STK_MODE_TRAIN ? "train" : "eval";
    static const int sizes[][2] = {{160, 160}, {192, 192}, {128, 128}, {144, 176}};
    stk_loader *L = make(d->path, mode, 160, 160, 192, 192, 0);
    T_OK(stk_loader_start(L));
    stk_stats st0;
    T_OK(stk_loader_stats(L, &st0));
    long t0[64], t1[64];
    size_t nt0 = 0;
    for (uint64_t e = 0; e < 4; e++) {
        int h = sizes[e][0], w = sizes[e][1];
        if (e == 1) { /* every thread has named itself by now */
            nt0 = stk_threads_settled(t0, 64);
            T_CHECK(nt0 >= 3, "expected the loader's threads, found %zu", nt0);
        }
        if (e > 0)
            T_OK(stk_loader_set_output_size(L, (uint32_t)h, (uint32_t)w));
        double gh, gw;
        T_OK(stk_loader_get(L, STK_P_OUT_HEIGHT, &gh));
        T_OK(stk_loader_get(L, STK_P_OUT_WIDTH, &gw));
        T_CHECK(gh == h && gw == w, "get after set_output_size: %gx%g", gh, gw);
        tl_epoch got, want;
        T_CHECK(tl_run(L, &got, -1) == STK_END, "%s epoch %llu ends with STK_END", what,
                (unsigned long long)e);
        T_CHECK(got.epoch == e, "epoch %llu delivered as %llu", (unsigned long long)e,
                (unsigned long long)got.epoch);
        tl_check_cover(&got, d);
        stk_loader *F = make(d->path, mode, h, w, 0, 0, e);
        T_OK(stk_loader_start(F));
        T_CHECK(tl_run(F, &want, -1) == STK_END, "fresh loader ends");
        stk_loader_destroy(F);
        same_epoch(&got, &want, h, w, what);
        tl_epoch_free(&got);
        tl_epoch_free(&want);
    }
    size_t nt1 = stk_threads_settled(t1, 64);
    T_CHECK(nt1 == nt0 && memcmp(t0, t1, nt0 * sizeof(long)) == 0,
            "%s: the loader's threads changed across set_output_size (%zu before, %zu after)",
            what, nt0, nt1);
    stk_stats st1;
    T_OK(stk_loader_stats(L, &st1));
    T_CHECK(st1.host_ring_bytes == st0.host_ring_bytes, "ring bytes %llu -> %llu",
            (unsigned long long)st0.host_ring_bytes, (unsigned long long)st1.host_ring_bytes);
    T_CHECK(st0.host_ring_bytes >= (uint64_t)4 * BS * 192 * 192 * 3,
            "the ring (%llu bytes) is sized for the maximum 192x192",
            (unsigned long long)st0.host_ring_bytes);

    /* refused: mid-epoch, with a batch held, above the maximum; nothing changes */
    const stk_batch *b;
    T_OK(stk_loader_next(L, NULL, 20000, &b));
    T_CHECK(b->height == 144 && b->width == 176, "size kept into epoch 4: %ux%u", b->height, b->width);
    T_CHECK(stk_loader_set_output_size(L, 128, 128) == STK_E_STATE, "set with a batch held");
    T_CHECK(strstr(stk_loader_last_error(L), "held"), "error names the held batch: %s",
            stk_loader_last_error(L));
    T_OK(stk_loader_release(L, b, NULL));
    T_CHECK(stk_loader_set_output_size(L, 128, 128) == STK_E_STATE, "set mid-epoch");
    T_CHECK(strstr(stk_loader_last_error(L), "between epochs"), "error says when: %s",
            stk_loader_last_error(L));
    T_CHECK(stk_loader_set_output_size(L, 200, 100) == STK_E_INVALID, "set above the maximum");
    T_CHECK(strstr(stk_loader_last_error(L), "STK_P_MAX_OUT_HEIGHT"), "error names the maximum: %s",
            stk_loader_last_error(L));
    T_OK(stk_loader_next(L, NULL, 20000, &b));
    T_CHECK(b->height == 144 && b->width == 176 && b->number == 1, "refusals changed nothing");
    T_OK(stk_loader_release(L, b, NULL));
    /* after set_epoch (sample 0) it is allowed again, and applies to that epoch */
    T_OK(stk_loader_set_epoch(L, 6));
    T_OK(stk_loader_set_output_size(L, 96, 112));
    tl_epoch got, want;
    T_CHECK(tl_run(L, &got, -1) == STK_END, "epoch 6");
    stk_loader *F = make(d->path, mode, 96, 112, 0, 0, 6);
    T_OK(stk_loader_start(F));
    T_CHECK(tl_run(F, &want, -1) == STK_END, "fresh epoch 6");
    stk_loader_destroy(F);
    same_epoch(&got, &want, 96, 112, what);
    tl_epoch_free(&got);
    tl_epoch_free(&want);
    /* after a seek to mid-epoch, the size applies from there (a checkpoint resumed at its size) */
    T_OK(stk_loader_seek(L, 7, 10));
    T_OK(stk_loader_set_output_size(L, 176, 120));
    T_CHECK(tl_run(L, &got, -1) == STK_END, "epoch 7 from sample 10");
    F = make(d->path, mode, 176, 120, 0, 0, 7);
    T_OK(stk_loader_start(F));
    T_OK(stk_loader_seek(F, 7, 10));
    T_CHECK(tl_run(F, &want, -1) == STK_END, "fresh epoch 7 from sample 10");
    stk_loader_destroy(F);
    same_epoch(&got, &want, 176, 120, what);
    tl_epoch_free(&got);
    tl_epoch_free(&want);
    stk_loader_destroy(L);
}

#ifdef STK_TEST_CUDA
#include <cuda_runtime_api.h>

/* The device path: a resizable loader on GPU 0 (uint8 NCHW, converted by the stager) run at
 * 160 -> 192 -> 128 equals the host path of a fresh loader at each size. */
static void run_device(const tl_data *d)
{
    static const int sizes[] = {160, 192, 128};
    stk_loader *L = make(d->path, STK_MODE_TRAIN, 160, 160, 192, 192, 0);
    T_OK(stk_loader_set(L, STK_P_DEVICE, 0));
    T_OK(stk_loader_start(L));
    stk_stats st;
    T_OK(stk_loader_stats(L, &st));
    T_CHECK(st.device == 0, "device batches (fallback %d)", st.fallback_reason);
    uint8_t *got = malloc((size_t)BS * 192 * 192 * 3);
    T_CHECK(got, "oom");
    for (uint64_t e = 0; e < 3; e++) {
        int sz = sizes[e];
        if (e > 0)
            T_OK(stk_loader_set_output_size(L, (uint32_t)sz, (uint32_t)sz));
        stk_loader *F = make(d->path, STK_MODE_TRAIN, sz, sz, 0, 0, e);
        T_OK(stk_loader_start(F));
        tl_epoch want;
        T_CHECK(tl_run(F, &want, -1) == STK_END, "fresh host epoch");
        stk_loader_destroy(F);
        const stk_batch *b;
        size_t n = 0;
        int rc;
        while ((rc = stk_loader_next(L, NULL, 30000, &b)) == STK_OK) {
            T_CHECK(b->device == 0 && b->height == (uint32_t)sz && b->width == (uint32_t)sz,
                    "device batch %ux%u on %d, want %d px", b->height, b->width, b->device, sz);
            T_CHECK(cudaMemcpy(got, b->images, b->image_bytes, cudaMemcpyDeviceToHost) == cudaSuccess,
                    "copy back");
            T_CHECK(memcmp(b->indices, want.index + n, b->size * sizeof(uint64_t)) == 0, "indices");
            T_CHECK(memcmp(got, want.images + n * want.sample_bytes, b->image_bytes) == 0,
                    "device epoch %llu at %d px: batch %llu differs from a fresh loader",
                    (unsigned long long)e, sz, (unsigned long long)b->number);
            n += b->size;
            T_OK(stk_loader_release(L, b, NULL));
        }
        T_CHECK(rc == STK_END && n == want.n, "device epoch %llu: %s, %zu of %zu",
                (unsigned long long)e, stk_strerror(rc), n, want.n);
        tl_epoch_free(&want);
    }
    free(got);
    stk_loader_destroy(L);
}
#endif

int main(void)
{
    tl_data d;
    tl_data_make(&d, "setsize", N);
    tl_write(&d);
    run_mode(&d, STK_MODE_TRAIN);
    run_mode(&d, STK_MODE_EVAL);
#ifdef STK_TEST_CUDA
    if (stk_cuda_device_count() > 0)
        run_device(&d);
    else
        printf("test_loader_set_size: no CUDA device, the device path is not run\n");
#endif

    /* a loader started without STK_P_MAX_OUT_* refuses after start, names the parameter */
    stk_loader *L = make(d.path, STK_MODE_TRAIN, 64, 64, 0, 0, 0);
    T_OK(stk_loader_set_output_size(L, 48, 40)); /* before start: sets the parameters */
    double v;
    T_OK(stk_loader_get(L, STK_P_OUT_WIDTH, &v));
    T_CHECK(v == 40, "before start: width %g", v);
    T_OK(stk_loader_start(L));
    T_CHECK(stk_loader_set_output_size(L, 32, 32) == STK_E_STATE, "a fixed loader refuses");
    T_CHECK(strstr(stk_loader_last_error(L), "STK_P_MAX_OUT_HEIGHT"), "%s", stk_loader_last_error(L));
    stk_loader_destroy(L);
    /* an output size above the maximum fails start, naming both */
    L = make(d.path, STK_MODE_TRAIN, 64, 64, 32, 0, 0);
    T_CHECK(stk_loader_start(L) == STK_E_INVALID, "out above max starts");
    T_CHECK(strstr(stk_loader_last_error(L), "STK_P_MAX_OUT_HEIGHT"), "%s", stk_loader_last_error(L));
    T_CHECK(stk_loader_set_output_size(L, 40, 40) == STK_E_INVALID, "before start, above max");
    stk_loader_destroy(L);
    tl_data_free(&d);
    printf("test_loader_set_size: ok\n");
    return 0;
}
