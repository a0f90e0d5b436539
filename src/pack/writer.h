/* SPDX-License-Identifier: MIT */
/*
 * writer.h — what stk_pack needs from the shard writer beyond the public stk_writer_* calls:
 * resumable packs (per-shard source ranges and skipped-file lists in `meta`), precomputed CRCs,
 * and the pack report written before the incomplete-marker goes. Internal; implemented in
 * writer.c.
 */
#ifndef STK_WRITER_H
#define STK_WRITER_H

#include "common.h"

/* Create DST if need be and take its lock (DST/.stoker-pack.lock, see writer.c) for W until
 * finish or destroy: -EBUSY naming the holder's pid when another writer has it. The open calls
 * take it too; a pack takes it first, before it reads DST to resume. */
int stk__writer_lock(stk_writer *w, const char *dst);
/* Open DST like stk_writer_open, writing MARKER (the text of the incomplete-marker file) and
 * tagging every shard with DIGEST (meta `source_digest`, plus source_begin/source_end/skipped).
 * DIGEST may be NULL (then no source keys are written). */
int stk__writer_open_pack(stk_writer *w, const char *dst, const char *marker, const char *digest);
/* Continue an interrupted pack in DST whose marker and first NEXT_SHARD shards were checked by
 * the caller: the next shard is NEXT_SHARD, its first record gets dataset index FIRST_INDEX, and
 * its source range begins at SRC_BEGIN; LAST_DONE: the newest kept shard says last_shard=1.
 * Stale temp files and shards from NEXT_SHARD on are removed; the marker is kept. */
int stk__writer_resume(stk_writer *w, const char *dst, const char *digest, uint32_t next_shard,
                       uint64_t first_index, uint64_t src_begin, int last_done);
/* stk_writer_add (TARGET NULL) or stk_writer_add_target with the payload's CRC32C already
 * computed and the position SRC_INDEX of its source file in the plan (source ranges of shards
 * are [begin, end) of these positions). */
int stk__writer_add_crc(stk_writer *w, const void *payload, size_t len, int32_t label,
                        const char *source, const void *target, uint32_t crc, uint64_t src_index);
/* Note a skipped source file (kept in the meta of the shard that covers SRC_INDEX). */
int stk__writer_note_skip(stk_writer *w, uint64_t src_index, const char *rel, const char *reason);
/* Finish: close the last shard with source_end = SRC_END, write DST/pack-report.tsv with REPORT
 * (LEN bytes; NULL = no report file) durably, then remove the marker. */
int stk__writer_finish_pack(stk_writer *w, uint64_t src_end, const char *report, size_t len);
/* Hooks of a pack whose shards go elsewhere as they are finished (pack_s3.c); NULL members are
 * not called. SHARD: shard NO was published as PATH (durable, final name); a non-zero return
 * fails the writer with ERR (STK__ERRLEN bytes, the writer's last_error). UNMARK: everything is
 * written and the pack report is durable, the marker is about to go; a non-zero return leaves the
 * marker (the pack stays resumable) and fails the finish with ERR. Called on the writer's thread. */
typedef struct stk__writer_hooks {
    int (*shard)(void *user, uint32_t no, const char *path, char *err);
    int (*unmark)(void *user, char *err);
    void *user;
} stk__writer_hooks;
/* Set H (copied) before the writer opens. */
void stk__writer_set_hooks(stk_writer *w, const stk__writer_hooks *h);
/* Counters for the pack summary. */
void stk__writer_totals(const stk_writer *w, uint64_t *records, uint64_t *shards, uint64_t *payload);

/* Remove stoker's own files from DST: shard-*.lmdb*, pack-report.tsv, the marker. */
int stk__dst_clean(const char *dst, char *err);
/* Number of finished shard files (shard-NNNNN.lmdb) in DST; -errno on failure. */
int64_t stk__dst_count_shards(const char *dst);
/* Write PATH with DATA durably (temp file, fsync, rename, fsync of the directory). */
int stk__write_file_durable(const char *path, const void *data, size_t len, char *err);

#endif
