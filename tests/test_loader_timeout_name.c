/* SPDX-License-Identifier: MIT */
/*
 * test_loader_timeout_name — when stk_loader_next times out, stk_loader_last_error names the read
 * in flight the longest: every read held up 2 s by injected latency (STK_P_FAULT_DELAY_*), a
 * next() with a 300 ms timeout returns STK_TIMEOUT and the message names the record being read
 * ("shard-00000.lmdb key K" on shards with the pread and io_uring backends, the file's path in
 * the files layout) and how long it has been read. alarm() guards against a hang.
 * stk-test: concurrency (the consumer reads what the reader threads record)
 */
#include "test_loader_util.h"

#include <signal.h>
#include <unistd.h>

static void check(const char *path, int backend, const char *want, const char *what)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 2));
    T_OK(stk_loader_set(h, STK_P_WORKERS, 1));
    T_OK(stk_loader_set(h, STK_P_IO_THREADS, 2));
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, backend));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, 16));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, 16));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, 1000000));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_US, 2000000));
    T_OK(stk_loader_open(h, path));
    int rc = stk_loader_start(h);
    if (rc == STK_E_UNSUPPORTED || (rc != STK_OK && backend == STK_IO_URING)) {
        fprintf(stderr, "  %s: skipped (%s)\n", what, stk_loader_last_error(h));
        stk_loader_destroy(h);
        return;
    }
    T_OK(rc);
    const stk_batch *b = NULL;
    usleep(100000); /* the first reads are under way */
    rc = stk_loader_next(h, NULL, 300, &b);
    const char *le = stk_loader_last_error(h);
    T_CHECK(rc == STK_TIMEOUT, "%s: next() returned %s", what, stk_status_name(rc));
    T_CHECK(strstr(le, "not ready within 300 ms") && strstr(le, "oldest read in flight, for") && strstr(le, want),
            "%s: last error `%s`, want it to name `%s`", what, le, want);
    fprintf(stderr, "  %s: %s\n", what, le);
    stk_loader_destroy(h);
}

int main(void)
{
    alarm(tl_sanitized() ? 240 : 60);
    tl_data d;
    tl_data_make(&d, "tmoname", 8);
    tl_write(&d);
    check(d.path, STK_IO_PREAD, "shard-00000.lmdb key ", "shards, pread");
    check(d.path, STK_IO_URING, "shard-00000.lmdb key ", "shards, io_uring");
    char root[4300];
    snprintf(root, sizeof root, "%s/folder", d.dir);
    T_CHECK(t_make_imagefolder(root, 2, 3, 16, 48, 9) == 6, "6 images");
    char want[4400];
    snprintf(want, sizeof want, "%s/class_00", root);
    check(root, STK_IO_AUTO, want, "files layout");
    tl_data_free(&d);
    printf("test_loader_timeout_name: ok\n");
    return 0;
}
