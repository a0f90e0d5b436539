/* SPDX-License-Identifier: MIT */
/*
 * idle_gap.c — (b) and (c) of bench/device/check.sh, the stoker side: a synthetic trainer fed by
 * stk_loader with device batches.
 *
 *   idle_gap DATASET [BATCH [WORKERS [STEPS [FACTOR]]]]   defaults 256, online cores, 120, 1.5
 *
 * 1. Loader speed: device batches (float16 NCHW, normalised, RandomResizedCrop 224, flip),
 *    released at once; images/s over the batches after a warm-up, and the time per batch.
 * 2. Trainer: each step is a GPU kernel that spins FACTOR x that batch time (so the step, not
 *    the loader, is the bottleneck, as in a real run that is not input-bound) and reads the
 *    batch; the loop is next(stream) -> step<<<..., stream>>> -> release(stream), the hand-off
 *    of stoker.h. Each step kernel writes %globaltimer at its start and end; the GPU's idle
 *    time is the sum of the gaps between one step's end and the next one's start, as a fraction
 *    of the wall time from the first step's start to the last one's end.
 * Prints a RESULT line. Exit 77 without a GPU.
 */
#include "stoker.h"
#include "tcuda.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CK(call)                                                                               \
    do {                                                                                       \
        cudaError_t ck_e_ = (call);                                                            \
        if (ck_e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                      \
                    cudaGetErrorString(ck_e_));                                                \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static stk_loader *h;

static const stk_batch *next_batch(cudaStream_t s)
{
    for (;;) {
        const stk_batch *b = NULL;
        int rc = stk_loader_next(h, s, -1, &b);
        if (rc == STK_OK)
            return b;
        if (rc == STK_END)
            continue; /* the loader goes on with the next epoch */
        fprintf(stderr, "idle_gap: stk_loader_next: %s: %s\n", stk_strerror(rc), stk_loader_last_error(h));
        exit(1);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: idle_gap DATASET [BATCH [WORKERS [STEPS [FACTOR]]]]\n");
        return 2;
    }
    const char *path = argv[1];
    const int batch = argc > 2 ? atoi(argv[2]) : 256;
    const int workers = argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    const int steps = argc > 4 ? atoi(argv[4]) : 120;
    const double factor = argc > 5 ? atof(argv[5]) : 1.5;
    if (batch < 1 || steps < 2 || factor <= 0) {
        fprintf(stderr, "idle_gap: bad arguments\n");
        return 2;
    }
    if (stk_cuda_device_count() == 0) {
        printf("idle_gap: no GPU (stk_cuda_device_count() = 0): nothing measured\n");
        return 77;
    }
    CK(cudaSetDevice(0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    if (stk_loader_create(&h) != STK_OK)
        return 1;
    const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f, 57.375f};
    int rc = STK_OK;
    rc |= stk_loader_set(h, STK_P_DEVICE, 0);
    rc |= stk_loader_set(h, STK_P_BATCH_SIZE, batch);
    rc |= stk_loader_set(h, STK_P_WORKERS, workers);
    rc |= stk_loader_set(h, STK_P_DTYPE, STK_DTYPE_FLOAT16);
    rc |= stk_loader_set(h, STK_P_OUT_LAYOUT, STK_NCHW);
    rc |= stk_loader_set_floats(h, STK_P_MEAN, mean, 3);
    rc |= stk_loader_set_floats(h, STK_P_STD, sd, 3);
    if (rc != STK_OK) {
        fprintf(stderr, "idle_gap: setting parameters: %s\n", stk_loader_last_error(h));
        return 1;
    }
    if ((rc = stk_loader_open(h, path)) != STK_OK || (rc = stk_loader_start(h)) != STK_OK) {
        fprintf(stderr, "idle_gap: %s: %s\n", path, stk_loader_last_error(h));
        return 1;
    }

    /* 1. loader speed */
    const int warm = 5, timed = 30;
    for (int i = 0; i < warm; i++) {
        const stk_batch *b = next_batch(s);
        stk_loader_release(h, b, s);
    }
    CK(cudaStreamSynchronize(s));
    double t0 = now();
    uint64_t images = 0;
    for (int i = 0; i < timed; i++) {
        const stk_batch *b = next_batch(s);
        images += b->size;
        stk_loader_release(h, b, s);
    }
    CK(cudaStreamSynchronize(s));
    const double load_s = now() - t0;
    const double batch_s = load_s / timed;
    const double ips = images / load_s;

    /* 2. trainer with a fixed-length GPU step */
    const uint64_t step_ns = (uint64_t)(factor * batch_s * 1e9);
    unsigned long long *stamps_d = NULL;
    CK(cudaMalloc((void **)&stamps_d, sizeof(unsigned long long) * 2 * (size_t)steps));
    stk_stats st0, st1;
    stk_loader_stats(h, &st0);
    t0 = now();
    for (int i = 0; i < steps; i++) {
        const stk_batch *b = next_batch(s);
        CK(t_cuda_step(b->images, step_ns, stamps_d, (uint64_t)i, s));
        stk_loader_release(h, b, s);
    }
    CK(cudaStreamSynchronize(s));
    const double train_s = now() - t0;
    stk_loader_stats(h, &st1);
    uint64_t *stamps = malloc(sizeof(uint64_t) * 2 * (size_t)steps);
    uint64_t *gaps = malloc(sizeof(uint64_t) * (size_t)steps);
    CK(cudaMemcpy(stamps, stamps_d, sizeof(uint64_t) * 2 * (size_t)steps, cudaMemcpyDeviceToHost));
    uint64_t idle = 0;
    int ngaps = 0;
    for (int i = 0; i + 1 < steps; i++) {
        uint64_t g = stamps[2 * i + 2] > stamps[2 * i + 1] ? stamps[2 * i + 2] - stamps[2 * i + 1] : 0;
        gaps[ngaps++] = g;
        idle += g;
    }
    const uint64_t span = stamps[2 * steps - 1] - stamps[0];
    qsort(gaps, (size_t)ngaps, sizeof *gaps, cmp_u64);
    const double frac = (double)idle / (double)span;
    char dev_name[256] = "?";
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        snprintf(dev_name, sizeof dev_name, "%s", prop.name);
    printf("device %s, %d workers, batch %d, dataset %s\n", dev_name, workers, batch, path);
    printf("loader alone: %.0f images/s (%.2f ms per batch, %d batches after %d warm-up)\n", ips,
           1e3 * batch_s, timed, warm);
    printf("trainer: %d steps of %.2f ms GPU time: wall %.3f s, GPU idle between steps %.4f%% "
           "(median gap %.1f us, max %.1f us), next() waited %.3f s, stager waited for releases %.3f s, "
           "H2D %.2f GB/s\n",
           steps, step_ns / 1e6, train_s, 100 * frac, gaps[ngaps / 2] / 1e3, gaps[ngaps - 1] / 1e3,
           st1.wait_s - st0.wait_s, st1.release_wait_s - st0.release_wait_s,
           st1.h2d_s > 0 ? st1.h2d_bytes / st1.h2d_s / 1e9 : 0.0);
    printf("RESULT idle stoker_images_per_s=%.1f batch_ms=%.3f step_ns=%llu idle_fraction=%.6f "
           "target=0.01 %s\n",
           ips, 1e3 * batch_s, (unsigned long long)step_ns, frac, frac < 0.01 ? "PASS" : "MISS");
    char report[8192];
    stk_loader_report(h, report, sizeof report);
    printf("%s\n", report);
    free(stamps);
    free(gaps);
    CK(cudaFree(stamps_d));
    stk_loader_destroy(h);
    CK(cudaStreamDestroy(s));
    return 0;
}
