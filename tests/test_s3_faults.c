/* SPDX-License-Identifier: MIT */
/*
 * test_s3_faults — the fetch stage through a faulty link: tests/s3_fault_proxy.py sits between it
 * and the real S3 server (the `s3` fixture) and spoils every second request, cycling through a
 * reset connection, 503 SlowDown, a body cut in half, a stall (headers, then silence: the stall
 * timeout must fire) and a 500. The open must retry every one of them and deliver every record
 * byte-identical to the local dataset — never a wrong sample, never a hang. Every fault kind must
 * have happened (the proxy's log), or the test proves nothing.
 */
#include "s3_util.h"


int main(void)
{
    s3u_env();
    stk__s3_cfg c = s3u_cfg();
    char bucket[64], url[256], local[4096], cache[4096], log[4200];
    s3u_bucket(&c, "fault", bucket, sizeof bucket);
    char *tmp = t_tmpdir("s3fault");
    snprintf(local, sizeof local, "%s/ds", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    snprintf(log, sizeof log, "%s/faults.log", tmp);
    s3u_dataset(local, 300, 1 << 20);
    size_t shards = s3u_upload(&c, bucket, "ds", local);
    snprintf(url, sizeof url, "s3://%s/ds", bucket);

    setenv("STK_PROXY_STALL_S", "4", 1);
    pid_t pid = s3u_proxy_start(&c, tmp, log, 2);
    setenv("STOKER_S3_STALL_S", "1", 1);
    setenv("STOKER_S3_RETRIES", "10", 1);

    stk_dataset *ref, *ds;
    T_OK(stk_dataset_create(&ref));
    T_OK(stk_dataset_open(ref, local));
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    int rc = stk_dataset_open(ds, url);
    s3u_proxy_stop(pid);
    T_CHECK(rc == STK_OK, "open through the faulty proxy: %s: %s", stk_status_name(rc),
            stk_dataset_last_error(ds));
    size_t cap = 1 << 20, lx, ly;
    uint8_t *x = malloc(cap), *y = malloc(cap);
    T_CHECK(stk_dataset_count(ds) == stk_dataset_count(ref), "record counts differ");
    for (uint64_t i = 0; i < stk_dataset_count(ref); i++) {
        T_OK(stk_dataset_read(ref, i, x, cap, &lx, NULL));
        T_OK(stk_dataset_read(ds, i, y, cap, &ly, NULL));
        T_CHECK(lx == ly && memcmp(x, y, lx) == 0, "record %llu differs", (unsigned long long)i);
    }
    const char *kinds[] = {"reset", "slowdown", "truncate", "stall", "500"};
    char *text = s3u_read_log(log);
    for (size_t k = 0; k < 5; k++)
        T_CHECK(strstr(text, kinds[k]), "fault %s never happened (%zu shards); log:\n%s", kinds[k],
                shards, text);
    printf("%s", text);
    free(text);
    free(x);
    free(y);
    stk_dataset_destroy(ds);
    stk_dataset_destroy(ref);
    t_rmtree(tmp);
    free(tmp);
    printf("test_s3_faults: ok (%zu shards)\n", shards);
    return 0;
}
