/* SPDX-License-Identifier: MIT */
/* test_loader_util.h — helpers of the loader and pipeline tests: a small dataset of generated
 * JPEGs written with stk_writer (labels vary, sizes vary), a loader set up on it, and running an
 * epoch into flat arrays. Header-only (static functions) so each test stays one program. */
#ifndef STK_TEST_LOADER_UTIL_H
#define STK_TEST_LOADER_UTIL_H

#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The dataset: N records; record i is a JPEG of a size that varies with i and label (i*7) % 5. */
typedef struct tl_data {
    char *dir;      /* temp dir (removed by tl_data_free) */
    char path[4200];
    size_t n;
    uint8_t **payload;
    size_t *len;
    int32_t *label;
} tl_data;

static inline int32_t tl_label(size_t i) { return (int32_t)((i * 7) % 5); }

/* A JPEG for record I: sides 40..103 x 36..99, subsampling rotating over 4:4:4/4:2:2/4:2:0/gray. */
static inline uint8_t *tl_jpeg(size_t i, size_t *len)
{
    int w = 40 + (int)((i * 37) % 64), h = 36 + (int)((i * 53) % 64);
    int sub = (int)(i % 4) == 3 ? T_GRAY : (int)(i % 3);
    return t_make_jpeg(w, h, 1000 + i, sub, 85, i % 5 == 4 ? T_PROGRESSIVE : 0, len);
}

/* Write the records (payload[i] may be replaced by the caller before: pass NULL to generate). */
static inline void tl_write(tl_data *d)
{
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    const char *classes[] = {"c0", "c1", "c2", "c3", "c4"};
    T_OK(stk_writer_set_classes(w, classes, 5));
    T_OK(stk_writer_open(w, d->path));
    for (size_t i = 0; i < d->n; i++)
        T_OK(stk_writer_add(w, d->payload[i], d->len[i], d->label[i], NULL));
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
}

static inline void tl_data_make(tl_data *d, const char *tag, size_t n)
{
    memset(d, 0, sizeof(*d));
    d->dir = t_tmpdir(tag);
    snprintf(d->path, sizeof d->path, "%s/ds", d->dir);
    d->n = n;
    d->payload = calloc(n, sizeof(*d->payload));
    d->len = calloc(n, sizeof(*d->len));
    d->label = calloc(n, sizeof(*d->label));
    for (size_t i = 0; i < n; i++) {
        d->payload[i] = tl_jpeg(i, &d->len[i]);
        d->label[i] = tl_label(i);
    }
}

static inline void tl_data_free(tl_data *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->payload[i]);
    free(d->payload);
    free(d->len);
    free(d->label);
    t_rmtree(d->dir);
    free(d->dir);
}

/* A loader on PATH with small outputs: out 32x32 (train), batch BS, WORKERS threads, seed 7. */
static inline stk_loader *tl_loader(const char *path, int bs, int workers)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, bs));
    T_OK(stk_loader_set(h, STK_P_WORKERS, workers));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 32));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 32));
    T_OK(stk_loader_set(h, STK_P_SEED, 7));
    T_OK(stk_loader_set(h, STK_P_QUEUE_DEPTH, 8));
    T_OK(stk_loader_set(h, STK_P_IO_THREADS, 2));
    T_OK(stk_loader_open(h, path));
    return h;
}

/* One epoch's output, flattened in delivery order. */
typedef struct tl_epoch {
    size_t n, nbatches;
    uint64_t epoch;
    uint64_t *index;
    int32_t *label;
    uint8_t *subst;
    uint32_t *payload;
    uint8_t *images;       /* n * sample_bytes (NULL for STK_STAGE_READ) */
    size_t sample_bytes;
    uint32_t *batch_size;  /* per batch */
} tl_epoch;

static inline void tl_epoch_free(tl_epoch *e)
{
    free(e->index);
    free(e->label);
    free(e->subst);
    free(e->payload);
    free(e->images);
    free(e->batch_size);
    memset(e, 0, sizeof(*e));
}

/* Read batches until STK_END (checks order, numbering, positions). MAX_BATCHES < 0: all. Returns
 * the status that ended it (STK_END, or an error). */
static inline int tl_run(stk_loader *h, tl_epoch *e, long max_batches)
{
    memset(e, 0, sizeof(*e));
    size_t cap = 64;
    e->index = malloc(cap * sizeof(*e->index));
    e->label = malloc(cap * sizeof(*e->label));
    e->subst = malloc(cap);
    e->payload = malloc(cap * sizeof(*e->payload));
    e->batch_size = malloc(4096 * sizeof(*e->batch_size));
    int rc;
    uint64_t want_first = UINT64_MAX;
    for (;;) {
        if (max_batches >= 0 && (long)e->nbatches >= max_batches)
            return STK_OK;
        const stk_batch *b;
        rc = stk_loader_next(h, NULL, 20000, &b);
        if (rc != STK_OK)
            break;
        T_CHECK(b->size >= 1 && b->size <= b->capacity, "batch size %u", b->size);
        if (want_first != UINT64_MAX)
            T_CHECK(b->first_sample == want_first && b->epoch == e->epoch, "batches in order: first %llu want %llu",
                    (unsigned long long)b->first_sample, (unsigned long long)want_first);
        else
            e->epoch = b->epoch;
        T_CHECK(b->number == b->first_sample / b->capacity, "batch number %llu", (unsigned long long)b->number);
        want_first = b->first_sample + b->size;
        uint64_t te, ts;
        T_OK(stk_loader_tell(h, &te, &ts));
        T_CHECK(te == b->epoch && ts == want_first, "tell after a batch");
        while (e->n + b->size > cap) {
            cap *= 2;
            e->index = realloc(e->index, cap * sizeof(*e->index));
            e->label = realloc(e->label, cap * sizeof(*e->label));
            e->subst = realloc(e->subst, cap);
            e->payload = realloc(e->payload, cap * sizeof(*e->payload));
            if (e->images)
                e->images = realloc(e->images, cap * e->sample_bytes);
        }
        if (b->images && !e->images) {
            e->sample_bytes = b->sample_bytes;
            e->images = malloc(cap * e->sample_bytes);
        }
        uint32_t bad = 0;
        for (uint32_t i = 0; i < b->size; i++) {
            e->index[e->n + i] = b->indices[i];
            e->label[e->n + i] = b->labels[i];
            e->subst[e->n + i] = b->substituted[i];
            e->payload[e->n + i] = b->payload_bytes[i];
            bad += b->substituted[i];
        }
        T_CHECK(bad == b->bad, "batch->bad %u counts substituted %u", b->bad, bad);
        if (b->images) {
            T_CHECK(b->image_bytes == (size_t)b->size * b->sample_bytes, "image bytes");
            memcpy(e->images + e->n * e->sample_bytes, b->images, b->image_bytes);
        }
        e->n += b->size;
        if (e->nbatches < 4096)
            e->batch_size[e->nbatches] = b->size;
        e->nbatches++;
        T_OK(stk_loader_release(h, b, NULL));
    }
    return rc;
}

/* Every dataset index exactly once with its label. */
static inline void tl_check_cover(const tl_epoch *e, const tl_data *d)
{
    T_CHECK(e->n == d->n, "epoch has %zu samples, dataset %zu", e->n, d->n);
    uint8_t *seen = calloc(d->n, 1);
    for (size_t i = 0; i < e->n; i++) {
        T_CHECK(e->index[i] < d->n, "index %llu in range", (unsigned long long)e->index[i]);
        T_CHECK(!seen[e->index[i]], "index %llu delivered twice", (unsigned long long)e->index[i]);
        seen[e->index[i]] = 1;
        T_CHECK(e->label[i] == d->label[e->index[i]], "label of %llu: %d, want %d",
                (unsigned long long)e->index[i], e->label[i], d->label[e->index[i]]);
        T_CHECK(e->payload[i] == d->len[e->index[i]], "payload bytes of %llu: %u, want %zu",
                (unsigned long long)e->index[i], e->payload[i], d->len[e->index[i]]);
    }
    free(seen);
}

/* Under a sanitizer (env STOKER_SANITIZE set by CTest) loops are shortened. */
static inline int tl_sanitized(void)
{
    const char *s = getenv("STOKER_SANITIZE");
    return s && *s;
}

/* Run FN(ARG) in a child under alarm(SECONDS): a signal (SIGBUS, say) or a hang fails the case
 * instead of the test program; 1 when the case passed. */
static inline int tl_in_child(const char *what, void (*fn)(int), int arg, unsigned seconds)
{
    fflush(NULL);
    pid_t pid = fork();
    T_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        alarm(seconds);
        fn(arg);
        _exit(0);
    }
    int ws;
    T_CHECK(waitpid(pid, &ws, 0) == pid, "waitpid");
    if (WIFSIGNALED(ws)) {
        fprintf(stderr, "FAIL %s: killed by signal %d (%s)%s\n", what, WTERMSIG(ws), strsignal(WTERMSIG(ws)),
                WTERMSIG(ws) == SIGALRM ? ": it hung" : "");
        return 0;
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "FAIL %s: exit %d\n", what, WEXITSTATUS(ws));
        return 0;
    }
    return 1;
}

#endif
