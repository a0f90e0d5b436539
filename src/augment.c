/*
 * augment.c — one sample: crop parameters, crop-window decode at a DCT scale, antialiased
 * resize and flip into the sample's uint8 RGB HWC slot.
 *
 * Crop parameters are torchvision's, drawn from the Philox stream keyed (seed, epoch, index):
 *   train  RandomResizedCrop.get_params: ten tries of target_area = area * U(scale),
 *          aspect = exp(U(log ratio)), w = round(sqrt(target_area * aspect)),
 *          h = round(sqrt(target_area / aspect)) (round half to even, as Python's round()),
 *          accepted when 0 < w <= W and 0 < h <= H, then i = randint(0, H - h),
 *          j = randint(0, W - w) (inclusive); else the centre crop clamped to the ratio range.
 *          Then flip when U(0,1) < flip_prob. The draws happen in that order, always.
 *   eval   Resize(resize): shorter side to `resize`, the other int(resize * long / short);
 *          CenterCrop(out): top = int(round((h - out_h) / 2.0)), likewise left.
 *
 * The resize is Pillow's BILINEAR ("antialias") resampling, re-implemented so that the same
 * geometry gives the same bytes: per output pixel, centre = in0 + (xx + 0.5) * scale, support =
 * max(scale, 1), taps from int(centre - support + 0.5) to int(centre + support + 0.5) clipped to
 * the input, triangle weights normalised to 1, converted to 22-bit fixed point; horizontal pass
 * first into an 8-bit intermediate (only the rows the vertical pass needs), then the vertical
 * pass. At DCT scale 8/8 a train sample therefore equals torchvision's
 * resized_crop(img, i, j, h, w, size) (+ hflip) on a Pillow image byte for byte, and an eval sample
 * Resize + CenterCrop (tests/python/test_eval_torchvision.py). At a smaller DCT scale the same
 * geometry is applied to the scaled image (the box in scaled pixels is fractional).
 *
 * The coefficient tables are built first, per call; they say exactly which source columns and
 * rows the output needs, and only that window is decoded (train: the crop box; eval: the centre
 * window plus the filter's support). All scratch lives in the worker context and only grows.
 */
#include "augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STK_AVX2 1
#endif

#define PB 22 /* Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2 */

void stk__aug_config_default(stk__aug_config *c)
{
    memset(c, 0, sizeof *c);
    c->mode = STK_MODE_TRAIN;
    c->out_h = 224;
    c->out_w = 224;
    c->resize = 256;
    c->flip_prob = 0.5;
    c->scale_min = 0.08;
    c->scale_max = 1.0;
    c->ratio_min = 3.0 / 4.0;
    c->ratio_max = 4.0 / 3.0;
    c->max_pixels = 89478485;
    c->strict = 0;
    c->dct_scaling = 1;
}

/* ---- crop parameters -------------------------------------------------------------------------- */

static void eval_crop(const stk__aug_config *c, int W, int H, stk__crop *o)
{
    int shorter = W <= H ? W : H, longer = W <= H ? H : W;
    int ns = c->resize;
    int nl = (int)((double)((int64_t)ns * longer) / (double)shorter);
    if (nl < 1)
        nl = 1;
    int nw = W <= H ? ns : nl, nh = W <= H ? nl : ns;
    o->resized_w = nw;
    o->resized_h = nh;
    /* CenterCrop: an output larger than the image is zero-padded, (crop - size) // 2 before */
    o->off_x = c->out_w > nw ? -((c->out_w - nw) / 2) : (int)rint((nw - c->out_w) / 2.0);
    o->off_y = c->out_h > nh ? -((c->out_h - nh) / 2) : (int)rint((nh - c->out_h) / 2.0);
    double sx = (double)W / nw, sy = (double)H / nh;
    int x0 = (int)floor(o->off_x * sx), y0 = (int)floor(o->off_y * sy);
    int x1 = (int)ceil((o->off_x + c->out_w) * sx), y1 = (int)ceil((o->off_y + c->out_h) * sy);
    x0 = STK__MAX(x0, 0), y0 = STK__MAX(y0, 0);
    x1 = STK__MIN(x1, W), y1 = STK__MIN(y1, H);
    o->x = x0, o->y = y0;
    o->w = STK__MAX(x1 - x0, 1), o->h = STK__MAX(y1 - y0, 1);
}

void stk__crop_params(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index,
                      int width, int height, stk__crop *out)
{
    memset(out, 0, sizeof *out);
    if (c->mode == STK_MODE_EVAL) {
        eval_crop(c, width, height, out);
        return;
    }
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    double area = (double)width * (double)height;
    double lr0 = log(c->ratio_min), lr1 = log(c->ratio_max);
    for (int t = 0; t < 10; t++) {
        double ta = area * (c->scale_min + (c->scale_max - c->scale_min) * stk__rng_uniform(&r));
        double ar = exp(lr0 + (lr1 - lr0) * stk__rng_uniform(&r));
        double fw = rint(sqrt(ta * ar)), fh = rint(sqrt(ta / ar));
        if (fw > 0 && fw <= width && fh > 0 && fh <= height) {
            int w = (int)fw, h = (int)fh;
            out->y = (int)stk__rng_below(&r, (uint64_t)(height - h + 1));
            out->x = (int)stk__rng_below(&r, (uint64_t)(width - w + 1));
            out->w = w;
            out->h = h;
            goto flip;
        }
    }
    out->fallback = 1;
    {
        double in_ratio = (double)width / (double)height;
        double rmin = STK__MIN(c->ratio_min, c->ratio_max), rmax = STK__MAX(c->ratio_min, c->ratio_max);
        int w, h;
        if (in_ratio < rmin) {
            w = width;
            h = (int)rint(w / rmin);
        } else if (in_ratio > rmax) {
            h = height;
            w = (int)rint(h * rmax);
        } else {
            w = width;
            h = height;
        }
        w = STK__MAX(STK__MIN(w, width), 1);
        h = STK__MAX(STK__MIN(h, height), 1);
        out->w = w;
        out->h = h;
        out->y = (height - h) / 2;
        out->x = (width - w) / 2;
    }
flip:
    out->flip = stk__rng_uniform(&r) < c->flip_prob;
}

int stk__plan_scale(const stk__aug_config *c, const stk__crop *crop, int width, int height)
{
    if (!c->dct_scaling)
        return 8;
    int64_t cw = crop->w, ch = crop->h, tw = c->out_w, th = c->out_h;
    if (c->mode == STK_MODE_EVAL && crop->resized_w > 0) {
        cw = width, ch = height, tw = crop->resized_w, th = crop->resized_h;
    }
    for (int m = 1; m < 8; m *= 2)
        if (cw * m >= tw * 8 && ch * m >= th * 8)
            return m;
    return 8;
}

/* ---- worker context ---------------------------------------------------------------------------- */

/* Coefficients of one axis: output i reads count[i] inputs from start[i] with weights
 * k[i * ksize ...] (22-bit fixed point). */
typedef struct axis {
    int out, ksize;
    int *start, *count;
    int32_t *k;
    double *pre;
    int16_t *k16;  /* AVX2 horizontal pass: per output, per 4 taps, 16 high + 16 low halves */
    size_t cap_start, cap_count, cap_k, cap_pre, cap_k16;
    int groups;    /* 4-tap groups per output in k16 */
    int maxcount;  /* largest count */
    int lo, hi; /* inputs used: [lo, hi) */
} axis;

struct stk__worker_ctx {
    stk_decoder *dec;
    axis ax, ay;
    uint8_t *tmp;   /* horizontal pass output */
    size_t tmp_cap;
    int32_t *acc;   /* vertical pass accumulators, one row */
    size_t acc_cap;
};

int stk__worker_ctx_create(stk__worker_ctx **out)
{
    *out = NULL;
    stk__worker_ctx *w = calloc(1, sizeof *w);
    if (!w)
        return STK_E_NOMEM;
    int rc = stk_decoder_create(&w->dec);
    if (rc != STK_OK) {
        free(w);
        return rc;
    }
    *out = w;
    return STK_OK;
}

static void axis_free(axis *a)
{
    free(a->k16);
    free(a->start);
    free(a->count);
    free(a->k);
    free(a->pre);
}

void stk__worker_ctx_destroy(stk__worker_ctx *w)
{
    if (!w)
        return;
    stk_decoder_destroy(w->dec);
    axis_free(&w->ax);
    axis_free(&w->ay);
    free(w->tmp);
    free(w->acc);
    free(w);
}

/* Grow *P to hold N elements of SIZE bytes (contents not kept). */
static int reserve(void **p, size_t *cap, size_t n, size_t size)
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

static double triangle(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/*
 * Pillow's precompute_coeffs + normalize_coeffs_8bpc for OUT outputs: centre of output xx =
 * in0 + (out_off + xx + 0.5) * scale over an input of IN_SIZE pixels; SHIFT is added to every
 * start (the input's position in the scaled image).
 */
static int axis_build(axis *a, int out, double in0, double scale, int out_off, int in_size, int shift,
                      int virt_size)
{
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    if (reserve((void **)&a->start, &a->cap_start, (size_t)out, sizeof(int)) != 0 ||
        reserve((void **)&a->count, &a->cap_count, (size_t)out, sizeof(int)) != 0)
        return STK_E_NOMEM;
    if (reserve((void **)&a->k, &a->cap_k, (size_t)out * (size_t)ksize, sizeof(int32_t)) != 0 ||
        reserve((void **)&a->pre, &a->cap_pre, (size_t)ksize, sizeof(double)) != 0)
        return STK_E_NOMEM;
    a->out = out;
    a->ksize = ksize;
    a->lo = in_size;
    a->hi = 0;
    a->maxcount = 1;
    double ss = 1.0 / filterscale;
    for (int xx = 0; xx < out; xx++) {
        if (virt_size > 0 && (out_off + xx < 0 || out_off + xx >= virt_size)) {
            a->start[xx] = 0; /* zero padding (eval output larger than the resized image) */
            a->count[xx] = 0;
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
        double *k = a->pre, ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            double wt = triangle((x + xmin - center + 0.5) * ss);
            k[x] = wt;
            ww += wt;
        }
        int32_t *kk = a->k + (size_t)xx * (size_t)ksize;
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? k[x] / ww : k[x];
            kk[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << PB)) : (int32_t)(0.5 + v * (1 << PB));
        }
        if (ww == 0.0 && xmax == 1)
            kk[0] = 1 << PB;
        for (int x = xmax; x < ksize; x++)
            kk[x] = 0;
        a->start[xx] = xmin + shift;
        a->count[xx] = xmax;
        a->maxcount = STK__MAX(a->maxcount, xmax);
        a->lo = STK__MIN(a->lo, xmin + shift);
        a->hi = STK__MAX(a->hi, xmin + xmax + shift);
    }
    /* padding outputs read nothing, but the AVX2 pass still loads (and weighs by 0) its groups:
     * point them at the first input used */
    for (int xx = 0; xx < out; xx++)
        if (a->count[xx] == 0)
            a->start[xx] = a->lo;
    return STK_OK;
}

static void axis_rebase(axis *a, int origin)
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

/* Horizontal pass over ROWS rows of SRC (STRIDE bytes apart) into DST (ow * 3 per row). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void pass_h(const axis *a, const uint8_t *src, size_t stride, int rows, uint8_t *dst, int flip)
{
    int ow = a->out, ks = a->ksize;
    for (int y = 0; y < rows; y++) {
        const uint8_t *in = src + (size_t)y * stride;
        uint8_t *o = dst + (size_t)y * (size_t)ow * 3;
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
static void pass_v(const axis *a, const uint8_t *src, size_t stride, int n, uint8_t *dst, int32_t *acc)
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

#ifdef STK_AVX2
/*
 * AVX2 versions of the two passes: the same 22-bit integer arithmetic (so the same bytes).
 * Horizontal: four taps per step with 16-bit multiply-adds on split coefficients (axis_pack16),
 * reading 16 bytes from the first tap's pixel; every output takes the axis's largest tap count
 * (rounded up to 4; the extra taps weigh 0 but are read, up to 3 * maxcount + 13 bytes past the
 * output's first tap, so the slack after the decoded rows must cover that), two outputs per
 * step. Vertical: 32 output bytes per step, the taps' rows accumulated in
 * registers. Chosen at run time (__builtin_cpu_supports).
 */
/* Pack the horizontal coefficients for pass_h_avx2: k = kh * 2^11 + kl with kh, kl < 2^15, so
 * that 16-bit multiply-adds (vpmaddwd) give the exact 22-bit products: sum(p * k) =
 * (sum(p * kh) << 11) + sum(p * kl). Per output and per group of 4 taps: 16 int16 of kh laid out
 * [k0 k1] x 4 | [k2 k3] x 4, then the same for kl. Taps past count are 0. */
static int axis_pack16(axis *a)
{
    int g = (a->maxcount + 3) / 4; /* the same number of groups for every output: no branch misses */
    if (reserve((void **)&a->k16, &a->cap_k16, (size_t)a->out * (size_t)g * 32, sizeof(int16_t)) != 0)
        return STK_E_NOMEM;
    a->groups = g;
    for (int xx = 0; xx < a->out; xx++) {
        const int32_t *k = a->k + (size_t)xx * (size_t)a->ksize;
        for (int gi = 0; gi < g; gi++) {
            int16_t *v = a->k16 + ((size_t)xx * (size_t)g + (size_t)gi) * 32;
            for (int j = 0; j < 4; j++) {
                int t = gi * 4 + j;
                int32_t kt = t < a->count[xx] ? k[t] : 0;
                int16_t hi = (int16_t)(kt >> 11), lo = (int16_t)(kt & 2047);
                int lane = j >> 1, pos = j & 1;
                for (int c = 0; c < 4; c++) {
                    v[lane * 8 + c * 2 + pos] = hi;
                    v[16 + lane * 8 + c * 2 + pos] = lo;
                }
            }
        }
    }
    return STK_OK;
}

/* Sum of 4-tap groups for the output whose coefficients are KV, reading from P: high and low
 * partial sums, each 4 taps spread over two 128-bit lanes. */
__attribute__((target("avx2"))) static inline void taps_avx2(const uint8_t *p, const __m256i *kv, int g,
                                                              __m256i shuf, __m256i *sh, __m256i *sl)
{
    __m256i h = _mm256_setzero_si256(), l = _mm256_setzero_si256();
    for (int gi = 0; gi < g; gi++, p += 12) {
        __m256i px = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)), shuf);
        h = _mm256_add_epi32(h, _mm256_madd_epi16(px, _mm256_loadu_si256(kv + 2 * gi)));
        l = _mm256_add_epi32(l, _mm256_madd_epi16(px, _mm256_loadu_si256(kv + 2 * gi + 1)));
    }
    *sh = h;
    *sl = l;
}

/* Outputs in storage order (pos); with flip, output pos takes the coefficients of ow - 1 - pos.
 * One 8-byte store per two outputs, overwriting the next pair's first two bytes before they are
 * written (DST needs 2 bytes of slack; with an odd width the last output is stored twice). G: groups of 4 taps (a constant 1 at the common call site). */
__attribute__((target("avx2"))) static inline void pass_h_avx2_g(const axis *a, const uint8_t *src, size_t stride,
                                                                  int rows, uint8_t *dst, int flip, int g)
{
    int ow = a->out;
    /* taps t, t+1 (bytes 0..5) in the low lane, t+2, t+3 (bytes 6..11) in the high lane, as
     * 16-bit [x_t, x_t+1] pairs per channel, the 4th pair zero */
    const __m256i shuf = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                          6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    const __m256i bias = _mm256_set1_epi32(1 << (PB - 1));
    for (int y = 0; y < rows; y++) {
        const uint8_t *in = src + (size_t)y * stride;
        uint8_t *o = dst + (size_t)y * (size_t)ow * 3;
        for (int pos = 0; pos < ow; pos += 2) {
            int p1 = pos + 1 < ow ? pos + 1 : pos; /* odd width: the last output twice */
            int xa = flip ? ow - 1 - pos : pos, xb = flip ? ow - 1 - p1 : p1;
            __m256i ha, la, hb, lb;
            taps_avx2(in + (size_t)a->start[xa] * 3, (const __m256i *)(a->k16 + (size_t)xa * (size_t)g * 32),
                      g, shuf, &ha, &la);
            taps_avx2(in + (size_t)a->start[xb] * 3, (const __m256i *)(a->k16 + (size_t)xb * (size_t)g * 32),
                      g, shuf, &hb, &lb);
            /* lanes: [a.lo + a.hi | b.lo + b.hi] */
            __m256i h = _mm256_add_epi32(_mm256_permute2x128_si256(ha, hb, 0x20), _mm256_permute2x128_si256(ha, hb, 0x31));
            __m256i l = _mm256_add_epi32(_mm256_permute2x128_si256(la, lb, 0x20), _mm256_permute2x128_si256(la, lb, 0x31));
            __m256i r = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, 11), l), bias), PB);
            r = _mm256_packs_epi32(r, r);   /* per lane: 4 x int16, twice */
            r = _mm256_packus_epi16(r, r);  /* per lane: 4 x uint8 */
            uint64_t va = (uint32_t)_mm256_cvtsi256_si32(r) & 0xFFFFFFu;
            uint64_t vb = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(r, 1));
            uint64_t v2 = va | vb << 24; /* both pixels, one store */
            memcpy(o + (size_t)pos * 3, &v2, 8);
        }
    }
}

__attribute__((target("avx2"))) static void pass_h_avx2(const axis *a, const uint8_t *src, size_t stride,
                                                         int rows, uint8_t *dst, int flip)
{
    if (a->groups == 1)
        pass_h_avx2_g(a, src, stride, rows, dst, flip, 1);
    else
        pass_h_avx2_g(a, src, stride, rows, dst, flip, a->groups);
}

__attribute__((target("avx2"))) static inline __m128i clip16_avx2(__m256i s0, __m256i s1)
{
    __m256i p = _mm256_packs_epi32(_mm256_srai_epi32(s0, PB), _mm256_srai_epi32(s1, PB));
    p = _mm256_permute4x64_epi64(p, 0xD8);
    return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

__attribute__((target("avx2"))) static void pass_v_avx2(const axis *a, const uint8_t *src, size_t stride,
                                                         int n, uint8_t *dst)
{
    int ks = a->ksize;
    const __m256i bias = _mm256_set1_epi32(1 << (PB - 1));
    for (int yy = 0; yy < a->out; yy++) {
        const int32_t *k = a->k + (size_t)yy * (size_t)ks;
        int cnt = a->count[yy];
        const uint8_t *row0 = src + (size_t)a->start[yy] * stride;
        uint8_t *o = dst + (size_t)yy * (size_t)n;
        int i = 0;
        for (; i + 32 <= n; i += 32) {
            __m256i s0 = bias, s1 = bias, s2 = bias, s3 = bias;
            const uint8_t *r = row0 + i;
            for (int t = 0; t < cnt; t++, r += stride) {
                __m256i kk = _mm256_set1_epi32(k[t]);
                __m128i a0 = _mm_loadu_si128((const __m128i *)r);
                __m128i a1 = _mm_loadu_si128((const __m128i *)(r + 16));
                s0 = _mm256_add_epi32(s0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(a0), kk));
                s1 = _mm256_add_epi32(s1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(a0, 8)), kk));
                s2 = _mm256_add_epi32(s2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(a1), kk));
                s3 = _mm256_add_epi32(s3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(a1, 8)), kk));
            }
            _mm_storeu_si128((__m128i *)(o + i), clip16_avx2(s0, s1));
            _mm_storeu_si128((__m128i *)(o + i + 16), clip16_avx2(s2, s3));
        }
        for (; i < n; i++) {
            int32_t s = 1 << (PB - 1);
            const uint8_t *r = row0 + i;
            for (int t = 0; t < cnt; t++, r += stride)
                s += *r * k[t];
            o[i] = clip8(s);
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

static void resize_h(axis *a, const uint8_t *src, size_t stride, int rows, uint8_t *dst, int flip)
{
#ifdef STK_AVX2
    /* up to 16 taps: reads stay within the decoder's 64 bytes of slack (12 * groups + 1 past
     * the last row); larger downscales (DCT scaling off, tiny outputs) take the portable pass */
    if (have_avx2() && a->maxcount <= 16 && axis_pack16(a) == STK_OK) {
        pass_h_avx2(a, src, stride, rows, dst, flip);
        return;
    }
#endif
    pass_h(a, src, stride, rows, dst, flip);
}

static void resize_v(const axis *a, const uint8_t *src, size_t stride, int n, uint8_t *dst, int32_t *acc)
{
#ifdef STK_AVX2
    if (have_avx2()) {
        pass_v_avx2(a, src, stride, n, dst);
        return;
    }
#endif
    pass_v(a, src, stride, n, dst, acc);
}

/* ---- one sample --------------------------------------------------------------------------------- */

int stk__process_sample(stk__worker_ctx *w, const stk__aug_config *c, uint64_t seed, uint64_t epoch,
                        uint64_t index, const uint8_t *data, size_t len, uint8_t *out,
                        int *warnings, char *err)
{
    if (warnings)
        *warnings = 0;
    int W, H;
    int rc = stk__dec_header(w->dec, data, len, c->max_pixels, &W, &H, NULL, err);
    if (rc != STK_OK)
        return rc;
    stk__crop cr;
    stk__crop_params(c, seed, epoch, index, W, H, &cr);
    int m = stk__plan_scale(c, &cr, W, H);
    int ws = stk__scaled(W, m), hs = stk__scaled(H, m);
    int ow = c->out_w, oh = c->out_h;
    if (c->mode == STK_MODE_EVAL) {
        double sx = ((double)W * m / 8.0) / cr.resized_w, sy = ((double)H * m / 8.0) / cr.resized_h;
        rc = axis_build(&w->ax, ow, 0.0, sx, cr.off_x, ws, 0, cr.resized_w);
        if (rc == STK_OK)
            rc = axis_build(&w->ay, oh, 0.0, sy, cr.off_y, hs, 0, cr.resized_h);
    } else {
        /* the crop box in scaled pixels: [x*m/8, (x+w)*m/8), decoded as the enclosing window */
        int x0 = (int)((int64_t)cr.x * m / 8), y0 = (int)((int64_t)cr.y * m / 8);
        int x1 = STK__MIN(ws, (int)(((int64_t)(cr.x + cr.w) * m + 7) / 8));
        int y1 = STK__MIN(hs, (int)(((int64_t)(cr.y + cr.h) * m + 7) / 8));
        double in0x = (double)((int64_t)cr.x * m % 8) / 8.0, in0y = (double)((int64_t)cr.y * m % 8) / 8.0;
        double sx = m == 8 ? (double)cr.w / ow : ((double)cr.w * m / 8.0) / ow;
        double sy = m == 8 ? (double)cr.h / oh : ((double)cr.h * m / 8.0) / oh;
        rc = axis_build(&w->ax, ow, in0x, sx, 0, x1 - x0, x0, 0);
        if (rc == STK_OK)
            rc = axis_build(&w->ay, oh, in0y, sy, 0, y1 - y0, y0, 0);
    }
    if (rc != STK_OK) {
        stk__dec_header(w->dec, NULL, 0, 1, NULL, NULL, NULL, err); /* reset the decoder */
        return stk__err(err, STK_E_NOMEM, "out of memory for the resize tables");
    }
    int xlo = w->ax.lo, ylo = w->ay.lo, xw = w->ax.hi - xlo, yh = w->ay.hi - ylo;
    const uint8_t *px;
    size_t stride;
    rc = stk__dec_window(w->dec, m, xlo, ylo, xw, yh, c->strict, &px, &stride, warnings, err);
    if (rc != STK_OK)
        return rc;
    axis_rebase(&w->ax, xlo);
    axis_rebase(&w->ay, ylo);
    size_t n = (size_t)ow * 3;
    if (reserve((void **)&w->tmp, &w->tmp_cap, n * (size_t)yh + 8, 1) != 0 ||
        reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0)
        return stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, yh);
    resize_h(&w->ax, px, stride, yh, w->tmp, cr.flip);
    resize_v(&w->ay, w->tmp, n, (int)n, out, w->acc);
    return STK_OK;
}

void stk__substitute(const stk__aug_config *c, uint8_t *out)
{
    memset(out, 128, (size_t)c->out_h * (size_t)c->out_w * 3);
}
