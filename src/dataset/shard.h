/* SPDX-License-Identifier: MIT */
/*
 * shard.h — one LMDB file of a dataset: open and check it, take its environment and read
 * transaction, read its meta, walk its records; close it; re-check it while open. Internal;
 * implemented in shard.c.
 */
#ifndef STK_SHARD_H
#define STK_SHARD_H

#include "dataset.h"

/* The offset table while it is built, shard after shard. */
typedef struct stk__recvec {
    stk__rec *v;
    uint64_t n, cap;
} stk__recvec;

/* ds->shards: N shards, none open (descriptors -1); ds->nshards = N. */
int stk__shards_alloc(stk_dataset *ds, size_t n);

/*
 * Open the LMDB at PATH as shard SH (number NO in ds->shards); ENV_DIR: PATH is a directory
 * environment (data.mdb inside). EXPECT_STOKER: 1 = must be a stoker shard, 0 = decide (a
 * foreign LMDB otherwise). IN_DIR: one of a directory of shards (continuity with the previous
 * shards is checked). Appends its records to RECS and adds to the dataset's totals. Returns
 * STK_OK or an error with ds->err set; SH is then closed by stk__shard_close.
 */
int stk__shard_open(stk_dataset *ds, stk__shard *sh, uint32_t no, const char *path, int env_dir,
                    int expect_stoker, int in_dir, stk__recvec *recs);

/* The target shape and type of a shard from its `meta` values V: target_dtype, target_size,
 * target_kind, target_classes (mv_data NULL: absent); no target_dtype = no targets (dtype
 * STK_TDT_NONE). STK_E_FORMAT naming PATH in ERR when they are missing or unusable. Shared by
 * the shard's open and the streamed open's head reads (remote.c). */
int stk__target_meta_parse(const MDB_val v[4], const char *path, stk_target_info *t, char *err);

/* End SH's transaction, give back its environment, close its descriptors, free its path. */
void stk__shard_close(stk__shard *sh);

/* Re-check an open shard: still at least the size seen at open (STK_E_TRUNCATED) and, opened
 * without a lock file, the same identity and LMDB txnid (STK_E_CHANGED). ERR may be NULL. */
int stk__shard_check(const stk__shard *sh, char *err);

#endif
