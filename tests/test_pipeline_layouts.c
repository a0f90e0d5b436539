/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_layouts.c — the whole pipeline gives the same batches whatever the storage path:
 * an ImageFolder (files layout, open/read/close per record) and the same folder packed with
 * stk_pack into shards, read through io_uring with O_DIRECT, io_uring buffered, the pread pool,
 * the forced io_uring fallback (STOKER_DISABLE_URING=1), LMDB's mmap path and without CRC checks.
 * For each: every record once per epoch with the folder's label, and pixels, labels, indices and
 * payload sizes bit-identical to the reference run. Also eval mode (in order, centre crops) on
 * two paths.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "test_loader_util.h"

#include <stdlib.h>

#define BS 7

typedef struct cfg {
    const char *name;
    int shards;
    int backend, direct, verify, disable_uring;
} cfg;

static void run(const char *path, const cfg *c, int mode, tl_epoch *out, stk_stats *st)
{
    if (c->disable_uring)
        setenv("STOKER_DISABLE_URING", "1", 1);
    else
        unsetenv("STOKER_DISABLE_URING");
    stk_loader *h = tl_loader(path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, c->backend));
    T_OK(stk_loader_set(h, STK_P_IO_DIRECT, c->direct));
    T_OK(stk_loader_set(h, STK_P_VERIFY_CRC, c->verify));
    T_OK(stk_loader_set(h, STK_P_MODE, mode));
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, STK_NHWC));
    T_OK(stk_loader_set(h, STK_P_EPOCH, 4));
    if (mode == STK_MODE_EVAL) {
        T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
        T_OK(stk_loader_set(h, STK_P_RESIZE, 40));
    }
    T_OK(stk_loader_start(h));
    T_CHECK(tl_run(h, out, -1) == STK_END, "%s: epoch ends", c->name);
    T_OK(stk_loader_stats(h, st));
    stk_loader_destroy(h);
    unsetenv("STOKER_DISABLE_URING");
}

static void same(const tl_epoch *a, const tl_epoch *b, const char *what)
{
    T_CHECK(a->n == b->n, "%s: %zu samples, reference %zu", what, b->n, a->n);
    T_CHECK(memcmp(a->index, b->index, a->n * 8) == 0, "%s: same order", what);
    T_CHECK(memcmp(a->label, b->label, a->n * 4) == 0, "%s: same labels", what);
    T_CHECK(memcmp(a->payload, b->payload, a->n * 4) == 0, "%s: same payload sizes", what);
    T_CHECK(memcmp(a->images, b->images, a->n * a->sample_bytes) == 0, "%s: same pixels", what);
}

int main(void)
{
    char *dir = t_tmpdir("pipelayout");
    char folder[4200], shards[4200];
    snprintf(folder, sizeof folder, "%s/folder", dir);
    snprintf(shards, sizeof shards, "%s/shards", dir);
    size_t n = t_make_imagefolder(folder, 4, 9, 24, 90, 3);
    T_CHECK(n == 36, "folder of %zu images", n);
    T_OK(stk_pack(folder, shards, NULL, NULL));

    /* the reference: labels and payloads straight from the folder's dataset */
    stk_dataset *fds;
    T_OK(stk_dataset_create(&fds));
    T_OK(stk_dataset_open(fds, folder));
    T_CHECK(stk_dataset_count(fds) == n, "folder count");
    tl_data d;
    memset(&d, 0, sizeof d);
    d.n = n;
    d.label = calloc(n, sizeof(int32_t));
    d.len = calloc(n, sizeof(size_t));
    int32_t labels_seen = 0;
    for (size_t i = 0; i < n; i++) {
        stk_record_info info;
        T_OK(stk_dataset_record(fds, i, &info));
        d.label[i] = info.label;
        d.len[i] = info.length;
        labels_seen |= 1 << info.label;
    }
    T_CHECK(labels_seen == 0xf, "labels vary over 4 classes");
    stk_dataset_destroy(fds);

    const cfg cfgs[] = {
        {"files", 0, STK_IO_AUTO, 1, 1, 0},
        {"shards io_uring O_DIRECT", 1, STK_IO_URING, 1, 1, 0},
        {"shards io_uring buffered", 1, STK_IO_URING, 0, 1, 0},
        {"shards pread", 1, STK_IO_PREAD, 1, 1, 0},
        {"shards forced fallback", 1, STK_IO_AUTO, 1, 1, 1},
        {"shards mmap", 1, STK_IO_MMAP, 0, 1, 0},
        {"shards no CRC", 1, STK_IO_AUTO, 0, 0, 0},
    };
    tl_epoch ref;
    memset(&ref, 0, sizeof ref);
    int have_uring = stk_has_feature(STK_FEATURE_URING);
    for (size_t k = 0; k < STK__ARRAY_LEN(cfgs); k++) {
        const cfg *c = &cfgs[k];
        if (c->backend == STK_IO_URING && !have_uring)
            continue;
        tl_epoch e;
        stk_stats st;
        run(c->shards ? shards : folder, c, STK_MODE_TRAIN, &e, &st);
        tl_check_cover(&e, &d);
        if (k == 0)
            ref = e;
        else
            same(&ref, &e, c->name);
        printf("%-26s backend %d, %s\n", c->name, st.io_backend, st.io_backend_note);
        if (c->disable_uring)
            T_CHECK(st.io_backend == STK_IO_PREAD && st.fallback_reason != 0,
                    "forced fallback reported (backend %d, reason %d)", st.io_backend, st.fallback_reason);
        if (c->backend == STK_IO_MMAP)
            T_CHECK(st.io_backend == STK_IO_MMAP, "mmap backend used");
        if (k != 0)
            tl_epoch_free(&e);
    }

    /* eval: in order, the same on two paths */
    tl_epoch ea, eb;
    stk_stats st;
    run(folder, &cfgs[0], STK_MODE_EVAL, &ea, &st);
    run(shards, &cfgs[have_uring ? 1 : 3], STK_MODE_EVAL, &eb, &st); /* io_uring, else pread */
    for (size_t i = 0; i < n; i++)
        T_CHECK(ea.index[i] == i, "eval in index order");
    same(&ea, &eb, "eval files vs shards");

    tl_epoch_free(&ref);
    tl_epoch_free(&ea);
    tl_epoch_free(&eb);
    free(d.label);
    free(d.len);
    t_rmtree(dir);
    free(dir);
    printf("test_pipeline_layouts: ok\n");
    return 0;
}
