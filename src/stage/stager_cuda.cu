/* SPDX-License-Identifier: MIT */
/*
 * stager_cuda.cu — the stager's conversion kernel: uint8 RGB HWC batches (as the decode pool
 * writes them into the pinned host ring and the stager copies them to the device) into the dtype
 * and layout the trainer asked for, optionally normalised.
 */
#include "stager_cuda.h"

#include "stoker.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

struct norm_params {
    float mean[3];
    float std[3];
};

/*
 * Arithmetic. The CPU path (convert.c, stk__convert_sample) computes value = (x - mean[c]) /
 * std[c] in float32 with a true division, then rounds to float16/bfloat16 to nearest even. The
 * kernel uses the explicitly rounded intrinsics __fsub_rn and __fdiv_rn, so the result is the
 * IEEE float32 result whatever nvcc flags are used (--use_fast_math would otherwise turn `/`
 * into an approximate division), and __float2half_rn / __float2bfloat16_rn for the narrowing.
 * uint8 output is a pure relayout: no arithmetic at all.
 */
template <typename T> struct out_cvt;
template <> struct out_cvt<uint8_t> {
    static __device__ __forceinline__ uint8_t from_u8(uint8_t x) { return x; }
    static __device__ __forceinline__ uint8_t from_f32(float) { return 0; } /* never used */
};
template <> struct out_cvt<float> {
    static __device__ __forceinline__ float from_u8(uint8_t x) { return (float)x; }
    static __device__ __forceinline__ float from_f32(float v) { return v; }
};
template <> struct out_cvt<__half> {
    static __device__ __forceinline__ __half from_u8(uint8_t x) { return __float2half_rn((float)x); }
    static __device__ __forceinline__ __half from_f32(float v) { return __float2half_rn(v); }
};
template <> struct out_cvt<__nv_bfloat16> {
    static __device__ __forceinline__ __nv_bfloat16 from_u8(uint8_t x)
    {
        return __float2bfloat16_rn((float)x);
    }
    static __device__ __forceinline__ __nv_bfloat16 from_f32(float v) { return __float2bfloat16_rn(v); }
};

/*
 * Shape. One thread per pixel in a grid-stride loop with size_t indices: a batch of 4096 images
 * of 512 x 512 has 3.2 G output elements, past any 32-bit index. Each thread reads the pixel's
 * three bytes and writes three elements: for NCHW one into each channel plane (consecutive
 * threads write consecutive addresses of a plane: coalesced), for NHWC three consecutive ones.
 * Elements are written with their own type's width at their natural alignment (cudaMalloc
 * buffers are 256-byte aligned and every element offset is a multiple of the element size), so
 * 2-byte half/bfloat16 stores are always aligned. The kernel is memory-bound and small next to
 * the PCIe copy that precedes it on the same stream.
 */
template <typename T, bool NCHW, bool NORM>
__global__ void convert_kernel(const uint8_t *__restrict__ src, T *__restrict__ dst, size_t pixels,
                               size_t plane, norm_params p)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += stride) {
        const uint8_t *px = src + i * 3;
        T v[3];
#pragma unroll
        for (int c = 0; c < 3; c++) {
            if (NORM)
                v[c] = out_cvt<T>::from_f32(__fdiv_rn(__fsub_rn((float)px[c], p.mean[c]), p.std[c]));
            else
                v[c] = out_cvt<T>::from_u8(px[c]);
        }
        if (NCHW) {
            const size_t sample = i / plane;
            const size_t q = i - sample * plane;
            T *o = dst + sample * 3 * plane + q;
            o[0] = v[0];
            o[plane] = v[1];
            o[2 * plane] = v[2];
        } else {
            T *o = dst + i * 3;
            o[0] = v[0];
            o[1] = v[1];
            o[2] = v[2];
        }
    }
}

template <typename T, bool NCHW, bool NORM>
cudaError_t launch(const void *src, void *dst, size_t pixels, size_t plane, const norm_params &p,
                   cudaStream_t stream)
{
    const unsigned threads = 256;
    size_t blocks = (pixels + threads - 1) / threads;
    /* Enough blocks to fill any current GPU many times over; the loop covers the rest. */
    if (blocks > 65536)
        blocks = 65536;
    convert_kernel<T, NCHW, NORM><<<(unsigned)blocks, threads, 0, stream>>>(
        (const uint8_t *)src, (T *)dst, pixels, plane, p);
    return cudaGetLastError();
}

template <typename T, bool NORM>
cudaError_t launch_layout(int layout, const void *src, void *dst, size_t pixels, size_t plane,
                          const norm_params &p, cudaStream_t stream)
{
    if (layout == STK_NCHW)
        return launch<T, true, NORM>(src, dst, pixels, plane, p, stream);
    return launch<T, false, NORM>(src, dst, pixels, plane, p, stream);
}

template <typename T>
cudaError_t launch_float(int layout, int normalize, const void *src, void *dst, size_t pixels,
                         size_t plane, const norm_params &p, cudaStream_t stream)
{
    if (normalize)
        return launch_layout<T, true>(layout, src, dst, pixels, plane, p, stream);
    return launch_layout<T, false>(layout, src, dst, pixels, plane, p, stream);
}

} // namespace

/*
 * No CUDA call happens at library load: only the runtime's static registration of this file's
 * kernels, which does not touch the driver.
 */
extern "C" cudaError_t stk__cuda_convert(const void *src, void *dst, uint32_t n, int h, int w,
                                         int dtype, int layout, int normalize, const float mean[3],
                                         const float std[3], cudaStream_t stream)
{
    const size_t plane = (size_t)h * (size_t)w;
    const size_t pixels = plane * n;
    if (pixels == 0)
        return cudaSuccess;
    norm_params p;
    for (int c = 0; c < 3; c++) {
        p.mean[c] = mean ? mean[c] : 0.0f;
        p.std[c] = std ? std[c] : 1.0f;
    }
    switch (dtype) {
    case STK_DTYPE_UINT8:
        return launch_layout<uint8_t, false>(layout, src, dst, pixels, plane, p, stream);
    case STK_DTYPE_FLOAT16:
        return launch_float<__half>(layout, normalize, src, dst, pixels, plane, p, stream);
    case STK_DTYPE_BFLOAT16:
        return launch_float<__nv_bfloat16>(layout, normalize, src, dst, pixels, plane, p, stream);
    case STK_DTYPE_FLOAT32:
        return launch_float<float>(layout, normalize, src, dst, pixels, plane, p, stream);
    default:
        return cudaErrorInvalidValue;
    }
}
