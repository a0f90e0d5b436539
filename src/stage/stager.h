/* SPDX-License-Identifier: MIT */
/*
 * stager.h — the CUDA stager: host batch (uint8 HWC, pinned) -> device buffer in the requested
 * dtype/layout/normalisation, on a dedicated non-blocking stream; events order hand-off and
 * reuse without host synchronisation. stager_host.c (over the CUDA runtime API) and
 * stager_cuda.cu (the conversion kernel) implement it with CUDA; stager_none.c is the build
 * without CUDA (every call returns STK_E_UNSUPPORTED, host memory is page-aligned).
 * Internal. The loader runs the stager thread and calls these functions.
 *
 * Contract with the loader (the functions do not check it):
 *   - submit/wait_copied are called from one thread (the stager thread); hand_out/release from
 *     the consumer's thread; get_stats from any thread; destroy once nothing else runs.
 *   - Submit into BUF only after the batch previously submitted into BUF was released
 *     (stk__stager_release called, on the host, before submit starts) or was never handed
 *     out. submit then waits for that release event, so the device buffer is overwritten only
 *     after the work the caller queued before releasing it.
 *   - The host slot passed to submit may be refilled once wait_copied(BUF) returned.
 *   - The caller's stream must belong to cfg.device (NULL = that device's legacy default stream).
 */
#ifndef STK_STAGER_H
#define STK_STAGER_H

#include "common.h"

/* Host ring memory: pinned with cudaHostAlloc when DEVICE >= 0 and CUDA works, else
 * page-aligned. *pinned tells which (pass it back to stk__host_free). */
int stk__host_alloc(size_t bytes, int device, void **out, int *pinned, char *err);
void stk__host_free(void *p, int pinned);

typedef struct stk__stager_config {
    int device;
    int dtype, layout, normalize;
    float mean[3], std[3];
    int nbuf;              /* device buffers */
    uint32_t batch_cap;    /* samples per batch */
    int h, w;              /* sample size (3 channels) */
    size_t max_device_bytes; /* 0 = no cap */
} stk__stager_config;

typedef struct stk__stager stk__stager;

typedef struct stk__stager_stats {
    uint64_t h2d_bytes;
    double h2d_s, convert_s, release_wait_s;
    uint64_t device_bytes;
    stk__stage_clock clock;
} stk__stager_stats;

/* STK_E_UNSUPPORTED without CUDA, STK_E_NODEVICE without a usable device, STK_E_CUDA naming
 * the call and cudaGetErrorString otherwise. */
int stk__stager_create(stk__stager **out, const stk__stager_config *cfg, char *err);
void stk__stager_destroy(stk__stager *s);

/* Stage HOST (n samples, uint8 HWC) into device buffer BUF (0..nbuf-1): waits (host side) for
 * the caller's release event of BUF, then async copy, convert kernel, records `copied` and
 * `ready` events. Called from the stager thread. */
int stk__stager_submit(stk__stager *s, int buf, const void *host, uint32_t n, char *err);
/* Block until the copy out of the host slot submitted into BUF is done (slot reusable). */
int stk__stager_wait_copied(stk__stager *s, int buf, char *err);
/* Device pointer of BUF's converted images. */
void *stk__stager_buffer(stk__stager *s, int buf);
/* Make CALLER_STREAM (cudaStream_t, NULL = legacy default) wait on BUF's `ready` event. */
int stk__stager_hand_out(stk__stager *s, int buf, void *caller_stream, char *err);
/* Record BUF's release event on CALLER_STREAM; the next submit into BUF waits for it. */
int stk__stager_release(stk__stager *s, int buf, void *caller_stream, char *err);
void stk__stager_get_stats(stk__stager *s, stk__stager_stats *out);
/* Change the sample size of the batches submitted from now on to H x W, at most the h x w pixels
 * the stager was created for (the buffers are not reallocated). Called by the consumer's thread
 * while the stager thread submits nothing (every batch submitted is released). */
int stk__stager_set_size(stk__stager *s, int h, int w, char *err);

#endif
