/* SPDX-License-Identifier: MIT */
/*
 * gpu_none.c — the GPU step of a loaderbench built without CUDA: there is none, and the trainer
 * sleeps. With CUDA (LB_HAVE_CUDA) gpu_step.cu provides these and this file is empty.
 */
#include "gpu_step.h"

#ifndef LB_HAVE_CUDA

#include <stdio.h>

lb_gpu *lb_gpu_open(int device, double cal_ms, double *cal_measured_ms, char *why, size_t cap)
{
    (void)device;
    (void)cal_ms;
    if (cal_measured_ms)
        *cal_measured_ms = -1.0;
    snprintf(why, cap, "no CUDA in this build");
    return NULL;
}

int lb_gpu_step(lb_gpu *g, const void *data, size_t bytes, double step_ms, double *kernel_ms, char *why,
                size_t cap)
{
    (void)g;
    (void)data;
    (void)bytes;
    (void)step_ms;
    *kernel_ms = -1.0;
    snprintf(why, cap, "no CUDA in this build");
    return -1;
}

void *lb_gpu_stream(const lb_gpu *g)
{
    (void)g;
    return NULL;
}

int lb_gpu_device(const lb_gpu *g)
{
    (void)g;
    return -1;
}

void lb_gpu_close(lb_gpu *g)
{
    (void)g;
}

#else
typedef int lb_gpu_none_unused; /* ISO C wants a declaration in every file */
#endif
