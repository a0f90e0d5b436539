/* SPDX-License-Identifier: MIT */
/*
 * test_s3_errors — opening s3:// datasets that cannot be opened fails at once with a clear error,
 * against the real server (the `s3` fixture): a wrong secret or an unknown access key (-EACCES,
 * the message names the endpoint and the server's code), an endpoint where nothing listens (the
 * endpoint named, after the retries), a prefix without shards (STK_E_FORMAT), a malformed URL,
 * a cache limit smaller than one shard (STK_E_TOO_LARGE "smaller than one shard", naming the
 * limit and the shard's size). None of them leaves anything in the cache but its lock file; nor
 * does an open through a limit that holds a shard but not the dataset, which streams (fetches
 * nothing at open: docs/S3.md "Streaming").
 */
#include "s3_util.h"

#include <errno.h>

static int open_err(const char *url, const char *cache, int64_t limit, char *msg, size_t cap)
{
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    T_OK(stk_dataset_set(ds, STK_P_CACHE_BYTES, limit));
    int rc = stk_dataset_open(ds, url);
    snprintf(msg, cap, "%s", stk_dataset_last_error(ds));
    stk_dataset_destroy(ds);
    printf("  %s -> %s: %s\n", url, stk_status_name(rc), msg);
    return rc;
}

int main(void)
{
    s3u_env();
    stk__s3_cfg c = s3u_cfg();
    char bucket[64], url[256], local[4096], cache[4096], msg[STK__ERRLEN], endpoint[600];
    s3u_bucket(&c, "err", bucket, sizeof bucket);
    char *tmp = t_tmpdir("s3err");
    snprintf(local, sizeof local, "%s/ds", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    s3u_dataset(local, 120, 1 << 20);
    size_t up = s3u_upload(&c, bucket, "ds", local);
    T_CHECK(up >= 2, "want several shards, got %zu", up);
    snprintf(url, sizeof url, "s3://%s/ds", bucket);
    snprintf(endpoint, sizeof endpoint, "%s", getenv("AWS_ENDPOINT_URL"));
    char secret[300];
    snprintf(secret, sizeof secret, "%s", getenv("AWS_SECRET_ACCESS_KEY"));

    /* a wrong secret: refused, named */
    setenv("AWS_SECRET_ACCESS_KEY", "0000000000000000000000000000000000000000", 1);
    int rc = open_err(url, cache, 0, msg, sizeof msg);
    T_CHECK(rc == -EACCES, "wrong secret: %s", stk_status_name(rc));
    T_CHECK(strstr(msg, endpoint) && strstr(msg, "SignatureDoesNotMatch"), "message: %s", msg);
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    /* an unknown access key */
    char key[300];
    snprintf(key, sizeof key, "%s", getenv("AWS_ACCESS_KEY_ID"));
    setenv("AWS_ACCESS_KEY_ID", "STKNOSUCHKEY", 1);
    rc = open_err(url, cache, 0, msg, sizeof msg);
    T_CHECK(rc == -EACCES && strstr(msg, endpoint) && strstr(msg, "InvalidAccessKeyId"),
            "unknown key: %s: %s", stk_status_name(rc), msg);
    setenv("AWS_ACCESS_KEY_ID", key, 1);

    /* nothing listens there: retried, then named (port 9 on the loopback: discard, not served) */
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
    setenv("STOKER_S3_RETRIES", "2", 1);
    rc = open_err(url, cache, 0, msg, sizeof msg);
    T_CHECK(rc != STK_OK && strstr(msg, "http://127.0.0.1:9") && strstr(msg, "gave up"),
            "no server: %s: %s", stk_status_name(rc), msg);
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    unsetenv("STOKER_S3_RETRIES");

    /* no shards under the prefix; a malformed URL */
    char none[300];
    snprintf(none, sizeof none, "s3://%s/nothing-here", bucket);
    rc = open_err(none, cache, 0, msg, sizeof msg);
    T_CHECK(rc == STK_E_FORMAT && strstr(msg, "no shard-NNNNN.lmdb"), "empty prefix: %s", msg);
    rc = open_err("s3://ab", cache, 0, msg, sizeof msg);
    T_CHECK(rc == STK_E_INVALID && strstr(msg, "bucket name"), "bad URL: %s", msg);

    /* cache limits: below one shard (an error naming both sizes); one shard but not the dataset
     * (opens, streaming) */
    rc = open_err(url, cache, 4096, msg, sizeof msg);
    T_CHECK(rc == STK_E_TOO_LARGE && strstr(msg, "smaller than one shard") &&
            strstr(msg, "4096 bytes") && strstr(msg, "shard-0"), "tiny cache: %s", msg);
    rc = open_err(url, cache, 3 << 20, msg, sizeof msg);
    T_CHECK(rc == STK_OK, "a cache of one shard but not the dataset: %s", msg);
    /* nothing was fetched by the failures */
    size_t n = 0;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "find '%s' -type f ! -name .lock | grep -q .", cache);
    n = system(cmd) == 0;
    T_CHECK(n == 0, "a failed open left files in the cache %s", cache);

    /* and the right credentials open it */
    rc = open_err(url, cache, 0, msg, sizeof msg);
    T_CHECK(rc == STK_OK, "open: %s", msg);
    t_rmtree(tmp);
    free(tmp);
    printf("test_s3_errors: ok\n");
    return 0;
}
