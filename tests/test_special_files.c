/* SPDX-License-Identifier: MIT */
/*
 * test_special_files — files that are not regular files among the sources of the files layout:
 * an ImageFolder class holding a FIFO x.JPEG, a socket s.jpg (bound here), a symlink z.jpg to
 * /dev/zero and a directory y.jpg (walked, as torchvision walks it: its image is a record).
 * What must hold: stk__open_regular refuses each at once naming its kind ("not a regular file:
 * FIFO") and hands out regular files without O_NONBLOCK; the dataset lists the special files as
 * records in torchvision's order (the indices stay ImageFolder's) and stk_dataset_read refuses
 * them naming the path and kind; a loader epoch over the folder ends, delivers every index
 * once, the regular images intact and the three special files substituted and named in the
 * error list with their kind. Each part runs in a child process under alarm(): a FIFO opened
 * for reading waits for a writer for ever, so a regression fails here instead of hanging.
 */
#include "test_loader_util.h"

#include "common.h"

#include <errno.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_root[4200], g_c0[4300];
static const char *const k_special[] = {"x.JPEG", "s.jpg", "z.jpg"};
static const char *const k_kind[] = {"FIFO", "socket", "character device"};

static void make_folder(void)
{
    char *tmp = t_tmpdir("special");
    snprintf(g_root, sizeof g_root, "%s/src", tmp);
    free(tmp);
    T_CHECK(t_make_imagefolder(g_root, 2, 3, 16, 48, 5) == 6, "6 images");
    snprintf(g_c0, sizeof g_c0, "%s/class_000", g_root);
    char p[4400];
    snprintf(p, sizeof p, "%s/x.JPEG", g_c0);
    T_CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
    snprintf(p, sizeof p, "%s/s.jpg", g_c0);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    T_CHECK(strlen(p) < sizeof a.sun_path, "socket path too long: %s", p);
    memcpy(a.sun_path, p, strlen(p) + 1);
    T_CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0, "bind %s", p);
    close(s);
    snprintf(p, sizeof p, "%s/z.jpg", g_c0);
    T_CHECK(symlink("/dev/zero", p) == 0, "symlink %s", p);
    snprintf(p, sizeof p, "%s/y.jpg", g_c0);
    t_mkdirs(p);
    snprintf(p, sizeof p, "%s/y.jpg/inner.jpg", g_c0);
    size_t len;
    uint8_t *j = t_make_jpeg(40, 30, 99, 0, 90, 0, &len);
    t_write_file(p, j, len);
    free(j);
}

/* stk__open_regular on each kind. */
static void part_open(int unused)
{
    (void)unused;
    char p[4400], why[STK__ERRLEN];
    struct stat st;
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", g_c0, k_special[i]);
        int fd = stk__open_regular(p, 0, &st, why);
        T_CHECK(fd == STK_E_IO && strstr(why, "not a regular file: ") && strstr(why, k_kind[i]),
                "%s: %d `%s`, want STK_E_IO `not a regular file: %s`", p, fd, why, k_kind[i]);
    }
    snprintf(p, sizeof p, "%s/y.jpg", g_c0);
    int fd = stk__open_regular(p, 0, &st, why);
    T_CHECK(fd == STK_E_IO && !strcmp(why, "not a regular file: directory"), "%s: %d `%s`", p, fd, why);
    snprintf(p, sizeof p, "%s/nothing.jpg", g_c0);
    fd = stk__open_regular(p, 0, &st, why);
    T_CHECK(fd == -ENOENT, "%s: %d `%s`", p, fd, why);
    snprintf(p, sizeof p, "%s/y.jpg/inner.jpg", g_c0);
    fd = stk__open_regular(p, 0, &st, why);
    T_CHECK(fd >= 0 && S_ISREG(st.st_mode), "%s: %d `%s`", p, fd, why);
    int fl = fcntl(fd, F_GETFL);
    T_CHECK(fl >= 0 && !(fl & O_NONBLOCK), "O_NONBLOCK cleared (flags %#x)", fl);
    close(fd);
}

/* The dataset of the folder: index of each name in *IDX (-1 when absent). */
static void find_records(stk_dataset *ds, long idx[3], long *inner)
{
    uint64_t n = stk_dataset_count(ds);
    idx[0] = idx[1] = idx[2] = *inner = -1;
    for (uint64_t i = 0; i < n; i++) {
        char name[4400];
        T_OK(stk_dataset_record_name(ds, i, name, sizeof name));
        for (int k = 0; k < 3; k++) {
            const char *t = strrchr(name, '/');
            if (t && !strcmp(t + 1, k_special[k]))
                idx[k] = (long)i;
        }
        if (strstr(name, "y.jpg/inner.jpg"))
            *inner = (long)i;
    }
}

static void part_dataset(int unused)
{
    (void)unused;
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, g_root));
    T_CHECK(stk_dataset_count(ds) == 10, "%llu records, want 10 (7 images, 3 special files)",
            (unsigned long long)stk_dataset_count(ds));
    long idx[3], inner;
    find_records(ds, idx, &inner);
    T_CHECK(inner >= 0, "y.jpg/inner.jpg is a record");
    uint8_t buf[1 << 16];
    for (int k = 0; k < 3; k++) {
        T_CHECK(idx[k] >= 0, "%s is a record", k_special[k]);
        size_t len = 0;
        int rc = stk_dataset_read(ds, (uint64_t)idx[k], buf, sizeof buf, &len, NULL);
        const char *le = stk_dataset_last_error(ds);
        T_CHECK(rc == STK_E_IO && strstr(le, k_special[k]) && strstr(le, k_kind[k]),
                "read %s: %s `%s`", k_special[k], stk_status_name(rc), le);
    }
    size_t len = 0;
    T_OK(stk_dataset_read(ds, (uint64_t)inner, buf, sizeof buf, &len, NULL));
    stk_dataset_destroy(ds);
}

static void part_loader(int unused)
{
    (void)unused;
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, g_root));
    long idx[3], inner;
    find_records(ds, idx, &inner);
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 4));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(h, STK_P_IO_THREADS, 2));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 16));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 16));
    T_OK(stk_loader_open(h, g_root));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    int rc = tl_run(h, &e, -1);
    T_CHECK(rc == STK_END, "the epoch ended with %s: %s", stk_status_name(rc), stk_loader_last_error(h));
    T_CHECK(e.n == 10, "%zu samples", e.n);
    uint8_t seen[10] = {0};
    for (size_t i = 0; i < e.n; i++) {
        T_CHECK(e.index[i] < 10 && !seen[e.index[i]]++, "index %llu once", (unsigned long long)e.index[i]);
        int special = (long)e.index[i] == idx[0] || (long)e.index[i] == idx[1] || (long)e.index[i] == idx[2];
        T_CHECK(e.subst[i] == special, "record %llu substituted %d", (unsigned long long)e.index[i], e.subst[i]);
        if (!special) {
            stk_record_info ri;
            T_OK(stk_dataset_record(ds, e.index[i], &ri));
            T_CHECK(e.payload[i] == ri.length, "payload of %llu", (unsigned long long)e.index[i]);
        }
    }
    /* (the pipeline may have gone on into epoch 1: its errors are listed too) */
    int named[3] = {0};
    for (uint64_t i = 0; i < stk_loader_error_count(h); i++) {
        stk_record_error re;
        T_OK(stk_loader_error_get(h, i, &re));
        if (re.epoch != e.epoch)
            continue;
        int k = (long)re.index == idx[0] ? 0 : (long)re.index == idx[1] ? 1 : (long)re.index == idx[2] ? 2 : -1;
        T_CHECK(k >= 0 && strstr(re.where, k_special[k]) && strstr(re.reason, "not a regular file") &&
                strstr(re.reason, k_kind[k]), "error %llu: %llu %s: %s", (unsigned long long)i,
                (unsigned long long)re.index, re.where, re.reason);
        named[k]++;
        fprintf(stderr, "  %s: %s\n", re.where, re.reason);
    }
    for (int k = 0; k < 3; k++)
        T_CHECK(named[k] == 1, "%s named %d times in epoch %llu", k_special[k], named[k], (unsigned long long)e.epoch);
    tl_epoch_free(&e);
    stk_loader_destroy(h);
    stk_dataset_destroy(ds);
}

int main(void)
{
    make_folder();
    int failed = 0;
    failed += !tl_in_child("stk__open_regular", part_open, 0, tl_sanitized() ? 120 : 30);
    failed += !tl_in_child("stk_dataset_read", part_dataset, 0, tl_sanitized() ? 120 : 30);
    failed += !tl_in_child("loader epoch", part_loader, 0, tl_sanitized() ? 120 : 30);
    char *tmp = stk__strdup(g_root);
    *strrchr(tmp, '/') = 0;
    t_rmtree(tmp);
    free(tmp);
    if (failed) {
        fprintf(stderr, "test_special_files: %d of 3 parts failed\n", failed);
        return 1;
    }
    printf("test_special_files: ok\n");
    return 0;
}
