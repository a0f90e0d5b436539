/* SPDX-License-Identifier: MIT */
/* stk-augops — the augmentation ops and policies (src/decode/augops.c) as a command line, for the
 * Python tests that compare them with torchvision's tensor implementation.
 *
 *   stk-augops op NAME MAG INTERP FILL H W IN OUT
 *        apply op NAME (torchvision's name) with magnitude MAG to IN (H*W*3 uint8 HWC) -> OUT;
 *        INTERP nearest|bilinear|bicubic; FILL none or R,G,B
 *   stk-augops ops H W IN OUT
 *        `op` for each line "NAME MAG INTERP FILL" of stdin, each applied to IN afresh, the
 *        results appended to OUT in order (one process for a whole sweep of cases)
 *   stk-augops tables POLICY BINS H W
 *        prints "name signed v0 v1 ..." per op: the magnitude table (%.9g) for an H x W image
 *   stk-augops policy POLICY NUM_OPS MAG BINS INTERP FILL SEED EPOCH INDEX H W IN OUT
 *        draw and apply POLICY (trivialaugment|randaugment|autoaugment) for sample INDEX; prints
 *        "name magnitude" (%.17g) per op applied, in order
 *   stk-augops augmix SEVERITY WIDTH DEPTH ALPHA ALL_OPS INTERP FILL SEED EPOCH INDEX H W IN OUT
 *        AugMix for sample INDEX; prints "m0 W0", then per chain "chain W" and its "name magnitude"
 *        (POLICY autoaugment-cifar10 / autoaugment-svhn: AutoAugment with that policy table)
 *   stk-augops draws POLICY SEED EPOCH N H W
 *        the ops POLICY draws (num_ops 2, magnitude 9, 31 bins) for samples 0..N-1: one line each,
 *        "name magnitude" (%.9g) per op applied
 *   stk-augops erase P SMIN SMAX RMIN RMAX CMIN CMAX SEED EPOCH N H W
 *        RandomErasing's boxes (stk__erase_boxes) for samples 0..N-1 of an H x W image: one line
 *        each, "n y x h w ..." (n boxes; 0: not erased)
 *   stk-augops jitter B C S HUE ORDER H W IN OUT
 *        ColorJitter with fixed factors (nan = off) applied in ORDER (four digits, e.g. 2031:
 *        0 brightness, 1 contrast, 2 saturation, 3 hue)
 *   stk-augops steps V0,V1,... SEED EPOCH INDEX H W IN OUT
 *        parse the STK_P_AUG_STEPS program, apply it to sample INDEX; prints one line per step:
 *        "vflip 0|1", "grayscale 0|1", "jitter ORDER f0 f1 f2 f3" (%.17g, nan = off),
 *        "blur SIGMA", "affine|rotation ANGLE TX TY SCALE SHX SHY" (%.17g)
 *   stk-augops steps-batch
 *        "steps" once per line of stdin (its eight arguments, separated by spaces), each job's
 *        lines then "=== RC" (its status): one process for many images (STK_AUGOPS_VEXP's
 *        library is loaded once)
 *   stk-augops affdraws V0,V1,... SEED EPOCH N H W
 *        the draws of a program of one affine or rotation step for samples 0..N-1: one line
 *        each, "angle tx ty scale shx shy"
 *
 * STK_AUGOPS_TORCH=0..7 in the environment: whose arithmetic (STK_AUG_TORCH_*, | GRID_FMA) [0]; the tests
 * set it for the torch they compare with (tests/python/conftest.py).
 * STK_AUGOPS_VEXP="SYMBOL ARG LIBRARY" in the environment: "steps" computes GaussianBlur's (kind 5)
 * exp with SYMBOL of LIBRARY (dlopen), ARG passed as stk_loader_set_vexp passes it — what the
 * Python binding hands the loader (stoker.augment.torch_vexp: MKL's vmsExp of libtorch_cpu.so).
 */
#include "testutil.h"
#include "augops.h"

#include <dlfcn.h>
#include <string.h>

static int g_torch;    /* STK__TORCH_*, from STK_AUGOPS_TORCH */
static int g_grid_fma; /* its STK__TORCH_GRID_FMA flag */
static stk_vexp_fn g_vexp; /* from STK_AUGOPS_VEXP, or NULL */
static int64_t g_vexp_arg;

/* STK_AUGOPS_VEXP's function: 0, or 2 (after a message) when it cannot be had */
static int load_vexp(const char *spec)
{
    char sym[128];
    long long arg;
    int used = 0;
    if (sscanf(spec, "%127s %lld %n", sym, &arg, &used) != 2 || !spec[used]) {
        fprintf(stderr, "stk-augops: STK_AUGOPS_VEXP=\"%s\" is not \"SYMBOL ARG LIBRARY\"\n", spec);
        return 2;
    }
    void *so = dlopen(spec + used, RTLD_LAZY | RTLD_LOCAL); /* kept open: the process is short */
    void *fn = so ? dlsym(so, sym) : NULL;
    if (!fn) {
        fprintf(stderr, "stk-augops: %s\n", dlerror());
        return 2;
    }
    memcpy(&g_vexp, &fn, sizeof fn); /* object pointer -> function pointer (POSIX guarantees it) */
    g_vexp_arg = (int64_t)arg;
    return 0;
}

static int policy_of(const char *s)
{
    if (strcmp(s, "trivialaugment") == 0)
        return STK__AUGP_TRIVIAL;
    if (strcmp(s, "randaugment") == 0)
        return STK__AUGP_RAND;
    if (strncmp(s, "autoaugment", 11) == 0)
        return STK__AUGP_AUTO;
    if (strcmp(s, "augmix") == 0)
        return STK__AUGP_AUGMIX;
    fprintf(stderr, "stk-augops: unknown policy %s\n", s);
    exit(2);
}

/* "nearest", "bilinear" or "bicubic" -> STK__INTERP_* */
static int interp_of(const char *s)
{
    return strcmp(s, "bicubic") == 0 ? STK__INTERP_BICUBIC : strcmp(s, "bilinear") == 0 ? STK__INTERP_BILINEAR
                                                                                      : STK__INTERP_NEAREST;
}

/* autoaugment's table: "autoaugment" (IMAGENET), "autoaugment-cifar10", "autoaugment-svhn" */
static int aa_of(const char *s)
{
    return strcmp(s, "autoaugment-cifar10") == 0 ? STK__AA_CIFAR10
           : strcmp(s, "autoaugment-svhn") == 0  ? STK__AA_SVHN
                                                 : STK__AA_IMAGENET;
}

static void parse_fill(const char *s, stk__augfill *f)
{
    memset(f, 0, sizeof *f);
    if (strcmp(s, "none") == 0)
        return;
    f->on = 1;
    if (sscanf(s, "%f,%f,%f", &f->v[0], &f->v[1], &f->v[2]) != 3) {
        fprintf(stderr, "stk-augops: bad fill %s\n", s);
        exit(2);
    }
}

static uint8_t *load(const char *path, int h, int w)
{
    size_t len;
    uint8_t *b = t_read_file(path, &len);
    if (!b || len != (size_t)h * w * 3) {
        fprintf(stderr, "stk-augops: %s is not %d x %d x 3 bytes\n", path, h, w);
        exit(2);
    }
    return b;
}

static int cmd_op(char **a)
{
    int op = stk__augop_find(a[0]);
    if (op < 0) {
        fprintf(stderr, "stk-augops: unknown op %s\n", a[0]);
        return 2;
    }
    stk__augfill fill;
    parse_fill(a[3], &fill);
    int h = atoi(a[4]), w = atoi(a[5]);
    uint8_t *img = load(a[6], h, w), *scratch = malloc((size_t)h * w * 3);
    stk__augop_apply(op, atof(a[1]), interp_of(a[2]), &fill, g_grid_fma, img, h, w, scratch);
    t_write_file(a[7], img, (size_t)h * w * 3);
    free(img);
    free(scratch);
    return 0;
}

static int cmd_ops(char **a)
{
    int h = atoi(a[0]), w = atoi(a[1]);
    size_t n = (size_t)h * w * 3;
    uint8_t *src = load(a[2], h, w), *img = malloc(n), *scratch = malloc(n);
    FILE *out = fopen(a[3], "wb");
    if (!img || !scratch || !out) {
        fprintf(stderr, "stk-augops: %s: cannot write\n", a[3]);
        return 2;
    }
    char name[64], mag[64], interp[16], fs[128];
    int rc = 0;
    while (rc == 0 && scanf("%63s %63s %15s %127s", name, mag, interp, fs) == 4) {
        int op = stk__augop_find(name);
        if (op < 0) {
            fprintf(stderr, "stk-augops: unknown op %s\n", name);
            rc = 2;
            break;
        }
        stk__augfill fill;
        parse_fill(fs, &fill);
        memcpy(img, src, n);
        stk__augop_apply(op, atof(mag), interp_of(interp), &fill, g_grid_fma, img, h, w, scratch);
        if (fwrite(img, 1, n, out) != n)
            rc = 2;
    }
    if (fclose(out) != 0 || (rc == 0 && !feof(stdin)))
        rc = 2;
    if (rc)
        fprintf(stderr, "stk-augops: ops: a bad line on stdin or a failed write of %s\n", a[3]);
    free(src);
    free(img);
    free(scratch);
    return rc;
}

static int cmd_tables(char **a)
{
    int policy = policy_of(a[0]), bins = atoi(a[1]), h = atoi(a[2]), w = atoi(a[3]);
    float *t = malloc(sizeof(float) * (size_t)(bins > 10 ? bins : 10));
    for (int op = 0; op < STK__OP_COUNT; op++) {
        int sgn;
        int n = policy == STK__AUGP_AUGMIX ? stk__augmix_table(g_torch, op, h, w, t, &sgn)
                                           : stk__augpolicy_table(g_torch, policy, op, bins, h, w, t, &sgn);
        printf("%s %d", stk__augop_name(op), sgn);
        for (int i = 0; i < n; i++)
            printf(" %.9g", t[i]);
        printf("\n");
    }
    free(t);
    return 0;
}

static int cmd_policy(char **a)
{
    stk__augpolicy p = {0};
    p.torch = g_torch;
    p.grid_fma = g_grid_fma;
    p.policy = policy_of(a[0]);
    p.aa_policy = aa_of(a[0]);
    p.num_ops = atoi(a[1]), p.magnitude = atoi(a[2]), p.bins = atoi(a[3]);
    p.interp = interp_of(a[4]);
    parse_fill(a[5], &p.fill);
    uint64_t seed = strtoull(a[6], NULL, 10), epoch = strtoull(a[7], NULL, 10), index = strtoull(a[8], NULL, 10);
    int h = atoi(a[9]), w = atoi(a[10]);
    uint8_t *img = load(a[11], h, w), *scratch = malloc((size_t)h * w * 3);
    stk__augstep steps[STK__AUG_MAX_OPS];
    int n = stk__augpolicy_draw(&p, seed, epoch, index, h, w, steps);
    for (int i = 0; i < n; i++)
        printf("%s %.17g\n", stk__augop_name(steps[i].op), steps[i].magnitude);
    stk__augpolicy_apply(&p, seed, epoch, index, img, h, w, scratch, NULL);
    t_write_file(a[12], img, (size_t)h * w * 3);
    free(img);
    free(scratch);
    return 0;
}

static int cmd_augmix(char **a)
{
    stk__augpolicy p = {0};
    p.torch = g_torch;
    p.grid_fma = g_grid_fma;
    p.policy = STK__AUGP_AUGMIX;
    p.severity = atoi(a[0]), p.width = atoi(a[1]), p.depth = atoi(a[2]), p.alpha = atof(a[3]);
    p.all_ops = atoi(a[4]);
    p.interp = interp_of(a[5]);
    parse_fill(a[6], &p.fill);
    uint64_t seed = strtoull(a[7], NULL, 10), epoch = strtoull(a[8], NULL, 10), index = strtoull(a[9], NULL, 10);
    int h = atoi(a[10]), w = atoi(a[11]);
    uint8_t *img = load(a[12], h, w), *scratch = malloc((size_t)h * w * 3);
    double *tmp = malloc(sizeof(double) * (size_t)h * w * 3);
    stk__augmix_draws d;
    stk__augmix_draw(&p, seed, epoch, index, h, w, &d);
    printf("m0 %.9g\n", (double)d.m0);
    for (int c = 0; c < p.width; c++) {
        printf("chain %.9g\n", (double)d.w[c]);
        for (int k = 0; k < d.depth[c]; k++)
            printf("%s %.17g\n", stk__augop_name(d.steps[c][k].op), d.steps[c][k].magnitude);
    }
    stk__augpolicy_apply(&p, seed, epoch, index, img, h, w, scratch, tmp);
    t_write_file(a[13], img, (size_t)h * w * 3);
    free(img);
    free(scratch);
    free(tmp);
    return 0;
}

static int cmd_jitter(char **a)
{
    double f[4];
    int order[4];
    for (int j = 0; j < 4; j++) {
        f[j] = strtod(a[j], NULL);
        order[j] = a[4][j] - '0';
    }
    int h = atoi(a[5]), w = atoi(a[6]);
    uint8_t *img = load(a[7], h, w);
    stk__augop_jitter(img, h, w, order, f, g_torch);
    t_write_file(a[8], img, (size_t)h * w * 3);
    free(img);
    return 0;
}

static int cmd_steps(char **a)
{
    float v[256];
    size_t n = 0;
    for (char *p = a[0], *end; *p && n < 256; p = *end ? end + 1 : end)
        v[n++] = strtof(p, &end);
    stk__augprog prog;
    char err[STK__ERRLEN];
    if (stk__augprog_parse(v, n, &prog, err) != STK_OK) {
        printf("error %s\n", err);
        return 3;
    }
    prog.torch = g_torch;
    prog.grid_fma = g_grid_fma;
    prog.vexp = g_vexp;
    prog.vexp_arg = g_vexp_arg;
    uint64_t seed = strtoull(a[1], NULL, 10), epoch = strtoull(a[2], NULL, 10), index = strtoull(a[3], NULL, 10);
    int h = atoi(a[4]), w = atoi(a[5]);
    uint8_t *img = load(a[6], h, w), *scratch = malloc((size_t)h * w * 3);
    for (int k = 0; k < prog.n; k++) {
        int on, order[4] = {0, 1, 2, 3};
        double f[4] = {0, 0, 0, 0};
        if (prog.s[k].kind == STK__STEP_AFFINE || prog.s[k].kind == STK__STEP_ROTATION) {
            double d[6];
            stk__affine_draw(k, prog.s[k].kind, prog.s[k].a, seed, epoch, index, h, w, d);
            printf("%s %.17g %.17g %.17g %.17g %.17g %.17g\n",
                   prog.s[k].kind == STK__STEP_AFFINE ? "affine" : "rotation", d[0], d[1], d[2], d[3], d[4], d[5]);
            continue;
        }
        stk__augstep_draw(k, prog.s[k].kind, prog.s[k].a, seed, epoch, index, &on, order, f);
        if (prog.s[k].kind == STK__STEP_VFLIP)
            printf("vflip %d\n", on);
        else if (prog.s[k].kind == STK__STEP_GRAYSCALE)
            printf("grayscale %d\n", on);
        else if (prog.s[k].kind == STK__STEP_BLUR || prog.s[k].kind == STK__STEP_BLUR_V2)
            printf("blur %.17g\n", f[0]);
        else if (prog.s[k].kind == STK__STEP_JITTER)
            printf("jitter %d%d%d%d %.17g %.17g %.17g %.17g\n", order[0], order[1], order[2], order[3], f[0], f[1],
                   f[2], f[3]);
    }
    double *tmp = malloc(sizeof(double) * (size_t)h * w * 3);
    stk__augprog_apply(&prog, NULL, seed, epoch, index, img, h, w, scratch, tmp);
    free(tmp);
    t_write_file(a[7], img, (size_t)h * w * 3);
    free(img);
    free(scratch);
    return 0;
}

static int cmd_draws(char **a)
{
    stk__augpolicy p = {0};
    p.torch = g_torch;
    p.grid_fma = g_grid_fma;
    p.policy = policy_of(a[0]);
    p.aa_policy = aa_of(a[0]);
    p.num_ops = 2, p.magnitude = 9, p.bins = 31;
    uint64_t seed = strtoull(a[1], NULL, 10), epoch = strtoull(a[2], NULL, 10);
    long n = atol(a[3]);
    int h = atoi(a[4]), w = atoi(a[5]);
    for (long i = 0; i < n; i++) {
        stk__augstep steps[STK__AUG_MAX_OPS];
        int k = stk__augpolicy_draw(&p, seed, epoch, (uint64_t)i, h, w, steps);
        for (int j = 0; j < k; j++)
            printf("%s%s %.9g", j ? " " : "", stk__augop_name(steps[j].op), steps[j].magnitude);
        printf("\n");
    }
    return 0;
}

static int cmd_affdraws(char **a)
{
    float v[256];
    size_t nv = 0;
    for (char *p = a[0], *end; *p && nv < 256; p = *end ? end + 1 : end)
        v[nv++] = strtof(p, &end);
    stk__augprog prog;
    char err[STK__ERRLEN];
    if (stk__augprog_parse(v, nv, &prog, err) != STK_OK || prog.n != 1 ||
        (prog.s[0].kind != STK__STEP_AFFINE && prog.s[0].kind != STK__STEP_ROTATION)) {
        printf("error %s\n", prog.n == 1 ? err : "one affine or rotation step");
        return 3;
    }
    uint64_t seed = strtoull(a[1], NULL, 10), epoch = strtoull(a[2], NULL, 10);
    long n = atol(a[3]);
    int h = atoi(a[4]), w = atoi(a[5]);
    for (long i = 0; i < n; i++) {
        double d[6];
        stk__affine_draw(0, prog.s[0].kind, prog.s[0].a, seed, epoch, (uint64_t)i, h, w, d);
        printf("%.17g %.17g %.17g %.17g %.17g %.17g\n", d[0], d[1], d[2], d[3], d[4], d[5]);
    }
    return 0;
}

static int cmd_erase(char **a)
{
    stk__erase e = {.p = atof(a[0]), .scale_lo = atof(a[1]), .scale_hi = atof(a[2]), .ratio_lo = atof(a[3]),
                    .ratio_hi = atof(a[4]), .min_count = atoi(a[5]), .max_count = atoi(a[6])};
    uint64_t seed = strtoull(a[7], NULL, 10), epoch = strtoull(a[8], NULL, 10);
    long n = atol(a[9]);
    int h = atoi(a[10]), w = atoi(a[11]);
    for (long i = 0; i < n; i++) {
        stk__erase_box b[STK__ERASE_MAX_COUNT];
        stk__rng r;
        int k = stk__erase_boxes(&e, seed, epoch, (uint64_t)i, h, w, b, &r);
        printf("%d", k);
        for (int j = 0; j < k; j++)
            printf(" %d %d %d %d", b[j].y, b[j].x, b[j].h, b[j].w);
        printf("\n");
    }
    return 0;
}

static int cmd_steps_batch(void)
{
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        char *a[9], *save = NULL;
        int n = 0;
        for (char *t = strtok_r(line, " \t\n", &save); t && n < 9; t = strtok_r(NULL, " \t\n", &save))
            a[n++] = t;
        if (n == 0)
            continue;
        int rc = n == 8 ? cmd_steps(a) : 2;
        printf("=== %d\n", rc);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *torch = getenv("STK_AUGOPS_TORCH");
    g_torch = torch ? atoi(torch) : STK__TORCH_1;
    g_grid_fma = !!(g_torch & STK__TORCH_GRID_FMA);
    g_torch &= ~STK__TORCH_GRID_FMA;
    const char *vexp = getenv("STK_AUGOPS_VEXP");
    if (vexp && *vexp && load_vexp(vexp) != 0)
        return 2;
    if (argc == 10 && strcmp(argv[1], "op") == 0)
        return cmd_op(argv + 2);
    if (argc == 6 && strcmp(argv[1], "ops") == 0)
        return cmd_ops(argv + 2);
    if (argc == 6 && strcmp(argv[1], "tables") == 0)
        return cmd_tables(argv + 2);
    if (argc == 15 && strcmp(argv[1], "policy") == 0)
        return cmd_policy(argv + 2);
    if (argc == 16 && strcmp(argv[1], "augmix") == 0)
        return cmd_augmix(argv + 2);
    if (argc == 11 && strcmp(argv[1], "jitter") == 0)
        return cmd_jitter(argv + 2);
    if (argc == 10 && strcmp(argv[1], "steps") == 0)
        return cmd_steps(argv + 2);
    if (argc == 2 && strcmp(argv[1], "steps-batch") == 0)
        return cmd_steps_batch();
    if (argc == 8 && strcmp(argv[1], "draws") == 0)
        return cmd_draws(argv + 2);
    if (argc == 14 && strcmp(argv[1], "erase") == 0)
        return cmd_erase(argv + 2);
    if (argc == 8 && strcmp(argv[1], "affdraws") == 0)
        return cmd_affdraws(argv + 2);
    fprintf(stderr, "usage: see the top of tests/tools/stk-augops.c\n");
    return 2;
}
