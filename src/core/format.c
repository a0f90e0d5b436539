/* SPDX-License-Identifier: MIT */
/* format.c — record header, checksum and keys of shard formats 1 and 2 (see docs/FORMAT.md). */
#include "format.h"

#include "common.h"

#include <lmdb.h>
#include <stdio.h>
#include <string.h>

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void stk__rec_header_encode(uint8_t out[STK__REC_HDR], int version, int32_t label, uint32_t crc, uint32_t len)
{
    memcpy(out, STK__REC_MAGIC, 3);
    out[3] = (uint8_t)('0' + version);
    put_le32(out + 4, (uint32_t)label);
    put_le32(out + 8, crc);
    put_le32(out + 12, len);
}

int stk__rec_header_decode(const uint8_t *p, size_t n, int *version, int32_t *label, uint32_t *crc,
                           uint32_t *len)
{
    if (n < STK__REC_HDR)
        return STK_E_TRUNCATED;
    if (memcmp(p, STK__REC_MAGIC, 3) != 0 || p[3] < '0' + STK__FORMAT_MIN || p[3] > '0' + STK__FORMAT_WRITTEN)
        return STK_E_FORMAT;
    uint32_t l = get_le32(p + 12);
    if ((uint64_t)l > (uint64_t)(n - STK__REC_HDR))
        return STK_E_TRUNCATED;
    if (version)
        *version = p[3] - '0';
    if (label)
        *label = (int32_t)get_le32(p + 4);
    if (crc)
        *crc = get_le32(p + 8);
    if (len)
        *len = l;
    return STK_OK;
}

uint32_t stk__rec_crc(int version, uint32_t payload_crc, int32_t label, const void *target, size_t trow)
{
    if (version < 2)
        return payload_crc;
    uint8_t lb[4];
    put_le32(lb, (uint32_t)label);
    uint32_t c = stk__crc32c(payload_crc, lb, 4);
    return trow ? stk__crc32c(c, target, trow) : c;
}

int stk__format_parse(const void *v, size_t n)
{
    size_t pl = strlen(STK__FORMAT_NAME);
    const char *s = v;
    if (n != pl + 1 || memcmp(s, STK__FORMAT_NAME, pl) != 0 || s[pl] < '0' + STK__FORMAT_MIN ||
        s[pl] > '0' + STK__FORMAT_WRITTEN)
        return 0;
    return s[pl] - '0';
}

void stk__rec_key(uint8_t out[8], uint64_t i)
{
    for (int b = 7; b >= 0; b--) {
        out[b] = (uint8_t)i;
        i >>= 8;
    }
}

uint64_t stk__rec_key_parse(const uint8_t k[8])
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v = v << 8 | k[b];
    return v;
}

int stk__meta_get(MDB_txn *txn, MDB_dbi dbi, const char *key, MDB_val *val)
{
    MDB_val k = {strlen(key), (void *)key};
    return mdb_get(txn, dbi, &k, val);
}

int stk__meta_u64(MDB_txn *txn, MDB_dbi dbi, const char *key, uint64_t *out)
{
    MDB_val v;
    if (stk__meta_get(txn, dbi, key, &v) != 0 || v.mv_size == 0 || v.mv_size > 20)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < v.mv_size; i++) {
        char c = ((const char *)v.mv_data)[i];
        if (c < '0' || c > '9')
            return -1;
        x = x * 10 + (uint64_t)(c - '0');
    }
    *out = x;
    return 0;
}

int stk__shard_name_parse(const char *n, unsigned *no)
{
    size_t pl = strlen(STK__SHARD_PREFIX);
    if (strlen(n) != pl + 10 || strncmp(n, STK__SHARD_PREFIX, pl) != 0 || strcmp(n + pl + 5, ".lmdb") != 0)
        return 0;
    unsigned v = 0;
    for (size_t i = pl; i < pl + 5; i++) {
        if (n[i] < '0' || n[i] > '9')
            return 0;
        v = v * 10 + (unsigned)(n[i] - '0');
    }
    if (no)
        *no = v;
    return 1;
}

/* ---- targets -------------------------------------------------------------------------------- */

/* Targets are stored little-endian and handed out in host order without a swap. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "stoker's targets assume a little-endian host");

static const struct {
    int dtype;
    const char *name;
    size_t size;
} tdtypes[] = {
    {STK_TDT_UINT8, "uint8", 1},     {STK_TDT_INT32, "int32", 4},     {STK_TDT_INT64, "int64", 8},
    {STK_TDT_FLOAT32, "float32", 4}, {STK_TDT_FLOAT64, "float64", 8},
};

size_t stk_target_dtype_size(int dtype)
{
    for (size_t i = 0; i < sizeof tdtypes / sizeof *tdtypes; i++)
        if (tdtypes[i].dtype == dtype)
            return tdtypes[i].size;
    return 0;
}

const char *stk__tdtype_name(int dtype)
{
    for (size_t i = 0; i < sizeof tdtypes / sizeof *tdtypes; i++)
        if (tdtypes[i].dtype == dtype)
            return tdtypes[i].name;
    return NULL;
}

int stk__tdtype_parse(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof tdtypes / sizeof *tdtypes; i++)
        if (strlen(tdtypes[i].name) == n && memcmp(tdtypes[i].name, s, n) == 0)
            return tdtypes[i].dtype;
    return STK_TDT_NONE;
}

int stk__target_check(const stk_target_info *t, char why[64])
{
    const char *w = NULL;
    if (!stk_target_dtype_size(t->dtype))
        w = "unknown target dtype";
    else if (t->size < 1 || t->size > STK__TARGET_MAX_SIZE)
        w = "target size must be 1..65536";
    else if (t->kind != STK_TARGET_VALUES && t->kind != STK_TARGET_LABELS)
        w = "unknown target kind";
    else if (t->kind == STK_TARGET_LABELS && (t->dtype != STK_TDT_INT32 || t->classes < 1))
        w = "a label list is int32 with at least one class";
    else if (t->kind == STK_TARGET_VALUES && t->classes != 0)
        w = "classes is for label lists only";
    snprintf(why, 64, "%s", w ? w : "");
    return w ? STK_E_INVALID : STK_OK;
}

int stk__target_labels_ok(const stk_target_info *info, const void *t)
{
    const uint8_t *p = t;
    int padding = 0;
    for (uint32_t i = 0; i < info->size; i++) {
        int32_t v;
        memcpy(&v, p + 4 * (size_t)i, 4);
        if (v == -1)
            padding = 1;
        else if (padding || v < 0 || (uint32_t)v >= info->classes)
            return 0;
    }
    return 1;
}
