/* SPDX-License-Identifier: MIT */
/*
 * envreg.c — one MDB_env per shard file per process.
 *
 * LMDB: "do not have open an LMDB database twice in the same process at the same time". Its lock
 * file is guarded by an fcntl lock, and fcntl locks never conflict within one process: a second
 * mdb_env_open of a shard already open in the process takes the "exclusive" lock, believes it is
 * the only user and re-initialises the lock file's reader table under the first environment
 * (reader mutex, reader count and txnid reset), and closing either environment drops the other's
 * locks. Threads opening datasets on the same shards then crash in mdb_txn_begin or read an old
 * meta page. So a registry keyed by (pid, device, inode of the data file, directory or single-file
 * environment) holds each MDB_env with a count of its users, under one mutex that is also held
 * while a new environment is opened and set up and while the last user closes it (an open and a
 * close of one file never overlap). Each dataset still opens its own descriptors and keeps its
 * own read transaction (MDB_NOTLS). The first opener decides between a lock file and MDB_NOLOCK;
 * later users inherit it. A child after fork() never matches its parent's entries (the pid), and
 * the mutex is held across fork() (pthread_atfork) so the child's copy is usable. A shard that
 * a writer grew past the shared map since its environment was opened is refused
 * (MDB_MAP_RESIZED, in shard.c) until the other datasets on it close.
 */
#include "envreg.h"

#include "common.h"
#include "format.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

/* mdb_env_open of PATH read-only, without a lock file where it cannot be created (read-only
 * media); *nolock says which. Returns STK_OK with *out, or an error with nothing left open. */
static int env_open_lmdb(char *err, const char *path, int env_dir, MDB_env **out, int *nolock)
{
    MDB_env *env;
    int rc;
    *nolock = 0;
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
        *nolock = 1;
    }
    if (rc) {
        mdb_env_close(env);
        return stk__err(err, STK_E_LMDB, "%s: cannot open as LMDB: %s", path, mdb_strerror(rc));
    }
    *out = env;
    return STK_OK;
}

/* LMDB opened the path again: it must be the file checked (and keyed) by the caller. With a lock
 * file asked for, one that is absent means LMDB went on without (EROFS): then no lock protects
 * the table either, and the identity checks apply (*nolock set). */
static int env_check_opened(char *err, MDB_env *env, const char *path, const char *datafile, int env_dir,
                            const struct stat *st, int *nolock)
{
    int efd;
    struct stat est;
    if (mdb_env_get_fd(env, &efd) != 0 || fstat(efd, &est) != 0 || est.st_dev != st->st_dev ||
        est.st_ino != st->st_ino)
        return stk__err(err, STK_E_CHANGED, "%s: replaced while it was opened", datafile);
    if (!*nolock) {
        char lockp[4200];
        snprintf(lockp, sizeof lockp, env_dir ? "%s/lock.mdb" : "%s-lock", path);
        if (access(lockp, F_OK) != 0)
            *nolock = 1;
    }
    return STK_OK;
}

/* Open the named databases in a short transaction and commit it: that makes the handles
 * environment-wide, so the datasets' kept transactions and the walks' worker transactions only
 * look them up (LMDB registers a handle first opened in a still-open transaction per txn, and
 * concurrent first opens would fight over the same slot). Once per environment, under g_env_mu:
 * no other transaction of it exists yet. */
static int env_open_dbis(char *err, MDB_env *env, const char *path, const struct stat *st)
{
    MDB_txn *t0;
    int rc, efd;
    struct stat now; /* the first read of the map: not of a file cut since it was checked */
    if (mdb_env_get_fd(env, &efd) != 0 || fstat(efd, &now) != 0 || now.st_size < st->st_size)
        return stk__err(err, STK_E_TRUNCATED, "%s: shrank from %lld bytes while it was opened", path,
                        (long long)st->st_size);
    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t0)) != 0)
        return stk__err(err, STK_E_LMDB, "%s: mdb_txn_begin: %s", path, mdb_strerror(rc));
    /* `sources`: pread only */
    static const char *const dbnames[] = {STK__DB_RECORDS, STK__DB_META, STK__DB_TARGETS};
    for (size_t i = 0; i < STK__ARRAY_LEN(dbnames); i++) {
        MDB_dbi d;
        (void)mdb_dbi_open(t0, dbnames[i], 0, &d); /* absent ones are looked for again by the caller */
    }
    if ((rc = mdb_txn_commit(t0)) != 0)
        return stk__err(err, STK_E_LMDB, "%s: mdb_txn_commit: %s", path, mdb_strerror(rc));
    return STK_OK;
}

/* A new environment for the data file DATAFILE (identity ST) of the LMDB at PATH, set up for
 * sharing; g_env_mu held. Returns STK_OK with *out (refs 1, not yet listed) or an error, with
 * nothing left open. */
static int env_open_new(char *err, const char *path, const char *datafile, int env_dir, const struct stat *st,
                        stk__shared_env **out)
{
    MDB_env *env = NULL;
    int nolock = 0;
    int rc = env_open_lmdb(err, path, env_dir, &env, &nolock);
    if (rc != STK_OK)
        return rc;
    if ((rc = env_check_opened(err, env, path, datafile, env_dir, st, &nolock)) != STK_OK ||
        (rc = env_open_dbis(err, env, path, st)) != STK_OK) {
        mdb_env_close(env);
        return rc;
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

int stk__env_acquire(char *err, const char *path, const char *datafile, int env_dir, const struct stat *st,
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

void stk__env_release(stk__shared_env *e)
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
