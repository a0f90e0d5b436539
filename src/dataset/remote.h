/* SPDX-License-Identifier: MIT */
/*
 * remote.h — datasets at s3://bucket/prefix: the shards are fetched into the local cache
 * directory (fetch layer), checked, and the cached copy is opened as a local dataset.
 */
#ifndef STK_REMOTE_H
#define STK_REMOTE_H

#include "dataset.h"

/* Open the dataset at URL (s3://...) into DS (layout WANT); ds->err says why on failure. */
int stk__remote_open(stk_dataset *ds, const char *url, int want);
/*
 * Streaming (docs/S3.md "Streaming"): when the cache limit cannot hold the dataset, the open
 * fetches no shard: it lists them and reads each one's record count from its LMDB pages; every
 * shard is then closed (fd -1) until stk__remote_attach fetches it (or finds it in the cache),
 * holds it with a shared flock (no eviction), checks it and opens it into its place of the offset
 * table; stk__remote_detach closes it and lets eviction take it. Attach and detach come from one
 * thread (the loader's fetch thread); reads of other shards may run meanwhile, reads of S must
 * not run across its attach or detach.
 */
int stk__remote_streaming(const stk_dataset *ds);
/* The cache limit of a streamed dataset (0 otherwise); bytes of shard S's file. */
uint64_t stk__remote_limit(const stk_dataset *ds);
uint64_t stk__remote_shard_bytes(const stk_dataset *ds, uint32_t s);
/* A reader of the dataset waited SECONDS for a shard to be fetched (its fetch stats' starved). */
void stk__remote_starved(stk_dataset *ds, double seconds);
/* Times shard S was fetched from the bucket since open (the fetch layer's record; tests). */
uint32_t stk__remote_fetches(const stk_dataset *ds, uint32_t s);
/* STK_E_TOO_LARGE with ERR when the cache has no room for S now (the shards held by attachers
 * fill it); request errors name the endpoint. */
int stk__remote_attach(stk_dataset *ds, uint32_t s, char *err);
void stk__remote_detach(stk_dataset *ds, uint32_t s);

/* Release what the open holds (the shared locks on the cached shards). NULL is a no-op. */
void stk__remote_free(stk__remote *r);

#endif
