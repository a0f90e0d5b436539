/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_targets — a dataset whose records carry targets (float32 x 4, a box each),
 * streamed from the `s3` fixture's radosgw through a cache of a quarter of its size with a
 * shuffle window (docs/S3.md "Streaming"): the open learns the target shape from shard 0's head
 * (no shard fetched; a target not read yet is STK_E_STATE, not zeros); every record once per
 * epoch with its own target, byte-equal to the local read of the same record, and the same sequence of indices and targets as the same loader on
 * the local shards (same seed and window); a second epoch (shards attached again) the same
 * targets; a seek mid-epoch in a new loader delivers exactly the rest; one target byte changed
 * in the bucket fails the epoch with a CRC32C error naming that record, never a wrong target.
 *
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#define TN 1000
#define TK 4

static void target_of(size_t i, float t[TK])
{
    t[0] = (float)i + 0.25f;
    t[1] = (float)i * 3.5f;
    t[2] = 1000.0f + (float)i;
    t[3] = -(float)i - 0.5f;
}

typedef struct run {
    size_t n;
    uint64_t *index;
    float *target; /* n x TK */
} run;

/* A loader on PATH (STK_STAGE_READ, seed 9, window 2); CACHE_BYTES 0: none set. */
static stk_loader *loader(const char *path, const char *cache, uint64_t cache_bytes)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 16));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(h, STK_P_SEED, 9));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, 2));
    if (cache) {
        T_OK(stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)cache_bytes));
        T_OK(stk_loader_set_cache_dir(h, cache));
    }
    int rc = stk_loader_open(h, path);
    T_CHECK(rc == STK_OK, "open %s: %s", path, stk_loader_last_error(h));
    return h;
}

/* The rest of the epoch: indices and targets, none substituted. Returns the status that ended it. */
static int epoch(stk_loader *h, run *r)
{
    memset(r, 0, sizeof *r);
    r->index = malloc(TN * 2 * sizeof *r->index);
    r->target = malloc(TN * 2 * TK * sizeof *r->target);
    int rc;
    for (;;) {
        const stk_batch *b;
        rc = stk_loader_next(h, NULL, 60000, &b);
        if (rc != STK_OK)
            break;
        stk_target_info ti;
        const float *t = stk_loader_batch_targets(h, b, &ti);
        T_CHECK(t && ti.dtype == STK_TDT_FLOAT32 && ti.size == TK, "batch without its targets");
        for (uint32_t i = 0; i < b->size; i++) {
            T_CHECK(!b->substituted || !b->substituted[i], "record %llu substituted",
                    (unsigned long long)b->indices[i]);
            T_CHECK(r->n < 2 * TN, "too many records");
            r->index[r->n] = b->indices[i];
            memcpy(r->target + TK * r->n, t + TK * i, TK * sizeof *t);
            r->n++;
        }
        T_OK(stk_loader_release(h, b, NULL));
    }
    return rc;
}

static void run_free(run *r)
{
    free(r->index);
    free(r->target);
}

static float local_t[TN][TK]; /* the local dataset's read of each record's target */

/* Every record once, each target byte-equal to the local dataset's read of it. */
static void check_targets(const run *r, const char *what)
{
    T_CHECK(r->n == TN, "%s: %zu records, the dataset has %d", what, r->n, TN);
    uint8_t seen[TN] = {0};
    for (size_t i = 0; i < r->n; i++) {
        uint64_t x = r->index[i];
        T_CHECK(x < TN && !seen[x]++, "%s: record %llu twice or out of range", what,
                (unsigned long long)x);
        const float *want = local_t[x];
        T_CHECK(memcmp(want, r->target + TK * i, sizeof local_t[x]) == 0,
                "%s: record %llu: target %g %g %g %g, the local read %g %g %g %g", what,
                (unsigned long long)x, r->target[TK * i], r->target[TK * i + 1],
                r->target[TK * i + 2], r->target[TK * i + 3], want[0], want[1], want[2], want[3]);
    }
}

/* Flip one byte of record X's target (found by its bytes) in the shard files of DIR; returns the
 * shard's file name in NAME. */
static void corrupt_target(const char *dir, size_t x, char *name, size_t cap)
{
    float t[TK];
    target_of(x, t);
    for (int s = 0; s < 64; s++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/shard-%05d.lmdb", dir, s);
        FILE *f = fopen(path, "r+b");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        uint8_t *b = malloc((size_t)size);
        fseek(f, 0, SEEK_SET);
        T_CHECK(fread(b, 1, (size_t)size, f) == (size_t)size, "read %s", path);
        for (long k = 0; k + (long)sizeof t <= size; k++)
            if (memcmp(b + k, t, sizeof t) == 0) {
                uint8_t v = b[k + 5] ^ 0x40;
                fseek(f, k + 5, SEEK_SET);
                T_CHECK(fwrite(&v, 1, 1, f) == 1, "write %s", path);
                fclose(f);
                free(b);
                snprintf(name, cap, "shard-%05d.lmdb", s);
                return;
            }
        fclose(f);
        free(b);
    }
    T_CHECK(0, "record %zu's target not found in the shards of %s", x, dir);
}

int main(void)
{
    s3u_env();
    char *tmp = t_tmpdir("s3targets");
    char local[4300], bad[4300], cache[4300], url[256], badurl[256];
    snprintf(local, sizeof local, "%s/local", tmp);
    snprintf(bad, sizeof bad, "%s/bad", tmp);
    /* 1000 records of 4-24 kB with a float32 x 4 target each, shards of about 1 MiB */
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    stk_target_info ti = {STK_TDT_FLOAT32, STK_TARGET_VALUES, TK, 0};
    T_OK(stk_writer_set_targets(w, &ti));
    T_OK(stk_writer_open(w, local));
    uint8_t *p = malloc(30000);
    for (size_t i = 0; i < TN; i++) {
        size_t len = 4000 + (i * 7919) % 20000;
        for (size_t k = 0; k < len; k++)
            p[k] = (uint8_t)(i * 31 + k * 7 + (k >> 8));
        float t[TK];
        target_of(i, t);
        T_OK(stk_writer_add_target(w, p, len, (int32_t)(i % 5), NULL, t));
    }
    free(p);
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, local));
    uint64_t total = 0, biggest = 0;
    for (uint32_t s = 0; s < ds->nshards; s++) {
        total += ds->shards[s].file_size;
        biggest = ds->shards[s].file_size > biggest ? ds->shards[s].file_size : biggest;
    }
    T_CHECK(ds->nshards >= 6 && ds->nshards <= 64, "%u shards", ds->nshards);
    uint32_t nshards = ds->nshards;
    uint64_t first[64], count[64];
    for (uint32_t s = 0; s < nshards && s < 64; s++) {
        first[s] = ds->shards[s].first;
        count[s] = ds->shards[s].count;
    }
    for (size_t i = 0; i < TN; i++)
        T_OK(stk_dataset_target(ds, i, local_t[i], sizeof local_t[i]));
    /* closed before the loaders open the same files (two datasets' read transactions opening
     * named databases of one shared LMDB environment at once is what LMDB forbids) */
    stk_dataset_destroy(ds);
    uint64_t limit = total / 4;
    T_CHECK(limit >= 2 * biggest + 2 * 65536, "a quarter (%llu) below a window of two shards (%llu)",
            (unsigned long long)limit, (unsigned long long)biggest);
    stk__s3_cfg c = s3u_cfg();
    char bucket[64];
    s3u_bucket(&c, "targets", bucket, sizeof bucket);
    s3u_upload(&c, bucket, "ds", local);
    snprintf(url, sizeof url, "s3://%s/ds", bucket);

    /* the open fetches no shard and knows the targets */
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    stk_dataset *sd;
    T_OK(stk_dataset_create(&sd));
    T_OK(stk_dataset_set(sd, STK_P_CACHE_BYTES, (int64_t)limit));
    T_OK(stk_dataset_set_cache_dir(sd, cache));
    int rc = stk_dataset_open(sd, url);
    T_CHECK(rc == STK_OK, "open through a quarter cache: %s", stk_dataset_last_error(sd));
    stk_fetch_stats fs;
    T_OK(stk_dataset_fetch_stats(sd, &fs));
    stk_target_info got;
    T_OK(stk_dataset_target_info(sd, &got));
    T_CHECK(fs.shards_fetched == 0 && got.dtype == STK_TDT_FLOAT32 && got.size == TK &&
                got.kind == STK_TARGET_VALUES,
            "streamed open: %llu shards fetched, targets %d x %u", (unsigned long long)fs.shards_fetched,
            got.dtype, got.size);
    float t0[TK];
    rc = stk_dataset_target(sd, 0, t0, sizeof t0);
    T_CHECK(rc == STK_E_STATE, "the target of a record whose shard is not attached: %s, want "
            "STK_E_STATE (it is not read yet)", stk_status_name(rc));
    stk_dataset_destroy(sd);

    /* the local loader: the reference sequence */
    stk_loader *h = loader(local, NULL, 0);
    T_OK(stk_loader_start(h));
    run ref;
    rc = epoch(h, &ref);
    T_CHECK(rc == STK_END, "local epoch: %s: %s", stk_status_name(rc), stk_loader_last_error(h));
    check_targets(&ref, "local");
    stk_loader_destroy(h);

    /* streamed through the quarter cache: the same sequence, two epochs */
    h = loader(url, cache, limit);
    T_OK(stk_loader_start(h));
    run a;
    rc = epoch(h, &a);
    T_CHECK(rc == STK_END, "streamed epoch 0: %s: %s", stk_status_name(rc), stk_loader_last_error(h));
    check_targets(&a, "streamed epoch 0");
    for (size_t i = 0; i < a.n; i++)
        T_CHECK(a.index[i] == ref.index[i], "position %zu: record %llu streamed, %llu local", i,
                (unsigned long long)a.index[i], (unsigned long long)ref.index[i]);
    run e1;
    rc = epoch(h, &e1);
    T_CHECK(rc == STK_END, "streamed epoch 1: %s: %s", stk_status_name(rc), stk_loader_last_error(h));
    check_targets(&e1, "streamed epoch 1");
    run_free(&e1);
    T_OK(stk_dataset_fetch_stats(stk_loader_dataset(h), &fs));
    T_CHECK(fs.shards_fetched > nshards, "two epochs through a quarter cache fetched %llu shards",
            (unsigned long long)fs.shards_fetched);
    stk_loader_destroy(h);

    /* mid-epoch resume in a new loader: exactly the rest, with the same targets */
    const uint64_t at[] = {37, TN - 9};
    for (size_t k = 0; k < 2; k++) {
        h = loader(url, cache, limit);
        T_OK(stk_loader_start(h));
        T_OK(stk_loader_seek(h, 0, at[k]));
        run r;
        rc = epoch(h, &r);
        T_CHECK(rc == STK_END, "resumed at %llu: %s: %s", (unsigned long long)at[k],
                stk_status_name(rc), stk_loader_last_error(h));
        T_CHECK(r.n == TN - at[k], "resumed at %llu: %zu records", (unsigned long long)at[k], r.n);
        for (size_t i = 0; i < r.n; i++)
            T_CHECK(r.index[i] == a.index[at[k] + i] &&
                        memcmp(r.target + TK * i, a.target + TK * (at[k] + i), TK * sizeof(float)) == 0,
                    "resumed at %llu: position %zu differs", (unsigned long long)at[k], i);
        run_free(&r);
        stk_loader_destroy(h);
    }

    /* one byte of record 650's target changed in the bucket: a CRC32C error naming the record */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", local, bad);
    T_CHECK(system(cmd) == 0, "%s", cmd);
    char shard[64];
    const size_t victim = 650;
    corrupt_target(bad, victim, shard, sizeof shard);
    s3u_upload(&c, bucket, "bad", bad);
    snprintf(badurl, sizeof badurl, "s3://%s/bad", bucket);
    uint64_t key = victim;
    for (uint32_t s = 0; s < nshards; s++)
        if (victim >= first[s] && victim < first[s] + count[s])
            key = victim - first[s];
    snprintf(cache, sizeof cache, "%s/cache-bad", tmp);
    h = loader(badurl, cache, limit);
    T_OK(stk_loader_start(h));
    run r;
    rc = epoch(h, &r);
    const char *msg = stk_loader_last_error(h);
    char want[96];
    snprintf(want, sizeof want, "%s key %llu", shard, (unsigned long long)key);
    printf("  target byte changed: %s after %zu records: %s\n", stk_status_name(rc), r.n, msg);
    T_CHECK(rc == STK_E_CRC && strstr(msg, want) && strstr(msg, "target"),
            "a changed target byte: %s: %s (want a CRC error naming %s)", stk_status_name(rc), msg, want);
    for (size_t i = 0; i < r.n; i++) { /* what came before the error: right targets only */
        T_CHECK(r.index[i] != victim && memcmp(local_t[r.index[i]], r.target + TK * i, sizeof local_t[0]) == 0,
                "record %llu delivered with a wrong target", (unsigned long long)r.index[i]);
    }
    run_free(&r);
    stk_loader_destroy(h);

    run_free(&a);
    run_free(&ref);
    t_rmtree(tmp);
    free(tmp);
    printf("test_s3_stream_targets: ok\n");
    return 0;
}
