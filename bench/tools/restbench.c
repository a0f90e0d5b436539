/* SPDX-License-Identifier: MIT */
/*
 * restbench — what an elastic resume inside a shard-window epoch costs (src/core/order.c,
 * stk__rest_take / stk__plan_init_rest): the replay of one segment, the bitmaps of the shards
 * read in part, and the time per index of a resumed rank's plan against a fresh one's.
 *
 *   restbench SHARDS RECORDS_PER_SHARD WORLD WINDOW NEW_WORLD [TAKEN]
 *       WORLD ranks with windows of WINDOW shards take TAKEN samples each (default: half of rank
 *       0's share), then NEW_WORLD ranks split the rest; rank 0's whole list is indexed on the
 *       rest and on a fresh epoch of NEW_WORLD.
 *
 * Figures measured with it: docs/S3.md, "Elastic resume inside a streamed epoch".
 */
#include "common.h"
#include "order.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: restbench SHARDS RECORDS_PER_SHARD WORLD WINDOW NEW_WORLD [TAKEN]\n");
        return 2;
    }
    uint32_t ns = (uint32_t)atoi(argv[1]), per = (uint32_t)atoi(argv[2]);
    uint32_t w = (uint32_t)atoi(argv[3]), win = (uint32_t)atoi(argv[4]);
    uint32_t w2 = (uint32_t)atoi(argv[5]);
    uint64_t *first = malloc(ns * sizeof *first), *count = malloc(ns * sizeof *count), n = 0;
    if (!ns || !first || !count)
        return 2;
    for (uint32_t s = 0; s < ns; s++) {
        first[s] = n;
        count[s] = per;
        n += per;
    }
    stk__shard_table t = {ns, first, count, NULL, 0};
    stk__plan p;
    if (stk__plan_init_shards(&p, &t, win, 1, 0, 1, 0, w, STK_DIST_EXACT) != STK_OK) {
        fprintf(stderr, "restbench: cannot plan %u shards over %u ranks\n", ns, w);
        return 1;
    }
    uint64_t k = argc > 6 ? strtoull(argv[6], NULL, 10) : p.local / 2 + 1;
    stk__rest r;
    if (stk__rest_init(&r, &t) != STK_OK)
        return 1;
    double t0 = now();
    int rc = stk__rest_take(&r, &t, win, 1, 0, 1, w, k);
    double t1 = now();
    if (rc != STK_OK) {
        fprintf(stderr, "restbench: stk__rest_take: %s\n", stk_strerror(rc));
        return 1;
    }
    size_t bytes = 0;
    uint32_t partial = 0;
    for (uint32_t s = 0; s < ns; s++)
        if (r.bits[s]) {
            partial++;
            bytes += ((count[s] + 63) / 64 + 8) * 8 + ((count[s] + 511) / 512 + 1) * 8;
        }
    stk__plan q, o;
    stk__plan_init_rest(&q, &t, &r, win, 1, 0, 1, 0, w2, STK_DIST_EXACT);
    stk__plan_init_shards(&o, &t, win, 1, 0, 1, 0, w2, STK_DIST_EXACT);
    volatile uint64_t acc = 0;
    double t2 = now();
    for (uint64_t i = 0; i < q.per_rank; i++)
        acc += stk__plan_index(&q, i);
    double t3 = now();
    for (uint64_t i = 0; i < o.per_rank; i++)
        acc += stk__plan_index(&o, i);
    double t4 = now();
    printf("%llu records in %u shards, world %u -> %u, window %u, %llu taken per rank\n"
           "  replay: %.3f s; %llu records left; %u shards read in part, bitmaps %zu bytes\n"
           "  resumed rank 0: %llu samples, %.1f ns per index (a fresh epoch's rank 0: %.1f)\n",
           (unsigned long long)n, ns, w, w2, win, (unsigned long long)k, t1 - t0,
           (unsigned long long)stk__rest_records(&r), partial, bytes,
           (unsigned long long)q.per_rank, q.per_rank ? (t3 - t2) / (double)q.per_rank * 1e9 : 0.0,
           o.per_rank ? (t4 - t3) / (double)o.per_rank * 1e9 : 0.0);
    printf("  (index sum %llu)\n", (unsigned long long)acc);
    stk__rest_free(&r);
    free(first);
    free(count);
    return 0;
}
