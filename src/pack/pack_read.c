/* SPDX-License-Identifier: MIT */
/*
 * pack_read.c — reader threads read whole files into the slots of a window (slot = file index
 * mod W), turn each into its payload (transcode.c: a JPEG as it is once it decodes completely;
 * PNG, WebP, GIF, BMP, TIFF, PPM decoded and stored as a JPEG; anything over --max-side resized;
 * one transcoder per thread)
 * and compute the CRC32C; the packing thread takes the
 * slots strictly in order, so the dataset index of every record is deterministic whatever the
 * thread count, and memory is bounded by the window. SRC is only ever opened O_RDONLY.
 *
 * A cold source is read in dataset order, which is not the order of the files on disk: with a
 * couple of reader threads that is a few random reads in flight. A prefetcher asks the kernel
 * for the next files (POSIX_FADV_WILLNEED) ahead of the readers, which keeps many in flight.
 */
#include "pack_read.h"

#include "common.h"
#include "image_in.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SLOT_FREE = 0, SLOT_READING = 1, SLOT_READY = 2 };

/* Files the prefetcher asks the kernel for ahead of the packing thread. */
#define PREFETCH_AHEAD 128

/* Mark S skipped with STATUS and the reason; returns STATUS. */
static int skip(stk__pack_slot *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int skip(stk__pack_slot *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->reason, sizeof s->reason, fmt, ap);
    va_end(ap);
    s->status = status;
    return status;
}

/* Open PATH: a regular file under 4 GiB; its size in *size. A FIFO, socket, device or directory
 * is skipped, named, without being opened (or, swapped in since, opened without blocking). */
static int open_source(stk__pack_slot *s, const char *path, int *fd, size_t *size)
{
    struct stat st;
    char why[STK__ERRLEN];
    *fd = stk__open_regular(path, 0, &st, why);
    if (*fd < 0)
        return skip(s, *fd, "%s%s", *fd == STK_E_IO ? "" : "unreadable: ", why);
    if ((uint64_t)st.st_size > UINT32_MAX - 64) {
        close(*fd);
        return skip(s, STK_E_TOO_LARGE, "too large: %lld bytes (limit 4 GiB)", (long long)st.st_size);
    }
    *size = (size_t)st.st_size;
    return STK_OK;
}

/* Read FD into S's buffer, up to WANT bytes (one more than the size at open, to notice a file
 * that grew); *got set. */
static int read_source(stk__pack_slot *s, int fd, size_t want, size_t *got)
{
    if (s->cap < want) {
        size_t nc = STK__MAX(want, s->cap * 2);
        uint8_t *nb = realloc(s->buf, nc);
        if (!nb)
            return skip(s, STK_E_NOMEM, "out of memory reading %zu bytes", want);
        s->buf = nb;
        s->cap = nc;
    }
    int rc = stk__read_upto(fd, s->buf, want, got);
    if (rc)
        return skip(s, rc, "unreadable: read failed: %s", strerror(-rc));
    if (*got == want)
        return skip(s, STK_E_IO, "unreadable: file grew while read");
    return STK_OK;
}

/* The payload of the file read into S: itself, or the JPEG it becomes (copied into the slot:
 * the transcoder's buffer is reused by this thread's next file). */
static void to_payload(stk__packer *pk, stk__transcoder *tc, stk__pack_slot *s)
{
    const uint8_t *out = NULL;
    size_t out_len = 0;
    if (!tc) {
        skip(s, STK_E_NOMEM, "out of memory for a decoder");
        return;
    }
    int rc = stk__transcode(tc, &pk->xf, s->buf, s->len, &out, &out_len, &s->kind, &s->resized, &s->damaged,
                            s->dims, s->reason);
    if (rc != STK_OK) {
        s->status = rc;
        return;
    }
    s->converted = out && s->kind != STK__IMG_JPEG;
    if (out) {
        if (out_len > s->cap) {
            uint8_t *nb = malloc(out_len);
            if (!nb) {
                skip(s, STK_E_NOMEM, "out of memory for a %zu-byte payload", out_len);
                return;
            }
            free(s->buf);
            s->buf = nb;
            s->cap = out_len;
        }
        memcpy(s->buf, out, out_len);
        s->len = out_len;
    }
}

static void read_one(stk__packer *pk, stk__transcoder *tc, stk__pack_slot *s, uint64_t i)
{
    s->status = STK_OK;
    s->reason[0] = 0;
    s->len = 0;
    s->converted = s->resized = s->damaged = 0;
    int fd = -1;
    size_t size = 0, got = 0;
    if (open_source(s, pk->files->paths[i], &fd, &size) != STK_OK)
        return;
    int rc = read_source(s, fd, size + 1, &got);
    close(fd);
    if (rc != STK_OK)
        return;
    s->len = got;
    if (got == 0) {
        skip(s, STK_E_EMPTY, "empty file");
        return;
    }
    to_payload(pk, tc, s);
    if (s->status != STK_OK)
        return;
    s->crc = stk__crc32c(0, s->buf, s->len);
}

static void *reader_main(void *arg)
{
    stk__packer *pk = arg;
    stk__transcoder *tc = NULL;
    if (stk__transcoder_create(&tc) != STK_OK)
        tc = NULL; /* each file then fails with "out of memory" */
    pthread_mutex_lock(&pk->mu);
    for (;;) {
        while (!pk->stop && pk->next < pk->n && pk->slots[pk->next % pk->nslots].state != SLOT_FREE)
            pthread_cond_wait(&pk->cond_free, &pk->mu);
        if (pk->stop || pk->next >= pk->n)
            break;
        uint64_t i = pk->next++;
        stk__pack_slot *s = &pk->slots[i % pk->nslots];
        s->state = SLOT_READING;
        s->idx = i;
        pthread_mutex_unlock(&pk->mu);
        read_one(pk, tc, s, i);
        pthread_mutex_lock(&pk->mu);
        s->state = SLOT_READY;
        pthread_cond_broadcast(&pk->cond_ready);
    }
    pthread_mutex_unlock(&pk->mu);
    stk__transcoder_destroy(tc);
    return NULL;
}

static void *prefetch_main(void *arg)
{
    stk__packer *pk = arg;
    pthread_mutex_lock(&pk->mu);
    uint64_t i = pk->done;
    for (;;) {
        while (!pk->stop && i < pk->n && i >= pk->done + PREFETCH_AHEAD)
            pthread_cond_wait(&pk->cond_free, &pk->mu);
        if (pk->stop || i >= pk->n)
            break;
        if (i < pk->next) /* the readers are there already */
            i = pk->next;
        uint64_t j = i++;
        pthread_mutex_unlock(&pk->mu);
        if (j < pk->n) {
            struct stat st;
            char why[STK__ERRLEN];
            int fd = stk__open_regular(pk->files->paths[j], 0, &st, why);
            if (fd >= 0) {
                (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
                close(fd);
            }
        }
        pthread_mutex_lock(&pk->mu);
    }
    pthread_mutex_unlock(&pk->mu);
    return NULL;
}

int stk__packer_start(stk__packer *pk, const stk__filelist *files, uint64_t start, int threads, char *err)
{
    pk->files = files;
    pk->n = files->n;
    pk->next = start;
    pk->done = start;
    pk->nslots = (size_t)STK__MAX(4 * threads, 16);
    pk->slots = calloc(pk->nslots, sizeof *pk->slots);
    pk->tids = calloc((size_t)threads, sizeof *pk->tids);
    if (!pk->slots || !pk->tids)
        return stk__err(err, STK_E_NOMEM, "out of memory");
    pthread_mutex_init(&pk->mu, NULL);
    pthread_cond_init(&pk->cond_free, NULL);
    pthread_cond_init(&pk->cond_ready, NULL);
    for (int t = 0; t < threads; t++) {
        if (pthread_create(&pk->tids[t], NULL, reader_main, pk) != 0)
            break;
        pk->nthreads++;
    }
    if (pk->nthreads == 0)
        return stk__err(err, STK_E_NOMEM, "cannot start reader threads");
    pk->have_prefetch = pthread_create(&pk->prefetch_tid, NULL, prefetch_main, pk) == 0;
    return STK_OK;
}

stk__pack_slot *stk__packer_take(stk__packer *pk, uint64_t i)
{
    stk__pack_slot *s = &pk->slots[i % pk->nslots];
    pthread_mutex_lock(&pk->mu);
    while (!(s->state == SLOT_READY && s->idx == i))
        pthread_cond_wait(&pk->cond_ready, &pk->mu);
    pthread_mutex_unlock(&pk->mu);
    return s;
}

void stk__packer_give(stk__packer *pk, stk__pack_slot *s, uint64_t i)
{
    pthread_mutex_lock(&pk->mu);
    s->state = SLOT_FREE;
    pk->done = i + 1;
    pthread_cond_broadcast(&pk->cond_free);
    pthread_mutex_unlock(&pk->mu);
}

void stk__packer_stop(stk__packer *pk)
{
    if (pk->nthreads) {
        pthread_mutex_lock(&pk->mu);
        pk->stop = 1;
        pthread_cond_broadcast(&pk->cond_free);
        pthread_mutex_unlock(&pk->mu);
        for (int t = 0; t < pk->nthreads; t++)
            pthread_join(pk->tids[t], NULL);
        if (pk->have_prefetch)
            pthread_join(pk->prefetch_tid, NULL);
        pthread_mutex_destroy(&pk->mu);
        pthread_cond_destroy(&pk->cond_free);
        pthread_cond_destroy(&pk->cond_ready);
    }
    if (pk->slots) {
        for (size_t i = 0; i < pk->nslots; i++)
            free(pk->slots[i].buf);
        free(pk->slots);
    }
    free(pk->tids);
}
