/* SPDX-License-Identifier: MIT */
/* test_order_window: the shard-window order (src/core/order.c, stk__plan_init_shards) alone, on
 * shard tables of uneven sizes: every record exactly once per epoch (world 1; EXACT over several
 * ranks), ranks read disjoint shard sets whose union is every shard, the same sets every epoch;
 * each window delivers exactly its shards' share of records before the next starts (staggered
 * windows: a slice of each of W shards; else W shards whole), at most W shards open at once; epochs
 * and seeds differ; the order is a pure function (a second plan and a plan read backwards give the
 * same indices); resume at k samples per rank gives exactly the rest; PAD / DROP sizes; bad
 * arguments refused. A subset's table (stk__shard_table.live: only the listed shards dealt, the
 * others empty): every record once, no unlisted shard in any rank's list or window, the live shards
 * split disjointly, fewer live shards than ranks refused. */
#include "testutil.h"

#include "common.h"
#include "order.h"

#include <stdlib.h>
#include <string.h>

#define NS 13
static uint64_t g_first[NS], g_count[NS];
static stk__shard_table g_tab;

static void make_table(void)
{
    const uint64_t sizes[NS] = {50, 17, 64, 1, 33, 40, 40, 9, 70, 22, 5, 61, 28};
    uint64_t f = 0;
    for (int s = 0; s < NS; s++) {
        g_first[s] = f;
        g_count[s] = sizes[s];
        f += sizes[s];
    }
    g_tab = (stk__shard_table){NS, g_first, g_count, NULL, 0};
}

static uint64_t total(void) { return g_first[NS - 1] + g_count[NS - 1]; }

static int shard_of(uint64_t idx)
{
    int s = 0;
    while (idx >= g_first[s] + g_count[s])
        s++;
    return s;
}

/* The records of window K of a rank's list (places LIST[0..NLOCAL)) from place I, as the test
 * reads docs/S3.md: staggered (SHUFFLE, 1 < W < NLOCAL) window k holds slice k - i of W of each
 * place i in [k - W + 1, k], slice j of a shard of c records being c (j + 1) / W - c j / W of
 * them; else window k is places [k W, k W + W) whole. */
static uint64_t in_window(uint32_t window, int shuffle, uint32_t nlocal, const int *list,
                          uint64_t k, uint32_t i)
{
    uint64_t c = g_count[list[i]];
    if (shuffle && window > 1 && window < nlocal) {
        if (i > k || k - i >= window)
            return 0;
        return c * (k - i + 1) / window - c * (k - i) / window;
    }
    return i / window == k ? c : 0;
}

/* One rank's epoch: every index in range, each window holds exactly its places' share of records
 * (staggered: a slice of each of its W shards, so one shard comes in and one goes out per
 * window) and ends before the next begins, at most W shards open at once (a shard is open from
 * its first record to its last); OWNER[s] records which rank read shard s. Returns the per-rank
 * list (malloc). */
static uint64_t *check_rank(uint32_t window, uint64_t seed, uint64_t epoch, int shuffle, uint32_t r,
                            uint32_t world, int mode, int *owner, uint32_t *count)
{
    stk__plan p;
    T_OK(stk__plan_init_shards(&p, &g_tab, window, seed, epoch, shuffle, r, world, mode));
    uint64_t *list = malloc((p.per_rank + 1) * sizeof *list);
    T_CHECK(list, "oom");
    int wshard[NS], place[NS];
    for (uint32_t i = 0; i < p.nlocal; i++) {
        wshard[i] = (int)stk__plan_shard_at(&p, i);
        place[wshard[i]] = (int)i;
    }
    int stagger = shuffle && window > 1 && window < p.nlocal;
    uint64_t nwin = stagger ? p.nlocal + window - 1 : (p.nlocal + window - 1) / window;
    T_CHECK(stk__plan_windows(&p) == nwin, "W %u: %llu windows, want %llu", window,
            (unsigned long long)stk__plan_windows(&p), (unsigned long long)nwin);
    uint64_t pos = 0, lim = STK__MIN(p.per_rank, p.local), firstpos[NS], lastpos[NS] = {0};
    for (int s = 0; s < NS; s++)
        firstpos[s] = UINT64_MAX;
    for (uint64_t k = 0; k < nwin; k++) {
        uint64_t want[NS] = {0}, size = 0;
        for (uint32_t i = 0; i < p.nlocal; i++)
            size += want[i] = in_window(window, shuffle, p.nlocal, wshard, k, i);
        for (uint64_t e = pos + size; pos < e && pos < lim; pos++) {
            uint64_t idx = stk__plan_index(&p, pos);
            T_CHECK(idx < total(), "index %llu out of range", (unsigned long long)idx);
            int s = shard_of(idx);
            T_CHECK(owner[s] < 0 || owner[s] == (int)r, "shard %d read by ranks %d and %u", s,
                    owner[s], r);
            T_CHECK(want[place[s]] > 0, "W %u rank %u pos %llu: shard %d (place %d) has no more "
                    "records in window %llu", window, r, (unsigned long long)pos, s, place[s],
                    (unsigned long long)k);
            want[place[s]]--;
            firstpos[s] = STK__MIN(firstpos[s], pos);
            lastpos[s] = pos + 1;
            owner[s] = (int)r;
            count[idx]++;
            list[pos] = idx;
        }
    }
    T_CHECK(pos == lim, "W %u rank %u: windows end at %llu of %llu", window, r,
            (unsigned long long)pos, (unsigned long long)lim);
    if (lim == p.local) /* at most W shards open at any position */
        for (uint64_t q = 0; q < lim; q += 7) {
            uint32_t open = 0;
            for (uint32_t i = 0; i < p.nlocal; i++)
                open += g_count[wshard[i]] && firstpos[wshard[i]] <= q && q < lastpos[wshard[i]];
            T_CHECK(open <= window, "W %u rank %u pos %llu: %u shards open", window, r,
                    (unsigned long long)q, open);
        }
    for (uint64_t q = p.local; q < p.per_rank; q++) /* PAD: wraps around its own list */
        list[q] = stk__plan_index(&p, q);
    return list;
}

static void check_epoch(uint32_t window, uint32_t world, int shuffle, uint64_t epoch)
{
    uint32_t *count = calloc(total(), sizeof *count);
    int owner[NS];
    memset(owner, -1, sizeof owner);
    for (uint32_t r = 0; r < world; r++)
        free(check_rank(window, 9, epoch, shuffle, r, world, STK_DIST_EXACT, owner, count));
    for (uint64_t i = 0; i < total(); i++)
        T_CHECK(count[i] == 1, "W %u world %u shuffle %d epoch %llu: record %llu read %u times",
                window, world, shuffle, (unsigned long long)epoch, (unsigned long long)i, count[i]);
    for (int s = 0; s < NS; s++)
        T_CHECK(owner[s] >= 0, "shard %d read by no rank", s);
    /* the same shard sets every epoch */
    int owner2[NS];
    memset(owner2, -1, sizeof owner2);
    memset(count, 0, total() * sizeof *count);
    for (uint32_t r = 0; r < world; r++)
        free(check_rank(window, 9, epoch + 5, shuffle, r, world, STK_DIST_EXACT, owner2, count));
    T_CHECK(memcmp(owner, owner2, sizeof owner) == 0, "world %u: a rank's shards changed between "
            "epochs", world);
    free(count);
}

static void check_pure_and_random(void)
{
    uint32_t *count = calloc(total(), sizeof *count);
    int owner[NS];
    memset(owner, -1, sizeof owner);
    uint64_t *a = check_rank(3, 1, 0, 1, 0, 1, STK_DIST_PAD, owner, count);
    uint64_t *b = check_rank(3, 1, 1, 1, 0, 1, STK_DIST_PAD, owner, count);
    uint64_t *c = check_rank(3, 2, 0, 1, 0, 1, STK_DIST_PAD, owner, count);
    uint64_t diff_e = 0, diff_s = 0, moved = 0;
    for (uint64_t i = 0; i < total(); i++) {
        diff_e += a[i] != b[i];
        diff_s += a[i] != c[i];
        moved += a[i] != i;
    }
    T_CHECK(diff_e > total() / 2 && diff_s > total() / 2 && moved > total() / 2,
            "epochs/seeds barely differ: %llu %llu %llu of %llu", (unsigned long long)diff_e,
            (unsigned long long)diff_s, (unsigned long long)moved, (unsigned long long)total());
    /* a pure function: read backwards on a fresh plan, the same indices */
    stk__plan p;
    T_OK(stk__plan_init_shards(&p, &g_tab, 3, 1, 0, 1, 0, 1, STK_DIST_PAD));
    for (uint64_t i = total(); i-- > 0;)
        T_CHECK(stk__plan_index(&p, i) == a[i], "position %llu differs read backwards",
                (unsigned long long)i);
    /* without shuffle, one rank: the dataset order */
    T_OK(stk__plan_init_shards(&p, &g_tab, 4, 1, 3, 0, 0, 1, STK_DIST_PAD));
    for (uint64_t i = 0; i < total(); i++)
        T_CHECK(stk__plan_index(&p, i) == i, "unshuffled position %llu", (unsigned long long)i);
    free(a);
    free(b);
    free(c);
    free(count);
}

static void check_resume(uint32_t world, int mode)
{
    for (uint32_t r = 0; r < world; r++) {
        stk__plan full, rest;
        T_OK(stk__plan_init_shards(&full, &g_tab, 2, 4, 7, 1, r, world, mode));
        const uint64_t ks[] = {0, 1, 30, full.per_rank / 2, full.per_rank};
        for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
            uint64_t k = ks[j];
            T_OK(stk__plan_init_shards(&rest, &g_tab, 2, 4, 7, 1, r, world, mode));
            T_OK(stk__plan_resume(&rest, k * world));
            T_CHECK(rest.per_rank == full.per_rank - k, "resume at %llu: %llu left",
                    (unsigned long long)k, (unsigned long long)rest.per_rank);
            for (uint64_t i = 0; i < rest.per_rank; i++)
                T_CHECK(stk__plan_index(&rest, i) == stk__plan_index(&full, k + i),
                        "world %u rank %u resumed at %llu: position %llu differs", world, r,
                        (unsigned long long)k, (unsigned long long)i);
            T_CHECK(stk__plan_consumed(&rest, 3) == k * world + STK__MIN(3, rest.per_rank) * world,
                    "consumed after a resume");
        }
        if (world > 1)
            T_CHECK(stk__plan_resume(&rest, world + 1) == STK_E_RANGE,
                    "a consumed count that is no multiple of the world size accepted");
    }
}

static void check_sizes(void)
{
    uint32_t world = 3;
    uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
    for (uint32_t r = 0; r < world; r++) {
        stk__plan p;
        T_OK(stk__plan_init_shards(&p, &g_tab, 2, 4, 0, 1, r, world, STK_DIST_EXACT));
        lo = STK__MIN(lo, p.per_rank);
        hi = STK__MAX(hi, p.per_rank);
        sum += p.per_rank;
    }
    T_CHECK(sum == total(), "EXACT parts sum to %llu", (unsigned long long)sum);
    for (uint32_t r = 0; r < world; r++) {
        stk__plan p;
        T_OK(stk__plan_init_shards(&p, &g_tab, 2, 4, 0, 1, r, world, STK_DIST_PAD));
        T_CHECK(p.per_rank == hi, "PAD per_rank %llu, want %llu", (unsigned long long)p.per_rank,
                (unsigned long long)hi);
        T_OK(stk__plan_init_shards(&p, &g_tab, 2, 4, 0, 1, r, world, STK_DIST_DROP));
        T_CHECK(p.per_rank == lo, "DROP per_rank %llu, want %llu", (unsigned long long)p.per_rank,
                (unsigned long long)lo);
    }
    stk__plan p;
    T_CHECK(stk__plan_init_shards(&p, &g_tab, 0, 1, 0, 1, 0, 1, 0) == STK_E_INVALID, "W 0");
    T_CHECK(stk__plan_init_shards(&p, &g_tab, STK__MAX_WINDOW + 1, 1, 0, 1, 0, 1, 0) ==
            STK_E_INVALID, "W too large");
    T_CHECK(stk__plan_init_shards(&p, &g_tab, 2, 1, 0, 1, 0, NS + 1, 0) == STK_E_RANGE,
            "more ranks than shards");
}

/* A table whose shards 1, 4, 5, 9 and 12 hold records and the rest none (a subset's table) */
static void check_live(void)
{
    static const uint32_t live[] = {1, 4, 5, 9, 12};
    uint64_t first[NS], count[NS], f = 0;
    for (uint32_t s = 0, k = 0; s < NS; s++) {
        first[s] = f;
        count[s] = k < 5 && live[k] == s ? 3 + 7 * s % 11 : 0;
        k += k < 5 && live[k] == s;
        f += count[s];
    }
    stk__shard_table t = {NS, first, count, live, 5};
    for (uint32_t world = 1; world <= 5; world++)
        for (uint32_t window = 1; window <= 3; window++) {
            uint32_t *seen = calloc(f, sizeof *seen);
            int owner[NS];
            memset(owner, -1, sizeof owner);
            for (uint32_t r = 0; r < world; r++) {
                stk__plan p;
                T_OK(stk__plan_init_shards(&p, &t, window, 7, 1, 1, r, world, STK_DIST_EXACT));
                for (uint32_t i = 0; i < p.nlocal; i++) {
                    uint32_t s = stk__plan_shard_at(&p, i);
                    T_CHECK(count[s] > 0, "world %u rank %u: unlisted shard %u dealt", world, r, s);
                    T_CHECK(owner[s] < 0, "shard %u dealt to ranks %d and %u", s, owner[s], r);
                    owner[s] = (int)r;
                }
                for (uint64_t pos = 0; pos < p.per_rank; pos++) {
                    uint64_t idx = stk__plan_index(&p, pos);
                    T_CHECK(idx < f, "index %llu", (unsigned long long)idx);
                    seen[idx]++;
                    for (uint32_t i = 0; i < p.win_n; i++)
                        T_CHECK(count[p.win_shard[i]] > 0, "window with unlisted shard %u",
                                p.win_shard[i]);
                }
            }
            for (uint64_t i = 0; i < f; i++)
                T_CHECK(seen[i] == 1, "world %u window %u: record %llu %u times", world, window,
                        (unsigned long long)i, seen[i]);
            free(seen);
        }
    /* PAD: every rank the largest share, wrapping around its own listed shards */
    for (uint32_t world = 2; world <= 5; world++) {
        uint64_t most = 0, per[5];
        for (uint32_t r = 0; r < world; r++) {
            stk__plan p;
            T_OK(stk__plan_init_shards(&p, &t, 2, 7, 1, 1, r, world, STK_DIST_EXACT));
            most = p.local > most ? p.local : most;
        }
        for (uint32_t r = 0; r < world; r++) {
            stk__plan p;
            T_OK(stk__plan_init_shards(&p, &t, 2, 7, 1, 1, r, world, STK_DIST_PAD));
            per[r] = p.per_rank;
            for (uint64_t pos = 0; pos < p.per_rank; pos++) {
                uint64_t idx = stk__plan_index(&p, pos);
                uint32_t s = 0;
                while (idx >= first[s] + count[s])
                    s++;
                int mine = 0;
                for (uint32_t i = 0; i < p.nlocal; i++)
                    mine |= stk__plan_shard_at(&p, i) == s;
                T_CHECK(mine, "PAD world %u rank %u: record %llu of another rank's shard %u",
                        world, r, (unsigned long long)idx, s);
            }
            T_CHECK(per[r] == most, "PAD world %u rank %u: %llu samples, the largest share %llu",
                    world, r, (unsigned long long)per[r], (unsigned long long)most);
        }
    }
    stk__plan p;
    T_CHECK(stk__plan_init_shards(&p, &t, 1, 7, 1, 1, 0, 6, STK_DIST_EXACT) == STK_E_RANGE,
            "6 ranks over 5 listed shards not refused");
}

int main(void)
{
    make_table();
    check_live();
    const uint32_t windows[] = {1, 2, 4, NS, 64};
    const uint32_t worlds[] = {1, 2, 3, 5, NS};
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++)
        for (size_t j = 0; j < sizeof worlds / sizeof worlds[0]; j++)
            for (int sh = 0; sh < 2; sh++)
                check_epoch(windows[i], worlds[j], sh, 2);
    check_pure_and_random();
    for (uint32_t w = 1; w <= 3; w++) {
        check_resume(w, STK_DIST_PAD);
        check_resume(w, STK_DIST_EXACT);
        check_resume(w, STK_DIST_DROP);
    }
    check_sizes();
    printf("test_order_window: ok\n");
    return 0;
}
