/* SPDX-License-Identifier: MIT */
/*
 * order.h — the sampler: which dataset index is sample POS of EPOCH on RANK. A pure function of
 * (seed, epoch, rank, world, n): independent of threads and completion order. Internal.
 *
 * The epoch's global order is a permutation of [0, n) (identity without shuffle) computed by a
 * keyed bijection (no O(n) table). As torch's DistributedSampler: PAD extends the global list to
 * ceil(n / world) * world by wrapping around, DROP cuts it to floor(n / world) * world; rank r
 * takes global positions r, r + world, r + 2 world, ...
 */
#ifndef STK_ORDER_H
#define STK_ORDER_H

#include <stdint.h>

/* A keyed bijection of [0, n) (a 4-round Feistel network with cycle-walking; order.c). */
typedef struct stk__perm {
    uint64_t n, half_bits, mask, keys[4];
    int identity;
} stk__perm;
void stk__perm_init(stk__perm *p, uint64_t n, uint64_t k0, uint64_t k1, int identity);
uint64_t stk__perm_apply(const stk__perm *p, uint64_t x);

/* The shards of a dataset as the shard-window order sees them: shard s holds the dataset indices
 * [first[s], first[s] + count[s]). LIVE = NULL: every shard is dealt; else only the NLIVE shards
 * LIVE[0..NLIVE) (increasing; the others must have count 0) — a subset's table
 * (stk_loader_set_indices), whose shards without a selected record are dealt to no rank and so
 * never fetched. Borrowed by the plans made from it. */
typedef struct stk__shard_table {
    uint32_t n;
    const uint64_t *first, *count;
    const uint32_t *live;
    uint32_t nlive;
} stk__shard_table;

/* The shard of T holding dataset index INDEX (binary search of first[]; INDEX below the last
 * shard's end). */
uint32_t stk__table_shard_of(const stk__shard_table *t, uint64_t index);

#define STK__MAX_WINDOW 256 /* largest W (STK_P_SHUFFLE_WINDOW) */
#define STK__MAX_SEGS 16     /* segments of a shard-window epoch's history (elastic resumes) */

/* What is left of one epoch of the shard-window order once some of it was delivered, by runs of
 * any world sizes (docs/S3.md "Elastic resume inside a streamed epoch"): per shard, the records
 * left, as a count and, for a shard partly delivered, a bitmap (1 = left). SEG = how many
 * segments (runs) delivered what is gone; SEG = 0 is the whole epoch. Built by stk__rest_init and
 * stk__rest_take; borrowed by the plans made on it. */
typedef struct stk__rest {
    uint32_t nshards, seg;
    uint32_t m;          /* shards with records left */
    uint32_t *shard;     /* [m] them, ascending */
    uint64_t *left;      /* [nshards] records left in each */
    uint64_t **bits;     /* [nshards] NULL: every record left (or none: left 0); else the bitmap */
    uint64_t **blk;      /* [nshards] ones before each 512-bit block of bits (for select) */
} stk__rest;

typedef struct stk__plan {
    uint64_t n, seed, epoch;
    int shuffle, mode;   /* STK_DIST_PAD / DROP / EXACT */
    uint32_t rank, world;
    uint64_t per_rank;   /* samples this rank gets per epoch */
    uint64_t base, remain; /* global positions [0, base) were delivered before: the split is of
                              [base, n), remain = n - base of them (stk__plan_resume) */
    /* bijection state (private) */
    uint64_t half_bits, mask, keys[4];
    /* shard-window order (stk__plan_init_shards; sw = NULL: the global order above) */
    const struct stk__shard_table *sw;
    uint32_t window, nlocal;   /* W shards per window; this rank's shards */
    int stagger;               /* staggered windows (shuffle, 1 < W < nlocal): see below */
    uint64_t skip;             /* resumed: this rank's first SKIP samples were delivered */
    uint64_t local;            /* this rank's records (its shards' counts summed) */
    const struct stk__rest *rest; /* NULL: the whole epoch; else what is left of it */
    uint32_t seg, owner;       /* segment of the history; the rank whose list this one reads */
    stk__perm rho, tau;        /* shards -> ranks (seed only), this rank's shards per epoch */
    /* the window the last lookup fell in (a cache: stk__plan_index recomputes it when POS leaves
     * it) */
    uint64_t win_k, win_lo, win_hi; /* window number, its positions [win_lo, win_hi) */
    uint32_t win_n;                 /* shards in it */
    uint32_t win_shard[STK__MAX_WINDOW];
    uint64_t win_end[STK__MAX_WINDOW]; /* cumulative record counts in the window */
    uint64_t win_ulo[STK__MAX_WINDOW]; /* staggered: each shard's slice starts there (in its
                                          shard's slice order) */
    stk__perm win_perm;
} stk__plan;

int stk__plan_init(stk__plan *p, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle,
                   uint32_t rank, uint32_t world, int mode);
/* Elastic resume: the epoch's global positions [0, CONSUMED) were delivered already (by a run of
 * any world size); split the rest, [CONSUMED, n), among this plan's ranks as the whole list is
 * split: rank r takes CONSUMED + r, CONSUMED + r + world, ...; PAD wraps around within the rest
 * (to ceil(rest / world) each), DROP cuts the rest to floor(rest / world) * world. CONSUMED = n
 * leaves nothing (per_rank 0). STK_E_RANGE if CONSUMED > n. */
int stk__plan_resume(stk__plan *p, uint64_t consumed);
/* Global positions delivered once every rank has taken its first K samples of this plan:
 * base + min(K * world, remain). */
uint64_t stk__plan_consumed(const stk__plan *p, uint64_t k);
/* Dataset index of this rank's sample POS (POS < per_rank). Not const: a shard-window plan
 * caches the window it last looked in (one thread per plan). */
uint64_t stk__plan_index(stk__plan *p, uint64_t pos);

/*
 * The shard-window order (docs/S3.md "The shard-window shuffle"), for datasets read through a
 * cache smaller than themselves. Shards are dealt to ranks once (a permutation keyed by the seed
 * alone: rank r of WORLD takes the shards at positions r, r + world, ... of it, the same set every
 * epoch, so each rank fetches only its own); each epoch a rank takes its shards in an order keyed
 * by (seed, epoch, rank). With SHUFFLE and 1 < WINDOW < the rank's shard count the windows are
 * **staggered**: each shard's records are cut into WINDOW slices in an order keyed by (seed,
 * epoch, shard); window k holds slice k - i of the shard at place i for every place i in
 * [k - WINDOW + 1, k], so that each window brings in one new shard and retires one, and the
 * records of each window come in an order keyed by (seed, epoch, rank, window); a shard's records
 * span WINDOW consecutive windows. Otherwise (no shuffle, WINDOW 1, or WINDOW at least the
 * rank's shard count) windows are WINDOW consecutive shards, each window's records in a keyed
 * order (identity without SHUFFLE: the rank's shards in dataset order, records in order).
 * per_rank: STK_DIST_EXACT this rank's records; PAD the largest rank's (a smaller rank wraps
 * around its own list); DROP the smallest rank's. STK_E_INVALID for WINDOW outside
 * 1..STK__MAX_WINDOW or an empty shard table, STK_E_RANGE when there are fewer shards than ranks.
 * stk__plan_resume on such a plan takes CONSUMED = k * world (every rank took k samples; same
 * world size only: another world size goes through stk__rest_take and stk__plan_init_rest below).
 */
int stk__plan_init_shards(stk__plan *p, const stk__shard_table *t, uint32_t window, uint64_t seed,
                          uint64_t epoch, int shuffle, uint32_t rank, uint32_t world, int mode);
/* Shard s of this plan's rank at place I of its epoch order (I < p->nlocal). */
uint32_t stk__plan_shard_at(const stk__plan *p, uint32_t i);
/* The position one past the end of the window that this rank's sample POS falls in (a pure
 * function of the plan; loads that window as stk__plan_index does). */
uint64_t stk__plan_window_end(stk__plan *p, uint64_t pos);
/* The windows of this rank's epoch (some may be empty). */
uint64_t stk__plan_windows(const stk__plan *p);

/*
 * Elastic resume inside a shard-window epoch. The epoch's history is a list of segments, each
 * (world, window, taken): a run of WORLD ranks with windows of WINDOW shards, every rank having
 * taken its first TAKEN samples (a rank with a smaller share all of it). Segment 0 splits the whole
 * epoch as stk__plan_init_shards does; segment j >= 1 splits what segments 0..j-1 left: the shards
 * with records left, dealt to the ranks by a permutation keyed by (seed, epoch, j) (rank r takes
 * its positions r, r + world, ...), each rank's shards in an order keyed by (seed, epoch, rank, j),
 * windows (staggered or not, as above) of their records left, each shard's slices and each window's
 * records in orders keyed with j too. Every record is in exactly one segment's deal; a rank reads
 * only the shards dealt to it.
 */
/* R = the whole epoch of table T (segment 0, nothing taken). STK_E_NOMEM. */
int stk__rest_init(stk__rest *r, const stk__shard_table *t);
void stk__rest_free(stk__rest *r);
/* Take segment R->seg from R: every rank of WORLD (windows of WINDOW) takes the first TAKEN
 * samples of its list on R (all of it when shorter); R becomes what is left, R->seg + 1.
 * STK_E_INVALID for a window or world out of range, STK_E_RANGE when TAKEN is past every rank's
 * share, STK_E_NOMEM. */
int stk__rest_take(stk__rest *r, const stk__shard_table *t, uint32_t window, uint64_t seed,
                   uint64_t epoch, int shuffle, uint32_t world, uint64_t taken);
/* Records left in R. */
uint64_t stk__rest_records(const stk__rest *r);
/* The plan of segment REST->seg (REST NULL or seg 0: stk__plan_init_shards exactly). With REST,
 * STK_DIST_PAD and DROP give every rank the largest (PAD) or smallest (DROP) share of the ranks
 * that have shards; a rank past the shards left (fewer shards than ranks) reads the list of rank
 * (rank mod shards left) again so that every rank takes as many steps (EXACT: nothing). Nothing
 * left: per_rank 0. */
int stk__plan_init_rest(stk__plan *p, const stk__shard_table *t, const stk__rest *rest,
                        uint32_t window, uint64_t seed, uint64_t epoch, int shuffle, uint32_t rank,
                        uint32_t world, int mode);

#endif
