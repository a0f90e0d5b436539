/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_inflight — a streaming loader keeps several shards in flight at once
 * (STOKER_S3_SHARDS, docs/S3.md "Streaming"). The tests' proxy sits between the loader and the
 * `s3` fixture's radosgw with a barrier (STK_PROXY_HOLD=2): the answers to the first shard
 * downloads are held until downloads of two distinct shards have arrived (or 10 s, "timed out").
 * One shard at a time never gets past the barrier; several in flight do, and the fetch layer's
 * own record of downloads in progress at once says 2 or more. Two ways to stream:
 *   - a cache of half the dataset (the loader's default window);
 *   - no cache limit but STK_P_SHUFFLE_WINDOW = 2 set before the open: streamed by request (the
 *     open fetches nothing), every shard kept in the cache, so a second loader fetches nothing.
 * In both every record comes once per epoch, as long as the local copy's (the reader checks each
 * record's CRC), and the cache stays within its limit. Last, two processes stream one dataset
 * into one fresh cache at once: both get every record, every shard ends up cached and good.
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#include "remote.h"

#include <sys/wait.h>

/* A loader on D through CACHE of LIMIT bytes, with WINDOW set before the open when > 0. */
static stk_loader *stream_loader(const s3s_data *d, const char *cache, uint64_t limit, int window)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 16));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(h, STK_P_SEED, 9));
    if (window)
        T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, window));
    T_OK(stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)limit));
    T_OK(stk_loader_set_cache_dir(h, cache));
    int rc = stk_loader_open(h, d->url);
    T_CHECK(rc == STK_OK, "open %s: %s", d->url, stk_loader_last_error(h));
    return h;
}

/* One epoch of a fresh loader (WINDOW before the open when > 0) through a proxy with the barrier
 * (started here, its pid in *PROXY): returns the loader (started, its epoch read and checked). */
static stk_loader *one_epoch(const s3s_data *d, const char *cache, uint64_t limit, int window,
                             const char *tag, pid_t *proxy)
{
    stk__s3_cfg c = s3u_cfg();
    char log[4400];
    snprintf(log, sizeof log, "%s/proxy-%d.log", d->tmp, window);
    setenv("STK_PROXY_HOLD", "2", 1);
    *proxy = s3u_proxy_start(&c, d->tmp, log, 0);
    unsetenv("STK_PROXY_HOLD");
    stk_loader *h = stream_loader(d, cache, limit, window);
    const stk_dataset *ds = stk_loader_dataset(h);
    T_CHECK(stk__remote_streaming(ds), "%s: not streamed", tag);
    stk_fetch_stats fs;
    T_OK(stk_dataset_fetch_stats(ds, &fs));
    T_CHECK(fs.shards_fetched == 0 && fs.shards_cached == 0, "%s: the open fetched %llu shards",
            tag, (unsigned long long)fs.shards_fetched);
    T_OK(stk_loader_start(h));
    uint64_t *idx;
    size_t n = s3s_epoch(d, h, &idx);
    s3s_check_whole(d, idx, n, tag);
    free(idx);
    char *text = s3u_read_log(log);
    uint32_t peak = stk__remote_peak_downloads(ds);
    printf("  %s: peak %u shard downloads at once; proxy: %s", tag, peak, text);
    T_CHECK(strstr(text, "hold released: 2 objects"), "%s: the proxy never saw two shards "
            "downloaded at once: %s", tag, text);
    T_CHECK(peak >= 2, "%s: at most %u shard download at once", tag, peak);
    free(text);
    return h;
}

static void proxy_stop(pid_t pid)
{
    s3u_proxy_stop(pid);
    s3u_env(); /* the server's own endpoint again */
}

int main(void)
{
    s3s_data d;
    s3s_make(&d, "inflight");
    char cache[4400], cmd[9000];

    /* a cache of half the dataset: streamed by the limit */
    uint64_t limit = d.total_bytes / 2;
    snprintf(cache, sizeof cache, "%s/cache-half", d.tmp);
    pid_t proxy;
    stk_loader *h = one_epoch(&d, cache, limit, 0, "half cache", &proxy);
    stk_loader_destroy(h);
    proxy_stop(proxy);
    snprintf(cmd, sizeof cmd, "exit $(( $(du -sb --apparent-size '%s' | cut -f1) > %llu ))", cache,
             (unsigned long long)limit);
    T_CHECK(system(cmd) == 0, "the cache is over its limit of %llu bytes", (unsigned long long)limit);

    /* no limit, a window asked for before the open: streamed all the same */
    snprintf(cache, sizeof cache, "%s/cache-all", d.tmp);
    h = one_epoch(&d, cache, 0, 2, "window 2, no limit", &proxy);
    stk_fetch_stats fs;
    T_OK(stk_dataset_fetch_stats(stk_loader_dataset(h), &fs));
    T_CHECK(fs.shards_fetched == d.nshards, "window 2: %llu shards fetched, %u in the dataset",
            (unsigned long long)fs.shards_fetched, d.nshards);
    stk_loader_destroy(h);
    /* every shard stayed in the cache: a second loader's epoch (through the same endpoint: the
     * cache's folder is per endpoint) fetches nothing */
    h = s3s_loader(&d, cache, 0, 2, 1, 0, 1);
    T_OK(stk_loader_start(h));
    uint64_t *idx;
    size_t n = s3s_epoch(&d, h, &idx);
    free(idx);
    T_CHECK(n == d.n, "second loader: %zu records", n);
    T_OK(stk_dataset_fetch_stats(stk_loader_dataset(h), &fs));
    T_CHECK(fs.shards_fetched == 0 && fs.shards_cached == d.nshards, "second loader: %llu shards "
            "fetched, %llu found in the cache", (unsigned long long)fs.shards_fetched,
            (unsigned long long)fs.shards_cached);
    stk_loader_destroy(h);
    proxy_stop(proxy);

    /* two processes stream into one fresh cache at the same time (the same shards begun by both:
     * one places its copy, the other adopts or replaces it): both get every record once, and
     * every shard ends up in the cache, marked good */
    snprintf(cache, sizeof cache, "%s/cache-two", d.tmp);
    pid_t kid = fork();
    T_CHECK(kid >= 0, "fork");
    h = stream_loader(&d, cache, 0, 2);
    T_OK(stk_loader_start(h));
    n = s3s_epoch(&d, h, &idx);
    T_CHECK(n == d.n, "%s: %zu records", kid ? "parent" : "child", n);
    free(idx);
    stk_loader_destroy(h);
    if (!kid)
        _exit(0);
    int st = 0;
    waitpid(kid, &st, 0);
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the second process failed (status %d)", st);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    T_OK(stk_dataset_open(ds, d.url));
    T_OK(stk_dataset_fetch_stats(ds, &fs));
    T_CHECK(fs.shards_cached == d.nshards, "after two processes: %llu of %u shards in the cache",
            (unsigned long long)fs.shards_cached, d.nshards);
    uint8_t *buf = malloc(1 << 21);
    for (uint64_t i = 0; i < d.n; i++) {
        size_t len = 0;
        T_OK(stk_dataset_read(ds, i, buf, 1 << 21, &len, NULL));
        T_CHECK(len == d.len[i], "record %llu: %zu bytes", (unsigned long long)i, len);
    }
    free(buf);
    stk_dataset_destroy(ds);
    s3s_free(&d);
    printf("test_s3_stream_inflight: ok (%u shards)\n", d.nshards);
    return 0;
}
