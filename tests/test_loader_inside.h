/* SPDX-License-Identifier: MIT */
/* test_loader_inside.h — for the loader's thread tests (they include loader_internal.h): wait
 * until a thread is inside stk_loader_next, read from the loader's own flag under its mutex, so
 * the test acts on a blocked consumer without sleeping as synchronisation. */
#ifndef STK_TEST_LOADER_INSIDE_H
#define STK_TEST_LOADER_INSIDE_H

#include "loader_internal.h"
#include "testutil.h"

#include <pthread.h>
#include <time.h>

/* Poll (every 1 ms, at most 60 s) until a thread is inside stk_loader_next of H; WHO names that
 * thread in the failure. */
static inline void tl_wait_inside_next(stk_loader *h, const char *who)
{
    for (int i = 0; i < 60000; i++) {
        pthread_mutex_lock(&h->mu);
        int in = h->in_next;
        pthread_mutex_unlock(&h->mu);
        if (in)
            return;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    T_FAIL("%s never entered stk_loader_next", who);
}

#endif
