/* SPDX-License-Identifier: MIT */
/* stk-timmaug — timm's RandAugment and AutoAugment (src/decode/timmaug.c) as a command line, for
 * tests/python/test_timm_randaugment.py and test_timm_autoaugment.py, which compare it with
 * timm's ops and with the Pillow calls they make.
 *
 *   stk-timmaug op NAME LEVEL NEGATE RESAMPLE FILL TPCT H W IN OUT
 *        apply timm op NAME at clipped magnitude LEVEL (NEGATE 0/1: _randomly_negate's outcome)
 *        to IN (H*W*3 uint8 HWC) -> OUT; RESAMPLE bilinear|bicubic|nearest; FILL R,G,B; TPCT
 *        translate_pct; prints the op's argument (%.17g)
 *   stk-timmaug draw INC N MAG MSTD MMAX PROB RESAMPLE SEED EPOCH FIRST COUNT
 *        (INC 0 the rand list, 1 rand-inc, 2 'tweights')
 *        the layers of samples FIRST .. FIRST+COUNT-1: per sample a line "index" then, per layer,
 *        " name applied level negate resample" (level %.17g; resample 0 bilinear, 1 bicubic,
 *        2 nearest);
 *        MSTD "inf" = uniform; RESAMPLE bilinear|bicubic|nearest|random
 *   stk-timmaug policy INC N MAG MSTD MMAX PROB RESAMPLE FILL TPCT SEED EPOCH INDEX H W IN OUT
 *        draw and apply the policy to sample INDEX; prints the layers as draw does, one per line
 *   stk-timmaug autodraw POLICY MSTD MMAX RESAMPLE SEED EPOCH FIRST COUNT
 *        AutoAugment: POLICY is STK_P_TIMM_AUTO_POLICY's values, comma-separated; per sample a
 *        line "index sub" then, per op of the sub-policy drawn, " name applied level negate
 *        resample" as draw prints them
 *   stk-timmaug auto POLICY MSTD MMAX RESAMPLE FILL TPCT SEED EPOCH INDEX H W IN OUT
 *        draw and apply AutoAugment to sample INDEX; prints the sub-policy on the first line, then
 *        its ops as draw does, one per line
 */
#include "testutil.h"
#include "timmaug.h"

#include <math.h>
#include <string.h>

static uint8_t *load(const char *path, int h, int w)
{
    size_t len;
    uint8_t *b = t_read_file(path, &len);
    if (!b || len != (size_t)h * w * 3) {
        fprintf(stderr, "stk-timmaug: %s is not %d x %d x 3 bytes\n", path, h, w);
        exit(2);
    }
    return b;
}

static int resample_of(const char *s)
{
    if (strcmp(s, "bilinear") == 0)
        return STK__TIMM_BILINEAR;
    if (strcmp(s, "bicubic") == 0)
        return STK__TIMM_BICUBIC;
    if (strcmp(s, "nearest") == 0)
        return STK__TIMM_NEAREST;
    if (strcmp(s, "random") == 0)
        return STK__TIMM_RANDOM;
    fprintf(stderr, "stk-timmaug: unknown resample %s\n", s);
    exit(2);
}

static void parse_fill(const char *s, uint8_t f[3])
{
    unsigned r, g, b;
    if (sscanf(s, "%u,%u,%u", &r, &g, &b) != 3 || r > 255 || g > 255 || b > 255) {
        fprintf(stderr, "stk-timmaug: bad fill %s\n", s);
        exit(2);
    }
    f[0] = (uint8_t)r, f[1] = (uint8_t)g, f[2] = (uint8_t)b;
}

static int cmd_op(char **a)
{
    int op = stk__timm_find(a[0]);
    if (op < 0) {
        fprintf(stderr, "stk-timmaug: unknown op %s\n", a[0]);
        return 2;
    }
    uint8_t fill[3];
    parse_fill(a[4], fill);
    int h = atoi(a[6]), w = atoi(a[7]);
    uint8_t *img = load(a[8], h, w), *scratch = malloc((size_t)h * w * 3);
    double arg = stk__timm_arg(op, atof(a[1]), atoi(a[2]), atof(a[5]), h, w);
    stk__timm_apply(op, arg, resample_of(a[3]), fill, img, h, w, scratch);
    printf("%.17g\n", arg);
    t_write_file(a[9], img, (size_t)h * w * 3);
    free(img);
    free(scratch);
    return 0;
}

/* INC N MAG MSTD MMAX PROB RESAMPLE */
static void parse_policy(char **a, stk__timmra *p)
{
    memset(p, 0, sizeof *p);
    p->increasing = atoi(a[0]) == 1;
    p->weighted = atoi(a[0]) == 2;
    p->num_layers = atoi(a[1]);
    p->magnitude = atof(a[2]);
    p->mstd = strcmp(a[3], "inf") == 0 ? INFINITY : atof(a[3]);
    p->mmax = atof(a[4]);
    p->prob = atof(a[5]);
    p->resample = resample_of(a[6]);
    p->translate_pct = 0.45;
    p->fill[0] = p->fill[1] = p->fill[2] = 128;
}

static void print_steps(const stk__timmstep *s, int n, const char *sep)
{
    for (int i = 0; i < n; i++)
        printf("%s%s %d %.17g %d %d", sep, stk__timm_name(s[i].op), s[i].applied, s[i].level, s[i].negate,
               s[i].resample);
}

static int cmd_draw(char **a)
{
    stk__timmra p;
    parse_policy(a, &p);
    uint64_t seed = strtoull(a[7], NULL, 10), epoch = strtoull(a[8], NULL, 10), first = strtoull(a[9], NULL, 10);
    uint64_t count = strtoull(a[10], NULL, 10);
    stk__timmstep steps[STK__TIMM_MAX_LAYERS];
    for (uint64_t i = first; i < first + count; i++) {
        int n = stk__timmra_draw(&p, seed, epoch, i, steps);
        printf("%llu", (unsigned long long)i);
        print_steps(steps, n, " ");
        printf("\n");
    }
    return 0;
}

static int cmd_policy(char **a)
{
    stk__timmra p;
    parse_policy(a, &p);
    parse_fill(a[7], p.fill);
    p.translate_pct = atof(a[8]);
    uint64_t seed = strtoull(a[9], NULL, 10), epoch = strtoull(a[10], NULL, 10), index = strtoull(a[11], NULL, 10);
    int h = atoi(a[12]), w = atoi(a[13]);
    uint8_t *img = load(a[14], h, w), *scratch = malloc((size_t)h * w * 3);
    stk__timmstep steps[STK__TIMM_MAX_LAYERS];
    int n = stk__timmra_draw(&p, seed, epoch, index, steps);
    print_steps(steps, n, "\n");
    printf("\n");
    stk__timmra_apply(&p, seed, epoch, index, img, h, w, scratch);
    t_write_file(a[15], img, (size_t)h * w * 3);
    free(img);
    free(scratch);
    return 0;
}

/* POLICY MSTD MMAX RESAMPLE */
static void parse_auto(char **a, stk__timmra *p)
{
    memset(p, 0, sizeof *p);
    float v[256];
    size_t n = 0;
    for (char *s = a[0], *end; *s && n < 256; s = *end == ',' ? end + 1 : end) {
        v[n++] = strtof(s, &end);
        if (end == s) {
            fprintf(stderr, "stk-timmaug: bad policy %s\n", a[0]);
            exit(2);
        }
    }
    char err[256] = "";
    if (stk__timmaa_parse(v, n, &p->aa, err) != STK_OK) {
        fprintf(stderr, "stk-timmaug: %s\n", err);
        exit(2);
    }
    p->mstd = strcmp(a[1], "inf") == 0 ? INFINITY : atof(a[1]);
    p->mmax = atof(a[2]);
    p->resample = resample_of(a[3]);
    p->translate_pct = 0.45;
    p->fill[0] = p->fill[1] = p->fill[2] = 128;
}

static int cmd_autodraw(char **a)
{
    stk__timmra p;
    parse_auto(a, &p);
    uint64_t seed = strtoull(a[4], NULL, 10), epoch = strtoull(a[5], NULL, 10), first = strtoull(a[6], NULL, 10);
    uint64_t count = strtoull(a[7], NULL, 10);
    stk__timmstep steps[STK__TIMM_MAX_LAYERS];
    for (uint64_t i = first; i < first + count; i++) {
        int sub, n = stk__timmaa_draw(&p, seed, epoch, i, &sub, steps);
        printf("%llu %d", (unsigned long long)i, sub);
        print_steps(steps, n, " ");
        printf("\n");
    }
    return 0;
}

static int cmd_auto(char **a)
{
    stk__timmra p;
    parse_auto(a, &p);
    parse_fill(a[4], p.fill);
    p.translate_pct = atof(a[5]);
    uint64_t seed = strtoull(a[6], NULL, 10), epoch = strtoull(a[7], NULL, 10), index = strtoull(a[8], NULL, 10);
    int h = atoi(a[9]), w = atoi(a[10]);
    uint8_t *img = load(a[11], h, w), *scratch = malloc((size_t)h * w * 3);
    stk__timmstep steps[STK__TIMM_MAX_LAYERS];
    int sub, n = stk__timmaa_draw(&p, seed, epoch, index, &sub, steps);
    printf("%d", sub);
    print_steps(steps, n, "\n");
    printf("\n");
    stk__timmaa_apply(&p, seed, epoch, index, img, h, w, scratch);
    t_write_file(a[12], img, (size_t)h * w * 3);
    free(img);
    free(scratch);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 12 && strcmp(argv[1], "op") == 0)
        return cmd_op(argv + 2);
    if (argc == 13 && strcmp(argv[1], "draw") == 0)
        return cmd_draw(argv + 2);
    if (argc == 18 && strcmp(argv[1], "policy") == 0)
        return cmd_policy(argv + 2);
    if (argc == 10 && strcmp(argv[1], "autodraw") == 0)
        return cmd_autodraw(argv + 2);
    if (argc == 15 && strcmp(argv[1], "auto") == 0)
        return cmd_auto(argv + 2);
    fprintf(stderr, "usage: see the comment at the top of tests/tools/stk-timmaug.c\n");
    return 2;
}
