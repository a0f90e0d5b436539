/*
 * augment.h — decode + augment one sample, and the CPU conversion to the output dtype/layout.
 * Implemented in decode.c (libjpeg crop-window, DCT-scaled decode), augment.c (crop parameters,
 * antialiased resize, flip) and convert.c (uint8 HWC -> dtype/layout, mean/std). Internal.
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
} stk__aug_config;

void stk__aug_config_default(stk__aug_config *c);

/* Crop window in full-size pixel coordinates and the flip decision. */
typedef struct stk__crop {
    int x, y, w, h;
    int flip;
} stk__crop;

/*
 * Train: torchvision RandomResizedCrop.get_params (ten tries of area scale ~ U(scale) and
 * log-ratio ~ U(log ratio), then the centre-crop fallback clamped to the ratio range) and a flip
 * with flip_prob, drawn from the PRNG keyed (seed, epoch, index). Eval: resize-shorter-side to
 * `resize` then centre crop out_h x out_w, expressed as a window in full-size coordinates.
 */
void stk__crop_params(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index,
                      int width, int height, stk__crop *out);

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

/* The deterministic substitute for a bad record: a uniform mid-grey (128,128,128) image. */
void stk__substitute(const stk__aug_config *c, uint8_t *out);

/*
 * CPU conversion of one sample: SRC uint8 RGB HWC (h x w) -> DST in DTYPE (STK_DTYPE_*) and
 * LAYOUT (STK_NCHW: CHW, STK_NHWC: HWC). With NORMALIZE, value = (x - mean[c]) / std[c]
 * computed in float32 (mean/std in 0..255 units); else value = x (float types) — the same
 * arithmetic as the GPU kernel, so results match to 1 ulp. float16/bfloat16: round to nearest
 * even. uint8 ignores NORMALIZE.
 */
void stk__convert_sample(const uint8_t *src, int h, int w, int dtype, int layout, int normalize,
                         const float mean[3], const float std[3], void *dst);
size_t stk__dtype_size(int dtype);
uint16_t stk__f32_to_f16(float f);
uint16_t stk__f32_to_bf16(float f);

#endif
