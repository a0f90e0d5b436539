/* SPDX-License-Identifier: MIT */
/*
 * test_reader_faults.c — the reader under faults: injected EIO, short reads and
 * latency at given rates (reproducible from the fault seed) give errors exactly where drawn and
 * every other record arrives intact; shard files that shrink or vanish mid-epoch, and image files
 * removed mid-epoch, give clear errors (or the data still readable), never a crash or a hang; a
 * clean epoch afterwards works.
 *
 * stk-test: concurrency
 */
#include "test_reader_util.h"

#include <fcntl.h>
#include <sys/stat.h>

#define N 800

typedef struct count_faults {
    uint64_t eio, short_split;
} count_faults;

/* What the reader's fault draw gives for EPOCH (same formula as reader_verify.c: three draws in order). */
static count_faults expected_faults(const stk_dataset *ds, const stk__reader_config *c, uint64_t epoch,
                                    int direct)
{
    count_faults k = {0, 0};
    for (uint64_t i = 0; i < ds->count; i++) {
        stk__rng g;
        stk__rng_init(&g, c->fault_seed, epoch, i);
        int eio = stk__rng_below(&g, 1000000) < c->fault_eio_ppm;
        int sh = stk__rng_below(&g, 1000000) < c->fault_short_ppm;
        k.eio += eio;
        if (sh && !eio) {
            uint64_t len = ds->recs[i].len;
            if (direct) {
                uint64_t off = ds->recs[i].off, a = off / 4096 * 4096;
                len = (off + len + 4095) / 4096 * 4096 - a;
                k.short_split += len / 2 / 4096 * 4096 > 0;
            } else {
                k.short_split += len / 2 > 0;
            }
        }
    }
    return k;
}

static void fault_run(const char *what, stk_dataset *ds, const t_expect *e, stk__reader_config c,
                      uint64_t epoch, int shorts_apply)
{
    t_run_opts o = {.check_faults = 1};
    t_run_result res;
    t_run_epoch(ds, e, &c, epoch, &o, &res);
    int direct = c.direct && (c.backend == STK_IO_URING || c.backend == STK_IO_PREAD);
    count_faults k = expected_faults(ds, &c, epoch, direct);
    T_CHECK(k.eio > 10, "too few EIO draws (%llu) for a meaningful test", (unsigned long long)k.eio);
    T_CHECK(res.eio == k.eio && res.errors == k.eio && res.ok == ds->count - k.eio,
            "%s: eio %llu (drawn %llu), errors %llu, ok %llu (%s)", what, (unsigned long long)res.eio,
            (unsigned long long)k.eio, (unsigned long long)res.errors, (unsigned long long)res.ok,
            res.first_error);
    T_CHECK(strstr(res.first_error, "injected EIO"), "%s: detail %s", what, res.first_error);
    if (shorts_apply)
        T_CHECK(res.info.resubmits >= k.short_split && k.short_split > 10,
                "%s: %llu resubmits for %llu injected short reads", what,
                (unsigned long long)res.info.resubmits, (unsigned long long)k.short_split);
    printf("  %-28s eio %3llu, resubmits %3llu, ok %llu; busy %.3f s, starved %.3f s, blocked %.3f s\n",
           what, (unsigned long long)res.eio, (unsigned long long)res.info.resubmits,
           (unsigned long long)res.ok, res.clock.busy_s, res.clock.starved_s, res.clock.blocked_s);
}

typedef struct shrink_ctx {
    const char *path;
    off_t size;
    int unlink_it;
    const char **files;
    size_t nfiles;
} shrink_ctx;

static void do_shrink(void *arg)
{
    shrink_ctx *x = arg;
    if (x->unlink_it) {
        T_CHECK(unlink(x->path) == 0, "unlink %s", x->path);
    } else {
        T_CHECK(truncate(x->path, x->size) == 0, "truncate %s", x->path);
    }
}

static void do_unlink_files(void *arg)
{
    shrink_ctx *x = arg;
    for (size_t i = 0; i < x->nfiles; i++)
        unlink(x->files[i]);
}

int main(void)
{
    char *tmp = t_tmpdir("reader-faults");
    t_expect e;
    t_expect_make(&e, N, 5);
    char path[600];
    stk_dataset *ds = t_shards_at(tmp, "shards", &e);
    int have_uring = t_uring_works(ds);

    /* ---- injected faults at rates --------------------------------------------------------- */
    stk__reader_config c = t_default_config();
    c.fault_eio_ppm = 50000;    /* 5% */
    c.fault_short_ppm = 250000; /* 25% */
    c.fault_delay_ppm = 20000;  /* 2% ... */
    c.fault_delay_us = 300;     /* ... by 0.3 ms */
    c.fault_seed = 99;
    printf("faults: EIO 5%%, short 25%%, delay 2%% x 0.3 ms; %u shards, %llu records\n", ds->nshards,
           (unsigned long long)ds->count);
    if (have_uring) {
        c.backend = STK_IO_URING;
        c.direct = 1;
        fault_run("uring O_DIRECT", ds, &e, c, 4, 1);
        fault_run("uring O_DIRECT, same seed", ds, &e, c, 4, 1);
        c.direct = 0;
        fault_run("uring buffered", ds, &e, c, 5, 1);
    }
    c.backend = STK_IO_PREAD;
    c.direct = 1;
    fault_run("pread O_DIRECT", ds, &e, c, 6, 1);
    c.direct = 0;
    fault_run("pread buffered", ds, &e, c, 7, 1);
    c.backend = STK_IO_MMAP;
    fault_run("mmap", ds, &e, c, 8, 0);
    /* another seed, other faults */
    {
        stk__reader_config c2 = c;
        c2.fault_seed = 100;
        count_faults a = expected_faults(ds, &c, 8, 0), b = expected_faults(ds, &c2, 8, 0);
        T_CHECK(a.eio != b.eio || a.short_split != b.short_split, "fault seed has no effect");
    }
    /* the fault is gone: a clean epoch */
    {
        t_run_result res;
        stk__reader_config clean = t_default_config();
        t_run_epoch(ds, &e, &clean, 9, NULL, &res);
        T_CHECK(res.ok == N && res.errors == 0, "clean epoch after faults: %llu ok", (unsigned long long)res.ok);
    }
    stk_dataset_destroy(ds);

    /* ---- a shard that shrinks mid-epoch ----------------------------------------------------- */
    for (int b = 0; b < 3; b++) {
        c = t_default_config();
        c.backend = b == 0 ? STK_IO_URING : STK_IO_PREAD;
        c.direct = b != 2;
        if (b == 0 && !have_uring)
            continue;
        char name[16];
        snprintf(name, sizeof(name), "shrink%d", b);
        ds = t_shards_at(tmp, name, &e);
        uint32_t last = ds->nshards - 1;
        const stk__shard *sh = &ds->shards[last];
        shrink_ctx x = {.path = sh->path, .size = (off_t)(sh->file_size / 2 / 4096 * 4096)};
        uint64_t cut = 0;
        for (uint64_t i = 0; i < ds->count; i++) {
            const stk__rec *rec = &ds->recs[i];
            e.want_status[i] = STK_OK;
            if (rec->shard == last && rec->off + rec->len > (uint64_t)x.size) {
                e.want_status[i] = T_OK_OR(STK_E_TRUNCATED);
                cut++;
            }
        }
        T_CHECK(cut > 10, "shrink cuts only %llu records", (unsigned long long)cut);
        t_run_opts o = {.progress_at = N / 4, .at_progress = do_shrink, .ctx = &x};
        t_run_result res;
        t_run_epoch(ds, &e, &c, 1, &o, &res);
        T_CHECK(res.truncated > 0 && res.ok + res.truncated == N && res.other == 0,
                "shrink (backend %d, direct %d): ok %llu truncated %llu other %llu", c.backend, c.direct,
                (unsigned long long)res.ok, (unsigned long long)res.truncated, (unsigned long long)res.other);
        printf("  shrink mid-epoch (%s): %llu of %llu cut records reported STK_E_TRUNCATED, e.g. %s\n",
               res.info.note, (unsigned long long)res.truncated, (unsigned long long)cut, res.first_error);
        /* the next epoch: the cut records fail, the rest arrive */
        for (uint64_t i = 0; i < ds->count; i++)
            if (e.want_status[i] != STK_OK)
                e.want_status[i] = STK_E_TRUNCATED;
        t_run_epoch(ds, &e, &c, 2, NULL, &res);
        T_CHECK(res.truncated == cut && res.ok == N - cut, "after shrink: ok %llu truncated %llu",
                (unsigned long long)res.ok, (unsigned long long)res.truncated);
        stk_dataset_destroy(ds);
        for (uint64_t i = 0; i < N; i++)
            e.want_status[i] = STK_OK;
    }

    /* ---- a shard that vanishes mid-epoch: the open descriptors still read it ---------------- */
    {
        ds = t_shards_at(tmp, "vanish", &e);
        shrink_ctx x = {.path = ds->shards[0].path, .unlink_it = 1};
        t_run_opts o = {.progress_at = N / 4, .at_progress = do_shrink, .ctx = &x};
        t_run_result res;
        c = t_default_config();
        t_run_epoch(ds, &e, &c, 1, &o, &res);
        T_CHECK(res.ok == N, "vanished shard: ok %llu (%s)", (unsigned long long)res.ok, res.first_error);
        printf("  shard unlinked mid-epoch (%s): all %d records still read from the open file\n",
               res.info.note, N);
        stk_dataset_destroy(ds);
    }

    /* ---- files removed mid-epoch, and faults on the files layout ---------------------------- */
    {
        t_expect g;
        t_expect_make(&g, 200, 11);
        snprintf(path, sizeof(path), "%s/folder/cls", tmp);
        t_mkdirs(path);
        for (size_t i = 0; i < g.n; i++) {
            char f[700];
            snprintf(f, sizeof(f), "%s/folder/cls/%05zu.jpg", tmp, i);
            t_write_file(f, g.data[i], g.len[i]);
            g.label[i] = 0;
        }
        snprintf(path, sizeof(path), "%s/folder", tmp);
        ds = t_open_ds(path, STK_LAYOUT_FILES);
        c = t_default_config();
        c.fault_eio_ppm = 100000;
        c.fault_short_ppm = 300000;
        c.fault_seed = 3;
        fault_run("files", ds, &g, c, 1, 1);
        const char *gone[40];
        for (int i = 0; i < 40; i++) {
            gone[i] = ds->files.paths[i * 5];
            g.want_status[i * 5] = T_OK_OR(-ENOENT);
        }
        shrink_ctx x = {.files = gone, .nfiles = 40};
        t_run_opts o = {.progress_at = 50, .at_progress = do_unlink_files, .ctx = &x};
        t_run_result res;
        c = t_default_config();
        t_run_epoch(ds, &g, &c, 2, &o, &res);
        T_CHECK(res.ok + res.errors == g.n && res.other == res.errors && res.errors <= 40,
                "files removed: ok %llu errors %llu", (unsigned long long)res.ok, (unsigned long long)res.errors);
        printf("  files removed mid-epoch: %llu reported (%s), %llu read\n", (unsigned long long)res.errors,
               res.first_error, (unsigned long long)res.ok);
        stk_dataset_destroy(ds);
        t_expect_free(&g);
    }

    t_expect_free(&e);
    t_rmtree(tmp);
    free(tmp);
    printf("ok\n");
    return 0;
}
