/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_ranks — two ranks reading one s3:// dataset (the `s3` fixture's radosgw), each
 * through a cache of its own of a quarter of the dataset (docs/S3.md "Streaming"): the shards each
 * rank fetched — the fetch layer's own count per shard — are disjoint and together are every
 * shard, over two epochs; the records each delivered are its shards' records, each once per epoch,
 * and together every record. A window the cache cannot hold (STK_P_SHUFFLE_WINDOW too large) and a
 * cache smaller than one shard are refused with errors naming the sizes.
 */
#include "s3_stream_util.h"

#include "remote.h"

int main(void)
{
    s3s_data d;
    s3s_make(&d, "ranks");
    uint64_t limit = d.total_bytes / 4;
    int owner[64];
    memset(owner, -1, sizeof owner);
    uint8_t *seen = calloc(d.n, 1);
    for (uint32_t r = 0; r < 2; r++) {
        char cache[4300];
        snprintf(cache, sizeof cache, "%s/cache%u", d.tmp, r);
        stk_loader *h = s3s_loader(&d, cache, limit, 2, 1, r, 2);
        T_OK(stk_loader_start(h));
        for (int e = 0; e < 2; e++) {
            uint64_t *idx;
            size_t n = s3s_epoch(&d, h, &idx);
            uint8_t *once = calloc(d.n, 1);
            for (size_t i = 0; i < n; i++) {
                int s = s3s_shard_of(&d, idx[i]);
                T_CHECK(!once[idx[i]]++, "rank %u epoch %d: record %llu twice", r, e,
                        (unsigned long long)idx[i]);
                T_CHECK(owner[s] < 0 || owner[s] == (int)r, "record %llu of shard %d delivered "
                        "to ranks 0 and 1", (unsigned long long)idx[i], s);
                owner[s] = (int)r;
                seen[idx[i]] = 1;
            }
            free(once);
            free(idx);
        }
        /* what this rank fetched: its shards only, each of them */
        const stk_dataset *ds = stk_loader_dataset(h);
        for (uint32_t s = 0; s < d.nshards; s++) {
            uint32_t f = stk__remote_fetches(ds, s);
            if (owner[s] == (int)r)
                T_CHECK(f >= 1, "rank %u never fetched its shard %u", r, s);
            else
                T_CHECK(f == 0, "rank %u fetched shard %u (%u times), which rank %d reads", r, s,
                        f, owner[s]);
        }
        stk_loader_destroy(h);
    }
    for (uint32_t s = 0; s < d.nshards; s++)
        T_CHECK(owner[s] >= 0, "shard %u read by no rank", s);
    for (uint64_t i = 0; i < d.n; i++)
        T_CHECK(seen[i], "record %llu delivered by no rank", (unsigned long long)i);
    free(seen);

    /* a window that the cache cannot hold: refused at start, naming the sizes */
    char cache[4300];
    snprintf(cache, sizeof cache, "%s/cache-w", d.tmp);
    stk_loader *h = s3s_loader(&d, cache, limit, 1, 1, 0, 1);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, (int64_t)d.nshards));
    int rc = stk_loader_start(h);
    const char *msg = stk_loader_last_error(h);
    printf("  window of %u shards: %s: %s\n", d.nshards, stk_status_name(rc), msg);
    char want[64];
    snprintf(want, sizeof want, "(%llu bytes)", (unsigned long long)limit);
    T_CHECK(rc == STK_E_TOO_LARGE && strstr(msg, "cannot hold a window") && strstr(msg, want),
            "window too large: %s: %s", stk_status_name(rc), msg);
    stk_loader_destroy(h);
    /* a cache smaller than one shard: the open fails naming the limit and the shard */
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)(d.biggest / 2)));
    T_OK(stk_loader_set_cache_dir(h, cache));
    rc = stk_loader_open(h, d.url);
    msg = stk_loader_last_error(h);
    printf("  cache of half a shard: %s: %s\n", stk_status_name(rc), msg);
    snprintf(want, sizeof want, "%llu bytes", (unsigned long long)(d.biggest / 2));
    T_CHECK(rc == STK_E_TOO_LARGE && strstr(msg, "smaller than one shard") && strstr(msg, want),
            "cache below one shard: %s", msg);
    stk_loader_destroy(h);
    s3s_free(&d);
    printf("test_s3_stream_ranks: ok\n");
    return 0;
}
