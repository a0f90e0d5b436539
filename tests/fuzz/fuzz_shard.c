/* SPDX-License-Identifier: MIT */
/*
 * fuzz_shard.c — opening a shard from arbitrary bytes (stk_dataset_open + every record).
 *
 * Input: the bytes of an LMDB file. They are written to DIR/shard-00000.lmdb in a private temp
 * directory, which is opened twice: as a directory of stoker shards, and as the single file with
 * STK_LAYOUT_AUTO (so a foreign LMDB is accepted too). Where the open succeeds, every record is
 * described, named and read. A malformed file must give an error (a status and a message naming
 * the file), never a crash, a hang or a read outside the file: the offset table trusts LMDB's
 * cursor, so src/dataset (shard.c, walk.c) validates page numbers, offsets and lengths against the file size.
 *
 * Invariants: statuses are documented codes; the error text names the shard; every record of an
 * opened dataset lies inside the file (offset + length <= file size) and a read either succeeds
 * with the described length or fails with a record-level error naming the key.
 */
#include "fuzz.h"

#include "stoker.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];
static char g_file[300];

static void cleanup(void)
{
    char p[320];
    snprintf(p, sizeof p, "%s-lock", g_file);
    unlink(p);
    unlink(g_file);
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(g_dir, sizeof g_dir, "%s/stk-fuzz-shard-XXXXXX", base);
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(g_file, sizeof g_file, "%s/shard-00000.lmdb", g_dir);
    atexit(cleanup);
    return 0;
}

static int record_status_ok(int rc)
{
    switch (rc) {
    case STK_OK:
    case STK_E_CORRUPT:
    case STK_E_CRC:
    case STK_E_TRUNCATED:
    case STK_E_FORMAT:
    case STK_E_IO:
        return 1;
    default:
        return 0;
    }
}

static int open_status_ok(int rc)
{
    switch (rc) {
    case STK_E_FORMAT:
    case STK_E_CORRUPT:
    case STK_E_TRUNCATED:
    case STK_E_EMPTY:
    case STK_E_LMDB:
    case STK_E_INVALID:
    case STK_E_EMPTYSET:
    case STK_E_INCOMPLETE:
    case STK_E_UNSUPPORTED: /* MDB_DUPSORT databases (lmdb_check.c) */
    case STK_E_NOMEM:
        return 1;
    default:
        return rc < 0 && rc > -1000; /* -errno from the OS (mmap of a huge map size: ENOMEM) */
    }
}

static void exercise(const char *path, int layout, size_t fsize)
{
    stk_dataset *ds;
    if (stk_dataset_create(&ds) != STK_OK)
        abort();
    if (layout)
        FUZZ_CHECK(stk_dataset_set(ds, STK_P_LAYOUT, layout) == STK_OK, "set layout");
    int rc = stk_dataset_open(ds, path);
    if (getenv("STK_FUZZ_VERBOSE"))
        fprintf(stderr, "  open %s: %s (%s), %llu records\n", path, stk_status_name(rc),
                stk_dataset_last_error(ds), (unsigned long long)stk_dataset_count(ds));
    if (rc != STK_OK) {
        FUZZ_CHECK(open_status_ok(rc), "open status %d (%s): %s", rc, stk_strerror(rc),
                   stk_dataset_last_error(ds));
        FUZZ_CHECK(strstr(stk_dataset_last_error(ds), "shard-00000.lmdb") != NULL,
                   "open error names no file: `%s`", stk_dataset_last_error(ds));
        stk_dataset_destroy(ds);
        return;
    }
    stk_dataset_info info;
    FUZZ_CHECK(stk_dataset_info_get(ds, &info) == STK_OK, "info");
    uint64_t n = stk_dataset_count(ds);
    FUZZ_CHECK(n == info.records, "count");
    FUZZ_CHECK(info.max_record_bytes <= fsize, "largest record %u in a %zu-byte file", info.max_record_bytes,
               fsize);
    uint8_t *buf = malloc(info.max_record_bytes ? info.max_record_bytes : 1);
    if (!buf)
        abort();
    for (uint64_t i = 0; i < n; i++) {
        stk_record_info ri;
        char name[512];
        FUZZ_CHECK(stk_dataset_record_name(ds, i, name, sizeof name) == STK_OK, "record_name %llu",
                   (unsigned long long)i);
        rc = stk_dataset_record(ds, i, &ri);
        FUZZ_CHECK(record_status_ok(rc), "record %llu status %d", (unsigned long long)i, rc);
        if (rc == STK_OK) {
            FUZZ_CHECK(ri.offset + ri.length <= fsize, "record %llu at %llu+%u outside %zu bytes",
                       (unsigned long long)i, (unsigned long long)ri.offset, ri.length, fsize);
            FUZZ_CHECK(ri.length <= info.max_record_bytes, "record %llu length %u > max %u",
                       (unsigned long long)i, ri.length, info.max_record_bytes);
        } else {
            FUZZ_CHECK(strstr(stk_dataset_last_error(ds), "key") != NULL, "record error names no key: `%s`",
                       stk_dataset_last_error(ds));
        }
        size_t len = 0;
        rc = stk_dataset_read(ds, i, buf, info.max_record_bytes, &len, &ri);
        FUZZ_CHECK(record_status_ok(rc), "read %llu status %d (%s)", (unsigned long long)i, rc,
                   stk_dataset_last_error(ds));
        if (rc == STK_OK)
            FUZZ_CHECK(len == ri.length && len <= info.max_record_bytes, "read %llu length %zu",
                       (unsigned long long)i, len);
    }
    FUZZ_CHECK(stk_dataset_record(ds, n, &(stk_record_info){0}) == STK_E_RANGE, "past the end");
    free(buf);
    stk_dataset_destroy(ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = open(g_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(g_file);
        abort();
    }
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            perror("write");
            abort();
        }
        done += (size_t)w;
    }
    close(fd);
    exercise(g_dir, 0, size);
    exercise(g_file, 0, size);
    return 0;
}
