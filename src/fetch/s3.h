/* SPDX-License-Identifier: MIT */
/*
 * s3.h — the fetch stage: an S3 client (libcurl with CURLOPT_AWS_SIGV4, curl multi) that lists a
 * prefix, downloads objects into files with many ranged GETs in flight, uploads files (multipart
 * above one part) and creates buckets. Every request has a connect timeout and a stall timeout
 * (no byte for STOKER_S3_STALL_S seconds) and is retried with exponential backoff on 5xx,
 * 429/SlowDown, connection resets and short bodies; 4xx other than those fail at once with the
 * server's error code, the method, the URL and so the endpoint. Configuration comes from the
 * environment as every S3 tool reads it (creds.c). Built without libcurl (STOKER_WITH_S3=OFF),
 * s3_none.c answers STK_E_UNSUPPORTED. The layer depends on core only.
 */
#ifndef STK_S3_H
#define STK_S3_H

#include "common.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Request slots shared by calls that run at once (a streaming loader's shard downloads, one
 * call each): a call whose cfg names a budget issues a request only with a slot taken from it
 * (and at most cfg.inflight of its own), keeps the slot for its own next request while it has
 * one to issue, and gives it back otherwise. A freed slot goes to the call that started first
 * among those waiting for one — the shard read first — and a waiting call is woken at once,
 * even while it polls its own requests. So the next shard's first request leaves as soon as one
 * of the shards before has nothing left to ask for, not once they have all ended, and never
 * before an earlier shard's request (docs/S3.md "Streaming"). */
#define STK__S3_BUDGET_WAITERS 64
typedef struct stk__s3_budget {
    pthread_mutex_t mu;
    int free;
    uint64_t tickets;    /* handed to calls as they start: their priority (lower first) */
    int nwait;           /* calls waiting for a slot: their tickets and multi handles */
    uint64_t wait_ticket[STK__S3_BUDGET_WAITERS];
    void *wait_multi[STK__S3_BUDGET_WAITERS];
} stk__s3_budget;

static inline void stk__s3_budget_init(stk__s3_budget *b, int slots)
{
    pthread_mutex_init(&b->mu, NULL);
    b->free = slots;
    b->tickets = 0;
    b->nwait = 0;
}

static inline void stk__s3_budget_destroy(stk__s3_budget *b)
{
    pthread_mutex_destroy(&b->mu);
}

/* Connections kept open from one call to the next: a call whose cfg names a pool runs its
 * requests on the pool's curl multi handle, whose connection cache keeps the connections of its
 * finished requests (at most cfg.inflight) for the next call that names the pool — no TCP or TLS
 * handshake per shard (docs/S3.md "Requests"). One thread at a time may use a pool (a streaming
 * loader's download thread owns one); libcurl drops a kept connection the server has closed and
 * retries the request on a new one. */
typedef struct stk__s3_pool stk__s3_pool;
/* A new, empty pool (NULL: out of memory). */
stk__s3_pool *stk__s3_pool_new(void);
/* Close the pool's connections and free it. NULL is a no-op. */
void stk__s3_pool_free(stk__s3_pool *p);

typedef struct stk__s3_cfg {
    char endpoint[512]; /* scheme://host[:port], no trailing slash */
    char region[64];
    char key[256], secret[256], token[2048]; /* key "" = anonymous (unsigned) requests */
    char profile[128];  /* the profile the credentials came from ("" = environment) */
    char ca_bundle[1024]; /* AWS_CA_BUNDLE or the profile's ca_bundle: CAs for https ("" = system) */
    int path_style;     /* 1: endpoint/bucket/key; 0: bucket.host/key (virtual host) */
    long connect_timeout_s; /* STOKER_S3_CONNECT_TIMEOUT_S [10] */
    long stall_s;       /* STOKER_S3_STALL_S: no byte for this long = a failed attempt [30] */
    int retries;        /* STOKER_S3_RETRIES: attempts after the first [6] */
    int inflight;       /* STOKER_S3_INFLIGHT: requests in flight [16] */
    uint64_t part_bytes; /* STOKER_S3_PART_MB: ranged GET / multipart part size [8 MiB] */
    int shards;         /* STOKER_S3_SHARDS: shards a streaming loader fetches at once [4] */
    _Atomic int *cancel; /* set by the caller (NULL: none): once *cancel is non-zero, a call ends
                            within ~0.1 s with STK_E_CANCELLED, its requests dropped */
    stk__s3_budget *budget; /* request slots shared with other calls (NULL: none) */
    stk__s3_pool *pool; /* connections kept from the call before (NULL: this call's own) */
} stk__s3_cfg;

/* Fill *C from the environment and the AWS files (creds.c); STK_E_INVALID with ERR on a bad
 * value (an endpoint without scheme, a profile that is not in the files). */
int stk__s3_cfg_from_env(stk__s3_cfg *c, char *err);
/* Split "s3://bucket/prefix" (prefix may be empty; a non-empty prefix gets a trailing '/').
 * STK_E_INVALID with ERR if URL is not of that form. */
int stk__s3_url_split(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap,
                      char *err);
/* 1 if PATH starts with "s3://". */
int stk__s3_is_url(const char *path);

typedef struct stk__s3_obj {
    char *key;
    uint64_t size;
    char etag[80];
} stk__s3_obj;

/* What one call moved (accumulated by the calls that take it; may be NULL). */
typedef struct stk__s3_stats {
    uint64_t bytes_in, bytes_out, requests, retries;
    double seconds;
} stk__s3_stats;

/* ListObjectsV2 of PREFIX in BUCKET (all pages): *OUT (free with stk__s3_objs_free), *N. */
int stk__s3_list(const stk__s3_cfg *c, const char *bucket, const char *prefix, stk__s3_obj **out,
                 size_t *n, char *err);
void stk__s3_objs_free(stk__s3_obj *objs, size_t n);

/* One object to download into FD (written with pwrite at its offsets; the file is not resized):
 * SIZE bytes from byte OFFSET of the object (0: from its start), written at the same offset. */
typedef struct stk__s3_fetch {
    const char *key;
    uint64_t size;
    int fd;
    uint64_t offset;
} stk__s3_fetch;

/* Download every F[i] with ranged GETs of c->part_bytes, c->inflight requests in flight across
 * all of them, in F's order. Fails on the first request that exhausted its retries (ERR names
 * it). */
int stk__s3_get_many(const stk__s3_cfg *c, const char *bucket, const stk__s3_fetch *f, size_t n,
                     stk__s3_stats *st, char *err);
/* Upload the file PATH as KEY: one PUT up to c->part_bytes, else a multipart upload with its parts
 * in flight together (aborted on failure: nothing half-written is visible). */
int stk__s3_put_file(const stk__s3_cfg *c, const char *bucket, const char *key, const char *path,
                     stk__s3_stats *st, char *err);
/* Delete KEY (a missing key is not an error: S3 answers 204 either way). */
int stk__s3_delete(const stk__s3_cfg *c, const char *bucket, const char *key, char *err);
/* Upload LEN bytes of memory as KEY (a single PUT). */
int stk__s3_put_mem(const stk__s3_cfg *c, const char *bucket, const char *key, const char *data,
                    char *err);
/* Create BUCKET; an existing bucket of the same owner is not an error. */
int stk__s3_make_bucket(const stk__s3_cfg *c, const char *bucket, char *err);

#endif
