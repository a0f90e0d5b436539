/* SPDX-License-Identifier: MIT */
/*
 * lmdb_check.c — see lmdb_check.h. The layout read here is LMDB 0.9's on 64-bit builds
 * (mdb.c: MDB_page, MDB_node, MDB_db, MDB_meta), which is also what dataset.c's probe relies on:
 *
 *   page header (16 bytes): u64 pgno, u16 pad, u16 flags, u16 lower, u16 upper (overflow pages:
 *     u32 page count instead of lower/upper); then u16 node offsets ("ptrs"), lower = 16 + 2 × keys
 *   node (8 bytes + key + data): u16 lo, u16 hi, u16 flags, u16 ksize. Leaf: data size = lo|hi<<16,
 *     flags F_BIGDATA (data = u64 overflow pgno), F_SUBDATA (data = MDB_db), F_DUPDATA.
 *     Branch: child pgno = lo | hi<<16 | flags<<32.
 *   MDB_db (48 bytes): u32 pad, u16 flags, u16 depth, u64 branch, leaf, overflow pages, entries,
 *     root (P_INVALID = ~0 when empty)
 *   meta (in pages 0 and 1, after the page header): u32 magic, u32 version, u64 address,
 *     u64 mapsize, MDB_db free, MDB_db main, u64 last_pg, u64 txnid. LMDB uses the meta with the
 *     larger txnid (meta 0 on a tie).
 *
 * Checks, per reachable page: number <= last_pg (dataset.c has checked that the file holds every
 * page up to last_pg), the page's own number matches, branch/leaf type as expected, lower/upper
 * consistent, at least one key, each node and its key (and inline data) inside the page, branch
 * children and overflow runs <= last_pg, no page reached twice (a cycle or a shared page: bounds
 * the work to the pages of the file), depth <= 32 (LMDB's cursor stack).
 *
 * stk__lmdb_tree_get descends one path of a tree with the same page and node checks (page_head,
 * page_node), binary search within a page, and reads a large value from its overflow pages.
 */
#include "lmdb_check.h"

#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGEHDRSZ 16u
#define NODESIZE 8u
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_LEAF2 0x20
#define F_BIGDATA 0x01
#define F_SUBDATA 0x02
#define F_DUPDATA 0x04
#define MDB_DUPSORT 0x04
#define DB_SIZE 48u
#define META_MAGIC 0xBEEFC0DEu
#define P_INVALID UINT64_MAX
#define MAX_DEPTH 32

typedef struct ck {
    int fd;
    const char *name;
    uint32_t psize;
    uint64_t last_pg;
    uint8_t *seen;   /* one bit per page */
    uint8_t *pages;  /* one page */
    uint64_t *roots; /* named databases found in the main database's leaves */
    size_t nroots, cap;
    char *err;
} ck;

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t *p) { return (uint32_t)u16(p) | (uint32_t)u16(p + 2) << 16; }
static uint64_t u64(const uint8_t *p) { return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32; }

static int read_at(ck *c, uint8_t *buf, size_t len, uint64_t off, uint64_t pgno)
{
    int rc = stk__pread_full(c->fd, buf, len, off);
    if (rc == STK_E_TRUNCATED)
        return stk__err(c->err, STK_E_FORMAT, "%s: corrupt LMDB file: page %llu lies past the end of "
                        "the file", c->name, (unsigned long long)pgno);
    if (rc != STK_OK)
        return stk__err(c->err, rc, "%s: reading LMDB page %llu", c->name, (unsigned long long)pgno);
    return STK_OK;
}

static int bad(ck *c, uint64_t pgno, const char *why)
{
    return stk__err(c->err, STK_E_FORMAT, "%s: corrupt LMDB file: page %llu: %s", c->name,
                    (unsigned long long)pgno, why);
}

static int dupsort(ck *c, uint64_t pgno)
{
    return stk__err(c->err, STK_E_UNSUPPORTED, "%s: LMDB page %llu: duplicate-sorted data (MDB_DUPSORT) "
                    "is not supported", c->name, (unsigned long long)pgno);
}

/* A database record (MDB_db) found at page FROM: its root joins the list to check. */
static int add_db(ck *c, const uint8_t *db, uint64_t from)
{
    if (u16(db + 4) & MDB_DUPSORT)
        return dupsort(c, from);
    uint64_t root = u64(db + 40);
    if (root == P_INVALID)
        return STK_OK;
    if (stk__grow((void **)&c->roots, &c->cap, c->nroots + 1, sizeof *c->roots))
        return stk__err(c->err, STK_E_NOMEM, "out of memory");
    c->roots[c->nroots++] = root;
    return STK_OK;
}

typedef struct pgvec {
    uint64_t *v;
    size_t n, cap;
} pgvec;

static int pg_push(ck *c, pgvec *q, uint64_t pgno)
{
    if (stk__grow((void **)&q->v, &q->cap, q->n + 1, sizeof *q->v))
        return stk__err(c->err, STK_E_NOMEM, "out of memory");
    q->v[q->n++] = pgno;
    return STK_OK;
}

/* The header of page P, read as page PGNO (PSIZE bytes): its own number, branch or leaf, the
 * free-space bounds, at least one key. Returns 0 with *NKEYS, *LEAF and *UPPER set, or -1 with
 * the reason in WHY (WCAP bytes). */
static int page_head(const uint8_t *p, uint32_t psize, uint64_t pgno, unsigned *nkeys, int *leaf,
                     unsigned *upper, char *why, size_t wcap)
{
    if (u64(p) != pgno) {
        snprintf(why, wcap, "its header says page %llu", (unsigned long long)u64(p));
        return -1;
    }
    uint16_t flags = u16(p + 10), lower = u16(p + 12), up = u16(p + 14);
    int branch = (flags & P_BRANCH) != 0, lf = (flags & P_LEAF) != 0;
    if (branch == lf || (flags & P_LEAF2)) {
        snprintf(why, wcap, "not a branch or leaf page (flags 0x%x)", flags);
        return -1;
    }
    if (lower < PAGEHDRSZ || (lower - PAGEHDRSZ) % 2 || lower > up || up > psize) {
        snprintf(why, wcap, "bad free-space bounds (lower %u, upper %u)", lower, up);
        return -1;
    }
    *nkeys = (lower - PAGEHDRSZ) / 2u;
    if (*nkeys == 0) {
        snprintf(why, wcap, "no keys");
        return -1;
    }
    *leaf = lf;
    *upper = up;
    return 0;
}

/* Node I of a page that passed page_head (UPPER its free-space end): the node header and its
 * key inside the page's node area. Returns the node's offset (its key ends at that + NODESIZE +
 * ksize), or 0 with the reason in WHY. */
static unsigned page_node(const uint8_t *p, uint32_t psize, unsigned upper, unsigned i, char *why,
                          size_t wcap)
{
    uint16_t off = u16(p + PAGEHDRSZ + 2 * i);
    if (off < upper || (uint32_t)off + NODESIZE > psize) {
        snprintf(why, wcap, "node %u at offset %u, outside the page's node area", i, off);
        return 0;
    }
    uint16_t ksize = u16(p + off + 6);
    if ((uint64_t)off + NODESIZE + ksize > psize) {
        snprintf(why, wcap, "node %u: key of %u bytes runs past the page", i, ksize);
        return 0;
    }
    return off; /* >= upper >= lower >= PAGEHDRSZ + 2: never 0 */
}

/* Check page PGNO (read into c->page); queue a branch page's children in NEXT. IS_MAIN: the main
 * database (its leaves may name databases, queued in c->roots and checked afterwards). */
static int check_page(ck *c, uint64_t pgno, int is_main, int want_leaf, pgvec *next)
{
    char why[160];
    uint8_t *p = c->pages;
    int rc = read_at(c, p, c->psize, pgno * c->psize, pgno);
    if (rc)
        return rc;
    unsigned nkeys, upper;
    int leaf;
    if (page_head(p, c->psize, pgno, &nkeys, &leaf, &upper, why, sizeof why) != 0)
        return bad(c, pgno, why);
    int branch = !leaf;
    if (want_leaf >= 0 && leaf != want_leaf)
        return bad(c, pgno, "branch and leaf pages mixed on one level of the B-tree");
    for (unsigned i = 0; i < nkeys; i++) {
        unsigned off = page_node(p, c->psize, upper, i, why, sizeof why);
        if (!off)
            return bad(c, pgno, why);
        const uint8_t *n = p + off;
        uint16_t nflags = u16(n + 4), ksize = u16(n + 6);
        uint64_t end = (uint64_t)off + NODESIZE + ksize;
        if (branch) {
            uint64_t child = (uint64_t)u16(n) | (uint64_t)u16(n + 2) << 16 | (uint64_t)nflags << 32;
            if ((rc = pg_push(c, next, child)) != STK_OK)
                return rc;
            continue;
        }
        uint64_t dsize = (uint64_t)u16(n) | (uint64_t)u16(n + 2) << 16;
        if (nflags & F_DUPDATA)
            return dupsort(c, pgno);
        if (nflags & F_BIGDATA) {
            if (end + 8 > c->psize) {
                snprintf(why, sizeof why, "node %u: overflow page number runs past the page", i);
                return bad(c, pgno, why);
            }
            uint64_t ov = u64(p + end);
            uint64_t npages = (PAGEHDRSZ + dsize + c->psize - 1) / c->psize;
            if (ov < 2 || ov > c->last_pg || npages > c->last_pg - ov + 1) {
                snprintf(why, sizeof why, "node %u: value of %llu bytes in overflow pages from %llu, "
                         "outside the file", i, (unsigned long long)dsize, (unsigned long long)ov);
                return bad(c, pgno, why);
            }
            continue;
        }
        if (end + dsize > c->psize) {
            snprintf(why, sizeof why, "node %u: value of %llu bytes runs past the page", i,
                     (unsigned long long)dsize);
            return bad(c, pgno, why);
        }
        if (nflags & F_SUBDATA) {
            if (!is_main || dsize != DB_SIZE) {
                snprintf(why, sizeof why, "node %u: a named database record %s", i,
                         is_main ? "of the wrong size" : "inside a named database");
                return bad(c, pgno, why);
            }
            if ((rc = add_db(c, p + end, pgno)) != STK_OK)
                return rc;
        }
    }
    return STK_OK;
}

/* The B-tree from ROOT, level by level. The pages of a level are announced to the kernel
 * (POSIX_FADV_WILLNEED) before they are read, so a cold file is read with many requests in
 * flight rather than one page at a time. */
static int check_tree(ck *c, uint64_t root, int is_main)
{
    pgvec cur = {0}, next = {0};
    int rc = pg_push(c, &cur, root);
    for (int depth = 0; rc == STK_OK && cur.n; depth++) {
        if (depth >= MAX_DEPTH) {
            rc = bad(c, cur.v[0], "B-tree deeper than 32 levels");
            break;
        }
        for (size_t i = 0; rc == STK_OK && i < cur.n; i++) {
            uint64_t pg = cur.v[i];
            char why[96];
            if (pg < 2 || pg > c->last_pg) {
                snprintf(why, sizeof why, "page number outside the file's %llu pages",
                         (unsigned long long)c->last_pg + 1);
                rc = bad(c, pg, why);
            } else if (c->seen[pg >> 3] & (1u << (pg & 7))) {
                rc = bad(c, pg, "reached twice (a cycle or a shared page)");
            } else {
                c->seen[pg >> 3] |= (uint8_t)(1u << (pg & 7));
                if (cur.n > 1)
                    (void)posix_fadvise(c->fd, (off_t)(pg * c->psize), (off_t)c->psize, POSIX_FADV_WILLNEED);
            }
        }
        next.n = 0;
        int want_leaf = -1;
        for (size_t i = 0; rc == STK_OK && i < cur.n; i++) {
            size_t before = next.n;
            rc = check_page(c, cur.v[i], is_main, want_leaf, &next);
            if (rc == STK_OK && want_leaf < 0)
                want_leaf = next.n == before;
        }
        pgvec t = cur;
        cur = next;
        next = t;
    }
    free(cur.v);
    free(next.v);
    return rc;
}

int stk__lmdb_check(int fd, const char *name, uint64_t file_size, char *err)
{
    ck c = {.fd = fd, .name = name, .err = err};
    uint8_t m[2][160];
    if (file_size < 160)
        return stk__err(err, STK_E_FORMAT, "%s: not an LMDB file (%llu bytes)", name,
                        (unsigned long long)file_size);
    int rc = read_at(&c, m[0], sizeof m[0], 0, 0);
    if (rc)
        return rc;
    uint32_t psize = u32(m[0] + 40); /* the free database's md_pad holds the page size */
    if (u32(m[0] + 16) != META_MAGIC || psize < 512 || psize > 65536 || (psize & (psize - 1)))
        return stk__err(err, STK_E_FORMAT, "%s: not an LMDB file (meta page 0)", name);
    if ((rc = read_at(&c, m[1], sizeof m[1], psize, 1)) != STK_OK)
        return rc;
    if (u32(m[1] + 16) != META_MAGIC)
        return stk__err(err, STK_E_FORMAT, "%s: not an LMDB file (meta page 1)", name);
    /* LMDB reads meta 1 at meta 0's page size but then uses the newer meta's: they must agree
     * (else it maps the second meta page past the end of the file: SIGBUS in mdb_env_open;
     * found by fuzz_shard, regress/shard/sigbus-meta-page-sizes-disagree.lmdb) */
    if (u32(m[1] + 40) != psize || (u16(m[0] + 10) & 0x08) == 0 || (u16(m[1] + 10) & 0x08) == 0)
        return stk__err(err, STK_E_FORMAT, "%s: corrupt LMDB file: the two meta pages disagree (page size "
                        "%u and %u, or not meta pages)", name, psize, u32(m[1] + 40));
    /* LMDB writes the meta of transaction T into page T & 1, and a read transaction uses
     * meta[txnid & 1] with the txnid it finds in the lock file (the larger one at first open):
     * with ids of the wrong parity it would use the other meta than the one checked here (SIGBUS
     * in mdb_cursor_get; found by fuzz_shard, regress/shard/sigbus-meta-txnid-parity.lmdb) */
    uint64_t t0 = u64(m[0] + 144), t1 = u64(m[1] + 144);
    if ((t0 & 1) != 0 || ((t1 & 1) != 1 && t1 != 0))
        return stk__err(err, STK_E_FORMAT, "%s: corrupt LMDB file: meta pages hold transaction ids %llu and "
                        "%llu (page 0 even, page 1 odd)", name, (unsigned long long)t0, (unsigned long long)t1);
    const uint8_t *meta = t0 < t1 ? m[1] : m[0]; /* as mdb_env_pick_meta */
    c.psize = psize;
    c.last_pg = u64(meta + 136);
    if (c.last_pg < 1 || c.last_pg >= file_size / psize)
        return stk__err(err, STK_E_FORMAT, "%s: corrupt LMDB file: last page %llu, but the file holds "
                        "%llu pages", name, (unsigned long long)c.last_pg,
                        (unsigned long long)(file_size / psize));
    c.seen = calloc((size_t)(c.last_pg / 8 + 1), 1);
    c.pages = malloc(psize);
    if (!c.seen || !c.pages) {
        free(c.seen);
        free(c.pages);
        return stk__err(err, STK_E_NOMEM, "out of memory");
    }
    rc = add_db(&c, meta + 88, meta == m[0] ? 0 : 1); /* the main database */
    for (size_t i = 0; rc == STK_OK && i < c.nroots; i++)
        rc = check_tree(&c, c.roots[i], i == 0);
    free(c.seen);
    free(c.pages);
    free(c.roots);
    return rc;
}

/* ---- lookups with pread (stk__lmdb_tree_*) --------------------------------------------------- */

#define P_OVERFLOW 0x04
#define P_META 0x08
#define MDB_REVERSEKEY 0x02
#define MDB_INTEGERKEY 0x08

/* LMDB's default key order (mdb_cmp_memn): bytes, then the shorter key first */
static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int d = memcmp(a, b, alen < blen ? alen : blen);
    if (d)
        return d;
    return alen < blen ? -1 : alen > blen;
}

/* Descend T to the leaf node whose key equals KEY, reading pages into PAGE (t->psize bytes).
 * Returns 1 with *NODE_OFF (the node's offset in PAGE), 0 when absent, or an error. NEED (NULL:
 * none): a page whose first 16 bytes are zero (not fetched yet into a sparse copy) returns 2
 * with its number in *NEED. */
static int tree_find(const stk__lmdb_tree *t, uint8_t *page, const uint8_t *key, size_t klen,
                     unsigned *node_off, uint64_t *need)
{
    char why[160];
    uint64_t pg = t->root;
    if (pg == P_INVALID)
        return 0;
    for (int depth = 0; depth < MAX_DEPTH; depth++) {
        if (pg < 2 || pg > t->last_pg)
            return STK_E_FORMAT;
        int rc = stk__pread_full(t->fd, page, t->psize, pg * t->psize);
        if (rc)
            return rc;
        if (need && u64(page) == 0 && u64(page + 8) == 0) {
            *need = pg;
            return 2;
        }
        unsigned nkeys, upper;
        int leaf;
        if (page_head(page, t->psize, pg, &nkeys, &leaf, &upper, why, sizeof why) != 0)
            return STK_E_FORMAT;
        /* leaf: the node whose key equals KEY; branch: the last node whose key is <= KEY, node 0
         * standing for every key below node 1's (LMDB ignores node 0's key: mdb_node_search) */
        unsigned lo = leaf ? 0 : 1, hi = nkeys, pick = 0;
        while (lo < hi) {
            unsigned mid = lo + (hi - lo) / 2;
            unsigned off = page_node(page, t->psize, upper, mid, why, sizeof why);
            if (!off)
                return STK_E_FORMAT;
            int d = key_cmp(page + off + NODESIZE, u16(page + off + 6), key, klen);
            if (d == 0) {
                if (leaf) {
                    *node_off = off;
                    return 1;
                }
                pick = mid;
                break;
            }
            if (d < 0) {
                pick = mid;
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (leaf)
            return 0;
        unsigned off = page_node(page, t->psize, upper, pick, why, sizeof why);
        if (!off)
            return STK_E_FORMAT;
        const uint8_t *n = page + off;
        pg = (uint64_t)u16(n) | (uint64_t)u16(n + 2) << 16 | (uint64_t)u16(n + 4) << 32;
    }
    return STK_E_FORMAT; /* deeper than LMDB's cursor stack: a cycle or a corrupt tree */
}

/* The value of the leaf node at OFF in PAGE (already read from T): up to CAP bytes into VAL,
 * its length in *VLEN, its node flags in *NFLAGS. */
static int node_value(const stk__lmdb_tree *t, const uint8_t *page, unsigned off, void *val, size_t cap,
                      size_t *vlen, uint16_t *nflags)
{
    const uint8_t *n = page + off;
    uint64_t dsize = (uint64_t)u16(n) | (uint64_t)u16(n + 2) << 16;
    uint64_t end = (uint64_t)off + NODESIZE + u16(n + 6);
    *nflags = u16(n + 4);
    if (*nflags & F_DUPDATA)
        return STK_E_UNSUPPORTED;
    size_t want = dsize < cap ? (size_t)dsize : cap;
    if (vlen)
        *vlen = (size_t)dsize;
    if (!(*nflags & F_BIGDATA)) {
        if (end + dsize > t->psize)
            return STK_E_FORMAT;
        if (want)
            memcpy(val, page + end, want);
        return 1;
    }
    if (end + 8 > t->psize)
        return STK_E_FORMAT;
    uint64_t ov = u64(page + end);
    uint64_t npages = (PAGEHDRSZ + dsize + t->psize - 1) / t->psize;
    if (ov < 2 || ov > t->last_pg || npages > t->last_pg - ov + 1)
        return STK_E_FORMAT;
    uint8_t hdr[PAGEHDRSZ];
    int rc = stk__pread_full(t->fd, hdr, sizeof hdr, ov * t->psize);
    if (rc)
        return rc;
    if (u64(hdr) != ov || !(u16(hdr + 10) & P_OVERFLOW) || u32(hdr + 12) < npages)
        return STK_E_FORMAT;
    if (want && (rc = stk__pread_full(t->fd, val, want, ov * t->psize + PAGEHDRSZ)) != STK_OK)
        return rc;
    return 1;
}

int stk__lmdb_tree_get(const stk__lmdb_tree *t, const void *key, size_t klen, void *val, size_t cap,
                       size_t *vlen)
{
    if (!t || (!key && klen) || (!val && cap) || t->psize < 512 || t->psize > 65536)
        return STK_E_INVALID;
    uint8_t *page = malloc(t->psize);
    if (!page)
        return STK_E_NOMEM;
    unsigned off = 0;
    int rc = tree_find(t, page, key, klen, &off, NULL);
    uint16_t nflags;
    if (rc == 1)
        rc = node_value(t, page, off, val, cap, vlen, &nflags);
    free(page);
    return rc;
}

int stk__lmdb_tree_get_sparse(const stk__lmdb_tree *t, const void *key, size_t klen, void *val, size_t cap,
                              size_t *vlen, uint64_t *need)
{
    if (!t || !need || (!key && klen) || (!val && cap) || t->psize < 512 || t->psize > 65536)
        return STK_E_INVALID;
    uint8_t *page = malloc(t->psize);
    if (!page)
        return STK_E_NOMEM;
    unsigned off = 0;
    uint16_t nflags;
    int rc = tree_find(t, page, key, klen, &off, need);
    if (rc == 1)
        rc = node_value(t, page, off, val, cap, vlen, &nflags);
    free(page);
    return rc;
}

int stk__lmdb_tree_open(int fd, uint64_t file_size, uint64_t txnid, const char *dbname, stk__lmdb_tree *t)
{
    uint8_t m[160];
    int rc = stk__pread_full(fd, m, sizeof m, 0);
    if (rc)
        return rc;
    uint32_t psize = u32(m + 40);
    if (u32(m + 16) != META_MAGIC || psize < 512 || psize > 65536 || (psize & (psize - 1)))
        return STK_E_FORMAT;
    /* the meta of transaction T is written to page T & 1 (see stk__lmdb_check) */
    if ((txnid & 1) && (rc = stk__pread_full(fd, m, sizeof m, psize)) != STK_OK)
        return rc;
    if (u32(m + 16) != META_MAGIC || !(u16(m + 10) & P_META) || u32(m + 40) != psize)
        return STK_E_FORMAT;
    if (u64(m + 144) != txnid)
        return STK_E_CHANGED;
    uint64_t last_pg = u64(m + 136);
    if (last_pg < 1 || last_pg >= file_size / psize)
        return STK_E_FORMAT;
    stk__lmdb_tree main_db = {.fd = fd, .psize = psize, .last_pg = last_pg, .root = u64(m + 88 + 40)};
    const uint8_t *db = m + 88;
    uint8_t rec[DB_SIZE];
    if (dbname) {
        uint8_t *page = malloc(psize);
        if (!page)
            return STK_E_NOMEM;
        unsigned off = 0;
        size_t len = 0;
        uint16_t nflags = 0;
        rc = tree_find(&main_db, page, (const uint8_t *)dbname, strlen(dbname), &off, NULL);
        if (rc == 1)
            rc = node_value(&main_db, page, off, rec, sizeof rec, &len, &nflags);
        free(page);
        if (rc == 0)
            return STK_E_RANGE;
        if (rc < 0)
            return rc;
        if (!(nflags & F_SUBDATA) || (nflags & F_BIGDATA) || len != DB_SIZE)
            return STK_E_RANGE; /* a plain key of that name, not a database */
        db = rec;
    }
    if (u16(db + 4) & (MDB_REVERSEKEY | MDB_DUPSORT | MDB_INTEGERKEY))
        return STK_E_UNSUPPORTED;
    *t = (stk__lmdb_tree){.fd = fd, .psize = psize, .last_pg = last_pg, .root = u64(db + 40),
                          .entries = u64(db + 32)};
    return STK_OK;
}
