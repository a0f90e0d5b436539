/* SPDX-License-Identifier: MIT */
/*
 * cache.c — the cache directory's size accounting and whole-file eviction (see cache.h). Usage is
 * the sum of the regular files under the root, walked at each fetch (a cache holds shards: a few
 * thousand files at most); recency is the file's mtime, which a user sets when it opens a cached
 * file. Eviction takes LOCK_EX|LOCK_NB on the candidate: a file that another process (or another
 * dataset of this one) is reading is held LOCK_SH and is skipped.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int stk__mkdirs(const char *path, char *err)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return stk__err(err, STK_E_INVALID, "%s: path too long", path);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char keep = *s;
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return stk__err(err, -errno, "mkdir %s: %s", p, strerror(errno));
            *s = keep;
            if (!keep)
                break;
        }
    }
    return STK_OK;
}

int stk__cache_open(stk__cache *c, const char *dir, uint64_t limit, char *err)
{
    memset(c, 0, sizeof *c);
    c->lockfd = -1;
    const char *e = getenv("STOKER_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int n;
    if (dir && *dir)
        n = snprintf(c->root, sizeof c->root, "%s", dir);
    else if (e && *e)
        n = snprintf(c->root, sizeof c->root, "%s", e);
    else if (x && *x)
        n = snprintf(c->root, sizeof c->root, "%s/stoker", x);
    else if (h && *h)
        n = snprintf(c->root, sizeof c->root, "%s/.cache/stoker", h);
    else
        return stk__err(err, STK_E_INVALID, "no cache directory: set STOKER_CACHE_DIR");
    if (n >= (int)sizeof c->root)
        return stk__err(err, STK_E_INVALID, "cache directory path too long");
    c->limit = limit;
    const char *lim = getenv("STOKER_CACHE_BYTES");
    if (!limit && lim && *lim) {
        char *end;
        unsigned long long v = strtoull(lim, &end, 10);
        if (*end)
            return stk__err(err, STK_E_INVALID, "STOKER_CACHE_BYTES='%s': a number of bytes", lim);
        c->limit = v;
    }
    int rc = stk__mkdirs(c->root, err);
    if (rc != STK_OK)
        return rc;
    char lp[PATH_MAX + 8];
    snprintf(lp, sizeof lp, "%s/.lock", c->root);
    c->lockfd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (c->lockfd < 0)
        return stk__err(err, -errno, "cache %s: %s", lp, strerror(errno));
    return STK_OK;
}

void stk__cache_close(stk__cache *c)
{
    if (c && c->lockfd >= 0)
        close(c->lockfd);
    if (c)
        c->lockfd = -1;
}

int stk__cache_lock(stk__cache *c, char *err)
{
    while (flock(c->lockfd, LOCK_EX) != 0)
        if (errno != EINTR)
            return stk__err(err, -errno, "cache %s/.lock: flock: %s", c->root, strerror(errno));
    return STK_OK;
}

void stk__cache_unlock(stk__cache *c)
{
    flock(c->lockfd, LOCK_UN);
}

typedef struct cand {
    char *path;
    int64_t mtime_ns;
    uint64_t bytes; /* with its side files */
} cand;

typedef struct walk {
    uint64_t total;
    cand *c;
    size_t n, cap;
    const char *suffix;
} walk;

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void walk_dir(const char *dir, walk *w, int depth)
{
    if (depth > 32)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p)
            continue;
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk_dir(p, w, depth + 1);
            continue;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        w->total += (uint64_t)st.st_size;
        if (!w->suffix || !ends_with(de->d_name, w->suffix))
            continue;
        if (w->n == w->cap) {
            size_t nc = w->cap ? w->cap * 2 : 64;
            cand *c = realloc(w->c, nc * sizeof *c);
            if (!c)
                continue;
            w->c = c;
            w->cap = nc;
        }
        char *dup = stk__strdup(p);
        if (!dup)
            continue;
        w->c[w->n++] = (cand){dup, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                              (uint64_t)st.st_size};
    }
    closedir(d);
}

uint64_t stk__cache_usage(const stk__cache *c)
{
    walk w = {0};
    walk_dir(c->root, &w, 0);
    return w.total;
}

static int by_age(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

int stk__cache_make_room(stk__cache *c, uint64_t need, const char *suffix, char *err)
{
    if (!c->limit)
        return STK_OK;
    if (need > c->limit)
        return stk__err(err, STK_E_TOO_LARGE,
                        "cache %s: %llu bytes are needed, the limit is %llu bytes", c->root,
                        (unsigned long long)need, (unsigned long long)c->limit);
    walk w = {.suffix = suffix};
    walk_dir(c->root, &w, 0);
    if (w.n)
        qsort(w.c, w.n, sizeof *w.c, by_age);
    uint64_t used = w.total;
    for (size_t i = 0; i < w.n && used + need > c->limit; i++) {
        int fd = open(w.c[i].path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) { /* nobody reads it */
            char side[PATH_MAX + 8];
            struct stat st;
            if (unlink(w.c[i].path) == 0)
                used -= STK__MIN(used, w.c[i].bytes);
            const char *sfx[] = {"-lock", ".etag"};
            for (size_t k = 0; k < 2; k++) {
                snprintf(side, sizeof side, "%s%s", w.c[i].path, sfx[k]);
                if (stat(side, &st) == 0 && unlink(side) == 0)
                    used -= STK__MIN(used, (uint64_t)st.st_size);
            }
        }
        close(fd);
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.c[i].path);
    free(w.c);
    if (used + need > c->limit)
        return stk__err(err, STK_E_TOO_LARGE,
                        "cache %s: %llu bytes needed but only %llu of its %llu-byte limit are free "
                        "after evicting every shard not in use", c->root, (unsigned long long)need,
                        (unsigned long long)(c->limit - STK__MIN(c->limit, used)),
                        (unsigned long long)c->limit);
    return STK_OK;
}
