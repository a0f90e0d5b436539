/* SPDX-License-Identifier: MIT */
/*
 * test_fault.c — storage faults through the public loader API: the reader's injected
 * faults (STK_P_FAULT_EIO_PPM / _SHORT_PPM / _DELAY_PPM) on every backend and on the files
 * layout, and a shard file that vanishes (unlink) or shrinks (ftruncate) in the middle of an
 * epoch.
 *
 * What must hold: no crash, no hang (an alarm() watchdog kills a hung test); every epoch delivers
 * every sample position exactly once; each failed read is substituted and reported by
 * stk_loader_error_get with the shard and key (or the file path), its status and, for I/O
 * errors, its errno; every sample that was not hit is bit-identical to a fault-free run (faults
 * never leak into other samples); short reads and delays change nothing; under STK_P_STRICT the
 * epoch stops with an error naming the record; and once the fault is gone the next epoch is
 * clean. The fault parameters can only be set before start, so "the fault is gone" is a fresh
 * loader (there is no way to clear faults on a running loader).
 *
 * stk-test: concurrency
 */
#include "test_loader_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 96
#define BS 16

static tl_data D;
static char g_files[4300]; /* the same images as an ImageFolder */

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL test_fault: watchdog: a step hung\n";
    if (write(2, m, sizeof m - 1) < 0) {
    }
    _exit(1);
}

static void watchdog(unsigned s)
{
    signal(SIGALRM, on_alarm);
    alarm(s);
}

static unsigned wd_secs(void) { return tl_sanitized() ? 240 : 60; }

/* The shards (with source names, as `stoker pack` writes them) and the ImageFolder. */
static void make_data(void)
{
    tl_data_make(&D, "fault", N);
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    const char *classes[] = {"c0", "c1", "c2", "c3", "c4"};
    T_OK(stk_writer_set_classes(w, classes, 5));
    T_OK(stk_writer_open(w, D.path));
    for (size_t i = 0; i < N; i++) {
        char src[64];
        snprintf(src, sizeof src, "c%d/img_%03zu.jpg", D.label[i], i);
        T_OK(stk_writer_add(w, D.payload[i], D.len[i], D.label[i], src));
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    snprintf(g_files, sizeof g_files, "%s/files", D.dir);
    for (size_t i = 0; i < N; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/c%d", g_files, D.label[i]);
        t_mkdirs(p);
        snprintf(p, sizeof p, "%s/c%d/img_%03zu.jpg", g_files, D.label[i], i);
        t_write_file(p, D.payload[i], D.len[i]);
    }
}

typedef struct fcfg {
    int backend;
    int64_t eio, shrt, delay, delay_us;
    int strict;
    int prefetch;
    uint64_t fseed;
} fcfg;

/* A started loader, or NULL when the backend is unavailable here (io_uring refused). */
static stk_loader *mk(const char *path, const fcfg *c)
{
    stk_loader *h = tl_loader(path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, c->backend));
    T_OK(stk_loader_set(h, STK_P_FAULT_EIO_PPM, c->eio));
    T_OK(stk_loader_set(h, STK_P_FAULT_SHORT_PPM, c->shrt));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, c->delay));
    if (c->delay_us)
        T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_US, c->delay_us));
    T_OK(stk_loader_set(h, STK_P_FAULT_SEED, (int64_t)c->fseed));
    T_OK(stk_loader_set(h, STK_P_STRICT, c->strict));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    if (c->prefetch)
        T_OK(stk_loader_set(h, STK_P_PREFETCH, c->prefetch));
    int rc = stk_loader_start(h);
    if (rc != STK_OK) {
        T_CHECK(c->backend == STK_IO_URING, "start: %s", stk_loader_last_error(h));
        stk_loader_destroy(h);
        return NULL;
    }
    return h;
}

static const char *backend_name(int b)
{
    return b == STK_IO_PREAD ? "pread" : b == STK_IO_URING ? "io_uring" : b == STK_IO_MMAP ? "mmap" : "auto";
}

/*
 * Compare a faulty epoch E (loader H, errors from number FIRST_ERR on) with the fault-free REF:
 * same order; unhit samples bit-identical with the same label; the substituted samples are
 * exactly the errors reported for this epoch, each naming WHERE_PART with a status in OK_STATUS
 * (0-terminated) and, for -errno statuses, that errno. Returns the number substituted.
 */
static size_t check_epoch(const char *what, stk_loader *h, const tl_epoch *ref, const tl_epoch *e,
                          uint64_t first_err, const char *where_part, const int *ok_status)
{
    T_CHECK(e->n == ref->n && e->n == N, "%s: %zu samples, want %d", what, e->n, N);
    T_CHECK(e->sample_bytes == ref->sample_bytes, "%s: sample bytes", what);
    uint8_t *hit = calloc(N, 1);
    size_t nsub = 0;
    for (size_t i = 0; i < e->n; i++) {
        T_CHECK(e->index[i] == ref->index[i], "%s: position %zu holds %llu, fault-free run %llu", what, i,
                (unsigned long long)e->index[i], (unsigned long long)ref->index[i]);
        T_CHECK(!ref->subst[i], "%s: the fault-free run substituted position %zu", what, i);
        if (e->subst[i]) {
            hit[e->index[i]] = 1;
            nsub++;
            continue;
        }
        T_CHECK(e->label[i] == ref->label[i], "%s: label at %zu", what, i);
        T_CHECK(memcmp(e->images + i * e->sample_bytes, ref->images + i * e->sample_bytes, e->sample_bytes) == 0,
                "%s: unhit sample %llu differs from the fault-free run", what, (unsigned long long)e->index[i]);
    }
    uint64_t nerr = stk_loader_error_count(h), mine = 0;
    for (uint64_t j = first_err; j < nerr; j++) {
        stk_record_error re;
        T_OK(stk_loader_error_get(h, j, &re));
        /* the loader prefetches the next epoch after the last batch: its errors may be here */
        T_CHECK(re.epoch == e->epoch || re.epoch == e->epoch + 1, "%s: error of epoch %llu", what,
                (unsigned long long)re.epoch);
        if (re.epoch != e->epoch)
            continue;
        mine++;
        T_CHECK(re.index < N && hit[re.index] == 1, "%s: error for index %llu, which was not substituted "
                "(or twice)", what, (unsigned long long)re.index);
        hit[re.index] = 2;
        T_CHECK(strstr(re.where, where_part) != NULL, "%s: error where `%s` lacks `%s`", what, re.where,
                where_part);
        int ok = 0;
        for (const int *s = ok_status; *s; s++)
            ok |= re.status == *s;
        T_CHECK(ok, "%s: error status %d (%s) at %s: %s", what, re.status, stk_status_name(re.status), re.where,
                re.reason);
        if (re.status < 0 && re.status > -1000)
            T_CHECK(re.sys_errno == -re.status, "%s: status %s but errno %d", what, stk_status_name(re.status),
                    re.sys_errno);
        T_CHECK(re.reason[0] != '\0', "%s: empty reason", what);
    }
    T_CHECK(mine == nsub, "%s: %llu errors reported for the epoch, %zu samples substituted", what,
            (unsigned long long)mine, nsub);
    free(hit);
    return nsub;
}

/* A full fault-free epoch of PATH with BACKEND: the reference. 0 when the backend is missing. */
static int ref_epoch(const char *path, int backend, tl_epoch *ref)
{
    fcfg c = {.backend = backend};
    stk_loader *h = mk(path, &c);
    if (!h)
        return 0;
    T_CHECK(tl_run(h, ref, -1) == STK_END, "reference epoch: %s", stk_loader_last_error(h));
    T_CHECK(stk_loader_error_count(h) == 0, "reference epoch has errors");
    stk_loader_destroy(h);
    return 1;
}

/* EIO at 10 %, short reads at 30 %, delays at 20 %: on one backend of one layout. */
static void faults_on(const char *path, int backend, const char *where_part)
{
    char what[128];
    tl_epoch ref, e, e2;
    watchdog(wd_secs());
    if (!ref_epoch(path, backend, &ref)) {
        fprintf(stderr, "  %s: %s unavailable here, skipped\n", where_part, backend_name(backend));
        return;
    }
    /* EIO: substituted and reported, epoch goes on; reproducible from the fault seed */
    static const int eio_ok[] = {-EIO, 0};
    fcfg c = {.backend = backend, .eio = 100000, .fseed = 11};
    stk_loader *h = mk(path, &c);
    T_CHECK(tl_run(h, &e, -1) == STK_END, "EIO epoch ended with: %s", stk_loader_last_error(h));
    snprintf(what, sizeof what, "%s/%s EIO 10%%", where_part, backend_name(backend));
    size_t nsub = check_epoch(what, h, &ref, &e, 0, where_part, eio_ok);
    T_CHECK(nsub >= 2 && nsub <= N / 4, "%s: %zu of %d reads failed at a 10%% rate", what, nsub, N);
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.io_errors >= nsub && st.substituted >= nsub, "%s: stats io_errors %llu substituted %llu", what,
            (unsigned long long)st.io_errors, (unsigned long long)st.substituted);
    /* the next epoch of the same loader: faults are drawn per (seed, epoch, index): others fail */
    T_CHECK(tl_run(h, &e2, -1) == STK_END, "second EIO epoch: %s", stk_loader_last_error(h));
    T_CHECK(e2.epoch == e.epoch + 1, "second epoch number");
    size_t nsub2 = 0, rep2 = 0;
    for (size_t i = 0; i < e2.n; i++)
        nsub2 += e2.subst[i];
    for (uint64_t j = 0; j < stk_loader_error_count(h); j++) {
        stk_record_error re;
        T_OK(stk_loader_error_get(h, j, &re));
        rep2 += re.epoch == e2.epoch;
    }
    T_CHECK(rep2 == nsub2 && nsub2 > 0 && memcmp(e.subst, e2.subst, N) != 0,
            "%s: epoch 2: %zu substituted, %zu reported", what, nsub2, rep2);
    stk_loader_destroy(h);
    fprintf(stderr, "  %s: %zu + %zu substituted and reported in two epochs\n", what, nsub, nsub2);
    /* the same fault seed gives the same failures */
    tl_epoch e3;
    h = mk(path, &c);
    T_CHECK(tl_run(h, &e3, -1) == STK_END, "EIO epoch again: %s", stk_loader_last_error(h));
    T_CHECK(memcmp(e3.subst, e.subst, N) == 0, "%s: the same fault seed failed other reads", what);
    stk_loader_destroy(h);
    tl_epoch_free(&e3);
    tl_epoch_free(&e2);
    tl_epoch_free(&e);

    /* strict: the epoch stops with an error naming the record; no hang, clean destroy */
    c.strict = 1;
    h = mk(path, &c);
    int rc = tl_run(h, &e, -1);
    T_CHECK(rc != STK_OK && rc != STK_END && rc != STK_TIMEOUT, "strict EIO: next() returned %d", rc);
    const char *le = stk_loader_last_error(h);
    T_CHECK(strstr(le, where_part) && strstr(le, "strict"), "strict EIO: last error `%s`", le);
    for (size_t i = 0; i < e.n; i++)
        T_CHECK(!e.subst[i], "strict: a substituted sample was delivered");
    T_CHECK(e.n < N, "strict: the whole epoch was delivered");
    fprintf(stderr, "  %s strict: stopped after %zu samples: %s\n", what, e.n, le);
    /* a stopped strict loader must not hang a later call */
    const stk_batch *b;
    rc = stk_loader_next(h, NULL, 5000, &b);
    T_CHECK(rc != STK_TIMEOUT, "strict: next() after the failure hangs");
    if (rc == STK_OK)
        T_OK(stk_loader_release(h, b, NULL));
    stk_loader_destroy(h);
    tl_epoch_free(&e);

    /* the fault gone (a fresh loader without faults): clean epochs, the first equal to the ref */
    c = (fcfg){.backend = backend};
    h = mk(path, &c);
    T_CHECK(tl_run(h, &e, -1) == STK_END, "after the fault: %s", stk_loader_last_error(h));
    check_epoch("after the fault", h, &ref, &e, 0, where_part, eio_ok);
    T_CHECK(stk_loader_error_count(h) == 0, "errors after the fault is gone");
    stk_loader_destroy(h);
    tl_epoch_free(&e);

    /* short reads and delays: resubmitted / waited for; the epoch is identical, no errors */
    c = (fcfg){.backend = backend, .shrt = 300000, .delay = 200000, .delay_us = 300, .fseed = 5};
    h = mk(path, &c);
    T_CHECK(tl_run(h, &e, -1) == STK_END, "short/delay epoch: %s", stk_loader_last_error(h));
    snprintf(what, sizeof what, "%s/%s short 30%% + delay 20%%", where_part, backend_name(backend));
    T_CHECK(check_epoch(what, h, &ref, &e, 0, where_part, eio_ok) == 0, "%s: samples substituted", what);
    stk_loader_destroy(h);
    tl_epoch_free(&e);
    tl_epoch_free(&ref);
    alarm(0);
}

static void copy_file(const char *from, const char *to)
{
    size_t len;
    uint8_t *b = t_read_file(from, &len);
    T_CHECK(b, "read %s", from);
    t_write_file(to, b, len);
    free(b);
}

/* A private copy of the shard dataset (destructive tests). */
static void copy_dataset(const char *dst)
{
    t_mkdirs(dst);
    char a[4400], b[4400];
    snprintf(a, sizeof a, "%s/shard-00000.lmdb", D.path);
    snprintf(b, sizeof b, "%s/shard-00000.lmdb", dst);
    copy_file(a, b);
}

/* The shard file is unlinked mid-epoch: the loader keeps its descriptors and reads on. */
static void vanish(int backend)
{
    char dir[4400], shard[4500];
    tl_epoch ref, a, e, e2;
    watchdog(wd_secs());
    snprintf(dir, sizeof dir, "%s/vanish-%d", D.dir, backend);
    copy_dataset(dir);
    if (!ref_epoch(dir, backend, &ref))
        return;
    fcfg c = {.backend = backend, .prefetch = 2};
    stk_loader *h = mk(dir, &c);
    T_CHECK(tl_run(h, &a, 1) == STK_OK && a.n == BS, "first batch");
    snprintf(shard, sizeof shard, "%s/shard-00000.lmdb", dir);
    T_CHECK(unlink(shard) == 0, "unlink %s", shard);
    /* the rest of the epoch, then one more */
    T_CHECK(tl_run(h, &e, -1) == STK_END, "after unlink: %s", stk_loader_last_error(h));
    T_CHECK(a.n + e.n == N, "after unlink: %zu + %zu samples", a.n, e.n);
    for (size_t i = 0; i < e.n; i++) {
        T_CHECK(e.index[i] == ref.index[a.n + i] && !e.subst[i], "after unlink: sample %zu", i);
        T_CHECK(memcmp(e.images + i * e.sample_bytes, ref.images + (a.n + i) * e.sample_bytes, e.sample_bytes) == 0,
                "after unlink: sample %zu differs", i);
    }
    T_CHECK(tl_run(h, &e2, -1) == STK_END && e2.n == N, "the epoch after the unlink");
    T_CHECK(stk_loader_error_count(h) == 0, "errors after unlink: the loader lost its descriptors");
    stk_loader_destroy(h);
    fprintf(stderr, "  vanish/%s: unlinked after batch 0: epoch finished and one more, 0 errors\n",
            backend_name(backend));
    tl_epoch_free(&a);
    tl_epoch_free(&e);
    tl_epoch_free(&e2);
    tl_epoch_free(&ref);
    alarm(0);
}

/* Wait until the reader has filled the batch ring and stopped reading (no read in flight, the
 * item count still for 200 ms; at most 10 s). The mmap backend checks the file size before it
 * copies from the map, but a shrink between that check and the copy would still be a SIGBUS (a
 * documented residual race, docs/HARDENING.md): the test cuts the file while no read runs. */
static void quiesce(stk_loader *h)
{
    uint64_t last = UINT64_MAX;
    int still = 0;
    for (int i = 0; i < 200 && still < 4; i++) {
        stk_stats st;
        T_OK(stk_loader_stats(h, &st));
        if (st.read.items == last && st.inflight_now == 0)
            still++;
        else
            still = 0;
        last = st.read.items;
        usleep(50000);
    }
}

/* The shard file shrinks mid-epoch (ftruncate to a third, or TINY: to 8 KiB, LMDB's two meta
 * pages, so that the B-tree pages are gone too: naming a record must not touch them): reads past
 * the new end fail, are replaced by good records and reported; strict stops, and so does the
 * default mode when no good record is left (TINY); with the file restored a fresh loader is
 * clean. */
static void shrink(int backend, int strict, int tiny)
{
    char dir[4400], shard[4500];
    tl_epoch ref, a, e;
    watchdog(wd_secs());
    snprintf(dir, sizeof dir, "%s/shrink-%d-%d-%d", D.dir, backend, strict, tiny);
    copy_dataset(dir);
    if (!ref_epoch(dir, backend, &ref))
        return;
    snprintf(shard, sizeof shard, "%s/shard-00000.lmdb", dir);
    struct stat st;
    T_CHECK(stat(shard, &st) == 0, "stat");
    fcfg c = {.backend = backend, .prefetch = 2, .strict = strict};
    stk_loader *h = mk(dir, &c);
    T_CHECK(tl_run(h, &a, 1) == STK_OK && a.n == BS, "first batch");
    quiesce(h);
    int fd = open(shard, O_WRONLY);
    T_CHECK(fd >= 0 && ftruncate(fd, tiny ? 8192 : st.st_size / 3) == 0, "ftruncate %s", shard);
    close(fd);
    int rc = tl_run(h, &e, -1);
    char what[96];
    snprintf(what, sizeof what, "shrink to %s/%s%s", tiny ? "8 KiB" : "1/3", backend_name(backend), strict ? " strict" : "");
    if (strict) {
        const char *le = stk_loader_last_error(h);
        T_CHECK(rc != STK_OK && rc != STK_END && rc != STK_TIMEOUT, "%s: next() returned %d", what, rc);
        T_CHECK(strstr(le, "shard-00000.lmdb key") && strstr(le, "strict"), "%s: last error `%s`", what, le);
        fprintf(stderr, "  %s: stopped after %zu more samples: %s\n", what, e.n, le);
    } else if (tiny) {
        /* every record is gone: no good record is left to replace a bad one, and the pass fails
         * naming the record (since 0.5; before, grey images went on) */
        const char *le = stk_loader_last_error(h);
        T_CHECK(rc != STK_OK && rc != STK_END && rc != STK_TIMEOUT, "%s: next() returned %d", what, rc);
        T_CHECK(strstr(le, "shard-00000.lmdb key") && strstr(le, "no good record found to replace it"),
                "%s: last error `%s`", what, le);
        fprintf(stderr, "  %s: stopped after %zu more samples: %s\n", what, e.n, le);
    } else {
        T_CHECK(rc == STK_END, "%s: the epoch ended with %d: %s", what, rc, stk_loader_last_error(h));
        /* join the two parts and compare with the reference */
        tl_epoch all = e;
        all.n = a.n + e.n;
        all.index = malloc(N * sizeof *all.index);
        all.label = malloc(N * sizeof *all.label);
        all.subst = malloc(N);
        all.images = malloc(N * e.sample_bytes);
        T_CHECK(all.n == N, "%s: %zu samples", what, all.n);
        memcpy(all.index, a.index, a.n * sizeof *all.index);
        memcpy(all.index + a.n, e.index, e.n * sizeof *all.index);
        memcpy(all.label, a.label, a.n * sizeof *all.label);
        memcpy(all.label + a.n, e.label, e.n * sizeof *all.label);
        memcpy(all.subst, a.subst, a.n);
        memcpy(all.subst + a.n, e.subst, e.n);
        memcpy(all.images, a.images, a.n * e.sample_bytes);
        memcpy(all.images + a.n * e.sample_bytes, e.images, e.n * e.sample_bytes);
        static const int ok[] = {STK_E_TRUNCATED, STK_E_CHANGED, STK_E_CORRUPT, STK_E_IO, -EIO, 0};
        size_t nsub = check_epoch(what, h, &ref, &all, 0, "shard-00000.lmdb key", ok);
        T_CHECK(nsub > 0, "%s: nothing failed after cutting the shard to a third", what);
        stk_record_error re;
        T_OK(stk_loader_error_get(h, 0, &re));
        fprintf(stderr, "  %s: %zu of %zu remaining samples substituted, e.g. %s: %s: %s\n", what, nsub, e.n,
                re.where, stk_status_name(re.status), re.reason);
        free(all.index);
        free(all.label);
        free(all.subst);
        free(all.images);
    }
    stk_loader_destroy(h);
    tl_epoch_free(&a);
    tl_epoch_free(&e);
    /* the fault gone: the shard restored, a fresh loader reads clean epochs */
    copy_dataset(dir);
    c = (fcfg){.backend = backend};
    h = mk(dir, &c);
    T_CHECK(tl_run(h, &e, -1) == STK_END && e.n == N, "%s: after restoring: %s", what, stk_loader_last_error(h));
    T_CHECK(stk_loader_error_count(h) == 0, "%s: errors after restoring", what);
    for (size_t i = 0; i < N; i++)
        T_CHECK(memcmp(e.images + i * e.sample_bytes, ref.images + i * e.sample_bytes, e.sample_bytes) == 0,
                "%s: after restoring, sample %zu differs", what, i);
    stk_loader_destroy(h);
    tl_epoch_free(&e);
    tl_epoch_free(&ref);
    alarm(0);
}

int main(void)
{
    make_data();
    static const int backends[] = {STK_IO_PREAD, STK_IO_URING, STK_IO_MMAP};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        faults_on(D.path, backends[i], "shard-00000.lmdb key");
    faults_on(g_files, STK_IO_AUTO, "img_");
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        vanish(backends[i]);
        shrink(backends[i], 0, 0);
        shrink(backends[i], 1, 0);
        shrink(backends[i], 0, 1);
        shrink(backends[i], 1, 1);
    }
    tl_data_free(&D);
    printf("test_fault: ok\n");
    return 0;
}
