/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h — shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c) and the replay driver.
 *
 * Each harness defines LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize). Built with
 * STOKER_FUZZ=ON and clang, it links -fsanitize=fuzzer; in the normal build, replay.c supplies
 * main() and runs it over the seed corpus and the regression inputs (CTest: fuzz_replay_*).
 *
 * FUZZ_CHECK(cond): an invariant of the code under test. A violation prints the condition and
 * aborts, so libFuzzer keeps the input as a crash and the replay test fails.
 */
#ifndef STK_FUZZ_H
#define STK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz invariant failed %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

#endif
