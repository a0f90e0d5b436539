/* SPDX-License-Identifier: MIT */
/*
 * dataset.c — a dataset handle: create, set, open, close, and the queries (info, records, class
 * names, reading one record). Opening is spread over the files of this folder: discover.c (what
 * the path holds), shard.c (one LMDB file), walk.c (its offset table), envreg.c (one LMDB
 * environment per file per process), files.c (the files layout), folder.c (source lists).
 */
#include "dataset.h"

#include "common.h"
#include "discover.h"
#include "files.h"
#include "format.h"
#include "params.h"
#include "remote.h"
#include "s3.h"
#include "shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int stk_dataset_create(stk_dataset **out)
{
    if (!out)
        return STK_E_INVALID;
    stk_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return STK_E_NOMEM;
    ds->layout = (int)stk__param_idef(STK_P_LAYOUT);
    ds->foreign_label = stk__param_idef(STK_P_FOREIGN_LABEL);
    ds->allow_incomplete = (int)stk__param_idef(STK_P_ALLOW_INCOMPLETE);
    *out = ds;
    return STK_OK;
}

int stk_dataset_set(stk_dataset *ds, int key, int64_t value)
{
    if (!ds)
        return STK_E_INVALID;
    if (ds->opened)
        return stk__err(ds->err, STK_E_STATE, "stk_dataset_set: only before stk_dataset_open");
    const stk__param_def *p = stk__param_for(key, STK__PH_DATASET);
    if (!p)
        return stk__err(ds->err, STK_E_BADPARAM, "parameter %d is not a dataset parameter", key);
    int rc = stk__param_check_int(p, value, ds->err);
    if (rc != STK_OK)
        return rc;
    if (key == STK_P_LAYOUT)
        ds->layout = (int)value;
    else if (key == STK_P_FOREIGN_LABEL)
        ds->foreign_label = value;
    else if (key == STK_P_CACHE_BYTES)
        ds->cache_bytes = (uint64_t)value;
    else if (key == STK_P_STREAM)
        ds->stream = (int)value;
    else
        ds->allow_incomplete = (int)value;
    return STK_OK;
}

int stk_dataset_set_cache_dir(stk_dataset *ds, const char *dir)
{
    if (!ds)
        return STK_E_INVALID;
    if (ds->opened)
        return stk__err(ds->err, STK_E_STATE, "stk_dataset_set_cache_dir: only before open");
    char *d = dir && *dir ? stk__strdup(dir) : NULL;
    if (dir && *dir && !d)
        return STK_E_NOMEM;
    free(ds->cache_dir);
    ds->cache_dir = d;
    return STK_OK;
}

static void close_all(stk_dataset *ds)
{
    uint32_t n = ds->shards ? STK__MAX(ds->nshards, 1) : 0;
    for (uint32_t i = 0; i < n; i++)
        stk__shard_close(&ds->shards[i]);
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
    if (ds->targets_owned)
        free(ds->targets);
    ds->targets = NULL;
    ds->targets_owned = 0;
    free(ds->tstage);
    ds->tstage = NULL;
    memset(&ds->tinfo, 0, sizeof ds->tinfo);
    ds->trow = 0;
    stk__filelist_free(&ds->files);
    ds->count = 0;
    ds->payload_bytes = ds->file_bytes = 0;
    ds->max_len = 0;
    stk__remote_free(ds->remote);
    ds->remote = NULL;
}

int stk_dataset_open(stk_dataset *ds, const char *path)
{
    if (!ds || !path || !*path)
        return STK_E_INVALID;
    if (ds->opened)
        return stk__err(ds->err, STK_E_STATE, "dataset already open");
    ds->err[0] = 0;
    int want = ds->layout, rc;
    if (stk__s3_is_url(path)) {
        /* s3://bucket/prefix: fetched into the cache directory, opened from there (remote.c) */
        rc = stk__remote_open(ds, path, want);
    } else {
        struct stat st;
        if (stat(path, &st) != 0)
            return stk__err(ds->err, -errno, "%s", path);
        rc = stk__discover_open(ds, path, &st, want);
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
    free(ds->cache_dir);
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

int stk_dataset_shard_format(const stk_dataset *ds, uint32_t shard)
{
    if (!ds || !ds->opened || !ds->shards || ds->layout == STK_LAYOUT_FILES || shard >= ds->nshards)
        return 0;
    return ds->shards[shard].foreign ? 0 : ds->shards[shard].version;
}

int stk_dataset_target_info(const stk_dataset *ds, stk_target_info *info)
{
    if (!ds || !info)
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    *info = ds->tinfo;
    return STK_OK;
}

int stk_dataset_target(const stk_dataset *ds, uint64_t index, void *out, size_t cap)
{
    if (!ds || !out)
        return STK_E_INVALID;
    if (!ds->opened)
        return STK_E_STATE;
    if (!ds->trow)
        return STK_E_INVALID;
    if (index >= ds->count || cap < ds->trow)
        return STK_E_RANGE;
    if (stk__remote_streaming(ds) && !stk__remote_rows_ready(ds, ds->recs[index].shard))
        return STK_E_STATE; /* streamed: its shard not attached yet (docs/S3.md "Streaming") */
    memcpy(out, ds->targets + ds->trow * index, ds->trow);
    return STK_OK;
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

/* Record INDEX of a streamed dataset whose shard no loader has attached (docs/S3.md
 * "Streaming"): STK_E_STATE, saying why and what reads it. */
static int not_attached(stk_dataset *ds, uint64_t index)
{
    char where[300];
    rec_where(ds, index, where, sizeof where);
    uint64_t limit = stk__remote_limit(ds);
    char why[160];
    if (limit)
        snprintf(why, sizeof why, "its cache limit, %llu bytes, is below its %llu bytes",
                 (unsigned long long)limit, (unsigned long long)ds->file_bytes);
    else
        snprintf(why, sizeof why, "streaming was asked for");
    return stk__err(ds->err, STK_E_STATE, "%s: not in the cache: this s3:// dataset is streamed "
                    "(%s), so a shard is read only while a loader has it attached; to read "
                    "records one by one, open it with a cache that holds it (STOKER_CACHE_BYTES "
                    "/ STK_P_CACHE_BYTES of at least %llu bytes, or none)", where, why,
                    (unsigned long long)stk__remote_hold_bytes(ds));
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
    if (stk__remote_streaming(ds) && sh->fd < 0)
        return not_attached(ds, index);
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
    int version = 0;
    rc = stk__rec_header_decode(h, r->len, &version, &label, &crc, &len);
    if (rc == STK_OK && version != sh->version)
        rc = STK_E_FORMAT;
    if (rc == STK_OK && len != r->len - STK__REC_HDR)
        rc = STK_E_TRUNCATED;
    if (rc) {
        rec_where(ds, index, where, sizeof where);
        return stk__err(ds->err, STK_E_CORRUPT, "%s: bad record header (%s%d%s)", where,
                        rc == STK_E_FORMAT ? "no STK" : "", rc == STK_E_FORMAT ? sh->version : 0,
                        rc == STK_E_FORMAT ? " magic" : "length does not match the LMDB value");
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
    if (ds->layout == STK_LAYOUT_FILES)
        return stk__files_read(ds, index, buf, cap, len, info);
    char where[4200];
    int rc = stk_dataset_record(ds, index, info);
    if (rc)
        return rc;
    const stk__shard *sh = &ds->shards[ds->recs[index].shard];
    *len = info->length;
    if (info->length > cap)
        return STK_E_RANGE;
    rc = stk__pread_full(sh->fd, buf, info->length, info->offset);
    if (rc) {
        rec_where(ds, index, where, sizeof where);
        return stk__err(ds->err, rc, "%s: payload read failed", where);
    }
    uint32_t crc = stk__crc32c(0, buf, info->length);
    if (info->has_crc) {
        const void *trow = ds->targets && ds->trow ? ds->targets + ds->trow * index : NULL;
        crc = stk__rec_crc(sh->version, crc, info->label, trow, trow ? ds->trow : 0);
    }
    if (info->has_crc && crc != info->crc32c) {
        rec_where(ds, index, where, sizeof where);
        return stk__err(ds->err, STK_E_CRC, "%s: CRC32C mismatch (stored %08x, computed %08x%s)", where,
                        info->crc32c, crc, sh->version >= 2 ? " over payload, label and target" : "");
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
        if (ds->shards[i].fd < 0)
            continue; /* a streamed s3:// shard not in the cache now (remote.c) */
        int rc = stk__shard_check(&ds->shards[i], err);
        if (rc != STK_OK)
            return rc;
    }
    return STK_OK;
}
