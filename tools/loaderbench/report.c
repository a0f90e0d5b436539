/* SPDX-License-Identifier: MIT */
/*
 * report.c — what loaderbench says: the table, the verdict in plain words, and the raw figures
 * as JSON, CSV and an SVG chart (written here, no plotting library).
 *
 * The verdict names the bottleneck of the fastest point with the library's own classifier
 * (stk_stats_verdict over the point's measured window), so loaderbench and stk_loader_report
 * never name one run two ways; the advice then quotes the figures that make the case: cores in
 * use, I/O busy share, the layout ratio measured in the same run.
 */
#include "lb.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *mode_name(int m) { return m == STK_MODE_EVAL ? "eval" : "train"; }
static const char *stage_name(int s)
{
    return s == STK_STAGE_READ ? "read" : s == STK_STAGE_DECODE ? "decode" : "full";
}
static const char *backend_name(int b)
{
    switch (b) {
    case STK_IO_URING:
        return "io_uring";
    case STK_IO_PREAD:
        return "pread";
    case STK_IO_MMAP:
        return "mmap";
    default:
        return "auto";
    }
}
static const char *kind_name(int k)
{
    switch (k) {
    case LB_KIND_DEFAULT:
        return "default";
    case LB_KIND_SHARDS:
        return "shards";
    case LB_KIND_FOLDER:
        return "imagefolder";
    default:
        return "lmdb";
    }
}

const char *lb_point_bottleneck(const lb_config *cfg, const lb_point *p)
{
    (void)cfg;
    if (p->failed)
        return NULL;
    switch (p->verdict.bottleneck) {
    case STK_BOTTLENECK_CONSUMER:
        return "trainer";
    case STK_BOTTLENECK_READ:
        return "read";
    case STK_BOTTLENECK_DECODE:
        return "decode";
    case STK_BOTTLENECK_STAGE:
        return "stager";
    case STK_BOTTLENECK_FETCH:
        return "fetch";
    default:
        return NULL;
    }
}

/* ---- helpers over the points ---- */

static const lb_point *best_point(const lb_results *r, int layout /* -1 any */, int workers /* 0 any */)
{
    const lb_point *best = NULL;
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        if (p->failed || (layout >= 0 && p->layout != layout) || (workers > 0 && p->workers != workers))
            continue;
        if (!best || p->images_per_s > best->images_per_s)
            best = p;
    }
    return best;
}

static const lb_point *best_shard_point(const lb_results *r, int workers)
{
    const lb_point *best = NULL;
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        if (p->failed || p->layout == LB_FILES || (workers > 0 && p->workers != workers))
            continue;
        if (!best || p->images_per_s > best->images_per_s)
            best = p;
    }
    return best;
}

static double pct(double share) { return share < 0.0 ? 0.0 : 100.0 * share; }

/* Append to the verdict. */
static void vcat(lb_results *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vcat(lb_results *r, const char *fmt, ...)
{
    size_t n = strlen(r->verdict);
    if (n + 1 >= sizeof r->verdict)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->verdict + n, sizeof r->verdict - n, fmt, ap);
    va_end(ap);
}

void lb_make_verdict(const lb_config *cfg, const lb_dataset *ds, lb_results *r)
{
    (void)ds;
    r->verdict[0] = '\0';
    r->bottleneck = NULL;
    const lb_point *b = best_point(r, -1, 0);
    if (!b) {
        vcat(r, "no point could be measured: see the errors above.");
        return;
    }
    const char *bn = b->bottleneck ? b->bottleneck : "decode";
    r->bottleneck = bn;
    const char *L = lb_layout_names[b->layout];
    int W = b->workers;
    int busy_cores = (int)floor(b->cpu_cores + 0.5);
    if (busy_cores > cfg->cores)
        busy_cores = cfg->cores;
    const lb_point *files = best_point(r, LB_FILES, W);
    const lb_point *shards = best_shard_point(r, W);
    /* the reader's working share: CPU work plus waiting for storage (the rest it was blocked
     * on the stages downstream) */
    double io_busy = b->read.busy < 0.0 ? 0.0 : pct(fmin(1.0, b->read.busy + b->read.starved));

    if (strcmp(bn, "trainer") == 0 && cfg->step_ms <= 0.0) {
        vcat(r, "the loader keeps up: the trainer waited only %.1f%% of its time (%s, %d worker%s, %.0f img/s "
                "delivered).",
             pct(b->verdict.wait_share), L, W, W == 1 ? "" : "s", b->images_per_s);
    } else if (strcmp(bn, "trainer") == 0) {
        double need = cfg->batch_size / (cfg->step_ms / 1000.0);
        vcat(r, "the loader keeps up: your GPU step is the bottleneck — with a %g ms step the trainer "
                "waited only %.1f%% of its time (%s, %d worker%s, %.0f img/s delivered; the step consumes "
                "at most %.0f img/s).",
             cfg->step_ms, pct(b->trainer_wait_fraction), L, W, W == 1 ? "" : "s", b->images_per_s, need);
    } else if (strcmp(bn, "decode") == 0) {
        if (b->verdict.flags & STK_VERDICT_CPU_STARVED)
            vcat(r, "decode-bound, but starved of CPU: the decode stage is %.0f%% busy at %d worker%s on %s "
                    "(%.0f img/s) yet this process got only %.1f of %d cores — other programs are using the "
                    "machine (load average %.1f at the start, %.1f at the end); rerun on a quiet machine for "
                    "figures that hold. I/O is %.0f%% busy.",
                 pct(b->decode.busy), W, W == 1 ? "" : "s", L, b->images_per_s, b->cpu_cores, cfg->cores,
                 r->load_start, r->load_end, io_busy);
        else if (b->cpu_cores >= 0.8 * cfg->cores || W >= cfg->cores)
            vcat(r, "decode-bound: %d of %d cores busy (%.1f cores of CPU in use; the decode stage is %.0f%% "
                    "busy at %d worker%s on %s, %.0f img/s) — more cores or a smaller stored resolution "
                    "(re-encode with a capped side when packing) would help; I/O is %.0f%% busy.",
                 busy_cores, cfg->cores, b->cpu_cores, pct(b->decode.busy), W, W == 1 ? "" : "s", L,
                 b->images_per_s, io_busy);
        else
            vcat(r, "decode-bound: the decode stage is %.0f%% busy at %d worker%s on %s (%.0f img/s) with "
                    "only %.1f of %d cores in use — more decode workers would help (try --workers %d); I/O "
                    "is %.0f%% busy.",
                 pct(b->decode.busy), W, W == 1 ? "" : "s", L, b->images_per_s, b->cpu_cores, cfg->cores,
                 cfg->cores, io_busy);
    } else if (strcmp(bn, "fetch") == 0) {
        char line[1024];
        lb_fetch_verdict(cfg, b, line, sizeof line);
        vcat(r, "%s", line);
    } else if (strcmp(bn, "read") == 0) {
        if (cfg->stage == STK_STAGE_READ)
            vcat(r, "storage path alone (--stage read): %.0f img/s, %.0f MB/s on %s with %d worker%s "
                    "(%s); ",
                 b->images_per_s, b->mb_per_s, L, W, W == 1 ? "" : "s", b->io_note[0] ? b->io_note : "?");
        else
            vcat(r, "storage-bound: the decode workers waited for data %.0f%% of their time and the "
                    "reader waited for storage %.0f%% of its time (%s, %d worker%s, %.0f img/s, %.0f MB/s); ",
                 pct(b->decode.starved), pct(b->read.starved), L, W, W == 1 ? "" : "s", b->images_per_s,
                 b->mb_per_s);
        if (b->layout == LB_FILES && !shards)
            vcat(r, "pack into shards (stoker pack) — one open/read/close per image is the slow part.");
        else if (b->layout == LB_FILES)
            vcat(r, "shards were not faster here (%s %.0f img/s): more reads in flight "
                    "(STK_P_QUEUE_DEPTH / STK_P_IO_THREADS) or faster storage would help.",
                 lb_layout_names[shards->layout], shards->images_per_s);
        else if (cfg->cold)
            vcat(r, "with a cold cache the disk is the limit: more reads in flight (STK_P_QUEUE_DEPTH), "
                    "O_DIRECT, or faster storage would help.");
        else
            vcat(r, "more reads in flight (STK_P_QUEUE_DEPTH) or faster storage would help.");
    } else {
        vcat(r, "stager-bound: the copy to the GPU is %.0f%% busy at %d workers on %s (%.0f img/s) — "
                "larger batches, pinned memory (STK_P_MAX_PINNED_BYTES) or fewer bytes per sample (uint8 "
                "transfer, conversion on the GPU) would help.",
             pct(b->stager.busy), W, L, b->images_per_s);
    }

    /* the trainer, when it was not the bottleneck */
    if (cfg->step_ms > 0.0 && strcmp(bn, "trainer") != 0)
        vcat(r, " With a %g ms step the trainer waited %.0f%% of its time: the loader is the bottleneck.",
             cfg->step_ms, pct(b->trainer_wait_fraction));

    /* layouts side by side at the best worker count */
    int nat = 0;
    for (size_t i = 0; i < r->npoints; i++)
        nat += !r->points[i].failed && r->points[i].workers == W;
    if (nat > 1) {
        vcat(r, "\nAt %d worker%s (%s cache):", W, W == 1 ? "" : "s", cfg->cold ? "cold" : "warm");
        int first = 1;
        /* in descending order of images/s */
        double last = INFINITY;
        for (int k = 0; k < nat; k++) {
            const lb_point *next = NULL;
            for (size_t i = 0; i < r->npoints; i++) {
                const lb_point *p = &r->points[i];
                if (p->failed || p->workers != W || p->images_per_s >= last)
                    continue;
                if (!next || p->images_per_s > next->images_per_s)
                    next = p;
            }
            if (!next)
                break;
            vcat(r, "%s %s %.0f img/s", first ? "" : ",", lb_layout_names[next->layout], next->images_per_s);
            last = next->images_per_s;
            first = 0;
        }
        vcat(r, ".");
        if (files && shards) {
            double ratio = shards->images_per_s / files->images_per_s;
            if (ratio > 1.15 && files->bottleneck && strcmp(files->bottleneck, "read") == 0)
                vcat(r, " On the files layout the loader is storage-bound (decode workers starved %.0f%% "
                        "of their time): pack into shards — %s is %.1f× faster than the files layout here.",
                     pct(files->decode.starved), lb_layout_names[shards->layout], ratio);
            else
                vcat(r, " %s is %.2f× the files layout.", lb_layout_names[shards->layout], ratio);
        }
    }
    /* scaling with workers on the best layout */
    const lb_point *lo = NULL, *hi = NULL;
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        if (p->failed || p->layout != b->layout)
            continue;
        if (!lo || p->workers < lo->workers)
            lo = p;
        if (!hi || p->workers > hi->workers)
            hi = p;
    }
    if (lo && hi && lo != hi && lo->images_per_s > 0)
        vcat(r, "\n%s: %d → %d workers gave %.2f× the images/s (%.0f → %.0f).", lb_layout_names[b->layout],
             lo->workers, hi->workers, hi->images_per_s / lo->images_per_s, lo->images_per_s, hi->images_per_s);

    if (r->tune.done) {
        const lb_autotune *t = &r->tune;
        if (t->workers > 0)
            vcat(r, "\nautotune: %d worker%s keep a %g ms step fed on %s (the trainer waits %.1f%% of its "
                    "time).",
                 t->workers, t->workers == 1 ? "" : "s", cfg->step_ms, lb_layout_names[t->layout],
                 pct(t->wait_fraction));
        else
            vcat(r, "\nautotune: no worker count up to %d keeps a %g ms step fed on %s: the loader peaks at "
                    "%.0f img/s, the step takes up to %.0f img/s.",
                 t->max_tried, cfg->step_ms, lb_layout_names[t->layout], t->best_ips,
                 cfg->batch_size / (cfg->step_ms / 1000.0));
    }
}

/* ---- table ---- */

static void fmt_share(char *buf, size_t cap, const lb_stage_share *s)
{
    if (s->busy < 0.0)
        snprintf(buf, cap, "%11s", "-");
    else
        snprintf(buf, cap, "%3.0f/%3.0f/%3.0f", pct(s->busy), pct(s->starved), pct(s->blocked));
}

void lb_print_table(FILE *f, const lb_config *cfg, const lb_dataset *ds, const lb_results *r)
{
    char hb[32];
    fprintf(f, "\nloaderbench: %s (%s, %llu records, %s encoded, mean %.0f KB)\n", ds->path, kind_name(ds->kind),
            (unsigned long long)ds->records, lb_human_bytes(ds->payload_bytes, hb, sizeof hb),
            ds->records ? (double)ds->payload_bytes / (double)ds->records / 1000.0 : 0.0);
    fprintf(f, "mode %s, stage %s, %s cache, batch %d, %dx%d, %d core%s, %s, ", mode_name(cfg->mode),
            stage_name(cfg->stage), cfg->cold ? "cold" : "warm", cfg->batch_size, cfg->size, cfg->size, cfg->cores,
            cfg->cores == 1 ? "" : "s", cfg->device >= 0 && cfg->stage == STK_STAGE_FULL ? "GPU batches" : "host batches");
    if (cfg->epochs)
        fprintf(f, "%d epoch%s per run", cfg->epochs, cfg->epochs == 1 ? "" : "s");
    else
        fprintf(f, "%.1f s per run", cfg->seconds);
    fprintf(f, ", median of %d", cfg->repeat);
    if (cfg->step_ms > 0.0)
        fprintf(f, ", trainer step %g ms", cfg->step_ms);
    fprintf(f, "\n");
    if (cfg->step_mode == LB_STEP_GPU)
        fprintf(f, "trainer step mode: gpu-kernel — a %g ms kernel per batch on device %d, calibrated at %.3f ms "
                   "(%g ms asked, CUDA events); %s\n",
                cfg->step_ms, cfg->step_device, cfg->step_cal_ms, cfg->step_cal_target_ms,
                cfg->stage == STK_STAGE_FULL && cfg->device >= 0
                    ? "it reads every device batch first (step_input in the JSON; step ms: its mean measured length)"
                    : "host batches: the kernel only spins (step ms: its mean measured length)");
    else if (cfg->step_mode == LB_STEP_SLEEP)
        fprintf(f, "trainer step mode: sleep — %s\n", cfg->step_reason);
    fprintf(f, "\n");
    int step = cfg->step_ms > 0.0, gpu = cfg->step_mode == LB_STEP_GPU;
    fprintf(f, "%-16s %3s %16s %7s %5s  %-11s  %-11s  %-11s %6s%s%s  %s\n", "layout", "wrk", "img/s (min-max)",
            "MB/s", "cores", "read b/s/bl", "decode b/s/b", "stager b/s/b", "wait", step ? " trainer" : "",
            gpu ? " step ms" : "", "io");
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        if (p->failed) {
            fprintf(f, "%-16s %3d  failed: %s\n", lb_layout_names[p->layout], p->workers, p->error);
            continue;
        }
        char rs[32], ds_[32], ss[32], ips[48], tw[16] = "", km[16] = "";
        fmt_share(rs, sizeof rs, &p->read);
        fmt_share(ds_, sizeof ds_, &p->decode);
        fmt_share(ss, sizeof ss, &p->stager);
        if (p->repeat > 1)
            snprintf(ips, sizeof ips, "%.0f (%.0f-%.0f)", p->images_per_s, p->images_per_s_min, p->images_per_s_max);
        else
            snprintf(ips, sizeof ips, "%.0f", p->images_per_s);
        if (step)
            snprintf(tw, sizeof tw, " %6.1f%%", pct(p->trainer_wait_fraction));
        if (gpu)
            snprintf(km, sizeof km, " %7.2f", p->step_kernel_ms);
        fprintf(f, "%-16s %3d %16s %7.1f %5.2f  %-11s  %-11s  %-11s %5.1f%%%s%s  %s\n", lb_layout_names[p->layout],
                p->workers, ips, p->mb_per_s, p->cpu_cores, rs, ds_, ss, pct(p->wait_fraction), tw, km,
                p->io_note[0] ? p->io_note : backend_name(p->io_backend));
    }
    fprintf(f, "\n(b/s/bl: busy / starved / blocked %% of each stage's thread time — for the reader, starved = "
               "waiting for storage; wait: the consumer's time in stk_loader_next)\n");
    lb_fetch_table(f, r);
    char a[32], b2[32], c[32], d[32], e[32];
    fprintf(f, "peak memory: host batch ring %s (pinned %s), device buffers %s, reader pool %s; process max "
               "RSS %s\n",
            lb_human_bytes(r->peak_ring, a, sizeof a), lb_human_bytes(r->peak_pinned, b2, sizeof b2),
            lb_human_bytes(r->peak_device, c, sizeof c), lb_human_bytes(r->peak_pool, d, sizeof d),
            lb_human_bytes((uint64_t)r->max_rss_kb * 1024u, e, sizeof e));
    fprintf(f, "\nverdict: %s\n", r->verdict);
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_str_or_null(FILE *f, const char *s)
{
    if (s)
        json_str(f, s);
    else
        fputs("null", f);
}

static void json_num(FILE *f, double v)
{
    if (!isfinite(v))
        fputs("null", f);
    else
        fprintf(f, "%.6g", v);
}

/* A share: null when the stage did not run. */
static void json_share(FILE *f, double v)
{
    if (v < 0.0)
        fputs("null", f);
    else
        json_num(f, v);
}

static int close_out(FILE *f, const char *path, const char *what)
{
    int bad = ferror(f);
    if (fclose(f) != 0)
        bad = 1;
    if (bad) {
        fprintf(stderr, "loaderbench: cannot write the %s %s: %s\n", what, path, strerror(errno));
        return -1;
    }
    return 0;
}

static FILE *open_out(const char *path, const char *what)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "loaderbench: cannot create the %s %s: %s\n", what, path, strerror(errno));
    return f;
}

static void json_stage(FILE *f, const char *name, const lb_stage_share *s, int last)
{
    fprintf(f, "\"%s_busy\": ", name);
    json_share(f, s->busy);
    fprintf(f, ", \"%s_starved\": ", name);
    json_share(f, s->starved);
    fprintf(f, ", \"%s_blocked\": ", name);
    json_share(f, s->blocked);
    fprintf(f, ", \"%s_threads\": %u%s", name, s->threads, last ? "" : ", ");
}

int lb_write_json(const char *path, const lb_config *cfg, const lb_dataset *ds, const lb_results *r)
{
    FILE *f = open_out(path, "JSON file");
    if (!f)
        return -1;
    fprintf(f, "{\n  \"tool\": \"loaderbench\",\n  \"version\": 1,\n  \"stoker_version\": ");
    json_str(f, stk_version_string());
    fprintf(f, ",\n  \"dataset\": {\"path\": ");
    json_str(f, ds->path);
    fprintf(f, ", \"kind\": \"%s\", \"records\": %llu, \"payload_bytes\": %llu, \"shards\": %u, \"folder\": ",
            kind_name(ds->kind), (unsigned long long)ds->records, (unsigned long long)ds->payload_bytes,
            ds->shard_count);
    if (ds->folder[0])
        json_str(f, ds->folder);
    else
        fputs("null", f);
    fputs(", \"shards_path\": ", f);
    if (ds->shards[0])
        json_str(f, ds->shards);
    else
        fputs("null", f);
    fprintf(f, "},\n  \"machine\": {\"cores\": %d, \"cuda_devices\": %d, \"loadavg_start\": ", cfg->cores,
            stk_cuda_device_count());
    json_num(f, r->load_start);
    fputs(", \"loadavg_end\": ", f);
    json_num(f, r->load_end);
    fputs("},\n", f);
    fprintf(f, "  \"config\": {\"workers\": [");
    for (int i = 0; i < cfg->nworkers; i++)
        fprintf(f, "%s%d", i ? ", " : "", cfg->workers[i]);
    fprintf(f, "], \"layouts\": [");
    for (int i = 0; i < cfg->nlayouts; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", lb_layout_names[cfg->layouts[i]]);
    fprintf(f, "], \"cache\": \"%s\", \"batch_size\": %d, \"mode\": \"%s\", \"stage\": \"%s\", \"size\": %d, "
               "\"repeat\": %d, \"seconds\": ",
            cfg->cold ? "cold" : "warm", cfg->batch_size, mode_name(cfg->mode), stage_name(cfg->stage), cfg->size,
            cfg->repeat);
    if (cfg->epochs)
        fputs("null", f);
    else
        json_num(f, cfg->seconds);
    fprintf(f, ", \"epochs\": ");
    if (cfg->epochs)
        fprintf(f, "%d", cfg->epochs);
    else
        fputs("null", f);
    fprintf(f, ", \"step_ms\": ");
    json_num(f, cfg->step_ms);
    fprintf(f, ", \"device\": %d, \"autotune\": %s},\n", cfg->stage == STK_STAGE_FULL ? cfg->device : -1,
            cfg->autotune ? "true" : "false");
    fputs("  \"trainer\": {\"step_ms\": ", f);
    json_num(f, cfg->step_ms);
    fputs(", \"mode\": ", f);
    json_str_or_null(f, lb_step_mode_names[cfg->step_mode]);
    fputs(", \"reason\": ", f);
    json_str_or_null(f, cfg->step_mode == LB_STEP_SLEEP ? cfg->step_reason : NULL);
    fprintf(f, ", \"device\": %d, \"calibration_target_ms\": ", cfg->step_device);
    json_share(f, cfg->step_mode == LB_STEP_GPU ? cfg->step_cal_target_ms : -1.0);
    fputs(", \"calibrated_ms\": ", f);
    json_share(f, cfg->step_mode == LB_STEP_GPU ? cfg->step_cal_ms : -1.0);
    fputs("},\n", f);
    fprintf(f, "  \"skipped_layouts\": [");
    int first = 1;
    for (int i = 0; i < cfg->nlayouts; i++) {
        int l = cfg->layouts[i];
        if (ds->available[l])
            continue;
        fprintf(f, "%s{\"layout\": \"%s\", \"reason\": ", first ? "" : ", ", lb_layout_names[l]);
        json_str(f, ds->why_not[l]);
        fputc('}', f);
        first = 0;
    }
    fprintf(f, "],\n  \"points\": [\n");
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        fprintf(f, "    {\"layout\": \"%s\", \"workers\": %d, \"mode\": \"%s\", \"stage\": \"%s\", \"cache\": "
                   "\"%s\", \"batch_size\": %d, \"size\": %d, \"step_ms\": ",
                lb_layout_names[p->layout], p->workers, mode_name(cfg->mode), stage_name(cfg->stage),
                cfg->cold ? "cold" : "warm", cfg->batch_size, cfg->size);
        json_num(f, cfg->step_ms);
        fprintf(f, ", \"repeat\": %d, ", p->repeat);
        if (p->failed) {
            fputs("\"error\": ", f);
            json_str(f, p->error);
            fprintf(f, "}%s\n", i + 1 < r->npoints ? "," : "");
            continue;
        }
        fputs("\"runs\": [", f);
        for (int k = 0; k < p->repeat; k++) {
            if (k)
                fputs(", ", f);
            json_num(f, p->runs[k]);
        }
        fputs("], \"images_per_s\": ", f);
        json_num(f, p->images_per_s);
        fputs(", \"images_per_s_min\": ", f);
        json_num(f, p->images_per_s_min);
        fputs(", \"images_per_s_max\": ", f);
        json_num(f, p->images_per_s_max);
        fputs(", \"mb_per_s\": ", f);
        json_num(f, p->mb_per_s);
        fputs(", \"cpu_cores\": ", f);
        json_num(f, p->cpu_cores);
        fputs(", ", f);
        json_stage(f, "read", &p->read, 0);
        json_stage(f, "decode", &p->decode, 0);
        json_stage(f, "stager", &p->stager, 0);
        fputs("\"wait_fraction\": ", f);
        json_num(f, p->wait_fraction);
        fputs(", \"trainer_wait_fraction\": ", f);
        json_share(f, p->trainer_wait_fraction);
        fputs(", \"step_mode\": ", f);
        json_str_or_null(f, lb_step_mode_names[cfg->step_mode]);
        fputs(", \"step_reason\": ", f);
        json_str_or_null(f, cfg->step_mode == LB_STEP_SLEEP ? cfg->step_reason : NULL);
        fputs(", \"step_calibrated_ms\": ", f);
        json_share(f, cfg->step_mode == LB_STEP_GPU ? cfg->step_cal_ms : -1.0);
        fputs(", \"step_kernel_ms\": ", f);
        json_share(f, p->step_kernel_ms);
        fputs(", \"step_input\": ", f);
        json_str_or_null(f, lb_step_input(cfg, p));
        fputs(", \"wall_s\": ", f);
        json_num(f, p->wall_s);
        fprintf(f, ", \"samples\": %llu, \"batches\": %llu, \"bad_records\": %llu, \"disk_read_bytes\": %llu, "
                   "\"io_backend\": \"%s\", \"io_direct\": %s, \"io_note\": ",
                (unsigned long long)p->samples, (unsigned long long)p->batches, (unsigned long long)p->bad_records,
                (unsigned long long)p->disk_read_bytes, backend_name(p->io_backend), p->io_direct ? "true" : "false");
        json_str(f, p->io_note);
        fprintf(f, ", \"host_ring_bytes\": %llu, \"pinned_bytes\": %llu, \"device_bytes\": %llu, "
                   "\"reader_pool_bytes\": %llu, \"device\": %d, \"bottleneck\": ",
                (unsigned long long)p->host_ring_bytes, (unsigned long long)p->pinned_bytes,
                (unsigned long long)p->device_bytes, (unsigned long long)p->reader_pool_bytes, p->device);
        json_str(f, p->bottleneck);
        lb_fetch_json(f, p);
        fprintf(f, ", \"error\": null}%s\n", i + 1 < r->npoints ? "," : "");
    }
    fprintf(f, "  ],\n  \"autotune\": ");
    if (r->tune.done) {
        fprintf(f, "{\"layout\": \"%s\", \"workers\": ", lb_layout_names[r->tune.layout]);
        if (r->tune.workers > 0)
            fprintf(f, "%d", r->tune.workers);
        else
            fputs("null", f);
        fputs(", \"wait_fraction\": ", f);
        if (r->tune.workers > 0)
            json_num(f, r->tune.wait_fraction);
        else
            fputs("null", f);
        fprintf(f, ", \"max_tried\": %d, \"best_images_per_s\": ", r->tune.max_tried);
        json_num(f, r->tune.best_ips);
        fputs("}", f);
    } else {
        fputs("null", f);
    }
    fprintf(f, ",\n  \"memory\": {\"host_ring_bytes\": %llu, \"pinned_bytes\": %llu, \"device_bytes\": %llu, "
               "\"reader_pool_bytes\": %llu, \"max_rss_bytes\": %llu},\n",
            (unsigned long long)r->peak_ring, (unsigned long long)r->peak_pinned, (unsigned long long)r->peak_device,
            (unsigned long long)r->peak_pool, (unsigned long long)r->max_rss_kb * 1024ull);
    fputs("  \"bottleneck\": ", f);
    if (r->bottleneck)
        json_str(f, r->bottleneck);
    else
        fputs("null", f);
    fputs(",\n  \"verdict\": ", f);
    json_str(f, r->verdict);
    fputs(",\n  \"elapsed_s\": ", f);
    json_num(f, r->total_s);
    fputs("\n}\n", f);
    return close_out(f, path, "JSON file");
}

/* ---- CSV ---- */

static void csv_num(FILE *f, double v, int share_null)
{
    if (!isfinite(v) || (share_null && v < 0.0))
        fputc(',', f);
    else
        fprintf(f, "%.6g,", v);
}

static void csv_str(FILE *f, const char *s, int last)
{
    fputc('"', f);
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '"')
            fputc('"', f);
        fputc(*p == '\n' ? ' ' : *p, f);
    }
    fputc('"', f);
    fputc(last ? '\n' : ',', f);
}

int lb_write_csv(const char *path, const lb_config *cfg, const lb_dataset *ds, const lb_results *r)
{
    (void)ds;
    FILE *f = open_out(path, "CSV file");
    if (!f)
        return -1;
    fputs("layout,workers,mode,stage,cache,batch_size,size,step_ms,repeat,images_per_s,images_per_s_min,"
          "images_per_s_max,mb_per_s,cpu_cores,read_busy,read_starved,read_blocked,read_threads,decode_busy,"
          "decode_starved,decode_blocked,decode_threads,stager_busy,stager_starved,stager_blocked,"
          "stager_threads,wait_fraction,trainer_wait_fraction,step_mode,step_reason,step_calibrated_ms,"
          "step_kernel_ms,step_input,wall_s,samples,batches,bad_records,"
          "disk_read_bytes,io_backend,io_direct,io_note,host_ring_bytes,pinned_bytes,device_bytes,"
          "reader_pool_bytes,device,bottleneck,",
          f);
    fputs(LB_FETCH_CSV_HEADER, f);
    fputs("error\n", f);
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        fprintf(f, "%s,%d,%s,%s,%s,%d,%d,%g,%d,", lb_layout_names[p->layout], p->workers, mode_name(cfg->mode),
                stage_name(cfg->stage), cfg->cold ? "cold" : "warm", cfg->batch_size, cfg->size, cfg->step_ms,
                p->repeat);
        if (p->failed) {
            fputs(",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,", f); /* the 38 figures between repeat and fetch */
            fputs(",,,,,,,,,,,,", f); /* the 12 fetch figures */
            csv_str(f, p->error, 1);
            continue;
        }
        csv_num(f, p->images_per_s, 0);
        csv_num(f, p->images_per_s_min, 0);
        csv_num(f, p->images_per_s_max, 0);
        csv_num(f, p->mb_per_s, 0);
        csv_num(f, p->cpu_cores, 0);
        const lb_stage_share *st[3] = {&p->read, &p->decode, &p->stager};
        for (int k = 0; k < 3; k++) {
            csv_num(f, st[k]->busy, 1);
            csv_num(f, st[k]->starved, 1);
            csv_num(f, st[k]->blocked, 1);
            fprintf(f, "%u,", st[k]->threads);
        }
        csv_num(f, p->wait_fraction, 0);
        csv_num(f, p->trainer_wait_fraction, 1);
        csv_str(f, lb_step_mode_names[cfg->step_mode], 0);
        csv_str(f, cfg->step_mode == LB_STEP_SLEEP ? cfg->step_reason : NULL, 0);
        csv_num(f, cfg->step_mode == LB_STEP_GPU ? cfg->step_cal_ms : -1.0, 1);
        csv_num(f, p->step_kernel_ms, 1);
        csv_str(f, lb_step_input(cfg, p), 0);
        csv_num(f, p->wall_s, 0);
        fprintf(f, "%llu,%llu,%llu,%llu,%s,%d,", (unsigned long long)p->samples, (unsigned long long)p->batches,
                (unsigned long long)p->bad_records, (unsigned long long)p->disk_read_bytes,
                backend_name(p->io_backend), p->io_direct);
        csv_str(f, p->io_note, 0);
        fprintf(f, "%llu,%llu,%llu,%llu,%d,%s,", (unsigned long long)p->host_ring_bytes,
                (unsigned long long)p->pinned_bytes, (unsigned long long)p->device_bytes,
                (unsigned long long)p->reader_pool_bytes, p->device, p->bottleneck ? p->bottleneck : "");
        lb_fetch_csv(f, p);
        fputs("\n", f); /* error: empty */
    }
    return close_out(f, path, "CSV file");
}

/* ---- SVG ---- */

static void svg_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* A "nice" tick step (1, 2 or 5 × 10^k) giving about N ticks over 0..MAX. */
static double nice_step(double max, int n)
{
    double raw = max / n;
    double mag = pow(10.0, floor(log10(raw)));
    double m = raw / mag;
    return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * mag;
}

static const char *const layout_colors[LB_NLAYOUTS] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd"};

int lb_write_svg(const char *path, const lb_config *cfg, const lb_dataset *ds, const lb_results *r)
{
    FILE *f = open_out(path, "plot");
    if (!f)
        return -1;
    const double W = 900, H = 560, ml = 90, mr = 200, mt = 78, mb = 70;
    const double pw = W - ml - mr, ph = H - mt - mb;
    /* worker counts and the y range */
    int ws[LB_MAX_WORKERS * 2 + 8], nws = 0;
    double ymax = 0.0;
    int layouts_seen[LB_NLAYOUTS] = {0};
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        if (p->failed)
            continue;
        layouts_seen[p->layout] = 1;
        if (p->images_per_s_max > ymax)
            ymax = p->images_per_s_max;
        int dup = 0;
        for (int k = 0; k < nws; k++)
            dup |= ws[k] == p->workers;
        if (!dup && nws < (int)(sizeof ws / sizeof ws[0]))
            ws[nws++] = p->workers;
    }
    for (int i = 1; i < nws; i++)
        for (int j = i; j > 0 && ws[j - 1] > ws[j]; j--) {
            int t = ws[j];
            ws[j] = ws[j - 1];
            ws[j - 1] = t;
        }
    if (ymax <= 0.0)
        ymax = 1.0;
    double ystep = nice_step(ymax * 1.08, 6);
    double ytop = ceil(ymax * 1.08 / ystep) * ystep;
    int wmin = nws ? ws[0] : 1, wmax = nws ? ws[nws - 1] : 1;
    int logx = nws > 2 && wmax >= 8 * wmin;
    double xlo = logx ? log2(wmin) : wmin, xhi = logx ? log2(wmax) : wmax;
    if (xhi - xlo < 1e-9) {
        xlo -= 1.0;
        xhi += 1.0;
    }
    double pad = (xhi - xlo) * 0.06;
    xlo -= pad;
    xhi += pad;
#define XPOS(w) (ml + ((logx ? log2((double)(w)) : (double)(w)) - xlo) / (xhi - xlo) * pw)
#define YPOS(v) (mt + ph - (v) / ytop * ph)

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
            W, H, W, H);
    fprintf(f, "  <rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", W, H);
    /* title */
    fprintf(f, "  <text class=\"title\" x=\"%.1f\" y=\"30\" font-size=\"19\" font-weight=\"bold\" "
               "text-anchor=\"middle\">loaderbench: images/s against decode workers</text>\n",
            W / 2);
    const char *base = strrchr(ds->path, '/');
    base = base && base[1] ? base + 1 : ds->path;
    char sub[512];
    snprintf(sub, sizeof sub, "%s%.200s (%llu images) · %s · stage %s · %s cache · batch %d%s · median of %d%s",
             ds->kind == LB_KIND_DEFAULT ? "default sample " : "", ds->kind == LB_KIND_DEFAULT ? "" : base,
             (unsigned long long)ds->records, mode_name(cfg->mode), stage_name(cfg->stage), cfg->cold ? "cold" : "warm",
             cfg->batch_size, "", cfg->repeat, cfg->repeat > 1 ? " (bars: min–max)" : "");
    fprintf(f, "  <text class=\"subtitle\" x=\"%.1f\" y=\"52\" font-size=\"12.5\" fill=\"#444444\" "
               "text-anchor=\"middle\">",
            W / 2);
    svg_text(f, sub);
    if (cfg->step_ms > 0.0)
        fprintf(f, " · trainer step %g ms", cfg->step_ms);
    fputs("</text>\n", f);

    /* grid and y axis */
    fputs("  <g class=\"y-axis\" font-size=\"12\" fill=\"#333333\">\n", f);
    for (double v = 0.0; v <= ytop + ystep * 0.01; v += ystep) {
        double y = YPOS(v);
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e3e3\" stroke-width=\"1\"/>\n",
                ml, y, ml + pw, y);
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\" stroke-width=\"1\"/>\n",
                ml - 5, y, ml, y);
        fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.6g</text>\n", ml - 8, y + 4, v);
    }
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 %.1f %.1f)\">images/s</text>\n",
            24.0, mt + ph / 2, 24.0, mt + ph / 2);
    fputs("  </g>\n", f);
    /* x axis */
    fputs("  <g class=\"x-axis\" font-size=\"12\" fill=\"#333333\">\n", f);
    for (int k = 0; k < nws; k++) {
        double x = XPOS(ws[k]);
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#f0f0f0\" stroke-width=\"1\"/>\n",
                x, mt, x, mt + ph);
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\" stroke-width=\"1\"/>\n",
                x, mt + ph, x, mt + ph + 5);
        fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", x, mt + ph + 20, ws[k]);
    }
    fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">decode workers%s</text>\n",
            ml + pw / 2, H - 22, logx ? " (log scale)" : "");
    fputs("  </g>\n", f);
    fprintf(f, "  <rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333333\" "
               "stroke-width=\"1\"/>\n",
            ml, mt, pw, ph);

    /* one series per layout, each nudged sideways a little so that markers and bars at the
     * same worker count stay readable */
    int nseries = 0, total_series = 0;
    for (int l = 0; l < LB_NLAYOUTS; l++)
        total_series += layouts_seen[l];
    for (int l = 0; l < LB_NLAYOUTS; l++) {
        if (!layouts_seen[l])
            continue;
        const char *col = layout_colors[l];
        double dodge = (nseries - (total_series - 1) / 2.0) * 5.0;
        fprintf(f, "  <g class=\"series\" data-layout=\"%s\">\n", lb_layout_names[l]);
        fputs("    <polyline fill=\"none\" stroke-width=\"2.5\" stroke-linejoin=\"round\" stroke=\"", f);
        fputs(col, f);
        fputs("\" points=\"", f);
        int firstpt = 1;
        for (int k = 0; k < nws; k++)
            for (size_t i = 0; i < r->npoints; i++) {
                const lb_point *p = &r->points[i];
                if (p->failed || p->layout != l || p->workers != ws[k])
                    continue;
                fprintf(f, "%s%.1f,%.1f", firstpt ? "" : " ", XPOS(p->workers) + dodge, YPOS(p->images_per_s));
                firstpt = 0;
            }
        fputs("\"/>\n", f);
        for (size_t i = 0; i < r->npoints; i++) {
            const lb_point *p = &r->points[i];
            if (p->failed || p->layout != l)
                continue;
            double x = XPOS(p->workers) + dodge;
            if (p->repeat > 1 && p->images_per_s_max > p->images_per_s_min) {
                double y0 = YPOS(p->images_per_s_min), y1 = YPOS(p->images_per_s_max);
                fprintf(f, "    <path class=\"spread\" d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\" "
                           "stroke=\"%s\" stroke-width=\"1.5\" fill=\"none\"/>\n",
                        x, y0, y1, x - 5, y0, x + 5, x - 5, y1, x + 5, col);
            }
            fprintf(f, "    <circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1.5\">"
                       "<title>%s, %d workers: %.0f images/s</title></circle>\n",
                    x, YPOS(p->images_per_s), col, lb_layout_names[l], p->workers, p->images_per_s);
        }
        fputs("  </g>\n", f);
        nseries++;
    }
    /* legend */
    double lx = ml + pw + 22, ly = mt + 8;
    fprintf(f, "  <g class=\"legend\" font-size=\"13\">\n");
    fprintf(f, "    <rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" stroke=\"#bbbbbb\"/>\n",
            lx - 10, ly - 6, mr - 30, 26.0 * nseries + 8);
    int k = 0;
    for (int l = 0; l < LB_NLAYOUTS; l++) {
        if (!layouts_seen[l])
            continue;
        double y = ly + 12 + 26.0 * k++;
        fprintf(f, "    <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"/>\n", lx,
                y, lx + 26, y, layout_colors[l]);
        fprintf(f, "    <circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>\n", lx + 13, y, layout_colors[l]);
        fprintf(f, "    <text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 34, y + 4.5, lb_layout_names[l]);
    }
    fputs("  </g>\n", f);
    if (nseries == 0)
        fprintf(f, "  <text x=\"%.1f\" y=\"%.1f\" font-size=\"16\" text-anchor=\"middle\">no point could be "
                   "measured</text>\n",
                ml + pw / 2, mt + ph / 2);
    fputs("</svg>\n", f);
#undef XPOS
#undef YPOS
    return close_out(f, path, "plot");
}
