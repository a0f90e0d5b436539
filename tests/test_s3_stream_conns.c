/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_conns — a streaming loader's downloads reuse their connections (docs/S3.md
 * "Requests": the connection pools of src/dataset/remote.c). Through the tests' proxy, which logs
 * every connection it accepts, with two requests in flight (STOKER_S3_INFLIGHT=2) and one shard
 * fetched ahead (STOKER_S3_SHARDS=1, so at most two downloads at once), a cache of half the
 * dataset: the epoch fetches every shard, each record comes once with the local copy's length
 * (the reader checks each record's CRC, the fetch every record of a shard before it is used), and
 * the epoch's downloads open at most 2 x 2 connections of their own (the open's are reused), where
 * a download on connections of its own opens one or more per shard (13 shards here).
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#include "remote.h"


/* Lines of the proxy's log that start with WHAT. */
static int count_lines(const char *log, const char *what)
{
    char *t = s3u_read_log(log);
    int n = 0;
    for (char *p = t; (p = strstr(p, what)) != NULL; p += strlen(what))
        n += p == t || p[-1] == '\n';
    free(t);
    return n;
}

int main(void)
{
    s3s_data d;
    s3s_make(&d, "conns");
    setenv("STOKER_S3_INFLIGHT", "2", 1);
    setenv("STOKER_S3_SHARDS", "1", 1);
    setenv("STK_PROXY_LOG_REQUESTS", "1", 1);
    stk__s3_cfg c = s3u_cfg();
    char log[4400], cache[4400];
    snprintf(log, sizeof log, "%s/proxy.log", d.tmp);
    snprintf(cache, sizeof cache, "%s/cache", d.tmp);
    pid_t proxy = s3u_proxy_start(&c, d.tmp, log, 0);

    stk_loader *h = s3s_loader(&d, cache, d.total_bytes / 2, 2, 1, 0, 1);
    const stk_dataset *ds = stk_loader_dataset(h);
    T_CHECK(stk__remote_streaming(ds), "half cache: not streamed");
    int conns_open = count_lines(log, "connection"), gets_open = count_lines(log, "request GET");
    T_OK(stk_loader_start(h));
    uint64_t *idx;
    size_t n = s3s_epoch(&d, h, &idx);
    s3s_check_whole(&d, idx, n, "half cache");
    free(idx);
    stk_fetch_stats fs;
    T_OK(stk_dataset_fetch_stats(ds, &fs));
    /* (and the next epoch's first ones, fetched ahead) */
    T_CHECK(fs.shards_fetched >= d.nshards, "%llu shards fetched, the dataset has %u",
            (unsigned long long)fs.shards_fetched, d.nshards);
    stk_loader_destroy(h);
    s3u_proxy_stop(proxy);

    int conns = count_lines(log, "connection") - conns_open;
    int gets = count_lines(log, "request GET") - gets_open;
    printf("the open: %d connections, %d GETs; the epoch: %d new connections for %d GETs of %llu "
           "shard downloads\n", conns_open, gets_open, conns, gets,
           (unsigned long long)fs.shards_fetched);
    T_CHECK(gets >= (int)fs.shards_fetched, "%d GETs for %llu shard downloads", gets,
            (unsigned long long)fs.shards_fetched);
    T_CHECK(conns <= 2 * 2, "the epoch's downloads opened %d connections for %llu shard "
            "downloads: at most 2 downloads x 2 requests in flight were to be opened, the rest "
            "reused", conns, (unsigned long long)fs.shards_fetched);
    s3s_free(&d);
    printf("ok\n");
    return 0;
}
