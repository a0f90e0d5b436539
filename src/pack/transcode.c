/* SPDX-License-Identifier: MIT */
/*
 * transcode.c — a source file to its shard payload. JPEG sources are kept byte for byte (gray
 * and CMYK too: the loader decodes them) unless --max-side asks for a smaller image; other formats
 * are decoded to RGB8 (image_in.c) and stored as JPEGs, so the loader's fast path stays one
 * libjpeg-turbo decode. Re-encoding: quality 95 by default, 4:4:4 (no chroma subsampling: at the
 * same quality 4:2:0 costs 0.5 dB of PSNR on photos and 1.8 dB on palette images, whose colour
 * edges are sharp; docs/FORMAT.md has the measurement), the integer-slow DCT, optimised Huffman
 * tables. A resize uses the loader's own
 * Pillow-exact antialiased filter (src/decode/augment.c) on the fully decoded image, so a packed
 * image equals Pillow's img.convert("RGB").resize(size, BILINEAR) before the JPEG encode.
 */
#include "transcode.h"

#include "augment.h"
#include "decode.h"
#include "image_in.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

struct stk__transcoder {
    stk_decoder *dec;     /* JPEG sources over max_side */
    stk__worker_ctx *rs;  /* resize scratch */
    uint8_t *small;       /* the resized image */
    size_t small_cap;
    uint8_t *jpg;         /* the encoded payload */
    size_t jpg_cap;
};

int stk__transcoder_create(stk__transcoder **out)
{
    *out = NULL;
    stk__transcoder *t = calloc(1, sizeof *t);
    if (!t)
        return STK_E_NOMEM;
    int rc = stk_decoder_create(&t->dec);
    if (rc == STK_OK)
        rc = stk__worker_ctx_create(&t->rs);
    if (rc != STK_OK) {
        stk__transcoder_destroy(t);
        return rc;
    }
    *out = t;
    return STK_OK;
}

void stk__transcoder_destroy(stk__transcoder *t)
{
    if (!t)
        return;
    stk_decoder_destroy(t->dec);
    stk__worker_ctx_destroy(t->rs);
    free(t->small);
    free(t->jpg);
    free(t);
}

void stk__fit_size(int w, int h, int max_side, int *ow, int *oh)
{
    *ow = w;
    *oh = h;
    if (max_side <= 0 || (w <= max_side && h <= max_side))
        return;
    if (w >= h) {
        *ow = max_side;
        *oh = (int)(((int64_t)h * max_side * 2 + w) / (2 * (int64_t)w)); /* round half up */
    } else {
        *oh = max_side;
        *ow = (int)(((int64_t)w * max_side * 2 + h) / (2 * (int64_t)h));
    }
    if (*ow < 1)
        *ow = 1;
    if (*oh < 1)
        *oh = 1;
}

/* ---- encode ---------------------------------------------------------------------------------- */

typedef struct enc_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} enc_err;

static void enc_on_error(j_common_ptr c)
{
    enc_err *e = (enc_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

static void enc_on_message(j_common_ptr c, int level)
{
    (void)c;
    (void)level;
}

int stk__jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **buf, size_t *cap, size_t *len,
                     char *err)
{
    struct jpeg_compress_struct c;
    enc_err e;
    memset(&c, 0, sizeof c);
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = enc_on_error;
    e.pub.emit_message = enc_on_message;
    e.msg[0] = 0;
    /* libjpeg-turbo's memory destination mallocs a new buffer when ours is full (and the caller
     * would have to free it, also after an error): make ours as large as any 4:4:4 JPEG of this
     * size can be (TurboJPEG's tjBufSize bound); untouched pages cost nothing */
    size_t bound = (((size_t)w + 15) & ~(size_t)15) * (((size_t)h + 15) & ~(size_t)15) * 6 + 4096;
    if (*cap < bound) {
        free(*buf);
        *cap = 0;
        if (!(*buf = malloc(bound)))
            return stk__err(err, STK_E_NOMEM, "JPEG encode: out of memory for %dx%d", w, h);
        *cap = bound;
    }
    if (setjmp(e.jb)) {
        jpeg_destroy_compress(&c);
        return stk__err(err, STK_E_DECODE, "JPEG encode: %s", e.msg);
    }
    jpeg_create_compress(&c);
    unsigned char *out = *buf;
    unsigned long out_len = (unsigned long)*cap;
    jpeg_mem_dest(&c, &out, &out_len);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    for (int i = 0; i < c.num_components; i++) /* 4:4:4 */
        c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
    c.optimize_coding = TRUE;
    c.dct_method = JDCT_ISLOW;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    if (out != *buf) { /* cannot happen below the bound; never lose the buffer */
        free(*buf);
        *buf = out;
        *cap = out_len;
    }
    *len = out_len;
    return STK_OK;
}

/* ---- the payload of one source ---------------------------------------------------------------- */

static int finish(stk__transcoder *t, const stk__xform *x, const uint8_t *px, int w, int h, size_t stride,
                  const uint8_t **out, size_t *out_len, int *resized, int dims[2], const char *what, char *reason)
{
    int ow, oh, rc;
    stk__fit_size(w, h, x->max_side, &ow, &oh);
    dims[0] = ow;
    dims[1] = oh;
    *resized = ow != w || oh != h;
    const uint8_t *img = px;
    char e[STK__ERRLEN];
    if (ow != w || oh != h) {
        size_t need = (size_t)ow * (size_t)oh * 3;
        if (need > t->small_cap) {
            free(t->small);
            t->small_cap = 0;
            if (!(t->small = malloc(need)))
                return stk__err(reason, STK_E_NOMEM, "%s: out of memory for a %dx%d resize", what, ow, oh);
            t->small_cap = need;
        }
        if (stk__resize_rgb(t->rs, px, w, h, stride, t->small, ow, oh) != STK_OK)
            return stk__err(reason, STK_E_NOMEM, "%s: out of memory for a %dx%d resize", what, ow, oh);
        img = t->small;
    } else if (stride != (size_t)w * 3) {
        return stk__err(reason, STK_E_INVALID, "%s: unexpected row stride", what);
    }
    int q = x->quality > 0 ? x->quality : STK__PACK_QUALITY;
    if ((rc = stk__jpeg_encode(img, ow, oh, q, &t->jpg, &t->jpg_cap, out_len, e)) != STK_OK)
        return stk__err(reason, rc, "%s: %s", what, e);
    *out = t->jpg;
    return STK_OK;
}

/* The DCT scale M/8 (8, 4, 2 or 1) at which a W x H JPEG is decoded for a resize to MAX_SIDE: the
 * full size when it is within the pack's pixel limit (the resize then equals Pillow's); above it
 * (Pillow would refuse such an image) the smallest scale whose longer side still reaches
 * MAX_SIDE within the limit, else the largest that fits (the stored image is then smaller than
 * MAX_SIDE); 0 when even 1/8 does not fit. */
static int resize_scale(int w, int h, int max_side)
{
    if ((int64_t)w * h <= STK__PACK_MAX_PIXELS)
        return 8;
    int best = 0;
    for (int m = 1; m <= 4; m *= 2) {
        int sw = stk__scaled(w, m), sh = stk__scaled(h, m);
        if ((int64_t)sw * sh > STK__PACK_MAX_PIXELS)
            break;
        best = m;
        if (STK__MAX(sw, sh) >= max_side)
            break;
    }
    return best;
}

/* The full check of a JPEG (stk__dec_verify) whatever its size. Within the pack's pixel limit as
 * always; above it a single-scan JPEG is checked the same way (the 1/8-scale decode holds a few
 * rows, never the image), a progressive or multi-scan one is refused (its decode keeps every
 * coefficient of the image: 2 bytes per pixel and component), so no JPEG is stored unchecked.
 * *W, *H: its size. */
static int verify_jpeg(stk__transcoder *t, const uint8_t *p, size_t len, int *w, int *h, char *e)
{
    *w = *h = 0;
    int rc = stk__dec_header(t->dec, p, len, STK__JPEG_MAX_PIXELS, w, h, NULL, e);
    if (rc != STK_OK)
        return rc;
    int64_t px = (int64_t)*w * *h;
    if (px > STK__PACK_MAX_PIXELS && stk__dec_multiscan(t->dec)) {
        stk__dec_header(t->dec, NULL, 0, 1, NULL, NULL, NULL, e); /* reset the decoder */
        return stk__err(e, STK_E_TOO_LARGE, "too large: a multi-scan JPEG of %dx%d = %lld pixels, over the "
                        "pack's limit of %lld (its check would hold %lld MB of coefficients)", *w, *h,
                        (long long)px, STK__PACK_MAX_PIXELS, (long long)(px * 6 / 1000000));
    }
    return stk__dec_verify(t->dec, p, len, STK__JPEG_MAX_PIXELS, e);
}

/* A JPEG source: decoded completely first (a damaged one is refused, or kept as it is), then
 * packed as it is unless it is larger than max_side (then resized, or refused with the reason:
 * never stored unresized without a word). One over the pack's pixel limit is refused unless
 * max_side brings it under. */
static int transcode_jpeg(stk__transcoder *t, const stk__xform *x, const uint8_t *p, size_t len,
                          const uint8_t **out, size_t *out_len, int *resized, int *damaged, int dims[2], char *reason)
{
    char e[STK__ERRLEN];
    int w, h;
    int rc = verify_jpeg(t, p, len, &w, &h, e);
    if (rc == STK_E_TOO_LARGE)
        return stk__err(reason, rc, "%s", e);
    if (rc != STK_OK) {
        if (rc == STK_E_NOMEM || !x->keep_damaged)
            return stk__err(reason, rc, "damaged JPEG: %s", e);
        /* kept: as it is (a re-encode would hide the damage); the loader names it as a bad record */
        *damaged = 1;
        stk__err(reason, STK_OK, "damaged JPEG: %s", e);
        return STK_OK;
    }
    int64_t px = (int64_t)w * h;
    if (x->max_side <= 0 || (w <= x->max_side && h <= x->max_side)) {
        if (px > STK__PACK_MAX_PIXELS)
            return stk__err(reason, STK_E_TOO_LARGE, "too large: %dx%d = %lld pixels, over the pack's limit of %lld "
                            "(Pillow's decompression-bomb bound; --max-side resizes it)", w, h, (long long)px,
                            STK__PACK_MAX_PIXELS);
        dims[0] = w;
        dims[1] = h;
        return STK_OK;
    }
    int m = resize_scale(w, h, x->max_side);
    if (m == 0)
        return stk__err(reason, STK_E_TOO_LARGE, "cannot resize for --max-side %d: %dx%d is over the pack's pixel "
                        "limit even at 1/8 scale", x->max_side, w, h);
    const uint8_t *spx;
    size_t stride;
    int warnings = 0;
    int sw = stk__scaled(w, m), sh = stk__scaled(h, m);
    if ((rc = stk__dec_header(t->dec, p, len, STK__JPEG_MAX_PIXELS, NULL, NULL, NULL, e)) != STK_OK ||
        (rc = stk__dec_window(t->dec, m, 0, 0, sw, sh, 0, &spx, &stride, &warnings, e)) != STK_OK)
        return stk__err(reason, rc, "cannot resize for --max-side %d: %s", x->max_side, e);
    if (warnings)
        return stk__err(reason, STK_E_DECODE, "cannot resize for --max-side %d: %s", x->max_side,
                        stk__dec_first_warning(t->dec));
    return finish(t, x, spx, sw, sh, stride, out, out_len, resized, dims, "JPEG", reason);
}

int stk__transcode(stk__transcoder *t, const stk__xform *x, const uint8_t *p, size_t len, const uint8_t **out,
                   size_t *out_len, int *kind, int *resized, int *damaged, int dims[2], char *reason)
{
    *out = NULL;
    *out_len = 0;
    *resized = 0;
    *damaged = 0;
    dims[0] = dims[1] = 0;
    int k = stk__img_sniff(p, len);
    if (kind)
        *kind = k;
    char e[STK__ERRLEN];
    int rc;
    if (k == STK__IMG_JPEG)
        return transcode_jpeg(t, x, p, len, out, out_len, resized, damaged, dims, reason);
    if (k == STK__IMG_UNKNOWN) {
        stk__img_describe_unknown(p, len, e, sizeof e);
        return stk__err(reason, STK_E_NOT_JPEG, "not an image stoker reads (%s)", e);
    }
    uint8_t *px = NULL;
    int w = 0, h = 0;
    rc = stk__img_decode_rgb(k, p, len, STK__PACK_MAX_PIXELS, &px, &w, &h, e);
    if (rc != STK_OK)
        return stk__err(reason, rc, "%s", e);
    rc = finish(t, x, px, w, h, (size_t)w * 3, out, out_len, resized, dims, stk__img_kind_name(k), reason);
    free(px);
    return rc;
}
