/* SPDX-License-Identifier: MIT */
/*
 * cpus.c — the CPU budget: how many decode threads fit this process (STK_P_WORKERS' default).
 *
 * The online core count overstates what a process may use in three common cases: a restricted
 * affinity mask (taskset, cpusets, docker --cpuset-cpus), a cgroup CPU quota (docker --cpus,
 * Kubernetes CPU limits: the threads run everywhere but are throttled past the quota) and
 * several training processes per machine (torchrun starts LOCAL_WORLD_SIZE ranks, each with its
 * own loader). So: usable = min(affinity, floor(quota)), workers = usable / local ranks, both at
 * least 1. The quota is the smallest along the process's cgroup path, read from cgroup v2
 * (cpu.max: "QUOTA PERIOD" or "max PERIOD") and from v1's cpu controller (cpu.cfs_quota_us,
 * -1 = none, over cpu.cfs_period_us). The cgroup's directory comes from /proc/self/cgroup and
 * the hierarchy's mount point from /proc/self/mountinfo (its root field: a bind-mounted
 * sub-tree, as in containers, maps the cgroup path below that root onto the mount point).
 * Anything unreadable counts as "no limit": a default must never fail.
 */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_PATH 4096

static int affinity_cpus(void)
{
    for (int n = 1024; n <= (1 << 20); n *= 4) {
        cpu_set_t *set = CPU_ALLOC((size_t)n);
        if (!set)
            return 0;
        size_t sz = CPU_ALLOC_SIZE((size_t)n);
        int rc = sched_getaffinity(0, sz, set);
        int count = rc == 0 ? CPU_COUNT_S(sz, set) : 0;
        int err = errno;
        CPU_FREE(set);
        if (rc == 0)
            return count;
        if (err != EINVAL)
            return 0;
    }
    return 0;
}

/* Read a small text file under ROOT into BUF (NUL-terminated); 0 on success. */
static int read_small(const char *root, const char *path, char *buf, size_t cap)
{
    char full[CG_PATH];
    if ((size_t)snprintf(full, sizeof full, "%s%s", root, path) >= sizeof full)
        return -1;
    FILE *f = fopen(full, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return 0;
}

/* Undo mountinfo's octal escapes (\040 for a space ...) in place. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
            r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* Does the comma-separated LIST hold the word W? */
static int has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, w, n))
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* The process's cgroup path in hierarchy V2 (1) or in the v1 hierarchy with the cpu controller
 * (0), from /proc/self/cgroup. */
static int cgroup_path(const char *root, int v2, char *out, size_t cap)
{
    char buf[8192];
    if (read_small(root, "/proc/self/cgroup", buf, sizeof buf))
        return -1;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        int match = v2 ? (!strcmp(line, "0") && c1[1] == '\0') : has_word(c1 + 1, "cpu");
        if (match && (size_t)snprintf(out, cap, "%s", c2 + 1) < cap)
            return 0;
    }
    return -1;
}

/* The mount point (MNT) and mounted root (MROOT) of hierarchy V2 / v1-with-cpu. */
static int cgroup_mount(const char *root, int v2, char *mnt, char *mroot, size_t cap)
{
    char full[CG_PATH];
    if ((size_t)snprintf(full, sizeof full, "%s/proc/self/mountinfo", root) >= sizeof full)
        return -1;
    FILE *f = fopen(full, "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found && fgets(line, sizeof line, f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        *sep = '\0';
        char fstype[64], source[256], superopts[1024];
        if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, superopts) != 3)
            continue;
        if (v2 ? strcmp(fstype, "cgroup2") != 0 : (strcmp(fstype, "cgroup") != 0 || !has_word(superopts, "cpu")))
            continue;
        char r[CG_PATH], m[CG_PATH];
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2)
            continue;
        unescape(r);
        unescape(m);
        if ((size_t)snprintf(mnt, cap, "%s", m) < cap && (size_t)snprintf(mroot, cap, "%s", r) < cap)
            found = 0;
    }
    fclose(f);
    return found;
}

/* Quota in CPUs set by directory DIR (under ROOT) of hierarchy V2 / v1: > 0, or 0 for none. */
static double dir_quota(const char *root, const char *dir, int v2)
{
    char path[CG_PATH], buf[128];
    if (v2) {
        if ((size_t)snprintf(path, sizeof path, "%s/cpu.max", dir) >= sizeof path || read_small(root, path, buf, sizeof buf))
            return 0;
        char q[32];
        double period;
        if (sscanf(buf, "%31s %lf", q, &period) != 2 || !strcmp(q, "max") || !(period > 0))
            return 0;
        double quota = strtod(q, NULL);
        return quota > 0 ? quota / period : 0;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= sizeof path || read_small(root, path, buf, sizeof buf))
        return 0;
    double quota = strtod(buf, NULL);
    if (!(quota > 0))
        return 0;
    if ((size_t)snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= sizeof path ||
        read_small(root, path, buf, sizeof buf))
        return 0;
    double period = strtod(buf, NULL);
    return period > 0 ? quota / period : 0;
}

/* The smallest quota from the process's cgroup directory up to the hierarchy's mount point. */
static double hierarchy_quota(const char *root, int v2, char *where, size_t cap)
{
    char cg[CG_PATH], mnt[CG_PATH], mroot[CG_PATH], dir[CG_PATH];
    if (cgroup_path(root, v2, cg, sizeof cg) || cgroup_mount(root, v2, mnt, mroot, sizeof mnt))
        return 0;
    const char *rel = cg;
    size_t rl = strlen(mroot);
    if (strcmp(mroot, "/") != 0 && !strncmp(cg, mroot, rl) && (cg[rl] == '/' || cg[rl] == '\0'))
        rel = cg + rl;
    if ((size_t)snprintf(dir, sizeof dir, "%s%s%s", mnt, rel[0] == '/' || !rel[0] ? "" : "/", rel) >= sizeof dir)
        return 0;
    size_t ml = strlen(mnt);
    double best = 0;
    for (;;) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = '\0';
        double q = dir_quota(root, dir, v2);
        if (q > 0 && (best == 0 || q < best)) {
            best = q;
            if (where && cap)
                snprintf(where, cap, "%s", dir);
        }
        if (n <= ml)
            break;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < ml)
            break;
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    return best;
}

double stk__cgroup_cpu_quota(const char *root, char *where, size_t cap)
{
    if (where && cap)
        where[0] = '\0';
    char w2[CG_PATH] = "", w1[CG_PATH] = "";
    double q2 = hierarchy_quota(root, 1, w2, sizeof w2);
    double q1 = hierarchy_quota(root, 0, w1, sizeof w1);
    double q = q2;
    const char *w = w2;
    if (q1 > 0 && (q == 0 || q1 < q)) {
        q = q1;
        w = w1;
    }
    if (q > 0 && where && cap)
        snprintf(where, cap, "%s", w);
    return q;
}

void stk__cpu_budget_at(const char *root, const char *local_world_size, stk_cpu_budget *out)
{
    memset(out, 0, sizeof *out);
    out->online = stk__online_cpus();
    int aff = affinity_cpus();
    out->affinity = aff > 0 ? aff : out->online;
    char where[CG_PATH];
    out->quota = stk__cgroup_cpu_quota(root ? root : "", where, sizeof where);
    int usable = out->affinity;
    if (out->quota > 0) {
        double fq = floor(out->quota);
        int q = fq < 1 ? 1 : (fq > 1e6 ? 1000000 : (int)fq);
        if (q < usable)
            usable = q;
    }
    out->usable = usable < 1 ? 1 : usable;
    out->local_ranks = 1;
    int bad_lws = 0;
    if (local_world_size && *local_world_size) {
        char *end;
        errno = 0;
        long v = strtol(local_world_size, &end, 10);
        if (errno == 0 && *end == '\0' && v >= 1 && v <= 1 << 20)
            out->local_ranks = (int)v;
        else
            bad_lws = 1;
    }
    int w = out->usable / out->local_ranks;
    out->workers = w < 1 ? 1 : (w > 1024 ? 1024 : w);

    char quota_txt[CG_PATH + 64];
    if (out->quota > 0)
        snprintf(quota_txt, sizeof quota_txt, "cgroup quota %.2f CPUs in %s", out->quota, where);
    else
        snprintf(quota_txt, sizeof quota_txt, "no cgroup CPU quota");
    char ranks_txt[96] = "";
    if (out->local_ranks > 1)
        snprintf(ranks_txt, sizeof ranks_txt, " / %d local ranks (LOCAL_WORLD_SIZE)", out->local_ranks);
    else if (bad_lws)
        snprintf(ranks_txt, sizeof ranks_txt, "; LOCAL_WORLD_SIZE ignored (not a positive integer)");
    int n = snprintf(out->note, sizeof out->note, "workers %d = %d usable cores (affinity %d of %d online, %s)%s",
                     out->workers, out->usable, out->affinity, out->online, quota_txt, ranks_txt);
    if (n >= (int)sizeof out->note)
        memcpy(out->note + sizeof out->note - 4, "...", 4);
}

int stk_cpu_budget_get(stk_cpu_budget *out)
{
    if (!out)
        return STK_E_INVALID;
    stk__cpu_budget_at("", getenv("LOCAL_WORLD_SIZE"), out);
    return STK_OK;
}
