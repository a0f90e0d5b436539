/* SPDX-License-Identifier: MIT */
/*
 * files.c — the files layout: image files named by an ImageFolder tree or a list file (folder.c
 * reads both), each record one file. The table holds the size seen at open; a read opens the
 * file again and takes it as it is now.
 *
 * Entries that are not regular files (a FIFO, socket or device named x.jpg, a symlink to one)
 * stay records: the index of every file is ImageFolder's, and the loader's "every index once per
 * epoch" holds, the entry delivered as a substitute and named in the error list like any
 * unreadable file. They are never opened blocking (stk__open_regular: stat, then O_NONBLOCK and
 * fstat, since the path may name something else by the time it is read).
 *
 * A directory of the tree that cannot be listed (mode 000 as an unprivileged user) fails the open,
 * naming it: read as it is, the dataset would lose that folder's images (a whole class) without a
 * word. torchvision's ImageFolder raises for such a class too; stoker pack lists it and goes on.
 */
#include "files.h"

#include "common.h"
#include "folder.h"
#include "manifest.h"
#include "shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int stk__files_open(stk_dataset *ds, const char *path, int is_dir)
{
    int rc = is_dir ? stk__folder_scan(path, &ds->files, ds->err)
                    : stk__list_read(path, &ds->files, ds->err);
    if (rc)
        return rc;
    if (ds->files.nunreadable) { /* pack lists such a folder and goes on; a dataset read as it is
                                  * would lose its images without a word (torchvision raises) */
        const char *why = ds->files.unreadable_why[0], *p = strstr(why, " (");
        return stk__err(ds->err, STK_E_IO,
                        "%s: %.*s; its images would be left out of the dataset: make it readable or move it "
                        "out of %s (%zu unreadable director%s)",
                        ds->files.unreadable[0], p ? (int)(p - why) : (int)strlen(why), why, path,
                        ds->files.nunreadable, ds->files.nunreadable == 1 ? "y" : "ies");
    }
    if ((rc = stk__shards_alloc(ds, 0 + 1)) != STK_OK)
        return rc;
    ds->tinfo = ds->files.tinfo;
    ds->trow = stk_target_dtype_size(ds->tinfo.dtype) * ds->tinfo.size;
    ds->targets = ds->files.targets; /* owned by ds->files */
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

/* Open P for reading: a regular file under 4 GiB (anything else is refused without blocking:
 * stk__open_regular); its size in *size. */
static int open_image(stk_dataset *ds, const char *p, int *fd, size_t *size)
{
    struct stat st;
    char why[STK__ERRLEN];
    *fd = stk__open_regular(p, 0, &st, why);
    if (*fd < 0)
        return stk__err(ds->err, *fd, "%s: %s", p, *fd == STK_E_IO ? why : "cannot open");
    if ((uint64_t)st.st_size > UINT32_MAX) {
        close(*fd);
        return stk__err(ds->err, STK_E_TOO_LARGE, "%s: file over 4 GiB", p);
    }
    *size = (size_t)st.st_size;
    return STK_OK;
}

int stk__files_read(stk_dataset *ds, uint64_t index, void *buf, size_t cap, size_t *len,
                    stk_record_info *info)
{
    memset(info, 0, sizeof *info);
    info->index = index;
    info->key = index;
    info->label = ds->files.labels[index];
    const char *p = ds->files.paths[index];
    int fd = -1;
    size_t sz = 0;
    int rc = open_image(ds, p, &fd, &sz);
    if (rc)
        return rc;
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
