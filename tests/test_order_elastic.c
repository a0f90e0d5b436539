/* SPDX-License-Identifier: MIT */
/*
 * test_order_elastic.c — elastic resume arithmetic (src/core/order.c, stk__plan_resume): a run of
 * W ranks stopped after every rank took k samples, then a run of W' ranks resumed from the
 * consumed prefix, delivers every sample of the epoch exactly once across the two runs, except
 * the stated tail rules (PAD repeats a few samples of the rest, DROP leaves out the rest's last
 * (n - c) mod W' samples). Checked against a list model written independently of order.c (the
 * global list as DistributedSampler builds it, sliced per rank) for many (n, W, W', k), with and
 * without shuffle, PAD and DROP in each run, and a resume of a resumed run.
 */
#include "common.h"
#include "order.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static uint64_t *g_perm;  /* epoch permutation (world 1) */
static uint32_t *g_count; /* deliveries per dataset index */

/* The list a run splits: REST = perm[c..n) (c = 0 for a fresh epoch), padded by repeating it or
 * cut, to a multiple of WORLD. Rank r's share is list[r], list[r + W], ... Returns its length. */
static uint64_t model_list(uint64_t n, uint64_t c, uint32_t world, int drop, uint64_t *list)
{
    uint64_t rest = n - c;
    if (rest == 0)
        return 0;
    uint64_t total = drop ? rest / world * world : (rest + world - 1) / world * world;
    for (uint64_t g = 0; g < total; g++)
        list[g] = g_perm[c + g % rest];
    return total;
}

/* One run of WORLD ranks from consumed prefix C; each rank takes TAKE samples (UINT64_MAX: all).
 * Checks every rank's plan against the model and counts deliveries. Returns the consumed prefix
 * after the run, as stk__plan_consumed reports it (equal on every rank). */
static uint64_t run(uint64_t n, uint64_t seed, uint64_t epoch, int shuffle, uint64_t c,
                    uint32_t world, int drop, uint64_t take, uint64_t *list)
{
    uint64_t total = model_list(n, c, world, drop, list);
    uint64_t consumed = UINT64_MAX;
    for (uint32_t r = 0; r < world; r++) {
        stk__plan p;
        T_OK(stk__plan_init(&p, n, seed, epoch, shuffle, r, world, drop));
        if (c)
            T_OK(stk__plan_resume(&p, c));
        T_CHECK(p.per_rank == total / world, "n %llu c %llu W %u drop %d: per_rank %llu, model %llu",
                (unsigned long long)n, (unsigned long long)c, world, drop,
                (unsigned long long)p.per_rank, (unsigned long long)(total / world));
        uint64_t k = take < p.per_rank ? take : p.per_rank;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t x = stk__plan_index(&p, i), want = list[r + i * world];
            T_CHECK(x == want, "n %llu c %llu W %u rank %u pos %llu: %llu, model %llu",
                    (unsigned long long)n, (unsigned long long)c, world, r,
                    (unsigned long long)i, (unsigned long long)x, (unsigned long long)want);
            g_count[x]++;
        }
        uint64_t got = stk__plan_consumed(&p, k);
        if (r == 0)
            consumed = got;
        T_CHECK(got == consumed, "consumed differs between ranks: %llu vs %llu",
                (unsigned long long)got, (unsigned long long)consumed);
        /* the consumed prefix is exactly what was taken, padding left out */
        uint64_t want = c + (k * world < n - c ? k * world : n - c);
        T_CHECK(got == want, "n %llu c %llu W %u k %llu: consumed %llu, expected %llu",
                (unsigned long long)n, (unsigned long long)c, world, (unsigned long long)k,
                (unsigned long long)got, (unsigned long long)want);
    }
    return consumed;
}

/* W ranks take K each, W2 ranks finish the epoch: every sample once but the tail rules. */
static void check(uint64_t n, uint32_t w1, uint32_t w2, uint64_t k, int shuffle, int drop1, int drop2,
                  uint64_t *list)
{
    uint64_t seed = 11 + n, epoch = 2;
    stk__plan g;
    T_OK(stk__plan_init(&g, n, seed, epoch, shuffle, 0, 1, 0));
    for (uint64_t i = 0; i < n; i++)
        g_perm[i] = stk__plan_index(&g, i);
    memset(g_count, 0, n * sizeof(*g_count));
    uint64_t c = run(n, seed, epoch, shuffle, 0, w1, drop1, k, list);
    uint64_t pad1 = 0;
    {
        uint64_t per1 = drop1 ? n / w1 : (n + w1 - 1) / w1, kk = k < per1 ? k : per1;
        pad1 = kk * w1 > n ? kk * w1 - n : 0;
    }
    uint64_t rest = n - c;
    (void)run(n, seed, epoch, shuffle, c, w2, drop2, UINT64_MAX, list);
    uint64_t dropped = drop2 ? rest % w2 : 0;
    uint64_t pad2 = drop2 || !rest ? 0 : (rest + w2 - 1) / w2 * w2 - rest;
    uint64_t missing = 0, dup = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = g_perm[i];
        /* the positions run 2 drops: the rest's last `dropped` */
        int is_dropped = i >= n - dropped;
        if (is_dropped) {
            T_CHECK(g_count[x] == 0, "n %llu W %u->%u k %llu: dropped index %llu delivered %u times",
                    (unsigned long long)n, w1, w2, (unsigned long long)k, (unsigned long long)x,
                    g_count[x]);
            missing++;
            continue;
        }
        T_CHECK(g_count[x] >= 1,
                "n %llu W %u->%u k %llu shuffle %d drop %d/%d: index %llu delivered %u times",
                (unsigned long long)n, w1, w2, (unsigned long long)k, shuffle, drop1, drop2,
                (unsigned long long)x, g_count[x]);
        dup += g_count[x] - 1;
    }
    T_CHECK(missing == dropped, "missing %llu, dropped %llu", (unsigned long long)missing,
            (unsigned long long)dropped);
    T_CHECK(dup == pad1 + pad2, "n %llu W %u->%u k %llu: %llu repeats, tail rules give %llu + %llu",
            (unsigned long long)n, w1, w2, (unsigned long long)k, (unsigned long long)dup,
            (unsigned long long)pad1, (unsigned long long)pad2);
}

/* W1 -> W2 -> W3: a resumed run checkpointed and resumed again. */
static void check_chain(uint64_t n, uint32_t w1, uint64_t k1, uint32_t w2, uint64_t k2, uint32_t w3,
                        uint64_t *list)
{
    stk__plan g;
    T_OK(stk__plan_init(&g, n, 5, 9, 1, 0, 1, 0));
    for (uint64_t i = 0; i < n; i++)
        g_perm[i] = stk__plan_index(&g, i);
    memset(g_count, 0, n * sizeof(*g_count));
    uint64_t c1 = run(n, 5, 9, 1, 0, w1, 1, k1, list);
    uint64_t c2 = run(n, 5, 9, 1, c1, w2, 1, k2, list);
    T_CHECK(c2 >= c1, "consumed went back");
    (void)run(n, 5, 9, 1, c2, w3, 1, UINT64_MAX, list);
    uint64_t dropped = (n - c2) % w3;
    for (uint64_t i = 0; i < n; i++)
        T_CHECK(g_count[g_perm[i]] == (i >= n - dropped ? 0u : 1u),
                "chain n %llu %u->%u->%u: position %llu delivered %u times", (unsigned long long)n,
                w1, w2, w3, (unsigned long long)i, g_count[g_perm[i]]);
}

int main(void)
{
    const uint64_t maxn = 1200;
    g_perm = calloc(maxn, sizeof(*g_perm));
    g_count = calloc(maxn, sizeof(*g_count));
    uint64_t *list = calloc(2 * maxn + 64, sizeof(*list));
    T_CHECK(g_perm && g_count && list, "oom");

    static const uint64_t ns[] = {1, 2, 3, 7, 10, 31, 64, 100, 257, 1000, 1199};
    uint64_t cases = 0;
    for (size_t a = 0; a < STK__ARRAY_LEN(ns); a++) {
        uint64_t n = ns[a];
        for (uint32_t w1 = 1; w1 <= 5; w1++) {
            uint64_t per = (n + w1 - 1) / w1;
            uint64_t ks[] = {0, 1, per / 3, per / 2, per > 0 ? per - 1 : 0, per};
            for (uint32_t w2 = 1; w2 <= 5; w2++)
                for (size_t b = 0; b < STK__ARRAY_LEN(ks); b++)
                    for (int shuffle = 0; shuffle <= 1; shuffle++)
                        for (int m = 0; m < 4; m++) {
                            check(n, w1, w2, ks[b], shuffle, m & 1, m >> 1, list);
                            cases++;
                        }
        }
    }
    /* world sizes far above n, and the 2 -> 3 and 3 -> 1 resumes of the Python test */
    check(5, 8, 3, 0, 1, 0, 0, list);
    check(5, 2, 16, 1, 1, 0, 1, list);
    check(100, 2, 3, 20, 1, 0, 0, list);
    check(100, 3, 1, 11, 1, 1, 1, list);
    check_chain(1000, 2, 123, 3, 57, 1, list);
    check_chain(1199, 4, 10, 7, 100, 2, list);
    check_chain(31, 5, 6, 2, 0, 3, list);

    /* consumed past the end is refused; consumed = n leaves nothing */
    stk__plan p;
    T_OK(stk__plan_init(&p, 10, 1, 0, 1, 0, 2, 0));
    T_CHECK(stk__plan_resume(&p, 11) == STK_E_RANGE, "consumed 11 of 10 accepted");
    T_OK(stk__plan_resume(&p, 10));
    T_CHECK(p.per_rank == 0, "nothing left, per_rank %llu", (unsigned long long)p.per_rank);
    T_CHECK(stk__plan_consumed(&p, 0) == 10, "consumed of an empty rest");
    printf("test_order_elastic: %llu (n, W, W', k, shuffle, modes) cases ok\n",
           (unsigned long long)cases);
    free(g_perm);
    free(g_count);
    free(list);
    return 0;
}
