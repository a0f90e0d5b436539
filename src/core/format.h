/* SPDX-License-Identifier: MIT */
/*
 * format.h — shard formats 1 and 2 (docs/FORMAT.md): names, the 16-byte record header, LMDB
 * keys, the record checksum. Writers write format 2; readers read both, shard by shard. Internal.
 */
#ifndef STK_FORMAT_H
#define STK_FORMAT_H

#include "stoker.h"

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#define STK__REC_MAGIC "STK"       /* 3 bytes, then the version digit: STK1, STK2 */
#define STK__REC_HDR 16            /* magic, i32 label, u32 crc32c, u32 payload length */
#define STK__FORMAT_NAME "stoker-shard " /* then the version digit */
#define STK__FORMAT_WRITTEN 2      /* what stk_writer writes */
#define STK__FORMAT_MIN 1          /* oldest format this build reads */
#define STK__DB_RECORDS "records"
#define STK__DB_META "meta"
#define STK__DB_SOURCES "sources"   /* optional: key -> source path (UTF-8) */
#define STK__DB_TARGETS "targets"   /* optional: key -> the record's target (since 0.2) */
#define STK__SHARD_FMT "shard-%05u.lmdb"
#define STK__SHARD_PREFIX "shard-"  /* every shard-* file in a dataset directory is stoker's */
#define STK__INCOMPLETE_MARK ".stoker-pack-incomplete" /* in DST while a pack is unfinished */
#define STK__PACK_REPORT "pack-report.tsv"
#define STK__PACK_LOCK ".stoker-pack.lock" /* in DST while a writer holds it (flock, its pid) */

/* Meta keys of every shard (see docs/FORMAT.md). */
#define STK__META_FORMAT "format"   /* STK__FORMAT_NAME */
#define STK__META_COUNT "count"
#define STK__META_CLASSES "classes" /* class names, one per line, label = line */
#define STK__META_CREATED_BY "created_by"
/* Meta keys written by stk_pack (see docs/FORMAT.md). */
#define STK__META_FIRST_INDEX "first_index"
#define STK__META_SHARD "shard"
#define STK__META_LAST "last_shard" /* "1" in the last shard of a dataset, "0" in the others */
#define STK__META_PAYLOAD "payload_bytes" /* sum of payload lengths in the shard */
#define STK__META_DIGEST "source_digest"
#define STK__META_SRC_BEGIN "source_begin"
#define STK__META_SRC_END "source_end"
#define STK__META_SKIPPED "skipped"
/* Meta keys of a shard whose records carry targets (docs/FORMAT.md "Targets"). */
#define STK__META_TARGET_DTYPE "target_dtype"     /* uint8 int32 int64 float32 float64 */
#define STK__META_TARGET_SIZE "target_size"       /* elements per record */
#define STK__META_TARGET_KIND "target_kind"       /* values | labels */
#define STK__META_TARGET_CLASSES "target_classes" /* labels: number of classes */
#define STK__TARGET_MAX_SIZE 65536

/* 1 when N is a finished shard's name, shard-NNNNN.lmdb, with its number in *NO (NO may be NULL);
 * 0 for anything else (temp files, lock files, other names). */
int stk__shard_name_parse(const char *n, unsigned *no);

/* Write the header of format VERSION (1 or 2) for a payload of LEN bytes. */
void stk__rec_header_encode(uint8_t out[STK__REC_HDR], int version, int32_t label, uint32_t crc, uint32_t len);
/* Parse a header; N is the bytes available at P (the whole value when known). *VERSION (may be
 * NULL) gets the magic's version, 1 or 2: the caller checks that it is its shard's. Returns
 * STK_OK or STK_E_FORMAT (bad magic) / STK_E_TRUNCATED (N < 16 or length field larger than
 * N - 16). */
int stk__rec_header_decode(const uint8_t *p, size_t n, int *version, int32_t *label, uint32_t *crc,
                           uint32_t *len);
/* The checksum a record of format VERSION stores, given PAYLOAD_CRC = stk__crc32c(0, payload):
 * format 1: PAYLOAD_CRC; format 2: CRC32C(payload || label as 4 bytes little-endian || the
 * record's target row of TROW bytes (none when TROW = 0)), continued from PAYLOAD_CRC. */
uint32_t stk__rec_crc(int version, uint32_t payload_crc, int32_t label, const void *target, size_t trow);
/* The version of meta `format` value V of N bytes ("stoker-shard 1" / "stoker-shard 2"), or 0 for
 * anything else. */
int stk__format_parse(const void *v, size_t n);
/* 8-byte big-endian key of record number I within its shard. */
void stk__rec_key(uint8_t out[8], uint64_t i);
uint64_t stk__rec_key_parse(const uint8_t k[8]);

/* Targets: the dtype's name in meta (NULL for an unknown one) and back (STK_TDT_NONE when
 * unknown); stk__target_check: STK_OK for a usable shape and type (kind, size 1..65536, a
 * label list int32 with classes >= 1), else STK_E_INVALID with a reason in WHY (64 bytes). */
const char *stk__tdtype_name(int dtype);
int stk__tdtype_parse(const char *s, size_t n);
int stk__target_check(const stk_target_info *t, char why[64]);
/* 1 when the target row T (a label list of INFO) holds only indices 0..classes-1 followed by
 * -1 padding. */
int stk__target_labels_ok(const stk_target_info *info, const void *t);

/* `meta` database values (text). stk__meta_get: mdb_get by a C-string key (LMDB's status).
 * stk__meta_u64: a decimal value of 1..20 digits; 0, or -1 when missing or not a number. */
int stk__meta_get(MDB_txn *txn, MDB_dbi dbi, const char *key, MDB_val *val);
int stk__meta_u64(MDB_txn *txn, MDB_dbi dbi, const char *key, uint64_t *out);

#endif
