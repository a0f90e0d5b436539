/* SPDX-License-Identifier: MIT */
/* test_loader_augment.c — STK_P_AUG_* in the loader.
 *  - with TrivialAugmentWide on, an epoch from 1 worker equals one from 3 workers byte for byte
 *    (the second through the uint8 NCHW conversion), and an epoch interrupted after 3 batches and
 *    resumed by stk_loader_seek in a new loader equals the uninterrupted one;
 *  - each augmented sample equals the same sample without augmentation (same crop: the policy's
 *    stream leaves the crop draws alone) with stk__augpolicy_apply on it, for TrivialAugmentWide,
 *    RandAugment (BILINEAR, fill), AutoAugment, timm's RandAugment (STK_AUG_TIMM_RAND with
 *    its defaults for what is not set) and timm's AutoAugment (STK_AUG_TIMM_AUTO with a
 *    STK_P_TIMM_AUTO_POLICY); most samples change;
 *  - STK_AUG_TIMM_AUTO without a policy is refused at start, a bad policy at set time naming
 *    the sub-policy and op, (NULL, 0) empties it;
 *  - STK_P_AUG_STEPS (vflip, ColorJitter, the policy's place, grayscale): 1 and 3 workers equal,
 *    each sample equal to stk__augprog_apply on the plain crop; a bad program refused at set
 *    time naming the step; (NULL, 0) removes it (the plain crops again);
 *  - STK_P_AUG_TORCH = STK_AUG_TORCH_2: each sample equals stk__augprog_apply with torch 2.x's
 *    arithmetic, and some differ from the default's (torch 1.x);
 *  - STK_P_AUG_MAGNITUDE >= STK_P_AUG_BINS is refused at start (STK_E_INVALID, naming both);
 *  - STK_P_ERASE_PROB with device batches is refused at start (STK_E_UNSUPPORTED, naming it).
 * stk-test: concurrency
 */
#include "test_loader_util.h"
#include "augops.h"

#include <math.h>

#define N 60
#define BS 8
#define OH 32
#define OW 32
#define SB ((size_t)OH * OW * 3)

static int g_workers = 1;

static stk_loader *aug_loader(const char *path, int workers, int policy, int layout)
{
    stk_loader *h = tl_loader(path, BS, workers);
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, layout));
    T_OK(stk_loader_set(h, STK_P_EPOCH, 2));
    if (policy != STK_AUG_NONE)
        T_OK(stk_loader_set(h, STK_P_AUG_POLICY, policy));
    return h;
}

static void run_epoch(stk_loader *h, tl_epoch *e)
{
    T_OK(stk_loader_start(h));
    T_CHECK(tl_run(h, e, -1) == STK_END, "one epoch");
    T_CHECK(e->n == N, "epoch of %zu samples", e->n);
}

/* NCHW uint8 -> HWC in place */
static void to_hwc(uint8_t *img, size_t n)
{
    uint8_t *tmp = malloc(SB);
    for (size_t s = 0; s < n; s++) {
        uint8_t *p = img + s * SB;
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < OH * OW; i++)
                tmp[(size_t)i * 3 + (size_t)c] = p[(size_t)c * OH * OW + (size_t)i];
        memcpy(p, tmp, SB);
    }
    free(tmp);
}

static void check_applied(const tl_epoch *base, const tl_epoch *aug, const stk__augpolicy *p, const char *what)
{
    uint8_t *img = malloc(SB), *scratch = malloc(SB);
    int changed = 0;
    for (size_t i = 0; i < N; i++) {
        T_CHECK(base->index[i] == aug->index[i], "%s: same order", what);
        memcpy(img, base->images + i * SB, SB);
        stk__augpolicy_apply(p, 7, 2, base->index[i], img, OH, OW, scratch, NULL);
        T_CHECK(memcmp(img, aug->images + i * SB, SB) == 0,
                "%s: sample %zu (record %llu) is not the crop augmented by the policy", what, i,
                (unsigned long long)base->index[i]);
        changed += memcmp(img, base->images + i * SB, SB) != 0;
    }
    printf("%s: %d of %d samples changed\n", what, changed, N);
    T_CHECK(changed >= N / 2, "%s: only %d of %d samples changed", what, changed, N);
    free(img);
    free(scratch);
}

int main(void)
{
    tl_data D;
    tl_data_make(&D, "loader-augment", N);
    tl_write(&D);
    tl_epoch base, one, three, part, rest;

    stk_loader *h = aug_loader(D.path, g_workers, STK_AUG_NONE, STK_NHWC);
    run_epoch(h, &base);
    stk_loader_destroy(h);

    h = aug_loader(D.path, 1, STK_AUG_TRIVIAL, STK_NHWC);
    run_epoch(h, &one);
    stk_loader_destroy(h);

    h = aug_loader(D.path, 3, STK_AUG_TRIVIAL, STK_NCHW);
    run_epoch(h, &three);
    stk_loader_destroy(h);
    to_hwc(three.images, three.n);
    T_CHECK(memcmp(one.index, three.index, N * 8) == 0, "same order for 1 and 3 workers");
    T_CHECK(memcmp(one.images, three.images, N * SB) == 0, "TrivialAugment: 1 and 3 workers give the same bytes");

    stk__augpolicy p = {.policy = STK__AUGP_TRIVIAL, .num_ops = 2, .magnitude = 9, .bins = 31};
    check_applied(&base, &one, &p, "trivialaugment");

    /* interrupted after 3 batches, resumed in a new loader */
    h = aug_loader(D.path, 2, STK_AUG_TRIVIAL, STK_NHWC);
    T_OK(stk_loader_start(h));
    T_OK(tl_run(h, &part, 3));
    uint64_t e, s;
    T_OK(stk_loader_tell(h, &e, &s));
    stk_loader_destroy(h);
    T_CHECK(e == 2 && s == 3 * BS, "tell mid-epoch");
    h = aug_loader(D.path, 2, STK_AUG_TRIVIAL, STK_NHWC);
    T_OK(stk_loader_start(h));
    T_OK(stk_loader_seek(h, e, s));
    T_CHECK(tl_run(h, &rest, -1) == STK_END, "rest of the epoch");
    stk_loader_destroy(h);
    T_CHECK(part.n + rest.n == N, "sizes add up");
    T_CHECK(memcmp(one.images, part.images, part.n * SB) == 0 &&
                memcmp(one.images + part.n * SB, rest.images, rest.n * SB) == 0,
            "TrivialAugment: the resumed epoch equals the uninterrupted one");
    tl_epoch_free(&one);
    tl_epoch_free(&three);
    tl_epoch_free(&part);
    tl_epoch_free(&rest);

    /* RandAugment, bilinear, fill (10, 200, 77) */
    h = aug_loader(D.path, 2, STK_AUG_RAND, STK_NHWC);
    T_OK(stk_loader_set(h, STK_P_AUG_NUM_OPS, 3));
    T_OK(stk_loader_set(h, STK_P_AUG_MAGNITUDE, 14));
    T_OK(stk_loader_set(h, STK_P_AUG_INTERP, STK_AUG_INTERP_BILINEAR));
    T_OK(stk_loader_set(h, STK_P_AUG_FILL, 0x0AC84D));
    run_epoch(h, &one);
    stk_loader_destroy(h);
    stk__augpolicy pr = {.policy = STK__AUGP_RAND, .num_ops = 3, .magnitude = 14, .bins = 31,
                         .interp = STK__INTERP_BILINEAR, .fill = {1, {10, 200, 77}}};
    check_applied(&base, &one, &pr, "randaugment");
    tl_epoch_free(&one);

    h = aug_loader(D.path, 2, STK_AUG_AUTO, STK_NHWC);
    run_epoch(h, &one);
    stk_loader_destroy(h);
    stk__augpolicy pa = {.policy = STK__AUGP_AUTO, .bins = 31};
    check_applied(&base, &one, &pa, "autoaugment");
    tl_epoch_free(&one);

    /* timm's RandAugment: rand-m9-mstd0.5-inc1, p 0.7, random filter, timm's default fill */
    h = aug_loader(D.path, 2, STK_AUG_TIMM_RAND, STK_NHWC);
    T_OK(stk_loader_set_double(h, STK_P_TIMM_MAGNITUDE, 9.0));
    T_OK(stk_loader_set_double(h, STK_P_TIMM_MSTD, 0.5));
    T_OK(stk_loader_set_double(h, STK_P_TIMM_PROB, 0.7));
    T_OK(stk_loader_set(h, STK_P_TIMM_INCREASING, 1));
    run_epoch(h, &one);
    stk_loader_destroy(h);
    stk__augpolicy pt = {.policy = STK__AUGP_TIMM_RAND,
                         .timm = {.increasing = 1, .num_layers = 2, .magnitude = 9.0, .mstd = 0.5, .mmax = 10.0,
                                  .prob = 0.7, .translate_pct = 0.45, .resample = STK__TIMM_RANDOM,
                                  .fill = {128, 128, 128}}};
    check_applied(&base, &one, &pt, "timm randaugment");
    tl_epoch_free(&one);

    /* timm's AutoAugment: three sub-policies (PosterizeOriginal + Rotate, Equalize + Solarize,
     * ShearX alone), mstd 0.5, BILINEAR, a fill */
    static const float aapol[] = {2, 21, 0.8f, 8, 3, 0.6f, 9, 2, 1, 0.8f, 8, 6, 0.6f, 5, 1, 17, 1.0f, 7};
    h = aug_loader(D.path, 2, STK_AUG_TIMM_AUTO, STK_NHWC);
    T_OK(stk_loader_set_floats(h, STK_P_TIMM_AUTO_POLICY, aapol, STK__ARRAY_LEN(aapol)));
    T_OK(stk_loader_set_double(h, STK_P_TIMM_MSTD, 0.5));
    T_OK(stk_loader_set(h, STK_P_TIMM_RESAMPLE, STK_INTERP_BILINEAR));
    T_OK(stk_loader_set(h, STK_P_AUG_FILL, 0x7c7468));
    run_epoch(h, &one);
    stk_loader_destroy(h);
    {
        char aerr[STK__ERRLEN];
        stk__augpolicy pa2 = {.policy = STK__AUGP_TIMM_AUTO,
                              .timm = {.mstd = 0.5, .mmax = 10.0, .translate_pct = 0.45,
                                       .resample = STK__TIMM_BILINEAR, .fill = {124, 116, 104}}};
        T_OK(stk__timmaa_parse(aapol, STK__ARRAY_LEN(aapol), &pa2.timm.aa, aerr));
        T_CHECK(pa2.timm.aa.nsub == 3 && pa2.timm.aa.off[3] == 5, "three sub-policies, five ops");
        check_applied(&base, &one, &pa2, "timm autoaugment");
    }
    tl_epoch_free(&one);
    h = aug_loader(D.path, 1, STK_AUG_TIMM_AUTO, STK_NHWC);
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "timm's AutoAugment without a policy refused at start");
    T_CHECK(strstr(stk_loader_last_error(h), "STK_P_TIMM_AUTO_POLICY"), "names the key: %s",
            stk_loader_last_error(h));
    stk_loader_destroy(h);
    h = aug_loader(D.path, 1, STK_AUG_TIMM_AUTO, STK_NHWC);
    static const float aabad[] = {1, 3, 0.5f, 9, 2, 1, 0.5f, 2, 22, 0.5f, 1};
    T_CHECK(stk_loader_set_floats(h, STK_P_TIMM_AUTO_POLICY, aabad, STK__ARRAY_LEN(aabad)) == STK_E_INVALID,
            "op 22 refused");
    T_CHECK(strstr(stk_loader_last_error(h), "sub-policy 1 op 1") && strstr(stk_loader_last_error(h), "22"),
            "names the sub-policy and op: %s", stk_loader_last_error(h));
    T_CHECK(stk_loader_set_floats(h, STK_P_TIMM_AUTO_POLICY, aabad, 3) == STK_E_INVALID, "a cut triple refused");
    T_OK(stk_loader_set_floats(h, STK_P_TIMM_AUTO_POLICY, aapol, STK__ARRAY_LEN(aapol)));
    T_OK(stk_loader_set_floats(h, STK_P_TIMM_AUTO_POLICY, NULL, 0));
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "an emptied policy refused at start");
    stk_loader_destroy(h);

    /* steps (vflip, jitter, policy, grayscale) around TrivialAugment, 1 vs 3 workers */
    static const float prog[] = {1, 0.5f, 3, 0.6f, 1.4f, 0.6f, 1.4f, 0.6f, 1.4f, -0.1f, 0.1f, 4, 2, 0.3f};
    stk__augprog ap;
    char err[STK__ERRLEN];
    T_OK(stk__augprog_parse(prog, STK__ARRAY_LEN(prog), &ap, err));
    h = aug_loader(D.path, 1, STK_AUG_TRIVIAL, STK_NHWC);
    T_OK(stk_loader_set_floats(h, STK_P_AUG_STEPS, prog, STK__ARRAY_LEN(prog)));
    run_epoch(h, &one);
    stk_loader_destroy(h);
    h = aug_loader(D.path, 3, STK_AUG_TRIVIAL, STK_NHWC);
    T_OK(stk_loader_set_floats(h, STK_P_AUG_STEPS, prog, STK__ARRAY_LEN(prog)));
    run_epoch(h, &three);
    stk_loader_destroy(h);
    T_CHECK(memcmp(one.images, three.images, N * SB) == 0, "steps: 1 and 3 workers give the same bytes");
    {
        uint8_t *img = malloc(SB), *scratch = malloc(SB);
        for (size_t i = 0; i < N; i++) {
            memcpy(img, base.images + i * SB, SB);
            stk__augprog_apply(&ap, &p, 7, 2, base.index[i], img, OH, OW, scratch, NULL);
            T_CHECK(memcmp(img, one.images + i * SB, SB) == 0, "steps: sample %zu is not the program's output", i);
        }
        free(img);
        free(scratch);
    }
    tl_epoch_free(&three);
    /* STK_P_AUG_TORCH: torch 2.x's arithmetic (the magnitude tables, adjust_hue's return to
     * uint8) reaches the workers: each sample is the program's output with it, and some differ
     * from the torch 1.x epoch */
    h = aug_loader(D.path, 2, STK_AUG_TRIVIAL, STK_NHWC);
    T_OK(stk_loader_set_floats(h, STK_P_AUG_STEPS, prog, STK__ARRAY_LEN(prog)));
    T_CHECK(stk_loader_set(h, STK_P_AUG_TORCH, (STK_AUG_TORCH_2_AVX512 | STK_AUG_TORCH_GRID_FMA) + 1) == STK_E_INVALID,
            "no torch past 2.x and its grid flag");
    T_OK(stk_loader_set(h, STK_P_AUG_TORCH, STK_AUG_TORCH_2));
    run_epoch(h, &three);
    stk_loader_destroy(h);
    {
        uint8_t *img = malloc(SB), *scratch = malloc(SB);
        stk__augprog a2 = ap;
        stk__augpolicy p2 = p;
        a2.torch = p2.torch = STK__TORCH_2;
        int differ = 0;
        for (size_t i = 0; i < N; i++) {
            memcpy(img, base.images + i * SB, SB);
            stk__augprog_apply(&a2, &p2, 7, 2, base.index[i], img, OH, OW, scratch, NULL);
            T_CHECK(memcmp(img, three.images + i * SB, SB) == 0, "torch 2: sample %zu is not the program's output", i);
            differ += memcmp(three.images + i * SB, one.images + i * SB, SB) != 0;
        }
        T_CHECK(differ > 0, "torch 2's arithmetic changes some samples");
        free(img);
        free(scratch);
    }
    tl_epoch_free(&one);
    tl_epoch_free(&three);
    /* a bad program is refused at set time, naming the step; (NULL, 0) removes it */
    h = aug_loader(D.path, 1, STK_AUG_NONE, STK_NHWC);
    static const float badp[] = {1, 0.5f, 9};
    T_CHECK(stk_loader_set_floats(h, STK_P_AUG_STEPS, badp, 3) == STK_E_INVALID, "unknown kind refused");
    T_CHECK(strstr(stk_loader_last_error(h), "step 1"), "names the step: %s", stk_loader_last_error(h));
    T_OK(stk_loader_set_floats(h, STK_P_AUG_STEPS, prog, STK__ARRAY_LEN(prog)));
    T_OK(stk_loader_set_floats(h, STK_P_AUG_STEPS, NULL, 0));
    run_epoch(h, &one);
    T_CHECK(memcmp(one.images, base.images, N * SB) == 0, "removed steps: the plain crops");
    tl_epoch_free(&one);
    stk_loader_destroy(h);

    /* a magnitude outside the bins */
    h = aug_loader(D.path, 1, STK_AUG_RAND, STK_NHWC);
    T_OK(stk_loader_set(h, STK_P_AUG_BINS, 10));
    T_OK(stk_loader_set(h, STK_P_AUG_MAGNITUDE, 10));
    T_CHECK(stk_loader_start(h) == STK_E_INVALID, "magnitude 10 of 10 bins refused");
    T_CHECK(strstr(stk_loader_last_error(h), "STK_P_AUG_MAGNITUDE") &&
                strstr(stk_loader_last_error(h), "STK_P_AUG_BINS"),
            "the error names both keys: %s", stk_loader_last_error(h));
    T_CHECK(stk_loader_set(h, STK_P_AUG_POLICY, STK_AUG_TIMM_AUTO + 1) == STK_E_INVALID,
            "a policy past TIMM_AUTO is out of range");
    T_CHECK(stk_loader_set(h, STK_P_AUG_POLICY, STK_AUG_TIMM_RAND) == STK_OK, "timm's RandAugment is a policy");
    T_CHECK(stk_loader_set(h, STK_P_TIMM_RESAMPLE, STK_INTERP_NEAREST + 1) == STK_E_INVALID,
            "timm's RandAugment has BILINEAR, BICUBIC, NEAREST or random (-1)");
    T_CHECK(stk_loader_set_double(h, STK_P_TIMM_PROB, 1.5) == STK_E_INVALID, "timm's p is a probability");
    T_CHECK(stk_loader_set_double(h, STK_P_TIMM_MSTD, INFINITY) == STK_E_INVALID,
            "an infinite mstd is STK_P_TIMM_UNIFORM, not a value");
    stk_loader_destroy(h);

    /* RandomErasing needs host batches: device batches refuse it at start, naming the key */
    h = aug_loader(D.path, 1, STK_AUG_NONE, STK_NHWC);
    T_OK(stk_loader_set(h, STK_P_DEVICE, 0));
    T_OK(stk_loader_set(h, STK_P_DTYPE, STK_DTYPE_FLOAT32));
    T_OK(stk_loader_set_double(h, STK_P_ERASE_PROB, 0.5));
    T_CHECK(stk_loader_start(h) == STK_E_UNSUPPORTED, "erasing on device batches refused");
    T_CHECK(strstr(stk_loader_last_error(h), "STK_P_ERASE_PROB"), "names the key: %s", stk_loader_last_error(h));
    stk_loader_destroy(h);

    tl_epoch_free(&base);
    tl_data_free(&D);
    printf("ok\n");
    return 0;
}
