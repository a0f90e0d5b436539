/* SPDX-License-Identifier: MIT */
/* test_loader_lut: STK_P_LUT. An eval epoch in float32 and in float16 with a table equals the
 * uint8 epoch mapped through the table (value by value, NCHW and NHWC); the start refuses a table
 * with uint8 output, with MEAN/STD, or on the device path; set_floats checks the size and
 * finiteness and (NULL, 0) removes the table. */
#include "test_loader_util.h"

#include "convert.h"

static stk_loader *mk(const char *path, int dtype, int layout, const float *lut)
{
    stk_loader *h = tl_loader(path, 4, 2);
    T_OK(stk_loader_set(h, STK_P_MODE, STK_MODE_EVAL));
    T_OK(stk_loader_set(h, STK_P_RESIZE, 40));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_set(h, STK_P_DTYPE, dtype));
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, layout));
    if (lut)
        T_OK(stk_loader_set_floats(h, STK_P_LUT, lut, 768));
    return h;
}

int main(void)
{
    tl_data d;
    tl_data_make(&d, "lut", 19);
    tl_write(&d);
    float lut[768];
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 256; x++) /* torchvision's order: x / 255, then - mean, then / std */
            lut[256 * c + x] = ((float)x / 255.0f - (0.4f + 0.03f * (float)c)) / (0.22f + 0.01f * (float)c);

    stk_loader *h = mk(d.path, STK_DTYPE_UINT8, STK_NHWC, NULL);
    T_OK(stk_loader_start(h));
    tl_epoch ref;
    T_CHECK(tl_run(h, &ref, -1) == STK_END, "uint8 epoch");
    stk_loader_destroy(h);
    const size_t px = 32 * 32;

    for (int layout = 0; layout < 2; layout++) {
        for (int dt = 0; dt < 2; dt++) {
            int dtype = dt ? STK_DTYPE_FLOAT16 : STK_DTYPE_FLOAT32;
            h = mk(d.path, dtype, layout, lut);
            T_OK(stk_loader_start(h));
            tl_epoch e;
            T_CHECK(tl_run(h, &e, -1) == STK_END, "float epoch");
            T_CHECK(e.n == ref.n, "samples");
            for (size_t i = 0; i < e.n; i++)
                for (size_t p = 0; p < px; p++)
                    for (int c = 0; c < 3; c++) {
                        uint8_t x = ref.images[(i * px + p) * 3 + (size_t)c];
                        size_t at = i * px * 3 + (layout == STK_NCHW ? (size_t)c * px + p : p * 3 + (size_t)c);
                        float want = lut[256 * c + x];
                        if (dtype == STK_DTYPE_FLOAT32) {
                            float got;
                            memcpy(&got, e.images + at * 4, 4);
                            T_CHECK(memcmp(&got, &want, 4) == 0, "sample %zu pixel %zu c %d: %.9g, want %.9g", i, p,
                                    c, (double)got, (double)want);
                        } else {
                            uint16_t got;
                            memcpy(&got, e.images + at * 2, 2);
                            T_CHECK(got == stk__f32_to_f16(want), "f16 sample %zu pixel %zu", i, p);
                        }
                    }
            tl_epoch_free(&e);
            stk_loader_destroy(h);
        }
    }

    /* refusals */
    h = mk(d.path, STK_DTYPE_UINT8, STK_NCHW, lut);
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "a table with uint8 output started");
    stk_loader_destroy(h);
    h = mk(d.path, STK_DTYPE_FLOAT32, STK_NCHW, lut);
    const float m[3] = {1, 2, 3};
    T_OK(stk_loader_set_floats(h, STK_P_MEAN, m, 3));
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "a table with MEAN started");
    stk_loader_destroy(h);
    h = mk(d.path, STK_DTYPE_FLOAT32, STK_NCHW, lut);
    T_OK(stk_loader_set(h, STK_P_DEVICE, 0));
    T_CHECK(stk_loader_start(h) == STK_E_UNSUPPORTED, "a table on the device path started");
    stk_loader_destroy(h);
    h = mk(d.path, STK_DTYPE_FLOAT32, STK_NCHW, NULL);
    T_CHECK(stk_loader_set_floats(h, STK_P_LUT, lut, 767) == STK_E_INVALID, "767 values accepted");
    float bad[768];
    memcpy(bad, lut, sizeof bad);
    bad[700] = 1.0f / 0.0f;
    T_CHECK(stk_loader_set_floats(h, STK_P_LUT, bad, 768) == STK_E_INVALID, "inf accepted");
    T_OK(stk_loader_set_floats(h, STK_P_LUT, lut, 768));
    T_OK(stk_loader_set_floats(h, STK_P_LUT, NULL, 0));
    T_OK(stk_loader_start(h)); /* float32 without table: x as float */
    const stk_batch *b;
    T_OK(stk_loader_next(h, NULL, 20000, &b));
    float v0;
    memcpy(&v0, b->images, 4);
    T_CHECK(v0 == (float)ref.images[0], "table removed: %g vs %u", (double)v0, ref.images[0]);
    T_OK(stk_loader_release(h, b, NULL));
    stk_loader_destroy(h);

    tl_epoch_free(&ref);
    tl_data_free(&d);
    printf("test_loader_lut: ok\n");
    return 0;
}
