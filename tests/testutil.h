/* SPDX-License-Identifier: MIT */
/* testutil.h — helpers for stoker's C tests: temp dirs, JPEG encoding, generated ImageFolders. */
#ifndef STK_TESTUTIL_H
#define STK_TESTUTIL_H

#include "stoker.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define T_SKIP 77

/* Fail the test with file:line and a message. */
#define T_FAIL(...)                                                                            \
    do {                                                                                       \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                  \
        fprintf(stderr, __VA_ARGS__);                                                          \
        fprintf(stderr, "\n");                                                                 \
        exit(1);                                                                               \
    } while (0)
/* T_CHECK(cond, fmt, ...): fail with the condition's text and a formatted message. */
#define T_CHECK(cond, ...)                                                                     \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "FAIL %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
/* Check a stoker status is STK_OK. */
#define T_OK(expr)                                                                             \
    do {                                                                                       \
        int t_rc_ = (expr);                                                                    \
        if (t_rc_ != STK_OK)                                                                   \
            T_FAIL("%s returned %d (%s)", #expr, t_rc_, stk_strerror(t_rc_));                 \
    } while (0)

/* A fresh directory under $TMPDIR (or /tmp), removed by t_rmtree. Returned string is malloc'd. */
char *t_tmpdir(const char *tag);
/* rm -rf PATH (refuses "/" and ""). */
void t_rmtree(const char *path);
/* mkdir -p. */
void t_mkdirs(const char *path);
/* Write / read a whole file (read: malloc'd, *len set; NULL if missing). */
void t_write_file(const char *path, const void *data, size_t len);
uint8_t *t_read_file(const char *path, size_t *len);

/* Deterministic RGB test image (smooth gradients + texture + an index-dependent pattern). */
void t_make_rgb(uint8_t *rgb, int w, int h, uint64_t seed);

enum t_subsamp { T_444 = 0, T_422 = 1, T_420 = 2, T_GRAY = 3, T_440 = 4, T_411 = 5 };
/* Encode RGB (w x h) as JPEG with TurboJPEG. flags: T_PROGRESSIVE, T_CMYK (encode as CMYK),
 * T_RESTART (restart markers every row of MCUs). Returns malloc'd bytes, *len set. */
#define T_PROGRESSIVE 1
#define T_RESTART 2
uint8_t *t_encode_jpeg(const uint8_t *rgb, int w, int h, int subsamp, int quality, int flags, size_t *len);
/* Generated JPEG (t_make_rgb + t_encode_jpeg). */
uint8_t *t_make_jpeg(int w, int h, uint64_t seed, int subsamp, int quality, int flags, size_t *len);
/* Decode with TurboJPEG (the independent reference) to RGB. malloc'd; *w, *h set. */
uint8_t *t_decode_ref(const uint8_t *jpeg, size_t len, int *w, int *h);

/* Make an ImageFolder at ROOT: NCLASSES classes named "class_000".., PER_CLASS JPEGs each with
 * sizes varying between MINSIDE and MAXSIDE and rotating subsamplings. Returns the file count. */
size_t t_make_imagefolder(const char *root, int nclasses, int per_class, int minside, int maxside,
                          uint64_t seed);

/* Open file descriptors of this process (entries of /proc/self/fd), -1 if unreadable. */
int t_count_fds(void);
/* Resident set size of this process in KiB (/proc/self/statm), 0 if unreadable. */
long t_rss_kb(void);

/* xorshift64 step: the next value of the test's own PRNG state *S (nonzero). */
uint64_t t_xorshift(uint64_t *s);
/* Payload of record I for LMDB tests: 0 .. ~20 KB (inline values, one-page and multi-page
 * overflow values; every 50th record from 7 on is empty), bytes a function of I. malloc'd. */
uint8_t *t_payload(uint64_t i, size_t *len);

/* Run a shell command; returns its exit status (or -1). */
int t_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Path of the stoker CLI from $STOKER (NULL if unset/empty). */
const char *t_stoker_cli(void);

#endif
