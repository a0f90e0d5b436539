/* SPDX-License-Identifier: MIT */
/* test_manifest_labels.c — what a manifest's labels are (STK_LABELS_AUTO, _INDEX, _NAMES): one
 * numeric label that is no class index (-1, +3, 1.0, 99999999999, 2**70) among indices
 * 0,1,2,10 is a bad line naming it, and 0,1,2,10 stay 0,1,2,10 (before, every label silently
 * became a class name in string order: 0,1,3,2); numbers mixed with names are refused, naming a
 * line of each; JSON Lines follows the same rule (integers and numeric strings alike). */
#include "testutil.h"

#include "common.h"
#include "folder.h"
#include "manifest.h"

#include <string.h>

static int parse(const char *name, const char *text, const stk__manifest_opts *o, stk__filelist *l, char *err)
{
    err[0] = 0;
    return stk__manifest_parse(text, strlen(text), name, "/base", o, l, err);
}

/* L holds the four good lines with labels 0, 1, 2, 10, no class names, and line BAD set aside
 * with a reason holding WHY. */
static void check_indices(const stk__filelist *l, const char *what, size_t bad, const char *why)
{
    T_CHECK(l->n == 4 && l->nclasses == 0, "%s: %zu rows, %zu classes", what, l->n, l->nclasses);
    T_CHECK(l->labels[0] == 0 && l->labels[1] == 1 && l->labels[2] == 2 && l->labels[3] == 10,
            "%s: labels %d %d %d %d (want 0 1 2 10)", what, l->labels[0], l->labels[1], l->labels[2], l->labels[3]);
    char where[64];
    snprintf(where, sizeof where, "line %zu", bad);
    T_CHECK(l->nbad == 1 && strstr(l->bad_where[0], where) && strstr(l->bad_why[0], why), "%s: bad %zu: %s: %s", what,
            l->nbad, l->nbad ? l->bad_where[0] : "", l->nbad ? l->bad_why[0] : "");
}

static void csv_numeric_not_index(void)
{
    static const char *const odd[] = {"-1", "+3", "1.0", "99999999999", "1180591620717411303424", "1e3", "007x"};
    char err[STK__ERRLEN], text[512], why[128];
    stk__filelist l;
    stk__manifest_opts o = {0};
    /* all indices: 0,1,2,10 stay themselves (not "0","1","10","2") */
    T_OK(parse("m.csv", "path,label\na,0\nb,1\nc,2\nd,10\n", &o, &l, err));
    T_CHECK(l.n == 4 && l.nclasses == 0 && l.labels[2] == 2 && l.labels[3] == 10, "plain indices");
    stk__filelist_free(&l);
    for (size_t i = 0; i < 6; i++) { /* (the last, 007x, is a name: below) */
        snprintf(text, sizeof text, "path,label\na,0\nb,1\nx,%s\nc,2\nd,10\n", odd[i]);
        T_OK(parse("m.csv", text, &o, &l, err));
        snprintf(why, sizeof why, "label `%s` is not a class index 0..2147483647", odd[i]);
        check_indices(&l, odd[i], 4, why);
        stk__filelist_free(&l);
        /* strict: that line fails the read, named */
        o.strict = 1;
        T_CHECK(parse("m.csv", text, &o, &l, err) == STK_E_FORMAT && strstr(err, "m.csv line 4: label") &&
                    strstr(err, odd[i]),
                "strict %s: %s", odd[i], err);
        o.strict = 0;
    }
    /* 2**70 as written, or any word, among numbers: refused, naming a line of each */
    const char *mixed[] = {"2**70", "007x", "cat"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(text, sizeof text, "path,label\na,0\nb,1\nx,%s\nc,2\nd,10\n", mixed[i]);
        snprintf(why, sizeof why, "line 4: `%s`", mixed[i]);
        T_CHECK(parse("m.csv", text, &o, &l, err) == STK_E_FORMAT && strstr(err, "line 2: `0`") && strstr(err, why) &&
                    strstr(err, "--labels index") && strstr(err, "--labels names"),
                "mixed %s: %s", mixed[i], err);
    }
    /* said to be indices: the word is a bad line, the rest stay */
    o.labels = STK_LABELS_INDEX;
    T_OK(parse("m.csv", "path,label\na,0\nb,1\nx,2**70\nc,2\nd,10\n", &o, &l, err));
    check_indices(&l, "index 2**70", 4, "label `2**70` is not a class index");
    stk__filelist_free(&l);
    /* said to be names: every label is one, in string order */
    o.labels = STK_LABELS_NAMES;
    T_OK(parse("m.csv", "path,label\na,0\nb,1\nc,2\nd,10\n", &o, &l, err));
    T_CHECK(l.n == 4 && l.nclasses == 4 && !strcmp(l.classes[2], "10") && l.labels[2] == 3 && l.labels[3] == 2,
            "names: %zu classes, labels %d %d", l.nclasses, l.labels[2], l.labels[3]);
    stk__filelist_free(&l);
    /* only names: names without asking */
    o.labels = STK_LABELS_AUTO;
    T_OK(parse("m.csv", "path,label\na,dog\nb,1st\nc,cat\n", &o, &l, err));
    T_CHECK(l.nclasses == 3 && !strcmp(l.classes[0], "1st") && l.labels[0] == 2, "names alone");
    stk__filelist_free(&l);
    /* a list file's labels are indices: names refused for it */
    o.labels = STK_LABELS_NAMES;
    T_CHECK(parse("m.txt", "a\t0\n", &o, &l, err) == STK_E_INVALID && strstr(err, "list file"), "list: %s", err);
    o.labels = 7;
    T_CHECK(parse("m.csv", "path,label\na,0\n", &o, &l, err) == STK_E_INVALID, "labels 7: %s", err);
}

static void jsonl_same_rule(void)
{
    char err[STK__ERRLEN];
    stk__filelist l;
    stk__manifest_opts o = {0};
    /* numeric strings are indices as CSV text is: "0","1","2","10" stay 0,1,2,10 */
    T_OK(parse("m.jsonl",
               "{\"path\":\"a\",\"label\":\"0\"}\n{\"path\":\"b\",\"label\":\"1\"}\n{\"path\":\"x\",\"label\":\"-1\"}\n"
               "{\"path\":\"c\",\"label\":\"2\"}\n{\"path\":\"d\",\"label\":\"10\"}\n",
               &o, &l, err));
    check_indices(&l, "json strings", 3, "label `-1` is not a class index 0..2147483647");
    stk__filelist_free(&l);
    /* integers likewise; -1 and 99999999999 are bad lines, 2**70 is not a JSON integer jansson reads */
    const char *ints[] = {"-1", "99999999999", "1180591620717411303424", "1.0"};
    const char *whys[] = {"label `-1` is not a class index", "label `99999999999` is not a class index",
                          "not JSON", "not an index or a class name"};
    for (size_t i = 0; i < 4; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"path\":\"a\",\"label\":0}\n{\"path\":\"b\",\"label\":1}\n{\"path\":\"c\",\"label\":2}\n"
                 "{\"path\":\"x\",\"label\":%s}\n{\"path\":\"d\",\"label\":10}\n",
                 ints[i]);
        T_OK(parse("m.jsonl", text, &o, &l, err));
        check_indices(&l, ints[i], 4, whys[i]);
        stk__filelist_free(&l);
    }
    /* an integer among names: refused (before, 0 silently became the class `cat`) */
    const char *mix = "{\"path\":\"a\",\"label\":0}\n{\"path\":\"b\",\"label\":\"cat\"}\n";
    T_CHECK(parse("m.jsonl", mix, &o, &l, err) == STK_E_FORMAT && strstr(err, "line 1: `0`") &&
                strstr(err, "line 2: `cat`"),
            "json mixed: %s", err);
    o.labels = STK_LABELS_NAMES;
    T_OK(parse("m.jsonl", mix, &o, &l, err));
    T_CHECK(l.n == 2 && l.nclasses == 2 && !strcmp(l.classes[0], "0") && l.labels[1] == 1, "json names");
    stk__filelist_free(&l);
    o.labels = STK_LABELS_INDEX;
    T_OK(parse("m.jsonl", mix, &o, &l, err));
    T_CHECK(l.n == 1 && l.labels[0] == 0 && l.nbad == 1 && strstr(l.bad_why[0], "`cat` is not a class index"),
            "json index");
    stk__filelist_free(&l);
}

int main(void)
{
    csv_numeric_not_index();
    jsonl_same_rule();
    printf("ok\n");
    return 0;
}
