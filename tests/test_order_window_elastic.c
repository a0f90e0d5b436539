/* SPDX-License-Identifier: MIT */
/* test_order_window_elastic: elastic resume inside a shard-window epoch (src/core/order.c,
 * stk__rest_take / stk__plan_init_rest) alone, on a shard table of uneven sizes: runs of world
 * W take k samples per rank, the rest is split among W' ranks (2 -> 3, 3 -> 1, 1 -> 2, 4 -> 3,
 * and chains 2 -> 3 -> 1, 3 -> 5 -> 2): over all the runs every record is delivered exactly once
 * (EXACT); each new rank reads only the shards of its own list (stk__plan_shard_at) and no two
 * new ranks read one shard; windows hold only their own shards; the rest is a pure function (a
 * second computation gives the same lists); without shuffle the rest keeps record order; PAD
 * gives every rank the same count and still covers every record; fewer shards left than ranks;
 * a taken count past every share refused. */
#include "testutil.h"

#include "common.h"
#include "order.h"

#include <stdlib.h>
#include <string.h>

#define NS 13
static uint64_t g_first[NS], g_count[NS];
static stk__shard_table g_tab;
static uint64_t g_n;

static void make_table(void)
{
    const uint64_t sizes[NS] = {50, 17, 64, 1, 33, 40, 40, 9, 70, 22, 5, 61, 28};
    uint64_t f = 0;
    for (int s = 0; s < NS; s++) {
        g_first[s] = f;
        g_count[s] = sizes[s];
        f += sizes[s];
    }
    g_n = f;
    g_tab = (stk__shard_table){NS, g_first, g_count, NULL, 0};
}

static int shard_of(uint64_t idx)
{
    int s = 0;
    while (idx >= g_first[s] + g_count[s])
        s++;
    return s;
}

#define SEED 77
#define EPOCH 3

/* Deliver segment (rest->seg) of a history: every rank of WORLD takes its first TAKEN samples
 * (all of them for TAKEN = UINT64_MAX). Counts each record in SEEN; checks that each rank reads
 * only the shards of its own list and that no shard is read by two ranks of the segment; returns
 * the records delivered. */
static uint64_t deliver(const stk__rest *rest, uint32_t window, uint32_t world, uint64_t taken,
                        int shuffle, int mode, int *seen, uint64_t *trace)
{
    int reader[NS];
    for (int s = 0; s < NS; s++)
        reader[s] = -1;
    uint64_t total = 0, first_count = UINT64_MAX;
    for (uint32_t r = 0; r < world; r++) {
        stk__plan p;
        T_OK(stk__plan_init_rest(&p, &g_tab, rest, window, SEED, EPOCH, shuffle, r, world, mode));
        if (mode != STK_DIST_EXACT) {
            if (first_count == UINT64_MAX)
                first_count = p.per_rank;
            T_CHECK(p.per_rank == first_count, "rank %u: %llu samples, rank 0 %llu", r,
                    (unsigned long long)p.per_rank, (unsigned long long)first_count);
        }
        int mine[NS] = {0};
        for (uint32_t i = 0; i < p.nlocal; i++)
            mine[stk__plan_shard_at(&p, i)] = 1;
        uint64_t lim = p.per_rank < taken ? p.per_rank : taken;
        uint64_t wlo = UINT64_MAX, whi = 0;
        int wset[NS] = {0};
        for (uint64_t pos = 0; pos < lim; pos++) {
            uint64_t idx = stk__plan_index(&p, pos);
            T_CHECK(idx < g_n, "rank %u pos %llu: index %llu", r, (unsigned long long)pos,
                    (unsigned long long)idx);
            int s = shard_of(idx);
            T_CHECK(mine[s], "rank %u of %u read shard %d, not in its list (segment %u)", r,
                    world, s, rest ? rest->seg : 0);
            T_CHECK(reader[s] == -1 || reader[s] == (int)p.owner,
                    "shard %d read by ranks %d and %u of one segment", s, reader[s], p.owner);
            reader[s] = (int)p.owner;
            /* windows: a new window starts where the old ended; inside one, only its shards */
            uint64_t x = pos % p.local;
            if (x < wlo || x >= whi) {
                uint64_t end = stk__plan_window_end(&p, pos);
                wlo = x;
                whi = x + (end - pos);
                memset(wset, 0, sizeof wset);
                for (uint32_t i = 0; i < p.win_n; i++)
                    wset[p.win_shard[i]] = 1;
            }
            T_CHECK(wset[s], "rank %u pos %llu: shard %d outside its window", r,
                    (unsigned long long)pos, s);
            if (pos < p.local) { /* PAD's wrapped copies are not deliveries of the epoch */
                if (seen)
                    seen[idx]++;
                if (trace)
                    trace[total] = idx;
                total++;
            }
        }
    }
    return total;
}

/* A history of NSEG segments (world, taken; the last taken = all); every record exactly once. */
static void history(const uint32_t *worlds, const uint64_t *taken, int nseg, uint32_t window,
                    int shuffle)
{
    int *seen = calloc(g_n, sizeof *seen);
    stk__rest rest;
    T_OK(stk__rest_init(&rest, &g_tab));
    uint64_t got = 0;
    for (int i = 0; i < nseg; i++) {
        uint64_t k = i == nseg - 1 ? UINT64_MAX : taken[i];
        uint64_t before = stk__rest_records(&rest);
        uint64_t d = deliver(&rest, window, worlds[i], k, shuffle, STK_DIST_EXACT, seen, NULL);
        got += d;
        if (i < nseg - 1) {
            T_OK(stk__rest_take(&rest, &g_tab, window, SEED, EPOCH, shuffle, worlds[i], k));
            T_CHECK(stk__rest_records(&rest) == before - d,
                    "segment %d: %llu records left, expected %llu - %llu", i,
                    (unsigned long long)stk__rest_records(&rest), (unsigned long long)before,
                    (unsigned long long)d);
            T_CHECK(rest.seg == (uint32_t)i + 1, "seg %u", rest.seg);
        }
    }
    T_CHECK(got == g_n, "history of %d segments (first world %u): %llu deliveries for %llu records",
            nseg, worlds[0], (unsigned long long)got, (unsigned long long)g_n);
    for (uint64_t i = 0; i < g_n; i++)
        T_CHECK(seen[i] == 1, "record %llu delivered %d times (first world %u, %d segments, "
                "window %u, shuffle %d)", (unsigned long long)i, seen[i], worlds[0], nseg,
                window, shuffle);
    stk__rest_free(&rest);
    free(seen);
}

int main(void)
{
    make_table();

    /* the plan on a fresh rest is the plain shard-window plan, position by position */
    {
        stk__rest rest;
        T_OK(stk__rest_init(&rest, &g_tab));
        for (uint32_t r = 0; r < 2; r++) {
            stk__plan a, b;
            T_OK(stk__plan_init_shards(&a, &g_tab, 3, SEED, EPOCH, 1, r, 2, STK_DIST_PAD));
            T_OK(stk__plan_init_rest(&b, &g_tab, &rest, 3, SEED, EPOCH, 1, r, 2, STK_DIST_PAD));
            T_CHECK(a.per_rank == b.per_rank, "per_rank");
            for (uint64_t pos = 0; pos < a.per_rank; pos++)
                T_CHECK(stk__plan_index(&a, pos) == stk__plan_index(&b, pos), "pos %llu",
                        (unsigned long long)pos);
        }
        stk__rest_free(&rest);
    }

    /* one save, another world size: 2 -> 3, 3 -> 1, 1 -> 2, 4 -> 3, 2 -> 5 (fewer shards left
     * than ranks is fine for EXACT), several windows and save points, shuffled or not */
    static const uint32_t pairs[][2] = {{2, 3}, {3, 1}, {1, 2}, {4, 3}, {2, 5}, {3, 2}};
    static const uint64_t ks[] = {0, 1, 7, 30, 61, 100, 150};
    for (int sh = 0; sh <= 1; sh++)
        for (uint32_t window = 1; window <= 4; window++)
            for (size_t pi = 0; pi < sizeof pairs / sizeof *pairs; pi++)
                for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
                    /* a k past every share of the first world is refused (checked below) */
                    stk__rest probe;
                    T_OK(stk__rest_init(&probe, &g_tab));
                    int rc = stk__rest_take(&probe, &g_tab, window, SEED, EPOCH, sh, pairs[pi][0],
                                            ks[ki]);
                    stk__rest_free(&probe);
                    if (rc == STK_E_RANGE)
                        continue;
                    T_OK(rc);
                    uint32_t w[2] = {pairs[pi][0], pairs[pi][1]};
                    uint64_t k[1] = {ks[ki]};
                    history(w, k, 2, window, sh);
                }

    /* chains: 2 -> 3 -> 1 and 3 -> 5 -> 2 -> 4 */
    {
        uint32_t w1[3] = {2, 3, 1};
        uint64_t k1[2] = {40, 25};
        history(w1, k1, 3, 2, 1);
        uint32_t w2[4] = {3, 5, 2, 4};
        uint64_t k2[3] = {33, 9, 20};
        history(w2, k2, 4, 3, 1);
    }

    /* the rest is a pure function of the history: a second computation, the same lists */
    {
        uint64_t *a = malloc(g_n * sizeof *a), *b = malloc(g_n * sizeof *b);
        for (int rep = 0; rep < 2; rep++) {
            stk__rest rest;
            T_OK(stk__rest_init(&rest, &g_tab));
            T_OK(stk__rest_take(&rest, &g_tab, 2, SEED, EPOCH, 1, 2, 37));
            uint64_t d = deliver(&rest, 2, 3, UINT64_MAX, 1, STK_DIST_EXACT, NULL, rep ? b : a);
            T_CHECK(d == g_n - 74, "rest %llu", (unsigned long long)d);
            stk__rest_free(&rest);
        }
        T_CHECK(memcmp(a, b, (g_n - 74) * sizeof *a) == 0, "two computations of the rest differ");
        /* another save point gives another rest order (the seed keys it, not a fixed list) */
        free(a);
        free(b);
    }

    /* without shuffle, each new rank's records left come in dataset order */
    {
        stk__rest rest;
        T_OK(stk__rest_init(&rest, &g_tab));
        T_OK(stk__rest_take(&rest, &g_tab, 2, SEED, EPOCH, 0, 3, 20));
        for (uint32_t r = 0; r < 2; r++) {
            stk__plan p;
            T_OK(stk__plan_init_rest(&p, &g_tab, &rest, 2, SEED, EPOCH, 0, r, 2, STK_DIST_EXACT));
            for (uint64_t pos = 1; pos < p.per_rank; pos++)
                T_CHECK(stk__plan_index(&p, pos) > stk__plan_index(&p, pos - 1),
                        "unshuffled rest out of order at rank %u pos %llu", r,
                        (unsigned long long)pos);
        }
        stk__rest_free(&rest);
    }

    /* PAD: every new rank the same count, every record left still covered; with more ranks than
     * shards left, the ranks past them read another rank's list (no record is lost) */
    {
        stk__rest rest;
        T_OK(stk__rest_init(&rest, &g_tab));
        T_OK(stk__rest_take(&rest, &g_tab, 2, SEED, EPOCH, 1, 2, 60));
        int *seen = calloc(g_n, sizeof *seen);
        deliver(&rest, 2, 3, UINT64_MAX, 1, STK_DIST_PAD, seen, NULL);
        uint64_t covered = 0;
        for (uint64_t i = 0; i < g_n; i++)
            covered += seen[i] > 0;
        T_CHECK(covered == stk__rest_records(&rest), "PAD covered %llu of %llu left",
                (unsigned long long)covered, (unsigned long long)stk__rest_records(&rest));
        free(seen);
        stk__rest_free(&rest);

        /* almost everything taken: a few shards left, 8 ranks */
        T_OK(stk__rest_init(&rest, &g_tab));
        T_OK(stk__rest_take(&rest, &g_tab, 1, SEED, EPOCH, 1, 1, g_n - 30));
        T_CHECK(rest.m < 8, "%u shards left", rest.m);
        for (uint32_t r = 0; r < 8; r++) {
            stk__plan p;
            T_OK(stk__plan_init_rest(&p, &g_tab, &rest, 1, SEED, EPOCH, 1, r, 8, STK_DIST_PAD));
            T_CHECK(p.per_rank > 0 && p.local > 0, "rank %u of 8: nothing to read", r);
            T_OK(stk__plan_init_rest(&p, &g_tab, &rest, 1, SEED, EPOCH, 1, r, 8, STK_DIST_EXACT));
            T_CHECK(r < rest.m || p.per_rank == 0, "EXACT rank %u past the shards has %llu", r,
                    (unsigned long long)p.per_rank);
        }
        int *seen2 = calloc(g_n, sizeof *seen2);
        T_CHECK(deliver(&rest, 1, 8, UINT64_MAX, 1, STK_DIST_EXACT, seen2, NULL) == 30, "last 30");
        free(seen2);
        stk__rest_free(&rest);
    }

    /* everything taken: nothing left, per_rank 0 */
    {
        stk__rest rest;
        T_OK(stk__rest_init(&rest, &g_tab));
        T_OK(stk__rest_take(&rest, &g_tab, 2, SEED, EPOCH, 1, 1, g_n));
        T_CHECK(stk__rest_records(&rest) == 0 && rest.m == 0, "left %llu",
                (unsigned long long)stk__rest_records(&rest));
        stk__plan p;
        T_OK(stk__plan_init_rest(&p, &g_tab, &rest, 2, SEED, EPOCH, 1, 0, 3, STK_DIST_PAD));
        T_CHECK(p.per_rank == 0, "per_rank %llu", (unsigned long long)p.per_rank);
        stk__rest_free(&rest);
    }

    /* refused: taken past every share, fewer shards than ranks in segment 0, bad window */
    {
        stk__rest rest;
        T_OK(stk__rest_init(&rest, &g_tab));
        T_CHECK(stk__rest_take(&rest, &g_tab, 2, SEED, EPOCH, 1, 2, g_n) == STK_E_RANGE,
                "k past every share accepted");
        T_CHECK(stk__rest_take(&rest, &g_tab, 2, SEED, EPOCH, 1, NS + 1, 1) == STK_E_RANGE,
                "more ranks than shards accepted");
        T_CHECK(stk__rest_take(&rest, &g_tab, 0, SEED, EPOCH, 1, 2, 1) == STK_E_INVALID,
                "window 0 accepted");
        T_CHECK(rest.seg == 0 && stk__rest_records(&rest) == g_n, "a refused take changed R");
        stk__rest_free(&rest);
    }
    printf("test_order_window_elastic: ok\n");
    return 0;
}
