/* SPDX-License-Identifier: MIT */
/*
 * pack.c — stk_pack: an ImageFolder root or a `path<TAB>label` list into a dataset of shards.
 *
 * Plan, then stream. The plan is the list of source files in dataset order (torchvision's order
 * for an ImageFolder) with their sizes and mtimes; its digest identifies the job. Reader threads
 * read whole files into the slots of a window (slot = file index mod W), check the JPEG header
 * (FF D8 FF) and compute the CRC32C; the calling thread takes the slots strictly in order and
 * appends the good ones to the writer, so the dataset index of every record is deterministic
 * whatever the thread count. Memory is bounded by the window (W files).
 *
 * Resumable. DST holds the marker `.stoker-pack-incomplete` (source path and plan digest) from
 * the start to the very end. Every finished shard records in its `meta` the plan digest, the
 * dataset index of its first record and the range [source_begin, source_end) of plan positions
 * it covers, with the files of that range that were skipped. Re-running the same command finds
 * the marker, keeps the leading shards whose meta continues the plan without a gap, drops the
 * rest (and any temp file), and packs from the first uncovered source file. The pack report is
 * rebuilt from the kept shards' skipped lists plus the new ones, so it is complete.
 *
 * SRC is only ever opened O_RDONLY.
 */
#include "common.h"
#include "folder.h"
#include "format.h"
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct slot {
    uint64_t idx;
    int state; /* FREE, READING, READY */
    uint8_t *buf;
    size_t cap, len;
    int status; /* STK_OK or why the file is skipped */
    uint32_t crc;
    char reason[160];
} slot;

enum { SLOT_FREE = 0, SLOT_READING = 1, SLOT_READY = 2 };

/* Files whose reading the prefetcher has asked the kernel for ahead of the readers. A cold
 * source is read in dataset order, which is not the order of the files on disk: with a couple of
 * reader threads that is a few random reads in flight. POSIX_FADV_WILLNEED on the next files
 * keeps many in flight (the kernel reads them asynchronously into the page cache). */
#define PREFETCH_AHEAD 128

typedef struct packer {
    const stk__filelist *files;
    uint64_t n, next;
    uint64_t done;     /* files the writer has taken (the prefetcher stays PREFETCH_AHEAD ahead) */
    slot *slots;
    size_t nslots;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cond_free, cond_ready;
} packer;

/* ---- plan ----------------------------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

typedef struct plan {
    stk__filelist files;
    uint64_t *sizes;
    uint64_t bytes_total;
    char digest[40];
    char src_real[PATH_MAX];
} plan;

static int make_plan(const char *src, plan *pl, char *err)
{
    struct stat st;
    if (stat(src, &st) != 0)
        return stk__err(err, -errno, "%s", src);
    if (!realpath(src, pl->src_real))
        return stk__err(err, -errno, "%s: realpath", src);
    int rc;
    if (S_ISDIR(st.st_mode)) {
        rc = stk__folder_scan(src, &pl->files, err);
    } else if (S_ISREG(st.st_mode)) {
        int fd = open(src, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return stk__err(err, -errno, "%s: cannot open", src);
        if (st.st_size > (1ll << 32)) {
            close(fd);
            return stk__err(err, STK_E_INVALID, "%s: list file too large", src);
        }
        size_t len = (size_t)st.st_size, got = 0;
        char *text = malloc(len + 1);
        if (!text) {
            close(fd);
            return stk__err(err, STK_E_NOMEM, "out of memory");
        }
        while (got < len) {
            ssize_t r = read(fd, text + got, len - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        close(fd);
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", src);
        char *sl = strrchr(dir, '/');
        if (sl)
            *sl = 0;
        else
            snprintf(dir, sizeof dir, ".");
        char lerr[STK__ERRLEN];
        rc = stk__list_parse(text, got, dir, &pl->files, lerr);
        free(text);
        if (rc)
            return stk__err(err, rc, "%s: %s", src, lerr);
    } else {
        return stk__err(err, STK_E_INVALID, "%s: not a directory (ImageFolder) or a list file", src);
    }
    if (rc)
        return rc;
    if (pl->files.n == 0)
        return stk__err(err, STK_E_EMPTYSET, "%s: no image files (extensions .jpg .jpeg .png .ppm .bmp "
                        ".pgm .tif .tiff .webp)", src);
    pl->sizes = calloc(pl->files.n, sizeof *pl->sizes);
    if (!pl->sizes)
        return stk__err(err, STK_E_NOMEM, "out of memory");
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    char tag[] = "stoker-pack-plan 1";
    h1 = fnv(h1, tag, sizeof tag);
    for (size_t c = 0; c < pl->files.nclasses; c++) {
        h1 = fnv(h1, pl->files.classes[c], strlen(pl->files.classes[c]) + 1);
        h2 = fnv(h2, pl->files.classes[c], strlen(pl->files.classes[c]) + 1);
    }
    for (size_t i = 0; i < pl->files.n; i++) {
        struct stat fs;
        int64_t rec[3] = {-1, -1, pl->files.labels[i]};
        if (stat(pl->files.paths[i], &fs) == 0) {
            rec[0] = fs.st_size;
            rec[1] = (int64_t)fs.st_mtim.tv_sec * 1000000000 + fs.st_mtim.tv_nsec;
            pl->sizes[i] = S_ISREG(fs.st_mode) ? (uint64_t)fs.st_size : 0;
            pl->bytes_total += pl->sizes[i];
        }
        h1 = fnv(h1, pl->files.rel[i], strlen(pl->files.rel[i]) + 1);
        h1 = fnv(h1, rec, sizeof rec);
        h2 = fnv(h2, rec, sizeof rec);
        h2 = fnv(h2, pl->files.rel[i], strlen(pl->files.rel[i]) + 1);
    }
    snprintf(pl->digest, sizeof pl->digest, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
    return STK_OK;
}

static void plan_free(plan *pl)
{
    stk__filelist_free(&pl->files);
    free(pl->sizes);
}

/* ---- resume --------------------------------------------------------------------------------- */

typedef struct resume_state {
    uint32_t shards;
    uint64_t records, src_end, skipped, payload;
    int last_done;
    char *report;
    size_t report_len;
} resume_state;

/* Does shard NO continue the plan at (records, src_end)? Appends its skipped list. */
static int check_shard(const char *dst, uint32_t no, const char *digest, resume_state *rs)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" STK__SHARD_FMT, dst, no);
    if (access(path, F_OK) != 0)
        return 0;
    /* a shard kept must open cleanly as a dataset first (LMDB pages checked, records walked):
     * reading its meta below through LMDB must not trust a damaged file */
    stk_dataset *chk;
    if (stk_dataset_create(&chk) != STK_OK)
        return 0;
    int usable = stk_dataset_open(chk, path) == STK_OK;
    stk_dataset_destroy(chk);
    if (!usable)
        return 0;
    MDB_env *env;
    if (mdb_env_create(&env) != 0)
        return 0;
    mdb_env_set_maxdbs(env, 4);
    int ok = 0;
    MDB_txn *t = NULL;
    if (mdb_env_open(env, path, MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK, 0644) != 0 ||
        mdb_txn_begin(env, NULL, MDB_RDONLY, &t) != 0)
        goto out;
    MDB_dbi meta, recs;
    if (mdb_dbi_open(t, STK__DB_META, 0, &meta) != 0 || mdb_dbi_open(t, STK__DB_RECORDS, 0, &recs) != 0)
        goto out;
    MDB_val v;
    uint64_t count, first, begin, end, last = 0;
    if (stk__meta_get(t, meta, STK__META_DIGEST, &v) != 0 || v.mv_size != strlen(digest) ||
        memcmp(v.mv_data, digest, v.mv_size) != 0)
        goto out;
    if (stk__meta_u64(t, meta, "count", &count) || stk__meta_u64(t, meta, STK__META_FIRST_INDEX, &first) ||
        stk__meta_u64(t, meta, STK__META_SRC_BEGIN, &begin) || stk__meta_u64(t, meta, STK__META_SRC_END, &end))
        goto out;
    stk__meta_u64(t, meta, STK__META_LAST, &last);
    uint64_t payload = 0;
    if (stk__meta_u64(t, meta, STK__META_PAYLOAD, &payload))
        goto out;
    MDB_stat ms;
    if (first != rs->records || begin != rs->src_end || end < begin || mdb_stat(t, recs, &ms) != 0 ||
        ms.ms_entries != count)
        goto out;
    if (stk__meta_get(t, meta, STK__META_SKIPPED, &v) != 0)
        goto out;
    char *nr = realloc(rs->report, rs->report_len + v.mv_size + 1);
    if (!nr)
        goto out;
    rs->report = nr;
    memcpy(rs->report + rs->report_len, v.mv_data, v.mv_size);
    rs->report_len += v.mv_size;
    rs->report[rs->report_len] = 0;
    for (size_t i = 0; i < v.mv_size; i++)
        rs->skipped += ((const char *)v.mv_data)[i] == '\n';
    rs->records += count;
    rs->payload += payload;
    rs->src_end = end;
    rs->last_done = last == 1;
    rs->shards++;
    ok = 1;
out:
    if (t)
        mdb_txn_abort(t);
    mdb_env_close(env);
    return ok;
}

/* Marker text of this plan. */
static void marker_text(const plan *pl, char *buf, size_t cap)
{
    snprintf(buf, cap, "stoker-pack 1\nsource\t%s\ndigest\t%s\nfiles\t%zu\n", pl->src_real, pl->digest,
             pl->files.n);
}

/* ---- readers -------------------------------------------------------------------------------- */

static void read_one(packer *pk, slot *s, uint64_t i)
{
    const char *path = pk->files->paths[i];
    s->status = STK_OK;
    s->reason[0] = 0;
    s->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        s->status = -errno;
        snprintf(s->reason, sizeof s->reason, "unreadable: %s", strerror(errno));
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        s->status = STK_E_IO;
        snprintf(s->reason, sizeof s->reason, "unreadable: not a regular file");
        close(fd);
        return;
    }
    if ((uint64_t)st.st_size > UINT32_MAX - 64) {
        s->status = STK_E_TOO_LARGE;
        snprintf(s->reason, sizeof s->reason, "too large: %lld bytes (limit 4 GiB)", (long long)st.st_size);
        close(fd);
        return;
    }
    size_t want = (size_t)st.st_size + 1; /* +1: notice a file that grew */
    if (s->cap < want) {
        size_t nc = STK__MAX(want, s->cap * 2);
        uint8_t *nb = realloc(s->buf, nc);
        if (!nb) {
            s->status = STK_E_NOMEM;
            snprintf(s->reason, sizeof s->reason, "out of memory reading %zu bytes", want);
            close(fd);
            return;
        }
        s->buf = nb;
        s->cap = nc;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, s->buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            s->status = -errno;
            snprintf(s->reason, sizeof s->reason, "unreadable: read failed: %s", strerror(errno));
            close(fd);
            return;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got == want) {
        s->status = STK_E_IO;
        snprintf(s->reason, sizeof s->reason, "unreadable: file grew while read");
        return;
    }
    s->len = got;
    if (got == 0) {
        s->status = STK_E_EMPTY;
        snprintf(s->reason, sizeof s->reason, "empty file");
        return;
    }
    if (!stk__is_jpeg(s->buf, got)) {
        s->status = STK_E_NOT_JPEG;
        static const uint8_t png[4] = {0x89, 'P', 'N', 'G'};
        if (got >= 4 && !memcmp(s->buf, png, 4))
            snprintf(s->reason, sizeof s->reason, "not a JPEG (PNG data)");
        else if (got >= 2 && s->buf[0] == 0xFF && s->buf[1] == 0xD8)
            snprintf(s->reason, sizeof s->reason, "not a JPEG (FF D8 not followed by a marker)");
        else
            snprintf(s->reason, sizeof s->reason, "not a JPEG (starts with %02X %02X %02X)", s->buf[0],
                     got > 1 ? s->buf[1] : 0, got > 2 ? s->buf[2] : 0);
        return;
    }
    s->crc = stk__crc32c(0, s->buf, got);
}

static void *reader_main(void *arg)
{
    packer *pk = arg;
    pthread_mutex_lock(&pk->mu);
    for (;;) {
        while (!pk->stop && pk->next < pk->n && pk->slots[pk->next % pk->nslots].state != SLOT_FREE)
            pthread_cond_wait(&pk->cond_free, &pk->mu);
        if (pk->stop || pk->next >= pk->n)
            break;
        uint64_t i = pk->next++;
        slot *s = &pk->slots[i % pk->nslots];
        s->state = SLOT_READING;
        s->idx = i;
        pthread_mutex_unlock(&pk->mu);
        read_one(pk, s, i);
        pthread_mutex_lock(&pk->mu);
        s->state = SLOT_READY;
        pthread_cond_broadcast(&pk->cond_ready);
    }
    pthread_mutex_unlock(&pk->mu);
    return NULL;
}

static void *prefetch_main(void *arg)
{
    packer *pk = arg;
    pthread_mutex_lock(&pk->mu);
    uint64_t i = pk->done;
    for (;;) {
        while (!pk->stop && i < pk->n && i >= pk->done + PREFETCH_AHEAD)
            pthread_cond_wait(&pk->cond_free, &pk->mu);
        if (pk->stop || i >= pk->n)
            break;
        if (i < pk->next) /* the readers are there already */
            i = pk->next;
        uint64_t j = i++;
        pthread_mutex_unlock(&pk->mu);
        if (j < pk->n) {
            int fd = open(pk->files->paths[j], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (fd >= 0) {
                (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
                close(fd);
            }
        }
        pthread_mutex_lock(&pk->mu);
    }
    pthread_mutex_unlock(&pk->mu);
    return NULL;
}

/* ---- report buffer -------------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static int sb_add(sbuf *b, const char *a, const char *c)
{
    size_t need = b->len + strlen(a) + strlen(c) + 3;
    if (need > b->cap) {
        size_t nc = STK__MAX(need, b->cap * 2 + 4096);
        char *np = realloc(b->p, nc);
        if (!np)
            return STK_E_NOMEM;
        b->p = np;
        b->cap = nc;
    }
    b->len += (size_t)snprintf(b->p + b->len, b->cap - b->len, "%s\t%s\n", a, c);
    return STK_OK;
}

/* ---- stk_pack ------------------------------------------------------------------------------- */

static int inside(const char *dir_real, const char *path)
{
    size_t n = strlen(dir_real);
    return !strncmp(path, dir_real, n) && (path[n] == '/' || path[n] == 0);
}

int stk_pack(const char *src, const char *dst, const stk_pack_options *opts, stk_pack_result *result)
{
    stk_pack_options o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    char err[STK__ERRLEN] = "";
    double t0 = stk__now();
    if (result)
        memset(result, 0, sizeof *result);
    if (!src || !dst || !*src || !*dst) {
        if (o.error && o.error_cap)
            snprintf(o.error, o.error_cap, "stk_pack: SRC and DST are required");
        return STK_E_INVALID;
    }
    uint64_t shard_bytes = o.shard_bytes ? o.shard_bytes : (uint64_t)1 << 30;
    int threads = o.threads > 0 ? o.threads : stk__online_cpus();
    if (threads > 256)
        threads = 256;

    plan pl;
    memset(&pl, 0, sizeof pl);
    stk_writer *w = NULL;
    packer pk;
    memset(&pk, 0, sizeof pk);
    pthread_t *tids = NULL, prefetch_tid;
    int nthreads = 0, have_prefetch = 0;
    resume_state rs;
    memset(&rs, 0, sizeof rs);
    sbuf rep = {0};
    int rc = make_plan(src, &pl, err);
    if (rc)
        goto out;

    /* DST must not be SRC or inside it (it would become a class of the next scan) */
    {
        char dreal[PATH_MAX];
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s", dst);
        int have = realpath(dst, dreal) != NULL;
        if (!have) {
            char *sl = strrchr(tmp, '/');
            if (sl && sl != tmp) {
                *sl = 0;
                if (realpath(tmp, dreal)) {
                    size_t l = strlen(dreal);
                    snprintf(dreal + l, sizeof dreal - l, "/%s", sl + 1);
                    have = 1;
                }
            }
        }
        struct stat sst;
        if (have && stat(src, &sst) == 0 && S_ISDIR(sst.st_mode) && inside(pl.src_real, dreal)) {
            rc = stk__err(err, STK_E_INVALID, "%s: DST lies inside SRC %s (it would be read as a class "
                          "folder); choose a DST outside it", dst, src);
            goto out;
        }
    }

    if ((rc = stk_writer_create(&w)) != STK_OK) {
        stk__err(err, rc, "out of memory");
        goto out;
    }
    if ((rc = stk_writer_set(w, STK_W_SHARD_BYTES, (int64_t)STK__MAX(shard_bytes, (uint64_t)1 << 20))) ||
        (rc = stk_writer_set(w, STK_W_FORCE, o.force ? 1 : 0))) {
        snprintf(err, sizeof err, "%s", stk_writer_last_error(w));
        goto out;
    }
    if (pl.files.nclasses &&
        (rc = stk_writer_set_classes(w, (const char *const *)pl.files.classes, pl.files.nclasses)) != STK_OK) {
        snprintf(err, sizeof err, "%s", stk_writer_last_error(w));
        goto out;
    }

    /* resume? */
    char marker[PATH_MAX + 200];
    marker_text(&pl, marker, sizeof marker);
    {
        char mpath[PATH_MAX];
        snprintf(mpath, sizeof mpath, "%s/%s", dst, STK__INCOMPLETE_MARK);
        size_t mlen = 0;
        int resume = 0;
        int fd = open(mpath, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char old[PATH_MAX + 200];
            ssize_t r = read(fd, old, sizeof old - 1);
            close(fd);
            mlen = r > 0 ? (size_t)r : 0;
            old[mlen] = 0;
            resume = !strcmp(old, marker) && !o.force;
        }
        if (resume) {
            while (check_shard(dst, rs.shards, pl.digest, &rs))
                ;
            rc = stk__writer_resume(w, dst, pl.digest, rs.shards, rs.records, rs.src_end, rs.last_done);
            rep.p = rs.report;
            rep.len = rep.cap = rs.report_len;
            rs.report = NULL;
        } else {
            rc = stk__writer_open_pack(w, dst, marker, pl.digest);
        }
        if (rc) {
            snprintf(err, sizeof err, "%s", stk_writer_last_error(w));
            goto out;
        }
    }

    /* stream */
    uint64_t start = rs.src_end, n = pl.files.n;
    pk.files = &pl.files;
    pk.n = n;
    pk.next = start;
    pk.done = start;
    pk.nslots = (size_t)STK__MAX(4 * threads, 16);
    pk.slots = calloc(pk.nslots, sizeof *pk.slots);
    tids = calloc((size_t)threads, sizeof *tids);
    if (!pk.slots || !tids) {
        rc = stk__err(err, STK_E_NOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_init(&pk.mu, NULL);
    pthread_cond_init(&pk.cond_free, NULL);
    pthread_cond_init(&pk.cond_ready, NULL);
    for (int t = 0; t < threads; t++) {
        if (pthread_create(&tids[t], NULL, reader_main, &pk) != 0)
            break;
        nthreads++;
    }
    if (nthreads == 0) {
        rc = stk__err(err, STK_E_NOMEM, "cannot start reader threads");
        goto out;
    }
    have_prefetch = pthread_create(&prefetch_tid, NULL, prefetch_main, &pk) == 0;
    stk_pack_progress pr;
    memset(&pr, 0, sizeof pr);
    pr.files_total = n;
    pr.bytes_total = pl.bytes_total;
    pr.files_done = start;
    pr.records_written = rs.records;
    pr.skipped = rs.skipped;
    for (uint64_t i = 0; i < start; i++)
        pr.bytes_done += pl.sizes[i];
    double last_cb = stk__now();
    for (uint64_t i = start; i < n; i++) {
        slot *s = &pk.slots[i % pk.nslots];
        pthread_mutex_lock(&pk.mu);
        while (!(s->state == SLOT_READY && s->idx == i))
            pthread_cond_wait(&pk.cond_ready, &pk.mu);
        pthread_mutex_unlock(&pk.mu);
        if (s->status == STK_OK) {
            rc = stk__writer_add_crc(w, s->buf, s->len, pl.files.labels[i], pl.files.rel[i], s->crc, i);
            if (rc) {
                snprintf(err, sizeof err, "%s", stk_writer_last_error(w));
                goto out;
            }
            pr.records_written++;
        } else {
            if (o.strict) {
                rc = s->status;
                snprintf(err, sizeof err, "%s: %s (--strict: stopping at the first bad source file)",
                         pl.files.paths[i], s->reason);
                goto out;
            }
            if ((rc = stk__writer_note_skip(w, i, pl.files.paths[i], s->reason)) != STK_OK ||
                (rc = sb_add(&rep, pl.files.paths[i], s->reason)) != STK_OK) {
                stk__err(err, STK_E_NOMEM, "out of memory");
                goto out;
            }
            pr.skipped++;
        }
        pr.files_done++;
        pr.bytes_done += pl.sizes[i];
        pthread_mutex_lock(&pk.mu);
        s->state = SLOT_FREE;
        pk.done = i + 1;
        pthread_cond_broadcast(&pk.cond_free);
        pthread_mutex_unlock(&pk.mu);
        if (o.progress) {
            double now = stk__now();
            if (now - last_cb >= 0.25) {
                last_cb = now;
                pr.elapsed_s = now - t0;
                o.progress(&pr, o.progress_user);
            }
        }
    }
    if ((rc = stk__writer_finish_pack(w, n, rep.p ? rep.p : "", rep.len)) != STK_OK) {
        snprintf(err, sizeof err, "%s", stk_writer_last_error(w));
        goto out;
    }
    pr.elapsed_s = stk__now() - t0;
    if (o.progress)
        o.progress(&pr, o.progress_user);
    if (result) {
        uint64_t recs, shards, payload;
        stk__writer_totals(w, &recs, &shards, &payload);
        result->records = recs;
        result->skipped = pr.skipped;
        result->shards = shards;
        result->classes = pl.files.nclasses;
        result->resumed_records = rs.records;
        result->payload_bytes = payload + rs.payload; /* kept shards too */
        result->elapsed_s = pr.elapsed_s;
    }
out:
    if (nthreads) {
        pthread_mutex_lock(&pk.mu);
        pk.stop = 1;
        pthread_cond_broadcast(&pk.cond_free);
        pthread_mutex_unlock(&pk.mu);
        for (int t = 0; t < nthreads; t++)
            pthread_join(tids[t], NULL);
        if (have_prefetch)
            pthread_join(prefetch_tid, NULL);
        pthread_mutex_destroy(&pk.mu);
        pthread_cond_destroy(&pk.cond_free);
        pthread_cond_destroy(&pk.cond_ready);
    }
    if (pk.slots) {
        for (size_t i = 0; i < pk.nslots; i++)
            free(pk.slots[i].buf);
        free(pk.slots);
    }
    free(tids);
    stk_writer_destroy(w);
    free(rep.p);
    free(rs.report);
    plan_free(&pl);
    if (rc && o.error && o.error_cap)
        snprintf(o.error, o.error_cap, "%s", err[0] ? err : stk_strerror(rc));
    return rc;
}
