/* SPDX-License-Identifier: MIT */
/*
 * stager_host.c — the CUDA stager, host side (builds with STK_HAVE_CUDA only; without CUDA,
 * stager_none.c provides the same functions and this file compiles to nothing). It moves each
 * completed host batch to the GPU and converts it there on its own stream, ordered against the
 * caller's stream by events only: the caller never waits on the host, and a device buffer is
 * never overwritten while work the caller queued before releasing it may still read it.
 */
#ifdef STK_HAVE_CUDA

#include "stager.h"
#include "stager_cuda.h"
#include "convert.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STK__STAGER_MAXBUF 16

/*
 * Errors. Every CUDA call is checked; a failure returns STK_E_CUDA with the call and
 * cudaGetErrorString in the message. Nothing aborts. A CUDA runtime with no driver or no GPU
 * counts as 0 devices. No CUDA call is made before the first stoker call that needs one.
 */
static int cuda_fail(char *err, const char *call, cudaError_t e)
{
    /* Clear the thread's last-error state so that a later, unrelated check is not confused by
     * it (sticky errors stay sticky whatever is done here). */
    (void)cudaGetLastError();
    if (err)
        return stk__err(err, STK_E_CUDA, "%s: %s (%s)", call, cudaGetErrorString(e),
                        cudaGetErrorName(e));
    return STK_E_CUDA;
}

#define CU_CHECK(err, call)                                                                    \
    do {                                                                                       \
        cudaError_t cu_e_ = (call);                                                            \
        if (cu_e_ != cudaSuccess)                                                              \
            return cuda_fail((err), #call, cu_e_);                                             \
    } while (0)

/*
 * Devices. cudaSetDevice is per host thread, so every function here that makes a CUDA call
 * first selects the stager's device: the stager thread, the consumer thread and the thread
 * that destroys may all differ. Functions called from the caller's threads (create, hand_out,
 * release, destroy, host_alloc) put the thread's previous device back before they return, so a
 * trainer's thread is left on the device it chose.
 */
/* Make DEVICE current on this (caller's) thread and remember the thread's previous device, so
 * that a trainer thread working on another device is left as it was. The stager's own thread
 * just sets it. */
static int dev_push(int device, int *prev, char *err)
{
    CU_CHECK(err, cudaGetDevice(prev));
    if (*prev != device)
        CU_CHECK(err, cudaSetDevice(device));
    return STK_OK;
}

static void dev_pop(int device, int prev)
{
    if (prev != device && cudaSetDevice(prev) != cudaSuccess)
        (void)cudaGetLastError();
}

int stk_cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

int stk__host_alloc(size_t bytes, int device, void **out, int *pinned, char *err)
{
    *out = NULL;
    *pinned = 0;
    if (bytes == 0)
        bytes = 1;
    if (device >= 0 && device < stk_cuda_device_count()) {
        void *p = NULL;
        int prev = 0;
        int rc = dev_push(device, &prev, err);
        if (rc != STK_OK)
            return rc;
        cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
        dev_pop(device, prev);
        if (e != cudaSuccess) {
            char call[96];
            snprintf(call, sizeof call, "cudaHostAlloc(%zu bytes)", bytes);
            return cuda_fail(err, call, e);
        }
        memset(p, 0, bytes);
        *out = p;
        *pinned = 1;
        return STK_OK;
    }
    void *p = stk__alloc_aligned(stk__page_size(), bytes);
    if (!p)
        return stk__err(err, STK_E_NOMEM, "cannot allocate %zu bytes of host batch memory", bytes);
    *out = p;
    return STK_OK;
}

void stk__host_free(void *p, int pinned)
{
    if (!p)
        return;
    if (pinned) {
        /* Nothing to report to: a failure here (a dead context) leaks at worst. */
        if (cudaFreeHost(p) != cudaSuccess)
            (void)cudaGetLastError();
        return;
    }
    stk__free_aligned(p);
}

/*
 * What it does. The loader's stager thread hands each completed host batch (uint8 RGB HWC in a
 * pinned slot of the host ring) to stk__stager_submit with the index of a device buffer. On one
 * non-blocking stream the stager then
 *   1. waits, on the host, for the buffer's `released` event: the event the consumer recorded on
 *      its own stream when it gave the previous batch in that buffer back. This is the only host
 *      wait of the stager and it is counted as release_wait_s ("the stager waited for the
 *      caller");
 *   2. records `t0`, cudaMemcpyAsync's the batch into a device staging buffer (or, for uint8
 *      NHWC, straight into the output buffer) and records `copied`: when it completes the host
 *      slot may be refilled (stk__stager_wait_copied);
 *   3. launches the conversion kernel (stager_cuda.cu) into the output buffer and records
 *      `ready`.
 * Hand-off: stk__stager_hand_out makes the caller's stream wait on `ready`
 * (cudaStreamWaitEvent: no host synchronisation); stk__stager_release records `released` on the
 * caller's stream. The device buffer is therefore never overwritten while kernels the caller
 * queued before releasing it may still read it, and the caller never waits on the host.
 *
 * One staging buffer serves all output buffers: copies and kernels run in order on the one
 * stream, so the copy of batch b+1 starts only after the kernel of batch b has read the staging
 * buffer.
 */
struct stk__stager {
    stk__stager_config cfg;
    size_t in_bytes;  /* uint8 HWC bytes of a full batch */
    size_t out_bytes; /* converted bytes of a full batch */
    int direct;       /* uint8 NHWC: copy straight into the output buffer, no kernel */
    cudaStream_t stream;
    void *staging;
    void *buf[STK__STAGER_MAXBUF];
    cudaEvent_t t0[STK__STAGER_MAXBUF], copied[STK__STAGER_MAXBUF], ready[STK__STAGER_MAXBUF];
    cudaEvent_t released[STK__STAGER_MAXBUF];
    /* Submitted batches whose copy / conversion time is not yet collected. Touched by the stager
     * thread (submit, wait_copied) and by stats readers: under mu. */
    pthread_mutex_t mu;
    int copy_pending[STK__STAGER_MAXBUF], conv_pending[STK__STAGER_MAXBUF];
    uint64_t h2d_bytes;
    double h2d_s, convert_s, release_wait_s;
    size_t device_bytes;
    stk__stage_clock clock;
};

static size_t dtype_bytes(int dtype)
{
    switch (dtype) {
    case STK_DTYPE_UINT8:
        return 1;
    case STK_DTYPE_FLOAT16:
    case STK_DTYPE_BFLOAT16:
        return 2;
    case STK_DTYPE_FLOAT32:
        return 4;
    default:
        return 0;
    }
}

static int check_config(const stk__stager_config *c, char *err)
{
    if (c->device < 0)
        return stk__err(err, STK_E_INVALID, "stager: device %d is not a CUDA device ordinal",
                        c->device);
    if (dtype_bytes(c->dtype) == 0)
        return stk__err(err, STK_E_INVALID, "stager: unknown dtype %d", c->dtype);
    if (c->layout != STK_NCHW && c->layout != STK_NHWC)
        return stk__err(err, STK_E_INVALID, "stager: unknown layout %d", c->layout);
    if (c->nbuf < 1 || c->nbuf > STK__STAGER_MAXBUF)
        return stk__err(err, STK_E_INVALID, "stager: %d device buffers (allowed 1..%d)", c->nbuf,
                        STK__STAGER_MAXBUF);
    if (c->batch_cap == 0 || c->h <= 0 || c->w <= 0)
        return stk__err(err, STK_E_INVALID, "stager: empty batch shape %u x %d x %d",
                        c->batch_cap, c->h, c->w);
    if (c->normalize && c->dtype != STK_DTYPE_UINT8) {
        for (int i = 0; i < 3; i++)
            if (!(c->std[i] != 0.0f) || c->std[i] != c->std[i] || c->mean[i] != c->mean[i])
                return stk__err(err, STK_E_INVALID,
                                "stager: channel %d: std %g / mean %g cannot normalise", i,
                                (double)c->std[i], (double)c->mean[i]);
    }
    return STK_OK;
}

/*
 * Stats. Copy time and conversion time come from the events (t0 -> copied, copied -> ready) and
 * are collected by the stager thread once the events have completed: in wait_copied (whatever
 * has completed by then) and, at the latest, before the buffer is reused. get_stats makes no
 * CUDA call.
 */
/* Collect the timing of BUF's last submit. BLOCK: wait for the events, else only take what has
 * completed. Caller holds s->mu. */
static void collect_locked(stk__stager *s, int b, int block)
{
    float ms = 0.0f;
    if (s->copy_pending[b]) {
        cudaError_t e = block ? cudaEventSynchronize(s->copied[b]) : cudaEventQuery(s->copied[b]);
        if (e == cudaSuccess && cudaEventElapsedTime(&ms, s->t0[b], s->copied[b]) == cudaSuccess) {
            s->h2d_s += ms / 1e3;
            s->copy_pending[b] = 0;
        } else if (e != cudaErrorNotReady) {
            s->copy_pending[b] = 0; /* failed: the error surfaced (or will) elsewhere */
        }
        (void)cudaGetLastError();
    }
    if (s->conv_pending[b] && !s->copy_pending[b]) {
        cudaError_t e = block ? cudaEventSynchronize(s->ready[b]) : cudaEventQuery(s->ready[b]);
        if (e == cudaSuccess && cudaEventElapsedTime(&ms, s->copied[b], s->ready[b]) == cudaSuccess) {
            s->convert_s += ms / 1e3;
            s->conv_pending[b] = 0;
        } else if (e != cudaErrorNotReady) {
            s->conv_pending[b] = 0;
        }
        (void)cudaGetLastError();
    }
}

void stk__stager_destroy(stk__stager *s)
{
    if (!s)
        return;
    /* Errors below cannot be reported; a sticky error means the context is gone anyway. */
    int prev = s->cfg.device;
    char ignored[STK__ERRLEN];
    if (dev_push(s->cfg.device, &prev, ignored) == STK_OK && s->stream)
        (void)cudaStreamSynchronize(s->stream);
    for (int b = 0; b < s->cfg.nbuf; b++) {
        /* The consumer's last kernels may still read a buffer: wait for its releases. */
        if (s->released[b])
            (void)cudaEventSynchronize(s->released[b]);
    }
    for (int b = 0; b < s->cfg.nbuf; b++) {
        if (s->buf[b])
            (void)cudaFree(s->buf[b]);
        if (s->t0[b])
            (void)cudaEventDestroy(s->t0[b]);
        if (s->copied[b])
            (void)cudaEventDestroy(s->copied[b]);
        if (s->ready[b])
            (void)cudaEventDestroy(s->ready[b]);
        if (s->released[b])
            (void)cudaEventDestroy(s->released[b]);
    }
    if (s->staging)
        (void)cudaFree(s->staging);
    if (s->stream)
        (void)cudaStreamDestroy(s->stream);
    (void)cudaGetLastError();
    dev_pop(s->cfg.device, prev);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int create_resources(stk__stager *s, char *err)
{
    const stk__stager_config *c = &s->cfg;
    CU_CHECK(err, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    for (int b = 0; b < c->nbuf; b++) {
        /* Blocking sync: the stager thread sleeps instead of spinning a core the decode pool
         * needs. `released` is never timed. */
        CU_CHECK(err, cudaEventCreateWithFlags(&s->t0[b], cudaEventBlockingSync));
        CU_CHECK(err, cudaEventCreateWithFlags(&s->copied[b], cudaEventBlockingSync));
        CU_CHECK(err, cudaEventCreateWithFlags(&s->ready[b], cudaEventBlockingSync));
        CU_CHECK(err, cudaEventCreateWithFlags(&s->released[b],
                                               cudaEventBlockingSync | cudaEventDisableTiming));
    }
    size_t free_b = 0, total_b = 0;
    CU_CHECK(err, cudaMemGetInfo(&free_b, &total_b));
    if (s->device_bytes > free_b)
        return stk__err(err, STK_E_NOMEM,
                        "stager: %d device buffers of %zu bytes%s need %zu bytes; CUDA device %d "
                        "has %zu of %zu bytes free (lower STK_P_BATCH_SIZE or STK_P_DEVICE_BUFFERS)",
                        c->nbuf, s->out_bytes, s->direct ? "" : " plus a staging buffer",
                        s->device_bytes, c->device, free_b, total_b);
    for (int b = 0; b < c->nbuf; b++) {
        cudaError_t e = cudaMalloc(&s->buf[b], s->out_bytes);
        if (e != cudaSuccess) {
            char call[96];
            snprintf(call, sizeof call, "cudaMalloc(%zu bytes) for device buffer %d", s->out_bytes, b);
            return cuda_fail(err, call, e);
        }
    }
    if (!s->direct) {
        cudaError_t e = cudaMalloc(&s->staging, s->in_bytes);
        if (e != cudaSuccess) {
            char call[96];
            snprintf(call, sizeof call, "cudaMalloc(%zu bytes) for the staging buffer", s->in_bytes);
            return cuda_fail(err, call, e);
        }
    }
    return STK_OK;
}

int stk__stager_create(stk__stager **out, const stk__stager_config *cfg, char *err)
{
    *out = NULL;
    int rc = check_config(cfg, err);
    if (rc != STK_OK)
        return rc;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return stk__err(err, STK_E_NODEVICE, "no usable CUDA device (cudaGetDeviceCount: %s)",
                        cudaGetErrorString(e));
    }
    if (cfg->device >= n)
        return stk__err(err, STK_E_NODEVICE, "CUDA device %d requested but %d device%s present",
                        cfg->device, n, n == 1 ? " is" : "s are");

    const size_t px = (size_t)cfg->batch_cap * (size_t)cfg->h * (size_t)cfg->w * 3;
    const size_t in_bytes = px;
    const size_t out_bytes = px * dtype_bytes(cfg->dtype);
    const int direct = cfg->dtype == STK_DTYPE_UINT8 && cfg->layout == STK_NHWC;
    const size_t device_bytes = out_bytes * (size_t)cfg->nbuf + (direct ? 0 : in_bytes);
    if (cfg->max_device_bytes && device_bytes > cfg->max_device_bytes)
        return stk__err(err, STK_E_NOMEM,
                        "stager: %d device buffers of %zu bytes%s need %zu bytes, over "
                        "STK_P_MAX_DEVICE_BYTES = %zu",
                        cfg->nbuf, out_bytes, direct ? "" : " plus a staging buffer of the uint8 batch",
                        device_bytes, cfg->max_device_bytes);

    stk__stager *s = calloc(1, sizeof *s);
    if (!s)
        return stk__err(err, STK_E_NOMEM, "stager: out of memory");
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return stk__err(err, STK_E_NOMEM, "stager: cannot create a mutex");
    }
    s->cfg = *cfg;
    s->in_bytes = in_bytes;
    s->out_bytes = out_bytes;
    s->direct = direct;
    s->device_bytes = device_bytes;
    atomic_store(&s->clock.threads, 1);
    int prev = 0;
    rc = dev_push(cfg->device, &prev, err);
    if (rc == STK_OK) {
        rc = create_resources(s, err);
        dev_pop(cfg->device, prev);
    }
    if (rc != STK_OK) {
        stk__stager_destroy(s);
        return rc;
    }
    *out = s;
    return STK_OK;
}

int stk__stager_set_size(stk__stager *s, int h, int w, char *err)
{
    if (!s || h <= 0 || w <= 0 || (size_t)h * (size_t)w * 3 * s->cfg.batch_cap > s->in_bytes)
        return stk__err(err, STK_E_INVALID, "stager: sample size %d x %d is above the %zu bytes "
                        "per batch its buffers hold", h, w, s ? s->in_bytes : (size_t)0);
    s->cfg.h = h;
    s->cfg.w = w;
    return STK_OK;
}

static int check_buf(const stk__stager *s, int b, char *err)
{
    if (!s || b < 0 || b >= s->cfg.nbuf)
        return stk__err(err, STK_E_INVALID, "stager: no device buffer %d", b);
    return STK_OK;
}

int stk__stager_submit(stk__stager *s, int b, const void *host, uint32_t n, char *err)
{
    int rc = check_buf(s, b, err);
    if (rc != STK_OK)
        return rc;
    if (n > s->cfg.batch_cap || (!host && n > 0))
        return stk__err(err, STK_E_INVALID, "stager: batch of %u samples (capacity %u)", n,
                        s->cfg.batch_cap);
    const uint64_t start = stk__now_ns();
    CU_CHECK(err, cudaSetDevice(s->cfg.device));

    /* The caller's release of the batch that last used this buffer. */
    cudaError_t e = cudaEventSynchronize(s->released[b]);
    const uint64_t waited = stk__now_ns() - start;
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventSynchronize(released)", e);
    pthread_mutex_lock(&s->mu);
    s->release_wait_s += waited / 1e9;
    collect_locked(s, b, 1);
    pthread_mutex_unlock(&s->mu);

    const size_t bytes = (size_t)n * s->cfg.h * s->cfg.w * 3;
    void *dst = s->direct ? s->buf[b] : s->staging;
    CU_CHECK(err, cudaEventRecord(s->t0[b], s->stream));
    if (bytes)
        CU_CHECK(err, cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s->stream));
    CU_CHECK(err, cudaEventRecord(s->copied[b], s->stream));
    if (!s->direct && n > 0) {
        e = stk__cuda_convert(s->staging, s->buf[b], n, s->cfg.h, s->cfg.w, s->cfg.dtype,
                              s->cfg.layout, s->cfg.normalize, s->cfg.mean, s->cfg.std, s->stream);
        if (e != cudaSuccess)
            return cuda_fail(err, "stager conversion kernel launch", e);
    }
    CU_CHECK(err, cudaEventRecord(s->ready[b], s->stream));

    pthread_mutex_lock(&s->mu);
    s->h2d_bytes += bytes;
    s->copy_pending[b] = 1;
    s->conv_pending[b] = 1;
    pthread_mutex_unlock(&s->mu);
    stk__clock_add(&s->clock.blocked_ns, waited);
    stk__clock_add(&s->clock.busy_ns, stk__now_ns() - start - waited);
    atomic_fetch_add(&s->clock.items, 1);
    atomic_fetch_add(&s->clock.bytes, bytes);
    return STK_OK;
}

int stk__stager_wait_copied(stk__stager *s, int b, char *err)
{
    int rc = check_buf(s, b, err);
    if (rc != STK_OK)
        return rc;
    CU_CHECK(err, cudaSetDevice(s->cfg.device));
    const uint64_t start = stk__now_ns();
    cudaError_t e = cudaEventSynchronize(s->copied[b]);
    stk__clock_add(&s->clock.blocked_ns, stk__now_ns() - start);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventSynchronize(copied)", e);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->cfg.nbuf; i++)
        collect_locked(s, i, 0);
    pthread_mutex_unlock(&s->mu);
    return STK_OK;
}

void *stk__stager_buffer(stk__stager *s, int b)
{
    if (!s || b < 0 || b >= s->cfg.nbuf)
        return NULL;
    return s->buf[b];
}

int stk__stager_hand_out(stk__stager *s, int b, void *caller_stream, char *err)
{
    int rc = check_buf(s, b, err);
    if (rc != STK_OK)
        return rc;
    int prev = 0;
    rc = dev_push(s->cfg.device, &prev, err);
    if (rc != STK_OK)
        return rc;
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)caller_stream, s->ready[b], 0);
    dev_pop(s->cfg.device, prev);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaStreamWaitEvent(caller stream, ready)", e);
    return STK_OK;
}

int stk__stager_release(stk__stager *s, int b, void *caller_stream, char *err)
{
    int rc = check_buf(s, b, err);
    if (rc != STK_OK)
        return rc;
    int prev = 0;
    rc = dev_push(s->cfg.device, &prev, err);
    if (rc != STK_OK)
        return rc;
    cudaError_t e = cudaEventRecord(s->released[b], (cudaStream_t)caller_stream);
    dev_pop(s->cfg.device, prev);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventRecord(released, caller stream)", e);
    return STK_OK;
}

void stk__stager_get_stats(stk__stager *s, stk__stager_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!s)
        return;
    /* No CUDA call here: any thread may ask, and a CUDA call could give a thread that never
     * used CUDA a context on another device. Timings are collected by the stager thread (in
     * submit and wait_copied), so the last batch or two may not be counted yet. */
    pthread_mutex_lock(&s->mu);
    out->h2d_bytes = s->h2d_bytes;
    out->h2d_s = s->h2d_s;
    out->convert_s = s->convert_s;
    out->release_wait_s = s->release_wait_s;
    out->device_bytes = s->device_bytes;
    pthread_mutex_unlock(&s->mu);
    atomic_store(&out->clock.busy_ns, atomic_load(&s->clock.busy_ns));
    atomic_store(&out->clock.starved_ns, atomic_load(&s->clock.starved_ns));
    atomic_store(&out->clock.blocked_ns, atomic_load(&s->clock.blocked_ns));
    atomic_store(&out->clock.items, atomic_load(&s->clock.items));
    atomic_store(&out->clock.bytes, atomic_load(&s->clock.bytes));
    atomic_store(&out->clock.threads, atomic_load(&s->clock.threads));
}

#else
/* Built without CUDA: stager_none.c implements stager.h. ISO C wants a declaration here. */
typedef int stk__stager_host_unused;
#endif
