/*
 * lmdb_check.h — validate an LMDB data file's B-trees with pread before LMDB maps it. Internal.
 *
 * LMDB trusts its file: a page number past the end of the file, a node offset outside its page
 * or a key longer than its page makes LMDB read outside the mapping (SIGBUS / SIGSEGV inside
 * mdb_dbi_open or mdb_cursor_get; found by tests/fuzz/fuzz_shard). stk__lmdb_check walks every
 * branch and leaf page reachable from the meta page LMDB will use (the main database and each
 * named database in it) and checks what LMDB's read path dereferences. Overflow pages (large
 * values) are checked by number only: they are never read, so opening still reads no payload.
 */
#ifndef STK_LMDB_CHECK_H
#define STK_LMDB_CHECK_H

#include <stdint.h>

/* FD: the data file (NAME for messages), FILE_SIZE its size. Returns STK_OK, STK_E_FORMAT (not a
 * usable LMDB file: page N named with the reason), STK_E_UNSUPPORTED (MDB_DUPSORT databases) or
 * -errno (read failure) / STK_E_NOMEM, with ERR (STK__ERRLEN bytes) set. */
int stk__lmdb_check(int fd, const char *name, uint64_t file_size, char *err);

#endif
