/* SPDX-License-Identifier: MIT */
/*
 * test_loader.c — the loader end to end on a dataset written by the test (stk_writer, generated
 * JPEGs, labels varying): parameters (types, ranges, stages, stk_param_bounds); every record
 * exactly once per epoch with its label and payload size; STK_END once per epoch and continuous
 * epochs; same seed => bit-identical batches for 1, 2 and 4 workers; different epochs differ;
 * pixels equal stk__process_sample run directly (uint8 NHWC, uint8 NCHW, float32 normalised);
 * drop_last and the short last batch; resume via tell/seek equals the uninterrupted epoch;
 * set_epoch; ranks disjoint / covering / equal batch counts; the STK_P_STAGE=READ stage; held
 * batch limit; timeout and cancel; device fallback without CUDA; stats and report.
 *
 * stk-test: concurrency
 */
#include "augment.h"
#include "convert.h"
#include "common.h"
#include "loader_internal.h"
#include "test_loader_inside.h"
#include "test_loader_util.h"

#include <math.h>
#include <unistd.h>

#define N 45
#define BS 8

static tl_data D;

static void test_params(void)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    double v, lo, hi;
    T_OK(stk_loader_get(h, STK_P_BATCH_SIZE, &v));
    T_CHECK(v == 256, "default batch size %g", v);
    T_OK(stk_loader_get(h, STK_P_PREFETCH, &v));
    T_CHECK(v == 4, "default prefetch %g", v);
    T_OK(stk_loader_get(h, STK_P_WORKERS, &v));
    stk_cpu_budget budget;
    T_OK(stk_cpu_budget_get(&budget));
    T_CHECK(v == budget.workers, "default workers = the CPU budget's %d (%g)", budget.workers, v);
    T_OK(stk_loader_get(h, STK_P_FLIP_PROB, &v));
    T_CHECK(v == 0.5, "default flip %g", v);
    T_CHECK(stk_loader_set(h, 99999, 1) == STK_E_BADPARAM, "unknown key");
    T_CHECK(strstr(stk_loader_last_error(h), "99999") != NULL, "error names the key");
    T_CHECK(stk_loader_set(h, STK_P_FLIP_PROB, 1) == STK_E_BADPARAM, "int setter on a double key");
    T_CHECK(stk_loader_set_double(h, STK_P_BATCH_SIZE, 3.0) == STK_E_BADPARAM, "double setter on an int key");
    T_CHECK(stk_loader_set(h, STK_W_FORCE, 1) == STK_E_BADPARAM, "writer key on a loader");
    T_CHECK(stk_loader_set(h, STK_P_BATCH_SIZE, 0) == STK_E_INVALID, "batch 0");
    T_CHECK(stk_loader_set(h, STK_P_BATCH_SIZE, 65537) == STK_E_INVALID, "batch too big");
    T_CHECK(stk_loader_set(h, STK_P_PREFETCH, 1) == STK_E_INVALID, "prefetch 1");
    T_CHECK(stk_loader_set_double(h, STK_P_SCALE_MIN, 0.0) == STK_E_INVALID, "scale min 0 (open bound)");
    T_CHECK(stk_loader_set_double(h, STK_P_FLIP_PROB, NAN) == STK_E_INVALID, "NaN");
    T_CHECK(stk_loader_set_double(h, STK_P_FLIP_PROB, 1.5) == STK_E_INVALID, "flip 1.5");
    float bad_std[3] = {1, 0, 1}, mean[3] = {1, 2, 3};
    T_CHECK(stk_loader_set_floats(h, STK_P_STD, bad_std, 3) == STK_E_INVALID, "std 0");
    T_CHECK(stk_loader_set_floats(h, STK_P_MEAN, mean, 2) == STK_E_INVALID, "2 floats");
    T_CHECK(stk_loader_get(h, STK_P_MEAN, &v) == STK_E_BADPARAM, "get on a vector key");
    T_OK(stk_loader_set(h, STK_P_SEED, INT64_MIN));
    T_OK(stk_loader_set(h, STK_P_DEVICE, -1));
    /* bounds come from the same table */
    T_OK(stk_param_bounds(STK_P_QUEUE_DEPTH, &lo, &hi));
    T_CHECK(lo == 1 && hi == 4096, "queue depth bounds %g..%g", lo, hi);
    T_OK(stk_param_bounds(STK_P_PREFETCH, &lo, &hi));
    T_CHECK(lo == 2 && hi == 64, "prefetch bounds");
    T_OK(stk_param_bounds(STK_P_FLIP_PROB, &lo, &hi));
    T_CHECK(lo == 0 && hi == 1, "flip bounds");
    T_OK(stk_param_bounds(STK_W_SHARD_BYTES, &lo, &hi));
    T_CHECK(lo == 1048576, "writer bounds");
    T_CHECK(stk_param_bounds(4242, &lo, &hi) == STK_E_BADPARAM, "unknown bounds");
    for (size_t i = 0; i < stk__param_count; i++) {
        const stk__param_def *p = &stk__param_table[i];
        T_OK(stk_param_bounds(p->key, &lo, &hi));
        T_CHECK(lo <= hi, "%s: lo <= hi", p->name);
        if (p->type == STK__PT_INT && p->key != STK_P_WORKERS)
            T_CHECK(p->idef >= p->ilo && p->idef <= p->ihi, "%s: default in range", p->name);
        if (p->type == STK__PT_DOUBLE)
            T_CHECK(p->ddef > p->dlo - (p->lo_open ? 0 : 1e-300) && p->ddef <= p->dhi, "%s: default", p->name);
    }
    /* stages */
    uint64_t e, s;
    const stk_batch *b;
    T_CHECK(stk_loader_start(h) == STK_E_STATE, "start before open");
    T_CHECK(stk_loader_next(h, NULL, 0, &b) == STK_E_STATE, "next before start");
    T_CHECK(stk_loader_seek(h, 0, 0) == STK_E_STATE, "seek before start");
    T_CHECK(stk_loader_open(h, "/nonexistent/stoker-dataset") != STK_OK, "open missing path");
    T_CHECK(strstr(stk_loader_last_error(h), "/nonexistent/stoker-dataset") != NULL, "error names the path: %s",
            stk_loader_last_error(h));
    T_OK(stk_loader_set(h, STK_P_SEED, 0));
    T_OK(stk_loader_set(h, STK_P_LAYOUT, STK_LAYOUT_AUTO));
    T_OK(stk_loader_open(h, D.path));
    T_CHECK(stk_loader_open(h, D.path) == STK_E_STATE, "open twice");
    T_CHECK(stk_loader_set(h, STK_P_LAYOUT, STK_LAYOUT_SHARDS) == STK_E_STATE, "dataset key after open");
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 10));
    T_CHECK(stk_loader_samples_per_epoch(h) == N && stk_loader_batches_per_epoch(h) == 5, "sizes after open");
    T_OK(stk_loader_set(h, STK_P_RANK, 3));
    T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, 2));
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "rank >= world refused at start");
    T_CHECK(strstr(stk_loader_last_error(h), "STK_P_RANK") != NULL, "names the parameter");
    T_OK(stk_loader_set(h, STK_P_RANK, 0));
    T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, 1));
    T_OK(stk_loader_set_double(h, STK_P_SCALE_MIN, 0.9));
    T_OK(stk_loader_set_double(h, STK_P_SCALE_MAX, 0.5));
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "scale min > max refused");
    T_OK(stk_loader_set_double(h, STK_P_SCALE_MIN, 0.08));
    T_OK(stk_loader_set_double(h, STK_P_SCALE_MAX, 1.0));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 16));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 16));
    T_OK(stk_loader_set(h, STK_P_MAX_PINNED_BYTES, 4096));
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "ring above the pinned cap refused");
    T_CHECK(strstr(stk_loader_last_error(h), "STK_P_MAX_PINNED_BYTES") != NULL, "names the cap");
    T_OK(stk_loader_set(h, STK_P_MAX_PINNED_BYTES, 0));
    T_OK(stk_loader_start(h));
    T_CHECK(stk_loader_start(h) == STK_E_STATE, "start twice");
    T_CHECK(stk_loader_set(h, STK_P_BATCH_SIZE, 4) == STK_E_STATE, "set after start");
    T_OK(stk_loader_tell(h, &e, &s));
    T_CHECK(e == 0 && s == 0, "tell at start");
    T_OK(stk_loader_next(h, NULL, -1, &b));
    T_CHECK(stk_loader_set_epoch(h, 1) == STK_E_STATE, "set_epoch with a batch held");
    T_OK(stk_loader_release(h, b, NULL));
    T_CHECK(stk_loader_release(h, b, NULL) == STK_E_INVALID, "double release");
    T_OK(stk_loader_stop(h));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 4)); /* allowed again after stop */
    T_OK(stk_loader_start(h));
    T_OK(stk_loader_next(h, NULL, -1, &b));
    T_CHECK(b->size == 4 && b->height == 16, "restart with new parameters");
    stk_loader_destroy(h); /* with a batch held */
    stk_loader_destroy(NULL);
}

static void test_cover_and_epochs(void)
{
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_start(h));
    tl_epoch e0, e1;
    T_CHECK(tl_run(h, &e0, -1) == STK_END, "epoch 0 ends with STK_END");
    T_CHECK(e0.epoch == 0 && e0.nbatches == (N + BS - 1) / BS, "epoch 0: %zu batches", e0.nbatches);
    tl_check_cover(&e0, &D);
    uint64_t e, s;
    T_OK(stk_loader_tell(h, &e, &s));
    T_CHECK(e == 1 && s == 0, "after STK_END tell is (1, 0)");
    /* without set_epoch the loader goes on into epoch 1 */
    T_CHECK(tl_run(h, &e1, -1) == STK_END, "epoch 1 ends");
    T_CHECK(e1.epoch == 1, "epoch 1");
    tl_check_cover(&e1, &D);
    T_CHECK(memcmp(e0.index, e1.index, N * sizeof(uint64_t)) != 0, "epochs have different orders");
    /* the same index differs between epochs (new crop / flip) */
    size_t differ = 0, sb = e0.sample_bytes;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            if (e1.index[j] == e0.index[i] && memcmp(e0.images + i * sb, e1.images + j * sb, sb) != 0)
                differ++;
    T_CHECK(differ > N / 2, "augmentation differs between epochs for %zu of %d", differ, N);
    /* set_epoch back to 0 reproduces epoch 0 */
    T_OK(stk_loader_set_epoch(h, 0));
    tl_epoch again;
    T_CHECK(tl_run(h, &again, -1) == STK_END, "epoch 0 again");
    T_CHECK(again.n == N && memcmp(again.index, e0.index, N * sizeof(uint64_t)) == 0 &&
                memcmp(again.images, e0.images, N * sb) == 0,
            "set_epoch(0) reproduces epoch 0");
    /* set_epoch to what is prefetched keeps it (tell = (1,0) now) */
    T_OK(stk_loader_set_epoch(h, 1));
    tl_epoch one;
    T_CHECK(tl_run(h, &one, -1) == STK_END, "epoch 1 again");
    T_CHECK(memcmp(one.index, e1.index, N * sizeof(uint64_t)) == 0 && memcmp(one.images, e1.images, N * sb) == 0,
            "epoch 1 again equal");
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.samples == 4 * N && st.batches == 4 * e0.nbatches, "stats count deliveries: %llu",
            (unsigned long long)st.samples);
    T_CHECK(st.decode.items >= 4 * N && st.decode.threads == 2, "decode stage counted");
    T_CHECK(st.read.items >= 4 * N, "read stage counted (%llu)", (unsigned long long)st.read.items);
    T_CHECK(st.host_ring_bytes >= 4ull * BS * 32 * 32 * 3, "ring bytes");
    T_CHECK(st.device == -1 && st.samples_per_epoch == N && st.batches_per_epoch == e0.nbatches, "stats sizes");
    T_CHECK(st.wall_s > 0 && st.cpu_user_s + st.cpu_sys_s > 0, "wall and cpu");
    char rep[4096];
    size_t need = stk_loader_report(h, rep, sizeof rep);
    T_CHECK(need < sizeof rep && strlen(rep) == need, "report fits");
    T_CHECK(strstr(rep, "verdict:") && strstr(rep, "decode") && strstr(rep, "read"), "report: %s", rep);
    /* truncation as snprintf: the length it needs is returned, the first 15 bytes are written.
     * The loader still runs (it prefetches the next epoch): its figures, and the verdict's words
     * with them, may change between two calls. The truncated call is compared with full reports
     * taken just before and after it, in a try where those two have the same length. */
    char tiny[16];
    size_t need2 = 0, before = 0, after = 1;
    for (int tries = 0; tries < 100 && before != after; tries++) {
        before = stk_loader_report(h, rep, sizeof rep);
        need2 = stk_loader_report(h, tiny, sizeof tiny);
        after = stk_loader_report(h, rep, sizeof rep);
    }
    T_CHECK(before == after && need2 == before && strlen(tiny) == 15 && !strncmp(tiny, rep, 15),
            "report truncates like snprintf: %zu, full %zu then %zu, `%s`", need2, before, after, tiny);
    stk_loader_destroy(h);
    tl_epoch_free(&e0);
    tl_epoch_free(&e1);
    tl_epoch_free(&again);
    tl_epoch_free(&one);
}

/* Whole epoch output for a worker count and layout/dtype. */
static void run_cfg(int workers, int layout, int dtype, int normalize, uint64_t epoch, tl_epoch *out)
{
    stk_loader *h = tl_loader(D.path, BS, workers);
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, layout));
    T_OK(stk_loader_set(h, STK_P_DTYPE, dtype));
    T_OK(stk_loader_set(h, STK_P_EPOCH, (int64_t)epoch));
    if (normalize) {
        const float mean[3] = {120.f, 115.f, 100.f}, std[3] = {60.f, 55.f, 50.f};
        T_OK(stk_loader_set_floats(h, STK_P_MEAN, mean, 3));
        T_OK(stk_loader_set_floats(h, STK_P_STD, std, 3));
    }
    T_OK(stk_loader_start(h));
    T_CHECK(tl_run(h, out, -1) == STK_END, "epoch ends");
    T_CHECK(out->epoch == epoch, "starts at STK_P_EPOCH");
    stk_loader_destroy(h);
}

static void test_determinism_and_pixels(void)
{
    tl_epoch w1, w2, w4;
    run_cfg(1, STK_NHWC, STK_DTYPE_UINT8, 0, 3, &w1);
    run_cfg(2, STK_NHWC, STK_DTYPE_UINT8, 0, 3, &w2);
    run_cfg(4, STK_NHWC, STK_DTYPE_UINT8, 0, 3, &w4);
    size_t sb = 32 * 32 * 3;
    T_CHECK(w1.sample_bytes == sb, "sample bytes");
    T_CHECK(memcmp(w1.index, w2.index, N * 8) == 0 && memcmp(w1.index, w4.index, N * 8) == 0, "same order");
    T_CHECK(memcmp(w1.images, w2.images, N * sb) == 0, "1 and 2 workers bit-identical");
    T_CHECK(memcmp(w1.images, w4.images, N * sb) == 0, "1 and 4 workers bit-identical");

    /* pixels = stk__process_sample(seed 7, epoch 3, index) run here directly */
    stk__aug_config c;
    stk__aug_config_default(&c);
    c.out_h = c.out_w = 32;
    stk__worker_ctx *ctx;
    T_OK(stk__worker_ctx_create(&ctx));
    uint8_t *ref = malloc(sb), *conv = malloc(sb * 4);
    tl_epoch chw, f32;
    run_cfg(2, STK_NCHW, STK_DTYPE_UINT8, 0, 3, &chw);
    run_cfg(2, STK_NHWC, STK_DTYPE_FLOAT32, 1, 3, &f32);
    T_CHECK(f32.sample_bytes == sb * 4, "float32 sample bytes");
    const float mean[3] = {120.f, 115.f, 100.f}, std[3] = {60.f, 55.f, 50.f};
    for (size_t i = 0; i < N; i++) {
        uint64_t idx = w1.index[i];
        int warn = 0;
        char err[STK__ERRLEN];
        T_OK(stk__process_sample(ctx, &c, 7, 3, idx, D.payload[idx], D.len[idx], ref, &warn, err));
        T_CHECK(memcmp(ref, w1.images + i * sb, sb) == 0, "sample %zu (index %llu) equals stk__process_sample", i,
                (unsigned long long)idx);
        stk__convert_sample(ref, 32, 32, STK_DTYPE_UINT8, STK_NCHW, 0, NULL, NULL, conv);
        T_CHECK(memcmp(conv, chw.images + i * sb, sb) == 0, "NCHW sample %zu", i);
        stk__convert_sample(ref, 32, 32, STK_DTYPE_FLOAT32, STK_NHWC, 1, mean, std, conv);
        T_CHECK(memcmp(conv, f32.images + i * sb * 4, sb * 4) == 0, "float32 normalised sample %zu", i);
    }
    /* and the value of one float is what the formula says */
    float f0;
    memcpy(&f0, f32.images, 4);
    T_CHECK(fabsf(f0 - ((float)w1.images[0] - 120.f) / 60.f) < 1e-6f, "normalised value");
    /* a different seed gives different images */
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_SEED, 8));
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, STK_NHWC));
    T_OK(stk_loader_set(h, STK_P_EPOCH, 3));
    T_OK(stk_loader_start(h));
    tl_epoch s8;
    T_CHECK(tl_run(h, &s8, -1) == STK_END, "seed 8");
    T_CHECK(memcmp(s8.index, w1.index, N * 8) != 0, "another seed, another order");
    stk_loader_destroy(h);
    free(ref);
    free(conv);
    stk__worker_ctx_destroy(ctx);
    tl_epoch_free(&w1);
    tl_epoch_free(&w2);
    tl_epoch_free(&w4);
    tl_epoch_free(&chw);
    tl_epoch_free(&f32);
    tl_epoch_free(&s8);
}

static void test_drop_last(void)
{
    /* N = 45, batch 8: 5 full batches and a short one of 5; drop_last: 5 batches */
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    T_CHECK(tl_run(h, &e, -1) == STK_END, "end");
    T_CHECK(e.nbatches == 6 && e.batch_size[5] == 5 && e.n == N, "short last batch: %zu batches", e.nbatches);
    for (size_t i = 0; i < N; i++)
        T_CHECK(e.index[i] == i, "no shuffle: index order");
    stk_loader_destroy(h);
    tl_epoch_free(&e);

    h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_DROP_LAST, 1));
    T_CHECK(stk_loader_samples_per_epoch(h) == 40 && stk_loader_batches_per_epoch(h) == 5, "drop_last sizes");
    T_OK(stk_loader_start(h));
    for (int ep = 0; ep < 2; ep++) {
        T_CHECK(tl_run(h, &e, -1) == STK_END, "end");
        T_CHECK(e.nbatches == 5 && e.n == 40 && e.epoch == (uint64_t)ep, "drop_last: 5 full batches");
        for (size_t i = 0; i < 5; i++)
            T_CHECK(e.batch_size[i] == BS, "full");
        tl_epoch_free(&e);
    }
    stk_loader_destroy(h);

    /* a batch larger than the dataset with drop_last: no batches, STK_END every epoch */
    h = tl_loader(D.path, 64, 1);
    T_OK(stk_loader_set(h, STK_P_DROP_LAST, 1));
    T_OK(stk_loader_start(h));
    const stk_batch *b;
    uint64_t ep, s;
    T_CHECK(stk_loader_next(h, NULL, 1000, &b) == STK_END && b == NULL, "empty epoch ends at once");
    T_CHECK(stk_loader_next(h, NULL, 1000, &b) == STK_END, "and the next one");
    T_OK(stk_loader_tell(h, &ep, &s));
    T_CHECK(ep == 2 && s == 0, "two epochs passed");
    stk_loader_destroy(h);
}

static void test_resume(void)
{
    for (int workers = 1; workers <= 3; workers += 2) {
        stk_loader *h = tl_loader(D.path, BS, workers);
        T_OK(stk_loader_set(h, STK_P_EPOCH, 5));
        T_OK(stk_loader_start(h));
        tl_epoch full, part, rest;
        T_CHECK(tl_run(h, &full, -1) == STK_END, "uninterrupted");
        stk_loader_destroy(h);

        h = tl_loader(D.path, BS, 2);
        T_OK(stk_loader_set(h, STK_P_EPOCH, 5));
        T_OK(stk_loader_start(h));
        T_OK(tl_run(h, &part, 3));
        uint64_t e, s;
        T_OK(stk_loader_tell(h, &e, &s));
        T_CHECK(e == 5 && s == 3 * BS, "tell mid-epoch: (%llu, %llu)", (unsigned long long)e, (unsigned long long)s);
        stk_loader_destroy(h);

        h = tl_loader(D.path, BS, workers);
        T_OK(stk_loader_start(h)); /* at epoch 0 */
        const stk_batch *b;
        T_OK(stk_loader_next(h, NULL, -1, &b)); /* some epoch-0 work is in flight */
        T_OK(stk_loader_release(h, b, NULL));
        T_OK(stk_loader_seek(h, e, s));
        T_CHECK(tl_run(h, &rest, -1) == STK_END, "rest of the epoch");
        T_CHECK(part.n + rest.n == full.n, "sizes add up");
        T_CHECK(memcmp(full.index, part.index, part.n * 8) == 0 &&
                    memcmp(full.index + part.n, rest.index, rest.n * 8) == 0,
                "resumed order equals the uninterrupted epoch");
        size_t sb = full.sample_bytes;
        T_CHECK(memcmp(full.images, part.images, part.n * sb) == 0 &&
                    memcmp(full.images + part.n * sb, rest.images, rest.n * sb) == 0,
                "resumed pixels equal the uninterrupted epoch");
        /* seek to the end of an epoch: STK_END first, then the next epoch */
        T_OK(stk_loader_seek(h, 5, N));
        T_CHECK(stk_loader_next(h, NULL, -1, &b) == STK_END, "seek to the end gives STK_END");
        T_OK(stk_loader_next(h, NULL, -1, &b));
        T_CHECK(b->epoch == 6 && b->first_sample == 0, "then epoch 6");
        T_OK(stk_loader_release(h, b, NULL));
        T_CHECK(stk_loader_seek(h, 5, N + 1) == STK_E_RANGE, "seek past the end");
        stk_loader_destroy(h);
        tl_epoch_free(&full);
        tl_epoch_free(&part);
        tl_epoch_free(&rest);
    }
}

static void test_ranks(void)
{
    for (int world = 3; world <= 4; world++) {
        for (int mode = STK_DIST_PAD; mode <= STK_DIST_DROP; mode++) {
            int *count = calloc(N, sizeof(int));
            uint64_t nb0 = 0, ns0 = 0;
            for (int r = 0; r < world; r++) {
                stk_loader *h = tl_loader(D.path, 4, 2);
                T_OK(stk_loader_set(h, STK_P_RANK, r));
                T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, world));
                T_OK(stk_loader_set(h, STK_P_DIST_MODE, mode));
                T_OK(stk_loader_set(h, STK_P_EPOCH, 2));
                T_OK(stk_loader_start(h));
                tl_epoch e;
                T_CHECK(tl_run(h, &e, -1) == STK_END, "rank epoch");
                if (r == 0) {
                    nb0 = e.nbatches;
                    ns0 = e.n;
                }
                T_CHECK(e.nbatches == nb0 && e.n == ns0, "rank %d of %d: equal counts (%zu vs %llu)", r, world, e.n,
                        (unsigned long long)ns0);
                T_CHECK(e.n == stk_loader_samples_per_epoch(h), "samples per epoch");
                for (size_t i = 0; i < e.n; i++) {
                    count[e.index[i]]++;
                    T_CHECK(e.label[i] == D.label[e.index[i]], "label");
                }
                stk_loader_destroy(h);
                tl_epoch_free(&e);
            }
            size_t covered = 0, dup = 0;
            for (size_t i = 0; i < N; i++) {
                covered += count[i] > 0;
                dup += count[i] > 1 ? (size_t)count[i] - 1 : 0;
            }
            size_t pad = (size_t)((N + world - 1) / world * world - N);
            if (mode == STK_DIST_PAD)
                T_CHECK(covered == N && dup == pad, "PAD world %d: covers all, %zu wrapped repeats", world, dup);
            else
                T_CHECK(dup == 0 && covered == (size_t)(N / world * world), "DROP world %d: disjoint", world);
            free(count);
        }
    }
}

static void test_read_stage(void)
{
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    const stk_batch *b;
    T_OK(stk_loader_next(h, NULL, -1, &b));
    T_CHECK(b->images == NULL && b->image_bytes == 0, "READ stage: no images");
    T_OK(stk_loader_release(h, b, NULL));
    T_CHECK(tl_run(h, &e, -1) == STK_END, "end");
    T_CHECK(e.images == NULL && e.n == N - BS, "rest of the epoch");
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.bytes_read > 0 && st.read.items >= N, "read counted");
    stk_loader_destroy(h);
    tl_epoch_free(&e);
}

/* cancel H once the main thread has waited inside stk_loader_next for at least 100 ms */
static void *cancel_later(void *arg)
{
    tl_wait_inside_next(arg, "the main thread");
    usleep(100000);
    stk_loader_cancel(arg);
    return NULL;
}

static void test_limits_timeout_cancel(void)
{
    /* K = 2: a third held batch is refused */
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_PREFETCH, 2));
    T_OK(stk_loader_start(h));
    const stk_batch *a, *b, *c;
    T_OK(stk_loader_next(h, NULL, -1, &a));
    T_OK(stk_loader_next(h, NULL, -1, &b));
    T_CHECK(stk_loader_next(h, NULL, -1, &c) == STK_E_STATE, "third held batch refused");
    T_CHECK(a->number == 0 && b->number == 1, "in order");
    T_OK(stk_loader_release(h, b, NULL)); /* out of order release */
    T_CHECK(stk_loader_next(h, NULL, -1, &c) == STK_E_STATE, "batch 2 needs the slot batch 0 holds");
    T_OK(stk_loader_release(h, a, NULL));
    T_OK(stk_loader_next(h, NULL, -1, &c));
    T_CHECK(c->number == 2, "batch 2");
    T_OK(stk_loader_release(h, c, NULL));
    stk_loader_destroy(h);

    /* slow reads (every read delayed 2 s, so no read completes and no batch is ready for 2 s):
     * next times out, cancel wakes a waiting next. No upper bound on how long either took (a
     * loaded machine only makes them later): a timeout that did not end the wait, or a cancel
     * that did not wake it, would have let next wait for the first batch, and no read had
     * completed when next returned. */
    h = tl_loader(D.path, BS, 1);
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, 1000000));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_US, 2000000));
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, STK_IO_PREAD));
    T_OK(stk_loader_start(h));
    stk_stats st;
    double t0 = stk__now();
    T_CHECK(stk_loader_next(h, NULL, 20, &a) == STK_TIMEOUT && a == NULL, "timeout");
    double dt = stk__now() - t0;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.read.items == 0, "the 20 ms timeout returned after %.3f s, %llu reads done", dt,
            (unsigned long long)st.read.items);
    T_CHECK(dt >= 0.015, "a 20 ms timeout returned after %.3f s", dt);
    T_CHECK(stk_loader_next(h, NULL, 0, &a) == STK_TIMEOUT, "timeout 0 polls");
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, h);
    t0 = stk__now();
    T_CHECK(stk_loader_next(h, NULL, -1, &a) == STK_E_CANCELLED && a == NULL, "cancel wakes next");
    dt = stk__now() - t0;
    T_OK(stk_loader_stats(h, &st));
    pthread_join(th, NULL);
    T_CHECK(st.read.items == 0, "cancel: next returned after %.3f s, %llu reads done", dt,
            (unsigned long long)st.read.items);
    T_CHECK(dt >= 0.09, "next returned %.3f s after it started, before the cancel", dt);
    /* a cancel with nobody waiting is kept for the next call (no lost wake-up) */
    T_OK(stk_loader_cancel(h));
    T_CHECK(stk_loader_next(h, NULL, -1, &a) == STK_E_CANCELLED, "pending cancel");
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.wait_s > 0.05, "waiting counted: %.3f", st.wait_s);
    stk_loader_destroy(h); /* mid-read, with delayed reads in flight */
}

static void test_device_fallback(void)
{
    if (stk_cuda_device_count() > 0)
        return; /* the GPU tests cover the device path */
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_DEVICE, 0));
    T_OK(stk_loader_set(h, STK_P_DTYPE, STK_DTYPE_FLOAT16));
    T_OK(stk_loader_start(h));
    const stk_batch *b;
    T_OK(stk_loader_next(h, NULL, -1, &b));
    T_CHECK(b->device == -1 && b->dtype == STK_DTYPE_FLOAT16 && b->sample_bytes == 32 * 32 * 3 * 2,
            "host float16 batch");
    T_OK(stk_loader_release(h, b, NULL));
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.device == -1 && (st.fallback_reason == STK_E_UNSUPPORTED || st.fallback_reason == STK_E_NODEVICE),
            "fallback reason %d", st.fallback_reason);
    char rep[4096];
    stk_loader_report(h, rep, sizeof rep);
    T_CHECK(strstr(rep, "host batches"), "report says why: %s", rep);
    stk_loader_destroy(h);
}

int main(void)
{
    tl_data_make(&D, "loader", N);
    tl_write(&D);
    test_params();
    test_cover_and_epochs();
    test_determinism_and_pixels();
    test_drop_last();
    test_resume();
    test_ranks();
    test_read_stage();
    test_limits_timeout_cancel();
    test_device_fallback();
    tl_data_free(&D);
    printf("test_loader: ok\n");
    return 0;
}
