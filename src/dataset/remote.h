/* SPDX-License-Identifier: MIT */
/*
 * remote.h — datasets at s3://bucket/prefix: the shards are fetched into the local cache
 * directory (fetch layer), checked, and the cached copy is opened as a local dataset.
 */
#ifndef STK_REMOTE_H
#define STK_REMOTE_H

#include "dataset.h"

#include <limits.h>

/* Open the dataset at URL (s3://...) into DS (layout WANT); ds->err says why on failure. */
int stk__remote_open(stk_dataset *ds, const char *url, int want);
/*
 * Streaming (docs/S3.md "Streaming"): when the cache limit cannot hold the dataset, the open
 * fetches no shard: it lists them and reads each one's record count from its LMDB pages; every
 * shard is then closed (fd -1) until stk__remote_begin/_download/_finish fetch it (or finds it in the cache),
 * holds it with a shared flock (no eviction), checks it and opens it into its place of the offset
 * table; stk__remote_detach closes it and lets eviction take it. Attach and detach come from one
 * thread (the loader's fetch thread); reads of other shards may run meanwhile, reads of S must
 * not run across its attach or detach.
 */
int stk__remote_streaming(const stk_dataset *ds);
/* 1 when the target rows of shard S are in ds->targets: always for a dataset that is not
 * streamed; streamed, from the end of S's first attach on (its rows are read with it; until then
 * they are zero). Thread-safe. */
int stk__remote_rows_ready(const stk_dataset *ds, uint32_t s);
/* The cache limit of a streamed dataset (0 otherwise); the cache bytes that fetching shard S
 * takes: its file's size and the reserve for its side files (what stk__remote_begin asks of the
 * cache; 0 when not streamed). */
uint64_t stk__remote_limit(const stk_dataset *ds);
uint64_t stk__remote_shard_bytes(const stk_dataset *ds, uint32_t s);
/* The cache bytes that hold every shard of a streamed dataset so (0 when not streamed). */
uint64_t stk__remote_hold_bytes(const stk_dataset *ds);
/* Shards a streaming loader keeps in flight at once (STOKER_S3_SHARDS, read at open). */
int stk__remote_shards_inflight(const stk_dataset *ds);
/* A reader of the dataset waited SECONDS for a shard to be fetched (its fetch stats' starved). */
void stk__remote_starved(stk_dataset *ds, double seconds);
/* Times shard S was fetched from the bucket since open (the fetch layer's record; tests). */
uint32_t stk__remote_fetches(const stk_dataset *ds, uint32_t s);
/*
 * Attaching shard S, in three steps so that several shards can be in flight (loader_stream.c):
 *   begin     under the cache lock: found in the cache with the listed ETag (j->hit: held with a
 *             shared flock from now), or room made (evicting least recently used shards nobody
 *             holds) and taken at once by NAME.part.PID sized to the shard plus its side files;
 *             STK_E_TOO_LARGE with ERR when there is no room now.
 *   download  the ranged GETs into the part file, then synced; no lock held. The downloads in
 *             progress share the request slots (STOKER_S3_INFLIGHT): a download waits for a
 *             slot that the ones begun before no longer need. Thread-safe: any thread, several
 *             shards at once.
 *   finish    under the cache lock the part file renamed into place (or a copy another process
 *             put there meanwhile and holds adopted), held; then opened into its place of the
 *             offset table, every record's CRC32C checked (whatever was not found good in the
 *             cache) before its .etag marks it good. On failure the shard is removed.
 * begin and finish come from one thread (the loader's fetch thread), as detach does; abandon
 * drops a job that was begun and will not be finished (its part file goes). Request errors
 * name the endpoint.
 */
typedef struct stk__remote_job {
    uint32_t shard;
    int hit;                 /* found good in the cache: nothing to download or check */
    int fd;                  /* the part file, or the held cached shard; -1 none */
    char tmp[PATH_MAX + 96]; /* the part file's path ("" none) */
} stk__remote_job;
int stk__remote_begin(stk_dataset *ds, uint32_t s, stk__remote_job *j, char *err);
int stk__remote_download(stk_dataset *ds, stk__remote_job *j, char *err);
int stk__remote_finish(stk_dataset *ds, stk__remote_job *j, char *err);
void stk__remote_abandon(stk_dataset *ds, stk__remote_job *j);
/* ON 1: the downloads in progress end within ~0.1 s with STK_E_CANCELLED (a loader's halt: it
 * abandons them), and so does every download begun until ON 0. Thread-safe. */
void stk__remote_cancel(stk_dataset *ds, int on);
/* The most shard downloads that were in progress at once since open (the fetch layer's record;
 * tests). */
uint32_t stk__remote_peak_downloads(const stk_dataset *ds);
void stk__remote_detach(stk_dataset *ds, uint32_t s);

/* Release what the open holds (the shared locks on the cached shards). NULL is a no-op. */
void stk__remote_free(stk__remote *r);

#endif
