/* SPDX-License-Identifier: MIT */
/*
 * loader_errors.c — the record-error list behind stk_loader_error_count / stk_loader_error_get.
 * A bad record never stops an epoch by default, so this list is how it is named: the memory is
 * bounded (the first STK__MAX_ERRS) and allocated only when the first error arrives.
 */
#include "loader_errors.h"
#include "loader_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stk__errlist_init(stk__errlist *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
}

void stk__errlist_destroy(stk__errlist *l)
{
    pthread_mutex_destroy(&l->mu);
    free(l->v);
    l->v = NULL;
}

static void fill(stk_record_error *e, const stk_dataset *ds, uint64_t index, uint64_t epoch, int status,
                 int sys_errno, const char *reason)
{
    memset(e, 0, sizeof(*e));
    e->index = index;
    e->epoch = epoch;
    e->status = status;
    e->sys_errno = sys_errno;
    if (stk_dataset_record_name(ds, index, e->where, sizeof e->where) != STK_OK)
        snprintf(e->where, sizeof e->where, "record %llu", (unsigned long long)index);
    const char *why = reason && *reason ? reason : stk_strerror(status);
    size_t n = strlen(why);
    if (n >= sizeof e->reason)
        n = sizeof e->reason - 1; /* cut to the field on purpose */
    memcpy(e->reason, why, n);
    e->reason[n] = '\0';
}

void stk__errlist_add(stk__errlist *l, const stk_dataset *ds, uint64_t index, uint64_t epoch, int status,
                      int sys_errno, const char *reason)
{
    pthread_mutex_lock(&l->mu);
    if (!l->v)
        l->v = calloc(STK__MAX_ERRS, sizeof(*l->v));
    if (l->v && l->n < STK__MAX_ERRS)
        fill(&l->v[l->n], ds, index, epoch, status, sys_errno, reason);
    l->n++;
    pthread_mutex_unlock(&l->mu);
}

uint64_t stk__errlist_count(stk__errlist *l)
{
    pthread_mutex_lock(&l->mu);
    uint64_t n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

int stk__errlist_get(stk__errlist *l, uint64_t i, stk_record_error *out)
{
    pthread_mutex_lock(&l->mu);
    int rc = STK_OK;
    if (i >= l->n || i >= STK__MAX_ERRS || !l->v)
        rc = STK_E_RANGE;
    else
        *out = l->v[i];
    pthread_mutex_unlock(&l->mu);
    return rc;
}

/* ---- the public view --------------------------------------------------------------------- */

uint64_t stk_loader_error_count(const stk_loader *h)
{
    return h ? stk__errlist_count(&((stk_loader *)h)->errs) : 0;
}

int stk_loader_error_get(const stk_loader *h, uint64_t i, stk_record_error *out)
{
    if (!h || !out)
        return STK_E_INVALID;
    return stk__errlist_get(&((stk_loader *)h)->errs, i, out);
}
