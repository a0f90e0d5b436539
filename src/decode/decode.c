/* SPDX-License-Identifier: MIT */
/*
 * decode.c — one JPEG into RGB with libjpeg-turbo's libjpeg API: full size, or only a crop
 * window at a DCT scale M/8 (M in 1, 2, 4, 8). The libjpeg API and not TurboJPEG: the window
 * decode needs jpeg_crop_scanline() and jpeg_skip_scanlines(), and the two phases (read the
 * header, let the caller pick crop and scale from the image size, then decode) need the
 * decompressor kept between them. Bad input is an error naming the cause, never a crash.
 */
#include "decode.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#define STK__MAX_SCANS 500

typedef struct stk__jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int warnings;
    int strict;
    int status;       /* status of the failure being reported by longjmp */
    int scan_limit;   /* set by the progress monitor before it fails */
    char first_warning[JMSG_LENGTH_MAX];
    char msg[JMSG_LENGTH_MAX];
} stk__jerr;

struct stk_decoder {
    struct jpeg_decompress_struct cinfo;
    stk__jerr jerr;
    struct jpeg_progress_mgr progress;
    int created;      /* jpeg_create_decompress succeeded */
    int have_header;  /* stk__dec_header succeeded; stk__dec_window may follow */
    int width, height, comps;
    uint8_t *buf;     /* decoded window (RGB rows) */
    size_t buf_cap;
    uint8_t *row;     /* one CMYK row */
    size_t row_cap;
    char err[STK__ERRLEN];
};

/* ---- libjpeg error manager ------------------------------------------------------------------ */

/*
 * Errors. Each decoder owns a libjpeg error manager that longjmps back into the call that
 * started the work (one setjmp per entry point, see run()). After a longjmp the decompressor is
 * reset with jpeg_abort_decompress() and is reusable. emit_message() counts libjpeg warnings
 * (corrupt entropy data that was decoded anyway): they are not fatal unless strict, except
 * JWRN_JPEG_EOF — premature end of data — which stops at once as STK_E_TRUNCATED (libjpeg would
 * fill the rest of the image with grey). Checks before libjpeg runs: no bytes = STK_E_EMPTY, no
 * SOI marker = STK_E_NOT_JPEG (PNG/GIF/... named). After jpeg_read_header() and before anything
 * is allocated: width * height > max_pixels = STK_E_TOO_LARGE. A progress monitor caps the
 * number of progressive scans (STK__MAX_SCANS), so a crafted file of thousands of tiny scans
 * cannot keep a worker busy for minutes.
 */

static void on_error_exit(j_common_ptr cinfo)
{
    stk__jerr *e = (stk__jerr *)cinfo->err;
    if (e->scan_limit) {
        snprintf(e->msg, sizeof e->msg, "more than %d progressive scans (corrupt or hostile file)",
                 STK__MAX_SCANS);
        e->status = STK_E_DECODE;
    } else {
        (*cinfo->err->format_message)(cinfo, e->msg);
        e->status = STK_E_DECODE;
    }
    longjmp(e->jb, 1);
}

static void on_emit_message(j_common_ptr cinfo, int level)
{
    stk__jerr *e = (stk__jerr *)cinfo->err;
    if (level >= 0)
        return; /* trace messages */
    e->warnings++;
    e->pub.num_warnings++;
    if (e->pub.msg_code == JWRN_JPEG_EOF) {
        (*cinfo->err->format_message)(cinfo, e->msg);
        e->status = STK_E_TRUNCATED;
        longjmp(e->jb, 1);
    }
    if (e->strict) {
        (*cinfo->err->format_message)(cinfo, e->msg);
        e->status = STK_E_DECODE;
        longjmp(e->jb, 1);
    }
    if (e->warnings == 1)
        (*cinfo->err->format_message)(cinfo, e->first_warning);
}

static void on_output_message(j_common_ptr cinfo) { STK__UNUSED(cinfo); }

static void on_progress(j_common_ptr cinfo)
{
    j_decompress_ptr di = (j_decompress_ptr)cinfo;
    if (di->progressive_mode && di->input_scan_number > STK__MAX_SCANS) {
        ((stk__jerr *)cinfo->err)->scan_limit = 1;
        (*cinfo->err->error_exit)(cinfo);
    }
}

/* Call FN(D, ARG) with the error manager armed. On a libjpeg failure the decompressor is reset
 * and the failure's status returned (the text is in d->jerr.msg). */
static int run(stk_decoder *d, int (*fn)(stk_decoder *, void *), void *arg)
{
    d->jerr.scan_limit = 0;
    d->jerr.status = 0;
    if (setjmp(d->jerr.jb)) {
        if (d->created)
            jpeg_abort_decompress(&d->cinfo);
        d->have_header = 0;
        return d->jerr.status ? d->jerr.status : STK_E_DECODE;
    }
    return fn(d, arg);
}

/* ---- the decoder ------------------------------------------------------------------------------ */

static void init_jerr(stk__jerr *e)
{
    memset(e, 0, sizeof *e);
    jpeg_std_error(&e->pub);
    e->pub.error_exit = on_error_exit;
    e->pub.emit_message = on_emit_message;
    e->pub.output_message = on_output_message;
}

static int create_body(stk_decoder *d, void *arg)
{
    STK__UNUSED(arg);
    jpeg_create_decompress(&d->cinfo);
    d->created = 1;
    return STK_OK;
}

int stk_decoder_create(stk_decoder **out)
{
    if (!out)
        return STK_E_INVALID;
    *out = NULL;
    stk_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return STK_E_NOMEM;
    init_jerr(&d->jerr);
    d->cinfo.err = &d->jerr.pub;
    int rc = run(d, create_body, NULL);
    if (rc != STK_OK) { /* only out of memory can fail here */
        free(d);
        return STK_E_NOMEM;
    }
    d->progress.progress_monitor = on_progress;
    d->cinfo.progress = &d->progress;
    *out = d;
    return STK_OK;
}

void stk_decoder_destroy(stk_decoder *d)
{
    if (!d)
        return;
    jpeg_destroy_decompress(&d->cinfo);
    free(d->buf);
    free(d->row);
    free(d);
}

const char *stk_decoder_last_error(const stk_decoder *d) { return d ? d->err : "no decoder"; }

/* Checks that need no libjpeg: empty, not a JPEG (naming what it looks like instead). */
static int precheck(const uint8_t *p, size_t len, char *err)
{
    if (len == 0 || !p)
        return stk__err(err, STK_E_EMPTY, "empty (0 bytes)");
    if (len >= 2 && p[0] == 0xFF && p[1] == 0xD8)
        return STK_OK;
    if (len == 1 && p[0] == 0xFF)
        return stk__err(err, STK_E_TRUNCATED, "truncated: 1 byte, start of a JPEG SOI marker");
    const char *what = NULL;
    if (len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
        what = "a PNG image";
    else if (len >= 6 && (memcmp(p, "GIF87a", 6) == 0 || memcmp(p, "GIF89a", 6) == 0))
        what = "a GIF image";
    else if (len >= 2 && p[0] == 'B' && p[1] == 'M')
        what = "a BMP image";
    else if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        what = "a WebP image";
    else if (len >= 4 && (memcmp(p, "II*\0", 4) == 0 || memcmp(p, "MM\0*", 4) == 0))
        what = "a TIFF image";
    if (what)
        return stk__err(err, STK_E_NOT_JPEG, "not a JPEG: %s (%zu bytes)", what, len);
    return stk__err(err, STK_E_NOT_JPEG, "not a JPEG: no SOI marker (starts %02x %02x, %zu bytes)",
                    p[0], len >= 2 ? p[1] : 0, len);
}

typedef struct header_args {
    const uint8_t *data;
    size_t len;
    int64_t max_pixels;
} header_args;

static int header_body(stk_decoder *d, void *arg)
{
    header_args *a = arg;
    jpeg_mem_src(&d->cinfo, a->data, (unsigned long)a->len);
    jpeg_read_header(&d->cinfo, TRUE);
    d->width = (int)d->cinfo.image_width;
    d->height = (int)d->cinfo.image_height;
    d->comps = d->cinfo.num_components;
    if (d->width <= 0 || d->height <= 0) {
        snprintf(d->jerr.msg, sizeof d->jerr.msg, "bad image size %dx%d", d->width, d->height);
        return STK_E_DECODE;
    }
    int64_t px = (int64_t)d->width * d->height;
    if (px > a->max_pixels) {
        snprintf(d->jerr.msg, sizeof d->jerr.msg, "%dx%d = %lld pixels exceeds the limit of %lld",
                 d->width, d->height, (long long)px, (long long)a->max_pixels);
        return STK_E_TOO_LARGE;
    }
    return STK_OK;
}

static int fail_text(stk_decoder *d, int rc, char *err)
{
    switch (rc) {
    case STK_E_TRUNCATED:
        return stk__err(err, rc, "truncated: %s", d->jerr.msg);
    case STK_E_TOO_LARGE:
        return stk__err(err, rc, "too large: %s", d->jerr.msg);
    default:
        return stk__err(err, rc, "cannot decode: %s", d->jerr.msg);
    }
}

/*
 * libjpeg keeps the quantization and Huffman tables in the decompressor from one image to the
 * next (for abbreviated datastreams), so an image that lacks a DQT/DHT for a table it uses would
 * be decoded with the previous image's table: the result would depend on what the worker decoded
 * before (found by tests/fuzz/fuzz_decode; regress/decode/stale-huffman-table-*). Before the
 * headers are read every table present is marked (quantval[0] = 0: a DQT rewrites all 64
 * values; bits[0] = 1: a DHT rewrites bits[0] with 0). If a marked table is still there after the
 * headers, the decompressor is re-created and the headers read again, so every image is decoded
 * as by a fresh decoder. Re-creating costs microseconds and happens only after a table was
 * left unused (e.g. a gray image after a colour one, or progressive images' later-scan tables).
 */
static void mark_tables(j_decompress_ptr c)
{
    for (int i = 0; i < NUM_QUANT_TBLS; i++)
        if (c->quant_tbl_ptrs[i])
            c->quant_tbl_ptrs[i]->quantval[0] = 0;
    for (int i = 0; i < NUM_HUFF_TBLS; i++) {
        if (c->dc_huff_tbl_ptrs[i])
            c->dc_huff_tbl_ptrs[i]->bits[0] = 1;
        if (c->ac_huff_tbl_ptrs[i])
            c->ac_huff_tbl_ptrs[i]->bits[0] = 1;
    }
}

static int stale_tables(j_decompress_ptr c)
{
    for (int i = 0; i < NUM_QUANT_TBLS; i++)
        if (c->quant_tbl_ptrs[i] && c->quant_tbl_ptrs[i]->quantval[0] == 0)
            return 1;
    for (int i = 0; i < NUM_HUFF_TBLS; i++)
        if ((c->dc_huff_tbl_ptrs[i] && c->dc_huff_tbl_ptrs[i]->bits[0]) ||
            (c->ac_huff_tbl_ptrs[i] && c->ac_huff_tbl_ptrs[i]->bits[0]))
            return 1;
    return 0;
}

/* A fresh libjpeg decompressor in D (the old one destroyed). STK_E_NOMEM leaves none (mem NULL);
 * the next stk__dec_header tries again. */
static int recreate(stk_decoder *d)
{
    jpeg_destroy_decompress(&d->cinfo);
    d->created = 0;
    d->cinfo.err = &d->jerr.pub;
    if (run(d, create_body, NULL) != STK_OK)
        return STK_E_NOMEM;
    d->cinfo.progress = &d->progress;
    return STK_OK;
}

int stk__dec_header(stk_decoder *d, const uint8_t *data, size_t len, int64_t max_pixels, int *w,
                    int *h, int *comps, char *err)
{
    if (!d->cinfo.mem && recreate(d) != STK_OK)
        return stk__err(err, STK_E_NOMEM, "out of memory (libjpeg decompressor)");
    jpeg_abort_decompress(&d->cinfo); /* whatever the previous call left */
    d->have_header = 0;
    d->jerr.warnings = 0;
    d->jerr.pub.num_warnings = 0;
    d->jerr.first_warning[0] = 0;
    d->jerr.msg[0] = 0;
    d->jerr.strict = 0;
    int rc = precheck(data, len, err);
    if (rc != STK_OK)
        return rc;
    header_args a = {data, len, max_pixels > 0 ? max_pixels : 89478485};
    mark_tables(&d->cinfo);
    rc = run(d, header_body, &a);
    if (rc == STK_OK && stale_tables(&d->cinfo)) {
        if (recreate(d) != STK_OK)
            return stk__err(err, STK_E_NOMEM, "out of memory (libjpeg decompressor)");
        d->jerr.warnings = 0; /* the headers' warnings are counted again */
        d->jerr.pub.num_warnings = 0;
        d->jerr.first_warning[0] = 0;
        rc = run(d, header_body, &a);
    }
    if (rc != STK_OK) {
        jpeg_abort_decompress(&d->cinfo);
        return fail_text(d, rc, err);
    }
    d->have_header = 1;
    if (w)
        *w = d->width;
    if (h)
        *h = d->height;
    if (comps)
        *comps = d->comps;
    return STK_OK;
}

int stk__scaled(int n, int m) { return (int)(((int64_t)n * m + 7) / 8); }

typedef struct window_args {
    int m, sx, sy, sw, sh;
    const uint8_t *px;
    size_t stride;
    stk__rows_fn fn; /* strips of 8 rows to FN instead of the whole window into the buffer */
    void *user;
} window_args;

static int grow(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return STK_OK;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *q = calloc(1, n); /* zeroed: the resize may read (and weigh by 0) the slack */
    if (!q)
        return STK_E_NOMEM;
    free(*p);
    *p = q;
    *cap = n;
    return STK_OK;
}

/* Pillow's MULDIV255 (Convert.c). */
/*
 * CMYK / YCCK: decoded as JCS_CMYK (libjpeg turns YCCK into CMYK) and converted to RGB exactly
 * as Pillow's Image.open(f).convert('RGB') does: Pillow always treats 4-component JPEGs as
 * Adobe's inverted CMYK (rawmode "CMYK;I", whether or not the APP14 marker is present), then
 * r = nk - nk*c/255 with nk = 255 - k in its rounding (MULDIV255). Grayscale becomes R=G=B.
 */
static inline int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, int n)
{
    for (int x = 0; x < n; x++, in += 4, out += 3) {
        /* Pillow inverts (rawmode CMYK;I), then r = nk - muldiv255(c, nk) with nk = 255 - k */
        int nk = in[3];
        int r = nk - muldiv255(255 - in[0], nk);
        int g = nk - muldiv255(255 - in[1], nk);
        int b = nk - muldiv255(255 - in[2], nk);
        out[0] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
        out[1] = (uint8_t)(g < 0 ? 0 : g > 255 ? 255 : g);
        out[2] = (uint8_t)(b < 0 ? 0 : b > 255 ? 255 : b);
    }
}

/*
 * Crop window (docs/ARCHITECTURE.md, "Decode and augment"): jpeg_crop_scanline() rounds the
 * left edge down to an iMCU boundary and widens the window; with fancy chroma upsampling the window's outermost columns
 * are then computed without their neighbours and differ from a full decode. We ask for one
 * extra column on each side (where the image has one) and drop it, which makes the window
 * bit-identical to "decode everything, then crop" at every scale (tests/test_decode.c checks it
 * for every subsampling, progressive and restart-marker images). jpeg_skip_scanlines() keeps the
 * upsampler's context rows, so rows need no such margin (checked by the same test).
 *
 * A crop-window decode reads only the rows it needs: rows below the window are never entropy
 * decoded, so a record truncated below the window decodes fine for that window (the full decode
 * reports STK_E_TRUNCATED). The result for a record is still a pure function of its bytes and
 * its crop. A strict decode whose window reaches the last row also reads the markers up to EOI
 * (jpeg_finish_decompress), where libjpeg notices junk after the last scan.
 *
 * Memory: the decoder's output buffer grows only when a bigger window comes; libjpeg's own
 * working memory is allocated by its pool allocator per image and freed by jpeg_abort.
 * stk__dec_window_rows hands the window over in strips of 8 rows instead, through a buffer of 8
 * rows that stays in L1 (the resize's horizontal pass runs on each strip as it comes).
 */
static int window_body(stk_decoder *d, void *arg)
{
    window_args *a = arg;
    struct jpeg_decompress_struct *ci = &d->cinfo;
    int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    ci->scale_num = (unsigned)a->m;
    ci->scale_denom = 8;
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    ci->quantize_colors = FALSE;
    jpeg_start_decompress(ci);
    int ow = (int)ci->output_width, oh = (int)ci->output_height;
    if (a->sx < 0 || a->sy < 0 || a->sw <= 0 || a->sh <= 0 || a->sx + a->sw > ow ||
        a->sy + a->sh > oh) {
        snprintf(d->jerr.msg, sizeof d->jerr.msg,
                 "window %d,%d %dx%d outside the %dx%d image at scale %d/8", a->sx, a->sy, a->sw,
                 a->sh, ow, oh, a->m);
        jpeg_abort_decompress(ci);
        return STK_E_INVALID;
    }
    /* one extra column each side (where there is one), then let libjpeg round to iMCUs */
    int xl = a->sx > 0 ? a->sx - 1 : 0;
    int xr = a->sx + a->sw < ow ? a->sx + a->sw + 1 : ow;
    /* very narrow crops (a chroma row of one sample) come out wrong from libjpeg-turbo 2.1's
     * upsampler; never ask for fewer than 32 columns */
    if (xr - xl < 32) {
        xr = STK__MIN(ow, xl + 32);
        xl = STK__MAX(0, xr - 32);
    }
    JDIMENSION xoff = 0, xw = (JDIMENSION)ow;
    if (xl > 0 || xr < ow) {
        xoff = (JDIMENSION)xl;
        xw = (JDIMENSION)(xr - xl);
        jpeg_crop_scanline(ci, &xoff, &xw);
    }
    size_t stride = (size_t)xw * 3;
    int nbuf = a->fn ? STK__MIN(a->sh, 8) : a->sh; /* rows the buffer holds */
    if (grow(&d->buf, &d->buf_cap, stride * (size_t)nbuf + 64) != STK_OK ||
        (cmyk && grow(&d->row, &d->row_cap, (size_t)xw * 4 + 64) != STK_OK)) {
        snprintf(d->jerr.msg, sizeof d->jerr.msg, "out of memory for a %ux%d window", xw, a->sh);
        jpeg_abort_decompress(ci);
        return STK_E_NOMEM;
    }
    if (a->sy > 0) {
        JDIMENSION skipped = jpeg_skip_scanlines(ci, (JDIMENSION)a->sy);
        if (skipped != (JDIMENSION)a->sy) {
            snprintf(d->jerr.msg, sizeof d->jerr.msg, "skipped %u of %d rows", skipped, a->sy);
            jpeg_abort_decompress(ci);
            return STK_E_DECODE;
        }
    }
    const uint8_t *px = d->buf + (size_t)(a->sx - (int)xoff) * 3;
    int y = 0;
    while (y < a->sh) {
        JSAMPROW rows[8];
        int b = a->fn ? y % 8 : y; /* buffer row of window row y */
        int n = STK__MIN(a->sh - y, a->fn ? 8 - y % 8 : 8);
        if (cmyk) {
            rows[0] = d->row;
            n = 1;
        } else {
            for (int i = 0; i < n; i++)
                rows[i] = d->buf + (size_t)(b + i) * stride;
        }
        JDIMENSION got = jpeg_read_scanlines(ci, rows, (JDIMENSION)n);
        if (got == 0) {
            snprintf(d->jerr.msg, sizeof d->jerr.msg, "no rows returned at row %d", a->sy + y);
            jpeg_abort_decompress(ci);
            return STK_E_DECODE;
        }
        if (cmyk)
            cmyk_to_rgb(d->row, d->buf + (size_t)b * stride, (int)xw);
        y += (int)got;
        if (a->fn && (y % 8 == 0 || y == a->sh))
            a->fn(a->user, px, stride, (y - 1) / 8 * 8, (y - 1) % 8 + 1);
    }
    /* strict, and the window reaches the last row: read on to EOI as pack's check does
     * (stk__dec_verify), so bytes between the last scan and EOI ("N extraneous bytes before
     * marker 0xd9") fail here too and a full strict decode (stoker verify --decode) gives pack's
     * verdict */
    if (d->jerr.strict && a->sy + a->sh == oh)
        jpeg_finish_decompress(ci);
    jpeg_abort_decompress(ci);
    a->px = a->fn ? NULL : px;
    a->stride = stride;
    return STK_OK;
}

static int dec_window(stk_decoder *d, int m, int sx, int sy, int sw, int sh, int strict, stk__rows_fn fn,
                      void *user, const uint8_t **px, size_t *stride, int *warnings, char *err)
{
    if (!d->have_header)
        return stk__err(err, STK_E_STATE, "decode window without a header");
    if (m != 1 && m != 2 && m != 4 && m != 8) {
        jpeg_abort_decompress(&d->cinfo);
        d->have_header = 0;
        return stk__err(err, STK_E_INVALID, "scale %d/8: must be 1, 2, 4 or 8", m);
    }
    d->jerr.strict = strict;
    if (strict && d->jerr.warnings > 0) { /* a warning while reading the headers */
        jpeg_abort_decompress(&d->cinfo);
        d->have_header = 0;
        if (warnings)
            *warnings = d->jerr.warnings;
        return stk__err(err, STK_E_DECODE, "cannot decode (strict): %s", d->jerr.first_warning);
    }
    window_args a = {m, sx, sy, sw, sh, NULL, 0, fn, user};
    int rc = run(d, window_body, &a);
    d->have_header = 0;
    if (warnings)
        *warnings = d->jerr.warnings;
    if (rc == STK_E_INVALID || rc == STK_E_NOMEM)
        return stk__err(err, rc, "%s", d->jerr.msg);
    if (rc != STK_OK)
        return fail_text(d, rc, err);
    *px = a.px;
    *stride = a.stride;
    return STK_OK;
}

int stk__dec_window(stk_decoder *d, int m, int sx, int sy, int sw, int sh, int strict,
                    const uint8_t **px, size_t *stride, int *warnings, char *err)
{
    return dec_window(d, m, sx, sy, sw, sh, strict, NULL, NULL, px, stride, warnings, err);
}

int stk__dec_window_rows(stk_decoder *d, int m, int sx, int sy, int sw, int sh, int strict, stk__rows_fn fn,
                         void *user, int *warnings, char *err)
{
    const uint8_t *px;
    size_t stride;
    return dec_window(d, m, sx, sy, sw, sh, strict, fn, user, &px, &stride, warnings, err);
}

const char *stk__dec_first_warning(const stk_decoder *d) { return d->jerr.first_warning; }

int stk__dec_multiscan(const stk_decoder *d)
{
    return d->have_header && (d->cinfo.progressive_mode || d->cinfo.comps_in_scan < d->cinfo.num_components);
}

/*
 * Verification (stoker pack stores only what decodes): every scan entropy-decoded to its end,
 * then the markers read up to EOI (jpeg_finish_decompress), so that data ending early, corrupt
 * entropy data and bytes between the last scan and EOI ("N extraneous bytes before marker 0xd9")
 * all show as libjpeg warnings, each one fatal here. The Huffman decode, where damage shows, is
 * the full one whatever the scale; at 1/8 each block costs its DC term instead of an IDCT, and
 * without fancy upsampling the colour work is a few pixels per MCU.
 */
static int verify_body(stk_decoder *d, void *arg)
{
    STK__UNUSED(arg);
    struct jpeg_decompress_struct *ci = &d->cinfo;
    ci->scale_num = 1;
    ci->scale_denom = 8;
    ci->dct_method = JDCT_IFAST;
    ci->do_fancy_upsampling = FALSE;
    ci->do_block_smoothing = FALSE;
    ci->quantize_colors = FALSE;
    jpeg_start_decompress(ci);
    size_t row = (size_t)ci->output_width * (size_t)ci->output_components;
    int nrows = STK__MIN(STK__MAX(ci->rec_outbuf_height, 1), 16);
    if (grow(&d->row, &d->row_cap, row * (size_t)nrows + 64) != STK_OK) {
        snprintf(d->jerr.msg, sizeof d->jerr.msg, "out of memory for %d rows of %zu bytes", nrows, row);
        jpeg_abort_decompress(ci);
        return STK_E_NOMEM;
    }
    JSAMPROW rows[16];
    for (int i = 0; i < nrows; i++)
        rows[i] = d->row + (size_t)i * row;
    while (ci->output_scanline < ci->output_height) {
        if (jpeg_read_scanlines(ci, rows, (JDIMENSION)nrows) == 0) {
            snprintf(d->jerr.msg, sizeof d->jerr.msg, "no rows returned at row %u", ci->output_scanline);
            jpeg_abort_decompress(ci);
            return STK_E_DECODE;
        }
    }
    jpeg_finish_decompress(ci);
    return STK_OK;
}

int stk__dec_verify(stk_decoder *d, const uint8_t *data, size_t len, int64_t max_pixels, char *err)
{
    int rc = stk__dec_header(d, data, len, max_pixels, NULL, NULL, NULL, err);
    if (rc != STK_OK)
        return rc;
    d->have_header = 0;
    if (d->jerr.warnings > 0) { /* a warning while reading the headers */
        jpeg_abort_decompress(&d->cinfo);
        return stk__err(err, STK_E_DECODE, "cannot decode: %s", d->jerr.first_warning);
    }
    d->jerr.strict = 1;
    rc = run(d, verify_body, NULL);
    d->jerr.strict = 0;
    if (rc == STK_E_NOMEM)
        return stk__err(err, rc, "%s", d->jerr.msg);
    return rc != STK_OK ? fail_text(d, rc, err) : STK_OK;
}

/* ---- public ----------------------------------------------------------------------------------- */

static int decode_with(stk_decoder *d, const void *data, size_t len, const stk_decode_args *args,
                       uint8_t *out, size_t cap, int *out_w, int *out_h, int *warnings)
{
    stk_decode_args z = {0};
    const stk_decode_args *a = args ? args : &z;
    if (warnings)
        *warnings = 0;
    int m = a->scale_num ? a->scale_num : 8;
    if (m != 1 && m != 2 && m != 4 && m != 8)
        return stk__err(d->err, STK_E_INVALID, "scale_num %d: must be 1, 2, 4 or 8 (or 0)", a->scale_num);
    if (a->max_pixels < 0)
        return stk__err(d->err, STK_E_INVALID, "max_pixels %lld < 0", (long long)a->max_pixels);
    int w, h;
    int rc = stk__dec_header(d, data, len, a->max_pixels, &w, &h, NULL, d->err);
    if (rc != STK_OK)
        return rc;
    int cx = 0, cy = 0, cw = w, ch = h;
    if (a->crop_w != 0) {
        cx = a->crop_x, cy = a->crop_y, cw = a->crop_w, ch = a->crop_h;
        if (cx < 0 || cy < 0 || cw <= 0 || ch <= 0 || cx > w - cw || cy > h - ch) {
            jpeg_abort_decompress(&d->cinfo);
            d->have_header = 0;
            return stk__err(d->err, STK_E_INVALID, "crop %d,%d %dx%d outside the %dx%d image", cx,
                            cy, cw, ch, w, h);
        }
    }
    int sx = (int)((int64_t)cx * m / 8), sy = (int)((int64_t)cy * m / 8);
    int sw = stk__scaled(cw, m), sh = stk__scaled(ch, m);
    if (out_w)
        *out_w = sw;
    if (out_h)
        *out_h = sh;
    size_t need = (size_t)sw * (size_t)sh * 3;
    if (!out || cap < need) {
        jpeg_abort_decompress(&d->cinfo);
        d->have_header = 0;
        return stk__err(d->err, STK_E_RANGE, "output buffer of %zu bytes; %dx%dx3 = %zu needed",
                        cap, sw, sh, need);
    }
    const uint8_t *px = NULL;
    size_t stride = 0;
    rc = stk__dec_window(d, m, sx, sy, sw, sh, a->strict, &px, &stride, warnings, d->err);
    if (rc != STK_OK)
        return rc;
    for (int y = 0; y < sh; y++)
        memcpy(out + (size_t)y * sw * 3, px + (size_t)y * stride, (size_t)sw * 3);
    return STK_OK;
}

int stk_decode(stk_decoder *d, const void *data, size_t len, const stk_decode_args *args,
               uint8_t *out, size_t cap, int *out_w, int *out_h, int *warnings)
{
    if (d)
        return decode_with(d, data, len, args, out, cap, out_w, out_h, warnings);
    stk_decoder *t;
    int rc = stk_decoder_create(&t);
    if (rc != STK_OK)
        return rc;
    rc = decode_with(t, data, len, args, out, cap, out_w, out_h, warnings);
    stk_decoder_destroy(t);
    return rc;
}

int stk_image_info(const void *data, size_t len, int *width, int *height, int *components)
{
    stk_decoder *d;
    int rc = stk_decoder_create(&d);
    if (rc != STK_OK)
        return rc;
    rc = stk__dec_header(d, data, len, INT64_MAX, width, height, components, d->err);
    stk_decoder_destroy(d);
    return rc;
}
