/* SPDX-License-Identifier: MIT */
/*
 * resample.h — Pillow's resampling of uint8 RGB as coefficient tables per axis and the two passes
 * over them (portable and AVX2, Pillow's 22-bit integer arithmetic). Implemented in resample.c;
 * used by augment.c, which plans the tables for a sample's crop and owns the scratch. Internal.
 */
#ifndef STK_RESAMPLE_H
#define STK_RESAMPLE_H

#include "common.h"

/* Coefficients of one axis: output i reads count[i] inputs from start[i] with weights
 * k[i * ksize ...] (22-bit fixed point). Zeroed, then grown by the builders; stk__axis_free. */
typedef struct stk__axis {
    int out, ksize;
    int *start, *count;
    int32_t *k;
    double *pre;
    size_t cap_start, cap_count, cap_k, cap_pre;
    int maxcount;  /* largest count */
    int lo, hi; /* inputs used: [lo, hi) */
} stk__axis;

void stk__axis_free(stk__axis *a);

/* Grow *P to hold N elements of SIZE bytes (contents not kept); -1 when out of memory. */
int stk__scratch_reserve(void **p, size_t *cap, size_t n, size_t size);

/* Pillow's NEAREST pixel table as one weight-1 tap per output: VIRT_SIZE outputs in the resized
 * image, OUT of them from OUT_OFF (the rest zero padding) over an input of IN_SIZE pixels at
 * SHIFT in the scaled image. STK_OK or STK_E_NOMEM. */
int stk__axis_nearest(stk__axis *a, int out, double scale, int out_off, int in_size, int shift, int virt_size);

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for OUT outputs with FILTER (STK_INTERP_
 * BILINEAR or BICUBIC): centre of output xx = in0 + (out_off + xx + 0.5) * scale over an input
 * of IN_SIZE pixels, SHIFT added to every start; VIRT_SIZE > 0: outputs outside [0, VIRT_SIZE)
 * of the resized image are zero padding. STK_OK or STK_E_NOMEM. */
int stk__axis_build(stk__axis *a, int filter, int out, double in0, double scale, int out_off, int in_size,
                    int shift, int virt_size);

/* Make every start relative to input ORIGIN (the decoded window's first column or row). */
void stk__axis_rebase(stk__axis *a, int origin);

/* Bytes of scratch the horizontal pass over axis A needs. */
size_t stk__hscratch_size(const stk__axis *a);

/* Rows of the horizontal pass's output (DST): ROWS rounded up to 8, each (ow rounded up to 4) * 3
 * + 16 bytes apart (the AVX2 pass writes whole strips of 8 rows and groups of 4 outputs). */
static inline int stk__tmp_rows(int rows) { return (rows + 7) / 8 * 8; }
static inline size_t stk__tmp_stride(int ow) { return (size_t)(ow + 3) / 4 * 4 * 3 + 16; }

/* Before the first strip of a sample: zero the slack past the window and lay out the AVX2
 * pass's per-output offsets in SCRATCH (stk__hscratch_size bytes), FLIP folded in. */
void stk__resize_h_prepare(const stk__axis *a, uint8_t *scratch, int flip);

/* Horizontal pass over window rows Y0 .. Y0 + N - 1 (N <= 8; Y0 a multiple of 8) at SRC, rows
 * STRIDE apart with at least 32 bytes readable past the last row's window, into DST's rows Y0 ..
 * (DSTRIDE apart; the AVX2 pass writes all 8 rows of the strip). */
void stk__resize_h_strip(const stk__axis *a, const uint8_t *src, size_t stride, int y0, int n, uint8_t *dst,
                         size_t dstride, int flip, uint8_t *scratch);

/* stk__resize_h_prepare, then the whole window of ROWS rows in strips. */
void stk__resize_h(const stk__axis *a, const uint8_t *src, size_t stride, int rows, uint8_t *dst,
                   size_t dstride, int flip, uint8_t *scratch);

/* Vertical pass: SRC rows of N = width * 3 bytes (STRIDE apart) into DST (a->out rows of N);
 * ACC holds N accumulators. */
void stk__resize_v(const stk__axis *a, const uint8_t *src, size_t stride, int n, uint8_t *dst, int32_t *acc);

#endif
