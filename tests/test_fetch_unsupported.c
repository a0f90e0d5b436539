/* SPDX-License-Identifier: MIT */
/*
 * test_fetch_unsupported — s3:// paths in a build without the fetch stage's libraries fail with
 * STK_E_UNSUPPORTED and a message naming STOKER_WITH_S3; in a build with them the same open gets
 * as far as the network (here: an endpoint where nothing listens, named in the error, no retry)
 * and never reports STK_E_UNSUPPORTED. No server needed.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
    setenv("AWS_ACCESS_KEY_ID", "k", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
    setenv("STOKER_S3_RETRIES", "0", 1);
    char *tmp = t_tmpdir("fetchun");
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set_cache_dir(ds, tmp));
    int rc = stk_dataset_open(ds, "s3://bucket/prefix");
    const char *msg = stk_dataset_last_error(ds);
    printf("s3 feature %d: %s: %s\n", stk_has_feature(STK_FEATURE_S3), stk_status_name(rc), msg);
    if (stk_has_feature(STK_FEATURE_S3))
        T_CHECK(rc != STK_OK && rc != STK_E_UNSUPPORTED && strstr(msg, "http://127.0.0.1:9"),
                "with S3: %s", msg);
    else
        T_CHECK(rc == STK_E_UNSUPPORTED && strstr(msg, "STOKER_WITH_S3"), "without S3: %s", msg);
    stk_dataset_destroy(ds);
    t_rmtree(tmp);
    free(tmp);
    return 0;
}
