/* SPDX-License-Identifier: MIT */
/*
 * lmdb_check.h — validate an LMDB data file's B-trees with pread before LMDB maps it. Internal.
 *
 * LMDB trusts its file: a page number past the end of the file, a node offset outside its page
 * or a key longer than its page makes LMDB read outside the mapping (SIGBUS / SIGSEGV inside
 * mdb_dbi_open or mdb_cursor_get; found by tests/fuzz/fuzz_shard). stk__lmdb_check walks every
 * branch and leaf page reachable from the meta page LMDB will use (the main database and each
 * named database in it) and checks what LMDB's read path dereferences. Overflow pages (large
 * values) are checked by number only: they are never read, so opening still reads no payload.
 * The same page checks serve stk__lmdb_tree_get below.
 */
#ifndef STK_LMDB_CHECK_H
#define STK_LMDB_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* FD: the data file (NAME for messages), FILE_SIZE its size. Returns STK_OK, STK_E_FORMAT (not a
 * usable LMDB file: page N named with the reason), STK_E_UNSUPPORTED (MDB_DUPSORT databases) or
 * -errno (read failure) / STK_E_NOMEM, with ERR (STK__ERRLEN bytes) set. */
int stk__lmdb_check(int fd, const char *name, uint64_t file_size, char *err);

/*
 * Looking keys up with pread only, never through LMDB's map: for lookups that may run while the
 * file shrinks underneath (a page LMDB's map no longer backs raises SIGBUS; a short pread is an
 * error). Every page number is checked against the tree's last page, every page's own number,
 * type and free-space bounds, every node, key and value against its page, overflow runs against
 * the last page; at most 32 levels are descended (a cycle ends there). Keys compare as LMDB's
 * default comparator does (memcmp, then the shorter first): databases opened with
 * MDB_REVERSEKEY, MDB_INTEGERKEY or MDB_DUPSORT are refused. Reentrant: no state but the fd.
 */
typedef struct stk__lmdb_tree {
    int fd;
    uint32_t psize;
    uint64_t last_pg;   /* pages 2..last_pg hold the tree (the meta of the snapshot says so) */
    uint64_t root;      /* UINT64_MAX: empty database */
    uint64_t entries;   /* the database's entry count (its MDB_db record) */
} stk__lmdb_tree;

/* Find the tree of named database DBNAME (NULL: the main database) in the snapshot of
 * transaction TXNID (mdb_txn_id of a read transaction kept open: its pages are then not reused)
 * of the data file FD of FILE_SIZE bytes. Returns STK_OK with *T set, STK_E_RANGE when the
 * database does not exist, STK_E_CHANGED when the meta page of TXNID holds a newer transaction,
 * STK_E_UNSUPPORTED (see above), STK_E_FORMAT (corrupt), STK_E_TRUNCATED (short read) or -errno. */
int stk__lmdb_tree_open(int fd, uint64_t file_size, uint64_t txnid, const char *dbname, stk__lmdb_tree *t);

/* Look KEY (KLEN bytes) up in T. Returns 1 when found: the first min(length, CAP) bytes of the
 * value copied to VAL and its full length in *VLEN (NULL: not wanted); 0 when not found;
 * STK_E_FORMAT (a corrupt page on the way), STK_E_UNSUPPORTED (a duplicate-sorted node),
 * STK_E_TRUNCATED (a short read: the file shrank) or -errno. */
int stk__lmdb_tree_get(const stk__lmdb_tree *t, const void *key, size_t klen, void *val, size_t cap,
                       size_t *vlen);

/* stk__lmdb_tree_get on a sparse copy of a file filled page by page (an s3:// shard's open reads
 * only the pages it needs: remote.c): a page on the way whose header is all zeros has not been
 * fetched yet; then 2 is returned with its number in *NEED. For small values: a value in
 * overflow pages is read as stk__lmdb_tree_get does (STK_E_FORMAT where they are not there).
 * Other returns as stk__lmdb_tree_get's. */
int stk__lmdb_tree_get_sparse(const stk__lmdb_tree *t, const void *key, size_t klen, void *val, size_t cap,
                              size_t *vlen, uint64_t *need);

#endif
