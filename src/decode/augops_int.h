/* SPDX-License-Identifier: MIT */
/*
 * augops_int.h — what the files of torchvision's augmentation (augops.c colour ops and steps,
 * auggeom.c geometric ops, augpolicy.c policies, augsteps.c step programs) share among
 * themselves and nothing else includes. Internal.
 */
#ifndef STK_AUGOPS_INT_H
#define STK_AUGOPS_INT_H

#include "augops.h"

/* Each step's draws: the crop's key, counter from 3 * 2^30 + 256 k (the policy's start at 2^31
 * and the crop's at 0 are far below) */
#define STK__STEP_CTR0 0xC0000000u

/* augops.c: adjust_brightness / _saturation (Color) / _contrast with factor F on N values or PX
 * pixels; rgb_to_grayscale in place; vflip (SCRATCH: one row) */
void stk__aug_brightness(uint8_t *img, size_t n, double f);
void stk__aug_color(uint8_t *img, size_t px, double f);
void stk__aug_contrast(uint8_t *img, size_t px, double f);
void stk__aug_grayscale(uint8_t *img, size_t px);
void stk__aug_vflip(uint8_t *img, int h, int w, uint8_t *scratch);

/* auggeom.c: the geometric op OP of the table (stk__augop_apply's arguments) */
void stk__augop_geometric(int op, double mag, int interp, const stk__augfill *fill, int grid_fma, uint8_t *img,
                          int h, int w, uint8_t *scratch);
/* auggeom.c: check the values A of an affine (ROTATION 0) or rotation step K: STK_OK or
 * STK_E_INVALID with the reason in ERR */
int stk__affine_check(const float *a, int rotation, int k, char *err);

#endif
