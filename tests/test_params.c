/* SPDX-License-Identifier: MIT */
/*
 * test_params.c — the one parameter table is the only one: for every key, stk_param_bounds
 * returns the table's range, and each setter that takes the key (loader, dataset, writer)
 * accepts min and max and refuses just below min and just above max; a handle refuses the other
 * handles' keys; a fresh loader reads back every default through stk_loader_get.
 */
#include "params.h"
#include "testutil.h"

#include <float.h>
#include <math.h>

typedef int (*set_int_fn)(void *h, int key, int64_t v);

static int loader_set(void *h, int key, int64_t v) { return stk_loader_set(h, key, v); }
static int dataset_set(void *h, int key, int64_t v) { return stk_dataset_set(h, key, v); }
static int writer_set(void *h, int key, int64_t v) { return stk_writer_set(h, key, v); }

/* A fresh handle of kind HANDLE (STK__PH_*), its setter, and how to destroy it. */
static void *make(unsigned handle, set_int_fn *set)
{
    if (handle == STK__PH_LOADER) {
        stk_loader *h;
        T_OK(stk_loader_create(&h));
        *set = loader_set;
        return h;
    }
    if (handle == STK__PH_DATASET) {
        stk_dataset *d;
        T_OK(stk_dataset_create(&d));
        *set = dataset_set;
        return d;
    }
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    *set = writer_set;
    return w;
}

static void drop(unsigned handle, void *h)
{
    if (handle == STK__PH_LOADER)
        stk_loader_destroy(h);
    else if (handle == STK__PH_DATASET)
        stk_dataset_destroy(h);
    else
        stk_writer_destroy(h);
}

static const char *hname(unsigned handle)
{
    return handle == STK__PH_LOADER ? "loader" : handle == STK__PH_DATASET ? "dataset" : "writer";
}

static void expect_int(unsigned handle, const stk__param_def *p, int64_t v, int want)
{
    set_int_fn set;
    void *h = make(handle, &set);
    int rc = set(h, p->key, v);
    T_CHECK(rc == want, "%s %s = %lld: got %s, want %s", hname(handle), p->name, (long long)v,
            stk_status_name(rc), stk_status_name(want));
    drop(handle, h);
}

static void check_int(unsigned handle, const stk__param_def *p)
{
    expect_int(handle, p, p->ilo, STK_OK);
    expect_int(handle, p, p->ihi, STK_OK);
    if (p->ilo > INT64_MIN)
        expect_int(handle, p, p->ilo - 1, STK_E_INVALID);
    if (p->ihi < INT64_MAX)
        expect_int(handle, p, p->ihi + 1, STK_E_INVALID);
}

static int set_real(stk_loader *h, const stk__param_def *p, double v)
{
    float f = (float)v;
    if (p->key == STK_P_LUT) { /* a table: every one of its 768 values is V */
        float t[768];
        for (size_t i = 0; i < 768; i++)
            t[i] = f;
        return stk_loader_set_floats(h, p->key, t, 768);
    }
    return p->type == STK__PT_DOUBLE ? stk_loader_set_double(h, p->key, v) : stk_loader_set_floats(h, p->key, &f, 1);
}

static void expect_real(const stk__param_def *p, double v, int want)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    int rc = set_real(h, p, v);
    T_CHECK(rc == want, "%s = %.17g: got %s, want %s", p->name, v, stk_status_name(rc), stk_status_name(want));
    stk_loader_destroy(h);
}

/* FLOATS keys go through float: step past a bound in float precision. */
static double past(const stk__param_def *p, double x, double dir)
{
    if (p->type == STK__PT_FLOATS)
        return (double)nextafterf((float)x, (float)dir);
    return nextafter(x, dir);
}

static void check_real(const stk__param_def *p)
{
    expect_real(p, p->dhi, STK_OK);
    if (p->dhi < DBL_MAX && !(p->type == STK__PT_FLOATS && p->dhi >= FLT_MAX))
        expect_real(p, past(p, p->dhi, INFINITY), STK_E_INVALID);
    expect_real(p, p->dlo, p->lo_open ? STK_E_INVALID : STK_OK);
    expect_real(p, past(p, p->dlo, p->lo_open ? INFINITY : -INFINITY), p->lo_open ? STK_OK : STK_E_INVALID);
    expect_real(p, NAN, STK_E_INVALID);
}

static void check_bounds(const stk__param_def *p)
{
    double lo = 0, hi = 0;
    T_OK(stk_param_bounds(p->key, &lo, &hi));
    double tlo = p->type == STK__PT_INT ? (double)p->ilo : p->dlo;
    double thi = p->type == STK__PT_INT ? (double)p->ihi : p->dhi;
    T_CHECK(lo == tlo && hi == thi, "%s: bounds %g..%g, table %g..%g", p->name, lo, hi, tlo, thi);
}

/* A handle that does not take P refuses it as unknown. */
static void check_foreign(const stk__param_def *p)
{
    const unsigned kinds[] = {STK__PH_LOADER, STK__PH_DATASET, STK__PH_WRITER};
    for (size_t k = 0; k < 3; k++) {
        if ((p->handles & kinds[k]) || p->type != STK__PT_INT)
            continue;
        set_int_fn set;
        void *h = make(kinds[k], &set);
        int rc = set(h, p->key, p->idef);
        T_CHECK(rc == STK_E_BADPARAM, "%s takes %s: %s", hname(kinds[k]), p->name, stk_status_name(rc));
        drop(kinds[k], h);
    }
}

static void check_default(const stk__param_def *p)
{
    if (!(p->handles & STK__PH_LOADER) || p->type == STK__PT_FLOATS)
        return;
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    double v = -12345;
    T_OK(stk_loader_get(h, p->key, &v));
    double want = p->type == STK__PT_INT ? (double)p->idef : p->ddef;
    if (p->key == STK_P_WORKERS) { /* the CPU budget (test_workers_default checks how it is made) */
        stk_cpu_budget b;
        T_OK(stk_cpu_budget_get(&b));
        want = fmin(fmax(b.workers, (double)p->ilo), (double)p->ihi);
    }
    T_CHECK(v == want, "%s: default %g, table %g", p->name, v, want);
    stk_loader_destroy(h);
}

int main(void)
{
    T_CHECK(stk__param_count > 40, "the table has %zu rows", stk__param_count);
    unsigned seen = 0;
    for (size_t i = 0; i < stk__param_count; i++) {
        const stk__param_def *p = &stk__param_table[i];
        T_CHECK(p->handles != 0, "%s: no handle takes it", p->name);
        T_CHECK(i == 0 || stk__param_table[i - 1].key < p->key, "%s: table sorted by key", p->name);
        seen |= p->handles;
        check_bounds(p);
        check_foreign(p);
        check_default(p);
        for (unsigned hd = STK__PH_LOADER; hd <= STK__PH_WRITER; hd <<= 1) {
            if (!(p->handles & hd))
                continue;
            if (p->type == STK__PT_INT)
                check_int(hd, p);
            else if (p->key != STK_P_AUG_STEPS && p->key != STK_P_TIMM_AUTO_POLICY)
                /* programs: per-value ranges (test_loader_augment) */
                check_real(p);
        }
    }
    T_CHECK(seen == (STK__PH_LOADER | STK__PH_DATASET | STK__PH_WRITER), "every handle has keys");
    double lo, hi;
    T_CHECK(stk_param_bounds(4242, &lo, &hi) == STK_E_BADPARAM, "unknown key");
    printf("test_params: %zu keys ok\n", stk__param_count);
    return 0;
}
