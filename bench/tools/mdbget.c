/* SPDX-License-Identifier: MIT */
/*
 * mdbget — LMDB's own read path, the reference: mdb_get() of a random fraction of a stoker
 * shard's records, each value copied out of the map (memcpy + CRC32C of the payload, as the
 * reader does), one thread, one read transaction.
 *
 *   mdbget SHARD [--fraction F] [--seed S] [--nordahead] [--drop]
 *
 * The records are the first F*n positions of the epoch-0 permutation of SEED (stk__plan): the same
 * ones `readbench --fraction F --seed S` reads. --drop drops the file's page cache first
 * (posix_fadvise DONTNEED) and mincore counts the resident pages before, after the drop and after
 * the run (the bytes LMDB's path pulled in, readahead included). --nordahead opens the environment
 * with MDB_NORDAHEAD (else the kernel's default readahead applies to the map). The environment is
 * opened MDB_RDONLY | MDB_NOLOCK. Prints one key=value line like readbench.
 */
#include "common.h"
#include "format.h"
#include "order.h"

#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

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
        *pages = n;
    }
    close(fd);
    return res;
}

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mdbget SHARD [--fraction F] [--seed S] [--nordahead] [--drop]\n");
        return 2;
    }
    const char *path = argv[1];
    double fraction = 0.1;
    uint64_t seed = 0;
    int nordahead = 0, drop = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--fraction") && i + 1 < argc)
            fraction = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--nordahead"))
            nordahead = 1;
        else if (!strcmp(argv[i], "--drop"))
            drop = 1;
        else {
            fprintf(stderr, "mdbget: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    int rc = mdb_env_create(&env);
    if (!rc)
        rc = mdb_env_set_maxdbs(env, 8);
    if (!rc)
        rc = mdb_env_open(env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOSUBDIR | (nordahead ? MDB_NORDAHEAD : 0), 0644);
    if (!rc)
        rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (!rc)
        rc = mdb_dbi_open(txn, STK__DB_RECORDS, 0, &dbi);
    if (rc) {
        fprintf(stderr, "mdbget: %s: %s\n", path, mdb_strerror(rc));
        return 1;
    }
    MDB_stat ms;
    mdb_stat(txn, dbi, &ms);
    uint64_t n = ms.ms_entries;
    stk__plan plan;
    if (stk__plan_init(&plan, n, seed, 0, 1, 0, 1, 0) != STK_OK)
        return 1;
    uint64_t limit = (uint64_t)(fraction * (double)n + 0.5);
    if (limit > n)
        limit = n;
    /* key i = record number within the shard; the bench's shard is the dataset's only one */
    uint64_t pages = 0, res_before = resident(path, drop, &pages);
    uint64_t res_dropped = drop ? resident(path, 0, &pages) : res_before;
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    uint64_t ok = 0, errors = 0, bytes = 0;
    double cpu0 = cpu_now(), t0 = stk__now();
    for (uint64_t p = 0; p < limit; p++) {
        uint8_t k[8];
        stk__rec_key(k, stk__plan_index(&plan, p));
        MDB_val key = {8, k}, val;
        if (mdb_get(txn, dbi, &key, &val) != 0 || val.mv_size < STK__REC_HDR) {
            errors++;
            continue;
        }
        if (val.mv_size > cap) {
            free(buf);
            cap = val.mv_size;
            buf = malloc(cap);
        }
        memcpy(buf, val.mv_data, val.mv_size);
        int32_t label;
        uint32_t crc, len;
        int version;
        /* the bench's shards carry no targets: the checksum covers payload (and label, format 2) */
        if (stk__rec_header_decode(buf, val.mv_size, &version, &label, &crc, &len) != STK_OK ||
            stk__rec_crc(version, stk__crc32c(0, buf + STK__REC_HDR, len), label, NULL, 0) != crc) {
            errors++;
            continue;
        }
        ok++;
        bytes += len;
    }
    double wall = stk__now() - t0, cpu = cpu_now() - cpu0;
    uint64_t res_after = resident(path, 0, &pages);
    uint64_t disk = (res_after - res_dropped) * stk__page_size(); /* what the run pulled in */
    printf("tool=mdbget backend=%s records=%llu errors=%llu payload_bytes=%llu disk_bytes=%llu wall_s=%.4f "
           "rec_s=%.1f payload_MB_s=%.1f disk_MB_s=%.1f cpu_s=%.4f cpu_s_per_GB=%.4f "
           "resident_pages_before=%llu after_drop=%llu after=%llu file_pages=%llu read_amplification=%.2f\n",
           nordahead ? "mdb_get_nordahead" : "mdb_get_readahead", (unsigned long long)ok,
           (unsigned long long)errors, (unsigned long long)bytes, (unsigned long long)disk, wall,
           (double)ok / wall, (double)bytes / wall / 1e6, (double)disk / wall / 1e6, cpu,
           disk ? cpu / ((double)disk / 1e9) : 0.0, (unsigned long long)res_before,
           (unsigned long long)res_dropped, (unsigned long long)res_after, (unsigned long long)pages,
           bytes ? (double)disk / (double)bytes : 0.0);
    free(buf);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return errors ? 3 : 0;
}
