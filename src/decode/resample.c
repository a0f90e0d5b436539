/* SPDX-License-Identifier: MIT */
/*
 * resample.c — Pillow's resampling of uint8 RGB: per-axis coefficient tables (BILINEAR,
 * BICUBIC, NEAREST) and the horizontal and vertical passes over them, portable and AVX2, with
 * Pillow's 22-bit integer arithmetic so that the same geometry gives the same bytes. augment.c
 * plans the tables for a sample's crop and runs the passes; the geometry is augcrop.c's.
 */
#include "augment.h"
#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STK_AVX2 1
#endif

#define PB 22 /* Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2 */

/*
 * The resize is Pillow's BILINEAR or BICUBIC ("antialias") resampling, re-implemented so that the
 * same geometry gives the same bytes: per output pixel, centre = in0 + (xx + 0.5) * scale, support =
 * max(scale, 1) (times 2 for BICUBIC), taps from int(centre - support + 0.5) to int(centre + support + 0.5) clipped to
 * the input, triangle (or a = -0.5 cubic) weights normalised to 1, converted to 22-bit fixed point; horizontal pass
 * first into an 8-bit intermediate (only the rows the vertical pass needs), then the vertical
 * pass. At DCT scale 8/8 a train sample therefore equals torchvision's
 * resized_crop(img, i, j, h, w, size) (+ hflip) on a Pillow image byte for byte, and an eval sample
 * Resize + CenterCrop (tests/python/test_eval_torchvision.py). At a smaller DCT scale the same
 * geometry is applied to the scaled image (the box in scaled pixels is fractional). NEAREST is
 * Pillow's pixel table as one weight-1 tap (stk__axis_nearest), always at 8/8.
 */

void stk__axis_free(stk__axis *a)
{
    free(a->start);
    free(a->count);
    free(a->k);
    free(a->pre);
}

/* Grow *P to hold N elements of SIZE bytes (contents not kept). */
int stk__scratch_reserve(void **p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = malloc(c * size);
    if (!q)
        return -1;
    free(*p);
    *p = q;
    *cap = c;
    return 0;
}

/* 1 - |x| for |x| < 1, else 0, without branches (a misprediction per output otherwise): the
 * same value (+0.0 at |x| >= 1) as the branchy form. */
static double triangle(double x)
{
    double w = 1.0 - fabs(x);
#ifdef STK_AVX2 /* x86-64: maxsd (the compilers branch on the ternary) */
    return _mm_cvtsd_f64(_mm_max_sd(_mm_set_sd(w), _mm_setzero_pd()));
#else
    return w > 0.0 ? w : 0.0;
#endif
}

/* Pillow's bicubic_filter (a = -0.5, support 2), the same expression order. */
static double bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* The XMAX weights of one output into K, tap x at (x + xmin - center + 0.5) * ss (Pillow's
 * expression, in its order); their sum. One loop per filter: the bilinear loop, which runs for
 * every tap of every output, stays free of the filter test. */
static double taps_triangle(double *k, int xmax, int xmin, double center, double ss)
{
    double ww = 0.0;
    for (int x = 0; x < xmax; x++) {
        double wt = triangle((x + xmin - center + 0.5) * ss);
        k[x] = wt;
        ww += wt;
    }
    return ww;
}

static double taps_bicubic(double *k, int xmax, int xmin, double center, double ss)
{
    double ww = 0.0;
    for (int x = 0; x < xmax; x++) {
        double wt = bicubic((x + xmin - center + 0.5) * ss);
        k[x] = wt;
        ww += wt;
    }
    return ww;
}

/* Room for OUT outputs of KSIZE taps each; resets the window to empty at END (the input's end
 * in scaled-image pixels: its size plus its shift). */
static int axis_reserve(stk__axis *a, int out, int ksize, int end)
{
    if (stk__scratch_reserve((void **)&a->start, &a->cap_start, (size_t)out, sizeof(int)) != 0 ||
        stk__scratch_reserve((void **)&a->count, &a->cap_count, (size_t)out, sizeof(int)) != 0)
        return STK_E_NOMEM;
    if (stk__scratch_reserve((void **)&a->k, &a->cap_k, (size_t)out * (size_t)ksize, sizeof(int32_t)) != 0 ||
        stk__scratch_reserve((void **)&a->pre, &a->cap_pre, (size_t)ksize, sizeof(double)) != 0)
        return STK_E_NOMEM;
    a->out = out;
    a->ksize = ksize;
    a->lo = end;
    a->hi = 0;
    a->maxcount = 1;
    return STK_OK;
}

/* Padding outputs read nothing, but the AVX2 pass still loads (and weighs by 0) maxcount taps:
 * point them at the first input used. */
static void axis_point_padding(stk__axis *a)
{
    for (int xx = 0; xx < a->out; xx++)
        if (a->count[xx] == 0)
            a->start[xx] = a->lo;
}

/*
 * Pillow's NEAREST resize (Image.resize goes through ImagingScaleAffine): output r of the resized
 * image reads input COORD(xo) where xo starts at scale / 2 and grows by SCALE per output, a
 * running double sum (not (r + 0.5) * scale: the sums round differently, and Pillow's bytes are
 * the sum's). As one tap of weight 1 through the same passes: the same bytes, no second path.
 * VIRT_SIZE outputs in the resized image, OUT of them from OUT_OFF; the rest is zero padding.
 */
int stk__axis_nearest(stk__axis *a, int out, double scale, int out_off, int in_size, int shift, int virt_size)
{
    if (axis_reserve(a, out, 1, in_size + shift) != STK_OK)
        return STK_E_NOMEM;
    memset(a->count, 0, (size_t)out * sizeof(int));
    memset(a->k, 0, (size_t)out * sizeof(int32_t));
    double xo = scale * 0.5;
    int end = STK__MIN(virt_size, out_off + out);
    for (int r = 0; r < end; r++, xo += scale) {
        int xin = xo < 0.0 ? -1 : (int)xo, xx = r - out_off;
        if (xx < 0 || xin < 0 || xin >= in_size)
            continue; /* Pillow leaves such outputs at the fill, 0 */
        a->start[xx] = xin + shift;
        a->count[xx] = 1;
        a->k[xx] = 1 << PB;
        a->lo = STK__MIN(a->lo, xin + shift);
        a->hi = STK__MAX(a->hi, xin + 1 + shift);
    }
    axis_point_padding(a);
    return STK_OK;
}

/*
 * Pillow's precompute_coeffs + normalize_coeffs_8bpc for OUT outputs with FILTER (bilinear:
 * triangle, support 1; bicubic: support 2): centre of output xx = in0 + (out_off + xx + 0.5) *
 * scale over an input of IN_SIZE pixels; SHIFT is added to every start (the input's position in
 * the scaled image).
 */
int stk__axis_build(stk__axis *a, int filter, int out, double in0, double scale, int out_off, int in_size,
                    int shift, int virt_size)
{
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = (filter == STK_INTERP_BICUBIC ? 2.0 : 1.0) * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    if (axis_reserve(a, out, ksize, in_size + shift) != STK_OK)
        return STK_E_NOMEM;
    double ss = 1.0 / filterscale;
    for (int xx = 0; xx < out; xx++) {
        if (virt_size > 0 && (out_off + xx < 0 || out_off + xx >= virt_size)) {
            a->start[xx] = 0; /* zero padding (eval output larger than the resized image) */
            a->count[xx] = 0;
            memset(a->k + (size_t)xx * (size_t)ksize, 0, (size_t)ksize * sizeof(int32_t));
            continue;
        }
        double center = in0 + (out_off + xx + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        if (xmax <= 0) { /* cannot happen for centres inside the input; be safe */
            xmin = STK__MIN(STK__MAX(xmin, 0), in_size - 1);
            xmax = 1;
        }
        double *k = a->pre;
        double ww = filter == STK_INTERP_BICUBIC ? taps_bicubic(k, xmax, xmin, center, ss)
                                                 : taps_triangle(k, xmax, xmin, center, ss);
        int32_t *kk = a->k + (size_t)xx * (size_t)ksize;
        for (int x = 0; x < ksize; x++) { /* one loop: a separate zero fill became a memset call */
            int32_t q = 0;
            if (x < xmax) {
                double v = ww != 0.0 ? k[x] / ww : k[x];
                q = v < 0 ? (int32_t)(-0.5 + v * (1 << PB)) : (int32_t)(0.5 + v * (1 << PB));
            }
            kk[x] = q;
        }
        if (ww == 0.0 && xmax == 1)
            kk[0] = 1 << PB;
        a->start[xx] = xmin + shift;
        a->count[xx] = xmax;
        a->maxcount = STK__MAX(a->maxcount, xmax);
        a->lo = STK__MIN(a->lo, xmin + shift);
        a->hi = STK__MAX(a->hi, xmin + xmax + shift);
    }
    axis_point_padding(a);
    return STK_OK;
}

void stk__axis_rebase(stk__axis *a, int origin)
{
    for (int i = 0; i < a->out; i++)
        a->start[i] -= origin;
}

static inline uint8_t clip8(int32_t v)
{
    if (v <= 0)
        return 0;
    if (v >= (255 << PB))
        return 255;
    return (uint8_t)(v >> PB);
}

/* Horizontal pass over ROWS rows of SRC (STRIDE bytes apart) into DST (rows DSTRIDE apart). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void pass_h(const stk__axis *a, const uint8_t *src, size_t stride, int rows, uint8_t *dst, size_t dstride,
                   int flip)
{
    int ow = a->out, ks = a->ksize;
    for (int y = 0; y < rows; y++) {
        const uint8_t *in = src + (size_t)y * stride;
        uint8_t *o = dst + (size_t)y * dstride;
        for (int xx = 0; xx < ow; xx++) {
            const int32_t *k = a->k + (size_t)xx * (size_t)ks;
            const uint8_t *p = in + (size_t)a->start[xx] * 3;
            int32_t s0 = 1 << (PB - 1), s1 = s0, s2 = s0;
            int n = a->count[xx];
            for (int t = 0; t < n; t++, p += 3) {
                s0 += p[0] * k[t];
                s1 += p[1] * k[t];
                s2 += p[2] * k[t];
            }
            uint8_t *q = o + (size_t)(flip ? ow - 1 - xx : xx) * 3;
            q[0] = clip8(s0);
            q[1] = clip8(s1);
            q[2] = clip8(s2);
        }
    }
}

/* Vertical pass: SRC rows of n = width * 3 bytes (STRIDE apart) into DST (out rows of n). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void pass_v(const stk__axis *a, const uint8_t *src, size_t stride, int n, uint8_t *dst, int32_t *acc)
{
    int ks = a->ksize;
    for (int yy = 0; yy < a->out; yy++) {
        const int32_t *k = a->k + (size_t)yy * (size_t)ks;
        for (int i = 0; i < n; i++)
            acc[i] = 1 << (PB - 1);
        int cnt = a->count[yy];
        const uint8_t *row = src + (size_t)a->start[yy] * stride;
        for (int t = 0; t < cnt; t++, row += stride) {
            int32_t kt = k[t];
            for (int i = 0; i < n; i++)
                acc[i] += row[i] * kt;
        }
        uint8_t *o = dst + (size_t)yy * (size_t)n;
        for (int i = 0; i < n; i++)
            o[i] = clip8(acc[i]);
    }
}

/*
 * Speed. The decoder hands the window over in strips of 8 rows (stk__dec_window_rows) and the
 * horizontal pass runs on each strip while it is in L1. With AVX2 that pass is transposed: the
 * strip's bytes become byte columns of 8 rows, and an output column is a weighted sum of whole
 * columns, 8 rows per 32-bit multiply-add with the broadcast coefficient, no shuffle per tap
 * (strip_h_t8). The vertical pass is row-wise already: 64 output bytes per step. Both use
 * Pillow's integer arithmetic exactly; the portable passes are the reference (test_augment
 * compares them). Both run at about 0.4 vector instructions per 32-bit product, which exact
 * 22-bit arithmetic needs (a vpmaddwd formulation needs split coefficients and pays the same).
 */
#ifdef STK_AVX2
/*
 * AVX2 versions of the two passes: the same 22-bit integer arithmetic (so the same bytes).
 * Horizontal: see strip_h_t8. Vertical: 32 output bytes per step, the taps' rows accumulated in
 * registers. Chosen at run time (__builtin_cpu_supports).
 */
/*
 * The horizontal pass, transposed. Per strip of 8 rows: transpose the strip's bytes so that each
 * byte column (pixel x, channel c) becomes 8 contiguous bytes, its 8 rows (strip_t8); then output
 * x of channel c is the weighted sum of whole byte columns, 8 rows at once in 32-bit lanes
 * (vpmulld with the broadcast 22-bit coefficient: exact, as the portable pass), with no shuffle
 * per tap; four outputs' 8 x 3 results are packed to bytes and transposed back into the rows.
 * Every output takes the axis's largest tap count (the extra taps weigh 0): a fixed trip count,
 * no branch misses.
 */
/* T[b] = bytes b of rows R[0..7], for b < nb rounded up to 32 (reads up to 31 bytes past nb). */
__attribute__((target("avx2"))) static void strip_t8(const uint8_t *const *r, int nb, uint8_t *t)
{
    for (int b = 0; b < nb; b += 32) {
#define LD(i) _mm256_loadu_si256((const __m256i *)(r[i] + b))
        __m256i a0 = LD(0), a1 = LD(1), a2 = LD(2), a3 = LD(3), a4 = LD(4), a5 = LD(5), a6 = LD(6), a7 = LD(7);
#undef LD
        /* per 128-bit lane: bytes j of two rows, then four, then eight */
        __m256i b0 = _mm256_unpacklo_epi8(a0, a1), b1 = _mm256_unpackhi_epi8(a0, a1);
        __m256i b2 = _mm256_unpacklo_epi8(a2, a3), b3 = _mm256_unpackhi_epi8(a2, a3);
        __m256i b4 = _mm256_unpacklo_epi8(a4, a5), b5 = _mm256_unpackhi_epi8(a4, a5);
        __m256i b6 = _mm256_unpacklo_epi8(a6, a7), b7 = _mm256_unpackhi_epi8(a6, a7);
        __m256i c0 = _mm256_unpacklo_epi16(b0, b2), c1 = _mm256_unpackhi_epi16(b0, b2);
        __m256i c2 = _mm256_unpacklo_epi16(b1, b3), c3 = _mm256_unpackhi_epi16(b1, b3);
        __m256i c4 = _mm256_unpacklo_epi16(b4, b6), c5 = _mm256_unpackhi_epi16(b4, b6);
        __m256i c6 = _mm256_unpacklo_epi16(b5, b7), c7 = _mm256_unpackhi_epi16(b5, b7);
        __m256i d[8] = {_mm256_unpacklo_epi32(c0, c4), _mm256_unpackhi_epi32(c0, c4),
                        _mm256_unpacklo_epi32(c1, c5), _mm256_unpackhi_epi32(c1, c5),
                        _mm256_unpacklo_epi32(c2, c6), _mm256_unpackhi_epi32(c2, c6),
                        _mm256_unpacklo_epi32(c3, c7), _mm256_unpackhi_epi32(c3, c7)};
        uint8_t *o = t + (size_t)b * 8;
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) { /* d[i]: columns 2i, 2i+1 (low lane), 16 + 2i, 17 + 2i */
            _mm_storeu_si128((__m128i *)(o + i * 16), _mm256_castsi256_si128(d[i]));
            _mm_storeu_si128((__m128i *)(o + 128 + i * 16), _mm256_extracti128_si256(d[i], 1));
        }
    }
}

/* 8 rows of output X (3 channels, 22-bit sums of G taps from T), as bytes: per 128-bit lane
 * (rows 0-3, rows 4-7) one 32-bit word per row holding c0 c1 c2 0. */
__attribute__((target("avx2"), always_inline)) static inline __m256i out8_t8(const uint8_t *t, const int32_t *k, int g,
                                                               __m256i bias, __m256i px)
{
    __m256i s0 = bias, s1 = bias, s2 = bias;
#pragma GCC unroll 8
    for (int i = 0; i < g; i++, t += 24) {
        __m256i kk = _mm256_set1_epi32(k[i]);
        s0 = _mm256_add_epi32(s0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)t)), kk));
        s1 = _mm256_add_epi32(s1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(t + 8))), kk));
        s2 = _mm256_add_epi32(s2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(t + 16))), kk));
    }
    s0 = _mm256_srai_epi32(s0, PB), s1 = _mm256_srai_epi32(s1, PB), s2 = _mm256_srai_epi32(s2, PB);
    /* saturating packs clip as clip8 does; per lane: c0 rows, c1 rows, c2 rows, c2 rows */
    __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(s0, s1), _mm256_packs_epi32(s2, s2));
    return _mm256_shuffle_epi8(v, px);
}

/* The scratch of the AVX2 horizontal pass: T (the window's byte columns rounded up to 32, then
 * maxcount * 3 + 32 zeroed ones, 8 bytes each), then per output in storage order (flip applied)
 * the offset of its first tap in T and of its coefficients (ow rounded up to 4, each). */
static size_t t8_cols(const stk__axis *a) { return ((size_t)(a->hi - a->lo) * 3 + 31) / 32 * 32 + (size_t)a->maxcount * 3 + 32; }
static int32_t *t8_offsets(const stk__axis *a, uint8_t *t) { return (int32_t *)(void *)(t + t8_cols(a) * 8); }

/* One strip: rows R[0..7] into DST rows 0..7 (DSTRIDE apart), outputs in storage order (pos).
 * Writes each row up to 3 * (ow rounded up to 4) + 4 bytes. T: the scratch, prepared by
 * resize_h_prepare. */
__attribute__((target("avx2"), always_inline)) static inline void strip_h_t8_g(const stk__axis *a, const uint8_t *const *r,
                                                                               uint8_t *o, size_t dstride, int flip,
                                                                               uint8_t *t, int g)
{
    int ow = a->out, nb = (a->hi - a->lo) * 3;
    STK__UNUSED(flip);
    const __m256i bias = _mm256_set1_epi32(1 << (PB - 1));
    const __m256i px = _mm256_setr_epi8(0, 4, 8, -1, 1, 5, 9, -1, 2, 6, 10, -1, 3, 7, 11, -1,
                                        0, 4, 8, -1, 1, 5, 9, -1, 2, 6, 10, -1, 3, 7, 11, -1);
    const __m256i pack12 = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
                                            0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    strip_t8(r, nb, t);
    const int32_t *off = t8_offsets(a, t), *koff = off + (ow + 3) / 4 * 4;
    for (int pos = 0; pos < ow; pos += 4) {
        __m256i v[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            v[j] = out8_t8(t + off[pos + j], a->k + koff[pos + j], g, bias, px);
        /* 4 x 4 words per lane: outputs pos..pos+3 of row i (low lane) and row 4 + i */
        __m256i u0 = _mm256_unpacklo_epi32(v[0], v[1]), u1 = _mm256_unpackhi_epi32(v[0], v[1]);
        __m256i u2 = _mm256_unpacklo_epi32(v[2], v[3]), u3 = _mm256_unpackhi_epi32(v[2], v[3]);
        __m256i w[4] = {_mm256_unpacklo_epi64(u0, u2), _mm256_unpackhi_epi64(u0, u2),
                        _mm256_unpacklo_epi64(u1, u3), _mm256_unpackhi_epi64(u1, u3)};
        uint8_t *q = o + (size_t)pos * 3;
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256i z = _mm256_shuffle_epi8(w[i], pack12);
            _mm_storeu_si128((__m128i *)(q + (size_t)i * dstride), _mm256_castsi256_si128(z));
            _mm_storeu_si128((__m128i *)(q + (size_t)(i + 4) * dstride), _mm256_extracti128_si256(z, 1));
        }
    }
}

__attribute__((target("avx2"))) static void strip_h_t8(const stk__axis *a, const uint8_t *const *r, uint8_t *o,
                                                        size_t dstride, int flip, uint8_t *t)
{
    switch (a->maxcount) { /* constant trip counts for the common tap counts */
    case 1: strip_h_t8_g(a, r, o, dstride, flip, t, 1); break;
    case 2: strip_h_t8_g(a, r, o, dstride, flip, t, 2); break;
    case 3: strip_h_t8_g(a, r, o, dstride, flip, t, 3); break;
    case 4: strip_h_t8_g(a, r, o, dstride, flip, t, 4); break;
    case 5: strip_h_t8_g(a, r, o, dstride, flip, t, 5); break;
    default: strip_h_t8_g(a, r, o, dstride, flip, t, a->maxcount); break;
    }
}

__attribute__((target("avx2"))) static inline __m128i clip16_avx2(__m256i s0, __m256i s1)
{
    __m256i p = _mm256_packs_epi32(_mm256_srai_epi32(s0, PB), _mm256_srai_epi32(s1, PB));
    p = _mm256_permute4x64_epi64(p, 0xD8);
    return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

/* 8 bytes at P as 32-bit lanes (vpmovzxbd from memory) */
#define STK_LD8(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p)))

/* One output row from CNT source rows R0, STRIDE apart, weights KK (broadcast): N bytes. */
__attribute__((target("avx2"), always_inline)) static inline void row_v_avx2(const uint8_t *row0, size_t stride,
                                                                             const __m256i *kk, int cnt, int n,
                                                                             uint8_t *o, __m256i bias)
{
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256i s0 = bias, s1 = bias, s2 = bias, s3 = bias, s4 = bias, s5 = bias, s6 = bias, s7 = bias;
        const uint8_t *r = row0 + i;
#pragma GCC unroll 4
        for (int t = 0; t < cnt; t++, r += stride) {
            s0 = _mm256_add_epi32(s0, _mm256_mullo_epi32(STK_LD8(r), kk[t]));
            s1 = _mm256_add_epi32(s1, _mm256_mullo_epi32(STK_LD8(r + 8), kk[t]));
            s2 = _mm256_add_epi32(s2, _mm256_mullo_epi32(STK_LD8(r + 16), kk[t]));
            s3 = _mm256_add_epi32(s3, _mm256_mullo_epi32(STK_LD8(r + 24), kk[t]));
            s4 = _mm256_add_epi32(s4, _mm256_mullo_epi32(STK_LD8(r + 32), kk[t]));
            s5 = _mm256_add_epi32(s5, _mm256_mullo_epi32(STK_LD8(r + 40), kk[t]));
            s6 = _mm256_add_epi32(s6, _mm256_mullo_epi32(STK_LD8(r + 48), kk[t]));
            s7 = _mm256_add_epi32(s7, _mm256_mullo_epi32(STK_LD8(r + 56), kk[t]));
        }
        _mm_storeu_si128((__m128i *)(o + i), clip16_avx2(s0, s1));
        _mm_storeu_si128((__m128i *)(o + i + 16), clip16_avx2(s2, s3));
        _mm_storeu_si128((__m128i *)(o + i + 32), clip16_avx2(s4, s5));
        _mm_storeu_si128((__m128i *)(o + i + 48), clip16_avx2(s6, s7));
    }
    for (; i + 16 <= n; i += 16) {
        __m256i s0 = bias, s1 = bias;
        const uint8_t *r = row0 + i;
        for (int t = 0; t < cnt; t++, r += stride) {
            s0 = _mm256_add_epi32(s0, _mm256_mullo_epi32(STK_LD8(r), kk[t]));
            s1 = _mm256_add_epi32(s1, _mm256_mullo_epi32(STK_LD8(r + 8), kk[t]));
        }
        _mm_storeu_si128((__m128i *)(o + i), clip16_avx2(s0, s1));
    }
    for (; i < n; i++) {
        int32_t acc = 1 << (PB - 1);
        const uint8_t *r = row0 + i;
        for (int t = 0; t < cnt; t++, r += stride)
            acc += *r * _mm256_extract_epi32(kk[t], 0);
        o[i] = clip8(acc);
    }
}

__attribute__((target("avx2"))) static void pass_v_avx2(const stk__axis *a, const uint8_t *src, size_t stride,
                                                         int n, uint8_t *dst)
{
    int ks = a->ksize;
    const __m256i bias = _mm256_set1_epi32(1 << (PB - 1));
    for (int yy = 0; yy < a->out; yy++) {
        const int32_t *k = a->k + (size_t)yy * (size_t)ks;
        int cnt = a->count[yy];
        const uint8_t *row0 = src + (size_t)a->start[yy] * stride;
        uint8_t *o = dst + (size_t)yy * (size_t)n;
        __m256i kk[64];
        if (cnt > 64) { /* (1/32 downscales and beyond: the portable arithmetic, row by row) */
            for (int i = 0; i < n; i++) {
                int32_t acc = 1 << (PB - 1);
                const uint8_t *r = row0 + i;
                for (int t = 0; t < cnt; t++, r += stride)
                    acc += *r * k[t];
                o[i] = clip8(acc);
            }
            continue;
        }
        for (int t = 0; t < cnt; t++)
            kk[t] = _mm256_set1_epi32(k[t]);
        switch (cnt) { /* constant trip counts for the common tap counts */
        case 1: row_v_avx2(row0, stride, kk, 1, n, o, bias); break;
        case 2: row_v_avx2(row0, stride, kk, 2, n, o, bias); break;
        case 3: row_v_avx2(row0, stride, kk, 3, n, o, bias); break;
        case 4: row_v_avx2(row0, stride, kk, 4, n, o, bias); break;
        default: row_v_avx2(row0, stride, kk, cnt, n, o, bias); break;
        }
    }
}

static _Atomic int simd_allowed = 1;

static int have_avx2(void)
{
    static _Atomic int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v && atomic_load_explicit(&simd_allowed, memory_order_relaxed);
}
#endif

int stk__aug_set_simd(int enable)
{
#ifdef STK_AVX2
    atomic_store_explicit(&simd_allowed, enable ? 1 : 0, memory_order_relaxed);
    return have_avx2();
#else
    STK__UNUSED(enable);
    return 0;
#endif
}

/* Bytes of scratch the horizontal pass needs (see t8_cols, t8_offsets). */
size_t stk__hscratch_size(const stk__axis *a)
{
    return (((size_t)(a->hi - a->lo) * 3 + 31) / 32 * 32 + (size_t)a->maxcount * 3 + 32) * 8 +
           (size_t)(a->out + 3) / 4 * 4 * 2 * sizeof(int32_t);
}

/* Before the first strip of a sample: the taps past the window (weight 0) read zeroed slack;
 * the AVX2 pass's per-output offsets (storage order: with flip, position pos takes the
 * coefficients of output ow - 1 - pos; positions past ow repeat the last one). */
void stk__resize_h_prepare(const stk__axis *a, uint8_t *scratch, int flip)
{
    size_t nt = ((size_t)(a->hi - a->lo) * 3 + 31) / 32 * 32;
    memset(scratch + nt * 8, 0, ((size_t)a->maxcount * 3 + 32) * 8);
#ifdef STK_AVX2
    int ow = a->out, ow4 = (ow + 3) / 4 * 4;
    int32_t *off = t8_offsets(a, scratch), *koff = off + ow4;
    for (int pos = 0; pos < ow4; pos++) {
        int p = STK__MIN(pos, ow - 1), x = flip ? ow - 1 - p : p;
        off[pos] = a->start[x] * 24;
        koff[pos] = x * a->ksize;
    }
#else
    STK__UNUSED(flip);
#endif
}

/* Horizontal pass over window rows Y0 .. Y0 + N - 1 (N <= 8; Y0 a multiple of 8) at SRC, rows
 * STRIDE apart with at least 32 bytes readable past the last row's window, into DST's rows Y0 ..
 * (the AVX2 pass writes all 8 rows of the strip: see tmp_rows). */
void stk__resize_h_strip(const stk__axis *a, const uint8_t *src, size_t stride, int y0, int n, uint8_t *dst,
                         size_t dstride, int flip, uint8_t *scratch)
{
    uint8_t *o = dst + (size_t)y0 * dstride;
#ifdef STK_AVX2
    if (have_avx2()) {
        const uint8_t *r[8];
        for (int i = 0; i < 8; i++) /* a short last strip repeats its last row */
            r[i] = src + (size_t)STK__MIN(i, n - 1) * stride;
        strip_h_t8(a, r, o, dstride, flip, scratch);
        return;
    }
#endif
    STK__UNUSED(scratch);
    pass_h(a, src, stride, n, o, dstride, flip);
}

/* The whole window (ROWS rows) in strips. */
void stk__resize_h(const stk__axis *a, const uint8_t *src, size_t stride, int rows, uint8_t *dst,
                   size_t dstride, int flip, uint8_t *scratch)
{
    stk__resize_h_prepare(a, scratch, flip);
    for (int y0 = 0; y0 < rows; y0 += 8)
        stk__resize_h_strip(a, src + (size_t)y0 * stride, stride, y0, STK__MIN(rows - y0, 8), dst, dstride,
                            flip, scratch);
}

void stk__resize_v(const stk__axis *a, const uint8_t *src, size_t stride, int n, uint8_t *dst, int32_t *acc)
{
#ifdef STK_AVX2
    if (have_avx2()) {
        pass_v_avx2(a, src, stride, n, dst);
        return;
    }
#endif
    pass_v(a, src, stride, n, dst, acc);
}
