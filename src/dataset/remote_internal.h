/* SPDX-License-Identifier: MIT */
/*
 * remote_internal.h — what remote.c (the open, the attach of streamed shards) and remote_head.c
 * (the streamed open: record counts and targets from the shards' heads) share. Internal to
 * src/dataset.
 */
#ifndef STK_REMOTE_INTERNAL_H
#define STK_REMOTE_INTERNAL_H

#include "remote.h"

#include "fetch_stats.h"
#include "s3.h"

#include <pthread.h>
#include <stdatomic.h>

/* Room a fetched shard takes in the cache beside its file: its LMDB lock file (8 KiB at LMDB's
 * default 126 readers) and its .etag, both counted in the cache's usage */
#define SIDE_BYTES 65536
#define REMOTE_POOLS 64 /* idle connection pools kept (one per download at once) */

struct stk__remote {
    int *fds; /* one per shard, LOCK_SH (streaming: while attached, else -1) */
    size_t n;
    stk__fetch_ctr ctr; /* fetch stats (fetch_stats.h) */
    int inflight;       /* the configuration they ran with */
    uint64_t cache_limit;
    /* streaming (a cache smaller than the dataset): what stk__remote_attach needs */
    int streaming;
    pthread_mutex_t mu;   /* fds[] while streaming and fetches[] (stk__remote_fetches) */
    stk__s3_cfg cfg;
    char bucket[256], url[1100], dir[PATH_MAX], cache_dir[PATH_MAX];
    uint64_t limit;
    stk__s3_obj *objs;    /* the shards' objects, in name order */
    size_t plen;          /* prefix length of their keys */
    uint32_t *fetches;    /* times each shard was fetched since open */
    /* 1: the shard's target rows are in ds->targets (set by the fetch thread after they are
     * written; read by stk_dataset_target) */
    _Atomic unsigned char *trows;
    /* under mu: shard downloads in progress, the most at once, and the time up to which their
     * busy time is counted (at every start and end: the union of their wall times) */
    uint32_t dl_now, dl_peak;
    double dl_mark;
    _Atomic int cancel; /* stk__remote_cancel: downloads in progress end at once */
    stk__s3_budget budget; /* the request slots (STOKER_S3_INFLIGHT) the downloads share */
    /* under mu: connection pools no download is using (the open's first): a download takes one
     * and gives it back, so shards after the first reuse the connections of those before */
    stk__s3_pool *pools[REMOTE_POOLS];
    int npools;
};

/* snprintf for paths (truncation is caught by the open/rename that follows; PATH_MAX bounds it) */
__attribute__((format(printf, 3, 4))) void stk__remote_pfmt(char *out, size_t cap, const char *fmt, ...);
#define pfmt stk__remote_pfmt

/* Open DS as a streamed dataset: the shards listed and counted, none fetched; the targets' shape
 * from shard 0's head and the targets table laid out (REM keeps what attach needs; takes OBJS). */
int stk__remote_stream_open(stk_dataset *ds, stk__remote *rem, stk__s3_obj *objs, size_t n);

#endif
