/* SPDX-License-Identifier: MIT */
/*
 * loader_errors.h — the list of bad records a loader has met: the first STK__MAX_ERRS kept in
 * full (where, status, reason), all of them counted. Decode workers add to it; the consumer,
 * the report and any thread read it. Internal.
 */
#ifndef STK_LOADER_ERRORS_H
#define STK_LOADER_ERRORS_H

#include "dataset.h"

#include <pthread.h>
#include <stdint.h>

#define STK__MAX_ERRS 1024

typedef struct stk__errlist {
    pthread_mutex_t mu;
    stk_record_error *v; /* first STK__MAX_ERRS, allocated at the first error */
    uint64_t n;          /* all errors, kept or not */
} stk__errlist;

void stk__errlist_init(stk__errlist *l);
void stk__errlist_destroy(stk__errlist *l);
/* Add a bad record; DS names it (its shard and key, or "record N"). Thread-safe. */
void stk__errlist_add(stk__errlist *l, const stk_dataset *ds, uint64_t index, uint64_t epoch, int status,
                      int sys_errno, const char *reason);
uint64_t stk__errlist_count(stk__errlist *l);
/* Copy error I into OUT: STK_OK, or STK_E_RANGE past the kept ones. */
int stk__errlist_get(stk__errlist *l, uint64_t i, stk_record_error *out);

#endif
