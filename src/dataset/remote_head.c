/* SPDX-License-Identifier: MIT */
/*
 * remote_head.c — the open of a streamed s3:// dataset (docs/S3.md "Streaming", step 1): no shard
 * fetched, only the first pages of each by small ranged GETs into sparse scratch files: each
 * shard's record count (LMDB's meta pages, then its main database's root page) and, from shard
 * 0's `meta` database, the dataset's target shape; then the offset table and the targets table
 * laid out whole. The shards are fetched later, as a loader attaches them (remote.c).
 */
#include "remote_internal.h"

#include "format.h"
#include "lmdb_check.h"
#include "shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* LMDB meta page fields (the newer of pages 0 and 1 is the current one) */
#define HEAD_BYTES 12288u     /* LMDB's two meta pages and page 2 at its usual 4 KiB pages */
#define TAIL_BYTES 8192u      /* read of shard 0's end with its heads (its `meta` database) */
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
    char vals[4][65] = {{0}}; /* 64 bytes read; a longer value keeps a 65th (zero) */
    MDB_val v[4];
    for (int round = 0;; round++) {
        uint64_t need[4];
        int nneed = 0;
        for (int i = 0; i < 4; i++) {
            size_t len = 0;
            uint64_t pg = 0;
            rc = stk__lmdb_tree_get_sparse(&meta, keys[i], strlen(keys[i]), vals[i], 64,
                                           &len, &pg);
            /* a value over 64 bytes is no number, kind or dtype: 65 bytes stand for it */
            v[i] = rc == 1 ? (MDB_val){STK__MIN(len, 65), vals[i]} : (MDB_val){0, NULL};
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

/* Whether page PG (of PSIZE bytes) is in the sparse copy FD already: an LMDB page begins with its
 * own number (a page not fetched yet reads zero; PG > 1). */
static int have_page(int fd, uint64_t pg, uint32_t psize)
{
    uint8_t h[8];
    return stk__pread_full(fd, h, sizeof h, pg * psize) == STK_OK && le64(h) == pg;
}

/*
 * The record count of every shard without fetching it: the first HEAD_BYTES of each shard (LMDB's
 * two meta pages at 4 KiB pages, and page 2; a larger page size reads its second meta page in
 * one more round) by one ranged GET each, into a sparse file of the shard's size; the newer meta
 * names the main database's root page (one page: a stoker shard names 2-4 databases, so that
 * root is a leaf), fetched next unless a read so far brought it — in the shards stk_writer
 * writes it is page 2 (seen, not promised by LMDB: docs/S3.md); stk__lmdb_tree_open then reads
 * the `records` database's record from it with pread, and its entry count is the shard's. The
 * count is checked again when the shard is fetched whole and opened (stk__remote_attach). These
 * reads are small (a few KiB): all of them are in flight at once (STOKER_S3_INFLIGHT, at least
 * SMALL_INFLIGHT), so that each round costs one round trip whatever the shard count. Then the
 * dataset's targets from shard 0's meta (head_targets) into *TINFO: the first round also read
 * shard 0's last TAIL_BYTES, where stk_writer's shards hold their `meta` database (a leaf), so
 * that head_targets needs no round of its own; a page found missing (zero) is fetched then.
 */
static int head_counts(stk__remote *r, uint64_t *count, stk_target_info *tinfo, char *err)
{
    size_t n = r->n;
    int *fds = malloc(n * sizeof *fds);
    stk__s3_fetch *fx = calloc(n + 1, sizeof *fx);
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
    size_t nfx = n; /* shard 0's tail beside the heads: its `meta` database, most likely */
    if (rc == STK_OK && n && r->objs[0].size >= HEAD_BYTES + TAIL_BYTES)
        fx[nfx++] = (stk__s3_fetch){r->objs[0].key, TAIL_BYTES, fds[0],
                                    r->objs[0].size - TAIL_BYTES};
    stk__s3_cfg small = r->cfg;
    small.inflight = STK__MAX(small.inflight, SMALL_INFLIGHT);
    if (rc == STK_OK) {
        stk__s3_stats got = {0};
        rc = stk__s3_get_many(&small, r->bucket, fx, nfx, &got, err);
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
        if (!have_page(fds[i], root, psize))
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

int stk__remote_stream_open(stk_dataset *ds, stk__remote *rem, stk__s3_obj *objs, size_t n)
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
