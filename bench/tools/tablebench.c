/* SPDX-License-Identifier: MIT */
/*
 * tablebench — how long stk_dataset_open takes to build the offset table, cold and warm, and how
 * much of the shard it reads (mincore).
 *
 *   tablebench build DIR [RECORDS=1000000] [PAYLOAD=2100]
 *       write a dataset of RECORDS records of PAYLOAD bytes each into DIR (one shard per 8 GiB)
 *   tablebench open DIR [REPEATS=5]
 *       per repeat: drop the shards' pages from the page cache (posix_fadvise DONTNEED, checked
 *       with mincore), time stk_dataset_open (cold), count the shard pages now resident, then
 *       time a second open (warm). Prints each repeat and the medians.
 *
 * PAYLOAD 2100 makes every value an overflow page of its own (as real images are: values larger
 * than about half a page), so the payload pages and the leaf/branch pages are distinct and
 * "payload pages read" is measurable: resident pages after a cold open should be about the
 * leaf + branch pages of `records` (+ meta), not the file.
 *
 * Figures measured with it: docs/PERFORMANCE.md, "dataset".
 */
#include "dataset.h"
#include "stoker.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t resident_pages(const char *path, uint64_t *total)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    struct stat st;
    fstat(fd, &st);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t n = ((size_t)st.st_size + ps - 1) / ps;
    *total += n;
    if (!n) {
        close(fd);
        return 0;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return 0;
    unsigned char *vec = malloc(n);
    uint64_t r = 0;
    if (vec && mincore(m, (size_t)st.st_size, vec) == 0)
        for (size_t i = 0; i < n; i++)
            r += vec[i] & 1;
    free(vec);
    munmap(m, (size_t)st.st_size);
    return r;
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int build(const char *dir, uint64_t n, size_t payload)
{
    stk_writer *w;
    stk_writer_create(&w);
    stk_writer_set(w, STK_W_SHARD_BYTES, (int64_t)8 << 30);
    stk_writer_set(w, STK_W_FORCE, 1);
    const char *cls[] = {"a", "b", "c"};
    stk_writer_set_classes(w, cls, 3);
    if (stk_writer_open(w, dir)) {
        fprintf(stderr, "open: %s\n", stk_writer_last_error(w));
        return 1;
    }
    uint8_t *p = malloc(payload);
    double t0 = stk__now();
    for (uint64_t i = 0; i < n; i++) {
        for (size_t k = 0; k < payload; k += 64)
            p[k] = (uint8_t)(i + k);
        memcpy(p, &i, sizeof i < payload ? sizeof i : payload);
        if (stk_writer_add(w, p, payload, (int32_t)(i % 3), NULL)) {
            fprintf(stderr, "add: %s\n", stk_writer_last_error(w));
            return 1;
        }
    }
    if (stk_writer_finish(w)) {
        fprintf(stderr, "finish: %s\n", stk_writer_last_error(w));
        return 1;
    }
    printf("wrote %llu records of %zu bytes in %.1f s\n", (unsigned long long)n, payload, stk__now() - t0);
    stk_writer_destroy(w);
    free(p);
    return 0;
}

static int bench_open(const char *dir, int repeats)
{
    double cold[64], warm[64];
    if (repeats > 64)
        repeats = 64;
    for (int r = 0; r < repeats; r++) {
        /* the shard list, from a first (warm) open */
        stk_dataset *ds;
        stk_dataset_create(&ds);
        if (stk_dataset_open(ds, dir)) {
            fprintf(stderr, "%s\n", stk_dataset_last_error(ds));
            return 1;
        }
        uint32_t ns = ds->nshards;
        char **paths = calloc(ns, sizeof *paths);
        for (uint32_t s = 0; s < ns; s++)
            paths[s] = strdup(ds->shards[s].path);
        stk_dataset_destroy(ds);
        uint64_t before = 0, total = 0;
        for (uint32_t s = 0; s < ns; s++) {
            drop_cache(paths[s]);
            before += resident_pages(paths[s], &total);
        }
        stk_dataset_create(&ds);
        double t0 = stk__now();
        int rc = stk_dataset_open(ds, dir);
        cold[r] = stk__now() - t0;
        if (rc) {
            fprintf(stderr, "%s\n", stk_dataset_last_error(ds));
            return 1;
        }
        uint64_t records = stk_dataset_count(ds), after = 0, total2 = 0;
        for (uint32_t s = 0; s < ns; s++)
            after += resident_pages(paths[s], &total2);
        /* leaf + branch pages of `records`: what the walk must touch */
        uint64_t tree = 0;
        for (uint32_t s = 0; s < ns; s++) {
            MDB_stat st;
            if (mdb_stat(ds->shards[s].txn, ds->shards[s].dbi, &st) == 0)
                tree += st.ms_leaf_pages + st.ms_branch_pages;
        }
        stk_dataset_destroy(ds);
        stk_dataset_create(&ds);
        t0 = stk__now();
        stk_dataset_open(ds, dir);
        warm[r] = stk__now() - t0;
        stk_dataset_destroy(ds);
        printf("repeat %d: %llu records, cold %.3f s, warm %.3f s; resident before %llu pages, after cold "
               "open %llu of %llu pages (%.1f MB of %.1f MB); records tree = %llu pages\n",
               r + 1, (unsigned long long)records, cold[r], warm[r], (unsigned long long)before,
               (unsigned long long)after, (unsigned long long)total, after * 4096.0 / 1e6, total * 4096.0 / 1e6,
               (unsigned long long)tree);
        for (uint32_t s = 0; s < ns; s++)
            free(paths[s]);
        free(paths);
    }
    printf("median of %d: cold %.3f s, warm %.3f s\n", repeats, median(cold, repeats), median(warm, repeats));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "build"))
        return build(argv[2], argc > 3 ? strtoull(argv[3], NULL, 10) : 1000000,
                     argc > 4 ? (size_t)strtoull(argv[4], NULL, 10) : 2100);
    if (argc >= 3 && !strcmp(argv[1], "open"))
        return bench_open(argv[2], argc > 3 ? atoi(argv[3]) : 5);
    fprintf(stderr, "usage: tablebench build DIR [RECORDS] [PAYLOAD] | tablebench open DIR [REPEATS]\n");
    return 2;
}
