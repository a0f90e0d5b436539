/* SPDX-License-Identifier: MIT */
/*
 * params.c — the one table of parameters: key, type, the handles that take it, when it may be
 * set, range and default. Keys are pinned in stoker.h; add rows, never renumber.
 */
#include "params.h"
#include "order.h"

#include <float.h>
#include <math.h>

#define L STK__PH_LOADER
#define LD (STK__PH_LOADER | STK__PH_DATASET)
#define W STK__PH_WRITER
#define I_ROW(k, hd, w, lo, hi, def) {k, STK__PT_INT, w, 0, hd, #k, lo, hi, 0, 0, def, 0}
#define D_ROW(k, lo_open, lo, hi, def) {k, STK__PT_DOUBLE, STK__PW_START, lo_open, L, #k, 0, 0, lo, hi, 0, def}
#define F_ROW(k, lo_open, lo, hi) {k, STK__PT_FLOATS, STK__PW_START, lo_open, L, #k, 0, 0, lo, hi, 0, 0}

const stk__param_def stk__param_table[] = {
    /* dataset (a loader passes them on at open): before open */
    I_ROW(STK_P_LAYOUT, LD, STK__PW_OPEN, STK_LAYOUT_AUTO, STK_LAYOUT_LMDB, STK_LAYOUT_AUTO),
    I_ROW(STK_P_FOREIGN_LABEL, LD, STK__PW_OPEN, -1, INT32_MAX, -1),
    I_ROW(STK_P_ALLOW_INCOMPLETE, LD, STK__PW_OPEN, 0, 1, 0),
    I_ROW(STK_P_CACHE_BYTES, LD, STK__PW_OPEN, 0, INT64_MAX, 0),
    I_ROW(STK_P_STREAM, LD, STK__PW_OPEN, 0, 1, 0),
    /* reader: before start */
    I_ROW(STK_P_IO_BACKEND, L, STK__PW_START, STK_IO_AUTO, STK_IO_MMAP, STK_IO_AUTO),
    I_ROW(STK_P_IO_DIRECT, L, STK__PW_START, 0, 1, 1),
    I_ROW(STK_P_QUEUE_DEPTH, L, STK__PW_START, 1, 4096, 32),
    I_ROW(STK_P_INFLIGHT_BYTES, L, STK__PW_START, 1 << 20, (int64_t)1 << 40, 64 << 20),
    I_ROW(STK_P_VERIFY_CRC, L, STK__PW_START, 0, 1, 1),
    I_ROW(STK_P_IO_THREADS, L, STK__PW_START, 1, 256, 8),
    I_ROW(STK_P_SHUFFLE, L, STK__PW_START, 0, 1, 1),
    I_ROW(STK_P_SEED, L, STK__PW_START, INT64_MIN, INT64_MAX, 0),
    I_ROW(STK_P_EPOCH, L, STK__PW_START, 0, INT64_MAX, 0),
    I_ROW(STK_P_RANK, L, STK__PW_START, 0, INT32_MAX - 1, 0),
    I_ROW(STK_P_WORLD_SIZE, L, STK__PW_START, 1, INT32_MAX, 1),
    I_ROW(STK_P_DIST_MODE, L, STK__PW_START, STK_DIST_PAD, STK_DIST_EXACT, STK_DIST_PAD),
    I_ROW(STK_P_DRAW_KEY, L, STK__PW_START, -1, (int64_t)1 << 62, -1),
    I_ROW(STK_P_SHUFFLE_WINDOW, L, STK__PW_START, 0, STK__MAX_WINDOW, 0),
    I_ROW(STK_P_FAULT_EIO_PPM, L, STK__PW_START, 0, 1000000, 0),
    I_ROW(STK_P_FAULT_SHORT_PPM, L, STK__PW_START, 0, 1000000, 0),
    I_ROW(STK_P_FAULT_DELAY_PPM, L, STK__PW_START, 0, 1000000, 0),
    I_ROW(STK_P_FAULT_DELAY_US, L, STK__PW_START, 0, 60000000, 1000),
    I_ROW(STK_P_FAULT_SEED, L, STK__PW_START, INT64_MIN, INT64_MAX, 0),
    /* decode / augment: before start */
    I_ROW(STK_P_WORKERS, L, STK__PW_START, 1, 1024, 0), /* default: online cores (set at create) */
    I_ROW(STK_P_MODE, L, STK__PW_START, STK_MODE_TRAIN, STK_MODE_EVAL, STK_MODE_TRAIN),
    I_ROW(STK_P_OUT_HEIGHT, L, STK__PW_START, 1, 65535, 224),
    I_ROW(STK_P_OUT_WIDTH, L, STK__PW_START, 1, 65535, 224),
    I_ROW(STK_P_RESIZE, L, STK__PW_START, 1, 65535, 256),
    D_ROW(STK_P_FLIP_PROB, 0, 0.0, 1.0, 0.5),
    D_ROW(STK_P_SCALE_MIN, 1, 0.0, 1.0, 0.08),
    D_ROW(STK_P_SCALE_MAX, 1, 0.0, 1.0, 1.0),
    D_ROW(STK_P_RATIO_MIN, 1, 0.0, 1000.0, 3.0 / 4.0),
    D_ROW(STK_P_RATIO_MAX, 1, 0.0, 1000.0, 4.0 / 3.0),
    I_ROW(STK_P_MAX_PIXELS, L, STK__PW_START, 1, INT64_MAX, 89478485),
    I_ROW(STK_P_STRICT, L, STK__PW_START, 0, 1, 0),
    I_ROW(STK_P_DCT_SCALING, L, STK__PW_START, 0, 1, 1),
    I_ROW(STK_P_MAX_OUT_HEIGHT, L, STK__PW_START, 0, 65535, 0), /* 0: the output height */
    I_ROW(STK_P_MAX_OUT_WIDTH, L, STK__PW_START, 0, 65535, 0),  /* 0: the output width */
    I_ROW(STK_P_MULTI_HOT, L, STK__PW_START, 0, 1, 0),
    I_ROW(STK_P_INTERP, L, STK__PW_START, STK_INTERP_BILINEAR, STK_INTERP_RANDOM, STK_INTERP_BILINEAR),
    I_ROW(STK_P_RESIZE_HEIGHT, L, STK__PW_START, 0, 65535, 0), /* 0: shorter side to STK_P_RESIZE */
    I_ROW(STK_P_RESIZE_WIDTH, L, STK__PW_START, 0, 65535, 0),
    I_ROW(STK_P_RESIZE_PASSES, L, STK__PW_START, STK_RESIZE_PASSES_PILLOW12, STK_RESIZE_PASSES_PILLOW13,
          STK_RESIZE_PASSES_PILLOW12),
    I_ROW(STK_P_AUG_POLICY, L, STK__PW_START, STK_AUG_NONE, STK_AUG_TIMM_AUTO, STK_AUG_NONE),
    I_ROW(STK_P_AUG_NUM_OPS, L, STK__PW_START, 0, 65535, 2),
    I_ROW(STK_P_AUG_MAGNITUDE, L, STK__PW_START, 0, 16777215, 9),
    I_ROW(STK_P_AUG_BINS, L, STK__PW_START, 2, 16777216, 31),
    I_ROW(STK_P_AUG_INTERP, L, STK__PW_START, STK_AUG_INTERP_NEAREST, STK_AUG_INTERP_BICUBIC,
          STK_AUG_INTERP_NEAREST),
    I_ROW(STK_P_AUG_FILL, L, STK__PW_START, -1, 0xFFFFFF, -1),
    F_ROW(STK_P_AUG_STEPS, 0, -FLT_MAX, FLT_MAX),
    D_ROW(STK_P_ERASE_PROB, 0, 0.0, 1.0, 0.0),
    D_ROW(STK_P_ERASE_SCALE_MIN, 0, 0.0, FLT_MAX, 0.02),
    D_ROW(STK_P_ERASE_SCALE_MAX, 0, 0.0, FLT_MAX, 0.33),
    D_ROW(STK_P_ERASE_RATIO_MIN, 1, 0.0, FLT_MAX, 0.3),
    D_ROW(STK_P_ERASE_RATIO_MAX, 1, 0.0, FLT_MAX, 3.3),
    F_ROW(STK_P_ERASE_VALUE, 0, -FLT_MAX, FLT_MAX),
    I_ROW(STK_P_ERASE_RANDOM, L, STK__PW_START, STK_ERASE_RANDOM_OFF, STK_ERASE_RANDOM_CHANNEL, STK_ERASE_RANDOM_OFF),
    I_ROW(STK_P_AUGMIX_SEVERITY, L, STK__PW_START, 1, 10, 3),
    I_ROW(STK_P_AUGMIX_WIDTH, L, STK__PW_START, 1, 8, 3),
    I_ROW(STK_P_AUGMIX_DEPTH, L, STK__PW_START, -1, 8, -1),
    D_ROW(STK_P_AUGMIX_ALPHA, 1, 0.0, 1000.0, 1.0),
    I_ROW(STK_P_AUGMIX_ALL_OPS, L, STK__PW_START, 0, 1, 1),
    D_ROW(STK_P_TIMM_MAGNITUDE, 0, 0.0, 1000.0, 10.0),
    D_ROW(STK_P_TIMM_MSTD, 0, 0.0, 1e6, 0.0),
    I_ROW(STK_P_TIMM_UNIFORM, L, STK__PW_START, 0, 1, 0),
    D_ROW(STK_P_TIMM_MMAX, 0, 0.0, 1000.0, 10.0),
    D_ROW(STK_P_TIMM_PROB, 0, 0.0, 1.0, 0.5),
    I_ROW(STK_P_TIMM_INCREASING, L, STK__PW_START, 0, 1, 0),
    I_ROW(STK_P_TIMM_RESAMPLE, L, STK__PW_START, -1, STK_INTERP_NEAREST, -1),
    D_ROW(STK_P_TIMM_TRANSLATE_PCT, 0, 0.0, 1.0, 0.45),
    I_ROW(STK_P_TIMM_WEIGHTED, L, STK__PW_START, 0, 1, 0),
    I_ROW(STK_P_AUG_AUTO_POLICY, L, STK__PW_START, STK_AUG_AUTO_IMAGENET, STK_AUG_AUTO_SVHN, STK_AUG_AUTO_IMAGENET),
    I_ROW(STK_P_ERASE_MIN_COUNT, L, STK__PW_START, 1, STK_ERASE_MAX_COUNT, 1),
    I_ROW(STK_P_ERASE_MAX_COUNT, L, STK__PW_START, 1, STK_ERASE_MAX_COUNT, 1),
    I_ROW(STK_P_AUG_TORCH, L, STK__PW_START, STK_AUG_TORCH_1, STK_AUG_TORCH_2_AVX512 | STK_AUG_TORCH_GRID_FMA,
          STK_AUG_TORCH_1),
    F_ROW(STK_P_TIMM_AUTO_POLICY, 0, -FLT_MAX, FLT_MAX),
    D_ROW(STK_P_MAX_BAD_FRACTION, 0, 0.0, 1.0, 0.01),
    /* batches, ring, stager: before start */
    I_ROW(STK_P_BATCH_SIZE, L, STK__PW_START, 1, 65536, 256),
    I_ROW(STK_P_DROP_LAST, L, STK__PW_START, 0, 1, 0),
    I_ROW(STK_P_PREFETCH, L, STK__PW_START, 2, 64, 4),
    I_ROW(STK_P_DEVICE, L, STK__PW_START, -1, 1023, -1),
    I_ROW(STK_P_DTYPE, L, STK__PW_START, STK_DTYPE_UINT8, STK_DTYPE_FLOAT32, STK_DTYPE_UINT8),
    I_ROW(STK_P_OUT_LAYOUT, L, STK__PW_START, STK_NCHW, STK_NHWC, STK_NCHW),
    I_ROW(STK_P_DEVICE_BUFFERS, L, STK__PW_START, 2, 16, 2),
    I_ROW(STK_P_MAX_PINNED_BYTES, L, STK__PW_START, 0, INT64_MAX, 0),
    I_ROW(STK_P_MAX_DEVICE_BYTES, L, STK__PW_START, 0, INT64_MAX, 0),
    I_ROW(STK_P_STAGE, L, STK__PW_START, STK_STAGE_READ, STK_STAGE_FULL, STK_STAGE_FULL),
    F_ROW(STK_P_MEAN, 0, -FLT_MAX, FLT_MAX),
    F_ROW(STK_P_STD, 1, 0.0, FLT_MAX),
    I_ROW(STK_P_PIN_HOST, L, STK__PW_START, 0, 1, 0),
    F_ROW(STK_P_LUT, 0, -FLT_MAX, FLT_MAX),
    /* writer: before stk_writer_open */
    I_ROW(STK_W_SHARD_BYTES, W, STK__PW_OPEN, 1 << 20, INT64_MAX, (int64_t)1 << 30),
    I_ROW(STK_W_FORCE, W, STK__PW_OPEN, 0, 1, 0),
};

const size_t stk__param_count = STK__ARRAY_LEN(stk__param_table);

int stk__param_find(int key)
{
    for (size_t i = 0; i < stk__param_count; i++)
        if (stk__param_table[i].key == key)
            return (int)i;
    return -1;
}

const stk__param_def *stk__param_for(int key, unsigned handle)
{
    int i = stk__param_find(key);
    if (i < 0 || !(stk__param_table[i].handles & handle))
        return NULL;
    return &stk__param_table[i];
}

int64_t stk__param_idef(int key) { return stk__param_table[stk__param_find(key)].idef; }

int64_t stk__param_imin(int key) { return stk__param_table[stk__param_find(key)].ilo; }

int stk__param_check_int(const stk__param_def *p, int64_t value, char *err)
{
    if (value >= p->ilo && value <= p->ihi)
        return STK_OK;
    return stk__err(err, STK_E_INVALID, "%s = %lld is out of range [%lld, %lld]", p->name,
                    (long long)value, (long long)p->ilo, (long long)p->ihi);
}

int stk__param_in_range_d(const stk__param_def *p, double value)
{
    return isfinite(value) && value <= p->dhi && (p->lo_open ? value > p->dlo : value >= p->dlo);
}

int stk__param_check_double(const stk__param_def *p, double value, char *err)
{
    if (stk__param_in_range_d(p, value))
        return STK_OK;
    return stk__err(err, STK_E_INVALID, "%s = %g is out of range %c%g, %g]", p->name, value,
                    p->lo_open ? '(' : '[', p->dlo, p->dhi);
}

int stk_param_bounds(int key, double *lo, double *hi)
{
    int i = stk__param_find(key);
    if (i < 0)
        return STK_E_BADPARAM;
    const stk__param_def *p = &stk__param_table[i];
    if (lo)
        *lo = p->type == STK__PT_INT ? (double)p->ilo : p->dlo;
    if (hi)
        *hi = p->type == STK__PT_INT ? (double)p->ihi : p->dhi;
    return STK_OK;
}
