/* SPDX-License-Identifier: MIT */
/* format.c — record header and keys of shard format v1 (see docs/FORMAT.md). */
#include "format.h"

#include "common.h"

#include <lmdb.h>
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

void stk__rec_header_encode(uint8_t out[STK__REC_HDR], int32_t label, uint32_t crc, uint32_t len)
{
    memcpy(out, STK__REC_MAGIC, 4);
    put_le32(out + 4, (uint32_t)label);
    put_le32(out + 8, crc);
    put_le32(out + 12, len);
}

int stk__rec_header_decode(const uint8_t *p, size_t n, int32_t *label, uint32_t *crc, uint32_t *len)
{
    if (n < STK__REC_HDR)
        return STK_E_TRUNCATED;
    if (memcmp(p, STK__REC_MAGIC, 4) != 0)
        return STK_E_FORMAT;
    uint32_t l = get_le32(p + 12);
    if ((uint64_t)l > (uint64_t)(n - STK__REC_HDR))
        return STK_E_TRUNCATED;
    if (label)
        *label = (int32_t)get_le32(p + 4);
    if (crc)
        *crc = get_le32(p + 8);
    if (len)
        *len = l;
    return STK_OK;
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
