/* SPDX-License-Identifier: MIT */
/* stk-aug — the decode/augment/convert internals as a command line, for the Python tests that
 * compare them with Pillow, torchvision and NumPy.
 *
 *   stk-aug decode FILE OUT [X Y W H M]     RGB HWC bytes to OUT; prints "status w h warnings"
 *   stk-aug crops N W H SEED EPOCH SMIN SMAX RMIN RMAX FLIP OUT
 *                                           int32 x,y,w,h,flip,fallback per index 0..N-1 to OUT
 *   stk-aug process MODE OH OW RESIZE DCT SEED EPOCH LIST OUT [INTERP [RH RW [PASSES]]]
 *                                           MODE train|eval; LIST: one image path per line (its
 *                                           line number is the sample index); OUT: OH*OW*3 bytes
 *                                           per image; prints "index status m x y w h flip" lines;
 *                                           INTERP: STK_INTERP_* [0]; RH RW: eval's Resize((h, w))
 *                                           (0 0: off); PASSES: STK_RESIZE_PASSES_* [0]
 *   stk-aug convert IN H W DTYPE LAYOUT NORM M0 M1 M2 S0 S1 S2 OUT
 *                                           IN: H*W*3 uint8 HWC; DTYPE 0..3 (STK_DTYPE_*),
 *                                           LAYOUT 0 NCHW / 1 NHWC
 *   stk-aug f16|bf16 IN OUT                 float32 array -> uint16 bit patterns
 */
#include "testutil.h"
#include "augment.h"
#include "convert.h"

#include <string.h>

static uint8_t *slurp(const char *p, size_t *len)
{
    uint8_t *b = t_read_file(p, len);
    if (!b) {
        fprintf(stderr, "stk-aug: cannot read %s\n", p);
        exit(2);
    }
    return b;
}

static int cmd_decode(int argc, char **argv)
{
    size_t len;
    uint8_t *j = slurp(argv[0], &len);
    stk_decode_args a = {0};
    if (argc >= 7) {
        a.crop_x = atoi(argv[2]), a.crop_y = atoi(argv[3]), a.crop_w = atoi(argv[4]);
        a.crop_h = atoi(argv[5]), a.scale_num = atoi(argv[6]);
    }
    int w = 0, h = 0, warn = 0;
    stk_decoder *d;
    T_OK(stk_decoder_create(&d));
    int rc = stk_decode(d, j, len, &a, NULL, 0, &w, &h, &warn);
    uint8_t *out = NULL;
    if (rc == STK_E_RANGE) {
        out = malloc((size_t)w * h * 3 + 1);
        rc = stk_decode(d, j, len, &a, out, (size_t)w * h * 3, &w, &h, &warn);
    }
    if (rc == STK_OK)
        t_write_file(argv[1], out, (size_t)w * h * 3);
    printf("%s %d %d %d %s\n", stk_status_name(rc), w, h, warn, rc ? stk_decoder_last_error(d) : "");
    free(out);
    free(j);
    stk_decoder_destroy(d);
    return 0;
}

static int cmd_crops(char **argv)
{
    long n = atol(argv[0]);
    int W = atoi(argv[1]), H = atoi(argv[2]);
    stk__aug_config c;
    stk__aug_config_default(&c);
    uint64_t seed = strtoull(argv[3], NULL, 10), epoch = strtoull(argv[4], NULL, 10);
    c.scale_min = atof(argv[5]), c.scale_max = atof(argv[6]);
    c.ratio_min = atof(argv[7]), c.ratio_max = atof(argv[8]);
    c.flip_prob = atof(argv[9]);
    int32_t *o = malloc((size_t)n * 6 * sizeof(int32_t));
    for (long i = 0; i < n; i++) {
        stk__crop cr;
        stk__crop_params(&c, seed, epoch, (uint64_t)i, W, H, &cr);
        int32_t *p = o + i * 6;
        p[0] = cr.x, p[1] = cr.y, p[2] = cr.w, p[3] = cr.h, p[4] = cr.flip, p[5] = cr.fallback;
    }
    t_write_file(argv[10], o, (size_t)n * 6 * sizeof(int32_t));
    free(o);
    return 0;
}

static int cmd_process(int argc, char **argv)
{
    stk__aug_config c;
    stk__aug_config_default(&c);
    if (argc >= 10)
        c.interp = atoi(argv[9]);
    if (argc >= 12)
        c.resize_h = atoi(argv[10]), c.resize_w = atoi(argv[11]);
    if (argc >= 13)
        c.passes = atoi(argv[12]);
    c.mode = strcmp(argv[0], "eval") == 0 ? STK_MODE_EVAL : STK_MODE_TRAIN;
    c.out_h = atoi(argv[1]), c.out_w = atoi(argv[2]), c.resize = atoi(argv[3]);
    c.dct_scaling = atoi(argv[4]);
    uint64_t seed = strtoull(argv[5], NULL, 10), epoch = strtoull(argv[6], NULL, 10);
    FILE *list = fopen(argv[7], "r");
    FILE *out = fopen(argv[8], "wb");
    if (!list || !out) {
        fprintf(stderr, "stk-aug: cannot open %s or %s\n", argv[7], argv[8]);
        return 2;
    }
    stk__worker_ctx *w;
    T_OK(stk__worker_ctx_create(&w));
    size_t n = (size_t)c.out_h * c.out_w * 3;
    uint8_t *img = malloc(n);
    char line[4096];
    uint64_t index = 0;
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\r\n")] = 0;
        size_t len;
        uint8_t *j = slurp(line, &len);
        char err[STK__ERRLEN] = "";
        int warn = 0, m = 0;
        stk__crop cr = {0};
        int W, H;
        if (stk_image_info(j, len, &W, &H, NULL) == STK_OK) {
            stk__crop_params(&c, seed, epoch, index, W, H, &cr);
            m = stk__plan_scale(&c, &cr, W, H);
        }
        int rc = stk__process_sample(w, &c, seed, epoch, index, j, len, img, &warn, err);
        if (rc != STK_OK)
            stk__substitute(&c, img);
        fwrite(img, 1, n, out);
        printf("%llu %s %d %d %d %d %d %d\n", (unsigned long long)index, stk_status_name(rc), m,
               cr.x, cr.y, cr.w, cr.h, cr.flip);
        free(j);
        index++;
    }
    fclose(list);
    fclose(out);
    free(img);
    stk__worker_ctx_destroy(w);
    return 0;
}

static int cmd_convert(char **argv)
{
    size_t len;
    uint8_t *src = slurp(argv[0], &len);
    int h = atoi(argv[1]), w = atoi(argv[2]), dtype = atoi(argv[3]), layout = atoi(argv[4]);
    int norm = atoi(argv[5]);
    float mean[3] = {strtof(argv[6], NULL), strtof(argv[7], NULL), strtof(argv[8], NULL)};
    float std[3] = {strtof(argv[9], NULL), strtof(argv[10], NULL), strtof(argv[11], NULL)};
    if (len != (size_t)h * w * 3 || stk__dtype_size(dtype) == 0) {
        fprintf(stderr, "stk-aug convert: bad sizes\n");
        return 2;
    }
    size_t n = (size_t)h * w * 3 * stk__dtype_size(dtype);
    void *dst = malloc(n);
    stk__convert_sample(src, h, w, dtype, layout, norm, mean, std, dst);
    t_write_file(argv[12], dst, n);
    free(dst);
    free(src);
    return 0;
}

static int cmd_half(int bf, char **argv)
{
    size_t len;
    uint8_t *src = slurp(argv[0], &len);
    size_t n = len / 4;
    uint16_t *o = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, src + 4 * i, 4);
        o[i] = bf ? stk__f32_to_bf16(f) : stk__f32_to_f16(f);
    }
    t_write_file(argv[1], o, n * 2);
    free(o);
    free(src);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "decode") == 0)
        return cmd_decode(argc - 2, argv + 2);
    if (argc == 13 && strcmp(argv[1], "crops") == 0)
        return cmd_crops(argv + 2);
    if ((argc == 11 || argc == 12 || argc == 14 || argc == 15) && strcmp(argv[1], "process") == 0)
        return cmd_process(argc - 2, argv + 2);
    if (argc == 15 && strcmp(argv[1], "convert") == 0)
        return cmd_convert(argv + 2);
    if (argc == 4 && (strcmp(argv[1], "f16") == 0 || strcmp(argv[1], "bf16") == 0))
        return cmd_half(argv[1][0] == 'b', argv + 2);
    fprintf(stderr, "usage: see the comment at the top of tests/tools/stk-aug.c\n");
    return 2;
}
