/* SPDX-License-Identifier: MIT */
/*
 * walk.c — the offset table. LMDB's own read path costs a page fault per touched page, one at a
 * time per thread; stoker keeps LMDB as the container but reads payloads itself (io_uring,
 * O_DIRECT). For that it needs, per record, {shard, file offset, length}: one cursor walk over
 * `records` gives a pointer into LMDB's map per value, and offset = pointer − map base.
 *
 * The map base. mdb_env_info's me_mapaddr is NULL unless MDB_FIXEDMAP, so we find the mapping of
 * the data file in /proc/self/maps (same device and inode, file offset 0, containing the value
 * pointer). We also derive it independently from the leaf page that holds each key: the key
 * pointer lies inside its leaf page, whose header starts with the page's own number, so base =
 * page − pgno × page size. The two must agree (else STK_E_FORMAT); the leaf page is already in
 * memory, so this costs nothing, and it still works without /proc. Values bigger than about half
 * a page live in a run of contiguous overflow pages, so one range covers a record; smaller values
 * are inline and never cross a page. A value pointer is never dereferenced: the walk touches
 * branch and leaf pages only, and every offset plus length must lie inside the file.
 *
 * Cold, the walk is one page fault per leaf page, one at a time: large stoker shards split their
 * key range over threads (each with its own read transaction on the same snapshot) so that many
 * faults are in flight. Keys of stoker shards are 0..count-1, so the split needs no extra I/O.
 */
#include "walk.h"

#include "common.h"
#include "format.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#define WALK_MAX_THREADS 16

/* One range of the cursor walk: keys [a, b) of a stoker shard (checked to be exactly those), or
 * the whole main database of a foreign LMDB (a = 0, b = its entry count). */
typedef struct walk_job {
    const stk__shard *sh;
    MDB_txn *txn;       /* the read transaction to walk in */
    int own_txn;        /* txn is this job's (a worker's): abort it when done */
    MDB_dbi dbi;
    int stoker;
    uint64_t a, b;
    uintptr_t base;
    uint64_t psize;
    uint32_t no;
    stk__rec *out;      /* out[i] for record i of the shard */
    /* results */
    uint64_t n, payload;
    uint32_t maxlen;
    int rc;
    char err[STK__ERRLEN];
} walk_job;

/* Base address of the mapping of (dev, ino) at file offset 0 that contains PTR; 0 if not found. */
static uintptr_t proc_map_base(dev_t dev, ino_t ino, uintptr_t ptr)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return 0;
    char line[1024];
    uintptr_t found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off, inode;
        unsigned maj, mnr;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &lo, &hi, perms, &off, &maj, &mnr, &inode) != 7)
            continue;
        if (off != 0 || inode != (unsigned long long)ino || makedev(maj, mnr) != dev)
            continue;
        if (ptr >= lo && ptr < hi) {
            found = (uintptr_t)lo;
            break;
        }
    }
    fclose(f);
    return found;
}

/* The map base implied by the leaf page holding KEY; its page number in *pgno. */
static uintptr_t leaf_base_of(const void *key, uint64_t psize, uint64_t *pgno)
{
    uintptr_t page = (uintptr_t)key & ~(uintptr_t)(psize - 1);
    memcpy(pgno, (const void *)page, sizeof *pgno); /* leaf page header: its own number */
    return page - (uintptr_t)(*pgno * psize);
}

/* Map base from the first record: /proc/self/maps, cross-checked by the leaf page's number. */
static int walk_find_base(walk_job *j)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(j->txn, j->dbi, &cur);
    if (rc)
        return stk__err(j->err, STK_E_LMDB, "%s: mdb_cursor_open: %s", j->sh->path, mdb_strerror(rc));
    MDB_val k, v;
    rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    mdb_cursor_close(cur);
    if (rc == MDB_NOTFOUND)
        return STK_OK; /* empty: no offsets to compute */
    if (rc)
        return stk__err(j->err, STK_E_LMDB, "%s: first record: %s", j->sh->path, mdb_strerror(rc));
    uint64_t pgno;
    uintptr_t lb = leaf_base_of(k.mv_data, j->psize, &pgno);
    if (pgno > j->sh->last_pgno)
        return stk__err(j->err, STK_E_FORMAT, "%s key 0: leaf page number %llu past the last page",
                        j->sh->name, (unsigned long long)pgno);
    uintptr_t pb = proc_map_base(j->sh->dev, j->sh->ino, (uintptr_t)v.mv_data);
    if (pb && pb != lb)
        return stk__err(j->err, STK_E_FORMAT, "%s: map base from /proc/self/maps and from the leaf page "
                        "disagree", j->sh->name);
    j->base = pb ? pb : lb; /* no /proc: the leaf page's own number is enough */
    return STK_OK;
}

/* Check record ORD (key K, value V) where the cursor found it: its leaf page where the map base
 * says, a stoker key in sequence with room for the header, the value inside the file. */
static int walk_check(walk_job *j, const MDB_val *k, const MDB_val *v, uint64_t ord)
{
    const stk__shard *sh = j->sh;
    uintptr_t vp = (uintptr_t)v->mv_data;
    uint64_t pgno;
    uintptr_t lb = leaf_base_of(k->mv_data, j->psize, &pgno);
    if (pgno > sh->last_pgno || lb != j->base)
        return stk__err(j->err, STK_E_FORMAT, "%s key %llu: leaf page %llu does not sit where the map "
                        "base says", sh->name, (unsigned long long)ord, (unsigned long long)pgno);
    if (j->stoker) {
        if (k->mv_size != 8 || stk__rec_key_parse(k->mv_data) != ord)
            return stk__err(j->err, STK_E_FORMAT, "%s: record %llu has key %s (expected 8-byte "
                            "big-endian %llu)", sh->name, (unsigned long long)ord,
                            k->mv_size == 8 ? "out of sequence" : "of the wrong size", (unsigned long long)ord);
        if (v->mv_size < STK__REC_HDR)
            return stk__err(j->err, STK_E_CORRUPT, "%s key %llu: value of %zu bytes is shorter than "
                            "the 16-byte record header", sh->name, (unsigned long long)ord, v->mv_size);
    }
    if (vp < j->base || v->mv_size > UINT32_MAX || (uint64_t)(vp - j->base) + v->mv_size > sh->file_size ||
        (uint64_t)(vp - j->base) < 2 * j->psize)
        return stk__err(j->err, STK_E_FORMAT, "%s key %llu: value at offset %llu, %zu bytes, lies "
                        "outside the file (%llu bytes)", sh->name, (unsigned long long)ord,
                        (unsigned long long)(vp - j->base), v->mv_size, (unsigned long long)sh->file_size);
    return STK_OK;
}

/* Position the cursor at the job's first key. */
static int walk_seek(walk_job *j, MDB_cursor *cur, MDB_val *k, MDB_val *v, uint8_t kb[8])
{
    if (j->a == 0)
        return mdb_cursor_get(cur, k, v, MDB_FIRST);
    stk__rec_key(kb, j->a);
    k->mv_size = 8;
    k->mv_data = kb;
    return mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
}

/* How the walk ended: an LMDB error, fewer records than asked, or more than the meta count. */
static void walk_end(walk_job *j, int rc, uint64_t ord)
{
    const stk__shard *sh = j->sh;
    if (rc != 0 && rc != MDB_NOTFOUND) {
        j->rc = stk__err(j->err, STK_E_LMDB, "%s: walking the records at key %llu: %s", sh->path,
                         (unsigned long long)ord, mdb_strerror(rc));
    } else if (ord < j->b) {
        j->rc = stk__err(j->err, STK_E_FORMAT, "%s: records end at key %llu, but meta count says %llu",
                         sh->path, (unsigned long long)ord, (unsigned long long)sh->count);
    } else if (rc == 0 && j->stoker && j->b == sh->count) {
        j->rc = stk__err(j->err, STK_E_FORMAT, "%s: more records than meta count %llu", sh->path,
                         (unsigned long long)j->b);
    }
}

static void walk_run(walk_job *j)
{
    MDB_cursor *cur = NULL;
    int rc;
    j->n = 0;
    j->payload = 0;
    j->maxlen = 0;
    j->rc = STK_OK;
    if (j->a >= j->b)
        return;
    if ((rc = mdb_cursor_open(j->txn, j->dbi, &cur)) != 0) {
        j->rc = stk__err(j->err, STK_E_LMDB, "%s: mdb_cursor_open: %s", j->sh->path, mdb_strerror(rc));
        goto out;
    }
    MDB_val k, v;
    uint8_t kb[8];
    rc = walk_seek(j, cur, &k, &v, kb);
    uint64_t ord = j->a;
    const uint64_t hdr = j->stoker ? STK__REC_HDR : 0;
    while (rc == 0 && ord < j->b) {
        if ((j->rc = walk_check(j, &k, &v, ord)) != STK_OK)
            goto out;
        j->out[ord] = (stk__rec){(uint64_t)((uintptr_t)v.mv_data - j->base), (uint32_t)v.mv_size, j->no};
        uint32_t plen = (uint32_t)(v.mv_size - hdr);
        j->payload += plen;
        if (plen > j->maxlen)
            j->maxlen = plen;
        ord++;
        j->n++;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    walk_end(j, rc, ord);
out:
    if (cur)
        mdb_cursor_close(cur);
    if (j->own_txn)
        mdb_txn_abort(j->txn);
}

static void *walk_thread(void *arg)
{
    walk_run(arg);
    return NULL;
}

/* Give job T (T >= 1) a read transaction of its own on the snapshot of SH's kept one. None to be
 * had (e.g. no reader slot left) leaves it on the kept transaction: walked serially. Returns
 * STK_E_CHANGED if the file moved on since the kept transaction began. */
static int walk_worker_txn(walk_job *job, const stk__shard *sh)
{
    /* the database handle is environment-wide already (envreg.c): mdb_dbi_open only looks it up */
    MDB_txn *wt;
    MDB_dbi wd;
    if (mdb_txn_begin(sh->env, NULL, MDB_RDONLY, &wt) != 0)
        return STK_OK;
    if (mdb_txn_id(wt) != mdb_txn_id(sh->txn)) {
        mdb_txn_abort(wt);
        return STK_E_CHANGED;
    }
    if (mdb_dbi_open(wt, job->stoker ? STK__DB_RECORDS : NULL, 0, &wd) != 0) {
        mdb_txn_abort(wt);
        return STK_OK;
    }
    job->txn = wt;
    job->dbi = wd;
    job->own_txn = 1;
    return STK_OK;
}

/* Split BASE's range over N jobs and set up the workers' transactions, one after the other. */
static int walk_plan(walk_job *jobs, int n, const walk_job *base, char *err)
{
    for (int t = 0; t < n; t++) {
        jobs[t] = *base;
        jobs[t].a = base->b * (uint64_t)t / (uint64_t)n;
        jobs[t].b = base->b * (uint64_t)(t + 1) / (uint64_t)n;
        if (t > 0 && walk_worker_txn(&jobs[t], base->sh) != STK_OK) {
            for (int u = 1; u < t; u++)
                if (jobs[u].own_txn)
                    mdb_txn_abort(jobs[u].txn);
            return stk__err(err, STK_E_CHANGED, "%s: shard changed while its offset table was built",
                            base->sh->path);
        }
    }
    return STK_OK;
}

/* Run the jobs: job 0 here, the others on threads; a job without a thread or a transaction of
 * its own is walked here afterwards, on the kept transaction. */
static void walk_all(walk_job *jobs, int n)
{
    pthread_t tids[WALK_MAX_THREADS];
    int started[WALK_MAX_THREADS] = {0};
    for (int t = 1; t < n; t++)
        started[t] = jobs[t].own_txn && pthread_create(&tids[t], NULL, walk_thread, &jobs[t]) == 0;
    walk_run(&jobs[0]);
    for (int t = 1; t < n; t++) {
        if (started[t]) {
            pthread_join(tids[t], NULL);
            continue;
        }
        if (jobs[t].own_txn)
            mdb_txn_abort(jobs[t].txn);
        jobs[t].txn = jobs[t].sh->txn;
        jobs[t].dbi = jobs[t].sh->dbi;
        jobs[t].own_txn = 0;
        walk_run(&jobs[t]);
    }
}

int stk__walk_shard(const stk__shard *sh, uint32_t no, int stoker, uint64_t count, uint64_t psize,
                    stk__rec *out, stk__walk_sum *sum, char *err)
{
    walk_job base = {.sh = sh, .txn = sh->txn, .dbi = sh->dbi, .stoker = stoker, .a = 0, .b = count,
                     .psize = psize, .no = no, .out = out};
    int rc;
    if ((rc = walk_find_base(&base)) != STK_OK)
        return stk__err(err, rc, "%s", base.err);
    int n = 1;
    if (stoker && count >= 65536)
        n = (int)STK__MIN((uint64_t)WALK_MAX_THREADS, count / 32768);
    walk_job jobs[WALK_MAX_THREADS];
    if ((rc = walk_plan(jobs, n, &base, err)) != STK_OK)
        return rc;
    walk_all(jobs, n);
    uint64_t walked = 0;
    *sum = (stk__walk_sum){0};
    for (int t = 0; t < n; t++) {
        if (jobs[t].rc)
            return stk__err(err, jobs[t].rc, "%s", jobs[t].err);
        walked += jobs[t].n;
        sum->payload += jobs[t].payload;
        if (jobs[t].maxlen > sum->maxlen)
            sum->maxlen = jobs[t].maxlen;
    }
    if (walked != count)
        return stk__err(err, STK_E_FORMAT, "%s: meta count %llu but %llu records", sh->path,
                        (unsigned long long)count, (unsigned long long)walked);
    return STK_OK;
}
