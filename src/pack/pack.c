/* SPDX-License-Identifier: MIT */
/*
 * pack.c — stk_pack: an ImageFolder root or a `path<TAB>label` list into a dataset of shards.
 *
 * Plan, then stream. The plan (pack_plan.c) lists the source files in dataset order; a fresh
 * pack or the continuation of an interrupted one begins (pack_resume.c); reader threads read the
 * files into a window of slots and turn each into its payload (pack_read.c, transcode.c: a JPEG
 * as it is, other formats stored as JPEG, --max-side resizes) that this thread takes strictly in
 * order and
 * appends to the writer (writer.c), so the dataset index of every record is deterministic
 * whatever the thread count; the report lists the skipped files, the files an ImageFolder leaves
 * out for their name and the damaged JPEGs kept. The writer locks DST first: one pack per DST.
 * A DST of s3://bucket/prefix goes to pack_s3.c, which runs this local pack in a staging folder
 * with writer hooks that upload each shard as it is finished.
 */
#include "common.h"
#include "image_in.h"
#include "pack_plan.h"
#include "pack_s3.h"
#include "s3.h"
#include "pack_read.h"
#include "pack_resume.h"
#include "params.h"
#include "writer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* One stk_pack call. */
typedef struct pack_job {
    stk_pack_options o;
    stk_pack_ext_options x; /* zeroed past the caller's size */
    uint64_t converted, resized, kept_damaged, over_limit;
    const char *src, *dst;
    char err[STK__ERRLEN];
    double t0;
    stk__pack_plan pl;
    stk_writer *w;
    stk__packer pk;
    stk__pack_resume rs;
    sbuf rep;               /* the pack report: `path<TAB>reason` per skipped file, ignored file
                               and damaged JPEG kept */
    stk_pack_progress pr;
} pack_job;

static int writer_err(pack_job *j, int rc)
{
    snprintf(j->err, sizeof j->err, "%s", stk_writer_last_error(j->w));
    return rc;
}

static int inside(const char *dir_real, const char *path)
{
    size_t n = strlen(dir_real);
    return !strncmp(path, dir_real, n) && (path[n] == '/' || path[n] == 0);
}

/* DST must not be SRC or inside it (it would become a class of the next scan). */
static int check_dst(pack_job *j)
{
    char dreal[PATH_MAX];
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", j->dst);
    int have = realpath(j->dst, dreal) != NULL;
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
    if (have && stat(j->src, &sst) == 0 && S_ISDIR(sst.st_mode) && inside(j->pl.src_real, dreal))
        return stk__err(j->err, STK_E_INVALID, "%s: DST lies inside SRC %s (it would be read as a class "
                        "folder); choose a DST outside it", j->dst, j->src);
    return STK_OK;
}

/* The writer, with the shard size, --force and the class names, holding DST's lock (taken
 * before anything in DST is read: a resume reads the shards another pack may be writing). */
static int writer_setup(pack_job *j, const stk__writer_hooks *hooks)
{
    uint64_t shard_bytes = j->o.shard_bytes ? j->o.shard_bytes : (uint64_t)stk__param_idef(STK_W_SHARD_BYTES);
    uint64_t shard_min = (uint64_t)stk__param_imin(STK_W_SHARD_BYTES);
    int rc;
    if ((rc = stk_writer_create(&j->w)) != STK_OK)
        return stk__err(j->err, rc, "out of memory");
    stk__writer_set_hooks(j->w, hooks);
    if ((rc = stk_writer_set(j->w, STK_W_SHARD_BYTES, (int64_t)STK__MAX(shard_bytes, shard_min))) ||
        (rc = stk_writer_set(j->w, STK_W_FORCE, j->o.force ? 1 : 0)) || (rc = stk__writer_lock(j->w, j->dst)))
        return writer_err(j, rc);
    const stk__filelist *f = &j->pl.files;
    if (f->nclasses && (rc = stk_writer_set_classes(j->w, (const char *const *)f->classes, f->nclasses)) != STK_OK)
        return writer_err(j, rc);
    if (f->tinfo.dtype != STK_TDT_NONE && (rc = stk_writer_set_targets(j->w, &f->tinfo)) != STK_OK)
        return writer_err(j, rc);
    return STK_OK;
}

/* Open DST, resuming an interrupted pack of the same plan; its report so far goes to j->rep,
 * then the manifest lines set aside and the files an ImageFolder leaves out for their name (read
 * anew by every run). */
static int begin(pack_job *j)
{
    int rc = stk__pack_begin(j->w, j->dst, &j->pl, j->o.force, &j->rs);
    j->rep.p = j->rs.report;
    j->rep.len = j->rep.cap = j->rs.report_len;
    j->rs.report = NULL;
    if (rc)
        return writer_err(j, rc);
    const stk__filelist *f = &j->pl.files;
    for (size_t i = 0; i < f->nbad; i++)
        if (sb_add(&j->rep, f->bad_where[i], f->bad_why[i]) != STK_OK)
            return stk__err(j->err, STK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < f->nunreadable; i++) {
        if (j->o.strict)
            return stk__err(j->err, STK_E_IO, "%s: %s (--strict: stopping at the first bad source)", f->unreadable[i],
                            f->unreadable_why[i]);
        if (sb_add(&j->rep, f->unreadable[i], f->unreadable_why[i]) != STK_OK)
            return stk__err(j->err, STK_E_NOMEM, "out of memory");
    }
    char why[256];
    for (size_t i = 0; i < f->nignored; i++) {
        stk__folder_ignored_why(f->ignored[i], why, sizeof why);
        if (sb_add(&j->rep, f->ignored[i], why) != STK_OK)
            return stk__err(j->err, STK_E_NOMEM, "out of memory");
    }
    return STK_OK;
}

/* List file I in the report and in its shard's meta (a resumed pack rebuilds the report). */
static int note(pack_job *j, uint64_t i, const char *reason)
{
    const stk__filelist *f = &j->pl.files;
    if (stk__writer_note_skip(j->w, i, f->paths[i], reason) != STK_OK || sb_add(&j->rep, f->paths[i], reason) != STK_OK)
        return stk__err(j->err, STK_E_NOMEM, "out of memory");
    return STK_OK;
}

/* File I, read into S: a record, or a skipped file (fatal under --strict). A damaged JPEG kept
 * (keep_damaged) is a record listed in the report as STK__KEPT_DAMAGED. */
static int put_file(pack_job *j, const stk__pack_slot *s, uint64_t i)
{
    const stk__filelist *f = &j->pl.files;
    size_t trow = f->tinfo.size * stk_target_dtype_size(f->tinfo.dtype);
    const void *target = f->targets ? f->targets + trow * i : NULL;
    char reason[STK__ERRLEN];
    int rc;
    if (s->status == STK_OK) {
        if ((rc = stk__writer_add_crc(j->w, s->buf, s->len, f->labels[i], f->rel[i], target, s->crc, i)) != STK_OK)
            return writer_err(j, rc);
        j->pr.records_written++;
        j->converted += (uint64_t)s->converted;
        j->resized += (uint64_t)s->resized;
        int64_t px = (int64_t)s->dims[0] * s->dims[1];
        if (px > STK__LOADER_MAX_PIXELS) { /* stored, but the loader refuses it unless told */
            j->over_limit++;
            stk__err(reason, STK_OK, STK__OVER_LOADER_LIMIT "%dx%d = %lld pixels, over the loader's default limit of "
                     "%lld (stoker.Loader(max_pixels=...), STK_P_MAX_PIXELS; or pack with --max-side)",
                     s->dims[0], s->dims[1], (long long)px, STK__LOADER_MAX_PIXELS);
            if ((rc = note(j, i, reason)) != STK_OK)
                return rc;
        }
        if (!s->damaged)
            return STK_OK;
        j->kept_damaged++;
        stk__err(reason, STK_OK, STK__KEPT_DAMAGED "%s", s->reason);
        return note(j, i, reason);
    }
    if (f->lines) /* name the manifest line too */
        stk__err(reason, STK_OK, "%s (%s line %zu)", s->reason, f->origin, f->lines[i]);
    else
        stk__err(reason, STK_OK, "%s", s->reason);
    if (j->o.strict) {
        stk__err(j->err, s->status, "%s: %s (--strict: stopping at the first bad source file)", f->paths[i], reason);
        return s->status;
    }
    if ((rc = note(j, i, reason)) != STK_OK)
        return rc;
    j->pr.skipped++;
    return STK_OK;
}

/* Progress from plan position START (the files before it are in the kept shards). */
static void progress_init(pack_job *j, uint64_t start)
{
    memset(&j->pr, 0, sizeof j->pr);
    j->pr.files_total = j->pl.files.n;
    j->pr.bytes_total = j->pl.bytes_total;
    j->pr.files_done = start;
    j->pr.records_written = j->rs.records;
    j->pr.skipped = j->rs.skipped + j->pl.files.nunreadable; /* an unreadable directory counts as one */
    for (uint64_t i = 0; i < start; i++)
        j->pr.bytes_done += j->pl.sizes[i];
}

/* Every file from START on, in plan order, to the writer; progress about 4 times a second. */
static int stream(pack_job *j, uint64_t start)
{
    progress_init(j, start);
    double last_cb = stk__now();
    for (uint64_t i = start; i < j->pl.files.n; i++) {
        stk__pack_slot *s = stk__packer_take(&j->pk, i);
        int rc = put_file(j, s, i);
        if (rc)
            return rc;
        j->pr.files_done++;
        j->pr.bytes_done += j->pl.sizes[i];
        stk__packer_give(&j->pk, s, i);
        double now = stk__now();
        if (j->o.progress && now - last_cb >= 0.25) {
            last_cb = now;
            j->pr.elapsed_s = now - j->t0;
            j->o.progress(&j->pr, j->o.progress_user);
        }
    }
    return STK_OK;
}

/* Close the last shard, write the report, remove the marker; the last progress and the result. */
static int finish(pack_job *j, stk_pack_result *result)
{
    int rc = stk__writer_finish_pack(j->w, j->pl.files.n, j->rep.p ? j->rep.p : "", j->rep.len);
    if (rc != STK_OK)
        return writer_err(j, rc);
    j->pr.elapsed_s = stk__now() - j->t0;
    if (j->o.progress)
        j->o.progress(&j->pr, j->o.progress_user);
    if (!result)
        return STK_OK;
    uint64_t recs, shards, payload;
    stk__writer_totals(j->w, &recs, &shards, &payload);
    result->records = recs;
    result->skipped = j->pr.skipped;
    result->shards = shards;
    result->classes = j->pl.files.nclasses;
    result->resumed_records = j->rs.records;
    result->payload_bytes = payload + j->rs.payload; /* kept shards too */
    result->elapsed_s = j->pr.elapsed_s;
    return STK_OK;
}

int stk_pack(const char *src, const char *dst, const stk_pack_options *opts, stk_pack_result *result)
{
    return stk_pack_ext(src, dst, opts, NULL, result);
}

int stk_pack_ext(const char *src, const char *dst, const stk_pack_options *opts, stk_pack_ext_options *ext,
                 stk_pack_result *result)
{
    if (src && dst && stk__s3_is_url(dst)) /* packed and uploaded shard by shard (pack_s3.c) */
        return stk__pack_to_s3(src, dst, opts, ext, result);
    return stk__pack_local(src, dst, opts, ext, result, NULL);
}

int stk__pack_local(const char *src, const char *dst, const stk_pack_options *opts, stk_pack_ext_options *ext,
                    stk_pack_result *result, const stk__writer_hooks *hooks)
{
    pack_job j;
    memset(&j, 0, sizeof j);
    if (opts)
        j.o = *opts;
    j.t0 = stk__now();
    if (result)
        memset(result, 0, sizeof *result);
    if (ext && ext->size < sizeof ext->size) {
        if (j.o.error && j.o.error_cap)
            snprintf(j.o.error, j.o.error_cap, "stk_pack_ext: EXT->size must be sizeof(stk_pack_ext_options)");
        return STK_E_INVALID;
    }
    if (ext)
        memcpy(&j.x, ext, STK__MIN(ext->size, sizeof j.x));
    if (!src || !dst || !*src || !*dst) {
        if (j.o.error && j.o.error_cap)
            snprintf(j.o.error, j.o.error_cap, "stk_pack: SRC and DST are required");
        return STK_E_INVALID;
    }
    if (j.x.max_side < 0 || j.x.quality < 0 || j.x.quality > 100) {
        if (j.o.error && j.o.error_cap)
            snprintf(j.o.error, j.o.error_cap, "stk_pack_ext: max_side must be >= 0 and quality 0..100 (got %d, %d)",
                     j.x.max_side, j.x.quality);
        return STK_E_INVALID;
    }
    if (j.x.labels < STK_LABELS_AUTO || j.x.labels > STK_LABELS_NONE) {
        if (j.o.error && j.o.error_cap)
            snprintf(j.o.error, j.o.error_cap, "stk_pack_ext: labels must be STK_LABELS_AUTO, _INDEX, _NAMES or _NONE (got %d)",
                     j.x.labels);
        return STK_E_INVALID;
    }
    j.pk.xf.max_side = j.x.max_side;
    j.pk.xf.quality = j.x.quality;
    j.pk.xf.keep_damaged = j.x.keep_damaged != 0;
    j.src = src;
    j.dst = dst;
    int threads = j.o.threads > 0 ? j.o.threads : stk__online_cpus();
    if (threads > 256)
        threads = 256;
    stk__manifest_opts mo = {j.x.manifest_format, j.x.path_field, j.x.label_field, j.x.target_fields,
                             j.x.classes_file, j.x.label_sep, j.x.multi_label, j.x.target_dtype, j.o.strict,
                             j.x.labels, (size_t)j.x.max_line};
    int rc;
    if ((rc = stk__pack_plan_make(src, j.x.max_side, j.x.quality, j.pk.xf.keep_damaged, &mo, &j.pl, j.err)) ==
            STK_OK &&
        (rc = check_dst(&j)) == STK_OK &&
        (rc = writer_setup(&j, hooks)) == STK_OK && (rc = begin(&j)) == STK_OK &&
        (rc = stk__packer_start(&j.pk, &j.pl.files, j.rs.src_end, threads, j.err)) == STK_OK &&
        (rc = stream(&j, j.rs.src_end)) == STK_OK)
        rc = finish(&j, result);
    stk__packer_stop(&j.pk);
    if (ext && ext->size >= offsetof(stk_pack_ext_options, resized) + sizeof ext->resized) {
        ext->converted = j.converted;
        ext->resized = j.resized;
    }
    if (ext && ext->size >= offsetof(stk_pack_ext_options, bad_lines) + sizeof ext->bad_lines)
        ext->bad_lines = j.pl.files.nbad;
    if (ext && ext->size >= offsetof(stk_pack_ext_options, targets) + sizeof ext->targets)
        ext->targets = j.pl.files.tinfo;
    if (ext && ext->size >= offsetof(stk_pack_ext_options, ignored) + sizeof ext->ignored) {
        ext->kept_damaged = j.kept_damaged + j.rs.kept_damaged;
        ext->ignored = j.pl.files.nignored;
    }
    if (ext && ext->size >= offsetof(stk_pack_ext_options, over_loader_limit) + sizeof ext->over_loader_limit)
        ext->over_loader_limit = j.over_limit + j.rs.over_limit;
    stk_writer_destroy(j.w);
    free(j.rep.p);
    free(j.rs.report);
    stk__pack_plan_free(&j.pl);
    if (rc && j.o.error && j.o.error_cap)
        snprintf(j.o.error, j.o.error_cap, "%s", j.err[0] ? j.err : stk_strerror(rc));
    return rc;
}
