/* SPDX-License-Identifier: MIT */
/*
 * envreg.h — the process-wide registry of LMDB environments: one MDB_env per shard file per
 * process, shared and counted by the datasets open on it. Internal; implemented in envreg.c.
 */
#ifndef STK_ENVREG_H
#define STK_ENVREG_H

#include <lmdb.h>
#include <sys/stat.h>
#include <sys/types.h>

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
typedef struct stk__shared_env stk__shared_env;

/* The process's environment of the data file DATAFILE with identity ST, of the LMDB at PATH
 * (ENV_DIR: a directory environment), opened now if it is not open yet; one more reference to it
 * in *out. Returns STK_OK or an error with ERR (STK__ERRLEN bytes) set. Thread-safe. */
int stk__env_acquire(char *err, const char *path, const char *datafile, int env_dir, const struct stat *st,
                     stk__shared_env **out);

/* Give back a reference; the last one closes the environment (its transactions are ended). */
void stk__env_release(stk__shared_env *e);

#endif
