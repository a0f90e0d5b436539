/* SPDX-License-Identifier: MIT */
/* test_loader_window: the loader in the shard-window order (STK_P_SHUFFLE_WINDOW) on a real
 * dataset of 6 shards: every record exactly once per epoch; the same sequence with 1 and 3
 * workers and 1 and 2 I/O threads; at most W shards open at any position and the first records
 * from one shard; epochs differ; a seek mid-epoch (stk_loader_seek) delivers exactly the rest;
 * two ranks read disjoint shard sets whose union is every shard; a resume whose consumed count
 * is no multiple of the world size (another world size) refused; more ranks than shards
 * refused.
 *
 * stk-test: concurrency */
#include "test_loader_util.h"

#include "dataset.h"

#define NREC 96
#define RECBYTES (64 * 1024)

static uint64_t g_first[64], g_count[64];
static uint32_t g_nshards;

static int shard_of(uint64_t idx)
{
    uint32_t s = 0;
    while (idx >= g_first[s] + g_count[s])
        s++;
    return (int)s;
}

static stk_loader *open_loader(const char *path, int window, int workers, int io, uint32_t rank,
                               uint32_t world)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 5));
    T_OK(stk_loader_set(h, STK_P_WORKERS, workers));
    T_OK(stk_loader_set(h, STK_P_IO_THREADS, io));
    T_OK(stk_loader_set(h, STK_P_QUEUE_DEPTH, 8));
    T_OK(stk_loader_set(h, STK_P_SEED, 31));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, window));
    T_OK(stk_loader_set(h, STK_P_RANK, rank));
    T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, world));
    T_OK(stk_loader_set(h, STK_P_DIST_MODE, STK_DIST_EXACT));
    T_OK(stk_loader_open(h, path));
    return h;
}

/* Epoch EPOCH from sample FROM: the indices delivered (N of them). */
static uint64_t *run(const char *path, int window, int workers, int io, uint32_t rank,
                     uint32_t world, uint64_t epoch, uint64_t from, size_t *n)
{
    stk_loader *h = open_loader(path, window, workers, io, rank, world);
    T_OK(stk_loader_set(h, STK_P_EPOCH, (int64_t)epoch));
    T_OK(stk_loader_start(h));
    if (from)
        T_OK(stk_loader_seek(h, epoch, from));
    tl_epoch e;
    T_CHECK(tl_run(h, &e, -1) == STK_END, "epoch did not end with STK_END: %s",
            stk_loader_last_error(h));
    uint64_t *out = malloc((e.n + 1) * sizeof *out);
    memcpy(out, e.index, e.n * sizeof *out);
    *n = e.n;
    tl_epoch_free(&e);
    stk_loader_destroy(h);
    return out;
}

int main(void)
{
    char *dir = t_tmpdir("loader_window");
    char path[4200];
    snprintf(path, sizeof path, "%s/ds", dir);
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, path));
    uint8_t *rec = malloc(RECBYTES);
    for (size_t i = 0; i < NREC; i++) {
        for (size_t b = 0; b < RECBYTES; b++)
            rec[b] = (uint8_t)(i * 31 + b * 7);
        T_OK(stk_writer_add(w, rec, RECBYTES - (i % 7) * 1000, (int32_t)(i % 3), NULL));
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    free(rec);

    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, path));
    stk_dataset_info info;
    T_OK(stk_dataset_info_get(ds, &info));
    g_nshards = info.shards;
    T_CHECK(g_nshards >= 5 && g_nshards < 64, "%u shards", g_nshards);
    for (uint32_t s = 0; s < g_nshards; s++) {
        g_first[s] = ds->shards[s].first;
        g_count[s] = ds->shards[s].count;
    }
    stk_dataset_destroy(ds);

    /* every record once; the same sequence for 1 and 3 workers, 1 and 2 I/O threads */
    size_t n1, n3, nb;
    uint64_t *a = run(path, 2, 1, 1, 0, 1, 0, 0, &n1);
    uint64_t *b = run(path, 2, 3, 2, 0, 1, 0, 0, &n3);
    T_CHECK(n1 == NREC && n3 == NREC, "epoch sizes %zu %zu", n1, n3);
    int seen[NREC] = {0};
    size_t moved = 0;
    for (size_t i = 0; i < NREC; i++) {
        T_CHECK(a[i] == b[i], "position %zu: %llu with 1 worker, %llu with 3", i,
                (unsigned long long)a[i], (unsigned long long)b[i]);
        T_CHECK(a[i] < NREC && !seen[a[i]]++, "record %llu twice", (unsigned long long)a[i]);
        moved += a[i] != i;
    }
    T_CHECK(moved > NREC / 2, "hardly shuffled: %zu of %d moved", moved, NREC);
    /* windows of 2 (staggered: a slice of each of 2 shards, one shard in and one out per
     * window): at most 2 shards open at any position (a shard is open from its first record to
     * its last), which is all the cache must hold besides what it fetches ahead */
    {
        size_t firstpos[64], lastpos[64] = {0};
        for (int s = 0; s < 64; s++)
            firstpos[s] = NREC;
        for (size_t i = 0; i < NREC; i++) {
            int s = shard_of(a[i]);
            firstpos[s] = firstpos[s] < i ? firstpos[s] : i;
            lastpos[s] = i + 1;
        }
        for (size_t i = 0; i < NREC; i++) {
            int open = 0;
            for (uint32_t s = 0; s < g_nshards; s++)
                open += firstpos[s] <= i && i < lastpos[s];
            T_CHECK(open <= 2, "%d shards open at position %zu with a window of 2", open, i);
        }
        /* the first records need only the first shard (a streamed epoch starts on one) */
        for (size_t i = 1; i < 4; i++)
            T_CHECK(shard_of(a[i]) == shard_of(a[0]), "position %zu: shard %d, position 0 "
                    "shard %d: the first window is not one shard's slice", i, shard_of(a[i]),
                    shard_of(a[0]));
    }
    /* another epoch, another order */
    uint64_t *c = run(path, 2, 2, 1, 0, 1, 1, 0, &nb);
    size_t diff = 0;
    for (size_t i = 0; i < NREC; i++)
        diff += c[i] != a[i];
    T_CHECK(diff > NREC / 2, "epochs 0 and 1 nearly equal (%zu differ)", diff);
    free(c);
    /* seek mid-epoch: exactly the rest */
    const uint64_t froms[] = {1, 37, NREC - 1};
    for (size_t k = 0; k < 3; k++) {
        c = run(path, 2, 3, 2, 0, 1, 0, froms[k], &nb);
        T_CHECK(nb == NREC - froms[k], "seek to %llu: %zu left", (unsigned long long)froms[k], nb);
        for (size_t i = 0; i < nb; i++)
            T_CHECK(c[i] == a[froms[k] + i], "seek to %llu: position %zu differs",
                    (unsigned long long)froms[k], i);
        free(c);
    }
    /* two ranks: disjoint shard sets, every record once over both */
    int owner[64];
    memset(owner, -1, sizeof owner);
    int count[NREC] = {0};
    for (uint32_t r = 0; r < 2; r++) {
        c = run(path, 3, 2, 1, r, 2, 0, 0, &nb);
        for (size_t i = 0; i < nb; i++) {
            int s = shard_of(c[i]);
            T_CHECK(owner[s] < 0 || owner[s] == (int)r, "shard %d read by ranks 0 and 1", s);
            owner[s] = (int)r;
            count[c[i]]++;
        }
        free(c);
    }
    for (size_t i = 0; i < NREC; i++)
        T_CHECK(count[i] == 1, "record %zu read %d times over the two ranks", i, count[i]);
    /* a resume from another world size cannot be exact in this order: refused */
    {
        stk_loader *r2 = open_loader(path, 2, 1, 1, 0, 2);
        T_OK(stk_loader_start(r2));
        int rc = stk_loader_resume(r2, 0, 3, 0);
        T_CHECK(rc == STK_E_RANGE && strstr(stk_loader_last_error(r2), "same world size"),
                "resume with consumed 3 over 2 ranks: %s: %s", stk_status_name(rc),
                stk_loader_last_error(r2));
        T_OK(stk_loader_resume(r2, 0, 4, 0)); /* 2 per rank: fine */
        stk_loader_destroy(r2);
    }
    /* refused: more ranks than shards */
    stk_loader *h = open_loader(path, 2, 1, 1, 0, g_nshards + 1);
    T_CHECK(stk_loader_start(h) == STK_E_RANGE, "more ranks than shards accepted");
    T_CHECK(strstr(stk_loader_last_error(h), "STK_P_SHUFFLE_WINDOW"), "error: %s",
            stk_loader_last_error(h));
    stk_loader_destroy(h);
    free(a);
    free(b);
    t_rmtree(dir);
    free(dir);
    printf("test_loader_window: ok (%u shards)\n", g_nshards);
    return 0;
}
