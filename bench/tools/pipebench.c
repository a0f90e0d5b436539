/* SPDX-License-Identifier: MIT */
/*
 * pipebench — the stoker pipeline as a trainer sees it, through the public API only: open a
 * dataset, run E epochs of next/release as fast as the loader delivers, and print images/s per
 * epoch, RSS after each epoch (it must stay flat) and the peak RSS, then the loader's report.
 *
 *   pipebench DATASET [--mode train|eval] [--workers T] [--batch B] [--size S] [--epochs E]
 *                     [--layout nhwc|nchw] [--direct 0|1] [--prefetch K] [--quiet]
 *
 * Defaults: train, T = online cores, B = 256, S = 224, E = 3, NHWC (the uint8 HWC slot is what the
 * stager copies to a GPU; NCHW adds a CPU transpose), buffered reads (warm page cache), K = 4.
 * The last line is machine-readable:
 *   RESULT mode=train workers=2 images_per_s=.. images_per_cpu_s=.. peak_rss_mib=.. rss_first_mib=..
 *          rss_last_mib=..
 *          rss_last_mib=.. decode_cpu_share=.. ctx_per_image=..
 * images_per_s (wall clock) and images_per_cpu_s (images per second of the process's CPU time,
 * all threads: robust when other processes share the cores) are medians over epochs 2..E (epoch 1
 * includes start-up), or epoch 1 if E = 1. So are decode_cpu_share, the part of the process's
 * CPU time spent by the decode workers (threads named stk-dec*, from /proc/self/task: the rest is
 * the reader, queues, the consumer and start-up), and ctx_per_image, voluntary + involuntary
 * context switches of all threads (getrusage) per image.
 */
#include "stoker.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Process CPU time (all threads), user + system. */
static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* Context switches of the process so far (all threads, voluntary + involuntary). */
static double ctx_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

/* CPU seconds (user + system) of this process's threads whose name starts with PREFIX, as
 * /proc/self/task/<tid>/stat tells them, and the ids of those threads (up to 64) with their
 * CPU times, so that a later call can count only what was spent in between. */
#define MAX_TRACKED 64
typedef struct thread_cpu {
    int n;
    long tid[MAX_TRACKED];
    double cpu[MAX_TRACKED];
} thread_cpu;

static void threads_cpu(const char *prefix, thread_cpu *out)
{
    out->n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    double tick = (double)sysconf(_SC_CLK_TCK);
    struct dirent *e;
    while ((e = readdir(d)) && out->n < MAX_TRACKED) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (!open || !close || strncmp(open + 1, prefix, strlen(prefix)) != 0)
            continue;
        /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
        unsigned long ut = 0, st = 0;
        if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
            continue;
        out->tid[out->n] = atol(e->d_name);
        out->cpu[out->n] = (double)(ut + st) / tick;
        out->n++;
    }
    closedir(d);
}

/* CPU seconds the threads in B spent since A (threads new in B count from zero). */
static double threads_cpu_since(const thread_cpu *a, const thread_cpu *b)
{
    double sum = 0;
    for (int i = 0; i < b->n; i++) {
        double before = 0;
        for (int j = 0; j < a->n; j++)
            if (a->tid[j] == b->tid[i])
                before = a->cpu[j];
        sum += b->cpu[i] - before;
    }
    return sum;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* VmRSS or VmHWM of this process in MiB. */
static double status_mib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    double v = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = atof(line + n + 1) / 1024.0;
    fclose(f);
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define CHECK(expr)                                                                            \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        if (rc_ != STK_OK) {                                                                   \
            fprintf(stderr, "pipebench: %s: %s (%s)\n", #expr, stk_strerror(rc_),              \
                    stk_loader_last_error(h));                                                 \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    const char *path = NULL;
    int eval = 0, workers = 0, batch = 256, size = 224, epochs = 3, nchw = 0, direct = 0, prefetch = 4,
        quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--mode") && v) {
            eval = !strcmp(v, "eval");
            i++;
        } else if (!strcmp(a, "--workers") && v) {
            workers = atoi(v);
            i++;
        } else if (!strcmp(a, "--batch") && v) {
            batch = atoi(v);
            i++;
        } else if (!strcmp(a, "--size") && v) {
            size = atoi(v);
            i++;
        } else if (!strcmp(a, "--epochs") && v) {
            epochs = atoi(v);
            i++;
        } else if (!strcmp(a, "--layout") && v) {
            nchw = !strcmp(v, "nchw");
            i++;
        } else if (!strcmp(a, "--direct") && v) {
            direct = atoi(v);
            i++;
        } else if (!strcmp(a, "--prefetch") && v) {
            prefetch = atoi(v);
            i++;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] != '-' && !path) {
            path = a;
        } else {
            fprintf(stderr, "usage: pipebench DATASET [--mode train|eval] [--workers T] [--batch B] "
                            "[--size S] [--epochs E] [--layout nhwc|nchw] [--direct 0|1] [--prefetch K] "
                            "[--quiet]\n");
            return 2;
        }
    }
    if (!path || epochs < 1) {
        fprintf(stderr, "pipebench: a dataset path is needed (and --epochs >= 1)\n");
        return 2;
    }
    stk_loader *h = NULL;
    if (stk_loader_create(&h) != STK_OK)
        return 1;
    CHECK(stk_loader_set(h, STK_P_MODE, eval ? STK_MODE_EVAL : STK_MODE_TRAIN));
    CHECK(stk_loader_set(h, STK_P_SHUFFLE, eval ? 0 : 1));
    if (workers > 0)
        CHECK(stk_loader_set(h, STK_P_WORKERS, workers));
    CHECK(stk_loader_set(h, STK_P_BATCH_SIZE, batch));
    CHECK(stk_loader_set(h, STK_P_OUT_HEIGHT, size));
    CHECK(stk_loader_set(h, STK_P_OUT_WIDTH, size));
    CHECK(stk_loader_set(h, STK_P_OUT_LAYOUT, nchw ? STK_NCHW : STK_NHWC));
    CHECK(stk_loader_set(h, STK_P_IO_DIRECT, direct));
    CHECK(stk_loader_set(h, STK_P_PREFETCH, prefetch));
    CHECK(stk_loader_open(h, path));
    CHECK(stk_loader_start(h));
    double w;
    stk_loader_get(h, STK_P_WORKERS, &w);
    double *rate = calloc((size_t)epochs, sizeof(double)), *cpu_rate = calloc((size_t)epochs, sizeof(double));
    double *dec_share = calloc((size_t)epochs, sizeof(double)), *ctx_img = calloc((size_t)epochs, sizeof(double));
    double rss_first = 0, rss_last = 0;
    uint64_t checksum = 0;
    for (int e = 0; e < epochs; e++) {
        thread_cpu d0, d1;
        threads_cpu("stk-dec", &d0);
        double t0 = now(), c0 = cpu_now(), x0 = ctx_now();
        uint64_t n = 0, bad = 0;
        const stk_batch *b;
        int rc;
        while ((rc = stk_loader_next(h, NULL, -1, &b)) == STK_OK) {
            n += b->size;
            bad += b->bad;
            /* touch one byte per sample so the consumer really reads the batch */
            for (uint32_t i = 0; i < b->size; i++)
                checksum += ((const uint8_t *)b->images)[(size_t)i * b->sample_bytes + (size_t)(e + i) % b->sample_bytes];
            CHECK(stk_loader_release(h, b, NULL));
        }
        if (rc != STK_END)
            CHECK(rc);
        double dt = now() - t0, dc = cpu_now() - c0, dx = ctx_now() - x0;
        threads_cpu("stk-dec", &d1);
        double ddec = threads_cpu_since(&d0, &d1);
        rate[e] = (double)n / dt;
        cpu_rate[e] = (double)n / dc;
        dec_share[e] = dc > 0 ? ddec / dc : 0;
        ctx_img[e] = n ? dx / (double)n : 0;
        rss_last = status_mib("VmRSS");
        if (e == 0)
            rss_first = rss_last;
        if (!quiet)
            printf("epoch %d: %llu images in %.2f s = %.1f images/s (%llu substituted); %.2f CPU-s = %.1f "
                   "images per CPU-second, %.1f%% of it in the decode workers; %.2f context switches "
                   "per image; RSS %.1f MiB\n",
                   e + 1, (unsigned long long)n, dt, rate[e], (unsigned long long)bad, dc, cpu_rate[e],
                   100 * dec_share[e], ctx_img[e], rss_last);
        fflush(stdout);
    }
    if (!quiet) {
        size_t need = stk_loader_report(h, NULL, 0);
        char *rep = malloc(need + 1);
        stk_loader_report(h, rep, need + 1);
        fputs(rep, stdout);
        free(rep);
    }
    int from = epochs > 1 ? 1 : 0;
    qsort(rate + from, (size_t)(epochs - from), sizeof(double), cmp_double);
    qsort(cpu_rate + from, (size_t)(epochs - from), sizeof(double), cmp_double);
    qsort(dec_share + from, (size_t)(epochs - from), sizeof(double), cmp_double);
    qsort(ctx_img + from, (size_t)(epochs - from), sizeof(double), cmp_double);
    int m = from + (epochs - from) / 2, even = (epochs - from) % 2 == 0;
#define MEDIAN(a) (even ? 0.5 * ((a)[m - 1] + (a)[m]) : (a)[m])
    printf("RESULT mode=%s workers=%d images_per_s=%.1f images_per_cpu_s=%.1f peak_rss_mib=%.1f rss_first_mib=%.1f "
           "rss_last_mib=%.1f checksum=%llu decode_cpu_share=%.4f ctx_per_image=%.3f\n",
           eval ? "eval" : "train", (int)w, MEDIAN(rate), MEDIAN(cpu_rate), status_mib("VmHWM"), rss_first,
           rss_last, (unsigned long long)checksum, MEDIAN(dec_share), MEDIAN(ctx_img));
#undef MEDIAN
    free(rate);
    free(cpu_rate);
    free(dec_share);
    free(ctx_img);
    stk_loader_destroy(h);
    return 0;
}
