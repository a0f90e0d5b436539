/* SPDX-License-Identifier: MIT */
/*
 * manifest_lines.c — the physical lines of a manifest, from text in memory or from its file read
 * through a window of at most max_line + 64 KiB. A line longer than max_line is never held: it
 * is reported by number and skipped to its line break chunk by chunk, so a 1 GB line costs the
 * memory of a short one (reading the whole file first made it 4 GB of copies and a class name).
 */
#include "manifest_internal.h"

#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MF_CHUNK ((size_t)64 << 10)

void stk__mf_size_text(size_t n, char *buf, size_t cap)
{
    if (n && n % (1u << 20) == 0)
        snprintf(buf, cap, "%zu MiB", n >> 20);
    else if (n && n % (1u << 10) == 0)
        snprintf(buf, cap, "%zu KiB", n >> 10);
    else
        snprintf(buf, cap, "%zu bytes", n);
}

void stk__mf_src_text(mf_src *s, const char *text, size_t len, size_t max)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->text = text;
    s->len = len;
    s->max = max;
}

int stk__mf_src_file(mf_src *s, int fd, const char *name, size_t max, char *err)
{
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->max = max;
    s->name = name;
    s->cap = MF_CHUNK;
    if (!(s->buf = malloc(s->cap)))
        return stk__err(err, STK_E_NOMEM, "out of memory");
    return STK_OK;
}

void stk__mf_src_free(mf_src *s)
{
    if (s->fd >= 0)
        close(s->fd);
    free(s->buf);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

/* Read into the window's free end (after moving the unread bytes to its start, and growing it
 * up to max + 64 KiB + 1 when full). */
static int fill(mf_src *s, char *err)
{
    if (s->beg) {
        memmove(s->buf, s->buf + s->beg, s->end - s->beg);
        s->end -= s->beg;
        s->beg = 0;
    }
    size_t limit = s->max + MF_CHUNK + 1;
    if (s->end == s->cap && s->cap < limit) {
        size_t nc = STK__MIN(s->cap * 2, limit);
        char *nb = realloc(s->buf, nc);
        if (!nb)
            return stk__err(err, STK_E_NOMEM, "out of memory");
        s->buf = nb;
        s->cap = nc;
    }
    size_t want = STK__MIN(s->cap - s->end, MF_CHUNK), got = 0;
    int rc = stk__read_upto(s->fd, s->buf + s->end, want, &got);
    if (rc)
        return stk__err(err, rc, "%s: read failed", s->name);
    s->end += got;
    s->eof = got < want;
    return STK_OK;
}

int stk__mf_src_peek(mf_src *s, const char **p, size_t *n, char *err)
{
    if (s->fd < 0) {
        *p = s->text;
        *n = s->len;
        return STK_OK;
    }
    int rc = STK_OK;
    while (!rc && !s->eof && s->end < MF_CHUNK)
        rc = fill(s, err);
    *p = s->buf;
    *n = s->end;
    return rc;
}

static int text_next(mf_src *s, mf_line *l)
{
    if (s->pos >= s->len)
        return 0;
    const char *p = s->text + s->pos, *nl = memchr(p, '\n', s->len - s->pos);
    size_t n = nl ? (size_t)(nl - p) + 1 : s->len - s->pos;
    s->pos += n;
    *l = (mf_line){p, n, ++s->no, n - (nl != NULL) > s->max};
    if (l->too_long)
        l->s = NULL;
    return 1;
}

/* The window holds more than max bytes of a line and no line break: drop them and read on,
 * chunk by chunk, to the byte after the next one (or the end). */
static int skip_line(mf_src *s, char *err)
{
    for (;;) {
        s->beg = s->end = s->scanned = 0;
        if (s->eof)
            return STK_OK;
        int rc = fill(s, err);
        if (rc)
            return rc;
        const char *nl = memchr(s->buf, '\n', s->end);
        if (nl) {
            s->beg = (size_t)(nl - s->buf) + 1;
            return STK_OK;
        }
    }
}

int stk__mf_src_next(mf_src *s, mf_line *l, char *err)
{
    if (s->fd < 0)
        return text_next(s, l);
    for (;;) {
        char *p = s->buf + s->beg;
        size_t avail = s->end - s->beg;
        const char *nl = memchr(p + s->scanned, '\n', avail - s->scanned);
        if (nl || (s->eof && avail)) {
            size_t n = nl ? (size_t)(nl - p) + 1 : avail;
            *l = (mf_line){p, n, ++s->no, n - (nl != NULL) > s->max};
            if (l->too_long)
                l->s = NULL;
            s->beg += n;
            s->scanned = 0;
            return 1;
        }
        if (s->eof)
            return 0;
        s->scanned = avail;
        if (avail > s->max) {
            *l = (mf_line){NULL, 0, ++s->no, 1};
            int rc = skip_line(s, err);
            return rc ? rc : 1;
        }
        int rc = fill(s, err);
        if (rc)
            return rc;
    }
}
