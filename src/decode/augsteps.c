/* SPDX-License-Identifier: MIT */
/*
 * augsteps.c — STK_P_AUG_STEPS programs: parse, per-step draws (each step on its own counter
 * range of the sample's key), the run in order with the policy where its step stands;
 * GaussianBlur; and RandomErasing's boxes (the erase itself is stage/convert.c's).
 */
#include "augops.h"
#include "augops_int.h"

#include <math.h>
#include <string.h>

#define BLUR_MAX_K 255 /* the widest kernel a step takes */

/* SLEEF's expf_u10 (its AVX2 and AVX512 builds, fused multiply-adds): torch 1.x's torch.exp
 * (equal to torch 1.13's on 3 000 000 arguments) and torch 2.x's Vectorized<float>::exp, which its
 * softmax uses. The torch.exp of builds with MKL (the PyPI wheels) is MKL's vmsExp instead
 * (closed, chosen per CPU): a caller gives it as stk_loader_set_vexp's hook; without it glibc's
 * expf stands in for torch 2.x (1% of results one ulp apart; docs/ARCHITECTURE.md) */
static float sleef_expf(float d)
{
    if (!(d >= -104.f)) /* SLEEF's 0 below -104 (and -inf); NaN stays NaN */
        return d != d ? d : 0.f;
    if (d > 88.72283905206835f)
        return INFINITY;
    int q = (int)nearbyintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
    float s = fmaf((float)q, -0.693145751953125f, d);
    s = fmaf((float)q, -1.428606765330187045e-06f, s);
    float u = 0.000198527617612853646278381f;
    u = fmaf(u, s, 0.00139304355252534151077271f);
    u = fmaf(u, s, 0.00833336077630519866943359f);
    u = fmaf(u, s, 0.0416664853692054748535156f);
    u = fmaf(u, s, 0.166666671633720397949219f);
    u = fmaf(u, s, 0.5f);
    float ss = s * s;
    u = 1.0f + fmaf(ss, u, s);
    return u * ldexpf(1.f, q >> 1) * ldexpf(1.f, q - (q >> 1)); /* SLEEF's ldexp2k */
}

/* torch.sum of N float32 values on the CPU: vectors of LANES from the start, four accumulators
 * (vector r into r mod 4, leftover vectors into the first), folded 0 + 1 + 2 + 3; then 0 plus
 * the scalars past the vectors, plus the lanes in order. Fewer than LANES values: the same with
 * four scalar accumulators (vectors of one lane). (SumKernel.cpp's cascade sum, whose upper levels start at 16
 * rows: unused below 256 values) */
static float torch_sum(const float *v, int n, int lanes)
{
    if (n < lanes)
        lanes = 1;
    int nv = n / lanes, nr = nv / 4;
    float p[4][16] = {{0}};
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < lanes; l++)
                p[k][l] += v[(r * 4 + k) * lanes + l];
    for (int i = nr * 4; i < nv; i++)
        for (int l = 0; l < lanes; l++)
            p[0][l] += v[i * lanes + l];
    for (int k = 1; k < 4; k++)
        for (int l = 0; l < lanes; l++)
            p[0][l] += p[k][l];
    float acc = 0.f;
    for (int i = nv * lanes; i < n; i++)
        acc += v[i];
    for (int l = 0; l < lanes; l++)
        acc += p[0][l];
    return acc;
}

/* _get_gaussian_kernel1d: x = linspace(-(k-1)/2, (k-1)/2) (integers: exact), exp(-0.5 (x /
 * sigma)^2), / its sum, in float32 as TORCH computes them; the exp VEXP over the k values at
 * once (torch.exp of the contiguous vector: one vmsExp call) when given */
static void gauss1d(int torch, stk_vexp_fn vexp, int64_t vexp_arg, int k, double sigma, float *out)
{
    float s = (float)sigma, a[BLUR_MAX_K] = {0};
    for (int i = 0; i < k; i++) {
        float x = (float)(i - (k - 1) / 2); /* k is odd */
        float t = x / s;
        a[i] = -0.5f * (t * t);
    }
    if (vexp)
        vexp(k, a, out, vexp_arg);
    else
        for (int i = 0; i < k; i++)
            out[i] = torch >= STK__TORCH_2 ? expf(a[i]) : sleef_expf(a[i]);
    float sum = torch_sum(out, k, 8); /* 8 lanes on AVX512 too: torch 2.15 there sums so (its AVX2 kernel) */
    for (int i = 0; i < k; i++)
        out[i] /= sum;
}

/* vec::reduce_all(x + y) of torch's CPU kernels over N floats, LANES (8 AVX2, 16 AVX512) a vector:
 * under LANES values one after another; else the vectors summed lane-wise (the short last one
 * into its first lanes), then the lanes folded in halves (lane i + lane i ^ half, half = LANES / 2
 * down to 1) */
static float torch_reduce_all(const float *v, int n, int lanes)
{
    if (n < lanes) {
        float acc = v[0];
        for (int i = 1; i < n; i++)
            acc += v[i];
        return acc;
    }
    float a[16], b[16];
    memcpy(a, v, sizeof(float) * (size_t)lanes);
    int d = lanes;
    for (; d < n - n % lanes; d += lanes)
        for (int l = 0; l < lanes; l++)
            a[l] += v[d + l];
    for (int l = 0; d + l < n; l++)
        a[l] += v[d + l];
    for (int half = lanes / 2; half >= 1; half /= 2) {
        for (int l = 0; l < lanes; l++)
            b[l] = a[l] + a[l ^ half];
        memcpy(a, b, sizeof(float) * (size_t)lanes);
    }
    return a[0];
}

/* transforms.v2's _get_gaussian_kernel1d: lim = (k - 1) / (2 sqrt 2), x = torch.linspace(-lim,
 * lim, k) (point by point, start + step i up to the middle, end - step (k - 1 - i) after, each
 * one fused multiply-add), softmax(-(x / sigma)^2): exp(v - max) (SLEEF's), their reduce_all,
 * times 1 / sum. Torch 1.x has no v2; its lanes are used the same way if asked. */
static void gauss1d_v2(int torch, int k, double sigma, float *out)
{
    double lim = (double)(k - 1) / (2.0 * sqrt(2.0));
    float s = (float)-lim, e = (float)lim, sg = (float)sigma;
    float step = k > 1 ? (e - s) / (float)(k - 1) : 0.f;
    float mx = -INFINITY;
    for (int i = 0; i < k; i++) {
        float x = k == 1 ? s : i < k / 2 ? fmaf(step, (float)i, s) : fmaf(-step, (float)(k - 1 - i), e);
        float t = x / sg;
        out[i] = -(t * t);
        mx = out[i] > mx ? out[i] : mx;
    }
    for (int i = 0; i < k; i++)
        out[i] = sleef_expf(out[i] - mx);
    int lanes = torch == STK__TORCH_1 || torch == STK__TORCH_2 ? 8 : 16;
    float inv = 1.f / torch_reduce_all(out, k, lanes);
    for (int i = 0; i < k; i++)
        out[i] *= inv;
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

/* ACC[x] = fma(K, SRC[x], ACC[x]) for x < N: one tap of the 2-D kernel over an output row's
 * interior (per value the taps keep torch's order; across x the loop vectorises, with the FMA
 * instructions where the CPU has them) */
#if defined(__x86_64__) && defined(__clang__)
#if !__has_feature(address_sanitizer) && !__has_feature(thread_sanitizer)
__attribute__((target_clones("fma", "default")))
#endif
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("fma", "default"), optimize("tree-vectorize")))
#endif
static void blur_tap(float *restrict acc, const float *restrict src, int n, float k)
{
    for (int x = 0; x < n; x++)
        acc[x] = fmaf(k, src[x], acc[x]);
}

void stk__augop_blur(uint8_t *img, int h, int w, int kx, int ky, double sigma, int torch, int v2,
                     stk_vexp_fn vexp, int64_t vexp_arg, uint8_t *out, float *tmp)
{
    float gx[BLUR_MAX_K], gy[BLUR_MAX_K];
    int rows[BLUR_MAX_K];
    if (v2) {
        gauss1d_v2(torch, kx, sigma, gx);
        gauss1d_v2(torch, ky, sigma, gy);
    } else {
        gauss1d(torch, vexp, vexp_arg, kx, sigma, gx);
        gauss1d(torch, vexp, vexp_arg, ky, sigma, gy);
    }
    int rx = kx / 2, ry = ky / 2;
    /* the interior columns, where no tap needs the reflection: [x0, x1) */
    int x0 = rx < w ? rx : w, x1 = w - rx > x0 ? w - rx : x0;
    size_t px = (size_t)h * (size_t)w, row = 3 * (size_t)w;
    float *plane = tmp, *acc = tmp + 3 * px; /* the image as three float planes, one row of sums */
    for (size_t i = 0; i < px; i++)
        for (int c = 0; c < 3; c++)
            plane[(size_t)c * px + i] = (float)img[3 * i + (size_t)c];
    for (int y = 0; y < h; y++) {
        for (int i = 0; i < ky; i++)
            rows[i] = reflect(y + i - ry, h);
        for (int c = 0; c < 3; c++) {
            /* conv2d: per output value, a float32 fused multiply-add chain from 0 over the 2-D
             * kernel (ky_i * kx_j rounded, as torch.mm makes it) in row order: oneDNN's
             * depthwise kernel, on torch 1.13 and 2.15 alike */
            memset(acc, 0, sizeof(float) * (size_t)w);
            for (int i = 0; i < ky; i++) {
                const float *src = plane + (size_t)c * px + (size_t)rows[i] * (size_t)w;
                for (int j = 0; j < kx; j++) {
                    float k = gy[i] * gx[j];
                    if (x1 > x0)
                        blur_tap(acc + x0, src + (x0 + j - rx), x1 - x0, k);
                    for (int x = 0; x < w; x++) {
                        if (x == x0 && x1 > x0)
                            x = x1;
                        if (x >= w)
                            break;
                        acc[x] = fmaf(k, src[reflect(x + j - rx, w)], acc[x]);
                    }
                }
            }
            uint8_t *o = out + (size_t)y * row + (size_t)c;
            for (int x = 0; x < w; x++) {
                float v = nearbyintf(acc[x]); /* NaN (torch's v2 kernel at sigma ~1e-30): 0, as its cast */
                o[3 * (size_t)x] = (uint8_t)(!(v > 0.f) ? 0.f : v > 255.f ? 255.f : v);
            }
        }
    }
    memcpy(img, out, row * (size_t)h);
}

static int step_arity(int kind)
{
    static const int arity[STK__STEP_KINDS] = {-1, 1, 1, 8, 0, 4, 15, 7, 4};
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
                            "3 color jitter, 4 policy, 5 gaussian blur, 6 affine, 7 rotation, 8 gaussian blur (v2))",
                            k, (double)kf);
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
        if (kind == STK__STEP_BLUR || kind == STK__STEP_BLUR_V2) {
            const float *a = prog->s[k].a;
            int okk = a[0] >= 1.f && a[0] <= BLUR_MAX_K && a[1] >= 1.f && a[1] <= BLUR_MAX_K && a[0] == floorf(a[0]) &&
                      a[1] == floorf(a[1]) && fmodf(a[0], 2.f) == 1.f && fmodf(a[1], 2.f) == 1.f;
            if (!okk || !(a[2] > 0.f && a[2] <= a[3] && isfinite(a[3])))
                return stk__err(err, STK_E_INVALID, "STK_P_AUG_STEPS step %d (GaussianBlur): kernel %g x %g must be odd "
                                "1..%d and sigma 0 < %g <= %g", k, (double)a[0], (double)a[1], BLUR_MAX_K,
                                (double)a[2], (double)a[3]);
        }
        if ((kind == STK__STEP_AFFINE || kind == STK__STEP_ROTATION) &&
            stk__affine_check(prog->s[k].a, kind == STK__STEP_ROTATION, k, err) != STK_OK)
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
    r.ctr[0] = STK__STEP_CTR0 + 256u * (uint32_t)k;
    *on = 0;
    if (kind == STK__STEP_VFLIP || kind == STK__STEP_GRAYSCALE) {
        *on = stk__rng_uniform(&r) < (double)a[0];
        return;
    }
    if (kind == STK__STEP_BLUR || kind == STK__STEP_BLUR_V2) { /* torch.empty(1).uniform_(smin, smax): float32 */
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
        if (prog->s[k].kind == STK__STEP_BLUR || prog->s[k].kind == STK__STEP_BLUR_V2)
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
            stk__affine_apply(kind, prog->s[k].a, d, prog->grid_fma, img, h, w, scratch);
            continue;
        }
        stk__augstep_draw(k, kind, prog->s[k].a, seed, epoch, index, &on, order, f);
        if (!on)
            continue;
        if (kind == STK__STEP_VFLIP)
            stk__aug_vflip(img, h, w, scratch);
        else if (kind == STK__STEP_GRAYSCALE)
            stk__aug_grayscale(img, (size_t)h * (size_t)w);
        else if (kind == STK__STEP_BLUR || kind == STK__STEP_BLUR_V2)
            stk__augop_blur(img, h, w, (int)prog->s[k].a[0], (int)prog->s[k].a[1], f[0], prog->torch,
                            kind == STK__STEP_BLUR_V2, prog->vexp, prog->vexp_arg, scratch, (float *)(void *)tmp);
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
