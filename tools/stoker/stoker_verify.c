/* SPDX-License-Identifier: MIT */
/*
 * stoker_verify.c — `stoker verify DST`: every record's CRC32C, with --decode every image
 * decoded too (threads over the records); bad records listed, exit 3.
 */
#include "stoker_cli.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage_verify[] =
    "usage: stoker verify DST [--decode] [--quiet]\n"
    "\n"
    "Read every record through the loader's reader (io_uring or a pread pool) and check its\n"
    "stored CRC32C: in a stoker-shard 2 shard it covers the payload, the label and the target,\n"
    "in a stoker-shard 1 shard (packed before 0.5) the payload only; each shard's format is\n"
    "printed. With --decode also decode each image in full with libjpeg-turbo (corrupt data,\n"
    "libjpeg warnings and images over the pixel limit are errors).\n"
    "Bad records are listed (dataset index, shard and key or file, reason).\n"
    "\n"
    "exit codes: 0 all records good, 3 bad records found, 1 cannot open or read DST (or write\n"
    "            the report), 2 usage error, 5 DST is not a dataset (a folder with neither\n"
    "            shards nor images, such as the parent of a dataset folder, or /etc)\n";


/* ---- verify ----------------------------------------------------------------------------------- */

/*
 * Pass 1 (always): every record through the loader's reader stage (STK_STAGE_READ: io_uring or
 * the pread pool, CRC32C checked, no shuffle, one epoch). A bad record is substituted in its
 * batch and flagged there, so every bad index is seen, however many; the reasons come from
 * stk_loader_error_get (the loader keeps the first 1024).
 * Pass 2 (--decode): every record that passed is decoded in full with libjpeg-turbo, strictly
 * (corrupt data that libjpeg would patch over is an error), by a few threads, each with its own
 * decoder. A full decode, not the loader's eval crop window: corruption outside the crop would
 * go unnoticed there.
 */

typedef struct bad_rec {
    uint64_t index;
    char reason[600];
} bad_rec;

typedef struct bad_list {
    bad_rec *v;
    size_t n, cap;
    pthread_mutex_t mu;
} bad_list;

static int bad_add(bad_list *l, uint64_t index, const char *reason)
{
    pthread_mutex_lock(&l->mu);
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        bad_rec *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            pthread_mutex_unlock(&l->mu);
            return -1;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n].index = index;
    snprintf(l->v[l->n].reason, sizeof l->v[l->n].reason, "%s", reason);
    l->n++;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

static int cmp_bad(const void *a, const void *b)
{
    uint64_t x = ((const bad_rec *)a)->index, y = ((const bad_rec *)b)->index;
    return x < y ? -1 : x > y;
}

/* verify lists every bad record itself: the loader's own messages would repeat them */
static void quiet_log(void *user, int level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

/* Pass 1 (every bad record is to be seen, however many: no STK_P_MAX_BAD_FRACTION). Returns 0,
 * or -1 with a message printed. */
static int verify_read_pass(const char *path, uint64_t n, bad_list *bad, uint8_t *badmap, int quiet)
{
    stk_loader *h;
    int rc = stk_loader_create(&h);
    if (rc) {
        fprintf(stderr, "%s: %s\n", g_prog, stk_strerror(rc));
        return -1;
    }
    if ((rc = stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ)) || (rc = stk_loader_set(h, STK_P_SHUFFLE, 0)) ||
        (rc = stk_loader_set(h, STK_P_VERIFY_CRC, 1)) || (rc = stk_loader_set(h, STK_P_BATCH_SIZE, 256)) ||
        (rc = stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)) || (rc = stk_loader_set_log(h, quiet_log, NULL)) ||
        (rc = stk_loader_open(h, path)) || (rc = stk_loader_start(h))) {
        fprintf(stderr, "%s: %s: %s\n", g_prog, path,
                *stk_loader_last_error(h) ? stk_loader_last_error(h) : stk_strerror(rc));
        stk_loader_destroy(h);
        return -1;
    }
    uint64_t seen = 0;
    const stk_batch *b;
    for (;;) {
        rc = stk_loader_next(h, NULL, -1, &b);
        if (rc == STK_END)
            break;
        if (rc) {
            fprintf(stderr, "%s: %s: %s\n", g_prog, path,
                    *stk_loader_last_error(h) ? stk_loader_last_error(h) : stk_strerror(rc));
            stk_loader_destroy(h);
            return -1;
        }
        for (uint32_t i = 0; i < b->size; i++) {
            if (b->substituted[i] && b->indices[i] < n && !badmap[b->indices[i]]) {
                badmap[b->indices[i]] = 1;
                bad_add(bad, b->indices[i], "");
            }
        }
        seen += b->size;
        stk_loader_release(h, b, NULL);
    }
    /* reasons, as kept by the loader */
    uint64_t ne = stk_loader_error_count(h);
    for (uint64_t i = 0; i < ne && i < 1024; i++) {
        stk_record_error e;
        if (stk_loader_error_get(h, i, &e) != STK_OK)
            break;
        for (size_t k = 0; k < bad->n; k++) {
            if (bad->v[k].index == e.index && !bad->v[k].reason[0]) {
                snprintf(bad->v[k].reason, sizeof bad->v[k].reason, "%s", e.reason);
                break;
            }
        }
    }
    stk_stats st;
    if (!quiet && stk_loader_stats(h, &st) == STK_OK)
        fprintf(stderr, "verify: read %" PRIu64 " records with %s\n", seen, st.io_backend_note);
    stk_loader_destroy(h);
    if (seen != n) {
        fprintf(stderr, "%s: %s: the reader delivered %" PRIu64 " of %" PRIu64 " records\n", g_prog, path, seen, n);
        return -1;
    }
    return 0;
}

typedef struct dec_job {
    stk_dataset *ds;
    uint64_t n, next;
    const uint8_t *badmap;
    bad_list *bad;
    pthread_mutex_t *mu;
    int failed;
} dec_job;

static void *decode_thread(void *arg)
{
    dec_job *j = arg;
    stk_decoder *dec = NULL;
    uint8_t *buf = NULL, *pix = NULL;
    size_t cap = 0, pixcap = 0;
    if (stk_decoder_create(&dec) != STK_OK) {
        j->failed = 1;
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(j->mu);
        uint64_t i = j->next++;
        pthread_mutex_unlock(j->mu);
        if (i >= j->n)
            break;
        if (j->badmap[i])
            continue;
        size_t len;
        char reason[600] = "";
        int rc = stk_dataset_read(j->ds, i, buf, cap, &len, NULL);
        if (rc == STK_E_RANGE) {
            uint8_t *nb = realloc(buf, len ? len : 1);
            if (!nb) {
                j->failed = 1;
                break;
            }
            buf = nb;
            cap = len;
            rc = stk_dataset_read(j->ds, i, buf, cap, &len, NULL);
        }
        if (rc) {
            snprintf(reason, sizeof reason, "%s", stk_strerror(rc));
        } else {
            int w = 0, h = 0, c = 0, warn = 0;
            rc = stk_image_info(buf, len, &w, &h, &c);
            if (rc == STK_OK && (size_t)w * (size_t)h * 3 > pixcap) {
                uint8_t *np = realloc(pix, (size_t)w * (size_t)h * 3);
                if (!np) {
                    j->failed = 1;
                    break;
                }
                pix = np;
                pixcap = (size_t)w * (size_t)h * 3;
            }
            stk_decode_args a;
            memset(&a, 0, sizeof a);
            a.strict = 1;
            if (rc == STK_OK)
                rc = stk_decode(dec, buf, len, &a, pix, pixcap, &w, &h, &warn);
            if (rc)
                snprintf(reason, sizeof reason, "%s: %s", stk_status_name(rc),
                         *stk_decoder_last_error(dec) ? stk_decoder_last_error(dec) : stk_strerror(rc));
        }
        if (rc && bad_add(j->bad, i, reason) != 0) {
            j->failed = 1;
            break;
        }
    }
    free(buf);
    free(pix);
    stk_decoder_destroy(dec);
    return NULL;
}

/* What verify checked per shard: "shard-00000.lmdb: stoker-shard 2 (crc32c of payload, label and
 * target)"; one line for runs of shards of the same format. */
static void print_shard_formats(stk_dataset *ds)
{
    stk_dataset_info in;
    if (stk_dataset_info_get(ds, &in) != STK_OK)
        return;
    for (uint32_t a = 0, b; a < in.shards; a = b) {
        int f = stk_dataset_shard_format(ds, a);
        for (b = a + 1; b < in.shards && stk_dataset_shard_format(ds, b) == f; b++)
            ;
        char fmt[32] = "";
        if (f)
            snprintf(fmt, sizeof fmt, "stoker-shard %d ", f);
        const char *what = f >= 2 ? "crc32c of payload, label and target"
                           : f == 1 ? "crc32c of the payload only: packed before stoker 0.5, labels unchecked"
                                    : "no stored checksum";
        printf("%s", base_name(stk_dataset_shard_path(ds, a)));
        if (b - a > 1)
            printf(" .. %s", base_name(stk_dataset_shard_path(ds, b - 1)));
        printf(": %s(%s)\n", fmt, what);
    }
}

int cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    int decode = 0, quiet = 0;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(usage_verify, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--decode")) {
            decode = 1;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage(usage_verify, "unknown option %s", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            die_usage(usage_verify, "too many arguments (%s)", argv[i]);
        }
    }
    if (!path)
        die_usage(usage_verify, "verify needs DST");
    stk_dataset *ds = open_dataset(path);
    int refused = refuse_non_dataset(ds, path);
    if (refused) {
        stk_dataset_destroy(ds);
        return refused;
    }
    uint64_t n = stk_dataset_count(ds);
    bad_list bad = {NULL, 0, 0, PTHREAD_MUTEX_INITIALIZER};
    uint8_t *badmap = calloc(n ? n : 1, 1);
    if (!badmap) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        stk_dataset_destroy(ds);
        return EXIT_FAIL;
    }
    int status = 0;
    if (n && verify_read_pass(path, n, &bad, badmap, quiet) != 0)
        status = EXIT_FAIL;
    if (status == 0 && decode && n) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        int nt = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu;
        pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        dec_job job = {ds, n, 0, badmap, &bad, &mu, 0};
        pthread_t tids[16];
        int started = 0;
        for (int t = 0; t < nt; t++)
            if (pthread_create(&tids[t], NULL, decode_thread, &job) == 0)
                started++;
            else
                break;
        if (started == 0)
            decode_thread(&job);
        for (int t = 0; t < started; t++)
            pthread_join(tids[t], NULL);
        if (job.failed) {
            fprintf(stderr, "%s: out of memory while decoding\n", g_prog);
            status = EXIT_FAIL;
        }
    }
    if (bad.n > 1)
        qsort(bad.v, bad.n, sizeof *bad.v, cmp_bad);
    for (size_t k = 0; k < bad.n; k++) {
        char name[4400];
        stk_dataset_record_name(ds, bad.v[k].index, name, sizeof name);
        printf("BAD\t%" PRIu64 "\t%s\t%s\n", bad.v[k].index, name,
               bad.v[k].reason[0] ? bad.v[k].reason : "bad record (reason not kept: over 1024 errors)");
    }
    if (status == 0) {
        if (!quiet)
            print_shard_formats(ds);
        if (!quiet)
            printf("%s: %" PRIu64 " records, %zu bad (crc32c%s)\n", path, n, bad.n, decode ? " + full decode" : "");
        status = bad.n ? EXIT_BAD : 0;
    }
    free(bad.v);
    free(badmap);
    stk_dataset_destroy(ds);
    return status;
}
