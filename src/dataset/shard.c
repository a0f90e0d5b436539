/* SPDX-License-Identifier: MIT */
/*
 * shard.c — opening one LMDB file of a dataset: a stoker shard or a foreign LMDB.
 *
 * LMDB trusts its file, so before LMDB sees it the file is checked with pread: LMDB's magic
 * 0xBEEFC0DE at byte 16 of pages 0 and 1, the file at least as long as its last used page (a
 * truncated shard would otherwise SIGBUS the walk), every B-tree page LMDB may touch
 * (lmdb_check.c). The environment is read-only with MDB_NORDAHEAD (without it the readahead of
 * the walk's page faults drags the payload pages in: the whole file instead of the leaf pages)
 * and MDB_NOTLS (the read transaction is kept for the dataset's life and may be ended from
 * another thread), one per file per process (envreg.c).
 *
 * Consistency. A shard must not change while its table is in use: the read transaction that
 * built it stays open (with LMDB's lock file, a writer then never reuses those pages). Where the
 * lock file cannot be created (read-only media: EACCES / EROFS) the shard is opened MDB_NOLOCK
 * and its identity (device, inode, size, mtime, last txnid, last page) is recorded;
 * stk__shard_check() re-verifies it.
 */
#include "shard.h"

#include "common.h"
#include "envreg.h"
#include "format.h"
#include "lmdb_check.h"
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LMDB_MAGIC 0xBEEFC0DEu
#define META_MAGIC_OFF 16
#define META_PSIZE_OFF 40 /* mm_dbs[FREE_DBI].md_pad holds the page size */
#define META_LASTPG_OFF 136
#define META_TXNID_OFF 144

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

typedef struct lmdb_probe {
    uint32_t psize;
    uint64_t last_pgno, txnid;
} lmdb_probe;

/* Read LMDB's two meta pages with pread: magic in both, page size, the newer meta's last page
 * and txnid. Returns STK_OK or STK_E_FORMAT / STK_E_TRUNCATED / -errno with err set. */
static int probe_lmdb(char *err, int fd, const char *path, uint64_t fsize, lmdb_probe *p)
{
    uint8_t m0[160], m1[160];
    if (fsize < 160)
        return stk__err(err, fsize == 0 ? STK_E_EMPTY : STK_E_FORMAT,
                        "%s: not an LMDB file (%llu bytes)", path, (unsigned long long)fsize);
    ssize_t r = pread(fd, m0, sizeof m0, 0);
    if (r < 0)
        return stk__err(err, -errno, "%s: read failed", path);
    if (r != (ssize_t)sizeof m0 || le32(m0 + META_MAGIC_OFF) != LMDB_MAGIC)
        return stk__err(err, STK_E_FORMAT, "%s: not an LMDB file (no magic 0xBEEFC0DE in page 0)", path);
    uint32_t psize = le32(m0 + META_PSIZE_OFF);
    if (psize < 512 || psize > 65536 || (psize & (psize - 1)))
        return stk__err(err, STK_E_FORMAT, "%s: LMDB page size %u is not valid", path, psize);
    if (fsize < 2ull * psize)
        return stk__err(err, STK_E_TRUNCATED, "%s: truncated (%llu bytes, shorter than two LMDB pages)",
                        path, (unsigned long long)fsize);
    r = pread(fd, m1, sizeof m1, psize);
    if (r < 0)
        return stk__err(err, -errno, "%s: read failed", path);
    if (r != (ssize_t)sizeof m1 || le32(m1 + META_MAGIC_OFF) != LMDB_MAGIC)
        return stk__err(err, STK_E_FORMAT, "%s: not an LMDB file (no magic 0xBEEFC0DE in page 1)", path);
    uint64_t t0 = le64(m0 + META_TXNID_OFF), t1 = le64(m1 + META_TXNID_OFF);
    const uint8_t *m = t1 > t0 ? m1 : m0;
    p->psize = psize;
    p->last_pgno = le64(m + META_LASTPG_OFF);
    p->txnid = le64(m + META_TXNID_OFF);
    return STK_OK;
}

/* The class names of meta `classes` (one per line) as ds->classes. */
static int set_classes(stk_dataset *ds, const char *text, size_t len)
{
    size_t n = len ? 1 : 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    char **c = calloc(n ? n : 1, sizeof *c);
    if (!c)
        return STK_E_NOMEM;
    size_t start = 0, k = 0;
    for (size_t i = 0; i <= len && n; i++) {
        if (i == len || text[i] == '\n') {
            c[k] = malloc(i - start + 1);
            if (!c[k]) {
                for (size_t j = 0; j < k; j++)
                    free(c[j]);
                free(c);
                return STK_E_NOMEM;
            }
            memcpy(c[k], text + start, i - start);
            c[k][i - start] = 0;
            k++;
            start = i + 1;
        }
    }
    ds->classes = c;
    ds->nclasses = (uint32_t)n;
    return STK_OK;
}

int stk__shards_alloc(stk_dataset *ds, size_t n)
{
    ds->shards = calloc(n, sizeof *ds->shards);
    if (!ds->shards)
        return stk__err(ds->err, STK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        ds->shards[i].fd = -1;
        ds->shards[i].fd_direct = -1;
    }
    ds->nshards = (uint32_t)n;
    return STK_OK;
}

/* Open the data file's descriptors (O_DIRECT where allowed) and record its identity in *st. */
static int shard_open_file(stk_dataset *ds, stk__shard *sh, const char *path, const char *datafile,
                           struct stat *st)
{
    if (!(sh->path = stk__strdup(path)))
        return stk__err(ds->err, STK_E_NOMEM, "out of memory");
    const char *slash = strrchr(sh->path, '/');
    sh->name = slash && slash[1] ? slash + 1 : sh->path;
    sh->fd_direct = -1;
    char why[STK__ERRLEN];
    sh->fd = stk__open_regular(datafile, 0, st, why); /* a FIFO named shard-N.lmdb: never waited on */
    if (sh->fd == STK_E_IO)
        return stk__err(ds->err, STK_E_FORMAT, "%s: %s", datafile, why);
    if (sh->fd < 0)
        return stk__err(ds->err, sh->fd, "%s: cannot open", datafile);
    struct stat dst;
    sh->fd_direct = stk__open_regular(datafile, O_DIRECT, &dst, why);
    if (sh->fd_direct >= 0 && (dst.st_dev != st->st_dev || dst.st_ino != st->st_ino)) {
        close(sh->fd_direct); /* replaced between the two opens */
        sh->fd_direct = -1;
    }
    if (sh->fd_direct < 0)
        sh->fd_direct = -1;
    sh->file_size = (uint64_t)st->st_size;
    sh->dev = st->st_dev;
    sh->ino = st->st_ino;
    sh->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    return STK_OK;
}

/* The file as LMDB will see it, checked with pread first: meta pages, length, B-tree pages. */
static int shard_check_file(stk_dataset *ds, const stk__shard *sh, const char *datafile)
{
    lmdb_probe pr;
    int rc;
    if ((rc = probe_lmdb(ds->err, sh->fd, datafile, sh->file_size, &pr)) != STK_OK)
        return rc;
    if ((pr.last_pgno + 1) * pr.psize > sh->file_size)
        return stk__err(ds->err, STK_E_TRUNCATED,
                        "%s: truncated: %llu bytes, but LMDB's meta says pages up to %llu (%llu bytes)",
                        datafile, (unsigned long long)sh->file_size, (unsigned long long)pr.last_pgno,
                        (unsigned long long)((pr.last_pgno + 1) * pr.psize));
    return stk__lmdb_check(sh->fd, datafile, sh->file_size, ds->err);
}

/* STK_OK while SH is as long as when it was checked; a cut before LMDB reads its map (meta pages
 * at mdb_txn_begin, B-tree pages at the walk) is STK_E_TRUNCATED instead of SIGBUS. A cut
 * between this fstat and the read remains (docs/HARDENING.md). */
static int shard_still(stk_dataset *ds, const stk__shard *sh)
{
    struct stat now;
    if (fstat(sh->fd, &now) != 0)
        return stk__err(ds->err, -errno, "%s: fstat", sh->path);
    if ((uint64_t)now.st_size < sh->file_size)
        return stk__err(ds->err, STK_E_TRUNCATED, "%s: shrank from %llu to %lld bytes while open", sh->name,
                        (unsigned long long)sh->file_size, (long long)now.st_size);
    return STK_OK;
}

/* Take the process's environment of the file and begin the kept read transaction; LMDB's page
 * size in *psize. */
static int shard_begin(stk_dataset *ds, stk__shard *sh, const char *path, const char *datafile, int env_dir,
                       const struct stat *st, uint64_t *psize)
{
    int rc;
    if ((rc = stk__env_acquire(ds->err, path, datafile, env_dir, st, &sh->senv)) != STK_OK)
        return rc;
    sh->env = sh->senv->env;
    sh->nolock = sh->senv->nolock;
    if ((rc = shard_still(ds, sh)) != STK_OK)
        return rc;
    rc = mdb_txn_begin(sh->env, NULL, MDB_RDONLY, &sh->txn);
    if (rc == MDB_MAP_RESIZED)
        return stk__err(ds->err, STK_E_CHANGED, "%s: grew past the map of the LMDB environment that other "
                        "open datasets share; close them to reopen it", path);
    if (rc != 0)
        return stk__err(ds->err, STK_E_LMDB, "%s: mdb_txn_begin: %s", path, mdb_strerror(rc));
    MDB_envinfo ei;
    mdb_env_info(sh->env, &ei);
    MDB_stat ms;
    mdb_env_stat(sh->env, &ms);
    *psize = ms.ms_psize;
    sh->txnid = ei.me_last_txnid;
    sh->last_pgno = ei.me_last_pgno;
    if ((sh->last_pgno + 1) * *psize > sh->file_size)
        return stk__err(ds->err, STK_E_TRUNCATED, "%s: truncated (%llu bytes, last page %llu)", datafile,
                        (unsigned long long)sh->file_size, (unsigned long long)sh->last_pgno);
    return STK_OK;
}

/* The meta values every stoker shard has: `format` (one this build reads: its version in
 * sh->version) and `count`. */
static int shard_meta_required(stk_dataset *ds, stk__shard *sh, MDB_dbi meta, const char *path,
                               uint64_t *count)
{
    MDB_val v;
    if (stk__meta_get(sh->txn, meta, STK__META_FORMAT, &v) != 0)
        return stk__err(ds->err, STK_E_FORMAT, "%s: meta has no `format`", path);
    sh->version = stk__format_parse(v.mv_data, v.mv_size);
    if (!sh->version)
        return stk__err(ds->err, STK_E_FORMAT, "%s: unsupported format `%.*s` (this build reads `%s%d` to `%s%d`)",
                        path, (int)STK__MIN(v.mv_size, 64), (const char *)v.mv_data, STK__FORMAT_NAME,
                        STK__FORMAT_MIN, STK__FORMAT_NAME, STK__FORMAT_WRITTEN);
    if (stk__meta_u64(sh->txn, meta, STK__META_COUNT, count) != 0)
        return stk__err(ds->err, STK_E_FORMAT, "%s: meta `count` missing or not a number", path);
    return STK_OK;
}

/* A stoker shard's meta: format, count (in *count), its place among the dataset's shards (no
 * later shard missing; first_index = the records before it), the class names (shard 0), and the
 * optional `sources` tree. BEFORE: records in the shards before it. */
static int shard_stoker_meta(stk_dataset *ds, stk__shard *sh, uint32_t no, const char *path, int in_dir,
                             uint64_t before, uint64_t *count)
{
    MDB_dbi meta;
    MDB_val v;
    uint64_t first_index = 0, last = 1;
    int rc;
    if (mdb_dbi_open(sh->txn, STK__DB_META, 0, &meta) != 0)
        return stk__err(ds->err, STK_E_FORMAT, "%s: stoker shard without a `meta` database", path);
    if ((rc = shard_meta_required(ds, sh, meta, path, count)) != STK_OK)
        return rc;
    int have_first = stk__meta_u64(sh->txn, meta, STK__META_FIRST_INDEX, &first_index) == 0;
    if (in_dir && !ds->allow_incomplete && no + 1 == ds->nshards &&
        stk__meta_u64(sh->txn, meta, STK__META_LAST, &last) == 0 && last == 0)
        return stk__err(ds->err, STK_E_FORMAT, "%s: the dataset has more shards after this one: "
                        STK__SHARD_FMT " is missing", path, no + 1);
    if (no == 0 && !ds->classes && stk__meta_get(sh->txn, meta, STK__META_CLASSES, &v) == 0 &&
        set_classes(ds, v.mv_data, v.mv_size) != STK_OK)
        return stk__err(ds->err, STK_E_NOMEM, "out of memory");
    /* the optional `sources` tree, found now with pread in the snapshot of the kept transaction
     * (whose pages a writer does not reuse): record_name() reads it with pread only, never
     * through LMDB's map, so a file that shrinks under a running loader gives short reads there
     * instead of SIGBUS. Absent, corrupt or changed since: no names. */
    sh->have_sources = stk__lmdb_tree_open(sh->fd, sh->file_size, (uint64_t)mdb_txn_id(sh->txn),
                                           STK__DB_SOURCES, &sh->sources) == STK_OK;
    if (have_first && in_dir && first_index != before)
        return stk__err(ds->err, STK_E_FORMAT,
                        "%s: meta first_index %llu but the shards before it hold %llu records "
                        "(a shard is missing or from another dataset)",
                        path, (unsigned long long)first_index, (unsigned long long)before);
    return STK_OK;
}

/* A decimal `meta` value of 1..20 digits into *OUT: 0, or -1 when not a number. */
static int meta_u64(const MDB_val *v, uint64_t *out)
{
    if (v->mv_size == 0 || v->mv_size > 20)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < v->mv_size; i++) {
        char c = ((const char *)v->mv_data)[i];
        if (c < '0' || c > '9')
            return -1;
        x = x * 10 + (uint64_t)(c - '0');
    }
    *out = x;
    return 0;
}

int stk__target_meta_parse(const MDB_val v[4], const char *path, stk_target_info *t, char *err)
{
    uint64_t size = 0, classes = 0;
    char why[64];
    memset(t, 0, sizeof *t);
    if (!v[0].mv_data)
        return STK_OK;
    t->dtype = stk__tdtype_parse(v[0].mv_data, v[0].mv_size);
    if (!v[1].mv_data || meta_u64(&v[1], &size) != 0 || size > STK__TARGET_MAX_SIZE || !v[2].mv_data)
        return stk__err(err, STK_E_FORMAT, "%s: meta target_size or target_kind missing or out of range", path);
    t->size = (uint32_t)size;
    t->kind = v[2].mv_size == 6 && !memcmp(v[2].mv_data, "labels", 6) ? STK_TARGET_LABELS
              : v[2].mv_size == 6 && !memcmp(v[2].mv_data, "values", 6) ? STK_TARGET_VALUES : -1;
    if (t->kind == STK_TARGET_LABELS &&
        (!v[3].mv_data || meta_u64(&v[3], &classes) != 0 || classes > UINT32_MAX))
        return stk__err(err, STK_E_FORMAT, "%s: meta target_classes missing or out of range", path);
    t->classes = (uint32_t)classes;
    if (stk__target_check(t, why) != STK_OK)
        return stk__err(err, STK_E_FORMAT, "%s: unusable targets in meta: %s", path, why);
    return STK_OK;
}

/* The target shape and type of a shard's meta into *T (dtype STK_TDT_NONE: none). */
static int shard_target_meta(stk_dataset *ds, const stk__shard *sh, MDB_dbi meta, const char *path,
                             stk_target_info *t)
{
    static const char *const keys[4] = {STK__META_TARGET_DTYPE, STK__META_TARGET_SIZE,
                                        STK__META_TARGET_KIND, STK__META_TARGET_CLASSES};
    MDB_val v[4];
    for (int i = 0; i < 4; i++)
        if (stk__meta_get(sh->txn, meta, keys[i], &v[i]) != 0)
            v[i] = (MDB_val){0, NULL};
    return stk__target_meta_parse(v, path, t, ds->err);
}

/* The targets of shard NO's COUNT records, appended to ds->targets after the BEFORE records of
 * the shards before it. Every shard of a dataset has the same target shape, or none. A streamed
 * s3:// shard attached after the open (ds->opened) has the shape its head said at the open
 * (remote.c), its rows go to ds->tstage for remote.c to place: the table, laid out whole at the
 * open, is never reallocated under the readers. */
static int shard_targets(stk_dataset *ds, stk__shard *sh, uint32_t no, const char *path, uint64_t before,
                         uint64_t count)
{
    MDB_dbi meta, tdb;
    stk_target_info t;
    int rc;
    if (mdb_dbi_open(sh->txn, STK__DB_META, 0, &meta) != 0)
        return stk__err(ds->err, STK_E_FORMAT, "%s: stoker shard without a `meta` database", path);
    if ((rc = shard_target_meta(ds, sh, meta, path, &t)) != STK_OK)
        return rc;
    if ((no > 0 || ds->opened) && memcmp(&t, &ds->tinfo, sizeof t) != 0)
        return stk__err(ds->err, STK_E_FORMAT, "%s: its records' targets (%s × %u) differ from shard 0's (%s × %u)",
                        path, t.dtype ? stk__tdtype_name(t.dtype) : "none", t.size,
                        ds->tinfo.dtype ? stk__tdtype_name(ds->tinfo.dtype) : "none", ds->tinfo.size);
    if (!ds->opened) { /* streamed: set at the open, read by the readers now */
        ds->tinfo = t;
        ds->trow = stk_target_dtype_size(t.dtype) * t.size;
    }
    if (!ds->trow)
        return STK_OK;
    if (mdb_dbi_open(sh->txn, STK__DB_TARGETS, 0, &tdb) != 0)
        return stk__err(ds->err, STK_E_FORMAT, "%s: meta names targets but there is no `targets` database", path);
    uint8_t *rows;
    if (ds->opened) {
        free(ds->tstage);
        if (!(ds->tstage = rows = malloc((size_t)count * ds->trow + 1)))
            return stk__err(ds->err, STK_E_NOMEM, "out of memory for the targets of %llu records",
                            (unsigned long long)count);
    } else {
        uint8_t *nt = realloc(ds->targets, (size_t)(before + count) * ds->trow + 1);
        if (!nt)
            return stk__err(ds->err, STK_E_NOMEM, "out of memory for the targets of %llu records",
                            (unsigned long long)(before + count));
        ds->targets = nt;
        ds->targets_owned = 1;
        rows = nt + (size_t)before * ds->trow;
    }
    MDB_cursor *c;
    if ((rc = mdb_cursor_open(sh->txn, tdb, &c)) != 0)
        return stk__err(ds->err, STK_E_LMDB, "%s: mdb_cursor_open: %s", path, mdb_strerror(rc));
    MDB_val k, v;
    uint64_t i = 0;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0 && i < count; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT), i++) {
        if (k.mv_size != 8 || stk__rec_key_parse(k.mv_data) != i || v.mv_size != ds->trow)
            break;
        memcpy(rows + (size_t)i * ds->trow, v.mv_data, ds->trow);
    }
    mdb_cursor_close(c);
    if (i != count)
        return stk__err(ds->err, STK_E_FORMAT, "%s: the target of record %llu is missing or of the wrong size "
                        "(%zu bytes expected)", path, (unsigned long long)i, ds->trow);
    return STK_OK;
}

/* A foreign LMDB: its main database, every entry a record (*count of them). */
static int shard_foreign(stk_dataset *ds, stk__shard *sh, const char *path, uint64_t *count)
{
    MDB_stat st;
    int rc;
    sh->foreign = 1;
    if ((rc = mdb_dbi_open(sh->txn, NULL, 0, &sh->dbi)) != 0)
        return stk__err(ds->err, STK_E_LMDB, "%s: cannot open the main database: %s", path, mdb_strerror(rc));
    if ((rc = mdb_stat(sh->txn, sh->dbi, &st)) != 0)
        return stk__err(ds->err, STK_E_LMDB, "%s: mdb_stat: %s", path, mdb_strerror(rc));
    *count = st.ms_entries;
    return STK_OK;
}

/* Stoker shard (a `records` database, *stoker = 1) or foreign LMDB, and its record count. */
static int shard_records(stk_dataset *ds, stk__shard *sh, uint32_t no, const char *path, int expect_stoker,
                         int in_dir, uint64_t before, int *stoker, uint64_t *count)
{
    MDB_dbi rec_dbi;
    int rc = mdb_dbi_open(sh->txn, STK__DB_RECORDS, 0, &rec_dbi);
    if (rc != 0 && expect_stoker)
        return stk__err(ds->err, STK_E_FORMAT, "%s: not a stoker shard (no `records` database: %s)",
                        path, mdb_strerror(rc));
    *stoker = rc == 0;
    if (*stoker) {
        sh->dbi = rec_dbi;
        rc = shard_stoker_meta(ds, sh, no, path, in_dir, before, count);
    } else {
        rc = shard_foreign(ds, sh, path, count);
    }
    if (rc != STK_OK)
        return rc;
    /* the count is read from the file: bound it by the file (an LMDB leaf node takes at least
     * 8 bytes + a 2-byte pointer + a non-empty key) before sizing the table by it (a forged
     * count asked for 16 TiB; tests/fuzz/regress/shard/huge-entry-count.lmdb) */
    if (*count > (uint64_t)1 << 40 || *count > sh->file_size / 11)
        return stk__err(ds->err, STK_E_FORMAT, "%s: %llu records is not plausible for a file of %llu bytes",
                        path, (unsigned long long)*count, (unsigned long long)sh->file_size);
    return STK_OK;
}

/* Room in RECS for COUNT more records (never NULL afterwards: the walk's output points into it). */
static int recs_reserve(stk_dataset *ds, stk__recvec *recs, uint64_t count)
{
    if (recs->v && recs->cap >= recs->n + count)
        return STK_OK;
    stk__rec *nv = realloc(recs->v, (recs->n + count + 1) * sizeof *nv);
    if (!nv)
        return stk__err(ds->err, STK_E_NOMEM, "out of memory for %llu records", (unsigned long long)count);
    recs->v = nv;
    recs->cap = recs->n + count + 1;
    return STK_OK;
}

int stk__shard_open(stk_dataset *ds, stk__shard *sh, uint32_t no, const char *path, int env_dir,
                    int expect_stoker, int in_dir, stk__recvec *recs)
{
    char datafile[4200];
    struct stat st;
    uint64_t psize = 0, count = 0;
    int stoker = 0, rc;
    if (env_dir)
        snprintf(datafile, sizeof datafile, "%s/data.mdb", path);
    else
        snprintf(datafile, sizeof datafile, "%s", path);
    if ((rc = shard_open_file(ds, sh, path, datafile, &st)) != STK_OK ||
        (rc = shard_check_file(ds, sh, datafile)) != STK_OK ||
        (rc = shard_begin(ds, sh, path, datafile, env_dir, &st, &psize)) != STK_OK ||
        (rc = shard_still(ds, sh)) != STK_OK ||
        (rc = shard_records(ds, sh, no, path, expect_stoker, in_dir, recs->n, &stoker, &count)) != STK_OK)
        return rc;
    sh->first = recs->n;
    if ((rc = recs_reserve(ds, recs, count)) != STK_OK)
        return rc;
    sh->count = count;
    stk__walk_sum sum;
    if ((rc = shard_still(ds, sh)) != STK_OK)
        return rc;
    if ((rc = stk__walk_shard(sh, no, stoker, count, psize, recs->v + recs->n, &sum, ds->err)) != STK_OK)
        return rc;
    if (stoker && (rc = shard_targets(ds, sh, no, path, recs->n, count)) != STK_OK)
        return rc;
    ds->payload_bytes += sum.payload;
    if (sum.maxlen > ds->max_len)
        ds->max_len = sum.maxlen;
    recs->n += count;
    ds->file_bytes += sh->file_size;
    /* the dataset's: the oldest of its shards' (a pack resumed by a newer stoker mixes them) */
    if (!stoker)
        ds->format_version = 0;
    else if (no == 0 || ds->format_version == 0 || sh->version < ds->format_version)
        ds->format_version = sh->version;
    return STK_OK;
}

void stk__shard_close(stk__shard *sh)
{
    if (sh->txn)
        mdb_txn_abort(sh->txn);
    if (sh->senv)
        stk__env_release(sh->senv);
    if (sh->fd >= 0)
        close(sh->fd);
    if (sh->fd_direct >= 0)
        close(sh->fd_direct);
    free(sh->path);
}

int stk__shard_check(const stk__shard *sh, char *err)
{
    struct stat st;
    if (fstat(sh->fd, &st) != 0)
        return stk__err(err, -errno, "%s: fstat", sh->path);
    if ((uint64_t)st.st_size < sh->file_size)
        return stk__err(err, STK_E_TRUNCATED, "%s: shrank from %llu to %llu bytes while open", sh->path,
                        (unsigned long long)sh->file_size, (unsigned long long)st.st_size);
    if (!sh->nolock)
        return STK_OK;
    int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (st.st_dev != sh->dev || st.st_ino != sh->ino || (uint64_t)st.st_size != sh->file_size ||
        mt != sh->mtime_ns)
        return stk__err(err, STK_E_CHANGED, "%s: file changed while open (size or mtime)", sh->path);
    lmdb_probe pr;
    char perr[STK__ERRLEN];
    if (probe_lmdb(perr, sh->fd, sh->path, (uint64_t)st.st_size, &pr) != STK_OK)
        return stk__err(err, STK_E_CHANGED, "%s: changed while open (%s)", sh->path, perr);
    if (pr.txnid != sh->txnid || pr.last_pgno != sh->last_pgno)
        return stk__err(err, STK_E_CHANGED, "%s: changed while open (LMDB txnid %llu -> %llu)", sh->path,
                        (unsigned long long)sh->txnid, (unsigned long long)pr.txnid);
    return STK_OK;
}
