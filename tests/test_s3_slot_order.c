/* SPDX-License-Identifier: MIT */
/*
 * test_s3_slot_order — request slots shared by downloads (stk__s3_budget, src/fetch/s3.c) go to
 * the download begun first (docs/S3.md "Streaming", step 3). Through the tests' proxy, every
 * request going upstream 1 s after it arrives, two slots shared by three calls begun in turn,
 * each once the proxy has seen the first request of the one before: C (one part), A (three
 * parts), B (three parts). When C's part ends its slot must go to A, which waits with a part in
 * flight, not to B, which waits with none: every part of A reaches the proxy before B's first.
 * Until 2026-12-05 B took it (A noticed a slot given back only when a part of its own ended or
 * after 100 ms). The bytes of all three are checked against what was uploaded.
 */
#include "s3_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#define PART (1u << 20)

typedef struct call {
    const stk__s3_cfg *c;
    const char *bucket, *key;
    uint64_t size;
    int fd, rc;
    char err[STK__ERRLEN];
} call;

static void *run(void *arg)
{
    call *k = arg;
    stk__s3_fetch f = {k->key, k->size, k->fd, 0};
    stk__s3_stats st = {0};
    k->rc = stk__s3_get_many(k->c, k->bucket, &f, 1, &st, k->err);
    return NULL;
}

/* Wait until the proxy has logged a request for KEY (60 s at most). */
static void wait_request(const char *log, const char *key)
{
    char want[300];
    snprintf(want, sizeof want, "request GET /%s", key);
    for (int i = 0; i < 6000; i++) {
        if (access(log, R_OK) == 0) {
            char *t = s3u_read_log(log);
            int seen = strstr(t, want) != NULL;
            free(t);
            if (seen)
                return;
        }
        usleep(10000);
    }
    T_CHECK(0, "the proxy never saw a request for %s", key);
}

/* A call of C fetching KEY (SIZE bytes) into a file of TMP. */
static call make_call(const stk__s3_cfg *c, const char *bucket, const char *key, uint64_t size,
                      const char *tmp)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.got", tmp, strrchr(key, '/') + 1);
    call k = {c, bucket, key, size, open(path, O_RDWR | O_CREAT | O_TRUNC, 0644), -1, ""};
    T_CHECK(k.fd >= 0, "open %s", path);
    return k;
}

int main(void)
{
    s3u_env();
    stk__s3_cfg c = s3u_cfg();
    char bucket[64], log[4200], path[4200];
    s3u_bucket(&c, "slot", bucket, sizeof bucket);
    char *tmp = t_tmpdir("s3slot");
    snprintf(log, sizeof log, "%s/proxy.log", tmp);
    const char *names[3] = {"slot/c", "slot/a", "slot/b"};
    const uint64_t sizes[3] = {PART, 3 * PART, 3 * PART};
    uint8_t *data[3];
    for (int i = 0; i < 3; i++) { /* each object's bytes, uploaded from a file */
        data[i] = malloc(sizes[i]);
        for (uint64_t j = 0; j < sizes[i]; j++)
            data[i][j] = (uint8_t)(j * 131 + (uint64_t)i * 17 + j / 4099);
        snprintf(path, sizeof path, "%s/%d.bin", tmp, i);
        t_write_file(path, data[i], sizes[i]);
        char err[STK__ERRLEN];
        int rc = stk__s3_put_file(&c, bucket, names[i], path, NULL, err);
        T_CHECK(rc == STK_OK, "put %s: %s", names[i], err);
    }

    setenv("STK_PROXY_DELAY_MS", "1000", 1); /* no rate: the delay comes before upstream */
    setenv("STK_PROXY_LOG_REQUESTS", "1", 1);
    pid_t pid = s3u_proxy_start(&c, tmp, log, 0);
    stk__s3_cfg pc = s3u_cfg(); /* AWS_ENDPOINT_URL is the proxy now */
    stk__s3_budget budget;
    stk__s3_budget_init(&budget, 2);
    pc.budget = &budget;
    pc.inflight = 2;
    pc.part_bytes = PART;

    pthread_t th[3];
    call k[3];
    for (int i = 0; i < 3; i++) {
        k[i] = make_call(&pc, bucket, names[i], sizes[i], tmp);
        char key[256];
        snprintf(key, sizeof key, "%s/%s", bucket, names[i]);
        T_CHECK(pthread_create(&th[i], NULL, run, &k[i]) == 0, "pthread_create");
        wait_request(log, key); /* the next call begins after this one's first request */
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    s3u_proxy_stop(pid);
    stk__s3_budget_destroy(&budget);

    for (int i = 0; i < 3; i++) {
        T_CHECK(k[i].rc == STK_OK, "get %s: %s", names[i], k[i].err);
        uint8_t *got = malloc(sizes[i]);
        T_CHECK(pread(k[i].fd, got, sizes[i], 0) == (ssize_t)sizes[i], "read back %s", names[i]);
        T_CHECK(memcmp(got, data[i], sizes[i]) == 0, "%s: the bytes differ", names[i]);
        free(got);
        close(k[i].fd);
        free(data[i]);
    }
    /* the order the proxy saw: C, A, A, A, then B's */
    char *t = s3u_read_log(log);
    printf("%s", t);
    char want_a[256], want_b[256];
    snprintf(want_a, sizeof want_a, "request GET /%s/slot/a ", bucket);
    snprintf(want_b, sizeof want_b, "request GET /%s/slot/b ", bucket);
    int na = 0, nb = 0, a_after_b = 0;
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, want_a, strlen(want_a)) == 0) {
            na++;
            a_after_b |= nb > 0;
        } else if (strncmp(line, want_b, strlen(want_b)) == 0) {
            nb++;
        }
    }
    free(t);
    T_CHECK(na == 3 && nb == 3, "%d requests for a and %d for b, want 3 each (a retry?)", na, nb);
    T_CHECK(!a_after_b, "a part of a (begun before b) reached the proxy after b's first part: the "
            "slot C gave back went to the later download");
    t_rmtree(tmp);
    free(tmp);
    printf("test_s3_slot_order: ok\n");
    return 0;
}
