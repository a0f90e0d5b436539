/* SPDX-License-Identifier: MIT */
/*
 * decodebench — one thread, images in memory: what does everything besides the JPEG decode cost?
 *
 *   decodebench [--list MANIFEST | --dir ROOT] [--limit N] [--repeats R] [--size S] [--eval] [--full]
 *               [--only ceiling|process] [--interleave]
 *
 * Images: the `path` column of MANIFEST (relative to its directory's imagenet-like/, or to --dir),
 * default /work/data/imagenet-like.manifest.tsv. All payloads are read into memory first (not
 * timed). Crops: train RandomResizedCrop drawn by stk__crop_params with seed 0, epoch 0, sample
 * index = position in the list (or the eval centre window with --eval).
 *
 * Per repeat, interleaved, each over all images:
 *   ceiling   header + crop-window decode at the chosen power-of-two DCT scale, no resize
 *             (the libjpeg-turbo ceiling)
 *   process   stk__process_sample: the same decode + antialiased resize to SxS + flip
 *   full      decode of the whole image at 8/8 (reference point; only with --full)
 * Prints images/s (median over repeats) for each, the overhead ratio process/ceiling - 1, and
 * the fraction of samples at each DCT scale. Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
 * so that other load on shared cores does not count; the wall-clock rates are printed per repeat.
 * --only runs one of the two loops (for `perf stat` / `perf record` of one of them: e.g. the
 * libjpeg cycles per image in the process loop against the ceiling's show what the resize's
 * memory traffic costs the decoder through the caches).
 * --interleave: per image, the ceiling and the process call one after the other (in turns which
 * goes first), each timed on its own: load that comes and goes on shared cores then falls on both
 * alike (a repeat of each loop takes seconds; with the loops apart, a burst of load can land on
 * one of them). The per-repeat figures are then the sums over the images.
 */
#include "augment.h"
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This thread's CPU time: robust when other processes share the cores (the wall clock is not). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct img {
    uint8_t *data;
    size_t len;
} img;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

int main(int argc, char **argv)
{
    const char *list = "/work/data/imagenet-like.manifest.tsv", *root = NULL;
    long limit = 0;
    int repeats = 3, size = 224, eval = 0, full = 0, only = 0; /* only: 1 ceiling, 2 process */
    int interleave = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list") && i + 1 < argc)
            list = argv[++i];
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            root = argv[++i];
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc)
            limit = atol(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--eval"))
            eval = 1;
        else if (!strcmp(argv[i], "--full"))
            full = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc && !strcmp(argv[i + 1], "ceiling"))
            only = 1, i++;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc && !strcmp(argv[i + 1], "process"))
            only = 2, i++;
        else if (!strcmp(argv[i], "--interleave"))
            interleave = 1;
        else {
            fprintf(stderr, "usage: decodebench [--list MANIFEST] [--dir ROOT] [--limit N] "
                            "[--repeats R] [--size S] [--eval] [--full] [--only ceiling|process] [--interleave]\n");
            return 2;
        }
    }
    char base[4096];
    if (root) {
        snprintf(base, sizeof base, "%s", root);
    } else { /* MANIFEST x/y.manifest.tsv -> images under x/y */
        snprintf(base, sizeof base, "%s", list);
        char *dot = strstr(base, ".manifest.tsv");
        if (dot)
            *dot = 0;
    }
    FILE *f = fopen(list, "r");
    if (!f) {
        fprintf(stderr, "decodebench: cannot open %s\n", list);
        return 77;
    }
    size_t cap = 1024, n = 0, bytes = 0;
    img *imgs = malloc(cap * sizeof *imgs);
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab || !strncmp(line, "index", 5))
            continue;
        char *p = tab + 1, *e = strchr(p, '\t');
        if (e)
            *e = 0;
        p[strcspn(p, "\r\n")] = 0;
        char path[8192 + 4096];
        snprintf(path, sizeof path, "%s/%s", base, p);
        if (n == cap)
            imgs = realloc(imgs, (cap *= 2) * sizeof *imgs);
        imgs[n].data = read_all(path, &imgs[n].len);
        if (!imgs[n].data) {
            fprintf(stderr, "decodebench: cannot read %s\n", path);
            return 1;
        }
        bytes += imgs[n].len;
        n++;
        if (limit && (long)n >= limit)
            break;
    }
    fclose(f);
    if (n == 0) {
        fprintf(stderr, "decodebench: no images\n");
        return 1;
    }
    stk__aug_config c;
    stk__aug_config_default(&c);
    c.out_h = c.out_w = size;
    c.mode = eval ? STK_MODE_EVAL : STK_MODE_TRAIN;
    stk__worker_ctx *w;
    stk_decoder *d;
    if (stk__worker_ctx_create(&w) != STK_OK || stk_decoder_create(&d) != STK_OK)
        return 1;
    uint8_t *out = malloc((size_t)size * size * 3);
    /* the windows the ceiling decodes: what stk__process_sample decodes (train: the crop box at
     * scale m; eval: the centre window plus the filter support, approximated by the window) */
    typedef struct plan { int m, sx, sy, sw, sh; } plan;
    plan *pl = malloc(n * sizeof *pl);
    long scales[9] = {0};
    for (size_t i = 0; i < n; i++) {
        int W, H;
        char err[STK__ERRLEN];
        if (stk__dec_header(d, imgs[i].data, imgs[i].len, c.max_pixels, &W, &H, NULL, err) != STK_OK) {
            fprintf(stderr, "decodebench: image %zu: %s\n", i, err);
            return 1;
        }
        stk__crop cr;
        stk__crop_params(&c, 0, 0, i, W, H, &cr);
        int m = stk__plan_scale(&c, &cr, W, H);
        int ws = stk__scaled(W, m), hs = stk__scaled(H, m);
        int x0 = cr.x * m / 8, y0 = cr.y * m / 8;
        int x1 = STK__MIN(ws, ((cr.x + cr.w) * m + 7) / 8), y1 = STK__MIN(hs, ((cr.y + cr.h) * m + 7) / 8);
        pl[i] = (plan){m, x0, y0, x1 - x0, y1 - y0};
        scales[m]++;
    }
    double *tc = calloc((size_t)repeats, sizeof(double)), *tp = calloc((size_t)repeats, sizeof(double));
    double *tf = calloc((size_t)repeats, sizeof(double));
    long warn_total = 0;
    for (int r = 0; interleave && r < repeats; r++) {
        double c_sum = 0, p_sum = 0;
        for (size_t i = 0; i < n; i++) {
            char err[STK__ERRLEN];
            const uint8_t *px;
            size_t stride;
            int warn;
            for (int k = 0; k < 2; k++) {
                double a = cpu_now();
                if (((i + (size_t)r + (size_t)k) & 1) == 0) {
                    if (stk__dec_header(d, imgs[i].data, imgs[i].len, c.max_pixels, NULL, NULL, NULL, err) != STK_OK ||
                        stk__dec_window(d, pl[i].m, pl[i].sx, pl[i].sy, pl[i].sw, pl[i].sh, 0, &px, &stride, &warn,
                                        err) != STK_OK) {
                        fprintf(stderr, "decodebench: image %zu: %s\n", i, err);
                        return 1;
                    }
                    c_sum += cpu_now() - a;
                } else {
                    if (stk__process_sample(w, &c, 0, 0, i, imgs[i].data, imgs[i].len, out, &warn, err) != STK_OK) {
                        fprintf(stderr, "decodebench: image %zu: %s\n", i, err);
                        return 1;
                    }
                    warn_total += warn;
                    p_sum += cpu_now() - a;
                }
            }
        }
        tc[r] = c_sum, tp[r] = p_sum;
        fprintf(stderr, "repeat %d (interleaved): ceiling %.0f img/s, process %.0f img/s (CPU time)\n", r + 1,
                n / tc[r], n / tp[r]);
    }
    for (int r = 0; !interleave && r < repeats; r++) {
        double w0 = stk__now();
        double t0 = cpu_now();
        for (size_t i = 0; only != 2 && i < n; i++) {
            char err[STK__ERRLEN];
            const uint8_t *px;
            size_t stride;
            int warn;
            if (stk__dec_header(d, imgs[i].data, imgs[i].len, c.max_pixels, NULL, NULL, NULL, err) != STK_OK ||
                stk__dec_window(d, pl[i].m, pl[i].sx, pl[i].sy, pl[i].sw, pl[i].sh, 0, &px, &stride, &warn, err) != STK_OK) {
                fprintf(stderr, "decodebench: image %zu: %s\n", i, err);
                return 1;
            }
        }
        double t1 = cpu_now(), w1 = stk__now();
        for (size_t i = 0; only != 1 && i < n; i++) {
            char err[STK__ERRLEN];
            int warn;
            if (stk__process_sample(w, &c, 0, 0, i, imgs[i].data, imgs[i].len, out, &warn, err) != STK_OK) {
                fprintf(stderr, "decodebench: image %zu: %s\n", i, err);
                return 1;
            }
            warn_total += warn;
        }
        double t2 = cpu_now(), w2 = stk__now();
        for (size_t i = 0; full && i < n; i++) {
            char err[STK__ERRLEN];
            const uint8_t *px;
            size_t stride;
            int W, H, warn;
            if (stk__dec_header(d, imgs[i].data, imgs[i].len, c.max_pixels, &W, &H, NULL, err) != STK_OK ||
                stk__dec_window(d, 8, 0, 0, W, H, 0, &px, &stride, &warn, err) != STK_OK)
                return 1;
        }
        double t3 = cpu_now(), w3 = stk__now();
        tc[r] = t1 - t0, tp[r] = t2 - t1, tf[r] = t3 - t2;
        fprintf(stderr, "repeat %d: ceiling %.0f img/s, process %.0f img/s (CPU time; wall clock: %.0f, %.0f)\n",
                r + 1, n / tc[r], n / tp[r], n / (w1 - w0), n / (w2 - w1));
        STK__UNUSED(w3);
    }
    double ratio_sum[64];
    for (int r = 0; r < repeats; r++)
        ratio_sum[r % 64] = tp[r] / tc[r];
    qsort(tc, (size_t)repeats, sizeof(double), cmp_double);
    qsort(tp, (size_t)repeats, sizeof(double), cmp_double);
    qsort(tf, (size_t)repeats, sizeof(double), cmp_double);
    int nr = repeats < 64 ? repeats : 64;
    qsort(ratio_sum, (size_t)nr, sizeof(double), cmp_double);
    double mc = tc[repeats / 2], mp = tp[repeats / 2], mf = tf[repeats / 2];
    printf("images: %zu (%.1f MB), mode %s, output %dx%d, 1 thread, %d repeats (medians, thread CPU time)\n", n,
           bytes / 1e6, eval ? "eval" : "train", size, size, repeats);
    printf("ceiling (crop-window decode, power-of-two DCT scale, no resize): %8.1f images/s\n", n / mc);
    printf("process (same decode + antialiased resize + flip):               %8.1f images/s\n", n / mp);
    if (full)
        printf("full decode at 8/8 (reference):                                  %8.1f images/s\n", n / mf);
    printf("overhead of process over ceiling: %+.1f%% (median of per-repeat ratios %+.1f%%)\n",
           (mp / mc - 1) * 100, (ratio_sum[nr / 2] - 1) * 100);
    printf("DCT scale of the samples: 1/8 %.2f%%, 2/8 %.2f%%, 4/8 %.2f%%, 8/8 %.2f%%\n",
           100.0 * scales[1] / n, 100.0 * scales[2] / n, 100.0 * scales[4] / n, 100.0 * scales[8] / n);
    printf("libjpeg warnings while processing: %ld\n", warn_total);
    for (size_t i = 0; i < n; i++)
        free(imgs[i].data);
    free(imgs);
    free(pl);
    free(out);
    free(tc);
    free(tp);
    free(tf);
    stk__worker_ctx_destroy(w);
    stk_decoder_destroy(d);
    return 0;
}
