/* SPDX-License-Identifier: MIT */
/*
 * test_loader_bad_log.c — bad records are never silent (since 0.5). A dataset of 30 records, two
 * of them not JPEG: over two epochs the log callback gets exactly one message about the loader's
 * first bad record (in delivery order: key 4, named with its dataset index and status) and one
 * summary per epoch ("epoch E: 2 of 30 records were bad ... 2 not a JPEG"), at STK_LOG_WARNING,
 * in the thread calling stk_loader_next; stk_loader_set_log after start is refused. Without a
 * callback the same lines go to stderr, prefixed "stoker: ". A clean dataset logs nothing.
 *
 * stk-test: concurrency
 */
#include "common.h"
#include "test_loader_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#define N 30
#define BS 6

typedef struct logbook {
    char msg[8][1024];
    int n, levels_ok, thread_ok;
    pthread_t consumer;
} logbook;

static void keep(void *user, int level, const char *msg)
{
    logbook *lb = user;
    lb->levels_ok &= level == STK_LOG_WARNING;
    lb->thread_ok &= pthread_equal(pthread_self(), lb->consumer) != 0;
    if (lb->n < 8)
        snprintf(lb->msg[lb->n], sizeof lb->msg[0], "%s", msg);
    lb->n++;
}

static stk_loader *mk(const char *path)
{
    stk_loader *h = tl_loader(path, BS, 3);
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 0.1));
    return h;
}

static void run_epochs(stk_loader *h, int epochs)
{
    for (int e = 0; e < epochs; e++) {
        tl_epoch ep;
        int rc = tl_run(h, &ep, -1);
        T_CHECK(rc == STK_END && ep.n == N, "epoch %d: %s (%zu samples)", e, stk_loader_last_error(h), ep.n);
        tl_epoch_free(&ep);
    }
}

int main(void)
{
    tl_data d;
    tl_data_make(&d, "badlog", N);
    for (int k = 4; k < N; k += 15) { /* records 4 and 19 */
        free(d.payload[k]);
        d.payload[k] = (uint8_t *)strdup("plain text, not an image");
        d.len[k] = strlen((char *)d.payload[k]);
    }
    tl_write(&d);

    /* a callback */
    logbook lb = {.levels_ok = 1, .thread_ok = 1, .consumer = pthread_self()};
    stk_loader *h = mk(d.path);
    T_OK(stk_loader_set_log(h, keep, &lb));
    T_OK(stk_loader_start(h));
    T_CHECK(stk_loader_set_log(h, NULL, NULL) == STK_E_STATE, "set_log after start refused");
    run_epochs(h, 2);
    T_CHECK(lb.n == 3, "3 messages, got %d: %s | %s", lb.n, lb.msg[0], lb.msg[1]);
    T_CHECK(lb.levels_ok && lb.thread_ok, "warnings, in the consumer thread");
    T_CHECK(strstr(lb.msg[0], "bad record shard-00000.lmdb key 4") && strstr(lb.msg[0], "dataset index 4") &&
                strstr(lb.msg[0], "STK_E_NOT_JPEG") && strstr(lb.msg[0], "replaced by record"),
            "first bad record named: %s", lb.msg[0]);
    for (int e = 0; e < 2; e++) {
        char want[64];
        snprintf(want, sizeof want, "epoch %d: 2 of 30 records were bad", e);
        T_CHECK(strstr(lb.msg[1 + e], want) && strstr(lb.msg[1 + e], "2 not a JPEG"), "summary %d: %s", e,
                lb.msg[1 + e]);
    }
    stk_loader_destroy(h);

    /* no callback: stderr */
    char errpath[4400];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", d.dir);
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    T_CHECK(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2, "redirect stderr");
    close(fd);
    h = mk(d.path);
    T_OK(stk_loader_start(h));
    run_epochs(h, 1);
    stk_loader_destroy(h);
    fflush(stderr);
    T_CHECK(dup2(saved, 2) == 2, "restore stderr");
    close(saved);
    size_t len = 0;
    uint8_t *raw = t_read_file(errpath, &len);
    char *text = raw ? calloc(len + 1, 1) : NULL;
    if (text)
        memcpy(text, raw, len);
    free(raw);
    T_CHECK(text && strstr(text, "stoker: bad record shard-00000.lmdb key 4") &&
                strstr(text, "stoker: epoch 0: 2 of 30 records were bad"),
            "stderr: %s", text ? text : "(none)");
    free(text);

    /* a clean dataset: nothing */
    tl_data c;
    tl_data_make(&c, "badlog-clean", 12);
    tl_write(&c);
    logbook lc = {.levels_ok = 1, .thread_ok = 1, .consumer = pthread_self()};
    h = tl_loader(c.path, 4, 2);
    T_OK(stk_loader_set_log(h, keep, &lc));
    T_OK(stk_loader_start(h));
    tl_epoch ep;
    T_CHECK(tl_run(h, &ep, -1) == STK_END, "clean epoch");
    tl_epoch_free(&ep);
    T_CHECK(lc.n == 0, "a clean dataset logs nothing (%d: %s)", lc.n, lc.msg[0]);
    stk_loader_destroy(h);
    tl_data_free(&c);
    tl_data_free(&d);
    printf("test_loader_bad_log: ok\n");
    return 0;
}
