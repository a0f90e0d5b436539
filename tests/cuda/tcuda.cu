/* SPDX-License-Identifier: MIT */
/* tcuda.cu — helper kernels for the GPU tests and the device benchmarks (see tcuda.h). */
#include "tcuda.h"

#include "stoker.h"

#include <cuda_runtime.h>

static __host__ __device__ __forceinline__ uint8_t pattern(uint64_t batch, uint64_t sample,
                                                           uint64_t q, int c)
{
    uint64_t x = batch * 0x9E3779B97F4A7C15ull ^ (sample << 40) ^ (q << 2) ^ (uint64_t)c;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint8_t)(x >> 24);
}

extern "C" uint8_t t_cuda_pattern(uint64_t batch, uint64_t sample, uint64_t q, int c)
{
    return pattern(batch, sample, q, c);
}

static __device__ __forceinline__ uint64_t globaltimer(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

template <typename T>
__global__ void consume_kernel(const T *buf, int nchw, uint32_t n, size_t plane, uint64_t batch,
                               uint64_t spin_ns, unsigned long long *errors)
{
    const uint64_t t0 = globaltimer();
    while (globaltimer() - t0 < spin_ns) {
    }
    const size_t total = plane * 3 * n;
    unsigned long long bad = 0;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < total;
         j += (size_t)gridDim.x * blockDim.x) {
        size_t s, q;
        int c;
        if (nchw) {
            s = j / (3 * plane);
            size_t r = j - s * 3 * plane;
            c = (int)(r / plane);
            q = r - (size_t)c * plane;
        } else {
            s = j / (3 * plane);
            size_t r = j - s * 3 * plane;
            q = r / 3;
            c = (int)(r - q * 3);
        }
        if (buf[j] != (T)pattern(batch, s, q, c))
            bad++;
    }
    if (bad)
        atomicAdd(errors, bad);
}

extern "C" cudaError_t t_cuda_consume(const void *buf, int dtype, int layout, uint32_t n, int h,
                                      int w, uint64_t batch, uint64_t spin_ns,
                                      unsigned long long *errors, cudaStream_t stream)
{
    const size_t plane = (size_t)h * w;
    size_t blocks = (plane * 3 * n + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    if (blocks == 0)
        blocks = 1;
    const int nchw = layout == STK_NCHW;
    if (dtype == STK_DTYPE_UINT8)
        consume_kernel<uint8_t><<<(unsigned)blocks, 256, 0, stream>>>((const uint8_t *)buf, nchw, n,
                                                                     plane, batch, spin_ns, errors);
    else if (dtype == STK_DTYPE_FLOAT32)
        consume_kernel<float><<<(unsigned)blocks, 256, 0, stream>>>((const float *)buf, nchw, n,
                                                                   plane, batch, spin_ns, errors);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

__global__ void step_kernel(const uint8_t *batch, uint64_t step_ns, unsigned long long *stamps,
                            uint64_t i)
{
    const uint64_t t0 = globaltimer();
    volatile uint8_t sink = batch ? batch[threadIdx.x] : 0;
    (void)sink;
    while (globaltimer() - t0 < step_ns) {
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        stamps[2 * i] = t0;
        stamps[2 * i + 1] = globaltimer();
    }
}

extern "C" cudaError_t t_cuda_step(const void *batch, uint64_t step_ns, unsigned long long *stamps,
                                   uint64_t i, cudaStream_t stream)
{
    step_kernel<<<1, 32, 0, stream>>>((const uint8_t *)batch, step_ns, stamps, i);
    return cudaGetLastError();
}
