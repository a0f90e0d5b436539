/* SPDX-License-Identifier: MIT */
/*
 * stager_cuda.h — the one function the C side of the CUDA stager (stager_host.c) needs from the
 * CUDA C++ translation unit (stager_cuda.cu): launching the conversion kernel. Kept apart from
 * common.h/stager.h because those use C11 _Atomic, which C++ (nvcc) does not accept.
 * Internal; only in builds with STK_HAVE_CUDA.
 */
#ifndef STK_STAGER_CUDA_H
#define STK_STAGER_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Enqueue on STREAM the conversion of N samples of uint8 RGB HWC (H x W, densely packed at SRC,
 * device memory) into DST (device memory) in DTYPE (STK_DTYPE_*) and LAYOUT (STK_NCHW/NHWC).
 * With NORMALIZE (float dtypes only), value = (x - mean[c]) / std[c] computed in float32 with
 * IEEE round-to-nearest subtraction and division (the arithmetic of stk__convert_sample);
 * float16/bfloat16 round to nearest even. Returns the launch status (cudaGetLastError).
 * uint8 NHWC is a plain copy and needs no kernel: the caller copies directly instead.
 */
cudaError_t stk__cuda_convert(const void *src, void *dst, uint32_t n, int h, int w, int dtype,
                              int layout, int normalize, const float mean[3], const float std[3],
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
