/* SPDX-License-Identifier: MIT */
/*
 * synth.c — loaderbench's embedded default: a small ImageNet-like sample it makes itself.
 *
 * Why procedural and not a few tiled photos: decode cost depends on the entropy of the scan
 * (Huffman decoding dominates at quality ~90), so the sample must compress like photographs do —
 * roughly 2–5 bits per pixel — or the benchmark flatters the decoder. Each image is a smooth
 * two-colour gradient ("sky to ground") lit by multi-octave value noise (cells of 96 px down to
 * 3 px: clouds, foliage, grain), a handful of shaded ellipses and rotated boxes with
 * anti-aliased edges carrying their own texture contrast, and a little per-pixel sensor noise.
 * Sizes follow ImageNet (longer side mostly 500 px, 333–500, landscape/portrait/square mix);
 * quality 85–95 (mean ~90); 4:2:0 mostly, some 4:4:4 and 4:2:2, a few grayscale, ~10%
 * progressive. Everything is a pure function of (seed, image index), so two machines build the
 * same bytes, and the sample is cached: built once into the cache directory, packed with
 * stk_pack into shards beside it, and reused while both are complete.
 */
#include "lb.h"

#include <errno.h>
#include <jpeglib.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LB_SYNTH_VERSION 1
#define LB_SYNTH_CLASSES 20
#define LB_SHARD_BYTES (24u << 20)

/* ---- deterministic randomness ---- */

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_u64(rng *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return mix64(r->s);
}
/* Uniform in [0, 1). */
static double rng_unit(rng *r) { return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }
static double rng_range(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_unit(r); }
static int rng_int(rng *r, int lo, int hi) { return lo + (int)(rng_unit(r) * (double)(hi - lo + 1)); }

/* ---- the picture ---- */

#define MAX_SHAPES 9

typedef struct shape {
    int kind; /* 0 ellipse, 1 rotated box */
    double cx, cy, a, b, cs, sn;
    double col[3], shade[3];
    double contrast;
    double stripe, stripe_amp;
    double ia2, ib2, ib; /* 1/a², 1/b², 1/b */
    double qin, qout;    /* ellipse: q below qin is fully inside, above qout fully outside */
    int x0, x1, y0, y1; /* bounding box */
} shape;

static float smooth(float t) { return t * t * (3.0f - 2.0f * t); }

/* Value-noise textures shared by every image: a low band (lattice cells of 96..12 px: clouds,
 * hills, foliage masses) and a high band (6 and 3 px: leaves, grain). Each image reads both at
 * its own offsets and weights, so the per-pixel cost is two loads instead of six octaves. */
#define ATLAS 1024
static float *g_lo, *g_hi;
static pthread_once_t g_atlas_once = PTHREAD_ONCE_INIT;

static void add_octave(float *dst, int cell, float amp, rng *r)
{
    int g = ATLAS / cell + 2;
    float *grid = malloc(sizeof(float) * (size_t)g * (size_t)g);
    if (!grid)
        return;
    for (int i = 0; i < g * g; i++)
        grid[i] = (float)(rng_unit(r) * 2.0 - 1.0);
    for (int y = 0; y < ATLAS; y++) {
        int y0 = y / cell;
        float fy = smooth((float)(y % cell) / (float)cell);
        for (int x = 0; x < ATLAS; x++) {
            int x0 = x / cell;
            float fx = smooth((float)(x % cell) / (float)cell);
            const float *g0 = grid + (size_t)y0 * (size_t)g + x0, *g1 = g0 + g;
            float top = g0[0] + (g0[1] - g0[0]) * fx, bot = g1[0] + (g1[1] - g1[0]) * fx;
            dst[(size_t)y * ATLAS + x] += amp * (top + (bot - top) * fy);
        }
    }
    free(grid);
}

static void build_atlas(void)
{
    float *lo = calloc((size_t)ATLAS * ATLAS, sizeof(float));
    float *hi = calloc((size_t)ATLAS * ATLAS, sizeof(float));
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return;
    }
    rng r = {0x5EEDA71A5ull};
    static const int lo_cells[4] = {96, 48, 24, 12};
    float amp = 0.55f;
    for (int k = 0; k < 4; k++, amp *= 0.8f)
        add_octave(lo, lo_cells[k], amp, &r);
    add_octave(hi, 6, 0.62f, &r);
    add_octave(hi, 3, 0.5f, &r);
    g_lo = lo;
    g_hi = hi;
}

static uint8_t clamp8f(float v)
{
    if (v < 0.0f)
        return 0;
    if (v > 255.0f)
        return 255;
    return (uint8_t)(v + 0.5f);
}

/* Paint image into RGB (w*h*3). Returns 0, or -1 on allocation failure. */
static int paint(rng *r, uint8_t *rgb, int w, int h)
{
    pthread_once(&g_atlas_once, build_atlas);
    if (!g_lo || !g_hi)
        return -1;
    float *noise = malloc(sizeof(float) * (size_t)w);
    float *px = malloc(sizeof(float) * (size_t)w * 3);
    int rc = -1;
    if (!noise || !px)
        goto out;

    /* texture strength: some images smooth (sky, studio), most busy */
    double busy = rng_unit(r);
    float alo = (float)(22.0 + 38.0 * busy);
    float ahi = alo * (float)pow(rng_range(r, 0.72, 0.92), 4.0) * 1.6f;
    int lox = rng_int(r, 0, ATLAS - w), loy = rng_int(r, 0, ATLAS - h);
    int hix = rng_int(r, 0, ATLAS - w), hiy = rng_int(r, 0, ATLAS - h);

    /* background: gradient between two colours along a random direction */
    double c0[3], c1[3];
    double hue = rng_unit(r);
    for (int c = 0; c < 3; c++) {
        double ph = hue * 6.283 + c * 2.094;
        c0[c] = 120.0 + 90.0 * sin(ph) * rng_range(r, 0.3, 1.0);
        c1[c] = 90.0 + 80.0 * cos(ph + rng_range(r, -1.0, 1.0));
    }
    double ang = rng_range(r, -0.6, 0.6);
    double gx = sin(ang) / w, gy = cos(ang) / h;

    int nshapes = rng_int(r, 2, MAX_SHAPES);
    shape sh[MAX_SHAPES];
    for (int s = 0; s < nshapes; s++) {
        shape *p = &sh[s];
        p->kind = rng_unit(r) < 0.6 ? 0 : 1;
        p->cx = rng_range(r, 0.0, w);
        p->cy = rng_range(r, 0.0, h);
        double m = (w < h ? w : h);
        p->a = rng_range(r, 0.06, 0.45) * m;
        p->b = p->a * rng_range(r, 0.3, 1.0);
        p->ia2 = 1.0 / (p->a * p->a);
        p->ib2 = 1.0 / (p->b * p->b);
        p->ib = 1.0 / p->b;
        p->qin = p->b > 0.5 ? (1.0 - 0.5 / p->b) * (1.0 - 0.5 / p->b) : 0.0;
        p->qout = (1.0 + 0.5 / p->b) * (1.0 + 0.5 / p->b);
        double t = rng_range(r, 0.0, 3.14159);
        p->cs = cos(t);
        p->sn = sin(t);
        for (int c = 0; c < 3; c++) {
            p->col[c] = rng_range(r, 20.0, 235.0);
            p->shade[c] = rng_range(r, -60.0, 60.0);
        }
        p->contrast = rng_range(r, 0.2, 1.8);
        /* some shapes carry a striped texture (bark, fur, fabric): period 3..12 px */
        p->stripe = rng_unit(r) < 0.5 ? rng_range(r, 1.0 / 12.0, 1.0 / 3.0) : 0.0;
        p->stripe_amp = rng_range(r, 10.0, 40.0);
        /* bounding box (the rotated extent, plus one pixel of edge) */
        double ex = fabs(p->a * p->cs) + fabs(p->b * p->sn) + 2.0;
        double ey = fabs(p->a * p->sn) + fabs(p->b * p->cs) + 2.0;
        if (p->kind == 0) {
            ex = sqrt(p->a * p->a * p->cs * p->cs + p->b * p->b * p->sn * p->sn) * 1.27 + 2.0;
            ey = sqrt(p->a * p->a * p->sn * p->sn + p->b * p->b * p->cs * p->cs) * 1.27 + 2.0;
        }
        p->x0 = (int)floor(p->cx - ex);
        p->x1 = (int)ceil(p->cx + ex);
        p->y0 = (int)floor(p->cy - ey);
        p->y1 = (int)ceil(p->cy + ey);
        if (p->x0 < 0)
            p->x0 = 0;
        if (p->x1 > w - 1)
            p->x1 = w - 1;
    }
    double grain = rng_range(r, 6.0, 14.0) * (0.5 + busy);
    uint64_t gseed = rng_u64(r);
    float fg = (float)(grain * 2.0 / 256.0), fcg = (float)(grain * 0.6 / 128.0);

    for (int y = 0; y < h; y++) {
        const float *lrow = g_lo + (size_t)(y + loy) * ATLAS + lox;
        const float *hrow = g_hi + (size_t)(y + hiy) * ATLAS + hix;
        for (int x = 0; x < w; x++)
            noise[x] = alo * lrow[x] + ahi * hrow[x];
        /* background row */
        float t0 = (float)(0.5 + (-w / 2) * gx + (y - h / 2) * gy), dt = (float)gx;
        for (int x = 0; x < w; x++) {
            float t = t0 + dt * (float)x;
            for (int c = 0; c < 3; c++)
                px[x * 3 + c] = (float)c0[c] + (float)(c1[c] - c0[c]) * t;
        }
        /* shapes, back to front, only inside their boxes */
        for (int s = 0; s < nshapes; s++) {
            const shape *p = &sh[s];
            if (y < p->y0 || y > p->y1)
                continue;
            float dy = (float)(y - p->cy), dx0 = (float)(p->x0 - p->cx);
            float cs = (float)p->cs, sn = (float)p->sn;
            float u = dx0 * cs + dy * sn, v = -dx0 * sn + dy * cs;
            float ia2 = (float)p->ia2, ib2 = (float)p->ib2, pa = (float)p->a, pb = (float)p->b;
            float qin = (float)p->qin, qout = (float)p->qout, ib = (float)p->ib;
            float contrast = (float)p->contrast - 1.0f, stripe = (float)p->stripe, samp = (float)p->stripe_amp;
            float col[3] = {(float)p->col[0], (float)p->col[1], (float)p->col[2]};
            float shade[3] = {(float)p->shade[0], (float)p->shade[1], (float)p->shade[2]};
            for (int x = p->x0; x <= p->x1; x++, u += cs, v -= sn) {
                float cov; /* coverage of the pixel by the shape, anti-aliased over ~1 px */
                if (p->kind == 0) {
                    float q = u * u * ia2 + v * v * ib2;
                    if (q >= qout)
                        continue;
                    cov = q <= qin ? 1.0f : 0.5f - (sqrtf(q) - 1.0f) * pb;
                } else {
                    float du = fabsf(u) - pa, dv = fabsf(v) - pb;
                    cov = 0.5f - (du > dv ? du : dv);
                }
                if (cov <= 0.0f)
                    continue;
                if (cov > 1.0f)
                    cov = 1.0f;
                float lit = v * ib * 0.5f;
                float tex = noise[x] * contrast;
                if (stripe > 0.0f) {
                    float f = u * stripe + noise[x] * 0.02f + 4096.0f; /* positive: (int) floors */
                    tex += samp * (fabsf(f - (float)(int)f - 0.5f) * 4.0f - 1.0f);
                }
                float *q3 = px + x * 3;
                for (int c = 0; c < 3; c++)
                    q3[c] += (col[c] + shade[c] * lit + tex - q3[c]) * cov;
            }
        }
        uint8_t *out = rgb + (size_t)y * (size_t)w * 3;
        /* sensor grain: a xorshift stream per row, one 32-bit draw per pixel */
        uint32_t xs = (uint32_t)mix64(gseed + (uint64_t)y) | 1u;
        for (int x = 0; x < w; x++) {
            xs ^= xs << 13;
            xs ^= xs >> 17;
            xs ^= xs << 5;
            float base = noise[x] + (float)((int)(xs & 0xff) - 128) * fg;
            for (int c = 0; c < 3; c++) {
                float cg = (float)((int)((xs >> (8 + 8 * c)) & 0xff) - 128) * fcg;
                out[x * 3 + c] = clamp8f(px[x * 3 + c] + base + cg);
            }
        }
    }
    rc = 0;
out:
    free(noise);
    free(px);
    return rc;
}

/* ---- libjpeg encoding ---- */

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} jerr;

static void jerr_exit(j_common_ptr c)
{
    jerr *e = (jerr *)c->err;
    longjmp(e->jb, 1);
}

static void jerr_quiet(j_common_ptr c, int level)
{
    (void)c;
    (void)level;
}

enum { SS_420, SS_444, SS_422, SS_GRAY };

/* Encode: returns malloc'd JPEG or NULL. RGB is modified for grayscale (converted in place). */
static uint8_t *encode(uint8_t *rgb, int w, int h, int ss, int quality, int progressive,
                       int optimize, size_t *len)
{
    struct jpeg_compress_struct ci;
    jerr e;
    unsigned char *volatile buf = NULL;
    unsigned long size = 0;
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jerr_exit;
    e.pub.emit_message = jerr_quiet;
    if (setjmp(e.jb)) {
        jpeg_destroy_compress(&ci);
        free(buf);
        return NULL;
    }
    jpeg_create_compress(&ci);
    unsigned char *mb = NULL;
    jpeg_mem_dest(&ci, &mb, &size);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    if (ss == SS_GRAY) {
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
            const uint8_t *p = rgb + i * 3;
            rgb[i] = (uint8_t)((p[0] * 77 + p[1] * 150 + p[2] * 29 + 128) >> 8);
        }
        ci.input_components = 1;
        ci.in_color_space = JCS_GRAYSCALE;
    } else {
        ci.input_components = 3;
        ci.in_color_space = JCS_RGB;
    }
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    if (ss != SS_GRAY) {
        ci.comp_info[0].h_samp_factor = ss == SS_444 ? 1 : 2;
        ci.comp_info[0].v_samp_factor = ss == SS_420 ? 2 : 1;
        ci.comp_info[1].h_samp_factor = ci.comp_info[1].v_samp_factor = 1;
        ci.comp_info[2].h_samp_factor = ci.comp_info[2].v_samp_factor = 1;
    }
    ci.optimize_coding = optimize ? TRUE : FALSE;
    if (progressive)
        jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    int stride = ss == SS_GRAY ? w : w * 3;
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = rgb + (size_t)ci.next_scanline * (size_t)stride;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    buf = mb;
    jpeg_destroy_compress(&ci);
    *len = size;
    return buf;
}

uint8_t *lb_synth_jpeg(uint64_t seed, uint64_t i, size_t *len, int *wp, int *hp)
{
    rng r = {mix64(seed * 0x100000001B3ull + i + 1) ^ (uint64_t)LB_SYNTH_VERSION};
    /* ImageNet-like geometry: the longer side is mostly 500 */
    int longer = rng_unit(&r) < 0.6 ? 500 : rng_int(&r, 333, 500);
    double a = rng_unit(&r);
    double aspect = a < 0.55 ? 4.0 / 3.0 : a < 0.75 ? 3.0 / 2.0 : a < 0.85 ? 1.0 : a < 0.92 ? 16.0 / 9.0 : 5.0 / 4.0;
    int shorter = (int)(longer / aspect + 0.5);
    int portrait = rng_unit(&r) < 0.22;
    int w = portrait ? shorter : longer, h = portrait ? longer : shorter;
    double m = rng_unit(&r);
    int ss = m < 0.80 ? SS_420 : m < 0.90 ? SS_444 : m < 0.97 ? SS_422 : SS_GRAY;
    int quality = rng_int(&r, 85, 95);
    int progressive = rng_unit(&r) < 0.10;
    int optimize = rng_unit(&r) < 0.3;
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    if (!rgb)
        return NULL;
    uint8_t *jpg = NULL;
    if (paint(&r, rgb, w, h) == 0)
        jpg = encode(rgb, w, h, ss, quality, progressive, optimize, len);
    free(rgb);
    if (wp)
        *wp = w;
    if (hp)
        *hp = h;
    return jpg;
}

/* ---- building the cached sample ---- */

typedef struct synth_job {
    const char *folder;
    uint64_t seed;
    int count;
    atomic_int next;
    atomic_int done;
    atomic_ullong bytes;
    atomic_int failed;
    char err[512];
    pthread_mutex_t mu;
} synth_job;

static void class_dir(char *buf, size_t cap, const char *folder, int cls)
{
    snprintf(buf, cap, "%s/n%05d", folder, cls);
}

static void *synth_thread(void *arg)
{
    synth_job *j = arg;
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->count || atomic_load(&j->failed))
            break;
        size_t len = 0;
        uint8_t *jpg = lb_synth_jpeg(j->seed, (uint64_t)i, &len, NULL, NULL);
        char dir[4200], path[4300];
        class_dir(dir, sizeof dir, j->folder, i % LB_SYNTH_CLASSES);
        snprintf(path, sizeof path, "%s/%08d.JPEG", dir, i);
        int ok = 0;
        if (jpg) {
            FILE *f = fopen(path, "wb");
            if (f) {
                ok = fwrite(jpg, 1, len, f) == len;
                ok = (fclose(f) == 0) && ok;
            }
        }
        free(jpg);
        if (!ok) {
            pthread_mutex_lock(&j->mu);
            if (!atomic_load(&j->failed))
                snprintf(j->err, sizeof j->err, "cannot write %.400s: %s", path,
                         jpg ? strerror(errno) : "JPEG encoding failed");
            atomic_store(&j->failed, 1);
            pthread_mutex_unlock(&j->mu);
            break;
        }
        atomic_fetch_add(&j->bytes, len);
        atomic_fetch_add(&j->done, 1);
    }
    return NULL;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Build the ImageFolder (the marker file says it is complete). */
static int build_folder(const lb_config *cfg, const char *folder)
{
    char marker[4200];
    snprintf(marker, sizeof marker, "%s/.loaderbench-complete", folder);
    if (file_exists(marker))
        return 0;
    if (lb_mkdirs(folder) != 0) {
        fprintf(stderr, "loaderbench: cannot create %s: %s\n", folder, strerror(errno));
        return -1;
    }
    for (int c = 0; c < LB_SYNTH_CLASSES; c++) {
        char dir[4200];
        class_dir(dir, sizeof dir, folder, c);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "loaderbench: cannot create %s: %s\n", dir, strerror(errno));
            return -1;
        }
    }
    synth_job j;
    memset(&j, 0, sizeof j);
    j.folder = folder;
    j.seed = cfg->seed;
    j.count = cfg->sample_images;
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    atomic_init(&j.bytes, 0);
    atomic_init(&j.failed, 0);
    pthread_mutex_init(&j.mu, NULL);
    int nt = cfg->cores < 1 ? 1 : cfg->cores > 16 ? 16 : cfg->cores;
    pthread_t th[16];
    int started = 0;
    double t0 = lb_now();
    for (int t = 0; t < nt; t++) {
        if (pthread_create(&th[t], NULL, synth_thread, &j) != 0)
            break;
        started++;
    }
    if (started == 0)
        synth_thread(&j);
    for (;;) {
        int d = atomic_load(&j.done);
        if (d >= j.count || atomic_load(&j.failed))
            break;
        char hb[32];
        lb_progress(cfg, 0, "synthesising the default sample: %d/%d JPEGs, %s", d, j.count,
                    lb_human_bytes(atomic_load(&j.bytes), hb, sizeof hb));
        usleep(200000);
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.mu);
    if (atomic_load(&j.failed)) {
        lb_progress(cfg, 1, "%s", "");
        fprintf(stderr, "loaderbench: %s\n", j.err);
        return -1;
    }
    char hb[32];
    lb_progress(cfg, 1, "synthesised %d JPEGs (%s, mean %.0f KB) in %.1f s into %s", j.count,
                lb_human_bytes(atomic_load(&j.bytes), hb, sizeof hb),
                (double)atomic_load(&j.bytes) / j.count / 1024.0, lb_now() - t0, folder);
    FILE *f = fopen(marker, "w");
    if (!f || fprintf(f, "loaderbench default sample v%d: %d images, seed %llu\n", LB_SYNTH_VERSION,
                      j.count, (unsigned long long)cfg->seed) < 0) {
        if (f)
            fclose(f);
        fprintf(stderr, "loaderbench: cannot write %s: %s\n", marker, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

static void pack_progress(const stk_pack_progress *p, void *user)
{
    const lb_config *cfg = user;
    char a[32], b[32];
    lb_progress(cfg, 0, "packing into shards: %llu/%llu files, %s of %s",
                (unsigned long long)p->files_done, (unsigned long long)p->files_total,
                lb_human_bytes(p->bytes_done, a, sizeof a), lb_human_bytes(p->bytes_total, b, sizeof b));
}

/* Records in a complete dataset at PATH, or -1 (missing, incomplete, unreadable). */
static int64_t complete_records(const char *path)
{
    stk_dataset *d = NULL;
    int64_t n = -1;
    if (stk_dataset_create(&d) != STK_OK)
        return -1;
    if (stk_dataset_set(d, STK_P_LAYOUT, STK_LAYOUT_SHARDS) == STK_OK && stk_dataset_open(d, path) == STK_OK)
        n = (int64_t)stk_dataset_count(d);
    stk_dataset_destroy(d);
    return n;
}

int lb_ensure_packed(const lb_config *cfg, const char *src, const char *dst, uint64_t expect)
{
    int64_t have = complete_records(dst);
    if (have > 0 && (expect == 0 || (uint64_t)have == expect))
        return 0;
    char errbuf[1024] = "";
    stk_pack_options o;
    memset(&o, 0, sizeof o);
    o.shard_bytes = LB_SHARD_BYTES;
    o.threads = 0;
    o.progress = pack_progress;
    o.progress_user = (void *)cfg;
    o.error = errbuf;
    o.error_cap = sizeof errbuf;
    /* a complete dataset of the wrong size is replaced; an interrupted one is finished */
    o.force = have > 0;
    stk_pack_result res;
    memset(&res, 0, sizeof res);
    double t0 = lb_now();
    int rc = stk_pack(src, dst, &o, &res);
    if (rc == STK_E_EXISTS && !o.force) {
        o.force = 1;
        rc = stk_pack(src, dst, &o, &res);
    }
    if (rc != STK_OK) {
        lb_progress(cfg, 1, "%s", "");
        fprintf(stderr, "loaderbench: packing %s into %s failed: %s%s%s\n", src, dst, stk_strerror(rc),
                errbuf[0] ? ": " : "", errbuf);
        return -1;
    }
    char hb[32];
    lb_progress(cfg, 1, "packed %llu records (%s) into %llu shards in %.1f s: %s%s",
                (unsigned long long)res.records, lb_human_bytes(res.payload_bytes, hb, sizeof hb),
                (unsigned long long)res.shards, lb_now() - t0, dst,
                res.skipped ? " (some source files skipped: see pack-report.tsv)" : "");
    return 0;
}

int lb_default_dataset(const lb_config *cfg, lb_dataset *ds)
{
    char base[4096];
    snprintf(base, sizeof base, "%s/loaderbench-default-v%d-n%d-s%llu", cfg->cache_dir, LB_SYNTH_VERSION,
             cfg->sample_images, (unsigned long long)cfg->seed);
    if (strlen(base) > 4000) {
        fprintf(stderr, "loaderbench: cache path too long: %s\n", cfg->cache_dir);
        return -1;
    }
    snprintf(ds->folder, sizeof ds->folder, "%s/imagefolder", base);
    snprintf(ds->shards, sizeof ds->shards, "%s/shards", base);
    snprintf(ds->path, sizeof ds->path, "%s", ds->shards);
    ds->kind = LB_KIND_DEFAULT;
    if (build_folder(cfg, ds->folder) != 0)
        return -1;
    if (lb_ensure_packed(cfg, ds->folder, ds->shards, (uint64_t)cfg->sample_images) != 0)
        return -1;
    return 0;
}
