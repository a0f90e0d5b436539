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
    size_t cap_start, cap_count, cap_k, cap_pre;
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
        a->lo = STK__MIN(a->lo, xmin + shift);
        a->hi = STK__MAX(a->hi, xmin + xmax + shift);
    }
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
    if (reserve((void **)&w->tmp, &w->tmp_cap, n * (size_t)yh, 1) != 0 ||
        reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0)
        return stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, yh);
    pass_h(&w->ax, px, stride, yh, w->tmp, cr.flip);
    pass_v(&w->ay, w->tmp, n, (int)n, out, w->acc);
    return STK_OK;
}

void stk__substitute(const stk__aug_config *c, uint8_t *out)
{
    memset(out, 128, (size_t)c->out_h * (size_t)c->out_w * 3);
}
