/* SPDX-License-Identifier: MIT */
/*
 * image_in.h — source images of any common format, known by their first bytes (never by the
 * file name), decoded to 8-bit RGB the way Pillow's Image.open(f).convert("RGB") sees them, with
 * well-kept libraries: libpng, libwebp (+ demux), giflib, libtiff, stb_image (BMP); binary
 * PPM/PGM (a header and raw samples) is read in image_in.c. Each library is optional at build
 * time. Internal to the decode layer (since 0.5; pack converts sources with it, the loader
 * decodes a raw folder's non-JPEG files with it).
 */
#ifndef STK_IMAGE_IN_H
#define STK_IMAGE_IN_H

#include "common.h"

enum stk__img_kind {
    STK__IMG_UNKNOWN = 0,
    STK__IMG_JPEG,
    STK__IMG_PNG,
    STK__IMG_WEBP,
    STK__IMG_GIF,
    STK__IMG_BMP,
    STK__IMG_TIFF,
    STK__IMG_PNM,
};

/* Pillow refuses images above this many pixels (its DecompressionBombError bound): so do we. */
#define STK__PACK_MAX_PIXELS 178956970ll
/* The most a JPEG can claim (65500 x 65500, libjpeg's JPEG_MAX_DIMENSION): the header limit of a
 * JPEG's check, which holds rows, not the image (transcode.c). */
#define STK__JPEG_MAX_PIXELS (65535ll * 65535ll)
/* The loader's default pixel limit (STK_P_MAX_PIXELS, Pillow's warning bound): pack warns when it
 * stores a larger image. */
#define STK__LOADER_MAX_PIXELS 89478485ll

/* The format of LEN bytes at P by their signature (STK__IMG_UNKNOWN when none matches). */
int stk__img_sniff(const uint8_t *p, size_t len);
/* "PNG", "WebP", ...; "unknown". */
const char *stk__img_kind_name(int kind);
/* 1 when this build has a decoder for KIND (JPEG always). */
int stk__img_can_decode(int kind);
/* What the first bytes look like when the format is not one we read ("HEIF/AVIF", "JPEG 2000",
 * "text", "starts with 00 01 02 03"), for the skip reason. */
void stk__img_describe_unknown(const uint8_t *p, size_t len, char *buf, size_t cap);

/*
 * Decode a non-JPEG image (PNG, WebP, GIF, BMP, TIFF, PPM/PGM) to RGB8: *PX (malloc'd, owned by
 * the caller; rows 3 * *W bytes apart, with 64 bytes of zeroed slack past the end), *W, *H.
 * Pillow's convert("RGB"): alpha dropped (not composited), palette expanded, gray replicated,
 * 16-bit RGB(A)/LA reduced to the high byte, 16-bit gray clamped to 255; GIF and animated WebP:
 * the first frame. Returns STK_OK, or STK_E_DECODE (corrupt), STK_E_TRUNCATED, STK_E_TOO_LARGE
 * (over MAX_PIXELS), STK_E_UNSUPPORTED (a feature or format this build does not decode),
 * STK_E_NOMEM, with the reason in ERR (STK__ERRLEN). Thread-safe (no shared state).
 */
int stk__img_decode_rgb(int kind, const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *w,
                        int *h, char *err);

#endif
