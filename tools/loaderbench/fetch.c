/* SPDX-License-Identifier: MIT */
/*
 * fetch.c — loaderbench on an s3:// dataset: the fetch stage's figures per point (from the
 * library's own counters, stk_dataset_fetch_stats of the loader's dataset, cumulative since the
 * open, so the open's download is in them), the table's fetch line, the JSON "fetch" object and
 * the CSV's fetch columns and the fetch-bound verdict with the link's rate and what to change. With --cache cold every run
 * gets an empty cache directory of its own (removed after it), so every run fetches from the
 * bucket: the first epoch of a fresh machine; warm runs share the cache and read it locally.
 */
#include "lb.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lb_is_s3(const char *path) { return path && strncmp(path, "s3://", 5) == 0; }

int lb_fetch_cold_dir(const lb_config *cfg, char *dir, size_t cap)
{
    if (snprintf(dir, cap, "%s/s3-cold-XXXXXX", cfg->cache_dir) >= (int)cap || lb_mkdirs(cfg->cache_dir) != 0)
        return -1;
    return mkdtemp(dir) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

void lb_fetch_cold_done(const char *dir)
{
    if (dir && *dir)
        nftw(dir, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

void lb_fetch_record(stk_loader *h, double open_s, lb_fetch *out)
{
    memset(out, 0, sizeof *out);
    out->open_s = open_s;
    const stk_dataset *ds = stk_loader_dataset(h);
    if (ds)
        stk_dataset_fetch_stats(ds, &out->st);
}

static double link_mbps(const lb_fetch *x) { return x->st.link_bytes_per_s / 1e6; }

static double hit_rate(const lb_fetch *x)
{
    uint64_t n = x->st.shards_cached + x->st.shards_fetched;
    return n ? (double)x->st.shards_cached / (double)n : 0.0;
}

void lb_fetch_table(FILE *f, const lb_results *r)
{
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        const lb_fetch *x = &p->fetch;
        if (p->failed || !x->st.shards)
            continue;
        fprintf(f, "fetch (%s, %d workers): %.1f MB in %llu requests (%llu retried), busy %.2f s, link %.1f MB/s; "
                   "open %.2f s, waited for the fetch %.2f s; cache hits %llu of %llu shards (%.0f%%); first epoch "
                   "with its fetch %.0f img/s\n",
                lb_layout_names[p->layout], p->workers, (double)x->st.bytes_fetched / 1e6,
                (unsigned long long)x->st.requests, (unsigned long long)x->st.retries, x->st.fetch_s, link_mbps(x),
                x->open_s, x->st.starved_s, (unsigned long long)x->st.shards_cached,
                (unsigned long long)(x->st.shards_cached + x->st.shards_fetched), 100.0 * hit_rate(x),
                p->wall_s + x->open_s > 0 ? (double)p->samples / (p->wall_s + x->open_s) : 0.0);
    }
}

void lb_fetch_json(FILE *f, const lb_point *p)
{
    const lb_fetch *x = &p->fetch;
    if (!x->st.shards) {
        fputs(", \"fetch\": null", f);
        return;
    }
    fprintf(f, ", \"fetch\": {\"shards\": %llu, \"cache_hits\": %llu, \"cache_misses\": %llu, \"hit_rate\": %.4f, "
               "\"bytes\": %llu, \"requests\": %llu, \"retries\": %llu, \"busy_s\": %.6f, \"starved_s\": %.6f, "
               "\"link_bytes_per_s\": %.1f, \"inflight\": %llu, \"open_s\": %.6f}",
            (unsigned long long)x->st.shards, (unsigned long long)x->st.shards_cached,
            (unsigned long long)x->st.shards_fetched, hit_rate(x), (unsigned long long)x->st.bytes_fetched,
            (unsigned long long)x->st.requests, (unsigned long long)x->st.retries, x->st.fetch_s, x->st.starved_s,
            x->st.link_bytes_per_s, (unsigned long long)x->st.inflight, x->open_s);
}

void lb_fetch_csv(FILE *f, const lb_point *p)
{
    const lb_fetch *x = &p->fetch;
    if (!x->st.shards) {
        fputs(",,,,,,,,,,,,", f);
        return;
    }
    fprintf(f, "%llu,%llu,%llu,%.4f,%llu,%llu,%llu,%.6f,%.6f,%.1f,%llu,%.6f,", (unsigned long long)x->st.shards,
            (unsigned long long)x->st.shards_cached, (unsigned long long)x->st.shards_fetched, hit_rate(x),
            (unsigned long long)x->st.bytes_fetched, (unsigned long long)x->st.requests,
            (unsigned long long)x->st.retries, x->st.fetch_s, x->st.starved_s, x->st.link_bytes_per_s,
            (unsigned long long)x->st.inflight, x->open_s);
}

size_t lb_fetch_verdict(const lb_config *cfg, const lb_point *b, char *out, size_t cap)
{
    const lb_fetch *x = &b->fetch;
    double share = b->verdict.size ? x->st.starved_s / (b->wall_s + x->st.starved_s) : 0.0;
    char lim[48] = "no limit";
    if (x->st.cache_limit)
        snprintf(lim, sizeof lim, "now %.2f GB", (double)x->st.cache_limit / 1e9);
    int n = snprintf(out, cap,
                     "fetch-bound: the loader waited for the object store %.0f%% of the time (%.2f s of its "
                     "%.2f s with the open) at a measured link rate of %.1f MB/s (%.1f MB in %.2f s, up to %llu "
                     "requests in flight, %llu retried) — more requests in flight (STOKER_S3_INFLIGHT, now "
                     "%llu) if the link is not full, a cache that holds the dataset (STOKER_CACHE_BYTES / "
                     "cache=, %s) so later epochs read it locally%s, bigger shards (fewer first-byte waits), "
                     "or a bucket in a region closer to this machine.",
                     100.0 * share, x->st.starved_s, b->wall_s + x->st.starved_s, link_mbps(x),
                     (double)x->st.bytes_fetched / 1e6, x->st.fetch_s, (unsigned long long)x->st.inflight,
                     (unsigned long long)x->st.retries, (unsigned long long)x->st.inflight, lim,
                     cfg->cold ? " (--cache cold: every run began with an empty cache)" : "");
    return n > 0 ? (size_t)n : 0;
}
