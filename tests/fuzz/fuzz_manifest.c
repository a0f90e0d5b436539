/* SPDX-License-Identifier: MIT */
/*
 * fuzz_manifest.c — the manifest reader (stk__manifest_parse): CSV and TSV through libcsv, JSON
 * Lines through jansson, list files; class names, label lists and value targets of every type.
 *
 * Input: one byte of options (format, multi-label or value fields, target type, strict), then
 * the manifest's text; the input's size picks the labels mode and, for one in five, a 32-byte
 * line limit. Invariants: success gives N entries with non-empty NUL-free paths, labels
 * that are -1 or a class index (below the class count when there are names), N target rows of
 * a usable shape, label lists of indices below the class count then -1 padding, and each line
 * set aside named "m line L" with a reason; failure leaves a message naming the manifest.
 * Nothing leaks (ASan/LSan).
 */
#include "fuzz.h"

#include "common.h"
#include "folder.h"
#include "format.h"
#include "manifest.h"

#include <string.h>

static void check_ok(const stk__filelist *l, const stk__manifest_opts *o)
{
    char why[64];
    for (size_t i = 0; i < l->n; i++) {
        FUZZ_CHECK(l->paths[i] && l->rel[i] && l->rel[i][0], "entry %zu empty", i);
        FUZZ_CHECK(l->labels[i] >= -1, "entry %zu label %d", i, l->labels[i]);
        FUZZ_CHECK(!l->nclasses || l->labels[i] < (int32_t)l->nclasses, "entry %zu label %d of %zu classes", i,
                   l->labels[i], l->nclasses);
        FUZZ_CHECK(l->lines[i] >= 1, "entry %zu line", i);
    }
    if (l->tinfo.dtype == STK_TDT_NONE) {
        FUZZ_CHECK(!l->targets, "targets without a shape");
    } else if (l->n) {
        FUZZ_CHECK(stk__target_check(&l->tinfo, why) == STK_OK, "shape: %s", why);
        size_t row = l->tinfo.size * stk_target_dtype_size(l->tinfo.dtype);
        for (size_t i = 0; i < l->n && l->tinfo.kind == STK_TARGET_LABELS; i++)
            FUZZ_CHECK(stk__target_labels_ok(&l->tinfo, l->targets + row * i), "label list %zu", i);
        FUZZ_CHECK(l->tinfo.kind == (o->multi_label ? STK_TARGET_LABELS : STK_TARGET_VALUES), "kind");
    }
    for (size_t i = 0; i < l->nbad; i++)
        FUZZ_CHECK(!strncmp(l->bad_where[i], "m line ", 7) && l->bad_why[i][0], "bad line %zu: %s", i,
                   l->bad_where[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const formats[] = {"csv", "tsv", "jsonl", "list"};
    static const int dtypes[] = {STK_TDT_UINT8, STK_TDT_INT32, STK_TDT_INT64, STK_TDT_FLOAT32};
    if (size < 1)
        return 0;
    uint8_t opt = data[0];
    stk__manifest_opts o;
    memset(&o, 0, sizeof o);
    o.format = formats[opt & 3];
    o.multi_label = (opt >> 2 & 3) == 1;
    o.target_fields = (opt >> 2 & 3) == 2 ? "v" : (opt >> 2 & 3) == 3 ? "v,w" : NULL;
    o.target_dtype = dtypes[opt >> 4 & 3];
    o.strict = opt >> 6 & 1;
    o.label_sep = opt >> 7 ? ";" : NULL;
    o.labels = (int)(size % 3);                /* (the first byte is spent) STK_LABELS_AUTO, _INDEX, _NAMES */
    o.max_line = size % 5 == 0 ? 32 : 0;       /* and now and then a short line limit */
    stk__filelist l;
    char err[STK__ERRLEN];
    err[0] = 0;
    int rc = stk__manifest_parse((const char *)data + 1, size - 1, "m", (opt & 1) ? "/base" : "", &o, &l, err);
    if (rc != STK_OK) {
        FUZZ_CHECK(rc == STK_E_FORMAT || rc == STK_E_INVALID || rc == STK_E_NOMEM, "rc %d", rc);
        FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL, "error not terminated");
        FUZZ_CHECK(rc == STK_E_NOMEM || !strncmp(err, "m", 1) || strstr(err, "target") || strstr(err, "not both"),
                   "error `%s` names no manifest", err);
        return 0;
    }
    check_ok(&l, &o);
    stk__filelist_free(&l);
    return 0;
}
