/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's sampler: everything the doctor learns from outside the job. Each tick it walks
 * the job's process tree in /proc and reads, per thread, the scheduler's own counters
 * (/proc/PID/task/TID/schedstat: time on a CPU and time runnable but waiting for one, in ns) and
 * the thread's state letter (D = uninterruptible, in practice waiting for the disk); per process
 * the storage bytes (/proc/PID/io) and memory (statm); machine-wide /proc/stat, /proc/pressure,
 * /proc/meminfo, /proc/diskstats and the job's /proc/PID/net/dev; GPUs through NVML, opened with
 * dlopen at run time so that the build needs no NVIDIA package. Once a second it also looks at the
 * job's open files, to name the block devices it reads and whether it has a GPU device open.
 * Nothing here runs inside the job, so the job pays only for the CPU this process takes.
 */
#include "doctor.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

int64_t dr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- small file helpers ---------------------------------------------------------------------- */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    return (ssize_t)n;
}

static int is_number(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* ---- per-thread / per-process previous values: open addressing on the id ---------------------- */
#define TAB_SIZE 8192
typedef struct ent {
    int id;
    unsigned gen;
    uint64_t v[4];
    unsigned until;             /* procs: v[2], v[3] are owed until this tick (see sample_io) */
} ent;

static ent *tab_get(ent *t, int id, unsigned gen, int *fresh)
{
    unsigned h = ((unsigned)id * 2654435761u) & (TAB_SIZE - 1);
    for (unsigned i = 0; i < TAB_SIZE; i++) {
        ent *e = &t[(h + i) & (TAB_SIZE - 1)];
        if (e->id == id) {
            *fresh = e->gen + 1 < gen; /* not seen last tick: a new thread that reused the id */
            e->gen = gen;
            return e;
        }
        if (e->id == 0 || e->gen + 1 < gen) { /* empty, or stale (gone since before last tick) */
            e->id = id;
            e->gen = gen;
            memset(e->v, 0, sizeof e->v);
            *fresh = 1;
            return e;
        }
    }
    return NULL;
}

/* the entry of id, whatever its age; NULL if none */
static ent *tab_find(ent *t, int id)
{
    unsigned h = ((unsigned)id * 2654435761u) & (TAB_SIZE - 1);
    for (unsigned i = 0; i < TAB_SIZE; i++) {
        ent *e = &t[(h + i) & (TAB_SIZE - 1)];
        if (e->id == id)
            return e;
        if (e->id == 0)
            return NULL;
    }
    return NULL;
}

/* ---- NVML, loaded at run time ----------------------------------------------------------------- */
typedef struct { unsigned gpu, memory; } nvml_util;
typedef struct { unsigned long long total, free, used; } nvml_mem;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } nvml_proc; /* v2/v3 */
typedef int (*nvml_fn0)(void);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_util_fn)(void *, nvml_util *);
typedef int (*nvml_mem_fn)(void *, nvml_mem *);
typedef int (*nvml_name_fn)(void *, char *, unsigned);
typedef int (*nvml_procs_fn)(void *, unsigned *, nvml_proc *);

typedef struct nvml {
    void *so;
    nvml_fn0 shutdown;
    nvml_util_fn util;
    nvml_mem_fn mem;
    nvml_procs_fn procs;
    void *dev[DR_MAXGPU];
} nvml;

static void *sym(void *so, const char *a, const char *b)
{
    void *p = dlsym(so, a);
    return p || !b ? p : dlsym(so, b);
}

static int nvml_open(nvml *n, dr_run *r)
{
    memset(n, 0, sizeof *n);
    n->so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->so) {
        snprintf(r->nvml_why, sizeof r->nvml_why, "libnvidia-ml.so.1 not found (no NVIDIA driver here)");
        return 0;
    }
    nvml_fn0 init = (nvml_fn0)sym(n->so, "nvmlInit_v2", "nvmlInit");
    nvml_count_fn count = (nvml_count_fn)sym(n->so, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    nvml_handle_fn handle = (nvml_handle_fn)sym(n->so, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    nvml_name_fn name = (nvml_name_fn)sym(n->so, "nvmlDeviceGetName", NULL);
    n->shutdown = (nvml_fn0)sym(n->so, "nvmlShutdown", NULL);
    n->util = (nvml_util_fn)sym(n->so, "nvmlDeviceGetUtilizationRates", NULL);
    n->mem = (nvml_mem_fn)sym(n->so, "nvmlDeviceGetMemoryInfo", NULL);
    n->procs = (nvml_procs_fn)sym(n->so, "nvmlDeviceGetComputeRunningProcesses_v3",
                                  "nvmlDeviceGetComputeRunningProcesses_v2");
    unsigned cnt = 0;
    int rc;
    if (!init || !count || !handle || !n->util || !n->mem || !n->shutdown) {
        snprintf(r->nvml_why, sizeof r->nvml_why, "libnvidia-ml.so.1 lacks the functions used");
        goto fail;
    }
    if ((rc = init()) != 0) {
        snprintf(r->nvml_why, sizeof r->nvml_why, "nvmlInit failed (NVML error %d)", rc);
        goto fail;
    }
    if (count(&cnt) != 0)
        cnt = 0;
    if (cnt > DR_MAXGPU)
        cnt = DR_MAXGPU;
    for (unsigned i = 0; i < cnt; i++) {
        if (handle(i, &n->dev[i]) != 0) {
            cnt = i;
            break;
        }
        if (name)
            name(n->dev[i], r->gpus[i].name, sizeof r->gpus[i].name);
        nvml_mem m;
        if (n->mem(n->dev[i], &m) == 0)
            r->gpus[i].mem_total = (double)m.total;
    }
    r->ngpu = (int)cnt;
    r->nvml = 1;
    if (cnt == 0)
        snprintf(r->nvml_why, sizeof r->nvml_why, "NVML reports no GPU");
    return 1;
fail:
    dlclose(n->so);
    n->so = NULL;
    return 0;
}

/* ---- the sampler ------------------------------------------------------------------------------ */
#define MAXPROC 4096
struct dr_sampler {
    ent *threads, *procs;
    unsigned gen;
    int64_t last;
    int pids[MAXPROC];
    int ppids[MAXPROC];         /* the parent of each, when the tree was walked */
    int npids;
    uint64_t stat_busy, stat_total;
    uint64_t psi[3];
    int diskstats_ok;
    uint64_t dev_prev[4];       /* summed whole devices */
    uint64_t net_prev[2];
    int net_ok;
    unsigned ticks;
    nvml nv;
};

static int read_ppid(int pid, int *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    char st;
    if (sscanf(p + 1, " %c %d", &st, ppid) != 2)
        return -1;
    return 0;
}

static void owe(dr_sampler *s, int pid, int ppid);
static int in_list(const int *a, int n, int v);

/* the job's processes: the command and every descendant */
static void walk_tree(dr_sampler *s, pid_t root)
{
    static int old[MAXPROC], oldpp[MAXPROC];
    int nold = s->npids;
    memcpy(old, s->pids, (size_t)nold * sizeof *old);
    memcpy(oldpp, s->ppids, (size_t)nold * sizeof *oldpp);
    static int all[MAXPROC], par[MAXPROC];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d) {
        s->npids = 0;
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) && n < MAXPROC) {
        if (!is_number(de->d_name))
            continue;
        int pid = atoi(de->d_name), pp;
        if (read_ppid(pid, &pp) == 0) {
            all[n] = pid;
            par[n] = pp;
            n++;
        }
    }
    closedir(d);
    s->npids = 0;
    s->ppids[s->npids] = getpid();
    s->pids[s->npids++] = root;
    for (int i = 0; i < s->npids; i++)
        for (int j = 0; j < n && s->npids < MAXPROC; j++)
            if (par[j] == s->pids[i]) {
                s->ppids[s->npids] = par[j];
                s->pids[s->npids++] = all[j];
            }
    for (int i = 0; i < nold; i++) /* gone since the last walk (and maybe reaped already) */
        if (!in_list(s->pids, s->npids, old[i]))
            owe(s, old[i], oldpp[i]);
}

static int in_list(const int *a, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (a[i] == v)
            return 1;
    return 0;
}

static int role_of(const dr_run *r, int pid, int tid, const char *comm)
{
    if (!strncmp(comm, "stk-", 4))
        return DR_STOKER;
    if (tid == r->main_pid)
        return DR_MAIN;
    if (in_list(r->worker_pids, r->nworkers_seen, pid))
        return DR_WORKER;
    return DR_OTHER;
}

#define OWED_TICKS 20 /* a gone child's totals are owed by its parent for 2 s at most */

/* pid is gone: its last totals are owed by its parent ppid, if that is in the tree */
static void owe(dr_sampler *s, int pid, int ppid)
{
    ent *e = tab_find(s->procs, pid), *p = NULL;
    if (e && in_list(s->pids, s->npids, ppid))
        p = tab_find(s->procs, ppid);
    if (p) {
        p->v[2] += e->v[0];
        p->v[3] += e->v[1];
        p->until = s->gen + OWED_TICKS;
    }
    if (e) { /* counted once: a stale entry from now on */
        e->id = -1;
        e->gen = 0;
    }
}

/* The job's storage bytes, summed over its processes' /proc/PID/io. A process's counters include
 * those of the children it has reaped: when a child seen alive is gone, its last totals are owed
 * by its parent (if in the tree), whose next increases carry them and are not counted again. */
static void sample_io(dr_sampler *s, dr_tick *k, double dt)
{
    static uint64_t rb[MAXPROC], wb[MAXPROC];
    static char ok[MAXPROC];
    char path[64], buf[1024];
    for (int i = 0; i < s->npids; i++) {
        snprintf(path, sizeof path, "/proc/%d/io", s->pids[i]);
        ok[i] = read_small(path, buf, sizeof buf) > 0;
        if (!ok[i]) {
            owe(s, s->pids[i], s->ppids[i]);
            continue;
        }
        char *p = strstr(buf, "\nread_bytes:"), *q = strstr(buf, "\nwrite_bytes:");
        rb[i] = p ? strtoull(p + 12, NULL, 10) : 0;
        wb[i] = q ? strtoull(q + 13, NULL, 10) : 0;
    }
    uint64_t jr = 0, jw = 0;
    for (int i = 0; i < s->npids; i++) {
        int fresh;
        ent *e = ok[i] ? tab_get(s->procs, s->pids[i], s->gen, &fresh) : NULL;
        if (!e)
            continue;
        if (fresh || e->until < s->gen)
            e->v[2] = e->v[3] = 0;
        uint64_t dr = fresh ? rb[i] : rb[i] >= e->v[0] ? rb[i] - e->v[0] : 0;
        uint64_t dw = fresh ? wb[i] : wb[i] >= e->v[1] ? wb[i] - e->v[1] : 0;
        uint64_t mr = dr < e->v[2] ? dr : e->v[2], mw = dw < e->v[3] ? dw : e->v[3];
        e->v[2] -= mr;
        e->v[3] -= mw;
        jr += dr - mr;
        jw += dw - mw;
        e->v[0] = rb[i];
        e->v[1] = wb[i];
    }
    k->job_rd_bps = (double)jr / dt;
    k->job_wr_bps = (double)jw / dt;
}

static void sample_threads(dr_sampler *s, dr_run *r, dr_tick *k, double dt)
{
    char path[96], buf[1024];
    double rss_pages = 0;
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < s->npids; i++) {
        int pid = s->pids[i];
        snprintf(path, sizeof path, "/proc/%d/task", pid);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!is_number(de->d_name))
                continue;
            int tid = atoi(de->d_name);
            snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
            if (read_small(path, buf, sizeof buf) <= 0)
                continue;
            char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
            if (!lp || !rp || rp < lp)
                continue;
            char comm[32];
            size_t cl = (size_t)(rp - lp - 1) < sizeof comm - 1 ? (size_t)(rp - lp - 1) : sizeof comm - 1;
            memcpy(comm, lp + 1, cl);
            comm[cl] = 0;
            char st = rp[2];
            unsigned long long ut = 0, stt = 0;
            /* fields after the state: ppid pgrp session tty tpgid flags minflt cminflt majflt
             * cmajflt utime stime */
            sscanf(rp + 4, "%*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt);
            uint64_t run_ns = (ut + stt) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK)), wait_ns = 0;
            snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
            if (read_small(path, buf, sizeof buf) > 0) {
                unsigned long long a, b;
                if (sscanf(buf, "%llu %llu", &a, &b) == 2) {
                    run_ns = a;
                    wait_ns = b;
                }
            }
            int fresh;
            ent *e = tab_get(s->threads, tid, s->gen, &fresh);
            if (!e)
                continue;
            uint64_t dr = fresh ? run_ns : run_ns - e->v[0], dw = fresh ? wait_ns : wait_ns - e->v[1];
            if (!fresh && (run_ns < e->v[0] || wait_ns < e->v[1]))
                dr = dw = 0;
            e->v[0] = run_ns;
            e->v[1] = wait_ns;
            int role = role_of(r, pid, tid, comm);
            k->cpu[role] += (double)dr / 1e9 / dt;
            k->rq[role] += (double)dw / 1e9 / dt;
            k->nthreads[role] += 1;
            if (st == 'D')
                k->dthreads[role] += 1;
            if (role == DR_MAIN)
                k->main_state = st;
            if (!strncmp(comm, "stk-dec", 7))
                k->ndec += 1;
        }
        closedir(d);
        snprintf(path, sizeof path, "/proc/%d/statm", pid);
        if (read_small(path, buf, sizeof buf) > 0) {
            unsigned long long sz, res;
            if (sscanf(buf, "%llu %llu", &sz, &res) == 2)
                rss_pages += (double)res;
        }
    }
    k->rss = rss_pages * (double)page;
    sample_io(s, k, dt);
}

static int dev_whole(unsigned maj, unsigned min)
{
    static struct { unsigned maj, min; int whole; } cache[64];
    static int n;
    for (int i = 0; i < n; i++)
        if (cache[i].maj == maj && cache[i].min == min)
            return cache[i].whole;
    char path[96];
    struct stat sb;
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u/partition", maj, min);
    int whole = stat(path, &sb) != 0;
    if (n < 64) {
        cache[n].maj = maj;
        cache[n].min = min;
        cache[n].whole = whole;
        n++;
    }
    return whole;
}

static void add_dev(dr_run *r, unsigned maj, unsigned min, int touched)
{
    for (int i = 0; i < r->ndevs; i++)
        if (r->devs[i].maj == maj && r->devs[i].min == min) {
            r->devs[i].touched |= touched;
            return;
        }
    if (r->ndevs >= DR_MAXDEV)
        return;
    dr_dev *d = &r->devs[r->ndevs++];
    memset(d, 0, sizeof *d);
    d->maj = maj;
    d->min = min;
    d->touched = touched;
    snprintf(d->name, sizeof d->name, "%u:%u", maj, min);
}

/* diskstats: per tick the sum over whole devices; per device the totals at start and end */
static void sample_disks(dr_sampler *s, dr_run *r, dr_tick *k, double dt, int first)
{
    static char buf[65536];
    if (read_small("/proc/diskstats", buf, sizeof buf) <= 0)
        return;
    uint64_t sum[4] = {0};
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned maj, min;
        char name[32];
        unsigned long long v[11];
        if (sscanf(line, "%u %u %31s %llu %llu %llu %llu %llu %llu %llu %llu", &maj, &min, name,
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 11)
            continue;
        uint64_t cur[4] = {v[0], v[2], v[4], v[6]}; /* rd ios, rd sectors, wr ios, wr sectors */
        if (!strncmp(name, "ram", 3) || !strncmp(name, "zram", 4))
            continue;
        int whole = dev_whole(maj, min);
        if (whole && strncmp(name, "dm-", 3) != 0)
            for (int i = 0; i < 4; i++)
                sum[i] += cur[i];
        if (first && whole)
            add_dev(r, maj, min, 0);
        for (int i = 0; i < r->ndevs; i++)
            if (r->devs[i].maj == maj && r->devs[i].min == min) {
                dr_dev *d = &r->devs[i];
                snprintf(d->name, sizeof d->name, "%s", name);
                if (!d->have0)
                    memcpy(d->r0, cur, sizeof cur);
                d->have0 = 1;
                memcpy(d->r1, cur, sizeof cur);
            }
    }
    if (!first && s->diskstats_ok) {
        k->rd_iops = (double)(sum[0] - s->dev_prev[0]) / dt;
        k->rd_bps = (double)(sum[1] - s->dev_prev[1]) * 512.0 / dt;
        k->wr_iops = (double)(sum[2] - s->dev_prev[2]) / dt;
        k->wr_bps = (double)(sum[3] - s->dev_prev[3]) * 512.0 / dt;
    }
    memcpy(s->dev_prev, sum, sizeof sum);
    s->diskstats_ok = 1;
}

/* once a second: the devices under the job's open files and cwd; GPU device files open */
static void scan_fds(dr_sampler *s, dr_run *r)
{
    char path[320], link[256];
    struct stat sb;
    for (int i = 0; i < s->npids; i++) {
        int pid = s->pids[i];
        snprintf(path, sizeof path, "/proc/%d/cwd", pid);
        if (stat(path, &sb) == 0 && major(sb.st_dev) != 0)
            add_dev(r, major(sb.st_dev), minor(sb.st_dev), 1);
        snprintf(path, sizeof path, "/proc/%d/fd", pid);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!is_number(de->d_name))
                continue;
            snprintf(path, sizeof path, "/proc/%d/fd/%s", pid, de->d_name);
            ssize_t n = readlink(path, link, sizeof link - 1);
            if (n <= 0)
                continue;
            link[n] = 0;
            if (!strncmp(link, "/dev/nvidia", 11) && isdigit((unsigned char)link[11]))
                r->gpu_ctx = 1;
            if (link[0] != '/' || !strncmp(link, "/dev/", 5) || !strncmp(link, "/proc/", 6))
                continue;
            if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && major(sb.st_dev) != 0)
                add_dev(r, major(sb.st_dev), minor(sb.st_dev), 1);
        }
        closedir(d);
    }
}

/* a NUL-separated /proc file into one line (NULs as spaces), cut to cap */
static void nul_line(char *buf, ssize_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (ssize_t i = 0; i < n && k + 1 < cap; i++)
        out[k++] = buf[i] ? buf[i] : ' ';
    while (k && out[k - 1] == ' ')
        k--;
    out[k] = 0;
}

/* the value of NAME in a NUL-separated environment block, or NULL */
static const char *env_in(const char *buf, ssize_t n, const char *name)
{
    size_t l = strlen(name);
    for (ssize_t i = 0; i < n;) {
        const char *e = buf + i;
        size_t el = strnlen(e, (size_t)(n - i));
        if (el > l && !strncmp(e, name, l) && e[l] == '=')
            return e + l + 1;
        i += (ssize_t)el + 1;
    }
    return NULL;
}

/* why a Python interpreter would not load the hook, from its command line and initial environment */
static void python_why(const char *cmd, ssize_t cn, const char *env, ssize_t en, char *why, size_t cap)
{
    /* the interpreter's own flags, before -c / -m / the script: -I, -E, -S (alone or combined) */
    ssize_t i = (ssize_t)strnlen(cmd, (size_t)cn) + 1;
    while (i < cn) {
        const char *a = cmd + i;
        size_t al = strnlen(a, (size_t)(cn - i));
        i += (ssize_t)al + 1;
        if (a[0] != '-' || a[1] == '-' || !a[1])
            break;
        if (a[1] == 'W' || a[1] == 'X') {
            if (!a[2])
                i += (ssize_t)strnlen(cmd + i, (size_t)(cn > i ? cn - i : 0)) + 1;
            continue;
        }
        if (a[1] == 'c' || a[1] == 'm')
            break;
        if (strpbrk(a + 1, "IES")) {
            snprintf(why, cap, "run with %.8s: Python then ignores PYTHONPATH (-I, -E) or skips site (-S)%s", a,
                     strchr(a, 'I') ? "; uv and poetry probe the interpreter so before they run the job" : "");
            return;
        }
    }
    const char *ev = env_in(env, en, "STOKER_DOCTOR_EVENTS"), *pp = env_in(env, en, "PYTHONPATH"),
               *lp = env_in(env, en, "LD_PRELOAD");
    if (!ev)
        snprintf(why, cap, "its environment lacks the doctor's variables: its launcher cleared it (env -i, a "
                 "clean environment)");
    else if (!lp || !strstr(lp, "stk_doctor_preload"))
        snprintf(why, cap, "its launcher set PYTHONPATH=%.60s and LD_PRELOAD=%.40s without the doctor's", pp ? pp : "",
                 lp ? lp : "");
    else
        snprintf(why, cap, "the hook did not report: a statically linked or embedded interpreter, an "
                 "unwritable event file, or one that ended as it started");
}

/* once a second: Python interpreters in the job's tree (exec'd, not forks of another), with why
 * each would miss the hook; the report names those that never loaded it */
static void scan_python(dr_sampler *s, dr_run *r)
{
    static char cmd[4096], env[32768], pcmd[4096];
    char path[64], exe[256];
    for (int i = 0; i < s->npids && r->npyseen < DR_MAXPY; i++) {
        int pid = s->pids[i], known = 0;
        for (int j = 0; j < r->npyseen; j++)
            known |= r->pyseen[j].pid == pid;
        if (known || in_list(r->worker_pids, r->nworkers_seen < 256 ? r->nworkers_seen : 256, pid))
            continue;
        snprintf(path, sizeof path, "/proc/%d/exe", pid);
        ssize_t n = readlink(path, exe, sizeof exe - 1);
        if (n <= 0)
            continue;
        exe[n] = 0;
        const char *b = strrchr(exe, '/');
        b = b ? b + 1 : exe;
        if (strncmp(b, "python", 6) && strncmp(b, "pypy", 4))
            continue;
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        ssize_t cn = read_small(path, cmd, sizeof cmd);
        if (cn <= 0)
            continue;
        /* a fork of a Python process (a DataLoader worker, multiprocessing's fork) shares its
         * parent's command line and its hook */
        snprintf(path, sizeof path, "/proc/%d/cmdline", s->ppids[i]);
        ssize_t pn = read_small(path, pcmd, sizeof pcmd);
        if (pn == cn && !memcmp(cmd, pcmd, (size_t)cn))
            continue;
        snprintf(path, sizeof path, "/proc/%d/environ", pid);
        ssize_t en = read_small(path, env, sizeof env);
        dr_pyproc *p = &r->pyseen[r->npyseen++];
        p->pid = pid;
        nul_line(cmd, cn, p->cmd, sizeof p->cmd);
        python_why(cmd, cn, env, en > 0 ? en : 0, p->why, sizeof p->why);
    }
}

static void sample_gpus(dr_sampler *s, dr_run *r, dr_tick *k, int procs)
{
    for (int i = 0; i < r->ngpu; i++) {
        nvml_util u;
        nvml_mem m;
        if (s->nv.util(s->nv.dev[i], &u) == 0)
            k->gpu_util[i] = (float)u.gpu;
        if (s->nv.mem(s->nv.dev[i], &m) == 0)
            k->gpu_mem[i] = (double)m.used;
        if (procs && s->nv.procs && r->gpu_ctx != 1) {
            nvml_proc pr[64];
            unsigned n = 64;
            if (s->nv.procs(s->nv.dev[i], &n, pr) == 0)
                for (unsigned j = 0; j < n && j < 64; j++)
                    if (in_list(s->pids, s->npids, (int)pr[j].pid))
                        r->gpu_ctx = 1;
        }
    }
}

static void sample_system(dr_sampler *s, dr_run *r, dr_tick *k, double dt, int first)
{
    static char buf[16384];
    if (read_small("/proc/stat", buf, sizeof buf) > 0) {
        unsigned long long v[10] = {0};
        if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) >= 4) {
            uint64_t total = 0, idle = v[3] + v[4];
            for (int i = 0; i < 8; i++)
                total += v[i];
            uint64_t busy = total - idle;
            if (!first && total > s->stat_total)
                k->sys_cores = (double)(busy - s->stat_busy) / (double)(total - s->stat_total) * r->ncpu_online;
            s->stat_busy = busy;
            s->stat_total = total;
        }
    }
    static const char *psi[3] = {"/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory"};
    for (int i = 0; i < 3; i++) {
        if (read_small(psi[i], buf, sizeof buf) <= 0)
            continue;
        char *p = strstr(buf, "total=");
        if (!p)
            continue;
        uint64_t tot = strtoull(p + 6, NULL, 10);
        /* a share of the interval: the kernel folds its per-CPU stall times into `total` when the
         * file is read, so one interval can take in some of the previous one's (it read 102%) */
        if (!first) {
            double sh = (double)(tot - s->psi[i]) / 1e6 / dt;
            k->psi[i] = sh > 1 ? 1 : sh;
        }
        s->psi[i] = tot;
        r->psi_ok = 1;
    }
    if (read_small("/proc/meminfo", buf, sizeof buf) > 0) {
        char *p = strstr(buf, "MemAvailable:"), *q = strstr(buf, "SwapFree:"), *t = strstr(buf, "SwapTotal:");
        if (p)
            k->mem_avail = strtod(p + 13, NULL) * 1024;
        if (q && t)
            k->swap_used = (strtod(t + 10, NULL) - strtod(q + 9, NULL)) * 1024;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/net/dev", (int)r->pid);
    if (read_small(path, buf, sizeof buf) > 0) {
        uint64_t rx = 0, tx = 0;
        char *line = strchr(buf, '\n');
        line = line ? strchr(line + 1, '\n') : NULL;
        while (line && *++line) {
            char name[64];
            unsigned long long v[9];
            if (sscanf(line, " %63[^:]: %llu %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0],
                       &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 10 &&
                strcmp(name, "lo") != 0) {
                rx += v[0];
                tx += v[8];
            }
            line = strchr(line, '\n');
        }
        if (!first && s->net_ok && rx >= s->net_prev[0] && tx >= s->net_prev[1]) {
            k->net_rx_bps = (double)(rx - s->net_prev[0]) / dt;
            k->net_tx_bps = (double)(tx - s->net_prev[1]) / dt;
        }
        s->net_prev[0] = rx;
        s->net_prev[1] = tx;
        s->net_ok = 1;
    }
}

dr_sampler *dr_sampler_create(dr_run *r)
{
    dr_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->threads = calloc(TAB_SIZE, sizeof(ent));
    s->procs = calloc(TAB_SIZE, sizeof(ent));
    if (!s->threads || !s->procs) {
        dr_sampler_destroy(s);
        return NULL;
    }
    s->gen = 1;
    r->ncpu_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    r->gpu_ctx = 0;
    struct stat sb;
    r->nvidia_dev = stat("/dev/nvidia0", &sb) == 0;
    nvml_open(&s->nv, r);
    if (!r->nvml)
        r->gpu_ctx = -1;
    static char buf[4096];
    if (read_small("/proc/meminfo", buf, sizeof buf) > 0) {
        char *p = strstr(buf, "MemTotal:"), *t = strstr(buf, "SwapTotal:");
        if (p)
            r->mem_total = strtod(p + 9, NULL) * 1024;
        if (t)
            r->swap_total = strtod(t + 10, NULL) * 1024;
    }
    dr_tick dummy;
    memset(&dummy, 0, sizeof dummy);
    sample_system(s, r, &dummy, 1, 1);
    sample_disks(s, r, &dummy, 1, 1);
    s->last = dr_now();
    return s;
}

/* ---- limits: affinity and cgroup cpu quota (v2 cpu.max, v1 cfs quota), memory limit ---------- */
static int cg_mount(const char *want, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char mp[512], fstype[64], opts[512];
        char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1 ||
            sscanf(dash + 3, "%63s %*s %511s", fstype, opts) != 2)
            continue;
        if (!strcmp(want, "cgroup2") ? !strcmp(fstype, "cgroup2")
                                     : (!strcmp(fstype, "cgroup") && strstr(opts, want) != NULL)) {
            snprintf(out, cap, "%s", mp);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static double cg_quota(int pid, double *memlim)
{
    char path[1100], buf[4096], mnt[512], cg[512];
    double best = 0;
    *memlim = 0;
    snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return 0;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = 0;
        const char *ctrl = c1 + 1;
        snprintf(cg, sizeof cg, "%s", c2 + 1);
        int v2 = !strcmp(line, "0") && !*ctrl;
        int cpu = v2 || strstr(ctrl, "cpu") != NULL;
        int mem = v2 || strstr(ctrl, "memory") != NULL;
        if (!cpu && !mem)
            continue;
        for (int pass = 0; pass < 2; pass++) {
            if ((pass == 0 && !cpu) || (pass == 1 && !mem))
                continue;
            if (!cg_mount(v2 ? "cgroup2" : pass == 0 ? "cpu" : "memory", mnt, sizeof mnt))
                continue;
            char dir[512];
            snprintf(dir, sizeof dir, "%s", cg);
            for (;;) {
                char b2[128];
                if (pass == 0) {
                    double q = 0;
                    if (v2) {
                        snprintf(path, sizeof path, "%s%s/cpu.max", mnt, dir);
                        char qs[32];
                        double per;
                        if (read_small(path, b2, sizeof b2) > 0 && sscanf(b2, "%31s %lf", qs, &per) == 2 &&
                            strcmp(qs, "max") != 0 && per > 0)
                            q = strtod(qs, NULL) / per;
                    } else {
                        snprintf(path, sizeof path, "%s%s/cpu.cfs_quota_us", mnt, dir);
                        if (read_small(path, b2, sizeof b2) > 0) {
                            double quota = strtod(b2, NULL);
                            snprintf(path, sizeof path, "%s%s/cpu.cfs_period_us", mnt, dir);
                            if (quota > 0 && read_small(path, b2, sizeof b2) > 0 && strtod(b2, NULL) > 0)
                                q = quota / strtod(b2, NULL);
                        }
                    }
                    if (q > 0 && (best == 0 || q < best))
                        best = q;
                } else {
                    snprintf(path, sizeof path, "%s%s/%s", mnt, dir, v2 ? "memory.max" : "memory.limit_in_bytes");
                    if (read_small(path, b2, sizeof b2) > 0 && strncmp(b2, "max", 3) != 0) {
                        double m = strtod(b2, NULL);
                        if (m > 0 && m < 1e18 && (*memlim == 0 || m < *memlim))
                            *memlim = m;
                    }
                }
                char *sl = strrchr(dir, '/');
                if (!sl || sl == dir)
                    break;
                *sl = 0;
            }
        }
    }
    return best;
}

void dr_sampler_limits(dr_sampler *s, dr_run *r)
{
    (void)s;
    int pid = r->main_pid ? r->main_pid : (int)r->pid;
    cpu_set_t set;
    CPU_ZERO(&set);
    r->affinity = sched_getaffinity(pid, sizeof set, &set) == 0 ? CPU_COUNT(&set) : r->ncpu_online;
    double ml = 0;
    r->quota = cg_quota(pid, &ml);
    r->mem_limit = ml;
    r->allowed = r->affinity;
    if (r->quota > 0 && r->quota < r->allowed)
        r->allowed = r->quota;
    /* the job's network namespace: its own, or the one it shares with the doctor and the rest */
    char path[64];
    struct stat a, b;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)r->pid);
    r->net_shared = stat(path, &a) == 0 && stat("/proc/self/ns/net", &b) == 0 ? a.st_ino == b.st_ino : -1;
}

void dr_sampler_tick(dr_sampler *s, dr_run *r, int64_t now)
{
    double dt = (double)(now - s->last) / 1e9;
    if (dt <= 0)
        return;
    if (r->nticks == r->capticks) {
        size_t cap = r->capticks ? r->capticks * 2 : 1024;
        dr_tick *t = realloc(r->ticks, cap * sizeof *t);
        if (!t)
            return;
        r->ticks = t;
        r->capticks = cap;
    }
    dr_tick *k = &r->ticks[r->nticks];
    memset(k, 0, sizeof *k);
    k->t = (double)(now - r->t_start) / 1e9;
    k->dt = dt;
    k->main_state = '-';
    s->gen++;
    if (s->ticks % 5 == 0 || !s->npids)
        walk_tree(s, r->pid); /* new processes show up within 5 ticks; between, the known ones */
    sample_threads(s, r, k, dt);
    scan_python(s, r); /* every tick: a short-lived interpreter is seen too */
    sample_system(s, r, k, dt, 0);
    sample_disks(s, r, k, dt, 0);
    if (s->ticks % 10 == 0) {
        scan_fds(s, r);
        dr_sampler_limits(s, r);
    }
    if (r->nvml)
        sample_gpus(s, r, k, s->ticks % 10 == 0);
    s->ticks++;
    s->last = now;
    r->nticks++;
}

void dr_sampler_finish(dr_sampler *s, dr_run *r)
{
    dr_tick dummy;
    memset(&dummy, 0, sizeof dummy);
    sample_disks(s, r, &dummy, 1, 0);
}

void dr_sampler_destroy(dr_sampler *s)
{
    if (!s)
        return;
    if (s->nv.so) {
        s->nv.shutdown();
        dlclose(s->nv.so);
    }
    free(s->threads);
    free(s->procs);
    free(s);
}
