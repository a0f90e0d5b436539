/* SPDX-License-Identifier: MIT */
/*
 * s3streambench — steady epoch rate of an s3:// dataset read through a cache of a quarter of its
 * size (streaming: the shard-window order, shards fetched ahead) against a cache that holds it
 * all (fetched once at open, then read locally), on whatever endpoint AWS_* names.
 *
 *   eval "$(scripts/s3-server.sh start /tmp/s3)"
 *   s3streambench [--records N] [--bytes B] [--shard-mb M] [--epochs E] [--workers T]
 *
 * Writes N records of B random bytes in shards of about M MiB into a temporary folder, uploads
 * them to a new bucket, then for each cache (quarter, whole; fresh directories) runs E epochs of
 * the loader in STK_STAGE_READ (read + CRC, no decode: the figures are the fetch/read path's) and
 * prints each epoch's seconds and MB/s of payload and the shards fetched; the steady rate is the
 * mean of epochs 2..E.
 */
#include "common.h"
#include "s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc, const char *msg)
{
    fprintf(stderr, "s3streambench: %s: %s: %s\n", what, stk_status_name(rc), msg ? msg : "");
    exit(1);
}

static double run(const char *url, const char *cache, uint64_t limit, int epochs, int workers,
                  uint64_t payload)
{
    stk_loader *h;
    stk_loader_create(&h);
    stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ);
    stk_loader_set(h, STK_P_BATCH_SIZE, 64);
    stk_loader_set(h, STK_P_WORKERS, workers);
    stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)limit);
    stk_loader_set_cache_dir(h, cache);
    double t0 = now();
    int rc = stk_loader_open(h, url);
    if (rc == STK_OK)
        rc = stk_loader_start(h);
    if (rc != STK_OK)
        die("open/start", rc, stk_loader_last_error(h));
    printf("  cache %s: open %.2f s\n", limit ? "quarter" : "whole", now() - t0);
    double steady = 0;
    stk_fetch_stats prev = {0};
    for (int e = 0; e < epochs; e++) {
        t0 = now();
        const stk_batch *b;
        while ((rc = stk_loader_next(h, NULL, 600000, &b)) == STK_OK)
            stk_loader_release(h, b, NULL);
        if (rc != STK_END)
            die("next", rc, stk_loader_last_error(h));
        double s = now() - t0;
        stk_fetch_stats fs;
        stk_dataset_fetch_stats(stk_loader_dataset(h), &fs);
        printf("    epoch %d: %.2f s, %.0f MB/s payload, %llu shards fetched\n", e, s,
               payload / s / 1e6, (unsigned long long)(fs.shards_fetched - prev.shards_fetched));
        prev = fs;
        if (e > 0)
            steady += s;
    }
    stk_loader_destroy(h);
    return epochs > 1 ? payload / (steady / (epochs - 1)) / 1e6 : 0;
}

int main(int argc, char **argv)
{
    uint64_t n = 640, bytes = 100000, shard_mb = 4;
    int epochs = 4, workers = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--records"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--shard-mb"))
            shard_mb = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--epochs"))
            epochs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--workers"))
            workers = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: s3streambench [--records N] [--bytes B] [--shard-mb M] "
                    "[--epochs E] [--workers T]\n");
            return 2;
        }
    }
    char tmp[] = "/tmp/stk-s3streambench-XXXXXX", dir[4200], cache[4200], url[256];
    if (!mkdtemp(tmp))
        die("mkdtemp", -1, tmp);
    snprintf(dir, sizeof dir, "%s/ds", tmp);
    stk_writer *w;
    stk_writer_create(&w);
    stk_writer_set(w, STK_W_SHARD_BYTES, (int64_t)(shard_mb << 20));
    int rc = stk_writer_open(w, dir);
    uint8_t *rec = malloc(bytes);
    uint64_t x = 88172645463325252ull;
    for (uint64_t i = 0; i < n && rc == STK_OK; i++) {
        for (uint64_t k = 0; k < bytes; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            rec[k] = (uint8_t)x;
        }
        rc = stk_writer_add(w, rec, bytes, (int32_t)(i % 10), NULL);
    }
    if (rc == STK_OK)
        rc = stk_writer_finish(w);
    if (rc != STK_OK)
        die("pack", rc, stk_writer_last_error(w));
    stk_writer_destroy(w);
    free(rec);

    stk__s3_cfg c;
    char err[STK__ERRLEN], bucket[64], key[256], path[4400];
    if ((rc = stk__s3_cfg_from_env(&c, err)) != STK_OK)
        die("config", rc, err);
    snprintf(bucket, sizeof bucket, "stk-streambench-%d", (int)getpid());
    if ((rc = stk__s3_make_bucket(&c, bucket, err)) != STK_OK)
        die("bucket", rc, err);
    stk_dataset *ds;
    stk_dataset_create(&ds);
    if ((rc = stk_dataset_open(ds, dir)) != STK_OK)
        die("open local", rc, stk_dataset_last_error(ds));
    stk_dataset_info info;
    stk_dataset_info_get(ds, &info);
    uint64_t total = 0;
    for (uint32_t s = 0; s < info.shards; s++) {
        const char *p = stk_dataset_shard_path(ds, s);
        snprintf(key, sizeof key, "ds/%s", strrchr(p, '/') + 1);
        snprintf(path, sizeof path, "%s", p);
        FILE *f = fopen(path, "rb");
        fseek(f, 0, SEEK_END);
        total += (uint64_t)ftell(f);
        fclose(f);
        if ((rc = stk__s3_put_file(&c, bucket, key, path, NULL, err)) != STK_OK)
            die("upload", rc, err);
    }
    stk_dataset_destroy(ds);
    snprintf(url, sizeof url, "s3://%s/ds", bucket);
    printf("s3streambench: %llu records of %llu bytes, %u shards, %.1f MB, endpoint %s\n",
           (unsigned long long)n, (unsigned long long)bytes, info.shards, total / 1e6, c.endpoint);
    snprintf(cache, sizeof cache, "%s/cache-quarter", tmp);
    double q = run(url, cache, total / 4, epochs, workers, n * bytes);
    snprintf(cache, sizeof cache, "%s/cache-whole", tmp);
    double wh = run(url, cache, 0, epochs, workers, n * bytes);
    printf("steady epochs (2..%d): quarter cache %.0f MB/s, whole cache %.0f MB/s, ratio %.2f\n",
           epochs, q, wh, wh > 0 ? q / wh : 0);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "s3streambench: could not remove %s\n", tmp);
    return 0;
}
