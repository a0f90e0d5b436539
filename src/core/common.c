/* SPDX-License-Identifier: MIT */
/*
 * common.c — status strings, errors, CRC32C, clocks, memory, the Philox PRNG and the bounded
 * queue shared by every stage.
 */

#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef STK_BUILD_FEATURES
#define STK_BUILD_FEATURES ""
#endif

unsigned stk_version(void) { return STK_VERSION_NUMBER; }

const char *stk_version_string(void)
{
    return STK_VERSION_STRING " (" STK_BUILD_FEATURES ")";
}

int stk_has_feature(int feature)
{
    switch (feature) {
    case STK_FEATURE_URING:
#ifdef STK_HAVE_URING
        return 1;
#else
        return 0;
#endif
    case STK_FEATURE_CUDA:
#ifdef STK_HAVE_CUDA
        return 1;
#else
        return 0;
#endif
    case STK_FEATURE_S3:
#ifdef STK_HAVE_S3
        return 1;
#else
        return 0;
#endif
    default:
        return 0;
    }
}

const char *stk_strerror(int status)
{
    switch (status) {
#define STK__CASE(name, value, text)                                                           \
    case value:                                                                                \
        return text;
        STK_STATUS_LIST(STK__CASE)
#undef STK__CASE
    default:
        break;
    }
    if (status < 0 && status > -1000)
        return strerror(-status); /* glibc: static strings for known errno values */
    return "unknown status";
}

const char *stk_status_name(int status)
{
    switch (status) {
#define STK__CASE(name, value, text)                                                           \
    case value:                                                                                \
        return #name;
        STK_STATUS_LIST(STK__CASE)
#undef STK__CASE
    default:
        break;
    }
    if (status < 0 && status > -1000) {
        const char *n = strerrorname_np(-status);
        if (n)
            return n;
    }
    return "UNKNOWN";
}

int stk__err(char *buf, int code, const char *fmt, ...)
{
    if (!buf)
        return code;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, STK__ERRLEN, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (code < 0 && code > -1000 && (size_t)n < STK__ERRLEN)
        snprintf(buf + n, STK__ERRLEN - (size_t)n, ": %s", strerror(-code));
    return code;
}

/* ---- CRC32C ------------------------------------------------------------------------------ */

/*
 * CRC32C: the record checksum of format v1 (Castagnoli polynomial 0x1EDC6F41, reflected
 * 0x82F63B78, init and final xor 0xFFFFFFFF — the iSCSI/ext4 CRC, what Python's `crc32c`
 * package and Go's crc32.Castagnoli compute). On x86-64 with SSE4.2 the `crc32` instruction
 * runs 8 bytes per step; elsewhere slicing-by-8 tables.
 */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

/* Hardware CRC on three interleaved streams (the crc32 instruction has a latency of 3 cycles and
 * a throughput of 1: one stream uses a third of it), combined by "shift the CRC over N zero
 * bytes" operators, as in Mark Adler's crc32c.c. The tables apply the operator for LONG and SHORT
 * zero bytes one byte of the CRC at a time. */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc_long[4][256], crc_short[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        sq[n] = gf2_times(mat, mat[n]);
}

/* Tables applying LEN (a power of two) zero bytes to a raw CRC register. */
static void crc_zeros(uint32_t zeros[4][256], size_t len)
{
    uint32_t even[32], odd[32], row = 1;
    odd[0] = 0x82F63B78u; /* one zero bit */
    for (int n = 1; n < 32; n++, row <<= 1)
        odd[n] = row;
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four */
    /* odd = 4 zero bits = half a byte; square until it covers LEN bytes */
    const uint32_t *op = odd;
    for (;;) {
        gf2_square(even, odd); /* 1, 4, 16, ... zero bytes */
        op = even;
        len >>= 1;
        if (!len)
            break;
        gf2_square(odd, even);
        op = odd;
        len >>= 1;
        if (!len)
            break;
    }
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_times(op, n);
        zeros[1][n] = gf2_times(op, n << 8);
        zeros[2][n] = gf2_times(op, n << 16);
        zeros[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t crc_shift(const uint32_t zeros[4][256], uint32_t crc)
{
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^
           zeros[3][crc >> 24];
}

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
    if (crc_hw) {
        crc_zeros(crc_long, CRC_LONG);
        crc_zeros(crc_short, CRC_SHORT);
    }
#endif
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
/* While 3 * BLOCK bytes remain: CRC three consecutive BLOCK-byte runs in parallel (the crc32
 * instruction has a 3-cycle latency and a throughput of one per cycle), then combine them by
 * shifting each partial CRC over the following block with the ZEROS tables. Advances *p, *n. */
__attribute__((target("sse4.2"), always_inline)) static inline uint64_t
crc_hw_3way(uint64_t c64, const uint8_t **pp, size_t *np, size_t block, const uint32_t zeros[4][256])
{
    const uint8_t *p = *pp;
    size_t n = *np;
    while (n >= 3 * block) {
        uint64_t c1 = 0, c2 = 0, w0, w1, w2;
        for (const uint8_t *end = p + block; p < end; p += 8) {
            memcpy(&w0, p, 8);
            memcpy(&w1, p + block, 8);
            memcpy(&w2, p + 2 * block, 8);
            c64 = __builtin_ia32_crc32di(c64, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        c64 = crc_shift(zeros, (uint32_t)c64) ^ (uint32_t)c1;
        c64 = crc_shift(zeros, (uint32_t)c64) ^ (uint32_t)c2;
        p += 2 * block;
        n -= 3 * block;
    }
    *pp = p;
    *np = n;
    return c64;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw8(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    while (n && ((uintptr_t)p & 7)) {
        c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
        n--;
    }
    /* three streams of LONG, then SHORT bytes; each block's CRC shifted over the next block */
    c64 = crc_hw_3way(c64, &p, &n, CRC_LONG, crc_long);
    c64 = crc_hw_3way(c64, &p, &n, CRC_SHORT, crc_short);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
    return (uint32_t)c64;
}
#endif

uint32_t stk__crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc_once, crc_init);
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (crc_hw)
        return ~crc_hw8(c, data, len);
#endif
    return ~crc_sw(c, data, len);
}

/* ---- clocks, memory ----------------------------------------------------------------------- */

uint64_t stk__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double stk__now(void) { return (double)stk__now_ns() * 1e-9; }

void stk__cpu_times(double *user, double *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (user)
        *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    if (sys)
        *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

size_t stk__page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

void *stk__alloc_aligned(size_t align, size_t size)
{
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (size == 0)
        size = 1;
    void *p = NULL;
    if (posix_memalign(&p, align, stk__round_up(size, align)) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

void stk__free_aligned(void *p) { free(p); }

int stk__online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int stk__pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return STK_E_TRUNCATED;
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return STK_OK;
}

int stk__grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return STK_OK;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *nv = realloc(*v, nc * elem);
    if (!nv)
        return STK_E_NOMEM;
    *v = nv;
    *cap = nc;
    return STK_OK;
}

int stk__read_upto(int fd, void *buf, size_t len, size_t *got)
{
    uint8_t *p = buf;
    *got = 0;
    while (*got < len) {
        ssize_t r = read(fd, p + *got, len - *got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return STK_OK;
}

const char *stk__file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "regular file";
    case S_IFDIR: return "directory";
    case S_IFIFO: return "FIFO";
    case S_IFSOCK: return "socket";
    case S_IFCHR: return "character device";
    case S_IFBLK: return "block device";
    case S_IFLNK: return "symbolic link";
    default: return "unknown file type";
    }
}

/* stat (or fstat, FD >= 0) of PATH: -errno, STK_E_IO when not a regular file, else STK_OK. */
static int regular_check(const char *path, int fd, struct stat *st, char *why)
{
    if ((fd >= 0 ? fstat(fd, st) : stat(path, st)) != 0) {
        int e = errno;
        snprintf(why, STK__ERRLEN, "%s", strerror(e));
        return -e;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, STK__ERRLEN, "not a regular file: %s", stk__file_kind((unsigned)st->st_mode));
        return STK_E_IO;
    }
    return STK_OK;
}

int stk__open_regular(const char *path, int extra_flags, struct stat *st, char *why)
{
    int rc = regular_check(path, -1, st, why);
    if (rc != STK_OK)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra_flags);
    if (fd < 0) {
        int e = errno;
        struct stat now; /* replaced since the stat (a socket gives ENXIO): name what is there */
        if (regular_check(path, -1, &now, why) == STK_E_IO)
            return STK_E_IO;
        snprintf(why, STK__ERRLEN, "%s", strerror(e));
        return -e;
    }
    int fl;
    if ((rc = regular_check(path, fd, st, why)) != STK_OK ||
        ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)) {
        if (rc == STK_OK) {
            rc = -errno;
            snprintf(why, STK__ERRLEN, "fcntl: %s", strerror(-rc));
        }
        close(fd);
        return rc;
    }
    return fd;
}

char *stk__strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int stk__name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* ---- Philox-4x32-10 ----------------------------------------------------------------------- */

/*
 * PRNG: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
 * a counter-based generator: the output is a pure function of (key, counter), so the n-th
 * draw for sample i of epoch e is the same on any thread in any order — what makes the order
 * and augmentation independent of worker count.
 */

static void philox_round(uint32_t ctr[4], const uint32_t key[2])
{
    uint64_t p0 = (uint64_t)0xD2511F53u * ctr[0];
    uint64_t p1 = (uint64_t)0xCD9E8D57u * ctr[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ ctr[1] ^ key[0];
    uint32_t n2 = hi0 ^ ctr[3] ^ key[1];
    ctr[0] = n0;
    ctr[1] = lo1;
    ctr[2] = n2;
    ctr[3] = lo0;
}

static void philox10(const uint32_t in[4], const uint32_t key_in[2], uint32_t out[4])
{
    uint32_t c[4] = {in[0], in[1], in[2], in[3]};
    uint32_t k[2] = {key_in[0], key_in[1]};
    for (int i = 0; i < 10; i++) {
        philox_round(c, k);
        k[0] += 0x9E3779B9u;
        k[1] += 0xBB67AE85u;
    }
    memcpy(out, c, sizeof(c));
}

void stk__rng_init(stk__rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = 0;              /* draw counter */
    r->ctr[1] = (uint32_t)b;    /* sample index (low) */
    r->ctr[2] = (uint32_t)(b >> 32) ^ ((uint32_t)(a >> 32) << 16);
    r->ctr[3] = (uint32_t)a;    /* epoch / purpose */
    r->avail = 0;
}

uint32_t stk__rng_u32(stk__rng *r)
{
    if (r->avail == 0) {
        philox10(r->ctr, r->key, r->buf);
        r->ctr[0]++;
        r->avail = 4;
    }
    return r->buf[4 - r->avail--];
}

uint64_t stk__rng_u64(stk__rng *r)
{
    uint64_t hi = stk__rng_u32(r);
    return (hi << 32) | stk__rng_u32(r);
}

double stk__rng_uniform(stk__rng *r) { return (double)(stk__rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t stk__rng_below(stk__rng *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* reject the biased tail */
    uint64_t x;
    do
        x = stk__rng_u64(r);
    while (x >= limit);
    return x % n;
}

uint64_t stk__hash3(uint64_t seed, uint64_t a, uint64_t b)
{
    stk__rng r;
    stk__rng_init(&r, seed, a, b);
    return stk__rng_u64(&r);
}

/* ---- stage clocks ------------------------------------------------------------------------- */

void stk__clock_add(_Atomic uint64_t *field, uint64_t ns)
{
    atomic_fetch_add_explicit(field, ns, memory_order_relaxed);
}

void stk__clock_snapshot(const stk__stage_clock *c, stk_stage_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->busy_s = (double)atomic_load(&c->busy_ns) * 1e-9;
    out->starved_s = (double)atomic_load(&c->starved_ns) * 1e-9;
    out->blocked_s = (double)atomic_load(&c->blocked_ns) * 1e-9;
    out->items = atomic_load(&c->items);
    out->bytes = atomic_load(&c->bytes);
    out->errors = atomic_load(&c->errors);
    out->threads = atomic_load(&c->threads);
}

/* ---- bounded queue ------------------------------------------------------------------------ */

int stk__cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return rc ? -rc : STK_OK;
}

void stk__deadline(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

int stk__queue_init(stk__queue *q, size_t cap)
{
    memset(q, 0, sizeof(*q));
    q->items = calloc(cap ? cap : 1, sizeof(void *));
    if (!q->items)
        return STK_E_NOMEM;
    q->cap = cap ? cap : 1;
    pthread_mutex_init(&q->mu, NULL);
    stk__cond_init_monotonic(&q->not_empty);
    stk__cond_init_monotonic(&q->not_full);
    return STK_OK;
}

void stk__queue_destroy(stk__queue *q)
{
    if (!q->items)
        return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->items);
    q->items = NULL;
}

int stk__queue_push(stk__queue *q, void *item, uint64_t *waited_ns)
{
    pthread_mutex_lock(&q->mu);
    if (q->count == q->cap && !q->closed) {
        uint64_t t0 = stk__now_ns();
        while (q->count == q->cap && !q->closed)
            pthread_cond_wait(&q->not_full, &q->mu);
        if (waited_ns)
            *waited_ns += stk__now_ns() - t0;
    }
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return STK_E_CANCELLED;
    }
    q->items[(q->head + q->count) % q->cap] = item;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return STK_OK;
}

int stk__queue_pop(stk__queue *q, void **item, uint64_t *waited_ns)
{
    pthread_mutex_lock(&q->mu);
    if (q->count == 0 && !q->closed) {
        uint64_t t0 = stk__now_ns();
        while (q->count == 0 && !q->closed)
            pthread_cond_wait(&q->not_empty, &q->mu);
        if (waited_ns)
            *waited_ns += stk__now_ns() - t0;
    }
    if (q->count == 0) {
        pthread_mutex_unlock(&q->mu);
        return STK_E_CANCELLED;
    }
    *item = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return STK_OK;
}

int stk__queue_trypop(stk__queue *q, void **item)
{
    pthread_mutex_lock(&q->mu);
    int rc = STK_OK;
    if (q->count == 0) {
        rc = q->closed ? STK_E_CANCELLED : STK_TIMEOUT;
    } else {
        *item = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void stk__queue_close(stk__queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

void stk__queue_reset(stk__queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = false;
    q->head = 0;
    q->count = 0;
    pthread_mutex_unlock(&q->mu);
}
