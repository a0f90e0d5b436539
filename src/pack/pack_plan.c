/* SPDX-License-Identifier: MIT */
/*
 * pack_plan.c — the plan: the list of source files in dataset order (torchvision's order for an
 * ImageFolder) with their sizes and mtimes. Its digest (two FNV-1a hashes over the class names,
 * the paths, sizes, mtimes and labels) identifies the job: a resumed pack continues only the
 * shards written for the same plan.
 */
#include "pack_plan.h"

#include "common.h"
#include "manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The source files of SRC (stat ST): an ImageFolder root or a manifest. */
static int plan_list(const char *src, const struct stat *st, const stk__manifest_opts *mo, stk__pack_plan *pl,
                     char *err)
{
    if (S_ISDIR(st->st_mode))
        return stk__folder_scan(src, &pl->files, err);
    if (S_ISREG(st->st_mode))
        return stk__manifest_read(src, mo, &pl->files, err);
    return stk__err(err, STK_E_INVALID, "%s: not a directory (ImageFolder) or a list file", src);
}

/* Sizes of the files (and their total) and the plan's digest. */
static void plan_digest(stk__pack_plan *pl, int max_side, int quality, int keep_damaged)
{
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    char tag[] = "stoker-pack-plan 1";
    h1 = fnv(h1, tag, sizeof tag);
    for (size_t c = 0; c < pl->files.nclasses; c++) {
        h1 = fnv(h1, pl->files.classes[c], strlen(pl->files.classes[c]) + 1);
        h2 = fnv(h2, pl->files.classes[c], strlen(pl->files.classes[c]) + 1);
    }
    for (size_t i = 0; i < pl->files.n; i++) {
        struct stat fs;
        int64_t rec[3] = {-1, -1, pl->files.labels[i]};
        if (stat(pl->files.paths[i], &fs) == 0) {
            rec[0] = fs.st_size;
            rec[1] = (int64_t)fs.st_mtim.tv_sec * 1000000000 + fs.st_mtim.tv_nsec;
            pl->sizes[i] = S_ISREG(fs.st_mode) ? (uint64_t)fs.st_size : 0;
            pl->bytes_total += pl->sizes[i];
        }
        h1 = fnv(h1, pl->files.rel[i], strlen(pl->files.rel[i]) + 1);
        h1 = fnv(h1, rec, sizeof rec);
        h2 = fnv(h2, rec, sizeof rec);
        h2 = fnv(h2, pl->files.rel[i], strlen(pl->files.rel[i]) + 1);
    }
    if (max_side > 0 || quality > 0) { /* (a plain pack keeps the digest it always had) */
        int32_t t[2] = {max_side, quality};
        h1 = fnv(h1, t, sizeof t);
        h2 = fnv(h2, t, sizeof t);
    }
    if (keep_damaged) { /* damaged JPEGs are records: another dataset */
        char kd[] = "keep-damaged";
        h1 = fnv(h1, kd, sizeof kd);
        h2 = fnv(h2, kd, sizeof kd);
    }
    const stk_target_info *ti = &pl->files.tinfo;
    if (ti->dtype != STK_TDT_NONE) { /* the targets, as stored */
        uint32_t t[4] = {(uint32_t)ti->dtype, (uint32_t)ti->kind, ti->size, ti->classes};
        size_t bytes = pl->files.n * ti->size * stk_target_dtype_size(ti->dtype);
        h1 = fnv(fnv(h1, t, sizeof t), pl->files.targets, bytes);
        h2 = fnv(fnv(h2, pl->files.targets, bytes), t, sizeof t);
    }
    snprintf(pl->digest, sizeof pl->digest, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

int stk__pack_plan_make(const char *src, int max_side, int quality, int keep_damaged, const stk__manifest_opts *mo,
                        stk__pack_plan *pl, char *err)
{
    struct stat st;
    if (stat(src, &st) != 0)
        return stk__err(err, -errno, "%s", src);
    if (!realpath(src, pl->src_real))
        return stk__err(err, -errno, "%s: realpath", src);
    int rc = plan_list(src, &st, mo, pl, err);
    if (rc)
        return rc;
    if (pl->files.n == 0 && pl->files.nbad)
        return stk__err(err, STK_E_EMPTYSET, "%s: no usable line (%zu set aside; the first: %s: %s)", src,
                        pl->files.nbad, pl->files.bad_where[0], pl->files.bad_why[0]);
    if (pl->files.n == 0 && pl->files.origin)
        return stk__err(err, STK_E_EMPTYSET, "%s: names no image file", src);
    if (pl->files.n == 0 && pl->files.nignored)
        return stk__err(err, STK_E_EMPTYSET, "%s: no image files (extensions .jpg .jpeg .png .ppm .bmp "
                        ".pgm .tif .tiff .webp; %zu other file%s left out, the first: %s)", src,
                        pl->files.nignored, pl->files.nignored == 1 ? "" : "s", pl->files.ignored[0]);
    if (pl->files.n == 0 && pl->files.nunreadable)
        return stk__err(err, STK_E_EMPTYSET, "%s: no image files; %zu director%s cannot be read, the first: %s: %s",
                        src, pl->files.nunreadable, pl->files.nunreadable == 1 ? "y" : "ies", pl->files.unreadable[0],
                        pl->files.unreadable_why[0]);
    if (pl->files.n == 0)
        return stk__err(err, STK_E_EMPTYSET, "%s: no image files (extensions .jpg .jpeg .png .ppm .bmp "
                        ".pgm .tif .tiff .webp)", src);
    pl->sizes = calloc(pl->files.n, sizeof *pl->sizes);
    if (!pl->sizes)
        return stk__err(err, STK_E_NOMEM, "out of memory");
    plan_digest(pl, max_side, quality, keep_damaged);
    return STK_OK;
}

void stk__pack_plan_free(stk__pack_plan *pl)
{
    stk__filelist_free(&pl->files);
    free(pl->sizes);
}
