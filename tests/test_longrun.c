/* SPDX-License-Identifier: MIT */
/*
 * test_longrun.c — lifecycles ended at random points, with every knob that changes the teardown
 * path. test_loader_cycles.c covers plain start/stop/destroy cycles, a cancel
 * storm and two loaders side by side; this one adds randomised endings:
 *
 *   - each cycle picks backend (pread / io_uring / mmap / files), workers, prefetch, strict,
 *     injected EIO and delays, consumes a random number of batches (across epoch ends), keeps a
 *     random number unreleased, then ends by destroy, by cancel() from another thread while the
 *     consumer is blocked in next(), by stop + start, or by seek / set_epoch — then destroys;
 *   - the record-error list past its 1024 kept entries (count goes on, memory does not);
 *   - two threads cycling loaders on the same shards at once (LMDB opened twice in a process).
 *
 * Open descriptors must return to their starting count after every cycle, RSS must not grow
 * after warm-up, and nothing may hang (alarm() watchdog).
 *
 * CI runs 200 cycles (40 under a sanitizer). STK_LONGRUN_CYCLES=N runs N (the 10 000-cycle run
 * in docs/HARDENING.md, under valgrind or LSan). STK_LONGRUN_EPOCHS=E with STK_LONGRUN_DATA=PATH
 * instead runs E epochs over PATH with one loader, printing RSS after each epoch and the slope
 * (bench/longrun.sh). STK_LONGRUN_TWIN=N runs only the two-thread part, N cycles per thread,
 * its seeds XORed with STK_LONGRUN_SEED (default 0 = the CI sequence).
 *
 * stk-test: concurrency
 */
#include "test_loader_util.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define N 40
#define BS 8

static tl_data D;
static char g_files[4300];

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL test_longrun: watchdog: hung\n";
    if (write(2, m, sizeof m - 1) < 0) {
    }
    _exit(1);
}

static void make_data(void)
{
    tl_data_make(&D, "longrun", N);
    tl_write(&D);
    snprintf(g_files, sizeof g_files, "%s/files", D.dir);
    for (size_t i = 0; i < N; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/c%d", g_files, D.label[i]);
        t_mkdirs(p);
        snprintf(p, sizeof p, "%s/c%d/%03zu.jpg", g_files, D.label[i], i);
        t_write_file(p, D.payload[i], D.len[i]);
    }
}

typedef struct canceller {
    stk_loader *h;
    unsigned delay_us;
} canceller;

static void *cancel_main(void *arg)
{
    canceller *c = arg;
    usleep(c->delay_us);
    T_OK(stk_loader_cancel(c->h));
    return NULL;
}

/* One randomised lifecycle. Returns the ending used (for the tally). */
static int one_cycle(uint64_t *rng)
{
    static const int backends[] = {STK_IO_PREAD, STK_IO_URING, STK_IO_MMAP, STK_IO_AUTO};
    int files = t_xorshift(rng) % 5 == 0;
    stk_loader *h = tl_loader(files ? g_files : D.path, BS, 1 + (int)(t_xorshift(rng) % 3));
    int backend = files ? STK_IO_AUTO : backends[t_xorshift(rng) % 4];
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, backend));
    T_OK(stk_loader_set(h, STK_P_PREFETCH, 2 + (int64_t)(t_xorshift(rng) % 3)));
    T_OK(stk_loader_set(h, STK_P_STRICT, t_xorshift(rng) % 4 == 0));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    if (t_xorshift(rng) % 2) {
        T_OK(stk_loader_set(h, STK_P_FAULT_EIO_PPM, 50000));
        T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, 100000));
        T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_US, 200));
        T_OK(stk_loader_set(h, STK_P_FAULT_SEED, (int64_t)t_xorshift(rng)));
    }
    int rc = stk_loader_start(h);
    if (rc != STK_OK) { /* io_uring refused here */
        T_CHECK(backend == STK_IO_URING, "start: %s", stk_loader_last_error(h));
        stk_loader_destroy(h);
        return -1;
    }
    uint64_t bpe = stk_loader_batches_per_epoch(h);
    unsigned want = (unsigned)(t_xorshift(rng) % (2 * bpe + 2));
    const stk_batch *held[4];
    unsigned nheld = 0, maxhold = (unsigned)(t_xorshift(rng) % 2);
    for (unsigned i = 0; i < want; i++) {
        const stk_batch *b;
        rc = stk_loader_next(h, NULL, 20000, &b);
        T_CHECK(rc != STK_TIMEOUT, "next() timed out (20 s)");
        if (rc == STK_END)
            continue;
        if (rc != STK_OK)
            break; /* strict mode met an injected fault: the loader must still tear down */
        if (nheld < maxhold)
            held[nheld++] = b;
        else
            T_OK(stk_loader_release(h, b, NULL));
    }
    int ending = (int)(t_xorshift(rng) % 4);
    switch (ending) {
    case 0: /* destroy with whatever is held and in flight */
        break;
    case 1: { /* cancel a next() that waits: all held slots released first so it can block */
        for (unsigned i = 0; i < nheld; i++)
            T_OK(stk_loader_release(h, held[i], NULL));
        nheld = 0;
        canceller c = {h, (unsigned)(t_xorshift(rng) % 3000)};
        pthread_t t;
        T_CHECK(pthread_create(&t, NULL, cancel_main, &c) == 0, "pthread_create");
        for (int k = 0; k < 64; k++) {
            const stk_batch *b;
            rc = stk_loader_next(h, NULL, 20000, &b);
            T_CHECK(rc != STK_TIMEOUT, "next() timed out while a cancel was due");
            if (rc == STK_OK)
                T_OK(stk_loader_release(h, b, NULL));
            else if (rc != STK_END)
                break; /* STK_E_CANCELLED, or a strict failure */
        }
        pthread_join(t, NULL);
        break;
    }
    case 2: /* stop and start again (batches must be released before stop) */
        for (unsigned i = 0; i < nheld; i++)
            T_OK(stk_loader_release(h, held[i], NULL));
        nheld = 0;
        T_OK(stk_loader_stop(h));
        T_OK(stk_loader_start(h));
        break;
    default: { /* seek to a random position (or a new epoch), then one more batch */
        for (unsigned i = 0; i < nheld; i++)
            T_OK(stk_loader_release(h, held[i], NULL));
        nheld = 0;
        uint64_t ep = t_xorshift(rng) % 3, pos = t_xorshift(rng) % N;
        if (t_xorshift(rng) % 2)
            T_OK(stk_loader_seek(h, ep, pos - pos % BS));
        else
            T_OK(stk_loader_set_epoch(h, ep));
        const stk_batch *b;
        rc = stk_loader_next(h, NULL, 20000, &b);
        T_CHECK(rc != STK_TIMEOUT, "next() after seek timed out");
        if (rc == STK_OK)
            T_OK(stk_loader_release(h, b, NULL));
        break;
    }
    }
    stk_loader_destroy(h);
    return ending;
}

static void test_cycles(unsigned n, uint64_t seed)
{
    uint64_t rng = seed | 1;
    unsigned tally[4] = {0}, skipped = 0;
    int fd0 = -1;
    long rss0 = 0;
    unsigned warm = n < 40 ? n / 2 : 20;
    time_t t0 = time(NULL);
    for (unsigned c = 0; c < n; c++) {
        alarm(120);
        int e = one_cycle(&rng);
        if (e < 0)
            skipped++;
        else
            tally[e]++;
        if (c + 1 == warm) {
            fd0 = t_count_fds();
            rss0 = t_rss_kb();
        } else if (c + 1 > warm) {
            int fds = t_count_fds();
            T_CHECK(fds == fd0, "cycle %u: %d open descriptors, %d after warm-up", c, fds, fd0);
        }
        if (n >= 1000 && (c + 1) % 1000 == 0)
            fprintf(stderr, "  %u cycles, RSS %ld KB, %ld s\n", c + 1, t_rss_kb(), (long)(time(NULL) - t0));
    }
    alarm(0);
    long rss = t_rss_kb();
    fprintf(stderr, "  %u cycles (destroy %u, cancel %u, stop/start %u, seek %u; io_uring unavailable %u): "
            "RSS %ld KB after warm-up, %ld KB at the end, fds %d\n", n, tally[0], tally[1], tally[2], tally[3],
            skipped, rss0, rss, fd0);
    /* allocator slack is allowed; a per-cycle leak of a batch ring (tens of KB) is not */
    if (!tl_sanitized())
        T_CHECK(rss - rss0 < 8192 + (long)n * 4, "RSS grew from %ld to %ld KB over %u cycles", rss0, rss, n);
}

/* More record errors than the list keeps: the count goes on, the list stays at 1024. */
static void test_error_cap(void)
{
    alarm(tl_sanitized() ? 400 : 120);
    stk_loader *h = tl_loader(D.path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_FAULT_EIO_PPM, 900000));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_DECODE));
    T_OK(stk_loader_start(h));
    long rss_mid = 0;
    uint64_t epochs = 0;
    while (stk_loader_error_count(h) < 2200) {
        const stk_batch *b;
        int rc = stk_loader_next(h, NULL, 20000, &b);
        if (rc == STK_END) {
            if (++epochs == 20)
                rss_mid = t_rss_kb();
            continue;
        }
        T_OK(rc);
        T_OK(stk_loader_release(h, b, NULL));
    }
    uint64_t n = stk_loader_error_count(h);
    stk_record_error e;
    T_OK(stk_loader_error_get(h, 1023, &e));
    T_CHECK(e.status == -EIO && e.sys_errno == EIO && strstr(e.where, "shard-00000.lmdb key"),
            "error 1023: %d %s", e.status, e.where);
    T_CHECK(stk_loader_error_get(h, 1024, &e) != STK_OK, "error 1024 of %llu is kept", (unsigned long long)n);
    if (!tl_sanitized())
        T_CHECK(t_rss_kb() - rss_mid < 4096, "RSS grew by %ld KB while errors were counted", t_rss_kb() - rss_mid);
    fprintf(stderr, "  %llu record errors over %llu epochs: 1024 kept, RSS %+ld KB from epoch 20 on\n",
            (unsigned long long)n, (unsigned long long)epochs, t_rss_kb() - rss_mid);
    stk_loader_destroy(h);
    alarm(0);
}

typedef struct twin {
    unsigned n;
    uint64_t seed;
} twin;

static void *twin_main(void *arg)
{
    twin *t = arg;
    uint64_t rng = t->seed;
    for (unsigned i = 0; i < t->n; i++)
        one_cycle(&rng);
    return NULL;
}

static void test_two_threads(unsigned n, uint64_t seed)
{
    /* a watchdog per cycle pair, not per run: STK_LONGRUN_TWIN runs hundreds */
    alarm((tl_sanitized() ? 600 : 180) + n * (tl_sanitized() ? 15 : 5));
    int fd0 = t_count_fds();
    twin a = {n, 0x1234567 ^ seed}, b = {n, 0x7654321 ^ seed};
    pthread_t ta, tb;
    T_CHECK(pthread_create(&ta, NULL, twin_main, &a) == 0 && pthread_create(&tb, NULL, twin_main, &b) == 0,
            "pthread_create");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    T_CHECK(t_count_fds() == fd0, "two threads: %d descriptors, %d before", t_count_fds(), fd0);
    fprintf(stderr, "  two threads x %u cycles on the same shards (seed %llu): ok\n", n, (unsigned long long)seed);
    alarm(0);
}

/* bench/longrun.sh: E epochs over PATH, RSS after each, least-squares slope. */
static int epochs_run(const char *path, unsigned epochs)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 128));
    T_OK(stk_loader_set(h, STK_P_SEED, 1));
    if (stk_loader_open(h, path) != STK_OK)
        T_FAIL("open %s: %s", path, stk_loader_last_error(h));
    T_OK(stk_loader_start(h));
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    long first = 0;
    printf("epoch\tseconds\tsamples\tsubstituted\trss_kb\n");
    for (unsigned e = 0; e < epochs; e++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        uint64_t n = 0, bad = 0;
        for (;;) {
            const stk_batch *bt;
            int rc = stk_loader_next(h, NULL, 60000, &bt);
            if (rc == STK_END)
                break;
            if (rc != STK_OK)
                T_FAIL("epoch %u: %s", e, stk_loader_last_error(h));
            n += bt->size;
            bad += bt->bad;
            T_OK(stk_loader_release(h, bt, NULL));
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        long rss = t_rss_kb();
        if (e == 0)
            first = rss;
        printf("%u\t%.2f\t%llu\t%llu\t%ld\n", e, (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9,
               (unsigned long long)n, (unsigned long long)bad, rss);
        fflush(stdout);
        if (e >= 1) { /* the slope from epoch 1 on: epoch 0 includes the warm-up */
            sx += e;
            sy += (double)rss;
            sxx += (double)e * e;
            sxy += (double)e * (double)rss;
        }
    }
    double m = epochs - 1;
    double slope = m >= 2 ? (m * sxy - sx * sy) / (m * sxx - sx * sx) : 0;
    printf("# RSS after epoch 0: %ld KB, after epoch %u: %ld KB; slope over epochs 1..%u: %.1f KB/epoch\n", first,
           epochs - 1, t_rss_kb(), epochs - 1, slope);
    char rep[4096];
    stk_loader_report(h, rep, sizeof rep);
    printf("%s", rep);
    stk_loader_destroy(h);
    return 0;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    const char *ep = getenv("STK_LONGRUN_EPOCHS");
    if (ep && *ep) {
        const char *path = getenv("STK_LONGRUN_DATA");
        T_CHECK(path && *path, "STK_LONGRUN_EPOCHS needs STK_LONGRUN_DATA");
        return epochs_run(path, (unsigned)atoi(ep));
    }
    make_data();
    const char *tw = getenv("STK_LONGRUN_TWIN");
    if (tw && *tw) { /* only the two-thread part: N cycles per thread, seeds from STK_LONGRUN_SEED */
        const char *sd = getenv("STK_LONGRUN_SEED");
        test_two_threads((unsigned)atoi(tw), sd && *sd ? strtoull(sd, NULL, 0) : 0);
        tl_data_free(&D);
        printf("test_longrun: ok\n");
        return 0;
    }
    const char *cy = getenv("STK_LONGRUN_CYCLES");
    unsigned n = cy && *cy ? (unsigned)atoi(cy) : tl_sanitized() ? 40 : 200;
    test_cycles(n, 0x5eed);
    if (!(cy && *cy)) {
        test_error_cap();
        test_two_threads(tl_sanitized() ? 10 : 40, 0);
    }
    tl_data_free(&D);
    printf("test_longrun: ok\n");
    return 0;
}
