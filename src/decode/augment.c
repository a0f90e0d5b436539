/* SPDX-License-Identifier: MIT */
/*
 * augment.c — one sample: its crop (augcrop.c), crop-window decode at a DCT scale, antialiased
 * resize (resample.c) and flip into the sample's uint8 RGB HWC slot. Crops are torchvision's and
 * the resize is Pillow's, byte for byte, so a model sees the pixels torchvision would have given
 * it; only the window the output needs is decoded, so that everything but the decode costs
 * little next to it (measured: docs/PERFORMANCE.md, "decode").
 */
#include "augment.h"

#include "decode.h"
#include "image_in.h"
#include "resample.h"

#include <stdlib.h>
#include <string.h>

/* ---- worker context ---------------------------------------------------------------------------- */

/*
 * The coefficient tables are built first, per call (resample.c); they say exactly which source
 * columns and rows the output needs, and only that window is decoded (train: the crop box; eval:
 * the centre window plus the filter's support). All scratch lives in the worker context and only
 * grows.
 */

struct stk__worker_ctx {
    stk_decoder *dec;
    stk__axis ax, ay;
    uint8_t *tmp;   /* horizontal pass output */
    size_t tmp_cap;
    uint8_t *hs;    /* horizontal pass scratch */
    size_t hs_cap;
    uint8_t *vt;    /* vertical pass output when it runs first */
    size_t vt_cap;
    int32_t *acc;   /* vertical pass accumulators, one row */
    size_t acc_cap;
};

int stk__worker_ctx_create(stk__worker_ctx **out)
{
    *out = NULL;
    stk__worker_ctx *w = calloc(1, sizeof *w);
    if (!w)
        return STK_E_NOMEM;
    int rc = stk_decoder_create(&w->dec);
    if (rc != STK_OK) {
        free(w);
        return rc;
    }
    *out = w;
    return STK_OK;
}

void stk__worker_ctx_destroy(stk__worker_ctx *w)
{
    if (!w)
        return;
    stk_decoder_destroy(w->dec);
    stk__axis_free(&w->ax);
    stk__axis_free(&w->ay);
    free(w->tmp);
    free(w->hs);
    free(w->vt);
    free(w->acc);
    free(w);
}

/* ---- one sample --------------------------------------------------------------------------------- */

/* NEAREST's tables (scale 8/8). Train: the crop box resized to the output, Pillow's
 * resized_crop (crop, then resize the crop). Eval: the whole image resized to resized_w x
 * resized_h, then the centre crop's outputs of it. */
static int plan_nearest(stk__worker_ctx *w, const stk__aug_config *c, const stk__crop *cr, int W, int H)
{
    int ow = c->out_w, oh = c->out_h;
    if (c->mode == STK_MODE_EVAL) {
        int rc = stk__axis_nearest(&w->ax, ow, (double)W / cr->resized_w, cr->off_x, W, 0, cr->resized_w);
        if (rc != STK_OK)
            return rc;
        return stk__axis_nearest(&w->ay, oh, (double)H / cr->resized_h, cr->off_y, H, 0, cr->resized_h);
    }
    int rc = stk__axis_nearest(&w->ax, ow, (double)cr->w / ow, 0, cr->w, cr->x, ow);
    return rc != STK_OK ? rc : stk__axis_nearest(&w->ay, oh, (double)cr->h / oh, 0, cr->h, cr->y, oh);
}

/* The coefficient tables of both axes for crop CR of a W x H image decoded at scale M/8. */
static int plan_axes(stk__worker_ctx *w, const stk__aug_config *c, const stk__crop *cr, int W, int H, int m)
{
    int ws = stk__scaled(W, m), hs = stk__scaled(H, m);
    int ow = c->out_w, oh = c->out_h;
    int rc;
    if (cr->interp == STK_INTERP_NEAREST) /* always at 8/8 (stk__plan_scale) */
        return plan_nearest(w, c, cr, W, H);
    if (c->mode == STK_MODE_EVAL) {
        double sx = ((double)W * m / 8.0) / cr->resized_w, sy = ((double)H * m / 8.0) / cr->resized_h;
        rc = stk__axis_build(&w->ax, cr->interp, ow, 0.0, sx, cr->off_x, ws, 0, cr->resized_w);
        if (rc == STK_OK)
            rc = stk__axis_build(&w->ay, cr->interp, oh, 0.0, sy, cr->off_y, hs, 0, cr->resized_h);
    } else {
        /* the crop box in scaled pixels: [x*m/8, (x+w)*m/8), decoded as the enclosing window */
        int x0 = (int)((int64_t)cr->x * m / 8), y0 = (int)((int64_t)cr->y * m / 8);
        int x1 = STK__MIN(ws, (int)(((int64_t)(cr->x + cr->w) * m + 7) / 8));
        int y1 = STK__MIN(hs, (int)(((int64_t)(cr->y + cr->h) * m + 7) / 8));
        double in0x = (double)((int64_t)cr->x * m % 8) / 8.0, in0y = (double)((int64_t)cr->y * m % 8) / 8.0;
        double sx = m == 8 ? (double)cr->w / ow : ((double)cr->w * m / 8.0) / ow;
        double sy = m == 8 ? (double)cr->h / oh : ((double)cr->h * m / 8.0) / oh;
        rc = stk__axis_build(&w->ax, cr->interp, ow, in0x, sx, 0, x1 - x0, x0, 0);
        if (rc == STK_OK)
            rc = stk__axis_build(&w->ay, cr->interp, oh, in0y, sy, 0, y1 - y0, y0, 0);
    }
    return rc;
}

static _Atomic int fused_allowed = 1;

int stk__aug_set_fused(int enable)
{
    atomic_store_explicit(&fused_allowed, enable ? 1 : 0, memory_order_relaxed);
    return enable ? 1 : 0;
}

/* The horizontal pass of one strip, called by the decoder as the strip's rows come out of
 * libjpeg (stk__dec_window_rows). */
typedef struct hjob {
    stk__worker_ctx *w;
    size_t dstride;
    int flip;
} hjob;

static void h_rows(void *user, const uint8_t *px, size_t stride, int y0, int n)
{
    hjob *j = user;
    stk__resize_h_strip(&j->w->ax, px, stride, y0, n, j->w->tmp, j->dstride, j->flip, j->w->hs);
}

/* Whether Pillow runs the vertical pass first for this sample's resize: Pillow 13 does when the
 * height shrinks by more pixels than twice what the width shrinks by (Pillow's horizontal_first
 * test in ImagingResampleInner); Pillow <= 12 never does. The image Pillow resizes is the crop
 * box in train (torchvision crops, then resizes) and the whole image in eval. NEAREST copies
 * pixels, so its order does not show. */
static int vertical_first(const stk__aug_config *c, const stk__crop *cr, int W, int H)
{
    if (c->passes != STK_RESIZE_PASSES_PILLOW13 || cr->interp == STK_INTERP_NEAREST)
        return 0;
    int eval = c->mode == STK_MODE_EVAL;
    int64_t dw = (int64_t)(eval ? W : cr->w) - (eval ? cr->resized_w : c->out_w);
    int64_t dh = (int64_t)(eval ? H : cr->h) - (eval ? cr->resized_h : c->out_h);
    return dh > 0 && dh > 2 * dw;
}

/* The vertical pass first, over the whole decoded window, into W->vt (rows of the window's
 * width, 32 bytes of slack after the last for the horizontal pass), then the horizontal pass
 * into W->tmp and out. */
static int resize_vh(stk__worker_ctx *w, const uint8_t *px, size_t stride, int xw, int flip, uint8_t *out)
{
    int ow = w->ax.out, oh = w->ay.out;
    size_t vn = (size_t)xw * 3, n = (size_t)ow * 3, ts = stk__tmp_stride(ow);
    if (stk__scratch_reserve((void **)&w->vt, &w->vt_cap, vn * (size_t)oh + 32, 1) != 0 ||
        stk__scratch_reserve((void **)&w->acc, &w->acc_cap, vn, sizeof(int32_t)) != 0 ||
        stk__scratch_reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)stk__tmp_rows(oh), 1) != 0)
        return STK_E_NOMEM;
    memset(w->vt + vn * (size_t)oh, 0, 32);
    stk__resize_v(&w->ay, px, stride, (int)vn, w->vt, w->acc);
    stk__resize_h(&w->ax, w->vt, vn, oh, w->tmp, ts, flip, w->hs);
    for (int y = 0; y < oh; y++)
        memcpy(out + (size_t)y * n, w->tmp + (size_t)y * ts, n);
    return STK_OK;
}

/* A PNG, WebP, GIF, BMP, TIFF or PPM/PGM sample (since 0.5): pack's decoders (image_in.c, Pillow's
 * convert("RGB") pixels) to a whole RGB image, then the crop and resize of a JPEG decoded at 8/8
 * — so a raw folder's sample equals torchvision's on the same file. One allocation per sample
 * (the decoders allocate): these formats are the slow path; pack them for speed. */
static int process_rgb(stk__worker_ctx *w, const stk__aug_config *c, uint64_t seed, uint64_t epoch,
                       uint64_t index, int kind, const uint8_t *data, size_t len, uint8_t *out, char *err)
{
    uint8_t *img = NULL;
    int W = 0, H = 0;
    int rc = stk__img_decode_rgb(kind, data, len, c->max_pixels, &img, &W, &H, err);
    if (rc != STK_OK)
        return rc;
    stk__crop cr;
    stk__crop_params(c, seed, epoch, index, W, H, &cr);
    int ow = c->out_w;
    size_t n = (size_t)ow * 3, ts = stk__tmp_stride(ow);
    if (plan_axes(w, c, &cr, W, H, 8) != STK_OK ||
        stk__scratch_reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)stk__tmp_rows(w->ay.hi - w->ay.lo), 1) != 0 ||
        stk__scratch_reserve((void **)&w->hs, &w->hs_cap, stk__hscratch_size(&w->ax), 1) != 0 ||
        stk__scratch_reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0) {
        free(img);
        return stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
    }
    int xlo = w->ax.lo, ylo = w->ay.lo, xw = w->ax.hi - xlo, yh = w->ay.hi - ylo;
    stk__axis_rebase(&w->ax, xlo);
    stk__axis_rebase(&w->ay, ylo);
    size_t stride = (size_t)W * 3; /* the decoders leave 64 bytes of slack past the last row */
    const uint8_t *px = img + (size_t)ylo * stride + (size_t)xlo * 3;
    rc = STK_OK;
    if (vertical_first(c, &cr, W, H)) {
        if (resize_vh(w, px, stride, xw, cr.flip, out) != STK_OK)
            rc = stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
    } else {
        stk__resize_h(&w->ax, px, stride, yh, w->tmp, ts, cr.flip, w->hs);
        stk__resize_v(&w->ay, w->tmp, ts, (int)n, out, w->acc);
    }
    free(img);
    return rc;
}

int stk__process_sample(stk__worker_ctx *w, const stk__aug_config *c, uint64_t seed, uint64_t epoch,
                        uint64_t index, const uint8_t *data, size_t len, uint8_t *out,
                        int *warnings, char *err)
{
    if (warnings)
        *warnings = 0;
    int W, H;
    int rc = stk__dec_header(w->dec, data, len, c->max_pixels, &W, &H, NULL, err);
    if (rc == STK_E_NOT_JPEG) {
        int kind = stk__img_sniff(data, len);
        if (kind != STK__IMG_UNKNOWN && kind != STK__IMG_JPEG && stk__img_can_decode(kind))
            return process_rgb(w, c, seed, epoch, index, kind, data, len, out, err);
    }
    if (rc != STK_OK)
        return rc;
    stk__crop cr;
    stk__crop_params(c, seed, epoch, index, W, H, &cr);
    int m = stk__plan_scale(c, &cr, W, H);
    int ow = c->out_w;
    size_t n = (size_t)ow * 3, ts = stk__tmp_stride(ow);
    if (plan_axes(w, c, &cr, W, H, m) != STK_OK ||
        stk__scratch_reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)stk__tmp_rows(w->ay.hi - w->ay.lo), 1) != 0 ||
        stk__scratch_reserve((void **)&w->hs, &w->hs_cap, stk__hscratch_size(&w->ax), 1) != 0 ||
        stk__scratch_reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0) {
        stk__dec_header(w->dec, NULL, 0, 1, NULL, NULL, NULL, err); /* reset the decoder */
        return stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
    }
    int xlo = w->ax.lo, ylo = w->ay.lo, xw = w->ax.hi - xlo, yh = w->ay.hi - ylo;
    stk__axis_rebase(&w->ax, xlo);
    stk__axis_rebase(&w->ay, ylo);
    int vfirst = vertical_first(c, &cr, W, H);
    if (!vfirst && atomic_load_explicit(&fused_allowed, memory_order_relaxed)) {
        /* the horizontal pass strip by strip while the rows are in the L1 cache */
        hjob j = {w, ts, cr.flip};
        stk__resize_h_prepare(&w->ax, w->hs, cr.flip);
        rc = stk__dec_window_rows(w->dec, m, xlo, ylo, xw, yh, c->strict, h_rows, &j, warnings, err);
        if (rc != STK_OK)
            return rc;
    } else {
        const uint8_t *px;
        size_t stride;
        rc = stk__dec_window(w->dec, m, xlo, ylo, xw, yh, c->strict, &px, &stride, warnings, err);
        if (rc != STK_OK)
            return rc;
        if (vfirst)
            return resize_vh(w, px, stride, xw, cr.flip, out) == STK_OK
                       ? STK_OK
                       : stk__err(err, STK_E_NOMEM, "out of memory for a %dx%d resize", ow, c->out_h);
        stk__resize_h(&w->ax, px, stride, yh, w->tmp, ts, cr.flip, w->hs);
    }
    stk__resize_v(&w->ay, w->tmp, ts, (int)n, out, w->acc);
    return STK_OK;
}

int stk__resize_rgb(stk__worker_ctx *w, const uint8_t *src, int sw, int sh, size_t stride, uint8_t *dst, int ow,
                    int oh)
{
    if (sw < 1 || sh < 1 || ow < 1 || oh < 1)
        return STK_E_INVALID;
    size_t n = (size_t)ow * 3, ts = stk__tmp_stride(ow);
    if (stk__axis_build(&w->ax, STK_INTERP_BILINEAR, ow, 0.0, (double)sw / ow, 0, sw, 0, 0) != STK_OK ||
        stk__axis_build(&w->ay, STK_INTERP_BILINEAR, oh, 0.0, (double)sh / oh, 0, sh, 0, 0) != STK_OK ||
        stk__scratch_reserve((void **)&w->tmp, &w->tmp_cap, ts * (size_t)stk__tmp_rows(w->ay.hi - w->ay.lo), 1) != 0 ||
        stk__scratch_reserve((void **)&w->hs, &w->hs_cap, stk__hscratch_size(&w->ax), 1) != 0 ||
        stk__scratch_reserve((void **)&w->acc, &w->acc_cap, n, sizeof(int32_t)) != 0)
        return STK_E_NOMEM;
    int xlo = w->ax.lo, ylo = w->ay.lo, yh = w->ay.hi - ylo;
    stk__axis_rebase(&w->ax, xlo);
    stk__axis_rebase(&w->ay, ylo);
    stk__resize_h(&w->ax, src + (size_t)ylo * stride + (size_t)xlo * 3, stride, yh, w->tmp, ts, 0, w->hs);
    stk__resize_v(&w->ay, w->tmp, ts, (int)n, dst, w->acc);
    return STK_OK;
}

void stk__substitute(const stk__aug_config *c, uint8_t *out)
{
    memset(out, 128, (size_t)c->out_h * (size_t)c->out_w * 3);
}
