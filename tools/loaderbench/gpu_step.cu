/* SPDX-License-Identifier: MIT */
/*
 * gpu_step.cu — loaderbench's simulated trainer step on the GPU (see gpu_step.h).
 *
 * A step is one kernel on the trainer's own non-blocking stream. Every block first reads its
 * grid-stride share of the batch (16-byte loads when aligned), folds it into a checksum that goes
 * to a device sink (so the reads cannot be optimised away: the step consumes the batch as a
 * trainer's forward pass would), then its thread 0 spins on %globaltimer (the GPU's nanosecond
 * clock, independent of the SM clock's boost and throttling) until STEP_MS have passed since the
 * block started. One block per SM, 256 threads: every block is resident at once, so they start
 * together and the kernel lasts STEP_MS (plus the read of one block's share when that is longer).
 */
#include "gpu_step.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

struct lb_gpu {
    int device;
    int blocks;
    cudaStream_t stream;
    cudaEvent_t start, done;
    unsigned long long *sink;
};

static __device__ __forceinline__ uint64_t globaltimer_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __global__ void lb_step_kernel(const uint8_t *data, size_t bytes, uint64_t spin_ns, unsigned long long *sink)
{
    __shared__ uint64_t t0;
    if (threadIdx.x == 0)
        t0 = globaltimer_ns();
    __syncthreads();
    unsigned long long acc = 0;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t nth = (size_t)gridDim.x * blockDim.x;
    if (data) {
        const size_t n16 = ((uintptr_t)data & 15u) == 0 ? bytes / 16 : 0;
        const uint4 *v = (const uint4 *)data;
        for (size_t i = tid; i < n16; i += nth) {
            const uint4 x = v[i];
            acc += (unsigned long long)(x.x ^ x.y) + (x.z ^ x.w);
        }
        for (size_t i = n16 * 16 + tid; i < bytes; i += nth)
            acc += data[i];
    }
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31u) == 0 && acc != 0)
        atomicAdd(sink, acc);
    if (threadIdx.x == 0)
        while (globaltimer_ns() - t0 < spin_ns) {
        }
    __syncthreads();
}

#define LB_CK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(why, cap, "CUDA error: %s: %s", #call, cudaGetErrorString(e_));               \
            cudaGetLastError();                                                                    \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/*
 * The host waits for the step on a cudaEventBlockingSync event before the batch is released: the
 * trainer thread sleeps instead of spinning a core the decode workers need, and the time
 * loaderbench measures inside stk_loader_next is the trainer's real wait for data, not a queue
 * of steps running ahead of it. Both events time the kernel (cudaEventElapsedTime), which gives
 * the calibration and each step's measured length.
 */
extern "C" int lb_gpu_step(lb_gpu *g, const void *data, size_t bytes, double step_ms, double *kernel_ms, char *why,
                           size_t cap)
{
    const uint64_t ns = step_ms > 0.0 ? (uint64_t)(step_ms * 1e6 + 0.5) : 0;
    float ms = -1.0f;
    *kernel_ms = -1.0;
    LB_CK(cudaSetDevice(g->device));
    LB_CK(cudaEventRecord(g->start, g->stream));
    lb_step_kernel<<<(unsigned)g->blocks, 256, 0, g->stream>>>((const uint8_t *)data, data ? bytes : 0, ns, g->sink);
    LB_CK(cudaGetLastError());
    LB_CK(cudaEventRecord(g->done, g->stream));
    LB_CK(cudaEventSynchronize(g->done));
    LB_CK(cudaEventElapsedTime(&ms, g->start, g->done));
    *kernel_ms = ms;
    return 0;
fail:
    return -1;
}

extern "C" void lb_gpu_close(lb_gpu *g)
{
    if (!g)
        return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(g->device);
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    if (g->start)
        cudaEventDestroy(g->start);
    if (g->done)
        cudaEventDestroy(g->done);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    if (g->sink)
        cudaFree(g->sink);
    if (prev >= 0)
        cudaSetDevice(prev);
    cudaGetLastError();
    free(g);
}

extern "C" lb_gpu *lb_gpu_open(int device, double cal_ms, double *cal_measured_ms, char *why, size_t cap)
{
    lb_gpu *g = NULL;
    int n = 0;
    double warm = 0.0;
    if (cal_measured_ms)
        *cal_measured_ms = -1.0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* no driver, no GPU, a driver older than the runtime: the runtime's own words */
        snprintf(why, cap, "no CUDA device (cudaGetDeviceCount: %s: %s)", cudaGetErrorName(e), cudaGetErrorString(e));
        cudaGetLastError();
        return NULL;
    }
    if (n <= 0) {
        snprintf(why, cap, "no CUDA device (cudaGetDeviceCount found none)");
        return NULL;
    }
    if (device < 0 || device >= n) {
        snprintf(why, cap, "no CUDA device %d (cudaGetDeviceCount found %d)", device, n);
        return NULL;
    }
    g = (lb_gpu *)calloc(1, sizeof *g);
    if (!g) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    g->device = device;
    LB_CK(cudaSetDevice(device));
    LB_CK(cudaDeviceGetAttribute(&g->blocks, cudaDevAttrMultiProcessorCount, device));
    if (g->blocks < 1)
        g->blocks = 1;
    LB_CK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    LB_CK(cudaEventCreate(&g->start));
    LB_CK(cudaEventCreateWithFlags(&g->done, cudaEventBlockingSync));
    LB_CK(cudaMalloc((void **)&g->sink, sizeof *g->sink));
    LB_CK(cudaMemsetAsync(g->sink, 0, sizeof *g->sink, g->stream));
    /* the first launch loads the module: not part of the calibration */
    if (lb_gpu_step(g, NULL, 0, 0.0, &warm, why, cap) != 0)
        goto fail;
    if (lb_gpu_step(g, NULL, 0, cal_ms, cal_measured_ms, why, cap) != 0)
        goto fail;
    return g;
fail:
    lb_gpu_close(g);
    if (cal_measured_ms)
        *cal_measured_ms = -1.0;
    return NULL;
}

extern "C" void *lb_gpu_stream(const lb_gpu *g)
{
    return g ? (void *)g->stream : NULL;
}

extern "C" int lb_gpu_device(const lb_gpu *g)
{
    return g ? g->device : -1;
}
