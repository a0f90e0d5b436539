/* SPDX-License-Identifier: MIT */
/*
 * test_loader_formats.c — a raw folder that is not all JPEG (since 0.5): binary PPM (P6) and
 * 24-bit BMP files, written here byte by byte, one of them named .jpg, go through the loader in
 * eval mode at their own size (shorter side = resize, crop = the image): every sample is the
 * file's pixels exactly, with its ImageFolder label, none substituted, no error listed. Also
 * run under ASan+UBSan: the non-JPEG sample path (decode whole, then the window resize).
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "image_in.h"
#include "test_loader_util.h"

#define W 24
#define H 16
#define PER 4

static void put_le(uint8_t *p, uint32_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint8_t *ppm(const uint8_t *rgb, size_t *len)
{
    char head[32];
    int n = snprintf(head, sizeof head, "P6\n%d %d\n255\n", W, H);
    uint8_t *p = malloc((size_t)n + W * H * 3);
    memcpy(p, head, (size_t)n);
    memcpy(p + n, rgb, W * H * 3);
    *len = (size_t)n + W * H * 3;
    return p;
}

static uint8_t *bmp(const uint8_t *rgb, size_t *len)
{
    size_t row = (W * 3 + 3) / 4 * 4, size = 54 + row * H;
    uint8_t *p = calloc(1, size);
    p[0] = 'B';
    p[1] = 'M';
    put_le(p + 2, (uint32_t)size, 4);
    put_le(p + 10, 54, 4);
    put_le(p + 14, 40, 4);
    put_le(p + 18, W, 4);
    put_le(p + 22, H, 4); /* bottom-up */
    put_le(p + 26, 1, 2);
    put_le(p + 28, 24, 2);
    put_le(p + 34, (uint32_t)(row * H), 4);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                p[54 + (size_t)(H - 1 - y) * row + (size_t)x * 3 + (size_t)(2 - c)] = rgb[((size_t)y * W + (size_t)x) * 3 + (size_t)c];
    *len = size;
    return p;
}

int main(void)
{
    if (!stk__img_can_decode(STK__IMG_BMP)) {
        printf("skip: this build has no BMP decoder\n");
        return 77;
    }
    char *dir = t_tmpdir("loaderformats");
    char root[4200], path[4400];
    snprintf(root, sizeof root, "%s/folder", dir);
    uint8_t *want[2 * PER];
    /* class a: PPMs (the last named .jpg); class b: BMPs; ImageFolder order is a then b, by name */
    for (int k = 0; k < 2 * PER; k++) {
        want[k] = malloc(W * H * 3);
        t_make_rgb(want[k], W, H, 77 + (uint64_t)k);
        size_t len;
        uint8_t *data = k < PER ? ppm(want[k], &len) : bmp(want[k], &len);
        snprintf(path, sizeof path, "%s/%c", root, k < PER ? 'a' : 'b');
        t_mkdirs(path);
        snprintf(path, sizeof path, "%s/%c/img%d.%s", root, k < PER ? 'a' : 'b', k,
                 k == PER - 1 ? "jpg" : k < PER ? "ppm" : "bmp");
        t_write_file(path, data, len);
        free(data);
    }
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 3));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(h, STK_P_MODE, STK_MODE_EVAL));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_set(h, STK_P_RESIZE, H));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, H));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, W));
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, STK_NHWC));
    T_OK(stk_loader_open(h, root));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    T_CHECK(tl_run(h, &e, -1) == STK_END && e.n == 2 * PER, "epoch: %s", stk_loader_last_error(h));
    T_CHECK(stk_loader_error_count(h) == 0, "no bad record");
    for (size_t i = 0; i < e.n; i++) {
        T_CHECK(!e.subst[i] && e.index[i] == i && e.label[i] == (i < PER ? 0 : 1), "sample %zu: label %d", i,
                e.label[i]);
        T_CHECK(e.sample_bytes == W * H * 3 && memcmp(e.images + i * e.sample_bytes, want[i], W * H * 3) == 0,
                "sample %zu is the file's pixels", i);
    }
    tl_epoch_free(&e);
    stk_loader_destroy(h);
    for (int k = 0; k < 2 * PER; k++)
        free(want[k]);
    t_rmtree(dir);
    free(dir);
    printf("test_loader_formats: ok\n");
    return 0;
}
