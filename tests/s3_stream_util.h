/* SPDX-License-Identifier: MIT */
/*
 * s3_stream_util.h — what the streaming s3 tests share: a dataset of about 8 shards uploaded to a
 * bucket of the test's own, its shard table and total size from the local copy, and one epoch of
 * a loader (STK_STAGE_READ: the records' bytes, CRC-checked by the reader) on an s3:// URL through
 * a cache of a given limit.
 */
#ifndef STK_TEST_S3_STREAM_UTIL_H
#define STK_TEST_S3_STREAM_UTIL_H

#include "s3_util.h"
#include "test_loader_util.h"

#include "dataset.h"

typedef struct s3s_data {
    char *tmp;
    char local[4200], url[4400];
    uint32_t nshards;
    uint64_t n, total_bytes, biggest;
    uint64_t first[64], count[64], bytes[64]; /* each shard's first record, records, file bytes */
    uint32_t *len; /* each record's payload bytes (local) */
} s3s_data;

/* D's shard table from DS, its local copy: the shards (6 to 64), records, each shard's first
 * record, count and bytes, their total and the largest. */
static inline void s3s_table(s3s_data *d, const stk_dataset *ds)
{
    d->nshards = ds->nshards;
    d->n = ds->count;
    T_CHECK(d->nshards >= 6 && d->nshards <= 64, "%u shards", d->nshards);
    for (uint32_t s = 0; s < d->nshards; s++) {
        d->first[s] = ds->shards[s].first;
        d->count[s] = ds->shards[s].count;
        d->bytes[s] = ds->shards[s].file_size;
        d->total_bytes += d->bytes[s];
        if (d->bytes[s] > d->biggest)
            d->biggest = d->bytes[s];
    }
}

/* Upload D's local copy to a bucket of this test (TAG) as prefix "ds"; D->url names it. */
static inline void s3s_upload(s3s_data *d, const char *tag)
{
    stk__s3_cfg c = s3u_cfg();
    char bucket[64];
    s3u_bucket(&c, tag, bucket, sizeof bucket);
    s3u_upload(&c, bucket, "ds", d->local);
    snprintf(d->url, sizeof d->url, "s3://%s/ds", bucket);
}

static inline void s3s_make(s3s_data *d, const char *tag)
{
    memset(d, 0, sizeof *d);
    s3u_env();
    d->tmp = t_tmpdir(tag);
    snprintf(d->local, sizeof d->local, "%s/local", d->tmp);
    /* 420 records of 1-20 kB and every 17th of 300 kB (several ranged GETs per shard), none
     * empty (an empty record is a bad one, substituted), shards of about 1 MiB */
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, d->local));
    for (size_t i = 0; i < 420; i++) {
        size_t len = i % 17 == 3 ? 300000 + i * 1000 : 1000 + (i * 7919) % 19000;
        uint8_t *p = malloc(len);
        for (size_t k = 0; k < len; k++)
            p[k] = (uint8_t)(i * 31 + k * 7 + (k >> 8));
        T_OK(stk_writer_add(w, p, len, (int32_t)(i % 5), NULL));
        free(p);
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    s3s_upload(d, tag);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, d->local));
    s3s_table(d, ds);
    d->len = calloc(d->n, sizeof *d->len);
    uint8_t *buf = malloc(1 << 21);
    for (uint64_t i = 0; i < d->n; i++) {
        size_t len = 0;
        T_OK(stk_dataset_read(ds, i, buf, 1 << 21, &len, NULL));
        d->len[i] = (uint32_t)len;
    }
    free(buf);
    stk_dataset_destroy(ds);
}

static inline void s3s_free(s3s_data *d)
{
    free(d->len);
    t_rmtree(d->tmp);
    free(d->tmp);
}

static inline int s3s_shard_of(const s3s_data *d, uint64_t idx)
{
    uint32_t s = 0;
    while (idx >= d->first[s] + d->count[s])
        s++;
    return (int)s;
}

/* A loader on D's URL through the cache CACHE of LIMIT bytes. */
static inline stk_loader *s3s_loader(const s3s_data *d, const char *cache, uint64_t limit,
                                     int workers, int io, uint32_t rank, uint32_t world)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 16));
    T_OK(stk_loader_set(h, STK_P_WORKERS, workers));
    T_OK(stk_loader_set(h, STK_P_IO_THREADS, io));
    T_OK(stk_loader_set(h, STK_P_SEED, 5));
    T_OK(stk_loader_set(h, STK_P_RANK, rank));
    T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, world));
    T_OK(stk_loader_set(h, STK_P_DIST_MODE, STK_DIST_EXACT));
    T_OK(stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)limit));
    T_OK(stk_loader_set_cache_dir(h, cache));
    int rc = stk_loader_open(h, d->url);
    T_CHECK(rc == STK_OK, "open %s: %s", d->url, stk_loader_last_error(h));
    return h;
}

/* The rest of the current epoch of a started loader: indices in *OUT (malloc), their count
 * returned; every record's bytes as long as the local copy's. */
static inline size_t s3s_epoch(const s3s_data *d, stk_loader *h, uint64_t **out)
{
    tl_epoch e;
    int rc = tl_run(h, &e, -1);
    T_CHECK(rc == STK_END, "epoch ended with %s: %s", stk_status_name(rc), stk_loader_last_error(h));
    for (size_t i = 0; i < e.n; i++) {
        T_CHECK(e.index[i] < d->n, "index %llu", (unsigned long long)e.index[i]);
        T_CHECK(e.payload[i] == d->len[e.index[i]] && !e.subst[i], "record %llu: %u bytes, the "
                "local copy has %u", (unsigned long long)e.index[i], e.payload[i],
                d->len[e.index[i]]);
    }
    *out = malloc((e.n + 1) * sizeof **out);
    memcpy(*out, e.index, e.n * sizeof **out);
    size_t n = e.n;
    tl_epoch_free(&e);
    return n;
}

/* IDX (N indices of one epoch) is every record of D exactly once (TAG names the case). */
static inline void s3s_check_whole(const s3s_data *d, const uint64_t *idx, size_t n,
                                   const char *tag)
{
    T_CHECK(n == d->n, "%s: %zu records in the epoch, the dataset has %llu", tag, n,
            (unsigned long long)d->n);
    uint8_t *once = calloc(d->n, 1);
    for (size_t i = 0; i < n; i++)
        T_CHECK(!once[idx[i]]++, "%s: record %llu twice", tag, (unsigned long long)idx[i]);
    free(once);
}

#endif
