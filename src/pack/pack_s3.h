/* SPDX-License-Identifier: MIT */
/*
 * pack_s3.h — stk_pack_ext with DST = s3://bucket/prefix: pack into a local staging folder, then
 * upload (docs/S3.md "Packing to a bucket").
 */
#ifndef STK_PACK_S3_H
#define STK_PACK_S3_H

#include "common.h"
#include "writer.h"

int stk__pack_to_s3(const char *src, const char *url, const stk_pack_options *opts,
                    stk_pack_ext_options *ext, stk_pack_result *result);

/* stk_pack_ext into the local directory DST, with HOOKS (may be NULL) on its writer (pack.c). */
int stk__pack_local(const char *src, const char *dst, const stk_pack_options *opts,
                    stk_pack_ext_options *ext, stk_pack_result *result,
                    const stk__writer_hooks *hooks);

#endif
