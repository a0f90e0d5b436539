/* SPDX-License-Identifier: MIT */
/*
 * augment.c — one sample: crop parameters, crop-window decode at a DCT scale, antialiased
 * resize and flip into the sample's uint8 RGB HWC slot. Crops are torchvision's and the resize
 * is Pillow's, byte for byte, so a model sees the pixels torchvision would have given it; only
 * the window the output needs is decoded, so that everything but the decode costs little next
 * to it (measured: docs/PERFORMANCE.md, "decode").
 */
#include "augment.h"

#include "decode.h"
#include "image_in.h"

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
    c->interp = STK_INTERP_BILINEAR;
}

/* ---- crop parameters -------------------------------------------------------------------------- */

/*
 * Crop parameters are torchvision's, drawn from the Philox stream keyed (seed, epoch, index):
 *   train  RandomResizedCrop.get_params: ten tries of target_area = area * U(scale),
 *          aspect = exp(U(log ratio)), w = round(sqrt(target_area * aspect)),
 *          h = round(sqrt(target_area / aspect)) (round half to even, as Python's round()),
 *          accepted when 0 < w <= W and 0 < h <= H, then i = randint(0, H - h),
 *          j = randint(0, W - w) (inclusive); else the centre crop clamped to the ratio range.
 *          Then flip when U(0,1) < flip_prob. The draws happen in that order, always.
 *   eval   Resize(resize): shorter side to `resize`, the other int(resize * long / short);
 *          CenterCrop(out): top = int(round((h - out_h) / 2.0)), likewise left.
 */

static void eval_crop(const stk__aug_config *c, int W, int H, stk__crop *o)
{
    int shorter = W <= H ? W : H, longer = W <= H ? H : W;
    int ns = c->resize;
    int nl = (int)((double)((int64_t)ns * longer) / (double)shorter);
    if (nl < 1)
        nl = 1;
    int nw = W <= H ? ns : nl, nh = W <= H ? nl : ns;
    if (c->resize_h > 0 && c->resize_w > 0) /* Resize((h, w)): the size as given */
        nw = c->resize_w, nh = c->resize_h;
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

/* The sample's resize filter: the config's, or for STK_INTERP_RANDOM timm's
 * random.choice((BILINEAR, BICUBIC)), from a counter range of the sample's key apart from the
 * crop's draws and the augment ops' (docs/ARCHITECTURE.md, "Decode and augment") */
#define INTERP_CTR0 0x70000000u

static int sample_interp(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index)
{
    if (c->interp != STK_INTERP_RANDOM)
        return c->interp;
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = INTERP_CTR0;
    return stk__rng_below(&r, 2) ? STK_INTERP_BICUBIC : STK_INTERP_BILINEAR;
}

static void train_crop(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index, int width,
                       int height, stk__crop *out);

void stk__crop_params(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index,
                      int width, int height, stk__crop *out)
{
    memset(out, 0, sizeof *out);
    if (c->mode == STK_MODE_EVAL)
        eval_crop(c, width, height, out);
    else
        train_crop(c, seed, epoch, index, width, height, out);
    out->interp = sample_interp(c, seed, epoch, index);
}

/* torchvision's RandomResizedCrop.get_params and the flip */
static void train_crop(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index, int width,
                       int height, stk__crop *out)
{
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
    if (!c->dct_scaling || crop->interp == STK_INTERP_NEAREST)
        return 8; /* a scaled decode low-passes; NEAREST's result would not resemble Pillow's */
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
 * Pillow's pixel table as one weight-1 tap (axis_nearest), always at 8/8.
 *
 * The coefficient tables are built first, per call; they say exactly which source columns and
 * rows the output needs, and only that window is decoded (train: the crop box; eval: the centre
 * window plus the filter's support). All scratch lives in the worker context and only grows.
 */

/* Coefficients of one axis: output i reads count[i] inputs from start[i] with weights
 * k[i * ksize ...] (22-bit fixed point). */
typedef struct axis {
    int out, ksize;
    int *start, *count;
    int32_t *k;
    double *pre;
    size_t cap_start, cap_count, cap_k, cap_pre;
    int maxcount;  /* largest count */
    int lo, hi; /* inputs used: [lo, hi) */
} axis;

struct stk__worker_ctx {
    stk_decoder *dec;
    axis ax, ay;
    uint8_t *tmp;   /* horizontal pass output */
    size_t tmp_cap;
    uint8_t *hs;    /* horizontal pass scratch */
    size_t hs_cap;
    uint8_t *vt;    /* vertical pass output when it runs first */
    size_t vt_cap;
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
    free(w->hs);
    free(w->vt);
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
static int axis_reserve(axis *a, int out, int ksize, int end)
{
    if (reserve((void **)&a->start, &a->cap_start, (size_t)out, sizeof(int)) != 0 ||
        reserve((void **)&a->count, &a->cap_count, (size_t)out, sizeof(int)) != 0)
        return STK_E_NOMEM;
    if (reserve((void **)&a->k, &a->cap_k, (size_t)out * (size_t)ksize, sizeof(int32_t)) != 0 ||
        reserve((void **)&a->pre, &a->cap_pre, (size_t)ksize, sizeof(double)) != 0)
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
static void axis_point_padding(axis *a)
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
static int axis_nearest(axis *a, int out, double scale, int out_off, int in_size, int shift, int virt_size)
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
static int axis_build(axis *a, int filter, int out, double in0, double scale, int out_off, int in_size,
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

/* Horizontal pass over ROWS rows of SRC (STRIDE bytes apart) into DST (rows DSTRIDE apart). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void pass_h(const axis *a, const uint8_t *src, size_t stride, int rows, uint8_t *dst, size_t dstride,
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
static size_t t8_cols(const axis *a) { return ((size_t)(a->hi - a->lo) * 3 + 31) / 32 * 32 + (size_t)a->maxcount * 3 + 32; }
static int32_t *t8_offsets(const axis *a, uint8_t *t) { return (int32_t *)(void *)(t + t8_cols(a) * 8); }

/* One strip: rows R[0..7] into DST rows 0..7 (DSTRIDE apart), outputs in storage order (pos).
 * Writes each row up to 3 * (ow rounded up to 4) + 4 bytes. T: the scratch, prepared by
 * resize_h_prepare. */
__attribute__((target("avx2"), always_inline)) static inline void strip_h_t8_g(const axis *a, const uint8_t *const *r,
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

__attribute__((target("avx2"))) static void strip_h_t8(const axis *a, const uint8_t *const *r, uint8_t *o,
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
static size_t hscratch_size(const axis *a)
{
    return (((size_t)(a->hi - a->lo) * 3 + 31) / 32 * 32 + (size_t)a->maxcount * 3 + 32) * 8 +
           (size_t)(a->out + 3) / 4 * 4 * 2 * sizeof(int32_t);
}

/* Rows of the horizontal pass's output (DST): ROWS rounded up to 8, each (ow rounded up to 4) * 3
 * + 16 bytes apart (the AVX2 pass writes whole strips of 8 rows and groups of 4 outputs). */
static int tmp_rows(int rows) { return (rows + 7) / 8 * 8; }
static size_t tmp_stride(int ow) { return (size_t)(ow + 3) / 4 * 4 * 3 + 16; }

/* Before the first strip of a sample: the taps past the window (weight 0) read zeroed slack;
 * the AVX2 pass's per-output offsets (storage order: with flip, position pos takes the
 * coefficients of output ow - 1 - pos; positions past ow repeat the last one). */
static void resize_h_prepare(const axis *a, uint8_t *scratch, int flip)
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
static void resize_h_strip(const axis *a, const uint8_t *src, size_t stride, int y0, int n, uint8_t *dst,
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
static void resize_h(const axis *a, const uint8_t *src, size_t stride, int rows, uint8_t *dst, size_t dstride,
                     int flip, uint8_t *scratch)
{
    resize_h_prepare(a, scratch, flip);
    for (int y0 = 0; y0 < rows; y0 += 8)
        resize_h_strip(a, src + (size_t)y0 * stride, stride, y0, STK__MIN(rows - y0, 8), dst, dstride, flip,
                       scratch);
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

/* NEAREST's tables (scale 8/8). Train: the crop box resized to the output, Pillow's
 * resized_crop (crop, then resize the crop). Eval: the whole image resized to resized_w x
 * resized_h, then the centre crop's outputs of it. */
static int plan_nearest(stk__worker_ctx *w, const stk__aug_config *c, const stk__crop *cr, int W, int H)
{
    int ow = c->out_w, oh = c->out_h;
    if (c->mode == STK_MODE_EVAL) {
        int rc = axis_nearest(&w->ax, ow, (double)W / cr->resized_w, cr->off_x, W, 0, cr->resized_w);
        if (rc != STK_OK)
            return rc;
        return axis_nearest(&w->ay, oh, (double)H / cr->resized_h, cr->off_y, H, 0, cr->resized_h);
    }
    int rc = axis_nearest(&w->ax, ow, (double)cr->w / ow, 0, cr->w, cr->x, ow);
    return rc != STK_OK ? rc : axis_nearest(&w->ay, oh, (double)cr->h / oh, 0, cr->h, cr->y, oh);
}

/* The coefficient tables of both axes for crop CR of a W x H image decoded at scale M/8. */
static int plan_axes(stk__worker_ctx *w, const stk__aug_config *c, const stk__crop *cr, int W, int H, int m)
{
    int ws = stk__scaled(W, m), hs = stk__scaled(H, m);
    int ow = c->out_w, oh = c->out_h;
    int rc;
    if (cr->interp == STK_INTERP_NEAREST) /* always at 8/8 (stk__plan_scale) */
        return plan_nearest(w, c, cr, W, H);
    if (c->mode == STK_MODE_EVAL) {
        double sx = ((double)W * m / 8.0) / cr->resized_w, sy = ((double)H * m / 8.0) / cr->resized_h;
        rc = axis_build(&w->ax, cr->interp, ow, 0.0, sx, cr->off_x, ws, 0, cr->resized_w);
        if (rc == STK_OK)
            rc = axis_build(&w->ay, cr->interp, oh, 0.0, sy, cr->off_y, hs, 0, cr->resized_h);
    } else {
        /* the crop box in scaled pixels: [x*m/8, (x+w)*m/8), decoded as the enclosing window */
        int x0 = (int)((int64_t)cr->x * m / 8), y0 = (int)((int64_t)cr->y * m / 8);
        int x1 = STK__MIN(ws, (int)(((int64_t)(cr->x + cr->w) * m + 7) / 8));
        int y1 = STK__MIN(hs, (int)(((int64_t)(cr->y + cr->h) * m + 7) / 8));
        double in0x = (double)((int64_t)cr->x * m % 8) / 8.0, in0y = (double)((int64_t)cr->y * m % 8) / 8.0;
        double sx = m == 8 ? (double)cr->w / ow : ((double)cr->w * m / 8.0) / ow;
        double sy = m == 8 ? (double)cr->h / oh : ((double)cr->h * m / 8.0) / oh;
        rc = axis_build(&w->ax, cr->interp, ow, in0x, sx, 0, x1 - x0, x0, 0);
        if (rc == STK_OK)
            rc = axis_build(&w->ay, cr->interp, oh, in0y, sy, 0, y1 - y0, y0, 0);
    }
    return rc;
}

static _Atomic int fused_allowed = 1;

int stk__aug_set_fused(int enable)
{
    atomic_store_explicit(&fused_allowed, enable ? 1 : 0, memory_order_relaxed);
    return enable ? 1 : 0;
}

/* The horizontal pass of one strip, called by the decoder as the strip's rows come out of
 * libjpeg (stk__dec_window_rows). */
typedef struct hjob {
    stk__worker_ctx *w;
    size_t dstride;
    int flip;
} hjob;

static void h_rows(void *user, const uint8_t *px, size_t stride, int y0, int n)
{
    hjob *j = user;
    resize_h_strip(&j->w->ax, px, stride, y0, n, j->w->tmp, j->dstride, j->flip, j->w->hs);
}

/* Whether Pillow runs the vertical pass first for this sample's resize: Pillow 13 does when the
 * height shrinks by more pixels than twice what the width shrinks by (Pillow's horizontal_first
 * test in ImagingResampleInner); Pillow <= 12 never does. The image Pillow resizes is the crop
 * box in train (torchvision crops, then resizes) and the whole image in eval. NEAREST copies
 * pixels, so its order does not show. */
static int vertical_first(const stk__aug_config *c, const stk__crop *cr, int W, int H)
{
    if (c->passes != STK_RESIZE_PASSES_PILLOW13 || cr->interp == STK_INTERP_NEAREST)
        return 0;
    int eval = c->mode == STK_MODE_EVAL;
    int64_t dw = (int64_t)(eval ? W : cr->w) - (eval ? cr->resized_w : c->out_w);
    int64_t dh = (int64_t)(eval ? H : cr->h) - (eval ? cr->resized_h : c->out_h);
    return dh > 0 && dh > 2 * dw;
}

/* The vertical pass first, over the whole decoded window, into W->vt (rows of the window's
 * width, 32 bytes of slack after the last for the horizontal pass), then the horizontal pass
 * into W->tmp and out. */
static int resize_vh(stk__worker_ctx *w, const uint8_t *px, size_t stride, int xw, int flip, uint8_t *out)
{
    int ow = w->ax.out, oh = w->ay.out;
    size_t vn = (size_t)xw * 3, n = (size_t)ow * 3, ts = tmp_stride(ow);
    if (reserve((void **)&w->vt, &w->vt_cap, vn * (size_t)oh + 32, 1) != 0 ||
        reserve((void **)&w->acc, &w->acc_cap, vn, sizeof(int32_t)) != 0 ||
        reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)tmp_rows(oh), 1) != 0)
        return STK_E_NOMEM;
    memset(w->vt + vn * (size_t)oh, 0, 32);
    resize_v(&w->ay, px, stride, (int)vn, w->vt, w->acc);
    resize_h(&w->ax, w->vt, vn, oh, w->tmp, ts, flip, w->hs);
    for (int y = 0; y < oh; y++)
        memcpy(out + (size_t)y * n, w->tmp + (size_t)y * ts, n);
    return STK_OK;
}

/* A PNG, WebP, GIF, BMP, TIFF or PPM/PGM sample (since 0.5): pack's decoders (image_in.c, Pillow's
 * convert("RGB") pixels) to a whole RGB image, then the crop and resize of a JPEG decoded at 8/8
 * — so a raw folder's sample equals torchvision's on the same file. One allocation per sample
 * (the decoders allocate): these formats are the slow path; pack them for speed. */
static int process_rgb(stk__worker_ctx *w, const stk__aug_config *c, uint64_t seed, uint64_t epoch,
                       uint64_t index, int kind, const uint8_t *data, size_t len, uint8_t *out, char *err)
{
    uint8_t *img = NULL;
    int W = 0, H = 0;
    int rc = stk__img_decode_rgb(kind, data, len, c->max_pixels, &img, &W, &H, err);
    if (rc != STK_OK)
        return rc;
    stk__crop cr;
    stk__crop_params(c, seed, epoch, index, W, H, &cr);
    int ow = c->out_w;
    size_t n = (size_t)ow * 3, ts = tmp_stride(ow);
    if (plan_axes(w, c, &cr, W, H, 8) != STK_OK ||
        reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)tmp_rows(w->ay.hi - w->ay.lo), 1) != 0 ||
        reserve((void **)&w->hs, &w->hs_cap, hscratch_size(&w->ax), 1) != 0 ||
        reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0) {
        free(img);
        return stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
    }
    int xlo = w->ax.lo, ylo = w->ay.lo, xw = w->ax.hi - xlo, yh = w->ay.hi - ylo;
    axis_rebase(&w->ax, xlo);
    axis_rebase(&w->ay, ylo);
    size_t stride = (size_t)W * 3; /* the decoders leave 64 bytes of slack past the last row */
    const uint8_t *px = img + (size_t)ylo * stride + (size_t)xlo * 3;
    rc = STK_OK;
    if (vertical_first(c, &cr, W, H)) {
        if (resize_vh(w, px, stride, xw, cr.flip, out) != STK_OK)
            rc = stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
    } else {
        resize_h(&w->ax, px, stride, yh, w->tmp, ts, cr.flip, w->hs);
        resize_v(&w->ay, w->tmp, ts, (int)n, out, w->acc);
    }
    free(img);
    return rc;
}

int stk__process_sample(stk__worker_ctx *w, const stk__aug_config *c, uint64_t seed, uint64_t epoch,
                        uint64_t index, const uint8_t *data, size_t len, uint8_t *out,
                        int *warnings, char *err)
{
    if (warnings)
        *warnings = 0;
    int W, H;
    int rc = stk__dec_header(w->dec, data, len, c->max_pixels, &W, &H, NULL, err);
    if (rc == STK_E_NOT_JPEG) {
        int kind = stk__img_sniff(data, len);
        if (kind != STK__IMG_UNKNOWN && kind != STK__IMG_JPEG && stk__img_can_decode(kind))
            return process_rgb(w, c, seed, epoch, index, kind, data, len, out, err);
    }
    if (rc != STK_OK)
        return rc;
    stk__crop cr;
    stk__crop_params(c, seed, epoch, index, W, H, &cr);
    int m = stk__plan_scale(c, &cr, W, H);
    int ow = c->out_w;
    size_t n = (size_t)ow * 3, ts = tmp_stride(ow);
    if (plan_axes(w, c, &cr, W, H, m) != STK_OK ||
        reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)tmp_rows(w->ay.hi - w->ay.lo), 1) != 0 ||
        reserve((void **)&w->hs, &w->hs_cap, hscratch_size(&w->ax), 1) != 0 ||
        reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0) {
        stk__dec_header(w->dec, NULL, 0, 1, NULL, NULL, NULL, err); /* reset the decoder */
        return stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
    }
    int xlo = w->ax.lo, ylo = w->ay.lo, xw = w->ax.hi - xlo, yh = w->ay.hi - ylo;
    axis_rebase(&w->ax, xlo);
    axis_rebase(&w->ay, ylo);
    int vfirst = vertical_first(c, &cr, W, H);
    if (!vfirst && atomic_load_explicit(&fused_allowed, memory_order_relaxed)) {
        /* the horizontal pass strip by strip while the rows are in the L1 cache */
        hjob j = {w, ts, cr.flip};
        resize_h_prepare(&w->ax, w->hs, cr.flip);
        rc = stk__dec_window_rows(w->dec, m, xlo, ylo, xw, yh, c->strict, h_rows, &j, warnings, err);
        if (rc != STK_OK)
            return rc;
    } else {
        const uint8_t *px;
        size_t stride;
        rc = stk__dec_window(w->dec, m, xlo, ylo, xw, yh, c->strict, &px, &stride, warnings, err);
        if (rc != STK_OK)
            return rc;
        if (vfirst)
            return resize_vh(w, px, stride, xw, cr.flip, out) == STK_OK
                       ? STK_OK
                       : stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
        resize_h(&w->ax, px, stride, yh, w->tmp, ts, cr.flip, w->hs);
    }
    resize_v(&w->ay, w->tmp, ts, (int)n, out, w->acc);
    return STK_OK;
}

int stk__resize_rgb(stk__worker_ctx *w, const uint8_t *src, int sw, int sh, size_t stride, uint8_t *dst, int ow,
                    int oh)
{
    if (sw < 1 || sh < 1 || ow < 1 || oh < 1)
        return STK_E_INVALID;
    size_t n = (size_t)ow * 3, ts = tmp_stride(ow);
    if (axis_build(&w->ax, STK_INTERP_BILINEAR, ow, 0.0, (double)sw / ow, 0, sw, 0, 0) != STK_OK ||
        axis_build(&w->ay, STK_INTERP_BILINEAR, oh, 0.0, (double)sh / oh, 0, sh, 0, 0) != STK_OK ||
        reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)tmp_rows(w->ay.hi - w->ay.lo), 1) != 0 ||
        reserve((void **)&w->hs, &w->hs_cap, hscratch_size(&w->ax), 1) != 0 ||
        reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0)
        return STK_E_NOMEM;
    int xlo = w->ax.lo, ylo = w->ay.lo, yh = w->ay.hi - ylo;
    axis_rebase(&w->ax, xlo);
    axis_rebase(&w->ay, ylo);
    resize_h(&w->ax, src + (size_t)ylo * stride + (size_t)xlo * 3, stride, yh, w->tmp, ts, 0, w->hs);
    resize_v(&w->ay, w->tmp, ts, (int)n, dst, w->acc);
    return STK_OK;
}

void stk__substitute(const stk__aug_config *c, uint8_t *out)
{
    memset(out, 128, (size_t)c->out_h * (size_t)c->out_w * 3);
}
