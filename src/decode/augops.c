/* SPDX-License-Identifier: MIT */
/*
 * augops.c — torchvision's augmentation op table on uint8 RGB HWC, equal to its tensor path
 * (torchvision 0.14 functional_tensor.py as autoaugment.py's _apply_op calls it), the
 * TrivialAugmentWide / RandAugment / AutoAugment (IMAGENET, CIFAR10, SVHN) / AugMix policies drawn
 * from the per-sample PRNG, the ColorJitter / RandomGrayscale / RandomVerticalFlip / GaussianBlur /
 * RandomAffine / RandomRotation steps and RandomErasing's boxes. Each user of the PRNG starts the
 * sample's counter in a range of its own (crop 0, the crop's random filter 0x70000000, policy
 * 2^31, timm's RandAugment 0x90000000, AugMix 0xA0000000, timm's AutoAugment 0xB0000000, steps
 * 3 * 2^30 + 256 k, erasing 0xE0000000).
 *
 * The tensor path works in float32 one tensor op at a time, each result rounded to float32, and
 * casts back to uint8 by truncation (.to(uint8)) or, after a grid sample, round-half-even then
 * truncation. Each op below repeats those float32 steps in the same order; the file is compiled
 * with -ffp-contract=off so that no multiply-add is fused where torch rounds twice. Where torch's
 * result does not depend on its summation order (sums of integers below 2^24, the 3x3 blur whose
 * exact value k/13 is never a rounding tie) integers are used instead. The affine grid is
 * torchvision's _gen_affine_grid (x * r0 + y * r1, then + r2, in float32: what torch's bmm gives
 * for K = 3) followed by grid_sample's AVX2 CPU kernel, whose compiler fused its multiply-adds:
 * unnormalise fma(g + 1, size / 2, -0.5); nearest = round half even; bilinear weights (1 - dx) *
 * (1 - dy) ... and the four-term sum as a chain of fmaf; the fill is its extra mask channel, blended
 * as separate tensor ops (not fused). docs/ARCHITECTURE.md ("Decode and augment") lists the one known deviation.
 */
#include "augops.h"

#include <math.h>
#include <string.h>

static const char *const op_names[STK__OP_COUNT] = {
    "Identity", "ShearX",     "ShearY",   "TranslateX", "TranslateY",   "Rotate",   "Brightness", "Color",
    "Contrast", "Sharpness", "Posterize", "Solarize",   "AutoContrast", "Equalize", "Invert",
};

int stk__augop_find(const char *name) { return stk__name_index(op_names, STK__OP_COUNT, name); }

const char *stk__augop_name(int op) { return op >= 0 && op < STK__OP_COUNT ? op_names[op] : "?"; }

/* ---- colour ops --------------------------------------------------------------------------- */

/* _blend(x, y, ratio) = (ratio * x + (1.0 - ratio) * y).clamp(0, 255).to(uint8), in float32 */
static inline uint8_t blend1(float rf, float sf, float x, float y)
{
    float a = rf * x;
    float b = sf * y;
    float v = a + b;
    v = v < 0.f ? 0.f : v > 255.f ? 255.f : v;
    return (uint8_t)v;
}

/* rgb_to_grayscale: (0.2989 r + 0.587 g + 0.114 b).to(uint8) */
static inline uint8_t gray1(const uint8_t *p)
{
    float r = 0.2989f * (float)p[0];
    float g = 0.587f * (float)p[1];
    float b = 0.114f * (float)p[2];
    float s = r + g;
    s = s + b;
    return (uint8_t)s;
}

static void op_brightness(uint8_t *img, size_t n, double f)
{
    float rf = (float)f, sf = (float)(1.0 - f);
    for (size_t i = 0; i < n; i++)
        img[i] = blend1(rf, sf, (float)img[i], 0.f);
}

static void op_color(uint8_t *img, size_t px, double f)
{
    float rf = (float)f, sf = (float)(1.0 - f);
    for (size_t i = 0; i < px; i++) {
        uint8_t *p = img + 3 * i;
        float g = (float)gray1(p);
        for (int c = 0; c < 3; c++)
            p[c] = blend1(rf, sf, (float)p[c], g);
    }
}

/* The mean of the grayscale image as torch.mean gives it: sum / N in float32 (the integer sum is
 * exact in float32 up to 2^24 / 255 = 65793 pixels; beyond, torch's float sum may round). */
static void op_contrast(uint8_t *img, size_t px, double f)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < px; i++)
        sum += gray1(img + 3 * i);
    float mean = (float)sum / (float)px;
    float rf = (float)f, sf = (float)(1.0 - f);
    for (size_t i = 0; i < 3 * px; i++)
        img[i] = blend1(rf, sf, (float)img[i], mean);
}

/* The blur is rounded half to even in torch; k / 13 is never a tie, so round(k / 13) =
 * (2k + 13) / 26 whatever torch's float summation order. */
void stk__aug_smooth(const uint8_t *img, uint8_t *out, int h, int w)
{
    size_t row = 3 * (size_t)w;
    memcpy(out, img, row * (size_t)h);
    for (int y = 1; y < h - 1; y++) {
        const uint8_t *a = img + (size_t)(y - 1) * row, *b = a + row, *c = b + row;
        uint8_t *o = out + (size_t)y * row;
        for (size_t x = 3; x < row - 3; x++) {
            unsigned k = a[x - 3] + a[x] + a[x + 3] + b[x - 3] + 5u * b[x] + b[x + 3] + c[x - 3] + c[x] +
                         c[x + 3];
            o[x] = (uint8_t)((2 * k + 13) / 26);
        }
    }
}

/* adjust_sharpness: blend with the blur of the interior (border pixels blend with themselves) */
static void op_sharpness(uint8_t *img, int h, int w, double f, uint8_t *scratch)
{
    if (h <= 2 || w <= 2)
        return;
    stk__aug_smooth(img, scratch, h, w);
    float rf = (float)f, sf = (float)(1.0 - f);
    size_t n = 3 * (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++)
        img[i] = blend1(rf, sf, (float)img[i], (float)scratch[i]);
}

static void op_posterize(uint8_t *img, size_t n, int bits)
{
    if (bits < 0)
        bits = 0;
    uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
    for (size_t i = 0; i < n; i++)
        img[i] &= mask;
}

/* where(img >= threshold, 255 - img, img), the comparison in float32 */
static void op_solarize(uint8_t *img, size_t n, double threshold)
{
    float t = (float)threshold;
    for (size_t i = 0; i < n; i++)
        if ((float)img[i] >= t)
            img[i] = (uint8_t)(255 - img[i]);
}

static void op_invert(uint8_t *img, size_t n)
{
    for (size_t i = 0; i < n; i++)
        img[i] = (uint8_t)(255 - img[i]);
}

/* ((img - min) * (255 / (max - min))).clamp(0, 255).to(uint8) per channel; a flat channel keeps
 * min = 0, scale = 1 */
static void op_autocontrast(uint8_t *img, size_t px)
{
    for (int c = 0; c < 3; c++) {
        uint8_t lo = 255, hi = 0;
        for (size_t i = 0; i < px; i++) {
            uint8_t v = img[3 * i + c];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        float mn = (float)lo, scale = 1.f;
        if (hi > lo) /* bound / t is t.reciprocal() * bound in torch (Tensor.__rtruediv__) */
            scale = (1.f / ((float)hi - mn)) * 255.f;
        else
            mn = 0.f;
        for (size_t i = 0; i < px; i++) {
            float d = (float)img[3 * i + c] - mn;
            float v = d * scale;
            v = v < 0.f ? 0.f : v > 255.f ? 255.f : v;
            img[3 * i + c] = (uint8_t)v;
        }
    }
}

/* _scale_channel: step = (pixels not in the last occupied bin) // 255; lut[i] = (cumsum before i
 * + step // 2) // step, clamped to 255; a channel with step 0 is left as it is */
static void op_equalize(uint8_t *img, size_t px)
{
    for (int c = 0; c < 3; c++) {
        uint64_t hist[256] = {0};
        for (size_t i = 0; i < px; i++)
            hist[img[3 * i + c]]++;
        int last = 255;
        while (last > 0 && hist[last] == 0)
            last--;
        uint64_t step = (px - hist[last]) / 255;
        if (step == 0)
            continue;
        uint8_t lut[256];
        uint64_t cum = 0;
        for (int i = 0; i < 256; i++) {
            uint64_t v = (cum + step / 2) / step;
            lut[i] = (uint8_t)(v > 255 ? 255 : v);
            cum += hist[i];
        }
        for (size_t i = 0; i < px; i++)
            img[3 * i + c] = lut[img[3 * i + c]];
    }
}

/* ---- geometric ops ------------------------------------------------------------------------ */

#define DEG2RAD (M_PI / 180.0) /* Python's math.radians multiplies by this */
#define RAD2DEG (180.0 / M_PI)

/* torchvision.transforms.functional._get_inverse_affine_matrix, in double */
static void inverse_affine(double cx, double cy, double angle, double tx, double ty, double scale, double shx,
                           double shy, double m[6])
{
    double rot = angle * DEG2RAD, sx = shx * DEG2RAD, sy = shy * DEG2RAD;
    double a = cos(rot - sy) / cos(sy);
    double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    double c = sin(rot - sy) / cos(sy);
    double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d, m[1] = -b, m[2] = 0.0, m[3] = -c, m[4] = a, m[5] = 0.0;
    for (int i = 0; i < 6; i++)
        m[i] = m[i] / scale;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* round half to even and clamp; NaN (a degenerate RandomAffine scale or shear can make one) is 0 */
static inline uint8_t round_u8(float v)
{
    v = nearbyintf(v);
    return v >= 255.f ? 255 : v > 0.f ? (uint8_t)v : 0;
}

/* One output pixel by grid_sample(align_corners=False, padding zeros) at source coordinates
 * (ix, iy) (already unnormalised), with torchvision's fill mask when FILL->on. */
static void sample_nearest(const uint8_t *src, int h, int w, float ix, float iy, const stk__augfill *fill,
                           uint8_t *o)
{
    float xn = nearbyintf(ix), yn = nearbyintf(iy);
    if (xn >= 0.f && xn < (float)w && yn >= 0.f && yn < (float)h) {
        memcpy(o, src + ((size_t)(int)yn * (size_t)w + (size_t)(int)xn) * 3, 3);
        return;
    }
    for (int c = 0; c < 3; c++)
        o[c] = fill->on ? round_u8(fill->v[c]) : 0;
}

static void sample_bilinear(const uint8_t *src, int h, int w, float ix, float iy, const stk__augfill *fill,
                            uint8_t *o)
{
    float x0 = floorf(ix), y0 = floorf(iy);
    float wx = ix - x0, ex = 1.f - wx, wy = iy - y0, ey = 1.f - wy;
    float k[4] = {ey * ex, ey * wx, wy * ex, wy * wx}; /* nw, ne, sw, se */
    const uint8_t *p[4] = {NULL, NULL, NULL, NULL};
    if (x0 > -2.f && x0 < (float)w && y0 > -2.f && y0 < (float)h) {
        int xi = (int)x0, yi = (int)y0;
        for (int j = 0; j < 4; j++) {
            int xx = xi + (j & 1), yy = yi + (j >> 1);
            if (xx >= 0 && xx < w && yy >= 0 && yy < h)
                p[j] = src + ((size_t)yy * (size_t)w + (size_t)xx) * 3;
        }
    }
    /* torch's AVX2 kernel: nw_val * nw + ne_val * ne + ..., contracted to a chain of fused
     * multiply-adds by its compiler */
    float m = 0.f;
    if (fill->on) {
        m = (p[0] ? 1.f : 0.f) * k[0];
        for (int j = 1; j < 4; j++)
            m = fmaf(p[j] ? 1.f : 0.f, k[j], m);
    }
    for (int c = 0; c < 3; c++) {
        float v = (p[0] ? (float)p[0][c] : 0.f) * k[0];
        for (int j = 1; j < 4; j++)
            v = fmaf(p[j] ? (float)p[j][c] : 0.f, k[j], v);
        if (fill->on) {
            float a = v * m;
            float b = (1.f - m) * fill->v[c];
            v = a + b;
        }
        o[c] = round_u8(v);
    }
}

/* F_t.affine / F_t.rotate with the inverse matrix M: the grid (float32, as _gen_affine_grid) and
 * the sample, SRC -> DST */
static void warp(const uint8_t *src, uint8_t *dst, int h, int w, const double m[6], int interp,
                 const stk__augfill *fill)
{
    float t[6];
    for (int i = 0; i < 6; i++)
        t[i] = (float)m[i];
    float hw = (float)(0.5 * w), hh = (float)(0.5 * h);
    /* rescaled_theta = theta^T / [0.5 w, 0.5 h]: r[i][j] = theta[j][i] / half[j] */
    float r00 = t[0] / hw, r10 = t[1] / hw, r20 = t[2] / hw;
    float r01 = t[3] / hh, r11 = t[4] / hh, r21 = t[5] / hh;
    float x_start = (float)(-w * 0.5 + 0.5), y_start = (float)(-h * 0.5 + 0.5);
    float sw = (float)w / 2.f, sh = (float)h / 2.f;
    for (int i = 0; i < h; i++) {
        float y = y_start + (float)i;
        float y0 = y * r10, y1 = y * r11;
        uint8_t *o = dst + (size_t)i * (size_t)w * 3;
        for (int j = 0; j < w; j++, o += 3) {
            float x = x_start + (float)j;
            float gx = x * r00, gy = x * r01;
            gx = gx + y0;
            gy = gy + y1;
            gx = gx + r20;
            gy = gy + r21;
            /* grid_sample's unnormalise (g + 1) * size / 2 - 0.5, fused as torch's kernel is */
            float ix = fmaf(gx + 1.f, sw, -0.5f), iy = fmaf(gy + 1.f, sh, -0.5f);
            if (interp == STK__INTERP_BILINEAR)
                sample_bilinear(src, h, w, ix, iy, fill, o);
            else
                sample_nearest(src, h, w, ix, iy, fill, o);
        }
    }
}

static void op_geometric(int op, double mag, int interp, const stk__augfill *fill, uint8_t *img, int h, int w,
                         uint8_t *scratch)
{
    double m[6];
    double cx = -(w * 0.5), cy = -(h * 0.5); /* the shears' center=[0, 0], relative to the centre */
    switch (op) {
    case STK__OP_SHEAR_X:
        inverse_affine(cx, cy, 0.0, 0.0, 0.0, 1.0, atan(mag) * RAD2DEG, 0.0, m);
        break;
    case STK__OP_SHEAR_Y:
        inverse_affine(cx, cy, 0.0, 0.0, 0.0, 1.0, 0.0, atan(mag) * RAD2DEG, m);
        break;
    case STK__OP_TRANSLATE_X:
        inverse_affine(0.0, 0.0, 0.0, (double)(int64_t)mag, 0.0, 1.0, 0.0, 0.0, m);
        break;
    case STK__OP_TRANSLATE_Y:
        inverse_affine(0.0, 0.0, 0.0, 0.0, (double)(int64_t)mag, 1.0, 0.0, 0.0, m);
        break;
    default: /* Rotate: F.rotate passes -angle */
        inverse_affine(0.0, 0.0, -mag, 0.0, 0.0, 1.0, 0.0, 0.0, m);
        break;
    }
    warp(img, scratch, h, w, m, interp, fill);
    memcpy(img, scratch, (size_t)h * (size_t)w * 3);
}

void stk__augop_apply(int op, double mag, int interp, const stk__augfill *fill, uint8_t *img, int h, int w,
                      uint8_t *scratch)
{
    static const stk__augfill nofill = {0, {0, 0, 0}};
    size_t px = (size_t)h * (size_t)w;
    if (!fill)
        fill = &nofill;
    switch (op) {
    case STK__OP_SHEAR_X:
    case STK__OP_SHEAR_Y:
    case STK__OP_TRANSLATE_X:
    case STK__OP_TRANSLATE_Y:
    case STK__OP_ROTATE:
        op_geometric(op, mag, interp, fill, img, h, w, scratch);
        break;
    case STK__OP_BRIGHTNESS:
        op_brightness(img, 3 * px, 1.0 + mag);
        break;
    case STK__OP_COLOR:
        op_color(img, px, 1.0 + mag);
        break;
    case STK__OP_CONTRAST:
        op_contrast(img, px, 1.0 + mag);
        break;
    case STK__OP_SHARPNESS:
        op_sharpness(img, h, w, 1.0 + mag, scratch);
        break;
    case STK__OP_POSTERIZE:
        op_posterize(img, 3 * px, (int)mag);
        break;
    case STK__OP_SOLARIZE:
        op_solarize(img, 3 * px, mag);
        break;
    case STK__OP_AUTOCONTRAST:
        op_autocontrast(img, px);
        break;
    case STK__OP_EQUALIZE:
        op_equalize(img, px);
        break;
    case STK__OP_INVERT:
        op_invert(img, 3 * px);
        break;
    default: /* Identity */
        break;
    }
}

/* ---- policies ----------------------------------------------------------------------------- */

/* torch.linspace(start, end, n) in float32 as torch's CPU kernel computes it: the first half
 * forward from the start, the second half back from the end, each a fused multiply-add (torch's
 * AVX2 / AVX512 kernels contract start + step * i). Torch 1.x also vectorises: runs of two
 * vectors (8 lanes on AVX2, 16 on AVX512) from the start, lane k = base + k * step (not fused)
 * with base the value of the vector's first index; the leftover points one by one. Torch 2.0
 * dropped the vector path (pytorch PR 89048): every point alone. Checked against the torch at
 * hand by tests/python/test_augops_equal.py. */
static float lin_at(float s, float e, float step, int n, int i)
{
    return i < n / 2 ? fmaf(step, (float)i, s) : fmaf(-step, (float)(n - i - 1), e);
}

static void linspace_f(int torch, double start, double end, int n, float *out)
{
    float s = (float)start, e = (float)end;
    if (n == 1) {
        out[0] = s;
        return;
    }
    float step = (e - s) / (float)(n - 1);
    int lanes = torch == STK__TORCH_1 ? 8 : torch == STK__TORCH_1_AVX512 ? 16 : 0;
    int vec = lanes ? n / (2 * lanes) * (2 * lanes) : 0;
    for (int i = 0; i < n; i++) {
        if (i < vec) {
            int b = i / lanes * lanes, k = i - b;
            float base = lin_at(s, e, step, n, b);
            out[i] = base + (float)k * step;
        } else {
            out[i] = lin_at(s, e, step, n, i);
        }
    }
}

int stk__augpolicy_table(int torch, int policy, int op, int bins, int h, int w, float *out, int *signed_op)
{
    int wide = policy == STK__AUGP_TRIVIAL;
    *signed_op = 1;
    switch (op) {
    case STK__OP_SHEAR_X:
    case STK__OP_SHEAR_Y:
        linspace_f(torch, 0.0, wide ? 0.99 : 0.3, bins, out);
        return bins;
    case STK__OP_TRANSLATE_X:
        linspace_f(torch, 0.0, wide ? 32.0 : 150.0 / 331.0 * w, bins, out);
        return bins;
    case STK__OP_TRANSLATE_Y:
        linspace_f(torch, 0.0, wide ? 32.0 : 150.0 / 331.0 * h, bins, out);
        return bins;
    case STK__OP_ROTATE:
        linspace_f(torch, 0.0, wide ? 135.0 : 30.0, bins, out);
        return bins;
    case STK__OP_BRIGHTNESS:
    case STK__OP_COLOR:
    case STK__OP_CONTRAST:
    case STK__OP_SHARPNESS:
        linspace_f(torch, 0.0, wide ? 0.99 : 0.9, bins, out);
        return bins;
    case STK__OP_POSTERIZE: {
        /* 8 - (arange(bins) / ((bins - 1) / k)).round().int(), k = 6 (wide) or 4 */
        *signed_op = 0;
        float d = (float)((bins - 1) / (wide ? 6.0 : 4.0));
        for (int i = 0; i < bins; i++)
            out[i] = (float)(8 - (int)nearbyintf((float)i / d));
        return bins;
    }
    case STK__OP_SOLARIZE:
        *signed_op = 0;
        linspace_f(torch, 255.0, 0.0, bins, out);
        return bins;
    default:
        *signed_op = 0;
        return 0;
    }
}

/* One slot of an AutoAugment sub-policy: (op, probability, magnitude bin or -1) */
typedef struct aa_slot {
    signed char op;
    float p;
    signed char bin;
} aa_slot;

/* AutoAugmentPolicy.IMAGENET: 25 sub-policies of two slots */
static const aa_slot aa_imagenet[25][2] = {
#define O(n) STK__OP_##n
    {{O(POSTERIZE), 0.4f, 8}, {O(ROTATE), 0.6f, 9}},       {{O(SOLARIZE), 0.6f, 5}, {O(AUTOCONTRAST), 0.6f, -1}},
    {{O(EQUALIZE), 0.8f, -1}, {O(EQUALIZE), 0.6f, -1}},    {{O(POSTERIZE), 0.6f, 7}, {O(POSTERIZE), 0.6f, 6}},
    {{O(EQUALIZE), 0.4f, -1}, {O(SOLARIZE), 0.2f, 4}},     {{O(EQUALIZE), 0.4f, -1}, {O(ROTATE), 0.8f, 8}},
    {{O(SOLARIZE), 0.6f, 3}, {O(EQUALIZE), 0.6f, -1}},     {{O(POSTERIZE), 0.8f, 5}, {O(EQUALIZE), 1.0f, -1}},
    {{O(ROTATE), 0.2f, 3}, {O(SOLARIZE), 0.6f, 8}},        {{O(EQUALIZE), 0.6f, -1}, {O(POSTERIZE), 0.4f, 6}},
    {{O(ROTATE), 0.8f, 8}, {O(COLOR), 0.4f, 0}},           {{O(ROTATE), 0.4f, 9}, {O(EQUALIZE), 0.6f, -1}},
    {{O(EQUALIZE), 0.0f, -1}, {O(EQUALIZE), 0.8f, -1}},    {{O(INVERT), 0.6f, -1}, {O(EQUALIZE), 1.0f, -1}},
    {{O(COLOR), 0.6f, 4}, {O(CONTRAST), 1.0f, 8}},         {{O(ROTATE), 0.8f, 8}, {O(COLOR), 1.0f, 2}},
    {{O(COLOR), 0.8f, 8}, {O(SOLARIZE), 0.8f, 7}},         {{O(SHARPNESS), 0.4f, 7}, {O(INVERT), 0.6f, -1}},
    {{O(SHEAR_X), 0.6f, 5}, {O(EQUALIZE), 1.0f, -1}},      {{O(COLOR), 0.4f, 0}, {O(EQUALIZE), 0.6f, -1}},
    {{O(EQUALIZE), 0.4f, -1}, {O(SOLARIZE), 0.2f, 4}},     {{O(SOLARIZE), 0.6f, 5}, {O(AUTOCONTRAST), 0.6f, -1}},
    {{O(INVERT), 0.6f, -1}, {O(EQUALIZE), 1.0f, -1}},      {{O(COLOR), 0.6f, 4}, {O(CONTRAST), 1.0f, 8}},
    {{O(EQUALIZE), 0.8f, -1}, {O(EQUALIZE), 0.6f, -1}},
#undef O
};

/* AutoAugmentPolicy.CIFAR10 and SVHN, as torchvision's autoaugment.py lists them */
static const aa_slot aa_cifar10[25][2] = {
#define O(n) STK__OP_##n
    {{O(INVERT), 0.1f, -1}, {O(CONTRAST), 0.2f, 6}},       {{O(ROTATE), 0.7f, 2}, {O(TRANSLATE_X), 0.3f, 9}},
    {{O(SHARPNESS), 0.8f, 1}, {O(SHARPNESS), 0.9f, 3}},    {{O(SHEAR_Y), 0.5f, 8}, {O(TRANSLATE_Y), 0.7f, 9}},
    {{O(AUTOCONTRAST), 0.5f, -1}, {O(EQUALIZE), 0.9f, -1}}, {{O(SHEAR_Y), 0.2f, 7}, {O(POSTERIZE), 0.3f, 7}},
    {{O(COLOR), 0.4f, 3}, {O(BRIGHTNESS), 0.6f, 7}},       {{O(SHARPNESS), 0.3f, 9}, {O(BRIGHTNESS), 0.7f, 9}},
    {{O(EQUALIZE), 0.6f, -1}, {O(EQUALIZE), 0.5f, -1}},    {{O(CONTRAST), 0.6f, 7}, {O(SHARPNESS), 0.6f, 5}},
    {{O(COLOR), 0.7f, 7}, {O(TRANSLATE_X), 0.5f, 8}},      {{O(EQUALIZE), 0.3f, -1}, {O(AUTOCONTRAST), 0.4f, -1}},
    {{O(TRANSLATE_Y), 0.4f, 3}, {O(SHARPNESS), 0.2f, 6}},  {{O(BRIGHTNESS), 0.9f, 6}, {O(COLOR), 0.2f, 8}},
    {{O(SOLARIZE), 0.5f, 2}, {O(INVERT), 0.0f, -1}},       {{O(EQUALIZE), 0.2f, -1}, {O(AUTOCONTRAST), 0.6f, -1}},
    {{O(EQUALIZE), 0.2f, -1}, {O(EQUALIZE), 0.6f, -1}},    {{O(COLOR), 0.9f, 9}, {O(EQUALIZE), 0.6f, -1}},
    {{O(AUTOCONTRAST), 0.8f, -1}, {O(SOLARIZE), 0.2f, 8}}, {{O(BRIGHTNESS), 0.1f, 3}, {O(COLOR), 0.7f, 0}},
    {{O(SOLARIZE), 0.4f, 5}, {O(AUTOCONTRAST), 0.9f, -1}}, {{O(TRANSLATE_Y), 0.9f, 9}, {O(TRANSLATE_Y), 0.7f, 9}},
    {{O(AUTOCONTRAST), 0.9f, -1}, {O(SOLARIZE), 0.8f, 3}}, {{O(EQUALIZE), 0.8f, -1}, {O(INVERT), 0.1f, -1}},
    {{O(TRANSLATE_Y), 0.7f, 9}, {O(AUTOCONTRAST), 0.9f, -1}},
#undef O
};

static const aa_slot aa_svhn[25][2] = {
#define O(n) STK__OP_##n
    {{O(SHEAR_X), 0.9f, 4}, {O(INVERT), 0.2f, -1}},        {{O(SHEAR_Y), 0.9f, 8}, {O(INVERT), 0.7f, -1}},
    {{O(EQUALIZE), 0.6f, -1}, {O(SOLARIZE), 0.6f, 6}},     {{O(INVERT), 0.9f, -1}, {O(EQUALIZE), 0.6f, -1}},
    {{O(EQUALIZE), 0.6f, -1}, {O(ROTATE), 0.9f, 3}},       {{O(SHEAR_X), 0.9f, 4}, {O(AUTOCONTRAST), 0.8f, -1}},
    {{O(SHEAR_Y), 0.9f, 8}, {O(INVERT), 0.4f, -1}},        {{O(SHEAR_Y), 0.9f, 5}, {O(SOLARIZE), 0.2f, 6}},
    {{O(INVERT), 0.9f, -1}, {O(AUTOCONTRAST), 0.8f, -1}},  {{O(EQUALIZE), 0.6f, -1}, {O(ROTATE), 0.9f, 3}},
    {{O(SHEAR_X), 0.9f, 4}, {O(SOLARIZE), 0.3f, 3}},       {{O(SHEAR_Y), 0.8f, 8}, {O(INVERT), 0.7f, -1}},
    {{O(EQUALIZE), 0.9f, -1}, {O(TRANSLATE_Y), 0.6f, 6}},  {{O(INVERT), 0.9f, -1}, {O(EQUALIZE), 0.6f, -1}},
    {{O(CONTRAST), 0.3f, 3}, {O(ROTATE), 0.8f, 4}},        {{O(INVERT), 0.8f, -1}, {O(TRANSLATE_Y), 0.0f, 2}},
    {{O(SHEAR_Y), 0.7f, 6}, {O(SOLARIZE), 0.4f, 8}},       {{O(INVERT), 0.6f, -1}, {O(ROTATE), 0.8f, 4}},
    {{O(SHEAR_Y), 0.3f, 7}, {O(TRANSLATE_X), 0.9f, 3}},    {{O(SHEAR_X), 0.1f, 6}, {O(INVERT), 0.6f, -1}},
    {{O(SOLARIZE), 0.7f, 2}, {O(TRANSLATE_Y), 0.6f, 7}},   {{O(SHEAR_Y), 0.8f, 4}, {O(INVERT), 0.8f, -1}},
    {{O(SHEAR_X), 0.7f, 9}, {O(TRANSLATE_Y), 0.8f, 3}},    {{O(SHEAR_Y), 0.8f, 5}, {O(AUTOCONTRAST), 0.7f, -1}},
    {{O(SHEAR_X), 0.7f, 2}, {O(INVERT), 0.1f, -1}},
#undef O
};

/* The sub-policies of STK__AA_* (each table has 25) */
static const aa_slot (*aa_policy(int which))[2]
{
    return which == STK__AA_CIFAR10 ? aa_cifar10 : which == STK__AA_SVHN ? aa_svhn : aa_imagenet;
}

/* The policy stream: the crop's key (seed, epoch, index) with the draw counter started at 2^31,
 * far past the few blocks a crop uses, so that turning a policy on changes no crop. */
#define POLICY_CTR0 0x80000000u

/* _augmentation_space tables live in at most this many bins */
#define MAX_BINS 1024

static double pick(const stk__augpolicy *p, stk__rng *r, int op, int bin, int h, int w)
{
    float tab[MAX_BINS];
    int sgn = 0;
    int n = stk__augpolicy_table(p->torch, p->policy, op, p->policy == STK__AUGP_AUTO ? 10 : p->bins, h, w, tab, &sgn);
    double mag = 0.0;
    if (n > 0) {
        if (bin < 0)
            bin = (int)stk__rng_below(r, (uint64_t)n);
        mag = bin < n ? (double)tab[bin] : 0.0;
    }
    if (sgn && stk__rng_below(r, 2))
        mag = -mag;
    return mag;
}

int stk__augpolicy_draw(const stk__augpolicy *p, uint64_t seed, uint64_t epoch, uint64_t index, int h, int w,
                        stk__augstep *steps)
{
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = POLICY_CTR0;
    int n = 0;
    switch (p->policy) {
    case STK__AUGP_TRIVIAL: {
        int op = (int)stk__rng_below(&r, STK__OP_INVERT);
        steps[n].op = op;
        steps[n++].magnitude = pick(p, &r, op, -1, h, w);
        break;
    }
    case STK__AUGP_RAND:
        for (int i = 0; i < p->num_ops && i < STK__AUG_MAX_OPS; i++) {
            int op = (int)stk__rng_below(&r, STK__OP_INVERT);
            steps[n].op = op;
            steps[n++].magnitude = pick(p, &r, op, p->magnitude, h, w);
        }
        break;
    case STK__AUGP_AUTO: {
        const aa_slot(*aa)[2] = aa_policy(p->aa_policy);
        int id = (int)stk__rng_below(&r, 25);
        double u[2] = {stk__rng_uniform(&r), stk__rng_uniform(&r)};
        int s[2] = {(int)stk__rng_below(&r, 2), (int)stk__rng_below(&r, 2)};
        for (int i = 0; i < 2; i++) {
            if (!(u[i] <= (double)aa[id][i].p))
                continue;
            int op = aa[id][i].op, bin = aa[id][i].bin;
            float tab[10];
            int sgn = 0;
            int nb = stk__augpolicy_table(p->torch, STK__AUGP_AUTO, op, 10, h, w, tab, &sgn);
            double mag = nb > 0 && bin >= 0 ? (double)tab[bin] : 0.0;
            if (sgn && s[i] == 0)
                mag = -mag;
            steps[n].op = op;
            steps[n++].magnitude = mag;
        }
        break;
    }
    default:
        break;
    }
    return n;
}

/* ---- AugMix ---------------------------------------------------------------------------------- */

static double normal_d(stk__rng *r)
{
    double u1 = 1.0 - stk__rng_uniform(r), u2 = stk__rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Gamma(a, 1): Marsaglia and Tsang; a < 1 through Gamma(a + 1) * U^(1/a) */
static double gamma_d(stk__rng *r, double a)
{
    if (a < 1.0) {
        double u = 1.0 - stk__rng_uniform(r);
        return gamma_d(r, a + 1.0) * pow(u, 1.0 / a);
    }
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = normal_d(r), v = 1.0 + c * x;
        if (v <= 0.0)
            continue;
        v = v * v * v;
        double u = 1.0 - stk__rng_uniform(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

/* Dirichlet(alpha, ..., alpha) of N components into float32 OUT */
static void dirichlet(stk__rng *r, double alpha, int n, float *out)
{
    double g[STK__AUGMIX_MAX_WIDTH], sum = 0;
    for (int i = 0; i < n; i++)
        sum += g[i] = gamma_d(r, alpha);
    for (int i = 0; i < n; i++)
        out[i] = (float)(sum > 0 ? g[i] / sum : 1.0 / n);
}

/* AugMix's op table (its _augmentation_space: 9 ops, then the 4 colour ops with all_ops) */
static const int augmix_ops[13] = {STK__OP_SHEAR_X,   STK__OP_SHEAR_Y,   STK__OP_TRANSLATE_X, STK__OP_TRANSLATE_Y,
                                   STK__OP_ROTATE,    STK__OP_POSTERIZE, STK__OP_SOLARIZE,    STK__OP_AUTOCONTRAST,
                                   STK__OP_EQUALIZE,  STK__OP_BRIGHTNESS, STK__OP_COLOR,      STK__OP_CONTRAST,
                                   STK__OP_SHARPNESS};

int stk__augmix_table(int torch, int op, int h, int w, float *out, int *signed_op)
{
    *signed_op = 1;
    switch (op) {
    case STK__OP_TRANSLATE_X:
        linspace_f(torch, 0.0, w / 3.0, 10, out);
        return 10;
    case STK__OP_TRANSLATE_Y:
        linspace_f(torch, 0.0, h / 3.0, 10, out);
        return 10;
    case STK__OP_POSTERIZE: /* 4 - (arange(10) / ((10 - 1) / 4)).round().int() */
        *signed_op = 0;
        for (int i = 0; i < 10; i++)
            out[i] = (float)(4 - (int)nearbyintf((float)i / (float)(9 / 4.0)));
        return 10;
    default:
        return stk__augpolicy_table(torch, STK__AUGP_RAND, op, 10, h, w, out, signed_op);
    }
}

#define AUGMIX_CTR0 0xA0000000u

void stk__augmix_draw(const stk__augpolicy *p, uint64_t seed, uint64_t epoch, uint64_t index, int h, int w,
                      stk__augmix_draws *d)
{
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = AUGMIX_CTR0;
    int width = p->width < 1 ? 1 : p->width > STK__AUGMIX_MAX_WIDTH ? STK__AUGMIX_MAX_WIDTH : p->width;
    float m[2], cw[STK__AUGMIX_MAX_WIDTH];
    dirichlet(&r, p->alpha, 2, m);
    dirichlet(&r, p->alpha, width, cw);
    d->m0 = m[0];
    int nops = p->all_ops ? 13 : 9, sev = p->severity < 1 ? 1 : p->severity > 10 ? 10 : p->severity;
    for (int i = 0; i < width; i++) {
        d->w[i] = cw[i] * m[1];
        d->depth[i] = p->depth > 0 ? (p->depth > STK__AUGMIX_MAX_DEPTH ? STK__AUGMIX_MAX_DEPTH : p->depth)
                                   : 1 + (int)stk__rng_below(&r, 3);
        for (int k = 0; k < d->depth[i]; k++) {
            int op = augmix_ops[stk__rng_below(&r, (uint64_t)nops)], sgn;
            float tab[10];
            int n = stk__augmix_table(p->torch, op, h, w, tab, &sgn);
            double mag = n ? (double)tab[stk__rng_below(&r, (uint64_t)sev)] : 0.0;
            if (sgn && stk__rng_below(&r, 2))
                mag = -mag;
            d->steps[i][k].op = op;
            d->steps[i][k].magnitude = mag;
        }
    }
}

/* mix = m0 * img; for each chain mix += w_i * chain_i (float32, as torch's mul and add_), then
 * truncated to uint8 */
static void augmix_apply(const stk__augpolicy *p, uint64_t seed, uint64_t epoch, uint64_t index, uint8_t *img,
                         int h, int w, uint8_t *scratch, double *tmp)
{
    stk__augmix_draws d;
    stk__augmix_draw(p, seed, epoch, index, h, w, &d);
    size_t n = (size_t)h * (size_t)w * 3;
    float *mix = (float *)(void *)tmp;
    uint8_t *chain = (uint8_t *)(mix + n);
    for (size_t i = 0; i < n; i++)
        mix[i] = d.m0 * (float)img[i];
    int width = p->width < 1 ? 1 : p->width > STK__AUGMIX_MAX_WIDTH ? STK__AUGMIX_MAX_WIDTH : p->width;
    for (int c = 0; c < width; c++) {
        memcpy(chain, img, n);
        for (int k = 0; k < d.depth[c]; k++)
            stk__augop_apply(d.steps[c][k].op, d.steps[c][k].magnitude, p->interp, &p->fill, chain, h, w, scratch);
        for (size_t i = 0; i < n; i++) {
            float t = d.w[c] * (float)chain[i];
            mix[i] = mix[i] + t;
        }
    }
    for (size_t i = 0; i < n; i++)
        img[i] = (uint8_t)(mix[i] < 0.f ? 0.f : mix[i] > 255.f ? 255.f : mix[i]);
}

void stk__augpolicy_apply(const stk__augpolicy *p, uint64_t seed, uint64_t epoch, uint64_t index, uint8_t *img,
                          int h, int w, uint8_t *scratch, double *tmp)
{
    if (p->policy == STK__AUGP_TIMM_RAND) {
        stk__timmra_apply(&p->timm, seed, epoch, index, img, h, w, scratch);
        return;
    }
    if (p->policy == STK__AUGP_TIMM_AUTO) {
        stk__timmaa_apply(&p->timm, seed, epoch, index, img, h, w, scratch);
        return;
    }
    if (p->policy == STK__AUGP_AUGMIX) {
        augmix_apply(p, seed, epoch, index, img, h, w, scratch, tmp);
        return;
    }
    stk__augstep steps[STK__AUG_MAX_OPS];
    int n = stk__augpolicy_draw(p, seed, epoch, index, h, w, steps);
    for (int i = 0; i < n; i++)
        stk__augop_apply(steps[i].op, steps[i].magnitude, p->interp, &p->fill, img, h, w, scratch);
}

/* ---- steps: ColorJitter, RandomGrayscale, RandomVerticalFlip ---------------------------------- */

/* adjust_hue: uint8 / 255 to float32, _rgb2hsv, h = (h + factor) % 1.0, _hsv2rgb, then back to
 * uint8: torchvision 0.14 multiplies by 255, 0.15 on (convert_image_dtype, vision PR 6830) by
 * 255 + 1 - 1e-3 as a float32 scalar; both truncate. Every step one float32 rounding as the
 * tensor ops make it (the einsum that picks the channel values adds zeros: exact) */
static void op_hue(uint8_t *img, size_t px, double factor, int torch)
{
    float hf = (float)factor, scale = torch == STK__TORCH_2 ? (float)(255.0 + 1.0 - 1e-3) : 255.f;
    for (size_t i = 0; i < px; i++) {
        uint8_t *p = img + 3 * i;
        float r = (float)p[0] / 255.f, g = (float)p[1] / 255.f, b = (float)p[2] / 255.f;
        float maxc = r > g ? r : g, minc = r < g ? r : g;
        maxc = b > maxc ? b : maxc;
        minc = b < minc ? b : minc;
        int eqc = maxc == minc;
        float cr = maxc - minc;
        float s = cr / (eqc ? 1.f : maxc);
        float crd = eqc ? 1.f : cr;
        float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
        float hr = maxc == r ? bc - gc : 0.f;
        float hg = maxc == g && maxc != r ? (2.f + rc) - bc : 0.f;
        float hb = maxc != g && maxc != r ? (4.f + gc) - rc : 0.f;
        float hh = (hr + hg) + hb;
        hh = fmodf(hh / 6.f + 1.f, 1.f);
        hh = fmodf(hh + hf, 1.f); /* torch.remainder: the sign of the divisor */
        if (hh < 0.f)
            hh += 1.f;
        float h6 = hh * 6.f, fl = floorf(h6), f = h6 - fl;
        int sector = (int)fl % 6;
        float v = maxc;
        float pp = v * (1.f - s), q = v * (1.f - s * f), t = v * (1.f - s * (1.f - f));
        pp = pp < 0.f ? 0.f : pp > 1.f ? 1.f : pp;
        q = q < 0.f ? 0.f : q > 1.f ? 1.f : q;
        t = t < 0.f ? 0.f : t > 1.f ? 1.f : t;
        const float rgb[6][3] = {{v, t, pp}, {q, v, pp}, {pp, v, t}, {pp, q, v}, {t, pp, v}, {v, pp, q}};
        for (int c = 0; c < 3; c++)
            p[c] = (uint8_t)(rgb[sector][c] * scale);
    }
}

void stk__augop_jitter(uint8_t *img, int h, int w, const int order[4], const double f[4], int torch)
{
    size_t px = (size_t)h * (size_t)w;
    for (int j = 0; j < 4; j++) {
        int k = order[j];
        if (isnan(f[k]))
            continue;
        if (k == 0)
            op_brightness(img, 3 * px, f[k]);
        else if (k == 1)
            op_contrast(img, px, f[k]);
        else if (k == 2)
            op_color(img, px, f[k]);
        else
            op_hue(img, px, f[k], torch);
    }
}

static void op_grayscale(uint8_t *img, size_t px)
{
    for (size_t i = 0; i < px; i++) {
        uint8_t *p = img + 3 * i;
        p[0] = p[1] = p[2] = gray1(p);
    }
}

static void op_vflip(uint8_t *img, int h, int w, uint8_t *scratch)
{
    size_t row = 3 * (size_t)w;
    for (int y = 0; y < h / 2; y++) {
        uint8_t *a = img + (size_t)y * row, *b = img + (size_t)(h - 1 - y) * row;
        memcpy(scratch, a, row);
        memcpy(a, b, row);
        memcpy(b, scratch, row);
    }
}

/* _get_gaussian_kernel1d: linspace(-(k-1)/2, (k-1)/2), exp(-0.5 (x / sigma)^2), / sum, float32 */
static void gauss1d(int k, double sigma, float *out)
{
    float s = (float)sigma, sum = 0.f;
    for (int i = 0; i < k; i++) {
        float x = (float)(i - (k - 1) / 2); /* k is odd */
        float t = x / s;
        out[i] = expf(-0.5f * (t * t));
        sum += out[i];
    }
    for (int i = 0; i < k; i++)
        out[i] /= sum;
}

/* reflect padding (edge not repeated), folded again for a kernel wider than the image */
static int reflect(int i, int n)
{
    if (n == 1)
        return 0;
    int period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

#define BLUR_MAX_K 255

void stk__augop_blur(uint8_t *img, int h, int w, int kx, int ky, double sigma, double *tmp)
{
    float gx[BLUR_MAX_K], gy[BLUR_MAX_K];
    gauss1d(kx, sigma, gx);
    gauss1d(ky, sigma, gy);
    int rx = kx / 2, ry = ky / 2;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                double acc = 0;
                for (int j = 0; j < kx; j++)
                    acc += (double)gx[j] * img[((size_t)y * (size_t)w + (size_t)reflect(x + j - rx, w)) * 3 + (size_t)c];
                tmp[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] = acc;
            }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                double acc = 0;
                for (int i = 0; i < ky; i++)
                    acc += (double)gy[i] * tmp[((size_t)reflect(y + i - ry, h) * (size_t)w + (size_t)x) * 3 + (size_t)c];
                double v = nearbyint(acc);
                img[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
}

static int step_arity(int kind)
{
    static const int arity[STK__STEP_KINDS] = {-1, 1, 1, 8, 0, 4, 15, 7};
    return kind > 0 && kind < STK__STEP_KINDS ? arity[kind] : -1;
}

static int check_jitter(const float *a, int k, char *err)
{
    static const char *const names[4] = {"brightness", "contrast", "saturation", "hue"};
    for (int j = 0; j < 4; j++) {
        float lo = a[2 * j], hi = a[2 * j + 1];
        int ok = j < 3 ? lo >= 0.f && lo <= hi : lo >= -0.5f && lo <= hi && hi <= 0.5f;
        if (!ok || !isfinite(lo) || !isfinite(hi))
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (ColorJitter): %s range [%g, %g] %s", k,
                            names[j], (double)lo, (double)hi, j < 3 ? "must be 0 <= min <= max" : "must lie in [-0.5, 0.5]");
    }
    return STK_OK;
}

/* Each step's draws: the crop's key, counter from 3 * 2^30 + 256 k (the policy's start at 2^31
 * and the crop's at 0 are far below) */
#define STEP_CTR0 0xC0000000u

/* ---- steps: RandomAffine, RandomRotation (expand=False, center=None) ------------------------ */

/* The values of an affine step (RandomAffine: dmin dmax tx ty smin smax shx0 shx1 shy0 shy1 interp
 * fill_on r g b) or a rotation step (dmin dmax interp fill_on r g b): where interp and the fill
 * stand in A */
static int affine_tail(int rotation) { return rotation ? 2 : 10; }

static int check_affine(const float *a, int rotation, int k, char *err)
{
    const char *what = rotation ? "RandomRotation" : "RandomAffine";
    int n = rotation ? 7 : 15, t = affine_tail(rotation);
    for (int i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (%s): value %d is not finite", k, what, i);
    if (!(a[0] <= a[1]))
        return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (%s): degrees [%g, %g] must be ordered", k, what,
                        (double)a[0], (double)a[1]);
    if (!rotation) {
        if (!(a[2] >= 0.f && a[2] <= 1.f && a[3] >= 0.f && a[3] <= 1.f))
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (RandomAffine): translate (%g, %g) must lie "
                            "in [0, 1]", k, (double)a[2], (double)a[3]);
        if (!(a[4] > 0.f && a[4] <= a[5]))
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (RandomAffine): scale [%g, %g] must be "
                            "0 < min <= max", k, (double)a[4], (double)a[5]);
        if (!(a[6] <= a[7] && a[8] <= a[9]))
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (RandomAffine): shear ranges [%g, %g], "
                            "[%g, %g] must be ordered", k, (double)a[6], (double)a[7], (double)a[8], (double)a[9]);
    }
    const float *f = a + t;
    if (!((f[0] == 0.f || f[0] == 1.f) && (f[1] == 0.f || f[1] == 1.f)))
        return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (%s): interpolation %g and fill flag %g must "
                        "be 0 or 1", k, what, (double)f[0], (double)f[1]);
    for (int c = 0; c < 3; c++)
        if (!(f[2 + c] >= 0.f && f[2 + c] <= 255.f))
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (%s): fill %g is not in 0..255", k, what,
                            (double)f[2 + c]);
    return STK_OK;
}

/* float32(lo + (hi - lo) u): torch.empty(1).uniform_(lo, hi) */
static double uniform_f32(stk__rng *r, double lo, double hi)
{
    return (double)(float)(lo + (hi - lo) * stk__rng_uniform(r));
}

void stk__affine_draw(int k, int kind, const float *a, uint64_t seed, uint64_t epoch, uint64_t index, int h, int w,
                      double d[6])
{
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = STEP_CTR0 + 256u * (uint32_t)k;
    d[0] = uniform_f32(&r, a[0], a[1]);
    d[1] = d[2] = d[4] = d[5] = 0.0;
    d[3] = 1.0;
    if (kind == STK__STEP_ROTATION)
        return;
    /* get_params: max_dx = translate[0] * width, tx = int(round(uniform(-max_dx, max_dx))) */
    double mx = (double)a[2] * w, my = (double)a[3] * h;
    d[1] = nearbyint(uniform_f32(&r, -mx, mx));
    d[2] = nearbyint(uniform_f32(&r, -my, my));
    d[3] = uniform_f32(&r, a[4], a[5]);
    d[4] = uniform_f32(&r, a[6], a[7]);
    d[5] = uniform_f32(&r, a[8], a[9]);
}

void stk__affine_apply(int kind, const float *a, const double d[6], uint8_t *img, int h, int w, uint8_t *scratch)
{
    const float *f = a + affine_tail(kind == STK__STEP_ROTATION);
    stk__augfill fill = {f[1] != 0.f, {f[2], f[3], f[4]}};
    double m[6];
    if (kind == STK__STEP_ROTATION) /* F.rotate: the matrix of -angle */
        inverse_affine(0.0, 0.0, -d[0], 0.0, 0.0, 1.0, 0.0, 0.0, m);
    else
        inverse_affine(0.0, 0.0, d[0], d[1], d[2], d[3], d[4], d[5], m);
    warp(img, scratch, h, w, m, f[0] != 0.f ? STK__INTERP_BILINEAR : STK__INTERP_NEAREST, &fill);
    memcpy(img, scratch, (size_t)h * (size_t)w * 3);
}

int stk__augprog_parse(const float *v, size_t n, stk__augprog *prog, char *err)
{
    memset(prog, 0, sizeof *prog);
    size_t i = 0;
    int policies = 0;
    while (i < n) {
        int k = prog->n;
        float kf = v[i];
        int kind = kf == floorf(kf) && kf > 0.f && kf < (float)STK__STEP_KINDS ? (int)kf : -1, ar = step_arity(kind);
        if (ar < 0)
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d: unknown kind %g (1 vflip, 2 grayscale, "
                            "3 color jitter, 4 policy, 5 gaussian blur, 6 affine, 7 rotation)", k, (double)kf);
        if (k == STK__AUG_MAX_STEPS)
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS: more than %d steps", STK__AUG_MAX_STEPS);
        if (i + 1 + (size_t)ar > n)
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d: kind %d takes %d values, %zu left", k, kind,
                            ar, n - i - 1);
        prog->s[k].kind = kind;
        memcpy(prog->s[k].a, v + i + 1, sizeof(float) * (size_t)ar);
        if ((kind == STK__STEP_VFLIP || kind == STK__STEP_GRAYSCALE) &&
            !(prog->s[k].a[0] >= 0.f && prog->s[k].a[0] <= 1.f))
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d: probability %g is not in [0, 1]", k,
                            (double)prog->s[k].a[0]);
        if (kind == STK__STEP_JITTER && check_jitter(prog->s[k].a, k, err) != STK_OK)
            return STK_E_INVALID;
        if (kind == STK__STEP_BLUR) {
            const float *a = prog->s[k].a;
            int okk = a[0] >= 1.f && a[0] <= BLUR_MAX_K && a[1] >= 1.f && a[1] <= BLUR_MAX_K && a[0] == floorf(a[0]) &&
                      a[1] == floorf(a[1]) && fmodf(a[0], 2.f) == 1.f && fmodf(a[1], 2.f) == 1.f;
            if (!okk || !(a[2] > 0.f && a[2] <= a[3] && isfinite(a[3])))
                return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (GaussianBlur): kernel %g x %g must be odd "
                                "1..%d and sigma 0 < %g <= %g", k, (double)a[0], (double)a[1], BLUR_MAX_K,
                                (double)a[2], (double)a[3]);
        }
        if ((kind == STK__STEP_AFFINE || kind == STK__STEP_ROTATION) &&
            check_affine(prog->s[k].a, kind == STK__STEP_ROTATION, k, err) != STK_OK)
            return STK_E_INVALID;
        if (kind == STK__STEP_POLICY && ++policies > 1)
            return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS: the policy appears more than once");
        prog->n++;
        i += 1 + (size_t)ar;
    }
    return STK_OK;
}

void stk__augstep_draw(int k, int kind, const float *a, uint64_t seed, uint64_t epoch, uint64_t index, int *on,
                       int order[4], double f[4])
{
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = STEP_CTR0 + 256u * (uint32_t)k;
    *on = 0;
    if (kind == STK__STEP_VFLIP || kind == STK__STEP_GRAYSCALE) {
        *on = stk__rng_uniform(&r) < (double)a[0];
        return;
    }
    if (kind == STK__STEP_BLUR) { /* sigma = torch.empty(1).uniform_(smin, smax): float32 */
        double u = stk__rng_uniform(&r);
        f[0] = (double)(float)((double)a[2] + ((double)a[3] - (double)a[2]) * u);
        *on = 1;
        return;
    }
    if (kind != STK__STEP_JITTER)
        return;
    /* fn_idx = torch.randperm(4): a uniform permutation (Fisher-Yates) */
    for (int j = 0; j < 4; j++)
        order[j] = j;
    for (int j = 3; j > 0; j--) {
        int m = (int)stk__rng_below(&r, (uint64_t)j + 1), t = order[j];
        order[j] = order[m];
        order[m] = t;
    }
    static const float center[4] = {1.f, 1.f, 1.f, 0.f};
    for (int j = 0; j < 4; j++) {
        double u = stk__rng_uniform(&r), lo = a[2 * j], hi = a[2 * j + 1];
        /* torchvision keeps None for a range (center, center): that component is off */
        f[j] = lo == center[j] && hi == center[j] ? NAN : (double)(float)(lo + (hi - lo) * u);
    }
    *on = 1;
}

int stk__augprog_has_blur(const stk__augprog *prog)
{
    for (int k = 0; k < prog->n; k++)
        if (prog->s[k].kind == STK__STEP_BLUR)
            return 1;
    return 0;
}

void stk__augprog_apply(const stk__augprog *prog, const stk__augpolicy *policy, uint64_t seed, uint64_t epoch,
                        uint64_t index, uint8_t *img, int h, int w, uint8_t *scratch, double *tmp)
{
    int ran_policy = 0;
    for (int k = 0; k < prog->n; k++) {
        int kind = prog->s[k].kind, on, order[4];
        double f[4];
        if (kind == STK__STEP_POLICY) {
            ran_policy = 1;
            if (policy && policy->policy != STK__AUGP_NONE)
                stk__augpolicy_apply(policy, seed, epoch, index, img, h, w, scratch, tmp);
            continue;
        }
        if (kind == STK__STEP_AFFINE || kind == STK__STEP_ROTATION) {
            double d[6];
            stk__affine_draw(k, kind, prog->s[k].a, seed, epoch, index, h, w, d);
            stk__affine_apply(kind, prog->s[k].a, d, img, h, w, scratch);
            continue;
        }
        stk__augstep_draw(k, kind, prog->s[k].a, seed, epoch, index, &on, order, f);
        if (!on)
            continue;
        if (kind == STK__STEP_VFLIP)
            op_vflip(img, h, w, scratch);
        else if (kind == STK__STEP_GRAYSCALE)
            op_grayscale(img, (size_t)h * (size_t)w);
        else if (kind == STK__STEP_BLUR)
            stk__augop_blur(img, h, w, (int)prog->s[k].a[0], (int)prog->s[k].a[1], f[0], tmp);
        else
            stk__augop_jitter(img, h, w, order, f, prog->torch);
    }
    if (!ran_policy && policy && policy->policy != STK__AUGP_NONE)
        stk__augpolicy_apply(policy, seed, epoch, index, img, h, w, scratch, tmp);
}

/* ---- RandomErasing's box --------------------------------------------------------------------- */

#define ERASE_CTR0 0xE0000000u /* its own counter range of the sample's key */

int stk__erase_boxes(const stk__erase *e, uint64_t seed, uint64_t epoch, uint64_t index, int h, int w,
                     stk__erase_box *boxes, stk__rng *r)
{
    stk__rng_init(r, seed, epoch, index);
    r->ctr[0] = ERASE_CTR0;
    if (!(stk__rng_uniform(r) < e->p))
        return 0;
    int lo = e->min_count < 1 ? 1 : e->min_count, hi = e->max_count < lo ? lo : e->max_count;
    hi = hi > STK__ERASE_MAX_COUNT ? STK__ERASE_MAX_COUNT : hi;
    lo = lo > hi ? hi : lo;
    int count = lo == hi ? lo : lo + (int)stk__rng_below(r, (uint64_t)(hi - lo + 1)), n = 0;
    double area = (double)h * (double)w, lr0 = log(e->ratio_lo), lr1 = log(e->ratio_hi);
    for (int k = 0; k < count; k++)
        for (int t = 0; t < 10; t++) {
            /* timm: uniform(min_area, max_area) * area / count, in that order */
            double a = (e->scale_lo + (e->scale_hi - e->scale_lo) * stk__rng_uniform(r)) * area / count;
            double ar = exp(lr0 + (lr1 - lr0) * stk__rng_uniform(r));
            int bh = (int)nearbyint(sqrt(a * ar)), bw = (int)nearbyint(sqrt(a / ar));
            if (!(bh < h && bw < w))
                continue;
            boxes[n].h = bh, boxes[n].w = bw;
            boxes[n].y = (int)stk__rng_below(r, (uint64_t)(h - bh + 1));
            boxes[n].x = (int)stk__rng_below(r, (uint64_t)(w - bw + 1));
            n++;
            break;
        }
    return n; /* no box: torchvision then "erases" with the image itself, timm skips it: no change */
}
