/* SPDX-License-Identifier: MIT */
/*
 * stoker_pack.c — `stoker pack SRC DST`: options, the progress line, the summary and the
 * skipped files of the pack report (stk_pack_ext does the work).
 */
#include "stoker_cli.h"

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
        for (size_t t = 0; t < k_ntdtypes; t++)
            if (!strcmp(v, k_tdtypes[t].name))
                x->target_dtype = k_tdtypes[t].dtype;
        if (x->target_dtype < 0)
            die_usage(usage_pack, "--target-type must be float32, float64, int32, int64 or uint8 (got %s)", v);
    }
    return 1;
}

int cmd_pack(int argc, char **argv)
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
