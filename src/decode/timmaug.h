/* SPDX-License-Identifier: MIT */
/*
 * timmaug.h — timm's RandAugment (timm.data.auto_augment: rand_augment_transform, the
 * 'rand-m9-mstd0.5-inc1' strings) and AutoAugment (auto_augment_transform: 'original-mstd0.5',
 * 'originalr', 'v0', 'v0r') on uint8 RGB HWC images: its PIL-based ops with Pillow's pixel
 * arithmetic, its level-to-argument functions, and the per-sample draws (ops with replacement,
 * per-op probability, magnitude noise, random sign, random BILINEAR / BICUBIC) from stoker's
 * per-sample PRNG. Implemented in timmaug.c, which explains the arithmetic. Internal.
 */
#ifndef STK_TIMMAUG_H
#define STK_TIMMAUG_H

#include "common.h"

/* timm's op names (NAME_TO_OP keys) that its RandAugment transform lists and AutoAugment policies
 * use, in the order of STK_P_TIMM_AUTO_POLICY's op numbers (append only). */
enum stk__timm_op {
    STK__TIMM_AUTOCONTRAST,
    STK__TIMM_EQUALIZE,
    STK__TIMM_INVERT,
    STK__TIMM_ROTATE,
    STK__TIMM_POSTERIZE,
    STK__TIMM_POSTERIZE_INC,
    STK__TIMM_SOLARIZE,
    STK__TIMM_SOLARIZE_INC,
    STK__TIMM_SOLARIZE_ADD,
    STK__TIMM_COLOR,
    STK__TIMM_COLOR_INC,
    STK__TIMM_CONTRAST,
    STK__TIMM_CONTRAST_INC,
    STK__TIMM_BRIGHTNESS,
    STK__TIMM_BRIGHTNESS_INC,
    STK__TIMM_SHARPNESS,
    STK__TIMM_SHARPNESS_INC,
    STK__TIMM_SHEAR_X,
    STK__TIMM_SHEAR_Y,
    STK__TIMM_TRANSLATE_X_REL,
    STK__TIMM_TRANSLATE_Y_REL,
    STK__TIMM_POSTERIZE_ORIG, /* AutoAugment's 'original' policy: keeps 4..8 bits */
    STK__TIMM_OP_COUNT
};

/* Pillow's resampling filters of the geometric ops (Image.BILINEAR, BICUBIC, NEAREST: the
 * STK_INTERP_* numbers); RANDOM is timm's default (BILINEAR or BICUBIC at random per geometric
 * op applied). */
enum { STK__TIMM_BILINEAR = 0, STK__TIMM_BICUBIC = 1, STK__TIMM_NEAREST = 2, STK__TIMM_RANDOM = -1 };

/* The op named NAME (timm's spelling), or -1; and back. */
int stk__timm_find(const char *name);
const char *stk__timm_name(int op);

#define STK__TIMM_AUTO_MAX_SUB 64  /* sub-policies of an AutoAugment policy */
#define STK__TIMM_AUTO_MAX_OPS 128 /* ops over all its sub-policies */
#define STK__TIMM_AUTO_MAX_OPS_SUB 16 /* ops in one sub-policy */

/* A timm AutoAugment policy (STK_P_TIMM_AUTO_POLICY): sub-policy s holds ops off[s] .. off[s + 1]
 * - 1, each an op with its own probability and magnitude (AugmentOp's prob, magnitude). */
typedef struct stk__timmaa {
    int nsub;
    int off[STK__TIMM_AUTO_MAX_SUB + 1];
    int op[STK__TIMM_AUTO_MAX_OPS];
    double prob[STK__TIMM_AUTO_MAX_OPS], magnitude[STK__TIMM_AUTO_MAX_OPS];
} stk__timmaa;

/* Read the float program of STK_P_TIMM_AUTO_POLICY (per sub-policy: its op count k, then k
 * triples op, prob, magnitude) into OUT; N = 0 gives an empty policy. Errors name the value and
 * the reason (STK_E_INVALID). */
int stk__timmaa_parse(const float *v, size_t n, stk__timmaa *out, char *err);

/* The configuration of a timm RandAugment: rand_augment_transform's sections and hparams; and
 * of a timm AutoAugment (auto_augment_transform): its policy in aa, its hparams (mstd, mmax,
 * resample, fill, translate_pct) here, the RandAugment-only fields unused. */
typedef struct stk__timmra {
    int increasing;       /* 'inc1': _RAND_INCREASING_TRANSFORMS, else _RAND_TRANSFORMS */
    int weighted;         /* 'tweights': _RAND_WEIGHTED_0, chosen without replacement (then
                             increasing is ignored and at most 15 layers are drawn) */
    int num_layers;       /* 'n' (0..65535; 'tweights': 0..15) */
    double magnitude;     /* 'm' */
    double mstd;          /* 'mstd': 0 none, > 0 N(m, mstd), INFINITY U(0, m) */
    double mmax;          /* the clip's upper bound: 'mmax' or 10 */
    double prob;          /* 'p': each chosen op is applied with this probability */
    double translate_pct; /* hparams translate_pct */
    int resample;         /* STK__TIMM_BILINEAR / BICUBIC / NEAREST / RANDOM */
    uint8_t fill[3];      /* hparams img_mean: the geometric ops' fillcolor */
    stk__timmaa aa;       /* AutoAugment's policy (STK__AUGP_TIMM_AUTO) */
} stk__timmra;

/* The argument timm's LEVEL_TO_ARG[op] gives for the clipped magnitude LEVEL, NEGATE the outcome
 * of _randomly_negate (ignored by unsigned ops), for an image W pixels wide and H high (the
 * translations' pixels). Ops without arguments return 0. */
double stk__timm_arg(int op, double level, int negate, double translate_pct, int h, int w);
/* Whether OP's argument has a random sign (Rotate, the shears, the translations, the
 * 'Increasing' enhancements), and whether it takes a resampling filter (the geometric ops). */
int stk__timm_signed(int op);
int stk__timm_geometric(int op);

/* Apply OP with argument ARG (as timm's NAME_TO_OP[op](img, arg, fillcolor=FILL,
 * resample=RESAMPLE) computes it with Pillow) to IMG (H x W x 3, rows 3W apart) in place.
 * RESAMPLE is STK__TIMM_BILINEAR, BICUBIC or NEAREST. SCRATCH holds H * W * 3 bytes. */
void stk__timm_apply(int op, double arg, int resample, const uint8_t fill[3], uint8_t *img, int h, int w,
                     uint8_t *scratch);

/* One layer of a sample: the op chosen, whether it ran (the per-op probability), the clipped
 * magnitude, the sign drawn and the filter. */
typedef struct stk__timmstep {
    int op, applied, negate, resample;
    double level;
} stk__timmstep;

#define STK__TIMM_MAX_LAYERS 64

/* The layers P gives sample INDEX of EPOCH, drawn from the PRNG keyed (seed, epoch, index) on a
 * counter range of their own: into STEPS (room for STK__TIMM_MAX_LAYERS; of more layers the
 * first STK__TIMM_MAX_LAYERS, the rest drawn as stk__timmra_apply applies them); returns their
 * count. A pure function of its arguments. */
int stk__timmra_draw(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, stk__timmstep *steps);

/* Draw and apply P to IMG (H x W x 3) in place; SCRATCH holds H * W * 3 bytes. */
void stk__timmra_apply(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, uint8_t *img, int h,
                       int w, uint8_t *scratch);

/* AutoAugment: the sub-policy P->aa gives sample INDEX of EPOCH (uniform, random.choice) into
 * *SUB and its ops, each with AugmentOp's draws (probability, magnitude noise and clip, sign,
 * filter), into STEPS (room for STK__TIMM_MAX_LAYERS); returns their count. Drawn on a counter
 * range of their own; a pure function of its arguments. */
int stk__timmaa_draw(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, int *sub,
                     stk__timmstep *steps);

/* Draw and apply AutoAugment P to IMG (H x W x 3) in place; SCRATCH holds H * W * 3 bytes. */
void stk__timmaa_apply(const stk__timmra *p, uint64_t seed, uint64_t epoch, uint64_t index, uint8_t *img, int h,
                       int w, uint8_t *scratch);

#endif
