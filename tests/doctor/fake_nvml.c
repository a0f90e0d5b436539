/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libnvidia-ml.so.1 for test_doctor_nvml.sh: the few NVML entry points stoker doctor
 * loads, answering one GPU named "Fake GPU" with 80 GiB, FAKE_NVML_UTIL percent busy and
 * FAKE_NVML_USED_MIB MiB in use, and the doctor's child processes as its compute processes.
 * Lets the NVML half of the doctor (dlopen, figures, the context check) run on a machine
 * without a GPU. Built as $BUILD_DIR/tests/fake-nvml/libnvidia-ml.so.1 by tests/CMakeLists.txt.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef struct { unsigned gpu, memory; } util_t;
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc_t;

static int handle_token;

API int nvmlInit_v2(void);
API int nvmlShutdown(void);
API int nvmlDeviceGetCount_v2(unsigned *n);
API int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h);
API int nvmlDeviceGetName(void *h, char *name, unsigned len);
API int nvmlDeviceGetUtilizationRates(void *h, util_t *u);
API int nvmlDeviceGetMemoryInfo(void *h, mem_t *m);
API int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned *n, proc_t *p);

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned *n)
{
    *n = 1;
    return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h)
{
    if (i != 0)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *h = &handle_token;
    return 0;
}

int nvmlDeviceGetName(void *h, char *name, unsigned len)
{
    (void)h;
    snprintf(name, len, "Fake GPU");
    return 0;
}

static unsigned env_u(const char *k, unsigned def)
{
    const char *v = getenv(k);
    return v ? (unsigned)strtoul(v, NULL, 10) : def;
}

int nvmlDeviceGetUtilizationRates(void *h, util_t *u)
{
    (void)h;
    u->gpu = env_u("FAKE_NVML_UTIL", 0);
    u->memory = 0;
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *h, mem_t *m)
{
    (void)h;
    m->total = 80ull << 30;
    m->used = (unsigned long long)env_u("FAKE_NVML_USED_MIB", 0) << 20;
    m->free = m->total - m->used;
    return 0;
}

/* the caller's children: the job, as a driver would list a process with a context */
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned *n, proc_t *p)
{
    (void)h;
    unsigned cap = *n, k = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) && k < cap) {
        char path[300], buf[512];
        int pid = atoi(de->d_name), ppid = 0;
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        char *rp = strrchr(buf, ')');
        if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == getpid()) {
            p[k].pid = (unsigned)pid;
            p[k].used = 1ull << 30;
            p[k].gi = p[k].ci = 0;
            k++;
        }
    }
    if (d)
        closedir(d);
    *n = k;
    return 0;
}
