/* SPDX-License-Identifier: MIT */
/* test_loader_vexp.c — stk_loader_set_vexp: the exp of transforms.GaussianBlur's kernel
 * (STK_P_AUG_STEPS kind 5).
 *  - without it, STK_AUG_TORCH_2's blur is the built-in's (glibc's expf): each sample equals
 *    stk__augprog_apply on the plain crop; a hook computing expf per value gives the same bytes
 *    (the kernel's arguments reach it unchanged), called twice per sample (x and y kernels) with
 *    the kernel's length and the ARG given, from 3 workers at once;
 *  - a hook returning other values (exp(x / 2), a wider kernel) changes most samples, each
 *    equal to stk__augprog_apply with that function;
 *  - it is the kernel's exp under STK_AUG_TORCH_1 too (the built-in there: SLEEF's);
 *  - transforms.v2's blur (kind 8) never calls it; (NULL, 0) restores the built-in; once started,
 *    STK_E_STATE.
 * stk-test: concurrency
 */
#include "test_loader_util.h"
#include "augops.h"

#include <math.h>
#include <stdatomic.h>

#define N 24
#define BS 6
#define OH 32
#define OW 32
#define SB ((size_t)OH * OW * 3)
#define ARG 0x140102 /* any value: it is passed through */

static atomic_long g_calls, g_bad;

static void count(int n, int64_t arg, int want_n)
{
    atomic_fetch_add(&g_calls, 1);
    if (n != want_n || arg != ARG)
        atomic_fetch_add(&g_bad, 1);
}

/* glibc's expf, value by value: what the built-in does for STK_AUG_TORCH_2 (kernel 7 x 5) */
static void vexp_glibc(int n, const float *x, float *y, int64_t arg)
{
    count(n, arg, n == 5 ? 5 : 7);
    for (int i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

/* a deliberately different exp: exp(x / 2) */
static void vexp_half(int n, const float *x, float *y, int64_t arg)
{
    (void)arg;
    atomic_fetch_add(&g_calls, 1);
    for (int i = 0; i < n; i++)
        y[i] = expf(x[i] * 0.5f);
}

static tl_epoch run(const char *path, int workers, const float *prog, size_t n, int torch, stk_vexp_fn fn)
{
    stk_loader *h = tl_loader(path, BS, workers);
    T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, STK_NHWC));
    T_OK(stk_loader_set(h, STK_P_EPOCH, 2));
    if (prog)
        T_OK(stk_loader_set_floats(h, STK_P_AUG_STEPS, prog, n));
    T_OK(stk_loader_set(h, STK_P_AUG_TORCH, torch));
    T_OK(stk_loader_set_vexp(h, fn, ARG));
    tl_epoch e;
    T_OK(stk_loader_start(h));
    T_CHECK(stk_loader_set_vexp(h, NULL, 0) == STK_E_STATE, "set_vexp once started");
    T_CHECK(strstr(stk_loader_last_error(h), "stk_loader_set_vexp"), "names itself: %s", stk_loader_last_error(h));
    T_CHECK(tl_run(h, &e, -1) == STK_END, "one epoch");
    T_CHECK(e.n == N, "epoch of %zu samples", e.n);
    stk_loader_destroy(h);
    return e;
}

/* each sample of AUG equals PROG (torch TORCH, exp FN) applied to the plain crop; returns how many
 * differ from the plain crop */
static int check_applied(const tl_epoch *base, const tl_epoch *aug, const float *prog, size_t n, int torch,
                         stk_vexp_fn fn, const char *what)
{
    stk__augprog ap;
    char err[STK__ERRLEN];
    T_OK(stk__augprog_parse(prog, n, &ap, err));
    ap.torch = torch;
    ap.vexp = fn;
    ap.vexp_arg = ARG;
    uint8_t *img = malloc(SB), *scratch = malloc(SB);
    double *tmp = malloc(SB * sizeof(double));
    int changed = 0;
    for (size_t i = 0; i < N; i++) {
        T_CHECK(base->index[i] == aug->index[i], "%s: same order", what);
        memcpy(img, base->images + i * SB, SB);
        stk__augprog_apply(&ap, NULL, 7, 2, base->index[i], img, OH, OW, scratch, tmp);
        T_CHECK(memcmp(img, aug->images + i * SB, SB) == 0, "%s: sample %zu is not the program's output", what, i);
        changed += memcmp(img, base->images + i * SB, SB) != 0;
    }
    free(img);
    free(scratch);
    free(tmp);
    return changed;
}

int main(void)
{
    tl_data D;
    tl_data_make(&D, "loader-vexp", N);
    tl_write(&D);
    const float blur[] = {5, 7, 5, 0.5f, 3.0f}, blur_v2[] = {8, 7, 5, 0.5f, 3.0f};

    tl_epoch base = run(D.path, 2, NULL, 0, STK_AUG_TORCH_2, NULL);
    tl_epoch builtin = run(D.path, 2, blur, 5, STK_AUG_TORCH_2, NULL);
    T_CHECK(check_applied(&base, &builtin, blur, 5, STK_AUG_TORCH_2, NULL, "built-in") >= N / 2, "blurred");

    atomic_store(&g_calls, 0);
    tl_epoch glibc = run(D.path, 3, blur, 5, STK_AUG_TORCH_2, vexp_glibc);
    long calls = atomic_load(&g_calls);
    printf("expf hook: %ld calls for %d samples\n", calls, N);
    T_CHECK(memcmp(glibc.images, builtin.images, N * SB) == 0, "a hook computing expf gives the built-in's bytes");
    /* twice per sample (x and y kernels); samples of the next epoch prefetched before the destroy too */
    T_CHECK(calls >= 2 * N && calls % 2 == 0, "called twice per sample: %ld calls", calls);
    T_CHECK(atomic_load(&g_bad) == 0, "called with the kernel's length and ARG");

    tl_epoch half = run(D.path, 3, blur, 5, STK_AUG_TORCH_2, vexp_half);
    int differ = 0;
    for (size_t i = 0; i < N; i++)
        differ += memcmp(half.images + i * SB, builtin.images + i * SB, SB) != 0;
    printf("exp(x / 2) hook: %d of %d samples differ from the built-in's\n", differ, N);
    T_CHECK(differ >= N / 2, "the hook's values are used: %d of %d samples changed", differ, N);
    check_applied(&base, &half, blur, 5, STK_AUG_TORCH_2, vexp_half, "exp(x / 2)");

    /* torch 1.x: the built-in is SLEEF's; the hook is still the kernel's exp */
    tl_epoch t1 = run(D.path, 2, blur, 5, STK_AUG_TORCH_1, vexp_half);
    T_CHECK(memcmp(t1.images, half.images, N * SB) == 0, "STK_AUG_TORCH_1 uses the hook too");

    /* v2's kernel never calls it */
    atomic_store(&g_calls, 0);
    tl_epoch v2 = run(D.path, 2, blur_v2, 5, STK_AUG_TORCH_2, vexp_half);
    tl_epoch v2_builtin = run(D.path, 2, blur_v2, 5, STK_AUG_TORCH_2, NULL);
    T_CHECK(atomic_load(&g_calls) == 0 && memcmp(v2.images, v2_builtin.images, N * SB) == 0, "kind 8 ignores it");

    /* (NULL, 0) restores the built-in */
    {
        stk_loader *h = tl_loader(D.path, BS, 2);
        T_OK(stk_loader_set(h, STK_P_OUT_LAYOUT, STK_NHWC));
        T_OK(stk_loader_set(h, STK_P_EPOCH, 2));
        T_OK(stk_loader_set_floats(h, STK_P_AUG_STEPS, blur, 5));
        T_OK(stk_loader_set(h, STK_P_AUG_TORCH, STK_AUG_TORCH_2));
        T_OK(stk_loader_set_vexp(h, vexp_half, 1));
        T_OK(stk_loader_set_vexp(h, NULL, 0));
        tl_epoch e;
        T_OK(stk_loader_start(h));
        T_CHECK(tl_run(h, &e, -1) == STK_END, "one epoch");
        T_CHECK(memcmp(e.images, builtin.images, N * SB) == 0, "NULL restores the built-in exp");
        /* after stop it may be set again, for the next start */
        T_OK(stk_loader_stop(h));
        T_OK(stk_loader_set_vexp(h, vexp_half, ARG));
        stk_loader_destroy(h);
        tl_epoch_free(&e);
    }
    T_CHECK(stk_loader_set_vexp(NULL, NULL, 0) == STK_E_INVALID, "NULL loader");

    tl_epoch *all[] = {&base, &builtin, &glibc, &half, &t1, &v2, &v2_builtin};
    for (size_t i = 0; i < STK__ARRAY_LEN(all); i++)
        tl_epoch_free(all[i]);
    tl_data_free(&D);
    printf("ok\n");
    return 0;
}
