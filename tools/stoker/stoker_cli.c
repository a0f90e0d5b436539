/* SPDX-License-Identifier: MIT */
/*
 * stoker — the command-line tool: pack, info, ls, get, verify, doctor (doctor*.c), run (run.c). A thin
 * program over the public API (stoker.h) only.
 *
 * Exit codes (all commands):
 *   0  success
 *   1  the operation failed (the message names the path and the reason)
 *   2  usage error (unknown command or option, missing argument)
 *   3  verify: one or more bad records (they are listed)
 *   4  pack: another pack holds DST
 *   5  verify, info: DST is not a dataset (no shards, no LMDB, no image file in class folders)
 *   doctor and run return their job's exit status (see doctor.c, run.c)
 * Standard output that cannot be written (a full disk, /dev/full) fails any command (exit 1 when
 * it would have been 0): a report nobody can read is not a success.
 */
#include "stoker.h"
#include "doctor.h"
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_BAD 3
#define EXIT_BUSY 4 /* pack: another pack holds DST */
#define EXIT_NOT_DATASET 5 /* verify, info: DST is no dataset */

static const char *g_prog = "stoker";

static const char usage_main[] =
    "usage: stoker [--version] [--help] COMMAND [ARGS]\n"
    "\n"
    "Pack folders of JPEGs into LMDB shards and inspect them.\n"
    "\n"
    "commands:\n"
    "  pack SRC DST     pack an ImageFolder root or a `path<TAB>label` list into shards\n"
    "  info DST         summary of a dataset (format, shards, records, classes, bytes)\n"
    "  ls DST           one line per record: index, shard, label, bytes, crc32c, name\n"
    "  get DST INDEX    write record INDEX's payload (the original file's bytes)\n"
    "  verify DST       check every record's CRC32C (--decode: also decode each image)\n"
    "  doctor -- CMD    run a training command and tell where it waits (GPU, CPU, data\n"
    "                   loading, copies, checkpoints, precision) and the next step to try\n"
    "\n"
    "`stoker COMMAND --help` describes a command.\n"
    "\n"
    "exit codes: 0 success, 1 failure (the message names the path and reason; standard output\n"
    "            that cannot be written too), 2 usage error, 3 verify found bad records,\n"
    "            4 pack: DST is being packed, 5 verify/info: DST is not a dataset\n";

static const char usage_pack[] =
    "usage: stoker pack SRC DST [--shard-size SIZE] [--threads N] [--strict] [--force] [--quiet]\n"
    "                  [--max-side N] [--quality Q] [--keep-damaged] [manifest options]\n"
    "\n"
    "Pack SRC into a dataset of shards in directory DST (shard-00000.lmdb, ...).\n"
    "SRC is an ImageFolder root (one folder per class; labels 0..C-1 in torchvision's sorted\n"
    "order; files with torchvision's image extensions, in torchvision's order; the other files,\n"
    "a .gif too, are left out as ImageFolder leaves them and listed in the report), a manifest (a\n"
    "CSV, TSV or JSON Lines file with a header/keys: a path and its label, labels or values per\n"
    "line) or a text file of `path<TAB>label` lines (relative paths are relative to the file's\n"
    "folder). Manifest lines that cannot be used are listed with their line number in the report\n"
    "(--strict: the first one fails the pack). docs/FORMAT.md has the rules and examples.\n"
    "A JPEG's record is the source file's bytes, unchanged, with its label and CRC32C. PNG, WebP,\n"
    "GIF (first frame), BMP, TIFF and binary PPM/PGM files, known by their content whatever their\n"
    "name, are decoded as Pillow's convert(\"RGB\") does and stored as JPEGs (quality 95, 4:4:4).\n"
    "Every JPEG is decoded completely before it is stored (a fast 1/8-scale decode that still reads\n"
    "every scan): one that does not decode fully (truncated, corrupt data: any libjpeg warning) is\n"
    "skipped unless --keep-damaged. Files that cannot be packed (damaged, empty, unreadable,\n"
    "another format, not a regular file: a FIFO, socket or device; a JPEG over 178,956,970\n"
    "pixels that --max-side does not resize) and folders that cannot be listed are skipped,\n"
    "listed on stderr and in DST/pack-report.tsv (path<TAB>reason) and counted. An image stored\n"
    "over the loader's default limit of 89,478,485 pixels is a warning there. SRC is never\n"
    "modified.\n"
    "An interrupted pack leaves DST/.stoker-pack-incomplete; run the same command again to\n"
    "finish it (completed shards are kept). One pack at a time per DST: a pack holds\n"
    "DST/.stoker-pack.lock; another pack into that DST (resuming, or with --force, too) exits 4\n"
    "at once naming its pid.\n"
    "\n"
    "options:\n"
    "  --shard-size SIZE  payload bytes per shard, e.g. 512M, 1G, 1.5G [1G]\n"
    "  --threads N        reader threads [all cores]\n"
    "  --max-side N       images whose longer side exceeds N pixels are resized to it (the\n"
    "                     loader's antialiased filter) and stored as JPEG; smaller JPEGs are\n"
    "                     kept byte for byte; a JPEG over the pack's pixel limit is decoded at a\n"
    "                     DCT scale first; one that cannot be resized is listed [off]\n"
    "  --quality Q        JPEG quality 1..100 of re-encoded images [95]\n"
    "  --strict           stop at the first bad source file or manifest line, naming it\n"
    "  --keep-damaged     store JPEGs that do not decode fully as they are (listed in the report\n"
    "                     as kept-damaged: reason; the loader then counts them as bad records)\n"
    "  --force            replace a dataset already in DST (only stoker's own files are removed)\n"
    "  --quiet            no progress, no summary\n"
    "manifest options:\n"
    "  --format F         csv, tsv, jsonl or list [by the name: .csv, .jsonl/.ndjson; a file whose\n"
    "                     first line starts with the path field and a tab is TSV; else list]\n"
    "  --path-field NAME  the column/key of the image path [path]\n"
    "  --label-field NAME the column/key of the label: an index or a class name [label]\n"
    "  --labels MODE      what the labels are [auto]:\n"
    "                       index  class indices, decimal integers 0..2147483647 (below the\n"
    "                              --classes count); any other label is a bad line\n"
    "                       names  class names (a JSON integer's digits too), from --classes or\n"
    "                              the sorted set the manifest uses\n"
    "                       auto   index when every label is numeric (so `-1`, `+3`, `1.0` or\n"
    "                              `99999999999` among indices are bad lines), names when none is;\n"
    "                              numbers and names mixed: the pack fails, naming one of each\n"
    "                       none   unlabelled data: the label field is not read, every label is -1\n"
    "                     In every mode but none a record needs its label: an empty cell, a JSON\n"
    "                     null or a missing key is a bad line; no label field at all fails the pack.\n"
    "                     A NUL byte in any field of any manifest is a bad line.\n"
    "  --classes FILE     class names, one per line (label = line); names not in it are bad\n"
    "                     lines [the sorted names the manifest uses]\n"
    "  --multi-label      the label field holds several labels (a JSON list, or a cell split at\n"
    "                     --label-sep); stored as a label-list target the loader can multi-hot\n"
    "  --target-field NAME  a column/key of numbers that form each record's value vector\n"
    "                     (repeat or comma-separate for several, in order)\n"
    "  --target-type T    float32, float64, int32, int64 or uint8 [float32]\n"
    "  --label-sep S      separator of several values in one CSV/TSV cell [a space]\n"
    "  --max-line BYTES   longest manifest line, e.g. 4M; a longer line (or CSV record) is a bad\n"
    "                     line, skipped without being read into memory [1M]\n"
    "\n"
    "exit codes: 0 packed (skipped files are listed in the report), 1 failed, 2 usage error,\n"
    "            4 another pack is writing DST (the message names its pid)\n";

static const char usage_info[] =
    "usage: stoker info DST\n"
    "\n"
    "Print the dataset's format, layout, shards (each with its format: stoker-shard 2 checks\n"
    "labels and targets too, 1 the payload only), records, classes, payload and file bytes and\n"
    "the mean and largest record size. DST: a dataset directory, one shard file, a foreign LMDB\n"
    "or an ImageFolder root with at least one image.\n"
    "\n"
    "exit codes: 0 ok, 1 cannot open DST, 2 usage error, 5 DST is not a dataset (a folder with\n"
    "            neither shards nor images, such as the parent of a dataset folder)\n";

static const char usage_ls[] =
    "usage: stoker ls DST [--start I] [--count N]\n"
    "\n"
    "One tab-separated line per record: index, shard file, label, payload bytes, crc32c (hex),\n"
    "name (shard and key, with the source path when the shard records it).\n"
    "\n"
    "exit codes: 0 ok, 1 failure, 2 usage error\n";

static const char usage_get[] =
    "usage: stoker get DST INDEX [-o FILE]\n"
    "\n"
    "Write the payload of record INDEX (dataset index, as `stoker ls` shows) to standard output\n"
    "or FILE: byte-identical to the packed source file. The CRC32C is checked.\n"
    "Refuses to write binary data to a terminal.\n"
    "\n"
    "exit codes: 0 ok, 1 failure (bad index, CRC mismatch, I/O), 2 usage error\n";

static const char usage_verify[] =
    "usage: stoker verify DST [--decode] [--quiet]\n"
    "\n"
    "Read every record through the loader's reader (io_uring or a pread pool) and check its\n"
    "stored CRC32C: in a stoker-shard 2 shard it covers the payload, the label and the target,\n"
    "in a stoker-shard 1 shard (packed before 0.5) the payload only; each shard's format is\n"
    "printed. With --decode also decode each image in full with libjpeg-turbo (corrupt data,\n"
    "libjpeg warnings and images over the pixel limit are errors).\n"
    "Bad records are listed (dataset index, shard and key or file, reason).\n"
    "\n"
    "exit codes: 0 all records good, 3 bad records found, 1 cannot open or read DST (or write\n"
    "            the report), 2 usage error, 5 DST is not a dataset (a folder with neither\n"
    "            shards nor images, such as the parent of a dataset folder, or /etc)\n";

static void die_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die_usage(const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n%s", usage);
    va_end(ap);
    exit(EXIT_USAGE);
}

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* 512M, 1G, 1.5G, 4096, 64K, 2GiB ... (binary multiples). */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v <= 0)
        return -1;
    double m = 1;
    switch (*end) {
    case 'k': case 'K': m = 1024.0; end++; break;
    case 'm': case 'M': m = 1024.0 * 1024; end++; break;
    case 'g': case 'G': m = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': m = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (!strcmp(end, "iB") || !strcmp(end, "B") || !strcmp(end, "b"))
        end += strlen(end);
    if (*end)
        return -1;
    double b = v * m;
    if (b > 9e18)
        return -1;
    *out = (uint64_t)b;
    return 0;
}

static void human(double b, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static stk_dataset *open_dataset(const char *path)
{
    stk_dataset *ds;
    if (stk_dataset_create(&ds) != STK_OK) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        exit(EXIT_FAIL);
    }
    int rc = stk_dataset_open(ds, path);
    if (rc) {
        const char *e = stk_dataset_last_error(ds);
        fprintf(stderr, "%s: %s\n", g_prog, *e ? e : stk_strerror(rc));
        stk_dataset_destroy(ds);
        exit(EXIT_FAIL);
    }
    return ds;
}

/* A folder opened as an ImageFolder root in which no image was found is not a dataset for info and
 * verify (the parent of a dataset folder, /etc): "0 records, 0 bad" would pass for a check.
 * Returns 0, or EXIT_NOT_DATASET with the reason printed (naming a subfolder that holds shards). */
static int refuse_non_dataset(stk_dataset *ds, const char *path)
{
    stk_dataset_info in;
    if (stk_dataset_info_get(ds, &in) != STK_OK || in.layout != STK_LAYOUT_FILES || in.records > 0)
        return 0;
    fprintf(stderr, "%s: %s: not a dataset: no shard-NNNNN.lmdb files, no LMDB and no image file in "
            "its %u subfolder%s\n", g_prog, path, in.classes, in.classes == 1 ? "" : "s");
    for (uint32_t c = 0; c < in.classes; c++) {
        char p[4200];
        const char *name = stk_dataset_class_name(ds, c);
        snprintf(p, sizeof p, "%s/%s/shard-00000.lmdb", path, name ? name : "");
        if (name && access(p, F_OK) == 0)
            fprintf(stderr, "%s: %s/%s holds shards: give that folder\n", g_prog, path, name);
    }
    return EXIT_NOT_DATASET;
}

/* ---- pack ------------------------------------------------------------------------------------ */

typedef struct prog_state {
    int tty;
    double last_line;
    int drew;
} prog_state;

static void fmt_eta(double s, char *buf, size_t cap)
{
    if (s < 0 || s > 359999) {
        snprintf(buf, cap, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%u:%02u", t / 60, t % 60);
}

static void on_progress(const stk_pack_progress *p, void *user)
{
    prog_state *ps = user;
    double el = p->elapsed_s > 1e-6 ? p->elapsed_s : 1e-6;
    double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total
                                 : (p->files_total ? (double)p->files_done / (double)p->files_total : 1);
    if (frac > 1)
        frac = 1;
    double rps = (double)p->files_done / el, mbs = (double)p->bytes_done / el / 1e6;
    char eta[32];
    fmt_eta(frac > 0 ? el * (1 - frac) / frac : -1, eta, sizeof eta);
    if (ps->tty) {
        char bar[31];
        int fill = (int)(frac * 30);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r[%s] %5.1f%% %" PRIu64 "/%" PRIu64 " files, %" PRIu64 " skipped | %.0f rec/s %.1f MB/s | ETA %s  ",
                bar, frac * 100, p->files_done, p->files_total, p->skipped, rps, mbs, eta);
        ps->drew = 1;
    } else if (p->elapsed_s - ps->last_line >= 5.0 || p->files_done == p->files_total) {
        ps->last_line = p->elapsed_s;
        fprintf(stderr, "pack: %" PRIu64 "/%" PRIu64 " files (%.1f%%), %" PRIu64 " skipped, %.0f rec/s, %.1f MB/s, ETA %s\n",
                p->files_done, p->files_total, frac * 100, p->skipped, rps, mbs, eta);
    }
    fflush(stderr);
}

/* The skipped files of a finished pack, from DST/pack-report.tsv, on stderr: nothing is skipped
 * silently (the first 100; the report has them all). Damaged JPEGs kept are named as such. */
static void print_skipped(const char *dst)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/pack-report.tsv", dst);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[8192];
    unsigned n = 0, shown = 0;
    while (fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        if (l && line[l - 1] == '\n')
            line[--l] = 0;
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = 0;
        if (shown < 100) {
            int kept = !strncmp(tab + 1, "kept-damaged: ", 14);
            int large = !strncmp(tab + 1, "over-loader-limit: ", 19);
            if (large)
                fprintf(stderr, "%s: warning: %s: %s\n", g_prog, line, tab + 20);
            else
                fprintf(stderr, "%s: %s %s: %s\n", g_prog, kept ? "kept damaged" : "skipped", line, tab + 14 * kept + 1);
            shown++;
        }
        n++;
    }
    fclose(f);
    if (n > shown)
        fprintf(stderr, "%s: ... and %u more listed files: see %s\n", g_prog, n - shown, path);
}

/* The target types by their names (--target-type, and what info/pack print). */
static const struct {
    const char *name;
    int dtype;
} k_tdtypes[] = {{"uint8", STK_TDT_UINT8},     {"int32", STK_TDT_INT32},     {"int64", STK_TDT_INT64},
                 {"float32", STK_TDT_FLOAT32}, {"float64", STK_TDT_FLOAT64}};

/* "float32 x 4 values per record" / "label lists of up to 3 ..." for T; "" without targets. */
static void target_text(const stk_target_info *t, char *buf, size_t cap)
{
    buf[0] = 0;
    for (size_t i = 0; i < sizeof k_tdtypes / sizeof *k_tdtypes; i++) {
        if (k_tdtypes[i].dtype != t->dtype)
            continue;
        if (t->kind == STK_TARGET_LABELS)
            snprintf(buf, cap, "label lists of up to %u (int32, -1 padded) over %u classes", t->size, t->classes);
        else
            snprintf(buf, cap, "%s x %u values per record", k_tdtypes[i].name, t->size);
    }
}

/* A manifest option at argv[*i] into X (consuming its value); 0 when argv[*i] is not one. */
static int pack_manifest_opt(int argc, char **argv, int *i, stk_pack_ext_options *x, char *tf, size_t tfcap)
{
    static const char *const str_opts[] = {"--format", "--path-field", "--label-field", "--classes", "--label-sep",
                                           "--target-field", "--target-type"};
    const char *a = argv[*i];
    if (!strcmp(a, "--multi-label")) {
        x->multi_label = 1;
        return 1;
    }
    if (!strcmp(a, "--labels")) {
        static const char *const modes[] = {"auto", "index", "names", "none"}; /* = STK_LABELS_* */
        const char *v = ++*i < argc ? argv[*i] : "";
        for (x->labels = 0; x->labels < 4 && strcmp(v, modes[x->labels]); x->labels++)
            ;
        if (x->labels == 4)
            die_usage(usage_pack, "--labels must be auto, index, names or none (got %s)", v);
        return 1;
    }
    if (!strcmp(a, "--max-line")) {
        if (++*i >= argc || parse_size(argv[*i], &x->max_line) != 0 || x->max_line < 1)
            die_usage(usage_pack, "--max-line needs a size in bytes such as 1M or 65536");
        return 1;
    }
    size_t k = 0;
    while (k < sizeof str_opts / sizeof *str_opts && strcmp(a, str_opts[k]))
        k++;
    if (k == sizeof str_opts / sizeof *str_opts)
        return 0;
    if (++*i >= argc || !argv[*i][0])
        die_usage(usage_pack, "%s needs a value", a);
    const char *v = argv[*i];
    const char **dst[] = {&x->manifest_format, &x->path_field, &x->label_field, &x->classes_file, &x->label_sep};
    if (k < 5) {
        *dst[k] = v;
    } else if (k == 5) {
        size_t l = strlen(tf);
        if (l + strlen(v) + 2 > tfcap)
            die_usage(usage_pack, "--target-field: too many fields");
        snprintf(tf + l, tfcap - l, "%s%s", l ? "," : "", v);
        x->target_fields = tf;
    } else {
        x->target_dtype = -1;
        for (size_t t = 0; t < sizeof k_tdtypes / sizeof *k_tdtypes; t++)
            if (!strcmp(v, k_tdtypes[t].name))
                x->target_dtype = k_tdtypes[t].dtype;
        if (x->target_dtype < 0)
            die_usage(usage_pack, "--target-type must be float32, float64, int32, int64 or uint8 (got %s)", v);
    }
    return 1;
}

static int cmd_pack(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    int npos = 0, quiet = 0;
    stk_pack_options o;
    memset(&o, 0, sizeof o);
    stk_pack_ext_options x;
    memset(&x, 0, sizeof x);
    x.size = sizeof x;
    char tfields[4096] = "";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            fputs(usage_pack, stdout);
            return 0;
        } else if (pack_manifest_opt(argc, argv, &i, &x, tfields, sizeof tfields)) {
            continue;
        } else if (!strcmp(a, "--max-side")) {
            uint64_t v = 0;
            if (++i >= argc || parse_u64(argv[i], &v) != 0 || v < 1 || v > 65535)
                die_usage(usage_pack, "--max-side needs a number of pixels 1..65535");
            x.max_side = (int)v;
        } else if (!strcmp(a, "--quality")) {
            uint64_t v = 0;
            if (++i >= argc || parse_u64(argv[i], &v) != 0 || v < 1 || v > 100)
                die_usage(usage_pack, "--quality needs a number 1..100");
            x.quality = (int)v;
        } else if (!strcmp(a, "--shard-size")) {
            if (++i >= argc || parse_size(argv[i], &o.shard_bytes) != 0)
                die_usage(usage_pack, "--shard-size needs a size such as 512M or 1G");
            if (o.shard_bytes < (1u << 20))
                die_usage(usage_pack, "--shard-size must be at least 1M");
        } else if (!strcmp(a, "--threads")) {
            uint64_t t = 0;
            if (++i >= argc || parse_u64(argv[i], &t) != 0 || t < 1 || t > 256)
                die_usage(usage_pack, "--threads needs a number 1..256");
            o.threads = (int)t;
        } else if (!strcmp(a, "--strict")) {
            o.strict = 1;
        } else if (!strcmp(a, "--force")) {
            o.force = 1;
        } else if (!strcmp(a, "--keep-damaged")) {
            x.keep_damaged = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            die_usage(usage_pack, "unknown option %s", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            die_usage(usage_pack, "too many arguments (%s)", a);
        }
    }
    if (npos != 2)
        die_usage(usage_pack, "pack needs SRC and DST");
    char err[1024] = "";
    prog_state ps = {isatty(2), 0, 0};
    if (!quiet) {
        o.progress = on_progress;
        o.progress_user = &ps;
    }
    o.error = err;
    o.error_cap = sizeof err;
    stk_pack_result r;
    int rc = stk_pack_ext(pos[0], pos[1], &o, &x, &r);
    if (ps.drew)
        fputc('\n', stderr);
    if (rc == 0 && (r.skipped || x.bad_lines || x.kept_damaged || x.ignored || x.over_loader_limit))
        print_skipped(pos[1]);
    if (rc) {
        fprintf(stderr, "%s: pack failed: %s\n", g_prog, err[0] ? err : stk_strerror(rc));
        return rc == -EBUSY ? EXIT_BUSY : EXIT_FAIL;
    }
    if (!quiet) {
        char pb[32];
        human((double)r.payload_bytes, pb, sizeof pb);
        double el = r.elapsed_s > 1e-6 ? r.elapsed_s : 1e-6;
        uint64_t now = r.records - r.resumed_records;
        printf("packed %" PRIu64 " records (%" PRIu64 " classes) into %" PRIu64 " shard%s in %s: %s payload\n",
               r.records, r.classes, r.shards, r.shards == 1 ? "" : "s", pos[1], pb);
        if (r.resumed_records)
            printf("resumed an interrupted pack: %" PRIu64 " records were already packed, %" PRIu64 " added now\n",
                   r.resumed_records, now);
        printf("%.2f s, %.0f records/s\n", r.elapsed_s, (double)now / el);
        if (x.converted || x.resized)
            printf("%" PRIu64 " non-JPEG file%s stored as JPEG, %" PRIu64 " image%s resized to --max-side\n",
                   x.converted, x.converted == 1 ? "" : "s", x.resized, x.resized == 1 ? "" : "s");
        if (r.skipped)
            printf("skipped %" PRIu64 " file%s that cannot be packed: see %s/pack-report.tsv\n", r.skipped,
                   r.skipped == 1 ? "" : "s", pos[1]);
        if (x.bad_lines)
            printf("set aside %" PRIu64 " manifest line%s that cannot be used: see %s/pack-report.tsv\n",
                   x.bad_lines, x.bad_lines == 1 ? "" : "s", pos[1]);
        if (x.ignored)
            printf("left out %" PRIu64 " file%s whose extension torchvision's ImageFolder does not load: see "
                   "%s/pack-report.tsv\n", x.ignored, x.ignored == 1 ? "" : "s", pos[1]);
        if (x.kept_damaged)
            printf("kept %" PRIu64 " damaged JPEG%s as they are (--keep-damaged): see %s/pack-report.tsv\n",
                   x.kept_damaged, x.kept_damaged == 1 ? "" : "s", pos[1]);
        if (x.over_loader_limit)
            printf("warning: %" PRIu64 " image%s over the loader's default limit of 89478485 pixels (the loader "
                   "refuses %s unless max_pixels is raised; --max-side N resizes): see %s/pack-report.tsv\n",
                   x.over_loader_limit, x.over_loader_limit == 1 ? "" : "s",
                   x.over_loader_limit == 1 ? "it" : "them", pos[1]);
        char tl[160];
        target_text(&x.targets, tl, sizeof tl);
        if (tl[0])
            printf("targets: %s\n", tl);
    }
    return 0;
}

/* ---- info / ls / get ---------------------------------------------------------------------------- */

static const char *layout_name(int l)
{
    switch (l) {
    case STK_LAYOUT_SHARDS: return "stoker shards";
    case STK_LAYOUT_FILES: return "image files (ImageFolder)";
    case STK_LAYOUT_LMDB: return "foreign LMDB (key -> image bytes)";
    default: return "?";
    }
}

static int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(usage_info, stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage(usage_info, "unknown option %s", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            die_usage(usage_info, "too many arguments (%s)", argv[i]);
        }
    }
    if (!path)
        die_usage(usage_info, "info needs DST");
    stk_dataset *ds = open_dataset(path);
    int refused = refuse_non_dataset(ds, path);
    if (refused) {
        stk_dataset_destroy(ds);
        return refused;
    }
    stk_dataset_info in;
    stk_dataset_info_get(ds, &in);
    char pb[32], fb[32], mb[32], xb[32];
    human((double)in.payload_bytes, pb, sizeof pb);
    human((double)in.file_bytes, fb, sizeof fb);
    human(in.records ? (double)in.payload_bytes / (double)in.records : 0, mb, sizeof mb);
    human((double)in.max_record_bytes, xb, sizeof xb);
    printf("path:          %s\n", path);
    printf("layout:        %s\n", layout_name(in.layout));
    int mixed = 0;
    for (uint32_t sh = 1; sh < in.shards; sh++)
        mixed |= stk_dataset_shard_format(ds, sh) != stk_dataset_shard_format(ds, 0);
    if (in.format_version && mixed)
        printf("format:        stoker-shard 1 and 2 (a pack resumed by a newer stoker; see the shards)\n");
    else if (in.format_version)
        printf("format:        stoker-shard %d (checksum of the payload%s)\n", in.format_version,
               in.format_version >= 2 ? ", label and target" : " only");
    printf("shards:        %u\n", in.shards);
    printf("records:       %" PRIu64 "\n", in.records);
    printf("classes:       %u", in.classes);
    for (uint32_t c = 0; c < in.classes && c < 8; c++)
        printf("%s%s", c ? ", " : " (", stk_dataset_class_name(ds, c));
    if (in.classes)
        printf("%s)", in.classes > 8 ? ", ..." : "");
    printf("\n");
    char tl[160];
    stk_target_info ti;
    if (stk_dataset_target_info(ds, &ti) != STK_OK)
        ti.dtype = STK_TDT_NONE;
    target_text(&ti, tl, sizeof tl);
    if (tl[0])
        printf("targets:       %s\n", tl);
    printf("payload bytes: %" PRIu64 " (%s)\n", in.payload_bytes, pb);
    printf("file bytes:    %" PRIu64 " (%s)\n", in.file_bytes, fb);
    printf("mean record:   %s\n", mb);
    printf("largest:       %s\n", xb);
    for (uint32_t s = 0; s < in.shards && s < 16; s++) {
        int f = stk_dataset_shard_format(ds, s);
        if (f)
            printf("shard %u:       %s (stoker-shard %d)\n", s, stk_dataset_shard_path(ds, s), f);
        else
            printf("shard %u:       %s\n", s, stk_dataset_shard_path(ds, s));
    }
    if (in.shards > 16)
        printf("...            (%u shards)\n", in.shards);
    stk_dataset_destroy(ds);
    return 0;
}

static const char *base_name(const char *p)
{
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : (p ? p : "-");
}

static int cmd_ls(int argc, char **argv)
{
    const char *path = NULL;
    uint64_t start = 0, count = UINT64_MAX;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(usage_ls, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--start")) {
            if (++i >= argc || parse_u64(argv[i], &start))
                die_usage(usage_ls, "--start needs an index");
        } else if (!strcmp(argv[i], "--count")) {
            if (++i >= argc || parse_u64(argv[i], &count))
                die_usage(usage_ls, "--count needs a number");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage(usage_ls, "unknown option %s", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            die_usage(usage_ls, "too many arguments (%s)", argv[i]);
        }
    }
    if (!path)
        die_usage(usage_ls, "ls needs DST");
    stk_dataset *ds = open_dataset(path);
    uint64_t n = stk_dataset_count(ds);
    int status = 0;
    for (uint64_t i = start; i < n && i - start < count; i++) {
        stk_record_info ri;
        char name[4400];
        int rc = stk_dataset_record(ds, i, &ri);
        if (rc) {
            fprintf(stderr, "%s: %s\n", g_prog, stk_dataset_last_error(ds));
            status = EXIT_FAIL;
            continue;
        }
        stk_dataset_record_name(ds, i, name, sizeof name);
        if (ri.has_crc)
            printf("%" PRIu64 "\t%s\t%d\t%u\t%08x\t%s\n", i, base_name(stk_dataset_shard_path(ds, ri.shard)),
                   ri.label, ri.length, ri.crc32c, name);
        else
            printf("%" PRIu64 "\t%s\t%d\t%u\t-\t%s\n", i, base_name(stk_dataset_shard_path(ds, ri.shard)),
                   ri.label, ri.length, name);
    }
    if (fflush(stdout) != 0 && errno != EPIPE) {
        fprintf(stderr, "%s: write to stdout failed: %s\n", g_prog, strerror(errno));
        status = EXIT_FAIL;
    }
    stk_dataset_destroy(ds);
    return status;
}

static int cmd_get(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *out = NULL;
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(usage_get, stdout);
            return 0;
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (++i >= argc)
                die_usage(usage_get, "-o needs a file name");
            out = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage(usage_get, "unknown option %s", argv[i]);
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            die_usage(usage_get, "too many arguments (%s)", argv[i]);
        }
    }
    uint64_t index;
    if (npos != 2)
        die_usage(usage_get, "get needs DST and INDEX");
    if (parse_u64(pos[1], &index))
        die_usage(usage_get, "INDEX must be a record index >= 0 (got `%s`)", pos[1]);
    if (!out && isatty(1)) {
        fprintf(stderr, "%s: refusing to write binary data to a terminal; redirect stdout or use -o FILE\n",
                g_prog);
        return EXIT_USAGE;
    }
    stk_dataset *ds = open_dataset(pos[0]);
    uint64_t n = stk_dataset_count(ds);
    if (index >= n) {
        fprintf(stderr, "%s: %s: index %" PRIu64 " out of range (the dataset has %" PRIu64 " records)\n", g_prog,
                pos[0], index, n);
        stk_dataset_destroy(ds);
        return EXIT_FAIL;
    }
    stk_dataset_info in;
    stk_dataset_info_get(ds, &in);
    size_t cap = in.max_record_bytes ? in.max_record_bytes : 1, len;
    void *buf = malloc(cap);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        stk_dataset_destroy(ds);
        return EXIT_FAIL;
    }
    int rc = stk_dataset_read(ds, index, buf, cap, &len, NULL);
    if (rc == STK_E_RANGE) { /* files layout: the file may have grown since open */
        free(buf);
        cap = len;
        buf = malloc(cap ? cap : 1);
        rc = buf ? stk_dataset_read(ds, index, buf, cap, &len, NULL) : STK_E_NOMEM;
    }
    int status = 0;
    if (rc) {
        fprintf(stderr, "%s: %s\n", g_prog, *stk_dataset_last_error(ds) ? stk_dataset_last_error(ds) : stk_strerror(rc));
        status = EXIT_FAIL;
    } else {
        FILE *f = out ? fopen(out, "wb") : stdout;
        if (!f) {
            fprintf(stderr, "%s: %s: %s\n", g_prog, out, strerror(errno));
            status = EXIT_FAIL;
        } else {
            if (fwrite(buf, 1, len, f) != len || fflush(f) != 0) {
                fprintf(stderr, "%s: %s: write failed: %s\n", g_prog, out ? out : "stdout", strerror(errno));
                status = EXIT_FAIL;
            }
            if (out && fclose(f) != 0 && !status) {
                fprintf(stderr, "%s: %s: %s\n", g_prog, out, strerror(errno));
                status = EXIT_FAIL;
            }
        }
    }
    free(buf);
    stk_dataset_destroy(ds);
    return status;
}

/* ---- verify ----------------------------------------------------------------------------------- */

/*
 * Pass 1 (always): every record through the loader's reader stage (STK_STAGE_READ: io_uring or
 * the pread pool, CRC32C checked, no shuffle, one epoch). A bad record is substituted in its
 * batch and flagged there, so every bad index is seen, however many; the reasons come from
 * stk_loader_error_get (the loader keeps the first 1024).
 * Pass 2 (--decode): every record that passed is decoded in full with libjpeg-turbo, strictly
 * (corrupt data that libjpeg would patch over is an error), by a few threads, each with its own
 * decoder. A full decode, not the loader's eval crop window: corruption outside the crop would
 * go unnoticed there.
 */

typedef struct bad_rec {
    uint64_t index;
    char reason[600];
} bad_rec;

typedef struct bad_list {
    bad_rec *v;
    size_t n, cap;
    pthread_mutex_t mu;
} bad_list;

static int bad_add(bad_list *l, uint64_t index, const char *reason)
{
    pthread_mutex_lock(&l->mu);
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        bad_rec *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            pthread_mutex_unlock(&l->mu);
            return -1;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n].index = index;
    snprintf(l->v[l->n].reason, sizeof l->v[l->n].reason, "%s", reason);
    l->n++;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

static int cmp_bad(const void *a, const void *b)
{
    uint64_t x = ((const bad_rec *)a)->index, y = ((const bad_rec *)b)->index;
    return x < y ? -1 : x > y;
}

/* verify lists every bad record itself: the loader's own messages would repeat them */
static void quiet_log(void *user, int level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

/* Pass 1 (every bad record is to be seen, however many: no STK_P_MAX_BAD_FRACTION). Returns 0,
 * or -1 with a message printed. */
static int verify_read_pass(const char *path, uint64_t n, bad_list *bad, uint8_t *badmap, int quiet)
{
    stk_loader *h;
    int rc = stk_loader_create(&h);
    if (rc) {
        fprintf(stderr, "%s: %s\n", g_prog, stk_strerror(rc));
        return -1;
    }
    if ((rc = stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ)) || (rc = stk_loader_set(h, STK_P_SHUFFLE, 0)) ||
        (rc = stk_loader_set(h, STK_P_VERIFY_CRC, 1)) || (rc = stk_loader_set(h, STK_P_BATCH_SIZE, 256)) ||
        (rc = stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)) || (rc = stk_loader_set_log(h, quiet_log, NULL)) ||
        (rc = stk_loader_open(h, path)) || (rc = stk_loader_start(h))) {
        fprintf(stderr, "%s: %s: %s\n", g_prog, path,
                *stk_loader_last_error(h) ? stk_loader_last_error(h) : stk_strerror(rc));
        stk_loader_destroy(h);
        return -1;
    }
    uint64_t seen = 0;
    const stk_batch *b;
    for (;;) {
        rc = stk_loader_next(h, NULL, -1, &b);
        if (rc == STK_END)
            break;
        if (rc) {
            fprintf(stderr, "%s: %s: %s\n", g_prog, path,
                    *stk_loader_last_error(h) ? stk_loader_last_error(h) : stk_strerror(rc));
            stk_loader_destroy(h);
            return -1;
        }
        for (uint32_t i = 0; i < b->size; i++) {
            if (b->substituted[i] && b->indices[i] < n && !badmap[b->indices[i]]) {
                badmap[b->indices[i]] = 1;
                bad_add(bad, b->indices[i], "");
            }
        }
        seen += b->size;
        stk_loader_release(h, b, NULL);
    }
    /* reasons, as kept by the loader */
    uint64_t ne = stk_loader_error_count(h);
    for (uint64_t i = 0; i < ne && i < 1024; i++) {
        stk_record_error e;
        if (stk_loader_error_get(h, i, &e) != STK_OK)
            break;
        for (size_t k = 0; k < bad->n; k++) {
            if (bad->v[k].index == e.index && !bad->v[k].reason[0]) {
                snprintf(bad->v[k].reason, sizeof bad->v[k].reason, "%s", e.reason);
                break;
            }
        }
    }
    stk_stats st;
    if (!quiet && stk_loader_stats(h, &st) == STK_OK)
        fprintf(stderr, "verify: read %" PRIu64 " records with %s\n", seen, st.io_backend_note);
    stk_loader_destroy(h);
    if (seen != n) {
        fprintf(stderr, "%s: %s: the reader delivered %" PRIu64 " of %" PRIu64 " records\n", g_prog, path, seen, n);
        return -1;
    }
    return 0;
}

typedef struct dec_job {
    stk_dataset *ds;
    uint64_t n, next;
    const uint8_t *badmap;
    bad_list *bad;
    pthread_mutex_t *mu;
    int failed;
} dec_job;

static void *decode_thread(void *arg)
{
    dec_job *j = arg;
    stk_decoder *dec = NULL;
    uint8_t *buf = NULL, *pix = NULL;
    size_t cap = 0, pixcap = 0;
    if (stk_decoder_create(&dec) != STK_OK) {
        j->failed = 1;
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(j->mu);
        uint64_t i = j->next++;
        pthread_mutex_unlock(j->mu);
        if (i >= j->n)
            break;
        if (j->badmap[i])
            continue;
        size_t len;
        char reason[600] = "";
        int rc = stk_dataset_read(j->ds, i, buf, cap, &len, NULL);
        if (rc == STK_E_RANGE) {
            uint8_t *nb = realloc(buf, len ? len : 1);
            if (!nb) {
                j->failed = 1;
                break;
            }
            buf = nb;
            cap = len;
            rc = stk_dataset_read(j->ds, i, buf, cap, &len, NULL);
        }
        if (rc) {
            snprintf(reason, sizeof reason, "%s", stk_strerror(rc));
        } else {
            int w = 0, h = 0, c = 0, warn = 0;
            rc = stk_image_info(buf, len, &w, &h, &c);
            if (rc == STK_OK && (size_t)w * (size_t)h * 3 > pixcap) {
                uint8_t *np = realloc(pix, (size_t)w * (size_t)h * 3);
                if (!np) {
                    j->failed = 1;
                    break;
                }
                pix = np;
                pixcap = (size_t)w * (size_t)h * 3;
            }
            stk_decode_args a;
            memset(&a, 0, sizeof a);
            a.strict = 1;
            if (rc == STK_OK)
                rc = stk_decode(dec, buf, len, &a, pix, pixcap, &w, &h, &warn);
            if (rc)
                snprintf(reason, sizeof reason, "%s: %s", stk_status_name(rc),
                         *stk_decoder_last_error(dec) ? stk_decoder_last_error(dec) : stk_strerror(rc));
        }
        if (rc && bad_add(j->bad, i, reason) != 0) {
            j->failed = 1;
            break;
        }
    }
    free(buf);
    free(pix);
    stk_decoder_destroy(dec);
    return NULL;
}

/* What verify checked per shard: "shard-00000.lmdb: stoker-shard 2 (crc32c of payload, label and
 * target)"; one line for runs of shards of the same format. */
static void print_shard_formats(stk_dataset *ds)
{
    stk_dataset_info in;
    if (stk_dataset_info_get(ds, &in) != STK_OK)
        return;
    for (uint32_t a = 0, b; a < in.shards; a = b) {
        int f = stk_dataset_shard_format(ds, a);
        for (b = a + 1; b < in.shards && stk_dataset_shard_format(ds, b) == f; b++)
            ;
        char fmt[32] = "";
        if (f)
            snprintf(fmt, sizeof fmt, "stoker-shard %d ", f);
        const char *what = f >= 2 ? "crc32c of payload, label and target"
                           : f == 1 ? "crc32c of the payload only: packed before stoker 0.5, labels unchecked"
                                    : "no stored checksum";
        printf("%s", base_name(stk_dataset_shard_path(ds, a)));
        if (b - a > 1)
            printf(" .. %s", base_name(stk_dataset_shard_path(ds, b - 1)));
        printf(": %s(%s)\n", fmt, what);
    }
}

static int cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    int decode = 0, quiet = 0;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(usage_verify, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--decode")) {
            decode = 1;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die_usage(usage_verify, "unknown option %s", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            die_usage(usage_verify, "too many arguments (%s)", argv[i]);
        }
    }
    if (!path)
        die_usage(usage_verify, "verify needs DST");
    stk_dataset *ds = open_dataset(path);
    int refused = refuse_non_dataset(ds, path);
    if (refused) {
        stk_dataset_destroy(ds);
        return refused;
    }
    uint64_t n = stk_dataset_count(ds);
    bad_list bad = {NULL, 0, 0, PTHREAD_MUTEX_INITIALIZER};
    uint8_t *badmap = calloc(n ? n : 1, 1);
    if (!badmap) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        stk_dataset_destroy(ds);
        return EXIT_FAIL;
    }
    int status = 0;
    if (n && verify_read_pass(path, n, &bad, badmap, quiet) != 0)
        status = EXIT_FAIL;
    if (status == 0 && decode && n) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        int nt = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu;
        pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        dec_job job = {ds, n, 0, badmap, &bad, &mu, 0};
        pthread_t tids[16];
        int started = 0;
        for (int t = 0; t < nt; t++)
            if (pthread_create(&tids[t], NULL, decode_thread, &job) == 0)
                started++;
            else
                break;
        if (started == 0)
            decode_thread(&job);
        for (int t = 0; t < started; t++)
            pthread_join(tids[t], NULL);
        if (job.failed) {
            fprintf(stderr, "%s: out of memory while decoding\n", g_prog);
            status = EXIT_FAIL;
        }
    }
    if (bad.n > 1)
        qsort(bad.v, bad.n, sizeof *bad.v, cmp_bad);
    for (size_t k = 0; k < bad.n; k++) {
        char name[4400];
        stk_dataset_record_name(ds, bad.v[k].index, name, sizeof name);
        printf("BAD\t%" PRIu64 "\t%s\t%s\n", bad.v[k].index, name,
               bad.v[k].reason[0] ? bad.v[k].reason : "bad record (reason not kept: over 1024 errors)");
    }
    if (status == 0) {
        if (!quiet)
            print_shard_formats(ds);
        if (!quiet)
            printf("%s: %" PRIu64 " records, %zu bad (crc32c%s)\n", path, n, bad.n, decode ? " + full decode" : "");
        status = bad.n ? EXIT_BAD : 0;
    }
    free(bad.v);
    free(badmap);
    stk_dataset_destroy(ds);
    return status;
}

/* Standard output flushed and closed: a report that could not be written fails the command
 * (exit 1 when it would have been 0); a closed pipe (`stoker ls | head`) is not a failure. */
static int finish_stdout(int status)
{
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad || e == EPIPE)
        return status;
    fprintf(stderr, "%s: cannot write to standard output: %s\n", g_prog, strerror(e));
    return status ? status : EXIT_FAIL;
}

static int run_command(int argc, char **argv);

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    return finish_stdout(run_command(argc, argv));
}

static int run_command(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (is_help(cmd) || !strcmp(cmd, "help")) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            char *h[] = {"--help"};
            const char *c = argv[2];
            if (!strcmp(c, "pack")) return cmd_pack(1, h);
            if (!strcmp(c, "info")) return cmd_info(1, h);
            if (!strcmp(c, "ls")) return cmd_ls(1, h);
            if (!strcmp(c, "get")) return cmd_get(1, h);
            if (!strcmp(c, "verify")) return cmd_verify(1, h);
            if (!strcmp(c, "doctor")) return cmd_doctor(1, h);
            if (!strcmp(c, "run")) return cmd_run(1, h);
        }
        fputs(usage_main, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("stoker %s\n", stk_version_string());
        return 0;
    }
    if (!strcmp(cmd, "pack"))
        return cmd_pack(argc - 2, argv + 2);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 2, argv + 2);
    if (!strcmp(cmd, "ls"))
        return cmd_ls(argc - 2, argv + 2);
    if (!strcmp(cmd, "get"))
        return cmd_get(argc - 2, argv + 2);
    if (!strcmp(cmd, "verify"))
        return cmd_verify(argc - 2, argv + 2);
    if (!strcmp(cmd, "doctor"))
        return cmd_doctor(argc - 2, argv + 2);
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 2, argv + 2);
    fprintf(stderr, "%s: unknown command `%s`\n\n%s", g_prog, cmd, usage_main);
    return EXIT_USAGE;
}
