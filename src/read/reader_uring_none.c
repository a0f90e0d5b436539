/* SPDX-License-Identifier: MIT */
/*
 * reader_uring_none.c — the io_uring backend of a build without liburing: stk__uring_built() is
 * 0, so the reader never selects it (AUTO falls back to the pread pool and says why, URING is
 * refused) and the other entry points are never reached.
 */
#include "reader_uring.h"

#include <errno.h>

int stk__uring_built(void) { return 0; }

int stk__uring_setup(stk__reader *r, const char **why)
{
    (void)r;
    *why = "built without liburing";
    return STK_E_UNSUPPORTED;
}

void stk__uring_register(stk__reader *r) { r->fixed_err = STK_E_UNSUPPORTED; }

void *stk__uring_submitter(void *arg)
{
    (void)arg;
    return NULL;
}

void *stk__uring_reaper(void *arg)
{
    (void)arg;
    return NULL;
}

void stk__uring_destroy(stk__reader *r) { (void)r; }
