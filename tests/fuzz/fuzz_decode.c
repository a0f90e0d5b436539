/* SPDX-License-Identifier: MIT */
/*
 * fuzz_decode.c — JPEG decode with crop and scale (stk_decode, stk_image_info).
 *
 * Input: 9 bytes of arguments, then the JPEG bytes.
 *   byte 0: bits 0-1 scale (1, 2, 4, 8 /8), bit 2 strict, bit 3 crop window, bit 5 deliberately
 *           out-of-range crop (must be refused, not decoded)
 *   bytes 1-8: crop x, y, w, h as 16-bit fractions of the image size
 * The pixel limit is 4 MPix so that a run spends its time in the parser, not in huge IDCTs.
 *
 * Invariants: stk_decode returns only documented codes; the output size it reports first (the
 * STK_E_RANGE probe with no buffer) is the size it then writes (the buffer is exactly that big,
 * so ASan sees any overrun); a crop window that decodes without warnings equals the same window
 * cut from a full decode at the same scale that also decoded without warnings (decode.c's
 * bit-exactness claim); the result does not depend on the decoder's history: one decoder is
 * reused across inputs, as the loader's workers do, and primed before each input with a small
 * colour JPEG (prime_jpeg.h), and its status, warnings and pixels must equal those of a fresh
 * decoder (found: libjpeg keeps DQT/DHT tables across images, so an image without its own
 * tables was decoded with the previous image's).
 */
#include "fuzz.h"

#include "prime_jpeg.h"
#include "stoker.h"

#include <string.h>

#define MAXPIX (4 * 1024 * 1024)

static stk_decoder *g_dec;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (stk_decoder_create(&g_dec) != STK_OK)
        abort();
    return 0;
}

static int known_status(int rc)
{
    switch (rc) {
    case STK_OK:
    case STK_E_DECODE:
    case STK_E_NOT_JPEG:
    case STK_E_TOO_LARGE:
    case STK_E_EMPTY:
    case STK_E_TRUNCATED:
    case STK_E_CORRUPT:
    case STK_E_NOMEM:
        return 1;
    default:
        return 0;
    }
}

static int frac(const uint8_t *p, int n)
{
    unsigned v = (unsigned)p[0] << 8 | p[1];
    return (int)((int64_t)v * n / 65536);
}

/* Decode with ARGS into a buffer of exactly the size the probe reports. Returns the status;
 * *out (malloc'd) and *w, *h on success. */
static int decode_exact(stk_decoder *d, const uint8_t *jpg, size_t len, const stk_decode_args *a,
                        uint8_t **out, int *w, int *h, int *warn)
{
    *out = NULL;
    int pw = -1, ph = -1;
    int rc = stk_decode(d, jpg, len, a, NULL, 0, &pw, &ph, warn);
    if (rc != STK_E_RANGE) {
        FUZZ_CHECK(rc != STK_OK, "decode into no buffer succeeded");
        FUZZ_CHECK(known_status(rc) || rc == STK_E_INVALID, "probe status %d (%s)", rc, stk_strerror(rc));
        return rc;
    }
    FUZZ_CHECK(pw > 0 && ph > 0 && (int64_t)pw * ph <= MAXPIX, "probe size %dx%d", pw, ph);
    size_t need = (size_t)pw * (size_t)ph * 3;
    uint8_t *buf = malloc(need);
    if (!buf)
        return STK_E_NOMEM;
    int ow = -1, oh = -1;
    rc = stk_decode(d, jpg, len, a, buf, need, &ow, &oh, warn);
    FUZZ_CHECK(known_status(rc), "decode status %d (%s): %s", rc, stk_strerror(rc),
               d ? stk_decoder_last_error(d) : "");
    if (rc != STK_OK) {
        free(buf);
        return rc;
    }
    FUZZ_CHECK(ow == pw && oh == ph, "probe said %dx%d, decode gave %dx%d", pw, ph, ow, oh);
    *out = buf;
    *w = ow;
    *h = oh;
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    uint8_t flags = data[0];
    const uint8_t *jpg = data + 9;
    size_t len = size - 9;
    static const int scales[4] = {1, 2, 4, 8};
    int m = scales[flags & 3];
    stk_decoder *d = g_dec;
    {
        static uint8_t px[16 * 16 * 3];
        int pw, ph;
        FUZZ_CHECK(stk_decode(d, prime_jpeg, sizeof prime_jpeg, NULL, px, sizeof px, &pw, &ph, NULL) == STK_OK,
                   "prime JPEG: %s", stk_decoder_last_error(d));
    }

    int w = 0, h = 0, comps = 0;
    int rc = stk_image_info(jpg, len, &w, &h, &comps);
    FUZZ_CHECK(known_status(rc), "image_info status %d", rc);
    if (rc == STK_OK)
        FUZZ_CHECK(w > 0 && h > 0 && (comps == 1 || comps == 3 || comps == 4), "info %dx%d c%d", w, h, comps);

    stk_decode_args a = {0};
    a.scale_num = m;
    a.max_pixels = MAXPIX;
    a.strict = (flags >> 2) & 1;
    if (rc == STK_OK && (flags & 8)) {
        a.crop_x = frac(data + 1, w);
        a.crop_y = frac(data + 3, h);
        a.crop_w = 1 + frac(data + 5, w - a.crop_x);
        a.crop_h = 1 + frac(data + 7, h - a.crop_y);
        if (flags & 32) {
            a.crop_w = w - a.crop_x + 1 + (data[5] & 7); /* one past the right edge or more */
            int r2 = stk_decode(d, jpg, len, &a, NULL, 0, NULL, NULL, NULL);
            FUZZ_CHECK(r2 == STK_E_INVALID || r2 == STK_E_TOO_LARGE, "out-of-range crop gave %d (%s)",
                       r2, stk_strerror(r2));
            a.crop_w = 1 + frac(data + 5, w - a.crop_x);
        }
    }

    uint8_t *win = NULL;
    int ww = 0, wh = 0, warn = -1;
    rc = decode_exact(d, jpg, len, &a, &win, &ww, &wh, &warn);
    if (rc == STK_OK) {
        FUZZ_CHECK(warn >= 0, "warnings not set");
        if (a.strict)
            FUZZ_CHECK(warn == 0, "strict decode succeeded with %d warnings", warn);
        /* no history: a fresh decoder gives the same status, warnings and pixels */
        uint8_t *again = NULL;
        int aw = 0, ah = 0, awarn = -1;
        int r2 = decode_exact(NULL, jpg, len, &a, &again, &aw, &ah, &awarn);
        FUZZ_CHECK(r2 == STK_OK, "the reused decoder decoded it, a fresh one says %d (%s)", r2, stk_strerror(r2));
        FUZZ_CHECK(aw == ww && ah == wh && awarn == warn && memcmp(win, again, (size_t)ww * wh * 3) == 0,
                   "a fresh decoder gives other pixels or warnings (%d vs %d)", awarn, warn);
        free(again);
        /* crop window == the window cut from the full decode at the same scale */
        if (a.crop_w && warn == 0) {
            stk_decode_args f = {0};
            f.scale_num = m;
            f.max_pixels = MAXPIX;
            uint8_t *full = NULL;
            int fw, fh, fwarn;
            if (decode_exact(d, jpg, len, &f, &full, &fw, &fh, &fwarn) == STK_OK && fwarn == 0) {
                int sx = (int)((int64_t)a.crop_x * m / 8), sy = (int)((int64_t)a.crop_y * m / 8);
                FUZZ_CHECK(sx + ww <= fw && sy + wh <= fh, "window %d,%d %dx%d outside %dx%d", sx, sy,
                           ww, wh, fw, fh);
                for (int y = 0; y < wh; y++)
                    FUZZ_CHECK(memcmp(win + (size_t)y * ww * 3,
                                      full + ((size_t)(sy + y) * fw + (size_t)sx) * 3, (size_t)ww * 3) == 0,
                               "crop %d,%d %dx%d at scale %d/8: row %d differs from the full decode",
                               a.crop_x, a.crop_y, a.crop_w, a.crop_h, m, y);
            }
            free(full);
        }
    }
    else {
        int aw, ah, awarn;
        uint8_t *again = NULL;
        int r2 = decode_exact(NULL, jpg, len, &a, &again, &aw, &ah, &awarn);
        free(again);
        FUZZ_CHECK(r2 == rc, "the reused decoder says %d (%s), a fresh one %d (%s)", rc, stk_strerror(rc), r2,
                   stk_strerror(r2));
    }
    free(win);
    return 0;
}
