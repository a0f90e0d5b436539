/* SPDX-License-Identifier: MIT */
/*
 * s3_none.c — the fetch stage of a build without libcurl (STOKER_WITH_S3=OFF, or AUTO without
 * libcurl's headers): every S3 request fails with STK_E_UNSUPPORTED saying so.
 */
#include "s3.h"

static int unsupported(char *err)
{
    return stk__err(err, STK_E_UNSUPPORTED,
                    "s3:// paths need a build with libcurl and libxml2 (STOKER_WITH_S3=ON; "
                    "apt-get install libcurl4-openssl-dev libxml2-dev)");
}

stk__s3_pool *stk__s3_pool_new(void)
{
    return NULL;
}

void stk__s3_pool_free(stk__s3_pool *p)
{
    (void)p;
}

int stk__s3_list(const stk__s3_cfg *c, const char *bucket, const char *prefix, stk__s3_obj **out,
                 size_t *n, char *err)
{
    (void)c, (void)bucket, (void)prefix;
    *out = NULL;
    *n = 0;
    return unsupported(err);
}

void stk__s3_objs_free(stk__s3_obj *objs, size_t n)
{
    (void)objs, (void)n;
}

int stk__s3_get_many(const stk__s3_cfg *c, const char *bucket, const stk__s3_fetch *f, size_t n,
                     stk__s3_stats *st, char *err)
{
    (void)c, (void)bucket, (void)f, (void)n, (void)st;
    return unsupported(err);
}

int stk__s3_put_file(const stk__s3_cfg *c, const char *bucket, const char *key, const char *path,
                     stk__s3_stats *st, char *err)
{
    (void)c, (void)bucket, (void)key, (void)path, (void)st;
    return unsupported(err);
}

int stk__s3_make_bucket(const stk__s3_cfg *c, const char *bucket, char *err)
{
    (void)c, (void)bucket;
    return unsupported(err);
}

int stk__s3_delete(const stk__s3_cfg *c, const char *bucket, const char *key, char *err)
{
    (void)c, (void)bucket, (void)key;
    return unsupported(err);
}

int stk__s3_put_mem(const stk__s3_cfg *c, const char *bucket, const char *key, const char *data,
                    char *err)
{
    (void)c, (void)bucket, (void)key, (void)data;
    return unsupported(err);
}
