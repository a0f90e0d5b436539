/* SPDX-License-Identifier: MIT */
/*
 * reader_verify.c — one read from plan to delivery, whatever the backend.
 *
 * O_DIRECT (cfg->direct, shards and foreign LMDB): the read covers the 4096-aligned range that
 * encloses the value, into a page-aligned buffer; the value is sliced out. A shard whose O_DIRECT
 * descriptor is -1 (refused at open) is read buffered; a read that fails with EINVAL marks the
 * shard refused and is redone buffered. Short reads are resubmitted from the last aligned point;
 * a read that reaches end of file before the value's end is STK_E_TRUNCATED (the shard shrank).
 *
 * Verification (stoker shards): the 16-byte record header must have its shard's magic (STK1 in a
 * format-1 shard, STK2 in a format-2 one: a record cannot claim the older, weaker check) and a
 * payload length equal to the table length - 16; the stored checksum must match unless
 * cfg->verify_crc = 0: format 1 CRC32C(payload), format 2 CRC32C(payload || label || target row),
 * so a changed label or target is a bad record too. Foreign LMDB values and files have neither. An error never stops the
 * reader: the work item is delivered to SINK with status, sys_errno and a detail (offset, sizes).
 *
 * Fault injection (tests): per work item a draw from stk__rng keyed by (fault_seed, epoch,
 * index) decides, each with its rate in parts per million, whether the read fails with EIO (the
 * read is issued, its result replaced by -EIO), is cut short (the first request asks for about
 * half the bytes, so the resubmit path runs), or is delayed by fault_delay_us (before it is
 * issued). Same seed, same faults.
 */
#include "reader_verify.h"

#include "format.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int stk__rd_wants_direct(const stk__reader *r, uint32_t shard)
{
    if (!r->cfg.direct || r->files || r->bk == BK_MMAP)
        return 0;
    const stk__shard *sh = &r->ds->shards[shard];
    return sh->fd_direct >= 0 && !atomic_load(&r->refused[shard]);
}

void stk__rd_sleep_us(uint32_t us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Set up slot S for record INDEX (shards / foreign). Returns STK_OK or an error status with the
 * detail filled in (delivered without I/O). */
int stk__rd_plan(stk__reader *r, rslot *s)
{
    const stk__rec *rec = &r->ds->recs[s->rd.index];
    const stk__shard *sh = &r->ds->shards[rec->shard];
    s->shard = rec->shard;
    s->voff = rec->off;
    s->vlen = rec->len;
    s->done = 0;
    s->retries = 0;
    if (rec->off > sh->file_size || rec->len > sh->file_size - rec->off) {
        snprintf(s->rd.detail, sizeof(s->rd.detail), "value at %llu (%u bytes) outside the file (%llu bytes)",
                 (unsigned long long)rec->off, rec->len, (unsigned long long)sh->file_size);
        return STK_E_CORRUPT;
    }
    s->direct = stk__rd_wants_direct(r, rec->shard);
    if (s->direct) {
        s->fd = sh->fd_direct;
        s->base_off = rec->off / ALIGN * ALIGN;
        s->req = (uint32_t)stk__rd_span(rec->off, rec->len);
    } else {
        s->fd = sh->fd;
        s->base_off = rec->off;
        s->req = rec->len;
    }
    s->vskip = (uint32_t)(rec->off - s->base_off);
    s->want = s->vskip + rec->len;
    if (s->req > s->cap) { /* cannot happen: the pool was sized from the table */
        snprintf(s->rd.detail, sizeof(s->rd.detail), "read of %u bytes exceeds the %zu-byte buffer",
                 s->req, s->cap);
        return STK_E_RANGE;
    }
    return STK_OK;
}

/* Redo a direct read buffered (the filesystem refused O_DIRECT). */
static void to_buffered(stk__reader *r, rslot *s)
{
    atomic_store(&r->refused[s->shard], 1);
    s->direct = 0;
    s->fd = r->ds->shards[s->shard].fd;
    s->base_off = s->voff;
    s->req = s->vlen;
    s->vskip = 0;
    s->want = s->vlen;
    s->done = 0;
}

/* Length of the next request: the rest of the span; a fault-injected short read asks for about
 * half of it the first time (aligned for O_DIRECT). */
uint32_t stk__rd_next_len(rslot *s)
{
    uint32_t rest = s->req - s->done;
    if (s->fault_short && s->done == 0 && s->retries == 0) {
        uint32_t half = rest / 2;
        if (s->direct)
            half = half / ALIGN * ALIGN;
        if (half > 0)
            rest = half;
        s->fault_short = 0;
    }
    return rest;
}

void stk__rd_draw_faults(const stk__reader *r, rslot *s)
{
    const stk__reader_config *c = &r->cfg;
    s->fault_eio = s->fault_short = s->fault_delay = 0;
    if (!c->fault_eio_ppm && !c->fault_short_ppm && !c->fault_delay_ppm)
        return;
    stk__rng g;
    stk__rng_init(&g, c->fault_seed, s->rd.epoch, s->rd.index);
    s->fault_eio = stk__rng_below(&g, 1000000) < c->fault_eio_ppm;
    s->fault_short = stk__rng_below(&g, 1000000) < c->fault_short_ppm;
    s->fault_delay = stk__rng_below(&g, 1000000) < c->fault_delay_ppm;
}

/* Check the bytes of a completed read and fill rd (data, len, label, status). */
static void verify(stk__reader *r, rslot *s)
{
    stk__read *rd = &s->rd;
    const uint8_t *v = s->mem + s->vskip;
    uint32_t vlen = s->vlen;
    if (r->files || r->ds->shards[s->shard].foreign) {
        rd->label = stk__dataset_static_label(r->ds, rd->index);
        if (vlen == 0) {
            rd->status = STK_E_EMPTY;
            snprintf(rd->detail, sizeof(rd->detail), "empty %s", r->files ? "file" : "value");
            return;
        }
        rd->data = v;
        rd->len = vlen;
        return;
    }
    int32_t label;
    uint32_t crc, plen;
    int version = 0;
    const stk__shard *sh = &r->ds->shards[s->shard];
    int rc = stk__rec_header_decode(v, vlen, &version, &label, &crc, &plen);
    if (rc == STK_OK && version != sh->version)
        rc = STK_E_FORMAT;
    if (rc != STK_OK) {
        rd->status = rc;
        if (rc == STK_E_FORMAT)
            snprintf(rd->detail, sizeof(rd->detail),
                     "record header at %llu: bad magic %02x%02x%02x%02x (a format-%d shard's is STK%d)",
                     (unsigned long long)s->voff, vlen > 0 ? v[0] : 0, vlen > 1 ? v[1] : 0,
                     vlen > 2 ? v[2] : 0, vlen > 3 ? v[3] : 0, sh->version, sh->version);
        else
            snprintf(rd->detail, sizeof(rd->detail), "record header at %llu: value of %u bytes too short",
                     (unsigned long long)s->voff, vlen);
        return;
    }
    rd->label = label;
    if ((uint64_t)plen + STK__REC_HDR != vlen) {
        rd->status = STK_E_CORRUPT;
        snprintf(rd->detail, sizeof(rd->detail), "record header at %llu: payload %u bytes, table says %u",
                 (unsigned long long)s->voff, plen, vlen - STK__REC_HDR);
        return;
    }
    if (plen == 0) {
        rd->status = STK_E_EMPTY;
        snprintf(rd->detail, sizeof(rd->detail), "empty payload at %llu", (unsigned long long)s->voff);
        return;
    }
    if (r->cfg.verify_crc) {
        const stk_dataset *ds = r->ds;
        const void *trow = ds->targets && ds->trow ? ds->targets + ds->trow * rd->index : NULL;
        uint32_t got = stk__rec_crc(version, stk__crc32c(0, v + STK__REC_HDR, plen), label, trow,
                                    trow ? ds->trow : 0);
        if (got != crc) {
            rd->status = STK_E_CRC;
            if (version >= 2)
                snprintf(rd->detail, sizeof(rd->detail),
                         "crc32c %08x, stored %08x: payload (%u bytes at offset %llu), label %d%s changed",
                         got, crc, plen, (unsigned long long)(s->voff + STK__REC_HDR), label,
                         trow ? " or target" : "");
            else
                snprintf(rd->detail, sizeof(rd->detail),
                         "crc32c %08x, stored %08x (payload %u bytes at offset %llu)", got, crc, plen,
                         (unsigned long long)(s->voff + STK__REC_HDR));
            return;
        }
    }
    rd->data = v + STK__REC_HDR;
    rd->len = plen;
}

/* Hand S to SINK (status already set, or verify first when status is OK). */
void stk__rd_deliver(stk__reader *r, rslot *s, int do_verify)
{
    stk__read *rd = &s->rd;
    uint64_t t0 = stk__now_ns();
    if (do_verify && rd->status == STK_OK)
        verify(r, s);
    if (rd->status != STK_OK) {
        rd->data = NULL;
        rd->len = 0;
        if (r->files || (r->ds->nshards && r->ds->shards[s->shard].foreign))
            rd->label = stk__dataset_static_label(r->ds, rd->index);
        atomic_fetch_add(&r->clock.errors, 1);
    } else {
        atomic_fetch_add(&r->clock.items, 1);
        atomic_fetch_add(&r->clock.bytes, rd->len);
    }
    uint64_t t1 = stk__now_ns();
    stk__clock_add(&r->clock.busy_ns, t1 - t0);
    int rc = r->sink(r->user, rd);
    stk__clock_add(&r->clock.blocked_ns, stk__now_ns() - t1);
    if (rc != STK_OK)
        stk__reader_release(r, rd);
}

void stk__rd_fail(rslot *s, int status, int sys_errno, const char *fmt, ...)
{
    s->rd.status = status;
    s->rd.sys_errno = sys_errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->rd.detail, sizeof(s->rd.detail), fmt, ap);
    va_end(ap);
}

/* stk__rd_on_result without the count of resubmits. */
static int on_result_(stk__reader *r, rslot *s, int64_t res)
{
    if (s->fault_eio) {
        s->fault_eio = 0;
        stk__rd_fail(s, -EIO, EIO, "injected EIO: read at %llu (%u bytes)",
                     (unsigned long long)(s->base_off + s->done), s->cur_len);
        return 0;
    }
    if (res < 0) {
        int e = (int)-res;
        if ((e == EINTR || e == EAGAIN) && ++s->retries < MAX_RETRIES)
            return 1;
        if (e == EINVAL && s->direct) {
            to_buffered(r, s);
            return 1;
        }
        stk__rd_fail(s, (int)res, e, "read at %llu (%u bytes) of value at %llu: %s",
                     (unsigned long long)(s->base_off + s->done), s->cur_len, (unsigned long long)s->voff,
                     strerror(e));
        return 0;
    }
    if (res == 0) {
        stk__rd_fail(s, STK_E_TRUNCATED, 0,
                     "end of file at %llu: value at %llu needs %u bytes (file shrank?)",
                     (unsigned long long)(s->base_off + s->done), (unsigned long long)s->voff, s->vlen);
        return 0;
    }
    uint32_t before = s->done;
    s->done += (uint32_t)res;
    if (s->done >= s->want)
        return 0;
    if (s->direct)
        s->done = s->done / ALIGN * ALIGN; /* O_DIRECT: resume at an aligned point */
    if (s->done <= before && ++s->retries >= MAX_RETRIES) {
        stk__rd_fail(s, STK_E_TRUNCATED, 0, "short reads make no progress at %llu (value at %llu, %u bytes)",
                     (unsigned long long)(s->base_off + s->done), (unsigned long long)s->voff, s->vlen);
        return 0;
    }
    return 1;
}

int stk__rd_on_result(stk__reader *r, rslot *s, int64_t res)
{
    int again = on_result_(r, s, res);
    if (again)
        atomic_fetch_add(&r->resubmits, 1);
    return again;
}
