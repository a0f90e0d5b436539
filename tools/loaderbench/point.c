/* SPDX-License-Identifier: MIT */
/*
 * point.c — one measured point: a loader with LAYOUT × WORKERS, run --repeat times.
 *
 * Measuring: in --seconds mode the window opens when the first batch arrives (thread start-up
 * and the pipeline's fill are not steady state) and closes after S seconds; in --epochs mode it
 * runs from stk_loader_start to the E-th end of epoch. Stage shares come from two
 * stk_loader_stats snapshots at the window's edges: busy, starved and blocked seconds of a stage
 * divided by (window × its threads). The simulated trainer holds each batch --step-ms ms and
 * then releases it; its waiting share is the time spent inside stk_loader_next over the window.
 * In gpu-kernel mode (lb_trainer_setup) the step is a kernel of that length on the trainer's own
 * stream, which is also the stream given to stk_loader_next/release: the kernel reads the device
 * batch once the stager has finished it, and the trainer waits for the kernel before it releases
 * the batch and asks for the next, so the time inside next() is the real wait for data. With host
 * batches the kernel has nothing on the device to read and only spins. In sleep mode the thread
 * sleeps.
 */
#include "lb.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LB_MIN_BATCHES 3

/* ---- cache control ---- */

/*
 * Cache control, no root needed: "cold" drops every file of the layout from the page cache with
 * posix_fadvise(POSIX_FADV_DONTNEED) before each run (pages still mapped by a process stay, so
 * no dataset handle is kept open between runs); "warm" reads every file once before the sweep.
 * The bytes really fetched from storage are taken from /proc/self/io (read_bytes), which counts
 * page-cache misses and O_DIRECT reads of every thread of this process.
 */

static int drop_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type != FTW_F)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return 0;
}

int lb_drop_cache(const char *path)
{
    return nftw(path, drop_one, 32, FTW_PHYS);
}

static int warm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || st->st_size == 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    static char buf[1 << 16];
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
    return 0;
}

void lb_warm_cache(const char *path)
{
    nftw(path, warm_one, 32, FTW_PHYS);
}

/* Bytes this process has fetched from storage (read_bytes of /proc/self/io), 0 if unknown. */
static uint64_t storage_read_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return 0;
    char line[128];
    unsigned long long v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %llu", &v) == 1)
            break;
    fclose(f);
    return v;
}

/* ---- one run ---- */

typedef struct lb_run {
    double ips, wall, mbps, cpu;
    lb_stage_share read, decode, stager;
    double wait_fraction, trainer_wait;
    double step_ms_sum;
    uint64_t steps, steps_on_batch;
    uint64_t samples, batches, bad, disk, record_errors;
    char first_bad[400];
    stk_stats last;
    lb_fetch fetch;      /* s3:// datasets (fetch.c) */
    stk_verdict verdict; /* the library's classifier over the window */
} lb_run;

/* A stage adds a wait to its clock when the wait ends, so one that began before the window
 * opened lands wholly inside it: a share can overshoot 1 by up to one wait per thread. */
static double clamp01(double v) { return v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v; }

static void share(const stk_stage_stats *a, const stk_stage_stats *b, double wall, lb_stage_share *out)
{
    out->threads = b->threads;
    if (b->threads == 0 || wall <= 0.0) {
        out->busy = out->starved = out->blocked = -1.0;
        return;
    }
    double t = wall * b->threads;
    out->busy = clamp01((b->busy_s - a->busy_s) / t);
    out->starved = clamp01((b->starved_s - a->starved_s) / t);
    out->blocked = clamp01((b->blocked_s - a->blocked_s) / t);
}

/* The library's verdict over the window S0..S1 of SWALL seconds: times, counts and CPU seconds
 * taken as differences, thread counts and sizes from S1. The fetch fields stay S1's: cumulative
 * since the open, whose download (before the window) is what a first epoch waits for. */
static void window_verdict(const lb_config *cfg, const stk_stats *s0, const stk_stats *s1, double swall,
                           stk_verdict *v)
{
    stk_stats d = *s1;
    stk_stage_stats *ds[3] = {&d.read, &d.decode, &d.stager};
    const stk_stage_stats *as[3] = {&s0->read, &s0->decode, &s0->stager};
    for (int i = 0; i < 3; i++) {
        ds[i]->busy_s -= as[i]->busy_s;
        ds[i]->starved_s -= as[i]->starved_s;
        ds[i]->blocked_s -= as[i]->blocked_s;
    }
    d.wall_s = swall;
    d.wait_s -= s0->wait_s;
    d.cpu_user_s -= s0->cpu_user_s;
    d.cpu_sys_s -= s0->cpu_sys_s;
    d.batches -= s0->batches;
    d.samples -= s0->samples;
    d.h2d_bytes -= s0->h2d_bytes;
    d.h2d_s -= s0->h2d_s;
    memset(v, 0, sizeof *v);
    v->size = sizeof *v;
    stk_stats_verdict(&d, cfg->stage, v);
}

static void sleep_ms(double ms)
{
    if (ms <= 0.0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double end = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + ms / 1000.0;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The simulated trainer's step on batch B; COUNTED: the batch is inside the measured window. */
static int trainer_step(const lb_config *cfg, const stk_batch *b, int counted, lb_run *out, char *err, size_t errcap)
{
    if (cfg->step_ms <= 0.0)
        return 0;
    if (cfg->step_mode != LB_STEP_GPU) {
        sleep_ms(cfg->step_ms);
        return 0;
    }
    /* a device batch on the trainer's device is read by the kernel; a host batch is not */
    const void *data = b->images && b->device >= 0 && b->device == lb_gpu_device(cfg->gpu) ? b->images : NULL;
    double kms = -1.0;
    char why[400];
    if (lb_gpu_step(cfg->gpu, data, data ? b->image_bytes : 0, cfg->step_ms, &kms, why, sizeof why) != 0) {
        snprintf(err, errcap, "the trainer's GPU step failed: %s", why);
        return -1;
    }
    if (counted) {
        out->steps++;
        out->steps_on_batch += data != NULL;
        out->step_ms_sum += kms;
    }
    return 0;
}

#define SETI(key, val)                                                                           \
    do {                                                                                         \
        int rc_ = stk_loader_set(h, (key), (val));                                               \
        if (rc_ != STK_OK) {                                                                     \
            snprintf(err, errcap, "stk_loader_set(%s, %lld): %s: %s", #key, (long long)(val),     \
                     stk_strerror(rc_), stk_loader_last_error(h));                               \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)

static const char *stage_name(int s)
{
    return s == STK_STAGE_READ ? "read" : s == STK_STAGE_DECODE ? "decode" : "full";
}

static int run_once(const lb_config *cfg, const lb_dataset *ds, int layout, int workers, lb_run *out,
                    const char *label, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    char cold_dir[4200] = ""; /* --cache cold on s3://: this run's own cache (fetch.c) */
    stk_loader *h = NULL;
    int rc = stk_loader_create(&h);
    if (rc != STK_OK) {
        snprintf(err, errcap, "stk_loader_create: %s", stk_strerror(rc));
        return -1;
    }
    const char *path = layout == LB_FILES ? ds->folder : ds->shards;
    SETI(STK_P_LAYOUT, layout == LB_FILES ? STK_LAYOUT_FILES : STK_LAYOUT_AUTO);
    if (layout == LB_LMDB_MMAP)
        SETI(STK_P_IO_BACKEND, STK_IO_MMAP);
    if (layout == LB_SHARDS_BUFFERED)
        SETI(STK_P_IO_DIRECT, 0);
    if (layout == LB_SHARDS_DIRECT)
        SETI(STK_P_IO_DIRECT, 1);
    SETI(STK_P_WORKERS, workers);
    SETI(STK_P_MODE, cfg->mode);
    SETI(STK_P_BATCH_SIZE, cfg->batch_size);
    SETI(STK_P_STAGE, cfg->stage);
    SETI(STK_P_SEED, (int64_t)cfg->seed);
    SETI(STK_P_OUT_HEIGHT, cfg->size);
    SETI(STK_P_OUT_WIDTH, cfg->size);
    if (cfg->mode == STK_MODE_EVAL)
        SETI(STK_P_RESIZE, cfg->size * 8 / 7);
    if (cfg->stage == STK_STAGE_FULL && cfg->device >= 0)
        SETI(STK_P_DEVICE, cfg->device);
    if (cfg->read_delay_us > 0) {
        SETI(STK_P_FAULT_DELAY_PPM, 1000000);
        SETI(STK_P_FAULT_DELAY_US, cfg->read_delay_us);
    }
    if (cfg->cold && lb_is_s3(path) && lb_fetch_cold_dir(cfg, cold_dir, sizeof cold_dir) != 0) {
        snprintf(err, errcap, "cannot make a cache directory under %.200s", cfg->cache_dir);
        goto fail;
    }
    if (cold_dir[0] && (rc = stk_loader_set_cache_dir(h, cold_dir)) != STK_OK) {
        snprintf(err, errcap, "stk_loader_set_cache_dir: %s", stk_strerror(rc));
        goto fail;
    }
    if (cfg->cold && !lb_is_s3(path))
        lb_drop_cache(path);

    double t_open = lb_now();
    rc = stk_loader_open(h, path);
    t_open = lb_now() - t_open;
    if (rc != STK_OK) {
        snprintf(err, errcap, "opening %.200s: %s: %s", path, stk_strerror(rc), stk_loader_last_error(h));
        goto fail;
    }
    uint64_t disk0 = storage_read_bytes();
    double t_start = lb_now();
    rc = stk_loader_start(h);
    if (rc != STK_OK) {
        snprintf(err, errcap, "starting the loader on %.200s: %s: %s", path, stk_strerror(rc),
                 stk_loader_last_error(h));
        goto fail;
    }
    /* the trainer's stream orders its kernel after the stager's copy and the buffer's reuse after
     * the kernel (it must belong to STK_P_DEVICE; NULL = the legacy default stream) */
    void *stream = cfg->step_mode == LB_STEP_GPU && cfg->stage == STK_STAGE_FULL && cfg->device >= 0 &&
                           cfg->device == lb_gpu_device(cfg->gpu)
                       ? lb_gpu_stream(cfg->gpu)
                       : NULL;
    stk_stats s0, s1;
    memset(&s0, 0, sizeof s0);
    double t0 = t_start, waited = 0.0, last_progress = 0.0, last_batch = t_start;
    uint64_t samples = 0, batches = 0, bad = 0;
    int epochs_done = 0, window_open = cfg->epochs > 0;
    if (window_open) {
        stk_loader_stats(h, &s0);
        disk0 = storage_read_bytes();
    }
    for (;;) {
        const stk_batch *b = NULL;
        double ta = lb_now();
        rc = stk_loader_next(h, stream, 500, &b);
        double tb = lb_now();
        if (window_open)
            waited += tb - ta;
        if (rc == STK_TIMEOUT) {
            if (tb - last_batch > 120.0) {
                snprintf(err, errcap, "no batch for 120 s on %.200s", path);
                goto fail;
            }
        } else if (rc == STK_END) {
            epochs_done++;
            if (cfg->epochs && epochs_done >= cfg->epochs)
                break;
        } else if (rc != STK_OK) {
            snprintf(err, errcap, "stk_loader_next on %.200s: %s: %s", path, stk_strerror(rc),
                     stk_loader_last_error(h));
            goto fail;
        } else {
            last_batch = tb;
            int counted = window_open;
            if (!window_open) {
                /* the window opens at the first batch */
                stk_loader_stats(h, &s0);
                disk0 = storage_read_bytes();
                t0 = tb;
                window_open = 1;
            } else {
                samples += b->size;
                batches++;
                bad += b->bad;
            }
            if (trainer_step(cfg, b, counted, out, err, errcap) != 0) {
                stk_loader_release(h, b, stream);
                goto fail;
            }
            rc = stk_loader_release(h, b, stream);
            if (rc != STK_OK) {
                snprintf(err, errcap, "stk_loader_release: %s: %s", stk_strerror(rc), stk_loader_last_error(h));
                goto fail;
            }
        }
        double now = lb_now();
        if (now - last_progress >= 0.25) {
            double el = window_open ? now - t0 : 0.0;
            if (cfg->epochs)
                lb_progress(cfg, 0, "%s: %.0f img/s, epoch %d/%d, %.1f s", label,
                            el > 0 ? samples / el : 0.0, epochs_done + 1, cfg->epochs, now - t_start);
            else
                lb_progress(cfg, 0, "%s: %.0f img/s, %.1f/%.1f s", label, el > 0 ? samples / el : 0.0, el,
                            cfg->seconds);
            last_progress = now;
        }
        /* the window closes after S seconds, but never before LB_MIN_BATCHES batches: one
         * slow batch (a loaded machine, a cold disk) must not leave an empty window */
        if (!cfg->epochs && window_open && now - t0 >= cfg->seconds && batches >= LB_MIN_BATCHES)
            break;
    }
    double t1 = lb_now();
    stk_loader_stats(h, &s1);
    uint64_t disk1 = storage_read_bytes();
    out->record_errors = stk_loader_error_count(h);
    stk_record_error re;
    if (out->record_errors > 0 && stk_loader_error_get(h, 0, &re) == STK_OK)
        snprintf(out->first_bad, sizeof out->first_bad, "%.180s: %.200s", re.where, re.reason);
    lb_fetch_record(h, t_open, &out->fetch);
    stk_loader_stop(h);
    stk_loader_destroy(h);
    h = NULL;
    lb_fetch_cold_done(cold_dir);

    double wall = t1 - t0;
    double swall = s1.wall_s - s0.wall_s;
    if (swall <= 0.0)
        swall = wall;
    if (cfg->epochs) {
        samples = s1.samples - s0.samples;
        batches = s1.batches - s0.batches;
    }
    out->wall = wall;
    out->samples = samples;
    out->batches = batches;
    out->bad = bad;
    out->ips = wall > 0 ? (double)samples / wall : 0.0;
    out->mbps = (double)(s1.bytes_read - s0.bytes_read) / swall / 1e6;
    out->cpu = (s1.cpu_user_s + s1.cpu_sys_s - s0.cpu_user_s - s0.cpu_sys_s) / swall;
    share(&s0.read, &s1.read, swall, &out->read);
    share(&s0.decode, &s1.decode, swall, &out->decode);
    share(&s0.stager, &s1.stager, swall, &out->stager);
    if (cfg->stage == STK_STAGE_READ)
        out->decode.busy = out->decode.starved = out->decode.blocked = -1.0;
    if (cfg->stage != STK_STAGE_FULL)
        out->stager.busy = out->stager.starved = out->stager.blocked = -1.0;
    out->wait_fraction = (s1.wait_s - s0.wait_s) / swall;
    out->trainer_wait = cfg->step_ms > 0.0 && wall > 0 ? waited / wall : -1.0;
    out->disk = disk1 >= disk0 ? disk1 - disk0 : 0;
    out->last = s1;
    window_verdict(cfg, &s0, &s1, swall, &out->verdict);
    if (samples == 0) {
        snprintf(err, errcap, "no samples delivered in the measured window (%.2f s, stage %s)", wall,
                 stage_name(cfg->stage));
        return -1;
    }
    return 0;
fail:
    stk_loader_destroy(h);
    lb_fetch_cold_done(cold_dir);
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void lb_point_init(const lb_config *cfg, lb_point *pt, int layout, int workers)
{
    memset(pt, 0, sizeof *pt);
    pt->layout = layout;
    pt->workers = workers;
    pt->repeat = cfg->repeat;
    pt->trainer_wait_fraction = -1.0;
    pt->step_kernel_ms = -1.0;
}

int lb_point_run(const lb_config *cfg, const lb_dataset *ds, lb_point *pt, int rep, const char *label)
{
    if (pt->failed)
        return -1;
    if (!pt->detail) {
        pt->detail = calloc((size_t)cfg->repeat, sizeof(lb_run));
        if (!pt->detail) {
            snprintf(pt->error, sizeof pt->error, "out of memory");
            pt->failed = 1;
            return -1;
        }
    }
    lb_run *runs = pt->detail;
    if (run_once(cfg, ds, pt->layout, pt->workers, &runs[rep], label, pt->error, sizeof pt->error) != 0) {
        pt->failed = 1;
        return -1;
    }
    pt->runs[rep] = runs[rep].ips;
    lb_progress(cfg, 0, "%s: %.0f img/s", label, runs[rep].ips);
    return 0;
}

void lb_point_finish(const lb_config *cfg, lb_point *pt)
{
    lb_run *runs = pt->detail;
    pt->detail = NULL;
    if (pt->failed || !runs) {
        free(runs);
        return;
    }
    double sorted[LB_MAX_REPEAT];
    memcpy(sorted, pt->runs, sizeof(double) * (size_t)cfg->repeat);
    qsort(sorted, (size_t)cfg->repeat, sizeof(double), cmp_double);
    pt->images_per_s = sorted[cfg->repeat / 2];
    if (cfg->repeat % 2 == 0)
        pt->images_per_s = 0.5 * (sorted[cfg->repeat / 2 - 1] + sorted[cfg->repeat / 2]);
    pt->images_per_s_min = sorted[0];
    pt->images_per_s_max = sorted[cfg->repeat - 1];
    /* the other figures come from the run closest to the median */
    int mi = 0;
    for (int r = 1; r < cfg->repeat; r++)
        if (fabs(runs[r].ips - pt->images_per_s) < fabs(runs[mi].ips - pt->images_per_s))
            mi = r;
    const lb_run *m = &runs[mi];
    pt->mb_per_s = m->mbps;
    pt->cpu_cores = m->cpu;
    pt->read = m->read;
    pt->decode = m->decode;
    pt->stager = m->stager;
    pt->wait_fraction = m->wait_fraction;
    pt->trainer_wait_fraction = m->trainer_wait;
    pt->steps = m->steps;
    pt->steps_on_batch = m->steps_on_batch;
    pt->step_kernel_ms = m->steps > 0 ? m->step_ms_sum / (double)m->steps : -1.0;
    pt->wall_s = m->wall;
    pt->samples = m->samples;
    pt->batches = m->batches;
    pt->bad_records = m->bad;
    pt->disk_read_bytes = m->disk;
    pt->record_errors = m->record_errors;
    snprintf(pt->first_bad, sizeof pt->first_bad, "%s", m->first_bad);
    if (pt->bad_records * 2 > pt->samples) {
        /* a substitute decodes in no time: such figures would flatter the layout */
        snprintf(pt->error, sizeof pt->error,
                 "%llu of %llu samples were bad records (replaced by substitutes), so the figures "
                 "measure nothing real; first: %.300s",
                 (unsigned long long)pt->bad_records, (unsigned long long)pt->samples, pt->first_bad);
        pt->failed = 1;
        free(runs);
        return;
    }
    pt->io_backend = m->last.io_backend;
    pt->io_direct = m->last.io_direct;
    snprintf(pt->io_note, sizeof pt->io_note, "%s", m->last.io_backend_note);
    pt->host_ring_bytes = m->last.host_ring_bytes;
    pt->pinned_bytes = m->last.pinned_bytes;
    pt->device_bytes = m->last.device_bytes;
    pt->reader_pool_bytes = m->last.reader_pool_bytes;
    pt->device = m->last.device;
    pt->verdict = m->verdict;
    pt->fetch = m->fetch;
    pt->bottleneck = lb_point_bottleneck(cfg, pt);
    free(runs);
}
