/* SPDX-License-Identifier: MIT */
/*
 * reader_threads.h — the thread-pool backends: pread, files (open/read/close per record) and
 * mmap (LMDB's own path). Internal to src/read; implemented in reader_threads.c.
 */
#ifndef STK_READER_THREADS_H
#define STK_READER_THREADS_H

#include "reader_internal.h"

/* One pool thread (ARG: the reader): WORK, read, verify, SINK until stopped. */
void *stk__rd_pool_thread(void *arg);
/* mmap backend: an environment per shard and its database handle. */
int stk__rd_mmap_setup(stk__reader *r, char *err);
/* Close what stk__rd_mmap_setup opened. */
void stk__rd_mmap_close(stk__reader *r);

#endif
