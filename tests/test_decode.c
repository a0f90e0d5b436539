/* SPDX-License-Identifier: MIT */
/* test_decode.c — stk_decode: full-size output equals an independent decode (TurboJPEG's
 * tjDecompress2, same pixels as Pillow's) for every subsampling, grayscale, progressive, restart
 * markers and an EXIF block; the crop-window decode equals "full decode at that scale, then crop"
 * byte for byte at scales 1/8, 2/8, 4/8 and 8/8 for windows anywhere (edges, 1-pixel windows,
 * windows that start inside an iMCU); API contract (sizes, STK_E_RANGE, bad arguments, info). */
#include "testutil.h"
#include "jpegenc.h"

#include <string.h>

static uint64_t rs = 0x1234567;
static uint32_t rnd(uint32_t n)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs % n);
}

static uint8_t *full(stk_decoder *d, const uint8_t *j, size_t len, int m, int *w, int *h)
{
    stk_decode_args a = {0};
    a.scale_num = m;
    int ow, oh;
    int rc = stk_decode(d, j, len, &a, NULL, 0, &ow, &oh, NULL);
    T_CHECK(rc == STK_E_RANGE, "size query returned %d", rc);
    uint8_t *out = malloc((size_t)ow * oh * 3);
    int warn = -1;
    T_OK(stk_decode(d, j, len, &a, out, (size_t)ow * oh * 3, w, h, &warn));
    T_CHECK(*w == ow && *h == oh, "sizes changed");
    T_CHECK(warn == 0, "%d warnings on a clean file", warn);
    return out;
}

/* Windows of every kind at every scale against the full decode at that scale. */
static void check_crops(stk_decoder *d, const uint8_t *j, size_t len, int W, int H, const char *what)
{
    static const int scales[] = {1, 2, 4, 8};
    for (size_t si = 0; si < 4; si++) {
        int m = scales[si], fw, fh;
        uint8_t *ref = full(d, j, len, m, &fw, &fh);
        T_CHECK(fw == (W * m + 7) / 8 && fh == (H * m + 7) / 8, "%s: scaled size %dx%d at %d/8", what, fw, fh, m);
        for (int t = 0; t < 24; t++) {
            int x, y, cw, ch;
            switch (t) {
            case 0: x = 0, y = 0, cw = W, ch = H; break;
            case 1: x = 0, y = 0, cw = 1, ch = 1; break;
            case 2: x = W - 1, y = H - 1, cw = 1, ch = 1; break;
            case 3: x = W / 2, y = 0, cw = W - W / 2, ch = H; break; /* to the right edge */
            case 4: x = 1, y = 1, cw = W > 2 ? W - 2 : 1, ch = H > 2 ? H - 2 : 1; break;
            default:
                cw = 1 + (int)rnd((uint32_t)W);
                ch = 1 + (int)rnd((uint32_t)H);
                x = (int)rnd((uint32_t)(W - cw + 1));
                y = (int)rnd((uint32_t)(H - ch + 1));
            }
            if (x + cw > W || y + ch > H)
                continue;
            stk_decode_args a = {x, y, cw, ch, m, 0, 0};
            int ow, oh, warn;
            size_t cap = (size_t)((cw * m + 7) / 8 + 1) * (size_t)((ch * m + 7) / 8 + 1) * 3;
            uint8_t *out = malloc(cap);
            int rc = stk_decode(d, j, len, &a, out, cap, &ow, &oh, &warn);
            T_CHECK(rc == STK_OK, "%s: crop %d,%d %dx%d at %d/8: %s (%s)", what, x, y, cw, ch, m,
                    stk_strerror(rc), stk_decoder_last_error(d));
            T_CHECK(ow == (cw * m + 7) / 8 && oh == (ch * m + 7) / 8, "%s: crop size %dx%d", what, ow, oh);
            int sx = x * m / 8, sy = y * m / 8;
            T_CHECK(sx + ow <= fw && sy + oh <= fh, "window outside the scaled image");
            for (int r = 0; r < oh; r++) {
                const uint8_t *a1 = out + (size_t)r * ow * 3;
                const uint8_t *b1 = ref + ((size_t)(sy + r) * fw + sx) * 3;
                if (memcmp(a1, b1, (size_t)ow * 3) != 0) {
                    int c = 0;
                    while (a1[c] == b1[c])
                        c++;
                    T_FAIL("%s: crop %d,%d %dx%d at %d/8 differs from full decode + crop at row %d "
                           "col %d (%d vs %d)", what, x, y, cw, ch, m, r, c / 3, a1[c], b1[c]);
                }
            }
            free(out);
        }
        free(ref);
    }
}

static void check_full_vs_ref(stk_decoder *d, const uint8_t *j, size_t len, int W, int H, const char *what)
{
    int rw, rh, w, h;
    uint8_t *ref = t_decode_ref(j, len, &rw, &rh);
    T_CHECK(ref, "%s: reference decode failed", what);
    uint8_t *out = full(d, j, len, 8, &w, &h);
    T_CHECK(w == W && h == H && rw == W && rh == H, "%s: size %dx%d", what, w, h);
    size_t diff = 0;
    for (size_t i = 0; i < (size_t)W * H * 3; i++)
        diff += out[i] != ref[i];
    T_CHECK(diff == 0, "%s: %zu bytes differ from the reference decode", what, diff);
    free(ref);
    free(out);
}

int main(void)
{
    stk_decoder *d;
    T_OK(stk_decoder_create(&d));
    static const int sizes[][2] = {{1, 1}, {9, 7}, {33, 17}, {64, 48}, {201, 133}, {97, 211}};
    int n = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int W = sizes[s][0], H = sizes[s][1];
        uint8_t *rgb = malloc((size_t)W * H * 3);
        t_make_rgb(rgb, W, H, 77 + s);
        for (int kind = 0; kind < JE_KINDS; kind++) {
            for (int fl = 0; fl < 5; fl++) {
                static const int flagsets[] = {0, JE_PROGRESSIVE, JE_RESTART_ROWS, JE_RESTART_MCUS | JE_EXIF,
                                               JE_PROGRESSIVE | JE_RESTART_MCUS};
                int flags = flagsets[fl];
                size_t len;
                uint8_t *j = je_encode(rgb, W, H, kind, 85, flags, &len);
                char what[128];
                snprintf(what, sizeof what, "%dx%d %s flags %d", W, H, je_kind_names[kind], flags);
                int iw, ih, ic;
                T_OK(stk_image_info(j, len, &iw, &ih, &ic));
                int want_c = kind == JE_GRAY ? 1 : kind >= JE_CMYK ? 4 : 3;
                T_CHECK(iw == W && ih == H && ic == want_c, "%s: info %dx%d c%d", what, iw, ih, ic);
                if (kind < JE_CMYK) /* TurboJPEG cannot give RGB from CMYK; Pillow test covers it */
                    check_full_vs_ref(d, j, len, W, H, what);
                check_crops(d, j, len, W, H, what);
                free(j);
                n++;
            }
        }
        /* TurboJPEG-encoded files (another encoder's choices of tables and markers) */
        for (int ss = T_444; ss <= T_411; ss++) {
            size_t len;
            uint8_t *j = t_encode_jpeg(rgb, W, H, ss, 90, ss == T_420 ? T_PROGRESSIVE : 0, &len);
            char what[96];
            snprintf(what, sizeof what, "%dx%d tj subsamp %d", W, H, ss);
            check_full_vs_ref(d, j, len, W, H, what);
            check_crops(d, j, len, W, H, what);
            free(j);
            n++;
        }
        free(rgb);
    }

    /* API contract */
    size_t len;
    uint8_t *j = t_make_jpeg(100, 60, 5, T_420, 90, 0, &len);
    int w = 0, h = 0, warn = -1;
    uint8_t small[10];
    T_CHECK(stk_decode(d, j, len, NULL, small, sizeof small, &w, &h, &warn) == STK_E_RANGE, "small buffer");
    T_CHECK(w == 100 && h == 60, "sizes on STK_E_RANGE: %dx%d", w, h);
    T_CHECK(strstr(stk_decoder_last_error(d), "18000") != NULL, "message: %s", stk_decoder_last_error(d));
    uint8_t *buf = malloc(100 * 60 * 3);
    T_OK(stk_decode(NULL, j, len, NULL, buf, 100 * 60 * 3, &w, &h, &warn)); /* temporary decoder */
    stk_decode_args bad = {0, 0, 0, 0, 3, 0, 0};
    T_CHECK(stk_decode(d, j, len, &bad, buf, 100 * 60 * 3, &w, &h, NULL) == STK_E_INVALID, "scale 3");
    stk_decode_args out = {90, 0, 20, 10, 8, 0, 0};
    T_CHECK(stk_decode(d, j, len, &out, buf, 100 * 60 * 3, &w, &h, NULL) == STK_E_INVALID, "crop outside");
    T_CHECK(strstr(stk_decoder_last_error(d), "outside") != NULL, "message: %s", stk_decoder_last_error(d));
    stk_decode_args neg = {-1, 0, 20, 10, 8, 0, 0};
    T_CHECK(stk_decode(d, j, len, &neg, buf, 100 * 60 * 3, &w, &h, NULL) == STK_E_INVALID, "negative crop");
    /* the decoder is still fine after failures */
    T_OK(stk_decode(d, j, len, NULL, buf, 100 * 60 * 3, &w, &h, &warn));
    stk_decoder_destroy(NULL);
    free(buf);
    free(j);
    stk_decoder_destroy(d);
    printf("ok: %d encodings, full decode identical to the reference, crop windows identical at 1/8..8/8\n", n);
    return 0;
}
