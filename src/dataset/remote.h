/* SPDX-License-Identifier: MIT */
/*
 * remote.h — datasets at s3://bucket/prefix: the shards are fetched into the local cache
 * directory (fetch layer), checked, and the cached copy is opened as a local dataset.
 */
#ifndef STK_REMOTE_H
#define STK_REMOTE_H

#include "dataset.h"

/* Open the dataset at URL (s3://...) into DS (layout WANT); ds->err says why on failure. */
int stk__remote_open(stk_dataset *ds, const char *url, int want);
/* Release what the open holds (the shared locks on the cached shards). NULL is a no-op. */
void stk__remote_free(stk__remote *r);

#endif
