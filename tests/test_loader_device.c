/* SPDX-License-Identifier: MIT */
/*
 * test_loader_device.c — the loader's device path (STK_P_DEVICE = 0, STK_STAGE_FULL): the
 * stager thread takes host batches in order, the batches handed out live on the GPU and equal
 * the host path's batches converted on the CPU (uint8 bit-exact; float16 / bfloat16 / float32
 * within 1 ulp), with the same labels, indices and flags; next() makes the caller's stream wait
 * (the copy back is queued on that stream with no other synchronisation); holding
 * STK_P_DEVICE_BUFFERS batches, one more next() is refused; release orders buffer reuse after
 * the caller's stream; stats report the device and the H2D bytes; start/stop cycles and a seek
 * mid-epoch work. Skips (77) in a build without CUDA or on a machine without a GPU.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "test_loader_util.h"

#ifndef STK_TEST_CUDA
int main(void)
{
    printf("skip: not a CUDA build\n");
    return T_SKIP;
}
#else
#include <cuda_runtime_api.h>

#define N 45
#define BS 8

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess)                                                                 \
            T_FAIL("%s: %s", #x, cudaGetErrorString(e_));                                      \
    } while (0)

static tl_data D;

static stk_loader *make(int device, int dtype, int layout, int normalize)
{
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_DEVICE, device));
    T_OK(stk_loader_set(h, STK_P_DTYPE, dtype));
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, layout));
    if (normalize) {
        const float mean[3] = {123.675f, 116.28f, 103.53f}, std[3] = {58.395f, 57.12f, 57.375f};
        T_OK(stk_loader_set_floats(h, STK_P_MEAN, mean, 3));
        T_OK(stk_loader_set_floats(h, STK_P_STD, std, 3));
    }
    return h;
}

/* Elements of SIZE bytes equal within 1 ulp (uint8: exactly). */
static size_t count_bad(const uint8_t *a, const uint8_t *b, size_t bytes, int dtype)
{
    size_t bad = 0;
    if (dtype == STK_DTYPE_UINT8)
        return memcmp(a, b, bytes) != 0;
    if (dtype == STK_DTYPE_FLOAT32) {
        for (size_t i = 0; i + 4 <= bytes; i += 4) {
            int32_t x, y;
            memcpy(&x, a + i, 4);
            memcpy(&y, b + i, 4);
            int64_t d = (int64_t)x - (int64_t)y;
            bad += (d > 1 || d < -1) && ((x ^ y) & 0x7fffffff);
        }
        return bad;
    }
    for (size_t i = 0; i + 2 <= bytes; i += 2) {
        uint16_t x, y;
        memcpy(&x, a + i, 2);
        memcpy(&y, b + i, 2);
        int d = (int)x - (int)y;
        bad += (d > 1 || d < -1) && ((x ^ y) & 0x7fff);
    }
    return bad;
}

static void compare_paths(int dtype, int layout, int normalize, cudaStream_t s)
{
    stk_loader *host = make(-1, dtype, layout, normalize);
    T_OK(stk_loader_start(host));
    tl_epoch ref;
    T_CHECK(tl_run(host, &ref, -1) == STK_END, "host epoch");
    stk_loader_destroy(host);

    stk_loader *h = make(0, dtype, layout, normalize);
    T_OK(stk_loader_start(h));
    uint8_t *got = malloc((size_t)BS * ref.sample_bytes);
    size_t n = 0;
    const stk_batch *b;
    int rc;
    while ((rc = stk_loader_next(h, s, 30000, &b)) == STK_OK) {
        T_CHECK(b->device == 0 && b->dtype == dtype && b->layout == layout, "device batch");
        T_CHECK(b->sample_bytes == ref.sample_bytes, "sample bytes %zu vs %zu", b->sample_bytes, ref.sample_bytes);
        CK(cudaMemcpyAsync(got, b->images, b->image_bytes, cudaMemcpyDeviceToHost, s));
        T_OK(stk_loader_release(h, b, s));
        CK(cudaStreamSynchronize(s));
        T_CHECK(memcmp(b->indices, ref.index + n, b->size * 8) == 0, "indices");
        T_CHECK(memcmp(b->labels, ref.label + n, b->size * 4) == 0, "labels");
        size_t bad = count_bad(got, ref.images + n * ref.sample_bytes, b->image_bytes, dtype);
        T_CHECK(bad == 0, "dtype %d layout %d: %zu elements of batch %llu differ from the CPU conversion", dtype,
                layout, bad, (unsigned long long)b->number);
        n += b->size;
    }
    T_CHECK(rc == STK_END && n == N, "whole epoch on the device (%s, %zu)", stk_strerror(rc), n);
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.device == 0 && st.fallback_reason == 0 && st.h2d_bytes >= (uint64_t)N * 32 * 32 * 3, "stats: device %d, "
            "h2d %llu", st.device, (unsigned long long)st.h2d_bytes);
    T_CHECK(st.pinned_bytes > 0 && st.stager.items >= (uint64_t)(N + BS - 1) / BS, "pinned ring, stager counted");
    free(got);
    stk_loader_destroy(h);
    tl_epoch_free(&ref);
}

int main(void)
{
    if (stk_cuda_device_count() < 1) {
        printf("skip: no CUDA device\n");
        return T_SKIP;
    }
    tl_data_make(&D, "loaderdev", N);
    tl_write(&D);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    compare_paths(STK_DTYPE_UINT8, STK_NHWC, 0, s);
    compare_paths(STK_DTYPE_UINT8, STK_NCHW, 0, s);
    compare_paths(STK_DTYPE_FLOAT16, STK_NCHW, 1, s);
    compare_paths(STK_DTYPE_BFLOAT16, STK_NCHW, 1, s);
    compare_paths(STK_DTYPE_FLOAT32, STK_NHWC, 1, s);

    /* holding limit, release order, seek and restart */
    stk_loader *h = make(0, STK_DTYPE_FLOAT16, STK_NCHW, 1);
    T_OK(stk_loader_set(h, STK_P_DEVICE_BUFFERS, 2));
    for (int cycle = 0; cycle < 5; cycle++) {
        T_OK(stk_loader_start(h));
        const stk_batch *a, *b, *c;
        T_OK(stk_loader_next(h, s, -1, &a));
        T_OK(stk_loader_next(h, s, -1, &b));
        T_CHECK(stk_loader_next(h, s, -1, &c) == STK_E_STATE, "a third device batch is refused");
        T_OK(stk_loader_release(h, b, s));
        T_CHECK(stk_loader_next(h, s, -1, &c) == STK_E_STATE, "batch 2 needs batch 0's buffer");
        T_OK(stk_loader_release(h, a, s));
        T_OK(stk_loader_next(h, s, -1, &c));
        T_CHECK(c->number == 2, "batch 2 after the releases");
        T_OK(stk_loader_release(h, c, s));
        T_OK(stk_loader_seek(h, 1, 3 * BS));
        T_OK(stk_loader_next(h, s, -1, &c));
        T_CHECK(c->epoch == 1 && c->first_sample == 3 * BS, "seek on the device path");
        T_OK(stk_loader_release(h, c, s));
        T_OK(stk_loader_stop(h));
    }
    CK(cudaStreamSynchronize(s));
    stk_loader_destroy(h);
    CK(cudaStreamDestroy(s));
    tl_data_free(&D);
    printf("test_loader_device: ok\n");
    return 0;
}
#endif
