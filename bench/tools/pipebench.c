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
 * images_per_s (wall clock) and images_per_cpu_s (images per second of the process's CPU time,
 * all threads: robust when other processes share the cores) are medians over epochs 2..E (epoch 1
 * includes start-up), or epoch 1 if E = 1.
 */
#include "stoker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Process CPU time (all threads), user + system. */
static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
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
    double rss_first = 0, rss_last = 0;
    uint64_t checksum = 0;
    for (int e = 0; e < epochs; e++) {
        double t0 = now(), c0 = cpu_now();
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
        double dt = now() - t0, dc = cpu_now() - c0;
        rate[e] = (double)n / dt;
        cpu_rate[e] = (double)n / dc;
        rss_last = status_mib("VmRSS");
        if (e == 0)
            rss_first = rss_last;
        if (!quiet)
            printf("epoch %d: %llu images in %.2f s = %.1f images/s (%llu substituted); %.2f CPU-s = %.1f "
                   "images per CPU-second; RSS %.1f MiB\n",
                   e + 1, (unsigned long long)n, dt, rate[e], (unsigned long long)bad, dc, cpu_rate[e], rss_last);
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
    int m = from + (epochs - from) / 2, even = (epochs - from) % 2 == 0;
    double med = even ? 0.5 * (rate[m - 1] + rate[m]) : rate[m];
    double cmed = even ? 0.5 * (cpu_rate[m - 1] + cpu_rate[m]) : cpu_rate[m];
    printf("RESULT mode=%s workers=%d images_per_s=%.1f images_per_cpu_s=%.1f peak_rss_mib=%.1f rss_first_mib=%.1f "
           "rss_last_mib=%.1f checksum=%llu\n",
           eval ? "eval" : "train", (int)w, med, cmed, status_mib("VmHWM"), rss_first, rss_last,
           (unsigned long long)checksum);
    free(rate);
    free(cpu_rate);
    stk_loader_destroy(h);
    return 0;
}
