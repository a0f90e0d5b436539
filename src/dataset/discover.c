/* SPDX-License-Identifier: MIT */
/*
 * discover.c — from a path to a layout: a directory of shards numbered from shard-00000.lmdb
 * without gaps (and no marker of an interrupted pack), an LMDB environment directory, one LMDB
 * file (a stoker shard or a foreign LMDB), or anything else as the files layout.
 */
#include "discover.h"

#include "common.h"
#include "files.h"
#include "format.h"
#include "shard.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        if (!stk__shard_name_parse(e->d_name, &no))
            continue;
        if (stk__grow((void **)&v, &cap, *n + 1, sizeof *v)) {
            free(v);
            closedir(d);
            return stk__err(ds->err, STK_E_NOMEM, "out of memory");
        }
        v[(*n)++] = no;
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof *v, cmp_uint);
    *out = v;
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
    int rc = stk__shards_alloc(ds, n);
    if (rc)
        return rc;
    stk__recvec recs = {0};
    for (size_t i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/" STK__SHARD_FMT, dir, nos[i]);
        if ((rc = stk__shard_open(ds, &ds->shards[i], (uint32_t)i, path, 0, 1, 1, &recs)) != STK_OK) {
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
    int rc = stk__shards_alloc(ds, 1);
    if (rc)
        return rc;
    stk__recvec recs = {0};
    rc = stk__shard_open(ds, &ds->shards[0], 0, path, env_dir, want_layout == STK_LAYOUT_SHARDS, 0, &recs);
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

/* A directory: shards, an LMDB environment (data.mdb) or image files, unless WANT says which. */
static int open_dir(stk_dataset *ds, const char *path, int want)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", path, STK__INCOMPLETE_MARK);
    if (access(p, F_OK) == 0 && !ds->allow_incomplete && want != STK_LAYOUT_FILES)
        return stk__err(ds->err, STK_E_INCOMPLETE,
                        "%s: interrupted pack (%s present): re-run stoker pack to finish it", path,
                        STK__INCOMPLETE_MARK);
    unsigned *nos;
    size_t n;
    int rc;
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
        rc = stk__files_open(ds, path, 1);
    }
    free(nos);
    return rc;
}

int stk__discover_open(stk_dataset *ds, const char *path, const struct stat *st, int want)
{
    if (S_ISDIR(st->st_mode))
        return open_dir(ds, path, want);
    if (!S_ISREG(st->st_mode))
        return stk__err(ds->err, STK_E_INVALID, "%s: not a directory or a regular file", path);
    if (want == STK_LAYOUT_FILES)
        return stk__files_open(ds, path, 0);
    return open_single(ds, path, 0, want);
}
