/* SPDX-License-Identifier: MIT */
/* test_manifest_max_line.c — a manifest line longer than max_line (default 1 MiB) is a bad line
 * naming its number ("longer than 1 MiB"), in every format, from memory and from a file, and the
 * lines around it keep their numbers; a CSV record quoted over lines past the limit too. Read from
 * a file, a 64 MiB line leaves the peak RSS within a few MiB (before, the whole file was read and
 * copied: 4 times its size). */
#include "testutil.h"

#include "common.h"
#include "folder.h"
#include "manifest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static long peak_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* HEAD, then a path of LONG bytes labelled 1 (a CSV row, JSON object or list line as FMT), then
 * two short lines: a manifest at PATH. */
static void write_manifest(const char *path, const char *fmt, size_t longlen)
{
    FILE *f = fopen(path, "w");
    T_CHECK(f, "open %s", path);
    int csv = !strcmp(fmt, "csv"), json = !strcmp(fmt, "jsonl");
    fputs(csv ? "path,label\na.jpg,0\n" : json ? "{\"path\":\"a.jpg\",\"label\":0}\n" : "a.jpg\t0\n", f);
    fputs(json ? "{\"path\":\"" : "", f);
    char chunk[4096];
    memset(chunk, 'x', sizeof chunk);
    for (size_t left = longlen; left;) {
        size_t n = left < sizeof chunk ? left : sizeof chunk;
        fwrite(chunk, 1, n, f);
        left -= n;
    }
    fputs(csv ? ",1\n" : json ? "\",\"label\":1}\n" : "\t1\n", f);
    fputs(csv ? "b.jpg,2\nc.jpg,3\n" : json ? "{\"path\":\"b.jpg\",\"label\":2}\n{\"path\":\"c.jpg\",\"label\":3}\n"
              : "b.jpg\t2\nc.jpg\t3\n", f);
    T_CHECK(fclose(f) == 0, "write %s", path);
}

/* The long line (line LONG_LINE) set aside as longer than LIMIT_TEXT; the three others kept. */
static void check(const stk__filelist *l, const char *what, size_t long_line, const char *limit_text)
{
    char where[64], why[64];
    snprintf(where, sizeof where, "line %zu", long_line);
    snprintf(why, sizeof why, "longer than %s", limit_text);
    T_CHECK(l->n == 3 && l->labels[0] == 0 && l->labels[1] == 2 && l->labels[2] == 3, "%s: %zu rows", what, l->n);
    T_CHECK(l->lines[1] == long_line + 1 && l->lines[2] == long_line + 2, "%s: lines %zu %zu", what, l->lines[1],
            l->lines[2]);
    T_CHECK(l->nbad == 1 && strstr(l->bad_where[0], where) && strstr(l->bad_why[0], why), "%s: %s: %s", what,
            l->nbad ? l->bad_where[0] : "-", l->nbad ? l->bad_why[0] : "-");
}

/* A 64 MiB line read from a file with the default limit: a bad line, and the peak RSS grows by
 * less than 16 MiB. Run first, while the peak is the program's start. */
static void bounded_memory(const char *dir)
{
    char path[4200], err[STK__ERRLEN];
    snprintf(path, sizeof path, "%s/huge.csv", dir);
    write_manifest(path, "csv", 64 * MIB);
    stk__filelist l;
    long before = peak_kb();
    T_OK(stk__manifest_read(path, NULL, &l, err));
    long grew = peak_kb() - before;
    check(&l, "64 MiB line", 3, "1 MiB");
    stk__filelist_free(&l);
    printf("peak RSS grew by %ld KiB reading a 64 MiB line\n", grew);
    const char *san = getenv("STOKER_SANITIZE");
    if (!san || !*san) /* (sanitizers keep freed memory in quarantine) */
        T_CHECK(grew < 16 * 1024, "peak RSS grew by %ld KiB for a 64 MiB line", grew);
    unlink(path);
}

static void each_format(const char *dir)
{
    static const char *const fmts[] = {"csv", "jsonl", "list"};
    char path[4200], err[STK__ERRLEN];
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/m.%s", dir, fmts[i]);
        size_t line = strcmp(fmts[i], "csv") ? 2 : 3;
        stk__manifest_opts o = {.format = fmts[i], .max_line = MIB};
        stk__filelist l;
        /* from a file: 2 MiB over a 1 MiB limit */
        write_manifest(path, fmts[i], 2 * MIB);
        T_OK(stk__manifest_read(path, &o, &l, err));
        check(&l, fmts[i], line, "1 MiB");
        stk__filelist_free(&l);
        /* any limit is usable: SIZE_MAX keeps the line (no overflow of the window's size) */
        o.max_line = SIZE_MAX;
        T_OK(stk__manifest_read(path, &o, &l, err));
        T_CHECK(l.n == 4 && l.nbad == 0, "%s: max_line SIZE_MAX: %zu rows", fmts[i], l.n);
        stk__filelist_free(&l);
        o.max_line = MIB;
        /* strict: that line fails the read, named */
        o.strict = 1;
        T_CHECK(stk__manifest_read(path, &o, &l, err) == STK_E_FORMAT && strstr(err, "longer than 1 MiB"), "%s", err);
        o.strict = 0;
        /* from memory, the same */
        size_t len = 0;
        char *text = (char *)t_read_file(path, &len);
        T_OK(stk__manifest_parse(text, len, "m", "/b", &o, &l, err));
        check(&l, fmts[i], line, "1 MiB");
        stk__filelist_free(&l);
        free(text);
        /* a limit of the whole line is no limit to it (only more is too long) */
        write_manifest(path, fmts[i], 1000);
        size_t whole = strcmp(fmts[i], "jsonl") ? 1002 : 1021; /* the path and the rest of the line */
        o.max_line = whole;
        T_OK(stk__manifest_read(path, &o, &l, err));
        T_CHECK(l.n == 4 && l.nbad == 0, "%s: a line of exactly max_line: %zu rows", fmts[i], l.n);
        stk__filelist_free(&l);
        o.max_line = whole - 1;
        T_OK(stk__manifest_read(path, &o, &l, err));
        char lim[32];
        snprintf(lim, sizeof lim, "%zu bytes", whole - 1);
        check(&l, fmts[i], line, lim);
        stk__filelist_free(&l);
        unlink(path);
    }
}

/* A CSV record quoted over several short lines, longer in all than the limit: set aside, and the
 * lines after it read. */
static void csv_quoted_record(void)
{
    char err[STK__ERRLEN];
    const char *text = "path,label,note\n"
                       "a.jpg,0,\"one\n"
                       "two\n"
                       "three\"\n"
                       "b.jpg,2,x\n";
    stk__manifest_opts o = {.max_line = 16}; /* (every line is shorter: the header 15 bytes) */
    stk__filelist l;
    T_OK(stk__manifest_parse(text, strlen(text), "m.csv", "/b", &o, &l, err));
    T_CHECK(l.nbad == 1 && strstr(l.bad_where[0], "line 2") && strstr(l.bad_why[0], "lines 2..4") &&
                strstr(l.bad_why[0], "longer than 16 bytes"),
            "quoted record: %zu bad: %s", l.nbad, l.nbad ? l.bad_why[0] : "-");
    T_CHECK(l.n == 1 && !strcmp(l.rel[0], "b.jpg") && l.lines[0] == 5 && l.labels[0] == 2, "b.jpg after it");
    stk__filelist_free(&l);
    /* the header over the limit fails the whole file */
    o.max_line = 8;
    T_CHECK(stk__manifest_parse(text, strlen(text), "m.csv", "/b", &o, &l, err) == STK_E_FORMAT &&
                strstr(err, "header is longer than 8 bytes"),
            "long header: %s", err);
}

int main(void)
{
    alarm(120); /* a reader that loops fails instead of hanging */
    char *dir = t_tmpdir("mfline");
    bounded_memory(dir);
    each_format(dir);
    csv_quoted_record();
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
