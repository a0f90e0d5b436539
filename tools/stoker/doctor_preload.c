/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's launcher-proof path to the hook: a tiny library the doctor puts in the job's
 * LD_PRELOAD (written, like the hook, from bytes embedded in the binary). Its constructor runs in
 * every dynamically linked program of the job's tree before that program's main(), so in a Python
 * interpreter before it reads PYTHONPATH: when a launcher (`env PYTHONPATH=x`, `bash -c`, a
 * script, uv/poetry/conda run, torchrun's children) replaced PYTHONPATH, the constructor puts the
 * hook's directory back in front of it. It does nothing else, and nothing when the doctor's
 * variables are gone. Built without sanitizers: it is loaded into the job's programs, not the
 * doctor's. Why and limits: docs/doctor.md, "Following the job through launchers".
 */
#include <stdlib.h>
#include <string.h>

__attribute__((constructor)) static void stk_doctor_preload(void)
{
    const char *dir = getenv("STOKER_DOCTOR_HOOKDIR");
    if (!dir || !*dir)
        return;
    const char *pp = getenv("PYTHONPATH");
    size_t n = strlen(dir);
    if (pp && strncmp(pp, dir, n) == 0 && (pp[n] == '\0' || pp[n] == ':'))
        return;
    if (!pp || !*pp) {
        setenv("PYTHONPATH", dir, 1);
        return;
    }
    size_t m = strlen(pp);
    char *v = malloc(n + m + 2);
    if (!v)
        return;
    memcpy(v, dir, n);
    v[n] = ':';
    memcpy(v + n + 1, pp, m + 1);
    setenv("PYTHONPATH", v, 1);
    free(v);
}
