/* SPDX-License-Identifier: MIT */
/*
 * remote.c — opening s3://bucket/prefix (docs/S3.md). The first version fetches the whole
 * dataset before the open returns:
 *   1. ListObjectsV2 of the prefix; the shards are the objects named shard-NNNNN.lmdb directly
 *      under it, in name order (the dataset's order).
 *   2. Under the cache's lock (one fetch at a time per cache directory; a second process waits,
 *      then finds the shards there), each shard is looked up in CACHE/s3/HOST/BUCKET/PREFIX: a
 *      file of the listed size whose ".etag" side file holds the listed ETag is a hit; the rest
 *      are fetched in name order, every shard's ranged GETs in flight together (fetch layer),
 *      into "NAME.part.PID", synced and renamed into place. Files of that folder that the listing
 *      no longer has are removed. Room is made first by evicting least recently used shards of
 *      the cache that nobody holds; a limit that cannot hold the whole dataset is an error (the
 *      streaming order through a smaller cache is not built yet).
 *   3. The folder is opened as a local dataset (the LMDB and offset-table checks of every open);
 *      every record of each shard just fetched is read and its CRC32C checked before the ETag
 *      side file marks the shard as good. A shard that fails is removed from the cache.
 *   4. Each shard stays flocked LOCK_SH while the dataset is open: no eviction removes it.
 */
#include "remote.h"

#include "cache.h"
#include "discover.h"
#include "fetch_stats.h"
#include "format.h"
#include "s3.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct stk__remote {
    int *fds; /* one per shard, LOCK_SH */
    size_t n;
    stk__fetch_ctr ctr; /* fetch stats (fetch_stats.h) */
    int inflight;       /* the configuration they ran with */
    uint64_t cache_limit;
};

int stk_dataset_fetch_stats(const stk_dataset *ds, stk_fetch_stats *st)
{
    if (!ds || !st)
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    memset(st, 0, sizeof *st);
    const stk__remote *r = ds->remote;
    if (r) {
        st->shards = r->n;
        stk__fetch_ctr_read(&r->ctr, st);
        st->inflight = (uint64_t)r->inflight;
        st->cache_limit = r->cache_limit;
    }
    return STK_OK;
}

void stk__remote_free(stk__remote *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        if (r->fds[i] >= 0)
            close(r->fds[i]);
    free(r->fds);
    free(r);
}

/* snprintf for paths (truncation is caught by the open/rename that follows; PATH_MAX bounds it) */
__attribute__((format(printf, 3, 4))) static void pfmt(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

/* "shard-NNNNN.lmdb" (digits only between) */
static int is_shard_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 12 || strncmp(s, "shard-", 6) != 0 || strcmp(s + n - 5, ".lmdb") != 0)
        return 0;
    for (size_t i = 6; i < n - 5; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const stk__s3_obj *)a)->key, ((const stk__s3_obj *)b)->key);
}

static int read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t g = read(fd, buf, cap - 1);
    close(fd);
    if (g < 0)
        return -1;
    buf[g] = 0;
    return 0;
}

static int write_small(const char *path, const char *text, char *err)
{
    char tmp[PATH_MAX + 32];
    pfmt(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return stk__err(err, -errno, "%s: %s", tmp, strerror(errno));
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len && fdatasync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return stk__err(err, STK_E_IO, "%s: cannot write", path);
    }
    return STK_OK;
}

static void remove_shard(const char *path)
{
    char side[PATH_MAX + 8];
    unlink(path);
    pfmt(side, sizeof side, "%s-lock", path);
    unlink(side);
    pfmt(side, sizeof side, "%s.etag", path);
    unlink(side);
}

/* Remove the shard files of DIR that are not among OBJS' names (a dataset re-packed smaller). */
static void remove_stale(const char *dir, const stk__s3_obj *objs, size_t n, size_t plen)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_shard_name(de->d_name))
            continue;
        int listed = 0;
        for (size_t i = 0; i < n && !listed; i++)
            listed = strcmp(objs[i].key + plen, de->d_name) == 0;
        if (!listed) {
            char p[PATH_MAX];
            pfmt(p, sizeof p, "%s/%s", dir, de->d_name);
            remove_shard(p);
        }
    }
    closedir(d);
}

/* Read every record of shard SI and check it (stk_dataset_read checks the CRC32C). */
static int verify_shard(stk_dataset *ds, uint32_t si, void **buf, size_t *cap)
{
    const stk__shard *sh = &ds->shards[si];
    for (uint64_t i = sh->first; i < sh->first + sh->count; i++) {
        size_t len = 0;
        int rc = stk_dataset_read(ds, i, *buf, *cap, &len, NULL);
        if (rc == STK_E_RANGE && len > *cap) {
            void *nb = realloc(*buf, len);
            if (!nb)
                return STK_E_NOMEM;
            *buf = nb;
            *cap = len;
            rc = stk_dataset_read(ds, i, *buf, *cap, &len, NULL);
        }
        if (rc != STK_OK)
            return rc;
    }
    return STK_OK;
}

int stk__remote_open(stk_dataset *ds, const char *url, int want)
{
    char bucket[256], prefix[1024], dir[PATH_MAX], path[PATH_MAX + 64], tmp[PATH_MAX + 96];
    stk__s3_cfg cfg;
    int rc = stk__s3_url_split(url, bucket, sizeof bucket, prefix, sizeof prefix, ds->err);
    if (rc == STK_OK)
        rc = stk__s3_cfg_from_env(&cfg, ds->err);
    if (rc != STK_OK)
        return rc;
    stk__s3_obj *all = NULL;
    size_t nall = 0, plen = strlen(prefix);
    if ((rc = stk__s3_list(&cfg, bucket, prefix, &all, &nall, ds->err)) != STK_OK)
        return rc;
    /* keep the shards (in name order); an unfinished upload (`stoker pack` to s3://) left its
     * marker object: refused as a local DST with the marker file is */
    size_t n = 0;
    int marked = 0;
    for (size_t i = 0; i < nall; i++) {
        if (strcmp(all[i].key + plen, STK__INCOMPLETE_MARK) == 0)
            marked = 1;
        if (is_shard_name(all[i].key + plen))
            all[n++] = all[i];
        else
            free(all[i].key);
    }
    if (n)
        qsort(all, n, sizeof *all, by_key);
    stk__cache cache;
    stk__remote *rem = NULL;
    int *fetch_fds = NULL, locked = 0;
    stk__s3_fetch *fx = NULL;
    char *need = NULL;
    void *vbuf = NULL;
    size_t vcap = 0;
    if (marked && !ds->allow_incomplete) {
        rc = stk__err(ds->err, STK_E_INCOMPLETE, "%s: a pack to it is unfinished (the object %s%s "
                      "is there; endpoint %s): rerun the pack", url, prefix, STK__INCOMPLETE_MARK,
                      cfg.endpoint);
        goto out_nocache;
    }
    if (!n) {
        rc = stk__err(ds->err, STK_E_FORMAT, "%s: no shard-NNNNN.lmdb objects there (endpoint %s)",
                      url, cfg.endpoint);
        goto out_nocache;
    }
    if ((rc = stk__cache_open(&cache, ds->cache_dir, ds->cache_bytes, ds->err)) != STK_OK)
        goto out_nocache;
    const char *host = strstr(cfg.endpoint, "://") + 3;
    /* CACHE/s3/HOST/BUCKET/PREFIX (no trailing '/') */
    if (snprintf(dir, sizeof dir, "%s/s3/%s/%s%s%.*s", cache.root, host, bucket, plen ? "/" : "",
                 (int)(plen ? plen - 1 : 0), prefix) >= (int)sizeof dir) {
        rc = stk__err(ds->err, STK_E_INVALID, "%s: cache path too long", url);
        goto out;
    }
    if ((rc = stk__mkdirs(dir, ds->err)) != STK_OK || (rc = stk__cache_lock(&cache, ds->err)))
        goto out;
    locked = 1;
    rem = calloc(1, sizeof *rem);
    need = calloc(n, 1);
    fetch_fds = malloc(n * sizeof *fetch_fds);
    fx = calloc(n, sizeof *fx);
    if (!rem || !need || !fetch_fds || !fx || !(rem->fds = malloc(n * sizeof *rem->fds))) {
        rc = STK_E_NOMEM;
        goto out;
    }
    rem->n = n;
    stk__fetch_ctr_init(&rem->ctr);
    rem->inflight = cfg.inflight;
    rem->cache_limit = cache.limit;
    uint64_t total = 0, need_bytes = 0, biggest = 0;
    size_t nfetch = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        rem->fds[i] = fetch_fds[i] = -1;
        total += all[i].size;
        if (all[i].size > biggest) {
            biggest = all[i].size;
            big = i;
        }
        pfmt(path, sizeof path, "%s/%s", dir, all[i].key + plen);
        pfmt(tmp, sizeof tmp, "%s.etag", path);
        struct stat st;
        char etag[96];
        if (stat(path, &st) == 0 && (uint64_t)st.st_size == all[i].size &&
            read_small(tmp, etag, sizeof etag) == 0 && strcmp(etag, all[i].etag) == 0) {
            /* a hit: hold it (no eviction), mark it recently used */
            rem->fds[i] = open(path, O_RDONLY | O_CLOEXEC);
            if (rem->fds[i] >= 0) {
                flock(rem->fds[i], LOCK_SH);
                futimens(rem->fds[i], NULL);
                stk__fetch_ctr_lookup(&rem->ctr, 1, all[i].size);
                continue;
            }
        }
        need[i] = 1;
        need_bytes += all[i].size;
    }
    remove_stale(dir, all, n, plen);
    if (cache.limit && biggest > cache.limit) {
        rc = stk__err(ds->err, STK_E_TOO_LARGE,
                      "%s: the cache limit (%llu bytes, %s) is smaller than one shard: %s has "
                      "%llu bytes", url, (unsigned long long)cache.limit, cache.root,
                      all[big].key + plen, (unsigned long long)biggest);
        goto out;
    }
    if (cache.limit && total > cache.limit) {
        rc = stk__err(ds->err, STK_E_TOO_LARGE,
                      "%s: the cache limit (%llu bytes, %s) cannot hold the dataset's %zu shards "
                      "(%llu bytes); this version fetches the whole dataset (streaming through a "
                      "smaller cache is not implemented yet)", url,
                      (unsigned long long)cache.limit, cache.root, n, (unsigned long long)total);
        goto out;
    }
    if ((rc = stk__cache_make_room(&cache, need_bytes, ".lmdb", ds->err)) != STK_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (!need[i])
            continue;
        pfmt(tmp, sizeof tmp, "%s/%s.part.%d", dir, all[i].key + plen, (int)getpid());
        fetch_fds[i] = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fetch_fds[i] < 0 || ftruncate(fetch_fds[i], (off_t)all[i].size) != 0) {
            rc = stk__err(ds->err, -errno, "%s: %s", tmp, strerror(errno));
            goto out;
        }
        fx[nfetch++] = (stk__s3_fetch){all[i].key, all[i].size, fetch_fds[i]};
        stk__fetch_ctr_lookup(&rem->ctr, 0, all[i].size);
    }
    if (nfetch) { /* the open waits for the whole download: all of it is starved time */
        stk__s3_stats got = {0};
        rc = stk__s3_get_many(&cfg, bucket, fx, nfetch, &got, ds->err);
        stk__fetch_ctr_add(&rem->ctr, &got);
        stk__fetch_ctr_starved(&rem->ctr, got.seconds);
        if (rc != STK_OK)
            goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!need[i])
            continue;
        pfmt(tmp, sizeof tmp, "%s/%s.part.%d", dir, all[i].key + plen, (int)getpid());
        pfmt(path, sizeof path, "%s/%s", dir, all[i].key + plen);
        /* a stale copy's LMDB lock file goes with it: a process still reading the old copy
         * keeps both, the next opener of the new copy makes a lock file of its own */
        char lockp[PATH_MAX + 80];
        pfmt(lockp, sizeof lockp, "%s-lock", path);
        unlink(lockp);
        if (fdatasync(fetch_fds[i]) != 0 || rename(tmp, path) != 0) {
            rc = stk__err(ds->err, -errno, "%s: %s", path, strerror(errno));
            goto out;
        }
        pfmt(tmp, sizeof tmp, "%s.etag", path);
        unlink(tmp);
        rem->fds[i] = fetch_fds[i]; /* the fetched file, now under its name */
        fetch_fds[i] = -1;
        flock(rem->fds[i], LOCK_SH);
    }
    struct stat dst;
    if (stat(dir, &dst) != 0) {
        rc = stk__err(ds->err, -errno, "%s: %s", dir, strerror(errno));
        goto out;
    }
    if ((rc = stk__discover_open(ds, dir, &dst, want)) != STK_OK)
        goto out;
    /* check every record of what was just fetched, then mark it good */
    ds->opened = 1;
    for (uint32_t s = 0; s < ds->nshards && rc == STK_OK; s++) {
        size_t i = 0;
        while (i < n && strcmp(all[i].key + plen, ds->shards[s].name) != 0)
            i++;
        if (i == n || !need[i])
            continue;
        pfmt(path, sizeof path, "%s/%s", dir, all[i].key + plen);
        if ((rc = verify_shard(ds, s, &vbuf, &vcap)) != STK_OK) {
            char why[STK__ERRLEN];
            snprintf(why, sizeof why, "%s", ds->err);
            remove_shard(path);
            rc = stk__err(ds->err, rc, "%s: shard %s fetched from endpoint %s failed its check "
                          "(%s) and was removed from the cache", url, all[i].key + plen,
                          cfg.endpoint, why[0] ? why : stk_strerror(rc));
            break;
        }
        pfmt(tmp, sizeof tmp, "%s.etag", path);
        rc = write_small(tmp, all[i].etag, ds->err);
    }
    ds->opened = 0;
out:
    if (locked)
        stk__cache_unlock(&cache);
    stk__cache_close(&cache);
out_nocache:
    if (fetch_fds)
        for (size_t i = 0; i < n; i++)
            if (fetch_fds[i] >= 0) {
                close(fetch_fds[i]);
                pfmt(tmp, sizeof tmp, "%s/%s.part.%d", dir, all[i].key + plen, (int)getpid());
                unlink(tmp);
            }
    free(fetch_fds);
    free(fx);
    free(need);
    free(vbuf);
    stk__s3_objs_free(all, n);
    if (rc != STK_OK) {
        stk__remote_free(rem);
        return rc;
    }
    ds->remote = rem;
    return STK_OK;
}
