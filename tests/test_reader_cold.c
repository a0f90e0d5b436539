/* SPDX-License-Identifier: MIT */
/*
 * test_reader_cold.c — buffered io_uring reads of data that is not in the page cache (a dataset
 * larger than memory, read without O_DIRECT): every record of every epoch arrives with its bytes,
 * the last ones of the epoch included, and a stop midway leaves nothing in flight. While an
 * epoch runs, a thread keeps dropping the shards' pages from the cache (POSIX_FADV_DONTNEED, as
 * memory pressure would), so the reads at the end of the epoch are cold too. A cold buffered
 * read is finished by the kernel as task work of the thread that submitted it; a submitter that
 * ended with such reads in flight had them failed with EFAULT.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "dataset.h"
#include "format.h"
#include "order.h"
#include "reader.h"
#include "testutil.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "test_reader_util.h"

#define N_REC 1500

/* Drop the shards' pages from the page cache: the next reads go to the disk. */
static void evict(const stk_dataset *ds)
{
    for (uint32_t i = 0; i < ds->nshards; i++)
        T_CHECK(posix_fadvise(ds->shards[i].fd, 0, 0, POSIX_FADV_DONTNEED) == 0, "fadvise %s",
                ds->shards[i].path);
}

typedef struct evictor {
    const stk_dataset *ds;
    _Atomic int stop;
    pthread_t th;
} evictor;

static void *evict_loop(void *arg)
{
    evictor *v = arg;
    while (!atomic_load(&v->stop)) {
        evict(v->ds);
        usleep(500);
    }
    return NULL;
}

static void evictor_start(evictor *v, const stk_dataset *ds)
{
    v->ds = ds;
    atomic_store(&v->stop, 0);
    T_CHECK(pthread_create(&v->th, NULL, evict_loop, v) == 0, "thread");
}

static void evictor_stop(evictor *v)
{
    atomic_store(&v->stop, 1);
    pthread_join(v->th, NULL);
}

static void cold_epochs(const char *what, stk_dataset *ds, const t_expect *e, stk__reader_config c,
                        int epochs)
{
    for (int ep = 0; ep < epochs; ep++) {
        evictor v;
        evictor_start(&v, ds);
        t_run_result res;
        t_run_epoch(ds, e, &c, (uint64_t)ep, NULL, &res);
        evictor_stop(&v);
        T_CHECK(res.ok == e->n && res.errors == 0, "%s, cold epoch %d: %llu ok, %llu errors (first: %s)",
                what, ep, (unsigned long long)res.ok, (unsigned long long)res.errors, res.first_error);
        T_CHECK(res.info.direct_reads == 0, "%s: %llu O_DIRECT reads", what,
                (unsigned long long)res.info.direct_reads);
        if (ep == 0)
            printf("  %-34s %s\n", what, res.info.note);
    }
}

int main(void)
{
    char *tmp = t_tmpdir("reader-cold");
    t_expect e;
    t_expect_make(&e, N_REC, 11);
    stk_dataset *ds = t_shards_at(tmp, "shards", &e);
    T_CHECK(ds->count == N_REC, "count %llu", (unsigned long long)ds->count);
    for (uint32_t i = 0; i < ds->nshards; i++) /* written back: clean pages can be dropped */
        T_CHECK(fdatasync(ds->shards[i].fd) == 0, "fdatasync %s", ds->shards[i].path);

    if (!t_uring_works(ds)) {
        printf("io_uring unavailable here: nothing to test\n");
        stk_dataset_destroy(ds);
        t_rmtree(tmp);
        free(tmp);
        t_expect_free(&e);
        return 77;
    }
    stk__reader_config c = t_default_config();
    c.backend = STK_IO_URING;
    c.direct = 0;
    cold_epochs("io_uring buffered, qd 32", ds, &e, c, 6);
    c.queue_depth = 4;
    cold_epochs("io_uring buffered, qd 4", ds, &e, c, 3);

    /* O_DIRECT asked for, every shard refused it at open: read buffered, cold */
    int saved[64];
    T_CHECK(ds->nshards <= 64, "shards");
    for (uint32_t i = 0; i < ds->nshards; i++) {
        saved[i] = ds->shards[i].fd_direct;
        ds->shards[i].fd_direct = -1;
    }
    c = t_default_config();
    c.backend = STK_IO_URING;
    cold_epochs("io_uring, O_DIRECT refused", ds, &e, c, 3);
    for (uint32_t i = 0; i < ds->nshards; i++)
        ds->shards[i].fd_direct = saved[i];

    /* stop midway on cold data, then whole epochs on the same reader */
    c = t_default_config();
    c.backend = STK_IO_URING;
    c.direct = 0;
    c.queue_depth = 8;
    c.hold_buffers = 4;
    evictor v;
    evictor_start(&v, ds);
    t_stop_midway(ds, &e, &c);
    evictor_stop(&v);

    stk_dataset_destroy(ds);
    t_expect_free(&e);
    t_rmtree(tmp);
    free(tmp);
    printf("ok\n");
    return 0;
}
