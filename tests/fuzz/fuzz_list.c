/* SPDX-License-Identifier: MIT */
/*
 * fuzz_list.c — the `path<TAB>label` list parser (stk__list_parse) used by `stoker pack LIST`
 * and by the files layout.
 *
 * Input: the list file's text. Invariants: success gives N entries each with a non-empty
 * NUL-free relative path, the full path = base dir + "/" + rel (or rel when absolute), a label
 * 0..INT32_MAX, and N equals the number of non-blank, non-comment lines; failure leaves a
 * message that names a line. Nothing leaks (ASan/LSan).
 */
#include "fuzz.h"

#include "common.h"
#include "folder.h"
#include "manifest.h"

#include <string.h>

static size_t count_entries(const char *t, size_t len)
{
    size_t n = 0, pos = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && t[end] != '\n')
            end++;
        size_t l = end - pos;
        if (l && t[pos + l - 1] == '\r')
            l--;
        if (l && t[pos] != '#')
            n++;
        pos = end + 1;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *base = (size & 1) ? "/data/base" : "";
    stk__filelist l;
    char err[STK__ERRLEN];
    err[0] = 0;
    int rc = stk__list_parse(text, size, base, &l, err);
    if (rc != STK_OK) {
        FUZZ_CHECK(rc == STK_E_FORMAT || rc == STK_E_NOMEM, "rc %d", rc);
        FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL, "error not terminated");
        FUZZ_CHECK(strncmp(err, "list line ", 10) == 0 || rc == STK_E_NOMEM, "error `%s` names no line", err);
        return 0;
    }
    FUZZ_CHECK(l.n == count_entries(text, size), "%zu entries for %zu lines", l.n,
               count_entries(text, size));
    for (size_t i = 0; i < l.n; i++) {
        FUZZ_CHECK(l.paths[i] && l.rel[i] && l.rel[i][0], "entry %zu empty", i);
        FUZZ_CHECK(l.labels[i] >= 0, "entry %zu label %d", i, l.labels[i]);
        size_t rl = strlen(l.rel[i]);
        FUZZ_CHECK(!memchr(l.rel[i], '\t', rl) && !memchr(l.rel[i], '\n', rl), "entry %zu has a TAB/LF", i);
        if (l.rel[i][0] == '/' || !base[0]) {
            FUZZ_CHECK(strcmp(l.paths[i], l.rel[i]) == 0, "entry %zu path", i);
        } else {
            size_t bl = strlen(base), pl = strlen(l.paths[i]);
            FUZZ_CHECK(pl > bl && strncmp(l.paths[i], base, bl) == 0 &&
                           strcmp(l.paths[i] + pl - rl, l.rel[i]) == 0,
                       "entry %zu: `%s` is not `%s` joined with `%s`", i, l.paths[i], base, l.rel[i]);
        }
    }
    stk__filelist_free(&l);
    return 0;
}
