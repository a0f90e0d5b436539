/* SPDX-License-Identifier: MIT */
/* test_common: status strings, CRC32C against known vectors, the Philox PRNG's determinism and
 * uniformity, the bounded queue. */
#include "common.h"
#include "format.h"
#include "testutil.h"

#include <errno.h>
#include <string.h>

int main(void)
{
    /* status codes and names */
    T_CHECK(strcmp(stk_strerror(STK_OK), "success") == 0, "ok text");
    T_CHECK(strcmp(stk_status_name(STK_E_CRC), "STK_E_CRC") == 0, "name");
    T_CHECK(strcmp(stk_status_name(-EIO), "EIO") == 0, "errno name");
    T_CHECK(strstr(stk_strerror(-ENOENT), "No such file") != NULL, "errno text");
    T_CHECK(stk_version() == STK_VERSION_NUMBER, "version");

    /* CRC32C: RFC 3720 B.4 vectors and the standard check value */
    uint8_t z[32] = {0}, o[32], inc[32];
    memset(o, 0xff, sizeof o);
    for (int i = 0; i < 32; i++)
        inc[i] = (uint8_t)i;
    T_CHECK(stk__crc32c(0, "123456789", 9) == 0xE3069283u, "check value");
    T_CHECK(stk__crc32c(0, z, 32) == 0x8A9136AAu, "zeros");
    T_CHECK(stk__crc32c(0, o, 32) == 0x62A8AB43u, "ones");
    T_CHECK(stk__crc32c(0, inc, 32) == 0x46DD794Eu, "incrementing");
    /* incremental == one shot, for every split and misalignment */
    uint8_t buf[300];
    for (int i = 0; i < 300; i++)
        buf[i] = (uint8_t)(i * 31 + 7);
    uint32_t whole = stk__crc32c(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut += 13)
        T_CHECK(stk__crc32c(stk__crc32c(0, buf, cut), buf + cut, sizeof buf - cut) == whole, "split %zu", cut);

    /* record header round trip and rejection */
    uint8_t hdr[16 + 4];
    int32_t label;
    uint32_t crc, len;
    int version;
    for (int v = 1; v <= 2; v++) {
        stk__rec_header_encode(hdr, v, -1, 0xdeadbeef, 4);
        T_CHECK(!memcmp(hdr, v == 1 ? "STK1" : "STK2", 4), "magic of format %d", v);
        T_OK(stk__rec_header_decode(hdr, sizeof hdr, &version, &label, &crc, &len));
        T_CHECK(version == v && label == -1 && crc == 0xdeadbeef && len == 4, "header fields");
    }
    T_CHECK(stk__rec_header_decode(hdr, 19, NULL, NULL, NULL, NULL) == STK_E_TRUNCATED, "short value");
    hdr[3] = '3';
    T_CHECK(stk__rec_header_decode(hdr, sizeof hdr, NULL, NULL, NULL, NULL) == STK_E_FORMAT, "version 3");
    hdr[3] = '2';
    hdr[0] = 'X';
    T_CHECK(stk__rec_header_decode(hdr, sizeof hdr, NULL, NULL, NULL, NULL) == STK_E_FORMAT, "magic");
    /* format 2's checksum: CRC32C(payload || label LE || target), format 1's of the payload only */
    {
        const uint8_t rec[] = {'a', 'b', 'c', 'd', 0xfe, 0xff, 0xff, 0xff, 9, 8, 7};
        uint32_t pc = stk__crc32c(0, rec, 4);
        T_CHECK(stk__rec_crc(1, pc, -2, rec + 8, 3) == pc, "format 1: payload only");
        T_CHECK(stk__rec_crc(2, pc, -2, NULL, 0) == stk__crc32c(0, rec, 8), "format 2: label");
        T_CHECK(stk__rec_crc(2, pc, -2, rec + 8, 3) == stk__crc32c(0, rec, 11), "format 2: target");
        T_CHECK(stk__format_parse("stoker-shard 1", 14) == 1 && stk__format_parse("stoker-shard 2", 14) == 2 &&
                    !stk__format_parse("stoker-shard 3", 14) && !stk__format_parse("stoker-shard 22", 15),
                "format names");
    }
    uint8_t key[8];
    stk__rec_key(key, 0x0102030405060708ull);
    T_CHECK(key[0] == 1 && key[7] == 8 && stk__rec_key_parse(key) == 0x0102030405060708ull, "key");

    /* PRNG: same key -> same stream; different keys differ; rough uniformity */
    stk__rng a, b;
    stk__rng_init(&a, 42, 3, 7);
    stk__rng_init(&b, 42, 3, 7);
    for (int i = 0; i < 100; i++)
        T_CHECK(stk__rng_u64(&a) == stk__rng_u64(&b), "determinism");
    stk__rng_init(&a, 42, 3, 7);
    stk__rng_init(&b, 42, 3, 8);
    T_CHECK(stk__rng_u64(&a) != stk__rng_u64(&b), "index changes stream");
    stk__rng_init(&a, 1, 0, 0);
    double sum = 0;
    int hist[10] = {0};
    for (int i = 0; i < 100000; i++) {
        double u = stk__rng_uniform(&a);
        T_CHECK(u >= 0 && u < 1, "range");
        sum += u;
        hist[(int)(u * 10)]++;
    }
    T_CHECK(sum / 100000 > 0.495 && sum / 100000 < 0.505, "mean %f", sum / 100000);
    for (int i = 0; i < 10; i++)
        T_CHECK(hist[i] > 9600 && hist[i] < 10400, "bucket %d: %d", i, hist[i]);
    for (int i = 0; i < 1000; i++)
        T_CHECK(stk__rng_below(&a, 7) < 7, "below");

    /* queue: FIFO, close drains then cancels */
    stk__queue q;
    T_OK(stk__queue_init(&q, 4));
    int vals[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++)
        T_OK(stk__queue_push(&q, &vals[i], NULL));
    void *it;
    T_OK(stk__queue_pop(&q, &it, NULL));
    T_CHECK(*(int *)it == 1, "fifo");
    stk__queue_close(&q);
    T_CHECK(stk__queue_push(&q, &vals[0], NULL) == STK_E_CANCELLED, "push after close");
    for (int i = 1; i < 4; i++) {
        T_OK(stk__queue_pop(&q, &it, NULL));
        T_CHECK(*(int *)it == i + 1, "drain");
    }
    T_CHECK(stk__queue_pop(&q, &it, NULL) == STK_E_CANCELLED, "closed and empty");
    stk__queue_destroy(&q);
    printf("test_common: ok\n");
    return 0;
}
