/* SPDX-License-Identifier: MIT */
/*
 * cache.h — the local cache directory that fetched shards live in (docs/S3.md): a root
 * (STOKER_CACHE_DIR, else $XDG_CACHE_HOME/stoker, else ~/.cache/stoker), a size limit, whole
 * files evicted least recently used first, and one lock (an flock on ROOT/.lock) that every
 * process using the root takes around a fetch, so that two processes share one cache. A file in
 * use is held with a shared flock by its user and is never evicted.
 */
#ifndef STK_CACHE_H
#define STK_CACHE_H

#include "common.h"

#include <limits.h>
#include <stdint.h>

typedef struct stk__cache {
    char root[PATH_MAX];
    uint64_t limit; /* bytes; 0 = no limit */
    int lockfd;
} stk__cache;

/* Open (create) the cache at DIR (NULL or "": the default above) with LIMIT bytes (0: the
 * environment's STOKER_CACHE_BYTES, else none). */
int stk__cache_open(stk__cache *c, const char *dir, uint64_t limit, char *err);
void stk__cache_close(stk__cache *c);
/* Take / release the cache's exclusive lock (blocking: a second process waits for the first's
 * fetch to end). */
int stk__cache_lock(stk__cache *c, char *err);
void stk__cache_unlock(stk__cache *c);
/* With the lock held: evict data files (names ending in SUFFIX, with their "-lock" and ".etag"
 * side files) least recently modified first, skipping any that another holder has flocked, until
 * NEED more bytes fit under the limit. STK_E_TOO_LARGE with ERR when they cannot. */
int stk__cache_make_room(stk__cache *c, uint64_t need, const char *suffix, char *err);
/* Bytes of regular files under the root. */
uint64_t stk__cache_usage(const stk__cache *c);
/* mkdir -p PATH. */
int stk__mkdirs(const char *path, char *err);

#endif
