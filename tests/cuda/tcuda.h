/* SPDX-License-Identifier: MIT */
/* tcuda.h — CUDA helper kernels for the GPU tests and the bench/device programs (the .cu files
 * in tests/cuda, built into stk_testcuda in CUDA builds only; STK_TEST_CUDA is then defined). */
#ifndef STK_TCUDA_H
#define STK_TCUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The byte the race test writes at (batch, sample, pixel q, channel c). Same on host and device. */
uint8_t t_cuda_pattern(uint64_t batch, uint64_t sample, uint64_t q, int c);

/*
 * On STREAM: every thread first spins SPIN_NS nanoseconds (%globaltimer), then checks the
 * converted batch BUF (N samples of H x W x 3 in DTYPE uint8 or float32 without normalisation,
 * LAYOUT STK_NCHW/NHWC) against t_cuda_pattern(BATCH, ...), and adds the number of wrong
 * elements to *ERRORS (device memory).
 */
cudaError_t t_cuda_consume(const void *buf, int dtype, int layout, uint32_t n, int h, int w,
                           uint64_t batch, uint64_t spin_ns, unsigned long long *errors,
                           cudaStream_t stream);

/*
 * A synthetic training step of a fixed length: one block spins STEP_NS nanoseconds and reads a
 * word of BATCH (so the step depends on the batch); thread 0 writes %globaltimer at its start
 * and end into STAMPS[2*I] and STAMPS[2*I+1].
 */
cudaError_t t_cuda_step(const void *batch, uint64_t step_ns, unsigned long long *stamps, uint64_t i,
                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
