/* SPDX-License-Identifier: MIT */
/*
 * loader_params.c — stk_loader_set / set_double / set_floats / get over the one parameter table
 * (core/params.c): the table gives type, range and default; this file adds the loader's rule
 * for when a key may be set and keeps the values, indexed like the table. Also
 * stk_loader_set_vexp, the one setter that takes a function (GaussianBlur's exp).
 */
#include "loader_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Common checks of the setters: a loader key of TYPE, settable now. The table index into *IDX
 * (-1 when the key fails a check). */
static int param_check(stk_loader *h, int key, char type, int *idx)
{
    *idx = -1;
    if (!h)
        return STK_E_INVALID;
    const stk__param_def *p = stk__param_for(key, STK__PH_LOADER);
    if (!p)
        return stk__err(h->err, STK_E_BADPARAM, "unknown loader parameter %d", key);
    if (p->type != type)
        return stk__err(h->err, STK_E_BADPARAM, "%s is of type %c, not %c (use the matching setter)",
                        p->name, p->type, type);
    if (p->when == STK__PW_OPEN && h->state != STK__LS_CREATED)
        return stk__err(h->err, STK_E_STATE, "%s can only be set before stk_loader_open", p->name);
    if (h->state == STK__LS_STARTED)
        return stk__err(h->err, STK_E_STATE, "%s can only be set before stk_loader_start (or after stop)",
                        p->name);
    *idx = (int)(p - stk__param_table);
    return STK_OK;
}

int stk_loader_set(stk_loader *h, int key, int64_t value)
{
    int i, rc = param_check(h, key, STK__PT_INT, &i);
    if (rc == STK_OK)
        rc = stk__param_check_int(&stk__param_table[i], value, h->err);
    if (rc == STK_OK)
        h->pv[i].i = value;
    return rc;
}

int stk_loader_set_double(stk_loader *h, int key, double value)
{
    int i, rc = param_check(h, key, STK__PT_DOUBLE, &i);
    if (rc == STK_OK)
        rc = stk__param_check_double(&stk__param_table[i], value, h->err);
    if (rc == STK_OK)
        h->pv[i].d = value;
    return rc;
}

/* STK_P_LUT: 768 finite values, or (NULL, 0) to remove the table. */
static int set_lut(stk_loader *h, const stk__param_def *p, const float *v, size_t n)
{
    if (!v && n == 0) {
        free(h->lut);
        h->lut = NULL;
        return STK_OK;
    }
    if (!v || n != 768)
        return stk__err(h->err, STK_E_INVALID, "%s takes 3 x 256 values (or NULL, 0 to remove it), got %zu",
                        p->name, n);
    for (size_t j = 0; j < n; j++)
        if (!isfinite(v[j]) || !stk__param_in_range_d(p, v[j]))
            return stk__err(h->err, STK_E_INVALID, "%s[%zu] = %g is out of range", p->name, j, (double)v[j]);
    if (!h->lut && !(h->lut = malloc(768 * sizeof(float))))
        return stk__err(h->err, STK_E_NOMEM, "out of memory for %s", p->name);
    memcpy(h->lut, v, 768 * sizeof(float));
    return STK_OK;
}

int stk_loader_set_floats(stk_loader *h, int key, const float *v, size_t n)
{
    int i, rc = param_check(h, key, STK__PT_FLOATS, &i);
    if (rc != STK_OK)
        return rc;
    const stk__param_def *p = &stk__param_table[i];
    if (key == STK_P_LUT)
        return set_lut(h, p, v, n);
    if (key == STK_P_AUG_STEPS) {
        stk__augprog prog;
        if (!v && n)
            return stk__err(h->err, STK_E_INVALID, "%s: NULL with %zu values", p->name, n);
        rc = stk__augprog_parse(v, n, &prog, h->err);
        if (rc == STK_OK)
            h->augprog = prog;
        return rc;
    }
    if (key == STK_P_TIMM_AUTO_POLICY) {
        if (!v && n)
            return stk__err(h->err, STK_E_INVALID, "%s: NULL with %zu values", p->name, n);
        if (n > 256)
            return stk__err(h->err, STK_E_INVALID, "%s: %zu values, at most 256", p->name, n);
        stk__timmaa *aa = malloc(sizeof *aa);
        if (!aa)
            return stk__err(h->err, STK_E_NOMEM, "out of memory for %s", p->name);
        rc = stk__timmaa_parse(v, n, aa, h->err);
        if (rc == STK_OK)
            h->timmaa = *aa;
        free(aa);
        return rc;
    }
    if (!v || (n != 1 && n != 3))
        return stk__err(h->err, STK_E_INVALID, "%s takes 3 values (or 1 for all channels), got %zu",
                        p->name, n);
    float tmp[3];
    for (int c = 0; c < 3; c++) {
        double x = v[n == 3 ? c : 0];
        if (!stk__param_in_range_d(p, x))
            return stk__err(h->err, STK_E_INVALID, "%s[%d] = %g is out of range", p->name, c, x);
        tmp[c] = (float)x;
    }
    if (key == STK_P_ERASE_VALUE) {
        memcpy(h->erase_value, tmp, sizeof tmp);
    } else if (key == STK_P_MEAN) {
        memcpy(h->mean, tmp, sizeof tmp);
        h->have_mean = 1;
    } else {
        memcpy(h->std, tmp, sizeof tmp);
        h->have_std = 1;
    }
    return STK_OK;
}

int stk_loader_get(const stk_loader *h, int key, double *value)
{
    if (!h || !value)
        return STK_E_INVALID;
    const stk__param_def *p = stk__param_for(key, STK__PH_LOADER);
    if (!p || p->type == STK__PT_FLOATS)
        return STK_E_BADPARAM;
    int i = (int)(p - stk__param_table);
    *value = p->type == STK__PT_INT ? (double)h->pv[i].i : h->pv[i].d;
    return STK_OK;
}

uint64_t stk__loader_records(const stk_loader *h)
{
    return h->subset ? h->nsubset : stk_dataset_count(h->ds);
}

int stk_loader_set_indices(stk_loader *h, const uint64_t *idx, size_t n)
{
    if (!h)
        return STK_E_INVALID;
    if (h->state != STK__LS_OPENED)
        return stk__err(h->err, STK_E_STATE, "stk_loader_set_indices: only after stk_loader_open and "
                        "before stk_loader_start (or after stop)");
    /* a resumed epoch's rest (stk_loader_resume_segments) was computed on the list it was
     * given with: another list forgets it */
    if (h->sw_rest && (n != h->nsubset || !idx || !h->subset ||
                       memcmp(idx, h->subset, n * sizeof *idx) != 0))
        stk__loader_rest_drop(h);
    if (!idx && n == 0) {
        free(h->subset);
        h->subset = NULL;
        h->nsubset = 0;
        return stk__loader_order_subset(h); /* back to the dataset's table */
    }
    if (!idx || n == 0)
        return stk__err(h->err, STK_E_INVALID, "stk_loader_set_indices: %s",
                        idx ? "an empty list (NULL, 0 removes it)" : "NULL list of nonzero length");
    uint64_t count = stk_dataset_count(h->ds);
    for (size_t j = 0; j < n; j++)
        if (idx[j] >= count)
            return stk__err(h->err, STK_E_RANGE, "stk_loader_set_indices: entry %zu is record %llu, "
                            "but the dataset has %llu", j, (unsigned long long)idx[j],
                            (unsigned long long)count);
    uint64_t *copy = malloc(n * sizeof *copy);
    if (!copy)
        return stk__err(h->err, STK_E_NOMEM, "stk_loader_set_indices: out of memory for %zu indices", n);
    memcpy(copy, idx, n * sizeof *copy);
    free(h->subset);
    h->subset = copy;
    h->nsubset = n;
    /* the shard-window order's table of it: stk_loader_samples_per_epoch counts on it now */
    if (stk__loader_order_subset(h) != STK_OK)
        return stk__err(h->err, STK_E_NOMEM, "stk_loader_set_indices: out of memory for the "
                        "shard table of %zu indices", n);
    return STK_OK;
}

int stk_loader_set_vexp(stk_loader *h, stk_vexp_fn fn, int64_t arg)
{
    if (!h)
        return STK_E_INVALID;
    if (h->state == STK__LS_STARTED) /* the consumer thread's state, as every setter reads it */
        return stk__err(h->err, STK_E_STATE, "stk_loader_set_vexp: before stk_loader_start (or after stop)");
    h->vexp = fn;
    h->vexp_arg = fn ? arg : 0;
    return STK_OK;
}
