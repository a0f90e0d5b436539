/* SPDX-License-Identifier: MIT */
/*
 * test_loader_bad.c — bad records through the whole loader. A dataset written with stk_writer
 * holds an empty record, a truncated JPEG, a JPEG whose frame header says height 0, one with
 * garbage before its first marker (a libjpeg warning: decoded and counted unless strict), a PNG,
 * an image over the pixel limit, and a record whose payload is then corrupted on disk (CRC32C). By default
 * (with STK_P_MAX_BAD_FRACTION raised above the dataset's 15%) the epoch goes on: every bad record
 * is replaced by another, good record of the dataset (since 0.5: not a grey image) — in eval mode
 * its pixels equal that record's own sample, and it carries that record's label — flagged in
 * batch->substituted, counted in batch->bad and the stats, and kept in the error list with the
 * record named (shard, key and source name) and the reason; the good records
 * are intact and every index arrives once.
 * Strict mode: next() fails at the batch holding the first bad record, naming it; it keeps
 * failing until a seek; a seek past it goes on. Under fault injection (EIO on every read) the
 * epoch still completes with errno reported.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "image_in.h"
#include "test_loader_util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define N 40
#define BS 8

enum { I_EMPTY = 3, I_TRUNC = 9, I_HDR = 12, I_WARN = 15, I_PNG = 21, I_HUGE = 29, I_CRC = 34 };
static const int BAD[] = {I_EMPTY, I_TRUNC, I_HDR, I_PNG, I_HUGE, I_CRC};
#define NBAD 6

/* The 16-byte PNG stub: not a JPEG, or (since 0.5, where the build decodes PNG) a truncated PNG. */
static int png_status(void) { return stk__img_can_decode(STK__IMG_PNG) ? STK_E_TRUNCATED : STK_E_NOT_JPEG; }

static int is_bad(uint64_t i)
{
    for (int k = 0; k < NBAD; k++)
        if ((uint64_t)BAD[k] == i)
            return 1;
    return 0;
}

static const char *source_of(size_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "src/img-%02zu.jpg", i);
    return buf;
}

static void make_bad_dataset(tl_data *d)
{
    tl_data_make(d, "loaderbad", N);
    free(d->payload[I_EMPTY]);
    d->payload[I_EMPTY] = malloc(1);
    d->len[I_EMPTY] = 0;
    d->len[I_TRUNC] = d->len[I_TRUNC] / 2; /* cut inside the scan */
    /* the frame header says height 0: libjpeg refuses it */
    int sof = 0;
    for (size_t k = 2; k + 9 < d->len[I_HDR]; k++)
        if (d->payload[I_HDR][k] == 0xff && (d->payload[I_HDR][k + 1] == 0xc0 || d->payload[I_HDR][k + 1] == 0xc2)) {
            d->payload[I_HDR][k + 5] = 0;
            d->payload[I_HDR][k + 6] = 0;
            sof = 1;
            break;
        }
    T_CHECK(sof, "SOF marker found");
    /* 60 garbage bytes inserted between SOI and the next marker: libjpeg skips them with a
     * warning (decoded, counted; an error only in strict mode) */
    {
        uint8_t *p = malloc(d->len[I_WARN] + 60);
        memcpy(p, d->payload[I_WARN], 2);
        memset(p + 2, 0x55, 60);
        memcpy(p + 62, d->payload[I_WARN] + 2, d->len[I_WARN] - 2);
        free(d->payload[I_WARN]);
        d->payload[I_WARN] = p;
        d->len[I_WARN] += 60;
    }
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    free(d->payload[I_PNG]);
    d->payload[I_PNG] = malloc(sizeof png);
    memcpy(d->payload[I_PNG], png, sizeof png);
    d->len[I_PNG] = sizeof png;
    free(d->payload[I_HUGE]);
    d->payload[I_HUGE] = t_make_jpeg(260, 250, 5, T_420, 80, 0, &d->len[I_HUGE]); /* 65000 px */

    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_open(w, d->path));
    char src[64];
    for (size_t i = 0; i < d->n; i++)
        T_OK(stk_writer_add(w, d->payload[i], d->len[i], d->label[i], source_of(i, src, sizeof src)));
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);

    /* flip a payload byte of I_CRC on disk */
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, d->path));
    stk_record_info info;
    T_OK(stk_dataset_record(ds, I_CRC, &info));
    const char *shard = stk_dataset_shard_path(ds, info.shard);
    int fd = open(shard, O_RDWR);
    T_CHECK(fd >= 0, "open %s", shard);
    uint8_t byte;
    off_t at = (off_t)info.offset + (off_t)info.length / 2;
    T_CHECK(pread(fd, &byte, 1, at) == 1, "read");
    byte ^= 0x5a;
    T_CHECK(pwrite(fd, &byte, 1, at) == 1, "write");
    close(fd);
    stk_dataset_destroy(ds);
}

static stk_loader *bad_loader(const tl_data *d, int strict)
{
    stk_loader *h = tl_loader(d->path, BS, 2);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_set(h, STK_P_MAX_PIXELS, 50000));
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, STK_NHWC));
    T_OK(stk_loader_set(h, STK_P_STRICT, strict));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    return h;
}

static void test_default_policy(const tl_data *d)
{
    stk_loader *h = bad_loader(d, 0);
    T_OK(stk_loader_set(h, STK_P_MODE, STK_MODE_EVAL)); /* a sample is its record's, whatever the key */
    T_OK(stk_loader_start(h));
    for (uint64_t ep = 0; ep < 2; ep++) {
        tl_epoch e;
        T_CHECK(tl_run(h, &e, -1) == STK_END, "the epoch goes on past bad records");
        T_CHECK(e.n == N, "all %d samples delivered (%zu)", N, e.n);
        size_t sb = e.sample_bytes;
        for (size_t i = 0; i < N; i++) {
            T_CHECK(e.index[i] == i, "order");
            if (!is_bad(i))
                T_CHECK(e.label[i] == d->label[i], "label of %zu: %d", i, e.label[i]);
            if (e.subst[i] != is_bad(i)) {
                for (uint64_t k = 0; k < stk_loader_error_count(h); k++) {
                    stk_record_error re;
                    if (stk_loader_error_get(h, k, &re) == STK_OK && re.index == i)
                        fprintf(stderr, "record %zu: %s: %s\n", i, re.where, re.reason);
                }
                T_FAIL("substituted[%zu] = %d", i, e.subst[i]);
            }
            const uint8_t *px = e.images + i * sb;
            size_t grey = 0;
            for (size_t k = 0; k < sb; k++)
                grey += px[k] == 128;
            T_CHECK(grey < sb, "record %zu: not a grey image", i);
            if (is_bad(i)) {
                /* the substitute is a good record's sample, with that record's label */
                size_t same = N;
                for (size_t p = 0; p < N && same == N; p++)
                    if (!is_bad(p) && memcmp(e.images + p * sb, px, sb) == 0)
                        same = p;
                T_CHECK(same < N, "bad record %zu replaced by a good record's sample", i);
                T_CHECK(e.label[i] == d->label[same], "bad record %zu: label %d, its substitute %zu has %d", i,
                        e.label[i], same, d->label[same]);
            }
        }
        tl_epoch_free(&e);
    }
    /* the loader already prefetches epoch 2, so the counters may include some of its records:
     * the error list tells the epochs apart. Stop it first so the counts and the error list
     * stop moving while they are compared (stop keeps both). */
    T_OK(stk_loader_stop(h));
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.substituted >= 2 * NBAD && st.substituted <= 3 * NBAD, "stats: %llu substituted",
            (unsigned long long)st.substituted);
    T_CHECK(st.crc_errors >= 2, "stats: %llu CRC errors", (unsigned long long)st.crc_errors);
    T_CHECK(st.decode_warnings >= 2, "libjpeg warnings counted: %llu", (unsigned long long)st.decode_warnings);
    T_CHECK(st.decode_errors + st.io_errors + st.crc_errors == st.substituted, "stats: errors add up");
    uint64_t nerr = stk_loader_error_count(h);
    T_CHECK(nerr == st.substituted || nerr >= 2 * NBAD, "error count %llu", (unsigned long long)nerr);
    int seen[N] = {0};
    for (uint64_t i = 0; i < nerr; i++) {
        stk_record_error re;
        T_OK(stk_loader_error_get(h, i, &re));
        T_CHECK(re.index < N && is_bad(re.index), "error %llu names a bad record (%llu)", (unsigned long long)i,
                (unsigned long long)re.index);
        T_CHECK(re.epoch <= 2, "epoch of error %llu", (unsigned long long)i);
        if (re.epoch == 2)
            continue;
        seen[re.index]++;
        char want[128], src[64];
        snprintf(want, sizeof want, "shard-00000.lmdb key %llu (%s)", (unsigned long long)re.index,
                 source_of(re.index, src, sizeof src));
        T_CHECK(strcmp(re.where, want) == 0, "where = '%s', want '%s'", re.where, want);
        T_CHECK(re.reason[0] != '\0' && re.status < 0, "reason for %llu: %s", (unsigned long long)re.index, re.reason);
        int want_status = re.index == I_EMPTY ? STK_E_EMPTY
                          : re.index == I_PNG ? png_status()
                          : re.index == I_HUGE ? STK_E_TOO_LARGE
                          : re.index == I_CRC ? STK_E_CRC
                          : re.index == I_TRUNC ? STK_E_TRUNCATED
                                                : 0;
        if (want_status)
            T_CHECK(re.status == want_status, "record %llu: status %s, want %s", (unsigned long long)re.index,
                    stk_status_name(re.status), stk_status_name(want_status));
        if (re.index == I_PNG)
            T_CHECK(strstr(re.reason, "PNG") != NULL, "PNG named: %s", re.reason);
        if (re.index == I_CRC)
            T_CHECK(strstr(re.reason, "CRC") != NULL, "CRC named: %s", re.reason);
    }
    for (int k = 0; k < NBAD; k++)
        T_CHECK(seen[BAD[k]] == 2, "record %d reported once per epoch", BAD[k]);
    stk_record_error re;
    T_CHECK(stk_loader_error_get(h, nerr, &re) == STK_E_RANGE, "past the end");
    /* the report names the first three entries of the error list (in the order the pipeline met
     * them, which two workers and the reader make vary from run to run) and counts the rest (the
     * loader prefetches on, so their number may have grown since nerr was read) */
    char rep[4096];
    stk_loader_report(h, rep, sizeof rep);
    T_CHECK(strstr(rep, "bad records: ") != NULL, "report: %s", rep);
    for (uint64_t i = 0; i < 3 && i < nerr; i++) {
        T_OK(stk_loader_error_get(h, i, &re));
        T_CHECK(strstr(rep, re.where) != NULL, "report lists error %llu (%s): %s", (unsigned long long)i, re.where,
                rep);
    }
    T_CHECK(nerr <= 3 || strstr(rep, " more (stk_loader_error_get)") != NULL, "report counts the rest: %s", rep);
    stk_loader_destroy(h);
}

static void test_strict(const tl_data *d)
{
    stk_loader *h = bad_loader(d, 1);
    T_OK(stk_loader_start(h));
    const stk_batch *b;
    int rc = stk_loader_next(h, NULL, -1, &b);
    T_CHECK(rc == STK_E_EMPTY && b == NULL, "strict: batch 0 fails with the empty record: %s", stk_strerror(rc));
    const char *msg = stk_loader_last_error(h);
    T_CHECK(strstr(msg, "shard-00000.lmdb key 3") && strstr(msg, "img-03"), "names the record: %s", msg);
    T_CHECK(stk_loader_next(h, NULL, -1, &b) == STK_E_EMPTY, "the failure is sticky");
    /* skip to batch 1: records 8..15 hold the truncated (9) and the broken-header (12) one; the
     * lower sample is named */
    T_OK(stk_loader_seek(h, 0, BS));
    rc = stk_loader_next(h, NULL, -1, &b);
    T_CHECK(rc == STK_E_TRUNCATED, "batch 1 fails: %s", stk_strerror(rc));
    T_CHECK(strstr(stk_loader_last_error(h), "key 9 "), "names record 9: %s", stk_loader_last_error(h));
    /* batch 2 (16..23) holds the PNG; batch 4 (32..39) the CRC error */
    T_OK(stk_loader_seek(h, 0, 3 * BS));
    rc = stk_loader_next(h, NULL, -1, &b);
    T_CHECK(rc == STK_E_TOO_LARGE, "batch 3 fails with the pixel limit: %s", stk_strerror(rc));
    T_OK(stk_loader_seek(h, 0, 4 * BS));
    rc = stk_loader_next(h, NULL, -1, &b);
    T_CHECK(rc == STK_E_CRC, "batch 4 fails with the CRC: %s", stk_strerror(rc));
    T_CHECK(strstr(stk_loader_last_error(h), "key 34"), "names record 34: %s", stk_loader_last_error(h));
    stk_loader_destroy(h);

    /* a good batch passes in strict mode */
    h = bad_loader(d, 1);
    T_OK(stk_loader_start(h));
    T_OK(stk_loader_seek(h, 0, 2 * BS - 0));
    T_CHECK(stk_loader_next(h, NULL, -1, &b) == png_status(), "batch 2 holds the PNG");
    stk_loader_destroy(h);
}

static void test_faults(const tl_data *d)
{
    /* every read fails with EIO: the epoch completes, all substituted, errno kept */
    stk_loader *h = bad_loader(d, 0);
    T_OK(stk_loader_set(h, STK_P_FAULT_EIO_PPM, 1000000));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    T_CHECK(tl_run(h, &e, -1) == STK_END, "epoch completes under EIO");
    T_CHECK(e.n == N, "all delivered");
    for (size_t i = 0; i < N; i++)
        T_CHECK(e.subst[i] == 1 && e.payload[i] == 0, "all substituted");
    stk_record_error re;
    T_OK(stk_loader_error_get(h, 0, &re));
    T_CHECK(re.sys_errno == EIO || re.status == -EIO, "errno EIO kept (status %d errno %d)", re.status, re.sys_errno);
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.io_errors >= N - 1, "io errors %llu", (unsigned long long)st.io_errors);
    stk_loader_destroy(h);
    tl_epoch_free(&e);
}

int main(void)
{
    tl_data d;
    make_bad_dataset(&d);
    test_default_policy(&d);
    test_strict(&d);
    test_faults(&d);
    tl_data_free(&d);
    printf("test_loader_bad: ok\n");
    return 0;
}
