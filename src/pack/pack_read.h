/* SPDX-License-Identifier: MIT */
/*
 * pack_read.h — the readers of a pack: threads that read whole source files into a window of
 * slots, in plan order as the packing thread takes them. Internal; implemented in pack_read.c.
 */
#ifndef STK_PACK_READ_H
#define STK_PACK_READ_H

#include "common.h"
#include "folder.h"
#include "transcode.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* One source file read: its payload (the file, or the JPEG it became) and CRC32C, or why it is
 * skipped (or, for a damaged JPEG kept, why it is listed). */
typedef struct stk__pack_slot {
    uint64_t idx;
    int state; /* FREE, READING, READY */
    uint8_t *buf;
    size_t cap, len;
    int status; /* STK_OK or why the file is skipped */
    int kind;   /* the source's format (stk__img_kind) */
    int converted, resized; /* stored as JPEG (not a JPEG source); made smaller for max_side */
    int damaged;            /* a JPEG that does not decode fully, kept (keep_damaged): why in reason */
    int dims[2];            /* the stored image's width and height (0, 0 for a damaged JPEG) */
    uint32_t crc;
    char reason[STK__ERRLEN];
} stk__pack_slot;

typedef struct stk__packer {
    const stk__filelist *files;
    uint64_t n, next;
    uint64_t done;     /* files the writer has taken (the prefetcher stays ahead of it) */
    stk__pack_slot *slots;
    size_t nslots;
    stk__xform xf; /* what sources become (set before start) */
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cond_free, cond_ready;
    pthread_t *tids, prefetch_tid;
    int nthreads, have_prefetch;
} stk__packer;

/* Start THREADS readers (and a prefetcher) on FILES from plan position START. *pk must be zeroed
 * before. Returns STK_OK, or an error with ERR set; stk__packer_stop cleans up either way. */
int stk__packer_start(stk__packer *pk, const stk__filelist *files, uint64_t start, int threads, char *err);
/* File I's slot once it is read (files are taken in order, one at a time). */
stk__pack_slot *stk__packer_take(stk__packer *pk, uint64_t i);
/* Done with file I's slot S: it may take the next file of the window. */
void stk__packer_give(stk__packer *pk, stk__pack_slot *s, uint64_t i);
/* Stop and join the threads, free the window. */
void stk__packer_stop(stk__packer *pk);

#endif
