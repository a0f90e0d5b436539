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

typedef struct stk__plan {
    uint64_t n, seed, epoch;
    int shuffle, mode;   /* STK_DIST_PAD / DROP / EXACT */
    uint32_t rank, world;
    uint64_t per_rank;   /* samples this rank gets per epoch */
    uint64_t base, remain; /* global positions [0, base) were delivered before: the split is of
                              [base, n), remain = n - base of them (stk__plan_resume) */
    /* bijection state (private) */
    uint64_t half_bits, mask, keys[4];
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
/* Dataset index of this rank's sample POS (POS < per_rank). */
uint64_t stk__plan_index(const stk__plan *p, uint64_t pos);

#endif
