/* SPDX-License-Identifier: MIT */
/*
 * test_order.c — the sampler (src/core/order.c): the epoch order is a permutation of [0, n), a pure
 * function of (seed, epoch); ranks split it exactly as torch's DistributedSampler does (PAD and
 * DROP); counts are equal across ranks.
 */
#include "common.h"
#include "order.h"
#include "testutil.h"

#include <string.h>
#include <unistd.h>

static uint8_t *g_seen;

/* The global order (world 1) is a permutation of [0, n). */
static void check_perm(uint64_t n, uint64_t seed, uint64_t epoch, int shuffle)
{
    stk__plan p;
    T_OK(stk__plan_init(&p, n, seed, epoch, shuffle, 0, 1, 0));
    T_CHECK(p.per_rank == n, "per_rank %llu n %llu", (unsigned long long)p.per_rank,
            (unsigned long long)n);
    memset(g_seen, 0, n);
    uint64_t fixed = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = stk__plan_index(&p, i);
        T_CHECK(x < n, "n %llu pos %llu -> %llu out of range", (unsigned long long)n,
                (unsigned long long)i, (unsigned long long)x);
        T_CHECK(!g_seen[x], "n %llu seed %llu epoch %llu: index %llu twice",
                (unsigned long long)n, (unsigned long long)seed, (unsigned long long)epoch,
                (unsigned long long)x);
        g_seen[x] = 1;
        if (!shuffle)
            T_CHECK(x == i, "no shuffle: pos %llu -> %llu", (unsigned long long)i,
                    (unsigned long long)x);
        fixed += x == i;
    }
    /* a random permutation has ~1 fixed point on average; a broken mixer has many */
    if (shuffle && n >= 1000)
        T_CHECK(fixed < 20, "n %llu: %llu fixed points", (unsigned long long)n,
                (unsigned long long)fixed);
}

/* Number of positions (out of the first N) at which two plans disagree. */
static uint64_t ndiff(uint64_t n, uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
    stk__plan a, b;
    T_OK(stk__plan_init(&a, n, s1, e1, 1, 0, 1, 0));
    T_OK(stk__plan_init(&b, n, s2, e2, 1, 0, 1, 0));
    uint64_t d = 0;
    for (uint64_t i = 0; i < n; i++)
        d += stk__plan_index(&a, i) != stk__plan_index(&b, i);
    return d;
}

/* Ranks: equal counts; DROP disjoint; PAD = DistributedSampler's multiset; union = dataset. */
static void check_ranks(uint64_t n, uint32_t world, int drop, int shuffle)
{
    uint32_t *count = calloc(n, sizeof(uint32_t));
    T_CHECK(count, "oom");
    uint64_t per = 0;
    for (uint32_t r = 0; r < world; r++) {
        stk__plan p;
        T_OK(stk__plan_init(&p, n, 7, 3, shuffle, r, world, drop));
        if (r == 0)
            per = p.per_rank;
        T_CHECK(p.per_rank == per, "n %llu world %u: rank %u gets %llu, rank 0 %llu",
                (unsigned long long)n, world, r, (unsigned long long)p.per_rank,
                (unsigned long long)per);
        for (uint64_t i = 0; i < p.per_rank; i++)
            count[stk__plan_index(&p, i)]++;
    }
    uint64_t expect_per = drop ? n / world : (n + world - 1) / world;
    T_CHECK(per == expect_per, "n %llu world %u drop %d: per_rank %llu, expected %llu",
            (unsigned long long)n, world, drop, (unsigned long long)per,
            (unsigned long long)expect_per);
    uint64_t total = per * world, covered = 0, sum = 0;
    /* the global list is perm(g mod n) for g < total: index perm(j) appears once per g = j + kn */
    stk__plan g;
    T_OK(stk__plan_init(&g, n, 7, 3, shuffle, 0, 1, 0));
    for (uint64_t j = 0; j < n; j++) {
        uint64_t idx = stk__plan_index(&g, j);
        uint64_t want = total / n + (j < total % n ? 1 : 0);
        T_CHECK(count[idx] == want, "n %llu world %u drop %d: index %llu delivered %u times, want %llu",
                (unsigned long long)n, world, drop, (unsigned long long)idx, count[idx],
                (unsigned long long)want);
        covered += count[idx] > 0;
        sum += count[idx];
    }
    T_CHECK(sum == total, "sum %llu total %llu", (unsigned long long)sum, (unsigned long long)total);
    if (!drop)
        T_CHECK(covered == n, "PAD: union covers %llu of %llu", (unsigned long long)covered,
                (unsigned long long)n);
    else
        T_CHECK(covered == total, "DROP: %llu distinct of %llu (ranks not disjoint)",
                (unsigned long long)covered, (unsigned long long)total);
    free(count);
}

/* Compare the per-rank lists with torch's DistributedSampler (shuffle=False, so its permutation
 * is the identity and only the index arithmetic is compared). Returns 0 if torch is missing. */
static int check_torch(void)
{
    static const uint64_t ns[] = {1, 2, 3, 5, 7, 10, 11, 13, 64, 100, 101};
    char path[] = "/tmp/stk-order-XXXXXX";
    int fd = mkstemp(path);
    T_CHECK(fd >= 0, "mkstemp");
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 -c '\n"
             "import sys\n"
             "from torch.utils.data import DistributedSampler\n"
             "out = open(sys.argv[1], \"w\")\n"
             "for n in [1, 2, 3, 5, 7, 10, 11, 13, 64, 100, 101]:\n"
             "  for w in range(1, 8):\n"
             "    for d in (0, 1):\n"
             "      for r in range(w):\n"
             "        s = DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=False, drop_last=bool(d))\n"
             "        out.write(\" \".join(map(str, [n, w, d, r, len(s)] + list(s))) + \"\\n\")\n"
             "' %s 2>/dev/null",
             path);
    int rc = t_system("%s", cmd);
    if (rc != 0) {
        unlink(path);
        return 0;
    }
    FILE *f = fopen(path, "r");
    T_CHECK(f, "open %s", path);
    unsigned long long n, w, d, r, len, lines = 0;
    while (fscanf(f, "%llu %llu %llu %llu %llu", &n, &w, &d, &r, &len) == 5) {
        stk__plan p;
        int prc = stk__plan_init(&p, n, 0, 0, 0, (uint32_t)r, (uint32_t)w, (int)d);
        T_OK(prc);
        T_CHECK(p.per_rank == len, "n %llu w %llu drop %llu rank %llu: ours %llu, torch %llu", n, w,
                d, r, (unsigned long long)p.per_rank, len);
        for (unsigned long long i = 0; i < len; i++) {
            unsigned long long want;
            T_CHECK(fscanf(f, "%llu", &want) == 1, "parse");
            uint64_t got = stk__plan_index(&p, i);
            T_CHECK(got == want, "n %llu w %llu drop %llu rank %llu pos %llu: ours %llu, torch %llu",
                    n, w, d, r, i, (unsigned long long)got, want);
        }
        lines++;
    }
    fclose(f);
    unlink(path);
    size_t expect = 0;
    for (size_t i = 0; i < STK__ARRAY_LEN(ns); i++)
        expect += 2 * 28; /* sum of ranks over world 1..7, both modes */
    T_CHECK(lines == expect, "torch lines %llu, expected %zu", lines, expect);
    return 1;
}

int main(void)
{
    static const uint64_t ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 1000, 1023, 1024, 1025,
                                  4097, 65535, 65536, 65537, 1000003};
    g_seen = malloc(1000003);
    T_CHECK(g_seen, "oom");
    for (size_t i = 0; i < STK__ARRAY_LEN(ns); i++) {
        uint64_t n = ns[i];
        check_perm(n, 0, 0, 0);
        check_perm(n, 0, 0, 1);
        check_perm(n, 12345, 7, 1);
        if (n <= 4097)
            for (uint64_t e = 0; e < 20; e++)
                check_perm(n, 99, e, 1);
    }

    /* determinism and sensitivity to seed and epoch */
    T_CHECK(ndiff(1000, 1, 2, 1, 2) == 0, "same seed/epoch differ");
    T_CHECK(ndiff(65537, 5, 0, 5, 0) == 0, "same seed/epoch differ");
    T_CHECK(ndiff(1000, 1, 2, 2, 2) > 900, "seed change moved only %llu", (unsigned long long)ndiff(1000, 1, 2, 2, 2));
    T_CHECK(ndiff(1000, 1, 2, 1, 3) > 900, "epoch change moved only %llu", (unsigned long long)ndiff(1000, 1, 2, 1, 3));
    T_CHECK(ndiff(65537, 0, 0, 0, 1) > 60000, "epoch change moved too little");
    T_CHECK(ndiff(7, 1, 0, 1, 1) > 0 || ndiff(7, 1, 0, 1, 2) > 0, "n=7: epochs give one order");

    /* rough uniformity: where does index 0 land for n = 5 over many epochs */
    {
        uint32_t hist[5] = {0};
        for (uint64_t e = 0; e < 20000; e++) {
            stk__plan p;
            T_OK(stk__plan_init(&p, 5, 42, e, 1, 0, 1, 0));
            hist[stk__plan_index(&p, 0)]++;
        }
        for (int k = 0; k < 5; k++)
            T_CHECK(hist[k] > 3400 && hist[k] < 4600, "n=5: position 0 -> %d in %u of 20000 epochs",
                    k, hist[k]);
    }

    /* distributed */
    static const uint64_t dn[] = {1, 2, 3, 5, 6, 7, 10, 11, 13, 29, 100, 997, 1000, 1001};
    for (size_t i = 0; i < STK__ARRAY_LEN(dn); i++)
        for (uint32_t w = 1; w <= 7; w++)
            for (int drop = 0; drop < 2; drop++)
                for (int sh = 0; sh < 2; sh++)
                    check_ranks(dn[i], w, drop, sh);

    /* bad arguments */
    stk__plan p;
    T_CHECK(stk__plan_init(&p, 0, 0, 0, 1, 0, 1, 0) == STK_E_EMPTYSET, "n = 0 accepted");
    T_CHECK(stk__plan_init(&p, 10, 0, 0, 1, 0, 0, 0) == STK_E_INVALID, "world 0 accepted");
    T_CHECK(stk__plan_init(&p, 10, 0, 0, 1, 3, 3, 0) == STK_E_INVALID, "rank >= world accepted");
    /* DROP with fewer samples than ranks: nobody gets anything, consistently */
    T_OK(stk__plan_init(&p, 3, 0, 0, 1, 4, 5, 1));
    T_CHECK(p.per_rank == 0, "n 3 world 5 drop: per_rank %llu", (unsigned long long)p.per_rank);

    if (check_torch())
        printf("torch DistributedSampler index arithmetic: identical\n");
    else
        printf("torch not available: DistributedSampler comparison skipped\n");
    free(g_seen);
    printf("ok\n");
    return 0;
}
