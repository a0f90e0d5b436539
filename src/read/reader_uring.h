/* SPDX-License-Identifier: MIT */
/*
 * reader_uring.h — the io_uring backend: a submitter and a reaper thread over one ring.
 * Implemented in reader_uring.c, or by reader_uring_none.c in a build without liburing
 * (STK_HAVE_URING unset), where stk__uring_built() is 0 and nothing else is ever called.
 * Internal to src/read.
 */
#ifndef STK_READER_URING_H
#define STK_READER_URING_H

#include "reader_internal.h"

/* 1 when this build has io_uring (liburing). */
int stk__uring_built(void);
/* Set up the ring (r->ur). 0, or -errno / STK_E_UNSUPPORTED with WHY set. STOKER_DISABLE_URING=1
 * makes it fail with -ENOSYS. */
int stk__uring_setup(stk__reader *r, const char **why);
/* Register the pool's buffers with the ring (r->fixed), or keep why not (r->fixed_err). */
void stk__uring_register(stk__reader *r);
/* The two threads (ARG: the reader). */
void *stk__uring_submitter(void *arg);
void *stk__uring_reaper(void *arg);
/* Tear down the ring (no thread running). */
void stk__uring_destroy(stk__reader *r);

#endif
