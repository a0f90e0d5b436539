/* SPDX-License-Identifier: MIT */
/*
 * loader_verdict.c — the one bottleneck classifier: stk_loader_report, stk_loader_verdict and
 * loaderbench (through stk_stats_verdict on its measured window) all name a run with it.
 *
 * A pipeline runs at the pace of its slowest stage. If the consumer waited under 5% of the
 * wall time, the loader keeps up. Otherwise the limit is the stage whose threads are busiest
 * relative to how long they starve: a stager copying most of the time (and more than decode is
 * busy) -> transfer-bound; decode workers starved more than busy -> storage-bound; else decode.
 * Busy time is wall time inside the work, so when the process got far fewer cores than its busy
 * workers imply, the decode verdict says the cores are shared with other processes. Before
 * all of these, an s3:// dataset whose loader waited for the fetch >= 25% of its time (wall_s
 * plus the waits at open, which come before start) is fetch-bound: the stages downstream can
 * only starve behind it (loader_fetch.c says what to change).
 */
#include "loader_internal.h"

#include <string.h>

#define KEEPS_UP_WAIT 0.05    /* consumer wait share under which the loader keeps up */
#define STAGE_BUSY 0.7        /* stager busy share above which the copy limits */
#define CPU_STARVED_RATIO 0.7 /* cores used / cores the busy workers imply */
#define FETCH_STARVED 0.25    /* share of wall + fetch waits spent waiting for the fetch */

static double frac(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

static void measure(const stk_stats *st, stk_verdict *v)
{
    double wall = st->wall_s;
    uint32_t T = st->decode.threads ? st->decode.threads : 1;
    uint32_t RT = st->read.threads ? st->read.threads : 1;
    v->decode_threads = T;
    int cpus = stk__online_cpus();
    v->cpus_online = cpus > 0 ? (uint32_t)cpus : 0;
    v->wait_share = frac(st->wait_s, wall);
    v->read_busy = frac(st->read.busy_s, wall * RT);
    v->read_blocked = frac(st->read.blocked_s, wall * RT);
    v->decode_busy = frac(st->decode.busy_s, wall * T);
    v->decode_starved = frac(st->decode.starved_s, wall * T);
    v->stager_busy = frac(st->stager.busy_s, wall);
    v->cores = frac(st->cpu_user_s + st->cpu_sys_s, wall);
    v->h2d_gbps = st->h2d_s > 0 ? (double)st->h2d_bytes / st->h2d_s / 1e9 : 0.0;
}

static int classify(const stk_stats *st, int stage, stk_verdict *v)
{
    if (st->batches == 0 || st->wall_s <= 0)
        return STK_BOTTLENECK_NONE;
    if (st->fetch_starved_s > 0 && st->fetch_starved_s >= FETCH_STARVED * (st->wall_s + st->fetch_starved_s))
        return STK_BOTTLENECK_FETCH;
    if (v->wait_share < KEEPS_UP_WAIT)
        return STK_BOTTLENECK_CONSUMER;
    if (st->stager.threads && v->stager_busy > STAGE_BUSY && v->stager_busy > v->decode_busy)
        return STK_BOTTLENECK_STAGE;
    if (stage == STK_STAGE_READ || v->decode_starved > v->decode_busy)
        return STK_BOTTLENECK_READ;
    if (v->cores < CPU_STARVED_RATIO * v->decode_busy * v->decode_threads)
        v->flags |= STK_VERDICT_CPU_STARVED;
    return STK_BOTTLENECK_DECODE;
}

int stk_stats_verdict(const stk_stats *st, int stage, stk_verdict *out)
{
    if (!st || !out || out->size < sizeof(stk_verdict))
        return STK_E_INVALID;
    stk_verdict v;
    memset(&v, 0, sizeof v);
    v.size = sizeof v;
    measure(st, &v);
    v.bottleneck = classify(st, stage, &v);
    memcpy(out, &v, sizeof v);
    return STK_OK;
}

int stk_loader_verdict(stk_loader *h, stk_verdict *v)
{
    if (!h || !v)
        return STK_E_INVALID;
    stk_stats st;
    int rc = stk_loader_stats(h, &st);
    return rc != STK_OK ? rc : stk_stats_verdict(&st, h->stage, v);
}

const char *stk_bottleneck_name(int bottleneck)
{
    static const char *const names[] = {"none", "consumer", "read", "decode", "stage", "fetch"};
    if (bottleneck < 0 || bottleneck >= (int)STK__ARRAY_LEN(names))
        return "unknown";
    return names[bottleneck];
}
