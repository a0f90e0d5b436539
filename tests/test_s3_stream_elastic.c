/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_elastic — elastic resume inside a streamed epoch (docs/S3.md "Elastic resume
 * inside a streamed epoch") against the `s3` fixture's radosgw: two ranks, each through a cache of
 * its own of a quarter of the dataset, read two batches of epoch 0 and save
 * (stk_loader_tell_segments); three ranks with fresh caches resume from that
 * (stk_loader_resume_segments before their start) and read to the epoch's end. Over both runs every record is
 * delivered exactly once with the local copy's bytes; each resumed rank fetched — by the fetch
 * layer's own count per shard — only shards it read in the resumed epoch or reads in the next
 * (its share at the new world size, which the fetch thread walks into ahead of the reader), and
 * no shard is read by two resumed ranks in the resumed epoch.
 *
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#include "remote.h"

int main(void)
{
    s3s_data d;
    s3s_make(&d, "elastic");
    uint64_t limit = d.total_bytes / 4;
    uint8_t *count = calloc(d.n, 1);
    uint64_t segs[3 * 17];
    uint32_t nsegs = 0;
    /* the first run: 2 ranks, 2 batches each */
    for (uint32_t r = 0; r < 2; r++) {
        char cache[4300];
        snprintf(cache, sizeof cache, "%s/cache-a%u", d.tmp, r);
        stk_loader *h = s3s_loader(&d, cache, limit, 2, 1, r, 2);
        T_OK(stk_loader_start(h));
        tl_epoch e;
        int rc = tl_run(h, &e, 2);
        T_CHECK(rc == STK_OK && e.n == 32, "rank %u of 2: %zu samples: %s", r, e.n,
                stk_loader_last_error(h));
        for (size_t i = 0; i < e.n; i++) {
            T_CHECK(e.payload[i] == d.len[e.index[i]] && !e.subst[i], "record %llu bytes",
                    (unsigned long long)e.index[i]);
            count[e.index[i]]++;
        }
        uint64_t mine[3 * 17], ep;
        uint32_t n;
        T_OK(stk_loader_tell_segments(h, &ep, mine, 17, &n));
        T_CHECK(ep == 0 && n == 1 && mine[0] == 2 && mine[2] == 32, "segments: %u (%llu, %llu, "
                "%llu)", n, (unsigned long long)mine[0], (unsigned long long)mine[1],
                (unsigned long long)mine[2]);
        if (r == 0) {
            memcpy(segs, mine, sizeof mine);
            nsegs = n;
        }
        tl_epoch_free(&e);
        stk_loader_destroy(h);
    }
    /* the resumed run: 3 ranks, fresh caches */
    int reader[64];
    memset(reader, -1, sizeof reader);
    for (uint32_t r = 0; r < 3; r++) {
        char cache[4300];
        snprintf(cache, sizeof cache, "%s/cache-b%u", d.tmp, r);
        stk_loader *h = s3s_loader(&d, cache, limit, 2, 1, r, 3);
        /* before start: the start begins there, nothing of the epoch's start is fetched */
        T_OK(stk_loader_resume_segments(h, 0, segs, nsegs));
        int rc = stk_loader_start(h);
        T_CHECK(rc == STK_OK, "resume on rank %u of 3: %s", r, stk_loader_last_error(h));
        uint64_t *idx;
        size_t n = s3s_epoch(&d, h, &idx);
        int mine[64] = {0};
        for (size_t i = 0; i < n; i++) {
            int s = s3s_shard_of(&d, idx[i]);
            T_CHECK(reader[s] < 0 || reader[s] == (int)r, "shard %d read by resumed ranks %d "
                    "and %u", s, reader[s], r);
            reader[s] = (int)r;
            mine[s] = 1;
            count[idx[i]]++;
        }
        /* the fetch thread walks on into the next epoch (this rank's share at world 3) while
         * the reader finishes this one: read it too, and allow what it reads */
        uint64_t *nidx;
        size_t nn = s3s_epoch(&d, h, &nidx);
        int next[64] = {0};
        for (size_t i = 0; i < nn; i++)
            next[s3s_shard_of(&d, nidx[i])] = 1;
        free(nidx);
        const stk_dataset *ds = stk_loader_dataset(h);
        uint32_t fetched = 0;
        for (uint32_t s = 0; s < d.nshards; s++) {
            uint32_t f = stk__remote_fetches(ds, s);
            T_CHECK(!f || mine[s] || next[s], "resumed rank %u fetched shard %u (%u times) but "
                    "reads nothing of it in the resumed epoch or the next", r, s, f);
            T_CHECK(!mine[s] || f >= 1, "resumed rank %u read shard %u without fetching it", r,
                    s);
            fetched += f > 0;
        }
        printf("  resumed rank %u of 3: %zu records from %u shards\n", r, n, fetched);
        free(idx);
        stk_loader_destroy(h);
    }
    for (uint64_t i = 0; i < d.n; i++)
        T_CHECK(count[i] == 1, "record %llu delivered %u times over the two runs",
                (unsigned long long)i, count[i]);
    free(count);
    s3s_free(&d);
    printf("test_s3_stream_elastic: ok\n");
    return 0;
}
