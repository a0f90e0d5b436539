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
 *
 * A pack to a bucket (pack_s3.c) removes each shard once it is uploaded, leaving its stand-in
 * `shard-NNNNN.lmdb.up`: the shard's pack meta and file size, written durably before the shard
 * goes. A shard that is absent but has a stand-in counts as kept (pack_s3.c first drops the
 * stand-ins whose object the bucket does not hold with that size).
 */
#include "pack_resume.h"

#include "common.h"
#include "format.h"
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- stand-ins of uploaded shards ----------------------------------------------------------- */

#define STANDIN_MAGIC "stoker-uploaded 1\n"

int stk__shard_standin_write(const char *shard, char *err)
{
    MDB_env *env;
    MDB_txn *t = NULL;
    MDB_dbi meta;
    MDB_val dg;
    shard_meta m;
    struct stat st;
    char *buf = NULL, path[PATH_MAX + 8];
    int rc = STK_E_CORRUPT;
    if (stat(shard, &st) != 0)
        return stk__err(err, -errno, "%s: cannot stat", shard);
    if (mdb_env_create(&env) != 0)
        return stk__err(err, STK_E_NOMEM, "out of memory");
    mdb_env_set_maxdbs(env, 4);
    if (mdb_env_open(env, shard, MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK, 0644) == 0 &&
        mdb_txn_begin(env, NULL, MDB_RDONLY, &t) == 0 && mdb_dbi_open(t, STK__DB_META, 0, &meta) == 0 &&
        stk__meta_get(t, meta, STK__META_DIGEST, &dg) == 0) {
        char digest[256];
        snprintf(digest, sizeof digest, "%.*s", (int)STK__MIN(dg.mv_size, sizeof digest - 1), (const char *)dg.mv_data);
        if (read_shard_meta(t, digest, &m)) {
            size_t cap = m.skipped.mv_size + 1024;
            if (!(buf = malloc(cap))) {
                rc = STK_E_NOMEM;
            } else {
                int n = snprintf(buf, cap, STANDIN_MAGIC "digest\t%s\nsize\t%llu\ncount\t%llu\nfirst\t%llu\n"
                                 "begin\t%llu\nend\t%llu\nlast\t%llu\npayload\t%llu\nskipped\t%zu\n",
                                 digest, (unsigned long long)st.st_size, (unsigned long long)m.count,
                                 (unsigned long long)m.first, (unsigned long long)m.begin,
                                 (unsigned long long)m.end, (unsigned long long)m.last,
                                 (unsigned long long)m.payload, m.skipped.mv_size);
                memcpy(buf + n, m.skipped.mv_data, m.skipped.mv_size);
                snprintf(path, sizeof path, "%s" STK__STANDIN_EXT, shard);
                rc = stk__write_file_durable(path, buf, (size_t)n + m.skipped.mv_size, err);
            }
        }
    }
    if (t)
        mdb_txn_abort(t);
    mdb_env_close(env);
    free(buf);
    if (rc == STK_E_CORRUPT)
        return stk__err(err, rc, "%s: no pack meta to keep for a resume", shard);
    return rc;
}

/* The stand-in of shard PATH: *M (M->skipped points into *TEXT, malloc'd) and *SIZE; 0 if none or
 * unreadable. */
static int standin_read(const char *shard, shard_meta *m, char digest[256], uint64_t *size, char **text)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s" STK__STANDIN_EXT, shard);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f)
        return 0;
    char *buf = fstat(fileno(f), &st) == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    size_t len = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf)
        return 0;
    buf[len] = 0;
    unsigned long long v[8];
    size_t skl;
    int used = 0;
    if (strncmp(buf, STANDIN_MAGIC, strlen(STANDIN_MAGIC)) != 0 ||
        sscanf(buf + strlen(STANDIN_MAGIC), "digest\t%255s\nsize\t%llu\ncount\t%llu\nfirst\t%llu\nbegin\t%llu\n"
               "end\t%llu\nlast\t%llu\npayload\t%llu\nskipped\t%zu\n%n",
               digest, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &skl, &used) != 9 || used == 0 ||
        strlen(STANDIN_MAGIC) + (size_t)used + skl != len) {
        free(buf);
        return 0;
    }
    *size = v[0];
    m->count = v[1];
    m->first = v[2];
    m->begin = v[3];
    m->end = v[4];
    m->last = v[5];
    m->payload = v[6];
    m->skipped.mv_size = skl;
    m->skipped.mv_data = buf + strlen(STANDIN_MAGIC) + used;
    *text = buf;
    return 1;
}

int stk__shard_standin_size(const char *shard, uint64_t *size)
{
    shard_meta m;
    char digest[256], *text = NULL;
    if (!standin_read(shard, &m, digest, size, &text))
        return 0;
    free(text);
    return 1;
}

/* Shard NO is absent: does its stand-in continue the plan at (records, src_end)? */
static int check_standin(const char *path, const char *digest, stk__pack_resume *rs)
{
    shard_meta m;
    char dg[256], *text = NULL;
    uint64_t size;
    if (!standin_read(path, &m, dg, &size, &text))
        return 0;
    int ok = !strcmp(dg, digest) && m.first == rs->records && m.begin == rs->src_end && m.end >= m.begin &&
             take_shard(rs, &m);
    free(text);
    return ok;
}

/* Does shard NO continue the plan at (records, src_end)? Then it is taken into RS. */
static int check_shard(const char *dst, uint32_t no, const char *digest, stk__pack_resume *rs)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" STK__SHARD_FMT, dst, no);
    if (access(path, F_OK) != 0)
        return check_standin(path, digest, rs);
    if (!shard_opens(path))
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
