/* SPDX-License-Identifier: MIT */
/*
 * writer.c — the shard writer (stk_writer_*): records appended in order into LMDB shards of
 * format 2 (docs/FORMAT.md: the checksum covers payload, label and target).
 *
 * Why it is fast: one writer, keys that only grow (8-byte big-endian record numbers), so every
 * put is MDB_APPEND (no search, leaf pages filled completely) with MDB_RESERVE (the 16-byte
 * header and the payload are written straight into the map: MDB_WRITEMAP, no copy into a dirty
 * page list). No fsync per transaction (MDB_NOSYNC | MDB_NOMETASYNC); transactions are committed
 * every few thousand records or tens of MB so that the dirty set stays bounded; the shard is
 * made durable once, when it is complete: mdb_env_sync, close, truncate to the pages in use
 * (MDB_WRITEMAP grows the file to the map size), fsync, rename from `shard-NNNNN.lmdb.tmp` to its
 * final name, fsync of the directory. A shard with its final name is therefore always whole.
 *
 * No lock file: the temp file is private to this writer (MDB_NOLOCK), so nothing is left beside
 * the shards. The map grows when the next record might not fit (the estimate is conservative:
 * it counts every value rounded up to pages plus the leaf/branch copies of the transaction).
 *
 * A full disk is an error, not a crash. LMDB makes the file as large as the map, sparse; a store
 * through the map into a page the filesystem cannot back raises SIGBUS. So the same conservative
 * estimate of the highest byte the next record can touch is reserved first (posix_fallocate, in
 * steps of RESERVE_STEP; glibc emulates it where the filesystem lacks fallocate), and ENOSPC
 * there fails the add naming the shard and the bytes it needs. The reserved tail is cut off when
 * the shard is closed (the truncate to the pages in use).
 *
 * A failed writer keeps no temp file: the open shard's `.tmp` is removed the moment anything
 * fails (a full disk included), as the writer then only accepts destroy.
 *
 * While a dataset is being written, DST holds the marker `.stoker-pack-incomplete`; it goes last,
 * after every shard (and the pack report) is durable. stk_dataset_open refuses a directory with
 * the marker unless asked to open an incomplete dataset.
 *
 * One writer per DST: two packs into one directory would delete each other's temp shards and
 * both report what the other overwrote. A writer holds an flock on DST/.stoker-pack.lock from
 * open (or stk__writer_lock, before a pack reads DST to resume) until finish or destroy. DST is
 * created first (mkdir is atomic, so two packs racing to create it meet at the same lock file).
 * The file holds the holder's pid for the refusal's message. The lock is the kernel's: it goes
 * with the process, so a killed pack leaves only a file that the next one locks again. The
 * holder unlinks the file before it lets go; a writer that opened the old file before that
 * then finds the path naming another inode (or none) once it has the lock, and starts over.
 */
#include "writer.h"

#include "common.h"
#include "format.h"
#include "params.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define TXN_RECORDS 4096
#define TXN_BYTES (64u << 20)
#define RESERVE_STEP (32u << 20)

struct stk_writer {
    uint64_t shard_bytes;
    int force;
    char **classes;
    size_t nclasses;
    stk_target_info tinfo; /* dtype STK_TDT_NONE: records without targets */
    size_t trow;           /* bytes of one record's target */
    char *dst;
    int opened, finished, failed;
    int lock_fd;       /* DST/.stoker-pack.lock, flock held; -1: none */
    char lock_path[4200];

    /* current shard */
    int shard_open;
    uint32_t shard_no; /* open shard, or the next one */
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi_rec, dbi_src, dbi_tgt;
    int have_src_dbi, have_tgt_dbi;
    char tmp_path[4096];
    int tmp_live;      /* tmp_path exists and is this writer's */
    uint64_t shard_count, shard_payload, shard_first;
    size_t mapsize, psize;
    int fd;            /* the temp file (LMDB's descriptor) */
    uint64_t reserved; /* bytes of it backed by the filesystem (posix_fallocate) */
    uint64_t committed_pages;
    uint64_t txn_records, txn_bytes;

    /* dataset */
    uint64_t total, payload_total, shards_done;
    int last_written; /* the newest closed shard is marked last_shard=1 */

    /* pack extensions */
    char *digest;
    uint64_t src_begin; /* source range start of the open / next shard */
    char *skips;
    size_t skips_len, skips_cap;
    stk__writer_hooks hooks;

    char err[STK__ERRLEN];
};

/* The open shard is dropped: its transaction, environment and temp file. */
static void shard_discard(stk_writer *w)
{
    if (w->txn)
        mdb_txn_abort(w->txn);
    w->txn = NULL;
    if (w->env)
        mdb_env_close(w->env);
    w->env = NULL;
    if (w->tmp_live)
        unlink(w->tmp_path);
    w->tmp_live = 0;
    w->shard_open = 0;
}

static int fail(stk_writer *w, int rc)
{
    w->failed = 1;
    shard_discard(w);
    return rc;
}

static int lmdb_err(stk_writer *w, int rc, const char *what)
{
    return fail(w, stk__err(w->err, STK_E_LMDB, "%s: %s: %s", w->tmp_path, what, mdb_strerror(rc)));
}

int stk_writer_create(stk_writer **out)
{
    if (!out)
        return STK_E_INVALID;
    stk_writer *w = calloc(1, sizeof *w);
    if (!w)
        return STK_E_NOMEM;
    w->shard_bytes = (uint64_t)stk__param_idef(STK_W_SHARD_BYTES);
    w->force = (int)stk__param_idef(STK_W_FORCE);
    w->lock_fd = -1;
    *out = w;
    return STK_OK;
}

int stk_writer_set(stk_writer *w, int key, int64_t value)
{
    if (!w)
        return STK_E_INVALID;
    if (w->opened)
        return stk__err(w->err, STK_E_STATE, "stk_writer_set: only before stk_writer_open");
    const stk__param_def *p = stk__param_for(key, STK__PH_WRITER);
    if (!p)
        return stk__err(w->err, STK_E_BADPARAM, "unknown writer parameter %d", key);
    int rc = stk__param_check_int(p, value, w->err);
    if (rc != STK_OK)
        return rc;
    if (key == STK_W_SHARD_BYTES)
        w->shard_bytes = (uint64_t)value;
    else
        w->force = (int)value;
    return STK_OK;
}

static void free_classes(stk_writer *w)
{
    for (size_t i = 0; i < w->nclasses; i++)
        free(w->classes[i]);
    free(w->classes);
    w->classes = NULL;
    w->nclasses = 0;
}

int stk_writer_set_classes(stk_writer *w, const char *const *names, size_t n)
{
    if (!w || (n && !names))
        return STK_E_INVALID;
    if (w->finished)
        return stk__err(w->err, STK_E_STATE, "stk_writer_set_classes: writer already finished");
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || strchr(names[i], '\n'))
            return stk__err(w->err, STK_E_INVALID, "class %zu: name is NULL or holds a newline", i);
    }
    char **c = calloc(n ? n : 1, sizeof *c);
    if (!c)
        return stk__err(w->err, STK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!(c[i] = stk__strdup(names[i]))) {
            for (size_t j = 0; j < i; j++)
                free(c[j]);
            free(c);
            return stk__err(w->err, STK_E_NOMEM, "out of memory");
        }
    }
    free_classes(w);
    w->classes = c;
    w->nclasses = n;
    return STK_OK;
}

int stk_writer_set_targets(stk_writer *w, const stk_target_info *info)
{
    char why[64];
    if (!w || !info)
        return STK_E_INVALID;
    if (w->total || w->shard_open || w->finished)
        return stk__err(w->err, STK_E_STATE, "stk_writer_set_targets: only before the first record");
    if (stk__target_check(info, why) != STK_OK)
        return stk__err(w->err, STK_E_INVALID, "stk_writer_set_targets: %s", why);
    w->tinfo = *info;
    w->trow = stk_target_dtype_size(info->dtype) * info->size;
    return STK_OK;
}

/* ---- DST handling --------------------------------------------------------------------------- */

static int is_own_file(const char *n)
{
    return !strncmp(n, STK__SHARD_PREFIX, strlen(STK__SHARD_PREFIX)) || !strcmp(n, STK__PACK_REPORT) || !strcmp(n, STK__INCOMPLETE_MARK) ||
           !strcmp(n, STK__PACK_REPORT ".tmp");
}

int64_t stk__dst_count_shards(const char *dst)
{
    DIR *d = opendir(dst);
    if (!d)
        return -errno;
    int64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += stk__shard_name_parse(e->d_name, NULL);
    closedir(d);
    return n;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

int stk__dst_clean(const char *dst, char *err)
{
    DIR *d = opendir(dst);
    if (!d)
        return stk__err(err, -errno, "%s", dst);
    struct dirent *e;
    int rc = STK_OK;
    while ((e = readdir(d)) != NULL) {
        if (!is_own_file(e->d_name) || !strcmp(e->d_name, STK__INCOMPLETE_MARK))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
            rc = stk__err(err, -errno, "%s/%s: cannot remove", dst, e->d_name);
            break;
        }
    }
    /* the marker last: until the shards are gone the directory must still read as unfinished */
    if (rc == STK_OK && unlinkat(dirfd(d), STK__INCOMPLETE_MARK, 0) != 0 && errno != ENOENT)
        rc = stk__err(err, -errno, "%s/%s: cannot remove", dst, STK__INCOMPLETE_MARK);
    closedir(d);
    return rc;
}

int stk__write_file_durable(const char *path, const void *data, size_t len, char *err)
{
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return stk__err(err, STK_E_INVALID, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return stk__err(err, -errno, "%s: cannot create", tmp);
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return stk__err(err, -e, "%s: write failed", tmp);
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return stk__err(err, -e, "%s: fsync failed", tmp);
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return stk__err(err, -e, "%s: cannot rename to %s", tmp, path);
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    fsync_dir(slash && dir[0] == 0 ? "/" : dir);
    return STK_OK;
}

static int mkdirs(const char *path, char *err)
{
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return stk__err(err, STK_E_INVALID, "%s: path too long", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return stk__err(err, -errno, "%s: cannot create directory", buf);
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return stk__err(err, -errno, "%s: cannot create directory", buf);
    struct stat st;
    if (stat(buf, &st) != 0)
        return stk__err(err, -errno, "%s", buf);
    if (!S_ISDIR(st.st_mode))
        return stk__err(err, STK_E_INVALID, "%s: exists and is not a directory", buf);
    return STK_OK;
}

/* ---- the DST lock (see the top of the file) ---------------------------------------------------- */

/* The pid written in the lock file FD; 0 if none. A holder that has just taken the lock may not
 * have written its pid yet (the file may still hold a dead one's): a pid that is not alive is
 * read again for up to half a second. */
static long lock_holder(int fd)
{
    long pid = 0;
    for (int tries = 0; tries < 50; tries++) {
        char b[32] = "";
        ssize_t n = pread(fd, b, sizeof b - 1, 0);
        pid = n > 0 ? strtol(b, NULL, 10) : 0;
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            return pid;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return pid > 0 ? pid : 0;
}

/* Lock PATH (open, created if need be) for this writer; -EBUSY naming the holder. 1: the file
 * was replaced meanwhile (try again). */
static int lock_try(stk_writer *w, const char *dst, const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
    if (fd < 0)
        return stk__err(w->err, -errno, "%s: cannot create the lock file", path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        long pid = e == EWOULDBLOCK ? lock_holder(fd) : 0;
        close(fd);
        if (e != EWOULDBLOCK)
            return stk__err(w->err, -e, "%s: cannot lock", path);
        if (pid > 0)
            return stk__err(w->err, -EBUSY, "%s is being packed by pid %ld (it holds %s): one pack at a time "
                            "per DST; wait for it or stop it", dst, pid, path);
        return stk__err(w->err, -EBUSY, "%s is being packed by another process (it holds %s): one pack at a "
                        "time per DST", dst, path);
    }
    struct stat a, b;
    if (fstat(fd, &a) != 0 || stat(path, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(fd); /* its holder removed it as it finished */
        return 1;
    }
    char txt[32];
    int n = snprintf(txt, sizeof txt, "%ld\n", (long)getpid());
    ssize_t wrote = ftruncate(fd, 0) == 0 ? pwrite(fd, txt, (size_t)n, 0) : -1;
    STK__UNUSED(wrote); /* without the pid (a full disk) the lock holds all the same; others then
                           say "another process" */
    w->lock_fd = fd;
    return STK_OK;
}

int stk__writer_lock(stk_writer *w, const char *dst)
{
    if (!w || !dst || !*dst)
        return STK_E_INVALID;
    if (w->lock_fd >= 0)
        return STK_OK;
    int rc = mkdirs(dst, w->err);
    if (rc)
        return rc;
    if ((size_t)snprintf(w->lock_path, sizeof w->lock_path, "%s/%s", dst, STK__PACK_LOCK) >= sizeof w->lock_path)
        return stk__err(w->err, STK_E_INVALID, "%s: path too long", dst);
    for (int tries = 0; tries < 1000; tries++)
        if ((rc = lock_try(w, dst, w->lock_path)) <= 0)
            return rc;
    return stk__err(w->err, -EBUSY, "%s: the lock file keeps being replaced", w->lock_path);
}

/* Remove the lock file, then let go of the lock (see the top of the file). */
static void lock_release(stk_writer *w)
{
    if (w->lock_fd < 0)
        return;
    unlink(w->lock_path);
    close(w->lock_fd);
    w->lock_fd = -1;
}

static int open_common(stk_writer *w, const char *dst)
{
    if (!w || !dst || !*dst)
        return STK_E_INVALID;
    if (w->opened)
        return stk__err(w->err, STK_E_STATE, "writer already opened");
    int rc = stk__writer_lock(w, dst);
    if (rc)
        return rc;
    if (!(w->dst = stk__strdup(dst)))
        return stk__err(w->err, STK_E_NOMEM, "out of memory");
    return STK_OK;
}

int stk__writer_open_pack(stk_writer *w, const char *dst, const char *marker, const char *digest)
{
    int rc = open_common(w, dst);
    if (rc)
        return rc;
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/%s", dst, STK__INCOMPLETE_MARK);
    int has_marker = access(mpath, F_OK) == 0;
    int64_t nsh = stk__dst_count_shards(dst);
    if (nsh < 0)
        return fail(w, stk__err(w->err, (int)nsh, "%s: cannot list", dst));
    if (nsh > 0 && !has_marker && !w->force)
        return fail(w, stk__err(w->err, STK_E_EXISTS,
                                "%s: already holds a dataset (%lld shard%s); use --force "
                                "(STK_W_FORCE) to replace it",
                                dst, (long long)nsh, nsh == 1 ? "" : "s"));
    /* the marker first, then the old files go: an interruption in between leaves an
     * incomplete dataset, never one that looks whole */
    if ((rc = stk__write_file_durable(mpath, marker, strlen(marker), w->err)) != STK_OK)
        return fail(w, rc);
    DIR *d = opendir(dst);
    if (!d)
        return fail(w, stk__err(w->err, -errno, "%s", dst));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_own_file(e->d_name) || !strcmp(e->d_name, STK__INCOMPLETE_MARK))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
            rc = stk__err(w->err, -errno, "%s/%s: cannot remove", dst, e->d_name);
            closedir(d);
            return fail(w, rc);
        }
    }
    closedir(d);
    fsync_dir(dst);
    if (digest && !(w->digest = stk__strdup(digest)))
        return fail(w, stk__err(w->err, STK_E_NOMEM, "out of memory"));
    w->opened = 1;
    return STK_OK;
}

int stk_writer_open(stk_writer *w, const char *dst)
{
    return stk__writer_open_pack(w, dst, "stoker-writer 1\n", NULL);
}

int stk__writer_resume(stk_writer *w, const char *dst, const char *digest, uint32_t next_shard,
                       uint64_t first_index, uint64_t src_begin, int last_done)
{
    int rc = open_common(w, dst);
    if (rc)
        return rc;
    /* remove temp files and shards from NEXT_SHARD on (the caller found them unusable) */
    DIR *d = opendir(dst);
    if (!d)
        return fail(w, stk__err(w->err, -errno, "%s", dst));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned no;
        if (strncmp(e->d_name, STK__SHARD_PREFIX, strlen(STK__SHARD_PREFIX)) != 0)
            continue;
        int drop = strstr(e->d_name, ".tmp") != NULL || strstr(e->d_name, "-lock") != NULL;
        if (sscanf(e->d_name, STK__SHARD_PREFIX "%5u", &no) == 1 && no >= next_shard)
            drop = 1;
        if (drop && unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
            rc = stk__err(w->err, -errno, "%s/%s: cannot remove", dst, e->d_name);
            closedir(d);
            return fail(w, rc);
        }
    }
    closedir(d);
    if (digest && !(w->digest = stk__strdup(digest)))
        return fail(w, stk__err(w->err, STK_E_NOMEM, "out of memory"));
    w->shard_no = next_shard;
    w->shards_done = next_shard;
    w->total = first_index;
    w->src_begin = src_begin;
    w->last_written = last_done;
    w->opened = 1;
    return STK_OK;
}

static int reserve_space(stk_writer *w, uint64_t need);

/* ---- shards ----------------------------------------------------------------------------------- */

static int shard_start(stk_writer *w)
{
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s/" STK__SHARD_FMT ".tmp", w->dst, w->shard_no);
    unlink(w->tmp_path);
    int rc = mdb_env_create(&w->env);
    if (rc)
        return lmdb_err(w, rc, "mdb_env_create");
    w->tmp_live = 1; /* from here on a failure removes it (fail) */
    mdb_env_set_maxdbs(w->env, 4);
    w->psize = stk__page_size();
    uint64_t want = w->shard_bytes + w->shard_bytes / 4 + (64u << 20);
    w->mapsize = stk__round_up((size_t)want, w->psize);
    if ((rc = mdb_env_set_mapsize(w->env, w->mapsize)) != 0)
        return lmdb_err(w, rc, "mdb_env_set_mapsize");
    rc = mdb_env_open(w->env, w->tmp_path,
                      MDB_NOSUBDIR | MDB_WRITEMAP | MDB_NOSYNC | MDB_NOMETASYNC | MDB_NOLOCK, 0644);
    if (rc)
        return lmdb_err(w, rc, "cannot create shard");
    MDB_stat ms;
    if (mdb_env_stat(w->env, &ms) == 0)
        w->psize = ms.ms_psize;
    w->committed_pages = 2;
    if ((rc = mdb_env_get_fd(w->env, &w->fd)) != 0)
        return lmdb_err(w, rc, "mdb_env_get_fd");
    w->reserved = 0;
    /* the first transaction's pages (the `records` root) are stored through the map too */
    if ((rc = reserve_space(w, w->committed_pages * w->psize + (4u << 20))) != STK_OK)
        return rc;
    if ((rc = mdb_txn_begin(w->env, NULL, 0, &w->txn)) != 0)
        return lmdb_err(w, rc, "mdb_txn_begin");
    if ((rc = mdb_dbi_open(w->txn, STK__DB_RECORDS, MDB_CREATE, &w->dbi_rec)) != 0)
        return lmdb_err(w, rc, "cannot create the `records` database");
    w->have_src_dbi = 0;
    w->have_tgt_dbi = 0;
    w->shard_open = 1;
    w->shard_count = 0;
    w->shard_payload = 0;
    w->shard_first = w->total;
    w->txn_records = 0;
    w->txn_bytes = 0;
    return STK_OK;
}

static int txn_commit(stk_writer *w)
{
    int rc = mdb_txn_commit(w->txn);
    w->txn = NULL;
    if (rc)
        return lmdb_err(w, rc, "mdb_txn_commit");
    MDB_envinfo info;
    mdb_env_info(w->env, &info);
    w->committed_pages = info.me_last_pgno + 1;
    w->txn_records = 0;
    w->txn_bytes = 0;
    return STK_OK;
}

/* Back bytes [0, NEED) of the temp file with disk space before anything is stored there through
 * the map (see the top of the file). */
static int reserve_space(stk_writer *w, uint64_t need)
{
    if (need > w->mapsize)
        need = w->mapsize; /* LMDB never writes past the map (MDB_MAP_FULL instead) */
    if (need <= w->reserved)
        return STK_OK;
    uint64_t want = STK__MIN((uint64_t)stk__round_up((size_t)need + RESERVE_STEP, w->psize), (uint64_t)w->mapsize);
    int e = posix_fallocate(w->fd, (off_t)w->reserved, (off_t)(want - w->reserved));
    if (e == ENOSPC && want > need) { /* the step does not fit: perhaps what is needed now does */
        want = need;
        e = posix_fallocate(w->fd, (off_t)w->reserved, (off_t)(want - w->reserved));
    }
    if (e) {
        char fr[64] = "";
        struct statvfs vs;
        if (fstatvfs(w->fd, &vs) == 0)
            snprintf(fr, sizeof fr, ", %llu free there",
                     (unsigned long long)vs.f_bavail * (unsigned long long)vs.f_frsize);
        return fail(w, stk__err(w->err, -e,
                                "%s: cannot reserve disk space: the shard needs %llu bytes, %llu more than "
                                "reserved so far%s (%llu records are in finished shards; run the same pack "
                                "again with room to resume)",
                                w->tmp_path, (unsigned long long)need, (unsigned long long)(need - w->reserved),
                                fr, (unsigned long long)w->shard_first));
    }
    w->reserved = want;
    return STK_OK;
}

/* The highest byte of the file the next put of a VLEN-byte value can touch: the committed pages,
 * the transaction's pages so far with a quarter for leaf/branch copies, the value, slack. */
static uint64_t touch_bound(const stk_writer *w, size_t vlen)
{
    return w->committed_pages * w->psize + w->txn_bytes + w->txn_bytes / 4 + (uint64_t)vlen + (uint64_t)vlen / 8 +
           (4u << 20);
}

/* Make sure a value of VLEN bytes fits in the map and on disk; commit and grow the map if it
 * might not. */
static int ensure_room(stk_writer *w, size_t vlen)
{
    uint64_t need = touch_bound(w, vlen);
    int rc;
    if (need > w->mapsize || !w->txn) {
        if (w->txn && (rc = txn_commit(w)) != STK_OK)
            return rc;
        uint64_t map_need = w->committed_pages * w->psize + 2 * (uint64_t)vlen + (uint64_t)TXN_BYTES * 2 +
                            (16u << 20);
        if (map_need > w->mapsize) {
            size_t ns = w->mapsize * 2;
            if (ns < map_need)
                ns = (size_t)map_need;
            ns = stk__round_up(ns, w->psize);
            if ((rc = mdb_env_set_mapsize(w->env, ns)) != 0)
                return lmdb_err(w, rc, "cannot grow the map");
            w->mapsize = ns;
        }
        if ((rc = mdb_txn_begin(w->env, NULL, 0, &w->txn)) != 0)
            return lmdb_err(w, rc, "mdb_txn_begin");
        need = touch_bound(w, vlen);
    }
    return reserve_space(w, need);
}

static int put_meta(stk_writer *w, MDB_dbi dbi, const char *key, const char *val, size_t vlen)
{
    MDB_val k = {strlen(key), (void *)key}, v = {vlen, (void *)val};
    int rc = mdb_put(w->txn, dbi, &k, &v, 0);
    return rc ? lmdb_err(w, rc, "cannot write meta") : STK_OK;
}

static int put_meta_u64(stk_writer *w, MDB_dbi dbi, const char *key, uint64_t v)
{
    char b[32];
    int n = snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return put_meta(w, dbi, key, b, (size_t)n);
}

/* The target's shape and type (docs/FORMAT.md "Targets"), and its database even when the shard
 * holds no record. */
static int put_target_meta(stk_writer *w, MDB_dbi meta)
{
    const char *dt = stk__tdtype_name(w->tinfo.dtype);
    const char *kind = w->tinfo.kind == STK_TARGET_LABELS ? "labels" : "values";
    int rc = put_meta(w, meta, STK__META_TARGET_DTYPE, dt, strlen(dt));
    if (!rc)
        rc = put_meta_u64(w, meta, STK__META_TARGET_SIZE, w->tinfo.size);
    if (!rc)
        rc = put_meta(w, meta, STK__META_TARGET_KIND, kind, strlen(kind));
    if (!rc && w->tinfo.kind == STK_TARGET_LABELS)
        rc = put_meta_u64(w, meta, STK__META_TARGET_CLASSES, w->tinfo.classes);
    if (!rc && !w->have_tgt_dbi) {
        if ((rc = mdb_dbi_open(w->txn, STK__DB_TARGETS, MDB_CREATE, &w->dbi_tgt)) != 0)
            return lmdb_err(w, rc, "cannot create the `targets` database");
        w->have_tgt_dbi = 1;
    }
    return rc;
}

/* The class names as meta `classes` (one per line, no trailing newline: line i = class i). */
static int put_classes(stk_writer *w, MDB_dbi meta)
{
    size_t clen = 0, o = 0;
    for (size_t i = 0; i < w->nclasses; i++)
        clen += strlen(w->classes[i]) + 1;
    char *cls = malloc(clen + 1);
    if (!cls)
        return fail(w, stk__err(w->err, STK_E_NOMEM, "out of memory"));
    for (size_t i = 0; i < w->nclasses; i++) {
        size_t l = strlen(w->classes[i]);
        memcpy(cls + o, w->classes[i], l);
        o += l;
        cls[o++] = '\n';
    }
    int rc = put_meta(w, meta, STK__META_CLASSES, cls, o ? o - 1 : 0);
    free(cls);
    return rc;
}

/* The open shard's `meta` (docs/FORMAT.md): LAST marks the dataset's last shard, SRC_END ends the
 * source range of a pack's shard. */
static int put_shard_meta(stk_writer *w, uint64_t src_end, int last)
{
    MDB_dbi meta;
    int rc = ensure_room(w, 65536 + w->skips_len + w->nclasses * 256);
    if (rc)
        return rc;
    if ((rc = mdb_dbi_open(w->txn, STK__DB_META, MDB_CREATE, &meta)) != 0)
        return lmdb_err(w, rc, "cannot create the `meta` database");
    const char *by = "stoker " STK_VERSION_STRING;
    char fmt[32];
    int fl = snprintf(fmt, sizeof fmt, "%s%d", STK__FORMAT_NAME, STK__FORMAT_WRITTEN);
    rc = put_meta(w, meta, STK__META_FORMAT, fmt, (size_t)fl);
    if (!rc)
        rc = put_meta_u64(w, meta, STK__META_COUNT, w->shard_count);
    if (!rc)
        rc = put_classes(w, meta);
    if (!rc)
        rc = put_meta(w, meta, STK__META_CREATED_BY, by, strlen(by));
    if (!rc)
        rc = put_meta_u64(w, meta, STK__META_FIRST_INDEX, w->shard_first);
    if (!rc)
        rc = put_meta_u64(w, meta, STK__META_SHARD, w->shard_no);
    if (!rc)
        rc = put_meta(w, meta, STK__META_LAST, last ? "1" : "0", 1);
    if (!rc)
        rc = put_meta_u64(w, meta, STK__META_PAYLOAD, w->shard_payload);
    if (!rc && w->trow)
        rc = put_target_meta(w, meta);
    if (!rc && w->digest) {
        rc = put_meta(w, meta, STK__META_DIGEST, w->digest, strlen(w->digest));
        if (!rc)
            rc = put_meta_u64(w, meta, STK__META_SRC_BEGIN, w->src_begin);
        if (!rc)
            rc = put_meta_u64(w, meta, STK__META_SRC_END, src_end);
        if (!rc)
            rc = put_meta(w, meta, STK__META_SKIPPED, w->skips ? w->skips : "", w->skips_len);
    }
    return rc;
}

/* Make the shard durable under its final name: sync, close, cut the file to the pages in use
 * (and the reserved tail), fsync, rename from .tmp, fsync the directory. */
static int shard_publish(stk_writer *w)
{
    int rc = mdb_env_sync(w->env, 1);
    if (rc != 0)
        return lmdb_err(w, rc, "mdb_env_sync");
    uint64_t used = w->committed_pages * w->psize;
    mdb_env_close(w->env);
    w->env = NULL;
    int fd = open(w->tmp_path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return fail(w, stk__err(w->err, -errno, "%s: cannot reopen", w->tmp_path));
    if (ftruncate(fd, (off_t)used) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        return fail(w, stk__err(w->err, -e, "%s: cannot truncate/fsync", w->tmp_path));
    }
    close(fd);
    char final[4200];
    snprintf(final, sizeof final, "%s/" STK__SHARD_FMT, w->dst, w->shard_no);
    if (rename(w->tmp_path, final) != 0)
        return fail(w, stk__err(w->err, -errno, "%s: cannot rename to %s", w->tmp_path, final));
    w->tmp_live = 0;
    fsync_dir(w->dst);
    return STK_OK;
}

static int shard_close(stk_writer *w, uint64_t src_end, int last)
{
    int rc = put_shard_meta(w, src_end, last);
    if (rc == STK_OK)
        rc = txn_commit(w);
    if (rc == STK_OK)
        rc = shard_publish(w);
    if (rc != STK_OK)
        return rc;
    w->shard_open = 0;
    if (w->hooks.shard) {
        char final[4200];
        snprintf(final, sizeof final, "%s/" STK__SHARD_FMT, w->dst, w->shard_no);
        if ((rc = w->hooks.shard(w->hooks.user, w->shard_no, final, w->err)) != STK_OK)
            return fail(w, rc);
    }
    w->last_written = last;
    w->shard_no++;
    w->shards_done++;
    w->src_begin = src_end;
    w->skips_len = 0;
    if (w->skips)
        w->skips[0] = 0;
    return STK_OK;
}

/* The record's target into the `targets` database under key K. */
static int put_target(stk_writer *w, MDB_val *k, const void *target)
{
    int rc;
    if (!w->have_tgt_dbi) {
        if ((rc = mdb_dbi_open(w->txn, STK__DB_TARGETS, MDB_CREATE, &w->dbi_tgt)) != 0)
            return lmdb_err(w, rc, "cannot create the `targets` database");
        w->have_tgt_dbi = 1;
    }
    MDB_val tv = {w->trow, (void *)target};
    if ((rc = mdb_put(w->txn, w->dbi_tgt, k, &tv, MDB_APPEND)) != 0)
        return lmdb_err(w, rc, "cannot append a target");
    return STK_OK;
}

/* A TARGET that matches the writer's: given exactly when targets were set, a label list valid. */
static int check_target(stk_writer *w, const void *target, const char *source)
{
    if (!target != !w->trow)
        return stk__err(w->err, STK_E_STATE, "%s: this writer's records %s targets (stk_writer_%s)",
                        target ? "stk_writer_add_target" : "stk_writer_add", w->trow ? "have" : "have no",
                        w->trow ? "add_target" : "add");
    if (target && w->tinfo.kind == STK_TARGET_LABELS && !stk__target_labels_ok(&w->tinfo, target))
        return stk__err(w->err, STK_E_INVALID, "record %llu (%s): a label list holds indices 0..%u followed by "
                        "-1 padding", (unsigned long long)w->total, source ? source : "?", w->tinfo.classes - 1);
    return STK_OK;
}

int stk__writer_add_crc(stk_writer *w, const void *payload, size_t len, int32_t label,
                        const char *source, const void *target, uint32_t crc, uint64_t src_index)
{
    if (!w || (len && !payload))
        return STK_E_INVALID;
    if (!w->opened || w->finished)
        return stk__err(w->err, STK_E_STATE, "stk_writer_add: writer not open");
    if (w->failed)
        return stk__err(w->err, STK_E_STATE, "stk_writer_add: the writer failed earlier");
    int rc = check_target(w, target, source);
    if (rc)
        return rc;
    if (len > UINT32_MAX - STK__REC_HDR)
        return stk__err(w->err, STK_E_TOO_LARGE, "record %llu (%s): %zu bytes is over the 4 GiB limit",
                        (unsigned long long)w->total, source ? source : "?", len);
    if (w->shard_open && w->shard_payload >= w->shard_bytes && (rc = shard_close(w, src_index, 0)) != STK_OK)
        return rc;
    if (!w->shard_open && (rc = shard_start(w)) != STK_OK)
        return rc;
    if (w->txn_records >= TXN_RECORDS || w->txn_bytes >= TXN_BYTES) {
        if ((rc = txn_commit(w)) != STK_OK)
            return rc;
    }
    if ((rc = ensure_room(w, len + STK__REC_HDR + (source ? strlen(source) : 0) + w->trow)) != STK_OK)
        return rc;
    uint8_t kb[8];
    stk__rec_key(kb, w->shard_count);
    MDB_val k = {8, kb}, v = {len + STK__REC_HDR, NULL};
    rc = mdb_put(w->txn, w->dbi_rec, &k, &v, MDB_APPEND | MDB_RESERVE);
    if (rc)
        return lmdb_err(w, rc, "cannot append a record");
    stk__rec_header_encode(v.mv_data, STK__FORMAT_WRITTEN, label,
                           stk__rec_crc(STK__FORMAT_WRITTEN, crc, label, target, target ? w->trow : 0),
                           (uint32_t)len);
    if (len)
        memcpy((uint8_t *)v.mv_data + STK__REC_HDR, payload, len);
    if (source) {
        if (!w->have_src_dbi) {
            if ((rc = mdb_dbi_open(w->txn, STK__DB_SOURCES, MDB_CREATE, &w->dbi_src)) != 0)
                return lmdb_err(w, rc, "cannot create the `sources` database");
            w->have_src_dbi = 1;
        }
        MDB_val sv = {strlen(source), (void *)source};
        if ((rc = mdb_put(w->txn, w->dbi_src, &k, &sv, MDB_APPEND)) != 0)
            return lmdb_err(w, rc, "cannot append a source name");
    }
    if (target && (rc = put_target(w, &k, target)) != STK_OK)
        return rc;
    w->shard_count++;
    w->shard_payload += len;
    w->total++;
    w->payload_total += len;
    w->txn_records++;
    w->txn_bytes += stk__round_up(len + STK__REC_HDR + 64, w->psize) + (source ? strlen(source) + 64 : 0) +
                    (w->trow ? w->trow + 64 : 0);
    return STK_OK;
}

int stk_writer_add(stk_writer *w, const void *payload, size_t len, int32_t label, const char *source)
{
    if (!w || (len && !payload))
        return STK_E_INVALID;
    uint32_t crc = stk__crc32c(0, payload, len);
    return stk__writer_add_crc(w, payload, len, label, source, NULL, crc, w->total);
}

int stk_writer_add_target(stk_writer *w, const void *payload, size_t len, int32_t label, const char *source,
                          const void *target)
{
    if (!w || (len && !payload) || !target)
        return STK_E_INVALID;
    uint32_t crc = stk__crc32c(0, payload, len);
    return stk__writer_add_crc(w, payload, len, label, source, target, crc, w->total);
}

int stk__writer_note_skip(stk_writer *w, uint64_t src_index, const char *rel, const char *reason)
{
    STK__UNUSED(src_index);
    if (!w)
        return STK_E_INVALID;
    size_t need = w->skips_len + strlen(rel) + strlen(reason) + 3;
    if (need > w->skips_cap) {
        size_t nc = w->skips_cap ? w->skips_cap * 2 : 4096;
        while (nc < need)
            nc *= 2;
        char *ns = realloc(w->skips, nc);
        if (!ns)
            return stk__err(w->err, STK_E_NOMEM, "out of memory");
        w->skips = ns;
        w->skips_cap = nc;
    }
    w->skips_len += (size_t)snprintf(w->skips + w->skips_len, w->skips_cap - w->skips_len, "%s\t%s\n",
                                     rel, reason);
    return STK_OK;
}

int stk__writer_finish_pack(stk_writer *w, uint64_t src_end, const char *report, size_t len)
{
    if (!w)
        return STK_E_INVALID;
    if (!w->opened || w->finished)
        return stk__err(w->err, STK_E_STATE, "stk_writer_finish: writer not open");
    if (w->failed)
        return stk__err(w->err, STK_E_STATE, "stk_writer_finish: the writer failed earlier");
    int rc;
    /* a dataset always has at least one shard; trailing skipped files belong to the last one */
    if (!w->shard_open && (w->shards_done == 0 || w->skips_len > 0 || !w->last_written) &&
        (rc = shard_start(w)) != STK_OK)
        return rc;
    if (w->shard_open && (rc = shard_close(w, src_end, 1)) != STK_OK)
        return rc;
    char path[4200];
    if (report) {
        snprintf(path, sizeof path, "%s/%s", w->dst, STK__PACK_REPORT);
        if ((rc = stk__write_file_durable(path, report, len, w->err)) != STK_OK)
            return fail(w, rc);
    }
    if (w->hooks.unmark && (rc = w->hooks.unmark(w->hooks.user, w->err)) != STK_OK)
        return fail(w, rc);
    snprintf(path, sizeof path, "%s/%s", w->dst, STK__INCOMPLETE_MARK);
    if (unlink(path) != 0 && errno != ENOENT)
        return fail(w, stk__err(w->err, -errno, "%s: cannot remove", path));
    fsync_dir(w->dst);
    w->finished = 1;
    lock_release(w);
    return STK_OK;
}

int stk_writer_finish(stk_writer *w)
{
    return stk__writer_finish_pack(w, w ? w->total : 0, NULL, 0);
}

void stk__writer_totals(const stk_writer *w, uint64_t *records, uint64_t *shards, uint64_t *payload)
{
    if (records)
        *records = w->total;
    if (shards)
        *shards = w->shards_done;
    if (payload)
        *payload = w->payload_total;
}

void stk__writer_set_hooks(stk_writer *w, const stk__writer_hooks *h)
{
    if (w && h)
        w->hooks = *h;
}

void stk_writer_destroy(stk_writer *w)
{
    if (!w)
        return;
    shard_discard(w);
    lock_release(w);
    free_classes(w);
    free(w->dst);
    free(w->digest);
    free(w->skips);
    free(w);
}

const char *stk_writer_last_error(const stk_writer *w)
{
    return w ? w->err : "";
}
