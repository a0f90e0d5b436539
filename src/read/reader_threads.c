/* SPDX-License-Identifier: MIT */
/*
 * reader_threads.c — the thread-pool backends, cfg->io_threads threads each doing WORK -> read
 * -> verify -> SINK:
 *   pread (STK_IO_PREAD, and the fallback when io_uring is unavailable);
 *   files (the files layout): open/read/close per record;
 *   mmap (STK_IO_MMAP, the reference path for comparison): mdb_get() in a read transaction per
 *     thread and shard and a memcpy out of the map. The reader opens its own environment per
 *     shard (MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD; no lock file, so closing it
 *     cannot drop the dataset's fcntl locks) and opens the database handle in a committed
 *     transaction: a handle opened in the dataset's long-lived, never-committed transaction is
 *     valid only in that one. Foreign databases have arbitrary keys, so there the value is found
 *     at the table's offset in the same map. Every page it touches lies within the file as it
 *     was at open, so an fstat showing the file no shorter than that comes before each touch:
 *     the environment's setup, each mdb_txn_begin (it reads the meta pages through the map),
 *     mdb_get and the memcpy; a shard that shrank gives STK_E_TRUNCATED naming it ("shard-N.lmdb:
 *     shrank from X to Y bytes while open") for each of its records, never SIGBUS. A cut
 *     between an fstat and the touch that follows it still raises SIGBUS (docs/HARDENING.md):
 *     it is not the default.
 * An image file removed after open gives -ENOENT; a shard that shrinks gives STK_E_TRUNCATED.
 */
#include "reader_threads.h"

#include "format.h"
#include "reader_pool.h"
#include "reader_verify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct mmap_shard {
    MDB_txn *txn;
    const uint8_t *base; /* map base (foreign: value pointer - table offset) */
} mmap_shard;

static void read_pread(stk__reader *r, rslot *s)
{
    int rc = stk__rd_plan(r, s);
    if (rc != STK_OK) {
        s->rd.status = rc;
        return;
    }
    if (s->fault_delay)
        stk__rd_sleep_us(r->cfg.fault_delay_us);
    for (;;) {
        s->cur_len = stk__rd_next_len(s);
        atomic_fetch_add(&r->disk_bytes, s->cur_len);
        if (s->direct)
            atomic_fetch_add(&r->direct_reads, 1);
        ssize_t n = pread(s->fd, s->mem + s->done, s->cur_len, (off_t)(s->base_off + s->done));
        if (!stk__rd_on_result(r, s, n < 0 ? -(int64_t)errno : (int64_t)n))
            return;
    }
}

static void read_file(stk__reader *r, rslot *s)
{
    const char *path = r->ds->files.paths[s->rd.index];
    s->vskip = 0;
    s->voff = 0;
    s->vlen = 0;
    if (s->fault_delay)
        stk__rd_sleep_us(r->cfg.fault_delay_us);
    struct stat st;
    char why[STK__ERRLEN];
    int fd = stk__open_regular(path, 0, &st, why); /* a FIFO or device: named, never waited on */
    if (fd < 0) {
        if (fd == STK_E_IO)
            stk__rd_fail(s, fd, 0, "%s", why);
        else
            stk__rd_fail(s, fd, -fd, "open: %s", why);
        return;
    }
    if ((uint64_t)st.st_size > s->cap) {
        stk__rd_fail(s, STK_E_CHANGED, 0, "file is %lld bytes, %u when the dataset was opened",
                     (long long)st.st_size, r->ds->recs[s->rd.index].len);
        close(fd);
        return;
    }
    s->base_off = 0;
    s->want = s->req = (uint32_t)st.st_size;
    s->done = 0;
    s->retries = 0;
    s->direct = 0;
    s->fd = fd;
    while (s->done < s->want) {
        s->cur_len = stk__rd_next_len(s);
        atomic_fetch_add(&r->disk_bytes, s->cur_len);
        ssize_t n = pread(fd, s->mem + s->done, s->cur_len, (off_t)s->done);
        if (!stk__rd_on_result(r, s, n < 0 ? -(int64_t)errno : (int64_t)n))
            break;
    }
    if (s->rd.status == STK_OK && s->fault_eio) { /* an empty file never issued a read */
        s->fault_eio = 0;
        stk__rd_fail(s, -EIO, EIO, "injected EIO");
    }
    s->vlen = s->done < s->want ? s->done : s->want;
    close(fd);
}

/* The size of SH now, when it is below the size at open (else -1): nothing of the map may then
 * be touched. An fstat that fails counts as size 0. */
static long long mmap_shrunk(const stk__shard *sh)
{
    struct stat st;
    if (fstat(sh->fd, &st) != 0)
        return 0;
    return (uint64_t)st.st_size < sh->file_size ? (long long)st.st_size : -1;
}

/* STK_OK when SH is still as long as at open; else S fails naming the shard. */
static int mmap_check(rslot *s, const stk__shard *sh, const stk__rec *rec)
{
    long long now = mmap_shrunk(sh);
    if (now < 0)
        return STK_OK;
    stk__rd_fail(s, STK_E_TRUNCATED, 0, "%s: shrank from %llu to %lld bytes while open (value at %llu, %u bytes)",
                 sh->name, (unsigned long long)sh->file_size, now, (unsigned long long)rec->off, rec->len);
    return STK_E_TRUNCATED;
}

/* The thread's read transaction on the shard of REC (begun at its first record) and, for a
 * foreign LMDB, the map base from the shard's first value. The caller checked the size. */
static int mmap_txn(stk__reader *r, rslot *s, const stk__rec *rec, mmap_shard *m)
{
    const stk__shard *sh = &r->ds->shards[rec->shard];
    if (m->txn)
        return STK_OK;
    if (!r->menv[rec->shard]) { /* cut before the reader started (stk__rd_mmap_setup) */
        stk__rd_fail(s, STK_E_TRUNCATED, 0, "%s: was shorter than at open when the reader started",
                     sh->name);
        return STK_E_TRUNCATED;
    }
    int rc = mdb_txn_begin(r->menv[rec->shard], NULL, MDB_RDONLY, &m->txn);
    if (rc != MDB_SUCCESS) {
        m->txn = NULL;
        stk__rd_fail(s, STK_E_LMDB, 0, "mdb_txn_begin: %s", mdb_strerror(rc));
        return STK_E_LMDB;
    }
    if (sh->foreign && sh->count > 0) { /* map base from the shard's first value */
        MDB_cursor *c;
        MDB_val k, v;
        if (mdb_cursor_open(m->txn, r->mdbi[rec->shard], &c) == MDB_SUCCESS) {
            if (mdb_cursor_get(c, &k, &v, MDB_FIRST) == MDB_SUCCESS)
                m->base = (const uint8_t *)v.mv_data - r->ds->recs[sh->first].off;
            mdb_cursor_close(c);
        }
    }
    return STK_OK;
}

/* Where REC's value lies in the map: mdb_get of its key, or (foreign) the table's offset. */
static const uint8_t *mmap_value(stk__reader *r, rslot *s, const stk__rec *rec, const mmap_shard *m)
{
    const stk__shard *sh = &r->ds->shards[rec->shard];
    if (sh->foreign) {
        if (!m->base)
            stk__rd_fail(s, STK_E_LMDB, 0, "cannot locate the map of %s", sh->name);
        return m->base ? m->base + rec->off : NULL;
    }
    uint8_t kb[8];
    stk__rec_key(kb, s->rd.index - sh->first);
    MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
    int rc = mdb_get(m->txn, r->mdbi[rec->shard], &k, &v);
    if (rc != MDB_SUCCESS) {
        stk__rd_fail(s, STK_E_LMDB, 0, "mdb_get key %llu: %s", (unsigned long long)(s->rd.index - sh->first),
                     mdb_strerror(rc));
        return NULL;
    }
    if (v.mv_size != rec->len) {
        stk__rd_fail(s, STK_E_CHANGED, 0, "mdb_get: value is %zu bytes, table says %u", v.mv_size, rec->len);
        return NULL;
    }
    return v.mv_data;
}

static void read_mmap(stk__reader *r, rslot *s, mmap_shard *ms)
{
    const stk__rec *rec = &r->ds->recs[s->rd.index];
    const stk__shard *sh = &r->ds->shards[rec->shard];
    s->shard = rec->shard;
    s->voff = rec->off;
    s->vlen = rec->len;
    s->vskip = 0;
    s->direct = 0;
    if (s->fault_delay)
        stk__rd_sleep_us(r->cfg.fault_delay_us);
    /* never touch map pages past the end of the file (SIGBUS): meta pages (mdb_txn_begin),
     * B-tree pages (mdb_get), the value (memcpy); refuse a shard that shrank since open */
    if (mmap_check(s, sh, rec) != STK_OK || mmap_txn(r, s, rec, &ms[rec->shard]) != STK_OK ||
        mmap_check(s, sh, rec) != STK_OK)
        return;
    const uint8_t *src = mmap_value(r, s, rec, &ms[rec->shard]);
    if (!src)
        return;
    if (rec->len > s->cap) {
        stk__rd_fail(s, STK_E_RANGE, 0, "value of %u bytes exceeds the %zu-byte buffer", rec->len, s->cap);
        return;
    }
    if (mmap_check(s, sh, rec) != STK_OK)
        return;
    atomic_fetch_add(&r->disk_bytes, rec->len);
    memcpy(s->mem, src, rec->len);
    if (s->fault_short) /* the map has no short reads: account the fault as resolved */
        s->fault_short = 0;
    if (s->fault_eio) {
        s->fault_eio = 0;
        stk__rd_fail(s, -EIO, EIO, "injected EIO: value at %llu (%u bytes)", (unsigned long long)rec->off,
                     rec->len);
    }
}

void *stk__rd_pool_thread(void *arg)
{
    stk__reader *r = arg;
    pthread_setname_np(pthread_self(), r->bk == BK_FILES ? "stk-files" : r->bk == BK_MMAP ? "stk-mmap" : "stk-pread");
    mmap_shard *ms = NULL;
    if (r->bk == BK_MMAP)
        ms = calloc(r->ds->nshards, sizeof(*ms)); /* per thread, once per start */
    while (!atomic_load(&r->stopping)) {
        int skip;
        rslot *s = stk__rd_take_work(r, &skip);
        if (!s)
            break;
        if (skip)
            continue;
        if (r->bk == BK_MMAP && !ms) {
            stk__rd_fail(s, STK_E_NOMEM, 0, "mmap reader: out of memory");
            stk__rd_deliver(r, s, 0);
            continue;
        }
        stk__rd_draw_faults(r, s);
        uint64_t t1 = stk__now_ns();
        stk__rd_busy(s, 1);
        stk__rd_inflight_inc(r);
        if (r->bk == BK_FILES)
            read_file(r, s);
        else if (r->bk == BK_MMAP)
            read_mmap(r, s, ms);
        else
            read_pread(r, s);
        stk__rd_inflight_dec(r);
        stk__rd_busy(s, 0);
        stk__clock_add(&r->clock.starved_ns, stk__now_ns() - t1);
        s->rd.disk_bytes = s->direct ? s->req : s->vlen;
        stk__rd_deliver(r, s, 1);
    }
    if (ms) {
        for (uint32_t i = 0; i < r->ds->nshards; i++)
            if (ms[i].txn)
                mdb_txn_abort(ms[i].txn);
        free(ms);
    }
    return NULL;
}

/* Shard I's environment and database handle, made valid for every transaction by opening it in
 * a committed one. A shard already shorter than at open gets none (r->menv[i] stays NULL): its
 * records then fail, each naming it. */
static int mmap_setup_shard(stk__reader *r, uint32_t i, char *err)
{
    const stk__shard *sh = &r->ds->shards[i];
    struct stat st;
    int dir = stat(sh->path, &st) == 0 && S_ISDIR(st.st_mode);
    unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD | (dir ? 0 : MDB_NOSUBDIR);
    MDB_txn *txn;
    if (mmap_shrunk(sh) >= 0)
        return STK_OK;
    int rc = mdb_env_create(&r->menv[i]);
    if (rc == 0) {
        mdb_env_set_maxdbs(r->menv[i], 8);
        mdb_env_set_maxreaders(r->menv[i], 512);
        rc = mdb_env_open(r->menv[i], sh->path, flags, 0644);
    }
    if (r->menv[i] && mmap_shrunk(sh) >= 0) { /* cut while it was opened: before the map is read */
        mdb_env_close(r->menv[i]);
        r->menv[i] = NULL;
        return STK_OK;
    }
    if (rc == 0)
        rc = mdb_txn_begin(r->menv[i], NULL, MDB_RDONLY, &txn);
    if (rc == 0) {
        rc = mdb_dbi_open(txn, sh->foreign ? NULL : STK__DB_RECORDS, 0, &r->mdbi[i]);
        if (rc == 0)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    if (rc != 0)
        return stk__err(err, STK_E_LMDB, "reader (mmap): %s: %s", sh->path, mdb_strerror(rc));
    return STK_OK;
}

/* mmap backend: an environment per shard and its database handle. */
int stk__rd_mmap_setup(stk__reader *r, char *err)
{
    uint32_t n = r->ds->nshards;
    r->menv = calloc(n, sizeof(*r->menv));
    r->mdbi = calloc(n, sizeof(*r->mdbi));
    if (!r->menv || !r->mdbi)
        return stk__err(err, STK_E_NOMEM, "reader: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        int rc = mmap_setup_shard(r, i, err);
        if (rc != STK_OK)
            return rc;
    }
    return STK_OK;
}

void stk__rd_mmap_close(stk__reader *r)
{
    if (r->menv) {
        for (uint32_t i = 0; i < r->ds->nshards; i++)
            if (r->menv[i])
                mdb_env_close(r->menv[i]);
        free(r->menv);
    }
    free(r->mdbi);
}
