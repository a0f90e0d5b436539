/* SPDX-License-Identifier: MIT */
/*
 * folder.h — source listings: an ImageFolder root (torchvision's class and file order) or a
 * manifest (manifest.h). Used by `stoker pack` and by the files layout of the reader.
 * Internal.
 */
#ifndef STK_FOLDER_H
#define STK_FOLDER_H

#include <stddef.h>
#include <stdint.h>

#include "stoker.h"

typedef struct stk__filelist {
    size_t n;          /* files */
    char **paths;      /* full paths (root joined), in dataset order */
    char **rel;        /* paths relative to the root / as written in the list file */
    int32_t *labels;
    char **classes;    /* class names, label = position; NULL/0 for list files */
    size_t nclasses;
    char *root;
    /* manifests (manifest.h) */
    size_t *lines;      /* the manifest line of each file, NULL for an ImageFolder */
    char *origin;       /* the manifest's name, for messages */
    stk_target_info tinfo; /* dtype STK_TDT_NONE: no targets */
    uint8_t *targets;   /* n rows of tinfo.size elements of tinfo.dtype */
    size_t nbad;        /* lines not used: where ("FILE:LINE") and why */
    char **bad_where, **bad_why;
    size_t nignored;    /* ImageFolder: files under the class folders left out for their name */
    char **ignored;     /* (full paths, in scan order; stk__folder_ignored_why says why) */
    size_t nunreadable; /* ImageFolder: directories under ROOT that cannot be listed (EACCES...) */
    char **unreadable, **unreadable_why; /* (full paths, in scan order, and why) */
} stk__filelist;

/*
 * Scan an ImageFolder ROOT exactly as torchvision.datasets.ImageFolder does: classes = sorted
 * names of the subdirectories of ROOT (byte order = Python's str order for UTF-8), label =
 * position; files = every file under each class directory (recursively, following symlinks)
 * whose lowercased name ends with one of torchvision's IMG_EXTENSIONS (.jpg .jpeg .png .ppm
 * .bmp .pgm .tif .tiff .webp), ordered as `sorted(os.walk(...))` then sorted file names. The
 * other files under the class folders, which ImageFolder does not load either, are listed in
 * out->ignored; the directories that cannot be listed (a class folder of mode 000) in
 * out->unreadable. ERR: STK__ERRLEN bytes.
 */
int stk__folder_scan(const char *root, stk__filelist *out, char *err);
/* Why ImageFolder leaves out the file PATH (one of a filelist's `ignored`), into WHY (CAP bytes):
 * "extension .gif is not one of torchvision ImageFolder's image extensions (.jpg ...)". */
void stk__folder_ignored_why(const char *path, char *why, size_t cap);

void stk__filelist_free(stk__filelist *l);

/* 1 when P (N bytes) starts like a JPEG (FF D8 FF). */
int stk__is_jpeg(const uint8_t *p, size_t n);

#endif
