/* SPDX-License-Identifier: MIT */
/*
 * dataset.h — the opened dataset as the reader sees it: the offset table and the open files.
 * Internal; the public view is stk_dataset_* in stoker.h. Implemented in dataset.c and the files
 * it names.
 */
#ifndef STK_DATASET_H
#define STK_DATASET_H

#include "common.h"
#include "folder.h"
#include "lmdb_check.h"

#include <lmdb.h>
#include <sys/types.h>

/* One record in the offset table (16 bytes; 1 M records = 16 MB).
 *  shards/lmdb: OFF = file offset of the LMDB value, LEN = value length (stoker shards: the
 *               16-byte header + payload; foreign LMDB: the image bytes).
 *  files:       OFF = unused (0), LEN = file size seen at scan, the path is files.paths[index]. */
typedef struct stk__rec {
    uint64_t off;
    uint32_t len;
    uint32_t shard;
} stk__rec;

/* One MDB_env per shard file per process, shared by the datasets open on it (envreg.h). */
typedef struct stk__shared_env stk__shared_env;

typedef struct stk__shard {
    char *path;
    const char *name;     /* basename of path */
    int fd;               /* O_RDONLY, buffered */
    int fd_direct;        /* O_RDONLY|O_DIRECT, or -1 where refused */
    uint64_t file_size;
    uint64_t first;       /* dataset index of its first record */
    uint64_t count;
    stk__shared_env *senv; /* this process's environment of the file, shared (envreg.h) */
    MDB_env *env;         /* senv->env: read-only, MDB_NORDAHEAD | MDB_NOTLS */
    MDB_txn *txn;         /* read transaction kept for the dataset's lifetime */
    MDB_dbi dbi;          /* `records` (stoker) or the main database (foreign) */
    int foreign;          /* 1: foreign LMDB (payload = value, no header, no CRC) */
    int version;          /* stoker shard: its format, 1 or 2 (docs/FORMAT.md); foreign: 0 */
    int nolock;           /* opened with MDB_NOLOCK: identity checked instead */
    int have_sources;     /* stoker shard with a `sources` database: */
    stk__lmdb_tree sources; /* its tree, read with pread only (stk_dataset_record_name) */
    /* identity for nolock shards */
    dev_t dev;
    ino_t ino;
    int64_t mtime_ns;
    uint64_t txnid, last_pgno;
} stk__shard;

/* What an s3:// dataset holds while open (remote.c). */
typedef struct stk__remote stk__remote;

struct stk_dataset {
    int layout;                /* STK_LAYOUT_SHARDS / FILES / LMDB after open */
    int opened;
    int64_t foreign_label;
    int allow_incomplete;
    char *path;
    stk__shard *shards;
    uint32_t nshards;
    stk__rec *recs;
    uint64_t count;
    uint64_t payload_bytes, file_bytes;
    uint32_t max_len;          /* largest rec.len */
    stk__filelist files;       /* files layout: paths and labels; classes for all layouts */
    char **classes;            /* shards: from meta; files: files.classes */
    uint32_t nclasses;
    int format_version;
    /* targets (docs/FORMAT.md "Targets"): count rows of trow bytes; the files layout's point into
     * files.targets, the shards' are read at open (stk__shard_open) */
    stk_target_info tinfo;
    size_t trow;
    uint8_t *targets;
    int targets_owned;
    /* a streamed s3:// shard's target rows as its attach read them (shard.c), before remote.c
     * puts them in their place of ds->targets (laid out whole at the open, never reallocated) */
    uint8_t *tstage;
    /* s3:// datasets (remote.c): the cache directory (NULL: the default) and its limit */
    char *cache_dir;
    uint64_t cache_bytes;
    /* STK_P_STREAM: open an s3:// dataset streamed even when the cache holds it (a loader sets
     * it when its STK_P_SHUFFLE_WINDOW is set before its open: docs/S3.md "Streaming") */
    int stream;
    stk__remote *remote;
    char err[STK__ERRLEN];
};

/* Label of a files-layout record, or the foreign label of an LMDB record; for stoker shards the
 * label is in the record header (known only after reading), so this returns -1. */
int32_t stk__dataset_static_label(const stk_dataset *ds, uint64_t index);
/* Re-check the identity of nolock shards (STK_E_CHANGED naming the shard) and that every shard
 * file still has at least the size seen at open (STK_E_TRUNCATED). Cheap: fstat + one pread. */
int stk__dataset_check(stk_dataset *ds, char *err);

#endif
