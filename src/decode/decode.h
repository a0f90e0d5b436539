/* SPDX-License-Identifier: MIT */
/*
 * decode.h — the libjpeg-turbo decode that augment.c drives (D is the public stk_decoder): the
 * headers first, then a window of the image at a DCT scale M/8. Implemented in decode.c.
 * Internal.
 */
#ifndef STK_DECODE_H
#define STK_DECODE_H

#include "common.h"

/* libjpeg's scaled size of N pixels at M/8: ceil(N * M / 8). */
int stk__scaled(int n, int m);

/* Two phases so that the crop can be chosen from the image size: read the headers (checks
 * empty / not-a-JPEG / pixel limit), then decode window (sx, sy, sw, sh) of the image scaled by
 * M/8 (scaled coordinates). *PX points at the window's first pixel (RGB), rows STRIDE bytes
 * apart, owned by D and valid until D's next call. A header must precede each window. */
int stk__dec_header(stk_decoder *d, const uint8_t *data, size_t len, int64_t max_pixels, int *w,
                    int *h, int *comps, char *err);
int stk__dec_window(stk_decoder *d, int m, int sx, int sy, int sw, int sh, int strict,
                    const uint8_t **px, size_t *stride, int *warnings, char *err);
/* The same decode, handed over in strips: FN(USER, PX, STRIDE, Y0, N) gets window rows Y0 ..
 * Y0 + N - 1 (Y0 a multiple of 8, N = 8 but for the last strip) at PX, rows STRIDE apart, with
 * at least 32 readable bytes past the last row's window; valid only during the call. The rows
 * go through a buffer of 8 rows (which stays in the L1 cache) instead of the whole window. FN
 * runs inside libjpeg's error context: it must not fail. */
typedef void (*stk__rows_fn)(void *user, const uint8_t *px, size_t stride, int y0, int n);
int stk__dec_window_rows(stk_decoder *d, int m, int sx, int sy, int sw, int sh, int strict, stk__rows_fn fn,
                         void *user, int *warnings, char *err);
/* Check that DATA[LEN] decodes completely, as cheaply as libjpeg-turbo allows while still
 * entropy-decoding every scan to the end (DCT scale 1/8, no fancy upsampling, the fast IDCT):
 * STK_OK, or the reason in ERR — any libjpeg warning ("Corrupt JPEG data: ...", "Premature end
 * of JPEG file") counts. MAX_PIXELS as for stk__dec_header (STK_E_TOO_LARGE above it, nothing
 * decoded). Resets D like a window decode. */
int stk__dec_verify(stk_decoder *d, const uint8_t *data, size_t len, int64_t max_pixels, char *err);
/* 1 when the JPEG whose header D just read has several scans (progressive, or sequential with
 * components in separate scans): its decode keeps every DCT coefficient of the image, 2 bytes
 * per pixel and component, whatever the scale. */
int stk__dec_multiscan(const stk_decoder *d);
/* Text of the first libjpeg warning of the last decode ("" if none). */
const char *stk__dec_first_warning(const stk_decoder *d);

#endif
