/* SPDX-License-Identifier: MIT */
/*
 * dataset.c — opening a dataset: stoker shards, a foreign LMDB or an ImageFolder, and the
 * offset table the reader works from.
 *
 * The offset table. LMDB's own read path costs a page fault per touched page, one at a time per
 * thread; stoker keeps LMDB as the container but reads payloads itself (io_uring, O_DIRECT). For
 * that it needs, per record, {shard, file offset, length}. Each shard is opened read-only with
 * MDB_NORDAHEAD (without it, the page-fault readahead of the walk drags the payload pages in:
 * the whole file instead of the few MB of leaf pages) and MDB_NOTLS (the read transaction is kept
 * for the dataset's life and may be ended from another thread). One cursor walk over `records`
 * gives, per record, a pointer into LMDB's map; offset = pointer − map base.
 *
 * The map base. mdb_env_info's me_mapaddr is NULL unless MDB_FIXEDMAP, so we find the mapping of
 * the data file in /proc/self/maps (same device and inode, file offset 0, containing the value
 * pointer). We also derive it independently from the leaf page that holds each key: the key
 * pointer lies inside its leaf page, whose header starts with the page's own number, so base =
 * page − pgno × page size. The two must agree (else STK_E_FORMAT). The leaf page is already in
 * memory (the cursor just read it), so this costs nothing, and it still works without /proc.
 * Values bigger than about half a page live in a run of contiguous overflow pages, so one range
 * covers a record; smaller values are inline and never cross a page. We never dereference a
 * value pointer: the walk touches branch and leaf pages only. LMDB's magic 0xBEEFC0DE at byte 16
 * of pages 0 and 1 is checked with pread (not via the map); the file must be at least as long
 * as its last used page (a truncated shard would otherwise SIGBUS the walk), and every offset
 * plus length must lie inside the file. stoker's own 16-byte record header (magic + length) is
 * checked again by every read, a second check of every computed offset.
 *
 * Consistency. A shard must not change while its table is in use: the read transaction that
 * built it stays open (with LMDB's lock file, a writer then never reuses those pages). Where the
 * lock file cannot be created (read-only media: EACCES / EROFS) the shard is opened MDB_NOLOCK
 * and its identity (device, inode, size, mtime, last txnid, last page) is recorded;
 * stk__dataset_check() re-verifies it.
 *
 * Shared environments. LMDB: "do not have open an LMDB database twice in the same process at
 * the same time". Its lock file is guarded by an fcntl lock, and fcntl locks never conflict
 * within one process: a second mdb_env_open of a shard already open in the process takes the
 * "exclusive" lock, believes it is the only user and re-initialises the lock file's reader table
 * under the first environment (memset + pthread_mutex_init of the robust reader mutex, reader
 * count and txnid set to 0), and closing either environment drops the other's locks. Measured
 * here with two to four threads opening datasets on the same shards: a SIGSEGV in
 * pthread_mutex_unlock inside mdb_txn_begin (a thread held the reader mutex while another open
 * zeroed it: the robust-list unlink followed a NULL link), and opens that read the older meta
 * page (txnid 0 in the lock file) and found no `records` database. So every shard file is opened
 * once per process: a registry keyed by (pid, device, inode of the data file, directory or
 * single-file environment) holds the MDB_env with a count of the datasets using it, under one
 * mutex that is also held while a new environment is opened and set up, and while the last user
 * closes it (so an open and a close of the same file never overlap). Each dataset still opens
 * its own descriptors, runs the checks above on the file and keeps its own read transaction
 * (MDB_NOTLS: transactions of one environment from any threads). The first opener decides
 * between a lock file and MDB_NOLOCK; later users inherit it (and the identity checks that go
 * with it). A child after fork() never matches its parent's entries (the pid), and the mutex is
 * held across fork() (pthread_atfork) so the child's copy is usable. A shard that a writer grew
 * past the shared map since its environment was opened is refused (MDB_MAP_RESIZED) until the
 * other datasets on it close. The mmap reader backend (reader.c) opens its own environments
 * with MDB_NOLOCK, which never touch the lock file.
 */
#include "dataset.h"

#include "common.h"
#include "folder.h"
#include "format.h"
#include "lmdb_check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
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

int stk_dataset_create(stk_dataset **out)
{
    if (!out)
        return STK_E_INVALID;
    stk_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return STK_E_NOMEM;
    ds->foreign_label = -1;
    *out = ds;
    return STK_OK;
}

int stk_dataset_set(stk_dataset *ds, int key, int64_t value)
{
    if (!ds)
        return STK_E_INVALID;
    if (ds->opened)
        return stk__err(ds->err, STK_E_STATE, "stk_dataset_set: only before stk_dataset_open");
    switch (key) {
    case STK_P_LAYOUT:
        if (value < STK_LAYOUT_AUTO || value > STK_LAYOUT_LMDB)
            return stk__err(ds->err, STK_E_INVALID, "STK_P_LAYOUT: %lld is not a STK_LAYOUT_*",
                            (long long)value);
        ds->layout = (int)value;
        return STK_OK;
    case STK_P_FOREIGN_LABEL:
        if (value < -1 || value > INT32_MAX)
            return stk__err(ds->err, STK_E_INVALID, "STK_P_FOREIGN_LABEL must be -1..%d", INT32_MAX);
        ds->foreign_label = value;
        return STK_OK;
    case STK_P_ALLOW_INCOMPLETE:
        if (value != 0 && value != 1)
            return stk__err(ds->err, STK_E_INVALID, "STK_P_ALLOW_INCOMPLETE must be 0 or 1");
        ds->allow_incomplete = (int)value;
        return STK_OK;
    default:
        return stk__err(ds->err, STK_E_BADPARAM, "parameter %d is not a dataset parameter", key);
    }
}

/* ---- shard list ------------------------------------------------------------------------------ */

static int is_shard_name(const char *n, unsigned *no)
{
    if (strlen(n) != 16 || strncmp(n, "shard-", 6) != 0 || strcmp(n + 11, ".lmdb") != 0)
        return 0;
    unsigned v = 0;
    for (int i = 6; i < 11; i++) {
        if (n[i] < '0' || n[i] > '9')
            return 0;
        v = v * 10 + (unsigned)(n[i] - '0');
    }
    *no = v;
    return 1;
}

static int cmp_uint(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/* Shard numbers in DIR, sorted; *n set. Returns STK_OK or an error. */
static int list_shards(stk_dataset *ds, const char *dir, unsigned **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return stk__err(ds->err, -errno, "%s: cannot list", dir);
    size_t cap = 0;
    unsigned *v = NULL;
    struct dirent *e;
    unsigned no;
    while ((e = readdir(d)) != NULL) {
        if (!is_shard_name(e->d_name, &no))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            unsigned *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                closedir(d);
                return stk__err(ds->err, STK_E_NOMEM, "out of memory");
            }
            v = nv;
        }
        v[(*n)++] = no;
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof *v, cmp_uint);
    *out = v;
    return STK_OK;
}

/* ---- one LMDB file ---------------------------------------------------------------------------- */

typedef struct lmdb_probe {
    uint32_t psize;
    uint64_t last_pgno, txnid;
} lmdb_probe;

/* Read LMDB's two meta pages with pread: magic in both, page size, the newer meta's last page
 * and txnid. Returns STK_OK or STK_E_FORMAT / STK_E_TRUNCATED / -errno with ds->err set. */
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

typedef struct recvec {
    stk__rec *v;
    uint64_t n, cap;
} recvec;

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

/* Map base from the first record: /proc/self/maps, cross-checked by the leaf page's number. */
static uintptr_t leaf_base_of(const void *key, uint64_t psize, uint64_t *pgno)
{
    uintptr_t page = (uintptr_t)key & ~(uintptr_t)(psize - 1);
    memcpy(pgno, (const void *)page, sizeof *pgno); /* leaf page header: its own number */
    return page - (uintptr_t)(*pgno * psize);
}

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

static void walk_run(walk_job *j)
{
    MDB_txn *own = NULL;
    MDB_cursor *cur = NULL;
    const stk__shard *sh = j->sh;
    int rc;
    j->n = 0;
    j->payload = 0;
    j->maxlen = 0;
    j->rc = STK_OK;
    if (j->a >= j->b)
        return;
    if (j->own_txn)
        own = j->txn;
    MDB_txn *txn = own ? own : j->txn;
    if ((rc = mdb_cursor_open(txn, j->dbi, &cur)) != 0) {
        j->rc = stk__err(j->err, STK_E_LMDB, "%s: mdb_cursor_open: %s", sh->path, mdb_strerror(rc));
        goto out;
    }
    MDB_val k, v;
    uint8_t kb[8];
    if (j->a > 0) {
        stk__rec_key(kb, j->a);
        k.mv_size = 8;
        k.mv_data = kb;
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    } else {
        rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    }
    uint64_t ord = j->a;
    const uint64_t hdr = j->stoker ? STK__REC_HDR : 0;
    while (rc == 0 && ord < j->b) {
        uintptr_t vp = (uintptr_t)v.mv_data;
        uint64_t pgno;
        uintptr_t lb = leaf_base_of(k.mv_data, j->psize, &pgno);
        if (pgno > sh->last_pgno || lb != j->base) {
            j->rc = stk__err(j->err, STK_E_FORMAT, "%s key %llu: leaf page %llu does not sit where the map "
                             "base says", sh->name, (unsigned long long)ord, (unsigned long long)pgno);
            goto out;
        }
        if (j->stoker) {
            if (k.mv_size != 8 || stk__rec_key_parse(k.mv_data) != ord) {
                j->rc = stk__err(j->err, STK_E_FORMAT, "%s: record %llu has key %s (expected 8-byte "
                                 "big-endian %llu)", sh->name, (unsigned long long)ord,
                                 k.mv_size == 8 ? "out of sequence" : "of the wrong size",
                                 (unsigned long long)ord);
                goto out;
            }
            if (v.mv_size < STK__REC_HDR) {
                j->rc = stk__err(j->err, STK_E_CORRUPT, "%s key %llu: value of %zu bytes is shorter than "
                                 "the 16-byte record header", sh->name, (unsigned long long)ord, v.mv_size);
                goto out;
            }
        }
        if (vp < j->base || v.mv_size > UINT32_MAX || (uint64_t)(vp - j->base) + v.mv_size > sh->file_size ||
            (uint64_t)(vp - j->base) < 2 * j->psize) {
            j->rc = stk__err(j->err, STK_E_FORMAT, "%s key %llu: value at offset %llu, %zu bytes, lies "
                             "outside the file (%llu bytes)", sh->name, (unsigned long long)ord,
                             (unsigned long long)(vp - j->base), v.mv_size, (unsigned long long)sh->file_size);
            goto out;
        }
        j->out[ord] = (stk__rec){(uint64_t)(vp - j->base), (uint32_t)v.mv_size, j->no};
        uint32_t plen = (uint32_t)(v.mv_size - hdr);
        j->payload += plen;
        if (plen > j->maxlen)
            j->maxlen = plen;
        ord++;
        j->n++;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    if (rc != 0 && rc != MDB_NOTFOUND) {
        j->rc = stk__err(j->err, STK_E_LMDB, "%s: walking the records at key %llu: %s", sh->path,
                         (unsigned long long)ord, mdb_strerror(rc));
    } else if (ord < j->b) {
        j->rc = stk__err(j->err, STK_E_FORMAT, "%s: records end at key %llu, but meta count says %llu",
                         sh->path, (unsigned long long)ord, (unsigned long long)j->sh->count);
    } else if (rc == 0 && j->stoker && j->b == j->sh->count) {
        j->rc = stk__err(j->err, STK_E_FORMAT, "%s: more records than meta count %llu", sh->path,
                         (unsigned long long)j->b);
    }
out:
    if (cur)
        mdb_cursor_close(cur);
    if (own)
        mdb_txn_abort(own);
}

static void *walk_thread(void *arg)
{
    walk_run(arg);
    return NULL;
}

/* ---- shared environments (see the top of the file) ------------------------------------------- */

struct stk__shared_env {
    struct stk__shared_env *next;
    pid_t pid;
    dev_t dev;     /* of the data file */
    ino_t ino;
    int env_dir;   /* directory environment (data.mdb inside) or single file (MDB_NOSUBDIR) */
    int nolock;    /* MDB_NOLOCK, or LMDB went on without a lock file (read-only filesystem) */
    MDB_env *env;
    unsigned refs; /* datasets' shards using it */
};

static pthread_mutex_t g_env_mu = PTHREAD_MUTEX_INITIALIZER;
static stk__shared_env *g_envs; /* under g_env_mu */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

/* fork() while another thread holds g_env_mu would leave the child's copy locked for ever */
static void env_fork_prepare(void)
{
    pthread_mutex_lock(&g_env_mu);
}

static void env_fork_after(void)
{
    pthread_mutex_unlock(&g_env_mu);
}

static void env_once(void)
{
    pthread_atfork(env_fork_prepare, env_fork_after, env_fork_after);
}

/* A new environment for the data file DATAFILE (identity ST) of the LMDB at PATH, set up for
 * sharing; g_env_mu held. Returns STK_OK with *out (refs 1, not yet listed) or an error, with
 * nothing left open. */
static int env_open_new(char *err, const char *path, const char *datafile, int env_dir, const struct stat *st,
                        stk__shared_env **out)
{
    MDB_env *env;
    int rc, nolock = 0;
    if ((rc = mdb_env_create(&env)) != 0)
        return stk__err(err, STK_E_LMDB, "%s: mdb_env_create: %s", path, mdb_strerror(rc));
    mdb_env_set_maxdbs(env, 8);
    unsigned flags = MDB_RDONLY | MDB_NORDAHEAD | MDB_NOTLS | (env_dir ? 0 : MDB_NOSUBDIR);
    rc = mdb_env_open(env, path, flags, 0644);
    if (rc == EACCES || rc == EROFS || rc == EPERM) {
        mdb_env_close(env);
        if ((rc = mdb_env_create(&env)) != 0)
            return stk__err(err, STK_E_LMDB, "%s: mdb_env_create: %s", path, mdb_strerror(rc));
        mdb_env_set_maxdbs(env, 8);
        rc = mdb_env_open(env, path, flags | MDB_NOLOCK, 0644);
        nolock = 1;
    }
    if (rc) {
        mdb_env_close(env);
        return stk__err(err, STK_E_LMDB, "%s: cannot open as LMDB: %s", path, mdb_strerror(rc));
    }
    /* LMDB opened the path again: it must be the file checked (and keyed) by the caller */
    int efd;
    struct stat est;
    if (mdb_env_get_fd(env, &efd) != 0 || fstat(efd, &est) != 0 || est.st_dev != st->st_dev ||
        est.st_ino != st->st_ino) {
        mdb_env_close(env);
        return stk__err(err, STK_E_CHANGED, "%s: replaced while it was opened", datafile);
    }
    if (!nolock) {
        /* On a read-only filesystem LMDB itself goes on without a lock file (EROFS): then no
         * lock protects the table either, and the identity checks apply. */
        char lockp[4200];
        snprintf(lockp, sizeof lockp, env_dir ? "%s/lock.mdb" : "%s-lock", path);
        if (access(lockp, F_OK) != 0)
            nolock = 1;
    }
    /* Open the named databases in a short transaction and commit it: that makes the handles
     * environment-wide, so the datasets' kept transactions and the walks' worker transactions
     * only look them up (LMDB registers a handle first opened in a still-open transaction per
     * txn, and concurrent first opens would fight over the same slot). Once per environment,
     * under g_env_mu: no other transaction of it exists yet. */
    MDB_txn *t0;
    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t0)) != 0) {
        mdb_env_close(env);
        return stk__err(err, STK_E_LMDB, "%s: mdb_txn_begin: %s", path, mdb_strerror(rc));
    }
    static const char *const dbnames[] = {STK__DB_RECORDS, STK__DB_META}; /* `sources`: pread only */
    for (size_t i = 0; i < STK__ARRAY_LEN(dbnames); i++) {
        MDB_dbi d;
        (void)mdb_dbi_open(t0, dbnames[i], 0, &d); /* absent ones are looked for again by the caller */
    }
    if ((rc = mdb_txn_commit(t0)) != 0) {
        mdb_env_close(env);
        return stk__err(err, STK_E_LMDB, "%s: mdb_txn_commit: %s", path, mdb_strerror(rc));
    }
    stk__shared_env *e = calloc(1, sizeof *e);
    if (!e) {
        mdb_env_close(env);
        return stk__err(err, STK_E_NOMEM, "out of memory");
    }
    *e = (stk__shared_env){.pid = getpid(), .dev = st->st_dev, .ino = st->st_ino, .env_dir = env_dir,
                           .nolock = nolock, .env = env, .refs = 1};
    *out = e;
    return STK_OK;
}

/* The process's environment of the data file with identity ST (opened now if it is not open
 * yet), one more reference to it in *out. Returns STK_OK or an error with err set. */
static int env_acquire(char *err, const char *path, const char *datafile, int env_dir, const struct stat *st,
                       stk__shared_env **out)
{
    pthread_once(&g_env_once, env_once);
    pid_t pid = getpid();
    int rc = STK_OK;
    pthread_mutex_lock(&g_env_mu);
    stk__shared_env *e;
    for (e = g_envs; e; e = e->next)
        if (e->pid == pid && e->dev == st->st_dev && e->ino == st->st_ino && e->env_dir == env_dir)
            break;
    if (e) {
        e->refs++;
    } else if ((rc = env_open_new(err, path, datafile, env_dir, st, &e)) == STK_OK) {
        e->next = g_envs;
        g_envs = e;
    }
    pthread_mutex_unlock(&g_env_mu);
    *out = rc == STK_OK ? e : NULL;
    return rc;
}

/* Give back a reference; the last one closes the environment (its transactions are ended). */
static void env_release(stk__shared_env *e)
{
    pthread_mutex_lock(&g_env_mu);
    if (--e->refs == 0) {
        stk__shared_env **pp = &g_envs;
        while (*pp && *pp != e)
            pp = &(*pp)->next;
        if (*pp)
            *pp = e->next;
        mdb_env_close(e->env);
        free(e);
    }
    pthread_mutex_unlock(&g_env_mu);
}

/*
 * Open the LMDB at PATH as shard SH (number NO in ds->shards); ENV_DIR: PATH is a directory
 * environment (data.mdb inside). EXPECT_STOKER: 1 = must be a stoker shard, 0 = decide.
 * IN_DIR: one of a directory of shards (continuity with the previous shards is checked).
 * Walks the records into RECS.
 */
static int open_shard(stk_dataset *ds, stk__shard *sh, uint32_t no, const char *path, int env_dir,
                      int expect_stoker, int in_dir, recvec *recs)
{
    int rc;
    char datafile[4200];
    if (env_dir)
        snprintf(datafile, sizeof datafile, "%s/data.mdb", path);
    else
        snprintf(datafile, sizeof datafile, "%s", path);
    if (!(sh->path = stk__strdup(path)))
        return stk__err(ds->err, STK_E_NOMEM, "out of memory");
    const char *slash = strrchr(sh->path, '/');
    sh->name = slash && slash[1] ? slash + 1 : sh->path;
    sh->fd_direct = -1;
    sh->fd = open(datafile, O_RDONLY | O_CLOEXEC);
    if (sh->fd < 0)
        return stk__err(ds->err, -errno, "%s: cannot open", datafile);
    sh->fd_direct = open(datafile, O_RDONLY | O_CLOEXEC | O_DIRECT);
    struct stat st;
    if (fstat(sh->fd, &st) != 0)
        return stk__err(ds->err, -errno, "%s: fstat", datafile);
    if (!S_ISREG(st.st_mode))
        return stk__err(ds->err, STK_E_FORMAT, "%s: not a regular file", datafile);
    sh->file_size = (uint64_t)st.st_size;
    sh->dev = st.st_dev;
    sh->ino = st.st_ino;
    sh->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    lmdb_probe pr;
    if ((rc = probe_lmdb(ds->err, sh->fd, datafile, sh->file_size, &pr)) != STK_OK)
        return rc;
    if ((pr.last_pgno + 1) * pr.psize > sh->file_size)
        return stk__err(ds->err, STK_E_TRUNCATED,
                        "%s: truncated: %llu bytes, but LMDB's meta says pages up to %llu (%llu bytes)",
                        datafile, (unsigned long long)sh->file_size, (unsigned long long)pr.last_pgno,
                        (unsigned long long)((pr.last_pgno + 1) * pr.psize));
    /* LMDB trusts its file: check every B-tree page it may touch first (lmdb_check.h) */
    if ((rc = stk__lmdb_check(sh->fd, datafile, sh->file_size, ds->err)) != STK_OK)
        return rc;

    /* one environment per file per process, shared with the other datasets on it */
    if ((rc = env_acquire(ds->err, path, datafile, env_dir, &st, &sh->senv)) != STK_OK)
        return rc;
    sh->env = sh->senv->env;
    sh->nolock = sh->senv->nolock;
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
    uint64_t psize = ms.ms_psize;
    sh->txnid = ei.me_last_txnid;
    sh->last_pgno = ei.me_last_pgno;
    if ((sh->last_pgno + 1) * psize > sh->file_size)
        return stk__err(ds->err, STK_E_TRUNCATED, "%s: truncated (%llu bytes, last page %llu)", datafile,
                        (unsigned long long)sh->file_size, (unsigned long long)sh->last_pgno);

    /* stoker shard or foreign? */
    MDB_dbi rec_dbi, meta_dbi;
    int stoker = 0;
    rc = mdb_dbi_open(sh->txn, STK__DB_RECORDS, 0, &rec_dbi);
    if (rc == 0) {
        stoker = 1;
    } else if (expect_stoker) {
        return stk__err(ds->err, STK_E_FORMAT, "%s: not a stoker shard (no `records` database: %s)",
                        path, mdb_strerror(rc));
    }
    uint64_t meta_count = 0, first_index = 0;
    int have_first = 0;
    if (stoker) {
        if ((rc = mdb_dbi_open(sh->txn, STK__DB_META, 0, &meta_dbi)) != 0)
            return stk__err(ds->err, STK_E_FORMAT, "%s: stoker shard without a `meta` database", path);
        MDB_val v;
        if (stk__meta_get(sh->txn, meta_dbi, "format", &v) != 0)
            return stk__err(ds->err, STK_E_FORMAT, "%s: meta has no `format`", path);
        if (v.mv_size != strlen(STK__FORMAT_NAME) || memcmp(v.mv_data, STK__FORMAT_NAME, v.mv_size) != 0)
            return stk__err(ds->err, STK_E_FORMAT, "%s: unsupported format `%.*s` (this build reads `%s`)",
                            path, (int)STK__MIN(v.mv_size, 64), (const char *)v.mv_data, STK__FORMAT_NAME);
        if (stk__meta_u64(sh->txn, meta_dbi, "count", &meta_count) != 0)
            return stk__err(ds->err, STK_E_FORMAT, "%s: meta `count` missing or not a number", path);
        have_first = stk__meta_u64(sh->txn, meta_dbi, STK__META_FIRST_INDEX, &first_index) == 0;
        uint64_t last = 1;
        if (in_dir && !ds->allow_incomplete && no + 1 == ds->nshards &&
            stk__meta_u64(sh->txn, meta_dbi, STK__META_LAST, &last) == 0 &&
            last == 0)
            return stk__err(ds->err, STK_E_FORMAT, "%s: the dataset has more shards after this one: "
                            "shard-%05u.lmdb is missing", path, no + 1);
        if (no == 0 && !ds->classes && stk__meta_get(sh->txn, meta_dbi, "classes", &v) == 0 &&
            set_classes(ds, v.mv_data, v.mv_size) != STK_OK)
            return stk__err(ds->err, STK_E_NOMEM, "out of memory");
        /* the optional `sources` tree, found now with pread in the snapshot of the kept
         * transaction (whose pages a writer does not reuse): record_name() reads it with pread
         * only, never through LMDB's map, so a file that shrinks under a running loader gives
         * short reads there instead of SIGBUS. Absent, corrupt or changed since: no names. */
        sh->have_sources = stk__lmdb_tree_open(sh->fd, sh->file_size, (uint64_t)mdb_txn_id(sh->txn),
                                               STK__DB_SOURCES, &sh->sources) == STK_OK;
        sh->dbi = rec_dbi;
    } else {
        sh->foreign = 1;
        if ((rc = mdb_dbi_open(sh->txn, NULL, 0, &sh->dbi)) != 0)
            return stk__err(ds->err, STK_E_LMDB, "%s: cannot open the main database: %s", path,
                            mdb_strerror(rc));
    }
    if (stoker && have_first && in_dir && first_index != recs->n)
        return stk__err(ds->err, STK_E_FORMAT,
                        "%s: meta first_index %llu but the shards before it hold %llu records "
                        "(a shard is missing or from another dataset)",
                        path, (unsigned long long)first_index, (unsigned long long)recs->n);

    /* the walk */
    sh->first = recs->n;
    uint64_t count = meta_count;
    if (!stoker) {
        MDB_stat ds_st;
        if ((rc = mdb_stat(sh->txn, sh->dbi, &ds_st)) != 0)
            return stk__err(ds->err, STK_E_LMDB, "%s: mdb_stat: %s", path, mdb_strerror(rc));
        count = ds_st.ms_entries;
    }
    /* the count is read from the file: bound it by the file (an LMDB leaf node takes at least
     * 8 bytes + a 2-byte pointer + a non-empty key) before sizing the table by it (a forged
     * count asked for 16 TiB; found by fuzz_shard, regress/shard/huge-entry-count.lmdb) */
    if (count > (uint64_t)1 << 40 || count > sh->file_size / 11)
        return stk__err(ds->err, STK_E_FORMAT, "%s: %llu records is not plausible for a file of %llu bytes",
                        path, (unsigned long long)count, (unsigned long long)sh->file_size);
    if (!recs->v || recs->cap < recs->n + count) { /* never NULL: .out below adds to it */
        stk__rec *nv = realloc(recs->v, (recs->n + count + 1) * sizeof *nv);
        if (!nv)
            return stk__err(ds->err, STK_E_NOMEM, "out of memory for %llu records", (unsigned long long)count);
        recs->v = nv;
        recs->cap = recs->n + count + 1;
    }
    sh->count = count;
    walk_job base_job = {.sh = sh, .txn = sh->txn, .dbi = sh->dbi, .stoker = stoker, .a = 0, .b = count,
                         .psize = psize, .no = no, .out = recs->v + recs->n};
    if ((rc = walk_find_base(&base_job)) != STK_OK)
        return stk__err(ds->err, rc, "%s", base_job.err);
    /* Cold, the walk is one page fault per leaf page, one at a time: split the key range over
     * threads (each with its own read transaction on the same snapshot) so that many faults are
     * in flight. Keys of stoker shards are 0..count-1, so the split needs no extra I/O. */
    int nthreads = 1;
    if (stoker && count >= 65536)
        nthreads = (int)STK__MIN((uint64_t)16, count / 32768);
    walk_job jobs[16];
    pthread_t tids[16];
    int started[16] = {0};
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = base_job;
        jobs[t].a = count * (uint64_t)t / (uint64_t)nthreads;
        jobs[t].b = count * (uint64_t)(t + 1) / (uint64_t)nthreads;
        if (t == 0)
            continue;
        /* the workers' transactions are set up here, one after the other; the database handle
         * is environment-wide already (see above), mdb_dbi_open only looks it up */
        MDB_txn *wt;
        MDB_dbi wd;
        if (mdb_txn_begin(sh->env, NULL, MDB_RDONLY, &wt) != 0)
            continue; /* e.g. no reader slot left: this range is walked below, serially */
        if (mdb_txn_id(wt) != mdb_txn_id(sh->txn)) {
            mdb_txn_abort(wt);
            for (int u = 1; u < t; u++)
                if (jobs[u].own_txn)
                    mdb_txn_abort(jobs[u].txn);
            return stk__err(ds->err, STK_E_CHANGED, "%s: shard changed while its offset table was built", path);
        }
        if (mdb_dbi_open(wt, stoker ? STK__DB_RECORDS : NULL, 0, &wd) != 0) {
            mdb_txn_abort(wt);
            continue;
        }
        jobs[t].txn = wt;
        jobs[t].dbi = wd;
        jobs[t].own_txn = 1;
    }
    for (int t = 1; t < nthreads; t++)
        started[t] = jobs[t].own_txn && pthread_create(&tids[t], NULL, walk_thread, &jobs[t]) == 0;
    walk_run(&jobs[0]);
    for (int t = 1; t < nthreads; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        if (!started[t]) { /* no thread or no reader slot: walk it here */
            if (jobs[t].own_txn)
                mdb_txn_abort(jobs[t].txn);
            jobs[t].txn = sh->txn;
            jobs[t].dbi = sh->dbi;
            jobs[t].own_txn = 0;
            walk_run(&jobs[t]);
        }
    }
    uint64_t walked = 0;
    for (int t = 0; t < nthreads; t++) {
        if (jobs[t].rc)
            return stk__err(ds->err, jobs[t].rc, "%s", jobs[t].err);
        walked += jobs[t].n;
        ds->payload_bytes += jobs[t].payload;
        if (jobs[t].maxlen > ds->max_len)
            ds->max_len = jobs[t].maxlen;
    }
    if (walked != count)
        return stk__err(ds->err, STK_E_FORMAT, "%s: meta count %llu but %llu records", path,
                        (unsigned long long)count, (unsigned long long)walked);
    recs->n += count;
    sh->count = count;
    ds->file_bytes += sh->file_size;
    ds->format_version = stoker ? 1 : 0;
    return STK_OK;
}

static int alloc_shards(stk_dataset *ds, size_t n)
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

static int open_shard_dir(stk_dataset *ds, const char *dir, const unsigned *nos, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (nos[i] != i) {
            char want[32];
            snprintf(want, sizeof want, STK__SHARD_FMT, (unsigned)i);
            return stk__err(ds->err, STK_E_FORMAT, "%s: shard %s is missing (shards must be numbered "
                            "from 00000 without gaps)", dir, want);
        }
    }
    int rc = alloc_shards(ds, n);
    if (rc)
        return rc;
    recvec recs = {0};
    for (size_t i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/" STK__SHARD_FMT, dir, nos[i]);
        if ((rc = open_shard(ds, &ds->shards[i], (uint32_t)i, path, 0, 1, 1, &recs)) != STK_OK) {
            free(recs.v);
            return rc;
        }
    }
    ds->recs = recs.v;
    ds->count = recs.n;
    ds->layout = STK_LAYOUT_SHARDS;
    return STK_OK;
}

static int open_single(stk_dataset *ds, const char *path, int env_dir, int want_layout)
{
    int rc = alloc_shards(ds, 1);
    if (rc)
        return rc;
    recvec recs = {0};
    rc = open_shard(ds, &ds->shards[0], 0, path, env_dir, want_layout == STK_LAYOUT_SHARDS, 0, &recs);
    if (rc) {
        free(recs.v);
        return rc;
    }
    if (want_layout == STK_LAYOUT_LMDB && !ds->shards[0].foreign) {
        /* a stoker shard read as a foreign LMDB would give header+payload as the image */
        free(recs.v);
        return stk__err(ds->err, STK_E_INVALID, "%s: a stoker shard, not a foreign LMDB (use "
                        "STK_LAYOUT_SHARDS or AUTO)", path);
    }
    ds->recs = recs.v;
    ds->count = recs.n;
    ds->layout = ds->shards[0].foreign ? STK_LAYOUT_LMDB : STK_LAYOUT_SHARDS;
    return STK_OK;
}

static int open_files(stk_dataset *ds, const char *path, int is_dir)
{
    int rc;
    if (is_dir) {
        rc = stk__folder_scan(path, &ds->files, ds->err);
    } else {
        size_t len;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return stk__err(ds->err, -errno, "%s: cannot open", path);
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_size > (1ll << 32)) {
            close(fd);
            return stk__err(ds->err, STK_E_INVALID, "%s: not a usable list file", path);
        }
        len = (size_t)st.st_size;
        char *text = malloc(len + 1);
        if (!text) {
            close(fd);
            return stk__err(ds->err, STK_E_NOMEM, "out of memory");
        }
        ssize_t got = 0;
        while ((size_t)got < len) {
            ssize_t r = read(fd, text + got, len - (size_t)got);
            if (r <= 0)
                break;
            got += r;
        }
        close(fd);
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", path);
        char *sl = strrchr(dir, '/');
        if (sl)
            *sl = 0;
        else
            snprintf(dir, sizeof dir, ".");
        char lerr[STK__ERRLEN];
        rc = stk__list_parse(text, (size_t)got, dir, &ds->files, lerr);
        free(text);
        if (rc)
            return stk__err(ds->err, rc, "%s: %s", path, lerr);
    }
    if (rc)
        return rc;
    if ((rc = alloc_shards(ds, 0 + 1)) != STK_OK)
        return rc;
    ds->nshards = 0; /* files: no shard files; shards[0] keeps the root path for shard_path() */
    ds->shards[0].path = stk__strdup(path);
    ds->recs = calloc(ds->files.n ? ds->files.n : 1, sizeof *ds->recs);
    if (!ds->recs || !ds->shards[0].path)
        return stk__err(ds->err, STK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < ds->files.n; i++) {
        struct stat st;
        uint64_t sz = 0;
        if (stat(ds->files.paths[i], &st) == 0 && S_ISREG(st.st_mode))
            sz = (uint64_t)st.st_size;
        ds->recs[i] = (stk__rec){0, (uint32_t)STK__MIN(sz, (uint64_t)UINT32_MAX), 0};
        ds->payload_bytes += sz;
        ds->file_bytes += sz;
        if (sz > ds->max_len)
            ds->max_len = (uint32_t)STK__MIN(sz, (uint64_t)UINT32_MAX);
    }
    ds->count = ds->files.n;
    ds->classes = ds->files.classes;
    ds->nclasses = (uint32_t)ds->files.nclasses;
    ds->layout = STK_LAYOUT_FILES;
    return STK_OK;
}

static void close_all(stk_dataset *ds)
{
    uint32_t n = ds->shards ? STK__MAX(ds->nshards, 1) : 0;
    for (uint32_t i = 0; i < n; i++) {
        stk__shard *sh = &ds->shards[i];
        if (sh->txn)
            mdb_txn_abort(sh->txn);
        if (sh->senv)
            env_release(sh->senv);
        if (sh->fd >= 0)
            close(sh->fd);
        if (sh->fd_direct >= 0)
            close(sh->fd_direct);
        free(sh->path);
    }
    free(ds->shards);
    ds->shards = NULL;
    ds->nshards = 0;
    free(ds->recs);
    ds->recs = NULL;
    if (ds->classes && ds->classes != ds->files.classes) {
        for (uint32_t i = 0; i < ds->nclasses; i++)
            free(ds->classes[i]);
        free(ds->classes);
    }
    ds->classes = NULL;
    ds->nclasses = 0;
    stk__filelist_free(&ds->files);
    ds->count = 0;
    ds->payload_bytes = ds->file_bytes = 0;
    ds->max_len = 0;
}

int stk_dataset_open(stk_dataset *ds, const char *path)
{
    if (!ds || !path || !*path)
        return STK_E_INVALID;
    if (ds->opened)
        return stk__err(ds->err, STK_E_STATE, "dataset already open");
    ds->err[0] = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return stk__err(ds->err, -errno, "%s", path);
    int rc;
    int want = ds->layout;
    if (S_ISDIR(st.st_mode)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", path, STK__INCOMPLETE_MARK);
        if (access(p, F_OK) == 0 && !ds->allow_incomplete && want != STK_LAYOUT_FILES)
            return stk__err(ds->err, STK_E_INCOMPLETE,
                            "%s: interrupted pack (%s present): re-run stoker pack to finish it", path,
                            STK__INCOMPLETE_MARK);
        unsigned *nos;
        size_t n;
        if ((rc = list_shards(ds, path, &nos, &n)) != STK_OK)
            return rc;
        snprintf(p, sizeof p, "%s/data.mdb", path);
        int has_env = access(p, F_OK) == 0;
        if (want == STK_LAYOUT_SHARDS || (want == STK_LAYOUT_AUTO && n > 0)) {
            if (n == 0)
                rc = stk__err(ds->err, STK_E_FORMAT, "%s: no shard files (shard-00000.lmdb ...)", path);
            else
                rc = open_shard_dir(ds, path, nos, n);
        } else if (want == STK_LAYOUT_LMDB || (want == STK_LAYOUT_AUTO && has_env)) {
            rc = has_env ? open_single(ds, path, 1, want)
                         : stk__err(ds->err, STK_E_FORMAT, "%s: no data.mdb (not an LMDB environment)", path);
        } else {
            rc = open_files(ds, path, 1);
        }
        free(nos);
    } else if (S_ISREG(st.st_mode)) {
        if (want == STK_LAYOUT_FILES)
            rc = open_files(ds, path, 0);
        else
            rc = open_single(ds, path, 0, want);
    } else {
        rc = stk__err(ds->err, STK_E_INVALID, "%s: not a directory or a regular file", path);
    }
    if (rc) {
        close_all(ds);
        ds->layout = want;
        return rc;
    }
    free(ds->path);
    ds->path = stk__strdup(path);
    ds->opened = 1;
    return STK_OK;
}

void stk_dataset_destroy(stk_dataset *ds)
{
    if (!ds)
        return;
    close_all(ds);
    free(ds->path);
    free(ds);
}

const char *stk_dataset_last_error(const stk_dataset *ds)
{
    return ds ? ds->err : "";
}

int stk_dataset_info_get(const stk_dataset *ds, stk_dataset_info *info)
{
    if (!ds || !info)
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    memset(info, 0, sizeof *info);
    info->layout = ds->layout;
    info->format_version = ds->format_version;
    info->shards = ds->nshards;
    info->classes = ds->nclasses;
    info->records = ds->count;
    info->payload_bytes = ds->payload_bytes;
    info->file_bytes = ds->file_bytes;
    info->max_record_bytes = ds->max_len;
    return STK_OK;
}

uint64_t stk_dataset_count(const stk_dataset *ds)
{
    return ds && ds->opened ? ds->count : 0;
}

const char *stk_dataset_class_name(const stk_dataset *ds, uint32_t label)
{
    if (!ds || !ds->opened || label >= ds->nclasses)
        return NULL;
    return ds->classes[label];
}

const char *stk_dataset_shard_path(const stk_dataset *ds, uint32_t shard)
{
    if (!ds || !ds->opened || !ds->shards)
        return NULL;
    if (ds->layout == STK_LAYOUT_FILES)
        return shard == 0 ? ds->shards[0].path : NULL;
    return shard < ds->nshards ? ds->shards[shard].path : NULL;
}

int32_t stk__dataset_static_label(const stk_dataset *ds, uint64_t index)
{
    if (!ds || index >= ds->count)
        return -1;
    if (ds->layout == STK_LAYOUT_FILES)
        return ds->files.labels[index];
    if (ds->layout == STK_LAYOUT_LMDB || ds->shards[ds->recs[index].shard].foreign)
        return (int32_t)ds->foreign_label;
    return -1;
}

static void rec_where(const stk_dataset *ds, uint64_t index, char *buf, size_t cap)
{
    if (ds->layout == STK_LAYOUT_FILES) {
        snprintf(buf, cap, "%s", ds->files.paths[index]);
        return;
    }
    const stk__rec *r = &ds->recs[index];
    const stk__shard *sh = &ds->shards[r->shard];
    snprintf(buf, cap, "%s key %llu", sh->name, (unsigned long long)(index - sh->first));
}

int stk_dataset_record(stk_dataset *ds, uint64_t index, stk_record_info *info)
{
    if (!ds || !info)
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    if (index >= ds->count)
        return STK_E_RANGE;
    memset(info, 0, sizeof *info);
    const stk__rec *r = &ds->recs[index];
    info->index = index;
    info->shard = r->shard;
    info->label = stk__dataset_static_label(ds, index);
    if (ds->layout == STK_LAYOUT_FILES) {
        info->length = r->len;
        info->key = index;
        return STK_OK;
    }
    const stk__shard *sh = &ds->shards[r->shard];
    info->key = index - sh->first;
    if (sh->foreign) {
        info->length = r->len;
        info->offset = r->off;
        return STK_OK;
    }
    uint8_t h[STK__REC_HDR];
    char where[300];
    int rc = stk__pread_full(sh->fd, h, sizeof h, r->off);
    if (rc) {
        rec_where(ds, index, where, sizeof where);
        return stk__err(ds->err, rc, "%s: cannot read the record header", where);
    }
    int32_t label;
    uint32_t crc, len;
    rc = stk__rec_header_decode(h, r->len, &label, &crc, &len);
    if (rc == STK_OK && len != r->len - STK__REC_HDR)
        rc = STK_E_TRUNCATED;
    if (rc) {
        rec_where(ds, index, where, sizeof where);
        return stk__err(ds->err, STK_E_CORRUPT, "%s: bad record header (%s)", where,
                        rc == STK_E_FORMAT ? "no STK1 magic" : "length does not match the LMDB value");
    }
    info->label = label;
    info->crc32c = crc;
    info->has_crc = 1;
    info->length = len;
    info->offset = r->off + STK__REC_HDR;
    return STK_OK;
}

int stk_dataset_read(stk_dataset *ds, uint64_t index, void *buf, size_t cap, size_t *len,
                     stk_record_info *info)
{
    if (!ds || !len || (cap && !buf))
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    if (index >= ds->count)
        return STK_E_RANGE;
    stk_record_info tmp;
    if (!info)
        info = &tmp;
    char where[4200];
    int rc;
    const stk__rec *r = &ds->recs[index];
    if (ds->layout == STK_LAYOUT_FILES) {
        memset(info, 0, sizeof *info);
        info->index = index;
        info->key = index;
        info->label = ds->files.labels[index];
        const char *p = ds->files.paths[index];
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return stk__err(ds->err, -errno, "%s: cannot open", p);
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return stk__err(ds->err, STK_E_IO, "%s: not a regular file", p);
        }
        if ((uint64_t)st.st_size > UINT32_MAX) {
            close(fd);
            return stk__err(ds->err, STK_E_TOO_LARGE, "%s: file over 4 GiB", p);
        }
        size_t sz = (size_t)st.st_size;
        info->length = (uint32_t)sz;
        *len = sz;
        if (sz > cap) {
            close(fd);
            return STK_E_RANGE;
        }
        rc = stk__pread_full(fd, buf, sz, 0);
        close(fd);
        if (rc)
            return stk__err(ds->err, rc, "%s: read failed", p);
        info->crc32c = stk__crc32c(0, buf, sz);
        return STK_OK;
    }
    rc = stk_dataset_record(ds, index, info);
    if (rc)
        return rc;
    const stk__shard *sh = &ds->shards[r->shard];
    *len = info->length;
    if (info->length > cap)
        return STK_E_RANGE;
    rc = stk__pread_full(sh->fd, buf, info->length, info->offset);
    if (rc) {
        rec_where(ds, index, where, sizeof where);
        return stk__err(ds->err, rc, "%s: payload read failed", where);
    }
    uint32_t crc = stk__crc32c(0, buf, info->length);
    if (info->has_crc && crc != info->crc32c) {
        rec_where(ds, index, where, sizeof where);
        return stk__err(ds->err, STK_E_CRC, "%s: CRC32C mismatch (stored %08x, computed %08x)", where,
                        info->crc32c, crc);
    }
    info->crc32c = crc;
    return STK_OK;
}

int stk_dataset_record_name(const stk_dataset *ds, uint64_t index, char *buf, size_t cap)
{
    if (!ds || (!buf && cap))
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    if (index >= ds->count)
        return STK_E_RANGE;
    if (!cap)
        return STK_OK;
    char where[4200];
    rec_where(ds, index, where, sizeof where);
    if (ds->layout == STK_LAYOUT_FILES) {
        snprintf(buf, cap, "%s", where);
        return STK_OK;
    }
    const stk__shard *sh = &ds->shards[ds->recs[index].shard];
    if (sh->foreign) {
        snprintf(buf, cap, "%s", where);
        return STK_OK;
    }
    /* the lookup reads the `sources` tree with pread only (lmdb_check.h: every page checked,
     * 32 levels at most), never LMDB's map: a page gone since open is a short read, not SIGBUS
     * (found by tests/test_fault.c, shard cut to 8 KiB mid-epoch). The source name is then left
     * out; so it is, for a consistent answer, whenever the file is shorter than at open. */
    struct stat st;
    char name[1024];
    size_t nlen = 0;
    uint8_t kb[8];
    stk__rec_key(kb, index - sh->first);
    if (sh->have_sources && fstat(sh->fd, &st) == 0 && (uint64_t)st.st_size >= sh->file_size &&
        stk__lmdb_tree_get(&sh->sources, kb, sizeof kb, name, sizeof name - 1, &nlen) == 1) {
        name[STK__MIN(nlen, sizeof name - 1)] = 0;
        snprintf(buf, cap, "%s (%s)", where, name);
    } else {
        snprintf(buf, cap, "%s", where);
    }
    return STK_OK;
}

int stk__dataset_check(stk_dataset *ds, char *err)
{
    if (!ds || !ds->opened)
        return STK_E_STATE;
    for (uint32_t i = 0; i < ds->nshards; i++) {
        stk__shard *sh = &ds->shards[i];
        struct stat st;
        if (fstat(sh->fd, &st) != 0)
            return stk__err(err, -errno, "%s: fstat", sh->path);
        if ((uint64_t)st.st_size < sh->file_size)
            return stk__err(err, STK_E_TRUNCATED, "%s: shrank from %llu to %llu bytes while open", sh->path,
                            (unsigned long long)sh->file_size, (unsigned long long)st.st_size);
        if (!sh->nolock)
            continue;
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
    }
    return STK_OK;
}
