/* SPDX-License-Identifier: MIT */
/*
 * pack_resume.c — resumable packs. DST holds the marker `.stoker-pack-incomplete` (source path
 * and plan digest) from the start to the very end. Every finished shard records in its `meta`
 * the plan digest, the dataset index of its first record and the range [source_begin,
 * source_end) of plan positions it covers, with the files of that range that were skipped.
 * Re-running the same command finds the marker, keeps the leading shards whose meta continues
 * the plan without a gap, drops the rest (and any temp file), and packs from the first
 * uncovered source file. The pack report is rebuilt from the kept shards' skipped lists plus the
 * new ones, so it is complete.
 */
#include "pack_resume.h"

#include "common.h"
#include "format.h"
#include "writer.h"

#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A kept shard's meta keys of the pack. */
typedef struct shard_meta {
    uint64_t count, first, begin, end, last, payload;
    MDB_val skipped;
} shard_meta;

/* A shard kept must open cleanly as a dataset first (LMDB pages checked, records walked):
 * reading its meta afterwards through LMDB must not trust a damaged file. */
static int shard_opens(const char *path)
{
    stk_dataset *chk;
    if (stk_dataset_create(&chk) != STK_OK)
        return 0;
    int usable = stk_dataset_open(chk, path) == STK_OK;
    stk_dataset_destroy(chk);
    return usable;
}

/* The meta of the pack with this DIGEST, and the records database holding `count` entries. */
static int read_shard_meta(MDB_txn *t, const char *digest, shard_meta *m)
{
    MDB_dbi meta, recs;
    MDB_val v;
    MDB_stat ms;
    if (mdb_dbi_open(t, STK__DB_META, 0, &meta) != 0 || mdb_dbi_open(t, STK__DB_RECORDS, 0, &recs) != 0)
        return 0;
    if (stk__meta_get(t, meta, STK__META_DIGEST, &v) != 0 || v.mv_size != strlen(digest) ||
        memcmp(v.mv_data, digest, v.mv_size) != 0)
        return 0;
    if (stk__meta_u64(t, meta, STK__META_COUNT, &m->count) || stk__meta_u64(t, meta, STK__META_FIRST_INDEX, &m->first) ||
        stk__meta_u64(t, meta, STK__META_SRC_BEGIN, &m->begin) ||
        stk__meta_u64(t, meta, STK__META_SRC_END, &m->end))
        return 0;
    m->last = 0;
    stk__meta_u64(t, meta, STK__META_LAST, &m->last);
    m->payload = 0;
    if (stk__meta_u64(t, meta, STK__META_PAYLOAD, &m->payload))
        return 0;
    if (mdb_stat(t, recs, &ms) != 0 || ms.ms_entries != m->count)
        return 0;
    return stk__meta_get(t, meta, STK__META_SKIPPED, &m->skipped) == 0;
}

/* Take shard meta M into RS (it continues RS at records, src_end). Returns 0 on no memory. */
static int take_shard(stk__pack_resume *rs, const shard_meta *m)
{
    const MDB_val *v = &m->skipped;
    char *nr = realloc(rs->report, rs->report_len + v->mv_size + 1);
    if (!nr)
        return 0;
    rs->report = nr;
    memcpy(rs->report + rs->report_len, v->mv_data, v->mv_size);
    rs->report_len += v->mv_size;
    rs->report[rs->report_len] = 0;
    for (char *line = rs->report + rs->report_len - v->mv_size; *line; line = strchr(line, '\n') + 1) {
        const char *tab = strchr(line, '\t'), *nl = strchr(line, '\n');
        if (!nl)
            break;
        if (tab && tab < nl && !strncmp(tab + 1, STK__KEPT_DAMAGED, strlen(STK__KEPT_DAMAGED)))
            rs->kept_damaged++;
        else if (tab && tab < nl && !strncmp(tab + 1, STK__OVER_LOADER_LIMIT, strlen(STK__OVER_LOADER_LIMIT)))
            rs->over_limit++;
        else
            rs->skipped++;
    }
    rs->records += m->count;
    rs->payload += m->payload;
    rs->src_end = m->end;
    rs->last_done = m->last == 1;
    rs->shards++;
    return 1;
}

/* Does shard NO continue the plan at (records, src_end)? Then it is taken into RS. */
static int check_shard(const char *dst, uint32_t no, const char *digest, stk__pack_resume *rs)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" STK__SHARD_FMT, dst, no);
    if (access(path, F_OK) != 0 || !shard_opens(path))
        return 0;
    MDB_env *env;
    if (mdb_env_create(&env) != 0)
        return 0;
    mdb_env_set_maxdbs(env, 4);
    int ok = 0;
    MDB_txn *t = NULL;
    shard_meta m;
    if (mdb_env_open(env, path, MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK, 0644) == 0 &&
        mdb_txn_begin(env, NULL, MDB_RDONLY, &t) == 0 && read_shard_meta(t, digest, &m) &&
        m.first == rs->records && m.begin == rs->src_end && m.end >= m.begin)
        ok = take_shard(rs, &m);
    if (t)
        mdb_txn_abort(t);
    mdb_env_close(env);
    return ok;
}

/* Marker text of this plan. */
static void marker_text(const stk__pack_plan *pl, char *buf, size_t cap)
{
    snprintf(buf, cap, "stoker-pack 1\nsource\t%s\ndigest\t%s\nfiles\t%zu\n", pl->src_real, pl->digest,
             pl->files.n);
}

/* Is DST's marker MARKER (an interrupted pack of this plan)? */
static int marker_matches(const char *dst, const char *marker)
{
    char mpath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s/%s", dst, STK__INCOMPLETE_MARK);
    int fd = open(mpath, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char old[PATH_MAX + 200];
    ssize_t r = read(fd, old, sizeof old - 1);
    close(fd);
    size_t mlen = r > 0 ? (size_t)r : 0;
    old[mlen] = 0;
    return !strcmp(old, marker);
}

int stk__pack_begin(stk_writer *w, const char *dst, const stk__pack_plan *pl, int force,
                    stk__pack_resume *rs)
{
    char marker[PATH_MAX + 200];
    marker_text(pl, marker, sizeof marker);
    if (!marker_matches(dst, marker) || force)
        return stk__writer_open_pack(w, dst, marker, pl->digest);
    while (check_shard(dst, rs->shards, pl->digest, rs))
        ;
    return stk__writer_resume(w, dst, pl->digest, rs->shards, rs->records, rs->src_end, rs->last_done);
}
