/* SPDX-License-Identifier: MIT */
/*
 * augcrop.c — where a sample's pixels come from: torchvision's RandomResizedCrop box and flip
 * (train) or Resize + CenterCrop geometry (eval), drawn from the Philox stream keyed (seed,
 * epoch, index), the sample's resize filter, and the DCT scale the crop-window decode may use.
 * Pure arithmetic on the image size: no pixels here (augment.c decodes and resizes).
 */
#include "augment.h"

#include <math.h>
#include <string.h>


void stk__aug_config_default(stk__aug_config *c)
{
    memset(c, 0, sizeof *c);
    c->mode = STK_MODE_TRAIN;
    c->out_h = 224;
    c->out_w = 224;
    c->resize = 256;
    c->flip_prob = 0.5;
    c->scale_min = 0.08;
    c->scale_max = 1.0;
    c->ratio_min = 3.0 / 4.0;
    c->ratio_max = 4.0 / 3.0;
    c->max_pixels = 89478485;
    c->strict = 0;
    c->dct_scaling = 1;
    c->interp = STK_INTERP_BILINEAR;
}

/* ---- crop parameters -------------------------------------------------------------------------- */

/*
 * Crop parameters are torchvision's, drawn from the Philox stream keyed (seed, epoch, index):
 *   train  RandomResizedCrop.get_params: ten tries of target_area = area * U(scale),
 *          aspect = exp(U(log ratio)), w = round(sqrt(target_area * aspect)),
 *          h = round(sqrt(target_area / aspect)) (round half to even, as Python's round()),
 *          accepted when 0 < w <= W and 0 < h <= H, then i = randint(0, H - h),
 *          j = randint(0, W - w) (inclusive); else the centre crop clamped to the ratio range.
 *          Then flip when U(0,1) < flip_prob. The draws happen in that order, always.
 *   eval   Resize(resize): shorter side to `resize`, the other int(resize * long / short);
 *          CenterCrop(out): top = int(round((h - out_h) / 2.0)), likewise left.
 */

static void eval_crop(const stk__aug_config *c, int W, int H, stk__crop *o)
{
    int shorter = W <= H ? W : H, longer = W <= H ? H : W;
    int ns = c->resize;
    int nl = (int)((double)((int64_t)ns * longer) / (double)shorter);
    if (nl < 1)
        nl = 1;
    int nw = W <= H ? ns : nl, nh = W <= H ? nl : ns;
    if (c->resize_h > 0 && c->resize_w > 0) /* Resize((h, w)): the size as given */
        nw = c->resize_w, nh = c->resize_h;
    o->resized_w = nw;
    o->resized_h = nh;
    /* CenterCrop: an output larger than the image is zero-padded, (crop - size) // 2 before */
    o->off_x = c->out_w > nw ? -((c->out_w - nw) / 2) : (int)rint((nw - c->out_w) / 2.0);
    o->off_y = c->out_h > nh ? -((c->out_h - nh) / 2) : (int)rint((nh - c->out_h) / 2.0);
    double sx = (double)W / nw, sy = (double)H / nh;
    int x0 = (int)floor(o->off_x * sx), y0 = (int)floor(o->off_y * sy);
    int x1 = (int)ceil((o->off_x + c->out_w) * sx), y1 = (int)ceil((o->off_y + c->out_h) * sy);
    x0 = STK__MAX(x0, 0), y0 = STK__MAX(y0, 0);
    x1 = STK__MIN(x1, W), y1 = STK__MIN(y1, H);
    o->x = x0, o->y = y0;
    o->w = STK__MAX(x1 - x0, 1), o->h = STK__MAX(y1 - y0, 1);
}

/* The sample's resize filter: the config's, or for STK_INTERP_RANDOM timm's
 * random.choice((BILINEAR, BICUBIC)), from a counter range of the sample's key apart from the
 * crop's draws and the augment ops' (docs/ARCHITECTURE.md, "Decode and augment") */
#define INTERP_CTR0 0x70000000u

static int sample_interp(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index)
{
    if (c->interp != STK_INTERP_RANDOM)
        return c->interp;
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    r.ctr[0] = INTERP_CTR0;
    return stk__rng_below(&r, 2) ? STK_INTERP_BICUBIC : STK_INTERP_BILINEAR;
}

static void train_crop(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index, int width,
                       int height, stk__crop *out);

void stk__crop_params(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index,
                      int width, int height, stk__crop *out)
{
    memset(out, 0, sizeof *out);
    if (c->mode == STK_MODE_EVAL)
        eval_crop(c, width, height, out);
    else
        train_crop(c, seed, epoch, index, width, height, out);
    out->interp = sample_interp(c, seed, epoch, index);
}

/* torchvision's RandomResizedCrop.get_params and the flip */
static void train_crop(const stk__aug_config *c, uint64_t seed, uint64_t epoch, uint64_t index, int width,
                       int height, stk__crop *out)
{
    stk__rng r;
    stk__rng_init(&r, seed, epoch, index);
    double area = (double)width * (double)height;
    double lr0 = log(c->ratio_min), lr1 = log(c->ratio_max);
    for (int t = 0; t < 10; t++) {
        double ta = area * (c->scale_min + (c->scale_max - c->scale_min) * stk__rng_uniform(&r));
        double ar = exp(lr0 + (lr1 - lr0) * stk__rng_uniform(&r));
        double fw = rint(sqrt(ta * ar)), fh = rint(sqrt(ta / ar));
        if (fw > 0 && fw <= width && fh > 0 && fh <= height) {
            int w = (int)fw, h = (int)fh;
            out->y = (int)stk__rng_below(&r, (uint64_t)(height - h + 1));
            out->x = (int)stk__rng_below(&r, (uint64_t)(width - w + 1));
            out->w = w;
            out->h = h;
            goto flip;
        }
    }
    out->fallback = 1;
    {
        double in_ratio = (double)width / (double)height;
        double rmin = STK__MIN(c->ratio_min, c->ratio_max), rmax = STK__MAX(c->ratio_min, c->ratio_max);
        int w, h;
        if (in_ratio < rmin) {
            w = width;
            h = (int)rint(w / rmin);
        } else if (in_ratio > rmax) {
            h = height;
            w = (int)rint(h * rmax);
        } else {
            w = width;
            h = height;
        }
        w = STK__MAX(STK__MIN(w, width), 1);
        h = STK__MAX(STK__MIN(h, height), 1);
        out->w = w;
        out->h = h;
        out->y = (height - h) / 2;
        out->x = (width - w) / 2;
    }
flip:
    out->flip = stk__rng_uniform(&r) < c->flip_prob;
}

int stk__plan_scale(const stk__aug_config *c, const stk__crop *crop, int width, int height)
{
    if (!c->dct_scaling || crop->interp == STK_INTERP_NEAREST)
        return 8; /* a scaled decode low-passes; NEAREST's result would not resemble Pillow's */
    int64_t cw = crop->w, ch = crop->h, tw = c->out_w, th = c->out_h;
    if (c->mode == STK_MODE_EVAL && crop->resized_w > 0) {
        cw = width, ch = height, tw = crop->resized_w, th = crop->resized_h;
    }
    for (int m = 1; m < 8; m *= 2)
        if (cw * m >= tw * 8 && ch * m >= th * 8)
            return m;
    return 8;
}
