/* SPDX-License-Identifier: MIT */
/* test_manifest.c — manifests (CSV, TSV, JSON Lines, list files) into samples, labels and targets:
 * quoting, headers, class names and indices, label lists, value vectors of every type; each kind
 * of bad line set aside with its line number and reason, or failing under strict. */
#include "testutil.h"

#include "common.h"
#include "folder.h"
#include "manifest.h"

#include <math.h>
#include <string.h>

static stk__manifest_opts defaults(void)
{
    stk__manifest_opts o;
    memset(&o, 0, sizeof o);
    return o;
}

static int parse(const char *name, const char *text, const stk__manifest_opts *o, stk__filelist *l, char *err)
{
    err[0] = 0;
    return stk__manifest_parse(text, strlen(text), name, "/base", o, l, err);
}

/* The reason set aside for line LINE, or NULL. */
static const char *bad_line(const stk__filelist *l, const char *name, size_t line)
{
    char where[256];
    snprintf(where, sizeof where, "%s line %zu", name, line);
    for (size_t i = 0; i < l->nbad; i++)
        if (!strcmp(l->bad_where[i], where))
            return l->bad_why[i];
    return NULL;
}

typedef struct want_bad {
    size_t line;
    const char *why;
} want_bad;

/* Each of the N lines in W set aside in L with a reason holding its text. */
static void check_bad(const stk__filelist *l, const char *name, const want_bad *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *got = bad_line(l, name, w[i].line);
        T_CHECK(got && strstr(got, w[i].why), "%s line %zu: want `%s`, got `%s`", name, w[i].line, w[i].why,
                got ? got : "");
    }
}

static void csv_names(void)
{
    char err[STK__ERRLEN];
    stk__filelist l;
    stk__manifest_opts o = defaults();
    /* a BOM, CRLF, a quoted path holding a comma, a quoted field spanning two lines, blank lines */
    const char *text = "\xEF\xBB\xBFpath,label,note\r\n"
                       "a.jpg,dog,x\r\n"
                       "\"b,1.jpg\",cat,\"two\nlines\"\r\n"
                       "\r\n"
                       "/abs/c.jpg,dog,\n"
                       "d.jpg,,empty label\n";
    T_OK(parse("m.csv", text, &o, &l, err));
    /* an empty label cell is a bad line (since 0.5; before, it was stored as label -1) */
    T_CHECK(l.n == 3 && l.nbad == 1, "rows %zu bad %zu", l.n, l.nbad);
    const want_bad empty[] = {{7, "empty label (column `label`)"}};
    check_bad(&l, "m.csv", empty, 1);
    T_CHECK(l.nclasses == 2 && !strcmp(l.classes[0], "cat") && !strcmp(l.classes[1], "dog"), "sorted names");
    T_CHECK(l.labels[0] == 1 && l.labels[1] == 0 && l.labels[2] == 1, "labels");
    T_CHECK(!strcmp(l.paths[0], "/base/a.jpg") && !strcmp(l.rel[1], "b,1.jpg") && !strcmp(l.paths[2], "/abs/c.jpg"),
            "paths %s %s %s", l.paths[0], l.rel[1], l.paths[2]);
    T_CHECK(l.lines[0] == 2 && l.lines[1] == 3 && l.lines[2] == 6, "lines %zu %zu %zu", l.lines[0], l.lines[1],
            l.lines[2]);
    T_CHECK(l.tinfo.dtype == STK_TDT_NONE && !l.targets, "no targets");
    stk__filelist_free(&l);

    /* labels that are all integers are indices, without names */
    T_OK(parse("m.csv", "path,label\na.jpg,3\nb.jpg,0\n", &o, &l, err));
    T_CHECK(l.n == 2 && l.nclasses == 0 && l.labels[0] == 3 && l.labels[1] == 0, "indices");
    stk__filelist_free(&l);
    /* a number among words is refused (naming a line of each), not renumbered as a name ... */
    T_CHECK(parse("m.csv", "path,label\na.jpg,3\nb.jpg,zebra\n", &o, &l, err) == STK_E_FORMAT &&
                strstr(err, "line 2: `3`") && strstr(err, "line 3: `zebra`") && strstr(err, "--labels"),
            "mixed: %s", err);
    /* ... unless the labels are said to be names: then every label is one ("3" too) */
    o.labels = STK_LABELS_NAMES;
    T_OK(parse("m.csv", "path,label\na.jpg,3\nb.jpg,zebra\n", &o, &l, err));
    T_CHECK(l.nclasses == 2 && !strcmp(l.classes[0], "3") && l.labels[0] == 0 && l.labels[1] == 1, "names");
    stk__filelist_free(&l);
    o.labels = STK_LABELS_AUTO;
    /* another path / label column */
    o.path_field = "file";
    o.label_field = "y";
    T_OK(parse("m.csv", "y,file\n1,a.jpg\n", &o, &l, err));
    T_CHECK(l.n == 1 && l.labels[0] == 1 && !strcmp(l.rel[0], "a.jpg"), "other columns");
    stk__filelist_free(&l);
    /* a header without the path column, or no header at all: the whole file is refused */
    o = defaults();
    T_CHECK(parse("m.csv", "file,label\na.jpg,1\n", &o, &l, err) == STK_E_FORMAT && strstr(err, "m.csv line 1") &&
                strstr(err, "no column `path`"),
            "no path column: %s", err);
    T_CHECK(parse("m.csv", "", &o, &l, err) == STK_E_FORMAT && strstr(err, "no header"), "empty: %s", err);
    /* an explicitly named label field that no record has */
    o.label_field = "class";
    T_CHECK(parse("m.csv", "path,label\na.jpg,1\n", &o, &l, err) == STK_E_FORMAT && strstr(err, "`class`"),
            "missing label field: %s", err);
}

static void classes_file(const char *dir)
{
    char err[STK__ERRLEN], cf[4200];
    stk__filelist l;
    snprintf(cf, sizeof cf, "%s/classes.txt", dir);
    t_write_file(cf, "zebra\nant\nbee\n", 14);
    stk__manifest_opts o = defaults();
    o.classes_file = cf;
    const char *text = "path,label\na.jpg,bee\nb.jpg,wasp\nc.jpg,2\nd.jpg,zebra\n";
    /* names and a number mixed: refused as without a classes file ... */
    T_CHECK(parse("m.csv", text, &o, &l, err) == STK_E_FORMAT && strstr(err, "line 4: `2`"), "mixed: %s", err);
    o.labels = STK_LABELS_NAMES;
    T_OK(parse("m.csv", text, &o, &l, err));
    /* ... or, as names, the file's order is the label order; `2` is a name, and not one of them */
    T_CHECK(l.n == 2 && l.nclasses == 3 && !strcmp(l.classes[0], "zebra"), "classes from the file");
    T_CHECK(l.labels[0] == 2 && l.labels[1] == 0, "labels %d %d", l.labels[0], l.labels[1]);
    const char *w = bad_line(&l, "m.csv", 3);
    T_CHECK(w && strstr(w, "unknown class `wasp`") && strstr(w, "classes.txt"), "unknown class: %s", w ? w : "");
    T_CHECK(bad_line(&l, "m.csv", 4) && strstr(bad_line(&l, "m.csv", 4), "unknown class `2`"), "2 is a name");
    T_CHECK(l.nbad == 2 && !strcmp(l.bad_where[0], "m.csv line 3"), "bad lines in line order");
    stk__filelist_free(&l);
    /* JSON integers stay indices, checked against the class count */
    o.labels = STK_LABELS_AUTO;
    T_OK(parse("m.jsonl", "{\"path\":\"a.jpg\",\"label\":1}\n{\"path\":\"b.jpg\",\"label\":3}\n", &o, &l, err));
    T_CHECK(l.n == 1 && l.labels[0] == 1, "json index");
    T_CHECK(bad_line(&l, "m.jsonl", 2) && strstr(bad_line(&l, "m.jsonl", 2), "out of range (3 classes"), "range");
    stk__filelist_free(&l);
    /* strict: the first bad line fails, naming file and line */
    o.labels = STK_LABELS_NAMES;
    o.strict = 1;
    T_CHECK(parse("m.csv", text, &o, &l, err) == STK_E_FORMAT && strstr(err, "m.csv line 3: unknown class `wasp`") &&
                strstr(err, "--strict"),
            "strict: %s", err);
    /* a class listed twice, an unreadable classes file */
    t_write_file(cf, "a\nb\na\n", 6);
    o.strict = 0;
    T_CHECK(parse("m.csv", text, &o, &l, err) == STK_E_FORMAT && strstr(err, "class `a` is listed twice"), "%s", err);
    snprintf(cf, sizeof cf, "%s/missing.txt", dir);
    T_CHECK(parse("m.csv", text, &o, &l, err) < 0 && strstr(err, "missing.txt"), "missing classes file: %s", err);
}

static void bad_lines(void)
{
    char err[STK__ERRLEN];
    stk__filelist l;
    stk__manifest_opts o = defaults();
    o.target_fields = "v";
    const char *csv = "path,label,v\n"
                      "a.jpg,1,0.5\n"  /* 2: ok */
                      "b.jpg,1\n"      /* 3: too few fields */
                      ",1,2\n"         /* 4: empty path */
                      "c.jpg,1,\n"     /* 5: empty value */
                      "d.jpg,1,abc\n"  /* 6: not a number */
                      "e.jpg,1,1 2\n"; /* 7: two values, the first record had one */
    T_OK(parse("m.csv", csv, &o, &l, err));
    T_CHECK(l.n == 1 && l.nbad == 5, "rows %zu bad %zu", l.n, l.nbad);
    static const want_bad want[] = {{3, "2 fields, but the header has 3"},
                                     {4, "empty path"},
                                     {5, "field `v` is empty"},
                                     {6, "field `v`: `abc` is not a number"},
                                     {7, "2 values, but the first record has 1"}};
    check_bad(&l, "m.csv", want, sizeof want / sizeof *want);
    stk__filelist_free(&l);

    const char *jl = "{\"path\":\"a.jpg\",\"v\":[1,2],\"label\":0}\n" /* 1: ok */
                     "not json\n"                          /* 2 */
                     "[1,2]\n"                             /* 3: not an object */
                     "{\"v\":[1,2]}\n"                     /* 4: no path */
                     "{\"path\":7,\"v\":[1,2]}\n"          /* 5: path not a string */
                     "{\"path\":\"b.jpg\",\"label\":0}\n"  /* 6: no value field */
                     "{\"path\":\"c.jpg\",\"label\":0,\"v\":[1,\"x\"]}\n" /* 7: not a number in the list */
                     "{\"path\":\"d.jpg\",\"v\":[1,2],\"label\":[1]}\n" /* 8: a list without multi_label */
                     "{\"path\":\"e.jpg\",\"v\":[1,2],\"label\":1.5}\n" /* 9: a fraction */
                     "{\"path\":\"f.jpg\",\"path\":\"g.jpg\",\"v\":[1,2]}\n"; /* 10: duplicate key */
    T_OK(parse("m.jsonl", jl, &o, &l, err));
    T_CHECK(l.n == 1 && l.nbad == 9, "json rows %zu bad %zu", l.n, l.nbad);
    static const want_bad jwant[] = {{2, "not JSON"}, {3, "not a JSON object"}, {4, "no field `path`"},
                                      {5, "is not a string"}, {6, "no field `v`"}, {7, "not a number in its list"},
                                      {8, "is a list (pack with --multi-label)"}, {9, "a fraction"},
                                      {10, "not JSON"}};
    check_bad(&l, "m.jsonl", jwant, sizeof jwant / sizeof *jwant);
    stk__filelist_free(&l);
    /* no values at all: a line set aside, and the shape comes from the first record that has some */
    T_OK(parse("m.jsonl", "{\"path\":\"a\",\"label\":1,\"v\":[]}\n{\"path\":\"b\",\"label\":1,\"v\":[1,2]}\n", &o, &l, err));
    T_CHECK(l.n == 1 && l.tinfo.size == 2 && bad_line(&l, "m.jsonl", 1) &&
                strstr(bad_line(&l, "m.jsonl", 1), "no values"),
            "empty value list");
    stk__filelist_free(&l);
    /* a multi-label list and value fields at once: refused as a whole */
    o.multi_label = 1;
    T_CHECK(parse("m.jsonl", jl, &o, &l, err) == STK_E_INVALID && strstr(err, "not both"), "%s", err);
    /* an unknown format */
    o = defaults();
    o.format = "xml";
    T_CHECK(parse("m.csv", csv, &o, &l, err) == STK_E_INVALID && strstr(err, "xml"), "%s", err);
}

static void label_lists(void)
{
    char err[STK__ERRLEN];
    stk__filelist l;
    stk__manifest_opts o = defaults();
    o.multi_label = 1;
    const char *csv = "path\tlabel\n"
                      "a.jpg\tcat dog\n"
                      "b.jpg\t\n"
                      "c.jpg\towl  cat dog\n";
    T_OK(parse("m.tsv", csv, &o, &l, err)); /* TSV: the first line starts with the path field and a tab */
    T_CHECK(l.n == 3 && l.nclasses == 3, "rows %zu classes %zu", l.n, l.nclasses);
    T_CHECK(l.tinfo.dtype == STK_TDT_INT32 && l.tinfo.kind == STK_TARGET_LABELS && l.tinfo.size == 3 &&
                l.tinfo.classes == 3,
            "label-list shape");
    const int32_t *t = (const int32_t *)(const void *)l.targets;
    static const int32_t want[9] = {0, 1, -1, -1, -1, -1, 2, 0, 1}; /* cat=0 dog=1 owl=2 */
    T_CHECK(!memcmp(t, want, sizeof want), "lists %d %d %d / %d %d %d / %d %d %d", t[0], t[1], t[2], t[3], t[4], t[5],
            t[6], t[7], t[8]);
    T_CHECK(l.labels[0] == 0 && l.labels[1] == -1 && l.labels[2] == 2, "label = the first of the list");
    stk__filelist_free(&l);
    /* JSON lists of indices: the class count is the largest index + 1; another separator */
    T_OK(parse("m.jsonl", "{\"path\":\"a\",\"label\":[4,0]}\n{\"path\":\"b\",\"label\":2}\n{\"path\":\"c\",\"label\":[]}\n"
               "{\"path\":\"d\"}\n{\"path\":\"e\",\"label\":null}\n", &o, &l, err));
    T_CHECK(l.n == 3 && l.tinfo.size == 2 && l.tinfo.classes == 5 && l.nclasses == 0, "json lists");
    /* an empty list is no labels; a missing or null label field is a bad line (since 0.5) */
    const want_bad nolist[] = {{4, "no label (field `label`); an empty list is []"},
                               {5, "null label (field `label`)"}};
    check_bad(&l, "m.jsonl", nolist, 2);
    stk__filelist_free(&l);
    o.label_sep = "|";
    T_OK(parse("m.csv", "path,label\na,x|y\n", &o, &l, err));
    T_CHECK(l.tinfo.size == 2 && l.nclasses == 2, "separator");
    stk__filelist_free(&l);
    /* a list file has one label per line */
    o = defaults();
    o.multi_label = 1;
    T_CHECK(parse("m.txt", "a.jpg\t1\n", &o, &l, err) == STK_E_INVALID && strstr(err, "list file"), "%s", err);
}

static void value_types(void)
{
    char err[STK__ERRLEN];
    stk__filelist l;
    stk__manifest_opts o = defaults();
    o.target_fields = "a,b";
    o.labels = STK_LABELS_NONE; /* unlabelled value rows, asked for */
    /* JSON: a number and a list; CSV: cells of numbers */
    const char *jl = "{\"path\":\"p0\",\"a\":1,\"b\":[2,255]}\n"
                     "{\"path\":\"p1\",\"a\":-3,\"b\":[0.5,9007199254740993]}\n"
                     "{\"path\":\"p2\",\"a\":256,\"b\":[1e39,0]}\n";
    /* every type: which lines fit */
    static const struct {
        int dtype;
        int ok[3];
    } types[] = {{STK_TDT_UINT8, {1, 0, 0}},   {STK_TDT_INT32, {1, 0, 0}}, {STK_TDT_INT64, {1, 0, 0}},
                 {STK_TDT_FLOAT32, {1, 1, 0}}, {STK_TDT_FLOAT64, {1, 1, 1}}};
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        o.target_dtype = types[k].dtype;
        T_OK(parse("m.jsonl", jl, &o, &l, err));
        size_t n = 0;
        for (int i = 0; i < 3; i++)
            n += (size_t)types[k].ok[i];
        T_CHECK(l.n == n && l.tinfo.size == 3 && l.tinfo.dtype == types[k].dtype && l.tinfo.kind == STK_TARGET_VALUES,
                "type %d: %zu rows", types[k].dtype, l.n);
        const uint8_t *r = l.targets;
        switch (types[k].dtype) {
        case STK_TDT_UINT8:
            T_CHECK(r[0] == 1 && r[1] == 2 && r[2] == 255, "uint8");
            T_CHECK(strstr(bad_line(&l, "m.jsonl", 2), "does not fit uint8"), "uint8 range");
            break;
        case STK_TDT_INT32: {
            int32_t v[3];
            memcpy(v, r, sizeof v);
            T_CHECK(v[0] == 1 && v[1] == 2 && v[2] == 255, "int32");
            T_CHECK(strstr(bad_line(&l, "m.jsonl", 2), "is not an integer"), "0.5 is no int32");
            break;
        }
        case STK_TDT_INT64: {
            int64_t v[3];
            memcpy(v, r, sizeof v);
            T_CHECK(v[0] == 1 && v[2] == 255, "int64");
            break;
        }
        case STK_TDT_FLOAT32: {
            float v[6];
            memcpy(v, r, sizeof v);
            T_CHECK(v[0] == 1.0f && v[3] == -3.0f && v[4] == 0.5f, "float32");
            T_CHECK(strstr(bad_line(&l, "m.jsonl", 3), "out of float32's range"), "1e39");
            break;
        }
        default: {
            double v[9];
            memcpy(v, r, sizeof v);
            T_CHECK(v[0] == 1.0 && v[4] == 0.5 && v[7] == 1e39, "float64");
        }
        }
        stk__filelist_free(&l);
    }
    /* int64 keeps a JSON integer above 2^53 exactly (a double would not) */
    o.target_dtype = STK_TDT_INT64;
    T_OK(parse("m.jsonl", "{\"path\":\"p\",\"a\":1,\"b\":[9007199254740993,-9223372036854775808]}\n", &o, &l, err));
    int64_t v[3];
    memcpy(v, l.targets, sizeof v);
    T_CHECK(v[1] == 9007199254740993LL && v[2] == INT64_MIN, "int64 exact: %lld", (long long)v[1]);
    stk__filelist_free(&l);
    /* CSV cells, and a column named twice in the options */
    o.target_dtype = STK_TDT_FLOAT64;
    o.target_fields = "box,score,box";
    T_OK(parse("m.csv", "path,box,score\np,1 2 3 4,0.25\nq,nan inf -inf 0,1e-300\n", &o, &l, err));
    double d[18];
    memcpy(d, l.targets, sizeof d);
    T_CHECK(l.n == 2 && l.tinfo.size == 9 && d[0] == 1 && d[4] == 0.25 && d[8] == 4 && isnan(d[9]) && isinf(d[10]) &&
                d[13] == 1e-300,
            "csv values");
    stk__filelist_free(&l);
}

static void list_format(void)
{
    char err[STK__ERRLEN];
    stk__filelist l;
    stk__manifest_opts o = defaults();
    /* not strict: bad lines set aside, the rest kept */
    T_OK(parse("list.txt", "# c\na.jpg\t1\nb.jpg one\n\t3\nc.jpg\t99999999999\nd.jpg\t2\n", &o, &l, err));
    T_CHECK(l.n == 2 && l.labels[0] == 1 && l.labels[1] == 2 && l.nbad == 3, "list: %zu rows %zu bad", l.n, l.nbad);
    T_CHECK(strstr(bad_line(&l, "list.txt", 3), "expected `path<TAB>label`") &&
                strstr(bad_line(&l, "list.txt", 4), "empty path") &&
                strstr(bad_line(&l, "list.txt", 5), "label too large"),
            "list reasons");
    stk__filelist_free(&l);
    /* a .tsv whose first line is not a header stays a list file */
    T_OK(parse("x.tsv", "a.jpg\t1\n", &o, &l, err));
    T_CHECK(l.n == 1 && l.labels[0] == 1, "tsv list");
    stk__filelist_free(&l);
}

int main(void)
{
    char *dir = t_tmpdir("manifest");
    csv_names();
    classes_file(dir);
    bad_lines();
    label_lists();
    value_types();
    list_format();
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
