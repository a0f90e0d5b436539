/* SPDX-License-Identifier: MIT */
/*
 * common.h — the layer every stage uses: errors, CRC32C, clocks, aligned memory, the
 * counter-based PRNG, bounded queues and stage timers. Internal (stk__ prefix); never installed.
 *
 * Dependencies run one way: common <- format/folder/dataset <- reader, decode/augment <- loader.
 */
#ifndef STK_COMMON_H
#define STK_COMMON_H

#include "stoker.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define STK__ERRLEN 512

#define STK__MIN(a, b) ((a) < (b) ? (a) : (b))
#define STK__MAX(a, b) ((a) > (b) ? (a) : (b))
#define STK__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define STK__UNUSED(x) ((void)(x))

/* Format MSG into BUF (STK__ERRLEN bytes) and return CODE, so that `return stk__err(...)` works.
 * If CODE is a negated errno, ": <strerror>" is appended. */
int stk__err(char *buf, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CRC32C (Castagnoli), hardware (SSE4.2) when the CPU has it. Start with crc = 0. */
uint32_t stk__crc32c(uint32_t crc, const void *data, size_t len);

/* Monotonic clock in seconds / nanoseconds. */
double stk__now(void);
uint64_t stk__now_ns(void);
/* Process CPU time (user, system) in seconds. */
void stk__cpu_times(double *user, double *sys);

/* Page-aligned (or ALIGN-aligned) zeroed memory; stk__free_aligned(NULL) is a no-op. */
void *stk__alloc_aligned(size_t align, size_t size);
void stk__free_aligned(void *p);
size_t stk__page_size(void);
static inline size_t stk__round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

int stk__online_cpus(void);

/* ---- CPU budget (cpus.c): stk_cpu_budget_get with its inputs named, for the tests. -----------
 * ROOT stands in for "/" when reading /proc/self/cgroup, /proc/self/mountinfo and the cgroup
 * files ("" = the live system); LOCAL_WORLD_SIZE is the variable's value (NULL = unset). The
 * affinity is always the calling thread's. */
void stk__cpu_budget_at(const char *root, const char *local_world_size, stk_cpu_budget *out);
/* The smallest cgroup CPU quota along this process's cgroup path (v2 and v1), in CPUs: > 0 and
 * the directory that sets it in WHERE, or 0 when there is none (or nothing could be read). */
double stk__cgroup_cpu_quota(const char *root, char *where, size_t cap);

/* Read exactly LEN bytes at OFF (retrying short reads and EINTR): STK_OK, STK_E_TRUNCATED when
 * the file ends first (it is shorter than expected, e.g. it shrank), -errno on a read error.
 * Thread-safe (pread). */
int stk__pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Read from FD's current offset until LEN bytes or the end of the file (retrying short reads and
 * EINTR); *GOT = the bytes read. STK_OK, or -errno on a read error (*GOT: what was read before). */
int stk__read_upto(int fd, void *buf, size_t len, size_t *got);
/* What file mode MODE is, for messages: "regular file", "directory", "FIFO", "socket",
 * "character device", "block device", "symbolic link" or "unknown file type". */
const char *stk__file_kind(unsigned mode);
/* Open PATH read-only as a source file (an image, a shard, a list), never blocking on it and
 * never opening anything but a regular file: stat (symlinks followed) first, so a FIFO, socket or
 * device is not opened at all; then open with O_NONBLOCK (the path may name something else by
 * now: a FIFO then opens at once instead of waiting for a writer) and fstat the descriptor, which
 * must be a regular file; O_NONBLOCK is cleared before returning. Returns the descriptor
 * (O_CLOEXEC) with *ST filled, or a negative status with WHY (STK__ERRLEN bytes) set: -errno when
 * it cannot be opened (WHY: strerror), STK_E_IO when it is not a regular file (WHY: "not a
 * regular file: FIFO"). EXTRA_FLAGS is ORed into open's (O_DIRECT). Thread-safe. */
int stk__open_regular(const char *path, int extra_flags, struct stat *st, char *why);

/* Room for NEED elements of ELEM bytes in the array *V of *CAP: grown by doubling (from 16), *V
 * and *CAP updated. STK_OK, or STK_E_NOMEM with *V and *CAP as they were. */
int stk__grow(void **v, size_t *cap, size_t need, size_t elem);

/* Duplicate a string (NULL on failure). */
char *stk__strdup(const char *s);

/* The index of NAME in the N strings of NAMES (a table of op names), -1 if absent or NULL. */
int stk__name_index(const char *const *names, int n, const char *name);

/* ---- Counter-based PRNG (Philox-4x32-10): pure function of (key, counter). -------------------
 * A stream keyed by (seed, a, b): e.g. (seed, epoch, sample index) for augmentation or
 * (seed, epoch, 0) for the epoch permutation. Identical results on any thread, in any order. */
typedef struct stk__rng {
    uint32_t key[2];
    uint32_t ctr[4];
    uint32_t buf[4];
    int avail;
} stk__rng;

void stk__rng_init(stk__rng *r, uint64_t seed, uint64_t a, uint64_t b);
uint32_t stk__rng_u32(stk__rng *r);
uint64_t stk__rng_u64(stk__rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double stk__rng_uniform(stk__rng *r);
/* Uniform integer in [0, n) without modulo bias (n >= 1). */
uint64_t stk__rng_below(stk__rng *r, uint64_t n);
/* A stateless 64-bit mix of (seed, a, b) (e.g. for fault draws). */
uint64_t stk__hash3(uint64_t seed, uint64_t a, uint64_t b);

/* ---- Stage timers. Each thread accumulates into an atomic set; snapshot any time. ---------- */
typedef struct stk__stage_clock {
    _Atomic uint64_t busy_ns, starved_ns, blocked_ns;
    _Atomic uint64_t items, bytes, errors;
    _Atomic uint32_t threads;
} stk__stage_clock;

void stk__clock_add(_Atomic uint64_t *field, uint64_t ns);
void stk__clock_snapshot(const stk__stage_clock *c, stk_stage_stats *out);

/* ---- Bounded MPMC queue of pointers (mutex + condition variables). ------------------------
 * push blocks while full, pop blocks while empty; both return STK_E_CANCELLED once closed
 * (pop still drains what is queued first). Time spent blocked is added to *waited_ns if given. */
typedef struct stk__queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    void **items;
    size_t cap, head, count;
    bool closed;
} stk__queue;

int stk__queue_init(stk__queue *q, size_t cap);
void stk__queue_destroy(stk__queue *q);
int stk__queue_push(stk__queue *q, void *item, uint64_t *waited_ns);
int stk__queue_pop(stk__queue *q, void **item, uint64_t *waited_ns);
/* Non-blocking pop: STK_OK, STK_TIMEOUT when empty, STK_E_CANCELLED when closed and empty. */
int stk__queue_trypop(stk__queue *q, void **item);
void stk__queue_close(stk__queue *q);
/* Reopen an empty closed queue for reuse. */
void stk__queue_reset(stk__queue *q);

/* Add ms to a CLOCK_MONOTONIC timespec (for pthread_cond_timedwait with a monotonic cond). */
void stk__deadline(struct timespec *ts, int64_t ms);
/* Init a condition variable that uses CLOCK_MONOTONIC. */
int stk__cond_init_monotonic(pthread_cond_t *c);

#endif
