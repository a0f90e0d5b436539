/* SPDX-License-Identifier: MIT */
/*
 * discover.h — what a dataset path holds (a directory of shards, an LMDB environment, one shard
 * or foreign LMDB file, or image files) and opening it as such. Internal; implemented in
 * discover.c.
 */
#ifndef STK_DISCOVER_H
#define STK_DISCOVER_H

#include "dataset.h"

#include <sys/stat.h>

/*
 * Open PATH (ST: its stat) as layout WANT (STK_LAYOUT_AUTO: decided from what is there): fills
 * ds's shards, offset table, totals and layout. Returns STK_OK or an error with ds->err set;
 * what was opened before the error stays in ds for the caller to close.
 */
int stk__discover_open(stk_dataset *ds, const char *path, const struct stat *st, int want);

#endif
