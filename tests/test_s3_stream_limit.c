/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_limit — a streamed s3:// dataset's cache limit against what streaming takes of
 * it (docs/S3.md "Streaming", step 2): each shard fetched takes its size and the 64 KiB its fetch
 * reserves for side files. With a window of 2 and a limit of exactly the two largest shards and
 * their reserves: two epochs, every record once in each, the cache within its limit. One byte
 * less: the start fails STK_E_TOO_LARGE naming the limit (until 2026-12-05 the check left the
 * reserves out, the start passed and the epoch failed part way when a shard's fetch found no
 * room). A limit between the largest shard and it plus its reserve: the open fails, "smaller
 * than one shard".
 */
#include "s3_stream_util.h"

#define RESERVE 65536 /* src/dataset/remote_internal.h SIDE_BYTES */

static stk_loader *window2(const s3s_data *d, const char *cache, uint64_t limit)
{
    stk_loader *h = s3s_loader(d, cache, limit, 2, 1, 0, 1);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, 2));
    return h;
}

int main(void)
{
    s3s_data d;
    s3s_make(&d, "limit");
    /* the two largest shards (the objects are the local copy's files) */
    uint64_t b1 = 0, b2 = 0;
    for (uint32_t s = 0; s < d.nshards; s++) {
        uint64_t b = d.bytes[s];
        if (b > b1) {
            b2 = b1;
            b1 = b;
        } else if (b > b2) {
            b2 = b;
        }
    }
    uint64_t limit = b1 + b2 + 2 * RESERVE;
    T_CHECK(d.nshards >= 4 && limit < d.total_bytes, "%u shards of %llu bytes, window %llu",
            d.nshards, (unsigned long long)d.total_bytes, (unsigned long long)limit);
    char cache[4300], cmd[4600];

    /* exactly a window: two epochs, each record once, the cache within the limit */
    snprintf(cache, sizeof cache, "%s/cache-fit", d.tmp);
    stk_loader *h = window2(&d, cache, limit);
    int rc = stk_loader_start(h);
    T_CHECK(rc == STK_OK, "start with a limit of the window's %llu bytes: %s: %s",
            (unsigned long long)limit, stk_status_name(rc), stk_loader_last_error(h));
    for (int e = 0; e < 2; e++) {
        uint64_t *idx;
        size_t n = s3s_epoch(&d, h, &idx);
        T_CHECK(n == d.n, "epoch %d: %zu records of %llu", e, n, (unsigned long long)d.n);
        uint8_t *seen = calloc(d.n, 1);
        for (size_t i = 0; i < n; i++)
            T_CHECK(!seen[idx[i]]++, "epoch %d: record %llu twice", e,
                    (unsigned long long)idx[i]);
        free(seen);
        free(idx);
    }
    stk_loader_destroy(h);
    snprintf(cmd, sizeof cmd, "test $(du -sb --apparent-size '%s' | cut -f1) -le %llu", cache,
             (unsigned long long)limit);
    T_CHECK(system(cmd) == 0, "the cache is over its limit of %llu bytes",
            (unsigned long long)limit);

    /* one byte less: refused at start, naming the limit */
    snprintf(cache, sizeof cache, "%s/cache-short", d.tmp);
    h = window2(&d, cache, limit - 1);
    rc = stk_loader_start(h);
    const char *msg = stk_loader_last_error(h);
    printf("  a window less one byte: %s: %s\n", stk_status_name(rc), msg);
    char want[64];
    snprintf(want, sizeof want, "(%llu bytes)", (unsigned long long)(limit - 1));
    T_CHECK(rc == STK_E_TOO_LARGE && strstr(msg, "cannot hold a window") && strstr(msg, want),
            "a limit one byte below the window: %s: %s", stk_status_name(rc), msg);
    stk_loader_destroy(h);

    /* the largest shard but not its reserve: the open fails */
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)(b1 + RESERVE / 2)));
    T_OK(stk_loader_set_cache_dir(h, cache));
    rc = stk_loader_open(h, d.url);
    msg = stk_loader_last_error(h);
    printf("  the largest shard without its reserve: %s: %s\n", stk_status_name(rc), msg);
    T_CHECK(rc == STK_E_TOO_LARGE && strstr(msg, "smaller than one shard"),
            "a limit below the largest shard's fetch: %s: %s", stk_status_name(rc), msg);
    stk_loader_destroy(h);
    s3s_free(&d);
    printf("test_s3_stream_limit: ok\n");
    return 0;
}
