/* SPDX-License-Identifier: MIT */
/*
 * walk.h — the offset-table walk: one cursor pass over a shard's records that gives, per record,
 * its file offset and length. Internal; implemented in walk.c.
 */
#ifndef STK_WALK_H
#define STK_WALK_H

#include "dataset.h"

/* What a walk found, added to the dataset's totals by the caller. */
typedef struct stk__walk_sum {
    uint64_t payload;  /* payload bytes (values less the record header of stoker shards) */
    uint32_t maxlen;   /* largest payload */
} stk__walk_sum;

/*
 * Walk the COUNT records of shard SH (number NO; open, with its kept read transaction and
 * database handle) into OUT[0..COUNT). STOKER: a stoker shard, whose keys must be exactly
 * 0..COUNT-1 and whose values start with the record header; else a foreign LMDB's main
 * database. PSIZE: LMDB's page size. Returns STK_OK with *sum, or an error naming the shard and
 * key with ERR (STK__ERRLEN bytes) set.
 */
int stk__walk_shard(const stk__shard *sh, uint32_t no, int stoker, uint64_t count, uint64_t psize,
                    stk__rec *out, stk__walk_sum *sum, char *err);

#endif
