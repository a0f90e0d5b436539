/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_substitute — bad records of an s3:// dataset streamed through a cache of a
 * quarter of it, in windows of 2 shards (the `s3` fixture's radosgw): each bad record (here an
 * empty one among JPEGs) is replaced by a good record of its own shard, the one shard sure to
 * stay attached while the sample is processed (docs/S3.md "Streaming"; src/loader/loader_bad.c).
 * The positions' original records come from the same loader on the local copy in the read-only
 * stage (same seed and window: the same order, bad records delivered as they are). One epoch
 * with 1 and with 3 decode workers: every good record once as itself, at its position; at each
 * bad record's position a substitute, a good record of the bad one's shard (its label, here
 * the record's index, says which); the
 * two worker counts give the same sequence, substitutes included. Before, the substitute was
 * drawn from the whole dataset and read whether its shard was attached or not (a draw in a shard
 * not fetched failed and was drawn again), so which record stood in depended on what the fetch
 * had brought in, and a shard being detached could be read.
 *
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#define NREC 420

static int bad(uint64_t i) { return i % 37 == 5; }

/* 420 JPEGs of 96-192 px (about 24 kB), every 37th record empty, in shards of about 1 MiB,
 * uploaded; D as s3s_make fills it. Record i's label is i: a substitute's label names it. */
static void make(s3s_data *d)
{
    memset(d, 0, sizeof *d);
    s3u_env();
    d->tmp = t_tmpdir("subst");
    snprintf(d->local, sizeof d->local, "%s/local", d->tmp);
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, d->local));
    for (uint64_t i = 0; i < NREC; i++) {
        size_t len = 0;
        uint8_t *p = bad(i) ? malloc(1)
                            : t_make_jpeg(96 + (int)(i % 7) * 16, 96 + (int)(i % 5) * 16, 100 + i, T_444, 95, 0, &len);
        T_OK(stk_writer_add(w, p, len, (int32_t)i, NULL)); /* the label names the record */
        free(p);
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, d->local));
    s3s_table(d, ds);
    stk_dataset_destroy(ds);
    s3s_upload(d, "subst");
}

static void setup(stk_loader *h, int workers)
{
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 16));
    T_OK(stk_loader_set(h, STK_P_WORKERS, workers));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 32));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 32));
    T_OK(stk_loader_set(h, STK_P_SEED, 9));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, 2));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 0.5));
}

int main(void)
{
    s3s_data d;
    make(&d);
    uint64_t limit = d.total_bytes / 4;
    if (limit < 3 * d.biggest) /* a window of 2 and the next shard */
        limit = 3 * d.biggest;

    /* the positions' records: the local copy, read-only stage, bad records as they are */
    stk_loader *lh;
    T_OK(stk_loader_create(&lh));
    setup(lh, 2);
    T_OK(stk_loader_set(lh, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_open(lh, d.local));
    T_OK(stk_loader_start(lh));
    tl_epoch le;
    int rc = tl_run(lh, &le, -1);
    T_CHECK(rc == STK_END && le.n == d.n, "local: %zu samples, %s", le.n, stk_status_name(rc));
    stk_loader_destroy(lh);
    size_t nbad = 0;
    for (size_t p = 0; p < le.n; p++)
        nbad += bad(le.index[p]);
    T_CHECK(nbad == (NREC + 31) / 37, "%zu bad records in the local epoch", nbad);

    uint64_t *seq[2];
    for (int k = 0; k < 2; k++) {
        char cache[4300];
        snprintf(cache, sizeof cache, "%s/cache-w%d", d.tmp, k ? 3 : 1);
        stk_loader *h;
        T_OK(stk_loader_create(&h));
        setup(h, k ? 3 : 1);
        T_OK(stk_loader_set(h, STK_P_CACHE_BYTES, (int64_t)limit));
        T_OK(stk_loader_set_cache_dir(h, cache));
        rc = stk_loader_open(h, d.url);
        T_CHECK(rc == STK_OK, "open %s: %s", d.url, stk_loader_last_error(h));
        rc = stk_loader_start(h);
        T_CHECK(rc == STK_OK, "start: %s", stk_loader_last_error(h));
        tl_epoch e;
        rc = tl_run(h, &e, -1);
        T_CHECK(rc == STK_END, "epoch ended with %s: %s", stk_status_name(rc), stk_loader_last_error(h));
        T_CHECK(e.n == le.n, "%zu samples, %zu locally", e.n, le.n);
        size_t nsubst = 0;
        for (size_t p = 0; p < e.n; p++) {
            uint64_t was = le.index[p], j = (uint64_t)e.label[p];
            T_CHECK(e.index[p] == was, "%d workers, position %zu: record %llu, the local order has "
                    "%llu", k ? 3 : 1, p, (unsigned long long)e.index[p], (unsigned long long)was);
            if (!bad(was)) {
                T_CHECK(j == was && !e.subst[p], "%d workers, position %zu: record %llu's label %d",
                        k ? 3 : 1, p, (unsigned long long)was, e.label[p]);
                continue;
            }
            nsubst++;
            T_CHECK(e.subst[p] && e.label[p] >= 0 && j < d.n && j != was && !bad(j),
                    "%d workers, position %zu (bad record %llu): replaced by label %d, substituted %d",
                    k ? 3 : 1, p, (unsigned long long)was, e.label[p], e.subst[p]);
            T_CHECK(s3s_shard_of(&d, j) == s3s_shard_of(&d, was), "%d workers: bad record %llu "
                    "(shard %d) replaced by record %llu of shard %d", k ? 3 : 1,
                    (unsigned long long)was, s3s_shard_of(&d, was), (unsigned long long)j,
                    s3s_shard_of(&d, j));
        }
        T_CHECK(nsubst == nbad, "%zu substitutes for %zu bad records", nsubst, nbad);
        seq[k] = malloc(e.n * sizeof *seq[k]);
        for (size_t p = 0; p < e.n; p++)
            seq[k][p] = (uint64_t)e.label[p];
        tl_epoch_free(&e);
        stk_loader_destroy(h);
    }
    T_CHECK(!memcmp(seq[0], seq[1], le.n * sizeof *seq[0]),
            "1 and 3 workers delivered different sequences (substitutes included)");
    free(seq[0]);
    free(seq[1]);
    tl_epoch_free(&le);
    free(d.len);
    t_rmtree(d.tmp);
    free(d.tmp);
    printf("ok\n");
    return 0;
}
