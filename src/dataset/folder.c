/* SPDX-License-Identifier: MIT */
/*
 * folder.c — source listings: an ImageFolder root in torchvision's order, or a list file.
 *
 * torchvision.datasets.ImageFolder (0.14) does, in Python:
 *
 *   classes = sorted(e.name for e in os.scandir(root) if e.is_dir())     # follows symlinks
 *   for c in classes:
 *       for dirpath, _, fnames in sorted(os.walk(join(root, c), followlinks=True)):
 *           for f in sorted(fnames):
 *               if join(dirpath, f).lower().endswith(IMG_EXTENSIONS): samples.append(...)
 *
 * Two details matter for the order. First, `sorted(os.walk(...))` sorts the visited directories
 * by their whole path string, not depth-first: "c/a" < "c/a-b" < "c/a/b" because '-' (0x2d)
 * sorts before '/' (0x2f). So we collect every directory under a class, sort the paths, then list
 * each directory's files. Second, Python compares str by code point, which for valid UTF-8 is the
 * same as comparing the bytes (strcmp on unsigned chars). os.walk's "files" are the entries that
 * are not directories (after following symlinks), so a dangling symlink counts as a file; the
 * packer then reports it as unreadable. Directory loops through symlinks are cut (os.walk would
 * recurse until the path gets too long); unreadable directories are skipped, as os.walk does,
 * but named (out->unreadable, with the reason): a class folder pack cannot read is listed in
 * its report, never an empty class in silence (torchvision's ImageFolder raises for it).
 *
 * Empty classes: torchvision raises FileNotFoundError for a class without a valid file unless
 * allow_empty=True. stoker keeps such a class in the class list (labels match torchvision's
 * class_to_idx, which counts it) and simply has no records for it.
 */
#include "folder.h"

#include "common.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const k_exts[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                     ".pgm", ".tif", ".tiff", ".webp"};

int stk__is_jpeg(const uint8_t *p, size_t n)
{
    return n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
}

static int has_image_ext(const char *name)
{
    size_t n = strlen(name);
    for (size_t e = 0; e < STK__ARRAY_LEN(k_exts); e++) {
        size_t m = strlen(k_exts[e]);
        if (n < m)
            continue;
        const char *t = name + n - m;
        size_t i = 0;
        while (i < m && tolower((unsigned char)t[i]) == k_exts[e][i])
            i++;
        if (i == m)
            return 1;
    }
    return 0;
}

void stk__folder_ignored_why(const char *path, char *why, size_t cap)
{
    char exts[128] = "";
    size_t o = 0;
    for (size_t e = 0; e < STK__ARRAY_LEN(k_exts); e++)
        o += (size_t)snprintf(exts + o, sizeof exts - o, "%s%s", e ? " " : "", k_exts[e]);
    const char *base = strrchr(path, '/');
    const char *dot = strrchr(base ? base + 1 : path, '.');
    if (dot && dot[1] && dot != (base ? base + 1 : path))
        snprintf(why, cap, "extension %s is not one of torchvision ImageFolder's image extensions (%s)",
                 dot, exts);
    else
        snprintf(why, cap, "no extension; torchvision's ImageFolder loads only %s", exts);
}

/* ---- growable arrays ------------------------------------------------------------------------ */

typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;

static int sv_push(strvec *s, char *str)
{
    if (!str)
        return STK_E_NOMEM;
    if (stk__grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) {
        free(str);
        return STK_E_NOMEM;
    }
    s->v[s->n++] = str;
    return STK_OK;
}

static void sv_free(strvec *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
    /* strcmp compares as unsigned char: UTF-8 byte order = code point order = Python's. */
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    size_t o = la;
    if (la && a[la - 1] != '/')
        s[o++] = '/';
    memcpy(s + o, b, lb + 1);
    return s;
}

/* ---- directory walk ------------------------------------------------------------------------- */

typedef struct devino {
    dev_t dev;
    ino_t ino;
} devino;

typedef struct walk {
    strvec dirs;     /* every directory visited (full paths) */
    devino *seen;    /* directories on the current path (loop guard) */
    size_t nseen, capseen;
    strvec *unread, *unread_why; /* directories that cannot be listed, and why */
} walk;

/* Note directory DIR, which cannot be listed (errno E), in UNREAD / WHY. */
static int note_unreadable(strvec *unread, strvec *why, const char *dir, int e)
{
    char buf[160];
    snprintf(buf, sizeof buf, "unreadable directory: %s (the images in it are not packed)", strerror(e));
    int rc = sv_push(unread, stk__strdup(dir));
    return rc ? rc : sv_push(why, stk__strdup(buf));
}

static int walk_dir(walk *w, const char *dir, int depth)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return STK_OK;
    for (size_t i = 0; i < w->nseen; i++)
        if (w->seen[i].dev == st.st_dev && w->seen[i].ino == st.st_ino)
            return STK_OK; /* symlink loop */
    if (depth > 256)
        return STK_OK;
    DIR *d = opendir(dir);
    if (!d) /* os.walk skips unreadable directories: so do we, naming them */
        return note_unreadable(w->unread, w->unread_why, dir, errno);
    char *copy = stk__strdup(dir);
    int rc = sv_push(&w->dirs, copy);
    if (rc)
        goto out;
    if ((rc = stk__grow((void **)&w->seen, &w->capseen, w->nseen + 1, sizeof *w->seen)) != STK_OK)
        goto out;
    w->seen[w->nseen++] = (devino){st.st_dev, st.st_ino};
    struct dirent *e;
    strvec sub = {0};
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int isdir = 0;
        if (e->d_type == DT_DIR) {
            isdir = 1;
        } else if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
            struct stat s2;
            if (fstatat(dirfd(d), e->d_name, &s2, 0) == 0 && S_ISDIR(s2.st_mode))
                isdir = 1;
        }
        if (isdir && (rc = sv_push(&sub, join(dir, e->d_name))) != STK_OK)
            break;
    }
    for (size_t i = 0; rc == STK_OK && i < sub.n; i++)
        rc = walk_dir(w, sub.v[i], depth + 1);
    sv_free(&sub);
    w->nseen--;
out:
    closedir(d);
    return rc;
}

/* Files (non-directories after following symlinks) of DIR with an image extension, sorted;
 * the other files' names, sorted, into IGNORED; DIR into UNREAD (with why) when it cannot be
 * listed (any more: it could when walked). */
static int list_files(const char *dir, strvec *out, strvec *ignored, strvec *unread, strvec *unread_why)
{
    DIR *d = opendir(dir);
    if (!d)
        return note_unreadable(unread, unread_why, dir, errno);
    struct dirent *e;
    int rc = STK_OK;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (e->d_type == DT_DIR)
            continue;
        if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
            struct stat s2;
            if (fstatat(dirfd(d), e->d_name, &s2, 0) == 0 && S_ISDIR(s2.st_mode))
                continue;
        }
        strvec *to = has_image_ext(e->d_name) ? out : ignored;
        if ((rc = sv_push(to, stk__strdup(e->d_name))) != STK_OK)
            break;
    }
    closedir(d);
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    if (ignored->n > 1)
        qsort(ignored->v, ignored->n, sizeof *ignored->v, cmp_str);
    return rc;
}

typedef struct entries {
    char **paths, **rel;
    int32_t *labels;
    size_t n, cap;
    strvec ignored; /* full paths of the files left out for their name */
    strvec unread, unread_why; /* directories that cannot be listed, and why */
} entries;

static int ent_push(entries *en, char *path, char *rel, int32_t label)
{
    if (!path || !rel) {
        free(path);
        free(rel);
        return STK_E_NOMEM;
    }
    if (en->n == en->cap) {
        size_t nc = en->cap ? en->cap * 2 : 256;
        char **np = realloc(en->paths, nc * sizeof *np);
        if (np)
            en->paths = np;
        char **nr = realloc(en->rel, nc * sizeof *nr);
        if (nr)
            en->rel = nr;
        int32_t *nl = realloc(en->labels, nc * sizeof *nl);
        if (nl)
            en->labels = nl;
        if (!np || !nr || !nl) {
            free(path);
            free(rel);
            return STK_E_NOMEM;
        }
        en->cap = nc;
    }
    en->paths[en->n] = path;
    en->rel[en->n] = rel;
    en->labels[en->n] = label;
    en->n++;
    return STK_OK;
}

static void ent_move(entries *en, stk__filelist *out)
{
    out->n = en->n;
    out->paths = en->paths;
    out->rel = en->rel;
    out->labels = en->labels;
    out->ignored = en->ignored.v;
    out->nignored = en->ignored.n;
    out->unreadable = en->unread.v;
    out->unreadable_why = en->unread_why.v;
    out->nunreadable = en->unread.n;
    memset(en, 0, sizeof *en);
}

static void ent_free(entries *en)
{
    for (size_t i = 0; i < en->n; i++) {
        free(en->paths[i]);
        free(en->rel[i]);
    }
    free(en->paths);
    free(en->rel);
    free(en->labels);
    sv_free(&en->ignored);
    sv_free(&en->unread);
    sv_free(&en->unread_why);
    memset(en, 0, sizeof *en);
}

/* The class folders of ROOT (subdirectories, symlinks followed), sorted. */
static int list_classes(const char *root, strvec *classes, char *err)
{
    DIR *d = opendir(root);
    if (!d)
        return stk__err(err, -errno, "%s: cannot list", root);
    int rc = STK_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int isdir = e->d_type == DT_DIR;
        if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
            struct stat s2;
            isdir = fstatat(dirfd(d), e->d_name, &s2, 0) == 0 && S_ISDIR(s2.st_mode);
        }
        if (isdir && (rc = sv_push(classes, stk__strdup(e->d_name))) != STK_OK)
            break;
    }
    closedir(d);
    if (rc)
        return stk__err(err, rc, "%s: out of memory while scanning", root);
    if (classes->n == 0)
        return stk__err(err, STK_E_EMPTYSET, "%s: no class folders (an ImageFolder root holds one "
                                             "folder per class)", root);
    qsort(classes->v, classes->n, sizeof *classes->v, cmp_str);
    if (classes->n > INT32_MAX)
        return stk__err(err, STK_E_RANGE, "%s: too many classes", root);
    return STK_OK;
}

/* The image files of class folder CDIR (label C) into EN, in torchvision's order; `rel` is the
 * path past its first SKIP bytes (the root and its '/'). */
static int scan_class(const char *cdir, int32_t c, size_t skip, entries *en)
{
    walk w = {.unread = &en->unread, .unread_why = &en->unread_why};
    int rc = walk_dir(&w, cdir, 0);
    if (rc == STK_OK && w.dirs.n > 1)
        qsort(w.dirs.v, w.dirs.n, sizeof *w.dirs.v, cmp_str);
    for (size_t i = 0; rc == STK_OK && i < w.dirs.n; i++) {
        strvec files = {0}, ign = {0};
        rc = list_files(w.dirs.v[i], &files, &ign, &en->unread, &en->unread_why);
        for (size_t f = 0; rc == STK_OK && f < files.n; f++) {
            char *p = join(w.dirs.v[i], files.v[f]);
            char *r = p ? stk__strdup(p + skip) : NULL;
            rc = ent_push(en, p, r, c);
        }
        for (size_t f = 0; rc == STK_OK && f < ign.n; f++)
            rc = sv_push(&en->ignored, join(w.dirs.v[i], ign.v[f]));
        sv_free(&files);
        sv_free(&ign);
    }
    sv_free(&w.dirs);
    free(w.seen);
    return rc;
}

int stk__folder_scan(const char *root, stk__filelist *out, char *err)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(root, &st) != 0)
        return stk__err(err, -errno, "%s", root);
    if (!S_ISDIR(st.st_mode))
        return stk__err(err, STK_E_INVALID, "%s: not a directory", root);
    strvec classes = {0};
    entries en = {0};
    int rc = list_classes(root, &classes, err);
    if (rc)
        goto fail;
    /* join() adds a '/' unless ROOT ends with one: skip exactly that prefix for `rel`. */
    size_t skip = strlen(root);
    if (skip == 0 || root[skip - 1] != '/')
        skip++;
    for (size_t c = 0; c < classes.n && rc == STK_OK; c++) {
        char *cdir = join(root, classes.v[c]);
        rc = cdir ? scan_class(cdir, (int32_t)c, skip, &en) : STK_E_NOMEM;
        free(cdir);
    }
    if (rc) {
        stk__err(err, rc, "%s: scan failed", root);
        goto fail;
    }
    ent_move(&en, out);
    out->classes = classes.v;
    out->nclasses = classes.n;
    out->root = stk__strdup(root);
    if (!out->root) {
        classes.v = NULL;
        stk__filelist_free(out);
        return stk__err(err, STK_E_NOMEM, "out of memory");
    }
    return STK_OK;
fail:
    sv_free(&classes);
    ent_free(&en);
    return rc;
}

void stk__filelist_free(stk__filelist *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        if (l->paths)
            free(l->paths[i]);
        if (l->rel)
            free(l->rel[i]);
    }
    free(l->paths);
    free(l->rel);
    free(l->labels);
    for (size_t i = 0; i < l->nclasses; i++)
        free(l->classes[i]);
    free(l->classes);
    free(l->root);
    free(l->lines);
    free(l->origin);
    free(l->targets);
    for (size_t i = 0; i < l->nbad; i++) {
        free(l->bad_where[i]);
        free(l->bad_why[i]);
    }
    free(l->bad_where);
    free(l->bad_why);
    for (size_t i = 0; i < l->nignored; i++)
        free(l->ignored[i]);
    free(l->ignored);
    for (size_t i = 0; i < l->nunreadable; i++) {
        free(l->unreadable[i]);
        free(l->unreadable_why[i]);
    }
    free(l->unreadable);
    free(l->unreadable_why);
    memset(l, 0, sizeof *l);
}
