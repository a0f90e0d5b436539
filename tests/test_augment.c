/* SPDX-License-Identifier: MIT */
/* test_augment.c — crop parameters and stk__process_sample.
 *  - stk__crop_params: deterministic per (seed, epoch, index), inside the image for any size,
 *    epochs and indices give different crops, eval geometry equals torchvision's arithmetic.
 *  - train and eval samples equal "full decode, then crop, then resize" computed here with an
 *    independent, straightforward implementation of Pillow's bilinear resampling (double
 *    weights -> 22-bit fixed point), byte for byte whenever the DCT scale is 8/8 (and always
 *    with dct_scaling off), and within PSNR >= 25 dB on these synthetic high-frequency images
 *    (worst measured 29.3 dB; printed) when the crop-window decode uses 1/8..4/8; eval outputs
 *    larger than the resized image are zero-padded as torchvision's CenterCrop does;
 *  - the SIMD resize kernels equal the portable ones, and the horizontal pass fused into the decode
 *    equals the pass over the whole window, byte for byte on 300 random geometries and JPEG kinds,
 *    each with the three filters (BICUBIC's negative lobes: the SIMD packs clip as clip8 does),
 *    a quarter of the eval ones with Resize((h, w));
 *  - flip mirrors the unflipped sample exactly; the substitute is mid-grey;
 *  - two threads with their own contexts produce identical bytes (stk-test: concurrency).
 */
#include "testutil.h"
#include "augment.h"
#include "jpegenc.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- reference: Pillow BILINEAR, written from its description ---------------------------- */
typedef struct ref_axis {
    int *lo, *n;
    int32_t *k;
    int ks;
} ref_axis;

static void ref_axis_make(ref_axis *a, int out, double in0, double scale, int off, int in_size, int virt)
{
    double fs = scale < 1 ? 1 : scale, sup = fs;
    a->ks = (int)ceil(sup) * 2 + 1;
    a->lo = calloc((size_t)out, sizeof(int));
    a->n = calloc((size_t)out, sizeof(int));
    a->k = calloc((size_t)out * (size_t)a->ks, sizeof(int32_t));
    for (int i = 0; i < out; i++) {
        if (virt && (off + i < 0 || off + i >= virt))
            continue; /* CenterCrop's zero padding */
        double c = in0 + (off + i + 0.5) * scale;
        int x0 = (int)(c - sup + 0.5), x1 = (int)(c + sup + 0.5);
        if (x0 < 0)
            x0 = 0;
        if (x1 > in_size)
            x1 = in_size;
        double wsum = 0, wt[512];
        for (int x = x0; x < x1; x++) {
            double d = fabs((x - c + 0.5) / fs);
            wt[x - x0] = d < 1 ? 1 - d : 0;
            wsum += wt[x - x0];
        }
        a->lo[i] = x0;
        a->n[i] = x1 - x0;
        for (int x = 0; x < x1 - x0; x++)
            a->k[i * a->ks + x] = (int32_t)(0.5 + (wsum ? wt[x] / wsum : wt[x]) * (1 << 22));
    }
}

static uint8_t clip(int64_t v) { return v <= 0 ? 0 : v >= (255 << 22) ? 255 : (uint8_t)(v >> 22); }

/* Resample SRC (sw x sh RGB, packed) to OW x OH with the given axes. */
static void ref_resize(const uint8_t *src, int sw, int sh, const ref_axis *ax, const ref_axis *ay,
                       int ow, int oh, int flip, uint8_t *out)
{
    uint8_t *tmp = malloc((size_t)ow * sh * 3);
    for (int y = 0; y < sh; y++)
        for (int x = 0; x < ow; x++)
            for (int ch = 0; ch < 3; ch++) {
                int64_t s = 1 << 21;
                for (int t = 0; t < ax->n[x]; t++)
                    s += (int64_t)src[((size_t)y * sw + ax->lo[x] + t) * 3 + ch] * ax->k[x * ax->ks + t];
                tmp[((size_t)y * ow + (flip ? ow - 1 - x : x)) * 3 + ch] = clip(s);
            }
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow * 3; x++) {
            int64_t s = 1 << 21;
            for (int t = 0; t < ay->n[y]; t++)
                s += (int64_t)tmp[(size_t)(ay->lo[y] + t) * ow * 3 + x] * ay->k[y * ay->ks + t];
            out[(size_t)y * ow * 3 + x] = clip(s);
        }
    free(tmp);
}

static void ref_axis_free(ref_axis *a)
{
    free(a->lo);
    free(a->n);
    free(a->k);
}

/* The expected sample: full decode (8/8), then torchvision's geometry. */
static void expected(const stk__aug_config *c, const uint8_t *j, size_t len, uint64_t idx, uint8_t *out)
{
    int W, H;
    uint8_t *full = t_decode_ref(j, len, &W, &H);
    T_CHECK(full, "reference decode");
    stk__crop cr;
    stk__crop_params(c, 9, 2, idx, W, H, &cr);
    ref_axis ax, ay;
    if (c->mode == STK_MODE_EVAL) {
        ref_axis_make(&ax, c->out_w, 0, (double)W / cr.resized_w, cr.off_x, W, cr.resized_w);
        ref_axis_make(&ay, c->out_h, 0, (double)H / cr.resized_h, cr.off_y, H, cr.resized_h);
        ref_resize(full, W, H, &ax, &ay, c->out_w, c->out_h, 0, out);
    } else {
        uint8_t *crop = malloc((size_t)cr.w * cr.h * 3);
        for (int y = 0; y < cr.h; y++)
            memcpy(crop + (size_t)y * cr.w * 3, full + ((size_t)(cr.y + y) * W + cr.x) * 3, (size_t)cr.w * 3);
        ref_axis_make(&ax, c->out_w, 0, (double)cr.w / c->out_w, 0, cr.w, 0);
        ref_axis_make(&ay, c->out_h, 0, (double)cr.h / c->out_h, 0, cr.h, 0);
        ref_resize(crop, cr.w, cr.h, &ax, &ay, c->out_w, c->out_h, cr.flip, out);
        free(crop);
    }
    ref_axis_free(&ax);
    ref_axis_free(&ay);
    free(full);
}

static void crop_params_checks(void)
{
    stk__aug_config c;
    stk__aug_config_default(&c);
    static const int sizes[][2] = {{1, 1}, {1, 1000}, {1000, 1}, {500, 375}, {5000, 3}, {224, 224}, {2, 3}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int W = sizes[s][0], H = sizes[s][1];
        int same = 0;
        for (uint64_t i = 0; i < 5000; i++) {
            stk__crop a, b, e;
            stk__crop_params(&c, 3, 1, i, W, H, &a);
            stk__crop_params(&c, 3, 1, i, W, H, &b);
            stk__crop_params(&c, 3, 2, i, W, H, &e);
            T_CHECK(memcmp(&a, &b, sizeof a) == 0, "not deterministic");
            T_CHECK(a.w > 0 && a.h > 0 && a.x >= 0 && a.y >= 0 && a.x + a.w <= W && a.y + a.h <= H,
                    "%dx%d: crop %d,%d %dx%d outside", W, H, a.x, a.y, a.w, a.h);
            same += memcmp(&a, &e, sizeof a) == 0;
        }
        if (W >= 100 && H >= 100) /* (else mostly the fixed fallback crop) */
            T_CHECK(same < 50, "%dx%d: epochs 1 and 2 gave %d identical crops of 5000", W, H, same);
    }
    /* 1000x1 (ratio 1000): every try fails; fallback h = H, w = round(H * 4/3) = 1 */
    stk__crop f;
    stk__crop_params(&c, 0, 0, 0, 1000, 1, &f);
    T_CHECK(f.fallback && f.w == 1 && f.h == 1 && f.x == 499 && f.y == 0, "fallback %d,%d %dx%d", f.x, f.y, f.w, f.h);
    /* eval: torchvision Resize(256) + CenterCrop(224) */
    c.mode = STK_MODE_EVAL;
    stk__crop e;
    stk__crop_params(&c, 0, 0, 0, 500, 375, &e);
    T_CHECK(e.resized_w == 341 && e.resized_h == 256 && e.off_x == 58 && e.off_y == 16,
            "eval 500x375: %dx%d +%d+%d", e.resized_w, e.resized_h, e.off_x, e.off_y);
    stk__crop_params(&c, 0, 0, 0, 333, 500, &e); /* 256 x int(256*500/333)=384; (384-224)/2 = 80 */
    T_CHECK(e.resized_w == 256 && e.resized_h == 384 && e.off_x == 16 && e.off_y == 80,
            "eval 333x500: %dx%d +%d+%d", e.resized_w, e.resized_h, e.off_x, e.off_y);
    stk__crop_params(&c, 0, 0, 0, 640, 427, &e); /* 383x256: round(79.5) = 80 (half to even) */
    T_CHECK(e.resized_w == 383 && e.off_x == 80, "eval 640x427: %d +%d", e.resized_w, e.off_x);
    T_CHECK(!e.flip, "eval never flips");
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++)
        se += (double)(a[i] - b[i]) * (a[i] - b[i]);
    return se == 0 ? 99.0 : 10 * log10(255.0 * 255.0 * (double)n / se);
}

/* The SIMD resize kernels against the portable ones on random geometry: upscales (2 taps) to
 * 1/8 downscales (dozens of taps, with DCT scaling off), widths and heights that are not
 * multiples of the kernels' 4 outputs / 8 rows, eval outputs larger than the resized image
 * (zero padding), flips; every subsampling, grayscale, CMYK and YCCK, progressive and restart
 * markers. And the horizontal pass fused into the decode (strip by strip, the default) against
 * the pass over the whole decoded window. Byte for byte. */
#define RND() t_xorshift(&r)

static void simd_vs_portable(void)
{
    stk__worker_ctx *w;
    T_OK(stk__worker_ctx_create(&w));
    uint64_t r = 88172645463325252ull;
    int n = 0, differ = 0;
    for (int it = 0; it < 300; it++) {
        int W = 1 + (int)(RND() % 640), H = 1 + (int)(RND() % 480);
        int kind = (int)(RND() % JE_KINDS), flags = (int)(RND() % 4) & (JE_PROGRESSIVE | JE_RESTART_ROWS);
        uint8_t *rgb = malloc((size_t)W * H * 3);
        t_make_rgb(rgb, W, H, RND());
        size_t len;
        uint8_t *j = je_encode(rgb, W, H, kind, 85, flags, &len);
        free(rgb);
        T_CHECK(j, "make jpeg %dx%d", W, H);
        stk__aug_config c;
        stk__aug_config_default(&c);
        c.mode = RND() % 2 ? STK_MODE_EVAL : STK_MODE_TRAIN;
        c.out_w = 1 + (int)(RND() % 300), c.out_h = 1 + (int)(RND() % 300);
        c.resize = 1 + (int)(RND() % 400);
        c.dct_scaling = (int)(RND() % 2);
        c.flip_prob = 0.5;
        if (it % 4 == 0) /* eval: Resize((h, w)) */
            c.resize_h = c.resize, c.resize_w = 1 + (c.resize * 7) % 400;
        size_t sz = (size_t)c.out_w * c.out_h * 3;
        uint8_t *a = malloc(sz), *b = malloc(sz), *u = malloc(sz);
        char err[STK__ERRLEN];
        int warn;
        for (c.interp = STK_INTERP_BILINEAR; c.interp <= STK_INTERP_NEAREST; c.interp++) {
            int simd = stk__aug_set_simd(1);
            T_CHECK(stk__process_sample(w, &c, 4, 0, (uint64_t)it, j, len, a, &warn, err) == STK_OK, "%s", err);
            stk__aug_set_fused(0);
            T_CHECK(stk__process_sample(w, &c, 4, 0, (uint64_t)it, j, len, u, &warn, err) == STK_OK, "%s", err);
            stk__aug_set_fused(1);
            stk__aug_set_simd(0);
            T_CHECK(stk__process_sample(w, &c, 4, 0, (uint64_t)it, j, len, b, &warn, err) == STK_OK, "%s", err);
            if (memcmp(a, b, sz) != 0 || memcmp(a, u, sz) != 0) {
                differ++;
                printf("%s differ: %dx%d %s%s -> %dx%d, mode %d, resize %d (%dx%d), dct_scaling %d, interp %d "
                       "(simd %d)\n", memcmp(a, b, sz) ? "SIMD and portable" : "fused and whole-window", W, H,
                       je_kind_names[kind], flags & JE_PROGRESSIVE ? " progressive" : "", c.out_w, c.out_h, c.mode,
                       c.resize, c.resize_h, c.resize_w, c.dct_scaling, c.interp, simd);
            }
            n++;
        }
        free(a);
        free(b);
        free(u);
        free(j);
    }
    stk__aug_set_simd(1);
    stk__worker_ctx_destroy(w);
    printf("SIMD vs portable, fused vs whole-window resize: %d random geometries, %d differ\n", n, differ);
    T_CHECK(differ == 0, "%d of %d samples differ between the SIMD and the portable kernels or between the "
                         "fused and the whole-window passes", differ, n);
}

typedef struct job {
    uint8_t **jpegs;
    size_t *lens;
    int n;
    uint8_t *out;
} job;

static void *run_job(void *p)
{
    job *jb = p;
    stk__worker_ctx *w;
    if (stk__worker_ctx_create(&w) != STK_OK)
        return NULL;
    stk__aug_config c;
    stk__aug_config_default(&c);
    c.out_w = 64, c.out_h = 48;
    for (int i = 0; i < jb->n; i++) {
        char err[STK__ERRLEN];
        int warn;
        if (stk__process_sample(w, &c, 5, 0, (uint64_t)i, jb->jpegs[i], jb->lens[i],
                                jb->out + (size_t)i * 64 * 48 * 3, &warn, err) != STK_OK)
            memset(jb->out + (size_t)i * 64 * 48 * 3, 1, 64 * 48 * 3);
    }
    stk__worker_ctx_destroy(w);
    return NULL;
}

int main(void)
{
    crop_params_checks();
    simd_vs_portable();

    stk__worker_ctx *w;
    T_OK(stk__worker_ctx_create(&w));
    enum { NIMG = 24 };
    uint8_t *jpegs[NIMG];
    size_t lens[NIMG];
    for (int i = 0; i < NIMG; i++) {
        int W = 40 + (i * 97) % 700, H = 30 + (i * 61) % 600;
        static const int ss[] = {T_420, T_422, T_444, T_GRAY, T_440};
        jpegs[i] = t_make_jpeg(W, H, (uint64_t)i, ss[i % 5], 90, i % 3 == 1 ? T_PROGRESSIVE : 0, &lens[i]);
    }
    int sizes[][2] = {{224, 224}, {64, 48}, {17, 90}};
    int exact = 0, compared = 0, scaled = 0;
    double worst = 99;
    /* the SIMD kernels where the CPU has them, then the portable ones */
    for (int simd = 1; simd >= 0; simd--) {
        printf("resize kernels: %s\n", stk__aug_set_simd(simd) ? "AVX2" : "portable");
        for (int mode = 0; mode < 2; mode++)
            for (size_t s = 0; s < 3; s++)
                for (int i = 0; i < NIMG; i++) {
                    stk__aug_config c;
                    stk__aug_config_default(&c);
                    c.mode = mode ? STK_MODE_EVAL : STK_MODE_TRAIN;
                    c.out_w = sizes[s][0], c.out_h = sizes[s][1];
                    c.resize = (int)(s == 0 ? 256 : s == 1 ? 60 : 100);
                    size_t n = (size_t)c.out_w * c.out_h * 3;
                    uint8_t *got = malloc(n), *got8 = malloc(n), *want = malloc(n);
                    char err[STK__ERRLEN];
                    int warn;
                    T_CHECK(stk__process_sample(w, &c, 9, 2, (uint64_t)i, jpegs[i], lens[i], got, &warn, err) == STK_OK,
                            "process: %s", err);
                    expected(&c, jpegs[i], lens[i], (uint64_t)i, want);
                    int W, H;
                    stk_image_info(jpegs[i], lens[i], &W, &H, NULL);
                    stk__crop cr;
                    stk__crop_params(&c, 9, 2, (uint64_t)i, W, H, &cr);
                    int m = stk__plan_scale(&c, &cr, W, H);
                    c.dct_scaling = 0;
                    T_OK(stk__process_sample(w, &c, 9, 2, (uint64_t)i, jpegs[i], lens[i], got8, &warn, err));
                    T_CHECK(memcmp(got8, want, n) == 0, "mode %d %dx%d image %d (%dx%d): 8/8 sample differs from "
                            "full decode + crop + resize", mode, c.out_w, c.out_h, i, W, H);
                    compared++;
                    if (m == 8) {
                        T_CHECK(memcmp(got, want, n) == 0, "DCT scale 8/8 chosen but output differs");
                        exact++;
                    } else {
                        double p = psnr(got, want, n);
                        worst = p < worst ? p : worst;
                        scaled++;
                        /* synthetic images (per-pixel noise, an 8-pixel checkerboard) are the worst case for
                         * letting the IDCT do part of the downscale; photos reach >= 40 dB
                         * (tests/python/test_eval_torchvision.py) */
                        T_CHECK(p >= 25.0, "mode %d image %d at %d/8: PSNR %.2f dB < 25", mode, i, m, p);
                    }
                    free(got);
                    free(got8);
                    free(want);
                }
    }
    stk__aug_set_simd(1);
    printf("samples: %d compared, %d byte-identical at 8/8, %d at smaller DCT scales (worst PSNR %.2f dB)\n",
           compared, exact, scaled, worst);
    T_CHECK(scaled > 10, "the DCT-scaled path was exercised only %d times", scaled);

    /* flip mirrors; the substitute is grey */
    stk__aug_config c;
    stk__aug_config_default(&c);
    c.out_w = 50, c.out_h = 40;
    uint8_t a[50 * 40 * 3], b[50 * 40 * 3];
    char err[STK__ERRLEN];
    int warn;
    c.flip_prob = 0;
    T_OK(stk__process_sample(w, &c, 1, 1, 3, jpegs[5], lens[5], a, &warn, err));
    c.flip_prob = 1;
    T_OK(stk__process_sample(w, &c, 1, 1, 3, jpegs[5], lens[5], b, &warn, err));
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 50; x++)
            T_CHECK(memcmp(a + (y * 50 + x) * 3, b + (y * 50 + 49 - x) * 3, 3) == 0, "flip at %d,%d", x, y);
    stk__substitute(&c, a);
    for (size_t i = 0; i < sizeof a; i++)
        T_CHECK(a[i] == 128, "substitute");

    /* threads: same bytes from two workers */
    uint8_t *o1 = malloc((size_t)NIMG * 64 * 48 * 3), *o2 = malloc((size_t)NIMG * 64 * 48 * 3);
    job j1 = {jpegs, lens, NIMG, o1}, j2 = {jpegs, lens, NIMG, o2};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, run_job, &j1);
    pthread_create(&t2, NULL, run_job, &j2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    T_CHECK(memcmp(o1, o2, (size_t)NIMG * 64 * 48 * 3) == 0, "threads disagree");
    run_job(&j1);
    T_CHECK(memcmp(o1, o2, (size_t)NIMG * 64 * 48 * 3) == 0, "rerun disagrees");
    free(o1);
    free(o2);
    for (int i = 0; i < NIMG; i++)
        free(jpegs[i]);
    stk__worker_ctx_destroy(w);
    printf("ok\n");
    return 0;
}
