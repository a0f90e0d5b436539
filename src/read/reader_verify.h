/* SPDX-License-Identifier: MIT */
/*
 * reader_verify.h — one read from plan to delivery, common to every backend: where to read
 * (O_DIRECT span or buffered), the injected faults, a request's result (resubmit or finish),
 * verification of the bytes (record header, CRC32C) and the hand-over to SINK. Internal to
 * src/read; implemented in reader_verify.c.
 */
#ifndef STK_READER_VERIFY_H
#define STK_READER_VERIFY_H

#include "reader_internal.h"

/* Is SHARD read with O_DIRECT now (asked for, a descriptor, not refused since)? */
int stk__rd_wants_direct(const stk__reader *r, uint32_t shard);
/* Sleep US microseconds (through EINTR). */
void stk__rd_sleep_us(uint32_t us);

/* Set up slot S for its record (shards / foreign). Returns STK_OK or an error status with the
 * detail filled in (delivered without I/O). */
int stk__rd_plan(stk__reader *r, rslot *s);
/* Length of the next request: the rest of the span; a fault-injected short read asks for about
 * half of it the first time (aligned for O_DIRECT). */
uint32_t stk__rd_next_len(rslot *s);
/* Draw S's injected faults from (fault_seed, epoch, index). */
void stk__rd_draw_faults(const stk__reader *r, rslot *s);
/* Handle the result RES (bytes or -errno) of S's request. Returns 1 when another request is
 * needed (s->done / fd / lengths updated), 0 when finished (rd.status says how). */
int stk__rd_on_result(stk__reader *r, rslot *s, int64_t res);
/* Set S's status, errno and detail. */
void stk__rd_fail(rslot *s, int status, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Hand S to SINK (status already set, or verify first when DO_VERIFY and the status is OK); the
 * buffer comes back to the pool if SINK declines it. */
void stk__rd_deliver(stk__reader *r, rslot *s, int do_verify);

#endif
