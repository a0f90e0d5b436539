/* SPDX-License-Identifier: MIT */
/*
 * manifest_internal.h — what the two passes of the manifest reader share: the rows of the first
 * (manifest_rows.c: each line as written) that the second (manifest.c: classes, labels,
 * targets) resolves. Internal to src/dataset.
 */
#ifndef STK_MANIFEST_INTERNAL_H
#define STK_MANIFEST_INTERNAL_H

#include "manifest.h"

#include <stddef.h>
#include <stdint.h>

enum { MF_LIST, MF_CSV, MF_TSV, MF_JSONL };
enum { TOK_TEXT, TOK_INT }; /* text (CSV cell, JSON string, list label), JSON integer */

/* One physical line of a manifest source (manifest_lines.c). */
typedef struct mf_line {
    const char *s;   /* its bytes, the '\n' included when it has one; NULL when too long */
    size_t len;
    size_t no;       /* its number, from 1 */
    int too_long;    /* more than max bytes before its line break: skipped, never held */
} mf_line;

/* The lines of TEXT in memory, or of a file read through a window of max + 64 KiB. */
typedef struct mf_src {
    int fd;            /* -1: TEXT */
    const char *text;
    size_t len, pos;
    char *buf;         /* the file's window: [beg, end) unread, [beg, beg + scanned) has no '\n' */
    size_t cap, beg, end, scanned;
    int eof;
    size_t max, no;
    const char *name;  /* for messages */
} mf_src;

typedef struct tok {
    char *s;
    int kind;
} tok;

typedef struct num {
    double d;
    int64_t i;
    int is_int; /* written as an integer: i is exact */
} num;

typedef struct row {
    size_t line;
    char *path;
    tok *lab;
    uint32_t nlab;
    num *val;
    uint32_t nval;
    int32_t *idx; /* resolved label indices (second pass) */
} row;

typedef struct mf {
    stk__manifest_opts o;
    const char *name;
    int fmt;
    row *rows;
    size_t n, cap;
    struct badl {
        size_t line;
        char *why;
    } *bad;
    size_t nbad, badcap;
    char **tf;          /* target field names */
    size_t ntf;
    int label_seen;     /* some line has the label field */
    char *err;          /* STK__ERRLEN */
    /* CSV / TSV */
    char **fld;
    size_t nfld, fcap;
    char **hdr;
    size_t nhdr;
    long path_col, label_col, *tcol;
    size_t line, rec_line;
    size_t rec_start, rec_bytes; /* the line the CSV record being read began on, its bytes so far */
    size_t nul_col;     /* 1 + the first field of the record being read that holds a NUL; 0: none */
    int fatal;          /* a callback's failure (err set): the parse stops */
} mf;

char *stk__mf_dupn(const char *s, size_t n);
void stk__mf_row_free(row *r);
/* Set line LINE aside with its reason (under strict the first in line order fails the read at
 * the end: manifest.c). Returns STK_OK to go on, STK_E_NOMEM (err set). */
int stk__mf_bad(mf *m, size_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* 1 when S is a decimal integer 0..INT32_MAX (into *V, which may be NULL). */
int stk__mf_is_index(const char *s, int32_t *v);
/* A source of TEXT (LEN bytes); of the open file FD (taken: closed by stk__mf_src_free). */
void stk__mf_src_text(mf_src *s, const char *text, size_t len, size_t max);
int stk__mf_src_file(mf_src *s, int fd, const char *name, size_t max, char *err);
void stk__mf_src_free(mf_src *s);
/* The first bytes of S, up to 64 KiB (for telling the format), without consuming them. */
int stk__mf_src_peek(mf_src *s, const char **p, size_t *n, char *err);
/* The next line into L: 1, 0 at the end, or a read error (ERR set). */
int stk__mf_src_next(mf_src *s, mf_line *l, char *err);
/* "1 MiB", "64 KiB" or "1000 bytes" for the limit N. */
void stk__mf_size_text(size_t n, char *buf, size_t cap);

/* The first pass: every line of SRC (m->fmt's format) into m->rows or m->bad. STK_OK, or a
 * failure of the whole file (err set). */
int stk__mf_rows(mf *m, mf_src *src);

#endif
