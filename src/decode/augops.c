/* SPDX-License-Identifier: MIT */
/*
 * augops.c — torchvision's augmentation op table on uint8 RGB HWC, equal to its tensor path
 * (torchvision 0.14 functional_tensor.py as autoaugment.py's _apply_op calls it): the colour ops
 * here, the geometric ones in auggeom.c; and the per-pixel steps ColorJitter, RandomGrayscale,
 * RandomVerticalFlip. The policies that choose among the ops are augpolicy.c, the step programs
 * and GaussianBlur augsteps.c. Each user of the PRNG starts the sample's counter in a range of
 * its own (crop 0, the crop's random filter 0x70000000, policy 2^31, timm's RandAugment
 * 0x90000000, AugMix 0xA0000000, timm's AutoAugment 0xB0000000, steps 3 * 2^30 + 256 k, erasing
 * 0xE0000000).
 *
 * The tensor path works in float32 one tensor op at a time, each result rounded to float32, and
 * casts back to uint8 by truncation (.to(uint8)) or, after a grid sample, round-half-even then
 * truncation. Each op repeats those float32 steps in the same order; the aug*.c files are
 * compiled with -ffp-contract=off so that no multiply-add is fused where torch rounds twice.
 * Where torch's result does not depend on its summation order (sums of integers below 2^24, the
 * 3x3 blur whose exact value k/13 is never a rounding tie) integers are used instead.
 * docs/ARCHITECTURE.md ("Decode and augment") lists the one known deviation.
 */
#include "augops.h"
#include "augops_int.h"

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

void stk__aug_brightness(uint8_t *img, size_t n, double f)
{
    float rf = (float)f, sf = (float)(1.0 - f);
    for (size_t i = 0; i < n; i++)
        img[i] = blend1(rf, sf, (float)img[i], 0.f);
}

void stk__aug_color(uint8_t *img, size_t px, double f)
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
void stk__aug_contrast(uint8_t *img, size_t px, double f)
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

void stk__augop_apply(int op, double mag, int interp, const stk__augfill *fill, int grid_fma, uint8_t *img, int h, int w,
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
        stk__augop_geometric(op, mag, interp, fill, grid_fma, img, h, w, scratch);
        break;
    case STK__OP_BRIGHTNESS:
        stk__aug_brightness(img, 3 * px, 1.0 + mag);
        break;
    case STK__OP_COLOR:
        stk__aug_color(img, px, 1.0 + mag);
        break;
    case STK__OP_CONTRAST:
        stk__aug_contrast(img, px, 1.0 + mag);
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

/* ---- steps: ColorJitter, RandomGrayscale, RandomVerticalFlip ---------------------------------- */

/* adjust_hue: uint8 / 255 to float32, _rgb2hsv, h = (h + factor) % 1.0, _hsv2rgb, then back to
 * uint8: torchvision 0.14 multiplies by 255, 0.15 on (convert_image_dtype, vision PR 6830) by
 * 255 + 1 - 1e-3 as a float32 scalar; both truncate. Every step one float32 rounding as the
 * tensor ops make it (the einsum that picks the channel values adds zeros: exact) */
static void op_hue(uint8_t *img, size_t px, double factor, int torch)
{
    float hf = (float)factor, scale = torch >= STK__TORCH_2 ? (float)(255.0 + 1.0 - 1e-3) : 255.f;
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
            stk__aug_brightness(img, 3 * px, f[k]);
        else if (k == 1)
            stk__aug_contrast(img, px, f[k]);
        else if (k == 2)
            stk__aug_color(img, px, f[k]);
        else
            op_hue(img, px, f[k], torch);
    }
}

void stk__aug_grayscale(uint8_t *img, size_t px)
{
    for (size_t i = 0; i < px; i++) {
        uint8_t *p = img + 3 * i;
        p[0] = p[1] = p[2] = gray1(p);
    }
}

void stk__aug_vflip(uint8_t *img, int h, int w, uint8_t *scratch)
{
    size_t row = 3 * (size_t)w;
    for (int y = 0; y < h / 2; y++) {
        uint8_t *a = img + (size_t)y * row, *b = img + (size_t)(h - 1 - y) * row;
        memcpy(scratch, a, row);
        memcpy(a, b, row);
        memcpy(b, scratch, row);
    }
}

