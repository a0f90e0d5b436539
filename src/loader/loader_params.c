/* SPDX-License-Identifier: MIT */
/*
 * loader_params.c — the one table of parameters: key, type, when it may be set, range and
 * default. stk_loader_set*, stk_loader_get and stk_param_bounds all read it, so a range is
 * written down exactly once. Keys are pinned in stoker.h; add rows, never renumber.
 */
#include "loader_internal.h"

#include <float.h>

#define I_ROW(k, w, lo, hi, def) {k, STK__PT_INT, w, 0, #k, lo, hi, 0, 0, def, 0}
#define D_ROW(k, lo_open, lo, hi, def) {k, STK__PT_DOUBLE, STK__PW_START, lo_open, #k, 0, 0, lo, hi, 0, def}
#define F_ROW(k, lo_open, lo, hi) {k, STK__PT_FLOATS, STK__PW_START, lo_open, #k, 0, 0, lo, hi, 0, 0}

const stk__param_def stk__param_table[] = {
    /* dataset: before open */
    I_ROW(STK_P_LAYOUT, STK__PW_OPEN, STK_LAYOUT_AUTO, STK_LAYOUT_LMDB, STK_LAYOUT_AUTO),
    I_ROW(STK_P_FOREIGN_LABEL, STK__PW_OPEN, -1, INT32_MAX, -1),
    I_ROW(STK_P_ALLOW_INCOMPLETE, STK__PW_OPEN, 0, 1, 0),
    /* reader: before start */
    I_ROW(STK_P_IO_BACKEND, STK__PW_START, STK_IO_AUTO, STK_IO_MMAP, STK_IO_AUTO),
    I_ROW(STK_P_IO_DIRECT, STK__PW_START, 0, 1, 1),
    I_ROW(STK_P_QUEUE_DEPTH, STK__PW_START, 1, 4096, 32),
    I_ROW(STK_P_INFLIGHT_BYTES, STK__PW_START, 1 << 20, (int64_t)1 << 40, 64 << 20),
    I_ROW(STK_P_VERIFY_CRC, STK__PW_START, 0, 1, 1),
    I_ROW(STK_P_IO_THREADS, STK__PW_START, 1, 256, 8),
    I_ROW(STK_P_SHUFFLE, STK__PW_START, 0, 1, 1),
    I_ROW(STK_P_SEED, STK__PW_START, INT64_MIN, INT64_MAX, 0),
    I_ROW(STK_P_EPOCH, STK__PW_START, 0, INT64_MAX, 0),
    I_ROW(STK_P_RANK, STK__PW_START, 0, INT32_MAX - 1, 0),
    I_ROW(STK_P_WORLD_SIZE, STK__PW_START, 1, INT32_MAX, 1),
    I_ROW(STK_P_DIST_MODE, STK__PW_START, STK_DIST_PAD, STK_DIST_DROP, STK_DIST_PAD),
    I_ROW(STK_P_FAULT_EIO_PPM, STK__PW_START, 0, 1000000, 0),
    I_ROW(STK_P_FAULT_SHORT_PPM, STK__PW_START, 0, 1000000, 0),
    I_ROW(STK_P_FAULT_DELAY_PPM, STK__PW_START, 0, 1000000, 0),
    I_ROW(STK_P_FAULT_DELAY_US, STK__PW_START, 0, 60000000, 1000),
    I_ROW(STK_P_FAULT_SEED, STK__PW_START, INT64_MIN, INT64_MAX, 0),
    /* decode / augment: before start */
    I_ROW(STK_P_WORKERS, STK__PW_START, 1, 1024, 0), /* default: online cores (set at create) */
    I_ROW(STK_P_MODE, STK__PW_START, STK_MODE_TRAIN, STK_MODE_EVAL, STK_MODE_TRAIN),
    I_ROW(STK_P_OUT_HEIGHT, STK__PW_START, 1, 65535, 224),
    I_ROW(STK_P_OUT_WIDTH, STK__PW_START, 1, 65535, 224),
    I_ROW(STK_P_RESIZE, STK__PW_START, 1, 65535, 256),
    D_ROW(STK_P_FLIP_PROB, 0, 0.0, 1.0, 0.5),
    D_ROW(STK_P_SCALE_MIN, 1, 0.0, 1.0, 0.08),
    D_ROW(STK_P_SCALE_MAX, 1, 0.0, 1.0, 1.0),
    D_ROW(STK_P_RATIO_MIN, 1, 0.0, 1000.0, 3.0 / 4.0),
    D_ROW(STK_P_RATIO_MAX, 1, 0.0, 1000.0, 4.0 / 3.0),
    I_ROW(STK_P_MAX_PIXELS, STK__PW_START, 1, INT64_MAX, 89478485),
    I_ROW(STK_P_STRICT, STK__PW_START, 0, 1, 0),
    I_ROW(STK_P_DCT_SCALING, STK__PW_START, 0, 1, 1),
    /* batches, ring, stager: before start */
    I_ROW(STK_P_BATCH_SIZE, STK__PW_START, 1, 65536, 256),
    I_ROW(STK_P_DROP_LAST, STK__PW_START, 0, 1, 0),
    I_ROW(STK_P_PREFETCH, STK__PW_START, 2, 64, 4),
    I_ROW(STK_P_DEVICE, STK__PW_START, -1, 1023, -1),
    I_ROW(STK_P_DTYPE, STK__PW_START, STK_DTYPE_UINT8, STK_DTYPE_FLOAT32, STK_DTYPE_UINT8),
    I_ROW(STK_P_OUT_LAYOUT, STK__PW_START, STK_NCHW, STK_NHWC, STK_NCHW),
    I_ROW(STK_P_DEVICE_BUFFERS, STK__PW_START, 2, 16, 2),
    I_ROW(STK_P_MAX_PINNED_BYTES, STK__PW_START, 0, INT64_MAX, 0),
    I_ROW(STK_P_MAX_DEVICE_BYTES, STK__PW_START, 0, INT64_MAX, 0),
    I_ROW(STK_P_STAGE, STK__PW_START, STK_STAGE_READ, STK_STAGE_FULL, STK_STAGE_FULL),
    F_ROW(STK_P_MEAN, 0, -FLT_MAX, FLT_MAX),
    F_ROW(STK_P_STD, 1, 0.0, FLT_MAX),
    /* writer keys: bounds only (stk_writer_set checks them) */
    I_ROW(STK_W_SHARD_BYTES, STK__PW_WRITER, 1 << 20, INT64_MAX, (int64_t)1 << 30),
    I_ROW(STK_W_FORCE, STK__PW_WRITER, 0, 1, 0),
};

const size_t stk__param_count = STK__ARRAY_LEN(stk__param_table);

int stk__param_find(int key)
{
    for (size_t i = 0; i < stk__param_count; i++)
        if (stk__param_table[i].key == key)
            return (int)i;
    return -1;
}

int stk_param_bounds(int key, double *lo, double *hi)
{
    int i = stk__param_find(key);
    if (i < 0)
        return STK_E_BADPARAM;
    const stk__param_def *p = &stk__param_table[i];
    if (p->type == STK__PT_INT) {
        if (lo)
            *lo = (double)p->ilo;
        if (hi)
            *hi = (double)p->ihi;
    } else {
        if (lo)
            *lo = p->dlo;
        if (hi)
            *hi = p->dhi;
    }
    return STK_OK;
}
