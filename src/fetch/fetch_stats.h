/* SPDX-License-Identifier: MIT */
/*
 * fetch_stats.h — the fetch stage's counters for one s3:// dataset (docs/S3.md, "Fetch stats"):
 * atomic, so the thread that fetches and any thread that reads stats need no lock. Each fetch
 * call adds what it moved once it returns; a cache lookup counts a hit or a miss per shard; a
 * caller that had to wait for fetched bytes (the open that downloads, a reader waiting for a
 * shard) adds the time it waited (starved). Cumulative over the dataset's life.
 */
#ifndef STK_FETCH_STATS_H
#define STK_FETCH_STATS_H

#include "common.h"

#include "s3.h"

typedef struct stk__fetch_ctr {
    _Atomic uint64_t bytes, requests, retries;    /* moved by fetch calls (retries included) */
    _Atomic uint64_t hits, misses;                /* shard lookups in the cache */
    _Atomic uint64_t hit_bytes, miss_bytes;       /* the shards' sizes behind those lookups */
    _Atomic uint64_t busy_ns;    /* wall time of the fetch calls (requests in flight) */
    _Atomic uint64_t starved_ns; /* callers blocked until fetched bytes were there */
} stk__fetch_ctr;

/* All zero. */
void stk__fetch_ctr_init(stk__fetch_ctr *c);
/* Add what one fetch call moved (its bytes_in, requests, retries, seconds). */
void stk__fetch_ctr_add(stk__fetch_ctr *c, const stk__s3_stats *st);
/* SECONDS more of fetch calls in flight (a caller that overlaps several calls counts the time
 * any was in flight once, and adds them with seconds 0). */
void stk__fetch_ctr_busy(stk__fetch_ctr *c, double seconds);
/* One shard of SIZE bytes looked up: found in the cache (HIT 1) or to fetch (HIT 0). */
void stk__fetch_ctr_lookup(stk__fetch_ctr *c, int hit, uint64_t size);
/* A caller waited SECONDS for fetched bytes. */
void stk__fetch_ctr_starved(stk__fetch_ctr *c, double seconds);
/* Fill the counter fields of *OUT (shards is the caller's); the link rate is bytes / busy. */
void stk__fetch_ctr_read(const stk__fetch_ctr *c, stk_fetch_stats *out);

#endif
