/* SPDX-License-Identifier: MIT */
/*
 * gpu_step.h — loaderbench's simulated trainer on the GPU: a kernel of a given length per batch,
 * on the trainer's own stream. This is the trainer's code, not the library's: the loader is
 * driven through the public stoker.h only (next/release with the trainer's stream).
 *
 * Built from gpu_step.cu when CMake builds CUDA (LB_HAVE_CUDA); otherwise gpu_none.c answers
 * "no CUDA in this build" and loaderbench's trainer sleeps instead.
 */
#ifndef LB_GPU_STEP_H
#define LB_GPU_STEP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The trainer's GPU: its device, its non-blocking stream, timing events, a checksum sink. */
typedef struct lb_gpu lb_gpu;

/* Set up the trainer on CUDA device DEVICE and calibrate: one kernel of CAL_MS, timed with CUDA
 * events; *CAL_MEASURED_MS = its duration. NULL when the GPU step cannot run, with the reason in
 * WHY: "no CUDA in this build", "no CUDA device (...)", or "CUDA error: <call>: <runtime's
 * string>". The calling thread's current device becomes DEVICE. */
lb_gpu *lb_gpu_open(int device, double cal_ms, double *cal_measured_ms, char *why, size_t cap);

/* One trainer step: a kernel of STEP_MS on the trainer's stream that first reads BYTES of device
 * memory at DATA (the batch: NULL = nothing to read, the kernel only spins), then waits for it
 * on the host (a blocking-sync event: the thread sleeps, it does not spin a core). *KERNEL_MS =
 * the kernel's duration from CUDA events. 0, or -1 with the reason in WHY. */
int lb_gpu_step(lb_gpu *g, const void *data, size_t bytes, double step_ms, double *kernel_ms, char *why,
                size_t cap);

/* The trainer's cudaStream_t (for stk_loader_next / stk_loader_release), and its device. */
void *lb_gpu_stream(const lb_gpu *g);
int lb_gpu_device(const lb_gpu *g);

/* Free it all. NULL is a no-op. */
void lb_gpu_close(lb_gpu *g);

#ifdef __cplusplus
}
#endif

#endif
