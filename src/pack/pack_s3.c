/* SPDX-License-Identifier: MIT */
/*
 * pack_s3.c — `stoker pack SRC s3://bucket/prefix`: the local pack runs in a staging folder,
 * CACHE/pack/HOST/BUCKET/PREFIX (the cache root of docs/S3.md), with its own lock and resume,
 * and each shard is uploaded as soon as the writer has published it, while the pack goes on:
 *   1. the marker object PREFIX/.stoker-pack-incomplete is written first: an s3:// open refuses
 *      the prefix (STK_E_INCOMPLETE) while it is there, as a local open refuses a DST with the
 *      marker file;
 *   2. the writer's shard hook queues each finished shard for an uploader thread (a single PUT or
 *      a multipart upload with its parts in flight through curl multi); the queue holds at most
 *      STOKER_S3_PACK_QUEUE shards [2], the one in upload included, and the pack waits for room,
 *      so at most QUEUE + 1 shard files (queued, and the one being written) are on the local
 *      disk. An uploaded shard is
 *      replaced by its stand-in (pack_resume.c: its pack meta, durable before the shard goes), so
 *      a rerun after a kill resumes after it without the file. An upload that fails stops the pack
 *      with its error;
 *   3. the writer's unmark hook, before the local marker goes: what a resumed run kept locally is
 *      uploaded, shard objects of an older, larger pack under the prefix are deleted (the listing
 *      must describe the new dataset), the pack report is uploaded, then the marker is deleted;
 *   4. the staging folder is removed: no shard stays on the local disk (the first open fetches
 *      them into the read cache like any other reader's).
 * The local marker lives until the bucket is complete, so a kill at any point leaves a pack that
 * the same command resumes. Stand-ins whose object the bucket does not hold are dropped first.
 */
#include "pack_s3.h"

#include "cache.h"
#include "format.h"
#include "pack_resume.h"
#include "s3.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
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

/* The shard names (shard-NNNNN.lmdb) in DIR that are there or have a stand-in, sorted. */
static int staged_names(const char *dir, char ***out, size_t *nout)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = STK_OK;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char name[256];
        size_t l = strlen(de->d_name), el = strlen(STK__STANDIN_EXT);
        snprintf(name, sizeof name, "%s", de->d_name);
        if (l > el && !strcmp(name + l - el, STK__STANDIN_EXT))
            name[l - el] = 0;
        else if (!is_shard(name))
            continue;
        if (!is_shard(name))
            continue;
        int dup = 0; /* a shard and its stand-in both there (a kill between the two) */
        for (size_t i = 0; i < n && !dup; i++)
            dup = !strcmp(names[i], name);
        if (dup)
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
        if (!(names[n] = stk__strdup(name))) {
            rc = STK_E_NOMEM;
            break;
        }
        n++;
    }
    if (d)
        closedir(d);
    if (names)
        qsort(names, n, sizeof *names, by_name);
    *out = names;
    *nout = n;
    return rc;
}

static void names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int bucket_has(const stk__s3_obj *have, size_t nhave, const char *key, uint64_t size)
{
    for (size_t k = 0; k < nhave; k++)
        if (strcmp(have[k].key, key) == 0 && have[k].size == size)
            return 1;
    return 0;
}

/* ---- the uploader ---------------------------------------------------------------------------- */

#define QUEUE_MAX 64

typedef struct uploader {
    const stk__s3_cfg *c;
    const char *bucket, *prefix, *dir;
    stk__s3_obj *have; /* the listing: at the start (stand-ins checked), anew in on_unmark */
    size_t nhave;
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t q[QUEUE_MAX];
    size_t qhead, qlen, qcap;
    int stop;  /* no more shards will come: drain the queue, then end */
    int quit;  /* the pack failed: end after the upload in progress */
    int rc;    /* the first failure; ERR names it */
    char err[STK__ERRLEN];
} uploader;

/* Upload shard NO of the staging folder (always: an object of the same name may be an older
 * pack's), then leave its stand-in. */
static int upload_shard(uploader *u, uint32_t no, char *err)
{
    char path[PATH_MAX + 300], key[2048], name[64];
    snprintf(name, sizeof name, STK__SHARD_FMT, no);
    snprintf(path, sizeof path, "%s/%s", u->dir, name);
    snprintf(key, sizeof key, "%s%s", u->prefix, name);
    char why[STK__ERRLEN] = "";
    int rc = stk__s3_put_file(u->c, u->bucket, key, path, NULL, why);
    if (rc != STK_OK)
        return stk__err(err, rc, "uploading %s to s3://%s/%s (endpoint %s): %s", path, u->bucket, key,
                        u->c->endpoint, why[0] ? why : stk_strerror(rc));
    if ((rc = stk__shard_standin_write(path, err)) != STK_OK)
        return rc;
    if (unlink(path) != 0)
        return stk__err(err, -errno, "%s: cannot remove after its upload", path);
    return STK_OK;
}

static void *uploader_main(void *arg)
{
    uploader *u = arg;
    char err[STK__ERRLEN];
    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (!u->qlen && !u->stop && !u->quit)
            pthread_cond_wait(&u->cv, &u->mu);
        if (u->quit || !u->qlen)
            break;
        uint32_t no = u->q[u->qhead];
        pthread_mutex_unlock(&u->mu);
        err[0] = 0;
        int rc = upload_shard(u, no, err);
        pthread_mutex_lock(&u->mu);
        u->qhead = (u->qhead + 1) % u->qcap;
        u->qlen--;
        if (rc != STK_OK) {
            u->rc = rc;
            snprintf(u->err, sizeof u->err, "%s", err);
            u->quit = 1;
        }
        pthread_cond_broadcast(&u->cv);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* The writer's shard hook: queue shard NO, waiting while the queue is full. */
static int on_shard(void *user, uint32_t no, const char *path, char *err)
{
    uploader *u = user;
    (void)path;
    pthread_mutex_lock(&u->mu);
    while (u->qlen == u->qcap && !u->rc)
        pthread_cond_wait(&u->cv, &u->mu);
    int rc = u->rc;
    if (rc)
        snprintf(err, STK__ERRLEN, "%s", u->err);
    else {
        u->q[(u->qhead + u->qlen) % u->qcap] = no;
        u->qlen++;
        pthread_cond_broadcast(&u->cv);
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

/* End the thread: after the queue is drained (DRAIN) or after the upload in progress. */
static int uploader_end(uploader *u, int drain, char *err)
{
    if (!u->started)
        return STK_OK;
    pthread_mutex_lock(&u->mu);
    if (drain)
        u->stop = 1;
    else
        u->quit = 1;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    pthread_join(u->th, NULL);
    u->started = 0;
    if (u->rc && err)
        snprintf(err, STK__ERRLEN, "%s", u->err);
    return u->rc;
}

/* The writer's unmark hook: every shard uploaded, older shard objects gone, the report up, the
 * marker object deleted. */
static int on_unmark(void *user, char *err)
{
    uploader *u = user;
    int rc = uploader_end(u, 1, err);
    if (rc != STK_OK)
        return rc;
    char key[2048], path[PATH_MAX + 300], **names = NULL;
    size_t n = 0, plen = strlen(u->prefix);
    stk__s3_objs_free(u->have, u->nhave); /* the listing anew: what this run uploaded is in it */
    u->have = NULL;
    u->nhave = 0;
    if ((rc = stk__s3_list(u->c, u->bucket, u->prefix, &u->have, &u->nhave, err)) != STK_OK ||
        (rc = staged_names(u->dir, &names, &n)) != STK_OK) {
        names_free(names, n);
        return rc;
    }
    /* shards a resumed run kept from the killed one: uploaded unless the bucket holds them with
     * their size (the killed run of the same plan uploaded them and died before the stand-in) */
    for (size_t i = 0; i < n && rc == STK_OK; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", u->dir, names[i]);
        snprintf(key, sizeof key, "%s%s", u->prefix, names[i]);
        if (stat(path, &st) == 0 && !bucket_has(u->have, u->nhave, key, (uint64_t)st.st_size)) {
            char why[STK__ERRLEN] = "";
            if ((rc = stk__s3_put_file(u->c, u->bucket, key, path, NULL, why)) != STK_OK)
                stk__err(err, rc, "uploading %s to s3://%s/%s (endpoint %s): %s", path, u->bucket, key,
                         u->c->endpoint, why[0] ? why : stk_strerror(rc));
        }
    }
    /* shards of an older pack that this one does not have */
    for (size_t k = 0; k < u->nhave && rc == STK_OK; k++) {
        const char *name = u->have[k].key + plen;
        if (!is_shard(name) || strchr(name, '/'))
            continue;
        int ours = 0;
        for (size_t i = 0; i < n && !ours; i++)
            ours = strcmp(names[i], name) == 0;
        if (!ours)
            rc = stk__s3_delete(u->c, u->bucket, u->have[k].key, err);
    }
    names_free(names, n);
    snprintf(path, sizeof path, "%s/pack-report.tsv", u->dir);
    snprintf(key, sizeof key, "%spack-report.tsv", u->prefix);
    struct stat st;
    if (rc == STK_OK && stat(path, &st) == 0)
        rc = stk__s3_put_file(u->c, u->bucket, key, path, NULL, err);
    if (rc == STK_OK) {
        snprintf(key, sizeof key, "%s%s", u->prefix, STK__INCOMPLETE_MARK);
        rc = stk__s3_delete(u->c, u->bucket, key, err);
    }
    return rc;
}

/* Drop the stand-ins in DIR whose object the bucket does not hold with the shard's size (the
 * resume then repacks from the first of them). */
static void drop_lost_standins(const uploader *u)
{
    DIR *d = opendir(u->dir);
    struct dirent *de;
    char path[PATH_MAX + 300], key[2048];
    size_t el = strlen(STK__STANDIN_EXT);
    while (d && (de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l <= el || strcmp(de->d_name + l - el, STK__STANDIN_EXT) || strncmp(de->d_name, "shard-", 6))
            continue;
        uint64_t size;
        snprintf(path, sizeof path, "%s/%.*s", u->dir, (int)(l - el), de->d_name);
        snprintf(key, sizeof key, "%s%.*s", u->prefix, (int)(l - el), de->d_name);
        if (!stk__shard_standin_size(path, &size) || !bucket_has(u->have, u->nhave, key, size)) {
            snprintf(path, sizeof path, "%s/%s", u->dir, de->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
}

/* The staging folder of a finished pack: what is left (stand-ins, lock file, report) goes. */
static void unstage(const char *dir)
{
    char path[PATH_MAX + 300];
    DIR *d = opendir(dir);
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
}

int stk__pack_to_s3(const char *src, const char *url, const stk_pack_options *opts,
                    stk_pack_ext_options *ext, stk_pack_result *result)
{
    char bucket[256], prefix[1024], err[STK__ERRLEN] = "", dir[PATH_MAX], key[2048];
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
    long queue = 2;
    const char *qe = getenv("STOKER_S3_PACK_QUEUE");
    if (qe && *qe) {
        char *end;
        errno = 0;
        queue = strtol(qe, &end, 10);
        if (errno || *end || queue < 1 || queue > QUEUE_MAX)
            return fail(opts, STK_E_INVALID, "STOKER_S3_PACK_QUEUE must be 1..64 (shards waiting for upload)");
    }
    uploader u;
    memset(&u, 0, sizeof u);
    u.c = &c;
    u.bucket = bucket;
    u.prefix = prefix;
    u.dir = dir;
    u.qcap = (size_t)queue;
    /* the marker object first: nothing under the prefix is taken for a dataset until the end */
    snprintf(key, sizeof key, "%s%s", prefix, STK__INCOMPLETE_MARK);
    if ((rc = stk__s3_put_mem(&c, bucket, key, "", err)) != STK_OK ||
        (rc = stk__s3_list(&c, bucket, prefix, &u.have, &u.nhave, err)) != STK_OK)
        return fail(opts, rc, err);
    drop_lost_standins(&u);
    pthread_mutex_init(&u.mu, NULL);
    pthread_cond_init(&u.cv, NULL);
    if (pthread_create(&u.th, NULL, uploader_main, &u) != 0)
        rc = stk__err(err, STK_E_NOMEM, "cannot start the upload thread");
    else
        u.started = 1;
    stk__writer_hooks hooks = {on_shard, on_unmark, &u};
    if (rc == STK_OK) {
        rc = stk__pack_local(src, dir, opts, ext, result, &hooks);
        if (rc == STK_E_EXISTS && !(opts && opts->force)) {
            /* a staging folder without the marker: the bucket was completed and a kill came
             * before the staging folder went (or it is an older stoker's); pack it afresh */
            if ((rc = stk__dst_clean(dir, err)) == STK_OK) {
                rc = stk__pack_local(src, dir, opts, ext, result, &hooks);
            } else {
                uploader_end(&u, 0, NULL);
                pthread_mutex_destroy(&u.mu);
                pthread_cond_destroy(&u.cv);
                stk__s3_objs_free(u.have, u.nhave);
                return fail(opts, rc, err);
            }
        }
    }
    /* on failure the pack's error names the cause (an upload's too: the hook passed it) */
    uploader_end(&u, 0, NULL);
    pthread_mutex_destroy(&u.mu);
    pthread_cond_destroy(&u.cv);
    stk__s3_objs_free(u.have, u.nhave);
    if (rc != STK_OK)
        return err[0] ? fail(opts, rc, err) : rc;
    unstage(dir);
    return STK_OK;
}
