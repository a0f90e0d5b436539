/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream — an s3:// dataset (the `s3` fixture's radosgw) read by the loader through a
 * cache of a quarter of its size (docs/S3.md "Streaming"): the open fetches no shard, its small
 * reads one request per shard and one more (one round trip); a record read without a loader is
 * a clear STK_E_STATE, and `stoker ls` says so once and exits 1; every record
 * exactly once per epoch, each as long as the local copy's (and CRC-checked by the reader), in the
 * shard-window order the sampler computes for the same seed; the same sequence with 1 and 3
 * workers (and 1 and 2 I/O threads); a seek mid-epoch delivers exactly the rest; the next epoch
 * another order; the cache stays within its limit; shards were fetched again (the cache cannot
 * hold them all) and the fetch stats say so.
 *
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#include "order.h"

#include <sys/wait.h>

static void check_once(const s3s_data *d, const uint64_t *idx, size_t n, const char *what)
{
    T_CHECK(n == d->n, "%s: %zu records, the dataset has %llu", what, n, (unsigned long long)d->n);
    uint8_t *seen = calloc(d->n, 1);
    for (size_t i = 0; i < n; i++)
        T_CHECK(!seen[idx[i]]++, "%s: record %llu twice", what, (unsigned long long)idx[i]);
    free(seen);
}

int main(void)
{
    s3s_data d;
    s3s_make(&d, "stream");
    uint64_t limit = d.total_bytes / 4;
    T_CHECK(limit >= 2 * d.biggest, "a quarter (%llu) below two shards (%llu)",
            (unsigned long long)limit, (unsigned long long)d.biggest);
    char cache[4300], cmd[4600];
    snprintf(cache, sizeof cache, "%s/cache", d.tmp);

    /* the open fetches nothing */
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set(ds, STK_P_CACHE_BYTES, (int64_t)limit));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    int rc = stk_dataset_open(ds, d.url);
    T_CHECK(rc == STK_OK, "open through a quarter cache: %s", stk_dataset_last_error(ds));
    stk_fetch_stats fs;
    T_OK(stk_dataset_fetch_stats(ds, &fs));
    T_CHECK(fs.shards == d.nshards && fs.shards_fetched == 0, "open fetched %llu shards",
            (unsigned long long)fs.shards_fetched);
    T_CHECK(stk_dataset_count(ds) == d.n, "count %llu, want %llu",
            (unsigned long long)stk_dataset_count(ds), (unsigned long long)d.n);
    /* its small reads in one round: each shard's head (LMDB's meta pages and page 2, where a
     * compacted copy as the packer writes puts the main database's root) and shard 0's tail (its
     * `meta` database): no request for a root or a meta page after them */
    T_CHECK(fs.requests == d.nshards + 1 && fs.retries == 0, "the open sent %llu requests (%llu "
            "retried) for %u shards, want %u", (unsigned long long)fs.requests,
            (unsigned long long)fs.retries, d.nshards, d.nshards + 1);
    /* record by record it reads nothing (no loader attaches a shard): a clear STK_E_STATE */
    uint8_t buf[64];
    size_t len = 0;
    rc = stk_dataset_read(ds, 0, buf, sizeof buf, &len, NULL);
    const char *msg = stk_dataset_last_error(ds);
    T_CHECK(rc == STK_E_STATE && strstr(msg, "not in the cache") && strstr(msg, "STOKER_CACHE_BYTES"),
            "a record read of a streamed dataset: %s: %s", stk_status_name(rc), msg);
    printf("  a record read without a loader: %s\n", msg);
    stk_dataset_destroy(ds);
    /* and so `stoker ls` says it once and fails */
    char *lcmd = malloc(16384);
    snprintf(lcmd, 16384, "STOKER_CACHE_BYTES=%llu STOKER_CACHE_DIR='%s' \"$STOKER\" ls '%s' "
             ">'%s/ls.out' 2>'%s/ls.err'", (unsigned long long)limit, cache, d.url, d.tmp, d.tmp);
    rc = system(lcmd);
    free(lcmd);
    snprintf(cmd, sizeof cmd, "test $(grep -c 'not in the cache' '%s/ls.err') = 1 && "
             "test $(wc -l < '%s/ls.err') = 1", d.tmp, d.tmp);
    T_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && system(cmd) == 0, "stoker ls of a streamed "
            "dataset: exit %d, not one clear line", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);

    /* epoch 0 with 1 worker: every record once, in the sampler's shard-window order */
    stk_loader *h = s3s_loader(&d, cache, limit, 1, 1, 0, 1);
    T_OK(stk_loader_start(h));
    uint64_t *a, *b, *c;
    size_t na = s3s_epoch(&d, h, &a);
    check_once(&d, a, na, "epoch 0, 1 worker");
    stk__shard_table tab = {d.nshards, d.first, d.count, NULL, 0};
    stk__plan p;
    T_OK(stk__plan_init_shards(&p, &tab, 1, 5, 0, 1, 0, 1, STK_DIST_EXACT));
    for (size_t i = 0; i < na; i++)
        T_CHECK(a[i] == stk__plan_index(&p, i), "position %zu: %llu, the shard-window order has "
                "%llu", i, (unsigned long long)a[i], (unsigned long long)stk__plan_index(&p, i));
    /* epoch 1 goes on in the same run: another order, every record once */
    size_t nc = s3s_epoch(&d, h, &c);
    check_once(&d, c, nc, "epoch 1");
    size_t diff = 0;
    for (size_t i = 0; i < nc; i++)
        diff += a[i] != c[i];
    T_CHECK(diff > nc / 2, "epochs 0 and 1 nearly the same order (%zu differ)", diff);
    free(c);
    T_OK(stk_dataset_fetch_stats(stk_loader_dataset(h), &fs));
    T_CHECK(fs.shards_fetched > d.nshards, "two epochs through a quarter cache fetched %llu "
            "shards of %u", (unsigned long long)fs.shards_fetched, d.nshards);
    snprintf(cmd, sizeof cmd, "exit $(( $(du -sb --apparent-size '%s' | cut -f1) > %llu ))", cache,
             (unsigned long long)limit);
    T_CHECK(system(cmd) == 0, "the cache is over its limit of %llu bytes", (unsigned long long)limit);
    stk_loader_destroy(h);

    /* 3 workers, 2 I/O threads: the same sequence */
    h = s3s_loader(&d, cache, limit, 3, 2, 0, 1);
    T_OK(stk_loader_start(h));
    size_t nb = s3s_epoch(&d, h, &b);
    T_CHECK(nb == na, "3 workers: %zu records, 1 worker: %zu", nb, na);
    for (size_t i = 0; i < na; i++)
        T_CHECK(a[i] == b[i], "position %zu: %llu with 1 worker, %llu with 3", i,
                (unsigned long long)a[i], (unsigned long long)b[i]);
    free(b);
    /* mid-epoch resume: exactly the rest */
    const uint64_t at[] = {1, na / 3, na - 5};
    for (size_t k = 0; k < 3; k++) {
        T_OK(stk_loader_seek(h, 0, at[k]));
        nb = s3s_epoch(&d, h, &b);
        T_CHECK(nb == na - at[k], "resumed at %llu: %zu records, want %llu",
                (unsigned long long)at[k], nb, (unsigned long long)(na - at[k]));
        for (size_t i = 0; i < nb; i++)
            T_CHECK(b[i] == a[at[k] + i], "resumed at %llu: position %zu differs",
                    (unsigned long long)at[k], i);
        free(b);
    }
    stk_loader_destroy(h);
    T_CHECK(system(cmd) == 0, "the cache is over its limit of %llu bytes", (unsigned long long)limit);
    free(a);
    s3s_free(&d);
    printf("test_s3_stream: ok (%u shards, %llu bytes, cache %llu)\n", d.nshards,
           (unsigned long long)d.total_bytes, (unsigned long long)limit);
    return 0;
}
