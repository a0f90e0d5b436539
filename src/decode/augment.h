/* SPDX-License-Identifier: MIT */
/*
 * augment.h — decode + augment one sample: crop parameters, the DCT scale of the crop-window
 * decode (decode.h), the antialiased resize and flip. Implemented in augcrop.c (the crop and
 * scale), resample.c (the resize kernels) and augment.c (the sample). Internal.
 */
#ifndef STK_AUGMENT_H
#define STK_AUGMENT_H

#include "common.h"

typedef struct stk__aug_config {
    int mode;              /* STK_MODE_TRAIN / EVAL */
    int out_h, out_w;
    int resize;            /* eval: shorter side */
    double flip_prob, scale_min, scale_max, ratio_min, ratio_max;
    int64_t max_pixels;
    int strict;
    int dct_scaling;
    int interp;            /* STK_INTERP_*: the resize filter */
    int resize_h, resize_w; /* eval: both > 0: Resize((resize_h, resize_w)) instead of `resize` */
    int passes;            /* STK_RESIZE_PASSES_*: Pillow <= 12's pass order or Pillow 13's */
} stk__aug_config;

void stk__aug_config_default(stk__aug_config *c);

/* Crop window in full-size pixel coordinates and the flip decision.
 * Train: x, y, w, h is the RandomResizedCrop box (torchvision's j, i, w, h); it is resized to
 * out_w x out_h with the filter's support clipped to the box (as torchvision's crop-then-resize).
 * Eval: resized_w x resized_h is the size torchvision's Resize(resize) gives the whole image and
 * (off_x, off_y) the CenterCrop's top-left in that resized image; the output samples the whole
 * image with that geometry (filter support not clipped to the window, as resize-then-crop).
 * x, y, w, h is then the window in full-size pixels the output covers (for information).
 * If out_w/out_h exceed the resized size, the output is zero-padded as torchvision's CenterCrop
 * pads (off_x/off_y are then negative: -(out - resized) // 2). */
typedef struct stk__crop {
    int x, y, w, h;
    int flip;
    int fallback;            /* train: 1 when all ten tries failed (centre-crop fallback) */
    int resized_w, resized_h; /* eval only (0 in train) */
    int off_x, off_y;         /* eval only */
    int interp;               /* this sample's filter: the config's, BILINEAR or BICUBIC for RANDOM */
} stk__crop;

/*
 * Train: torchvision RandomResizedCrop.get_params (ten tries of area scale ~ U(scale) and
 * log-ratio ~ U(log ratio), then the centre-crop fallback clamped to the ratio range) and a flip
 * with flip_prob, drawn from the PRNG keyed (seed, epoch, index). Eval: resize-shorter-side to
 * `resize` then centre crop out_h x out_w, expressed as a window in full-size coordinates.
 */
void stk__crop_params(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index,
                      int width, int height, stk__crop *out);

/* DCT scale M (1, 2, 4 or 8: decode at M/8) for a crop of a WIDTH x HEIGHT image: the smallest
 * at which the crop still covers out_w x out_h in both directions (8 when dct_scaling is off). */
int stk__plan_scale(const stk__aug_config *c, const stk__crop *crop, int width, int height);

/* ---- augment.c, resample.c: the resize -----------------------------------------------------
 * Antialiased separable resize with Pillow's BILINEAR or BICUBIC arithmetic (triangle or cubic
 * filter whose support grows with the downscale factor, coefficients in 22-bit fixed point,
 * horizontal pass first into an 8-bit intermediate, then vertical), or Pillow's NEAREST pixel
 * table, so that at DCT scale 8/8 a train sample is bit-identical to torchvision's resized_crop
 * + hflip on Pillow and an eval sample to Resize + CenterCrop. Flip is folded into the
 * horizontal pass. */

/* Tests: allow (1) or forbid (0) the SIMD resize kernels, to compare them with the portable
 * ones. Returns 1 when SIMD kernels are now in use. Process-wide. */
int stk__aug_set_simd(int enable);

/* Tests: run the horizontal pass on each strip of 8 rows as the decoder produces it (1, the
 * default) or on the whole decoded window afterwards (0); the same bytes. Process-wide. */
int stk__aug_set_fused(int enable);

/* Per-worker state: libjpeg decompressor, scratch buffers. One thread at a time. */
typedef struct stk__worker_ctx stk__worker_ctx;
int stk__worker_ctx_create(stk__worker_ctx **out);
void stk__worker_ctx_destroy(stk__worker_ctx *w);

/*
 * Decode DATA, choose the crop, decode only the crop window at the smallest covering DCT scale,
 * resize (antialiased) to out_h x out_w, flip, write uint8 RGB HWC to OUT (out_h*out_w*3 bytes).
 * Returns STK_OK (with *warnings = libjpeg warnings, 0 if none) or STK_E_DECODE / NOT_JPEG /
 * TOO_LARGE / EMPTY / TRUNCATED with a reason in ERR (STK__ERRLEN). In strict mode a warning is
 * STK_E_DECODE.
 */
int stk__process_sample(stk__worker_ctx *w, const stk__aug_config *c, uint64_t seed, uint64_t epoch,
                        uint64_t index, const uint8_t *data, size_t len, uint8_t *out,
                        int *warnings, char *err);

/* Pack: resize a whole RGB8 image SW x SH (rows STRIDE apart, at least 32 readable bytes past
 * the last pixel) to OW x OH into DST (rows 3 * OW apart) with the same filter, exactly
 * Pillow's Image.resize((OW, OH), Image.BILINEAR). STK_E_NOMEM when scratch cannot grow. */
int stk__resize_rgb(stk__worker_ctx *w, const uint8_t *src, int sw, int sh, size_t stride, uint8_t *dst, int ow,
                    int oh);

/* The deterministic substitute for a bad record: a uniform mid-grey (128,128,128) image. */
void stk__substitute(const stk__aug_config *c, uint8_t *out);

#endif
