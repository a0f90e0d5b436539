/* SPDX-License-Identifier: MIT */
/* test_loader_two_consumers.c — a second thread calling stk_loader_next while another is inside
 * it gets STK_E_STATE at once, last_error "another thread is in stk_loader_next", and no batch;
 * the first thread still delivers every record of the epoch exactly once, then STK_END.
 * The first consumer is inside next for certain: every read is delayed 1.5 s
 * (STK_P_FAULT_DELAY_US), and the test waits for h->in_next (read under h->mu), not a sleep.
 * stk-test: concurrency (two consumer threads on one loader) */
#include "loader_internal.h"
#include "test_loader_util.h"
#include "test_loader_inside.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct consumer {
    stk_loader *h;
    tl_epoch e;
    int rc;
} consumer;

static void *consume(void *arg)
{
    consumer *c = arg;
    c->rc = tl_run(c->h, &c->e, -1);
    return NULL;
}

int main(void)
{
    alarm(240);
    tl_data d;
    tl_data_make(&d, "two-consumers", 24);
    tl_write(&d);
    stk_loader *h = tl_loader(d.path, 4, 2);
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, STK_IO_PREAD));
    T_OK(stk_loader_set(h, STK_P_IO_THREADS, 8));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, 1000000));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_US, 1500000));
    T_OK(stk_loader_start(h));

    consumer c = {h, {0}, 1};
    pthread_t th;
    T_CHECK(pthread_create(&th, NULL, consume, &c) == 0, "pthread_create");
    tl_wait_inside_next(h, "the first consumer");
    /* batch 0 cannot be ready yet: the old code answered STK_TIMEOUT here (and with a longer
     * timeout waited for, and could take, the first thread's batch) */
    const stk_batch *b = (const stk_batch *)&c;
    int rc = stk_loader_next(h, NULL, 0, &b);
    T_CHECK(rc == STK_E_STATE, "second consumer got %d (%s), want STK_E_STATE", rc, stk_strerror(rc));
    T_CHECK(b == NULL, "no batch for the second consumer");
    T_CHECK(strstr(stk_loader_last_error(h), "another thread is in stk_loader_next"), "last_error: %s",
            stk_loader_last_error(h));
    rc = stk_loader_next(h, NULL, -1, &b);
    T_CHECK(rc == STK_E_STATE && b == NULL, "second consumer, no timeout: %d (%s)", rc, stk_strerror(rc));

    pthread_join(th, NULL);
    T_CHECK(c.rc == STK_END, "first consumer ended with %d (%s): %s", c.rc, stk_strerror(c.rc),
            stk_loader_last_error(h));
    tl_check_cover(&c.e, &d);
    T_CHECK(c.e.nbatches == 6, "%zu batches, want 6", c.e.nbatches);
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.batches == 6 && st.samples == 24, "stats: %llu batches, %llu samples delivered",
            (unsigned long long)st.batches, (unsigned long long)st.samples);
    tl_epoch_free(&c.e);
    stk_loader_destroy(h);
    tl_data_free(&d);
    printf("ok\n");
    return 0;
}
