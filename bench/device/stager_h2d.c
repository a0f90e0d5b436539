/* SPDX-License-Identifier: MIT */
/*
 * stager_h2d.c — (a) of bench/device/check.sh: host-to-device throughput of the stager against a
 * plain cudaMemcpyAsync from pinned memory of the same size, measured side by side in one run.
 *
 *   stager_h2d [BATCH [SIDE [REPEATS [ITERS]]]]      defaults 256 224 7 30
 *
 * Each repeat runs, interleaved: "plain" (ITERS cudaMemcpyAsync of one uint8 batch from pinned
 * memory, back to back on one stream, timed by events), "stager u8" (uint8 NHWC: the stager's
 * copy goes straight into the output buffer) and "stager f16" (float16 NCHW normalised: copy
 * into the staging buffer, then the conversion kernel), each driven as the loader's stager
 * thread drives it: submit, wait_copied, then the consumer's hand_out/release on its own stream.
 * For the stager two figures are given: copy GB/s (bytes / copy time from the stager's own
 * events: what the copy engine achieved) and end-to-end GB/s (bytes / wall time of the loop,
 * host waits and the kernel included). Medians of the repeats; ratios to "plain".
 * Exit 77 without a GPU.
 */
#include "stager.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                               \
    do {                                                                                       \
        cudaError_t ck_e_ = (call);                                                            \
        if (ck_e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                      \
                    cudaGetErrorString(ck_e_));                                                \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define OK(call)                                                                               \
    do {                                                                                       \
        int ok_rc_ = (call);                                                                   \
        if (ok_rc_ != STK_OK) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,                  \
                    stk_strerror(ok_rc_), err);                                                \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static char err[STK__ERRLEN];

static double run_plain(void *dst, void *const host[2], size_t bytes, int iters, cudaStream_t st)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, st));
    for (int i = 0; i < iters; i++)
        CK(cudaMemcpyAsync(dst, host[i % 2], bytes, cudaMemcpyHostToDevice, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return (double)bytes * iters / (ms / 1e3) / 1e9;
}

/* Returns end-to-end GB/s; *copy_gbps from the stager's event-timed copies. */
static double run_stager(stk__stager *s, void *const host[2], uint32_t n, size_t bytes, int iters,
                         cudaStream_t consumer, double *copy_gbps)
{
    stk__stager_stats before, after;
    stk__stager_get_stats(s, &before);
    CK(cudaStreamSynchronize(consumer));
    const double t0 = stk__now();
    for (int i = 0; i < iters; i++) {
        const int b = i % 2;
        OK(stk__stager_submit(s, b, host[b], n, err));
        OK(stk__stager_wait_copied(s, b, err));
        OK(stk__stager_hand_out(s, b, consumer, err));
        OK(stk__stager_release(s, b, consumer, err));
    }
    CK(cudaStreamSynchronize(consumer));
    const double wall = stk__now() - t0;
    stk__stager_get_stats(s, &after);
    const double copy_s = after.h2d_s - before.h2d_s;
    *copy_gbps = copy_s > 0 ? (double)(after.h2d_bytes - before.h2d_bytes) / copy_s / 1e9 : 0;
    return (double)bytes * iters / wall / 1e9;
}

int main(int argc, char **argv)
{
    const uint32_t batch = argc > 1 ? (uint32_t)atoi(argv[1]) : 256;
    const int side = argc > 2 ? atoi(argv[2]) : 224;
    const int repeats = argc > 3 ? atoi(argv[3]) : 7;
    const int iters = argc > 4 ? atoi(argv[4]) : 30;
    if (batch < 1 || side < 1 || repeats < 1 || repeats > 100 || iters < 1) {
        fprintf(stderr, "usage: stager_h2d [BATCH [SIDE [REPEATS [ITERS]]]]\n");
        return 2;
    }
    if (stk_cuda_device_count() == 0) {
        printf("stager_h2d: no GPU (stk_cuda_device_count() = 0): nothing measured\n");
        return 77;
    }
    const int dev = 0;
    const size_t bytes = (size_t)batch * side * side * 3;
    CK(cudaSetDevice(dev));
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    void *host[2];
    int pinned[2];
    for (int i = 0; i < 2; i++) {
        OK(stk__host_alloc(bytes, dev, &host[i], &pinned[i], err));
        for (size_t j = 0; j < bytes; j++)
            ((uint8_t *)host[i])[j] = (uint8_t)(j * 131 + i);
    }
    void *plain_dst = NULL;
    CK(cudaMalloc(&plain_dst, bytes));
    cudaStream_t st, consumer;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));

    stk__stager_config c;
    memset(&c, 0, sizeof c);
    c.device = dev;
    c.nbuf = 2;
    c.batch_cap = batch;
    c.h = c.w = side;
    c.dtype = STK_DTYPE_UINT8;
    c.layout = STK_NHWC;
    stk__stager *su8 = NULL, *sf16 = NULL;
    OK(stk__stager_create(&su8, &c, err));
    c.dtype = STK_DTYPE_FLOAT16;
    c.layout = STK_NCHW;
    c.normalize = 1;
    const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f, 57.375f};
    memcpy(c.mean, mean, sizeof mean);
    memcpy(c.std, sd, sizeof sd);
    OK(stk__stager_create(&sf16, &c, err));

    /* warm-up */
    double dummy;
    run_plain(plain_dst, host, bytes, 3, st);
    run_stager(su8, host, batch, bytes, 3, consumer, &dummy);
    run_stager(sf16, host, batch, bytes, 3, consumer, &dummy);

    double plain[100], u8_e2e[100], u8_copy[100], f16_e2e[100], f16_copy[100];
    for (int r = 0; r < repeats; r++) {
        plain[r] = run_plain(plain_dst, host, bytes, iters, st);
        u8_e2e[r] = run_stager(su8, host, batch, bytes, iters, consumer, &u8_copy[r]);
        f16_e2e[r] = run_stager(sf16, host, batch, bytes, iters, consumer, &f16_copy[r]);
    }
    const double p = median(plain, repeats);
    const double ue = median(u8_e2e, repeats), uc = median(u8_copy, repeats);
    const double fe = median(f16_e2e, repeats), fc = median(f16_copy, repeats);
    stk__stager_stats ss;
    stk__stager_get_stats(sf16, &ss);
    printf("device: %s; batch %u x %d x %d x 3 uint8 = %.1f MB; %d repeats x %d batches, medians\n",
           prop.name, batch, side, side, bytes / 1e6, repeats, iters);
    printf("plain cudaMemcpyAsync (pinned)      %7.2f GB/s\n", p);
    printf("stager u8 NHWC   copy %7.2f GB/s (%5.1f%% of plain)   end-to-end %7.2f GB/s (%5.1f%%)\n",
           uc, 100 * uc / p, ue, 100 * ue / p);
    printf("stager f16 NCHW  copy %7.2f GB/s (%5.1f%% of plain)   end-to-end %7.2f GB/s (%5.1f%%)\n",
           fc, 100 * fc / p, fe, 100 * fe / p);
    printf("f16 conversion kernel: %.3f ms per batch (event-timed, all f16 batches)\n",
           ss.clock.items ? 1e3 * ss.convert_s / (double)atomic_load(&ss.clock.items) : 0.0);
    printf("RESULT h2d plain_GBps=%.3f stager_u8_copy_GBps=%.3f stager_u8_e2e_GBps=%.3f "
           "stager_f16_copy_GBps=%.3f stager_f16_e2e_GBps=%.3f copy_ratio=%.4f target=0.90 %s\n",
           p, uc, ue, fc, fe, uc / p, uc / p >= 0.9 ? "PASS" : "MISS");

    stk__stager_destroy(su8);
    stk__stager_destroy(sf16);
    CK(cudaFree(plain_dst));
    CK(cudaStreamDestroy(st));
    CK(cudaStreamDestroy(consumer));
    for (int i = 0; i < 2; i++)
        stk__host_free(host[i], pinned[i]);
    return 0;
}
