/* SPDX-License-Identifier: MIT */
/* test_folder.c — stk__folder_scan order (torchvision's: whole-path sort of the walked
 * directories, then file names; byte order), extensions, symlinks (followed, loops cut, dangling
 * files listed), empty classes kept; stk__list_parse errors name the line; stk__is_jpeg. */
#include "testutil.h"

#include "common.h"
#include "folder.h"
#include "manifest.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static void touch(const char *root, const char *rel)
{
    char p[4200];
    int n = snprintf(p, sizeof p, "%s/%s", root, rel);
    T_CHECK(n >= 0 && (size_t)n < sizeof p, "path too long: %s/%s", root, rel);
    char d[4200];
    memcpy(d, p, (size_t)n + 1);
    *strrchr(d, '/') = 0;
    t_mkdirs(d);
    t_write_file(p, "x", 1);
}

int main(void)
{
    char *dir = t_tmpdir("folder");
    char root[4200];
    snprintf(root, sizeof root, "%s/root", dir);
    const char *files[] = {"c/x/1.jpg", "c/x-y/1.jpg", "c/x.y/1.jpg", "c/x/y/1.jpg", "c/a.JPEG", "c/b.Png",
                           "c/B.jpg", "c/é.jpg", "c/z.webp", "c/n.txt", "c/noext", "A/1.tif", "a/1.TIFF",
                           "top.jpg"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        touch(root, files[i]);
    char p[4400], q[4400];
    snprintf(p, sizeof p, "%s/empty", root);
    t_mkdirs(p);
    snprintf(p, sizeof p, "%s/c/x/y/loop", root); /* symlink loop back up */
    snprintf(q, sizeof q, "%s/c", root);
    T_CHECK(symlink(q, p) == 0, "symlink loop");
    snprintf(p, sizeof p, "%s/c/dangling.jpg", root);
    T_CHECK(symlink("/nonexistent/x", p) == 0, "dangling");
    snprintf(p, sizeof p, "%s/linkcls", root); /* a class that is a symlink to a directory */
    snprintf(q, sizeof q, "%s/c/x", root);
    T_CHECK(symlink(q, p) == 0, "class symlink");

    stk__filelist l;
    char err[STK__ERRLEN];
    T_OK(stk__folder_scan(root, &l, err));
    const char *classes[] = {"A", "a", "c", "empty", "linkcls"};
    T_CHECK(l.nclasses == 5, "classes %zu", l.nclasses);
    for (size_t i = 0; i < 5; i++)
        T_CHECK(!strcmp(l.classes[i], classes[i]), "class %zu = %s", i, l.classes[i]);
    const char *want[] = {"A/1.tif", "a/1.TIFF", "c/B.jpg", "c/a.JPEG", "c/b.Png", "c/dangling.jpg",
                          "c/z.webp", "c/é.jpg", "c/x/1.jpg", "c/x-y/1.jpg", "c/x.y/1.jpg", "c/x/y/1.jpg",
                          "linkcls/1.jpg", "linkcls/y/1.jpg",
                          /* linkcls = c/x: its y/loop is c again, walked once; c/x inside it is on
                           * the current path and cut */
                          "linkcls/y/loop/B.jpg", "linkcls/y/loop/a.JPEG", "linkcls/y/loop/b.Png",
                          "linkcls/y/loop/dangling.jpg", "linkcls/y/loop/z.webp", "linkcls/y/loop/é.jpg",
                          "linkcls/y/loop/x-y/1.jpg", "linkcls/y/loop/x.y/1.jpg"};
    int32_t wl[] = {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    size_t nw = sizeof want / sizeof *want;
    T_CHECK(l.n == nw, "files %zu want %zu", l.n, nw);
    for (size_t i = 0; i < nw; i++) {
        T_CHECK(!strcmp(l.rel[i], want[i]), "file %zu = %s, want %s", i, l.rel[i], want[i]);
        T_CHECK(l.labels[i] == wl[i], "label of %s", want[i]);
        snprintf(p, sizeof p, "%s/%s", root, want[i]);
        T_CHECK(!strcmp(l.paths[i], p), "full path %s", l.paths[i]);
    }
    stk__filelist_free(&l);
    /* a trailing slash on the root gives the same relative paths */
    snprintf(p, sizeof p, "%s/", root);
    T_OK(stk__folder_scan(p, &l, err));
    T_CHECK(l.n == nw && !strcmp(l.rel[0], "A/1.tif"), "trailing slash");
    stk__filelist_free(&l);

    /* errors */
    snprintf(p, sizeof p, "%s/nothing", dir);
    T_CHECK(stk__folder_scan(p, &l, err) == -ENOENT && strstr(err, p), "missing root: %s", err);
    snprintf(p, sizeof p, "%s/flat", dir);
    t_mkdirs(p);
    touch(p, "img.jpg");
    T_CHECK(stk__folder_scan(p, &l, err) == STK_E_EMPTYSET && strstr(err, "no class folders"), "flat: %s", err);

    /* list files */
    const char *text = "# header\n\na.jpg\t3\r\n/abs/b.jpg\t0\nsub/c d.jpg\t2147483647\n";
    T_OK(stk__list_parse(text, strlen(text), "/base", &l, err));
    T_CHECK(l.n == 3 && l.labels[0] == 3 && l.labels[2] == INT32_MAX, "list parse");
    T_CHECK(!strcmp(l.paths[0], "/base/a.jpg") && !strcmp(l.paths[1], "/abs/b.jpg") &&
                !strcmp(l.paths[2], "/base/sub/c d.jpg") && !strcmp(l.rel[2], "sub/c d.jpg"), "list paths");
    stk__filelist_free(&l);
    struct {
        const char *text, *msg;
    } bad[] = {{"a.jpg 3\n", "line 1: expected"}, {"ok.jpg\t1\nb.jpg\t-1\n", "line 2: label"},
               {"a.jpg\t2147483648\n", "line 1: label too large"}, {"\t4\n", "line 1: empty path"},
               {"a.jpg\t\n", "line 1: label"}, {"x\t1\n\n#c\nb.jpg\t1x\n", "line 4: label"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = stk__list_parse(bad[i].text, strlen(bad[i].text), "/b", &l, err);
        T_CHECK(rc == STK_E_FORMAT && strstr(err, bad[i].msg), "bad list %zu: %d %s", i, rc, err);
    }

    static const uint8_t j[] = {0xFF, 0xD8, 0xFF, 0xE0}, pn[] = {0x89, 'P', 'N', 'G'}, h[] = {0xFF, 0xD8, 0x00};
    T_CHECK(stk__is_jpeg(j, 4) && stk__is_jpeg(j, 3) && !stk__is_jpeg(j, 2) && !stk__is_jpeg(pn, 4) &&
                !stk__is_jpeg(h, 3), "is_jpeg");
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
