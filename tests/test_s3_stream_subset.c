/* SPDX-License-Identifier: MIT */
/*
 * test_s3_stream_subset — stk_loader_set_indices on an s3:// dataset streamed through a cache of a
 * quarter of it, in windows of 2 shards (the `s3` fixture's radosgw; docs/S3.md "Subsets of a streamed dataset"). The
 * list: all of one shard, every third record of another, ten records of a third listed twice,
 * one record of a fourth, in a shuffled order. One rank, 1 and 3 workers: each epoch delivers
 * every entry of the list once (a record listed twice twice) and nothing else, with the local
 * copy's bytes, the same sequence for both worker counts, another order in the next epoch; the
 * fetch layer's own count per shard shows only the four shards fetched. A seek mid-epoch gives
 * exactly the rest of the uninterrupted sequence. Two ranks read disjoint shard sets covering the
 * list, each fetching only its own; two ranks that stop after a batch resume on three
 * (stk_loader_tell_segments / stk_loader_resume_segments): the two runs together deliver the list
 * exactly once, each resumed rank fetching only shards it reads (this epoch or the next).
 *
 * stk-test: concurrency
 */
#include "s3_stream_util.h"

#include "remote.h"

static uint64_t g_list[1024];
static size_t g_nlist;
static uint8_t g_listed[64]; /* shards holding an entry */

static void make_list(const s3s_data *d)
{
    uint32_t a = 2, b = 4, c = d->nshards - 1, z = 0;
    for (uint64_t i = 0; i < d->count[a]; i++)
        g_list[g_nlist++] = d->first[a] + i;
    for (uint64_t i = 0; i < d->count[b]; i += 3)
        g_list[g_nlist++] = d->first[b] + i;
    for (uint64_t i = 0; i < 10 && i < d->count[c]; i++) {
        g_list[g_nlist++] = d->first[c] + i;
        g_list[g_nlist++] = d->first[c] + i;
    }
    g_list[g_nlist++] = d->first[z] + 1;
    g_listed[a] = g_listed[b] = g_listed[c] = g_listed[z] = 1;
    uint64_t x = 12345; /* a shuffled list: its order is not the shards' */
    for (size_t i = g_nlist - 1; i > 0; i--) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t j = (size_t)((x >> 33) % (i + 1));
        uint64_t t = g_list[i];
        g_list[i] = g_list[j];
        g_list[j] = t;
    }
}

static stk_loader *sub_loader(const s3s_data *d, const char *tag, uint64_t limit, int workers,
                              uint32_t rank, uint32_t world)
{
    char cache[4300];
    snprintf(cache, sizeof cache, "%s/cache-%s", d->tmp, tag);
    stk_loader *h = s3s_loader(d, cache, limit, workers, 1, rank, world);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, 2)); /* shards in the list meet unlisted ones */
    T_OK(stk_loader_set_indices(h, g_list, g_nlist));
    return h;
}

/* COUNT[i] += deliveries of record i in IDX[0..N); the shards read into READ (if not NULL). */
static void tally(const s3s_data *d, const uint64_t *idx, size_t n, uint32_t *count, int *read)
{
    for (size_t i = 0; i < n; i++) {
        count[idx[i]]++;
        if (read)
            read[s3s_shard_of(d, idx[i])] = 1;
    }
}

/* Every entry of the list exactly once in COUNT, nothing else. */
static void check_list(const s3s_data *d, const uint32_t *count, const char *what)
{
    uint32_t *want = calloc(d->n, sizeof *want);
    for (size_t j = 0; j < g_nlist; j++)
        want[g_list[j]]++;
    for (uint64_t i = 0; i < d->n; i++)
        T_CHECK(count[i] == want[i], "%s: record %llu delivered %u times, listed %u times", what,
                (unsigned long long)i, count[i], want[i]);
    free(want);
}

/* The shards H fetched (the fetch layer's own count) are shards in OK (and each of MUST). */
static void check_fetches(const s3s_data *d, stk_loader *h, const int *ok, const int *must,
                          const char *what)
{
    const stk_dataset *ds = stk_loader_dataset(h);
    for (uint32_t s = 0; s < d->nshards; s++) {
        uint32_t f = stk__remote_fetches(ds, s);
        T_CHECK(!f || ok[s], "%s: fetched shard %u (%u times), which it reads nothing of", what,
                s, f);
        T_CHECK(!must || !must[s] || f >= 1, "%s: read shard %u without fetching it", what, s);
    }
}

int main(void)
{
    s3s_data d;
    s3s_make(&d, "subset");
    make_list(&d);
    uint64_t limit = d.total_bytes / 4;
    uint32_t *count = calloc(d.n, sizeof *count);
    int listed[64] = {0};
    for (uint32_t s = 0; s < d.nshards; s++)
        listed[s] = g_listed[s];
    printf("  %zu entries in 4 of %u shards, cache limit %llu of %llu bytes\n", g_nlist,
           d.nshards, (unsigned long long)limit, (unsigned long long)d.total_bytes);

    /* one rank, 1 and 3 workers: the list once per epoch, the same sequence, only its shards */
    uint64_t *seq[2], *e1;
    size_t nseq[2], ne1;
    for (int k = 0; k < 2; k++) {
        stk_loader *h = sub_loader(&d, k ? "w3" : "w1", limit, k ? 3 : 1, 0, 1);
        T_CHECK(stk_loader_samples_per_epoch(h) == g_nlist, "before start: %llu samples per "
                "epoch, %zu listed", (unsigned long long)stk_loader_samples_per_epoch(h), g_nlist);
        int rc = stk_loader_start(h);
        T_CHECK(rc == STK_OK, "start with indices on a stream: %s", stk_loader_last_error(h));
        T_CHECK(stk_loader_samples_per_epoch(h) == g_nlist, "%llu samples per epoch, %zu listed",
                (unsigned long long)stk_loader_samples_per_epoch(h), g_nlist);
        nseq[k] = s3s_epoch(&d, h, &seq[k]);
        memset(count, 0, d.n * sizeof *count);
        tally(&d, seq[k], nseq[k], count, NULL);
        check_list(&d, count, k ? "3 workers" : "1 worker");
        if (k == 0) { /* the next epoch: the list again, in another order */
            ne1 = s3s_epoch(&d, h, &e1);
            memset(count, 0, d.n * sizeof *count);
            tally(&d, e1, ne1, count, NULL);
            check_list(&d, count, "epoch 1");
            T_CHECK(ne1 != nseq[0] || memcmp(e1, seq[0], ne1 * sizeof *e1) != 0,
                    "epoch 1 in epoch 0's order");
            free(e1);
        }
        check_fetches(&d, h, listed, listed, k ? "3 workers" : "1 worker");
        stk_loader_destroy(h);
    }
    T_CHECK(nseq[0] == nseq[1] && !memcmp(seq[0], seq[1], nseq[0] * sizeof *seq[0]),
            "1 and 3 workers delivered different sequences");

    /* a seek mid-epoch: exactly the rest of the uninterrupted sequence */
    {
        stk_loader *h = sub_loader(&d, "seek", limit, 2, 0, 1);
        T_OK(stk_loader_start(h));
        T_OK(stk_loader_seek(h, 0, 37));
        uint64_t *rest;
        size_t n = s3s_epoch(&d, h, &rest);
        T_CHECK(n == nseq[0] - 37 && !memcmp(rest, seq[0] + 37, n * sizeof *rest),
                "seek to 37: %zu samples, not the rest of the epoch", n);
        free(rest);
        stk_loader_destroy(h);
    }
    free(seq[0]);
    free(seq[1]);

    /* two ranks: disjoint shards covering the list, each fetching only its own */
    memset(count, 0, d.n * sizeof *count);
    int reader[64];
    memset(reader, -1, sizeof reader);
    for (uint32_t r = 0; r < 2; r++) {
        char tag[16];
        snprintf(tag, sizeof tag, "r%u", r);
        stk_loader *h = sub_loader(&d, tag, limit, 2, r, 2);
        uint64_t told = stk_loader_samples_per_epoch(h); /* before start: the same count */
        T_OK(stk_loader_start(h));
        uint64_t *idx;
        size_t n = s3s_epoch(&d, h, &idx);
        T_CHECK(told == n && stk_loader_samples_per_epoch(h) == n, "rank %u of 2: %llu samples "
                "per epoch told before start, %zu delivered", r, (unsigned long long)told, n);
        int mine[64] = {0};
        tally(&d, idx, n, count, mine);
        for (uint32_t s = 0; s < d.nshards; s++)
            if (mine[s]) {
                T_CHECK(reader[s] < 0, "shard %u read by ranks %d and %u", s, reader[s], r);
                reader[s] = (int)r;
            }
        check_fetches(&d, h, mine, mine, r ? "rank 1 of 2" : "rank 0 of 2");
        free(idx);
        stk_loader_destroy(h);
    }
    check_list(&d, count, "2 ranks");

    /* 2 ranks stop after a batch; 3 ranks resume from their segments */
    memset(count, 0, d.n * sizeof *count);
    uint64_t segs[3 * 17];
    uint32_t nsegs = 0;
    for (uint32_t r = 0; r < 2; r++) {
        char tag[16];
        snprintf(tag, sizeof tag, "a%u", r);
        stk_loader *h = sub_loader(&d, tag, limit, 2, r, 2);
        T_OK(stk_loader_start(h));
        tl_epoch e;
        int rc = tl_run(h, &e, 1);
        T_CHECK(rc == STK_OK && e.n == 16, "rank %u of 2: %zu samples: %s", r, e.n,
                stk_loader_last_error(h));
        tally(&d, e.index, e.n, count, NULL);
        uint64_t ep;
        T_OK(stk_loader_tell_segments(h, &ep, segs, 17, &nsegs));
        T_CHECK(ep == 0 && nsegs == 1 && segs[0] == 2 && segs[2] == 16, "segments");
        tl_epoch_free(&e);
        stk_loader_destroy(h);
    }
    memset(reader, -1, sizeof reader);
    for (uint32_t r = 0; r < 3; r++) {
        char tag[16];
        snprintf(tag, sizeof tag, "b%u", r);
        stk_loader *h = sub_loader(&d, tag, limit, 2, r, 3);
        T_OK(stk_loader_resume_segments(h, 0, segs, nsegs));
        int rc = stk_loader_start(h);
        T_CHECK(rc == STK_OK, "resume on rank %u of 3: %s", r, stk_loader_last_error(h));
        uint64_t *idx, *nidx;
        size_t n = s3s_epoch(&d, h, &idx);
        int mine[64] = {0}, ok[64] = {0};
        tally(&d, idx, n, count, mine);
        for (uint32_t s = 0; s < d.nshards; s++)
            if (mine[s]) {
                T_CHECK(reader[s] < 0, "shard %u read by resumed ranks %d and %u", s, reader[s], r);
                reader[s] = (int)r;
            }
        /* the fetch thread walks on into the next epoch: read it too, and allow its shards */
        size_t nn = s3s_epoch(&d, h, &nidx);
        uint32_t *next = calloc(d.n, sizeof *next);
        tally(&d, nidx, nn, next, ok);
        for (uint32_t s = 0; s < d.nshards; s++) {
            ok[s] |= mine[s];
            T_CHECK(!ok[s] || listed[s], "rank %u of 3 read shard %u, which the list lacks", r, s);
        }
        check_fetches(&d, h, ok, mine, "resumed rank");
        printf("  resumed rank %u of 3: %zu of the list\n", r, n);
        free(next);
        free(idx);
        free(nidx);
        stk_loader_destroy(h);
    }
    check_list(&d, count, "2 ranks, then 3 resumed");
    free(count);
    s3s_free(&d);
    printf("test_s3_stream_subset: ok\n");
    return 0;
}
