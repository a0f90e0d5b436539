/* SPDX-License-Identifier: MIT */
/*
 * loader_order.c — which order a loader's epochs take: the exact global shuffle (order.c) or, with
 * STK_P_SHUFFLE_WINDOW = W > 0, the shard-window order (shards dealt to ranks, windows that mix
 * slices of W shards; docs/S3.md). Every place that needs an epoch's plan asks here, so the
 * consumer, the reader's cursor and the resume arithmetic always agree on the order. An epoch
 * resumed from a run of another world size (stk_loader_resume_segments) is planned on what that
 * run left of it (h->sw_rest). A subset (stk_loader_set_indices) in the shard-window order is
 * the same order on the subset's own shard table: its records grouped by shard, only the shards
 * that hold one dealt (so a rank fetches only those; docs/S3.md "Subsets of a streamed dataset").
 */
#include "loader_internal.h"

#include <stdlib.h>

int stk__loader_order_open(stk_loader *h)
{
    const stk_dataset *ds = h->ds;
    if (ds->layout != STK_LAYOUT_SHARDS || !ds->nshards)
        return STK_OK; /* no shards: only the global order (STK_P_SHUFFLE_WINDOW refused then) */
    h->sw_first = malloc(ds->nshards * sizeof *h->sw_first);
    h->sw_count = malloc(ds->nshards * sizeof *h->sw_count);
    if (!h->sw_first || !h->sw_count)
        return STK_E_NOMEM;
    for (uint32_t s = 0; s < ds->nshards; s++) {
        h->sw_first[s] = ds->shards[s].first;
        h->sw_count[s] = ds->shards[s].count;
    }
    h->sw_all = (stk__shard_table){ds->nshards, h->sw_first, h->sw_count, NULL, 0};
    h->sw_tab = h->sw_all;
    return STK_OK;
}

static void subset_free(stk_loader *h)
{
    free(h->sw_sub);
    free(h->sw_sfirst);
    free(h->sw_scount);
    free(h->sw_live);
    h->sw_sub = h->sw_sfirst = h->sw_scount = NULL;
    h->sw_live = NULL;
}

int stk__loader_order_subset(stk_loader *h)
{
    const stk_dataset *ds = h->ds;
    subset_free(h);
    if (!h->sw_first)
        return STK_OK;
    h->sw_tab = h->sw_all;
    if (!h->subset)
        return STK_OK;
    uint32_t ns = ds->nshards;
    uint64_t n = h->nsubset;
    uint32_t *of = malloc(n * sizeof *of);
    h->sw_sub = malloc(n * sizeof *h->sw_sub);
    h->sw_sfirst = calloc(ns, sizeof *h->sw_sfirst);
    h->sw_scount = calloc(ns, sizeof *h->sw_scount);
    h->sw_live = malloc(ns * sizeof *h->sw_live);
    if (!of || !h->sw_sub || !h->sw_sfirst || !h->sw_scount || !h->sw_live) {
        free(of);
        subset_free(h);
        return STK_E_NOMEM;
    }
    for (uint64_t j = 0; j < n; j++) { /* each entry's shard */
        of[j] = stk__table_shard_of(&h->sw_all, h->subset[j]);
        h->sw_scount[of[j]]++;
    }
    uint32_t nlive = 0;
    uint64_t at = 0;
    for (uint32_t s = 0; s < ns; s++) {
        h->sw_sfirst[s] = at;
        at += h->sw_scount[s];
        if (h->sw_scount[s])
            h->sw_live[nlive++] = s;
    }
    uint64_t *fill = h->sw_sfirst; /* reused as the fill cursor, then restored */
    for (uint64_t j = 0; j < n; j++)
        h->sw_sub[fill[of[j]]++] = h->subset[j];
    for (uint32_t s = 0; s < ns; s++)
        fill[s] -= h->sw_scount[s];
    free(of);
    h->sw_tab = (stk__shard_table){ns, h->sw_sfirst, h->sw_scount, h->sw_live, nlive};
    return STK_OK;
}

void stk__loader_rest_drop(stk_loader *h)
{
    if (h->sw_rest) {
        stk__rest_free(h->sw_rest);
        free(h->sw_rest);
    }
    h->sw_rest = NULL;
    h->sw_nhist = 0;
}

void stk__loader_order_free(stk_loader *h)
{
    stk__loader_rest_drop(h);
    subset_free(h);
    free(h->sw_first);
    free(h->sw_count);
    h->sw_first = h->sw_count = NULL;
    h->sw_all.n = h->sw_tab.n = 0;
}

int stk__loader_plan_of(const stk_loader *h, stk__plan *p, uint64_t n, uint64_t seed,
                        uint64_t epoch, int shuffle, uint32_t rank, uint32_t world, int mode,
                        uint32_t window)
{
    if (!window)
        return stk__plan_init(p, n, seed, epoch, shuffle, rank, world, mode);
    if (!h->sw_tab.n)
        return STK_E_INVALID;
    return stk__plan_init_shards(p, &h->sw_tab, window, seed, epoch, shuffle, rank, world, mode);
}

int stk__loader_plan(const stk_loader *h, stk__plan *p, uint64_t epoch)
{
    if (h->sw_window && h->sw_rest && epoch == h->sw_rest_epoch)
        return stk__plan_init_rest(p, &h->sw_tab, h->sw_rest, h->sw_window, h->seed, epoch,
                                   h->shuffle, h->rank, h->world, h->dist_mode);
    return stk__loader_plan_of(h, p, h->n, h->seed, epoch, h->shuffle, h->rank, h->world,
                               h->dist_mode, h->sw_window);
}
