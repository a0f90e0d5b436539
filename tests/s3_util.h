/* SPDX-License-Identifier: MIT */
/*
 * s3_util.h — what the s3 tests share: the server's environment (the CTest fixture `s3` starts
 * scripts/s3-server.sh and names its env file in STK_S3_ENV), a bucket of their own, a dataset
 * of several shards written with stk_writer, its upload with the fetch layer's PUT, and the
 * tests' proxy (tests/s3_fault_proxy.py) in front of the server.
 */
#ifndef STK_TEST_S3_UTIL_H
#define STK_TEST_S3_UTIL_H

#include "s3.h"
#include "testutil.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Export the server's AWS_* variables. Exit 77 (skip) only when the Ceph packages are missing;
 * a server that should be there and is not is a failure. */
static inline void s3u_env(void)
{
    if (!stk_has_feature(STK_FEATURE_S3)) {
        printf("skip: built without S3 (STOKER_WITH_S3=OFF or no libcurl/libxml2)\n");
        exit(77);
    }
    const char *path = getenv("STK_S3_ENV");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) {
        if (system("command -v radosgw >/dev/null 2>&1 && command -v ceph-mon >/dev/null 2>&1") != 0) {
            printf("skip: Ceph packages missing (apt-get install ceph-mon ceph-osd radosgw ceph-common)\n");
            exit(77);
        }
        fprintf(stderr, "FAIL: no S3 server environment (STK_S3_ENV=%s): the s3 fixture did not start\n",
                path ? path : "(unset)");
        exit(1);
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *kv = strncmp(line, "export ", 7) == 0 ? line + 7 : line, *eq = strchr(kv, '=');
        if (!eq)
            continue;
        *eq = 0;
        setenv(kv, eq + 1, 1);
    }
    fclose(f);
    unsetenv("AWS_PROFILE");
}

static inline stk__s3_cfg s3u_cfg(void)
{
    stk__s3_cfg c;
    char err[STK__ERRLEN];
    int rc = stk__s3_cfg_from_env(&c, err);
    T_CHECK(rc == STK_OK, "s3 config: %s", err);
    return c;
}

/* A bucket of this test and process: "stk-TAG-PID". */
static inline void s3u_bucket(const stk__s3_cfg *c, const char *tag, char *out, size_t cap)
{
    snprintf(out, cap, "stk-%s-%d", tag, (int)getpid());
    char err[STK__ERRLEN];
    int rc = stk__s3_make_bucket(c, out, err);
    T_CHECK(rc == STK_OK, "make bucket %s: %s", out, err);
}

/* N records of deterministic bytes (record i: t_payload(i) followed by i's bytes, and every 17th
 * large), label i % 5, shards of about SHARD_BYTES, in DIR. */
static inline void s3u_dataset(const char *dir, size_t n, int64_t shard_bytes)
{
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, shard_bytes));
    T_OK(stk_writer_open(w, dir));
    for (size_t i = 0; i < n; i++) {
        size_t len;
        uint8_t *p = t_payload(i, &len);
        if (i % 17 == 3) { /* a few large records, so that shards span several ranged GETs */
            size_t big = 300000 + i * 1000;
            p = realloc(p, big);
            for (size_t k = len; k < big; k++)
                p[k] = (uint8_t)(k * 13 + i);
            len = big;
        }
        T_OK(stk_writer_add(w, p, len, (int32_t)(i % 5), NULL));
        free(p);
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
}

/* Upload every shard-*.lmdb of DIR to s3://BUCKET/PREFIX/ with the fetch layer's PUT. */
static inline size_t s3u_upload(const stk__s3_cfg *c, const char *bucket, const char *prefix,
                                const char *dir)
{
    DIR *d = opendir(dir);
    T_CHECK(d, "opendir %s", dir);
    struct dirent *de;
    size_t n = 0;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "shard-", 6) != 0 || !strstr(de->d_name, ".lmdb") ||
            strstr(de->d_name, "-lock"))
            continue;
        char path[4400], key[1400], err[STK__ERRLEN];
        T_CHECK(snprintf(path, sizeof path, "%s/%s", dir, de->d_name) < (int)sizeof path, "path");
        T_CHECK(snprintf(key, sizeof key, "%s/%s", prefix, de->d_name) < (int)sizeof key, "key");
        int rc = stk__s3_put_file(c, bucket, key, path, NULL, err);
        T_CHECK(rc == STK_OK, "put %s: %s", key, err);
        n++;
    }
    closedir(d);
    return n;
}

/* The proxy's log at PATH as text (NUL-terminated; free it). */
static inline char *s3u_read_log(const char *path)
{
    size_t n = 0;
    char *t = (char *)t_read_file(path, &n);
    t = realloc(t, n + 1);
    T_CHECK(t, "out of memory");
    t[n] = 0;
    return t;
}

/* Start tests/s3_fault_proxy.py in front of the server at C's endpoint, spoiling every EVERY-th
 * request (0: none; its other settings from the STK_PROXY_* environment), logging to LOG; point
 * AWS_ENDPOINT_URL at it. Returns its pid (stop it with s3u_proxy_stop). */
static inline pid_t s3u_proxy_start(const stk__s3_cfg *c, const char *tmp, const char *log,
                                    int every)
{
    const char *src = getenv("SRC_DIR");
    T_CHECK(src, "SRC_DIR not set");
    char proxy[4200], pfile[4200], ev[16];
    snprintf(proxy, sizeof proxy, "%s/tests/s3_fault_proxy.py", src);
    snprintf(pfile, sizeof pfile, "%s/proxy-port", tmp);
    snprintf(ev, sizeof ev, "%d", every);
    const char *up = strrchr(c->endpoint, ':') + 1;
    unlink(pfile); /* a port file of an earlier proxy */
    pid_t pid = fork();
    T_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test's exit takes its proxy with it */
        execlp("python3", "python3", proxy, up, pfile, log, ev, (char *)NULL);
        _exit(127);
    }
    char port[32] = "";
    for (int i = 0; i < 300 && !port[0]; i++) {
        FILE *f = fopen(pfile, "r");
        if (f) {
            if (!fgets(port, sizeof port, f))
                port[0] = 0;
            fclose(f);
        }
        if (!port[0])
            usleep(20000);
    }
    T_CHECK(port[0], "the fault proxy did not start");
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%s", port);
    setenv("AWS_ENDPOINT_URL", ep, 1);
    return pid;
}

/* Stop the proxy of PID (s3u_proxy_start) and wait for it. */
static inline void s3u_proxy_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

#endif
