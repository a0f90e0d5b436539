/* SPDX-License-Identifier: MIT */
/*
 * loader_fetch.c — the fetch stage in the loader's stats, report and verdict (docs/S3.md,
 * "Fetch stats"). An s3:// dataset's fetch counters live with the dataset (fetch layer,
 * fetch_stats.h) and are cumulative since its open, the open's own download included: an open
 * that fetches the whole dataset waits before start, so a window "since start" would hide the
 * first epoch's fetch. The stats carry them as they are; the fetch-bound rule weighs the waits
 * against wall_s plus those waits (loader_verdict.c), and the report turns the figures into
 * what to change: requests in flight, the cache's size, shard size, a closer region.
 */
#include "loader_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* the fetch fields took the 0.4 struct's four reserved words: size and offsets unchanged */
_Static_assert(offsetof(stk_stats, fetch_bytes) + 32 == sizeof(stk_stats),
               "stk_stats' fetch fields must fill the former reserved[4] exactly");

void stk__loader_fetch_stats(const stk_loader *h, stk_stats *out)
{
    stk_fetch_stats fs;
    if (!h->ds || stk_dataset_fetch_stats(h->ds, &fs) != STK_OK)
        return;
    out->fetch_bytes = fs.bytes_fetched;
    out->fetch_busy_s = fs.fetch_s;
    uint64_t us = atomic_load(&h->fw_max_ns) / 1000;
    out->fetch_max_wait_us = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    out->fetch_starved_s = fs.starved_s;
    out->cache_hits = fs.shards_cached > UINT32_MAX ? UINT32_MAX : (uint32_t)fs.shards_cached;
    out->cache_misses = fs.shards_fetched > UINT32_MAX ? UINT32_MAX : (uint32_t)fs.shards_fetched;
}

size_t stk__loader_fetch_line(const stk_loader *h, const stk_stats *st, char *buf, size_t cap)
{
    if (!st->fetch_bytes && !st->cache_hits && !st->cache_misses)
        return buf && cap ? (buf[0] = '\0', 0) : 0;
    uint32_t look = st->cache_hits + st->cache_misses;
    double rate = st->fetch_busy_s > 0 ? (double)st->fetch_bytes / st->fetch_busy_s : 0.0;
    stk_fetch_stats fs = {0};
    if (h->ds)
        stk_dataset_fetch_stats(h->ds, &fs);
    int n = snprintf(buf, cap,
                     "  fetch: %.1f MB in %llu requests (%llu retried), busy %.2f s, link %.1f MB/s; "
                     "the loader waited %.2f s for it; cache hits %u of %u shard lookups (%.0f%%)\n",
                     (double)st->fetch_bytes / 1e6, (unsigned long long)fs.requests,
                     (unsigned long long)fs.retries, st->fetch_busy_s, rate / 1e6, st->fetch_starved_s,
                     st->cache_hits, look, look ? 100.0 * st->cache_hits / look : 0.0);
    return n > 0 ? (size_t)n : 0;
}

size_t stk__loader_fetch_verdict(const stk_loader *h, const stk_stats *st, char *buf, size_t cap)
{
    stk_fetch_stats fs = {0};
    if (h->ds)
        stk_dataset_fetch_stats(h->ds, &fs);
    double rate = st->fetch_busy_s > 0 ? (double)st->fetch_bytes / st->fetch_busy_s : 0.0;
    double share = st->fetch_starved_s / (st->wall_s + st->fetch_starved_s);
    char lim[64] = "none";
    if (fs.cache_limit)
        snprintf(lim, sizeof lim, "%.1f GB", (double)fs.cache_limit / 1e9);
    int n = snprintf(buf, cap,
                     "verdict: fetch-bound: waited %.0f%% of the time for the object store; link "
                     "%.1f MB/s measured (%.1f MB in %.2f s, up to %llu requests in flight) — more requests "
                     "in flight (STOKER_S3_INFLIGHT, now %llu), a cache that holds the dataset "
                     "(STOKER_CACHE_BYTES, now %s) so later epochs read it locally, bigger shards "
                     "(fewer first-byte waits), or a bucket in a region closer to this machine\n",
                     100.0 * share, rate / 1e6, (double)st->fetch_bytes / 1e6, st->fetch_busy_s,
                     (unsigned long long)fs.inflight, (unsigned long long)fs.inflight, lim);
    return n > 0 ? (size_t)n : 0;
}
