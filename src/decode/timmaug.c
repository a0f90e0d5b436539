/* SPDX-License-Identifier: MIT */
/*
 * timmaug.c — timm's RandAugment and AutoAugment with Pillow's arithmetic (Pillow 9.4 to 13 agree on every path
 * used here: libImaging Geometry.c, Blend.c, Filter.c, Convert.c and ImageOps / ImageEnhance).
 *
 *   enhance   ImageEnhance.X(img).enhance(f) = Image.blend(degenerate, img, f): f is passed to C
 *             as a float; each byte is (float)d + f * (float)(i - d), clamped and truncated.
 *             Degenerate: Color the L image (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 in every
 *             channel; Contrast the constant int(mean(L) + 0.5); Brightness zeros; Sharpness the
 *             SMOOTH filter ([1 1 1; 1 5 1; 1 1 1] / 13 in float, + 0.5, truncated: never near a
 *             tie, so (2k + 13) / 26 in integers) with the border rows and columns copied.
 *   lut ops   autocontrast: int(i * (255 / (hi - lo)) - lo * scale) in double per channel;
 *             equalize: step = (n - last bin's count) // 255, lut[i] = (step // 2 + cumsum) // step;
 *             posterize, solarize, solarize_add as timm / ImageOps build their tables.
 *   geometric Image.transform(size, AFFINE, (a..f), resample, fillcolor): for output pixel (x, y)
 *             the source point a(x + .5) + b(y + .5) + c, d(x + .5) + e(y + .5) + f in double;
 *             outside [0, w) x [0, h): the fill; else Pillow's bilinear (two lerps per row in
 *             double, edge-clamped, truncated) or bicubic (a = -1 spline rows, clamped to 0..255,
 *             truncated). NEAREST takes Pillow's own paths: a pure translation accumulates the
 *             positions in double (ImagingScaleAffine), the rest walks them in 16.16 fixed
 *             point (affine_fixed) or, beyond its range, in double. rotate: angle % 360 with
 *             Pillow's fast paths (0, 180, 90 / 270 on a square), else the matrix of cos / sin
 *             rounded to 15 decimals (Python's round) about the centre (w / 2, h / 2).
 * The file is compiled with -ffp-contract=off: Pillow's x86-64 builds have no fused multiply-add.
 *
 * Draws: per layer, the op uniformly with replacement (numpy's choice; 'tweights': by timm's
 * weights without replacement), then whether it runs
 * (timm: skipped when random() > p), the magnitude noise (N(m, mstd) by Box-Muller, or U(0, m)
 * when mstd is infinite), the clip to [0, mmax], the sign (negated when random() > 0.5) and, for a
 * geometric op with random resampling, BILINEAR or BICUBIC with equal odds. The stream is the
 * sample's (seed, epoch, index) from counter 0x90000000, apart from the crop's and the other
 * policies'.
 *
 * AutoAugment (auto_augment_transform): the same ops (and PosterizeOriginal, 4..8 bits kept), its
 * policy a table of sub-policies of (op, prob, magnitude). Per sample one sub-policy uniformly
 * (random.choice), then each op with the draws above at its own probability and magnitude
 * (AugmentOp.__call__), from counter 0xB0000000.
 */
#include "timmaug.h"
#include "augops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[STK__TIMM_OP_COUNT] = {
    "AutoContrast",        "Equalize",    "Invert",          "Rotate",
    "Posterize",           "PosterizeIncreasing", "Solarize",  "SolarizeIncreasing",
    "SolarizeAdd",         "Color",       "ColorIncreasing", "Contrast",
    "ContrastIncreasing",  "Brightness",  "BrightnessIncreasing", "Sharpness",
    "SharpnessIncreasing", "ShearX",      "ShearY",          "TranslateXRel",
    "TranslateYRel",       "PosterizeOriginal",
};

int stk__timm_find(const char *name) { return stk__name_index(names, STK__TIMM_OP_COUNT, name); }

const char *stk__timm_name(int op) { return op >= 0 && op < STK__TIMM_OP_COUNT ? names[op] : "?"; }

int stk__timm_signed(int op)
{
    switch (op) {
    case STK__TIMM_ROTATE:
    case STK__TIMM_COLOR_INC:
    case STK__TIMM_CONTRAST_INC:
    case STK__TIMM_BRIGHTNESS_INC:
    case STK__TIMM_SHARPNESS_INC:
    case STK__TIMM_SHEAR_X:
    case STK__TIMM_SHEAR_Y:
    case STK__TIMM_TRANSLATE_X_REL:
    case STK__TIMM_TRANSLATE_Y_REL:
        return 1;
    default:
        return 0;
    }
}

int stk__timm_geometric(int op)
{
    return op == STK__TIMM_ROTATE || op == STK__TIMM_SHEAR_X || op == STK__TIMM_SHEAR_Y ||
           op == STK__TIMM_TRANSLATE_X_REL || op == STK__TIMM_TRANSLATE_Y_REL;
}

/* ---- level -> argument (timm's LEVEL_TO_ARG, _LEVEL_DENOM = 10) ----------------------------- */

double stk__timm_arg(int op, double level, int negate, double translate_pct, int h, int w)
{
    double v;
    switch (op) {
    case STK__TIMM_ROTATE:
        v = (level / 10.0) * 30.0;
        return negate ? -v : v;
    case STK__TIMM_POSTERIZE:
        return (double)(int)((level / 10.0) * 4);
    case STK__TIMM_POSTERIZE_INC:
        return (double)(4 - (int)((level / 10.0) * 4));
    case STK__TIMM_POSTERIZE_ORIG:
        return (double)((int)((level / 10.0) * 4) + 4);
    case STK__TIMM_SOLARIZE:
    case STK__TIMM_SOLARIZE_INC:
        v = (level / 10.0) * 256;
        v = v >= 256.0 ? 256.0 : (double)(int)v;
        return op == STK__TIMM_SOLARIZE ? v : 256.0 - v;
    case STK__TIMM_SOLARIZE_ADD:
        v = (level / 10.0) * 110;
        return v >= 128.0 ? 128.0 : (double)(int)v;
    case STK__TIMM_COLOR:
    case STK__TIMM_CONTRAST:
    case STK__TIMM_BRIGHTNESS:
    case STK__TIMM_SHARPNESS:
        return (level / 10.0) * 1.8 + 0.1;
    case STK__TIMM_COLOR_INC:
    case STK__TIMM_CONTRAST_INC:
    case STK__TIMM_BRIGHTNESS_INC:
    case STK__TIMM_SHARPNESS_INC:
        v = (level / 10.0) * .9;
        v = 1.0 + (negate ? -v : v);
        return v < 0.1 ? 0.1 : v;
    case STK__TIMM_SHEAR_X:
    case STK__TIMM_SHEAR_Y:
        v = (level / 10.0) * 0.3;
        return negate ? -v : v;
    case STK__TIMM_TRANSLATE_X_REL:
    case STK__TIMM_TRANSLATE_Y_REL:
        v = (level / 10.0) * translate_pct;
        v = negate ? -v : v;
        return v * (double)(op == STK__TIMM_TRANSLATE_X_REL ? w : h); /* translate_x_rel's pixels */
    default:
        return 0.0;
    }
}

/* ---- per-pixel ops ------------------------------------------------------------------------ */

/* ImagingBlend(im1 = DEG, im2 = IMG, alpha): in1 + alpha * (in2 - in1) in float */
static inline uint8_t blend1(float alpha, int d, int i)
{
    float t = (float)d + alpha * (float)(i - d);
    return t <= 0.f ? 0 : t >= 255.f ? 255 : (uint8_t)t;
}

static inline int luma(const uint8_t *p) { return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16; }

/* the four enhance ops and their "Increasing" variants, which follow each in the op enum and
 * differ only in how the magnitude maps to the argument */
_Static_assert(STK__TIMM_COLOR_INC == STK__TIMM_COLOR + 1 && STK__TIMM_CONTRAST == STK__TIMM_COLOR + 2 &&
                   STK__TIMM_CONTRAST_INC == STK__TIMM_COLOR + 3 && STK__TIMM_BRIGHTNESS == STK__TIMM_COLOR + 4 &&
                   STK__TIMM_BRIGHTNESS_INC == STK__TIMM_COLOR + 5 && STK__TIMM_SHARPNESS == STK__TIMM_COLOR + 6 &&
                   STK__TIMM_SHARPNESS_INC == STK__TIMM_COLOR + 7,
               "enhance ops in pairs");
static int enhance_kind(int op) { return op - (op - STK__TIMM_COLOR) % 2; }

/* Image.blend's shortcuts: alpha 0 gives the degenerate image, 1 the image */
static void enhance(int kind, double factor, uint8_t *img, int h, int w, uint8_t *scratch)
{
    size_t px = (size_t)h * (size_t)w, n = 3 * px;
    float a = (float)factor;
    if (a == 1.f)
        return;
    if (kind == STK__TIMM_BRIGHTNESS) {
        for (size_t i = 0; i < n; i++)
            img[i] = a == 0.f ? 0 : blend1(a, 0, img[i]);
        return;
    }
    if (kind == STK__TIMM_COLOR) {
        for (size_t i = 0; i < px; i++) {
            uint8_t *p = img + 3 * i;
            int l = luma(p);
            for (int c = 0; c < 3; c++)
                p[c] = a == 0.f ? (uint8_t)l : blend1(a, l, p[c]);
        }
        return;
    }
    if (kind == STK__TIMM_CONTRAST) { /* ImageStat's mean: a double sum over the histogram */
        uint64_t sum = 0;
        for (size_t i = 0; i < px; i++)
            sum += (uint64_t)luma(img + 3 * i);
        int mean = (int)((double)sum / (double)px + 0.5);
        for (size_t i = 0; i < n; i++)
            img[i] = a == 0.f ? (uint8_t)mean : blend1(a, mean, img[i]);
        return;
    }
    /* Sharpness: the SMOOTH-filtered degenerate into SCRATCH (Pillow's filter needs 3 x 3) */
    if (h < 3 || w < 3)
        return;
    stk__aug_smooth(img, scratch, h, w);
    for (size_t i = 0; i < n; i++)
        img[i] = a == 0.f ? scratch[i] : blend1(a, scratch[i], img[i]);
}

static void apply_lut(uint8_t *img, size_t px, const uint8_t lut[3][256])
{
    for (size_t i = 0; i < px; i++)
        for (int c = 0; c < 3; c++)
            img[3 * i + c] = lut[c][img[3 * i + c]];
}

static void autocontrast(uint8_t *img, size_t px)
{
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++) {
        int lo = 255, hi = 0;
        for (size_t i = 0; i < px; i++) {
            int v = img[3 * i + c];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        if (hi <= lo) {
            for (int i = 0; i < 256; i++)
                lut[c][i] = (uint8_t)i;
            continue;
        }
        double scale = 255.0 / (hi - lo), offset = -lo * scale;
        for (int i = 0; i < 256; i++) {
            int v = (int)(i * scale + offset);
            lut[c][i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    apply_lut(img, px, lut);
}

static void equalize(uint8_t *img, size_t px)
{
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++) {
        uint64_t hist[256] = {0};
        for (size_t i = 0; i < px; i++)
            hist[img[3 * i + c]]++;
        int last = 255, distinct = 0;
        while (last > 0 && hist[last] == 0)
            last--;
        for (int i = 0; i < 256; i++)
            distinct += hist[i] != 0;
        uint64_t step = distinct <= 1 ? 0 : (px - hist[last]) / 255, cum = step / 2;
        for (int i = 0; i < 256; i++) {
            uint64_t v = step ? cum / step : (uint64_t)i;
            lut[c][i] = (uint8_t)(v > 255 ? 255 : v);
            cum += hist[i];
        }
    }
    apply_lut(img, px, lut);
}

/* posterize / solarize / solarize_add / invert: one table for all channels */
static void point(int op, double arg, uint8_t *img, size_t n)
{
    uint8_t lut[256];
    int a = (int)arg;
    for (int i = 0; i < 256; i++) {
        int v = i;
        if (op == STK__TIMM_INVERT)
            v = 255 - i;
        else if (op == STK__TIMM_POSTERIZE || op == STK__TIMM_POSTERIZE_INC || op == STK__TIMM_POSTERIZE_ORIG)
            /* ~(2^(8 - bits) - 1) */
            v = a >= 8 ? i : a <= 0 ? 0 : i & ~((1 << (8 - a)) - 1);
        else if (op == STK__TIMM_SOLARIZE || op == STK__TIMM_SOLARIZE_INC)
            v = i < a ? i : 255 - i;
        else if (op == STK__TIMM_SOLARIZE_ADD) /* thresh 128 */
            v = i < 128 ? (i + a > 255 ? 255 : i + a) : i;
        lut[i] = (uint8_t)v;
    }
    for (size_t i = 0; i < n; i++)
        img[i] = lut[img[i]];
}

/* ---- geometric ops ------------------------------------------------------------------------ */

#define CLIPI(v, n) ((v) < 0 ? 0 : (v) < (n) ? (v) : (n) - 1)

static inline int pfloor(double v) { return v < 0.0 ? (int)floor(v) : (int)v; }

/* bilinear_filter32RGB: SRC at (xin, yin), known inside the image */
static void bilinear(const uint8_t *src, int h, int w, double xin, double yin, uint8_t *o)
{
    xin -= 0.5;
    yin -= 0.5;
    int x = pfloor(xin), y = pfloor(yin);
    double dx = xin - x, dy = yin - y;
    size_t x0 = 3 * (size_t)CLIPI(x, w), x1 = 3 * (size_t)CLIPI(x + 1, w);
    const uint8_t *r0 = src + (size_t)CLIPI(y, h) * 3 * (size_t)w;
    const uint8_t *r1 = y + 1 >= 0 && y + 1 < h ? src + (size_t)(y + 1) * 3 * (size_t)w : NULL;
    for (int c = 0; c < 3; c++) {
        double v1 = r0[x0 + c] + (r0[x1 + c] - r0[x0 + c]) * dx, v2 = v1;
        if (r1)
            v2 = r1[x0 + c] + (r1[x1 + c] - r1[x0 + c]) * dx;
        v1 = v1 + (v2 - v1) * dy;
        o[c] = (uint8_t)v1;
    }
}

/* Pillow's BICUBIC macro (a = -1) */
static inline double cubic(double v1, double v2, double v3, double v4, double d)
{
    double p1 = v2;
    double p2 = -v1 + v3;
    double p3 = 2 * (v1 - v2) + v3 - v4;
    double p4 = -v1 + v2 - v3 + v4;
    return p1 + d * (p2 + d * (p3 + d * p4));
}

static void bicubic(const uint8_t *src, int h, int w, double xin, double yin, uint8_t *o)
{
    xin -= 0.5;
    yin -= 0.5;
    int x = pfloor(xin), y = pfloor(yin);
    double dx = xin - x, dy = yin - y;
    x--;
    y--;
    size_t xs[4];
    for (int k = 0; k < 4; k++)
        xs[k] = 3 * (size_t)CLIPI(x + k, w);
    const uint8_t *rows[4];
    rows[0] = src + (size_t)CLIPI(y, h) * 3 * (size_t)w;
    for (int k = 1; k < 4; k++) /* an absent row repeats the one before */
        rows[k] = y + k >= 0 && y + k < h ? src + (size_t)(y + k) * 3 * (size_t)w : NULL;
    for (int c = 0; c < 3; c++) {
        double v[4];
        const uint8_t *r = rows[0];
        v[0] = cubic(r[xs[0] + c], r[xs[1] + c], r[xs[2] + c], r[xs[3] + c], dx);
        for (int k = 1; k < 4; k++) {
            r = rows[k];
            v[k] = r ? cubic(r[xs[0] + c], r[xs[1] + c], r[xs[2] + c], r[xs[3] + c], dx) : v[k - 1];
        }
        double t = cubic(v[0], v[1], v[2], v[3], dy);
        o[c] = t <= 0.0 ? 0 : t >= 255.0 ? 255 : (uint8_t)t;
    }
}

#define COORD(v) ((v) < 0.0 ? -1 : (int)(v))

static inline void put(uint8_t *dst, int w, int x, int y, const uint8_t *src, int sx, int sy)
{
    memcpy(dst + ((size_t)y * (size_t)w + (size_t)x) * 3, src + ((size_t)sy * (size_t)w + (size_t)sx) * 3, 3);
}

/* ImagingScaleAffine (NEAREST, no rotation or shear): positions accumulated in double from the
 * first pixel's centre. Pillow tabulates the columns once; with a[0] > 0 (always 1 here) the
 * columns inside the image are contiguous, so recomputing them per row gives its table. */
static void nearest_scale(const uint8_t *src, uint8_t *dst, int h, int w, const double a[6])
{
    double yo = a[5] + a[4] * 0.5;
    for (int y = 0; y < h; y++) {
        int yi = COORD(yo);
        double xo = a[2] + a[0] * 0.5;
        for (int x = 0; x < w && yi >= 0 && yi < h; x++) {
            int xin = COORD(xo);
            if (xin >= 0 && xin < w)
                put(dst, w, x, y, src, xin, yi);
            xo += a[0];
        }
        yo += a[4];
    }
}

static inline int fits_fixed(const double a[6], int x, int y)
{
    return fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

/* ImagingTransformAffine with NEAREST: 16.16 fixed point when the corners fit (affine_fixed),
 * else positions accumulated in double */
static void nearest_affine(const uint8_t *src, uint8_t *dst, int h, int w, const double a[6])
{
    if (a[1] == 0 && a[3] == 0) {
        nearest_scale(src, dst, h, w, a);
        return;
    }
    if (fits_fixed(a, 0, 0) && fits_fixed(a, w, h) && fits_fixed(a, 0, h) && fits_fixed(a, w, 0)) {
#define FIX(v) pfloor((v) * 65536.0 + 0.5)
        int a0 = FIX(a[0]), a1 = FIX(a[1]), a3 = FIX(a[3]), a4 = FIX(a[4]);
        int a2 = FIX(a[2] + a[0] * 0.5 + a[1] * 0.5), a5 = FIX(a[5] + a[3] * 0.5 + a[4] * 0.5);
#undef FIX
        for (int y = 0; y < h; y++) {
            int xx = a2, yy = a5;
            for (int x = 0; x < w; x++) {
                int xin = xx >> 16, yin = yy >> 16; /* arithmetic shifts: floor */
                if (xin >= 0 && xin < w && yin >= 0 && yin < h)
                    put(dst, w, x, y, src, xin, yin);
                xx += a0;
                yy += a3;
            }
            a2 += a1;
            a5 += a4;
        }
        return;
    }
    double xo = a[2] + a[1] * 0.5 + a[0] * 0.5, yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for (int y = 0; y < h; y++) {
        double xx = xo, yy = yo;
        for (int x = 0; x < w; x++) {
            int xin = COORD(xx), yin = COORD(yy);
            if (xin >= 0 && xin < w && yin >= 0 && yin < h)
                put(dst, w, x, y, src, xin, yin);
            xx += a[0];
            yy += a[3];
        }
        xo += a[1];
        yo += a[4];
    }
}

/* Image.transform(AFFINE) into a DST filled with FILL: NEAREST as above, the filters through
 * ImagingGenericTransform with affine_transform */
static void affine(const uint8_t *src, uint8_t *dst, int h, int w, const double a[6], int resample,
                   const uint8_t fill[3])
{
    if (resample == STK__TIMM_NEAREST) {
        for (size_t i = 0; i < (size_t)h * (size_t)w; i++)
            memcpy(dst + 3 * i, fill, 3);
        nearest_affine(src, dst, h, w, a);
        return;
    }
    for (int y = 0; y < h; y++) {
        uint8_t *o = dst + (size_t)y * 3 * (size_t)w;
        for (int x = 0; x < w; x++, o += 3) {
            double xi = x + 0.5, yi = y + 0.5;
            double xx = a[0] * xi + a[1] * yi + a[2];
            double yy = a[3] * xi + a[4] * yi + a[5];
            if (xx < 0.0 || xx >= w || yy < 0.0 || yy >= h)
                memcpy(o, fill, 3);
            else if (resample == STK__TIMM_BICUBIC)
                bicubic(src, h, w, xx, yy, o);
            else
                bilinear(src, h, w, xx, yy, o);
        }
    }
}

/* Python's round(v, 15): the correctly rounded decimal, read back */
static double round15(double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.15f", v);
    return strtod(buf, NULL);
}

/* Image.transpose ROTATE_90 / 180 / 270 (counter-clockwise); 90 and 270 on a square only */
static void transpose(int quarter, const uint8_t *src, uint8_t *dst, int h, int w)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int sx = x, sy = y;
            if (quarter == 2)
                sx = w - 1 - x, sy = h - 1 - y;
            else if (quarter == 1)
                sx = w - 1 - y, sy = x;
            else
                sx = y, sy = h - 1 - x;
            memcpy(dst + ((size_t)y * (size_t)w + (size_t)x) * 3, src + ((size_t)sy * (size_t)w + (size_t)sx) * 3, 3);
        }
}

static void geometric(int op, double arg, int resample, const uint8_t fill[3], uint8_t *img, int h, int w,
                      uint8_t *scratch)
{
    double a[6] = {1, 0, 0, 0, 1, 0};
    size_t n = (size_t)h * (size_t)w * 3;
    if (op == STK__TIMM_ROTATE) {
        double angle = fmod(arg, 360.0); /* Python's %: the sign of the divisor */
        if (angle < 0.0)
            angle += 360.0;
        if (angle == 0.0)
            return;
        if (angle == 180.0 || ((angle == 90.0 || angle == 270.0) && w == h)) {
            transpose((int)(angle / 90.0), img, scratch, h, w);
            memcpy(img, scratch, n);
            return;
        }
        double r = -(angle * (M_PI / 180.0)); /* -math.radians(angle) */
        double cx = w / 2.0, cy = h / 2.0;
        a[0] = round15(cos(r)), a[1] = round15(sin(r)), a[2] = 0.0;
        a[3] = round15(-sin(r)), a[4] = round15(cos(r)), a[5] = 0.0;
        double c = a[0] * -cx + a[1] * -cy + a[2], f = a[3] * -cx + a[4] * -cy + a[5];
        a[2] = c + cx;
        a[5] = f + cy;
    } else if (op == STK__TIMM_SHEAR_X) {
        a[1] = arg;
    } else if (op == STK__TIMM_SHEAR_Y) {
        a[3] = arg;
    } else if (op == STK__TIMM_TRANSLATE_X_REL) {
        a[2] = arg;
    } else {
        a[5] = arg;
    }
    affine(img, scratch, h, w, a, resample, fill);
    memcpy(img, scratch, n);
}

void stk__timm_apply(int op, double arg, int resample, const uint8_t fill[3], uint8_t *img, int h, int w,
                     uint8_t *scratch)
{
    size_t px = (size_t)h * (size_t)w;
    switch (op) {
    case STK__TIMM_AUTOCONTRAST:
        autocontrast(img, px);
        break;
    case STK__TIMM_EQUALIZE:
        equalize(img, px);
        break;
    case STK__TIMM_INVERT:
    case STK__TIMM_POSTERIZE:
    case STK__TIMM_POSTERIZE_INC:
    case STK__TIMM_POSTERIZE_ORIG:
    case STK__TIMM_SOLARIZE:
    case STK__TIMM_SOLARIZE_INC:
    case STK__TIMM_SOLARIZE_ADD:
        point(op, arg, img, 3 * px);
        break;
    case STK__TIMM_COLOR:
    case STK__TIMM_COLOR_INC:
    case STK__TIMM_CONTRAST:
    case STK__TIMM_CONTRAST_INC:
    case STK__TIMM_BRIGHTNESS:
    case STK__TIMM_BRIGHTNESS_INC:
    case STK__TIMM_SHARPNESS:
    case STK__TIMM_SHARPNESS_INC:
        enhance(enhance_kind(op), arg, img, h, w, scratch);
        break;
    default:
        if (stk__timm_geometric(op))
            geometric(op, arg, resample, fill, img, h, w, scratch);
        break;
    }
}

/* ---- the policy --------------------------------------------------------------------------- */

/* _RAND_TRANSFORMS and _RAND_INCREASING_TRANSFORMS, in timm's order */
static const int rand_ops[2][15] = {
    {STK__TIMM_AUTOCONTRAST, STK__TIMM_EQUALIZE, STK__TIMM_INVERT, STK__TIMM_ROTATE, STK__TIMM_POSTERIZE,
     STK__TIMM_SOLARIZE, STK__TIMM_SOLARIZE_ADD, STK__TIMM_COLOR, STK__TIMM_CONTRAST, STK__TIMM_BRIGHTNESS,
     STK__TIMM_SHARPNESS, STK__TIMM_SHEAR_X, STK__TIMM_SHEAR_Y, STK__TIMM_TRANSLATE_X_REL,
     STK__TIMM_TRANSLATE_Y_REL},
    {STK__TIMM_AUTOCONTRAST, STK__TIMM_EQUALIZE, STK__TIMM_INVERT, STK__TIMM_ROTATE, STK__TIMM_POSTERIZE_INC,
     STK__TIMM_SOLARIZE_INC, STK__TIMM_SOLARIZE_ADD, STK__TIMM_COLOR_INC, STK__TIMM_CONTRAST_INC,
     STK__TIMM_BRIGHTNESS_INC, STK__TIMM_SHARPNESS_INC, STK__TIMM_SHEAR_X, STK__TIMM_SHEAR_Y,
     STK__TIMM_TRANSLATE_X_REL, STK__TIMM_TRANSLATE_Y_REL},
};

/* _RAND_WEIGHTED_0 ('tweights'), in timm's order, and its weights */
static const int weighted_ops[15] = {
    STK__TIMM_ROTATE,      STK__TIMM_SHEAR_X,        STK__TIMM_SHEAR_Y,       STK__TIMM_TRANSLATE_X_REL,
    STK__TIMM_TRANSLATE_Y_REL, STK__TIMM_COLOR_INC,  STK__TIMM_SHARPNESS_INC, STK__TIMM_AUTOCONTRAST,
    STK__TIMM_SOLARIZE_INC, STK__TIMM_SOLARIZE_ADD,  STK__TIMM_CONTRAST_INC,  STK__TIMM_BRIGHTNESS_INC,
    STK__TIMM_EQUALIZE,    STK__TIMM_POSTERIZE_INC,  STK__TIMM_INVERT,
};
static const double weighted_w[15] = {3, 2, 2, 1, 1, .25, .25, .25, .05, .05, .05, .05, .05, .05, .05};

/* numpy's choice(15, n, replace=False, p=w / sum(w)): each layer proportional to the weights of
 * the ops not chosen yet (numpy redraws duplicates, which is the same distribution) */
static int draw_weighted(stk__rng *r, int taken[15])
{
    double total = 0.0;
    int last = -1;
    for (int k = 0; k < 15; k++)
        if (!taken[k])
            total += weighted_w[k], last = k;
    double u = stk__rng_uniform(r) * total, c = 0.0;
    for (int k = 0; k < 15; k++) {
        if (taken[k])
            continue;
        c += weighted_w[k];
        if (u < c) {
            taken[k] = 1;
            return weighted_ops[k];
        }
    }
    taken[last] = 1; /* u rounded up to the total */
    return weighted_ops[last];
}

#define TIMM_CTR0 0x90000000u
#define TIMM_AUTO_CTR0 0xB0000000u

/* AugmentOp.__call__'s draws for S->op (already set) with probability PROB and magnitude MAG:
 * whether it runs, the magnitude noise and clip, the sign (_randomly_negate), the filter */
static void draw_op(const stk__timmra *p, stk__rng *r, double prob, double mag, stk__timmstep *s)
{
    s->applied = !(prob < 1.0 && stk__rng_uniform(r) > prob);
    if (!s->applied)
        return;
    double m = mag;
    if (isinf(p->mstd)) {
        m = m * stk__rng_uniform(r); /* random.uniform(0, m) */
    } else if (p->mstd > 0) {
        double u1 = stk__rng_uniform(r), u2 = stk__rng_uniform(r);
        m += p->mstd * sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
    }
    s->level = m < 0.0 ? 0.0 : m > p->mmax ? p->mmax : m; /* max(0., min(m, upper_bound)) */
    if (stk__timm_signed(s->op))
        s->negate = stk__rng_uniform(r) > 0.5;
    s->resample = p->resample;
    if (stk__timm_geometric(s->op) && p->resample == STK__TIMM_RANDOM)
        s->resample = (int)stk__rng_below(r, 2);
}

int stk__timmra_draw(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, stk__timmstep *steps)
{
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = TIMM_CTR0;
    int n = p->num_layers < 0 ? 0 : p->num_layers > STK__TIMM_MAX_LAYERS ? STK__TIMM_MAX_LAYERS : p->num_layers;
    const int *ops = rand_ops[p->increasing ? 1 : 0];
    int taken[15] = {0};
    if (p->weighted && n > 15)
        n = 15;
    for (int i = 0; i < n; i++) {
        stk__timmstep *s = &steps[i];
        memset(s, 0, sizeof *s);
        s->op = p->weighted ? draw_weighted(&r, taken) : ops[stk__rng_below(&r, 15)];
        draw_op(p, &r, p->prob, p->magnitude, s);
    }
    return n;
}

static void apply_steps(const stk__timmra *p, const stk__timmstep *steps, int n, uint8_t *img, int h, int w,
                        uint8_t *scratch)
{
    for (int i = 0; i < n; i++) {
        if (!steps[i].applied)
            continue;
        double arg = stk__timm_arg(steps[i].op, steps[i].level, steps[i].negate, p->translate_pct, h, w);
        stk__timm_apply(steps[i].op, arg, steps[i].resample, p->fill, img, h, w, scratch);
    }
}

void stk__timmra_apply(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, uint8_t *img, int h,
                       int w, uint8_t *scratch)
{
    stk__timmstep steps[STK__TIMM_MAX_LAYERS];
    if (!p->weighted && p->num_layers > STK__TIMM_MAX_LAYERS) { /* drawn as applied, as timmra_draw does */
        stk__rng r;
        stk__rng_init(&r, seed, epoch, index);
        r.ctr[0] = TIMM_CTR0;
        const int *ops = rand_ops[p->increasing ? 1 : 0];
        for (int i = 0; i < p->num_layers; i++) {
            memset(steps, 0, sizeof steps[0]);
            steps[0].op = ops[stk__rng_below(&r, 15)];
            draw_op(p, &r, p->prob, p->magnitude, &steps[0]);
            apply_steps(p, steps, 1, img, h, w, scratch);
        }
        return;
    }
    int n = stk__timmra_draw(p, seed, epoch, index, steps);
    apply_steps(p, steps, n, img, h, w, scratch);
}

/* ---- AutoAugment -------------------------------------------------------------------------- */

int stk__timmaa_parse(const float *v, size_t n, stk__timmaa *out, char *err)
{
    memset(out, 0, sizeof *out);
    size_t i = 0;
    int ops = 0;
    while (i < n) {
        int s = out->nsub;
        float kf = v[i++];
        if (s == STK__TIMM_AUTO_MAX_SUB)
            return stk__err(err, STK_E_INVALID, "STK_P_TIMM_AUTO_POLICY: more than %d sub-policies",
                            STK__TIMM_AUTO_MAX_SUB);
        if (!(kf >= 1.f && kf <= (float)STK__TIMM_AUTO_MAX_OPS_SUB && kf == floorf(kf)))
            return stk__err(err, STK_E_INVALID, "STK_P_TIMM_AUTO_POLICY sub-policy %d: op count %g is not 1..%d", s,
                            (double)kf, STK__TIMM_AUTO_MAX_OPS_SUB);
        int k = (int)kf;
        if (i + 3 * (size_t)k > n)
            return stk__err(err, STK_E_INVALID, "STK_P_TIMM_AUTO_POLICY sub-policy %d: %d ops take %d values, %zu left",
                            s, k, 3 * k, n - i);
        if (ops + k > STK__TIMM_AUTO_MAX_OPS)
            return stk__err(err, STK_E_INVALID, "STK_P_TIMM_AUTO_POLICY: more than %d ops in all",
                            STK__TIMM_AUTO_MAX_OPS);
        for (int j = 0; j < k; j++, i += 3, ops++) {
            float op = v[i], prob = v[i + 1], mag = v[i + 2];
            if (!(op >= 0.f && op < (float)STK__TIMM_OP_COUNT && op == floorf(op)))
                return stk__err(err, STK_E_INVALID, "STK_P_TIMM_AUTO_POLICY sub-policy %d op %d: unknown op %g "
                                "(0..%d, stoker.h lists them)", s, j, (double)op, STK__TIMM_OP_COUNT - 1);
            if (!(prob >= 0.f && prob <= 1.f))
                return stk__err(err, STK_E_INVALID, "STK_P_TIMM_AUTO_POLICY sub-policy %d op %d (%s): probability %g "
                                "is not in [0, 1]", s, j, names[(int)op], (double)prob);
            if (!(mag >= 0.f && mag <= 1000.f))
                return stk__err(err, STK_E_INVALID, "STK_P_TIMM_AUTO_POLICY sub-policy %d op %d (%s): magnitude %g "
                                "is not in [0, 1000]", s, j, names[(int)op], (double)mag);
            out->op[ops] = (int)op;
            out->prob[ops] = prob;
            out->magnitude[ops] = mag;
        }
        out->nsub++;
        out->off[out->nsub] = ops;
    }
    return STK_OK;
}

int stk__timmaa_draw(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, int *sub,
                     stk__timmstep *steps)
{
    const stk__timmaa *aa = &p->aa;
    *sub = -1;
    if (aa->nsub <= 0)
        return 0;
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = TIMM_AUTO_CTR0;
    int s = (int)stk__rng_below(&r, (uint32_t)aa->nsub); /* random.choice(self.policy) */
    int n = 0;
    for (int j = aa->off[s]; j < aa->off[s + 1] && n < STK__TIMM_MAX_LAYERS; j++, n++) {
        memset(&steps[n], 0, sizeof steps[n]);
        steps[n].op = aa->op[j];
        draw_op(p, &r, aa->prob[j], aa->magnitude[j], &steps[n]);
    }
    *sub = s;
    return n;
}

void stk__timmaa_apply(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, uint8_t *img, int h,
                       int w, uint8_t *scratch)
{
    stk__timmstep steps[STK__TIMM_MAX_LAYERS];
    int sub;
    int n = stk__timmaa_draw(p, seed, epoch, index, &sub, steps);
    apply_steps(p, steps, n, img, h, w, scratch);
}
