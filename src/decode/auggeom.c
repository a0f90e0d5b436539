/* SPDX-License-Identifier: MIT */
/*
 * auggeom.c — the geometric ops of torchvision's op table (ShearX/Y, TranslateX/Y, Rotate) and
 * the RandomAffine / RandomRotation steps (expand=False, center=None): the inverse matrix of
 * _get_inverse_affine_matrix, the affine grid of _gen_affine_grid (x * r0 + y * r1, then + r2,
 * in float32: what torch's bmm gives for K = 3; fma(y, r1, x * r0) + r2 where Intel MKL's AVX-512
 * sgemm computes it, grid_fma) and grid_sample's AVX2 CPU kernel, whose compiler
 * fused its multiply-adds: unnormalise fma(g + 1, size / 2, -0.5); nearest = round half even;
 * bilinear weights (1 - dx) * (1 - dy) ... and the four-term sum as a chain of fmaf; the fill is
 * its extra mask channel, blended as separate tensor ops (not fused). augops.c explains the
 * float32 discipline.
 */
#include "augops.h"
#include "augops_int.h"

#include <math.h>
#include <string.h>

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

/* grid_sample's cubic convolution weights (A = -0.75) of the four taps at offsets -1..2 from
 * floor(x), for T = x - floor(x), as torch's vectorised kernel rounds them (measured, torch 1.13
 * AVX2 and 2.15 AVX512 alike): ((A t - 5A) t + 8A) t - 4A with no fused step (its compiler fused
 * the constant products 5A, 8A, 4A, which are exact), ((A + 2) t - (A + 3)) t t + 1 with the
 * first and last steps fused */
static float cubic_outer(float t)
{
    float u = -0.75f * t;
    u = u + 3.75f;
    u = u * t;
    u = u - 6.f;
    u = u * t;
    return u + 3.f;
}

static float cubic_inner(float t)
{
    float u = fmaf(1.25f, t, -2.25f);
    u = u * t;
    return fmaf(u, t, 1.f);
}

static void cubic_weights(float t, float k[4])
{
    k[0] = cubic_outer(t + 1.f);
    k[1] = cubic_inner(t);
    k[2] = cubic_inner(1.f - t);
    k[3] = cubic_outer(2.f - t);
}

/* grid_sample(mode='bicubic', padding zeros): four rows of four taps, each row summed as torch's
 * kernel is compiled, fma(v0, k0, v1 k1) + v2 k2 + v3 k3 (those two adds not fused), then the
 * rows as a chain of fused multiply-adds from k0 r0. The fill is the same extra mask channel as
 * BILINEAR's; torchvision's tensor F.affine / F.rotate refuse BICUBIC, so this is the path they
 * would run without that check, rounded half to even and clamped to 0..255 (torch's own uint8
 * cast would wrap the cubic's overshoot: 260 to 4). */
static void sample_bicubic(const uint8_t *src, int h, int w, float ix, float iy, const stk__augfill *fill,
                           uint8_t *o)
{
    float x0 = floorf(ix), y0 = floorf(iy), kx[4], ky[4];
    cubic_weights(ix - x0, kx);
    cubic_weights(iy - y0, ky);
    const uint8_t *p[4][4] = {{NULL}}; /* [row][column]: NULL outside the image */
    if (x0 > -3.f && x0 < (float)w + 1.f && y0 > -3.f && y0 < (float)h + 1.f) {
        int xi = (int)x0 - 1, yi = (int)y0 - 1;
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++)
                if (xi + c >= 0 && xi + c < w && yi + r >= 0 && yi + r < h)
                    p[r][c] = src + ((size_t)(yi + r) * (size_t)w + (size_t)(xi + c)) * 3;
    }
    float m = 0.f, row[4];
    for (int ch = fill->on ? -1 : 0; ch < 3; ch++) { /* -1: the mask channel of ones */
        for (int r = 0; r < 4; r++) {
            float v[4];
            for (int c = 0; c < 4; c++)
                v[c] = p[r][c] ? (ch < 0 ? 1.f : (float)p[r][c][ch]) : 0.f;
            float s = fmaf(v[0], kx[0], v[1] * kx[1]);
            s = s + v[2] * kx[2];
            row[r] = s + v[3] * kx[3];
        }
        float s = ky[0] * row[0];
        for (int r = 1; r < 4; r++)
            s = fmaf(ky[r], row[r], s);
        if (ch < 0) {
            m = s;
            continue;
        }
        if (fill->on) {
            float a = s * m;
            float b = (1.f - m) * fill->v[ch];
            s = a + b;
        }
        o[ch] = round_u8(s);
    }
}

/* F_t.affine / F_t.rotate with the inverse matrix M: the grid (float32, as _gen_affine_grid: its
 * product fused when GRID_FMA) and the sample, SRC -> DST */
static void warp(const uint8_t *src, uint8_t *dst, int h, int w, const double m[6], int interp,
                 const stk__augfill *fill, int grid_fma)
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
            if (grid_fma) {
                gx = fmaf(y, r10, gx);
                gy = fmaf(y, r11, gy);
            } else {
                gx = gx + y0;
                gy = gy + y1;
            }
            gx = gx + r20;
            gy = gy + r21;
            /* grid_sample's unnormalise (g + 1) * size / 2 - 0.5, fused as torch's kernel is */
            float ix = fmaf(gx + 1.f, sw, -0.5f), iy = fmaf(gy + 1.f, sh, -0.5f);
            if (interp == STK__INTERP_BILINEAR)
                sample_bilinear(src, h, w, ix, iy, fill, o);
            else if (interp == STK__INTERP_BICUBIC)
                sample_bicubic(src, h, w, ix, iy, fill, o);
            else
                sample_nearest(src, h, w, ix, iy, fill, o);
        }
    }
}

void stk__augop_geometric(int op, double mag, int interp, const stk__augfill *fill, int grid_fma, uint8_t *img,
                          int h, int w, uint8_t *scratch)
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
    warp(img, scratch, h, w, m, interp, fill, grid_fma);
    memcpy(img, scratch, (size_t)h * (size_t)w * 3);
}

/* ---- steps: RandomAffine, RandomRotation (expand=False, center=None) ------------------------ */

/* The values of an affine step (RandomAffine: dmin dmax tx ty smin smax shx0 shx1 shy0 shy1 interp
 * fill_on r g b) or a rotation step (dmin dmax interp fill_on r g b): where interp and the fill
 * stand in A */
static int affine_tail(int rotation) { return rotation ? 2 : 10; }

int stk__affine_check(const float *a, int rotation, int k, char *err)
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
    if (!((f[0] == 0.f || f[0] == 1.f || f[0] == 2.f) && (f[1] == 0.f || f[1] == 1.f)))
        return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (%s): interpolation %g must be 0, 1 or 2 and "
                        "fill flag %g 0 or 1", k, what, (double)f[0], (double)f[1]);
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
    r.ctr[0] = STK__STEP_CTR0 + 256u * (uint32_t)k;
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

void stk__affine_apply(int kind, const float *a, const double d[6], int grid_fma, uint8_t *img, int h, int w,
                       uint8_t *scratch)
{
    const float *f = a + affine_tail(kind == STK__STEP_ROTATION);
    stk__augfill fill = {f[1] != 0.f, {f[2], f[3], f[4]}};
    double m[6];
    if (kind == STK__STEP_ROTATION) /* F.rotate: the matrix of -angle */
        inverse_affine(0.0, 0.0, -d[0], 0.0, 0.0, 1.0, 0.0, 0.0, m);
    else
        inverse_affine(0.0, 0.0, d[0], d[1], d[2], d[3], d[4], d[5], m);
    warp(img, scratch, h, w, m, (int)f[0], &fill, grid_fma); /* STK__INTERP_*, checked at parse */
    memcpy(img, scratch, (size_t)h * (size_t)w * 3);
}
