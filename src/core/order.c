/* SPDX-License-Identifier: MIT */
/*
 * order.c — the sampler: the epoch's order as a keyed bijection, and the distributed split.
 *
 * Why a bijection and not a shuffled table: a table of n indices is O(n) memory per epoch and
 * must be rebuilt (and kept identical on every rank) each epoch; a keyed permutation is a pure
 * function of (seed, epoch, position), costs little per sample and lets any
 * thread, any rank and a resumed run compute any position without state.
 *
 * The permutation. Let b = the bits needed for n - 1 (at least 2), h = ceil(b / 2) and
 * D = 2^(2h) >= n. A balanced Feistel network on 2h-bit words (halves of h bits) with 4 rounds is
 * a bijection on [0, D) whatever the round function. Round r uses the key
 * K_r = stk__hash3(seed, epoch, r) and F_r(x) = mix64(x ^ K_r) masked to h bits (mix64 is the
 * splitmix64/Stafford finaliser: every input bit affects every output bit). To land in [0, n),
 * cycle-walk: apply the network again while the value is >= n. Since the network is a permutation
 * of [0, D) and x < n starts the walk, the walk ends (it is the next element of x's cycle that is
 * < n), and the map x -> walk(x) is a permutation of [0, n). D < 4n, so a walk takes fewer than
 * 4 steps on average. Without shuffle the order is the identity.
 *
 * The distributed split is torch.utils.data.DistributedSampler's index arithmetic exactly:
 * PAD: total = ceil(n / world) * world, the global list is the permutation repeated (position
 * g -> perm(g mod n)); DROP: total = floor(n / world) * world. Rank r takes global positions
 * r, r + world, r + 2 world, ...: per_rank = total / world. EXACT takes the same strided
 * positions without padding or dropping: rank r gets the positions below n, ceil((n - r) / world)
 * of them (0 when r >= n), so the ranks' parts differ by at most one sample and together hold
 * every sample exactly once (DistributedSampler's order with the padding left out; a resumed
 * EXACT epoch splits the rest the same way).
 *
 * Elastic resume (stk__plan_resume). Under DDP every rank has taken the same number k of samples
 * at a checkpoint, so what was delivered is the global prefix [0, k world) — a set that does not
 * depend on how it was split. A run with another world size splits the rest [c, n), c = that
 * prefix, with the same rule applied to the rest as to a whole list: position g of the rest is
 * global position c + (g mod (n - c)). With c = 0 this is the plain split above, so one formula
 * serves both.
 */
#include "order.h"

#include "common.h"

#include <string.h>

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

int stk__plan_init(stk__plan *p, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle,
                   uint32_t rank, uint32_t world, int mode)
{
    if (!p)
        return STK_E_INVALID;
    memset(p, 0, sizeof(*p));
    if (n == 0)
        return STK_E_EMPTYSET;
    if (world == 0 || rank >= world)
        return STK_E_INVALID;
    p->n = n;
    p->seed = seed;
    p->epoch = epoch;
    p->shuffle = shuffle ? 1 : 0;
    if (mode < STK_DIST_PAD || mode > STK_DIST_EXACT)
        return STK_E_INVALID;
    p->mode = mode;
    p->rank = rank;
    p->world = world;
    p->remain = n;
    if (mode == STK_DIST_DROP)
        p->per_rank = n / world;
    else if (mode == STK_DIST_EXACT)
        p->per_rank = rank < n ? (n - rank + world - 1) / world : 0;
    else
        p->per_rank = n / world + (n % world ? 1 : 0);

    uint64_t bits = 0;
    while (bits < 64 && (n - 1) >> bits)
        bits++;
    if (bits < 2)
        bits = 2;
    p->half_bits = (bits + 1) / 2; /* <= 32 */
    p->mask = (UINT64_C(1) << p->half_bits) - 1;
    for (int r = 0; r < 4; r++)
        p->keys[r] = stk__hash3(seed, epoch, (uint64_t)r);
    return STK_OK;
}

/* ---- the keyed bijection, as a value of its own (the shard-window order uses three) ---------- */

void stk__perm_init(stk__perm *p, uint64_t n, uint64_t k0, uint64_t k1, int identity)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->identity = identity || n < 2;
    uint64_t bits = 0;
    while (bits < 64 && n && (n - 1) >> bits)
        bits++;
    if (bits < 2)
        bits = 2;
    p->half_bits = (bits + 1) / 2;
    p->mask = (UINT64_C(1) << p->half_bits) - 1;
    for (int r = 0; r < 4; r++)
        p->keys[r] = stk__hash3(k0, k1, (uint64_t)r);
}

uint64_t stk__perm_apply(const stk__perm *p, uint64_t x)
{
    if (p->identity)
        return x;
    uint64_t h = p->half_bits, m = p->mask;
    do {
        uint64_t l = (x >> h) & m, r = x & m;
        for (int i = 0; i < 4; i++) {
            uint64_t t = l ^ (mix64(r ^ p->keys[i]) & m);
            l = r;
            r = t;
        }
        x = (l << h) | r;
    } while (x >= p->n);
    return x;
}

static uint64_t feistel(const stk__plan *p, uint64_t x)
{
    uint64_t h = p->half_bits, m = p->mask;
    uint64_t l = (x >> h) & m, r = x & m;
    for (int i = 0; i < 4; i++) {
        uint64_t t = l ^ (mix64(r ^ p->keys[i]) & m);
        l = r;
        r = t;
    }
    return (l << h) | r;
}

/* Position G of the epoch's global order (G < n) -> dataset index. */
static uint64_t permute(const stk__plan *p, uint64_t g)
{
    if (!p->shuffle)
        return g;
    uint64_t x = g;
    do {
        x = feistel(p, x);
    } while (x >= p->n);
    return x;
}

/* ---- the shard-window order (order.h, docs/S3.md) ------------------------------------------- */

/* Key domains: distinct first keys so that the shard deal, the epoch's shard order and the
 * windows' record orders never share a Feistel key with each other or with the global order. */
#define SW_DEAL UINT64_C(0x53574445414c0001)
#define SW_ORDER UINT64_C(0x53574f5244520002)
#define SW_WIN UINT64_C(0x535757494e000003)

uint32_t stk__plan_shard_at(const stk__plan *p, uint32_t i)
{
    uint64_t j = stk__perm_apply(&p->tau, i); /* place in the rank's list */
    return (uint32_t)stk__perm_apply(&p->rho, p->rank + j * p->world);
}

/* Records of rank R's shards (rho dealt: positions r, r + world, ...). */
static uint64_t rank_records(const stk__plan *p, uint32_t r)
{
    uint64_t sum = 0;
    for (uint64_t q = r; q < p->sw->n; q += p->world)
        sum += p->sw->count[stk__perm_apply(&p->rho, q)];
    return sum;
}

int stk__plan_init_shards(stk__plan *p, const stk__shard_table *t, uint32_t window, uint64_t seed,
                          uint64_t epoch, int shuffle, uint32_t rank, uint32_t world, int mode)
{
    if (!p || !t || !t->n || window < 1 || window > STK__MAX_WINDOW)
        return STK_E_INVALID;
    uint64_t n = 0;
    for (uint32_t s = 0; s < t->n; s++)
        n += t->count[s];
    int rc = stk__plan_init(p, n, seed, epoch, shuffle, rank, world, mode);
    if (rc != STK_OK)
        return rc;
    if (t->n < world)
        return STK_E_RANGE;
    p->sw = t;
    p->window = window;
    p->nlocal = (uint32_t)((t->n - rank + world - 1) / world);
    stk__perm_init(&p->rho, t->n, seed ^ SW_DEAL, 0, !shuffle);
    stk__perm_init(&p->tau, p->nlocal, seed ^ SW_ORDER, stk__hash3(epoch, rank, 0), !shuffle);
    p->local = rank_records(p, rank);
    uint64_t lo = UINT64_MAX, hi = 0;
    if (mode != STK_DIST_EXACT)
        for (uint32_t r = 0; r < world; r++) {
            uint64_t c = r == rank ? p->local : rank_records(p, r);
            lo = c < lo ? c : lo;
            hi = c > hi ? c : hi;
        }
    p->per_rank = mode == STK_DIST_EXACT ? p->local : mode == STK_DIST_DROP ? lo : hi;
    if (p->per_rank && !p->local)
        return STK_E_RANGE; /* PAD: this rank's shards are empty, nothing to wrap around */
    p->remain = p->per_rank * world;
    p->win_hi = 0; /* no window cached */
    return STK_OK;
}

static int resume_shards(stk__plan *p, uint64_t consumed)
{
    uint64_t k = consumed / p->world;
    if (consumed % p->world || k > p->per_rank + p->skip)
        return STK_E_RANGE;
    uint64_t full = p->per_rank + p->skip;
    p->skip = k;
    p->per_rank = full - k;
    p->base = consumed;
    p->remain = p->per_rank * p->world;
    return STK_OK;
}

/* Cache window K of the rank's epoch order: its shards and their cumulative counts; LO = the
 * rank-local position of its first record. */
static void load_window(stk__plan *p, uint64_t k, uint64_t lo)
{
    uint32_t first = (uint32_t)(k * p->window), n = 0;
    uint64_t end = 0;
    for (uint32_t i = first; i < p->nlocal && n < p->window; i++, n++) {
        uint32_t s = stk__plan_shard_at(p, i);
        end += p->sw->count[s];
        p->win_shard[n] = s;
        p->win_end[n] = end;
    }
    p->win_k = k;
    p->win_n = n;
    p->win_lo = lo;
    p->win_hi = lo + end;
    stk__perm_init(&p->win_perm, end, p->seed ^ SW_WIN, stk__hash3(p->epoch, p->rank, k),
                   !p->shuffle);
}

static uint64_t index_shards(stk__plan *p, uint64_t pos)
{
    uint64_t x = (pos + p->skip) % p->local; /* PAD wraps around the rank's own list */
    if (x < p->win_lo || x >= p->win_hi) {
        /* walk the windows from the start (or from the cached one, reading forward) */
        uint64_t k = 0, lo = 0;
        if (p->win_hi && x >= p->win_hi) {
            k = p->win_k + 1;
            lo = p->win_hi;
        }
        for (;;) {
            load_window(p, k, lo);
            if (x < p->win_hi)
                break;
            k++;
            lo = p->win_hi;
        }
    }
    uint64_t j = stk__perm_apply(&p->win_perm, x - p->win_lo);
    uint32_t i = 0;
    while (j >= p->win_end[i])
        i++;
    uint64_t before = i ? p->win_end[i - 1] : 0;
    return p->sw->first[p->win_shard[i]] + (j - before);
}

int stk__plan_resume(stk__plan *p, uint64_t consumed)
{
    if (p && p->sw)
        return resume_shards(p, consumed);
    if (!p || !p->n || consumed > p->n)
        return STK_E_RANGE;
    uint64_t rest = p->n - consumed;
    p->base = consumed;
    p->remain = rest;
    if (p->mode == STK_DIST_DROP)
        p->per_rank = rest / p->world;
    else if (p->mode == STK_DIST_EXACT)
        p->per_rank = p->rank < rest ? (rest - p->rank + p->world - 1) / p->world : 0;
    else
        p->per_rank = rest / p->world + (rest % p->world ? 1 : 0);
    return STK_OK;
}

uint64_t stk__plan_consumed(const stk__plan *p, uint64_t k)
{
    uint64_t w = p->world;
    if (k && k > p->remain / w + 1) /* k * world cannot overflow below this */
        return p->base + p->remain;
    uint64_t g = k * w;
    return p->base + (g < p->remain ? g : p->remain);
}

uint64_t stk__plan_index(stk__plan *p, uint64_t pos)
{
    if (p->sw)
        return index_shards(p, pos);
    /* position in the (rest of the) padded/dropped list, then wrap (PAD repeats the list) */
    uint64_t g = (uint64_t)p->rank + pos * (uint64_t)p->world;
    return permute(p, p->base + g % p->remain);
}
