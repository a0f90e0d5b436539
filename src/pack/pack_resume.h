/* SPDX-License-Identifier: MIT */
/*
 * pack_resume.h — starting a pack: a fresh one, or the continuation of an interrupted pack of
 * the same plan. Internal; implemented in pack_resume.c.
 */
#ifndef STK_PACK_RESUME_H
#define STK_PACK_RESUME_H

#include "pack_plan.h"
#include "stoker.h"

#include <stddef.h>
#include <stdint.h>

/* The reason of a report line that lists a damaged JPEG packed anyway (keep_damaged): the
 * file is a record, not a skipped file. */
#define STK__KEPT_DAMAGED "kept-damaged: "
/* The reason of a report line that lists a record whose image is over the loader's default pixel
 * limit (STK__LOADER_MAX_PIXELS): a record too, listed as a warning (since 0.5). */
#define STK__OVER_LOADER_LIMIT "over-loader-limit: "

/* What the kept shards of an interrupted pack hold. */
typedef struct stk__pack_resume {
    uint32_t shards;
    uint64_t records, src_end, skipped, kept_damaged, over_limit, payload;
    int last_done;
    char *report;      /* their skipped files, `path<TAB>reason` lines (malloc'd; NULL: none) */
    size_t report_len;
} stk__pack_resume;

/* Open DST for the plan PL with writer W: if DST's incomplete-marker is this plan's and not
 * FORCE, keep the leading shards that continue the plan (*rs says what they hold) and go on
 * after them; else start afresh (*rs zero). Returns STK_OK or the writer's error (its
 * stk_writer_last_error names it). */
int stk__pack_begin(stk_writer *w, const char *dst, const stk__pack_plan *pl, int force,
                    stk__pack_resume *rs);

/* The stand-in of an uploaded shard: SHARD with this suffix (pack_resume.c). */
#define STK__STANDIN_EXT ".up"
/* Write SHARD's stand-in durably (its pack meta and size), before the caller removes SHARD. */
int stk__shard_standin_write(const char *shard, char *err);
/* 1 and *SIZE (the shard's bytes) if SHARD has a readable stand-in, else 0. */
int stk__shard_standin_size(const char *shard, uint64_t *size);

#endif
