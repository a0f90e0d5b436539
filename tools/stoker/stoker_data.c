/* SPDX-License-Identifier: MIT */
/*
 * stoker_data.c — `stoker info`, `stoker ls` and `stoker get`: what a dataset holds, one
 * line per record, one record's payload.
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

int cmd_info(int argc, char **argv)
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

int cmd_ls(int argc, char **argv)
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
            if (rc == STK_E_STATE) /* streamed: no record can be read so (said once) */
                break;
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

int cmd_get(int argc, char **argv)
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
