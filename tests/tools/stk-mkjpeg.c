/* SPDX-License-Identifier: MIT */
/* stk-mkjpeg W H KIND FLAGS QUALITY SEED OUT — write a test JPEG with libjpeg (tests/jpegenc.h):
 * KIND one of 444 422 420 440 411 gray cmyk cmyk-noadobe ycck; FLAGS a sum of 1 progressive,
 * 2 restart marker every MCU row, 4 restart marker every 3 MCUs, 8 EXIF block. Used by the
 * Python decode tests (Pillow as the reference decoder). */
#include "testutil.h"
#include "jpegenc.h"

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: stk-mkjpeg W H KIND FLAGS QUALITY SEED OUT\n");
        return 2;
    }
    int w = atoi(argv[1]), h = atoi(argv[2]), flags = atoi(argv[4]), q = atoi(argv[5]);
    int kind = -1;
    for (int k = 0; k < JE_KINDS; k++)
        if (strcmp(argv[3], je_kind_names[k]) == 0)
            kind = k;
    if (w <= 0 || h <= 0 || kind < 0 || q < 1 || q > 100) {
        fprintf(stderr, "stk-mkjpeg: bad arguments\n");
        return 2;
    }
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    t_make_rgb(rgb, w, h, strtoull(argv[6], NULL, 10));
    size_t len;
    uint8_t *j = je_encode(rgb, w, h, kind, q, flags, &len);
    t_write_file(argv[7], j, len);
    free(j);
    free(rgb);
    return 0;
}
