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

#include <stdlib.h>
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
 * windows' record orders never share a Feistel key with each other or with the global order;
 * SW_SEG keys the segments after an elastic resume apart from segment 0. */
#define SW_DEAL UINT64_C(0x53574445414c0001)
#define SW_ORDER UINT64_C(0x53574f5244520002)
#define SW_WIN UINT64_C(0x535757494e000003)
#define SW_SEG UINT64_C(0x5357534547000004)
#define SW_SLICE UINT64_C(0x5357534c49430005)

/* Records left of shard S, shards dealt, the shard at dealt place Q. */
static uint64_t left_of(const stk__plan *p, uint32_t s)
{
    return p->rest ? p->rest->left[s] : p->sw->count[s];
}
static uint32_t table_dealt(const stk__shard_table *t) { return t->live ? t->nlive : t->n; }
static uint32_t dealt_n(const stk__plan *p) { return p->rest ? p->rest->m : table_dealt(p->sw); }
static uint32_t dealt_at(const stk__plan *p, uint64_t q)
{
    uint64_t d = stk__perm_apply(&p->rho, q);
    return p->rest ? p->rest->shard[d] : p->sw->live ? p->sw->live[d] : (uint32_t)d;
}

uint32_t stk__plan_shard_at(const stk__plan *p, uint32_t i)
{
    uint64_t j = stk__perm_apply(&p->tau, i); /* place in the rank's list */
    return dealt_at(p, p->owner + j * p->world);
}

/* Records of rank R's shards (dealt: positions r, r + world, ...). */
static uint64_t rank_records(const stk__plan *p, uint32_t r)
{
    uint64_t sum = 0;
    for (uint64_t q = r; q < dealt_n(p); q += p->world)
        sum += left_of(p, dealt_at(p, q));
    return sum;
}

int stk__plan_init_rest(stk__plan *p, const stk__shard_table *t, const stk__rest *rest,
                        uint32_t window, uint64_t seed, uint64_t epoch, int shuffle, uint32_t rank,
                        uint32_t world, int mode)
{
    if (!p || !t || !t->n || window < 1 || window > STK__MAX_WINDOW)
        return STK_E_INVALID;
    if (rest && !rest->seg)
        rest = NULL; /* nothing taken yet: the whole epoch, segment 0 */
    if (rest && rest->nshards != t->n)
        return STK_E_INVALID;
    uint64_t n = 0;
    for (uint32_t s = 0; s < t->n; s++)
        n += t->count[s];
    int rc = stk__plan_init(p, n, seed, epoch, shuffle, rank, world, mode);
    if (rc != STK_OK)
        return rc;
    if (!rest && table_dealt(t) < world)
        return STK_E_RANGE;
    p->sw = t;
    p->rest = rest;
    p->seg = rest ? rest->seg : 0;
    p->window = window;
    uint32_t ns = dealt_n(p), owners = STK__MIN(ns, world);
    p->owner = rank;
    if (rank >= ns && ns && mode != STK_DIST_EXACT)
        p->owner = rank % ns; /* fewer shards left than ranks: read another rank's list again */
    p->nlocal = p->owner < ns ? (uint32_t)((ns - p->owner + world - 1) / world) : 0;
    stk__perm_init(&p->rho, ns, seed ^ SW_DEAL, rest ? stk__hash3(epoch, p->seg, SW_SEG) : 0,
                   !shuffle);
    stk__perm_init(&p->tau, p->nlocal, seed ^ SW_ORDER, stk__hash3(epoch, p->owner, p->seg),
                   !shuffle);
    p->local = rank_records(p, p->owner);
    p->stagger = shuffle && window > 1 && window < p->nlocal;
    uint64_t lo = UINT64_MAX, hi = 0;
    if (mode != STK_DIST_EXACT)
        for (uint32_t r = 0; r < owners; r++) {
            uint64_t c = r == p->owner ? p->local : rank_records(p, r);
            lo = c < lo ? c : lo;
            hi = c > hi ? c : hi;
        }
    if (!owners)
        lo = 0;
    p->per_rank = mode == STK_DIST_EXACT ? p->local : mode == STK_DIST_DROP ? lo : hi;
    if (p->per_rank && !p->local)
        return STK_E_RANGE; /* PAD: this rank's shards are empty, nothing to wrap around */
    p->remain = p->per_rank * world;
    p->win_hi = 0; /* no window cached */
    return STK_OK;
}

int stk__plan_init_shards(stk__plan *p, const stk__shard_table *t, uint32_t window, uint64_t seed,
                          uint64_t epoch, int shuffle, uint32_t rank, uint32_t world, int mode)
{
    return stk__plan_init_rest(p, t, NULL, window, seed, epoch, shuffle, rank, world, mode);
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

/* Window K's key (the order of its records). */
static uint64_t window_key(const stk__plan *p, uint64_t k)
{
    uint64_t key = stk__hash3(p->epoch, p->owner, k);
    return p->seg ? stk__hash3(key, p->seg, SW_SEG) : key;
}

/* The order of shard S's records (left) in which its staggered windows cut their slices. */
static void slice_order(const stk__plan *p, uint32_t s, stk__perm *sigma)
{
    stk__perm_init(sigma, left_of(p, s), p->seed ^ SW_SLICE, stk__hash3(p->epoch, s, p->seg), 0);
}

/* Records of the shard at place I in window K (staggered): slice K - I of W, [*ULO, *UHI). */
static void slice_of(const stk__plan *p, uint32_t i, uint64_t k, uint64_t *ulo, uint64_t *uhi)
{
    uint64_t c = left_of(p, stk__plan_shard_at(p, i)), j = k - i, w = p->window;
    *ulo = c * j / w;
    *uhi = c * (j + 1) / w;
}

uint64_t stk__plan_windows(const stk__plan *p)
{
    return p->stagger ? (uint64_t)p->nlocal + p->window - 1
                      : ((uint64_t)p->nlocal + p->window - 1) / p->window;
}

/* Cache window K of the rank's epoch order: its shards and their cumulative counts; LO = the
 * rank-local position of its first record. */
static void load_window(stk__plan *p, uint64_t k, uint64_t lo)
{
    uint32_t first, last, n = 0; /* places [first, last) */
    if (p->stagger) {
        first = k >= p->window ? (uint32_t)(k - p->window + 1) : 0;
        last = (uint32_t)STK__MIN(k + 1, (uint64_t)p->nlocal);
    } else {
        first = (uint32_t)(k * p->window);
        last = (uint32_t)STK__MIN((uint64_t)first + p->window, (uint64_t)p->nlocal);
    }
    uint64_t end = 0;
    for (uint32_t i = first; i < last; i++, n++) {
        uint32_t s = stk__plan_shard_at(p, i);
        uint64_t ulo = 0, uhi = left_of(p, s);
        if (p->stagger)
            slice_of(p, i, k, &ulo, &uhi);
        end += uhi - ulo;
        p->win_shard[n] = s;
        p->win_ulo[n] = ulo;
        p->win_end[n] = end;
    }
    p->win_k = k;
    p->win_n = n;
    p->win_lo = lo;
    p->win_hi = lo + end;
    stk__perm_init(&p->win_perm, end, p->seed ^ SW_WIN, window_key(p, k), !p->shuffle);
}

/* The J-th record left of shard S (as an offset in the shard): a select on its bitmap. */
static uint64_t select_left(const stk__rest *r, uint32_t s, uint64_t count, uint64_t j)
{
    const uint64_t *b = r->bits[s], *blk = r->blk[s];
    if (!b)
        return j;
    uint64_t nb = (count + 511) / 512, lo = 0, hi = nb;
    while (hi - lo > 1) { /* the last block with fewer than J + 1 ones before it */
        uint64_t mid = (lo + hi) / 2;
        if (blk[mid] <= j)
            lo = mid;
        else
            hi = mid;
    }
    j -= blk[lo];
    for (uint64_t w = lo * 8;; w++) {
        uint64_t x = b[w];
        uint64_t c = (uint64_t)__builtin_popcountll(x);
        if (j < c) {
            while (j--)
                x &= x - 1;
            return w * 64 + (uint64_t)__builtin_ctzll(x);
        }
        j -= c;
    }
}

/* Dataset index of the U-th record of shard S in the plan's order of it (its slice order when
 * staggered), among the records left. */
static uint64_t record_at(const stk__plan *p, uint32_t s, uint64_t u)
{
    if (p->stagger) {
        stk__perm sigma;
        slice_order(p, s, &sigma);
        u = stk__perm_apply(&sigma, u);
    }
    if (p->rest)
        return p->sw->first[s] + select_left(p->rest, s, p->sw->count[s], u);
    return p->sw->first[s] + u;
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
    return record_at(p, p->win_shard[i], p->win_ulo[i] + (j - before));
}

uint64_t stk__plan_window_end(stk__plan *p, uint64_t pos)
{
    stk__plan_index(p, pos); /* loads the window POS is in */
    uint64_t x = (pos + p->skip) % p->local;
    return pos + (p->win_hi - x);
}

/* ---- what is left of an epoch: elastic resume in the shard-window order ------------------- */

static void rest_list(stk__rest *r)
{
    r->m = 0;
    for (uint32_t s = 0; s < r->nshards; s++)
        if (r->left[s])
            r->shard[r->m++] = s;
}

int stk__rest_init(stk__rest *r, const stk__shard_table *t)
{
    memset(r, 0, sizeof *r);
    r->nshards = t->n;
    r->shard = malloc((t->n ? t->n : 1) * sizeof *r->shard);
    r->left = malloc((t->n ? t->n : 1) * sizeof *r->left);
    r->bits = calloc(t->n ? t->n : 1, sizeof *r->bits);
    r->blk = calloc(t->n ? t->n : 1, sizeof *r->blk);
    if (!r->shard || !r->left || !r->bits || !r->blk) {
        stk__rest_free(r);
        return STK_E_NOMEM;
    }
    for (uint32_t s = 0; s < t->n; s++)
        r->left[s] = t->count[s];
    rest_list(r);
    return STK_OK;
}

void stk__rest_free(stk__rest *r)
{
    if (!r)
        return;
    for (uint32_t s = 0; r->bits && s < r->nshards; s++) {
        free(r->bits[s]);
        free(r->blk[s]);
    }
    free(r->shard);
    free(r->left);
    free(r->bits);
    free(r->blk);
    memset(r, 0, sizeof *r);
}

uint64_t stk__rest_records(const stk__rest *r)
{
    uint64_t n = 0;
    for (uint32_t s = 0; s < r->nshards; s++)
        n += r->left[s];
    return n;
}

uint32_t stk__table_shard_of(const stk__shard_table *t, uint64_t index)
{
    uint32_t lo = 0, hi = t->n;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (t->first[mid] <= index)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Clear record OFF of shard S (a bitmap made on the first). */
static int rest_clear(stk__rest *r, uint32_t s, uint64_t count, uint64_t off)
{
    if (!r->bits[s]) {
        uint64_t words = (count + 63) / 64 + 8; /* + a block: select reads whole blocks */
        r->bits[s] = calloc(words, sizeof **r->bits);
        r->blk[s] = calloc((count + 511) / 512 + 1, sizeof **r->blk);
        if (!r->bits[s] || !r->blk[s])
            return STK_E_NOMEM;
        for (uint64_t i = 0; i < count; i++)
            r->bits[s][i / 64] |= UINT64_C(1) << (i % 64);
    }
    uint64_t bit = UINT64_C(1) << (off % 64);
    if (r->bits[s][off / 64] & bit) {
        r->bits[s][off / 64] &= ~bit;
        r->left[s]--;
    }
    return STK_OK;
}

static int push_rec(uint64_t **recs, size_t *n, size_t *cap, uint64_t rec)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        uint64_t *nr = realloc(*recs, nc * sizeof *nr);
        if (!nr)
            return STK_E_NOMEM;
        *recs = nr;
        *cap = nc;
    }
    (*recs)[(*n)++] = rec;
    return STK_OK;
}

int stk__rest_take(stk__rest *r, const stk__shard_table *t, uint32_t window, uint64_t seed,
                   uint64_t epoch, int shuffle, uint32_t world, uint64_t taken)
{
    if (!r || !t || r->nshards != t->n || window < 1 || window > STK__MAX_WINDOW || world < 1)
        return STK_E_INVALID;
    if (!r->seg && table_dealt(t) < world)
        return STK_E_RANGE;
    uint32_t owners = STK__MIN(r->seg ? r->m : table_dealt(t), world);
    uint8_t *empty = calloc(t->n, 1);
    uint64_t *recs = NULL, most = 0;
    size_t nrec = 0, cap = 0;
    int rc = empty ? STK_OK : STK_E_NOMEM;
    stk__plan p;
    /* what each rank took, read on R as it is (the marks are applied after: the deal of every
     * rank depends on which shards have records left) */
    for (uint32_t rank = 0; rank < owners && rc == STK_OK; rank++) {
        rc = stk__plan_init_rest(&p, t, r, window, seed, epoch, shuffle, rank, world,
                                 STK_DIST_EXACT);
        if (rc != STK_OK)
            break;
        most = STK__MAX(most, p.local);
        uint64_t lim = STK__MIN(taken, p.local), pos = 0, whole = 0;
        while (pos < lim) { /* the windows read whole: a prefix of them */
            uint64_t end = stk__plan_window_end(&p, pos);
            if (end > lim)
                break;
            whole = p.win_k + 1;
            pos = end;
        }
        if (lim == p.local)
            whole = stk__plan_windows(&p);
        for (uint32_t i = 0; i < p.nlocal && rc == STK_OK; i++) {
            uint32_t s = stk__plan_shard_at(&p, i);
            if (!p.stagger) { /* a shard is in one window */
                if (i / p.window < whole)
                    empty[s] = 1;
                continue;
            }
            /* staggered: its slices 0..J-1 are in whole windows i..i+J-1 */
            uint64_t j = whole > i ? STK__MIN(whole - i, (uint64_t)p.window) : 0, ulo, uhi;
            if (j == p.window) {
                empty[s] = 1;
                continue;
            }
            if (!j)
                continue;
            slice_of(&p, i, i + j - 1, &ulo, &uhi);
            for (uint64_t u = 0; u < uhi && rc == STK_OK; u++)
                rc = push_rec(&recs, &nrec, &cap, record_at(&p, s, u));
        }
        for (; pos < lim && rc == STK_OK; pos++) /* the window read in part: record by record */
            rc = push_rec(&recs, &nrec, &cap, stk__plan_index(&p, pos));
    }
    if (rc == STK_OK && taken > most)
        rc = STK_E_RANGE;
    for (size_t i = 0; rc == STK_OK && i < nrec; i++) {
        uint32_t s = stk__table_shard_of(t, recs[i]);
        rc = rest_clear(r, s, t->count[s], recs[i] - t->first[s]);
    }
    if (rc == STK_OK) {
        for (uint32_t s = 0; s < t->n; s++) {
            if (empty[s])
                r->left[s] = 0;
            if (r->bits[s] && !r->left[s]) {
                free(r->bits[s]);
                free(r->blk[s]);
                r->bits[s] = NULL;
                r->blk[s] = NULL;
            } else if (r->bits[s]) { /* ones before each block, for select */
                uint64_t ones = 0, words = (t->count[s] + 63) / 64;
                for (uint64_t w = 0; w < words; w++) {
                    if (w % 8 == 0)
                        r->blk[s][w / 8] = ones;
                    ones += (uint64_t)__builtin_popcountll(r->bits[s][w]);
                }
            }
        }
        rest_list(r);
        r->seg++;
    }
    free(empty);
    free(recs);
    return rc;
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
