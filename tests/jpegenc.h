/* SPDX-License-Identifier: MIT */
/* jpegenc.h — a libjpeg (compress) encoder for decode tests: every subsampling, grayscale, CMYK
 * (with and without Adobe's APP14 marker), YCCK, progressive, restart markers, an EXIF block.
 * TurboJPEG 2.1 cannot write restart markers, CMYK from RGB or extra markers; this can.
 * Header-only (static functions) for tests/test_decode*.c and tests/tools/stk-mkjpeg.c. */
#ifndef STK_JPEGENC_H
#define STK_JPEGENC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

enum je_kind {
    JE_444, JE_422, JE_420, JE_440, JE_411, JE_GRAY, JE_CMYK, JE_CMYK_NOADOBE, JE_YCCK, JE_KINDS
};
static const char *const je_kind_names[JE_KINDS] = {"444", "422", "420", "440", "411", "gray",
                                                    "cmyk", "cmyk-noadobe", "ycck"};
#define JE_PROGRESSIVE 1
#define JE_RESTART_ROWS 2   /* a restart marker every MCU row */
#define JE_RESTART_MCUS 4   /* a restart marker every 3 MCUs */
#define JE_EXIF 8           /* an APP1 Exif block (orientation 6) before the image */

static uint8_t *je_encode(const uint8_t *rgb, int w, int h, int kind, int quality, int flags,
                          size_t *len)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    jpeg_mem_dest(&ci, &out, &outlen);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    int cmyk = kind == JE_CMYK || kind == JE_CMYK_NOADOBE || kind == JE_YCCK;
    ci.input_components = kind == JE_GRAY ? 1 : cmyk ? 4 : 3;
    ci.in_color_space = kind == JE_GRAY ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    ci.dct_method = JDCT_ISLOW;
    if (kind == JE_YCCK)
        jpeg_set_colorspace(&ci, JCS_YCCK);
    if (kind == JE_CMYK_NOADOBE)
        ci.write_Adobe_marker = FALSE;
    int hs = 1, vs = 1;
    switch (kind) {
    case JE_422: hs = 2; break;
    case JE_420: hs = 2, vs = 2; break;
    case JE_440: vs = 2; break;
    case JE_411: hs = 4; break;
    case JE_YCCK: hs = 2, vs = 2; break;
    default: break;
    }
    ci.comp_info[0].h_samp_factor = hs;
    ci.comp_info[0].v_samp_factor = vs;
    for (int c = 1; c < ci.num_components; c++) {
        ci.comp_info[c].h_samp_factor = 1;
        ci.comp_info[c].v_samp_factor = 1;
    }
    if (kind == JE_YCCK) { /* K at full resolution too */
        ci.comp_info[3].h_samp_factor = hs;
        ci.comp_info[3].v_samp_factor = vs;
    }
    if (flags & JE_PROGRESSIVE)
        jpeg_simple_progression(&ci);
    if (flags & JE_RESTART_ROWS)
        ci.restart_in_rows = 1;
    if (flags & JE_RESTART_MCUS)
        ci.restart_interval = 3;
    jpeg_start_compress(&ci, TRUE);
    if (flags & JE_EXIF) {
        static const uint8_t exif[] = {
            'E', 'x', 'i', 'f', 0, 0,                       /* Exif header */
            'I', 'I', 42, 0, 8, 0, 0, 0,                    /* TIFF, little endian, IFD at 8 */
            1, 0,                                           /* one entry */
            0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0,       /* Orientation (SHORT) = 6 */
            0, 0, 0, 0};                                    /* no next IFD */
        jpeg_write_marker(&ci, JPEG_APP0 + 1, exif, sizeof exif);
    }
    int nc = ci.input_components;
    uint8_t *row = malloc((size_t)w * (size_t)nc);
    while (ci.next_scanline < ci.image_height) {
        const uint8_t *s = rgb + (size_t)ci.next_scanline * (size_t)w * 3;
        for (int x = 0; x < w; x++) {
            int r = s[3 * x], g = s[3 * x + 1], b = s[3 * x + 2];
            if (kind == JE_GRAY) {
                row[x] = (uint8_t)((r * 77 + g * 150 + b * 29) >> 8);
            } else if (cmyk) {
                int c = 255 - r, m = 255 - g, y = 255 - b;
                int k = c < m ? (c < y ? c : y) : (m < y ? m : y);
                k = k * 3 / 4; /* keep some colour in C, M, Y */
                row[4 * x] = (uint8_t)(c - k);
                row[4 * x + 1] = (uint8_t)(m - k);
                row[4 * x + 2] = (uint8_t)(y - k);
                row[4 * x + 3] = (uint8_t)k;
            } else {
                memcpy(row + 3 * x, s + 3 * x, 3);
            }
        }
        JSAMPROW rp = row;
        jpeg_write_scanlines(&ci, &rp, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    uint8_t *res = malloc(outlen);
    memcpy(res, out, outlen);
    free(out);
    *len = outlen;
    return res;
}

#endif
