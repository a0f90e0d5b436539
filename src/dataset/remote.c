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
 * no shard, only each one's record count; a loader then begins, downloads and finishes shards
 * as it needs them, several at once (stk__remote_begin/_download/_finish), and detaches them.
 */
#include "remote.h"

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

/* Room a fetched shard takes in the cache beside its file: its LMDB lock file (8 KiB at LMDB's
 * default 126 readers) and its .etag, both counted in the cache's usage */
#define SIDE_BYTES 65536

struct stk__remote {
    int *fds; /* one per shard, LOCK_SH (streaming: while attached, else -1) */
    size_t n;
    stk__fetch_ctr ctr; /* fetch stats (fetch_stats.h) */
    int inflight;       /* the configuration they ran with */
    uint64_t cache_limit;
    /* streaming (a cache smaller than the dataset): what stk__remote_attach needs */
    int streaming;
    pthread_mutex_t mu;   /* fds[] while streaming and fetches[] (stk__remote_fetches) */
    stk__s3_cfg cfg;
    char bucket[256], url[1100], dir[PATH_MAX], cache_dir[PATH_MAX];
    uint64_t limit;
    stk__s3_obj *objs;    /* the shards' objects, in name order */
    size_t plen;          /* prefix length of their keys */
    uint32_t *fetches;    /* times each shard was fetched since open */
    /* 1: the shard's target rows are in ds->targets (set by the fetch thread after they are
     * written; read by stk_dataset_target) */
    _Atomic unsigned char *trows;
    /* under mu: shard downloads in progress, the most at once, and the time up to which their
     * busy time is counted (at every start and end: the union of their wall times) */
    uint32_t dl_now, dl_peak;
    double dl_mark;
    _Atomic int cancel; /* stk__remote_cancel: downloads in progress end at once */
    stk__s3_budget budget; /* the request slots (STOKER_S3_INFLIGHT) the downloads share */
};

static int stream_open(stk_dataset *ds, stk__remote *rem, stk__s3_obj *objs, size_t n);

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
        pthread_mutex_destroy(&r->mu);
        stk__s3_budget_destroy(&r->budget);
        stk__s3_objs_free(r->objs, r->n);
        free(r->fetches);
        free((void *)r->trows);
    }
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
    }
    if (cache.limit && biggest > cache.limit) {
        rc = stk__err(ds->err, STK_E_TOO_LARGE,
                      "%s: the cache limit (%llu bytes, %s) is smaller than one shard: %s has "
                      "%llu bytes", url, (unsigned long long)cache.limit, cache.root,
                      all[big].key + plen, (unsigned long long)biggest);
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
        rc = stream_open(ds, rem, all, n);
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
    if (rc != STK_OK) {
        stk__remote_free(rem);
        return rc;
    }
    ds->remote = rem;
    return STK_OK;
}

/* ---- streaming: a cache smaller than the dataset (docs/S3.md "Streaming") -------------------- */

/* LMDB meta page fields (the newer of pages 0 and 1 is the current one) */
#define HEAD_BYTES 8192u      /* two meta pages of LMDB's usual 4 KiB pages (larger: one more read) */
#define META_BYTES 160u       /* what is read of a meta page */
#define SMALL_INFLIGHT 64     /* the open's small reads in flight at once (at least) */

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/*
 * The target shape and type of the dataset (docs/FORMAT.md: every shard's is the same, or none)
 * from shard 0's `meta` database, read from the sparse head copy FD (of transaction TXNID, its
 * main database's root page already there): the `meta` tree's pages on the way to its four
 * target keys are fetched a level at a time (one small GET each, all in flight: a stoker shard's
 * meta is one leaf page, so one round trip), at most 8 levels. Each shard's own meta is checked
 * against it when the shard is attached (shard.c).
 */
static int head_targets(stk__remote *r, stk__s3_cfg *small, int fd, uint64_t txnid,
                        stk_target_info *t, char *err)
{
    static const char *const keys[4] = {STK__META_TARGET_DTYPE, STK__META_TARGET_SIZE,
                                        STK__META_TARGET_KIND, STK__META_TARGET_CLASSES};
    const stk__s3_obj *o = &r->objs[0];
    char name[PATH_MAX + 16];
    pfmt(name, sizeof name, "%s%s", r->url, o->key + r->plen);
    stk__lmdb_tree meta;
    int rc = stk__lmdb_tree_open(fd, o->size, txnid, STK__DB_META, &meta);
    if (rc != STK_OK)
        return stk__err(err, STK_E_FORMAT, "%s: cannot find its `meta` database in LMDB's main "
                        "database page (%s): not a stoker shard?", name, stk_strerror(rc));
    char vals[4][64];
    MDB_val v[4];
    for (int round = 0;; round++) {
        uint64_t need[4];
        int nneed = 0;
        for (int i = 0; i < 4; i++) {
            size_t len = 0;
            uint64_t pg = 0;
            rc = stk__lmdb_tree_get_sparse(&meta, keys[i], strlen(keys[i]), vals[i], sizeof vals[i],
                                           &len, &pg);
            v[i] = rc == 1 ? (MDB_val){STK__MIN(len, sizeof vals[i]), vals[i]} : (MDB_val){0, NULL};
            if (rc == 1 && len > sizeof vals[i])
                v[i].mv_size = sizeof vals[i] + 1; /* too long to be a number or a kind */
            if (rc == 2 && (!nneed || need[nneed - 1] != pg))
                need[nneed++] = pg;
            else if (rc < 0)
                return stk__err(err, STK_E_FORMAT, "%s: cannot read its `meta` database's pages "
                                "(%s)", name, stk_strerror(rc));
        }
        if (!nneed)
            break;
        if (round == 8)
            return stk__err(err, STK_E_FORMAT, "%s: its `meta` database is deeper than 8 levels", name);
        stk__s3_fetch fx[4];
        for (int i = 0; i < nneed; i++) {
            if ((need[i] + 1) * meta.psize > o->size)
                return stk__err(err, STK_E_FORMAT, "%s: `meta` page %llu is not in the file", name,
                                (unsigned long long)need[i]);
            fx[i] = (stk__s3_fetch){o->key, meta.psize, fd, need[i] * meta.psize};
        }
        stk__s3_stats got = {0};
        rc = stk__s3_get_many(small, r->bucket, fx, (size_t)nneed, &got, err);
        stk__fetch_ctr_add(&r->ctr, &got);
        stk__fetch_ctr_starved(&r->ctr, got.seconds);
        if (rc != STK_OK)
            return rc;
    }
    return stk__target_meta_parse(v, name, t, err);
}

/*
 * The record count of every shard without fetching it: the first HEAD_BYTES (LMDB's two meta
 * pages at 4 KiB pages; a larger page size reads its second meta page in one more round) of each
 * shard by one ranged GET each, into a sparse file of the shard's size; the newer meta names the
 * main database's root page, fetched next (one page: a stoker shard names 2-4 databases, so that
 * root is a leaf); stk__lmdb_tree_open then reads the `records` database's record from it with
 * pread, and its entry count is the shard's. The count is checked again when the shard is
 * fetched whole and opened (stk__remote_attach). These reads are small (a few KiB): all of them
 * are in flight at once (STOKER_S3_INFLIGHT, at least SMALL_INFLIGHT), so that each round costs
 * one round trip whatever the shard count. Then the dataset's targets from shard 0's meta
 * (head_targets: one round more) into *TINFO.
 */
static int head_counts(stk__remote *r, uint64_t *count, stk_target_info *tinfo, char *err)
{
    size_t n = r->n;
    int *fds = malloc(n * sizeof *fds);
    stk__s3_fetch *fx = calloc(n, sizeof *fx);
    char path[PATH_MAX + 64];
    int rc = fds && fx ? STK_OK : STK_E_NOMEM;
    for (size_t i = 0; fds && i < n; i++)
        fds[i] = -1;
    for (size_t i = 0; rc == STK_OK && i < n; i++) {
        pfmt(path, sizeof path, "%s/%s.head.%d", r->dir, r->objs[i].key + r->plen, (int)getpid());
        fds[i] = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        unlink(path); /* a sparse scratch file: gone when closed */
        if (fds[i] < 0 || ftruncate(fds[i], (off_t)r->objs[i].size) != 0)
            rc = stk__err(err, -errno, "%s: %s", path, strerror(errno));
        fx[i] = (stk__s3_fetch){r->objs[i].key, STK__MIN(r->objs[i].size, HEAD_BYTES), fds[i], 0};
    }
    stk__s3_cfg small = r->cfg;
    small.inflight = STK__MAX(small.inflight, SMALL_INFLIGHT);
    if (rc == STK_OK) {
        stk__s3_stats got = {0};
        rc = stk__s3_get_many(&small, r->bucket, fx, n, &got, err);
        stk__fetch_ctr_add(&r->ctr, &got);
        stk__fetch_ctr_starved(&r->ctr, got.seconds); /* the open waits for the heads */
    }
    /* the second meta page where the page size put it past the first read */
    size_t k = 0;
    uint32_t *psz = calloc(n ? n : 1, sizeof *psz);
    if (rc == STK_OK && !psz)
        rc = STK_E_NOMEM;
    for (size_t i = 0; rc == STK_OK && i < n; i++) {
        uint8_t m0[META_BYTES];
        const char *name = r->objs[i].key + r->plen;
        if (stk__pread_full(fds[i], m0, sizeof m0, 0) != STK_OK || le32(m0 + 16) != 0xBEEFC0DE) {
            rc = stk__err(err, STK_E_FORMAT, "%s%s: not an LMDB file (no magic in page 0)",
                          r->url, name);
            break;
        }
        psz[i] = le32(m0 + 40);
        if (psz[i] >= 512 && psz[i] <= 65536 && !(psz[i] & (psz[i] - 1)) &&
            psz[i] + META_BYTES > HEAD_BYTES && psz[i] + META_BYTES <= r->objs[i].size)
            fx[k++] = (stk__s3_fetch){r->objs[i].key, META_BYTES, fds[i], psz[i]};
    }
    if (rc == STK_OK && k) {
        stk__s3_stats got = {0};
        rc = stk__s3_get_many(&small, r->bucket, fx, k, &got, err);
        stk__fetch_ctr_add(&r->ctr, &got);
        stk__fetch_ctr_starved(&r->ctr, got.seconds);
    }
    /* the main database's root page, where the reads so far did not bring it */
    k = 0;
    uint64_t *txn = calloc(n ? n : 1, sizeof *txn);
    if (rc == STK_OK && !txn)
        rc = STK_E_NOMEM;
    for (size_t i = 0; rc == STK_OK && i < n; i++) {
        uint8_t m0[META_BYTES], m1[META_BYTES];
        const char *name = r->objs[i].key + r->plen;
        uint32_t psize = psz[i];
        if (psize < 512 || psize > 65536 || (psize & (psize - 1)) ||
            stk__pread_full(fds[i], m0, sizeof m0, 0) != STK_OK ||
            stk__pread_full(fds[i], m1, sizeof m1, psize) != STK_OK) {
            rc = stk__err(err, STK_E_FORMAT, "%s%s: LMDB page size %u is not valid", r->url, name,
                          psize);
            break;
        }
        const uint8_t *m = le64(m1 + 144) > le64(m0 + 144) && le32(m1 + 16) == 0xBEEFC0DE ? m1 : m0;
        txn[i] = le64(m + 144);
        uint64_t root = le64(m + 88 + 40), off = root * psize;
        if (root == UINT64_MAX || off + psize > r->objs[i].size) {
            rc = stk__err(err, STK_E_FORMAT, "%s%s: LMDB main database root page %llu is not in "
                          "the file", r->url, name, (unsigned long long)root);
            break;
        }
        if (off + psize > HEAD_BYTES)
            fx[k++] = (stk__s3_fetch){r->objs[i].key, psize, fds[i], off};
    }
    if (rc == STK_OK && k) {
        stk__s3_stats got = {0};
        rc = stk__s3_get_many(&small, r->bucket, fx, k, &got, err);
        stk__fetch_ctr_add(&r->ctr, &got);
        stk__fetch_ctr_starved(&r->ctr, got.seconds);
    }
    for (size_t i = 0; rc == STK_OK && i < n; i++) {
        stk__lmdb_tree t;
        int trc = stk__lmdb_tree_open(fds[i], r->objs[i].size, txn[i], STK__DB_RECORDS, &t);
        if (trc != STK_OK)
            rc = stk__err(err, STK_E_FORMAT, "%s%s: cannot read its record count from LMDB's "
                          "meta and main database pages (%s): not a stoker shard?", r->url,
                          r->objs[i].key + r->plen, stk_strerror(trc));
        else
            count[i] = t.entries;
    }
    if (rc == STK_OK && n)
        rc = head_targets(r, &small, fds[0], txn[0], tinfo, err);
    for (size_t i = 0; fds && i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    free(fx);
    free(txn);
    free(psz);
    return rc;
}

/* Open DS as a streamed dataset: the shards listed and counted, none fetched (remote keeps what
 * attach needs; takes OBJS). */
static int stream_open(stk_dataset *ds, stk__remote *rem, stk__s3_obj *objs, size_t n)
{
    rem->objs = objs;
    rem->n = n;
    uint64_t *count = calloc(n, sizeof *count);
    stk_target_info tinfo;
    memset(&tinfo, 0, sizeof tinfo);
    if (!count || !(rem->fetches = calloc(n, sizeof *rem->fetches)) ||
        !(rem->trows = calloc(n, 1)) ||
        !(rem->fds = malloc(n * sizeof *rem->fds))) {
        free(count);
        return stk__err(ds->err, STK_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        rem->fds[i] = -1;
    int rc = head_counts(rem, count, &tinfo, ds->err);
    if (rc == STK_OK)
        rc = stk__shards_alloc(ds, n);
    uint64_t total = 0;
    for (size_t i = 0; rc == STK_OK && i < n; i++) {
        char path[PATH_MAX + 64];
        pfmt(path, sizeof path, "%s/%s", rem->dir, objs[i].key + rem->plen);
        stk__shard *sh = &ds->shards[i];
        if (!(sh->path = stk__strdup(path))) {
            rc = STK_E_NOMEM;
            break;
        }
        sh->name = strrchr(sh->path, '/') + 1;
        sh->first = total;
        sh->count = count[i];
        sh->file_size = objs[i].size;
        sh->version = 2;
        total += count[i];
    }
    free(count);
    if (rc != STK_OK)
        return rc;
    if (!(ds->recs = calloc(total + 1, sizeof *ds->recs)))
        return stk__err(ds->err, STK_E_NOMEM, "out of memory for %llu records",
                        (unsigned long long)total);
    /* until a shard is opened its records' sizes are not known: the average stands in, for the
     * reader's buffer classes (a larger record grows its buffer: reader_pool.c) */
    for (size_t i = 0; i < n; i++) {
        const stk__shard *sh = &ds->shards[i];
        uint32_t avg = sh->count ? (uint32_t)STK__MIN(objs[i].size / sh->count, UINT32_MAX) : 0;
        for (uint64_t k = sh->first; k < sh->first + sh->count; k++)
            ds->recs[k] = (stk__rec){0, avg, (uint32_t)i};
    }
    /* the targets table laid out whole now (rows zero until each shard's first attach writes
     * them: stk__remote_finish), so that it is never reallocated while readers run */
    ds->tinfo = tinfo;
    ds->trow = stk_target_dtype_size(tinfo.dtype) * tinfo.size;
    if (ds->trow) {
        if (total > SIZE_MAX / ds->trow - 1 || !(ds->targets = calloc(total * ds->trow + 1, 1)))
            return stk__err(ds->err, STK_E_NOMEM, "out of memory for the targets of %llu records",
                            (unsigned long long)total);
        ds->targets_owned = 1;
    }
    ds->count = total;
    ds->layout = STK_LAYOUT_SHARDS;
    ds->format_version = 2;
    for (size_t i = 0; i < n; i++)
        ds->file_bytes += objs[i].size;
    return STK_OK;
}

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
    return stk__remote_streaming(ds) && s < ds->remote->n ? ds->remote->objs[s].size : 0;
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
