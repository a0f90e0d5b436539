/* SPDX-License-Identifier: MIT */
/*
 * reader.h — the read stage: turns (position, dataset index) work items into payload bytes in
 * pool buffers, many reads in flight. Backends: io_uring (O_DIRECT or buffered), a pread thread
 * pool, open/read/close per file (files layout), LMDB's own mmap path (reference). Internal.
 *
 * Flow: reader threads call WORK() for the next item (the loader blocks there while the batch
 * ring is full: that is the reader's "blocked" time), read it, verify it (record header, CRC32C),
 * and hand it to SINK() in completion order. The consumer returns each buffer with
 * stk__reader_release(). Buffers come from a pool allocated at start: no malloc per record.
 */
#ifndef STK_READER_H
#define STK_READER_H

#include "common.h"
#include "dataset.h"

typedef struct stk__read {
    uint64_t pos;        /* sample position in the epoch (from WORK) */
    uint64_t index;      /* dataset index (from WORK) */
    uint64_t epoch;      /* (from WORK) */
    const uint8_t *data; /* payload (stoker shards: after the record header); NULL on error */
    uint32_t len;        /* payload bytes */
    int32_t label;       /* record header / folder label / foreign label */
    int status;          /* STK_OK, or STK_E_CRC / STK_E_FORMAT / STK_E_TRUNCATED / STK_E_EMPTY / -errno;
                          * also STK_E_CORRUPT (header length != table length - 16, or a value
                          * outside the file), STK_E_CHANGED (a file's size changed since open),
                          * STK_E_RANGE (index past the end), STK_E_LMDB (mmap backend) */
    int sys_errno;       /* errno of a failed read, else 0 */
    char detail[128];    /* short cause for errors, e.g. "pread at 123456: short read 100 of 4096" */
    uint32_t disk_bytes; /* bytes requested from storage */
    void *priv;          /* reader bookkeeping */
} stk__read;

typedef struct stk__reader_config {
    int backend;              /* STK_IO_* */
    int direct;               /* O_DIRECT wanted */
    int queue_depth;
    size_t inflight_bytes;
    int verify_crc;
    int io_threads;           /* pread / files / mmap threads */
    uint32_t fault_eio_ppm, fault_short_ppm, fault_delay_ppm, fault_delay_us;
    uint64_t fault_seed;
    /* Buffers the consumer may hold between SINK and stk__reader_release beyond those in flight
     * (the pool has in-flight + hold normal buffers); 0 = max(queue depth or io_threads, 16).
     * When all are held, the reader waits (blocked time). */
    uint32_t hold_buffers;
} stk__reader_config;

/* Next work item. Returns 1 with the outputs set, 0 when there is no more work (stop). May block.
 * Called concurrently from the reader's threads. */
typedef int (*stk__work_fn)(void *user, uint64_t *pos, uint64_t *index, uint64_t *epoch);
/* A completed read (success or error). Returns STK_OK (ownership passes: the consumer calls
 * stk__reader_release) or STK_E_CANCELLED (the reader keeps and recycles the buffer). May block;
 * the reader counts that as blocked time. Called concurrently. */
typedef int (*stk__sink_fn)(void *user, stk__read *rd);

typedef struct stk__reader stk__reader;

/* Allocate the buffer pool and set up the backend (io_uring probe; on failure with AUTO, the
 * pread pool, with the reason kept for the stats). DS must stay open. The files layout always
 * uses the open/read/close pool (reported as STK_IO_PREAD); STK_IO_MMAP needs LMDB shards.
 * Environment: STOKER_DISABLE_URING=1 makes io_uring setup fail as if io_uring_queue_init()
 * returned -ENOSYS (AUTO falls back, URING fails), so tests can force the fallback path.
 * Faults (cfg fault_*) are drawn per item from (fault_seed, epoch, index): reproducible. */
int stk__reader_create(stk__reader **out, stk_dataset *ds, const stk__reader_config *cfg, char *err);
/* Start the threads. */
int stk__reader_start(stk__reader *r, stk__work_fn work, stk__sink_fn sink, void *user, char *err);
/* Return a buffer (any thread). */
void stk__reader_release(stk__reader *r, stk__read *rd);
/* Wait for the threads to finish. The caller first makes WORK return 0 and SINK return
 * STK_E_CANCELLED; in-flight reads are completed and recycled before this returns. */
void stk__reader_stop(stk__reader *r);
void stk__reader_destroy(stk__reader *r);

typedef struct stk__reader_info {
    int backend;           /* STK_IO_* in use */
    int direct;            /* O_DIRECT in use */
    int fallback_reason;   /* status that caused a fallback, 0 = none */
    char note[96];         /* "io_uring, O_DIRECT" / "pread pool (io_uring refused: EPERM)" */
    uint32_t inflight_now, inflight_max;
    uint64_t disk_bytes;
    size_t pool_bytes;
    uint64_t resubmits;    /* requests issued again: short reads, EINTR/EAGAIN, O_DIRECT refused */
    uint64_t direct_reads; /* requests issued with O_DIRECT */
    size_t normal_buffer, large_buffer; /* pool size classes (bytes) */
    uint32_t normal_buffers, large_buffers;
} stk__reader_info;

void stk__reader_get_info(stk__reader *r, stk__reader_info *out);
/* The read in flight the longest (a stalled one: a hung file system, a FIFO swapped in): STK_OK
 * with its dataset index and age, or STK_E_RANGE when none is in flight. Any thread while R
 * lives; a hint for messages (a read that ends or begins during the scan may be misreported). */
int stk__reader_oldest(stk__reader *r, uint64_t *index, uint64_t *age_ns);
const stk__stage_clock *stk__reader_clock(const stk__reader *r);

#endif
