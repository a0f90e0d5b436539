/* SPDX-License-Identifier: MIT */
/*
 * stager_none.c — stager.h for builds without the CUDA toolkit (STOKER_WITH_CUDA=OFF, or AUTO
 * with no nvcc). There is no device: stk_cuda_device_count() is 0, host batch memory is
 * page-aligned, and creating a stager fails with STK_E_UNSUPPORTED so that the loader hands out
 * host batches (converted on the CPU). The other stager functions are unreachable without a
 * stager; they still answer STK_E_UNSUPPORTED rather than trust the caller.
 */
#include "stager.h"

#include <string.h>

int stk_cuda_device_count(void) { return 0; }

int stk__host_alloc(size_t bytes, int device, void **out, int *pinned, char *err)
{
    STK__UNUSED(device);
    *pinned = 0;
    *out = stk__alloc_aligned(stk__page_size(), bytes ? bytes : 1);
    if (!*out)
        return stk__err(err, STK_E_NOMEM, "cannot allocate %zu bytes of host batch memory", bytes);
    return STK_OK;
}

void stk__host_free(void *p, int pinned)
{
    STK__UNUSED(pinned);
    stk__free_aligned(p);
}

static int unsupported(char *err)
{
    return stk__err(err, STK_E_UNSUPPORTED,
                    "device batches need CUDA: this stoker was built without it "
                    "(rebuild with a CUDA toolkit and -DSTOKER_WITH_CUDA=ON, or use STK_P_DEVICE = -1)");
}

int stk__stager_create(stk__stager **out, const stk__stager_config *cfg, char *err)
{
    STK__UNUSED(cfg);
    *out = NULL;
    return unsupported(err);
}

void stk__stager_destroy(stk__stager *s) { STK__UNUSED(s); }

int stk__stager_set_size(stk__stager *s, int h, int w, char *err)
{
    STK__UNUSED(s);
    STK__UNUSED(h);
    STK__UNUSED(w);
    return unsupported(err);
}

int stk__stager_submit(stk__stager *s, int buf, const void *host, uint32_t n, char *err)
{
    STK__UNUSED(s);
    STK__UNUSED(buf);
    STK__UNUSED(host);
    STK__UNUSED(n);
    return unsupported(err);
}

int stk__stager_wait_copied(stk__stager *s, int buf, char *err)
{
    STK__UNUSED(s);
    STK__UNUSED(buf);
    return unsupported(err);
}

void *stk__stager_buffer(stk__stager *s, int buf)
{
    STK__UNUSED(s);
    STK__UNUSED(buf);
    return NULL;
}

int stk__stager_hand_out(stk__stager *s, int buf, void *caller_stream, char *err)
{
    STK__UNUSED(s);
    STK__UNUSED(buf);
    STK__UNUSED(caller_stream);
    return unsupported(err);
}

int stk__stager_release(stk__stager *s, int buf, void *caller_stream, char *err)
{
    STK__UNUSED(s);
    STK__UNUSED(buf);
    STK__UNUSED(caller_stream);
    return unsupported(err);
}

void stk__stager_get_stats(stk__stager *s, stk__stager_stats *out)
{
    STK__UNUSED(s);
    memset(out, 0, sizeof *out);
}
