/* SPDX-License-Identifier: MIT */
/*
 * fetch_stats.c — the fetch counters of fetch_stats.h. Relaxed atomics: each counter is exact
 * on its own; a snapshot taken while a fetch runs may pair one call's bytes with the previous
 * call's time (each call adds its figures together only when it returns).
 */
#include "fetch_stats.h"

#include <string.h>

static uint64_t ns(double s) { return s > 0 ? (uint64_t)(s * 1e9 + 0.5) : 0; }

static void add(_Atomic uint64_t *a, uint64_t v) { atomic_fetch_add_explicit(a, v, memory_order_relaxed); }

static uint64_t get(const _Atomic uint64_t *a)
{
    return atomic_load_explicit((_Atomic uint64_t *)a, memory_order_relaxed);
}

void stk__fetch_ctr_init(stk__fetch_ctr *c)
{
    _Atomic uint64_t *all[] = {&c->bytes, &c->requests, &c->retries, &c->hits, &c->misses,
                               &c->hit_bytes, &c->miss_bytes, &c->busy_ns, &c->starved_ns};
    for (size_t i = 0; i < STK__ARRAY_LEN(all); i++)
        atomic_init(all[i], 0);
}

void stk__fetch_ctr_add(stk__fetch_ctr *c, const stk__s3_stats *st)
{
    add(&c->bytes, st->bytes_in);
    add(&c->requests, st->requests);
    add(&c->retries, st->retries);
    add(&c->busy_ns, ns(st->seconds));
}

void stk__fetch_ctr_busy(stk__fetch_ctr *c, double seconds) { add(&c->busy_ns, ns(seconds)); }

void stk__fetch_ctr_lookup(stk__fetch_ctr *c, int hit, uint64_t size)
{
    add(hit ? &c->hits : &c->misses, 1);
    add(hit ? &c->hit_bytes : &c->miss_bytes, size);
}

void stk__fetch_ctr_starved(stk__fetch_ctr *c, double seconds) { add(&c->starved_ns, ns(seconds)); }

void stk__fetch_ctr_read(const stk__fetch_ctr *c, stk_fetch_stats *out)
{
    out->shards_cached = get(&c->hits);
    out->shards_fetched = get(&c->misses);
    out->bytes_fetched = get(&c->bytes);
    out->requests = get(&c->requests);
    out->retries = get(&c->retries);
    out->fetch_s = (double)get(&c->busy_ns) * 1e-9;
    out->starved_s = (double)get(&c->starved_ns) * 1e-9;
    out->bytes_cached = get(&c->hit_bytes);
    out->bytes_missed = get(&c->miss_bytes);
    out->link_bytes_per_s = out->fetch_s > 0 ? (double)out->bytes_fetched / out->fetch_s : 0.0;
}
