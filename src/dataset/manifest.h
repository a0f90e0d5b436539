/* SPDX-License-Identifier: MIT */
/*
 * manifest.h — the samples a manifest names: a CSV, TSV or JSON Lines file (path and label,
 * labels or values per line) or a `path<TAB>label` list file, as a file list with labels and
 * per-sample targets. Used by `stoker pack` and by the files layout. Internal; the rules are
 * docs/FORMAT.md's "Manifests".
 */
#ifndef STK_MANIFEST_H
#define STK_MANIFEST_H

#include "folder.h"

#include <stddef.h>

typedef struct stk__manifest_opts {
    const char *format;        /* "csv", "tsv", "jsonl", "list"; NULL: by name and first line */
    const char *path_field;    /* NULL: "path" */
    const char *label_field;   /* NULL: "label" (optional in the manifest) */
    const char *target_fields; /* comma-separated value fields, NULL: none */
    const char *classes_file;  /* class names, one per line; NULL: the names the manifest uses */
    const char *label_sep;     /* separator inside a CSV/TSV cell; NULL: " " */
    int multi_label;           /* the label field holds a list */
    int target_dtype;          /* STK_TDT_* of the values; 0: float32 */
    int strict;                /* the first bad line fails the read */
    int labels;                /* STK_LABELS_AUTO, _INDEX or _NAMES: what the label texts are */
    size_t max_line;           /* a longer line is a bad line, skipped unread; 0: 1 MiB */
} stk__manifest_opts;

#define STK__MANIFEST_MAX_LINE ((size_t)1 << 20) /* max_line's default */

/*
 * Read the manifest PATH (a regular file of 4 GiB at most; read line by line, so memory stays
 * near O->max_line whatever the file holds) into OUT: the good lines' files
 * (paths joined to PATH's folder unless absolute, `rel` as written, the line of each in
 * OUT->lines), labels, class names and targets (OUT->tinfo, OUT->targets). A line that cannot be
 * used (bad syntax, no path, an unknown class name, a label that is not a class index, a line
 * longer than O->max_line, values of another count or out of the target type's range, ...) goes
 * to OUT->bad ("FILE:LINE", reason), or fails the read under
 * O->strict (STK_E_FORMAT naming the file and line). Errors about the whole file (unreadable, an
 * unknown format, a header without the path field, an unreadable classes file, labels mixing
 * indices and names under STK_LABELS_AUTO, contradictory options) are returned with ERR (STK__ERRLEN bytes) naming the file. O may be NULL (defaults,
 * not strict).
 */
int stk__manifest_read(const char *path, const stk__manifest_opts *o, stk__filelist *out, char *err);

/* The same on TEXT (LEN bytes) named NAME in messages, relative paths joined to BASE_DIR. */
int stk__manifest_parse(const char *text, size_t len, const char *name, const char *base_dir,
                        const stk__manifest_opts *o, stk__filelist *out, char *err);

/* The list format alone, strict (the first bad line fails, naming it): `path<TAB>label` per line,
 * label a decimal int32 >= 0; blank lines and lines starting with '#' ignored; CRLF accepted.
 * stk__list_read reads the file PATH (relative paths joined to its folder). */
int stk__list_parse(const char *text, size_t len, const char *base_dir, stk__filelist *out, char *err);
int stk__list_read(const char *path, stk__filelist *out, char *err);

#endif
