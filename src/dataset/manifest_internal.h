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
enum { TOK_TEXT, TOK_INT, TOK_NAME }; /* CSV text (index or name), JSON integer, JSON string */

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
    int fatal;          /* a callback's failure (err set): the parse stops */
} mf;

char *stk__mf_dupn(const char *s, size_t n);
void stk__mf_row_free(row *r);
/* Set line LINE aside with its reason (under strict the first in line order fails the read at
 * the end: manifest.c). Returns STK_OK to go on, STK_E_NOMEM (err set). */
int stk__mf_bad(mf *m, size_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* 1 when S is a decimal integer 0..INT32_MAX (into *V, which may be NULL). */
int stk__mf_is_index(const char *s, int32_t *v);
/* The first pass: every line of TEXT (m->fmt's format) into m->rows or m->bad. STK_OK, or a
 * failure of the whole file (err set). */
int stk__mf_rows(mf *m, const char *text, size_t len);

#endif
