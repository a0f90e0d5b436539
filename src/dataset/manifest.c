/* SPDX-License-Identifier: MIT */
/*
 * manifest.c — reading a manifest into a file list with labels and targets.
 *
 * Two passes. The first (manifest_rows.c) turns each line (a CSV/TSV record, a JSON object, a
 * list line) into a row: the path, the label tokens as written, the numbers of the value fields;
 * a line that cannot be read is set aside with its reason; lines come from manifest_lines.c,
 * which never holds one longer than max_line. The second (here) decides what the tokens mean —
 * class names or indices — from the whole manifest (as asked, or by STK_LABELS_AUTO's rule: a
 * label is numeric or a name, and a manifest mixing both is refused rather than renumbered;
 * `-1` among indices is a bad line, not a class), resolves them, fixes the
 * target's shape (the longest label list, or the first row's value count) and converts the
 * values to the target type; rows that do not fit are set aside too. CSV is parsed by libcsv
 * (RFC 4180 quoting; lenient, as Python's csv module), JSON by jansson. Rules and examples:
 * docs/FORMAT.md "Manifests".
 */
#include "manifest_internal.h"

#include "common.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading files -------------------------------------------------------------------------- */

/* The regular file PATH (4 GiB at most; reads retried on EINTR) into a new NUL-terminated buffer. */
static int text_read(const char *path, char **text, size_t *len, char *err)
{
    struct stat st;
    char why[STK__ERRLEN];
    int fd = stk__open_regular(path, 0, &st, why); /* a FIFO is refused, never waited on */
    if (fd < 0 && fd != STK_E_IO)
        return stk__err(err, fd, "%s: cannot open", path);
    if (fd < 0 || st.st_size > (1ll << 32)) {
        if (fd >= 0)
            close(fd);
        return stk__err(err, STK_E_INVALID, "%s: not a usable manifest (a regular file of 4 GiB at most%s%s)",
                        path, fd < 0 ? "; " : "", fd < 0 ? why : "");
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *t = malloc(size + 1);
    if (!t) {
        close(fd);
        return stk__err(err, STK_E_NOMEM, "out of memory");
    }
    int rc = stk__read_upto(fd, t, size, &got);
    close(fd);
    if (rc) {
        free(t);
        return stk__err(err, rc, "%s: read failed", path);
    }
    t[got] = 0;
    *text = t;
    *len = got;
    return STK_OK;
}

/* ---- the second pass: labels, classes, targets ---------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The class names of the classes file into CL (*N of them). */
static int read_classes(mf *m, char ***cl, size_t *n)
{
    char *text = NULL;
    size_t len = 0;
    int rc = text_read(m->o.classes_file, &text, &len, m->err);
    if (rc)
        return rc;
    size_t k = 0, cap = 0;
    char **v = NULL;
    for (size_t pos = 0; pos < len;) {
        const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - line) : len - pos;
        pos += l + 1;
        if (l && line[l - 1] == '\r')
            l--;
        if (!nl && l == 0)
            break;
        if (stk__grow((void **)&v, &cap, k + 1, sizeof *v) || !(v[k] = stk__mf_dupn(line, l))) {
            rc = stk__err(m->err, STK_E_NOMEM, "out of memory");
            break;
        }
        k++;
    }
    free(text);
    if (!rc && k == 0)
        rc = stk__err(m->err, STK_E_FORMAT, "%s: no class names", m->o.classes_file);
    *cl = v;
    *n = k;
    return rc;
}

/* ---- labels: indices or names (docs/FORMAT.md "Manifests", stoker.h STK_LABELS_*) ---------- */

enum { LK_INDEX, LK_NUMERIC, LK_NAME };

/* 1 when S reads as a decimal number: [+-] digits [. digits] [e [+-] digits] (or .digits). */
static int looks_numeric(const char *s)
{
    static const char digits[] = "0123456789";
    s += *s == '+' || *s == '-';
    size_t d = strspn(s, digits);
    s += d;
    if (*s == '.') {
        size_t f = strspn(s + 1, digits);
        d += f;
        s += 1 + f;
    }
    if (d == 0)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s += 1 + (s[1] == '+' || s[1] == '-');
        size_t e = strspn(s, digits);
        if (e == 0)
            return 0;
        s += e;
    }
    return *s == 0;
}

/* An index (0..INT32_MAX), another number (a JSON integer or numeric text), or a name. */
static int label_kind(const tok *t)
{
    if (stk__mf_is_index(t->s, NULL))
        return LK_INDEX;
    return t->kind == TOK_INT || looks_numeric(t->s) ? LK_NUMERIC : LK_NAME;
}

/* What the labels are: as asked, or (STK_LABELS_AUTO) names when none is numeric, indices when
 * every one is; a mix is an error naming a line of each (never a silent renumbering). */
static int labels_mode(mf *m, int *mode)
{
    *mode = m->o.labels;
    if (*mode != STK_LABELS_AUTO)
        return STK_OK;
    const tok *numeric = NULL, *word = NULL;
    size_t numeric_line = 0, word_line = 0;
    for (size_t i = 0; i < m->n && !(numeric && word); i++)
        for (uint32_t j = 0; j < m->rows[i].nlab; j++) {
            const tok *t = &m->rows[i].lab[j];
            int k = label_kind(t);
            if (k == LK_NAME && !word)
                word = t, word_line = m->rows[i].line;
            else if (k != LK_NAME && !numeric)
                numeric = t, numeric_line = m->rows[i].line;
        }
    *mode = word ? STK_LABELS_NAMES : STK_LABELS_INDEX;
    if (!numeric || !word)
        return STK_OK;
    return stk__err(m->err, STK_E_FORMAT, "%s: the labels mix numbers (line %zu: `%.40s`) and class names (line "
                    "%zu: `%.40s`); say which they are: --labels index (labels=\"index\": names become bad "
                    "lines) or --labels names (labels=\"names\": numbers are class names too)",
                    m->name, numeric_line, numeric->s, word_line, word->s);
}

/* Class names from the manifest: every label's text, sorted, once each. */
static int collect_names(mf *m, char ***cl, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        k += m->rows[i].nlab;
    char **v = malloc((k ? k : 1) * sizeof *v);
    *cl = NULL;
    *n = 0;
    if (!v)
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    k = 0;
    for (size_t i = 0; i < m->n; i++)
        for (uint32_t j = 0; j < m->rows[i].nlab; j++)
            v[k++] = m->rows[i].lab[j].s;
    qsort(v, k, sizeof *v, cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || strcmp(v[u - 1], v[i]))
            v[u++] = v[i];
    for (size_t i = 0; i < u; i++)
        if (!(v[i] = stk__strdup(v[i]))) {
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return stk__err(m->err, STK_E_NOMEM, "out of memory");
        }
    *cl = v;
    *n = u;
    return STK_OK;
}

typedef struct cpair {
    const char *s;
    int32_t i;
} cpair;

typedef struct classes {
    char **names;  /* label = position */
    size_t n;
    cpair *sorted; /* the same, sorted by name, for lookups */
    int names_mode;   /* there are class names (a classes file, or STK_LABELS_NAMES) */
    int lookup;       /* labels are names to look up (STK_LABELS_NAMES) */
    const char *from; /* where the names came from, for messages */
} classes;

static int cmp_pair(const void *a, const void *b)
{
    return strcmp(((const cpair *)a)->s, ((const cpair *)b)->s);
}

static int32_t class_find(const classes *c, const char *s)
{
    cpair key = {s, 0};
    const cpair *p = c->n ? bsearch(&key, c->sorted, c->n, sizeof *c->sorted, cmp_pair) : NULL;
    return p ? p->i : -1;
}

static int classes_index(mf *m, classes *c)
{
    if (!(c->sorted = malloc((c->n ? c->n : 1) * sizeof *c->sorted)))
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < c->n; i++)
        c->sorted[i] = (cpair){c->names[i], (int32_t)i};
    qsort(c->sorted, c->n, sizeof *c->sorted, cmp_pair);
    for (size_t i = 1; i < c->n; i++)
        if (!strcmp(c->sorted[i - 1].s, c->sorted[i].s))
            return stk__err(m->err, STK_E_FORMAT, "%s: class `%s` is listed twice", c->from, c->sorted[i].s);
    return STK_OK;
}

static void classes_free(classes *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->names[i]);
    free(c->names);
    free(c->sorted);
}

/* The classes: the classes file's, or the names the manifest uses (none when its labels are
 * indices). */
static int classes_make(mf *m, classes *c)
{
    int mode, rc = labels_mode(m, &mode);
    if (rc)
        return rc;
    c->lookup = mode == STK_LABELS_NAMES;
    c->names_mode = c->lookup || m->o.classes_file;
    if (m->o.classes_file) {
        c->from = m->o.classes_file;
        rc = read_classes(m, &c->names, &c->n);
    } else if (c->lookup) {
        c->from = m->name;
        rc = collect_names(m, &c->names, &c->n);
    }
    return rc ? rc : classes_index(m, c);
}

/* Row R's label tokens as class indices (R->idx). 0: set aside (*rc says whether to go on). */
static int resolve_row(mf *m, const classes *c, row *r, int *rc)
{
    if (!(r->idx = malloc((r->nlab ? r->nlab : 1) * sizeof *r->idx))) {
        *rc = stk__err(m->err, STK_E_NOMEM, "out of memory");
        return 0;
    }
    for (uint32_t j = 0; j < r->nlab; j++) {
        const tok *t = &r->lab[j];
        int32_t v = -1;
        if (!c->lookup) {
            if (!stk__mf_is_index(t->s, &v)) {
                *rc = c->n ? stk__mf_bad(m, r->line, "label `%.64s` is not a class index 0..%zu (%zu classes in %s)",
                                         t->s, c->n - 1, c->n, c->from)
                           : stk__mf_bad(m, r->line, "label `%.64s` is not a class index 0..%d", t->s, INT32_MAX);
                return 0;
            }
            if (c->n && (size_t)v >= c->n) {
                *rc = stk__mf_bad(m, r->line, "label %d is out of range (%zu classes in %s)", v, c->n, c->from);
                return 0;
            }
        } else if ((v = class_find(c, t->s)) < 0) {
            *rc = stk__mf_bad(m, r->line, "unknown class `%.128s` (not in %s)", t->s, c->from);
            return 0;
        }
        r->idx[j] = v;
    }
    return 1;
}

/* V as one element of DTYPE at DST; the reason in *WHY when it does not fit. */
static int put_value(int dtype, const num *v, uint8_t *dst, const char **why)
{
    if (dtype == STK_TDT_FLOAT64) {
        memcpy(dst, &v->d, 8);
        return 1;
    }
    if (dtype == STK_TDT_FLOAT32) {
        float f = (float)v->d;
        if (isfinite(v->d) && !isfinite(f)) {
            *why = "is out of float32's range";
            return 0;
        }
        memcpy(dst, &f, 4);
        return 1;
    }
    int64_t i = v->i;
    if (!v->is_int) {
        if (!isfinite(v->d) || v->d != floor(v->d) || v->d < -9223372036854775808.0 || v->d >= 9223372036854775808.0) {
            *why = "is not an integer";
            return 0;
        }
        i = (int64_t)v->d;
    }
    if (dtype == STK_TDT_INT64) {
        memcpy(dst, &i, 8);
    } else if (dtype == STK_TDT_INT32 && i >= INT32_MIN && i <= INT32_MAX) {
        int32_t x = (int32_t)i;
        memcpy(dst, &x, 4);
    } else if (dtype == STK_TDT_UINT8 && i >= 0 && i <= 255) {
        *dst = (uint8_t)i;
    } else {
        *why = dtype == STK_TDT_UINT8 ? "does not fit uint8 (0..255)" : "does not fit int32";
        return 0;
    }
    return 1;
}

/* The target's shape: the longest label list, or the value count of the first row that has
 * values; the class count of a label list. */
static void target_shape(mf *m, const classes *c, stk_target_info *t)
{
    memset(t, 0, sizeof *t);
    if (m->o.multi_label) {
        uint32_t k = 1;
        int32_t top = -1;
        for (size_t i = 0; i < m->n; i++) {
            if (!m->rows[i].idx)
                continue;
            k = STK__MAX(k, m->rows[i].nlab);
            for (uint32_t j = 0; j < m->rows[i].nlab; j++)
                top = STK__MAX(top, m->rows[i].idx[j]);
        }
        *t = (stk_target_info){STK_TDT_INT32, STK_TARGET_LABELS, k,
                               c->n ? (uint32_t)c->n : (uint32_t)STK__MAX(top + 1, 1)};
    } else if (m->ntf) {
        for (size_t i = 0; i < m->n && !t->size; i++)
            if (m->rows[i].idx)
                t->size = m->rows[i].nval;
        *t = (stk_target_info){m->o.target_dtype, STK_TARGET_VALUES, t->size, 0};
    }
}

/* Row R's target into DST (T's shape); 0: set aside. */
static int row_target(mf *m, const stk_target_info *t, const row *r, uint8_t *dst, int *rc)
{
    size_t es = stk_target_dtype_size(t->dtype);
    if (t->kind == STK_TARGET_LABELS) {
        for (uint32_t j = 0; j < t->size; j++) {
            int32_t v = j < r->nlab ? r->idx[j] : -1;
            memcpy(dst + 4 * (size_t)j, &v, 4);
        }
        return 1;
    }
    if (r->nval != t->size) {
        *rc = stk__mf_bad(m, r->line, "%u values, but the first record has %u", r->nval, t->size);
        return 0;
    }
    for (uint32_t j = 0; j < t->size; j++) {
        const char *why = NULL;
        if (!put_value(t->dtype, &r->val[j], dst + es * j, &why)) {
            *rc = stk__mf_bad(m, r->line, "value %u (%.17g) %s", j + 1, r->val[j].d, why);
            return 0;
        }
    }
    return 1;
}

static char *join_path(const char *base, const char *rel)
{
    if (rel[0] == '/' || !base || !*base)
        return stk__strdup(rel);
    size_t a = strlen(base), b = strlen(rel);
    int slash = a && base[a - 1] != '/';
    char *p = malloc(a + slash + b + 1);
    if (p) {
        memcpy(p, base, a);
        if (slash)
            p[a] = '/';
        memcpy(p + a + slash, rel, b + 1);
    }
    return p;
}

/* The rows that resolved (R->idx set) into OUT, in manifest order. */
static int build(mf *m, const char *base_dir, stk__filelist *out)
{
    size_t es = stk_target_dtype_size(out->tinfo.dtype), rowb = es * out->tinfo.size, k = 0;
    size_t n = m->n ? m->n : 1;
    out->paths = calloc(n, sizeof *out->paths);
    out->rel = calloc(n, sizeof *out->rel);
    out->labels = calloc(n, sizeof *out->labels);
    out->lines = calloc(n, sizeof *out->lines);
    out->targets = rowb ? calloc(n, rowb) : NULL;
    if (!out->paths || !out->rel || !out->labels || !out->lines || (rowb && !out->targets))
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < m->n; i++) {
        row *r = &m->rows[i];
        int rc = STK_OK;
        if (!r->idx)
            continue;
        if (rowb && !row_target(m, &out->tinfo, r, out->targets + rowb * k, &rc)) {
            if (rc)
                return rc;
            continue;
        }
        out->labels[k] = r->nlab ? r->idx[0] : -1;
        out->lines[k] = r->line;
        out->rel[k] = r->path;
        r->path = NULL;
        out->n = ++k;
        if (!(out->paths[k - 1] = join_path(base_dir, out->rel[k - 1])))
            return stk__err(m->err, STK_E_NOMEM, "out of memory");
    }
    return STK_OK;
}

static int cmp_bad(const void *a, const void *b)
{
    size_t x = ((const struct badl *)a)->line, y = ((const struct badl *)b)->line;
    return (x > y) - (x < y);
}

/* The lines set aside, in line order, into OUT. */
static int bad_out(mf *m, stk__filelist *out)
{
    if (m->nbad)
        qsort(m->bad, m->nbad, sizeof *m->bad, cmp_bad);
    out->bad_where = calloc(m->nbad + 1, sizeof(char *));
    out->bad_why = calloc(m->nbad + 1, sizeof(char *));
    if (!out->bad_where || !out->bad_why)
        return stk__err(m->err, STK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < m->nbad; i++) {
        char where[STK__ERRLEN];
        snprintf(where, sizeof where, "%s line %zu", m->name, m->bad[i].line);
        out->bad_why[i] = m->bad[i].why;
        m->bad[i].why = NULL;
        out->nbad = i + 1;
        if (!(out->bad_where[i] = stk__strdup(where)))
            return stk__err(m->err, STK_E_NOMEM, "out of memory");
    }
    return STK_OK;
}

/* Strict: the first line set aside, in line order, fails the read. */
static int strict_check(mf *m)
{
    if (!m->o.strict || !m->nbad)
        return STK_OK;
    size_t first = 0;
    for (size_t i = 1; i < m->nbad; i++)
        if (m->bad[i].line < m->bad[first].line)
            first = i;
    return stk__err(m->err, STK_E_FORMAT, "%s line %zu: %s (--strict: stopping at the first bad manifest line)",
                    m->name, m->bad[first].line, m->bad[first].why);
}

/* Labels, classes and targets of the rows read; the result into OUT. */
static int second_pass(mf *m, const char *base_dir, stk__filelist *out)
{
    classes c = {0};
    int rc = classes_make(m, &c);
    for (size_t i = 0; i < m->n && !rc; i++)
        if (!resolve_row(m, &c, &m->rows[i], &rc) && !rc) {
            free(m->rows[i].idx);
            m->rows[i].idx = NULL;
        }
    if (!rc && !m->o.multi_label && !c.names_mode && !m->o.classes_file)
        c.n = 0; /* indices without names */
    if (!rc) {
        target_shape(m, &c, &out->tinfo);
        rc = build(m, base_dir, out);
    }
    if (!rc && c.names_mode) {
        out->classes = c.names;
        out->nclasses = c.n;
        c.names = NULL;
        c.n = 0;
    }
    classes_free(&c);
    if (!rc)
        rc = strict_check(m);
    return rc ? rc : bad_out(m, out);
}

/* ---- options, format, entry points ---------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

/* The format: asked for, or by the name (.csv, .jsonl, .ndjson), else a TSV manifest when the
 * first line's first field is the path field, else the list format. */
static int detect(mf *m, mf_src *src)
{
    const char *f = m->o.format, *text;
    size_t len;
    if (f) {
        static const char *const names[] = {"list", "csv", "tsv", "jsonl"};
        for (int i = 0; i < 4; i++)
            if (!strcmp(f, names[i]))
                return m->fmt = i, STK_OK;
        return stk__err(m->err, STK_E_INVALID, "manifest format `%s`: expected csv, tsv, jsonl or list", f);
    }
    if (ends_with(m->name, ".csv"))
        return m->fmt = MF_CSV, STK_OK;
    if (ends_with(m->name, ".jsonl") || ends_with(m->name, ".ndjson"))
        return m->fmt = MF_JSONL, STK_OK;
    int rc = stk__mf_src_peek(src, &text, &len, m->err); /* (the first 64 KiB) */
    if (rc)
        return rc;
    size_t pos = 0;
    while (pos < len && (text[pos] == '\n' || text[pos] == '\r' || text[pos] == '#')) {
        if (text[pos] == '#')
            while (pos < len && text[pos] != '\n')
                pos++;
        pos++;
    }
    if (pos + 3 <= len && !memcmp(text + pos, "\xEF\xBB\xBF", 3)) /* a UTF-8 byte order mark */
        pos += 3;
    size_t pl = strlen(m->o.path_field);
    m->fmt = pos + pl < len && !memcmp(text + pos, m->o.path_field, pl) && text[pos + pl] == '\t' ? MF_TSV : MF_LIST;
    return STK_OK;
}

/* Defaults, the value fields, and the options that contradict each other. */
static int options(mf *m, const stk__manifest_opts *o)
{
    if (o)
        m->o = *o;
    m->o.path_field = m->o.path_field && *m->o.path_field ? m->o.path_field : "path";
    m->o.label_field = m->o.label_field && *m->o.label_field ? m->o.label_field : "label";
    m->o.label_sep = m->o.label_sep && *m->o.label_sep ? m->o.label_sep : " ";
    m->o.target_dtype = m->o.target_dtype ? m->o.target_dtype : STK_TDT_FLOAT32;
    m->o.max_line = m->o.max_line ? m->o.max_line : STK__MANIFEST_MAX_LINE;
    if (m->o.max_line > ((size_t)1 << 32)) /* no file is larger (and the window's sizes stay far from overflow) */
        m->o.max_line = (size_t)1 << 32;
    if (m->o.labels < STK_LABELS_AUTO || m->o.labels > STK_LABELS_NONE)
        return stk__err(m->err, STK_E_INVALID, "labels %d: expected STK_LABELS_AUTO, STK_LABELS_INDEX, "
                        "STK_LABELS_NAMES or STK_LABELS_NONE (auto, index, names, none)", m->o.labels);
    if (m->o.labels == STK_LABELS_NONE && m->o.multi_label)
        return stk__err(m->err, STK_E_INVALID, "unlabelled data (labels none) has no label lists (--multi-label)");
    if (!stk_target_dtype_size(m->o.target_dtype))
        return stk__err(m->err, STK_E_INVALID, "target type %d: expected uint8, int32, int64, float32 or float64",
                        m->o.target_dtype);
    const char *tf = m->o.target_fields;
    size_t cap = 0;
    while (tf && *tf) {
        size_t n = strcspn(tf, ",");
        if (n && (stk__grow((void **)&m->tf, &cap, m->ntf + 1, sizeof *m->tf) || !(m->tf[m->ntf++] = stk__mf_dupn(tf, n))))
            return stk__err(m->err, STK_E_NOMEM, "out of memory");
        tf += n + (tf[n] == ',');
    }
    if (m->ntf && m->o.multi_label)
        return stk__err(m->err, STK_E_INVALID, "a record has one target: a label list (--multi-label) or value "
                        "fields (--target-field), not both");
    return STK_OK;
}

static void mf_free(mf *m)
{
    for (size_t i = 0; i < m->n; i++)
        stk__mf_row_free(&m->rows[i]);
    free(m->rows);
    for (size_t i = 0; i < m->nbad; i++)
        free(m->bad[i].why);
    free(m->bad);
    for (size_t i = 0; i < m->ntf; i++)
        free(m->tf[i]);
    free(m->tf);
    for (size_t i = 0; i < m->nhdr; i++)
        free(m->hdr[i]);
    free(m->hdr);
    free(m->tcol);
}

/* The manifest NAME whose lines SRC gives. */
static int parse(mf_src *src, const char *name, const char *base_dir, const stk__manifest_opts *o,
                 stk__filelist *out, char *err)
{
    memset(out, 0, sizeof *out);
    mf m = {0};
    m.name = name ? name : "manifest";
    m.err = err;
    int rc = options(&m, o);
    src->max = m.o.max_line;
    src->name = m.name;
    if (!rc)
        rc = detect(&m, src);
    if (!rc && m.fmt == MF_LIST && (m.o.multi_label || m.ntf))
        rc = stk__err(err, STK_E_INVALID, "%s: a list file (path<TAB>label) has one label per line; multiple "
                      "labels and values need a CSV, TSV or JSON Lines manifest", m.name);
    if (!rc && m.fmt == MF_LIST && (m.o.labels == STK_LABELS_NAMES || m.o.labels == STK_LABELS_NONE))
        rc = stk__err(err, STK_E_INVALID, "%s: a list file's (path<TAB>label) labels are class indices; class "
                      "names and unlabelled data need a CSV, TSV or JSON Lines manifest", m.name);
    if (!rc)
        rc = stk__mf_rows(&m, src);
    /* no line has a label at all: unlabelled data, which must be asked for (labels none) */
    if (!rc && m.fmt != MF_LIST && !m.label_seen && m.o.labels != STK_LABELS_NONE)
        rc = stk__err(err, STK_E_FORMAT, "%s: no record has the label field `%s`; name it with --label-field "
                      "(label_field=), or pack unlabelled data (label -1) with --labels none (labels=\"none\")",
                      m.name, m.o.label_field);
    if (!rc)
        rc = second_pass(&m, base_dir, out);
    if (!rc && (!(out->root = stk__strdup(base_dir ? base_dir : "")) || !(out->origin = stk__strdup(m.name))))
        rc = stk__err(err, STK_E_NOMEM, "out of memory");
    mf_free(&m);
    if (rc)
        stk__filelist_free(out);
    return rc;
}

int stk__manifest_parse(const char *text, size_t len, const char *name, const char *base_dir,
                        const stk__manifest_opts *o, stk__filelist *out, char *err)
{
    mf_src src;
    stk__mf_src_text(&src, text, len, 0);
    return parse(&src, name, base_dir, o, out, err);
}

int stk__manifest_read(const char *path, const stk__manifest_opts *o, stk__filelist *out, char *err)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return stk__err(err, -errno, "%s: cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1ll << 32)) {
        close(fd);
        return stk__err(err, STK_E_INVALID, "%s: not a usable manifest (a regular file of 4 GiB at most)", path);
    }
    mf_src src;
    int rc = stk__mf_src_file(&src, fd, path, 0, err);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *sl = strrchr(dir, '/');
    if (sl)
        *sl = 0;
    else
        snprintf(dir, sizeof dir, ".");
    if (sl == dir)
        snprintf(dir, sizeof dir, "/");
    if (!rc)
        rc = parse(&src, path, dir, o, out, err);
    stk__mf_src_free(&src);
    return rc;
}

int stk__list_parse(const char *text, size_t len, const char *base_dir, stk__filelist *out, char *err)
{
    stk__manifest_opts o = {.format = "list", .strict = 1};
    return stk__manifest_parse(text, len, "list", base_dir, &o, out, err);
}

int stk__list_read(const char *path, stk__filelist *out, char *err)
{
    stk__manifest_opts o = {.strict = 1};
    return stk__manifest_read(path, &o, out, err);
}
