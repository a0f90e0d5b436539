/* SPDX-License-Identifier: MIT */
/*
 * convert.h — the CPU conversion of one sample from uint8 RGB HWC to the delivered dtype and
 * layout (stage/convert.c); the GPU kernel in stager_cuda.cu computes the same expression.
 * Internal.
 */
#ifndef STK_CONVERT_H
#define STK_CONVERT_H

#include "common.h"

/*
 * CPU conversion of one sample: SRC uint8 RGB HWC (h x w) -> DST in DTYPE (STK_DTYPE_*) and
 * LAYOUT (STK_NCHW: CHW, STK_NHWC: HWC). With NORMALIZE, value = (x - mean[c]) / std[c]
 * computed in float32 (mean/std in 0..255 units); else value = x (float types) — the same
 * arithmetic as the GPU kernel, so results match to 1 ulp. float16/bfloat16: round to nearest
 * even. uint8 ignores NORMALIZE.
 */
/* The normalisation is exactly `((float)x - mean[c]) / std[c]` in float32 — a division, not a
 * multiplication by a precomputed reciprocal (which rounds differently) — and the GPU kernel
 * must compute the same expression. float16/bfloat16 are then rounded from that float32 value
 * (NaN stays NaN, overflow becomes inf). */
void stk__convert_sample(const uint8_t *src, int h, int w, int dtype, int layout, int normalize,
                         const float mean[3], const float std[3], void *dst);
/* The same with a table: value = lut[256 * c + x] (float types only; STK_P_LUT). A table lets a
 * caller reproduce another library's float arithmetic bit for bit, whatever its order of
 * operations (x / 255 then - mean then / std, as torchvision does). */
void stk__convert_sample_lut(const uint8_t *src, int h, int w, int dtype, int layout,
                             const float *lut, void *dst);
/* RandomErasing's F.erase on a converted sample DST (h x w, DTYPE, LAYOUT): the box of EH x EW at
 * (Y, X) gets VALUE[c] per channel, or with R a standard normal draw per element (value='random';
 * channel-major order, as torch's [c, h, w] tensor). uint8 takes the value clamped to 0..255 and
 * truncated. */
void stk__erase_sample(void *dst, int h, int w, int dtype, int layout, int y, int x, int eh, int ew,
                       const float value[3], stk__rng *r);
/* timm's mode='rand': one standard normal per channel for a box, drawn from R into VALUE. */
void stk__erase_channel_values(stk__rng *r, float value[3]);
size_t stk__dtype_size(int dtype);
uint16_t stk__f32_to_f16(float f);
uint16_t stk__f32_to_bf16(float f);

#endif
