/* SPDX-License-Identifier: MIT */
/*
 * params.h — the one table of parameters (STK_P_* and STK_W_* keys): type, which handles take a
 * key, when it may be set, range and default. The loader, dataset and writer setters and
 * stk_param_bounds all read it, so each range and default is written once. It lives in core so
 * that every layer can use it. Internal.
 */
#ifndef STK_PARAMS_H
#define STK_PARAMS_H

#include "common.h"

enum { STK__PT_INT = 'I', STK__PT_DOUBLE = 'D', STK__PT_FLOATS = 'F' };
/* when a key may be set on a loader: before stk_loader_open / before stk_loader_start */
enum { STK__PW_OPEN = 'O', STK__PW_START = 'S' };
/* the handles that take a key (bits) */
enum { STK__PH_LOADER = 1, STK__PH_DATASET = 2, STK__PH_WRITER = 4 };

typedef struct stk__param_def {
    int key;
    char type;              /* STK__PT_* */
    char when;              /* STK__PW_* */
    char lo_open;           /* 1: lower bound excluded (lo < value) */
    unsigned char handles;  /* STK__PH_* */
    const char *name;
    int64_t ilo, ihi;       /* integer range (STK__PT_INT) */
    double dlo, dhi;        /* double range (STK__PT_DOUBLE / FLOATS) */
    int64_t idef;
    double ddef;
} stk__param_def;

/* The table (sorted by key). */
extern const stk__param_def stk__param_table[];
extern const size_t stk__param_count;

/* Index of KEY in the table, or -1. */
int stk__param_find(int key);
/* KEY's row if HANDLE (STK__PH_*) takes it, else NULL. */
const stk__param_def *stk__param_for(int key, unsigned handle);
/* Default / lower bound of the integer key KEY (which must be in the table). */
int64_t stk__param_idef(int key);
int64_t stk__param_imin(int key);

/* Check VALUE against P's range: STK_OK, or STK_E_INVALID with the reason in ERR
 * (STK__ERRLEN bytes). */
int stk__param_check_int(const stk__param_def *p, int64_t value, char *err);
int stk__param_check_double(const stk__param_def *p, double value, char *err);
/* 1 if VALUE is finite and within the double / floats key P's range. */
int stk__param_in_range_d(const stk__param_def *p, double value);

#endif
