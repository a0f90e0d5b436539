/* SPDX-License-Identifier: MIT
 *
 * test_s3_stream_halt — a streaming loader's halt cancels its shard downloads in progress
 * (docs/S3.md "Streaming", step 7) instead of waiting for them. The tests' proxy holds every
 * shard download (STK_PROXY_HOLD with more objects than will ever be asked for, for 60 s); once
 * the fetch layer has downloads in progress, the loader is destroyed. Destroying must return
 * while the proxy still holds them — its log says nothing yet ("hold timed out" is written only
 * when the 60 s end, and a destroy that waited for its downloads could return only after) —
 * and leave no part file in the cache.
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#include "remote.h"


static int part_files(const char *dir)
{
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "exit $(find '%s' -name '*.part.*' | wc -l)", dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
    s3s_data d;
    s3s_make(&d, "halt");
    stk__s3_cfg c = s3u_cfg();
    char log[4400], cache[4400];
    snprintf(log, sizeof log, "%s/proxy.log", d.tmp);
    snprintf(cache, sizeof cache, "%s/cache", d.tmp);
    setenv("STK_PROXY_HOLD", "1000", 1);
    setenv("STK_PROXY_HOLD_S", "60", 1);
    pid_t proxy = s3u_proxy_start(&c, d.tmp, log, 0);
    stk_loader *h = s3s_loader(&d, cache, d.total_bytes / 2, 2, 1, 0, 1);
    T_OK(stk_loader_start(h));
    const stk_dataset *ds = stk_loader_dataset(h);
    for (int i = 0; i < 3000 && stk__remote_peak_downloads(ds) < 1; i++)
        usleep(10000);
    T_CHECK(stk__remote_peak_downloads(ds) >= 1, "no shard download started in 30 s");
    stk_loader_destroy(h);
    char *text = s3u_read_log(log);
    printf("  destroyed with downloads held; proxy log: '%s'\n", text);
    T_CHECK(!strstr(text, "hold"), "the destroy waited for the held downloads: %s", text);
    int parts = part_files(cache);
    T_CHECK(parts == 0, "%d part files left in the cache", parts);
    free(text);
    s3u_proxy_stop(proxy);
    s3s_free(&d);
    printf("test_s3_stream_halt: ok\n");
    return 0;
}
