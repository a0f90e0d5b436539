/* SPDX-License-Identifier: MIT */
/* test_sources_lookup.c — stk__lmdb_tree_get reads a shard's `sources` database with pread only:
 * the same values as mdb_get for every record (inline values up to the largest inline size,
 * overflow values of one and several pages, UTF-8, long paths, a B-tree three levels deep);
 * missing keys; a file cut after open (8 KiB, a third) gives short reads, never SIGBUS, and
 * stk_dataset_record_name then names the record without its source (also once the file is
 * grown back to its size with zeros: its size check passes, the pages read are zeros); corrupt pages (targeted and
 * seeded random byte flips in a copy of the file) give an error or "not found", never a crash,
 * a read outside a buffer (ASan) or a loop (a branch page pointing at itself). Names are looked up
 * from several threads at once (the loader's decode workers do; the lookup takes no lock).
 * stk-test: concurrency */
#include "testutil.h"

#include "dataset.h"
#include "format.h"
#include "lmdb_check.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 1300
#define MAXNAME 9100

static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint64_t g64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static void p16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void p64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* record I's source name: short ASCII, UTF-8, long paths up to LMDB's largest inline value
 * (2022 bytes at 4 KiB pages), the smallest overflow value (2023) and a 3-page one (9000) */
static size_t make_name(uint64_t i, char *out)
{
    static const size_t lens[] = {0, 1300, 2022, 9000, 1700, 2023, 1900};
    size_t want = lens[i % 7];
    int n = i % 14 == 0 ? snprintf(out, MAXNAME, "classé/ünïcödé_日本語_🐟_%04llu.jpg", (unsigned long long)i)
                        : snprintf(out, MAXNAME, "class_%llu/img_%04llu.jpg", (unsigned long long)(i % 5),
                                   (unsigned long long)i);
    size_t len = (size_t)n;
    while (len < want) { /* deeper directories: "dir_0007/..." prefixes, then cut to length */
        char pre[48];
        int m = snprintf(pre, sizeof pre, "dir_%04zu_%04llu/", len, (unsigned long long)i);
        memmove(out + m, out, len + 1);
        memcpy(out, pre, (size_t)m);
        len += (size_t)m;
    }
    if (want && len > want) {
        memmove(out, out + (len - want), want + 1); /* keep the file name, cut leading dirs */
        len = want;
    }
    return len;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    return pread(fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
}

/* the leaf node of `sources` holding record K's name (scanning every page of the file with its
 * own parser, independent of the code under test): its page and the node's offset in it */
static int find_node(int fd, uint32_t psize, uint64_t last_pg, uint64_t k, const char *name, size_t nlen,
                     uint64_t *pg_out, unsigned *off_out)
{
    uint8_t *p = malloc(psize), kb[8];
    stk__rec_key(kb, k);
    for (uint64_t pg = 2; pg <= last_pg; pg++) {
        if (pread_all(fd, p, psize, pg * psize) != 0 || !(g16(p + 10) & 0x02))
            continue;
        unsigned nkeys = (g16(p + 12) - 16u) / 2u;
        for (unsigned i = 0; i < nkeys; i++) {
            unsigned off = g16(p + 16 + 2 * i);
            const uint8_t *n = p + off;
            size_t dsize = (size_t)g16(n) | (size_t)g16(n + 2) << 16;
            if (g16(n + 6) != 8 || memcmp(n + 8, kb, 8) != 0 || dsize != nlen)
                continue;
            if (!(g16(n + 4) & 0x01) && memcmp(n + 16, name, nlen) != 0)
                continue;
            *pg_out = pg;
            *off_out = off;
            free(p);
            return 0;
        }
    }
    free(p);
    return -1;
}

typedef struct flipcase {
    uint64_t at;
    uint8_t b[8];
    size_t len;
    const char *what;
} flipcase;

static flipcase mkcase(uint64_t at, const uint8_t *b, size_t len, const char *what)
{
    flipcase c = {.at = at, .len = len, .what = what};
    memcpy(c.b, b, len);
    return c;
}

static char names[N][MAXNAME];
static size_t lens[N];

typedef struct namer {
    stk_dataset *ds;
    int bad;
} namer;

static void *name_all(void *arg)
{
    namer *nm = arg;
    for (uint64_t i = 0; i < N; i++) {
        char want[1200], pub[1200];
        snprintf(want, sizeof want, "shard-00000.lmdb key %llu (%.*s)", (unsigned long long)i,
                 (int)(lens[i] < 1023 ? lens[i] : 1023), names[i]);
        nm->bad += stk_dataset_record_name(nm->ds, i, pub, sizeof pub) != STK_OK || strcmp(pub, want) != 0;
    }
    return NULL;
}

static void patch(int fd, uint64_t off, const void *b, size_t len)
{
    T_CHECK(pwrite(fd, b, len, (off_t)off) == (ssize_t)len, "pwrite: %s", strerror(errno));
}

int main(void)
{
    alarm(240); /* a lookup that loops ends the test here */
    char *dir = t_tmpdir("srclookup");
    char dst[4200], shard[4300], copy[4300];
    snprintf(dst, sizeof dst, "%s/ds", dir);
    snprintf(shard, sizeof shard, "%s/shard-00000.lmdb", dst);
    snprintf(copy, sizeof copy, "%s/copy.lmdb", dir);

    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_open(w, dst));
    for (uint64_t i = 0; i < N; i++) {
        uint8_t pl[16];
        memset(pl, (int)i, sizeof pl);
        lens[i] = make_name(i, names[i]);
        T_CHECK(strlen(names[i]) == lens[i], "name %llu", (unsigned long long)i);
        T_OK(stk_writer_add(w, pl, sizeof pl, (int32_t)(i % 5), names[i]));
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);

    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, dst));
    T_CHECK(ds->nshards == 1 && ds->count == N, "one shard of %d records (%u shards)", N, ds->nshards);
    stk__shard *sh = &ds->shards[0];
    T_CHECK(sh->have_sources, "the open found the sources tree");
    stk__lmdb_tree t = sh->sources;

    /* the tree is as LMDB sees it: three levels, and every value equals mdb_get's */
    MDB_dbi src;
    T_OK(mdb_dbi_open(sh->txn, STK__DB_SOURCES, 0, &src));
    MDB_stat ms;
    T_OK(mdb_stat(sh->txn, src, &ms));
    T_CHECK(ms.ms_depth >= 3 && ms.ms_overflow_pages > 0, "sources: depth %u (want >= 3), %zu overflow pages",
            ms.ms_depth, (size_t)ms.ms_overflow_pages);
    T_CHECK(t.psize == ms.ms_psize, "page size %u vs %u", t.psize, ms.ms_psize);
    static char got[MAXNAME + 16];
    for (uint64_t i = 0; i < N; i++) {
        uint8_t kb[8];
        stk__rec_key(kb, i);
        MDB_val k = {8, kb}, v;
        T_OK(mdb_get(sh->txn, src, &k, &v));
        size_t vlen = 0;
        int rc = stk__lmdb_tree_get(&t, kb, 8, got, sizeof got, &vlen);
        T_CHECK(rc == 1 && vlen == v.mv_size && memcmp(got, v.mv_data, vlen) == 0 && vlen == lens[i] &&
                memcmp(got, names[i], vlen) == 0, "record %llu: rc %d, %zu bytes vs mdb_get's %zu",
                (unsigned long long)i, rc, vlen, v.mv_size);
        /* a short buffer gets the start and the full length */
        memset(got, 0, 32);
        T_CHECK(stk__lmdb_tree_get(&t, kb, 8, got, 5, &vlen) == 1 && vlen == lens[i] &&
                memcmp(got, names[i], 5) == 0 && got[5] == 0, "record %llu, 5-byte buffer", (unsigned long long)i);
        /* the public name: "shard key N (source)", the source cut to 1023 bytes */
        char want[1200], pub[1200];
        snprintf(want, sizeof want, "shard-00000.lmdb key %llu (%.*s)", (unsigned long long)i,
                 (int)(lens[i] < 1023 ? lens[i] : 1023), names[i]);
        T_OK(stk_dataset_record_name(ds, i, pub, sizeof pub));
        T_CHECK(strcmp(pub, want) == 0, "record %llu named `%.80s`", (unsigned long long)i, pub);
    }

    /* the same names from three threads at once */
    {
        namer nm[3];
        pthread_t th[3];
        for (int j = 0; j < 3; j++) {
            nm[j] = (namer){ds, 0};
            T_CHECK(pthread_create(&th[j], NULL, name_all, &nm[j]) == 0, "pthread_create");
        }
        for (int j = 0; j < 3; j++) {
            pthread_join(th[j], NULL);
            T_CHECK(nm[j].bad == 0, "thread %d: %d names wrong", j, nm[j].bad);
        }
    }

    /* missing keys: past the end, before the start, other lengths */
    {
        uint8_t kb[9] = {0};
        size_t vlen = 12345;
        stk__rec_key(kb, N);
        T_CHECK(stk__lmdb_tree_get(&t, kb, 8, got, sizeof got, &vlen) == 0, "key N absent");
        stk__rec_key(kb, (uint64_t)1 << 40);
        T_CHECK(stk__lmdb_tree_get(&t, kb, 8, got, sizeof got, &vlen) == 0, "key 2^40 absent");
        memset(kb, 0xff, sizeof kb);
        T_CHECK(stk__lmdb_tree_get(&t, kb, 8, got, sizeof got, &vlen) == 0, "key ff..ff absent");
        stk__rec_key(kb, 5);
        T_CHECK(stk__lmdb_tree_get(&t, kb, 7, got, sizeof got, &vlen) == 0, "7-byte prefix absent");
        kb[8] = 0;
        T_CHECK(stk__lmdb_tree_get(&t, kb, 9, got, sizeof got, &vlen) == 0, "9-byte extension absent");
        T_CHECK(stk__lmdb_tree_get(&t, kb, 0, got, sizeof got, &vlen) == 0, "empty key absent");
        stk__lmdb_tree other;
        T_CHECK(stk__lmdb_tree_open(sh->fd, sh->file_size, (uint64_t)mdb_txn_id(sh->txn), "sourcez", &other) ==
                STK_E_RANGE, "no database `sourcez`");
        T_CHECK(stk__lmdb_tree_open(sh->fd, sh->file_size, (uint64_t)mdb_txn_id(sh->txn) + 2, "sources", &other) ==
                STK_E_CHANGED, "another transaction's snapshot is refused");
        T_OK(stk__lmdb_tree_open(sh->fd, sh->file_size, (uint64_t)mdb_txn_id(sh->txn), STK__DB_RECORDS, &other));
        stk__rec_key(kb, 3);
        T_CHECK(stk__lmdb_tree_get(&other, kb, 8, got, sizeof got, &vlen) == 1 && vlen == STK__REC_HDR + 16 &&
                memcmp(got, "STK2", 4) == 0 && got[STK__REC_HDR] == 3, "records key 3 read with pread");
        T_OK(stk__lmdb_tree_open(sh->fd, sh->file_size, (uint64_t)mdb_txn_id(sh->txn), NULL, &other));
        T_CHECK(stk__lmdb_tree_get(&other, "meta", 4, got, sizeof got, &vlen) == 1 && vlen == 48,
                "main database: `meta` is a 48-byte database record");
    }

    /* a damaged copy of the file: targeted corruptions that must be reported, not followed */
    size_t flen;
    uint8_t *orig = t_read_file(shard, &flen);
    T_CHECK(orig && flen == sh->file_size, "read the shard back");
    t_write_file(copy, orig, flen);
    int cfd = open(copy, O_RDWR);
    T_CHECK(cfd >= 0, "open copy");
    stk__lmdb_tree ct = t;
    ct.fd = cfd;
    uint32_t ps = t.psize;
    {
        uint8_t kb[8];
        size_t vlen;
        /* the root (a branch page) pointing at itself: a loop, ended by the depth bound */
        uint8_t root[65536];
        T_CHECK(pread_all(cfd, root, ps, t.root * ps) == 0 && (g16(root + 10) & 0x01), "root is a branch page");
        unsigned n0 = g16(root + 16);
        uint8_t sav[6];
        memcpy(sav, root + n0, 6);
        uint8_t self[6];
        p16(self, (uint16_t)t.root);
        p16(self + 2, (uint16_t)(t.root >> 16));
        p16(self + 4, (uint16_t)(t.root >> 32));
        patch(cfd, t.root * ps + n0, self, 6);
        stk__rec_key(kb, 0);
        T_CHECK(stk__lmdb_tree_get(&ct, kb, 8, got, sizeof got, &vlen) == STK_E_FORMAT, "self-loop: STK_E_FORMAT");
        patch(cfd, t.root * ps + n0, sav, 6);
        T_CHECK(stk__lmdb_tree_get(&ct, kb, 8, got, sizeof got, &vlen) == 1, "restored");

        /* per kind of value (short, inline at the limit, overflow of 1 and 3 pages): break the
         * leaf's header, its node pointer, the node's key and value sizes, the overflow page */
        const uint64_t keys[] = {14, 2, 5, 3};
        for (size_t j = 0; j < STK__ARRAY_LEN(keys); j++) {
            uint64_t k = keys[j], pg;
            unsigned off;
            T_CHECK(find_node(cfd, ps, t.last_pg, k, names[k], lens[k], &pg, &off) == 0, "found key %llu",
                    (unsigned long long)k);
            stk__rec_key(kb, k);
            uint8_t *page = malloc(ps);
            T_CHECK(pread_all(cfd, page, ps, pg * ps) == 0, "read leaf");
            unsigned idx = 0;
            while (g16(page + 16 + 2 * idx) != off)
                idx++;
            int big = (g16(page + off + 4) & 0x01) != 0;
            flipcase cases[8];
            size_t nc = 0;
            uint8_t b[8];
            p64(b, pg + 1);
            cases[nc++] = mkcase(pg * ps, b, 8, "page number in header");
            p16(b, 0xffff);
            cases[nc++] = mkcase(pg * ps + 14, b, 2, "upper = 0xffff");
            cases[nc++] = mkcase(pg * ps + 12, b, 2, "lower = 0xffff");
            cases[nc++] = mkcase(pg * ps + off + 6, b, 2, "key size 0xffff");
            if (!big)
                cases[nc++] = mkcase(pg * ps + off, b, 2, "inline value size 0xffff");
            p16(b, 0x04);
            cases[nc++] = mkcase(pg * ps + 10, b, 2, "flags: overflow page");
            p16(b, (uint16_t)(ps - 4));
            cases[nc++] = mkcase(pg * ps + 16 + 2 * idx, b, 2, "node pointer at page end");
            if (big) {
                uint64_t ov = g64(page + off + 16);
                p64(b, t.last_pg + 1);
                cases[nc++] = mkcase(pg * ps + off + 16, b, 8, "overflow page number past the last page");
                if (lens[k] > ps - 16) { /* a run of several pages: its count says one */
                    p64(b, 1);
                    cases[nc++] = mkcase(ov * ps + 12, b, 4, "overflow page count 1");
                } else { /* one page: its own number is wrong */
                    p64(b, ov + 1);
                    cases[nc++] = mkcase(ov * ps, b, 8, "overflow page's own number");
                }
            }
            for (size_t c = 0; c < nc; c++) {
                uint8_t keep[8];
                T_CHECK(pread_all(cfd, keep, cases[c].len, cases[c].at) == 0, "save");
                patch(cfd, cases[c].at, cases[c].b, cases[c].len);
                int rc = stk__lmdb_tree_get(&ct, kb, 8, got, sizeof got, &vlen);
                T_CHECK(rc == STK_E_FORMAT, "key %llu, %s: rc %d (want STK_E_FORMAT)", (unsigned long long)k,
                        cases[c].what, rc);
                patch(cfd, cases[c].at, keep, cases[c].len);
                rc = stk__lmdb_tree_get(&ct, kb, 8, got, sizeof got, &vlen);
                T_CHECK(rc == 1 && vlen == lens[k] && memcmp(got, names[k], vlen) == 0, "key %llu restored", (unsigned long long)k);
            }
            free(page);
        }
    }

    /* seeded random byte flips in branch and leaf pages (of `sources`, `records` or the main
     * database), each followed by lookups in `sources` and `records` of the keys that page held
     * and of keys spread over the range: any answer but a crash, an ASan report or a hang */
    {
        stk__lmdb_tree crec;
        T_OK(stk__lmdb_tree_open(cfd, flen, (uint64_t)mdb_txn_id(sh->txn), STK__DB_RECORDS, &crec));
        uint64_t seed = 0x5eedULL;
        const char *san = getenv("STOKER_SANITIZE");
        int trials = san && *san ? 300 : 1000;
        long found = 0, errors = 0, absent = 0;
        for (int tr = 0; tr < trials; tr++) {
            uint64_t pg;
            const uint8_t *op;
            do { /* a branch or leaf page of the original file */
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                pg = 2 + (seed >> 33) % (t.last_pg - 1);
                op = orig + pg * ps;
            } while (!(g16(op + 10) & 0x03));
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            unsigned lower = g16(op + 12);
            /* half the flips in the header and node pointers, half anywhere in the page */
            unsigned at = (unsigned)((seed >> 33) % (tr % 2 ? lower : ps));
            uint8_t flip = (uint8_t)(1u << ((seed >> 20) & 7)), nb = op[at] ^ flip;
            patch(cfd, pg * ps + at, &nb, 1);
            uint64_t keys[48];
            size_t nk = 0;
            for (unsigned i = 0; 16 + 2 * i < lower && nk < 32; i++) {
                unsigned off = g16(op + 16 + 2 * i);
                if (off + 16 <= ps && g16(op + off + 6) == 8)
                    memcpy(&keys[nk++], op + off + 8, 8); /* the key's bytes, as stored */
            }
            for (uint64_t i = (uint64_t)tr % 97; i < N && nk < 48; i += 97)
                stk__rec_key((uint8_t *)&keys[nk++], i);
            for (size_t j = 0; j < nk; j++) {
                for (int which = 0; which < 2; which++) {
                    size_t vlen = 0;
                    char small[40];
                    int rc = stk__lmdb_tree_get(which ? &crec : &ct, &keys[j], 8, small, sizeof small, &vlen);
                    T_CHECK(rc == 1 || rc == 0 || rc == STK_E_FORMAT || rc == STK_E_UNSUPPORTED ||
                            rc == STK_E_TRUNCATED, "trial %d: rc %d", tr, rc);
                    found += rc == 1;
                    absent += rc == 0;
                    errors += rc < 0;
                }
            }
            patch(cfd, pg * ps + at, op + at, 1);
        }
        printf("random flips: %d trials, lookups found %ld, absent %ld, errors %ld\n", trials, found, absent,
               errors);
        T_CHECK(errors > 0 && absent > 0, "some flips must be caught as errors, some keys missed");
    }
    close(cfd);

    /* the shard cut underneath the open dataset: to a third, then to 8 KiB (the meta pages) */
    const uint64_t cuts[] = {flen / 3, 8192};
    for (size_t c = 0; c < STK__ARRAY_LEN(cuts); c++) {
        int fd = open(shard, O_RDWR);
        T_CHECK(fd >= 0 && ftruncate(fd, (off_t)cuts[c]) == 0, "cut to %llu", (unsigned long long)cuts[c]);
        long shortr = 0, same = 0;
        for (uint64_t i = 0; i < N; i++) {
            char pub[1200], want[64];
            snprintf(want, sizeof want, "shard-00000.lmdb key %llu", (unsigned long long)i);
            T_OK(stk_dataset_record_name(ds, i, pub, sizeof pub));
            T_CHECK(strcmp(pub, want) == 0, "cut to %llu: record %llu named `%.80s`", (unsigned long long)cuts[c],
                    (unsigned long long)i, pub);
            /* the pread path itself, without record_name's size check: what a shrink between that
             * check and the lookup meets. The pages still in the file may give the right name. */
            uint8_t kb[8];
            size_t vlen = 0;
            stk__rec_key(kb, i);
            int rc = stk__lmdb_tree_get(&t, kb, 8, got, sizeof got, &vlen);
            if (rc == 1)
                T_CHECK(vlen == lens[i] && memcmp(got, names[i], vlen) == 0, "cut: record %llu's name", (unsigned long long)i);
            else
                T_CHECK(rc == STK_E_TRUNCATED || rc == STK_E_FORMAT, "cut: record %llu: rc %d", (unsigned long long)i, rc);
            shortr += rc == STK_E_TRUNCATED;
            same += rc == 1;
        }
        printf("cut to %llu bytes: %ld short reads, %ld names still read\n", (unsigned long long)cuts[c], shortr, same);
        T_CHECK(shortr > 0, "a cut to %llu must hit pages past the end", (unsigned long long)cuts[c]);
        if (cuts[c] == 8192)
            T_CHECK(shortr == N, "cut to the meta pages: every lookup is a short read");
        if (cuts[c] == 8192) {
            /* grown back to its size with zeros: record_name's size check passes, the pages read
             * are zeros (not the pages of the snapshot): still no source, no crash */
            T_CHECK(ftruncate(fd, (off_t)flen) == 0, "grow back");
            for (uint64_t i = 0; i < N; i++) {
                char pub[1200], want[64];
                snprintf(want, sizeof want, "shard-00000.lmdb key %llu", (unsigned long long)i);
                T_OK(stk_dataset_record_name(ds, i, pub, sizeof pub));
                T_CHECK(strcmp(pub, want) == 0, "zeroed: record %llu named `%.80s`", (unsigned long long)i, pub);
            }
        }
        /* back to whole, for the next cut */
        T_CHECK(pwrite(fd, orig, flen, 0) == (ssize_t)flen, "restore");
        close(fd);
    }
    free(orig);
    stk_dataset_destroy(ds);
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
