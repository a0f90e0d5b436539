/* SPDX-License-Identifier: MIT */
/*
 * folder.h — source listings: an ImageFolder root (torchvision's class and file order) or a
 * `path<TAB>label` list file. Used by `stoker pack` and by the files layout of the reader.
 * Internal.
 */
#ifndef STK_FOLDER_H
#define STK_FOLDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct stk__filelist {
    size_t n;          /* files */
    char **paths;      /* full paths (root joined), in dataset order */
    char **rel;        /* paths relative to the root / as written in the list file */
    int32_t *labels;
    char **classes;    /* class names, label = position; NULL/0 for list files */
    size_t nclasses;
    char *root;
} stk__filelist;

/*
 * Scan an ImageFolder ROOT exactly as torchvision.datasets.ImageFolder does: classes = sorted
 * names of the subdirectories of ROOT (byte order = Python's str order for UTF-8), label =
 * position; files = every file under each class directory (recursively, following symlinks)
 * whose lowercased name ends with one of torchvision's IMG_EXTENSIONS (.jpg .jpeg .png .ppm
 * .bmp .pgm .tif .tiff .webp), ordered as `sorted(os.walk(...))` then sorted file names.
 * ERR: STK__ERRLEN bytes.
 */
int stk__folder_scan(const char *root, stk__filelist *out, char *err);

/*
 * Parse a list file's TEXT (LEN bytes): one `path<TAB>label` per line; blank lines and lines
 * starting with '#' are ignored; CRLF accepted; label is a decimal int32 >= 0. Relative paths
 * are joined to BASE_DIR (the list file's directory). Errors name the line number.
 */
int stk__list_parse(const char *text, size_t len, const char *base_dir, stk__filelist *out, char *err);

/*
 * Read the list file PATH (a regular file, 4 GiB at most; reads retried on EINTR) and parse it
 * as stk__list_parse does, relative paths joined to PATH's folder. Errors name PATH (and the
 * line). The one reader of list files: `stoker pack` and the files layout both use it.
 */
int stk__list_read(const char *path, stk__filelist *out, char *err);

void stk__filelist_free(stk__filelist *l);

/* 1 when P (N bytes) starts like a JPEG (FF D8 FF). */
int stk__is_jpeg(const uint8_t *p, size_t n);

#endif
