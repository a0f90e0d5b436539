/* SPDX-License-Identifier: MIT */
/*
 * convert.c — the CPU conversion of one sample from uint8 RGB HWC to the delivered dtype and
 * layout, used when no GPU stages the batch. The GPU kernel computes the same float32
 * expression, value = ((float)x - mean[c]) / std[c] (a true division: multiplying by a
 * precomputed 1/std rounds differently), then rounds to half / bfloat16 to nearest even.
 *
 * float16: IEEE binary16, round to nearest even, overflow to inf, subnormals kept, NaN stays a
 * (quiet) NaN with its sign. bfloat16: the top 16 bits of the float32, rounded to nearest even;
 * NaN stays a quiet NaN (the rounding add would otherwise turn some NaNs into inf).
 */
#include "convert.h"

#include <math.h>
#include <string.h>

size_t stk__dtype_size(int dtype)
{
    switch (dtype) {
    case STK_DTYPE_UINT8: return 1;
    case STK_DTYPE_FLOAT16:
    case STK_DTYPE_BFLOAT16: return 2;
    case STK_DTYPE_FLOAT32: return 4;
    default: return 0;
    }
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

uint16_t stk__f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) { /* inf or NaN */
        if (ax == 0x7F800000u)
            return sign | 0x7C00u;
        return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
    }
    if (ax >= 0x477FF000u) /* >= 65520: rounds to inf */
        return sign | 0x7C00u;
    if (ax < 0x38800000u) { /* below 2^-14: half subnormal (or zero) */
        if (ax < 0x33000000u) /* below 2^-25: rounds to zero (2^-25 itself is a tie to 0) */
            return sign;
        uint32_t e = ax >> 23;             /* 102 .. 112 */
        uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
        int shift = (int)(126 - e);        /* value = mant * 2^(e-150); half unit = 2^-24 */
        uint32_t q = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent (127 -> 15), round the 13 dropped bits to nearest even */
    uint32_t r = ax - 0x38000000u; /* exponent - 112 */
    uint32_t q = r >> 13;
    uint32_t rem = r & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* may carry into the exponent, up to 0x7C00 = inf: correct */
    return (uint16_t)(sign | q);
}

uint16_t stk__f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float norm(uint8_t v, const float *mean, const float *std, int c, int normalize)
{
    return normalize ? ((float)v - mean[c]) / std[c] : (float)v;
}

/* Element AT of DST in DTYPE (a float type) gets V, rounded to nearest even for 16-bit types. */
static inline void store(void *dst, size_t at, int dtype, float v)
{
    switch (dtype) {
    case STK_DTYPE_FLOAT32: ((float *)dst)[at] = v; break;
    case STK_DTYPE_FLOAT16: ((uint16_t *)dst)[at] = stk__f32_to_f16(v); break;
    case STK_DTYPE_BFLOAT16: ((uint16_t *)dst)[at] = stk__f32_to_bf16(v); break;
    default: break;
    }
}

void stk__convert_sample(const uint8_t *src, int h, int w, int dtype, int layout, int normalize,
                         const float mean[3], const float std[3], void *dst)
{
    size_t hw = (size_t)h * (size_t)w;
    int chw = layout == STK_NCHW;
    if (dtype == STK_DTYPE_UINT8) {
        uint8_t *o = dst;
        if (!chw) {
            memcpy(o, src, hw * 3);
            return;
        }
        for (size_t i = 0; i < hw; i++) {
            o[i] = src[3 * i];
            o[hw + i] = src[3 * i + 1];
            o[2 * hw + i] = src[3 * i + 2];
        }
        return;
    }
    for (size_t i = 0; i < hw; i++) {
        for (int c = 0; c < 3; c++) {
            float v = norm(src[3 * i + (size_t)c], mean, std, c, normalize);
            size_t at = chw ? (size_t)c * hw + i : 3 * i + (size_t)c;
            store(dst, at, dtype, v);
        }
    }
}

/* A standard normal from two uniforms (Box-Muller) */
static float normal1(stk__rng *r)
{
    double u1 = 1.0 - stk__rng_uniform(r), u2 = stk__rng_uniform(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

void stk__erase_channel_values(stk__rng *r, float value[3])
{
    for (int c = 0; c < 3; c++)
        value[c] = normal1(r);
}

void stk__erase_sample(void *dst, int h, int w, int dtype, int layout, int y, int x, int eh, int ew,
                       const float value[3], stk__rng *r)
{
    size_t hw = (size_t)h * (size_t)w;
    int chw = layout == STK_NCHW;
    for (int c = 0; c < 3; c++)
        for (int i = y; i < y + eh; i++)
            for (int j = x; j < x + ew; j++) {
                float v = r ? normal1(r) : value[c];
                size_t px = (size_t)i * (size_t)w + (size_t)j;
                size_t at = chw ? (size_t)c * hw + px : 3 * px + (size_t)c;
                if (dtype == STK_DTYPE_UINT8)
                    ((uint8_t *)dst)[at] = (uint8_t)(v > 255.f ? 255.f : v > 0.f ? v : 0.f);
                else
                    store(dst, at, dtype, v);
            }
}

void stk__convert_sample_lut(const uint8_t *src, int h, int w, int dtype, int layout,
                             const float *lut, void *dst)
{
    size_t hw = (size_t)h * (size_t)w;
    int chw = layout == STK_NCHW;
    for (int c = 0; c < 3; c++) {
        const float *t = lut + 256 * c;
        for (size_t i = 0; i < hw; i++) {
            float v = t[src[3 * i + (size_t)c]];
            size_t at = chw ? (size_t)c * hw + i : 3 * i + (size_t)c;
            store(dst, at, dtype, v);
        }
    }
}
