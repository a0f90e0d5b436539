/* SPDX-License-Identifier: MIT */
/*
 * stoker — the command-line tool: pack (stoker_pack.c), info, ls, get (stoker_data.c), verify
 * (stoker_verify.c), doctor (doctor*.c), run (run.c); this file: main, the command table and the
 * helpers they share (stoker_cli.h). A thin program over the public API (stoker.h) only.
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
#include "stoker_cli.h"
#include "doctor.h"
#include "run.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *g_prog = "stoker";

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


void die_usage(const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n%s", usage);
    va_end(ap);
    exit(EXIT_USAGE);
}

int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

int parse_u64(const char *s, uint64_t *out)
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
int parse_size(const char *s, uint64_t *out)
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

void human(double b, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

stk_dataset *open_dataset(const char *path)
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
int refuse_non_dataset(stk_dataset *ds, const char *path)
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

const cli_tdtype k_tdtypes[] = {{"uint8", STK_TDT_UINT8},     {"int32", STK_TDT_INT32},     {"int64", STK_TDT_INT64},
                 {"float32", STK_TDT_FLOAT32}, {"float64", STK_TDT_FLOAT64}};
const size_t k_ntdtypes = sizeof k_tdtypes / sizeof *k_tdtypes;

/* "float32 x 4 values per record" / "label lists of up to 3 ..." for T; "" without targets. */
void target_text(const stk_target_info *t, char *buf, size_t cap)
{
    buf[0] = 0;
    for (size_t i = 0; i < k_ntdtypes; i++) {
        if (k_tdtypes[i].dtype != t->dtype)
            continue;
        if (t->kind == STK_TARGET_LABELS)
            snprintf(buf, cap, "label lists of up to %u (int32, -1 padded) over %u classes", t->size, t->classes);
        else
            snprintf(buf, cap, "%s x %u values per record", k_tdtypes[i].name, t->size);
    }
}

const char *base_name(const char *p)
{
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : (p ? p : "-");
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
