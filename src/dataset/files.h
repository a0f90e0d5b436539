/* SPDX-License-Identifier: MIT */
/*
 * files.h — the files layout: a dataset that is an ImageFolder tree or a `path<TAB>label` list
 * of image files, read with open/read/close per record. Internal; implemented in files.c.
 */
#ifndef STK_FILES_H
#define STK_FILES_H

#include "dataset.h"

/* Open PATH (IS_DIR: an ImageFolder root, else a list file) as the files layout: paths, labels,
 * classes, and a table of the sizes seen now. Returns STK_OK or an error with ds->err set. */
int stk__files_open(stk_dataset *ds, const char *path, int is_dir);

/* stk_dataset_read of record INDEX of the files layout (the arguments are checked). */
int stk__files_read(stk_dataset *ds, uint64_t index, void *buf, size_t cap, size_t *len,
                    stk_record_info *info);

#endif
