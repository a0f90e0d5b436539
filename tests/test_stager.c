/* SPDX-License-Identifier: MIT */
/*
 * test_stager.c — the CUDA stager (src/stage/stager.h).
 *
 * Everywhere: the no-GPU behaviour: stk_cuda_device_count() is 0 without a device, host batch
 * memory is page-aligned, zeroed and writable, a stager cannot be created (STK_E_NODEVICE in a
 * CUDA build, STK_E_UNSUPPORTED without CUDA) and says why; bad configurations are refused.
 * Then, with no device, exit 77.
 *
 * With a device (CUDA builds): the device batch equals the host batch converted on the CPU by
 * stk__convert_sample (bit-exact for uint8, within 1 ulp for float types) for every dtype x
 * layout x normalisation, short batches and both kinds of caller stream; a slow consumer kernel
 * reading batch b while the stager writes b+1 sees no corruption over 1000 batches (and the
 * stager demonstrably waited for its releases); creating and destroying stagers does not grow
 * device memory; capacity errors are clear; a batch past 2^31 elements converts correctly.
 */
#include "augment.h"
#include "convert.h"
#include "stager.h"
#include "testutil.h"

#include <string.h>
#include <unistd.h>

#ifdef STK_TEST_CUDA
#include "tcuda.h"
#include <cuda_runtime_api.h>
#endif

static stk__stager_config base_config(int device)
{
    stk__stager_config c;
    memset(&c, 0, sizeof c);
    c.device = device;
    c.dtype = STK_DTYPE_FLOAT16;
    c.layout = STK_NCHW;
    c.normalize = 1;
    const float mean[3] = {123.675f, 116.28f, 103.53f}, std[3] = {58.395f, 57.12f, 57.375f};
    memcpy(c.mean, mean, sizeof mean);
    memcpy(c.std, std, sizeof std);
    c.nbuf = 2;
    c.batch_cap = 4;
    c.h = 16;
    c.w = 16;
    return c;
}

static void test_host_alloc(int device)
{
    char err[STK__ERRLEN] = "";
    const size_t sizes[] = {1, 4096, 3 * 224 * 224 * 17 + 5};
    for (size_t i = 0; i < STK__ARRAY_LEN(sizes); i++) {
        void *p = NULL;
        int pinned = -1;
        T_OK(stk__host_alloc(sizes[i], device, &p, &pinned, err));
        T_CHECK(p != NULL, "no memory for %zu bytes", sizes[i]);
        T_CHECK(pinned == 0 || pinned == 1, "pinned flag %d", pinned);
        if (device < 0 || stk_cuda_device_count() == 0)
            T_CHECK(pinned == 0, "device %d, %d devices: memory claims to be pinned", device,
                    stk_cuda_device_count());
        if (!pinned)
            T_CHECK((uintptr_t)p % stk__page_size() == 0, "%p not page-aligned", p);
        uint8_t *b = p;
        for (size_t j = 0; j < sizes[i]; j++)
            T_CHECK(b[j] == 0, "byte %zu of %zu not zeroed", j, sizes[i]);
        memset(p, 0xA5, sizes[i]);
        stk__host_free(p, pinned);
    }
    stk__host_free(NULL, 0);
    stk__host_free(NULL, 1);
}

static void test_bad_configs(void)
{
    char err[STK__ERRLEN];
    stk__stager *s;
    static const char *const cases[] = {"dtype 9",  "layout 5", "nbuf 0", "nbuf 17",
                                        "height 0", "batch 0",  "std 0",  "device -1"};
    for (size_t i = 0; i < STK__ARRAY_LEN(cases); i++) {
        stk__stager_config c = base_config(0);
        switch (i) {
        case 0: c.dtype = 9; break;
        case 1: c.layout = 5; break;
        case 2: c.nbuf = 0; break;
        case 3: c.nbuf = 17; break;
        case 4: c.h = 0; break;
        case 5: c.batch_cap = 0; break;
        case 6: c.std[1] = 0.0f; break;
        case 7: c.device = -1; break;
        }
        err[0] = 0;
        s = (stk__stager *)&c; /* must be reset to NULL */
        int rc = stk__stager_create(&s, &c, err);
        T_CHECK(s == NULL, "%s: handle set on failure", cases[i]);
        if (stk_has_feature(STK_FEATURE_CUDA))
            T_CHECK(rc == STK_E_INVALID && strstr(err, "stager"), "%s: rc %d (%s) err '%s'",
                    cases[i], rc, stk_status_name(rc), err);
        else
            T_CHECK(rc == STK_E_UNSUPPORTED, "%s: rc %d", cases[i], rc);
    }
}

static void test_no_device_create(void)
{
    char err[STK__ERRLEN] = "";
    stk__stager_config c = base_config(0);
    stk__stager *s = NULL;
    int rc = stk__stager_create(&s, &c, err);
    T_CHECK(s == NULL, "handle set on failure");
    if (stk_has_feature(STK_FEATURE_CUDA)) {
        T_CHECK(rc == STK_E_NODEVICE, "rc %d (%s), err '%s'", rc, stk_status_name(rc), err);
        T_CHECK(strstr(err, "CUDA device") != NULL, "message does not say why: '%s'", err);
    } else {
        T_CHECK(rc == STK_E_UNSUPPORTED, "rc %d (%s), err '%s'", rc, stk_status_name(rc), err);
        T_CHECK(strstr(err, "without") != NULL && strstr(err, "CUDA") != NULL,
                "message does not say why: '%s'", err);
    }
    /* The other entry points without a stager: no crash, a status. */
    T_CHECK(stk__stager_buffer(NULL, 0) == NULL, "buffer of no stager");
    stk__stager_stats st;
    stk__stager_get_stats(NULL, &st);
    T_CHECK(st.h2d_bytes == 0 && st.device_bytes == 0, "stats of no stager");
    stk__stager_destroy(NULL);
    printf("no device: %s\n", err);
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

/* Largest ulp distance between two arrays of COUNT elements of DTYPE; *at = its index. */
static uint64_t max_ulp(const void *a, const void *b, size_t count, int dtype, size_t *at)
{
    uint64_t worst = 0;
    *at = 0;
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
        if (d > worst) {
            worst = d;
            *at = i;
        }
    }
    return worst;
}

static const char *dtype_name(int d)
{
    static const char *n[] = {"uint8", "float16", "bfloat16", "float32"};
    return n[d];
}

/* Device output == stk__convert_sample on the CPU, for every dtype x layout x normalisation. */
static void test_matches_cpu(int dev)
{
    char err[STK__ERRLEN] = "";
    const int h = 17, w = 23;
    const uint32_t cap = 5, n = 4; /* a short batch: the last sample must not be needed */
    const size_t px = (size_t)h * w * 3;
    void *host = NULL;
    int pinned = 0;
    T_OK(stk__host_alloc(px * cap, dev, &host, &pinned, err));
    T_CHECK(pinned == 1, "host batch memory not pinned with a device");
    for (uint32_t s = 0; s < n; s++)
        t_make_rgb((uint8_t *)host + s * px, w, h, 1000 + s);
    ((uint8_t *)host)[0] = 0;
    ((uint8_t *)host)[1] = 255;
    const float norms[3][2][3] = {
        {{0, 0, 0}, {1, 1, 1}},
        {{123.675f, 116.28f, 103.53f}, {58.395f, 57.12f, 57.375f}},
        /* extremes: float16 overflow to inf, float16 subnormals, odd divisors */
        {{0.0f, 127.5f, 255.0f}, {1e-3f, 1e6f, 0.37f}},
    };
    cudaStream_t cs;
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    uint8_t *got = malloc(px * 4 * cap), *want = malloc(px * 4 * cap);
    T_CHECK(got && want, "malloc");
    int combos = 0;
    for (int dtype = 0; dtype < 4; dtype++)
        for (int layout = 0; layout < 2; layout++)
            for (int ni = 0; ni < 3; ni++) {
                stk__stager_config c = base_config(dev);
                c.dtype = dtype;
                c.layout = layout;
                c.normalize = ni > 0;
                memcpy(c.mean, norms[ni][0], sizeof c.mean);
                memcpy(c.std, norms[ni][1], sizeof c.std);
                c.batch_cap = cap;
                c.h = h;
                c.w = w;
                c.nbuf = 2;
                stk__stager *s = NULL;
                T_OK(stk__stager_create(&s, &c, err));
                const size_t es = stk__dtype_size(dtype), sb = px * es;
                /* odd combos use the legacy default stream (NULL) */
                cudaStream_t use = (combos & 1) ? NULL : cs;
                for (int round = 0; round < 3; round++) {
                    const int b = round % 2;
                    T_OK(stk__stager_submit(s, b, host, n, err));
                    T_OK(stk__stager_wait_copied(s, b, err));
                    T_OK(stk__stager_hand_out(s, b, use, err));
                    memset(got, 0x5C, sb * n);
                    CK(cudaMemcpyAsync(got, stk__stager_buffer(s, b), sb * n, cudaMemcpyDeviceToHost, use));
                    CK(cudaStreamSynchronize(use));
                    T_OK(stk__stager_release(s, b, use, err));
                }
                for (uint32_t k = 0; k < n; k++)
                    stk__convert_sample((const uint8_t *)host + k * px, h, w, dtype, layout,
                                        c.normalize, c.mean, c.std, want + k * sb);
                size_t at = 0;
                uint64_t d = max_ulp(got, want, px * n, dtype, &at);
                const uint64_t allowed = dtype == STK_DTYPE_UINT8 ? 0 : 1;
                T_CHECK(d <= allowed, "%s %s norm %d: element %zu differs by %llu ulp", dtype_name(dtype),
                        layout == STK_NCHW ? "NCHW" : "NHWC", ni, at, (unsigned long long)d);
                stk__stager_stats st;
                stk__stager_get_stats(s, &st);
                T_CHECK(st.h2d_bytes == 3 * px * n, "h2d_bytes %llu", (unsigned long long)st.h2d_bytes);
                T_CHECK(st.h2d_s > 0, "no copy time measured");
                T_CHECK(st.device_bytes >= 2 * sb * cap, "device_bytes %llu",
                        (unsigned long long)st.device_bytes);
                T_CHECK(atomic_load(&st.clock.items) == 3, "items");
                stk__stager_destroy(s);
                combos++;
            }
    printf("device == CPU conversion for %d dtype x layout x normalisation combinations\n", combos);
    free(got);
    free(want);
    CK(cudaStreamDestroy(cs));
    stk__host_free(host, pinned);
}

/* A consumer that reads batch b slowly while the stager stages b+1 and b+2: every consumer
 * kernel first spins this long, then checks every element of its batch. */
static const uint64_t k_consume_ns = 500000;

static void test_race(int dev, int dtype, int layout, int batches)
{
    char err[STK__ERRLEN] = "";
    const int h = 32, w = 32, slots = 3;
    const uint32_t cap = 8;
    const size_t px = (size_t)h * w * 3;
    stk__stager_config c = base_config(dev);
    c.dtype = dtype;
    c.layout = layout;
    c.normalize = 0;
    c.batch_cap = cap;
    c.h = h;
    c.w = w;
    c.nbuf = 2;
    stk__stager *s = NULL;
    T_OK(stk__stager_create(&s, &c, err));
    void *host[3];
    int pinned[3];
    for (int i = 0; i < slots; i++)
        T_OK(stk__host_alloc(px * cap, dev, &host[i], &pinned[i], err));
    cudaStream_t cs;
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    unsigned long long *errors = NULL, nerr = 0;
    CK(cudaMalloc((void **)&errors, sizeof *errors));
    CK(cudaMemset(errors, 0, sizeof *errors));
    uint64_t staged = 0;
    for (int b = 0; b < batches; b++) {
        const int slot = b % slots, buf = b % c.nbuf;
        const uint32_t n = (b % 7 == 6) ? cap - 3 : cap;
        /* The slot's last copy finished: wait_copied returned for it. */
        uint8_t *p = host[slot];
        for (uint32_t k = 0; k < n; k++)
            for (size_t q = 0; q < (size_t)h * w; q++)
                for (int ch = 0; ch < 3; ch++)
                    p[k * px + q * 3 + ch] = t_cuda_pattern((uint64_t)b, k, q, ch);
        T_OK(stk__stager_submit(s, buf, p, n, err));
        T_OK(stk__stager_wait_copied(s, buf, err));
        staged += n * px;
        T_OK(stk__stager_hand_out(s, buf, cs, err));
        CK(t_cuda_consume(stk__stager_buffer(s, buf), dtype, layout, n, h, w, (uint64_t)b,
                          k_consume_ns, errors, cs));
        T_OK(stk__stager_release(s, buf, cs, err));
    }
    CK(cudaStreamSynchronize(cs));
    CK(cudaMemcpy(&nerr, errors, sizeof nerr, cudaMemcpyDeviceToHost));
    stk__stager_stats st;
    stk__stager_get_stats(s, &st);
    printf("race %s %s: %d batches, %llu wrong elements, release wait %.3f s, h2d %.3f s, convert %.3f s\n",
           dtype_name(dtype), layout == STK_NCHW ? "NCHW" : "NHWC", batches, nerr, st.release_wait_s,
           st.h2d_s, st.convert_s);
    T_CHECK(nerr == 0, "%llu elements corrupted: the stager overwrote a buffer the consumer was reading", nerr);
    T_CHECK(st.h2d_bytes == staged, "h2d_bytes %llu, staged %llu", (unsigned long long)st.h2d_bytes,
            (unsigned long long)staged);
    /* The consumer (500 us per batch) is slower than this producer (filling a slot takes well
     * under that), so the stager must have spent much of the run waiting for releases. */
    T_CHECK(st.release_wait_s > batches * (k_consume_ns / 1e9) * 0.1,
            "release wait %.4f s: the stager did not wait for the consumer", st.release_wait_s);
    CK(cudaFree(errors));
    CK(cudaStreamDestroy(cs));
    for (int i = 0; i < slots; i++)
        stk__host_free(host[i], pinned[i]);
    stk__stager_destroy(s);
}

static size_t device_free(void)
{
    size_t f = 0, t = 0;
    CK(cudaMemGetInfo(&f, &t));
    return f;
}

/* A trainer creates and destroys loaders (and so stagers and pinned rings) every epoch. */
static void test_no_growth(int dev)
{
    char err[STK__ERRLEN] = "";
    cudaStream_t cs;
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    size_t before = 0;
    for (int epoch = 0; epoch < 40; epoch++) {
        if (epoch == 2)
            before = device_free();
        stk__stager_config c = base_config(dev);
        c.batch_cap = 32;
        c.h = c.w = 64;
        c.nbuf = 3;
        c.dtype = epoch % 4;
        stk__stager *s = NULL;
        T_OK(stk__stager_create(&s, &c, err));
        void *host = NULL;
        int pinned = 0;
        T_OK(stk__host_alloc((size_t)c.batch_cap * c.h * c.w * 3, dev, &host, &pinned, err));
        for (int b = 0; b < 5; b++) {
            T_OK(stk__stager_submit(s, b % 3, host, c.batch_cap, err));
            T_OK(stk__stager_wait_copied(s, b % 3, err));
            T_OK(stk__stager_hand_out(s, b % 3, cs, err));
            T_OK(stk__stager_release(s, b % 3, cs, err));
        }
        stk__stager_destroy(s);
        stk__host_free(host, pinned);
    }
    CK(cudaStreamSynchronize(cs));
    const size_t after = device_free();
    printf("device memory free: %zu before, %zu after 38 create/destroy cycles\n", before, after);
    /* a leak of any one buffer per cycle would be >= 38 x 384 KiB */
    T_CHECK(after + (4u << 20) >= before, "device memory shrank by %zu bytes", before - after);
    CK(cudaStreamDestroy(cs));
}

static void test_capacity_errors(int dev)
{
    char err[STK__ERRLEN] = "";
    stk__stager *s = NULL;
    stk__stager_config c = base_config(stk_cuda_device_count());
    int rc = stk__stager_create(&s, &c, err);
    T_CHECK(rc == STK_E_NODEVICE && strstr(err, "requested"), "missing device: rc %d '%s'", rc, err);

    c = base_config(dev);
    c.max_device_bytes = 1000;
    rc = stk__stager_create(&s, &c, err);
    T_CHECK(rc == STK_E_NOMEM && strstr(err, "STK_P_MAX_DEVICE_BYTES"), "cap: rc %d '%s'", rc, err);

    c = base_config(dev);
    c.batch_cap = 65536;
    c.h = c.w = 4096;
    c.dtype = STK_DTYPE_FLOAT32;
    rc = stk__stager_create(&s, &c, err);
    T_CHECK(rc == STK_E_NOMEM && strstr(err, "free"), "too big: rc %d '%s'", rc, err);
    T_CHECK(s == NULL, "handle on failure");
    printf("capacity errors: %s\n", err);

    c = base_config(dev);
    T_OK(stk__stager_create(&s, &c, err));
    uint8_t host[16 * 16 * 3 * 5];
    rc = stk__stager_submit(s, 2, host, 1, err);
    T_CHECK(rc == STK_E_INVALID, "buffer 2 of 2: rc %d", rc);
    rc = stk__stager_submit(s, 0, host, 5, err);
    T_CHECK(rc == STK_E_INVALID, "5 samples in a batch of 4: rc %d", rc);
    rc = stk__stager_hand_out(s, -1, NULL, err);
    T_CHECK(rc == STK_E_INVALID, "hand out buffer -1: rc %d", rc);
    /* pageable source memory works too (a synchronous copy underneath) */
    memset(host, 7, sizeof host);
    T_OK(stk__stager_submit(s, 0, host, 4, err));
    T_OK(stk__stager_wait_copied(s, 0, err));
    stk__stager_destroy(s);
}

/* More than 2^31 output elements: indices must be 64-bit all the way. */
static void test_big_batch(int dev)
{
    const uint32_t n = 2800;
    const int h = 512, w = 512;
    const size_t px = (size_t)h * w * 3, in = px * n, outb = in * 2;
    long pages = sysconf(_SC_PHYS_PAGES);
    if (device_free() < in + 2 * outb + (1ull << 30) || pages < 0 ||
        (size_t)pages * stk__page_size() < 4 * in) {
        printf("big batch: skipped (not enough device or host memory)\n");
        return;
    }
    char err[STK__ERRLEN] = "";
    stk__stager_config c = base_config(dev);
    c.batch_cap = n;
    c.h = h;
    c.w = w;
    c.dtype = STK_DTYPE_FLOAT16;
    c.layout = STK_NCHW;
    stk__stager *s = NULL;
    T_OK(stk__stager_create(&s, &c, err));
    void *host = NULL;
    int pinned = 0;
    T_OK(stk__host_alloc(in, dev, &host, &pinned, err));
    const uint32_t check[] = {0, 1, n / 2, n - 2, n - 1};
    for (size_t i = 0; i < STK__ARRAY_LEN(check); i++)
        t_make_rgb((uint8_t *)host + check[i] * px, w, h, 77 + i);
    T_OK(stk__stager_submit(s, 1, host, n, err));
    T_OK(stk__stager_wait_copied(s, 1, err));
    T_OK(stk__stager_hand_out(s, 1, NULL, err));
    uint16_t *got = malloc(px * 2), *want = malloc(px * 2);
    T_CHECK(got && want, "malloc");
    for (size_t i = 0; i < STK__ARRAY_LEN(check); i++) {
        CK(cudaMemcpy(got, (char *)stk__stager_buffer(s, 1) + check[i] * px * 2, px * 2,
                      cudaMemcpyDeviceToHost));
        stk__convert_sample((const uint8_t *)host + check[i] * px, h, w, c.dtype, c.layout, 1,
                            c.mean, c.std, want);
        size_t at;
        uint64_t d = max_ulp(got, want, px, c.dtype, &at);
        T_CHECK(d <= 1, "big batch sample %u: element %zu differs by %llu ulp", check[i], at,
                (unsigned long long)d);
    }
    T_OK(stk__stager_release(s, 1, NULL, err));
    printf("big batch: %u x %d x %d float16 (%zu elements) correct at first, middle and last samples\n",
           n, h, w, in);
    free(got);
    free(want);
    stk__host_free(host, pinned);
    stk__stager_destroy(s);
}

static void test_gpu(int dev)
{
    test_host_alloc(dev);
    test_matches_cpu(dev);
    test_race(dev, STK_DTYPE_UINT8, STK_NCHW, 1000);
    test_race(dev, STK_DTYPE_UINT8, STK_NHWC, 1000);
    test_race(dev, STK_DTYPE_FLOAT32, STK_NCHW, 1000);
    test_capacity_errors(dev);
    test_no_growth(dev);
    test_big_batch(dev);
}
#endif

int main(void)
{
    test_host_alloc(-1);
    test_host_alloc(0);
    test_bad_configs();
    const int ndev = stk_cuda_device_count();
    printf("stk_cuda_device_count() = %d, CUDA build: %d\n", ndev, stk_has_feature(STK_FEATURE_CUDA));
    T_CHECK(ndev >= 0, "negative device count");
    if (!stk_has_feature(STK_FEATURE_CUDA))
        T_CHECK(ndev == 0, "devices without CUDA");
    if (ndev == 0) {
        test_no_device_create();
        printf("no CUDA device: GPU part skipped\n");
        return T_SKIP;
    }
#ifdef STK_TEST_CUDA
    const char *env = getenv("STK_TEST_DEVICE");
    int dev = env ? atoi(env) : 0;
    test_gpu(dev);
    printf("ok\n");
    return 0;
#else
    T_FAIL("a device is present but the test was built without CUDA");
#endif
}
