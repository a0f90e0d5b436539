/* SPDX-License-Identifier: MIT */
/*
 * loader_report.c — stats snapshots and the one-screen report.
 *
 * Where the time goes (docs/ARCHITECTURE.md, "Telemetry"): every stage counts busy, starved (waiting for
 * input) and blocked (waiting for space downstream) seconds, summed over its threads. The reader
 * keeps its own clock (its blocked time is the time WORK waited for a free ring slot); the
 * decode workers count busy time per sample and starved time waiting on the decode queue; the
 * stager thread counts busy time in the copy, starved time waiting for a done host batch and
 * blocked time waiting for the consumer to release a device buffer. Inside the workers' busy
 * time, the per-sample augmentation (policy / steps, RandomErasing) is timed apart (augment_s,
 * shown under the decode row), only when there is augmentation. wait_s is the time the
 * consumer spent blocked in stk_loader_next: the GPU waiting for data.
 *
 * The verdict line is the classifier of loader_verdict.c (stk_stats_verdict) put in words.
 */
#include "loader_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int stk__loader_timed_out(stk_loader *h, uint64_t k, int timeout_ms)
{
    uint64_t index = 0, age = 0;
    int rc = STK_E_RANGE;
    pthread_mutex_lock(&h->stats_mu);
    if (h->reader)
        rc = stk__reader_oldest(h->reader, &index, &age);
    pthread_mutex_unlock(&h->stats_mu);
    if (rc != STK_OK)
        return stk__err(h->err, STK_TIMEOUT, "stk_loader_next: batch %llu not ready within %d ms (no read in flight)",
                        (unsigned long long)k, timeout_ms);
    char name[STK__ERRLEN / 2];
    if (stk_dataset_record_name(h->ds, index, name, sizeof name) != STK_OK)
        snprintf(name, sizeof name, "record %llu", (unsigned long long)index);
    return stk__err(h->err, STK_TIMEOUT, "stk_loader_next: batch %llu not ready within %d ms; the oldest read in "
                    "flight, for %.1f s: %s", (unsigned long long)k, timeout_ms, (double)age / 1e9, name);
}

void stk__loader_stats_reset(stk_loader *h)
{
    atomic_store(&h->detached, 0);
    stk__loader_tel *t = &h->tel;
    pthread_mutex_lock(&h->stats_mu);
    stk__stage_clock *cs[2] = {&t->dec_clock, &t->stg_clock};
    for (int i = 0; i < 2; i++) {
        atomic_store(&cs[i]->busy_ns, 0);
        atomic_store(&cs[i]->starved_ns, 0);
        atomic_store(&cs[i]->blocked_ns, 0);
        atomic_store(&cs[i]->items, 0);
        atomic_store(&cs[i]->bytes, 0);
        atomic_store(&cs[i]->errors, 0);
        atomic_store(&cs[i]->threads, 0);
    }
    memset(&t->read_acc, 0, sizeof t->read_acc);
    t->read_disk_acc = 0;
    t->inflight_max_acc = 0;
    t->have_rinfo = 0;
    memset(&t->last_rinfo, 0, sizeof t->last_rinfo);
    t->t_start = stk__now();
    stk__cpu_times(&t->cpu_u0, &t->cpu_s0);
    _Atomic uint64_t *zero[] = {&t->wait_ns, &t->batches_out, &t->samples_out, &t->crc_errors,
                                &t->io_errors, &t->decode_errors, &t->substituted, &t->decode_warnings,
                                &t->aug_ns, &t->aug_items};
    for (size_t i = 0; i < STK__ARRAY_LEN(zero); i++)
        atomic_store(zero[i], 0);
    pthread_mutex_unlock(&h->stats_mu);
}

int stk_loader_stats(stk_loader *h, stk_stats *out)
{
    if (!h || !out)
        return STK_E_INVALID;
    memset(out, 0, sizeof(*out));
    out->device = -1;
    out->io_backend = -1;
    pthread_mutex_lock(&h->stats_mu);
    if (h->tel.t_start == 0.0) {
        pthread_mutex_unlock(&h->stats_mu);
        return STK_OK; /* never started: all zero */
    }
    out->read = h->tel.read_acc;
    uint64_t disk = h->tel.read_disk_acc;
    uint32_t inflight_max = h->tel.inflight_max_acc;
    stk__reader_info info = h->tel.last_rinfo;
    int have_info = h->tel.have_rinfo;
    if (h->reader) {
        stk_stage_stats rs;
        stk__clock_snapshot(stk__reader_clock(h->reader), &rs);
        out->read.busy_s += rs.busy_s;
        out->read.starved_s += rs.starved_s;
        out->read.blocked_s += rs.blocked_s;
        out->read.items += rs.items;
        out->read.bytes += rs.bytes;
        out->read.errors += rs.errors;
        out->read.threads = rs.threads;
        stk__reader_get_info(h->reader, &info);
        have_info = 1;
        disk += info.disk_bytes;
        if (info.inflight_max > inflight_max)
            inflight_max = info.inflight_max;
    }
    stk__clock_snapshot(&h->tel.dec_clock, &out->decode);
    stk__clock_snapshot(&h->tel.stg_clock, &out->stager);
    if (h->stager) {
        stk__stager_stats ss;
        stk__stager_get_stats(h->stager, &ss);
        out->h2d_bytes = ss.h2d_bytes;
        out->h2d_s = ss.h2d_s;
        out->convert_s = ss.convert_s;
        out->release_wait_s = ss.release_wait_s;
        out->device_bytes = ss.device_bytes;
    }
    if (have_info) {
        out->io_backend = info.backend;
        out->io_direct = info.direct;
        out->inflight_now = info.inflight_now;
        snprintf(out->io_backend_note, sizeof out->io_backend_note, "%s", info.note);
        out->reader_pool_bytes = info.pool_bytes;
    }
    out->inflight_max = inflight_max;
    out->disk_bytes = disk;
    out->bytes_read = out->read.bytes;
    out->host_ring_bytes = h->ring_bytes;
    out->pinned_bytes = h->ring_pinned ? h->ring_bytes : 0;
    out->pin_reason = h->pin_reason;
    out->detached = atomic_load(&h->detached);
    out->device = h->device_path ? h->dev_id : -1;
    out->fallback_reason = h->fallback_reason;
    if (!out->fallback_reason && have_info)
        out->fallback_reason = info.fallback_reason;
    out->wall_s = stk__now() - h->tel.t_start;
    double u, s;
    stk__cpu_times(&u, &s);
    out->cpu_user_s = u - h->tel.cpu_u0;
    out->cpu_sys_s = s - h->tel.cpu_s0;
    out->samples_per_epoch = h->epoch_end;
    out->batches_per_epoch = h->bpe;
    pthread_mutex_unlock(&h->stats_mu);

    out->wait_s = (double)atomic_load(&h->tel.wait_ns) * 1e-9;
    out->batches = atomic_load(&h->tel.batches_out);
    out->samples = atomic_load(&h->tel.samples_out);
    out->epoch = atomic_load(&h->pos_epoch);
    out->next_sample = atomic_load(&h->pos_next);
    out->crc_errors = atomic_load(&h->tel.crc_errors);
    out->io_errors = atomic_load(&h->tel.io_errors);
    out->decode_errors = atomic_load(&h->tel.decode_errors);
    out->substituted = atomic_load(&h->tel.substituted);
    out->decode_warnings = atomic_load(&h->tel.decode_warnings);
    out->augment_s = (double)atomic_load(&h->tel.aug_ns) * 1e-9;
    out->augment_items = atomic_load(&h->tel.aug_items);
    stk__loader_fetch_stats(h, out);
    return STK_OK;
}

/* snprintf into a buffer that may be too small, counting what it would need. */
typedef struct rbuf {
    char *p;
    size_t cap, len;
} rbuf;

__attribute__((format(printf, 2, 3))) static void rb_printf(rbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = b->len < b->cap ? b->p + b->len : NULL;
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n;
}

static double frac(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

static void stage_row(rbuf *b, const char *name, const stk_stage_stats *s, double wall)
{
    double t = wall * (s->threads ? s->threads : 1);
    rb_printf(b, "  %-8s %7u %6.1f%% %7.1f%% %7.1f%% %10llu %9.1f %7llu\n", name, s->threads,
              100.0 * frac(s->busy_s, t), 100.0 * frac(s->starved_s, t), 100.0 * frac(s->blocked_s, t),
              (unsigned long long)s->items, (double)s->bytes / 1e6, (unsigned long long)s->errors);
}

/* The augmentation's share of the decode workers' busy time (stats augment_s), under their row:
 * busy % of the same thread-time as the decode row, then per-sample times and the ratio of
 * augmenting to the rest of the workers' work (decoding, resizing, converting). */
static void augment_row(rbuf *b, const stk_stats *st, double wall)
{
    const stk_stage_stats *d = &st->decode;
    if (!st->augment_items)
        return;
    double t = wall * (d->threads ? d->threads : 1);
    double rest = d->busy_s > st->augment_s ? d->busy_s - st->augment_s : 0.0;
    double n = (double)(d->items ? d->items : 1);
    rb_printf(b, "   augment %6s %6.1f%%  of decode busy; per sample %.3f ms augment, %.3f ms decode without it "
                 "(augment/decode %.0f%%)\n",
              "", 100.0 * frac(st->augment_s, t), 1e3 * st->augment_s / n, 1e3 * rest / n,
              100.0 * frac(st->augment_s, rest));
}

static const char *backend_name(int b)
{
    switch (b) {
    case STK_IO_URING:
        return "io_uring";
    case STK_IO_PREAD:
        return "pread pool";
    case STK_IO_MMAP:
        return "mmap (mdb_get)";
    default:
        return "-";
    }
}

static void say_decode(rbuf *b, const stk_verdict *v, int cpus)
{
    uint32_t T = v->decode_threads;
    if (v->flags & STK_VERDICT_CPU_STARVED)
        rb_printf(b, "verdict: decode-bound, CPU-starved: %u workers busy %.0f%% but the process ran on %.2f "
                     "cores — other processes share the cores; the same loader on idle cores goes faster\n",
                  T, 100.0 * v->decode_busy, v->cores);
    else if ((int)T < cpus)
        rb_printf(b, "verdict: decode-bound: %u of %u workers busy %.0f%% — raise STK_P_WORKERS (%d usable "
                     "cores), or pack at a smaller stored resolution\n",
                  T, T, 100.0 * v->decode_busy, cpus);
    else
        rb_printf(b, "verdict: decode-bound: %u of %u workers busy %.0f%% — more cores, or pack at a "
                     "smaller stored resolution\n",
                  T, T, 100.0 * v->decode_busy);
}

/* The verdict line: the classifier's answer (loader_verdict.c) in words. */
static void verdict(rbuf *b, stk_loader *h, const stk_stats *st)
{
    stk_verdict v = {.size = sizeof v};
    stk_stats_verdict(st, h->stage, &v);
    switch (v.bottleneck) {
    case STK_BOTTLENECK_NONE:
        rb_printf(b, "verdict: no batches delivered yet\n");
        return;
    case STK_BOTTLENECK_CONSUMER:
        rb_printf(b, "verdict: the loader keeps up: the consumer waited %.1f%% of the time\n",
                  100.0 * v.wait_share);
        return;
    case STK_BOTTLENECK_STAGE:
        rb_printf(b, "verdict: transfer-bound: the stager copied %.0f%% of the time (%.2f GB/s) — use "
                     "uint8 output and convert on the GPU, or a faster PCIe link\n",
                  100.0 * v.stager_busy, v.h2d_gbps);
        return;
    case STK_BOTTLENECK_FETCH: {
        char line[640];
        stk__loader_fetch_verdict(h, st, line, sizeof line);
        rb_printf(b, "%s", line);
        return;
    }
    case STK_BOTTLENECK_READ:
        rb_printf(b,
                  "verdict: storage-bound: reader busy %.0f%%, blocked %.0f%%; decode workers starved "
                  "%.0f%% — pack into shards / use O_DIRECT / raise STK_P_QUEUE_DEPTH (now %d)\n",
                  100.0 * v.read_busy, 100.0 * v.read_blocked, 100.0 * v.decode_starved,
                  h->rcfg.queue_depth);
        return;
    default:
        say_decode(b, &v, h->budget.usable);
    }
}

size_t stk_loader_report(stk_loader *h, char *buf, size_t cap)
{
    rbuf b = {buf, cap, 0};
    if (buf && cap)
        buf[0] = '\0';
    if (!h) {
        rb_printf(&b, "stoker loader: invalid handle\n");
        return b.len;
    }
    stk_stats st;
    stk_loader_stats(h, &st);
    double wall = st.wall_s;
    rb_printf(&b, "stoker loader: %.2f s, %llu batches, %llu samples (%.0f samples/s); at epoch %llu sample "
                  "%llu of %llu\n",
              wall, (unsigned long long)st.batches, (unsigned long long)st.samples,
              frac((double)st.samples, wall), (unsigned long long)st.epoch,
              (unsigned long long)st.next_sample, (unsigned long long)st.samples_per_epoch);
    rb_printf(&b, "  %-8s %7s %7s %8s %8s %10s %9s %7s\n", "stage", "threads", "busy", "starved",
              "blocked", "items", "MB", "errors");
    stage_row(&b, "read", &st.read, wall);
    stage_row(&b, "decode", &st.decode, wall);
    augment_row(&b, &st, wall);
    if (st.stager.threads)
        stage_row(&b, "stager", &st.stager, wall);
    rb_printf(&b, "  consumer waited %.3f s in next() (%.1f%% of the time); CPU %.2f s user + %.2f s sys "
                  "(%.2f cores)\n",
              st.wait_s, 100.0 * frac(st.wait_s, wall), st.cpu_user_s, st.cpu_sys_s,
              frac(st.cpu_user_s + st.cpu_sys_s, wall));
    rb_printf(&b, "  reader: %s; %.1f MB payload, %.1f MB from storage, %u in flight max\n",
              st.io_backend_note[0] ? st.io_backend_note : backend_name(st.io_backend),
              (double)st.bytes_read / 1e6, (double)st.disk_bytes / 1e6, st.inflight_max);
    rb_printf(&b, "  memory: host ring %.1f MiB (%s), reader pool %.1f MiB, device %.1f MiB\n",
              (double)st.host_ring_bytes / 1048576.0, st.pinned_bytes ? "pinned" : "pageable",
              (double)st.reader_pool_bytes / 1048576.0, (double)st.device_bytes / 1048576.0);
    char fetch[320];
    if (stk__loader_fetch_line(h, &st, fetch, sizeof fetch))
        rb_printf(&b, "%s", fetch);
    if (st.device >= 0)
        rb_printf(&b, "  device %d: %.1f MB copied in %.3f s, convert %.3f s, waited %.3f s for releases\n",
                  st.device, (double)st.h2d_bytes / 1e6, st.h2d_s, st.convert_s, st.release_wait_s);
    else if (st.fallback_reason)
        rb_printf(&b, "  host batches: %s (%s)\n", stk_strerror(st.fallback_reason),
                  stk_status_name(st.fallback_reason));
    uint64_t nerr = stk__errlist_count(&h->errs);
    rb_printf(&b, "  bad records: %llu (crc %llu, read %llu, decode %llu; substituted %llu); libjpeg "
                  "warnings %llu\n",
              (unsigned long long)nerr, (unsigned long long)st.crc_errors, (unsigned long long)st.io_errors,
              (unsigned long long)st.decode_errors, (unsigned long long)st.substituted,
              (unsigned long long)st.decode_warnings);
    for (uint64_t i = 0; i < nerr && i < 3; i++) {
        stk_record_error e;
        if (stk__errlist_get(&h->errs, i, &e) == STK_OK)
            rb_printf(&b, "    %s (index %llu, epoch %llu): %s\n", e.where, (unsigned long long)e.index,
                      (unsigned long long)e.epoch, e.reason);
    }
    if (nerr > 3)
        rb_printf(&b, "    ... %llu more (stk_loader_error_get)\n", (unsigned long long)(nerr - 3));
    char wnote[320];
    stk_loader_workers_note(h, wnote, sizeof wnote);
    rb_printf(&b, "  %s\n", wnote);
    verdict(&b, h, &st);
    return b.len;
}

size_t stk_loader_workers_note(const stk_loader *h, char *buf, size_t cap)
{
    char tmp[1];
    if (!buf || !cap) {
        buf = tmp;
        cap = sizeof tmp;
    }
    if (!h)
        return (size_t)snprintf(buf, cap, "invalid handle");
    int64_t w = h->pv[stk__param_find(STK_P_WORKERS)].i;
    int n;
    if (w == h->budget.workers)
        n = snprintf(buf, cap, "%s", h->budget.note);
    else
        n = snprintf(buf, cap, "workers %lld: set by the caller (default here: %s)", (long long)w,
                     h->budget.note);
    return n > 0 ? (size_t)n : 0;
}
