/* SPDX-License-Identifier: MIT */
/* test_loader_close_blocked.c — stk_loader_stop and stk_loader_destroy called from another thread
 * while the consumer is blocked in stk_loader_next: next wakes and returns STK_E_CANCELLED
 * ("being stopped"), nothing touches freed memory (this test runs under ASan and TSan too), and
 * after a stop the loader starts again and delivers a whole epoch.
 * The consumer blocks for certain: every read is delayed by STK_P_FAULT_DELAY_US (2 s), so no
 * batch can be ready before; the test waits until the consumer is inside next (h->in_next, read
 * under h->mu) instead of sleeping. alarm() turns a hang (the old behaviour) into a failure.
 * stk-test: concurrency (stop/destroy racing a blocked consumer) */
#include "loader_internal.h"
#include "test_loader_util.h"
#include "test_loader_inside.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct consumer {
    stk_loader *h;
    int timeout_ms;
    int rc;
    const stk_batch *b;
} consumer;

static void *consume(void *arg)
{
    consumer *c = arg;
    c->rc = stk_loader_next(c->h, NULL, c->timeout_ms, &c->b);
    return NULL;
}

/* A started loader whose every read waits 2 s (DELAY_US), or none (DELAY_US = 0). */
static stk_loader *slow_loader(const tl_data *d, int delay_us)
{
    stk_loader *h = tl_loader(d->path, 4, 2);
    T_OK(stk_loader_set(h, STK_P_IO_BACKEND, STK_IO_PREAD));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, delay_us ? 1000000 : 0));
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_US, delay_us));
    T_OK(stk_loader_start(h));
    return h;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* stop from this thread wakes the consumer blocked without a timeout; the loader restarts. */
static void stop_wakes_next(const tl_data *d)
{
    stk_loader *h = slow_loader(d, 2000000);
    consumer c = {h, -1, 1, NULL};
    pthread_t th;
    T_CHECK(pthread_create(&th, NULL, consume, &c) == 0, "pthread_create");
    tl_wait_inside_next(h, "the consumer thread");
    T_OK(stk_loader_stop(h));
    pthread_join(th, NULL);
    T_CHECK(c.rc == STK_E_CANCELLED && c.b == NULL, "next woken by stop returned %d (%s), batch %p",
            c.rc, stk_strerror(c.rc), (const void *)c.b);
    T_CHECK(strstr(stk_loader_last_error(h), "being stopped"), "last_error: %s", stk_loader_last_error(h));
    const stk_batch *b = NULL;
    T_CHECK(stk_loader_next(h, NULL, 0, &b) == STK_E_STATE && !b, "next after stop: not started");
    /* the same handle starts again (without the delay) and delivers a whole epoch */
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, 0));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    T_CHECK(tl_run(h, &e, -1) == STK_END, "epoch after restart ends with STK_END");
    tl_check_cover(&e, d);
    tl_epoch_free(&e);
    stk_loader_destroy(h);
}

/* destroy from this thread wakes the consumer blocked in a timed wait, long before the timeout. */
static void destroy_wakes_next(const tl_data *d)
{
    stk_loader *h = slow_loader(d, 2000000);
    consumer c = {h, 100000, 1, NULL};
    pthread_t th;
    T_CHECK(pthread_create(&th, NULL, consume, &c) == 0, "pthread_create");
    tl_wait_inside_next(h, "the consumer thread");
    double t0 = now_s();
    stk_loader_destroy(h); /* returns only once the consumer has left next */
    pthread_join(th, NULL);
    double took = now_s() - t0;
    T_CHECK(c.rc == STK_E_CANCELLED && c.b == NULL, "next woken by destroy returned %d (%s)", c.rc,
            stk_strerror(c.rc));
    T_CHECK(took < 60.0, "destroy and the woken next took %.1f s (the timeout was 100 s)", took);
}

int main(void)
{
    alarm(240); /* a consumer never woken would hang: fail instead */
    tl_data d;
    tl_data_make(&d, "close-blocked", 12);
    tl_write(&d);
    stop_wakes_next(&d);
    destroy_wakes_next(&d);
    tl_data_free(&d);
    printf("ok\n");
    return 0;
}
