/* SPDX-License-Identifier: MIT */
/*
 * test_s3_config — endpoint, credentials and addressing read as the AWS tools read them, against
 * the real server (the `s3` fixture): the keys from a named profile of a credentials file
 * (AWS_PROFILE + AWS_SHARED_CREDENTIALS_FILE) and the endpoint from that profile in a config file
 * (AWS_CONFIG_FILE, [profile NAME] endpoint_url), with no AWS_* key in the environment; a profile
 * that exists nowhere is an error naming it; virtual-host addressing (BUCKET.localhost:PORT, which
 * libcurl resolves to the loopback; radosgw's rgw_dns_name is localhost); HTTPS with the server's
 * self-signed certificate in AWS_CA_BUNDLE, and without it a certificate error at once (not
 * retried). Each open reads every record back equal to the local dataset.
 */
#include "s3_util.h"

static void check_open(const char *url, const char *cache, stk_dataset *ref)
{
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    int rc = stk_dataset_open(ds, url);
    T_CHECK(rc == STK_OK, "open %s: %s", url, stk_dataset_last_error(ds));
    size_t cap = 1 << 20, lx, ly;
    uint8_t *x = malloc(cap), *y = malloc(cap);
    T_CHECK(stk_dataset_count(ds) == stk_dataset_count(ref), "counts differ");
    for (uint64_t i = 0; i < stk_dataset_count(ref); i++) {
        T_OK(stk_dataset_read(ref, i, x, cap, &lx, NULL));
        T_OK(stk_dataset_read(ds, i, y, cap, &ly, NULL));
        T_CHECK(lx == ly && memcmp(x, y, lx) == 0, "record %llu differs", (unsigned long long)i);
    }
    free(x);
    free(y);
    stk_dataset_destroy(ds);
}

int main(void)
{
    s3u_env();
    stk__s3_cfg c = s3u_cfg();
    char bucket[64], url[256], local[4096], cache[4200], file[4200], text[2048];
    s3u_bucket(&c, "conf", bucket, sizeof bucket);
    char *tmp = t_tmpdir("s3conf");
    snprintf(local, sizeof local, "%s/ds", tmp);
    s3u_dataset(local, 80, 1 << 20);
    s3u_upload(&c, bucket, "ds", local);
    snprintf(url, sizeof url, "s3://%s/ds", bucket);
    stk_dataset *ref;
    T_OK(stk_dataset_create(&ref));
    T_OK(stk_dataset_open(ref, local));

    /* a named profile: keys in the credentials file, endpoint in the config file */
    snprintf(file, sizeof file, "%s/credentials", tmp);
    snprintf(text, sizeof text, "[default]\naws_access_key_id = WRONG\naws_secret_access_key = WRONG\n"
             "\n[stk]\naws_access_key_id = %s\naws_secret_access_key=%s\n", c.key, c.secret);
    t_write_file(file, text, strlen(text));
    setenv("AWS_SHARED_CREDENTIALS_FILE", file, 1);
    snprintf(file, sizeof file, "%s/config", tmp);
    snprintf(text, sizeof text, "[profile stk]\nregion = %s\nendpoint_url = %s\n", c.region,
             c.endpoint);
    t_write_file(file, text, strlen(text));
    setenv("AWS_CONFIG_FILE", file, 1);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_REGION");
    setenv("AWS_PROFILE", "stk", 1);
    snprintf(cache, sizeof cache, "%s/cache-profile", tmp);
    check_open(url, cache, ref);

    /* a profile that is nowhere */
    setenv("AWS_PROFILE", "nosuchprofile", 1);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    int rc = stk_dataset_open(ds, url);
    T_CHECK(rc == STK_E_INVALID && strstr(stk_dataset_last_error(ds), "nosuchprofile"),
            "missing profile: %s: %s", stk_status_name(rc), stk_dataset_last_error(ds));
    stk_dataset_destroy(ds);
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    unsetenv("AWS_CONFIG_FILE");

    /* virtual-host addressing: http://BUCKET.localhost:PORT/key */
    setenv("AWS_ACCESS_KEY_ID", c.key, 1);
    setenv("AWS_SECRET_ACCESS_KEY", c.secret, 1);
    snprintf(text, sizeof text, "http://localhost:%s", strrchr(c.endpoint, ':') + 1);
    setenv("AWS_ENDPOINT_URL", text, 1);
    setenv("STOKER_S3_ADDRESSING", "virtual", 1);
    stk__s3_cfg v = s3u_cfg();
    T_CHECK(!v.path_style, "STOKER_S3_ADDRESSING=virtual not taken");
    snprintf(cache, sizeof cache, "%s/cache-virtual", tmp);
    check_open(url, cache, ref);

    /* HTTPS: the server's certificate trusted through AWS_CA_BUNDLE; refused without it */
    unsetenv("STOKER_S3_ADDRESSING");
    const char *https = getenv("STK_S3_HTTPS_ENDPOINT"), *ca = getenv("STK_S3_CA_BUNDLE");
    T_CHECK(https && ca, "the server's env has no HTTPS endpoint");
    setenv("AWS_ENDPOINT_URL", https, 1);
    setenv("AWS_CA_BUNDLE", ca, 1);
    snprintf(cache, sizeof cache, "%s/cache-https", tmp);
    check_open(url, cache, ref);
    unsetenv("AWS_CA_BUNDLE");
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, cache));
    rc = stk_dataset_open(ds, url);
    const char *msg = stk_dataset_last_error(ds);
    printf("  without the CA: %s: %s\n", stk_status_name(rc), msg);
    T_CHECK(rc != STK_OK && strstr(msg, https) && strstr(msg, "certificate") &&
            !strstr(msg, "gave up"), "https without the CA: %s", msg);
    stk_dataset_destroy(ds);

    stk_dataset_destroy(ref);
    t_rmtree(tmp);
    free(tmp);
    printf("test_s3_config: ok\n");
    return 0;
}
