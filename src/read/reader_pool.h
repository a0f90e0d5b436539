/* SPDX-License-Identifier: MIT */
/*
 * reader_pool.h — the reader's buffer pool and its intake of work items. Internal to src/read;
 * implemented in reader_pool.c.
 */
#ifndef STK_READER_POOL_H
#define STK_READER_POOL_H

#include "reader_internal.h"

/* Size the two buffer classes from the offset table and allocate the pool: INFLIGHT_SLOTS
 * buffers for reads in flight (io_uring: the effective queue depth, set here) plus those the
 * consumer may hold. Returns STK_OK or STK_E_NOMEM with ERR set. */
int stk__rd_pool_create(stk__reader *r, uint32_t inflight_slots, char *err);

/* The next work item in a pool buffer sized for it: NULL when there is no more work (stop). An
 * index past the end is delivered as an STK_E_RANGE error here and *skip set. Time waiting in
 * WORK is the stage's blocked time. */
rslot *stk__rd_take_work(stk__reader *r, int *skip);

#endif
