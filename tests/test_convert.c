/* SPDX-License-Identifier: MIT */
/* test_convert.c — stk__convert_sample layouts and values, float16/bfloat16 rounding.
 *  - every dtype x layout x normalise: element (c, y, x) lands where the layout says and holds
 *    ((float)x - mean[c]) / std[c] (a division) rounded to the dtype;
 *  - float16: against the compiler's _Float16 conversion (round to nearest even) over 2^24
 *    float32 bit patterns spread over all exponents, plus hand-checked cases: ties to even,
 *    the largest finite value, overflow to inf, subnormals, signed zero, NaN stays NaN;
 *  - bfloat16: hand-checked ties, overflow to inf, NaN payloads that the rounding add would
 *    turn into inf stay NaN.
 * (tests/python/test_convert_numpy.py checks the same against NumPy.) */
#include "testutil.h"
#include "augment.h"
#include "convert.h"

#include <math.h>
#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void layouts(void)
{
    enum { H = 5, W = 7 };
    uint8_t src[H * W * 3];
    for (int i = 0; i < H * W * 3; i++)
        src[i] = (uint8_t)(i * 37 + 11);
    const float mean[3] = {123.675f, 116.28f, 103.53f}, std[3] = {58.395f, 57.12f, 57.375f};
    for (int dt = 0; dt < 4; dt++)
        for (int layout = 0; layout < 2; layout++)
            for (int norm = 0; norm < 2; norm++) {
                uint8_t dst[H * W * 3 * 4];
                memset(dst, 0xAB, sizeof dst);
                stk__convert_sample(src, H, W, dt, layout, norm, mean, std, dst);
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W; x++)
                        for (int c = 0; c < 3; c++) {
                            uint8_t v = src[(y * W + x) * 3 + c];
                            size_t at = layout == STK_NCHW ? (size_t)(c * H * W + y * W + x)
                                                           : (size_t)((y * W + x) * 3 + c);
                            volatile float num = (float)v - mean[c];
                            volatile float fv = norm ? num / std[c] : (float)v;
                            switch (dt) {
                            case STK_DTYPE_UINT8:
                                T_CHECK(dst[at] == v, "uint8 layout %d", layout);
                                break;
                            case STK_DTYPE_FLOAT32: {
                                float g;
                                memcpy(&g, dst + at * 4, 4);
                                T_CHECK(bits(g) == bits(fv), "f32 layout %d norm %d at %zu: %g vs %g",
                                        layout, norm, at, g, (double)fv);
                                break;
                            }
                            case STK_DTYPE_FLOAT16:
                            case STK_DTYPE_BFLOAT16: {
                                uint16_t g;
                                memcpy(&g, dst + at * 2, 2);
                                uint16_t want = dt == STK_DTYPE_FLOAT16 ? stk__f32_to_f16(fv) : stk__f32_to_bf16(fv);
                                T_CHECK(g == want, "dtype %d layout %d at %zu", dt, layout, at);
                                break;
                            }
                            }
                        }
                T_CHECK(stk__dtype_size(dt) > 0, "size");
            }
    T_CHECK(stk__dtype_size(99) == 0, "unknown dtype");
}

static void f16_cases(void)
{
    struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3C00}, {-2.0f, 0xC000},
        {65504.0f, 0x7BFF}, {65519.99f, 0x7BFF}, {65520.0f, 0x7C00}, {1e10f, 0x7C00}, {-1e10f, 0xFC00},
        {0x1p-14f, 0x0400}, {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.8p-25f, 0x0001},
        {0x1.8p-24f, 0x0002}, /* 1.5 units: tie to even (2) */
        {0x1.002p0f, 0x3C00},  /* exactly half an f16 ulp above 1: tie to even (down) */
        {0x1.006p0f, 0x3C02},  /* 3/2 ulp: tie to even (up) */
        {0x1.0021p0f, 0x3C01}, /* just above the tie: up */
        {(float)INFINITY, 0x7C00}, {-(float)INFINITY, 0xFC00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        T_CHECK(stk__f32_to_f16(cases[i].f) == cases[i].h, "f16(%a) = %04x, want %04x", (double)cases[i].f,
                stk__f32_to_f16(cases[i].f), cases[i].h);
    uint16_t n = stk__f32_to_f16(from_bits(0x7FC00000u));
    T_CHECK((n & 0x7C00) == 0x7C00 && (n & 0x3FF), "NaN -> %04x", n);
    n = stk__f32_to_f16(from_bits(0xFF800001u)); /* NaN whose payload is only in the low bits */
    T_CHECK((n & 0x7C00) == 0x7C00 && (n & 0x3FF) && (n & 0x8000), "signalling NaN -> %04x", n);
#if defined(__FLT16_MAX__)
    uint64_t checked = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 1021) {
        float f = from_bits((uint32_t)u);
        if (isnan(f))
            continue;
        _Float16 h = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        uint16_t got = stk__f32_to_f16(f);
        if (got != hb)
            T_FAIL("f16(%08llx) = %04x, compiler says %04x", (unsigned long long)u, got, hb);
        checked++;
    }
    printf("f16: %llu values equal the compiler's _Float16 conversion\n", (unsigned long long)checked);
#else
    printf("f16: no _Float16 in this compiler; hand-checked cases only\n");
#endif
}

static void bf16_cases(void)
{
    struct { uint32_t f; uint16_t b; } cases[] = {
        {0x3F800000u, 0x3F80}, {0x3F808000u, 0x3F80}, /* tie, even stays */
        {0x3F818000u, 0x3F82},                         /* tie, odd rounds up */
        {0x3F808001u, 0x3F81}, {0x7F7FFFFFu, 0x7F80},  /* max float rounds to inf */
        {0x80000000u, 0x8000}, {0x7F800000u, 0x7F80}, {0xFF800000u, 0xFF80},
        {0x00000001u, 0x0000}, {0x00018000u, 0x0002},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        T_CHECK(stk__f32_to_bf16(from_bits(cases[i].f)) == cases[i].b, "bf16(%08x) = %04x, want %04x",
                cases[i].f, stk__f32_to_bf16(from_bits(cases[i].f)), cases[i].b);
    static const uint32_t nans[] = {0x7FC00000u, 0x7FFFFFFFu, 0x7F800001u, 0xFFFF8000u, 0x7F80FFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t b = stk__f32_to_bf16(from_bits(nans[i]));
        T_CHECK((b & 0x7F80) == 0x7F80 && (b & 0x7F), "bf16(NaN %08x) = %04x is not NaN", nans[i], b);
    }
}

int main(void)
{
    layouts();
    f16_cases();
    bf16_cases();
    printf("ok\n");
    return 0;
}
