/* SPDX-License-Identifier: MIT */
/*
 * loaderbench — compare worker counts and disk layouts on your data and machine, and name the
 * bottleneck.
 *
 * The question behind "my GPU sits at 30%" is which part of the chain is slow: storage, decode,
 * too few workers, the copy to the GPU, or none of them. loaderbench changes one thing at a time
 * (workers × layout, at a fixed cache state, batch size, mode and stage), measures each point
 * with stoker's own stage clocks (busy / starved / blocked per stage, the consumer's wait), and
 * answers in plain words with a table and an SVG chart.
 *
 * It is a thin program over the public API (stoker.h) only. With no DATASET it builds its own
 * ImageNet-like sample (synth.c), packs it with stk_pack and runs on that.
 *
 * Files: loaderbench.c (options, the sweep, autotune), synth.c (embedded default sample),
 * point.c (one measured point, cache control), report.c (table, verdict, JSON, CSV, SVG).
 */
#include "lb.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const lb_layout_names[LB_NLAYOUTS] = {"files", "shards-buffered", "shards-direct", "lmdb-mmap"};
const char *const lb_step_mode_names[3] = {NULL, "sleep", "gpu-kernel"};

/* ---- helpers ---- */

double lb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int g_tty = -1;
static int g_progress_len;
static double g_last_line;

/* The live progress line: on a TTY, \r updates of one line on stderr; otherwise one line at
 * most every 5 s (and every FINAL message). */
void lb_progress(const lb_config *cfg, int final, const char *fmt, ...)
{
    if (cfg->quiet)
        return;
    if (g_tty < 0)
        g_tty = isatty(STDERR_FILENO);
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (g_tty) {
        int n = (int)strlen(line);
        int pad = g_progress_len > n ? g_progress_len - n : 0;
        fprintf(stderr, "\r%s%*s", line, pad, "");
        if (final) {
            if (n > 0)
                fputc('\n', stderr);
            else
                fputc('\r', stderr);
            g_progress_len = 0;
        } else {
            g_progress_len = n;
        }
        fflush(stderr);
        return;
    }
    double t = lb_now();
    if (!line[0])
        return;
    if (final || t - g_last_line >= 5.0) {
        fprintf(stderr, "%s\n", line);
        g_last_line = t;
    }
}

void lb_note(const lb_config *cfg, const char *fmt, ...)
{
    if (cfg->quiet)
        return;
    if (g_tty > 0 && g_progress_len) {
        fputc('\n', stderr);
        g_progress_len = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("loaderbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *lb_human_bytes(uint64_t b, char *buf, size_t cap)
{
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
    else if (b >= (1ull << 10))
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    return buf;
}

int lb_mkdirs(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* ---- options ---- */

static void usage(FILE *f)
{
    fputs(
"usage: loaderbench [OPTIONS] [DATASET]\n"
"\n"
"Benchmark stoker's loader on DATASET — a directory of stoker shards (or one shard), an\n"
"ImageFolder root (class/NAME.JPEG), or a foreign LMDB of images — over worker counts and disk\n"
"layouts; print a table, name the bottleneck stage and say what would help.\n"
"\n"
"With no DATASET: the embedded default. loaderbench synthesises a small ImageNet-like sample\n"
"(--sample-images JPEGs, 333-500 px, quality 85-95, 4:2:0/4:4:4/4:2:2/gray, ~10% progressive,\n"
"deterministic), keeps the ImageFolder in the cache directory, packs it into shards beside it\n"
"with stk_pack, and reuses both on later runs.\n"
"\n"
"Sweep:\n"
"  --workers LIST        decode worker counts, comma-separated [1,2,4,... up to the cores]\n"
"  --layouts LIST        comma-separated, or 'all' [all that the dataset allows]:\n"
"                          files            one file per image (needs an ImageFolder; a shard\n"
"                                           dataset has no files layout: it is skipped)\n"
"                          shards-buffered  shards read through the page cache\n"
"                          shards-direct    shards read with O_DIRECT\n"
"                          lmdb-mmap        LMDB's own mmap read path (the reference)\n"
"                        An ImageFolder DATASET is packed into the cache directory for the\n"
"                        shard layouts (reused while complete).\n"
"  --cache warm|cold     warm: every file is read once before the sweep [warm];\n"
"                        cold: posix_fadvise(DONTNEED) on every shard/file before each run\n"
"                        (no root needed; shards-direct reads with O_DIRECT anyway); the\n"
"                        default per run is then one epoch. On an s3:// DATASET cold gives\n"
"                        every run an empty cache directory of its own: each run fetches\n"
"                        the dataset from the bucket (a fresh machine's first epoch)\n"
"  --batch-size N        samples per batch, 1..65536 [128]\n"
"  --mode train|eval     train: RandomResizedCrop + flip; eval: resize + centre crop [train]\n"
"  --stage read|decode|full\n"
"                        last pipeline stage run: read = storage path alone, decode = read +\n"
"                        decode/augment, full = + batch ring and stager [full]\n"
"  --size N              output side in pixels, 16..1024 [224]\n"
"  --repeat N            runs per point, 1..101; the median is reported with min/max [1]\n"
"  --seconds S           measured seconds per run, after the first batch and at least 3\n"
"                        batches long [auto: the whole run, set-up included, aims at 48 s:\n"
"                        what synthesis and packing leave is shared by the runs, 0.75..10 s\n"
"                        each; --autotune adds runs]\n"
"  --epochs E            instead of --seconds: run E whole epochs per run (timed from start)\n"
"  --step-ms MS          simulated trainer: each batch is held MS milliseconds before release;\n"
"                        reports the fraction of time the trainer waited for data\n"
"                        [0 = consume at once]. Mode, decided once at start-up and printed:\n"
"                          gpu-kernel  when this build has CUDA and a device answers: a kernel\n"
"                                      of MS (spinning on the GPU clock) per batch on the\n"
"                                      trainer's own stream, which also reads the batch when\n"
"                                      it is a device batch (with host batches it only\n"
"                                      spins); the trainer waits for it before the release;\n"
"                                      calibrated once with a kernel of min(MS, 1000) ms timed\n"
"                                      by CUDA events\n"
"                          sleep       otherwise, with the reason: no CUDA in this build, no\n"
"                                      CUDA device (...), or the CUDA runtime's error\n"
"  --autotune            with --step-ms: find the fewest workers that keep the trainer fed\n"
"                        (it waits < 5% of the time) on the best layout, and print it\n"
"  --device N|cpu        CUDA device for --stage full, or cpu for host batches\n"
"                        [0 when a GPU is usable, else cpu]\n"
"  --read-delay-us US    delay every read US microseconds before it is issued (stoker's\n"
"                        fault injection, STK_P_FAULT_DELAY_*): a stand-in for slow or remote\n"
"                        storage; the io_uring submitter sleeps in line, the pread/files/mmap\n"
"                        threads each sleep on their own [0]\n"
"Default sample:\n"
"  --cache-dir DIR       where the default sample and packed copies live\n"
"                        [$XDG_CACHE_HOME/stoker, else ~/.cache/stoker]\n"
"  --sample-images N     JPEGs in the default sample, 100..100000 [2000]\n"
"  --seed N              seed of the sample and of the loader's order/augmentation [0]\n"
"Output:\n"
"  --json FILE           all points and the verdict as JSON\n"
"  --csv FILE            one row per point\n"
"  --plot FILE.svg       SVG chart: images/s against workers, one line per layout\n"
"  --quiet               no progress line or notes (table and verdict still printed)\n"
"  --help, --version\n"
"\n"
"Table columns: img/s = median images/s (min-max over repeats); MB/s = encoded payload bytes\n"
"read; cores = process CPU time / wall time; read, decode, stager = that stage's busy /\n"
"starved (waiting for input; for the reader: waiting for storage) / blocked (waiting for space\n"
"downstream) shares of its threads' time; wait = the consumer's time blocked in\n"
"stk_loader_next; trainer = the simulated trainer's waiting share (with --step-ms).\n"
"\n"
"JSON (--json): {\"tool\", \"version\", \"stoker_version\",\n"
"  \"dataset\": {path, kind, records, payload_bytes, shards, folder, shards_path},\n"
"  \"machine\": {cores, cuda_devices, loadavg_start, loadavg_end},\n"
"  \"config\": {workers, layouts, cache, batch_size, mode, stage, size, repeat, seconds, epochs,\n"
"             step_ms, device, autotune},\n"
"  \"trainer\": {step_ms, mode, reason, device, calibration_target_ms, calibrated_ms}: mode\n"
"             \"gpu-kernel\" or \"sleep\" (null without --step-ms), reason why it sleeps,\n"
"             device the step kernel's GPU (-1: none), calibrated_ms the calibration\n"
"             kernel's measured length (null unless gpu-kernel),\n"
"  \"skipped_layouts\": [{layout, reason}], \"points\": [...],\n"
"  \"autotune\": {layout, workers, wait_fraction, max_tried, best_images_per_s} or null,\n"
"  \"memory\": {host_ring_bytes, pinned_bytes, device_bytes, reader_pool_bytes, max_rss_bytes},\n"
"  \"bottleneck\", \"verdict\", \"elapsed_s\"}.\n"
"Every point holds:\n"
"  layout, workers, mode, stage, cache, batch_size, size, step_ms, repeat   the point\n"
"  runs                      images/s of each repeat\n"
"  images_per_s, images_per_s_min, images_per_s_max   median, min, max over the repeats\n"
"  mb_per_s                  encoded payload MB/s (10^6 bytes)\n"
"  cpu_cores                 process CPU seconds per wall second\n"
"  read_busy, read_starved, read_blocked, read_threads           shares 0..1\n"
"  decode_busy, decode_starved, decode_blocked, decode_threads   (null: stage not run)\n"
"  stager_busy, stager_starved, stager_blocked, stager_threads\n"
"  wait_fraction             consumer time in stk_loader_next / wall (loader's clock)\n"
"  trainer_wait_fraction     the simulated trainer's waiting share (null when step_ms = 0)\n"
"  step_mode, step_reason, step_calibrated_ms   as in \"trainer\" (null when not applicable)\n"
"  step_kernel_ms            mean length of the step kernels in the window, from CUDA events\n"
"                            (null unless gpu-kernel)\n"
"  step_input                what the step kernels read: \"device-batch\", \"none\" (host\n"
"                            batches: the kernel only spins) (null unless gpu-kernel)\n"
"  wall_s, samples, batches  the measured window (of the median run)\n"
"  bad_records               substituted (bad) samples in that window\n"
"  disk_read_bytes           bytes this process read from storage (/proc/self/io)\n"
"  io_backend, io_direct, io_note   the read path actually used\n"
"  host_ring_bytes, pinned_bytes, device_bytes, reader_pool_bytes, device\n"
"  bottleneck                \"read\", \"decode\", \"stager\", \"trainer\" or \"fetch\"\n"
"  fetch                     s3:// only (else null): shards, cache_hits, cache_misses,\n"
"                            hit_rate, bytes, requests, retries, busy_s, starved_s,\n"
"                            link_bytes_per_s, inflight, open_s (the library's fetch\n"
"                            counters, cumulative since the open, the open's download in)\n"
"  error                     null, or why the point could not run (then no figures)\n"
"CSV (--csv): the same point fields, one row per point, header first; fetch's as\n"
"  fetch_shards ... fetch_open_s before error (empty for a local dataset).\n"
"\n"
"Exit status: 0 done; 1 the benchmark failed (dataset unreadable, every point failed, an\n"
"output file could not be written); 2 bad arguments (the message names the option).\n",
        f);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("loaderbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see loaderbench --help)\n", stderr);
    va_end(ap);
    return LB_EXIT_USAGE;
}

/* Parse an integer in [lo, hi]; 0 on success. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_workers(lb_config *cfg, const char *arg)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        return usage_error("--workers: list too long");
    cfg->nworkers = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (parse_int(tok, 1, 1024, &v) != 0)
            return usage_error("--workers: '%s' is not a worker count (an integer 1..1024)", tok);
        for (int i = 0; i < cfg->nworkers; i++)
            if (cfg->workers[i] == (int)v)
                return usage_error("--workers: %ld is listed twice", v);
        if (cfg->nworkers >= LB_MAX_WORKERS)
            return usage_error("--workers: more than %d counts", LB_MAX_WORKERS);
        cfg->workers[cfg->nworkers++] = (int)v;
    }
    if (cfg->nworkers == 0)
        return usage_error("--workers: empty list (e.g. --workers 1,2,4)");
    /* ascending, for the chart and autotune */
    for (int i = 1; i < cfg->nworkers; i++)
        for (int j = i; j > 0 && cfg->workers[j - 1] > cfg->workers[j]; j--) {
            int t = cfg->workers[j];
            cfg->workers[j] = cfg->workers[j - 1];
            cfg->workers[j - 1] = t;
        }
    return 0;
}

static int parse_layouts(lb_config *cfg, const char *arg)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        return usage_error("--layouts: list too long");
    cfg->nlayouts = 0;
    cfg->layouts_given = 1;
    if (strcmp(arg, "all") == 0) {
        for (int i = 0; i < LB_NLAYOUTS; i++)
            cfg->layouts[cfg->nlayouts++] = i;
        cfg->layouts_given = 0;
        return 0;
    }
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < LB_NLAYOUTS; i++)
            if (strcmp(tok, lb_layout_names[i]) == 0)
                found = i;
        if (found < 0)
            return usage_error("--layouts: unknown layout '%s' (files, shards-buffered, shards-direct, "
                               "lmdb-mmap or all)", tok);
        for (int i = 0; i < cfg->nlayouts; i++)
            if (cfg->layouts[i] == found)
                return usage_error("--layouts: '%s' is listed twice", tok);
        cfg->layouts[cfg->nlayouts++] = found;
    }
    if (cfg->nlayouts == 0)
        return usage_error("--layouts: empty list");
    return 0;
}

enum {
    O_WORKERS = 256, O_LAYOUTS, O_CACHE, O_BATCH, O_MODE, O_STAGE, O_REPEAT, O_SECONDS, O_EPOCHS,
    O_STEP, O_AUTOTUNE, O_JSON, O_CSV, O_PLOT, O_QUIET, O_CACHEDIR, O_SAMPLES, O_SEED, O_DEVICE,
    O_SIZE, O_HELP, O_VERSION, O_DELAY
};

static const struct option long_opts[] = {
    {"workers", required_argument, NULL, O_WORKERS},
    {"layouts", required_argument, NULL, O_LAYOUTS},
    {"cache", required_argument, NULL, O_CACHE},
    {"batch-size", required_argument, NULL, O_BATCH},
    {"mode", required_argument, NULL, O_MODE},
    {"stage", required_argument, NULL, O_STAGE},
    {"repeat", required_argument, NULL, O_REPEAT},
    {"seconds", required_argument, NULL, O_SECONDS},
    {"epochs", required_argument, NULL, O_EPOCHS},
    {"step-ms", required_argument, NULL, O_STEP},
    {"autotune", no_argument, NULL, O_AUTOTUNE},
    {"json", required_argument, NULL, O_JSON},
    {"csv", required_argument, NULL, O_CSV},
    {"plot", required_argument, NULL, O_PLOT},
    {"quiet", no_argument, NULL, O_QUIET},
    {"cache-dir", required_argument, NULL, O_CACHEDIR},
    {"sample-images", required_argument, NULL, O_SAMPLES},
    {"seed", required_argument, NULL, O_SEED},
    {"device", required_argument, NULL, O_DEVICE},
    {"size", required_argument, NULL, O_SIZE},
    {"read-delay-us", required_argument, NULL, O_DELAY},
    {"help", no_argument, NULL, O_HELP},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

static char g_cache_dir[4096];

/* Returns -1 to go on, else an exit status. */
static int parse_args(lb_config *cfg, int argc, char **argv)
{
    memset(cfg, 0, sizeof *cfg);
    long v;
    double d;
    cfg->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cfg->cores < 1)
        cfg->cores = 1;
    cfg->batch_size = 128;
    cfg->mode = STK_MODE_TRAIN;
    cfg->stage = STK_STAGE_FULL;
    cfg->repeat = 1;
    cfg->device = -2;
    cfg->size = 224;
    cfg->sample_images = 2000;
    for (int i = 0; i < LB_NLAYOUTS; i++)
        cfg->layouts[cfg->nlayouts++] = i;
    for (int w = 1; w < cfg->cores; w *= 2)
        cfg->workers[cfg->nworkers++] = w;
    cfg->workers[cfg->nworkers++] = cfg->cores;
    int seconds_given = 0;

    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case O_WORKERS:
            if (parse_workers(cfg, a) != 0)
                return LB_EXIT_USAGE;
            break;
        case O_LAYOUTS:
            if (parse_layouts(cfg, a) != 0)
                return LB_EXIT_USAGE;
            break;
        case O_CACHE:
            if (strcmp(a, "warm") == 0)
                cfg->cold = 0;
            else if (strcmp(a, "cold") == 0)
                cfg->cold = 1;
            else
                return usage_error("--cache: '%s' is neither warm nor cold", a);
            break;
        case O_BATCH:
            if (parse_int(a, 1, 65536, &v) != 0)
                return usage_error("--batch-size: '%s' is not an integer 1..65536", a);
            cfg->batch_size = (int)v;
            break;
        case O_MODE:
            if (strcmp(a, "train") == 0)
                cfg->mode = STK_MODE_TRAIN;
            else if (strcmp(a, "eval") == 0)
                cfg->mode = STK_MODE_EVAL;
            else
                return usage_error("--mode: '%s' is neither train nor eval", a);
            break;
        case O_STAGE:
            if (strcmp(a, "read") == 0)
                cfg->stage = STK_STAGE_READ;
            else if (strcmp(a, "decode") == 0)
                cfg->stage = STK_STAGE_DECODE;
            else if (strcmp(a, "full") == 0)
                cfg->stage = STK_STAGE_FULL;
            else
                return usage_error("--stage: '%s' is not read, decode or full", a);
            break;
        case O_REPEAT:
            if (parse_int(a, 1, LB_MAX_REPEAT, &v) != 0)
                return usage_error("--repeat: '%s' is not an integer 1..%d", a, LB_MAX_REPEAT);
            cfg->repeat = (int)v;
            break;
        case O_SECONDS:
            if (parse_double(a, 0.05, 86400.0, &d) != 0)
                return usage_error("--seconds: '%s' is not a number of seconds (0.05..86400)", a);
            cfg->seconds = d;
            seconds_given = 1;
            break;
        case O_EPOCHS:
            if (parse_int(a, 1, 1000000, &v) != 0)
                return usage_error("--epochs: '%s' is not an integer 1..1000000", a);
            cfg->epochs = (int)v;
            break;
        case O_STEP:
            if (parse_double(a, 0.0, 600000.0, &d) != 0)
                return usage_error("--step-ms: '%s' is not a number of milliseconds (0..600000)", a);
            cfg->step_ms = d;
            break;
        case O_AUTOTUNE:
            cfg->autotune = 1;
            break;
        case O_JSON:
            cfg->json_path = a;
            break;
        case O_CSV:
            cfg->csv_path = a;
            break;
        case O_PLOT:
            cfg->plot_path = a;
            break;
        case O_QUIET:
            cfg->quiet = 1;
            break;
        case O_CACHEDIR:
            if (!*a)
                return usage_error("--cache-dir: empty path");
            cfg->cache_dir = a;
            break;
        case O_SAMPLES:
            if (parse_int(a, 100, 100000, &v) != 0)
                return usage_error("--sample-images: '%s' is not an integer 100..100000", a);
            cfg->sample_images = (int)v;
            break;
        case O_SEED:
            if (parse_int(a, 0, LONG_MAX, &v) != 0)
                return usage_error("--seed: '%s' is not a non-negative integer", a);
            cfg->seed = (uint64_t)v;
            break;
        case O_DEVICE:
            if (strcmp(a, "cpu") == 0)
                cfg->device = -1;
            else if (parse_int(a, 0, 1023, &v) == 0)
                cfg->device = (int)v;
            else
                return usage_error("--device: '%s' is neither a CUDA device number nor cpu", a);
            break;
        case O_SIZE:
            if (parse_int(a, 16, 1024, &v) != 0)
                return usage_error("--size: '%s' is not an integer 16..1024", a);
            cfg->size = (int)v;
            break;
        case O_DELAY:
            if (parse_int(a, 0, 10000000, &v) != 0)
                return usage_error("--read-delay-us: '%s' is not an integer 0..10000000", a);
            cfg->read_delay_us = (int)v;
            break;
        case O_HELP:
            usage(stdout);
            return LB_EXIT_OK;
        case O_VERSION:
            printf("loaderbench (stoker %s)\n", stk_version_string());
            return LB_EXIT_OK;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc - 1)
        return usage_error("one DATASET at most (got '%s' and '%s')", argv[optind], argv[optind + 1]);
    if (optind == argc - 1) {
        cfg->dataset = argv[optind];
        struct stat st;
        if (!*cfg->dataset)
            return usage_error("DATASET: empty path");
        /* s3://bucket/prefix is the library's to check (fetched into the cache at open) */
        if (strncmp(cfg->dataset, "s3://", 5) != 0 && stat(cfg->dataset, &st) != 0)
            return usage_error("DATASET '%s': %s", cfg->dataset, strerror(errno));
    }
    if (seconds_given && cfg->epochs)
        return usage_error("--seconds and --epochs exclude each other");
    if (cfg->autotune && cfg->step_ms <= 0.0)
        return usage_error("--autotune needs --step-ms MS > 0 (the trainer step to keep fed)");
    if ((cfg->json_path && !*cfg->json_path) || (cfg->csv_path && !*cfg->csv_path) ||
        (cfg->plot_path && !*cfg->plot_path))
        return usage_error("--json/--csv/--plot: empty file name");
    if (cfg->cold && !cfg->epochs && !seconds_given)
        cfg->epochs = 1;
    if (!cfg->cache_dir) {
        const char *x = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (x && *x)
            snprintf(g_cache_dir, sizeof g_cache_dir, "%s/stoker", x);
        else if (home && *home)
            snprintf(g_cache_dir, sizeof g_cache_dir, "%s/.cache/stoker", home);
        else
            snprintf(g_cache_dir, sizeof g_cache_dir, "/tmp/stoker-cache-%ld", (long)getuid());
        cfg->cache_dir = g_cache_dir;
    }
    if (cfg->device == -2)
        cfg->device = stk_cuda_device_count() > 0 ? 0 : -1;
    return -1;
}

/* ---- the simulated trainer ---- */

void lb_trainer_setup(lb_config *cfg)
{
    cfg->step_mode = LB_STEP_NONE;
    cfg->step_reason[0] = '\0';
    cfg->step_device = -1;
    cfg->step_cal_target_ms = 0.0;
    cfg->step_cal_ms = -1.0;
    cfg->gpu = NULL;
    if (cfg->step_ms <= 0.0)
        return;
    /* the loader's device when it delivers device batches (the kernel reads them there), else
     * device 0: a trainer with host batches still steps on its GPU */
    int dev = cfg->device >= 0 ? cfg->device : 0;
    double target = cfg->step_ms < LB_CAL_MAX_MS ? cfg->step_ms : LB_CAL_MAX_MS;
    cfg->gpu = lb_gpu_open(dev, target, &cfg->step_cal_ms, cfg->step_reason, sizeof cfg->step_reason);
    if (cfg->gpu) {
        cfg->step_mode = LB_STEP_GPU;
        cfg->step_device = dev;
        cfg->step_cal_target_ms = target;
        int reads = cfg->stage == STK_STAGE_FULL && cfg->device >= 0;
        lb_note(cfg, "trainer step: a %g ms GPU kernel per batch on device %d (calibration: %g ms asked, %.3f ms "
                     "measured by CUDA events)%s",
                cfg->step_ms, dev, target, cfg->step_cal_ms,
                reads ? "; it reads each device batch" : "; host batches: the kernel only spins");
    } else {
        cfg->step_mode = LB_STEP_SLEEP;
        cfg->step_cal_ms = -1.0;
        lb_note(cfg, "trainer step: a %g ms sleep per batch, no GPU kernel: %s", cfg->step_ms, cfg->step_reason);
    }
}

const char *lb_step_input(const lb_config *cfg, const lb_point *p)
{
    if (cfg->step_mode != LB_STEP_GPU || p->failed || p->steps == 0)
        return NULL;
    if (p->steps_on_batch == p->steps)
        return "device-batch";
    return p->steps_on_batch == 0 ? "none" : "mixed";
}

/* ---- the dataset ---- */

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001B3ull;
    return h;
}

static int open_info(const char *path, int layout, stk_dataset_info *info, char *err, size_t cap)
{
    stk_dataset *d = NULL;
    int rc = stk_dataset_create(&d);
    if (rc == STK_OK)
        rc = stk_dataset_set(d, STK_P_LAYOUT, layout);
    if (rc == STK_OK)
        rc = stk_dataset_open(d, path);
    if (rc == STK_OK)
        rc = stk_dataset_info_get(d, info);
    if (rc != STK_OK) {
        const char *e = d ? stk_dataset_last_error(d) : "";
        snprintf(err, cap, "%s%s%s", stk_strerror(rc), e && *e ? ": " : "", e ? e : "");
    }
    stk_dataset_destroy(d);
    return rc;
}

static int wants_shards(const lb_config *cfg)
{
    for (int i = 0; i < cfg->nlayouts; i++)
        if (cfg->layouts[i] != LB_FILES)
            return 1;
    return 0;
}

static int setup_dataset(const lb_config *cfg, lb_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    char err[1024];
    stk_dataset_info info;
    if (!cfg->dataset) {
        if (lb_mkdirs(cfg->cache_dir) != 0) {
            fprintf(stderr, "loaderbench: cannot create the cache directory %s: %s\n", cfg->cache_dir,
                    strerror(errno));
            return -1;
        }
        if (lb_default_dataset(cfg, ds) != 0)
            return -1;
    } else {
        snprintf(ds->path, sizeof ds->path, "%s", cfg->dataset);
        int rc = open_info(cfg->dataset, STK_LAYOUT_AUTO, &info, err, sizeof err);
        if (rc != STK_OK) {
            fprintf(stderr, "loaderbench: cannot open dataset %s: %s\n", cfg->dataset, err);
            return -1;
        }
        if (info.layout == STK_LAYOUT_FILES) {
            ds->kind = LB_KIND_FOLDER;
            snprintf(ds->folder, sizeof ds->folder, "%s", cfg->dataset);
            if (wants_shards(cfg)) {
                char real[PATH_MAX];
                const char *src = realpath(cfg->dataset, real) ? real : cfg->dataset;
                const char *base = strrchr(src, '/');
                base = base && base[1] ? base + 1 : src;
                uint64_t h = fnv1a(src, 0xcbf29ce484222325ull);
                char key[64];
                snprintf(key, sizeof key, "%llu-%llu", (unsigned long long)info.records,
                         (unsigned long long)info.payload_bytes);
                h = fnv1a(key, h);
                snprintf(ds->shards, sizeof ds->shards, "%s/packed-%.200s-%016llx", cfg->cache_dir, base,
                         (unsigned long long)h);
                if (lb_mkdirs(cfg->cache_dir) != 0) {
                    fprintf(stderr, "loaderbench: cannot create the cache directory %s: %s\n",
                            cfg->cache_dir, strerror(errno));
                    return -1;
                }
                lb_note(cfg, "the shard layouts need shards: packing %s into %s (reused while complete)",
                        cfg->dataset, ds->shards);
                if (lb_ensure_packed(cfg, cfg->dataset, ds->shards, 0) != 0)
                    return -1;
            }
        } else {
            ds->kind = info.layout == STK_LAYOUT_LMDB ? LB_KIND_LMDB : LB_KIND_SHARDS;
            snprintf(ds->shards, sizeof ds->shards, "%s", cfg->dataset);
        }
    }
    /* describe what the benchmark reads */
    const char *main_path = ds->shards[0] ? ds->shards : ds->folder;
    int rc = open_info(main_path, STK_LAYOUT_AUTO, &info, err, sizeof err);
    if (rc != STK_OK) {
        fprintf(stderr, "loaderbench: cannot open dataset %s: %s\n", main_path, err);
        return -1;
    }
    ds->records = info.records;
    ds->payload_bytes = info.payload_bytes;
    ds->shard_count = info.shards;
    if (ds->records == 0) {
        fprintf(stderr, "loaderbench: dataset %s has no records\n", main_path);
        return -1;
    }
    for (int l = 0; l < LB_NLAYOUTS; l++) {
        ds->available[l] = l == LB_FILES ? ds->folder[0] != 0 : ds->shards[0] != 0;
        if (!ds->available[l])
            snprintf(ds->why_not[l], sizeof ds->why_not[l], "%s",
                     l == LB_FILES ? (ds->kind == LB_KIND_LMDB
                                          ? "a foreign LMDB has no file-per-image layout"
                                          : "a shard dataset has no file-per-image layout (give an "
                                            "ImageFolder to compare it)")
                                   : "no shards");
    }
    return 0;
}

/* ---- the sweep ---- */

static lb_point *find_point(lb_results *r, int layout, int workers)
{
    for (size_t i = 0; i < r->npoints; i++)
        if (r->points[i].layout == layout && r->points[i].workers == workers)
            return &r->points[i];
    return NULL;
}

static lb_point *add_point(lb_results *r, size_t *cap)
{
    if (r->npoints == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        lb_point *p = realloc(r->points, nc * sizeof *p);
        if (!p)
            return NULL;
        r->points = p;
        *cap = nc;
    }
    lb_point *p = &r->points[r->npoints++];
    memset(p, 0, sizeof *p);
    return p;
}

static void track_peak(lb_results *r, const lb_point *p)
{
    if (p->failed)
        return;
    if (p->host_ring_bytes > r->peak_ring)
        r->peak_ring = p->host_ring_bytes;
    if (p->pinned_bytes > r->peak_pinned)
        r->peak_pinned = p->pinned_bytes;
    if (p->device_bytes > r->peak_device)
        r->peak_device = p->device_bytes;
    if (p->reader_pool_bytes > r->peak_pool)
        r->peak_pool = p->reader_pool_bytes;
}

/* Run (or reuse) the point LAYOUT × WORKERS. NULL on allocation failure. */
static void report_point(const lb_config *cfg, lb_results *r, const lb_point *p)
{
    track_peak(r, p);
    if (p->failed)
        lb_note(cfg, "%s with %d workers failed: %s", lb_layout_names[p->layout], p->workers, p->error);
    else if (p->bad_records > 0)
        lb_note(cfg, "%s with %d workers: %llu bad records substituted in the window (first: %s)",
                lb_layout_names[p->layout], p->workers, (unsigned long long)p->bad_records, p->first_bad);
}

static void run_label(char *buf, size_t cap, const lb_config *cfg, const lb_point *p, int rep, int index,
                      int total)
{
    if (total > 0)
        snprintf(buf, cap, "[%d/%d] %s, %d worker%s, run %d/%d", index, total, lb_layout_names[p->layout],
                 p->workers, p->workers == 1 ? "" : "s", rep + 1, cfg->repeat);
    else
        snprintf(buf, cap, "[autotune %d] %s, %d worker%s, run %d/%d", index, lb_layout_names[p->layout],
                 p->workers, p->workers == 1 ? "" : "s", rep + 1, cfg->repeat);
}

/* The point LAYOUT × WORKERS, measured now (all its repeats) unless it was already. NULL on
 * allocation failure. */
static lb_point *measure(const lb_config *cfg, const lb_dataset *ds, lb_results *r, size_t *cap, int layout,
                         int workers, int index)
{
    lb_point *have = find_point(r, layout, workers);
    if (have)
        return have;
    lb_point *p = add_point(r, cap);
    if (!p)
        return NULL;
    lb_point_init(cfg, p, layout, workers);
    for (int rep = 0; rep < cfg->repeat && !p->failed; rep++) {
        char label[160];
        run_label(label, sizeof label, cfg, p, rep, index, 0);
        lb_point_run(cfg, ds, p, rep, label);
    }
    lb_point_finish(cfg, p);
    report_point(cfg, r, p);
    return p;
}

/* Fewest workers that keep the trainer fed (trainer wait < 5%), by bisection over 1..max:
 * the wait falls as workers are added. */
static void autotune(const lb_config *cfg, const lb_dataset *ds, lb_results *r, size_t *cap)
{
    const double fed = 0.05;
    int layout = -1;
    double best = -1.0;
    for (size_t i = 0; i < r->npoints; i++) {
        const lb_point *p = &r->points[i];
        if (!p->failed && p->images_per_s > best) {
            best = p->images_per_s;
            layout = p->layout;
        }
    }
    if (layout < 0)
        return;
    int maxw = cfg->workers[cfg->nworkers - 1];
    if (maxw < 2 * cfg->cores)
        maxw = 2 * cfg->cores;
    lb_autotune *t = &r->tune;
    t->done = 1;
    t->layout = layout;
    t->max_tried = maxw;
    int lo = 1, hi = maxw, found = 0;
    double found_wait = 0.0;
    int step = 0;
    /* is the largest count enough? */
    lb_point *p = measure(cfg, ds, r, cap, layout, hi, ++step);
    if (!p)
        return;
    if (p->failed || p->trainer_wait_fraction >= fed) {
        t->workers = 0;
    } else {
        found = hi;
        found_wait = p->trainer_wait_fraction;
        hi = hi - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            p = measure(cfg, ds, r, cap, layout, mid, ++step);
            if (!p)
                return;
            if (!p->failed && p->trainer_wait_fraction < fed) {
                found = mid;
                found_wait = p->trainer_wait_fraction;
                hi = mid - 1;
            } else {
                lo = mid + 1;
            }
        }
        t->workers = found;
        t->wait_fraction = found_wait;
    }
    for (size_t i = 0; i < r->npoints; i++)
        if (r->points[i].layout == layout && !r->points[i].failed && r->points[i].images_per_s > t->best_ips)
            t->best_ips = r->points[i].images_per_s;
}

int main(int argc, char **argv)
{
    lb_config cfg;
    int rc = parse_args(&cfg, argc, argv);
    if (rc >= 0)
        return rc;
    if (stk_version() != STK_VERSION_NUMBER) {
        fprintf(stderr, "loaderbench: libstoker %u does not match the header's %d\n", stk_version(),
                STK_VERSION_NUMBER);
        return LB_EXIT_FAIL;
    }
    double t_start = lb_now();
    double load_start = -1.0;
    if (getloadavg(&load_start, 1) != 1)
        load_start = -1.0;
    lb_dataset ds;
    if (setup_dataset(&cfg, &ds) != 0)
        return LB_EXIT_FAIL;
    lb_trainer_setup(&cfg);

    /* layouts to run */
    int run_layouts[LB_NLAYOUTS], nrun = 0;
    for (int i = 0; i < cfg.nlayouts; i++) {
        int l = cfg.layouts[i];
        if (ds.available[l])
            run_layouts[nrun++] = l;
        else
            lb_note(&cfg, "skipping the %s layout: %s", lb_layout_names[l], ds.why_not[l]);
    }
    if (nrun == 0) {
        fprintf(stderr, "loaderbench: none of the requested layouts is available for %s\n", ds.path);
        return LB_EXIT_FAIL;
    }
    int total = nrun * cfg.nworkers;
    if (cfg.seconds <= 0.0 && !cfg.epochs) {
        /* the whole run, set-up included, fits in LB_BUDGET_S: what the set-up (synthesis,
         * packing) left is shared by the runs, less each run's start-up and pipeline fill */
        int runs = total * cfg.repeat;
        double left = LB_BUDGET_S - (lb_now() - t_start);
        double s = left / runs - LB_RUN_OVERHEAD_S;
        cfg.seconds = s < LB_MIN_RUN_S ? LB_MIN_RUN_S : s > 10.0 ? 10.0 : s;
    }
    char hb[32];
    lb_note(&cfg, "dataset %s: %llu records, %s encoded, %u shards; %d layouts x %d worker counts, "
                  "%s per run, %s cache, %s, stage %s, batch %d%s",
            ds.path, (unsigned long long)ds.records, lb_human_bytes(ds.payload_bytes, hb, sizeof hb),
            ds.shard_count, nrun, cfg.nworkers, cfg.epochs ? "epochs" : "seconds",
            cfg.cold ? "cold" : "warm", cfg.mode == STK_MODE_EVAL ? "eval" : "train",
            cfg.stage == STK_STAGE_READ ? "read" : cfg.stage == STK_STAGE_DECODE ? "decode" : "full",
            cfg.batch_size, cfg.device >= 0 && cfg.stage == STK_STAGE_FULL ? ", GPU batches" : ", host batches");
    uint64_t avail = (uint64_t)sysconf(_SC_AVPHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    if (!cfg.cold && ds.payload_bytes * (ds.folder[0] && ds.shards[0] ? 2 : 1) > avail / 2) {
        lb_note(&cfg, "the dataset (%s) does not fit in half the free memory: the page cache cannot "
                      "hold it, so 'warm' runs read partly from storage",
                lb_human_bytes(ds.payload_bytes, hb, sizeof hb));
    } else if (!cfg.cold) {
        lb_progress(&cfg, 0, "warming the page cache ...");
        for (int i = 0; i < nrun; i++) {
            const char *p = run_layouts[i] == LB_FILES ? ds.folder : ds.shards;
            lb_warm_cache(p);
        }
        lb_progress(&cfg, 0, "%s", "");
    }

    lb_results res;
    memset(&res, 0, sizeof res);
    size_t cap = 0;
    /* every point of the sweep, then their runs interleaved: repeat after repeat, worker count
     * after worker count, layout after layout — so a drift of the machine (other load, the
     * disk's mood) touches every layout and every point alike */
    for (int w = 0; w < cfg.nworkers; w++)
        for (int i = 0; i < nrun; i++) {
            lb_point *p = add_point(&res, &cap);
            if (!p) {
                fprintf(stderr, "loaderbench: out of memory\n");
                return LB_EXIT_FAIL;
            }
            lb_point_init(&cfg, p, run_layouts[i], cfg.workers[w]);
        }
    int nsweep = (int)res.npoints, index = 0;
    for (int rep = 0; rep < cfg.repeat; rep++)
        for (int k = 0; k < nsweep; k++) {
            lb_point *p = &res.points[k];
            char label[160];
            run_label(label, sizeof label, &cfg, p, rep, ++index, nsweep * cfg.repeat);
            lb_point_run(&cfg, &ds, p, rep, label);
        }
    for (int k = 0; k < nsweep; k++) {
        lb_point_finish(&cfg, &res.points[k]);
        report_point(&cfg, &res, &res.points[k]);
    }
    if (cfg.autotune)
        autotune(&cfg, &ds, &res, &cap);
    lb_progress(&cfg, 1, "%s", "");

    size_t ok = 0;
    for (size_t i = 0; i < res.npoints; i++)
        ok += !res.points[i].failed;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        res.max_rss_kb = ru.ru_maxrss;
    res.total_s = lb_now() - t_start;
    res.load_start = load_start;
    if (getloadavg(&res.load_end, 1) != 1)
        res.load_end = -1.0;
    lb_make_verdict(&cfg, &ds, &res);
    lb_print_table(stdout, &cfg, &ds, &res);

    int status = ok ? LB_EXIT_OK : LB_EXIT_FAIL;
    if (fflush(stdout) != 0 || ferror(stdout)) { /* the report is lost: not a success */
        fprintf(stderr, "loaderbench: cannot write the report to standard output: %s\n", strerror(errno));
        status = LB_EXIT_FAIL;
    }
    if (cfg.json_path && lb_write_json(cfg.json_path, &cfg, &ds, &res) != 0)
        status = LB_EXIT_FAIL;
    if (cfg.csv_path && lb_write_csv(cfg.csv_path, &cfg, &ds, &res) != 0)
        status = LB_EXIT_FAIL;
    if (cfg.plot_path && lb_write_svg(cfg.plot_path, &cfg, &ds, &res) != 0)
        status = LB_EXIT_FAIL;
    if (!ok)
        fprintf(stderr, "loaderbench: every point failed\n");
    lb_gpu_close(cfg.gpu);
    free(res.points);
    return status;
}
