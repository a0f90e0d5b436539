/* SPDX-License-Identifier: MIT */
/*
 * stoker_cli.h — what the `stoker` command files share: exit codes, the helpers of stoker_cli.c
 * (usage errors, number and size arguments, opening a dataset) and the commands, one file per
 * group: stoker_pack.c (pack), stoker_data.c (info, ls, get), stoker_verify.c (verify),
 * doctor*.c (doctor), run.c (run).
 */
#ifndef STK_STOKER_CLI_H
#define STK_STOKER_CLI_H

#include "stoker.h"

#include <stddef.h>
#include <stdint.h>

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_BAD 3
#define EXIT_BUSY 4 /* pack: another pack holds DST */
#define EXIT_NOT_DATASET 5 /* verify, info: DST is no dataset */

extern const char *g_prog; /* "stoker", for messages */

/* "PROG: FMT" and USAGE on stderr, exit EXIT_USAGE. */
void die_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* --help or -h */
int is_help(const char *a);
/* A decimal number without sign: 0, or -1 if S is not one. */
int parse_u64(const char *s, uint64_t *out);
/* 512M, 1G, 1.5G, 4096, 64K, 2GiB ... (binary multiples): 0, or -1. */
int parse_size(const char *s, uint64_t *out);
/* B bytes as "1.5 MiB". */
void human(double b, char *buf, size_t cap);
/* PATH opened as a dataset, or exit EXIT_FAIL with the library's message. */
stk_dataset *open_dataset(const char *path);
/* 0, or EXIT_NOT_DATASET with the reason printed: a folder with no image and no shard. */
int refuse_non_dataset(stk_dataset *ds, const char *path);

/* The target dtypes by name (--target-dtype, info). */
typedef struct cli_tdtype {
    const char *name;
    int dtype;
} cli_tdtype;
extern const cli_tdtype k_tdtypes[];
extern const size_t k_ntdtypes;
/* "float32 x 4 values per record" / "label lists of up to 3 ..." for T; "" without targets. */
void target_text(const stk_target_info *t, char *buf, size_t cap);
/* The last component of P ("-" for NULL). */
const char *base_name(const char *p);

int cmd_pack(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_verify(int argc, char **argv);

#endif
