/* SPDX-License-Identifier: MIT */
/* test_dataset_rofs.c — a dataset on read-only media: LMDB cannot create its lock file (EROFS),
 * so shards are opened MDB_NOLOCK and their identity is recorded; reads work; once the shard
 * file changes (size/mtime) stk__dataset_check refuses to go on (STK_E_CHANGED), and a shard
 * that shrank is STK_E_TRUNCATED. Needs root (it mounts a small tmpfs); skips otherwise. */
#include "testutil.h"

#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char mnt[4200];
static int mounted;

static void cleanup(void)
{
    if (mounted)
        umount2(mnt, MNT_DETACH);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("skip: needs root to mount a read-only tmpfs\n");
        return T_SKIP;
    }
    char *dir = t_tmpdir("rofs");
    snprintf(mnt, sizeof mnt, "%s/mnt", dir);
    t_mkdirs(mnt);
    if (mount("stk-test", mnt, "tmpfs", 0, "size=16m") != 0) {
        printf("skip: cannot mount tmpfs: %s\n", strerror(errno));
        t_rmtree(dir);
        return T_SKIP;
    }
    mounted = 1;
    atexit(cleanup);
    char dst[4300];
    snprintf(dst, sizeof dst, "%s/ds", mnt);
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_open(w, dst));
    uint8_t p[5000];
    for (int i = 0; i < 50; i++) {
        memset(p, i, sizeof p);
        T_OK(stk_writer_add(w, p, 100 + (size_t)i * 90, i % 3, "x.jpg"));
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    T_CHECK(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0, "remount ro: %s", strerror(errno));

    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    int rc = stk_dataset_open(ds, dst);
    T_CHECK(rc == STK_OK, "open on read-only media: %s", stk_dataset_last_error(ds));
    T_CHECK(ds->shards[0].nolock == 1, "opened without a lock file");
    char lock[4400];
    snprintf(lock, sizeof lock, "%s/shard-00000.lmdb-lock", dst);
    T_CHECK(access(lock, F_OK) != 0, "no lock file created");
    uint8_t buf[5000];
    size_t len;
    T_OK(stk_dataset_read(ds, 49, buf, sizeof buf, &len, NULL));
    T_CHECK(len == 100 + 49 * 90 && buf[0] == 49, "read");
    T_OK(stk__dataset_check(ds, NULL));

    /* the shard changes under the open dataset: appended bytes (size and mtime) */
    T_CHECK(mount(NULL, mnt, NULL, MS_REMOUNT, NULL) == 0, "remount rw");
    char shard[4400];
    snprintf(shard, sizeof shard, "%s/shard-00000.lmdb", dst);
    int fd = open(shard, O_WRONLY | O_APPEND);
    T_CHECK(fd >= 0 && write(fd, "junk", 4) == 4, "append");
    close(fd);
    char err[STK__ERRLEN];
    rc = stk__dataset_check(ds, err);
    T_CHECK(rc == STK_E_CHANGED && strstr(err, "shard-00000.lmdb"), "changed: %d %s", rc, err);
    /* and shrinks */
    struct stat st;
    stat(shard, &st);
    T_CHECK(truncate(shard, st.st_size / 2) == 0, "truncate");
    rc = stk__dataset_check(ds, err);
    T_CHECK(rc == STK_E_TRUNCATED && strstr(err, "shrank"), "truncated: %d %s", rc, err);
    stk_dataset_destroy(ds);

    umount2(mnt, 0);
    mounted = 0;
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
