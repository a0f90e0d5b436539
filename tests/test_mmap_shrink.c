/* SPDX-License-Identifier: MIT */
/*
 * test_mmap_shrink — the mmap backend (STK_IO_MMAP, LMDB's own read path) on a shard that
 * shrinks while the loader has it open: to 0 bytes and to half its size, (a) before the loader
 * starts (the reader's own LMDB environment is set up on the cut file) and (b) while the epoch
 * runs, on a shard no reader thread has touched yet (its first mdb_txn_begin reads LMDB's meta
 * pages through the map). What must hold: a named error ("shard-0000N.lmdb: shrank from X to Y
 * bytes while open"), the records of the intact shard delivered as before, and no SIGBUS: each
 * case runs in a child process, so a signal is reported as a failure, and under an alarm().
 */
#include "test_loader_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NREC 20
#define BS 2

static char g_dir[4200];

/* Records of about 300 KB (a 1 MiB shard then holds 3 or 4): the dataset spans several shards. */
static void make_data(void)
{
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, g_dir));
    for (int i = 0; i < NREC; i++) {
        size_t len;
        uint8_t *j = t_make_jpeg(640, 480, 77 + (uint64_t)i, 0, 100, 0, &len);
        T_OK(stk_writer_add(w, j, len, i % 3, NULL));
        free(j);
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
}

static stk_loader *mk(int io_threads)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, STK_IO_MMAP));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, BS));
    T_OK(stk_loader_set(h, STK_P_PREFETCH, 2));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 1));
    T_OK(stk_loader_set(h, STK_P_IO_THREADS, io_threads));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    T_OK(stk_loader_set(h, STK_P_QUEUE_DEPTH, 2));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 32));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 32));
    T_OK(stk_loader_open(h, g_dir));
    return h;
}

static void cut(const char *shard, off_t size)
{
    int fd = open(shard, O_WRONLY);
    T_CHECK(fd >= 0 && ftruncate(fd, size) == 0, "ftruncate %s", shard);
    close(fd);
}

/* The last shard: its path, its first record, its size (read once, before the cases). */
static char g_shard[4400];
static uint64_t g_first;
static off_t g_size;

static void find_last_shard(void)
{
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, g_dir));
    stk_dataset_info di;
    T_OK(stk_dataset_info_get(ds, &di));
    T_CHECK(di.shards >= 4 && di.records == NREC, "%u shards, %llu records: want 4 or more shards", di.shards,
            (unsigned long long)di.records);
    snprintf(g_shard, sizeof g_shard, "%s", stk_dataset_shard_path(ds, di.shards - 1));
    g_first = NREC;
    stk_record_info ri;
    while (g_first > 0 && stk_dataset_record(ds, g_first - 1, &ri) == STK_OK && ri.shard == di.shards - 1)
        g_first--;
    stk_dataset_destroy(ds);
    struct stat st;
    T_CHECK(stat(g_shard, &st) == 0, "stat %s", g_shard);
    g_size = st.st_size;
}

/* Cut the last shard to 0 or half (HALF) after open: before start (BEFORE_START; the reader's
 * own environment is then set up on the cut file) or while the epoch runs, before a reader
 * thread reached that shard. Its records are substituted and named, the others delivered. */
static void cut_case(int half, int before_start)
{
    stk_loader *h = mk(3);
    off_t to = half ? g_size / 2 : 0;
    char what[64];
    snprintf(what, sizeof what, "cut to %lld %s", (long long)to, before_start ? "before start" : "while running");
    tl_epoch a = {0}, e;
    if (before_start) {
        cut(g_shard, to);
        T_OK(stk_loader_start(h));
    } else {
        T_OK(stk_loader_start(h));
        T_CHECK(tl_run(h, &a, 1) == STK_OK && a.n == BS, "first batch");
        /* the ring (prefetch 2 of batch 2) and the reads in flight (queue depth 2) hold the next
         * few records, none of the last shard's: wait until reading stops */
        for (int i = 0, still = 0; i < 200 && still < 4; i++) {
            stk_stats st;
            T_OK(stk_loader_stats(h, &st));
            still = st.inflight_now == 0 ? still + 1 : 0;
            usleep(50000);
        }
        cut(g_shard, to);
    }
    int rc = tl_run(h, &e, -1);
    T_CHECK(rc == STK_END, "%s: the epoch ended with %s: %s", what, stk_status_name(rc), stk_loader_last_error(h));
    T_CHECK(a.n + e.n == NREC, "%s: %zu samples", what, a.n + e.n);
    size_t nsub = 0;
    for (size_t i = 0; i < e.n; i++) {
        int in_cut = e.index[i] >= g_first;
        T_CHECK(e.subst[i] == in_cut, "%s: record %llu substituted %d", what, (unsigned long long)e.index[i],
                e.subst[i]);
        nsub += e.subst[i];
    }
    T_CHECK(nsub == NREC - g_first, "%s: %zu substituted, want %llu", what, nsub,
            (unsigned long long)(NREC - g_first));
    char want[96];
    snprintf(want, sizeof want, "shrank from %lld to %lld bytes while open", (long long)g_size, (long long)to);
    /* (the pipeline may have gone on into the next epoch: its errors are listed too) */
    size_t nerr = stk_loader_error_count(h), in_epoch = 0;
    const char *name = strrchr(g_shard, '/') + 1;
    for (size_t i = 0; i < nerr; i++) {
        stk_record_error re;
        T_OK(stk_loader_error_get(h, i, &re));
        in_epoch += re.epoch == e.epoch;
        T_CHECK(re.status == STK_E_TRUNCATED && strstr(re.where, name) && strstr(re.reason, name) &&
                strstr(re.reason, want), "%s: error %zu: %s: %s: %s", what, i, re.where,
                stk_status_name(re.status), re.reason);
        if (i == 0)
            fprintf(stderr, "  %s: %zu substituted, e.g. %s: %s\n", what, nsub, re.where, re.reason);
    }
    T_CHECK(in_epoch == nsub, "%s: %zu errors listed in the epoch for %zu substituted", what, in_epoch, nsub);
    stk_loader_destroy(h);
    tl_epoch_free(&a);
    tl_epoch_free(&e);
}

static void cut_before_start(int half) { cut_case(half, 1); }
static void cut_while_running(int half) { cut_case(half, 0); }

int main(void)
{
    /* every case on a fresh copy: a cut-and-restored shard is sparse, not the original */
    static const struct {
        const char *what;
        void (*fn)(int);
        int half;
    } cases[] = {
        {"cut to 0 before start", cut_before_start, 0},
        {"cut to half before start", cut_before_start, 1},
        {"cut to 0 while running", cut_while_running, 0},
        {"cut to half while running", cut_while_running, 1},
    };
    char *tmp = t_tmpdir("mmapshrink");
    snprintf(g_dir, sizeof g_dir, "%s/ds", tmp);
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t_rmtree(g_dir);
        make_data();
        find_last_shard();
        failed += !tl_in_child(cases[i].what, cases[i].fn, cases[i].half, tl_sanitized() ? 240 : 60);
    }
    t_rmtree(tmp);
    free(tmp);
    if (failed) {
        fprintf(stderr, "test_mmap_shrink: %d of %zu cases failed\n", failed, sizeof cases / sizeof cases[0]);
        return 1;
    }
    printf("test_mmap_shrink: ok\n");
    return 0;
}
