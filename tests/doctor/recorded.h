/* SPDX-License-Identifier: MIT */
/*
 * recorded.h — figures as stoker doctor's sampler and hook record them, for the tests that run
 * its analysis (tools/stoker/doctor_verdict.c) on a job built in memory: one torch loader in one
 * process, its batches at a steady pace, and ticks of 100 ms that repeat one sample.
 */
#ifndef STK_TEST_DOCTOR_RECORDED_H
#define STK_TEST_DOCTOR_RECORDED_H

#include "doctor.h"

#include <stddef.h>
#include <stdint.h>

#define REC_T0 1000000000LL /* the job's start, ns */
#define REC_PID 100

/* R and IT cleared and set up as a hooked job (process REC_PID, started at REC_T0, ticks of
 * 100 ms) whose torch loader 1, of WORKERS workers and batch BS, starts an iterator at 0.5 s;
 * ALLOWED is the cores the job may use (also its affinity and the cores online) */
void rec_job(dr_run *r, dr_iter *it, int workers, int bs, double allowed);

/* N batches from that iterator into STEPS: each ends BETWEEN_NS after the one before (the first
 * WAIT_NS after the iterator) and WAIT_NS of it is the wait for the loader; the job exits 50 ms
 * after the last one */
void rec_steps(dr_run *r, dr_step *steps, int n, int64_t between_ns, int64_t wait_ns);

/* ticks of 100 ms over the whole run into TICKS (CAP of them at most), each a copy of SAMPLE */
void rec_ticks(dr_run *r, dr_tick *ticks, size_t cap, const dr_tick *sample);

/* analyse R; print "ok" or "FAIL" and WHAT, and count a failure in *FAILURES unless the verdict
 * line has each of WANT (NULL-terminated) and not NOT_WANT (may be NULL) */
void rec_expect(dr_run *r, const char *what, const char *const *want, const char *not_want, int *failures);

#endif
