/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_refused — what a dataset streamed through a cache smaller than itself (the `s3`
 * fixture's radosgw) cannot do is refused with an error that says why, never a wrong sample:
 * shards whose targets differ (shard 0 with float32 x 3 targets, the others none; the open
 * learns the shape from shard 0's head) fail at the first other shard's attach naming it and
 * both shapes — whichever shard a rank comes to first, through a half cache on 2 ranks and
 * through a window asked for without a limit — and the batches before carry shard 0's right
 * targets only, never zeros for the others. With a cache that holds the dataset, targets work
 * (equal to the local copy's), with indices. (Targets stream since 0.5:
 * test_s3_stream_targets; stk_loader_set_indices on a stream too: test_s3_stream_subset.)
 */
#include "s3_stream_util.h"

#define TN 120

int main(void)
{
    s3s_data d;
    s3s_make(&d, "refused");
    char cache[4300];
    stk_loader *h;
    int rc;
    const char *msg;

    /* a dataset with targets: 6 shards of ~1 MiB, a float32 x 3 target per record */
    char local[4300];
    snprintf(local, sizeof local, "%s/targets", d.tmp);
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    stk_target_info ti = {STK_TDT_FLOAT32, STK_TARGET_VALUES, 3, 0};
    T_OK(stk_writer_set_targets(w, &ti));
    T_OK(stk_writer_open(w, local));
    uint8_t *p = malloc(60000);
    for (size_t i = 0; i < TN; i++) {
        for (size_t k = 0; k < 60000; k++)
            p[k] = (uint8_t)(i * 13 + k * 5);
        float t[3] = {(float)i, (float)i * 0.5f, -1.0f};
        T_OK(stk_writer_add_target(w, p, 50000 + i * 10, (int32_t)(i % 4), NULL, t));
    }
    free(p);
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    /* the same records without targets, and the mixed set: shard 0 with targets, the rest not */
    char plain[4300], mixed[4300], cmd[20000];
    snprintf(plain, sizeof plain, "%s/plain", d.tmp);
    snprintf(mixed, sizeof mixed, "%s/mixed", d.tmp);
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, plain));
    p = malloc(60000);
    for (size_t i = 0; i < TN; i++) {
        for (size_t k = 0; k < 60000; k++)
            p[k] = (uint8_t)(i * 13 + k * 5);
        T_OK(stk_writer_add(w, p, 50000 + i * 10, (int32_t)(i % 4), NULL));
    }
    free(p);
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && cp '%s/shard-00000.lmdb' '%s/'", plain, mixed,
             local, mixed);
    T_CHECK(system(cmd) == 0, "%s", cmd);
    stk__s3_cfg c = s3u_cfg();
    char bucket[64], url[256];
    s3u_bucket(&c, "refused-t", bucket, sizeof bucket);
    s3u_upload(&c, bucket, "ds", local);
    s3u_upload(&c, bucket, "mixed", mixed);
    snprintf(url, sizeof url, "s3://%s/ds", bucket);
    char murl[256];
    snprintf(murl, sizeof murl, "s3://%s/mixed", bucket);
    uint64_t tbytes = 0;
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, local));
    stk_dataset_info info;
    T_OK(stk_dataset_info_get(ds, &info));
    T_CHECK(info.shards >= 4, "%u shards", info.shards);
    for (uint32_t s = 0; s < info.shards; s++)
        tbytes += ds->shards[s].file_size;
    uint64_t count0 = ds->shards[0].count;
    stk_dataset_destroy(ds);
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, plain));
    T_CHECK(ds->nshards == info.shards && ds->shards[0].count == count0,
            "the same records without targets split otherwise (%u shards, %llu in shard 0)",
            ds->nshards, (unsigned long long)ds->shards[0].count);
    stk_dataset_destroy(ds);

    /* streamed: ranks 0 and 1 of 2, so that each begins with other shards (shard 0 or not) */
    /* (and r = 2: one rank streaming by a window asked for, with no cache limit) */
    for (uint32_t r = 0; r < 3; r++) {
        snprintf(cache, sizeof cache, "%s/cache-t%u", d.tmp, r);
        T_OK(stk_loader_create(&h));
        T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
        T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 4));
        if (r < 2) {
            T_OK(stk_loader_set(h, STK_P_RANK, r));
            T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, 2));
            T_OK(stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)(tbytes / 2)));
        } else {
            T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, 2));
        }
        T_OK(stk_loader_set_cache_dir(h, cache));
        T_OK(stk_loader_open(h, murl));
        rc = stk_loader_start(h);
        size_t good = 0;
        const stk_batch *b = NULL;
        while (rc == STK_OK && (rc = stk_loader_next(h, NULL, 60000, &b)) == STK_OK) {
            stk_target_info out;
            const float *tg = stk_loader_batch_targets(h, b, &out);
            T_CHECK(tg && out.size == 3, "a batch without targets");
            for (uint32_t i = 0; i < b->size; i++, good++)
                T_CHECK(b->indices[i] < count0 && tg[3 * i] == (float)b->indices[i] &&
                            tg[3 * i + 2] == -1.0f,
                        "record %llu delivered with target %g", (unsigned long long)b->indices[i],
                        tg[3 * i]);
            T_OK(stk_loader_release(h, b, NULL));
        }
        msg = stk_loader_last_error(h);
        printf("  mixed targets, %s %u: %s after %zu records: %s\n",
               r < 2 ? "rank of 2" : "a window, no limit", r, stk_status_name(rc), good, msg);
        T_CHECK(rc == STK_E_FORMAT && strstr(msg, "shard-0000") &&
                    strstr(msg, "differ from shard 0's") && strstr(msg, "float32"),
                "mixed targets on a streamed dataset, rank %u: %s: %s", r, stk_status_name(rc), msg);
        stk_loader_destroy(h);
    }

    /* a cache that holds it: targets and indices work, as the local copy's */
    snprintf(cache, sizeof cache, "%s/cache-all", d.tmp);
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 4));
    T_OK(stk_loader_set_cache_dir(h, cache));
    T_OK(stk_loader_open(h, url));
    uint64_t some[4] = {7, 0, 119, 64};
    T_OK(stk_loader_set_indices(h, some, 4));
    T_OK(stk_loader_start(h));
    const stk_batch *b;
    T_OK(stk_loader_next(h, NULL, 60000, &b));
    stk_target_info out;
    const float *tg = stk_loader_batch_targets(h, b, &out);
    T_CHECK(tg && out.size == 3 && b->size == 4, "targets with a cache that holds the set");
    for (uint32_t i = 0; i < b->size; i++)
        T_CHECK(tg[3 * i] == (float)b->indices[i] && tg[3 * i + 2] == -1.0f,
                "record %llu: target %g", (unsigned long long)b->indices[i], tg[3 * i]);
    T_OK(stk_loader_release(h, b, NULL));
    stk_loader_destroy(h);
    s3s_free(&d);
    printf("test_s3_stream_refused: ok\n");
    return 0;
}
