/* SPDX-License-Identifier: MIT */
/*
 * test_cuda_loader.c — device batches through the public loader API.
 *
 * Without a usable device (no GPU, or a build without CUDA): a loader asked for STK_P_DEVICE = 0
 * still delivers: host batches (device -1), stats.fallback_reason saying why
 * (STK_E_NODEVICE / STK_E_UNSUPPORTED), and the same images as a loader asked for host batches.
 * Then, with no device, exit 77.
 *
 * With a device: for several dtype/layout/normalisation settings, every device batch of an
 * epoch equals the host batch of an identical host loader (bit-exact for uint8, within 1 ulp
 * otherwise: the same uint8 pipeline, converted by the GPU kernel vs stk__convert_sample), with
 * equal labels and indices; and a trainer that creates and destroys a loader every epoch does
 * not grow device memory (cudaMemGetInfo).
 */
#include "testutil.h"

#include <string.h>

#ifdef STK_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

static const float k_mean[3] = {123.675f, 116.28f, 103.53f};
static const float k_std[3] = {58.395f, 57.12f, 57.375f};

static int g_side = 40; /* output width; height is 24 */

static stk_loader *make_loader(const char *root, int device, int dtype, int layout, int normalize)
{
    stk_loader *h = NULL;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 6));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 24));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, g_side));
    T_OK(stk_loader_set(h, STK_P_SEED, 5));
    T_OK(stk_loader_set(h, STK_P_DEVICE, device));
    T_OK(stk_loader_set(h, STK_P_DTYPE, dtype));
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, layout));
    if (normalize) {
        T_OK(stk_loader_set_floats(h, STK_P_MEAN, k_mean, 3));
        T_OK(stk_loader_set_floats(h, STK_P_STD, k_std, 3));
    }
    int rc = stk_loader_open(h, root);
    if (rc != STK_OK)
        T_FAIL("open %s: %s", root, stk_loader_last_error(h));
    rc = stk_loader_start(h);
    if (rc != STK_OK)
        T_FAIL("start: %s", stk_loader_last_error(h));
    return h;
}

static const stk_batch *next_ok(stk_loader *h, void *stream)
{
    const stk_batch *b = NULL;
    int rc = stk_loader_next(h, stream, 20000, &b);
    if (rc == STK_END)
        return NULL;
    if (rc != STK_OK)
        T_FAIL("next: %d %s: %s", rc, stk_status_name(rc), stk_loader_last_error(h));
    return b;
}

static void check_same_meta(const stk_batch *a, const stk_batch *b)
{
    T_CHECK(a->size == b->size && a->number == b->number, "batch %llu: size %u vs %u",
            (unsigned long long)a->number, a->size, b->size);
    T_CHECK(a->image_bytes == b->image_bytes, "image_bytes %zu vs %zu", a->image_bytes, b->image_bytes);
    T_CHECK(memcmp(a->labels, b->labels, a->size * sizeof *a->labels) == 0, "labels differ");
    T_CHECK(memcmp(a->indices, b->indices, a->size * sizeof *a->indices) == 0, "indices differ");
}

/* Without a usable device: host batches, a reason, the same images. */
static void test_fallback(const char *root)
{
    stk_loader *dev = make_loader(root, 0, STK_DTYPE_FLOAT16, STK_NCHW, 1);
    stk_loader *host = make_loader(root, -1, STK_DTYPE_FLOAT16, STK_NCHW, 1);
    stk_stats st;
    T_OK(stk_loader_stats(dev, &st));
    const int want = stk_has_feature(STK_FEATURE_CUDA) ? STK_E_NODEVICE : STK_E_UNSUPPORTED;
    T_CHECK(st.fallback_reason == want, "fallback_reason %d (%s), want %s", st.fallback_reason,
            stk_status_name(st.fallback_reason), stk_status_name(want));
    int batches = 0;
    for (;;) {
        const stk_batch *a = next_ok(dev, NULL), *b = next_ok(host, NULL);
        T_CHECK((a == NULL) == (b == NULL), "epochs of different lengths");
        if (!a)
            break;
        T_CHECK(a->device == -1, "batch on device %d without a device", a->device);
        T_CHECK(a->dtype == STK_DTYPE_FLOAT16 && a->layout == STK_NCHW, "dtype/layout");
        check_same_meta(a, b);
        T_CHECK(memcmp(a->images, b->images, a->image_bytes) == 0, "batch %d: images differ", batches);
        T_OK(stk_loader_release(dev, a, NULL));
        T_OK(stk_loader_release(host, b, NULL));
        batches++;
    }
    T_CHECK(batches > 0, "no batches");
    char report[4096];
    stk_loader_report(dev, report, sizeof report);
    printf("fallback: %d host batches (%s)\n", batches, stk_strerror(st.fallback_reason));
    stk_loader_destroy(dev);
    stk_loader_destroy(host);
}

#ifdef STK_TEST_CUDA

#define CK(call)                                                                               \
    do {                                                                                       \
        cudaError_t ck_e_ = (call);                                                            \
        if (ck_e_ != cudaSuccess)                                                              \
            T_FAIL("%s: %s", #call, cudaGetErrorString(ck_e_));                               \
    } while (0)

static int64_t ordered(uint32_t bits, int width)
{
    const uint32_t sign = 1u << (width - 1);
    return (bits & sign) ? -(int64_t)(bits & (sign - 1)) : (int64_t)bits;
}

static uint64_t max_ulp(const void *a, const void *b, size_t count, int dtype)
{
    uint64_t worst = 0;
    for (size_t i = 0; i < count; i++) {
        int64_t x, y;
        if (dtype == STK_DTYPE_UINT8) {
            x = ((const uint8_t *)a)[i];
            y = ((const uint8_t *)b)[i];
        } else if (dtype == STK_DTYPE_FLOAT32) {
            uint32_t u, v;
            memcpy(&u, (const char *)a + 4 * i, 4);
            memcpy(&v, (const char *)b + 4 * i, 4);
            x = ordered(u, 32);
            y = ordered(v, 32);
        } else {
            uint16_t u, v;
            memcpy(&u, (const char *)a + 2 * i, 2);
            memcpy(&v, (const char *)b + 2 * i, 2);
            x = ordered(u, 16);
            y = ordered(v, 16);
        }
        uint64_t d = (uint64_t)(x > y ? x - y : y - x);
        if (d > worst)
            worst = d;
    }
    return worst;
}

static void test_device_equals_host(const char *root, int dev, int dtype, int layout, int normalize)
{
    stk_loader *d = make_loader(root, dev, dtype, layout, normalize);
    stk_loader *hl = make_loader(root, -1, dtype, layout, normalize);
    cudaStream_t cs;
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    void *copy = NULL;
    int batches = 0;
    for (;;) {
        const stk_batch *a = next_ok(d, cs), *b = next_ok(hl, NULL);
        T_CHECK((a == NULL) == (b == NULL), "epochs of different lengths");
        if (!a)
            break;
        T_CHECK(a->device == dev, "batch on device %d, asked for %d", a->device, dev);
        check_same_meta(a, b);
        if (!copy)
            copy = malloc(a->sample_bytes * a->capacity);
        CK(cudaMemcpyAsync(copy, a->images, a->image_bytes, cudaMemcpyDeviceToHost, cs));
        CK(cudaStreamSynchronize(cs));
        T_OK(stk_loader_release(d, a, cs));
        const size_t es = a->image_bytes / ((size_t)a->size * a->channels * a->height * a->width);
        uint64_t u = max_ulp(copy, b->images, a->image_bytes / es, dtype);
        T_CHECK(u <= (dtype == STK_DTYPE_UINT8 ? 0u : 1u), "dtype %d layout %d norm %d batch %d: %llu ulp",
                dtype, layout, normalize, batches, (unsigned long long)u);
        T_OK(stk_loader_release(hl, b, NULL));
        batches++;
    }
    stk_stats st;
    T_OK(stk_loader_stats(d, &st));
    T_CHECK(st.h2d_bytes > 0 && st.device_bytes > 0 && st.device == dev, "stats: h2d %llu device %llu",
            (unsigned long long)st.h2d_bytes, (unsigned long long)st.device_bytes);
    printf("device == host: dtype %d layout %d norm %d, %d batches, h2d %.2f MB in %.4f s, convert %.4f s\n",
           dtype, layout, normalize, batches, st.h2d_bytes / 1e6, st.h2d_s, st.convert_s);
    free(copy);
    CK(cudaStreamDestroy(cs));
    stk_loader_destroy(d);
    stk_loader_destroy(hl);
}

static void test_epochs_no_growth(const char *root, int dev)
{
    size_t before = 0, after = 0, total = 0;
    g_side = 4000; /* 6 x 24 x 4000 x 3 float32 = 6.9 MB per device buffer: a leak shows */
    for (int epoch = 0; epoch < 12; epoch++) {
        if (epoch == 2)
            CK(cudaMemGetInfo(&before, &total));
        stk_loader *h = make_loader(root, dev, STK_DTYPE_FLOAT32, STK_NCHW, 1);
        T_OK(stk_loader_set_epoch(h, (uint64_t)epoch));
        const stk_batch *b;
        while ((b = next_ok(h, NULL)) != NULL)
            T_OK(stk_loader_release(h, b, NULL));
        stk_loader_destroy(h);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemGetInfo(&after, &total));
    g_side = 40;
    printf("per-epoch loaders: device memory free %zu before, %zu after 10 epochs\n", before, after);
    T_CHECK(after + (2u << 20) >= before, "device memory shrank by %zu bytes", before - after);
}
#endif

int main(void)
{
    char *tmp = t_tmpdir("cudaloader");
    char root[4096];
    snprintf(root, sizeof root, "%s/folder", tmp);
    t_make_imagefolder(root, 3, 7, 40, 90, 11);
    int ndev = stk_cuda_device_count();
    if (ndev == 0) {
        test_fallback(root);
        printf("no CUDA device: GPU part skipped\n");
        t_rmtree(tmp);
        free(tmp);
        return T_SKIP;
    }
#ifdef STK_TEST_CUDA
    const char *env = getenv("STK_TEST_DEVICE");
    int dev = env ? atoi(env) : 0;
    test_device_equals_host(root, dev, STK_DTYPE_UINT8, STK_NCHW, 0);
    test_device_equals_host(root, dev, STK_DTYPE_UINT8, STK_NHWC, 0);
    test_device_equals_host(root, dev, STK_DTYPE_FLOAT16, STK_NCHW, 1);
    test_device_equals_host(root, dev, STK_DTYPE_BFLOAT16, STK_NHWC, 1);
    test_device_equals_host(root, dev, STK_DTYPE_FLOAT32, STK_NCHW, 1);
    test_device_equals_host(root, dev, STK_DTYPE_FLOAT32, STK_NHWC, 0);
    test_epochs_no_growth(root, dev);
    t_rmtree(tmp);
    free(tmp);
    printf("ok\n");
    return 0;
#else
    T_FAIL("a device is present but the test was built without CUDA");
#endif
}
