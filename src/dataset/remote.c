/* SPDX-License-Identifier: MIT */
/*
 * remote.c — opening s3://bucket/prefix (docs/S3.md). With a cache that holds the dataset the
 * open fetches it whole before it returns:
 *   1. ListObjectsV2 of the prefix; the shards are the objects named shard-NNNNN.lmdb directly
 *      under it, in name order (the dataset's order).
 *   2. Under the cache's lock (one fetch at a time per cache directory; a second process waits,
 *      then finds the shards there), each shard is looked up in CACHE/s3/HOST/BUCKET/PREFIX: a
 *      file of the listed size whose ".etag" side file holds the listed ETag is a hit; the rest
 *      are fetched in name order, every shard's ranged GETs in flight together (fetch layer),
 *      into "NAME.part.PID", synced and renamed into place. Files of that folder that the listing
 *      no longer has are removed. Room is made first by evicting least recently used shards of
 *      the cache that nobody holds.
 *   3. The folder is opened as a local dataset (the LMDB and offset-table checks of every open);
 *      every record of each shard just fetched is read and its CRC32C checked before the ETag
 *      side file marks the shard as good. A shard that fails is removed from the cache.
 *   4. Each shard stays flocked LOCK_SH while the dataset is open: no eviction removes it.
 * With a smaller cache, or when a loader asks for it (ds->stream), the open streams: it fetches
 * no shard, only each one's record count and the dataset's target shape (remote_head.c); a
 * loader then begins, downloads and finishes shards as it needs them, several at once
 * (stk__remote_begin/_download/_finish: a shard's target rows placed at its first attach), and
 * detaches them.
 */
#include "remote.h"
#include "remote_internal.h"

#include "cache.h"
#include "discover.h"
#include "fetch_stats.h"
#include "format.h"
#include "lmdb_check.h"
#include "s3.h"
#include "shard.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>


int stk_dataset_fetch_stats(const stk_dataset *ds, stk_fetch_stats *st)
{
    if (!ds || !st)
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    memset(st, 0, sizeof *st);
    const stk__remote *r = ds->remote;
    if (r) { /* the counters are atomic; the rest is set at open */
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
    for (size_t i = 0; r->fds && i < r->n; i++)
        if (r->fds[i] >= 0)
            close(r->fds[i]);
    free(r->fds);
    if (r->streaming) {
        for (int i = 0; i < r->npools; i++)
            stk__s3_pool_free(r->pools[i]);
        pthread_mutex_destroy(&r->mu);
        stk__s3_budget_destroy(&r->budget);
        stk__s3_objs_free(r->objs, r->n);
        free(r->fetches);
        free((void *)r->trows);
    }
    free(r);
}

void stk__remote_pfmt(char *out, size_t cap, const char *fmt, ...)
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

/* An idle connection pool of R for one download, or a new one (NULL: out of memory; the download
 * then runs on connections of its own). */
static stk__s3_pool *take_pool(stk__remote *r)
{
    pthread_mutex_lock(&r->mu);
    stk__s3_pool *p = r->npools ? r->pools[--r->npools] : NULL;
    pthread_mutex_unlock(&r->mu);
    return p ? p : stk__s3_pool_new();
}

/* P back into R's idle pools (freed when REMOTE_POOLS are idle already). NULL is a no-op. */
static void give_pool(stk__remote *r, stk__s3_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&r->mu);
    int kept = r->npools < REMOTE_POOLS;
    if (kept)
        r->pools[r->npools++] = p;
    pthread_mutex_unlock(&r->mu);
    if (!kept)
        stk__s3_pool_free(p);
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
    cfg.pool = stk__s3_pool_new(); /* the open's connections, kept for the first download */
    stk__s3_obj *all = NULL;
    size_t nall = 0, plen = strlen(prefix);
    if ((rc = stk__s3_list(&cfg, bucket, prefix, &all, &nall, ds->err)) != STK_OK) {
        stk__s3_pool_free(cfg.pool);
        return rc;
    }
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
    }
    if (cache.limit && biggest + SIDE_BYTES > cache.limit) { /* what a fetch of it reserves */
        rc = stk__err(ds->err, STK_E_TOO_LARGE,
                      "%s: the cache limit (%llu bytes, %s) is smaller than one shard: %s has "
                      "%llu bytes, and its fetch takes %u bytes more for its side files", url,
                      (unsigned long long)cache.limit, cache.root, all[big].key + plen,
                      (unsigned long long)biggest, (unsigned)SIDE_BYTES);
        goto out;
    }
    if ((cache.limit && total + (uint64_t)n * SIDE_BYTES > cache.limit) || ds->stream) {
        /* streaming: nothing fetched now, each shard when the loader needs it (attach); asked
         * for by a loader with a shard window even when the cache could hold every shard */
        remove_stale(dir, all, n, plen);
        free(rem->fds);
        rem->fds = NULL;
        rem->streaming = 1;
        pthread_mutex_init(&rem->mu, NULL);
        stk__s3_budget_init(&rem->budget, STK__MAX(cfg.inflight, 1));
        rem->cfg = cfg;
        rem->limit = cache.limit;
        rem->plen = plen;
        snprintf(rem->bucket, sizeof rem->bucket, "%s", bucket);
        snprintf(rem->dir, sizeof rem->dir, "%s", dir);
        snprintf(rem->cache_dir, sizeof rem->cache_dir, "%s", cache.root);
        snprintf(rem->url, sizeof rem->url, "%s%s", url, url[strlen(url) - 1] == '/' ? "" : "/");
        rc = stk__remote_stream_open(ds, rem, all, n);
        rem->cfg.pool = NULL; /* each download names the pool it took */
        give_pool(rem, cfg.pool);
        cfg.pool = NULL;
        all = NULL; /* rem owns the objects now */
        n = 0;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
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
    for (size_t i = 0; i < n; i++)
        need_bytes += need[i] ? SIDE_BYTES : 0;
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
        fx[nfetch++] = (stk__s3_fetch){all[i].key, all[i].size, fetch_fds[i], 0};
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
    stk__s3_pool_free(cfg.pool);
    if (rc != STK_OK) {
        stk__remote_free(rem);
        return rc;
    }
    ds->remote = rem;
    return STK_OK;
}

/* ---- streaming: a cache smaller than the dataset (docs/S3.md "Streaming"; its open: remote_head.c) */

int stk__remote_streaming(const stk_dataset *ds)
{
    return ds && ds->remote && ds->remote->streaming;
}

int stk__remote_rows_ready(const stk_dataset *ds, uint32_t s)
{
    if (!stk__remote_streaming(ds))
        return 1;
    return s < ds->remote->n && atomic_load_explicit(&ds->remote->trows[s], memory_order_acquire);
}

uint64_t stk__remote_limit(const stk_dataset *ds)
{
    return stk__remote_streaming(ds) ? ds->remote->limit : 0;
}

uint64_t stk__remote_shard_bytes(const stk_dataset *ds, uint32_t s)
{
    return stk__remote_streaming(ds) && s < ds->remote->n ? ds->remote->objs[s].size + SIDE_BYTES
                                                          : 0;
}

uint64_t stk__remote_hold_bytes(const stk_dataset *ds)
{
    if (!stk__remote_streaming(ds))
        return 0;
    uint64_t sum = 0;
    for (uint32_t s = 0; s < ds->remote->n; s++)
        sum += stk__remote_shard_bytes(ds, s);
    return sum;
}

int stk__remote_shards_inflight(const stk_dataset *ds)
{
    return stk__remote_streaming(ds) ? STK__MAX(ds->remote->cfg.shards, 1) : 1;
}

void stk__remote_starved(stk_dataset *ds, double seconds)
{
    if (ds && ds->remote)
        stk__fetch_ctr_starved(&ds->remote->ctr, seconds);
}

uint32_t stk__remote_fetches(const stk_dataset *ds, uint32_t s)
{
    if (!stk__remote_streaming(ds) || s >= ds->remote->n)
        return 0;
    pthread_mutex_lock(&ds->remote->mu);
    uint32_t v = ds->remote->fetches[s];
    pthread_mutex_unlock(&ds->remote->mu);
    return v;
}

uint32_t stk__remote_peak_downloads(const stk_dataset *ds)
{
    if (!stk__remote_streaming(ds))
        return 0;
    pthread_mutex_lock(&ds->remote->mu);
    uint32_t v = ds->remote->dl_peak;
    pthread_mutex_unlock(&ds->remote->mu);
    return v;
}

/* Is PATH (of SIZE bytes) a copy another process has just put there and holds (its shared
 * flock), not yet marked good? Then it is adopted rather than replaced. */
static int held_by_other(const char *path, uint64_t size)
{
    struct stat st;
    if (stat(path, &st) != 0 || (uint64_t)st.st_size != size)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd);
    return held;
}

int stk__remote_begin(stk_dataset *ds, uint32_t s, stk__remote_job *j, char *err)
{
    stk__remote *r = ds->remote;
    memset(j, 0, sizeof *j);
    j->shard = s;
    j->fd = -1;
    if (!stk__remote_streaming(ds) || s >= r->n)
        return stk__err(err, STK_E_INVALID, "stk__remote_begin: not a streamed shard");
    const stk__s3_obj *o = &r->objs[s];
    const char *name = o->key + r->plen;
    char path[PATH_MAX + 16], side[PATH_MAX + 32], etag[96];
    pfmt(path, sizeof path, "%s/%s", r->dir, name);
    pfmt(side, sizeof side, "%s.etag", path);
    stk__cache cache;
    int rc = stk__cache_open(&cache, r->cache_dir, r->limit, err);
    if (rc != STK_OK)
        return rc;
    if ((rc = stk__cache_lock(&cache, err)) != STK_OK) {
        stk__cache_close(&cache);
        return rc;
    }
    struct stat st;
    j->hit = stat(path, &st) == 0 && (uint64_t)st.st_size == o->size &&
             read_small(side, etag, sizeof etag) == 0 && strcmp(etag, o->etag) == 0;
    if (j->hit) { /* held from now: no eviction; marked recently used */
        if ((j->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            rc = stk__err(err, -errno, "%s: %s", path, strerror(errno));
        else {
            flock(j->fd, LOCK_SH);
            futimens(j->fd, NULL);
        }
    } else if ((rc = stk__cache_make_room(&cache, o->size + SIDE_BYTES, ".lmdb", err)) == STK_OK) {
        /* the part file takes its room at once (its size counts in the cache's usage, for this
         * process's next begin and for any other process): the shard and its side files */
        pfmt(j->tmp, sizeof j->tmp, "%s/%s.part.%d", r->dir, name, (int)getpid());
        j->fd = open(j->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (j->fd < 0 || ftruncate(j->fd, (off_t)(o->size + SIDE_BYTES)) != 0) {
            rc = stk__err(err, -errno, "%s: %s", j->tmp, strerror(errno));
            if (j->fd >= 0)
                close(j->fd);
            j->fd = -1;
            unlink(j->tmp);
        }
    }
    stk__cache_unlock(&cache);
    stk__cache_close(&cache);
    if (rc == STK_OK)
        stk__fetch_ctr_lookup(&r->ctr, j->hit, o->size);
    return rc;
}

int stk__remote_download(stk_dataset *ds, stk__remote_job *j, char *err)
{
    stk__remote *r = ds->remote;
    if (j->hit)
        return STK_OK;
    const stk__s3_obj *o = &r->objs[j->shard];
    pthread_mutex_lock(&r->mu);
    double t = stk__now();
    if (r->dl_now)
        stk__fetch_ctr_busy(&r->ctr, t - r->dl_mark);
    r->dl_mark = t;
    r->dl_peak = STK__MAX(r->dl_peak, ++r->dl_now);
    pthread_mutex_unlock(&r->mu);
    /* the request slots are shared with the other downloads (r->budget: each request holds one,
     * passed on to the next download as soon as this one has nothing left to ask for); parts
     * small enough that one shard alone could fill them (at least 1 MiB each) */
    stk__s3_cfg c = r->cfg;
    c.cancel = &r->cancel;
    c.budget = &r->budget;
    c.pool = take_pool(r);
    c.inflight = STK__MAX(1, c.inflight);
    uint64_t part = (o->size + (uint64_t)c.inflight - 1) / (uint64_t)c.inflight;
    c.part_bytes = STK__MIN(c.part_bytes, STK__MAX(part, (uint64_t)1 << 20));
    stk__s3_fetch fx = {o->key, o->size, j->fd, 0};
    stk__s3_stats st = {0};
    int rc = stk__s3_get_many(&c, r->bucket, &fx, 1, &st, err);
    if (rc == STK_OK && (ftruncate(j->fd, (off_t)o->size) != 0 || fdatasync(j->fd) != 0))
        rc = stk__err(err, -errno, "%s: %s", j->tmp, strerror(errno));
    /* busy is the time with at least one download in flight, counted at every start and end
     * (overlapping downloads' wall times summed would count the same seconds several times and
     * cut the link's measured rate; counted only when none is left, a run that always has one
     * in flight would show none) */
    st.seconds = 0;
    stk__fetch_ctr_add(&r->ctr, &st);
    pthread_mutex_lock(&r->mu);
    t = stk__now();
    stk__fetch_ctr_busy(&r->ctr, t - r->dl_mark);
    r->dl_mark = t;
    r->dl_now--;
    if (rc == STK_OK)
        r->fetches[j->shard]++;
    pthread_mutex_unlock(&r->mu);
    give_pool(r, c.pool);
    return rc;
}

void stk__remote_cancel(stk_dataset *ds, int on)
{
    if (stk__remote_streaming(ds))
        atomic_store(&ds->remote->cancel, on);
}

void stk__remote_abandon(stk_dataset *ds, stk__remote_job *j)
{
    (void)ds;
    if (j->fd >= 0)
        close(j->fd);
    if (!j->hit && j->tmp[0])
        unlink(j->tmp);
    j->fd = -1;
    j->tmp[0] = '\0';
}

/* Put a downloaded part file in its place (under the cache lock): a copy another process put
 * there meanwhile and holds is adopted instead (CHECK: it is not marked good yet, so checked). */
static int place(stk__remote *r, stk__remote_job *j, const char *path, int *check, char *err)
{
    stk__cache cache;
    int rc = stk__cache_open(&cache, r->cache_dir, r->limit, err);
    if (rc != STK_OK)
        return rc;
    if ((rc = stk__cache_lock(&cache, err)) != STK_OK) {
        stk__cache_close(&cache);
        return rc;
    }
    *check = 1;
    if (held_by_other(path, r->objs[j->shard].size)) {
        close(j->fd);
        unlink(j->tmp);
    } else {
        close(j->fd);
        remove_shard(path); /* a stale copy, its lock file and ETag */
        if (rename(j->tmp, path) != 0) {
            rc = stk__err(err, -errno, "%s: %s", path, strerror(errno));
            unlink(j->tmp);
        }
    }
    j->tmp[0] = '\0';
    j->fd = rc == STK_OK ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (rc == STK_OK && j->fd < 0)
        rc = stk__err(err, -errno, "%s: %s", path, strerror(errno));
    if (j->fd >= 0) {
        flock(j->fd, LOCK_SH); /* held: no eviction while attached */
        futimens(j->fd, NULL);
    }
    stk__cache_unlock(&cache);
    stk__cache_close(&cache);
    return rc;
}

int stk__remote_finish(stk_dataset *ds, stk__remote_job *j, char *err)
{
    stk__remote *r = ds->remote;
    uint32_t s = j->shard;
    const stk__s3_obj *o = &r->objs[s];
    const char *name = o->key + r->plen;
    char path[PATH_MAX + 16], side[PATH_MAX + 32];
    pfmt(path, sizeof path, "%s/%s", r->dir, name);
    pfmt(side, sizeof side, "%s.etag", path);
    int check = 0, rc = j->hit ? STK_OK : place(r, j, path, &check, err);
    if (rc != STK_OK) {
        stk__remote_abandon(ds, j);
        return rc;
    }
    int fd = j->fd;
    j->fd = -1;
    /* open it into its place of the offset table (the dataset-wide sums are the open's) */
    stk__shard *sh = &ds->shards[s];
    uint64_t first = sh->first, count = sh->count, pb = ds->payload_bytes, fb = ds->file_bytes;
    char *keep = sh->path;
    stk__recvec recs = {ds->recs, first, ds->count + 1};
    rc = stk__shard_open(ds, sh, s, path, 0, 1, 1, &recs);
    ds->payload_bytes = pb;
    ds->file_bytes = fb;
    if (sh->path != keep)
        free(keep);
    if (rc == STK_OK && (sh->first != first || sh->count != count))
        rc = stk__err(ds->err, STK_E_FORMAT, "%s%s: %llu records when opened, its LMDB pages "
                      "said %llu at open", r->url, name, (unsigned long long)sh->count,
                      (unsigned long long)count);
    /* its target rows into their place of the table: written at the first attach, before any
     * reader asks for its records; at a later attach (another epoch) only compared, so that the
     * readers still working on rows of its previous attach read bytes nobody writes */
    if (rc == STK_OK && ds->trow) {
        uint8_t *dst = ds->targets + (size_t)first * ds->trow;
        if (!atomic_load_explicit(&r->trows[s], memory_order_relaxed))
            memcpy(dst, ds->tstage, (size_t)count * ds->trow);
        else if (memcmp(dst, ds->tstage, (size_t)count * ds->trow) != 0)
            rc = stk__err(ds->err, STK_E_CHANGED, "%s%s: its targets differ from those it had "
                          "when attached before", r->url, name);
    }
    free(ds->tstage);
    ds->tstage = NULL;
    if (rc == STK_OK && check) { /* every record's CRC32C before the shard is marked good */
        void *buf = NULL;
        size_t cap = 0;
        rc = verify_shard(ds, s, &buf, &cap); /* ds->opened: attach runs after the open */
        free(buf);
        if (rc == STK_OK)
            rc = write_small(side, o->etag, ds->err);
    }
    if (rc != STK_OK) {
        char why[STK__ERRLEN];
        snprintf(why, sizeof why, "%s", ds->err[0] ? ds->err : stk_strerror(rc));
        pfmt(err, STK__ERRLEN, "%s%s fetched from endpoint %s: %s", r->url, name,
             r->cfg.endpoint, why);
        close(fd);
        stk__remote_detach(ds, s);
        if (check)
            remove_shard(path);
        return rc;
    }
    atomic_store_explicit(&r->trows[s], 1, memory_order_release);
    pthread_mutex_lock(&r->mu);
    r->fds[s] = fd;
    pthread_mutex_unlock(&r->mu);
    return STK_OK;
}

void stk__remote_detach(stk_dataset *ds, uint32_t s)
{
    stk__remote *r = ds->remote;
    if (!stk__remote_streaming(ds) || s >= r->n)
        return;
    stk__shard *sh = &ds->shards[s];
    uint64_t first = sh->first, count = sh->count, size = sh->file_size;
    char *path = sh->path ? stk__strdup(sh->path) : NULL;
    if (sh->fd >= 0 || sh->senv || sh->txn)
        stk__shard_close(sh); /* frees sh->path */
    else
        free(sh->path);
    memset(sh, 0, sizeof *sh);
    sh->fd = sh->fd_direct = -1;
    sh->path = path;
    sh->name = path ? strrchr(path, '/') + 1 : "";
    sh->first = first;
    sh->count = count;
    sh->file_size = size;
    sh->version = 2;
    pthread_mutex_lock(&r->mu);
    if (r->fds[s] >= 0)
        close(r->fds[s]); /* the shared lock goes: eviction may take it now */
    r->fds[s] = -1;
    pthread_mutex_unlock(&r->mu);
}
