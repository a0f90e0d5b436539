/* SPDX-License-Identifier: MIT */
/*
 * image_in.c — non-JPEG sources to RGB8 with Debian's image libraries, matching what
 * torchvision's ImageFolder loader (Pillow: Image.open(f).convert("RGB")) gives, so that a packed
 * dataset holds the pixels a Pillow pipeline would have seen.
 *
 * The decoders: libpng (the reference PNG library), libwebp with its demux part (the anim
 * decoder, as Pillow uses, also for still files: same pixels under transparent areas, first frame
 * of an animation), giflib (first frame on a canvas filled with the transparent index, else 0, as
 * Pillow 9 does), libtiff (8/16-bit RGB and gray strips by scanline, so alpha is dropped and not
 * premultiplied; everything else — palette, CMYK, YCbCr, tiles, bilevel — through its RGBA
 * interface), stb_image for BMP (Debian's libstb; only BMP is handed to it). Binary PPM/PGM is a
 * header and raw samples, read here with Pillow's maxval scaling (docs/FORMAT.md says why not
 * stb). Pillow's conversions, checked with Pillow 9.4 (tests/python/test_pack_formats.py):
 * alpha dropped, palette expanded (transparency ignored), gray replicated, 16-bit RGB(A)/LA
 * reduced to the high byte, 16-bit gray (mode I) clamped to 255.
 */
#include "image_in.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef STK_HAVE_PNG
#include <png.h>
#endif
#ifdef STK_HAVE_WEBP
#include <webp/decode.h>
#include <webp/demux.h>
#endif
#ifdef STK_HAVE_GIF
#include <gif_lib.h>
#endif
#ifdef STK_HAVE_TIFF
#include <tiffio.h>
#endif
#ifdef STK_HAVE_STB
#include <stb_image.h>
#endif

#define SLACK 64

int stk__img_sniff(const uint8_t *p, size_t n)
{
    if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
        return STK__IMG_JPEG;
    if (n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
        return STK__IMG_PNG;
    if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
        return STK__IMG_WEBP;
    if (n >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
        return STK__IMG_GIF;
    if (n >= 14 && p[0] == 'B' && p[1] == 'M')
        return STK__IMG_BMP;
    if (n >= 4 && (!memcmp(p, "II*\0", 4) || !memcmp(p, "MM\0*", 4) || !memcmp(p, "II+\0", 4) ||
                   !memcmp(p, "MM\0+", 4)))
        return STK__IMG_TIFF;
    if (n >= 3 && p[0] == 'P' && (p[1] == '5' || p[1] == '6') &&
        (p[2] == ' ' || p[2] == '\n' || p[2] == '\r' || p[2] == '\t' || p[2] == '#'))
        return STK__IMG_PNM;
    return STK__IMG_UNKNOWN;
}

const char *stk__img_kind_name(int kind)
{
    switch (kind) {
    case STK__IMG_JPEG: return "JPEG";
    case STK__IMG_PNG: return "PNG";
    case STK__IMG_WEBP: return "WebP";
    case STK__IMG_GIF: return "GIF";
    case STK__IMG_BMP: return "BMP";
    case STK__IMG_TIFF: return "TIFF";
    case STK__IMG_PNM: return "PPM/PGM";
    default: return "unknown";
    }
}

int stk__img_can_decode(int kind)
{
    switch (kind) {
    case STK__IMG_JPEG: return 1;
#ifdef STK_HAVE_PNG
    case STK__IMG_PNG: return 1;
#endif
#ifdef STK_HAVE_WEBP
    case STK__IMG_WEBP: return 1;
#endif
#ifdef STK_HAVE_GIF
    case STK__IMG_GIF: return 1;
#endif
#ifdef STK_HAVE_TIFF
    case STK__IMG_TIFF: return 1;
#endif
#ifdef STK_HAVE_STB
    case STK__IMG_BMP: return 1;
#endif
    case STK__IMG_PNM: return 1; /* read here (decode_pnm) */
    default: return 0;
    }
}

/* the Debian package that brings each decoder */
static const char *kind_package(int kind)
{
    switch (kind) {
    case STK__IMG_PNG: return "libpng-dev";
    case STK__IMG_WEBP: return "libwebp-dev";
    case STK__IMG_GIF: return "libgif-dev";
    case STK__IMG_TIFF: return "libtiff-dev";
    case STK__IMG_BMP: return "libstb-dev";
    default: return "?";
    }
}

void stk__img_describe_unknown(const uint8_t *p, size_t n, char *buf, size_t cap)
{
    if (n >= 12 && !memcmp(p + 4, "ftyp", 4)) {
        if (!memcmp(p + 8, "avif", 4) || !memcmp(p + 8, "avis", 4))
            snprintf(buf, cap, "AVIF");
        else if (!memcmp(p + 8, "heic", 4) || !memcmp(p + 8, "heix", 4) || !memcmp(p + 8, "mif1", 4) ||
                 !memcmp(p + 8, "msf1", 4))
            snprintf(buf, cap, "HEIF");
        else
            snprintf(buf, cap, "an ISO media file (ftyp %.4s)", (const char *)p + 8);
    } else if (n >= 12 && !memcmp(p, "\0\0\0\x0cjP  \r\n\x87\n", 12 < n ? 12 : n)) {
        snprintf(buf, cap, "JPEG 2000");
    } else if (n >= 4 && !memcmp(p, "\xff\x4f\xff\x51", 4)) {
        snprintf(buf, cap, "JPEG 2000 codestream");
    } else if (n >= 2 && ((p[0] == 0xFF && p[1] == 0x0A) || (n >= 12 && !memcmp(p, "\0\0\0\x0cJXL \r\n\x87\n", 12)))) {
        snprintf(buf, cap, "JPEG XL");
    } else if (n >= 4 && !memcmp(p, "\0\0\1\0", 4)) {
        snprintf(buf, cap, "ICO");
    } else if (n >= 4 && !memcmp(p, "8BPS", 4)) {
        snprintf(buf, cap, "PSD");
    } else if (n >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '4') {
        snprintf(buf, cap, "ASCII or bitmap PNM (P%c)", p[1]);
    } else if (n >= 2 && p[0] == 0xFF && p[1] == 0xD8) {
        snprintf(buf, cap, "FF D8 not followed by a marker");
    } else {
        size_t text = 0, k = n < 64 ? n : 64;
        for (size_t i = 0; i < k; i++)
            text += (p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\n' || p[i] == '\r' || p[i] == '\t';
        if (k >= 4 && text == k)
            snprintf(buf, cap, "text (starts with \"%.*s\")", (int)(k < 12 ? k : 12), (const char *)p);
        else
            snprintf(buf, cap, "starts with %02X %02X %02X %02X", n > 0 ? p[0] : 0, n > 1 ? p[1] : 0,
                     n > 2 ? p[2] : 0, n > 3 ? p[3] : 0);
    }
}

/* ---- common (unused in a build without decoders) ----------------------------------------------- */

__attribute__((unused)) static int check_size(int kind, int64_t w, int64_t h, int64_t max_pixels, char *err)
{
    if (w <= 0 || h <= 0)
        return stk__err(err, STK_E_DECODE, "%s: bad image size %lldx%lld", stk__img_kind_name(kind),
                        (long long)w, (long long)h);
    if (w > 65535 * 4 || h > 65535 * 4 || w * h > max_pixels)
        return stk__err(err, STK_E_TOO_LARGE, "%s: %lldx%lld is over the pixel limit (%lld)",
                        stk__img_kind_name(kind), (long long)w, (long long)h, (long long)max_pixels);
    return STK_OK;
}

__attribute__((unused)) static uint8_t *alloc_rgb(int w, int h)
{
    size_t n = (size_t)w * (size_t)h * 3;
    uint8_t *p = malloc(n + SLACK);
    if (p)
        memset(p + n, 0, SLACK);
    return p;
}

/* One row of N pixels with CH channels of BYTES (1 or 2, big-endian when BE) to RGB8. 16-bit:
 * colour and gray+alpha keep the high byte; plain gray (CH 1) clamps to 255 (Pillow's I -> L). */
__attribute__((unused)) static void row_to_rgb(const uint8_t *in, int n, int ch, int bytes, int be, uint8_t *out)
{
    for (int x = 0; x < n; x++) {
        uint8_t v[4];
        for (int c = 0; c < ch && c < 4; c++) {
            const uint8_t *s = in + ((size_t)x * (size_t)ch + (size_t)c) * (size_t)bytes;
            if (bytes == 1) {
                v[c] = s[0];
            } else {
                unsigned u = be ? (unsigned)s[0] << 8 | s[1] : (unsigned)s[1] << 8 | s[0];
                v[c] = ch == 1 ? (uint8_t)(u > 255 ? 255 : u) : (uint8_t)(u >> 8);
            }
        }
        if (ch <= 2) {
            out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = v[0];
        } else {
            out[3 * x] = v[0];
            out[3 * x + 1] = v[1];
            out[3 * x + 2] = v[2];
        }
    }
}

/* ---- PNG (libpng) ---------------------------------------------------------------------------- */

#ifdef STK_HAVE_PNG
typedef struct png_src {
    const uint8_t *p;
    size_t len, off;
    char *err;
    int truncated;
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->off) {
        s->truncated = 1;
        png_error(png, "file ends early");
    }
    memcpy(out, s->p + s->off, n);
    s->off += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    if (s->err[0] == 0)
        snprintf(s->err, STK__ERRLEN, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static int decode_png(const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *pw, int *ph, char *err)
{
    char msg[STK__ERRLEN] = "";
    png_src src = {p, len, 0, msg, 0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    if (!png)
        return stk__err(err, STK_E_NOMEM, "PNG: out of memory");
    png_infop info = png_create_info_struct(png);
    /* volatile: changed after setjmp, read after a longjmp */
    uint8_t *volatile rgb = NULL, *volatile raw = NULL;
    png_bytep *volatile rows = NULL;
    volatile int rc = STK_OK;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return stk__err(err, STK_E_NOMEM, "PNG: out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        if (rc == STK_OK)
            rc = stk__err(err, src.truncated ? STK_E_TRUNCATED : STK_E_DECODE, "PNG: %s%s",
                          src.truncated ? "truncated: " : "", msg);
        goto out;
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, ilace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &ilace, NULL, NULL);
    if ((rc = check_size(STK__IMG_PNG, w, h, max_pixels, err)) != STK_OK)
        goto out;
    if (ctype == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && ctype != PNG_COLOR_TYPE_GRAY)
        png_set_strip_16(png); /* the high byte, as Pillow's RGB;16B / RGBA;16B / LA;16B */
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info), bytes = png_get_bit_depth(png, info) == 16 ? 2 : 1;
    size_t rowbytes = png_get_rowbytes(png, info);
    if (ch < 1 || ch > 4 || rowbytes < (size_t)w * (size_t)ch * (size_t)bytes) {
        rc = stk__err(err, STK_E_DECODE, "PNG: unexpected layout (%d channels, %zu bytes per row)", ch, rowbytes);
        goto out;
    }
    raw = malloc(rowbytes * h);
    rows = malloc(sizeof(png_bytep) * h);
    rgb = alloc_rgb((int)w, (int)h);
    if (!raw || !rows || !rgb) {
        rc = stk__err(err, STK_E_NOMEM, "PNG: out of memory for %ux%u", (unsigned)w, (unsigned)h);
        goto out;
    }
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = raw + rowbytes * y;
    png_read_image(png, rows);
    for (png_uint_32 y = 0; y < h; y++)
        row_to_rgb(rows[y], (int)w, ch, bytes, 1, rgb + (size_t)y * w * 3);
    *px = rgb;
    rgb = NULL;
    *pw = (int)w;
    *ph = (int)h;
out:
    png_destroy_read_struct(&png, &info, NULL);
    free(raw);
    free(rows);
    free(rgb);
    return rc;
}
#endif

/* ---- WebP (libwebp, the anim decoder as Pillow uses it) --------------------------------------- */

#ifdef STK_HAVE_WEBP
static const char *vp8_status(VP8StatusCode s)
{
    switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data";
    default: return "error";
    }
}

static int decode_webp(const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *pw, int *ph, char *err)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(p, len, &f);
    if (st != VP8_STATUS_OK)
        return stk__err(err, st == VP8_STATUS_NOT_ENOUGH_DATA ? STK_E_TRUNCATED : STK_E_DECODE, "WebP: %s%s",
                        st == VP8_STATUS_NOT_ENOUGH_DATA ? "truncated: " : "", vp8_status(st));
    int rc = check_size(STK__IMG_WEBP, f.width, f.height, max_pixels, err);
    if (rc)
        return rc;
    WebPAnimDecoderOptions o;
    if (!WebPAnimDecoderOptionsInit(&o))
        return stk__err(err, STK_E_UNSUPPORTED, "WebP: libwebpdemux version mismatch");
    o.color_mode = MODE_RGBA;
    o.use_threads = 0;
    WebPData data = {p, len};
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&data, &o);
    if (!dec)
        return stk__err(err, STK_E_DECODE, "WebP: cannot parse the container (truncated or corrupt)");
    WebPAnimInfo ai;
    uint8_t *frame = NULL;
    int ts = 0;
    if (!WebPAnimDecoderGetInfo(dec, &ai) || (rc = check_size(STK__IMG_WEBP, ai.canvas_width, ai.canvas_height,
                                                                max_pixels, err)) != STK_OK) {
        WebPAnimDecoderDelete(dec);
        return rc ? rc : stk__err(err, STK_E_DECODE, "WebP: no image information");
    }
    if (!WebPAnimDecoderGetNext(dec, &frame, &ts)) {
        WebPAnimDecoderDelete(dec);
        /* the headers parsed: the bitstream itself is damaged or cut */
        return stk__err(err, STK_E_DECODE, "WebP: cannot decode the first frame (corrupt or truncated)");
    }
    int w = (int)ai.canvas_width, h = (int)ai.canvas_height;
    uint8_t *rgb = alloc_rgb(w, h);
    if (!rgb) {
        WebPAnimDecoderDelete(dec);
        return stk__err(err, STK_E_NOMEM, "WebP: out of memory for %dx%d", w, h);
    }
    size_t n = (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++) {
        rgb[3 * i] = frame[4 * i];
        rgb[3 * i + 1] = frame[4 * i + 1];
        rgb[3 * i + 2] = frame[4 * i + 2];
    }
    WebPAnimDecoderDelete(dec);
    *px = rgb;
    *pw = w;
    *ph = h;
    return STK_OK;
}
#endif

/* ---- GIF (giflib): the first frame ------------------------------------------------------------ */

#ifdef STK_HAVE_GIF
typedef struct gif_src {
    const uint8_t *p;
    size_t len, off;
} gif_src;

static int gif_read_mem(GifFileType *g, GifByteType *out, int n)
{
    gif_src *s = g->UserData;
    size_t k = n < 0 ? 0 : (size_t)n;
    if (k > s->len - s->off)
        k = s->len - s->off;
    memcpy(out, s->p + s->off, k);
    s->off += k;
    return (int)k;
}

static int gif_fail(GifFileType *g, int code, char *err)
{
    int e = g ? g->Error : code;
    int trunc = e == D_GIF_ERR_READ_FAILED || e == D_GIF_ERR_EOF_TOO_SOON;
    const char *s = GifErrorString(e);
    return stk__err(err, trunc ? STK_E_TRUNCATED : STK_E_DECODE, "GIF: %s%s", trunc ? "truncated: " : "",
                    s ? s : "decode error");
}

/* An extension record: the transparent index of a graphics control block into *TRANSPARENT. */
static int gif_extension(GifFileType *g, int *transparent, char *err)
{
    int code;
    GifByteType *ext;
    if (DGifGetExtension(g, &code, &ext) == GIF_ERROR)
        return gif_fail(g, 0, err);
    if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4) {
        GraphicsControlBlock gcb;
        if (DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK)
            *transparent = gcb.TransparentColor;
    }
    while (ext)
        if (DGifGetExtensionNext(g, &ext) == GIF_ERROR)
            return gif_fail(g, 0, err);
    return STK_OK;
}

/* The frame just described (g->Image) as palette indices on a W x H canvas, as Pillow 9 does: a
 * canvas of the screen size filled with the transparent index (else 0), interlaced rows in
 * their four passes. *IDX is malloc'd. */
static int gif_frame(GifFileType *g, int W, int H, int64_t max_pixels, int transparent, uint8_t **idx, char *err)
{
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    GifImageDesc *d = &g->Image;
    if (d->Width <= 0 || d->Height <= 0 || (int64_t)d->Width * d->Height > max_pixels)
        return stk__err(err, STK_E_DECODE, "GIF: bad frame size %dx%d", d->Width, d->Height);
    uint8_t *line = malloc((size_t)d->Width);
    if (!(*idx = malloc((size_t)W * (size_t)H)) || !line) {
        free(line);
        return stk__err(err, STK_E_NOMEM, "GIF: out of memory");
    }
    memset(*idx, transparent >= 0 ? transparent : 0, (size_t)W * (size_t)H);
    int passes = d->Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; pass++) {
        for (int y = d->Interlace ? start[pass] : 0; y < d->Height; y += d->Interlace ? step[pass] : 1) {
            if (DGifGetLine(g, line, d->Width) == GIF_ERROR) {
                free(line);
                return gif_fail(g, 0, err);
            }
            int yy = d->Top + y;
            if (yy < 0 || yy >= H || d->Left >= W)
                continue;
            int n = STK__MIN(d->Width, W - d->Left);
            memcpy(*idx + (size_t)yy * (size_t)W + (size_t)d->Left, line, (size_t)n);
        }
    }
    free(line);
    return STK_OK;
}

/* Palette indices IDX (N of them) to RGB through colour table CM; without one Pillow reads the
 * indices as gray (mode L); an index past the table is black. */
static void gif_rgb(const uint8_t *idx, size_t n, const ColorMapObject *cm, uint8_t *rgb)
{
    for (size_t i = 0; i < n; i++) {
        int k = idx[i];
        if (!cm) {
            rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = (uint8_t)k;
        } else if (k < cm->ColorCount) {
            rgb[3 * i] = cm->Colors[k].Red;
            rgb[3 * i + 1] = cm->Colors[k].Green;
            rgb[3 * i + 2] = cm->Colors[k].Blue;
        } else {
            rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = 0;
        }
    }
}

static int decode_gif(const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *pw, int *ph, char *err)
{
    gif_src src = {p, len, 0};
    int e = 0, rc = STK_OK, transparent = -1;
    GifFileType *g = DGifOpen(&src, gif_read_mem, &e);
    if (!g)
        return gif_fail(NULL, e, err);
    uint8_t *idx = NULL, *rgb = NULL;
    int W = g->SWidth, H = g->SHeight;
    GifRecordType t = UNDEFINED_RECORD_TYPE;
    rc = check_size(STK__IMG_GIF, W, H, max_pixels, err);
    while (rc == STK_OK && t != IMAGE_DESC_RECORD_TYPE) { /* the records up to the first frame */
        if (DGifGetRecordType(g, &t) == GIF_ERROR)
            rc = gif_fail(g, 0, err);
        else if (t == TERMINATE_RECORD_TYPE)
            rc = stk__err(err, STK_E_DECODE, "GIF: no image in the file");
        else if (t == EXTENSION_RECORD_TYPE)
            rc = gif_extension(g, &transparent, err);
        else if (t == IMAGE_DESC_RECORD_TYPE && DGifGetImageDesc(g) == GIF_ERROR)
            rc = gif_fail(g, 0, err);
    }
    if (rc == STK_OK)
        rc = gif_frame(g, W, H, max_pixels, transparent, &idx, err);
    if (rc == STK_OK && !(rgb = alloc_rgb(W, H)))
        rc = stk__err(err, STK_E_NOMEM, "GIF: out of memory");
    if (rc == STK_OK) {
        gif_rgb(idx, (size_t)W * (size_t)H, g->Image.ColorMap ? g->Image.ColorMap : g->SColorMap, rgb);
        *px = rgb;
        rgb = NULL;
        *pw = W;
        *ph = H;
    }
    DGifCloseFile(g, &e);
    free(idx);
    free(rgb);
    return rc;
}
#endif

/* ---- TIFF (libtiff) -------------------------------------------------------------------------- */

#ifdef STK_HAVE_TIFF
typedef struct tiff_src {
    const uint8_t *p;
    size_t len;
    toff_t off;
    char msg[STK__ERRLEN];
} tiff_src;

static tsize_t t_read(thandle_t h, tdata_t buf, tsize_t n)
{
    tiff_src *s = (tiff_src *)h;
    if (n < 0 || s->off >= s->len)
        return 0;
    size_t k = STK__MIN((size_t)n, s->len - (size_t)s->off);
    memcpy(buf, s->p + s->off, k);
    s->off += k;
    return (tsize_t)k;
}
static tsize_t t_write(thandle_t h, tdata_t b, tsize_t n) { (void)h; (void)b; (void)n; return -1; }
static toff_t t_seek(thandle_t h, toff_t off, int whence)
{
    tiff_src *s = (tiff_src *)h;
    uint64_t base = whence == SEEK_CUR ? s->off : whence == SEEK_END ? s->len : 0;
    s->off = base + off;
    return s->off;
}
static int t_close(thandle_t h) { (void)h; return 0; }
static toff_t t_size(thandle_t h) { return ((tiff_src *)h)->len; }
static int t_map(thandle_t h, tdata_t *base, toff_t *size)
{
    tiff_src *s = (tiff_src *)h;
    *base = (tdata_t)s->p;
    *size = s->len;
    return 1;
}
static void t_unmap(thandle_t h, tdata_t base, toff_t size) { (void)h; (void)base; (void)size; }

static int t_on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static int t_on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    tiff_src *s = user;
    if (s->msg[0] == 0) {
        int n = snprintf(s->msg, sizeof s->msg, "%s: ", module ? module : "libtiff");
        if (n > 0 && (size_t)n < sizeof s->msg)
            vsnprintf(s->msg + n, sizeof s->msg - (size_t)n, fmt, ap);
    }
    return 1;
}
static int t_on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1;
}

static int tiff_fail(tiff_src *s, char *err, const char *what)
{
    int trunc = strstr(s->msg, "Read error") || strstr(s->msg, "read error") || strstr(s->msg, "Unexpected EOF") ||
                strstr(s->msg, "end of file") || strstr(s->msg, "EOF");
    return stk__err(err, trunc ? STK_E_TRUNCATED : STK_E_DECODE, "TIFF: %s%s%s%s", trunc ? "truncated: " : "",
                    what, s->msg[0] ? ": " : "", s->msg);
}

static int decode_tiff(const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *pw, int *ph, char *err)
{
    tiff_src s = {p, len, 0, ""};
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts)
        return stk__err(err, STK_E_NOMEM, "TIFF: out of memory");
    TIFFOpenOptionsSetErrorHandlerExtR(opts, t_on_error, &s);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, t_on_warning, &s);
    TIFFOpenOptionsSetMaxSingleMemAlloc(opts, (tmsize_t)max_pixels * 8 + (64 << 20));
    TIFF *tif = TIFFClientOpenExt("tiff", "rm", (thandle_t)&s, t_read, t_write, t_seek, t_close, t_size, t_map,
                                  t_unmap, opts);
    TIFFOpenOptionsFree(opts);
    if (!tif)
        return tiff_fail(&s, err, "cannot open");
    int rc = STK_OK;
    uint8_t *rgb = NULL, *line = NULL;
    uint32_t *raster = NULL;
    uint32_t w = 0, h = 0;
    uint16_t bps = 1, spp = 1, photo = 0, planar = PLANARCONFIG_CONTIG, fmt = SAMPLEFORMAT_UINT;
    TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photo))
        photo = spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
    if ((rc = check_size(STK__IMG_TIFF, w, h, max_pixels, err)) != STK_OK)
        goto out;
    if (!(rgb = alloc_rgb((int)w, (int)h))) {
        rc = stk__err(err, STK_E_NOMEM, "TIFF: out of memory for %ux%u", w, h);
        goto out;
    }
    int colour = photo == PHOTOMETRIC_RGB && (spp == 3 || spp == 4);
    int gray = photo == PHOTOMETRIC_MINISBLACK && (spp == 1 || spp == 2);
    if ((colour || gray) && (bps == 8 || bps == 16) && planar == PLANARCONFIG_CONTIG && fmt == SAMPLEFORMAT_UINT &&
        !TIFFIsTiled(tif)) {
        /* scanlines: the samples as stored (alpha dropped, not premultiplied as the RGBA
         * interface would); 16-bit samples arrive in host order */
        tmsize_t sl = TIFFScanlineSize(tif);
        if (sl < (tmsize_t)((size_t)w * spp * (bps / 8)) || !(line = malloc((size_t)sl))) {
            rc = stk__err(err, sl > 0 ? STK_E_NOMEM : STK_E_DECODE, "TIFF: bad scanline size");
            goto out;
        }
        const uint16_t probe = 1;
        int be = *(const uint8_t *)&probe == 0;
        for (uint32_t y = 0; y < h; y++) {
            if (TIFFReadScanline(tif, line, y, 0) < 0) {
                rc = tiff_fail(&s, err, "cannot read a scanline");
                goto out;
            }
            row_to_rgb(line, (int)w, spp, bps / 8, be, rgb + (size_t)y * w * 3);
        }
    } else {
        char emsg[1024];
        if (!TIFFRGBAImageOK(tif, emsg)) {
            rc = stk__err(err, STK_E_UNSUPPORTED, "TIFF: %s", emsg);
            goto out;
        }
        if (!(raster = malloc((size_t)w * h * sizeof(uint32_t)))) {
            rc = stk__err(err, STK_E_NOMEM, "TIFF: out of memory for %ux%u", w, h);
            goto out;
        }
        if (!TIFFReadRGBAImageOriented(tif, w, h, raster, ORIENTATION_TOPLEFT, 1)) {
            rc = tiff_fail(&s, err, "cannot decode");
            goto out;
        }
        size_t n = (size_t)w * h;
        for (size_t i = 0; i < n; i++) {
            rgb[3 * i] = (uint8_t)TIFFGetR(raster[i]);
            rgb[3 * i + 1] = (uint8_t)TIFFGetG(raster[i]);
            rgb[3 * i + 2] = (uint8_t)TIFFGetB(raster[i]);
        }
    }
    *px = rgb;
    rgb = NULL;
    *pw = (int)w;
    *ph = (int)h;
out:
    TIFFClose(tif);
    free(rgb);
    free(line);
    free(raster);
    return rc;
}
#endif

/* ---- BMP, PPM/PGM (stb_image) ----------------------------------------------------------------- */

#ifdef STK_HAVE_STB
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* stb_image reads zeros past the end of its input instead of failing: the bytes an uncompressed
 * BMP must hold are checked here first (Pillow refuses such files as truncated). Returns -1 for
 * a header too short to read. */
static int bmp_expected(const uint8_t *p, size_t len, uint64_t *need)
{
    *need = 0;
    if (len < 30)
        return -1;
    uint32_t off = le32(p + 10), hdr = le32(p + 14);
    int64_t w, h;
    unsigned bpp, comp = 0;
    if (hdr == 12) { /* OS/2 */
        w = p[18] | p[19] << 8;
        h = p[20] | p[21] << 8;
        bpp = p[24] | (unsigned)p[25] << 8;
    } else {
        if (len < 34)
            return -1;
        w = (int32_t)le32(p + 18);
        h = (int32_t)le32(p + 22);
        bpp = p[28] | (unsigned)p[29] << 8;
        comp = le32(p + 30);
    }
    if (comp != 0 && comp != 3 && comp != 6)
        return 0; /* RLE and others: stb refuses them itself */
    if (h < 0)
        h = -h;
    *need = (uint64_t)off + (((uint64_t)w * bpp + 31) / 32) * 4 * (uint64_t)h;
    return 0;
}

static int decode_bmp(const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *pw, int *ph, char *err)
{
    uint64_t need;
    if (bmp_expected(p, len, &need) != 0)
        return stk__err(err, STK_E_DECODE, "BMP: bad header");
    if (len < need)
        return stk__err(err, STK_E_TRUNCATED, "BMP: truncated: %zu bytes, the pixels need %llu", len,
                        (unsigned long long)need);
    int w, h, comp;
    if (!stbi_info_from_memory(p, (int)len, &w, &h, &comp))
        return stk__err(err, STK_E_DECODE, "BMP: %s", stbi_failure_reason());
    int rc = check_size(STK__IMG_BMP, w, h, max_pixels, err);
    if (rc)
        return rc;
    uint8_t *d = stbi_load_from_memory(p, (int)len, &w, &h, &comp, 3);
    if (!d) {
        const char *why = stbi_failure_reason();
        return stk__err(err, STK_E_DECODE, "BMP: %s", why ? why : "decode error");
    }
    uint8_t *rgb = alloc_rgb(w, h);
    if (!rgb) {
        stbi_image_free(d);
        return stk__err(err, STK_E_NOMEM, "BMP: out of memory");
    }
    memcpy(rgb, d, (size_t)w * (size_t)h * 3);
    stbi_image_free(d);
    *px = rgb;
    *pw = w;
    *ph = h;
    return STK_OK;
}
#endif

/* ---- PPM/PGM --------------------------------------------------------------------------------- */

/* A binary PNM header: "P5"/"P6", width, height, maxval (white space and '#' comments to the line
 * end between them), one white-space byte, then the samples at OFF. */
typedef struct pnm_hdr {
    uint64_t w, h;
    unsigned maxval;
    size_t off;
    int gray;
} pnm_hdr;

static int pnm_header(const uint8_t *p, size_t len, pnm_hdr *hd)
{
    size_t i = 2;
    uint64_t v[3];
    for (int k = 0; k < 3; k++) {
        for (;;) {
            while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
                i++;
            if (i < len && p[i] == '#') {
                while (i < len && p[i] != '\n')
                    i++;
                continue;
            }
            break;
        }
        if (i >= len || p[i] < '0' || p[i] > '9')
            return -1;
        v[k] = 0;
        while (i < len && p[i] >= '0' && p[i] <= '9' && v[k] < (1u << 30))
            v[k] = v[k] * 10 + (uint64_t)(p[i++] - '0');
    }
    if (v[0] < 1 || v[1] < 1 || v[2] < 1 || v[2] > 65535)
        return -1; /* Pillow: "maxval must be greater than 0 and less than 65536" */
    *hd = (pnm_hdr){v[0], v[1], (unsigned)v[2], i + 1, p[1] == '5'};
    return 0;
}

/* Pillow 9.4's PpmDecoder: a sample of a file whose maxval is not 255 becomes
 * min(out_max, round(value / maxval * out_max)) in Python floats, round() taking ties to even
 * (nearbyint in the default rounding mode does the same on the same double). */
static unsigned pnm_scale(unsigned v, unsigned maxval, unsigned out_max)
{
    double x = nearbyint((double)v / (double)maxval * (double)out_max);
    return x > (double)out_max ? out_max : (unsigned)x;
}

/*
 * A binary PGM/PPM as Pillow opens and converts it to RGB: maxval 255 as stored; other 8-bit
 * maxvals scaled to 0..255; 16-bit (big-endian) PPM scaled to 0..255; 16-bit PGM opens as mode
 * I, scaled to 0..65535 (65535: as stored), and I -> RGB clamps at 255. The samples are read
 * here, not by stb_image: its PNM reader (Debian's 2022 version) returns them unscaled, 16-bit
 * ones byte-swapped on a little-endian machine, and with a channel conversion asked for reads
 * past its buffer — fuzz_image found the last, the comparison with Pillow the others.
 */
static int decode_pnm(const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *pw, int *ph, char *err)
{
    pnm_hdr hd;
    if (pnm_header(p, len, &hd) != 0)
        return stk__err(err, STK_E_DECODE, "PPM/PGM: bad header");
    int wide = hd.maxval > 255, chans = hd.gray ? 1 : 3;
    if (hd.w > INT32_MAX || hd.h > INT32_MAX)
        return stk__err(err, STK_E_TOO_LARGE, "PPM/PGM: %llux%llu pixels", (unsigned long long)hd.w,
                        (unsigned long long)hd.h);
    int rc = check_size(STK__IMG_PNM, (int)hd.w, (int)hd.h, max_pixels, err);
    if (rc)
        return rc;
    size_t n = (size_t)(hd.w * hd.h) * (size_t)chans;
    if (len - hd.off < n * (wide ? 2u : 1u) || hd.off > len)
        return stk__err(err, STK_E_TRUNCATED, "PPM/PGM: truncated: %zu bytes, the pixels need %llu", len,
                        (unsigned long long)(hd.off + n * (wide ? 2u : 1u)));
    uint8_t *rgb = alloc_rgb((int)hd.w, (int)hd.h);
    if (!rgb)
        return stk__err(err, STK_E_NOMEM, "PPM/PGM: out of memory");
    unsigned out_max = wide && hd.gray ? 65535 : 255;
    const uint8_t *q = p + hd.off;
    for (size_t i = 0; i < n; i++) {
        unsigned v = wide ? (unsigned)q[2 * i] << 8 | q[2 * i + 1] : q[i];
        if (hd.maxval != 255)
            v = pnm_scale(v, hd.maxval, out_max);
        uint8_t b = (uint8_t)(v > 255 ? 255 : v);
        if (hd.gray)
            rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = b;
        else
            rgb[i] = b;
    }
    *px = rgb;
    *pw = (int)hd.w;
    *ph = (int)hd.h;
    return STK_OK;
}

int stk__img_decode_rgb(int kind, const uint8_t *p, size_t len, int64_t max_pixels, uint8_t **px, int *w, int *h,
                        char *err)
{
    *px = NULL;
    STK__UNUSED(p);
    STK__UNUSED(len);
    STK__UNUSED(max_pixels);
    STK__UNUSED(w);
    STK__UNUSED(h);
    switch (kind) {
#ifdef STK_HAVE_PNG
    case STK__IMG_PNG: return decode_png(p, len, max_pixels, px, w, h, err);
#endif
#ifdef STK_HAVE_WEBP
    case STK__IMG_WEBP: return decode_webp(p, len, max_pixels, px, w, h, err);
#endif
#ifdef STK_HAVE_GIF
    case STK__IMG_GIF: return decode_gif(p, len, max_pixels, px, w, h, err);
#endif
#ifdef STK_HAVE_TIFF
    case STK__IMG_TIFF: return decode_tiff(p, len, max_pixels, px, w, h, err);
#endif
#ifdef STK_HAVE_STB
    case STK__IMG_BMP: return decode_bmp(p, len, max_pixels, px, w, h, err);
#endif
    case STK__IMG_PNM: return decode_pnm(p, len, max_pixels, px, w, h, err);
    default:
        break;
    }
    if (kind == STK__IMG_UNKNOWN || kind == STK__IMG_JPEG)
        return stk__err(err, STK_E_INVALID, "stk__img_decode_rgb: not for %s", stk__img_kind_name(kind));
    return stk__err(err, STK_E_UNSUPPORTED, "%s: this build has no %s decoder (build with %s)",
                    stk__img_kind_name(kind), stk__img_kind_name(kind), kind_package(kind));
}
