/* SPDX-License-Identifier: MIT */
/*
 * transcode.h — what a source file becomes in a shard: JPEGs byte for byte (unless larger than
 * --max-side), everything else decoded (image_in.c), resized when over --max-side (the loader's
 * Pillow-exact resize) and encoded as a JPEG (libjpeg-turbo), so the loader's fast path stays
 * JPEG-only. Internal to the pack layer; one transcoder per thread.
 */
#ifndef STK_TRANSCODE_H
#define STK_TRANSCODE_H

#include "common.h"

#define STK__PACK_QUALITY 95 /* JPEG quality of re-encoded images unless asked */

typedef struct stk__xform {
    int max_side; /* > 0: images whose longer side exceeds it are resized to it; 0 = off */
    int quality;  /* 1..100 for re-encoded images; 0 = STK__PACK_QUALITY */
    int keep_damaged; /* 1: a JPEG that does not decode fully is stored as it is, not refused */
} stk__xform;

typedef struct stk__transcoder stk__transcoder;
int stk__transcoder_create(stk__transcoder **out);
void stk__transcoder_destroy(stk__transcoder *t);

/* Size of the resized image: the longer side becomes MAX_SIDE, the shorter one
 * round(short * max_side / long) (at least 1); unchanged when it fits. */
void stk__fit_size(int w, int h, int max_side, int *ow, int *oh);

/*
 * The payload for source bytes P[LEN]. *OUT = NULL: store P as it is (a JPEG that fits, any
 * JPEG without max_side, a damaged JPEG under keep_damaged). Else *OUT (owned by T, valid until
 * its next call) holds *OUT_LEN bytes of a new JPEG. *KIND = the source's format
 * (stk__img_kind); *RESIZED = 1 when the image was made smaller for max_side; DIMS = the
 * stored image's size (0, 0 for a damaged JPEG kept). Every JPEG is decoded completely first (stk__dec_verify, whatever its size; a progressive one over
 * STK__PACK_MAX_PIXELS is refused, as is any image over it that max_side does not resize, and
 * one that max_side should resize but cannot be): one that does not decode fully fails with a
 * reason naming libjpeg's message ("damaged JPEG:
 * truncated: Premature end of JPEG file"), or under keep_damaged is stored as it is with
 * *DAMAGED = 1 and that reason in REASON. On failure the status and a reason naming the format
 * ("PNG: truncated: file ends early", "not an image stoker reads (HEIF)") in REASON
 * (STK__ERRLEN).
 */
int stk__transcode(stk__transcoder *t, const stk__xform *x, const uint8_t *p, size_t len, const uint8_t **out,
                   size_t *out_len, int *kind, int *resized, int *damaged, int dims[2], char *reason);

/* RGB8 (rows 3 * W apart) to a baseline JPEG at QUALITY, 4:4:4, into *BUF (malloc'd/grown,
 * capacity *CAP), *LEN bytes. */
int stk__jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **buf, size_t *cap, size_t *len,
                     char *err);

#endif
