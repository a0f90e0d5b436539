/* SPDX-License-Identifier: MIT */
/* test_crop_interp_random.c — STK_INTERP_RANDOM, timm's interpolation='random'.
 *  - each sample's filter is BILINEAR or BICUBIC, the same for the same (seed, epoch, index);
 *  - the box and the flip are those of a fixed filter (the draw has a counter range of its own),
 *    train and eval; a fixed filter is the sample's filter;
 *  - BICUBIC's share is 1/2 (5 standard errors over 20000 samples), and it is not the same
 *    choice per index across epochs;
 *  - the parameter takes 3 and refuses 4.
 * That each sample then equals a fixed filter's, byte for byte: tests/python/test_loader_interp_random.py.
 */
#include "testutil.h"
#include "augment.h"

#include <math.h>
#include <string.h>

static void same_box(const stk__crop *a, const stk__crop *b, uint64_t i)
{
    T_CHECK(a->x == b->x && a->y == b->y && a->w == b->w && a->h == b->h && a->flip == b->flip &&
                a->resized_w == b->resized_w && a->resized_h == b->resized_h && a->off_x == b->off_x &&
                a->off_y == b->off_y,
            "sample %llu: the random filter moved the crop", (unsigned long long)i);
}

static void draws(int mode)
{
    stk__aug_config fixed, rnd;
    stk__aug_config_default(&fixed);
    fixed.mode = rnd.mode = mode;
    fixed.out_w = fixed.out_h = 224;
    fixed.resize = 256;
    rnd = fixed;
    rnd.interp = STK_INTERP_RANDOM;
    enum { N = 20000 };
    int bicubic = 0, changed = 0;
    for (uint64_t i = 0; i < N; i++) {
        stk__crop f, a, b, e;
        stk__crop_params(&fixed, 7, 1, i, 500, 375, &f);
        stk__crop_params(&rnd, 7, 1, i, 500, 375, &a);
        stk__crop_params(&rnd, 7, 1, i, 500, 375, &b);
        stk__crop_params(&rnd, 7, 2, i, 500, 375, &e);
        T_CHECK(f.interp == STK_INTERP_BILINEAR, "a fixed filter is the sample's");
        T_CHECK(a.interp == STK_INTERP_BILINEAR || a.interp == STK_INTERP_BICUBIC, "filter %d", a.interp);
        T_CHECK(memcmp(&a, &b, sizeof a) == 0, "not deterministic");
        same_box(&f, &a, i);
        bicubic += a.interp == STK_INTERP_BICUBIC;
        changed += a.interp != e.interp;
    }
    double se = sqrt(0.25 / N);
    T_CHECK(fabs((double)bicubic / N - 0.5) <= 5 * se, "%s: %d of %d bicubic", mode ? "eval" : "train", bicubic, N);
    T_CHECK(fabs((double)changed / N - 0.5) <= 5 * se, "%s: %d of %d changed between epochs", mode ? "eval" : "train",
            changed, N);
    printf("%s: %d of %d bicubic, %d changed from epoch 1 to 2\n", mode ? "eval" : "train", bicubic, N, changed);
}

int main(void)
{
    draws(STK_MODE_TRAIN);
    draws(STK_MODE_EVAL);

    stk_loader *l;
    T_OK(stk_loader_create(&l));
    T_CHECK(stk_loader_set(l, STK_P_INTERP, STK_INTERP_RANDOM) == STK_OK, "RANDOM refused");
    T_CHECK(stk_loader_set(l, STK_P_INTERP, STK_INTERP_RANDOM + 1) == STK_E_INVALID, "4 taken");
    stk_loader_destroy(l);
    return 0;
}
