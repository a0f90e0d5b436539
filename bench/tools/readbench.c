/* SPDX-License-Identifier: MIT */
/*
 * readbench — one pass of stoker's read stage over a dataset, in a random order, and what it cost.
 *
 *   readbench DATASET [--backend auto|uring|pread|mmap] [--direct 0|1] [--qd N] [--threads N]
 *             [--fraction F] [--seed S] [--no-crc] [--drop] [--layout auto|shards|files|lmdb]
 *
 * Opens DATASET (offset table), optionally drops the page cache of every shard / image file
 * (posix_fadvise DONTNEED; the pages still resident are counted with mincore before and after),
 * then reads a random FRACTION of the records (the first F*n positions of the epoch-0 permutation
 * of SEED: the same records as `mdbget --fraction F --seed S`) through the reader and prints one
 * line of key=value figures: records, payload and disk bytes, wall seconds, records/s, MB/s
 * (payload and disk, 1 MB = 1e6 bytes), process CPU seconds (user+sys, all threads, io_uring
 * workers included) and CPU seconds per GB of disk bytes.
 */
#include "common.h"
#include "dataset.h"
#include "order.h"
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct bench {
    stk__plan plan;
    uint64_t limit;
    _Atomic uint64_t next;
    _Atomic uint64_t done, ok, errors, bytes;
    stk__reader *r;
    char first_error[200];
    pthread_mutex_t mu;
} bench;

static int work(void *user, uint64_t *pos, uint64_t *index, uint64_t *epoch)
{
    bench *b = user;
    uint64_t p = atomic_fetch_add(&b->next, 1);
    if (p >= b->limit)
        return 0;
    *pos = p;
    *index = stk__plan_index(&b->plan, p);
    *epoch = 0;
    return 1;
}

static int sink(void *user, stk__read *rd)
{
    bench *b = user;
    if (rd->status == STK_OK) {
        atomic_fetch_add(&b->ok, 1);
        atomic_fetch_add(&b->bytes, rd->len);
    } else {
        atomic_fetch_add(&b->errors, 1);
        pthread_mutex_lock(&b->mu);
        if (!b->first_error[0])
            snprintf(b->first_error, sizeof(b->first_error), "index %llu: %s: %s",
                     (unsigned long long)rd->index, stk_status_name(rd->status), rd->detail);
        pthread_mutex_unlock(&b->mu);
    }
    stk__reader_release(b->r, rd);
    atomic_fetch_add(&b->done, 1);
    return STK_OK;
}

/* Resident pages of PATH (mincore); DROP first drops them (posix_fadvise DONTNEED). */
static uint64_t resident(const char *path, int drop, uint64_t *pages)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    uint64_t res = 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        if (drop)
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        size_t ps = stk__page_size(), n = ((size_t)st.st_size + ps - 1) / ps;
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *vec = malloc(n);
        if (m != MAP_FAILED && vec && mincore(m, (size_t)st.st_size, vec) == 0)
            for (size_t i = 0; i < n; i++)
                res += vec[i] & 1;
        free(vec);
        if (m != MAP_FAILED)
            munmap(m, (size_t)st.st_size);
        *pages += n;
    }
    close(fd);
    return res;
}

static uint64_t resident_all(const stk_dataset *ds, int drop, uint64_t *pages)
{
    uint64_t res = 0;
    *pages = 0;
    if (ds->layout == STK_LAYOUT_FILES) {
        for (size_t i = 0; i < ds->files.n; i++)
            res += resident(ds->files.paths[i], drop, pages);
    } else {
        for (uint32_t i = 0; i < ds->nshards; i++) {
            char p[4200];
            struct stat st;
            if (stat(ds->shards[i].path, &st) == 0 && S_ISDIR(st.st_mode))
                snprintf(p, sizeof(p), "%s/data.mdb", ds->shards[i].path);
            else
                snprintf(p, sizeof(p), "%s", ds->shards[i].path);
            res += resident(p, drop, pages);
        }
    }
    return res;
}

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

static void usage(void)
{
    fprintf(stderr, "usage: readbench DATASET [--backend auto|uring|pread|mmap] [--direct 0|1] [--qd N]\n"
                    "                 [--threads N] [--fraction F] [--seed S] [--no-crc] [--drop]\n"
                    "                 [--layout auto|shards|files|lmdb]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *path = argv[1];
    stk__reader_config c;
    memset(&c, 0, sizeof(c));
    c.backend = STK_IO_AUTO;
    c.direct = 1;
    c.queue_depth = 32;
    c.inflight_bytes = (size_t)64 << 20;
    c.verify_crc = 1;
    c.io_threads = 8;
    double fraction = 1.0;
    uint64_t seed = 0;
    int drop = 0, layout = STK_LAYOUT_AUTO;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--backend") && v) {
            c.backend = !strcmp(v, "uring") ? STK_IO_URING : !strcmp(v, "pread") ? STK_IO_PREAD
                        : !strcmp(v, "mmap") ? STK_IO_MMAP : STK_IO_AUTO;
            i++;
        } else if (!strcmp(a, "--direct") && v) {
            c.direct = atoi(v);
            i++;
        } else if (!strcmp(a, "--qd") && v) {
            c.queue_depth = atoi(v);
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            c.io_threads = atoi(v);
            i++;
        } else if (!strcmp(a, "--fraction") && v) {
            fraction = atof(v);
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            seed = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--layout") && v) {
            layout = !strcmp(v, "shards") ? STK_LAYOUT_SHARDS : !strcmp(v, "files") ? STK_LAYOUT_FILES
                     : !strcmp(v, "lmdb") ? STK_LAYOUT_LMDB : STK_LAYOUT_AUTO;
            i++;
        } else if (!strcmp(a, "--no-crc")) {
            c.verify_crc = 0;
        } else if (!strcmp(a, "--drop")) {
            drop = 1;
        } else {
            usage();
        }
    }
    stk_dataset *ds;
    stk_dataset_create(&ds);
    stk_dataset_set(ds, STK_P_LAYOUT, layout);
    double t_open = stk__now();
    if (stk_dataset_open(ds, path) != STK_OK) {
        fprintf(stderr, "readbench: %s\n", stk_dataset_last_error(ds));
        return 1;
    }
    t_open = stk__now() - t_open;
    bench b;
    memset(&b, 0, sizeof(b));
    pthread_mutex_init(&b.mu, NULL);
    if (stk__plan_init(&b.plan, ds->count, seed, 0, 1, 0, 1, 0) != STK_OK)
        return 1;
    b.limit = (uint64_t)(fraction * (double)ds->count + 0.5);
    if (b.limit > ds->count)
        b.limit = ds->count;
    char err[STK__ERRLEN];
    if (stk__reader_create(&b.r, ds, &c, err) != STK_OK) {
        fprintf(stderr, "readbench: %s\n", err);
        return 1;
    }
    uint64_t pages, res_before = resident_all(ds, drop, &pages);
    uint64_t res_dropped = drop ? resident_all(ds, 0, &pages) : res_before;

    double cpu0 = cpu_now(), t0 = stk__now();
    if (stk__reader_start(b.r, work, sink, &b, err) != STK_OK) {
        fprintf(stderr, "readbench: %s\n", err);
        return 1;
    }
    while (atomic_load(&b.done) < b.limit)
        usleep(2000);
    stk__reader_stop(b.r);
    double wall = stk__now() - t0, cpu = cpu_now() - cpu0;
    uint64_t res_after = resident_all(ds, 0, &pages);
    stk__reader_info info;
    stk__reader_get_info(b.r, &info);
    stk_stage_stats st;
    stk__clock_snapshot(stk__reader_clock(b.r), &st);
    uint64_t bytes = atomic_load(&b.bytes);
    printf("tool=readbench backend=%s direct=%d qd=%d threads=%d records=%llu errors=%llu payload_bytes=%llu "
           "disk_bytes=%llu wall_s=%.4f rec_s=%.1f payload_MB_s=%.1f disk_MB_s=%.1f cpu_s=%.4f "
           "cpu_s_per_GB=%.4f open_s=%.4f resident_pages_before=%llu after_drop=%llu after=%llu "
           "file_pages=%llu pool_MiB=%.1f inflight_max=%u busy_s=%.3f starved_s=%.3f blocked_s=%.3f "
           "note=\"%s\"%s%s\n",
           info.backend == STK_IO_URING ? "uring" : info.backend == STK_IO_MMAP ? "mmap"
           : ds->layout == STK_LAYOUT_FILES ? "files" : "pread",
           info.direct, c.queue_depth, c.io_threads, (unsigned long long)atomic_load(&b.ok),
           (unsigned long long)atomic_load(&b.errors), (unsigned long long)bytes,
           (unsigned long long)info.disk_bytes, wall, (double)atomic_load(&b.ok) / wall, (double)bytes / wall / 1e6,
           (double)info.disk_bytes / wall / 1e6, cpu, cpu / ((double)info.disk_bytes / 1e9), t_open,
           (unsigned long long)res_before, (unsigned long long)res_dropped, (unsigned long long)res_after,
           (unsigned long long)pages, (double)info.pool_bytes / 1048576.0, info.inflight_max, st.busy_s,
           st.starved_s, st.blocked_s, info.note, b.first_error[0] ? " first_error=" : "", b.first_error);
    stk__reader_destroy(b.r);
    stk_dataset_destroy(ds);
    return atomic_load(&b.errors) ? 3 : 0;
}
