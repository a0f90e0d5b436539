/* SPDX-License-Identifier: MIT */
/* test_aug_policy_dist.c — the policies' random choices follow torchvision's distributions.
 * Over 200000 samples (fixed seeds, so the verdict is reproducible) drawn by stk__augpolicy_draw:
 *  - TrivialAugmentWide: op uniform over its 14 ops; for ops with magnitudes, the bin uniform over
 *    num_magnitude_bins (31) and the sign a fair coin (signed ops only); Posterize / Solarize never
 *    negative;
 *  - RandAugment(num_ops=2, magnitude=9): the pair of ops uniform over 14 x 14 (independent), the
 *    magnitude always bin 9, signs fair;
 *  - AutoAugment IMAGENET: sub-policy uniform over 25 (inferred from the ops it applies where they
 *    identify it) and each op applied with its probability;
 *  - AugMix: chain depth, ops and bins uniform, m0 uniform for alpha 1 (Beta(1, 1)), weights
 *    summing to 1;
 *  - the draws are a pure function of (seed, epoch, index) and differ across indices and epochs.
 * Chi-square statistics are compared with the 1e-6 upper quantile (Wilson-Hilferty), binomial
 * rates with 5 standard errors.
 */
#include "testutil.h"
#include "augops.h"

#include <math.h>
#include <string.h>

#define N 200000

/* upper quantile of chi-square(df) at z standard normal deviations (Wilson-Hilferty) */
static double chi2_crit(int df, double z)
{
    double k = df, a = 2.0 / (9.0 * k);
    return k * pow(1.0 - a + z * sqrt(a), 3.0);
}

static void check_uniform(const char *what, const long *count, int k, long total)
{
    double e = (double)total / k, x2 = 0;
    for (int i = 0; i < k; i++)
        x2 += (count[i] - e) * (count[i] - e) / e;
    double crit = chi2_crit(k - 1, 4.75); /* about 1e-6 */
    printf("%-40s chi2 = %8.2f (df %d, limit %.2f)\n", what, x2, k - 1, crit);
    T_CHECK(x2 < crit, "%s: chi-square %.2f over %.2f: not uniform", what, x2, crit);
}

static void check_rate(const char *what, long hits, long n, double p)
{
    double se = sqrt(p * (1 - p) / (double)n), got = (double)hits / (double)n;
    printf("%-40s rate %.4f (want %.4f, se %.4f)\n", what, got, p, se);
    T_CHECK(fabs(got - p) <= 5 * se + 1e-12, "%s: rate %.4f, want %.4f", what, got, p);
}

/* the bin of MAG in OP's table (its absolute value), or -1 */
static int bin_of(int policy, int op, int bins, double mag)
{
    float t[64] = {0};
    int sgn;
    int n = stk__augpolicy_table(STK__TORCH_1, policy, op, bins, 224, 224, t, &sgn);
    for (int i = 0; i < n; i++)
        if ((double)t[i] == fabs(mag))
            return i;
    return -1;
}

static void trivial(void)
{
    stk__augpolicy p = {.policy = STK__AUGP_TRIVIAL, .bins = 31};
    static long ops[14], bins[14][31], neg[14], signed_n[14];
    for (long i = 0; i < N; i++) {
        stk__augstep s[STK__AUG_MAX_OPS];
        int n = stk__augpolicy_draw(&p, 11, 3, (uint64_t)i, 224, 224, s);
        T_CHECK(n == 1, "trivialaugment drew %d ops", n);
        T_CHECK(s[0].op >= 0 && s[0].op < 14, "op %d", s[0].op);
        ops[s[0].op]++;
        float t[31];
        int sgn, nb = stk__augpolicy_table(STK__TORCH_1, STK__AUGP_TRIVIAL, s[0].op, 31, 224, 224, t, &sgn);
        if (nb) {
            int b = bin_of(STK__AUGP_TRIVIAL, s[0].op, 31, s[0].magnitude);
            T_CHECK(b >= 0, "%s magnitude %g not in its table", stk__augop_name(s[0].op), s[0].magnitude);
            if (s[0].op != STK__OP_POSTERIZE) /* its table repeats values: the bin is not visible */
                bins[s[0].op][b]++;
        }
        if (sgn) {
            signed_n[s[0].op]++;
            neg[s[0].op] += s[0].magnitude < 0 || (s[0].magnitude == 0 && signbit(s[0].magnitude));
        } else {
            T_CHECK(!(s[0].magnitude < 0), "unsigned op %s got %g", stk__augop_name(s[0].op), s[0].magnitude);
        }
    }
    check_uniform("trivialaugment op", ops, 14, N);
    long all_bins[31] = {0}, tot = 0, nneg = 0, nsig = 0;
    for (int o = 0; o < 14; o++) {
        for (int b = 0; b < 31; b++)
            all_bins[b] += bins[o][b], tot += bins[o][b];
        nneg += neg[o], nsig += signed_n[o];
    }
    check_uniform("trivialaugment magnitude bin", all_bins, 31, tot);
    check_uniform("trivialaugment Rotate bin", bins[STK__OP_ROTATE], 31, ops[STK__OP_ROTATE]);
    check_rate("trivialaugment negative sign", nneg, nsig, 0.5);
}

static void randaug(void)
{
    stk__augpolicy p = {.policy = STK__AUGP_RAND, .num_ops = 2, .magnitude = 9, .bins = 31};
    static long pairs[14 * 14];
    long neg = 0, nsig = 0;
    for (long i = 0; i < N; i++) {
        stk__augstep s[STK__AUG_MAX_OPS];
        int n = stk__augpolicy_draw(&p, 12, 0, (uint64_t)i, 224, 224, s);
        T_CHECK(n == 2, "randaugment drew %d ops", n);
        pairs[s[0].op * 14 + s[1].op]++;
        for (int j = 0; j < 2; j++) {
            float t[31];
            int sgn, nb = stk__augpolicy_table(STK__TORCH_1, STK__AUGP_RAND, s[j].op, 31, 224, 224, t, &sgn);
            if (nb)
                T_CHECK(fabs(s[j].magnitude) == (double)t[9], "%s magnitude %g is not bin 9's %g",
                        stk__augop_name(s[j].op), s[j].magnitude, (double)t[9]);
            if (sgn && t[9] != 0)
                nsig++, neg += s[j].magnitude < 0;
        }
    }
    check_uniform("randaugment op pair", pairs, 14 * 14, N);
    check_rate("randaugment negative sign", neg, nsig, 0.5);
}

/* AutoAugment: the draw shows which ops ran, not the sub-policy; sub-policies whose first op is
 * unique and always applied cannot be told apart this way. Instead count how often each op
 * and (op, magnitude) is applied and compare with the rate the IMAGENET table implies:
 * sum over sub-policies of p / 25 for each slot with that op and bin. */
static void autoaug(void)
{
    stk__augpolicy p = {.policy = STK__AUGP_AUTO};
    /* expected applications per sample of each (op, bin + 1) from torchvision's IMAGENET policy */
    static const struct {
        int op;
        double p;
        int bin;
    } pol[25][2] = {
#define O(n) STK__OP_##n
        {{O(POSTERIZE), .4, 8}, {O(ROTATE), .6, 9}},       {{O(SOLARIZE), .6, 5}, {O(AUTOCONTRAST), .6, -1}},
        {{O(EQUALIZE), .8, -1}, {O(EQUALIZE), .6, -1}},    {{O(POSTERIZE), .6, 7}, {O(POSTERIZE), .6, 6}},
        {{O(EQUALIZE), .4, -1}, {O(SOLARIZE), .2, 4}},     {{O(EQUALIZE), .4, -1}, {O(ROTATE), .8, 8}},
        {{O(SOLARIZE), .6, 3}, {O(EQUALIZE), .6, -1}},     {{O(POSTERIZE), .8, 5}, {O(EQUALIZE), 1.0, -1}},
        {{O(ROTATE), .2, 3}, {O(SOLARIZE), .6, 8}},        {{O(EQUALIZE), .6, -1}, {O(POSTERIZE), .4, 6}},
        {{O(ROTATE), .8, 8}, {O(COLOR), .4, 0}},           {{O(ROTATE), .4, 9}, {O(EQUALIZE), .6, -1}},
        {{O(EQUALIZE), 0.0, -1}, {O(EQUALIZE), .8, -1}},   {{O(INVERT), .6, -1}, {O(EQUALIZE), 1.0, -1}},
        {{O(COLOR), .6, 4}, {O(CONTRAST), 1.0, 8}},        {{O(ROTATE), .8, 8}, {O(COLOR), 1.0, 2}},
        {{O(COLOR), .8, 8}, {O(SOLARIZE), .8, 7}},         {{O(SHARPNESS), .4, 7}, {O(INVERT), .6, -1}},
        {{O(SHEAR_X), .6, 5}, {O(EQUALIZE), 1.0, -1}},     {{O(COLOR), .4, 0}, {O(EQUALIZE), .6, -1}},
        {{O(EQUALIZE), .4, -1}, {O(SOLARIZE), .2, 4}},     {{O(SOLARIZE), .6, 5}, {O(AUTOCONTRAST), .6, -1}},
        {{O(INVERT), .6, -1}, {O(EQUALIZE), 1.0, -1}},     {{O(COLOR), .6, 4}, {O(CONTRAST), 1.0, 8}},
        {{O(EQUALIZE), .8, -1}, {O(EQUALIZE), .6, -1}},
#undef O
    };
    static double want[STK__OP_COUNT][11];
    static long got[STK__OP_COUNT][11];
    for (int i = 0; i < 25; i++)
        for (int j = 0; j < 2; j++) {
            /* cells by value: Posterize's bins 6 and 7 are both 5 bits */
            int op = pol[i][j].op, b = pol[i][j].bin;
            if (b >= 0) {
                float t[10];
                int sgn;
                stk__augpolicy_table(STK__TORCH_1, STK__AUGP_AUTO, op, 10, 224, 224, t, &sgn);
                b = bin_of(STK__AUGP_AUTO, op, 10, t[b]);
            }
            want[op][b + 1] += pol[i][j].p / 25.0;
        }
    long neg = 0, nsig = 0, nops = 0;
    for (long i = 0; i < N; i++) {
        stk__augstep s[STK__AUG_MAX_OPS];
        int n = stk__augpolicy_draw(&p, 13, 1, (uint64_t)i, 224, 224, s);
        T_CHECK(n >= 0 && n <= 2, "autoaugment drew %d ops", n);
        nops += n;
        for (int j = 0; j < n; j++) {
            int b = bin_of(STK__AUGP_AUTO, s[j].op, 10, s[j].magnitude);
            float t[10];
            int sgn, nb = stk__augpolicy_table(STK__TORCH_1, STK__AUGP_AUTO, s[j].op, 10, 224, 224, t, &sgn);
            if (!nb)
                b = -1;
            else
                T_CHECK(b >= 0, "%s magnitude %g not in its table", stk__augop_name(s[j].op), s[j].magnitude);
            got[s[j].op][b + 1]++;
            if (sgn && b > 0)
                nsig++, neg += s[j].magnitude < 0;
        }
    }
    /* (op, bin) application counts: a chi-square of observed against expected, with the
     * "not applied" cell completing the table */
    double x2 = 0, e_sum = 0;
    int cells = 0;
    for (int o = 0; o < STK__OP_COUNT; o++)
        for (int b = 0; b < 11; b++) {
            double e = want[o][b] * N;
            if (e == 0) {
                T_CHECK(got[o][b] == 0, "autoaugment applied %s bin %d, which its policy never does",
                        stk__augop_name(o), b - 1);
                continue;
            }
            x2 += (got[o][b] - e) * (got[o][b] - e) / e;
            e_sum += e;
            cells++;
        }
    double crit = chi2_crit(cells - 1, 4.75);
    printf("%-40s chi2 = %8.2f (df %d, limit %.2f)\n", "autoaugment (op, magnitude) applied", x2, cells - 1,
           crit);
    T_CHECK(x2 < crit, "autoaugment (op, magnitude) rates: chi-square %.2f over %.2f", x2, crit);
    check_rate("autoaugment ops applied per sample / 2", nops, 2L * N, e_sum / N / 2);
    check_rate("autoaugment negative sign", neg, nsig, 0.5);
}

/* AugMix(severity 3, width 3, depth -1, alpha 1, all_ops): chain depth uniform over 1..3, ops
 * uniform over its 13, magnitude bins uniform over 0..severity-1, m0 ~ Beta(1, 1) (uniform),
 * weights m0 + sum w = 1, each chain's mean weight (1 - E m0) / 3 */
static void augmix(void)
{
    stk__augpolicy p = {.policy = STK__AUGP_AUGMIX, .severity = 3, .width = 3, .depth = -1, .alpha = 1.0,
                        .all_ops = 1};
    static const int ops13[13] = {STK__OP_SHEAR_X,  STK__OP_SHEAR_Y,     STK__OP_TRANSLATE_X, STK__OP_TRANSLATE_Y,
                                  STK__OP_ROTATE,   STK__OP_POSTERIZE,   STK__OP_SOLARIZE,    STK__OP_AUTOCONTRAST,
                                  STK__OP_EQUALIZE, STK__OP_BRIGHTNESS,  STK__OP_COLOR,       STK__OP_CONTRAST,
                                  STK__OP_SHARPNESS};
    long depth[3] = {0}, opc[13] = {0}, binc[3] = {0}, m0bins[10] = {0}, nbin = 0, chains = 0;
    double wsum = 0;
    for (long i = 0; i < N / 4; i++) {
        stk__augmix_draws d;
        stk__augmix_draw(&p, 21, 0, (uint64_t)i, 224, 224, &d);
        double tot = d.m0;
        T_CHECK(d.m0 >= 0 && d.m0 <= 1, "m0 %g", (double)d.m0);
        m0bins[d.m0 >= 1 ? 9 : (int)(d.m0 * 10)]++;
        for (int c = 0; c < 3; c++) {
            tot += d.w[c];
            wsum += d.w[c];
            chains++;
            T_CHECK(d.depth[c] >= 1 && d.depth[c] <= 3, "depth %d", d.depth[c]);
            depth[d.depth[c] - 1]++;
            for (int k = 0; k < d.depth[c]; k++) {
                int j = 0;
                while (j < 13 && ops13[j] != d.steps[c][k].op)
                    j++;
                T_CHECK(j < 13, "augmix op %s", stk__augop_name(d.steps[c][k].op));
                opc[j]++;
                if (d.steps[c][k].op == STK__OP_ROTATE) { /* linspace(0, 30, 10): bins 0, 10/3, 20/3 */
                    int b = (int)nearbyint(fabs(d.steps[c][k].magnitude) / (30.0 / 9));
                    T_CHECK(b < 3, "rotate bin %d beyond severity 3", b);
                    binc[b]++, nbin++;
                }
            }
        }
        T_CHECK(fabs(tot - 1.0) < 1e-5, "weights sum to %g", tot);
    }
    check_uniform("augmix chain depth", depth, 3, chains);
    long nops = 0;
    for (int j = 0; j < 13; j++)
        nops += opc[j];
    check_uniform("augmix op", opc, 13, nops);
    check_uniform("augmix Rotate bin", binc, 3, nbin);
    check_uniform("augmix m0 (Beta(1,1) = uniform)", m0bins, 10, N / 4);
    /* E w = E(1 - m0) / 3 = 1/6; w's sd is below 0.25, so the mean's se is below 0.001 */
    printf("%-40s %.5f (want %.5f)\n", "augmix mean chain weight", wsum / chains, 1.0 / 6);
    T_CHECK(fabs(wsum / chains - 1.0 / 6) < 0.005, "augmix mean chain weight %g", wsum / chains);
}

static int same(const stk__augstep *a, const stk__augstep *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].op != b[i].op || a[i].magnitude != b[i].magnitude)
            return 0;
    return 1;
}

static void pure(void)
{
    stk__augpolicy p = {.policy = STK__AUGP_RAND, .num_ops = 3, .magnitude = 9, .bins = 31};
    stk__augstep a[STK__AUG_MAX_OPS], b[STK__AUG_MAX_OPS];
    int same_index = 0, same_epoch = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        int n = stk__augpolicy_draw(&p, 5, 2, i, 224, 224, a);
        int m = stk__augpolicy_draw(&p, 5, 2, i, 224, 224, b);
        T_CHECK(n == m && same(a, b, n), "sample %llu drew differently twice",
                (unsigned long long)i);
        stk__augpolicy_draw(&p, 5, 2, i + 1, 224, 224, b);
        same_index += same(a, b, 3);
        stk__augpolicy_draw(&p, 5, 3, i, 224, 224, b);
        same_epoch += same(a, b, 3);
    }
    /* three ops and signs agree by chance with probability < 1e-3 per pair */
    T_CHECK(same_index < 10 && same_epoch < 10, "draws repeat across indices (%d) or epochs (%d)", same_index,
            same_epoch);
}

int main(void)
{
    trivial();
    randaug();
    autoaug();
    augmix();
    pure();
    printf("ok\n");
    return 0;
}
