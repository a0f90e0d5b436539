/* SPDX-License-Identifier: MIT */
/*
 * test_reader.c — the read stage (src/read/) on real data: every record of a dataset delivered
 * exactly once per epoch with the right bytes and label, for stoker shards (io_uring O_DIRECT and
 * buffered, the pread pool, the forced fallback, LMDB's mmap path), a foreign LMDB and a folder of
 * files; a corrupted record gives STK_E_CRC and the rest arrive; stop mid-epoch returns every
 * buffer; bad indices are reported.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "dataset.h"
#include "format.h"
#include "order.h"
#include "reader.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_reader_util.h"

/* ---- data sets ----------------------------------------------------------------------------- */

#define N_REC 1500

static void make_foreign(const char *dir, t_expect *e)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    T_CHECK(mdb_env_create(&env) == 0, "env");
    T_CHECK(mdb_env_set_mapsize(env, (size_t)256 << 20) == 0, "mapsize");
    T_CHECK(mdb_env_open(env, dir, 0, 0644) == 0, "open %s", dir);
    T_CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0, "txn");
    T_CHECK(mdb_dbi_open(txn, NULL, 0, &dbi) == 0, "dbi");
    for (size_t i = 0; i < e->n; i++) {
        char key[32];
        snprintf(key, sizeof(key), "img-%06zu", i); /* sorts in index order */
        MDB_val k = {.mv_size = strlen(key), .mv_data = key};
        MDB_val v = {.mv_size = e->len[i], .mv_data = e->data[i]};
        T_CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0, "put");
        e->label[i] = 7; /* the foreign label set at open */
    }
    T_CHECK(mdb_txn_commit(txn) == 0, "commit");
    mdb_env_close(env);
}

static void make_files(const char *root, t_expect *e)
{
    /* ImageFolder: class_0..class_2, files sorted by name within a class */
    for (size_t i = 0; i < e->n; i++) {
        char path[1100];
        int cls = (int)(i * 3 / e->n);
        snprintf(path, sizeof(path), "%s/class_%d", root, cls);
        t_mkdirs(path);
        snprintf(path, sizeof(path), "%s/class_%d/img_%06zu.jpg", root, cls, i);
        t_write_file(path, e->data[i], e->len[i]);
        e->label[i] = cls;
    }
}

/* ---- the cases ----------------------------------------------------------------------------- */

static void all_ok(const char *what, stk_dataset *ds, const t_expect *e, stk__reader_config cfg,
                   const char *note_has, uint64_t epoch)
{
    t_run_result res;
    t_run_epoch(ds, e, &cfg, epoch, NULL, &res);
    T_CHECK(res.ok == e->n && res.errors == 0, "%s: %llu ok, %llu errors (first: %s)", what,
            (unsigned long long)res.ok, (unsigned long long)res.errors, res.first_error);
    if (note_has)
        T_CHECK(strstr(res.info.note, note_has), "%s: note '%s' lacks '%s'", what, res.info.note, note_has);
    /* O_DIRECT is really used, or really not */
    if (note_has && strstr(note_has, "buffered"))
        T_CHECK(res.info.direct_reads == 0, "%s: %llu O_DIRECT reads", what,
                (unsigned long long)res.info.direct_reads);
    if (note_has && !strcmp(note_has, "io_uring, O_DIRECT"))
        T_CHECK(res.info.direct_reads >= e->n && res.info.direct, "%s: only %llu O_DIRECT reads", what,
                (unsigned long long)res.info.direct_reads);
    if (strstr(what, "half"))
        T_CHECK(res.info.direct_reads > 0 && res.info.direct_reads < e->n, "%s: %llu O_DIRECT reads", what,
                (unsigned long long)res.info.direct_reads);
    printf("  %-40s %-52s pool %6zu KiB, max in flight %u\n", what, res.info.note,
           res.info.pool_bytes >> 10, res.info.inflight_max);
}

static void check_disk(const stk_dataset *ds)
{
    /* the offset table must agree with the record headers we wrote */
    for (uint64_t i = 0; i < ds->count; i++)
        T_CHECK(ds->recs[i].len >= STK__REC_HDR, "record %llu length %u", (unsigned long long)i,
                ds->recs[i].len);
}

int main(void)
{
    char *tmp = t_tmpdir("reader");
    t_expect e;
    t_expect_make(&e, N_REC, 42);
    char path[512];

    /* ---- stoker shards -------------------------------------------------------------------- */
    stk_dataset *ds = t_shards_at(tmp, "shards", &e);
    T_CHECK(ds->count == N_REC, "count %llu", (unsigned long long)ds->count);
    T_CHECK(ds->nshards > 3, "expected several shards, got %u", ds->nshards);
    check_disk(ds);
    printf("shards: %u shards, %llu records\n", ds->nshards, (unsigned long long)ds->count);

    stk__reader_config c = t_default_config();
    int have_uring = t_uring_works(ds);
    if (have_uring) {
        c.backend = STK_IO_URING;
        c.direct = 1;
        all_ok("uring O_DIRECT", ds, &e, c, "io_uring, O_DIRECT", 0);
        c.direct = 0;
        all_ok("uring buffered", ds, &e, c, "io_uring, buffered", 1);
        c.direct = 1;
        c.queue_depth = 1;
        c.hold_buffers = 1;
        all_ok("uring O_DIRECT qd 1, hold 1", ds, &e, c, "qd 1", 2);
        c = t_default_config();
        c.backend = STK_IO_URING;
        c.inflight_bytes = 64 << 10; /* caps depth by bytes */
        all_ok("uring bytes cap 64 KiB", ds, &e, c, "io_uring", 3);
    } else {
        printf("  io_uring unavailable here: io_uring cases skipped\n");
    }
    c = t_default_config();
    c.backend = STK_IO_PREAD;
    c.direct = 1;
    all_ok("pread O_DIRECT", ds, &e, c, "pread pool", 4);
    c.direct = 0;
    c.io_threads = 3;
    all_ok("pread buffered, 3 threads", ds, &e, c, "buffered", 5);
    c = t_default_config();
    c.backend = STK_IO_MMAP;
    all_ok("mmap (mdb_get)", ds, &e, c, "mmap", 6);

    /* forced fallback: STOKER_DISABLE_URING=1 acts like io_uring_queue_init() = -ENOSYS; a build
     * without liburing falls back (and refuses STK_IO_URING) as not supported, whatever the
     * environment says */
    int built = stk_has_feature(STK_FEATURE_URING);
    int want_rc = built ? -ENOSYS : STK_E_UNSUPPORTED;
    setenv("STOKER_DISABLE_URING", "1", 1);
    c = t_default_config();
    c.backend = STK_IO_AUTO;
    all_ok("auto with STOKER_DISABLE_URING=1", ds, &e, c,
           built ? "pread pool (io_uring unavailable: ENOSYS)"
                 : "pread pool (io_uring unavailable: built without liburing)",
           7);
    {
        stk__reader *r = NULL;
        char err[STK__ERRLEN] = "";
        c.backend = STK_IO_URING;
        int rc = stk__reader_create(&r, ds, &c, err);
        T_CHECK(rc == want_rc && !r, "STK_IO_URING with io_uring disabled: rc %d (%s)", rc, err);
        T_CHECK(strstr(err, "io_uring"), "error text: %s", err);
        c.backend = STK_IO_AUTO;
        T_OK(stk__reader_create(&r, ds, &c, err));
        stk__reader_info info;
        stk__reader_get_info(r, &info);
        T_CHECK(info.backend == STK_IO_PREAD && info.fallback_reason == want_rc,
                "fallback info: backend %d reason %d", info.backend, info.fallback_reason);
        stk__reader_destroy(r);
    }
    unsetenv("STOKER_DISABLE_URING");

    /* records in shuffled order, several epochs: the same set each time */
    c = t_default_config();
    for (uint64_t ep = 10; ep < 13; ep++)
        all_ok("auto, epoch", ds, &e, c, NULL, ep);

    /* shards whose O_DIRECT descriptor was refused at open (fd_direct = -1) are read buffered:
     * first every other shard, then all of them (the note then says so) */
    {
        int saved[64];
        T_CHECK(ds->nshards <= 64, "shards");
        for (uint32_t i = 0; i < ds->nshards; i++) {
            saved[i] = ds->shards[i].fd_direct;
            if (i % 2)
                ds->shards[i].fd_direct = -1;
        }
        c = t_default_config();
        c.backend = have_uring ? STK_IO_URING : STK_IO_PREAD;
        all_ok("half the shards refuse O_DIRECT", ds, &e, c, "O_DIRECT", 30);
        c.backend = STK_IO_PREAD;
        all_ok("pread, half refuse O_DIRECT", ds, &e, c, "O_DIRECT", 31);
        for (uint32_t i = 0; i < ds->nshards; i++)
            ds->shards[i].fd_direct = -1;
        c.backend = have_uring ? STK_IO_URING : STK_IO_PREAD;
        all_ok("all shards refuse O_DIRECT", ds, &e, c, "buffered (O_DIRECT refused)", 32);
        for (uint32_t i = 0; i < ds->nshards; i++)
            ds->shards[i].fd_direct = saved[i];
    }

    /* bad index from WORK: STK_E_RANGE, the others arrive */
    {
        t_run_result res;
        c = t_default_config();
        t_run_opts o = {.bad_index_every = 100};
        t_run_epoch(ds, &e, &c, 0, &o, &res);
        /* items 99, 199, ..., 1499 of the 1515 handed out are bad: 15, and all 1500 real arrive */
        T_CHECK(res.errors == 15 && res.range_errors == 15 && res.ok == N_REC,
                "bad indices: ok %llu errors %llu range %llu", (unsigned long long)res.ok,
                (unsigned long long)res.errors, (unsigned long long)res.range_errors);
    }

    /* stop mid-epoch (WORK stops handing out, SINK cancels): stop returns, every buffer comes
     * back (a small pool would starve the next epoch otherwise) */
    for (int b = 0; b < 3; b++) {
        c = t_default_config();
        c.backend = b == 0 ? STK_IO_URING : b == 1 ? STK_IO_PREAD : STK_IO_MMAP;
        if (b == 0 && !have_uring)
            continue;
        c.queue_depth = 8;
        c.hold_buffers = 4;
        c.io_threads = 2;
        t_stop_midway(ds, &e, &c);
    }

    /* corruption on disk: flip one payload byte of three records */
    uint64_t bad[3] = {5, N_REC / 2, N_REC - 1};
    for (int k = 0; k < 3; k++) {
        const stk__rec *rec = &ds->recs[bad[k]];
        const char *sp = ds->shards[rec->shard].path;
        int fd = open(sp, O_RDWR);
        T_CHECK(fd >= 0, "open %s", sp);
        uint8_t byte;
        off_t at = (off_t)(rec->off + STK__REC_HDR + (rec->len - STK__REC_HDR) / 2);
        T_CHECK(pread(fd, &byte, 1, at) == 1, "pread");
        byte ^= 0x5a;
        T_CHECK(pwrite(fd, &byte, 1, at) == 1, "pwrite");
        fsync(fd);
        close(fd);
        e.want_status[bad[k]] = STK_E_CRC;
        /* the library's single-record read sees it too */
        uint8_t *tmpb = malloc(rec->len);
        size_t got;
        int rrc = stk_dataset_read(ds, bad[k], tmpb, rec->len, &got, NULL);
        free(tmpb);
        T_CHECK(rrc == STK_E_CRC, "stk_dataset_read of corrupted record %llu: %d (%s)",
                (unsigned long long)bad[k], rrc, stk_dataset_last_error(ds));
    }
    for (int b = 0; b < 4; b++) {
        c = t_default_config();
        c.backend = b == 0 ? STK_IO_URING : b == 1 ? STK_IO_PREAD : b == 2 ? STK_IO_MMAP : STK_IO_URING;
        c.direct = b != 3;
        if ((b == 0 || b == 3) && !have_uring)
            continue;
        t_run_result res;
        t_run_epoch(ds, &e, &c, 20, NULL, &res);
        T_CHECK(res.ok == N_REC - 3 && res.crc_errors == 3 && res.errors == 3,
                "corrupt, backend %d: ok %llu crc %llu errors %llu (%s)", c.backend,
                (unsigned long long)res.ok, (unsigned long long)res.crc_errors,
                (unsigned long long)res.errors, res.first_error);
        T_CHECK(strstr(res.first_error, "crc32c") && strstr(res.first_error, "stored"),
                "crc detail: %s", res.first_error);
    }
    /* verify_crc = 0: delivered, and the bytes are the corrupted ones */
    for (int k = 0; k < 3; k++)
        e.want_status[bad[k]] = STK_OK;
    {
        c = t_default_config();
        c.verify_crc = 0;
        t_run_opts o = {.corrupt_ok = 1};
        t_run_result res;
        t_run_epoch(ds, &e, &c, 21, &o, &res);
        T_CHECK(res.ok == N_REC && res.errors == 0 && res.mismatched == 3,
                "verify_crc 0: ok %llu errors %llu mismatched %llu", (unsigned long long)res.ok,
                (unsigned long long)res.errors, (unsigned long long)res.mismatched);
    }
    stk_dataset_destroy(ds);

    /* ---- foreign LMDB (main database, key -> bytes) ----------------------------------------- */
    t_expect f;
    t_expect_make(&f, 400, 7);
    snprintf(path, sizeof(path), "%s/foreign", tmp);
    t_mkdirs(path);
    make_foreign(path, &f);
    ds = t_open_ds(path, STK_LAYOUT_LMDB);
    T_CHECK(ds->count == f.n, "foreign count %llu", (unsigned long long)ds->count);
    printf("foreign LMDB: %llu records\n", (unsigned long long)ds->count);
    if (have_uring) {
        c = t_default_config();
        c.backend = STK_IO_URING;
        all_ok("foreign uring O_DIRECT", ds, &f, c, "io_uring, O_DIRECT", 0);
        c.direct = 0;
        all_ok("foreign uring buffered", ds, &f, c, "io_uring, buffered", 0);
    }
    c = t_default_config();
    c.backend = STK_IO_PREAD;
    all_ok("foreign pread", ds, &f, c, "pread", 1);
    c.backend = STK_IO_MMAP;
    all_ok("foreign mmap", ds, &f, c, "mmap", 2);
    stk_dataset_destroy(ds);

    /* ---- folder of files ------------------------------------------------------------------ */
    t_expect g;
    t_expect_make(&g, 300, 9);
    snprintf(path, sizeof(path), "%s/folder", tmp);
    make_files(path, &g);
    ds = t_open_ds(path, STK_LAYOUT_FILES);
    T_CHECK(ds->count == g.n, "files count %llu", (unsigned long long)ds->count);
    printf("files: %llu records\n", (unsigned long long)ds->count);
    c = t_default_config();
    all_ok("files", ds, &g, c, "files: open/read/close", 0);
    c.io_threads = 1;
    all_ok("files, 1 thread", ds, &g, c, "files", 1);
    c.backend = STK_IO_MMAP;
    {
        stk__reader *r = NULL;
        char err[STK__ERRLEN];
        T_CHECK(stk__reader_create(&r, ds, &c, err) == STK_E_INVALID && !r, "mmap on files accepted");
    }
    /* a file removed after open: reported with errno, the others arrive */
    {
        unlink(ds->files.paths[17]);
        g.want_status[17] = -ENOENT;
        c = t_default_config();
        t_run_result res;
        t_run_epoch(ds, &g, &c, 3, NULL, &res);
        T_CHECK(res.ok == g.n - 1 && res.errors == 1, "missing file: ok %llu errors %llu",
                (unsigned long long)res.ok, (unsigned long long)res.errors);
        T_CHECK(strstr(res.first_error, "open"), "detail: %s", res.first_error);
    }
    stk_dataset_destroy(ds);

    t_expect_free(&e);
    t_expect_free(&f);
    t_expect_free(&g);
    t_rmtree(tmp);
    free(tmp);
    printf("ok\n");
    return 0;
}
