/* SPDX-License-Identifier: MIT */
/*
 * pack_plan.h — the plan of a pack: its source files in dataset order with their sizes, and the
 * digest that identifies the job (a resumed pack must have the same one). Internal; implemented
 * in pack_plan.c.
 */
#ifndef STK_PACK_PLAN_H
#define STK_PACK_PLAN_H

#include "folder.h"
#include "manifest.h"

#include <limits.h>
#include <stdint.h>

typedef struct stk__pack_plan {
    stk__filelist files;
    uint64_t *sizes;       /* per file, seen now (0: not a regular file) */
    uint64_t bytes_total;
    char digest[40];
    char src_real[PATH_MAX];
} stk__pack_plan;

/* The plan of SRC, an ImageFolder root or a manifest read with MO (manifest.h; its lines set
 * aside are in pl->files.bad_*). MAX_SIDE, QUALITY (what the sources become; 0 = the defaults)
 * and KEEP_DAMAGED are part of the digest when not 0, the targets when there are some. Returns
 * STK_OK, or an error with ERR (STK__ERRLEN bytes) set: STK_E_EMPTYSET when SRC names no image
 * file. */
int stk__pack_plan_make(const char *src, int max_side, int quality, int keep_damaged, const stk__manifest_opts *mo,
                        stk__pack_plan *pl, char *err);
void stk__pack_plan_free(stk__pack_plan *pl);

#endif
