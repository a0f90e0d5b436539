/* SPDX-License-Identifier: MIT */
/*
 * test_s3_roundtrip — a dataset uploaded to the real S3 server (radosgw, the `s3` fixture) and
 * opened as s3://bucket/prefix reads back byte-identical: every record's payload and label, and
 * the cached shard files equal the packed ones (shards larger than one part: multipart upload,
 * several ranged GETs each). A second open is served from the cache (same files, nothing
 * fetched, as stk_dataset_fetch_stats says too); a cached copy whose ETag no longer matches the bucket's is fetched again.
 */
#include "s3_util.h"

#include <sys/stat.h>

static stk_dataset *open_s3(const char *url, const char *cache)
{
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    int rc = stk_dataset_open(ds, url);
    T_CHECK(rc == STK_OK, "open %s: %s (%s)", url, stk_strerror(rc), stk_dataset_last_error(ds));
    return ds;
}

static ino_t inode_of(const char *path)
{
    struct stat st;
    T_CHECK(stat(path, &st) == 0, "stat %s", path);
    return st.st_ino;
}

int main(void)
{
    s3u_env();
    setenv("STOKER_S3_PART_MB", "5", 1); /* the smallest S3 part: shards of ~6 MiB span 2 */
    stk__s3_cfg c = s3u_cfg();
    char bucket[64], url[256], local[4096], cache[4096];
    s3u_bucket(&c, "rt", bucket, sizeof bucket);
    char *tmp = t_tmpdir("s3rt");
    snprintf(local, sizeof local, "%s/ds", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    s3u_dataset(local, 400, 6 << 20);
    size_t up = s3u_upload(&c, bucket, "sets/ds", local);
    snprintf(url, sizeof url, "s3://%s/sets/ds", bucket);

    stk_dataset *ref, *ds = open_s3(url, cache);
    T_OK(stk_dataset_create(&ref));
    T_OK(stk_dataset_open(ref, local));
    stk_dataset_info a, b;
    T_OK(stk_dataset_info_get(ref, &a));
    T_OK(stk_dataset_info_get(ds, &b));
    T_CHECK(b.shards == up && a.shards == up && up >= 2, "shards: local %u, s3 %u, uploaded %zu",
            a.shards, b.shards, up);
    T_CHECK(a.records == 400 && b.records == 400, "records %llu vs %llu",
            (unsigned long long)a.records, (unsigned long long)b.records);
    size_t cap = 1 << 20;
    uint8_t *x = malloc(cap), *y = malloc(cap);
    for (uint64_t i = 0; i < a.records; i++) {
        size_t lx, ly;
        stk_record_info ix, iy;
        T_OK(stk_dataset_read(ref, i, x, cap, &lx, &ix));
        T_OK(stk_dataset_read(ds, i, y, cap, &ly, &iy));
        T_CHECK(lx == ly && memcmp(x, y, lx) == 0, "record %llu differs", (unsigned long long)i);
        T_CHECK(ix.label == iy.label && iy.label == (int32_t)(i % 5), "record %llu label %d vs %d",
                (unsigned long long)i, ix.label, iy.label);
    }
    /* the cached shards are the packed files, byte for byte, under the cache directory */
    int multipart = 0;
    for (uint32_t s = 0; s < a.shards; s++) {
        const char *pa = stk_dataset_shard_path(ref, s), *pb = stk_dataset_shard_path(ds, s);
        T_CHECK(strncmp(pb, cache, strlen(cache)) == 0, "shard %u at %s, not in the cache", s, pb);
        size_t na, nb;
        uint8_t *fa = t_read_file(pa, &na), *fb = t_read_file(pb, &nb);
        T_CHECK(na == nb && memcmp(fa, fb, na) == 0, "cached %s differs from %s", pb, pa);
        multipart |= na > (5u << 20);
        free(fa);
        free(fb);
    }
    T_CHECK(multipart, "no shard larger than one part: the multipart path went untested");
    /* what the open fetched: every shard, every byte of them, no hit */
    stk_fetch_stats fs;
    uint64_t bytes = 0;
    for (uint32_t s = 0; s < a.shards; s++) {
        size_t n;
        free(t_read_file(stk_dataset_shard_path(ref, s), &n));
        bytes += n;
    }
    T_OK(stk_dataset_fetch_stats(ds, &fs));
    T_CHECK(fs.shards == up && fs.shards_fetched == up && fs.shards_cached == 0 &&
            fs.bytes_fetched == bytes && fs.requests >= up,
            "first open: shards %llu fetched %llu cached %llu bytes %llu (want %llu) requests %llu",
            (unsigned long long)fs.shards, (unsigned long long)fs.shards_fetched,
            (unsigned long long)fs.shards_cached, (unsigned long long)fs.bytes_fetched,
            (unsigned long long)bytes, (unsigned long long)fs.requests);
    char shard0[4096];
    snprintf(shard0, sizeof shard0, "%s", stk_dataset_shard_path(ds, 0));
    ino_t ino0 = inode_of(shard0);
    stk_dataset_destroy(ds);

    /* a second open: a cache hit, the same file */
    ds = open_s3(url, cache);
    T_CHECK(inode_of(shard0) == ino0, "a cached shard was fetched again");
    T_OK(stk_dataset_fetch_stats(ds, &fs));
    T_CHECK(fs.shards_cached == up && fs.shards_fetched == 0 && fs.bytes_fetched == 0,
            "second open: cached %llu fetched %llu bytes %llu", (unsigned long long)fs.shards_cached,
            (unsigned long long)fs.shards_fetched, (unsigned long long)fs.bytes_fetched);
    stk_dataset_destroy(ds);

    /* a cached copy whose recorded ETag differs from the bucket's is stale: fetched again */
    char etag[4200];
    snprintf(etag, sizeof etag, "%s.etag", shard0);
    t_write_file(etag, "\"stale\"", 7);
    ds = open_s3(url, cache);
    T_CHECK(inode_of(shard0) != ino0, "a stale cached shard was used");
    size_t lx, ly;
    T_OK(stk_dataset_read(ref, 0, x, cap, &lx, NULL));
    T_OK(stk_dataset_read(ds, 0, y, cap, &ly, NULL));
    T_CHECK(lx == ly && memcmp(x, y, lx) == 0, "record 0 differs after the refetch");
    stk_dataset_destroy(ds);
    stk_dataset_destroy(ref);
    free(x);
    free(y);
    t_rmtree(tmp);
    free(tmp);
    printf("test_s3_roundtrip: ok (%zu shards)\n", up);
    return 0;
}
