/* SPDX-License-Identifier: MIT */
/*
 * augpolicy.c — the policies that choose among torchvision's ops per sample: TrivialAugmentWide,
 * RandAugment, AutoAugment (IMAGENET, CIFAR10, SVHN) and AugMix, their magnitude tables as
 * torch computes them (torch.linspace's float32 kernel), drawn from the sample's key on the
 * policy's counter range (augops.c lists them all).
 */
#include "augops.h"
#include "augops_int.h"

#include <math.h>
#include <string.h>

/* ---- policies ----------------------------------------------------------------------------- */

/* torch.linspace(start, end, n) in float32 as torch's CPU kernel computes it: the first half
 * forward from the start, the second half back from the end, each a fused multiply-add (torch's
 * AVX2 / AVX512 kernels contract start + step * i). Torch 1.x also vectorises: runs of two
 * vectors (8 lanes on AVX2, 16 on AVX512) from the start, lane k = base + k * step (not fused)
 * with base the value of the vector's first index; the leftover points one by one. Torch 2.0
 * dropped the vector path (pytorch PR 89048): every point alone. Checked against the torch at
 * hand by tests/python/test_augops_policies.py. */
static float lin_at(float s, float e, float step, int n, int i)
{
    return i < n / 2 ? fmaf(step, (float)i, s) : fmaf(-step, (float)(n - i - 1), e);
}

/* Point I of that torch.linspace, alone: tables of any size cost nothing */
static float linspace_at(int torch, double start, double end, int n, int i)
{
    float s = (float)start, e = (float)end;
    if (n == 1)
        return s;
    float step = (e - s) / (float)(n - 1);
    int lanes = torch == STK__TORCH_1 ? 8 : torch == STK__TORCH_1_AVX512 ? 16 : 0;
    int vec = lanes ? n / (2 * lanes) * (2 * lanes) : 0;
    if (i < vec) {
        int b = i / lanes * lanes, k = i - b;
        float base = lin_at(s, e, step, n, b);
        return base + (float)k * step;
    }
    return lin_at(s, e, step, n, i);
}

static void linspace_f(int torch, double start, double end, int n, float *out)
{
    for (int i = 0; i < n; i++)
        out[i] = linspace_at(torch, start, end, n, i);
}

/* Entry I (< BINS) of OP's magnitude table into *V (stk__augpolicy_table's values); returns 0
 * for an op without magnitudes. */
static int table_at(int torch, int policy, int op, int bins, int h, int w, int i, float *v, int *signed_op)
{
    int wide = policy == STK__AUGP_TRIVIAL;
    double end;
    *signed_op = 1;
    switch (op) {
    case STK__OP_SHEAR_X:
    case STK__OP_SHEAR_Y:
        end = wide ? 0.99 : 0.3;
        break;
    case STK__OP_TRANSLATE_X:
        end = wide ? 32.0 : 150.0 / 331.0 * w;
        break;
    case STK__OP_TRANSLATE_Y:
        end = wide ? 32.0 : 150.0 / 331.0 * h;
        break;
    case STK__OP_ROTATE:
        end = wide ? 135.0 : 30.0;
        break;
    case STK__OP_BRIGHTNESS:
    case STK__OP_COLOR:
    case STK__OP_CONTRAST:
    case STK__OP_SHARPNESS:
        end = wide ? 0.99 : 0.9;
        break;
    case STK__OP_POSTERIZE: {
        /* 8 - (arange(bins) / ((bins - 1) / k)).round().int(), k = 6 (wide) or 4 */
        *signed_op = 0;
        float d = (float)((bins - 1) / (wide ? 6.0 : 4.0));
        *v = (float)(8 - (int)nearbyintf((float)i / d));
        return 1;
    }
    case STK__OP_SOLARIZE:
        *signed_op = 0;
        *v = linspace_at(torch, 255.0, 0.0, bins, i);
        return 1;
    default:
        *signed_op = 0;
        return 0;
    }
    *v = linspace_at(torch, 0.0, end, bins, i);
    return 1;
}

int stk__augpolicy_table(int torch, int policy, int op, int bins, int h, int w, float *out, int *signed_op)
{
    float v;
    if (!table_at(torch, policy, op, bins, h, w, 0, &v, signed_op))
        return 0;
    for (int i = 0; i < bins; i++)
        table_at(torch, policy, op, bins, h, w, i, &out[i], signed_op);
    return bins;
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

static double pick(const stk__augpolicy *p, stk__rng *r, int op, int bin, int h, int w)
{
    int sgn = 0, bins = p->policy == STK__AUGP_AUTO ? 10 : p->bins;
    float v = 0.f;
    double mag = 0.0;
    if (table_at(p->torch, p->policy, op, bins, h, w, 0, &v, &sgn)) {
        if (bin < 0)
            bin = (int)stk__rng_below(r, (uint64_t)bins);
        mag = bin < bins && table_at(p->torch, p->policy, op, bins, h, w, bin, &v, &sgn) ? (double)v : 0.0;
    }
    if (sgn && stk__rng_below(r, 2))
        mag = -mag;
    return mag;
}

/* RandAugment's next op: uniform over the 14 ops, the magnitude of bin P->magnitude, its sign */
static void rand_next(const stk__augpolicy *p, stk__rng *r, int h, int w, stk__augstep *s)
{
    s->op = (int)stk__rng_below(r, STK__OP_INVERT);
    s->magnitude = pick(p, r, s->op, p->magnitude, h, w);
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
        for (int i = 0; i < p->num_ops && i < STK__AUG_MAX_OPS; i++)
            rand_next(p, &r, h, w, &steps[n++]);
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
            stk__augop_apply(d.steps[c][k].op, d.steps[c][k].magnitude, p->interp, &p->fill, p->grid_fma, chain, h, w,
                             scratch);
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
    if (p->policy == STK__AUGP_RAND) { /* num_ops may exceed STK__AUG_MAX_OPS: drawn as applied */
        stk__rng r;
        stk__rng_init(&r, seed, epoch, index);
        r.ctr[0] = POLICY_CTR0;
        for (int i = 0; i < p->num_ops; i++) {
            stk__augstep s;
            rand_next(p, &r, h, w, &s);
            stk__augop_apply(s.op, s.magnitude, p->interp, &p->fill, p->grid_fma, img, h, w, scratch);
        }
        return;
    }
    stk__augstep steps[STK__AUG_MAX_OPS];
    int n = stk__augpolicy_draw(p, seed, epoch, index, h, w, steps);
    for (int i = 0; i < n; i++)
        stk__augop_apply(steps[i].op, steps[i].magnitude, p->interp, &p->fill, p->grid_fma, img, h, w, scratch);
}

