/* SPDX-License-Identifier: MIT */
/* test_decode_bad.c — bad input returns the right status with a reason and never crashes or
 * hangs (run it under ASan+UBSan too): empty, not a JPEG (text, PNG, GIF), truncated at every
 * cut point (baseline, progressive, restart markers, CMYK), corrupted bytes (thousands of
 * variants; warnings counted, strict mode turns them into errors), over the pixel limit (also a
 * forged 65000x65000 header: refused before any allocation), a valid progressive file of ~1 900
 * scans (refused: more than 500 scans), through stk_decode, stk_image_info and
 * stk__process_sample; the decoder stays usable after every failure. */
#include "testutil.h"
#include "augment.h"
#include "jpegenc.h"

#include <string.h>

static stk_decoder *D;
static stk__worker_ctx *W;
static uint8_t OUT[512 * 512 * 3];

static int dec(const uint8_t *p, size_t len, int strict, int *warn)
{
    stk_decode_args a = {0};
    a.strict = strict;
    int w, h;
    return stk_decode(D, p, len, &a, OUT, sizeof OUT, &w, &h, warn);
}

static int proc(const uint8_t *p, size_t len, int strict, char *err)
{
    stk__aug_config c;
    stk__aug_config_default(&c);
    c.out_h = c.out_w = 32;
    c.strict = strict;
    int warn;
    return stk__process_sample(W, &c, 1, 0, 5, p, len, OUT, &warn, err);
}

static void expect(int rc, int want, const char *what)
{
    T_CHECK(rc == want, "%s: got %s, want %s (%s)", what, stk_status_name(rc), stk_status_name(want),
            stk_decoder_last_error(D));
}

/* After a failure the decoder must decode a good image again. */
static void still_good(const uint8_t *good, size_t glen)
{
    int warn;
    expect(dec(good, glen, 0, &warn), STK_OK, "good image after a failure");
    char err[STK__ERRLEN];
    T_CHECK(proc(good, glen, 0, err) == STK_OK, "process after a failure: %s", err);
}

static void cuts(const uint8_t *j, size_t len, const uint8_t *good, size_t glen, const char *what)
{
    for (size_t cut = 1; cut < len; cut++) {
        int warn;
        int rc = dec(j, cut, 0, &warn);
        /* losing only the EOI marker may still decode every pixel */
        if (cut + 2 >= len && rc == STK_OK)
            continue;
        T_CHECK(rc == STK_E_TRUNCATED, "%s cut at %zu of %zu: %s (%s)", what, cut, len,
                stk_status_name(rc), stk_decoder_last_error(D));
        T_CHECK(strstr(stk_decoder_last_error(D), "truncated") != NULL, "reason: %s",
                stk_decoder_last_error(D));
        if (cut % 97 == 0) {
            char err[STK__ERRLEN];
            int prc = proc(j, cut, 0, err);
            T_CHECK(prc == STK_E_TRUNCATED || (prc == STK_OK && cut + 2 >= len) ||
                        /* a crop may not need the missing rows */
                        prc == STK_OK,
                    "process %s cut %zu: %s", what, cut, stk_status_name(prc));
            if (cut < 200) /* cut inside the headers: no window can be decoded */
                T_CHECK(prc == STK_E_TRUNCATED, "process, header cut %zu: %s", cut, stk_status_name(prc));
            still_good(good, glen);
        }
    }
}

/* A valid progressive JPEG with about 1 900 scans: every AC coefficient of every component in
 * its own band, sent bit by bit (first scan Al = 9, then 9 refinements). */
static uint8_t *many_scans(size_t *len)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    jpeg_mem_dest(&ci, &out, &outlen);
    ci.image_width = 16, ci.image_height = 16, ci.input_components = 3, ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    int n = 0, cap = 1 + 3 * 63 * 10;
    jpeg_scan_info *sc = calloc((size_t)cap, sizeof *sc);
    sc[n].comps_in_scan = 3;
    for (int c = 0; c < 3; c++)
        sc[n].component_index[c] = c;
    n++; /* DC of all components, Ss = Se = Ah = Al = 0 */
    for (int c = 0; c < 3; c++)
        for (int k = 1; k < 64; k++)
            for (int al = 9; al >= 0; al--) {
                sc[n].comps_in_scan = 1;
                sc[n].component_index[0] = c;
                sc[n].Ss = k, sc[n].Se = k;
                sc[n].Ah = al == 9 ? 0 : al + 1;
                sc[n].Al = al;
                n++;
            }
    ci.scan_info = sc;
    ci.num_scans = n;
    jpeg_start_compress(&ci, TRUE);
    uint8_t rgb[16 * 16 * 3];
    t_make_rgb(rgb, 16, 16, 1);
    for (int y = 0; y < 16; y++) {
        JSAMPROW r = rgb + y * 48;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(sc);
    uint8_t *res = malloc(outlen);
    memcpy(res, out, outlen);
    free(out);
    *len = outlen;
    return res;
}

int main(void)
{
    T_OK(stk_decoder_create(&D));
    T_OK(stk__worker_ctx_create(&W));
    size_t glen;
    uint8_t *good = t_make_jpeg(120, 90, 3, T_420, 85, 0, &glen);
    int warn, w, h, c;
    char err[STK__ERRLEN];

    /* empty, not JPEG */
    expect(dec(good, 0, 0, &warn), STK_E_EMPTY, "empty");
    expect(dec(NULL, 0, 0, &warn), STK_E_EMPTY, "NULL");
    T_CHECK(proc(good, 0, 0, err) == STK_E_EMPTY && strstr(err, "empty"), "process empty: %s", err);
    expect(dec((const uint8_t *)"hello world", 11, 0, &warn), STK_E_NOT_JPEG, "text");
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    expect(dec(png, sizeof png, 0, &warn), STK_E_NOT_JPEG, "png");
    T_CHECK(strstr(stk_decoder_last_error(D), "PNG") != NULL, "png reason: %s", stk_decoder_last_error(D));
    /* the loader's sample path decodes PNG too (since 0.5, when the build has libpng): this
     * 16-byte stub is then a truncated PNG */
    {
        int st = proc(png, sizeof png, 0, err);
        T_CHECK((st == STK_E_TRUNCATED || st == STK_E_DECODE || st == STK_E_NOT_JPEG) && strstr(err, "PNG"),
                "process png: %s: %s", stk_status_name(st), err);
    }
    expect(dec((const uint8_t *)"GIF89a\1\0\1\0", 10, 0, &warn), STK_E_NOT_JPEG, "gif");
    expect(dec((const uint8_t *)"\xff", 1, 0, &warn), STK_E_TRUNCATED, "lone 0xFF");
    expect(dec((const uint8_t *)"\xff\xd8", 2, 0, &warn), STK_E_TRUNCATED, "SOI only");
    T_CHECK(stk_image_info(png, sizeof png, &w, &h, &c) == STK_E_NOT_JPEG, "info png");
    T_CHECK(stk_image_info(good, 0, &w, &h, &c) == STK_E_EMPTY, "info empty");
    T_CHECK(stk_image_info(good, 100, &w, &h, &c) == STK_E_TRUNCATED, "info cut");
    still_good(good, glen);

    /* truncated at every cut point */
    uint8_t *rgb = malloc(96 * 64 * 3);
    t_make_rgb(rgb, 96, 64, 9);
    static const int kinds[] = {JE_420, JE_444, JE_GRAY, JE_CMYK, JE_420};
    static const int flags[] = {0, JE_PROGRESSIVE, JE_RESTART_ROWS, 0, JE_PROGRESSIVE | JE_RESTART_MCUS};
    for (int k = 0; k < 5; k++) {
        size_t len;
        uint8_t *j = je_encode(rgb, 96, 64, kinds[k], 80, flags[k], &len);
        char what[64];
        snprintf(what, sizeof what, "%s flags %d", je_kind_names[kinds[k]], flags[k]);
        cuts(j, len, good, glen, what);
        free(j);
    }

    /* corrupted bytes: any status but a crash; warnings counted; strict makes them errors */
    size_t jlen, plen;
    uint8_t *j = je_encode(rgb, 96, 64, JE_420, 80, 0, &jlen);
    uint8_t *pj = je_encode(rgb, 96, 64, JE_422, 80, JE_PROGRESSIVE, &plen);
    size_t cap = STK__MAX(STK__MAX(jlen, plen), glen);
    uint8_t *buf = malloc(cap);
    uint64_t s = 42;
    int n_ok = 0, n_warn = 0, n_err = 0, n_strict = 0;
    for (int t = 0; t < 3000; t++) {
        const uint8_t *src = (t & 1) ? pj : j;
        size_t L = (t & 1) ? plen : jlen;
        memcpy(buf, src, L);
        int nflip = 1 + t % 4;
        for (int f = 0; f < nflip; f++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            size_t at = 2 + (size_t)(s % (L - 2));
            buf[at] = (uint8_t)(s >> 32);
        }
        int rc = dec(buf, L, 0, &warn);
        /* (STK_E_RANGE: the corrupted header asks for more than OUT holds) */
        T_CHECK(rc == STK_OK || rc == STK_E_DECODE || rc == STK_E_TRUNCATED || rc == STK_E_TOO_LARGE ||
                    rc == STK_E_RANGE,
                "corrupt %d: %s", t, stk_status_name(rc));
        if (rc == STK_OK) {
            n_ok++;
            if (warn > 0) {
                n_warn++;
                int rc2 = dec(buf, L, 1, &warn);
                T_CHECK(rc2 == STK_E_DECODE, "strict on a warned file: %s", stk_status_name(rc2));
                n_strict++;
            }
        } else {
            n_err++;
            T_CHECK(stk_decoder_last_error(D)[0] != 0, "no reason for %s", stk_status_name(rc));
        }
        int prc = proc(buf, L, 0, err);
        T_CHECK(prc == STK_OK || prc == STK_E_DECODE || prc == STK_E_TRUNCATED || prc == STK_E_TOO_LARGE,
                "process corrupt %d: %s", t, stk_status_name(prc));
        T_CHECK(prc == STK_OK || err[0] != 0, "process: no reason");
    }
    printf("corrupt: %d decoded (%d with warnings, strict refused %d), %d refused\n", n_ok, n_warn,
           n_strict, n_err);
    T_CHECK(n_warn > 10 && n_err > 10, "corruption should produce both warnings and errors");
    still_good(good, glen);

    /* pixel limit */
    stk_decode_args a = {0};
    a.max_pixels = 120 * 90 - 1;
    T_CHECK(stk_decode(D, good, glen, &a, OUT, sizeof OUT, &w, &h, &warn) == STK_E_TOO_LARGE, "limit");
    T_CHECK(strstr(stk_decoder_last_error(D), "10800") != NULL, "reason: %s", stk_decoder_last_error(D));
    a.max_pixels = 120 * 90;
    T_OK(stk_decode(D, good, glen, &a, OUT, sizeof OUT, &w, &h, &warn));
    /* forged header: SOF0 size 65000 x 65000 */
    memcpy(buf, good, glen);
    size_t sof = 0;
    for (size_t i = 2; i + 8 < glen; i++)
        if (buf[i] == 0xFF && buf[i + 1] == 0xC0) {
            sof = i;
            break;
        }
    T_CHECK(sof > 0, "no SOF0");
    buf[sof + 5] = 0xFD, buf[sof + 6] = 0xE8, buf[sof + 7] = 0xFD, buf[sof + 8] = 0xE8;
    T_CHECK(dec(buf, glen, 0, &warn) == STK_E_TOO_LARGE, "forged 65000x65000");
    T_CHECK(proc(buf, glen, 0, err) == STK_E_TOO_LARGE && strstr(err, "65000x65000"), "process: %s", err);
    T_OK(stk_image_info(buf, glen, &w, &h, &c)); /* info has no limit: it only reads headers */
    T_CHECK(w == 65000 && h == 65000, "info %dx%d", w, h);
    still_good(good, glen);

    /* a progressive file of ~1 900 scans is refused (bounded work per record) */
    size_t mlen;
    uint8_t *ms = many_scans(&mlen);
    T_CHECK(dec(ms, mlen, 0, &warn) == STK_E_DECODE, "many scans: %s", stk_decoder_last_error(D));
    T_CHECK(strstr(stk_decoder_last_error(D), "scans") != NULL, "reason: %s", stk_decoder_last_error(D));
    int rw, rh;
    uint8_t *ref = t_decode_ref(ms, mlen, &rw, &rh); /* a valid file: TurboJPEG 2.1 decodes it */
    T_CHECK(ref && rw == 16, "reference decode of the many-scan file");
    free(ref);
    free(ms);
    still_good(good, glen);

    free(buf);
    free(j);
    free(pj);
    free(rgb);
    free(good);
    stk__worker_ctx_destroy(W);
    stk_decoder_destroy(D);
    printf("ok\n");
    return 0;
}
