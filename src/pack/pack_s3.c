/* SPDX-License-Identifier: MIT */
/*
 * pack_s3.c — `stoker pack SRC s3://bucket/prefix`. The first version packs completely into a
 * local staging folder, CACHE/pack/HOST/BUCKET/PREFIX (the cache root of docs/S3.md), with the
 * local pack's own lock and resume, and then uploads:
 *   1. the marker object PREFIX/.stoker-pack-incomplete is written first: an s3:// open refuses
 *      the prefix (STK_E_INCOMPLETE) while it is there, as a local open refuses a DST with the
 *      marker file;
 *   2. every shard, in name order, that the bucket does not already hold with the same size (a
 *      rerun after a kill uploads only what is missing; an upload cut short is an unfinished
 *      multipart upload, which is invisible), each as a single PUT or a multipart upload with its
 *      parts in flight;
 *   3. the pack report, then the marker is deleted;
 *   4. the staging shards move into the read cache (CACHE/s3/HOST/BUCKET/PREFIX, each with the
 *      bucket's ETag, under the cache lock), so that the first open on this machine fetches
 *      nothing, and the staging folder is removed.
 * Packing and uploading are not overlapped yet, and shard objects of an older, larger pack under
 * the same prefix are deleted (the listing must describe the new dataset).
 */
#include "pack_s3.h"

#include "cache.h"
#include "format.h"
#include "s3.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_shard(const char *s)
{
    size_t n = strlen(s);
    return n > 11 && strncmp(s, "shard-", 6) == 0 && strcmp(s + n - 5, ".lmdb") == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int fail(const stk_pack_options *o, int rc, const char *err)
{
    if (o && o->error && o->error_cap)
        snprintf(o->error, o->error_cap, "%s", err[0] ? err : stk_strerror(rc));
    return rc;
}

static int upload(const stk__s3_cfg *c, const char *bucket, const char *prefix, const char *dir,
                  char *err)
{
    char key[2048], path[PATH_MAX + 300];
    snprintf(key, sizeof key, "%s%s", prefix, STK__INCOMPLETE_MARK);
    int rc = stk__s3_put_mem(c, bucket, key, "", err);
    if (rc != STK_OK)
        return rc;
    stk__s3_obj *have = NULL;
    size_t nhave = 0, n = 0, cap = 0, plen = strlen(prefix);
    if ((rc = stk__s3_list(c, bucket, prefix, &have, &nhave, err)) != STK_OK)
        return rc;
    char **names = NULL;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!is_shard(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = STK_E_NOMEM;
                break;
            }
            names = nn;
        }
        if (!(names[n] = stk__strdup(de->d_name))) {
            rc = STK_E_NOMEM;
            break;
        }
        n++;
    }
    if (d)
        closedir(d);
    if (names)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n && rc == STK_OK; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(key, sizeof key, "%s%s", prefix, names[i]);
        if (stat(path, &st) != 0)
            continue;
        int there = 0;
        for (size_t k = 0; k < nhave && !there; k++)
            there = strcmp(have[k].key, key) == 0 && have[k].size == (uint64_t)st.st_size;
        if (!there)
            rc = stk__s3_put_file(c, bucket, key, path, NULL, err);
    }
    /* shards of an older pack that this one does not have */
    for (size_t k = 0; k < nhave && rc == STK_OK; k++) {
        const char *name = have[k].key + plen;
        if (!is_shard(name) || strchr(name, '/'))
            continue;
        int ours = 0;
        for (size_t i = 0; i < n && !ours; i++)
            ours = strcmp(names[i], name) == 0;
        if (!ours)
            rc = stk__s3_delete(c, bucket, have[k].key, err);
    }
    snprintf(path, sizeof path, "%s/pack-report.tsv", dir);
    snprintf(key, sizeof key, "%spack-report.tsv", prefix);
    struct stat st;
    if (rc == STK_OK && stat(path, &st) == 0)
        rc = stk__s3_put_file(c, bucket, key, path, NULL, err);
    if (rc == STK_OK) {
        snprintf(key, sizeof key, "%s%s", prefix, STK__INCOMPLETE_MARK);
        rc = stk__s3_delete(c, bucket, key, err);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    stk__s3_objs_free(have, nhave);
    return rc;
}

/* Step 4: the uploaded shards of DIR into the read cache; the staging folder removed. */
static int adopt(const stk__s3_cfg *c, const char *bucket, const char *prefix, const char *dir,
                 char *err)
{
    stk__cache cache;
    stk__s3_obj *objs = NULL;
    size_t n = 0, plen = strlen(prefix);
    char cdir[PATH_MAX], path[PATH_MAX + 300];
    int rc = stk__cache_open(&cache, NULL, 0, err);
    if (rc != STK_OK)
        return rc;
    if (snprintf(cdir, sizeof cdir, "%s/s3/%s/%s%s%.*s", cache.root, strstr(c->endpoint, "://") + 3,
                 bucket, plen ? "/" : "", (int)(plen ? plen - 1 : 0), prefix) >= (int)sizeof cdir)
        rc = stk__err(err, STK_E_INVALID, "cache path too long");
    if (rc == STK_OK && (rc = stk__s3_list(c, bucket, prefix, &objs, &n, err)) == STK_OK &&
        (rc = stk__mkdirs(cdir, err)) == STK_OK && (rc = stk__cache_lock(&cache, err)) == STK_OK) {
        for (size_t i = 0; i < n && rc == STK_OK; i++) {
            const char *name = objs[i].key + plen;
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, name);
            if (is_shard(name) && !strchr(name, '/') && stat(path, &st) == 0 &&
                (uint64_t)st.st_size == objs[i].size)
                rc = stk__cache_adopt(cdir, name, path, objs[i].etag, err);
        }
        stk__cache_unlock(&cache);
    }
    stk__cache_close(&cache);
    stk__s3_objs_free(objs, n);
    if (rc != STK_OK)
        return rc;
    DIR *d = opendir(dir); /* what is left of the staging folder: lock files, report, marker */
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
    rmdir(dir);
    return STK_OK;
}

int stk__pack_to_s3(const char *src, const char *url, const stk_pack_options *opts,
                    stk_pack_ext_options *ext, stk_pack_result *result)
{
    char bucket[256], prefix[1024], err[STK__ERRLEN] = "", dir[PATH_MAX];
    stk__s3_cfg c;
    stk__cache cache;
    int rc = stk__s3_url_split(url, bucket, sizeof bucket, prefix, sizeof prefix, err);
    if (rc == STK_OK)
        rc = stk__s3_cfg_from_env(&c, err);
    if (rc == STK_OK)
        rc = stk__cache_open(&cache, NULL, 0, err);
    if (rc != STK_OK)
        return fail(opts, rc, err);
    stk__cache_close(&cache);
    size_t plen = strlen(prefix);
    if (snprintf(dir, sizeof dir, "%s/pack/%s/%s/%.*s", cache.root, strstr(c.endpoint, "://") + 3,
                 bucket, (int)(plen ? plen - 1 : 0), prefix) >= (int)sizeof dir)
        return fail(opts, STK_E_INVALID, "staging path too long");
    if ((rc = stk__mkdirs(dir, err)) != STK_OK)
        return fail(opts, rc, err);
    /* the local pack: its lock, resume, report; the finished staging folder is then uploaded */
    rc = stk_pack_ext(src, dir, opts, ext, result);
    if (rc == STK_E_EXISTS && !(opts && opts->force)) {
        /* packed before (a rerun after a failed or killed upload): upload what is missing */
        stk_dataset *ds = NULL;
        stk_dataset_info info;
        if ((rc = stk_dataset_create(&ds)) == STK_OK && (rc = stk_dataset_open(ds, dir)) == STK_OK &&
            (rc = stk_dataset_info_get(ds, &info)) == STK_OK && result) {
            memset(result, 0, sizeof *result);
            result->records = result->resumed_records = info.records;
            result->shards = info.shards;
            result->classes = info.classes;
            result->payload_bytes = info.payload_bytes;
        }
        if (rc != STK_OK)
            stk__err(err, rc, "%s: %s", dir, stk_dataset_last_error(ds));
        stk_dataset_destroy(ds);
        if (rc != STK_OK)
            return fail(opts, rc, err);
    } else if (rc != STK_OK) {
        return rc;
    }
    if ((rc = upload(&c, bucket, prefix, dir, err)) != STK_OK ||
        (rc = adopt(&c, bucket, prefix, dir, err)) != STK_OK)
        return fail(opts, rc, err);
    return STK_OK;
}
