/* SPDX-License-Identifier: MIT */
/*
 * augops.h — torchvision's per-sample augmentation ops (the op table of autoaugment.py's
 * _apply_op) on uint8 RGB HWC images, equal to torchvision's tensor implementation; the policies
 * that choose among them (TrivialAugmentWide, RandAugment, AutoAugment IMAGENET / CIFAR10 / SVHN,
 * AugMix) from the per-sample PRNG; ordered steps (ColorJitter, RandomGrayscale, RandomVerticalFlip,
 * GaussianBlur, RandomAffine, RandomRotation) and RandomErasing's boxes. Implemented in augops.c,
 * which explains the arithmetic. Internal.
 */
#ifndef STK_AUGOPS_H
#define STK_AUGOPS_H

#include "common.h"
#include "timmaug.h"

/* The ops, in the order of torchvision's RandAugment / TrivialAugmentWide op tables (Identity
 * first); Invert (AutoAugment only) last. */
enum stk__augop {
    STK__OP_IDENTITY,
    STK__OP_SHEAR_X,
    STK__OP_SHEAR_Y,
    STK__OP_TRANSLATE_X,
    STK__OP_TRANSLATE_Y,
    STK__OP_ROTATE,
    STK__OP_BRIGHTNESS,
    STK__OP_COLOR,
    STK__OP_CONTRAST,
    STK__OP_SHARPNESS,
    STK__OP_POSTERIZE,
    STK__OP_SOLARIZE,
    STK__OP_AUTOCONTRAST,
    STK__OP_EQUALIZE,
    STK__OP_INVERT,
    STK__OP_COUNT
};

/* Interpolation of the geometric ops (torchvision: NEAREST default, BILINEAR; BICUBIC: torch's
 * grid_sample, which torchvision's tensor path refuses). */
enum { STK__INTERP_NEAREST = 0, STK__INTERP_BILINEAR = 1, STK__INTERP_BICUBIC = 2 };

/* The op named NAME (torchvision's spelling: "ShearX", "Equalize", ...), or -1. */
int stk__augop_find(const char *name);
const char *stk__augop_name(int op);

/* How a geometric op fills the pixels it uncovers: FILL_ON 0 = zeros without a fill mask
 * (torchvision's fill=None), 1 = the values FILL (0..255 each, rounded half to even). */
typedef struct stk__augfill {
    int on;
    float v[3];
} stk__augfill;

/*
 * Apply OP with MAGNITUDE (the value _apply_op receives: a signed shear factor, translation in
 * pixels (truncated toward zero, as int(magnitude)), degrees, blend factor - 1, posterize bits,
 * solarize threshold; ignored by the rest) to IMG (H x W x 3, rows 3W apart) in place. SCRATCH holds
 * H * W * 3 bytes (used by the geometric ops and Sharpness). H, W >= 1. GRID_FMA: the geometric
 * ops' affine grid with its product fused (STK__TORCH_GRID_FMA).
 */
void stk__augop_apply(int op, double magnitude, int interp, const stk__augfill *fill, int grid_fma,
                      uint8_t *img, int h, int w, uint8_t *scratch);

/* The 3 x 3 [1 1 1; 1 5 1; 1 1 1] / 13 blur of IMG's interior into OUT (H x W x 3, both), border
 * pixels copied: the degenerate of torchvision's adjust_sharpness and of Pillow's
 * ImageEnhance.Sharpness (ImageFilter.SMOOTH). H, W >= 3. */
void stk__aug_smooth(const uint8_t *img, uint8_t *out, int h, int w);

/* ---- policies ---------------------------------------------------------------------------- */

enum { STK__AUGP_NONE = 0, STK__AUGP_TRIVIAL = 1, STK__AUGP_RAND = 2, STK__AUGP_AUTO = 3, STK__AUGP_AUGMIX = 4 };
/* timm's RandAugment (timmaug.h): its own ops, draws and parameters in stk__augpolicy.timm */
enum { STK__AUGP_TIMM_RAND = 5 };
/* timm's AutoAugment (timmaug.h): the same ops and parameters, its policy in .timm.aa */
enum { STK__AUGP_TIMM_AUTO = 6 };

#define STK__AUGMIX_MAX_WIDTH 8
#define STK__AUGMIX_MAX_DEPTH 8

#define STK__AUG_MAX_OPS 64

typedef struct stk__augpolicy {
    int policy;    /* STK__AUGP_* */
    int num_ops;   /* RandAugment: ops per sample (0..65535) */
    int magnitude; /* RandAugment: the bin index (0..bins-1) */
    int bins;      /* TrivialAugmentWide / RandAugment: num_magnitude_bins (>= 2) */
    int interp;    /* STK__INTERP_* */
    stk__augfill fill;
    /* AugMix: severity 1..10, mixture_width 1..8, chain_depth (<= 0: 1..3 at random), alpha,
     * all_ops */
    int severity, width, depth, all_ops;
    double alpha;
    int aa_policy; /* AutoAugment: STK__AA_* (0 = IMAGENET) */
    int torch;     /* STK__TORCH_*: whose arithmetic (STK_P_AUG_TORCH without the flag) */
    int grid_fma;  /* STK_P_AUG_TORCH's STK__TORCH_GRID_FMA: the affine grid's product fused */
    stk__timmra timm; /* STK__AUGP_TIMM_RAND, STK__AUGP_TIMM_AUTO */
} stk__augpolicy;

/* Whose float32 arithmetic the ops equal, as STK_AUG_TORCH_* (augops.c explains the
 * differences): torch 1.x / torchvision <= 0.14 on AVX2 or AVX512 kernels, torch >= 2.0 /
 * torchvision >= 0.15 on AVX2 or AVX512 kernels (the lanes matter to v2's GaussianBlur only) */
enum { STK__TORCH_1 = 0, STK__TORCH_1_AVX512 = 1, STK__TORCH_2 = 2, STK__TORCH_2_AVX512 = 3 };
/* STK_AUG_TORCH_GRID_FMA: a flag beside them (policy and program keep it apart, as grid_fma): the
 * affine grid as fma(y, r1, x * r0) + r2 (auggeom.c) */
#define STK__TORCH_GRID_FMA 4
/* AutoAugment's policy tables (torchvision's AutoAugmentPolicy), as STK_AUG_AUTO_* */
enum { STK__AA_IMAGENET = 0, STK__AA_CIFAR10 = 1, STK__AA_SVHN = 2 };

/* One chosen op: what torchvision's _apply_op would be called with. */
typedef struct stk__augstep {
    int op;
    double magnitude;
} stk__augstep;

/* The magnitude table of OP for POLICY (torchvision's _augmentation_space with BINS bins for an
 * image of H x W; AutoAugment uses 10 bins) as torch TORCH (STK__TORCH_*) computes it: float32
 * values into OUT[BINS]; returns the number of entries (0 for ops without magnitudes) and
 * *SIGNED (1 when the sign is drawn). */
int stk__augpolicy_table(int torch, int policy, int op, int bins, int h, int w, float *out, int *signed_op);

/* The ops POLICY applies to sample INDEX of EPOCH for an image of H x W, drawn from the PRNG keyed
 * (seed, epoch, index) on a stream separate from the crop's: into STEPS (room for
 * STK__AUG_MAX_OPS; a RandAugment of more ops gives its first STK__AUG_MAX_OPS, the rest are
 * drawn as stk__augpolicy_apply applies them); returns their count. A pure function of its
 * arguments. */
int stk__augpolicy_draw(const stk__augpolicy *p, uint64_t seed, uint64_t epoch, uint64_t index, int h,
                        int w, stk__augstep *steps);

/* AugMix's draws for a sample: the Beta weight M0 of the original, each chain's weight W[i]
 * (float32, as torchvision's Dirichlet products) and its ops. */
typedef struct stk__augmix_draws {
    float m0, w[STK__AUGMIX_MAX_WIDTH];
    int depth[STK__AUGMIX_MAX_WIDTH];
    stk__augstep steps[STK__AUGMIX_MAX_WIDTH][STK__AUGMIX_MAX_DEPTH];
} stk__augmix_draws;
/* AugMix's magnitude table of OP (10 bins, its _augmentation_space), as stk__augpolicy_table. */
int stk__augmix_table(int torch, int op, int h, int w, float *out, int *signed_op);
void stk__augmix_draw(const stk__augpolicy *p, uint64_t seed, uint64_t epoch, uint64_t index, int h, int w,
                      stk__augmix_draws *d);

/* Draw and apply the policy to IMG (H x W x 3) in place; SCRATCH holds H * W * 3 bytes; TMP
 * H * W * 3 doubles for AugMix (else unused, may be NULL). */
void stk__augpolicy_apply(const stk__augpolicy *p, uint64_t seed, uint64_t epoch, uint64_t index, uint8_t *img,
                          int h, int w, uint8_t *scratch, double *tmp);

/* ---- steps: ColorJitter, RandomGrayscale, RandomVerticalFlip, in a given order ----------- */

/* Step kinds as stk_loader_set_floats(STK_P_AUG_STEPS) takes them: the kind, then its values. */
enum {
    STK__STEP_VFLIP = 1,     /* p: RandomVerticalFlip(p) */
    STK__STEP_GRAYSCALE = 2, /* p: RandomGrayscale(p) */
    STK__STEP_JITTER = 3,    /* bmin bmax cmin cmax smin smax hmin hmax: ColorJitter's ranges */
    STK__STEP_POLICY = 4,    /* (none): where the STK_P_AUG_POLICY policy runs */
    STK__STEP_BLUR = 5,      /* kx ky smin smax: GaussianBlur((kx, ky), (smin, smax)) */
    STK__STEP_AFFINE = 6,    /* dmin dmax tx ty smin smax shx0 shx1 shy0 shy1 interp fill_on r g b:
                                RandomAffine (translate 0 0, scale 1 1, shear 0 0 0 0 when None) */
    STK__STEP_ROTATION = 7,  /* dmin dmax interp fill_on r g b: RandomRotation */
    STK__STEP_BLUR_V2 = 8,   /* kx ky smin smax: transforms.v2.GaussianBlur (its softmax kernel) */
    STK__STEP_KINDS
};

#define STK__AUG_MAX_STEPS 16

typedef struct stk__augprog {
    int n;
    int torch; /* STK__TORCH_*: whose arithmetic (set by the caller; 0 after parsing) */
    int grid_fma; /* the affine grid's product fused (STK__TORCH_GRID_FMA; set by the caller) */
    stk_vexp_fn vexp; /* stk_loader_set_vexp: kind 5's exp, or NULL for the built-in (set by the caller) */
    int64_t vexp_arg;
    struct {
        int kind;
        float a[15];
    } s[STK__AUG_MAX_STEPS];
} stk__augprog;

/* Parse N floats V (kind, its values, kind, ...) into PROG: STK_OK, or STK_E_INVALID with the
 * reason in ERR (STK__ERRLEN) naming the step. */
int stk__augprog_parse(const float *v, size_t n, stk__augprog *prog, char *err);

/* ColorJitter with fixed draws: ORDER a permutation of 0..3 (brightness, contrast, saturation,
 * hue: torchvision's fn_idx), F the four factors; a factor that is NaN is off (torchvision's None).
 * TORCH (STK__TORCH_*) chooses adjust_hue's return to uint8. */
void stk__augop_jitter(uint8_t *img, int h, int w, const int order[4], const double f[4], int torch);

/* gaussian_blur(img, [kx, ky], [sigma, sigma]): reflect padding, the float32 kernel torchvision
 * makes, its 2-D product, and conv2d's float32 fused multiply-add chain (augsteps.c). V2 0:
 * transforms.functional's kernel (exp / sum: torch's sum as TORCH, STK__TORCH_*, computes it;
 * its exp VEXP(k, x, y, VEXP_ARG) over the k arguments when VEXP is not NULL, else SLEEF's expf
 * for torch 1.x, glibc's standing in for torch 2.x's MKL vmsExp); V2 1: transforms.v2's (softmax
 * of a linspace: SLEEF's expf and torch's vector reduction, 8 or 16 lanes as TORCH says; VEXP
 * unused). KX, KY odd 1..255. OUT: H * W * 3 bytes of scratch; TMP: H * W * 3 + W floats
 * (within the H * W * 3 doubles stk__augprog_apply's TMP holds). */
void stk__augop_blur(uint8_t *img, int h, int w, int kx, int ky, double sigma, int torch, int v2,
                     stk_vexp_fn vexp, int64_t vexp_arg, uint8_t *out, float *tmp);

/* The draws of step K (of kind KIND, values A) for sample INDEX: *ON (flip / grayscale applied),
 * ORDER and F for a jitter, F[0] the sigma of a blur. */
void stk__augstep_draw(int k, int kind, const float *a, uint64_t seed, uint64_t epoch, uint64_t index, int *on,
                       int order[4], double f[4]);

/* Run PROG on IMG (H x W x 3) in place: each step with its draws; POLICY where a STK__STEP_POLICY
 * stands, else after the last step (when its policy is not NONE). SCRATCH: H * W * 3 bytes;
 * TMP: H * W * 3 doubles when PROG has a blur step (stk__augprog_has_blur), else unused. */
void stk__augprog_apply(const stk__augprog *prog, const stk__augpolicy *policy, uint64_t seed, uint64_t epoch,
                        uint64_t index, uint8_t *img, int h, int w, uint8_t *scratch, double *tmp);
int stk__augprog_has_blur(const stk__augprog *prog);

/* RandomAffine / RandomRotation (expand=False, center=None), step K of kind KIND with values A:
 * the draws of get_params for an H x W image into D (angle, tx, ty, scale, shear x, shear y; a
 * rotation draws the angle only: 0, 0, 1, 0, 0 for the rest), each a float32 uniform as torch's
 * uniform_, the translations rounded half to even; and F.affine / F.rotate's tensor path with
 * them on IMG (H x W x 3) in place: the inverse matrix, the affine grid and grid_sample of the
 * op table. SCRATCH: H * W * 3 bytes. */
void stk__affine_draw(int k, int kind, const float *a, uint64_t seed, uint64_t epoch, uint64_t index, int h, int w,
                      double d[6]);
void stk__affine_apply(int kind, const float *a, const double d[6], int grid_fma, uint8_t *img, int h, int w,
                       uint8_t *scratch);

/* ---- RandomErasing: its box, drawn per sample; the erase itself is stage/convert.c's ---------- */

#define STK__ERASE_MAX_COUNT 16

typedef struct stk__erase {
    double p, scale_lo, scale_hi, ratio_lo, ratio_hi;
    int min_count, max_count; /* timm's box count range; 1, 1 for torchvision's */
} stk__erase;

typedef struct stk__erase_box {
    int y, x, h, w;
} stk__erase_box;

/* torchvision's RandomErasing, and timm's (its count range): with probability P, a count n
 * uniform on [min_count, max_count] (drawn only when the two differ), then for each of the n
 * boxes up to ten tries of area * U(scale) / n and exp(U(log ratio)), h = round(sqrt(area *
 * ratio)), w = round(sqrt(area / ratio)), kept when h < H and w < W, then i = randint(0, H - h),
 * j = randint(0, W - w); a box whose ten tries all fail is skipped. Returns the number of boxes
 * put in BOXES (room for STK__ERASE_MAX_COUNT; 0: no erasing) and leaves R, seeded for the
 * sample, to draw the fill values from. With a count of 1 this is torchvision's get_params. */
int stk__erase_boxes(const stk__erase *e, uint64_t seed, uint64_t epoch, uint64_t index, int h, int w,
                     stk__erase_box *boxes, stk__rng *r);

#endif
