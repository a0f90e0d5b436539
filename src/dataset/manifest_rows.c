/* SPDX-License-Identifier: MIT */
/*
 * manifest_rows.c — the first pass of the manifest reader: each line (a CSV/TSV record through
 * libcsv, a JSON object through jansson, a list line) as a row — the path, the label tokens as
 * written, the numbers of the value fields — or a line set aside with its reason. What the
 * tokens mean is decided in the second pass (manifest.c), once the whole manifest is known.
 */
#include "manifest_internal.h"

#include "common.h"
#include "format.h"

#include <csv.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers -------------------------------------------------------------------------- */

char *stk__mf_dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

void stk__mf_row_free(row *r)
{
    free(r->path);
    for (uint32_t i = 0; i < r->nlab; i++)
        free(r->lab[i].s);
    free(r->lab);
    free(r->val);
    free(r->idx);
    memset(r, 0, sizeof *r);
}

/* Set line LINE aside with its reason (under strict the first in line order fails the read at
 * the end). Returns STK_OK to go on. */
int stk__mf_bad(mf *m, size_t line, const char *fmt, ...)
{
    char raw[STK__ERRLEN / 2], why[4 * sizeof raw + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* one line of the report: control characters quoted from the manifest are written escaped */
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
        if (*p >= 0x20 && *p != 0x7f)
            why[o++] = (char)*p;
        else if (*p == '\n' || *p == '\t' || *p == '\r')
            o += (size_t)snprintf(why + o, sizeof why - o, "\\%c", *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r');
        else
            o += (size_t)snprintf(why + o, sizeof why - o, "\\x%02x", *p);
    }
    why[o] = 0;
    if (stk__grow((void **)&m->bad, &m->badcap, m->nbad + 1, sizeof *m->bad) || !(m->bad[m->nbad].why = stk__strdup(why)))
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    m->bad[m->nbad++].line = line;
    return STK_OK;
}

/* 1 when S is a decimal integer 0..INT32_MAX (into *v). */
int stk__mf_is_index(const char *s, int32_t *v)
{
    size_t n = strlen(s);
    if (n == 0 || n > 10)
        return 0;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        x = x * 10 + (s[i] - '0');
    }
    if (x > INT32_MAX)
        return 0;
    if (v)
        *v = (int32_t)x;
    return 1;
}

static int add_tok(row *r, const char *s, size_t n, int kind)
{
    tok *nt = realloc(r->lab, (r->nlab + 1) * sizeof *nt);
    if (!nt)
        return STK_E_NOMEM;
    r->lab = nt;
    if (!(nt[r->nlab].s = stk__mf_dupn(s, n)))
        return STK_E_NOMEM;
    nt[r->nlab++].kind = kind;
    return STK_OK;
}

static int add_val(row *r, double d, int64_t i, int is_int)
{
    num *nv = realloc(r->val, (r->nval + 1) * sizeof *nv);
    if (!nv)
        return STK_E_NOMEM;
    r->val = nv;
    r->val[r->nval++] = (num){d, i, is_int};
    return STK_OK;
}

/* Split CELL at the separator (runs of it; empty pieces dropped), calling FN on each piece.
 * Returns FN's first nonzero status. */
static int split_cell(const char *cell, const char *sep, int (*fn)(void *, const char *, size_t), void *u)
{
    size_t sl = strlen(sep);
    const char *p = cell;
    while (*p) {
        const char *e = sl ? strstr(p, sep) : NULL;
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int rc = n ? fn(u, p, n) : 0;
        if (rc)
            return rc;
        p += n + (e ? sl : 0);
    }
    return 0;
}

/* ---- the rows ------------------------------------------------------------------------------- */

/* A row's value and label counts: at least one value when there are value fields, at most
 * STK__TARGET_MAX_SIZE of each. 1 when usable; else the row is freed and the line set aside. */
static int row_sizes_ok(mf *m, row *r, int *rc)
{
    if (m->ntf && r->nval == 0)
        *rc = stk__mf_bad(m, r->line, "no values in the value field%s", m->ntf > 1 ? "s" : "");
    else if (r->nval > STK__TARGET_MAX_SIZE || r->nlab > STK__TARGET_MAX_SIZE)
        *rc = stk__mf_bad(m, r->line, "more than %d values or labels", STK__TARGET_MAX_SIZE);
    else
        return 1;
    stk__mf_row_free(r);
    return 0;
}

static int push_row(mf *m, row *r)
{
    int rc = STK_OK;
    if (!row_sizes_ok(m, r, &rc))
        return rc;
    if (stk__grow((void **)&m->rows, &m->cap, m->n + 1, sizeof *m->rows)) {
        stk__mf_row_free(r);
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    }
    m->rows[m->n++] = *r;
    return STK_OK;
}

/* A row's path: non-empty, no NUL byte. 1 when usable. */
static int path_ok(mf *m, size_t line, const char *p, size_t n, int *rc)
{
    if (n == 0)
        *rc = stk__mf_bad(m, line, "empty path");
    else if (memchr(p, 0, n))
        *rc = stk__mf_bad(m, line, "NUL byte in the path");
    else if (memchr(p, '\t', n) || memchr(p, '\n', n) || memchr(p, '\r', n))
        *rc = stk__mf_bad(m, line, "a tab or line break in the path");
    else
        return 1;
    return 0;
}

/* ---- list lines: path<TAB>label ------------------------------------------------------------- */

static int list_line(mf *m, const char *line, size_t l, size_t lineno)
{
    const char *tab = memchr(line, '\t', l);
    int rc = STK_OK;
    if (!tab)
        return stk__mf_bad(m, lineno, "expected `path<TAB>label`");
    size_t plen = (size_t)(tab - line), llen = l - plen - 1;
    if (!path_ok(m, lineno, line, plen, &rc))
        return rc;
    if (memchr(tab + 1, 0, llen))
        return stk__mf_bad(m, lineno, "NUL byte in the label");
    char lab[16];
    int32_t v;
    snprintf(lab, sizeof lab, "%.*s", (int)STK__MIN(llen, 15), tab + 1);
    if (llen > 10 || !stk__mf_is_index(lab, &v)) {
        size_t digits = 0;
        while (digits < llen && tab[1 + digits] >= '0' && tab[1 + digits] <= '9')
            digits++;
        if (llen >= 10 && digits == llen)
            return stk__mf_bad(m, lineno, "label too large (at most %d)", INT32_MAX);
        return stk__mf_bad(m, lineno, "label `%.*s` is not a decimal integer 0..%d", (int)STK__MIN(llen, 64), tab + 1,
                   INT32_MAX);
    }
    row r = {.line = lineno};
    if (!(r.path = stk__mf_dupn(line, plen)) || add_tok(&r, lab, strlen(lab), TOK_INT)) {
        stk__mf_row_free(&r);
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    }
    return push_row(m, &r);
}

/* Line L, longer than the limit, set aside. */
static int too_long(mf *m, size_t line)
{
    char lim[32];
    stk__mf_size_text(m->o.max_line, lim, sizeof lim);
    return stk__mf_bad(m, line, "the line is longer than %s (the limit: max_line, --max-line)", lim);
}

/* Each physical line of SRC (CR stripped) to FN, with its number; blank lines and (list
 * format) '#' lines skipped, lines over the limit set aside. */
static int each_line(mf *m, mf_src *src, int skip_hash, int (*fn)(mf *, const char *, size_t, size_t))
{
    mf_line ln;
    int got;
    while ((got = stk__mf_src_next(src, &ln, m->err)) > 0) {
        int rc;
        size_t l = ln.len;
        if (!ln.too_long && l && ln.s[l - 1] == '\n')
            l--;
        if (!ln.too_long && l && ln.s[l - 1] == '\r')
            l--;
        if (ln.too_long)
            rc = too_long(m, ln.no);
        else if (l == 0 || (skip_hash && ln.s[0] == '#'))
            continue;
        else
            rc = fn(m, ln.s, l, ln.no);
        if (rc)
            return rc;
    }
    return got;
}

/* ---- JSON Lines ----------------------------------------------------------------------------- */

/* One label value V into R: an integer or a string (what they mean: manifest.c). */
static int json_label(mf *m, row *r, json_t *v, size_t line, int *rc)
{
    char buf[32];
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        *rc = add_tok(r, buf, strlen(buf), TOK_INT);
    } else if (json_is_string(v) && memchr(json_string_value(v), 0, json_string_length(v))) {
        *rc = stk__mf_bad(m, line, "NUL byte in the label");
        return 0;
    } else if (json_is_string(v)) {
        *rc = add_tok(r, json_string_value(v), json_string_length(v), TOK_TEXT);
    } else {
        *rc = stk__mf_bad(m, line, "label `%s` is not an index or a class name",
                  json_is_array(v) ? "[...]" : json_is_object(v) ? "{...}" : json_is_real(v) ? "a fraction" :
                  json_is_null(v) ? "null" : "true/false");
        return 0;
    }
    if (*rc)
        *rc = stk__err(m->err, STK_E_NOMEM, "out of memory");
    return *rc == STK_OK;
}

/* The label field of object O: a list only with multi_label. Absent or null: a bad line, unless
 * the data is unlabelled by request (labels none: the field is not read). */
static int json_labels(mf *m, row *r, json_t *o, size_t line, int *rc)
{
    if (m->o.labels == STK_LABELS_NONE)
        return 1;
    json_t *v = json_object_get(o, m->o.label_field);
    if (v)
        m->label_seen = 1;
    if (!v || json_is_null(v)) {
        *rc = stk__mf_bad(m, line, "%s label (field `%s`)%s", v ? "null" : "no", m->o.label_field,
                          m->o.multi_label ? "; an empty list is []" : "; unlabelled data needs --labels none");
        return 0;
    }
    if (!json_is_array(v))
        return json_label(m, r, v, line, rc);
    if (!m->o.multi_label) {
        *rc = stk__mf_bad(m, line, "label `%s` is a list (pack with --multi-label)", m->o.label_field);
        return 0;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!json_label(m, r, e, line, rc))
            return 0;
    }
    return 1;
}

/* The value fields of object O, in order: numbers or arrays of numbers. */
static int json_values(mf *m, row *r, json_t *o, size_t line, int *rc)
{
    for (size_t f = 0; f < m->ntf; f++) {
        json_t *v = json_object_get(o, m->tf[f]);
        if (!v) {
            *rc = stk__mf_bad(m, line, "no field `%s`", m->tf[f]);
            return 0;
        }
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
            if (!json_is_number(e)) {
                *rc = stk__mf_bad(m, line, "field `%s`: not a number%s", m->tf[f], json_is_array(v) ? " in its list" : "");
                return 0;
            }
            if (add_val(r, json_number_value(e), json_is_integer(e) ? json_integer_value(e) : 0,
                        json_is_integer(e))) {
                *rc = stk__err(m->err, STK_E_NOMEM, "out of memory");
                return 0;
            }
        }
    }
    return 1;
}

/* 1 when a string anywhere in V (values and keys, nested) holds a NUL byte (\u0000). */
static int json_has_nul(json_t *v, int depth)
{
    if (json_is_string(v))
        return memchr(json_string_value(v), 0, json_string_length(v)) != NULL;
    if (depth > 64)
        return 0;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (json_has_nul(e, depth + 1))
                return 1;
        }
    } else if (json_is_object(v)) {
        const char *k;
        size_t kl;
        json_t *e;
        json_object_keylen_foreach(v, k, kl, e)
        {
            if (memchr(k, 0, kl) || json_has_nul(e, depth + 1))
                return 1;
        }
    }
    return 0;
}

static int json_line(mf *m, const char *line, size_t l, size_t lineno)
{
    json_error_t je;
    json_t *o = json_loadb(line, l, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!o)
        return stk__mf_bad(m, lineno, "not JSON: %s (column %d)", je.text, je.column);
    int rc = STK_OK;
    row r = {.line = lineno};
    json_t *p = json_object_get(o, m->o.path_field);
    if (!json_is_object(o))
        rc = stk__mf_bad(m, lineno, "not a JSON object");
    else if (json_has_nul(o, 0))
        rc = stk__mf_bad(m, lineno, "NUL byte (\\u0000) in a field");
    else if (!p)
        rc = stk__mf_bad(m, lineno, "no field `%s` (the path)", m->o.path_field);
    else if (!json_is_string(p))
        rc = stk__mf_bad(m, lineno, "field `%s` (the path) is not a string", m->o.path_field);
    else if (path_ok(m, lineno, json_string_value(p), json_string_length(p), &rc) &&
             json_labels(m, &r, o, lineno, &rc) && json_values(m, &r, o, lineno, &rc)) {
        if ((r.path = stk__strdup(json_string_value(p)))) {
            json_decref(o);
            return push_row(m, &r);
        }
        rc = stk__err(m->err, STK_E_NOMEM, "out of memory");
    }
    stk__mf_row_free(&r);
    json_decref(o);
    return rc;
}

/* ---- CSV / TSV (libcsv) --------------------------------------------------------------------- */

static void csv_field(void *s, size_t n, void *u)
{
    mf *m = u;
    if (m->nfld == 0)
        m->rec_line = m->line;
    if (m->fatal)
        return;
    if (stk__grow((void **)&m->fld, &m->fcap, m->nfld + 1, sizeof(char *)) || !(m->fld[m->nfld] = stk__mf_dupn(s ? s : "", s ? n : 0))) {
        m->fatal = stk__err(m->err, STK_E_NOMEM, "out of memory");
        return;
    }
    if (s && memchr(s, 0, n) && !m->nul_col)
        m->nul_col = m->nfld + 1; /* the field would be cut at the NUL: the record is set aside */
    m->nfld++;
}

static long column(const mf *m, const char *name)
{
    for (size_t i = 0; i < m->nhdr; i++)
        if (!strcmp(m->hdr[i], name))
            return (long)i;
    return -1;
}

/* The header record: the columns of the path, the label and the value fields. */
static int csv_header(mf *m)
{
    m->hdr = m->fld;
    m->nhdr = m->nfld;
    m->fld = NULL;
    m->nfld = m->fcap = 0;
    if (m->nhdr && !strncmp(m->hdr[0], "\xEF\xBB\xBF", 3)) /* a UTF-8 byte order mark */
        memmove(m->hdr[0], m->hdr[0] + 3, strlen(m->hdr[0] + 3) + 1);
    if ((m->path_col = column(m, m->o.path_field)) < 0)
        return stk__err(m->err, STK_E_FORMAT, "%s line %zu: the header has no column `%s` (the path; "
                        "choose another with --path-field)", m->name, m->rec_line, m->o.path_field);
    m->label_col = m->o.labels == STK_LABELS_NONE ? -1 : column(m, m->o.label_field);
    m->label_seen = m->label_col >= 0;
    if (m->ntf && !(m->tcol = calloc(m->ntf, sizeof *m->tcol)))
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    for (size_t f = 0; f < m->ntf; f++)
        if ((m->tcol[f] = column(m, m->tf[f])) < 0)
            return stk__err(m->err, STK_E_FORMAT, "%s line %zu: the header has no column `%s` (a value field)",
                            m->name, m->rec_line, m->tf[f]);
    return STK_OK;
}

typedef struct piece_ctx {
    mf *m;
    row *r;
    const char *field;
    int bad;
} piece_ctx;

static int label_piece(void *u, const char *s, size_t n)
{
    piece_ctx *c = u;
    return add_tok(c->r, s, n, TOK_TEXT);
}

static int value_piece(void *u, const char *s, size_t n)
{
    piece_ctx *c = u;
    char buf[128], *end;
    snprintf(buf, sizeof buf, "%.*s", (int)STK__MIN(n, sizeof buf - 1), s);
    errno = 0;
    long long iv = strtoll(buf, &end, 10);
    if (n < sizeof buf && end != buf && !*end && errno == 0)
        return add_val(c->r, (double)iv, iv, 1);
    double v = strtod(buf, &end);
    if (n >= sizeof buf || end == buf || *end) {
        c->bad = 1;
        return 1;
    }
    return add_val(c->r, v, 0, 0);
}

/* The current record as a row (or a line set aside). */
static int csv_record_row(mf *m, size_t line)
{
    row r = {.line = line};
    const char *lab = m->label_col >= 0 ? m->fld[m->label_col] : "";
    piece_ctx c = {m, &r, NULL, 0};
    int rc;
    if (m->label_col >= 0 && !*lab && !m->o.multi_label)
        return stk__mf_bad(m, line, "empty label (column `%s`); unlabelled data needs --labels none",
                           m->o.label_field);
    if (m->o.multi_label)
        rc = split_cell(lab, m->o.label_sep, label_piece, &c);
    else
        rc = *lab ? add_tok(&r, lab, strlen(lab), TOK_TEXT) : 0;
    for (size_t f = 0; f < m->ntf && !rc; f++) {
        c.field = m->tf[f];
        const char *cell = m->fld[m->tcol[f]];
        if (!*cell) {
            stk__mf_row_free(&r);
            return stk__mf_bad(m, line, "field `%s` is empty", c.field);
        }
        if (split_cell(cell, m->o.label_sep, value_piece, &c) && c.bad) {
            stk__mf_row_free(&r);
            return stk__mf_bad(m, line, "field `%s`: `%.64s` is not a number", c.field, cell);
        }
    }
    if (rc || !(r.path = stk__strdup(m->fld[m->path_col]))) {
        stk__mf_row_free(&r);
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    }
    return push_row(m, &r);
}

static void csv_drop_fields(mf *m)
{
    for (size_t i = 0; i < m->nfld; i++)
        free(m->fld[i]);
    m->nfld = 0;
    m->nul_col = 0;
}

static void csv_record(int c, void *u)
{
    (void)c;
    mf *m = u;
    int rc = STK_OK;
    if (m->fatal)
        ;
    else if (!m->hdr)
        rc = csv_header(m);
    else if (m->nfld != m->nhdr)
        rc = stk__mf_bad(m, m->rec_line, "%zu fields, but the header has %zu", m->nfld, m->nhdr);
    else if (m->nul_col)
        rc = stk__mf_bad(m, m->rec_line, "NUL byte in field `%s`", m->hdr[m->nul_col - 1]);
    else if (path_ok(m, m->rec_line, m->fld[m->path_col], strlen(m->fld[m->path_col]), &rc))
        rc = csv_record_row(m, m->rec_line);
    csv_drop_fields(m);
    if (rc && !m->fatal)
        m->fatal = rc;
}

static int csv_start(mf *m, struct csv_parser *p)
{
    if (csv_init(p, CSV_APPEND_NULL) != 0)
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    csv_set_delim(p, m->fmt == MF_TSV ? CSV_TAB : CSV_COMMA);
    return STK_OK;
}

/* The record begun on line m->rec_start has passed the line limit (in all, or with line LINE
 * that is longer): set aside, and the parser restarted at the next line. */
static int csv_record_too_long(mf *m, struct csv_parser *p, size_t line)
{
    char lim[32];
    stk__mf_size_text(m->o.max_line, lim, sizeof lim);
    if (!m->hdr)
        return stk__err(m->err, STK_E_FORMAT, "%s line %zu: the header is longer than %s (max_line, --max-line)",
                        m->name, m->rec_start, lim);
    csv_free(p);
    csv_drop_fields(m);
    m->rec_bytes = 0;
    int rc = stk__mf_bad(m, m->rec_start, "the record (quoted over lines %zu..%zu) is longer than %s (the limit: "
                         "max_line, --max-line); reading on at line %zu", m->rec_start, line, lim, line + 1);
    return rc ? rc : csv_start(m, p);
}

/* One physical line L into the parser P. Between records (libcsv's pstate 0, ROW_NOT_BEGUN) a
 * line over the limit is a bad line; inside one it ends the record, as does a record over the
 * limit in all. */
static int csv_line(mf *m, struct csv_parser *p, const mf_line *l)
{
    m->line = l->no;
    if (p->pstate == 0) {
        m->rec_start = l->no;
        m->rec_bytes = 0;
        if (l->too_long)
            return m->hdr ? too_long(m, l->no) : csv_record_too_long(m, p, l->no);
    }
    if (l->too_long || (m->rec_bytes += l->len) > m->o.max_line + 2)
        return csv_record_too_long(m, p, l->no);
    csv_parse(p, l->s, l->len, csv_field, csv_record, m);
    return STK_OK;
}

static int csv_text(mf *m, mf_src *src)
{
    struct csv_parser p;
    int rc = csv_start(m, &p), got = 0;
    mf_line l;
    while (!rc && !m->fatal && (got = stk__mf_src_next(src, &l, m->err)) > 0)
        rc = csv_line(m, &p, &l);
    if (!rc && got < 0)
        rc = got;
    if (!rc && !m->fatal)
        csv_fini(&p, csv_field, csv_record, m);
    csv_free(&p);
    csv_drop_fields(m);
    free(m->fld);
    m->fld = NULL;
    if (rc)
        return rc;
    if (m->fatal)
        return m->fatal;
    if (!m->hdr)
        return stk__err(m->err, STK_E_FORMAT, "%s: no header line (a CSV/TSV manifest starts with the column "
                        "names, e.g. `%s%slabel`)", m->name, m->o.path_field, m->fmt == MF_TSV ? "\\t" : ",");
    return STK_OK;
}

int stk__mf_rows(mf *m, mf_src *src)
{
    if (m->fmt == MF_LIST)
        return each_line(m, src, 1, list_line);
    if (m->fmt == MF_JSONL)
        return each_line(m, src, 0, json_line);
    return csv_text(m, src);
}
