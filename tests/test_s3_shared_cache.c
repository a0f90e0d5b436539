/* SPDX-License-Identifier: MIT */
/*
 * test_s3_shared_cache — one cache directory, several users (the `s3` fixture's server):
 *   - two processes open the same s3:// dataset into the same empty cache at once: both read
 *     every record right, the cache ends with one copy of each shard and no partial file;
 *   - eviction takes whole shards, least recently used first, and never one that is open: with a
 *     limit that holds one of two datasets, opening the second while the first is open fails
 *     (STK_E_TOO_LARGE, "in use"); once the first is closed, the second opens and the first's
 *     shards are gone from the cache.
 * stk-test: concurrency
 */
#include "s3_util.h"

#include <sys/wait.h>

static stk_dataset *ref;

static int open_rc(const char *url, const char *cache, int64_t limit, stk_dataset **out)
{
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    T_OK(stk_dataset_set(ds, STK_P_CACHE_BYTES, limit));
    int rc = stk_dataset_open(ds, url);
    if (rc != STK_OK)
        printf("  open %s: %s: %s\n", url, stk_status_name(rc), stk_dataset_last_error(ds));
    if (rc != STK_OK || !out)
        stk_dataset_destroy(ds);
    else
        *out = ds;
    return rc;
}

/* a child: open URL in CACHE and compare every record with the local copy */
static int child(const char *url, const char *cache)
{
    stk_dataset *ds;
    if (open_rc(url, cache, 0, &ds) != STK_OK)
        return 1;
    size_t cap = 1 << 20;
    uint8_t *x = malloc(cap), *y = malloc(cap);
    int bad = stk_dataset_count(ds) != stk_dataset_count(ref);
    for (uint64_t i = 0; !bad && i < stk_dataset_count(ref); i++) {
        size_t lx, ly;
        bad = stk_dataset_read(ref, i, x, cap, &lx, NULL) != STK_OK ||
              stk_dataset_read(ds, i, y, cap, &ly, NULL) != STK_OK || lx != ly ||
              memcmp(x, y, lx) != 0;
        if (bad)
            printf("  pid %d: record %llu differs\n", (int)getpid(), (unsigned long long)i);
    }
    free(x);
    free(y);
    stk_dataset_destroy(ds);
    return bad;
}

static int count_files(const char *cache, const char *pattern)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "exit $(find '%s' -type f -name '%s' | wc -l)", cache, pattern);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
    s3u_env();
    stk__s3_cfg c = s3u_cfg();
    char bucket[64], url_a[256], url_b[256], local[4096], cache[4096];
    s3u_bucket(&c, "share", bucket, sizeof bucket);
    char *tmp = t_tmpdir("s3share");
    snprintf(local, sizeof local, "%s/ds", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    s3u_dataset(local, 150, 1 << 20);
    size_t shards = s3u_upload(&c, bucket, "a", local);
    s3u_upload(&c, bucket, "b", local);
    snprintf(url_a, sizeof url_a, "s3://%s/a", bucket);
    snprintf(url_b, sizeof url_b, "s3://%s/b", bucket);
    T_OK(stk_dataset_create(&ref));
    T_OK(stk_dataset_open(ref, local));

    pid_t p[2];
    for (int k = 0; k < 2; k++) {
        p[k] = fork();
        T_CHECK(p[k] >= 0, "fork");
        if (p[k] == 0)
            _exit(child(url_a, cache));
    }
    for (int k = 0; k < 2; k++) {
        int st;
        T_CHECK(waitpid(p[k], &st, 0) == p[k], "waitpid");
        T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d failed (status %d)", k, st);
    }
    T_CHECK(count_files(cache, "shard-*.lmdb") == (int)shards, "cache holds %d shard files, want %zu",
            count_files(cache, "shard-*.lmdb"), shards);
    T_CHECK(count_files(cache, "*.part.*") == 0, "partial files left in the cache");

    /* eviction: a limit that holds one copy of the dataset (plus its small side files) */
    uint64_t one = 0;
    for (uint32_t s = 0; s < shards; s++) {
        size_t n;
        free(t_read_file(stk_dataset_shard_path(ref, s), &n));
        one += n;
    }
    int64_t limit = (int64_t)(one + one / 4);
    stk_dataset *a;
    T_OK(open_rc(url_a, cache, limit, &a));
    int rc = open_rc(url_b, cache, limit, NULL);
    T_CHECK(rc == STK_E_TOO_LARGE, "b while a is open: %s", stk_status_name(rc));
    stk_dataset_destroy(a);
    stk_dataset *b;
    T_OK(open_rc(url_b, cache, limit, &b));
    /* b whole, a (least recently used) evicted shard by shard until b fit: some of it is gone,
     * and the cache is within its limit */
    char adir[4400], bdir[4400];
    snprintf(adir, sizeof adir, "%s", stk_dataset_shard_path(b, 0));
    *strrchr(adir, '/') = 0;
    snprintf(bdir, sizeof bdir, "%s", adir);
    adir[strlen(adir) - 1] = 'a';
    int na = count_files(adir, "shard-*.lmdb"), nb = count_files(bdir, "shard-*.lmdb");
    T_CHECK(nb == (int)shards && na < (int)shards, "after eviction: a %d, b %d shards of %zu", na,
            nb, shards);
    char cmd[4500];
    snprintf(cmd, sizeof cmd, "exit $(( $(du -sb --apparent-size '%s' | cut -f1) > %lld ))", cache,
             (long long)limit);
    T_CHECK(system(cmd) == 0, "the cache is over its limit of %lld bytes", (long long)limit);
    stk_dataset_destroy(b);
    stk_dataset_destroy(ref);
    t_rmtree(tmp);
    free(tmp);
    printf("test_s3_shared_cache: ok\n");
    return 0;
}
