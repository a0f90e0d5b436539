/* SPDX-License-Identifier: MIT */
/*
 * fuzz_rec_header.c — the 16-byte record header of shard formats 1 and 2 (stk__rec_header_decode).
 *
 * Input: any bytes, taken as a whole LMDB value (header + payload). Invariants: a decode that
 * succeeds saw the magic, claims no more payload than there is, and re-encodes to the same 16
 * bytes; a decode that fails says why with the documented codes only; N < 16 is always
 * STK_E_TRUNCATED. The same header is also decoded with every shorter N (a value that lies about
 * its length must never be accepted).
 */
#include "fuzz.h"

#include "common.h"
#include "format.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int32_t label = 0;
    uint32_t crc = 0, len = 0;
    int version = 0;
    int rc = stk__rec_header_decode(data, size, &version, &label, &crc, &len);
    FUZZ_CHECK(rc == STK_OK || rc == STK_E_FORMAT || rc == STK_E_TRUNCATED, "rc %d", rc);
    if (size < STK__REC_HDR) {
        FUZZ_CHECK(rc == STK_E_TRUNCATED, "short input %zu gave %d", size, rc);
        return 0;
    }
    if (memcmp(data, STK__REC_MAGIC, 3) != 0 || (data[3] != '1' && data[3] != '2')) {
        FUZZ_CHECK(rc == STK_E_FORMAT, "bad magic gave %d", rc);
        return 0;
    }
    if (rc != STK_OK) {
        FUZZ_CHECK(rc == STK_E_TRUNCATED, "rc %d", rc);
        uint32_t claimed = (uint32_t)data[12] | (uint32_t)data[13] << 8 | (uint32_t)data[14] << 16 |
                           (uint32_t)data[15] << 24;
        FUZZ_CHECK((uint64_t)claimed > size - STK__REC_HDR, "rejected a fitting length %u of %zu",
                   claimed, size);
        return 0;
    }
    FUZZ_CHECK((uint64_t)len <= size - STK__REC_HDR, "length %u with %zu bytes", len, size);
    uint8_t again[STK__REC_HDR];
    FUZZ_CHECK(version == data[3] - '0', "version %d of magic %c", version, data[3]);
    stk__rec_header_encode(again, version, label, crc, len);
    FUZZ_CHECK(memcmp(again, data, STK__REC_HDR) == 0, "re-encoded header differs");
    /* the same header in every shorter value: accepted exactly while the payload fits */
    for (size_t n = 0; n < STK__REC_HDR + (size_t)len && n < size; n++) {
        int r2 = stk__rec_header_decode(data, n, NULL, NULL, NULL, NULL);
        FUZZ_CHECK(r2 == STK_E_TRUNCATED, "n %zu < 16 + %u accepted (%d)", n, len, r2);
    }
    /* NULL outputs are allowed */
    FUZZ_CHECK(stk__rec_header_decode(data, size, NULL, NULL, NULL, NULL) == STK_OK, "NULL outputs");
    return 0;
}
