/* SPDX-License-Identifier: MIT */
/* test_targets.c — per-record targets, every type: written (stk_writer_add_target, and packed from
 * a manifest), read back (stk_dataset_target) across shards, and handed out by the loader beside
 * each batch (every record once per epoch, its own row, shuffled or not; multi-hot label lists);
 * the files layout of a manifest; a dataset written by stoker 0.1 still opens; misuse refused.
 * stk-test: concurrency */
#include "testutil.h"

#include <string.h>
#include <unistd.h>

#define N 48
#define CLASSES 6

static const int k_types[] = {STK_TDT_UINT8, STK_TDT_INT32, STK_TDT_INT64, STK_TDT_FLOAT32, STK_TDT_FLOAT64};

static uint8_t *g_jpeg[N];
static size_t g_len[N];

/* Record I's target row of T (ROW bytes): values that use the type's range, or a label list. */
static void make_row(const stk_target_info *t, uint64_t i, uint8_t *row)
{
    size_t es = stk_target_dtype_size(t->dtype);
    for (uint32_t j = 0; j < t->size; j++) {
        uint8_t *p = row + es * j;
        int64_t v = (int64_t)(i * 37 + j * 11);
        if (t->kind == STK_TARGET_LABELS) {
            int32_t c = j <= i % t->size ? (int32_t)((i + 2 * j) % t->classes) : -1;
            memcpy(p, &c, 4);
        } else if (t->dtype == STK_TDT_UINT8) {
            *p = (uint8_t)(v % 256);
        } else if (t->dtype == STK_TDT_INT32) {
            int32_t x = (int32_t)(v * 1000003 - 100000000);
            memcpy(p, &x, 4);
        } else if (t->dtype == STK_TDT_INT64) {
            int64_t x = v * 1000000007LL * 1000003LL - (1LL << 60);
            memcpy(p, &x, 8);
        } else if (t->dtype == STK_TDT_FLOAT32) {
            float x = (float)v / 7.0f - 3.25f;
            memcpy(p, &x, 4);
        } else {
            double x = (double)v / 3.0 + 1e-300;
            memcpy(p, &x, 8);
        }
    }
}

static void write_dataset(const char *path, const stk_target_info *t)
{
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_set_targets(w, t));
    T_OK(stk_writer_open(w, path));
    uint8_t row[64 * 8];
    for (uint64_t i = 0; i < N; i++) {
        make_row(t, i, row);
        T_OK(stk_writer_add_target(w, g_jpeg[i], g_len[i], (int32_t)(i % CLASSES), NULL, row));
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
}

/* Two datasets open at once on PATH (they share each shard's MDB_env, src/dataset/envreg.c):
 * both read every target. The second opens the `targets` database while the first's kept read
 * transaction is still open: under ASan, a handle registered per transaction leaked its name. */
static void check_dataset(const char *path, const stk_target_info *t)
{
    stk_dataset *two[2];
    stk_dataset_info di;
    stk_target_info got;
    uint8_t row[64 * 8], want[64 * 8];
    size_t rowb = stk_target_dtype_size(t->dtype) * t->size;
    for (int d = 0; d < 2; d++) {
        T_OK(stk_dataset_create(&two[d]));
        T_OK(stk_dataset_open(two[d], path));
    }
    for (int d = 0; d < 2; d++) {
        stk_dataset *ds = two[d];
        T_OK(stk_dataset_info_get(ds, &di));
        T_CHECK(di.records == N && di.shards >= 2, "%u shards", di.shards);
        T_OK(stk_dataset_target_info(ds, &got));
        T_CHECK(!memcmp(&got, t, sizeof got), "target info");
        for (uint64_t i = 0; i < N; i++) {
            make_row(t, i, want);
            T_OK(stk_dataset_target(ds, i, row, sizeof row));
            T_CHECK(!memcmp(row, want, rowb), "dataset %d dtype %d record %llu", d, t->dtype,
                    (unsigned long long)i);
        }
        T_CHECK(stk_dataset_target(ds, N, row, sizeof row) == STK_E_RANGE, "past the end");
        T_CHECK(stk_dataset_target(ds, 0, row, rowb - 1) == STK_E_RANGE, "small buffer");
    }
    stk_dataset_destroy(two[1]);
    stk_dataset_destroy(two[0]);
}

/* One epoch of a loader on PATH: every record once, each sample's target row its record's (or
 * the multi-hot of its label list), the label its own. */
static void check_loader(const char *path, const stk_target_info *t, int shuffle, int multi_hot)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 7));
    T_OK(stk_loader_set(h, STK_P_MODE, STK_MODE_EVAL));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 16));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 16));
    T_OK(stk_loader_set(h, STK_P_RESIZE, 16));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, shuffle));
    T_OK(stk_loader_set(h, STK_P_MULTI_HOT, multi_hot));
    T_OK(stk_loader_open(h, path));
    T_OK(stk_loader_start(h));
    int seen[N] = {0};
    const stk_batch *b;
    int rc;
    uint8_t want[64 * 8];
    size_t es = stk_target_dtype_size(t->dtype);
    while ((rc = stk_loader_next(h, NULL, 30000, &b)) == STK_OK) {
        stk_target_info oi;
        const uint8_t *tg = stk_loader_batch_targets(h, b, &oi);
        T_CHECK(tg, "targets of %s (multi-hot %d)", path, multi_hot);
        if (multi_hot)
            T_CHECK(oi.dtype == STK_TDT_FLOAT32 && oi.size == t->classes && oi.kind == STK_TARGET_VALUES, "multi-hot");
        else
            T_CHECK(!memcmp(&oi, t, sizeof oi), "as stored");
        for (uint32_t i = 0; i < b->size; i++) {
            uint64_t ix = b->indices[i];
            T_CHECK(ix < N && !seen[ix]++, "record %llu twice", (unsigned long long)ix);
            T_CHECK(b->labels[i] == (int32_t)(ix % CLASSES), "label");
            make_row(t, ix, want);
            if (!multi_hot) {
                T_CHECK(!memcmp(tg + (size_t)i * es * t->size, want, es * t->size), "row of record %llu",
                        (unsigned long long)ix);
                continue;
            }
            const float *hot = (const float *)(const void *)(tg + (size_t)i * 4 * t->classes);
            for (uint32_t c = 0; c < t->classes; c++) {
                int in = 0;
                for (uint32_t j = 0; j < t->size; j++) {
                    int32_t v;
                    memcpy(&v, want + 4 * j, 4);
                    in |= v == (int32_t)c;
                }
                T_CHECK(hot[c] == (in ? 1.0f : 0.0f), "multi-hot of record %llu class %u", (unsigned long long)ix, c);
            }
        }
        T_OK(stk_loader_release(h, b, NULL));
    }
    T_CHECK(rc == STK_END, "end: %d", rc);
    for (int i = 0; i < N; i++)
        T_CHECK(seen[i] == 1, "record %d seen %d times", i, seen[i]);
    stk_loader_destroy(h);
}

static void misuse(const char *dir)
{
    char p[4200];
    stk_writer *w;
    stk_target_info bad = {STK_TDT_INT32, STK_TARGET_LABELS, 2, 0}; /* a label list needs classes */
    T_OK(stk_writer_create(&w));
    T_CHECK(stk_writer_set_targets(w, &bad) == STK_E_INVALID, "no classes");
    bad = (stk_target_info){STK_TDT_FLOAT32, STK_TARGET_LABELS, 2, 4};
    T_CHECK(stk_writer_set_targets(w, &bad) == STK_E_INVALID, "float labels");
    bad = (stk_target_info){9, STK_TARGET_VALUES, 2, 0};
    T_CHECK(stk_writer_set_targets(w, &bad) == STK_E_INVALID, "unknown dtype");
    bad = (stk_target_info){STK_TDT_FLOAT32, STK_TARGET_VALUES, 0, 0};
    T_CHECK(stk_writer_set_targets(w, &bad) == STK_E_INVALID, "size 0");
    stk_target_info t = {STK_TDT_INT32, STK_TARGET_LABELS, 2, 4};
    T_OK(stk_writer_set_targets(w, &t));
    snprintf(p, sizeof p, "%s/misuse", dir);
    T_OK(stk_writer_open(w, p));
    int32_t row[2] = {3, -1};
    T_CHECK(stk_writer_add(w, g_jpeg[0], g_len[0], 0, NULL) == STK_E_STATE, "add without a target");
    T_OK(stk_writer_add_target(w, g_jpeg[0], g_len[0], 0, NULL, row));
    T_CHECK(stk_writer_set_targets(w, &t) == STK_E_STATE, "set after add");
    row[0] = 4;
    T_CHECK(stk_writer_add_target(w, g_jpeg[0], g_len[0], 0, NULL, row) == STK_E_INVALID &&
                strstr(stk_writer_last_error(w), "0..3"),
            "class out of range: %s", stk_writer_last_error(w));
    row[0] = -1;
    row[1] = 2;
    T_CHECK(stk_writer_add_target(w, g_jpeg[0], g_len[0], 0, NULL, row) == STK_E_INVALID, "label after padding");
    row[0] = 1;
    T_OK(stk_writer_add_target(w, g_jpeg[0], g_len[0], 0, NULL, row));
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    /* a writer without targets refuses add_target */
    T_OK(stk_writer_create(&w));
    snprintf(p, sizeof p, "%s/misuse2", dir);
    T_OK(stk_writer_open(w, p));
    T_CHECK(stk_writer_add_target(w, g_jpeg[0], g_len[0], 0, NULL, row) == STK_E_STATE, "no targets set");
    stk_writer_destroy(w);
    /* multi-hot of a dataset with value targets, or none */
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_MULTI_HOT, 1));
    snprintf(p, sizeof p, "%s/t3", dir); /* int64 values (written by main) */
    T_OK(stk_loader_open(h, p));
    T_CHECK(stk_loader_start(h) == STK_E_INVALID && strstr(stk_loader_last_error(h), "label list"), "%s",
            stk_loader_last_error(h));
    stk_loader_destroy(h);
}

/* Shard 1 of a dataset replaced by shard 1 of one with other targets: refused, naming it. */
static void mixed_shards(const char *dir)
{
    char a[4200], b[4200], cmd[9000];
    snprintf(a, sizeof a, "%s/t1", dir);
    snprintf(b, sizeof b, "%s/t3", dir);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/mixed' && cp '%s/shard-00001.lmdb' '%s/mixed/shard-00001.lmdb'", a,
             dir, b, dir);
    T_CHECK(system(cmd) == 0, "%s", cmd);
    snprintf(a, sizeof a, "%s/mixed", dir);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    int rc = stk_dataset_open(ds, a);
    T_CHECK(rc == STK_E_FORMAT && strstr(stk_dataset_last_error(ds), "shard-00001.lmdb") &&
                strstr(stk_dataset_last_error(ds), "differ from shard 0"),
            "mixed: %d %s", rc, stk_dataset_last_error(ds));
    stk_dataset_destroy(ds);
}

/* A started loader on PATH (LAYOUT, batches of BS 8x8 images) and its first batch in *B. */
static stk_loader *one_batch(const char *path, int layout, int bs, const stk_batch **b)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_LAYOUT, layout));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, bs));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 8));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 8));
    T_OK(stk_loader_open(h, path));
    T_OK(stk_loader_start(h));
    T_OK(stk_loader_next(h, NULL, 30000, b));
    return h;
}

/* Pack a CSV manifest (values and class names), read it packed and as the files layout. */
static void from_manifest(const char *dir)
{
    char m[4200], dst[4200], p[4200];
    snprintf(m, sizeof m, "%s/m.csv", dir);
    snprintf(dst, sizeof dst, "%s/packed", dir);
    FILE *f = fopen(m, "w");
    T_CHECK(f, "manifest");
    fprintf(f, "path,label,box\n");
    stk_target_info t = {STK_TDT_FLOAT64, STK_TARGET_VALUES, 3, 0};
    for (uint64_t i = 0; i < N; i++) {
        snprintf(p, sizeof p, "%s/img%02llu.jpg", dir, (unsigned long long)i);
        t_write_file(p, g_jpeg[i], g_len[i]);
        double row[3];
        make_row(&t, i, (uint8_t *)row);
        fprintf(f, "img%02llu.jpg,c%llu,%.17g %.17g %.17g\n", (unsigned long long)i,
                (unsigned long long)(i % CLASSES), row[0], row[1], row[2]);
    }
    fclose(f);
    stk_pack_options o;
    memset(&o, 0, sizeof o);
    o.shard_bytes = 1 << 20;
    stk_pack_ext_options x;
    memset(&x, 0, sizeof x);
    x.size = sizeof x;
    x.target_fields = "box";
    x.target_dtype = STK_TDT_FLOAT64;
    stk_pack_result r;
    T_OK(stk_pack_ext(m, dst, &o, &x, &r));
    T_CHECK(r.records == N && r.classes == CLASSES && x.bad_lines == 0, "packed %llu", (unsigned long long)r.records);
    T_CHECK(!memcmp(&x.targets, &t, sizeof t), "pack reports the targets' shape");
    check_dataset(dst, &t);
    check_loader(dst, &t, 1, 0);
    /* the manifest read in place (files layout): paths and labels, every record once; targets
     * need the options of a pack, so there are none */
    const stk_batch *b;
    stk_loader *h = one_batch(m, STK_LAYOUT_FILES, N, &b);
    int seen[N] = {0};
    for (uint32_t i = 0; i < b->size; i++) {
        T_CHECK(b->indices[i] < N && !seen[b->indices[i]]++, "once");
        T_CHECK(b->labels[i] == (int32_t)(b->indices[i] % CLASSES), "files-layout label");
    }
    T_CHECK(b->size == N && !stk_loader_batch_targets(h, b, NULL), "files layout: %u samples", b->size);
    T_OK(stk_loader_release(h, b, NULL));
    stk_loader_destroy(h);
}

/* A dataset written by stoker 0.1.0 (tests/data/README.md): three records, no targets. Opened
 * from a copy (readers create LMDB lock files beside the shards). */
static void old_dataset(const char *dir)
{
    const char *src = getenv("SRC_DIR");
    if (!src)
        src = ".";
    char p[4200], cmd[9000];
    snprintf(p, sizeof p, "%s/v0.1-dataset", dir);
    snprintf(cmd, sizeof cmd, "cp -r '%s/tests/data/v0.1-dataset' '%s'", src, p);
    T_CHECK(system(cmd) == 0, "%s", cmd);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, p));
    stk_target_info t;
    T_OK(stk_dataset_target_info(ds, &t));
    T_CHECK(stk_dataset_count(ds) == 3 && t.dtype == STK_TDT_NONE, "old dataset");
    T_CHECK(!strcmp(stk_dataset_class_name(ds, 0), "ant") && !strcmp(stk_dataset_class_name(ds, 1), "bee"), "classes");
    uint8_t buf[65536];
    for (uint64_t i = 0; i < 3; i++) {
        stk_record_info ri;
        size_t len;
        T_OK(stk_dataset_read(ds, i, buf, sizeof buf, &len, &ri)); /* CRC checked */
        T_CHECK(ri.label == (i < 2 ? 0 : 1), "label %llu", (unsigned long long)i);
        int w, hh;
        uint8_t *px = t_decode_ref(buf, len, &w, &hh);
        T_CHECK(px && w == 32, "decodes");
        free(px);
    }
    T_CHECK(stk_dataset_target(ds, 0, buf, sizeof buf) == STK_E_INVALID, "no targets to read");
    stk_dataset_destroy(ds);
    const stk_batch *b;
    stk_loader *h = one_batch(p, STK_LAYOUT_AUTO, 3, &b);
    stk_target_info oi;
    T_CHECK(b->size == 3 && !stk_loader_batch_targets(h, b, &oi) && oi.dtype == STK_TDT_NONE, "no batch targets");
    T_OK(stk_loader_release(h, b, NULL));
    stk_loader_destroy(h);
}

int main(void)
{
    char *dir = t_tmpdir("targets");
    for (int i = 0; i < N; i++)
        g_jpeg[i] = t_make_jpeg(240 + 8 * (i % 5), 200 + 4 * (i % 7), 77 + (uint64_t)i, T_444, 98, 0, &g_len[i]);
    char p[4200];
    for (size_t k = 0; k < sizeof k_types / sizeof *k_types; k++) {
        stk_target_info t = {k_types[k], STK_TARGET_VALUES, 3 + (uint32_t)k, 0};
        snprintf(p, sizeof p, "%s/t%d", dir, k_types[k]);
        write_dataset(p, &t);
        check_dataset(p, &t);
        check_loader(p, &t, (int)(k % 2), 0);
    }
    stk_target_info lab = {STK_TDT_INT32, STK_TARGET_LABELS, 3, CLASSES};
    snprintf(p, sizeof p, "%s/labels", dir);
    write_dataset(p, &lab);
    check_dataset(p, &lab);
    check_loader(p, &lab, 1, 0);
    check_loader(p, &lab, 1, 1);
    misuse(dir);
    mixed_shards(dir);
    from_manifest(dir);
    old_dataset(dir);
    for (int i = 0; i < N; i++)
        free(g_jpeg[i]);
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
