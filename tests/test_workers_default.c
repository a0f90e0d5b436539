/* SPDX-License-Identifier: MIT */
/*
 * test_workers_default.c — STK_P_WORKERS' default fits the machine (stk_cpu_budget):
 *   1. cgroup files as containers lay them out (a fake root: /proc/self/cgroup, mountinfo and
 *      the quota files): v2 cpu.max nested (smallest wins, "max" = none), v1 cfs_quota_us with
 *      -1 parents, a container's bind-mounted sub-tree, an escaped mount point, nothing at all;
 *      the budget from them (floor of the quota, local ranks, a bad LOCAL_WORLD_SIZE) and its note;
 *   2. the affinity mask: pinned to one CPU (sched_setaffinity), a new loader defaults to 1
 *      worker and its note says why;
 *   3. LOCAL_WORLD_SIZE=2 halves the default (never below 1);
 *   4. a real cgroup with a 1-CPU quota (v2 cpu.max or v1 cpu.cfs_quota_us; needs root and a
 *      writable cgroup fs — skipped with the reason otherwise): a child moved into it sees
 *      quota 1.00 and a default of 1 worker.
 */
#include "common.h"
#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void put(const char *root, const char *rel, const char *text)
{
    char path[4096], dir[4096];
    snprintf(path, sizeof path, "%s%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    t_mkdirs(dir);
    t_write_file(path, text, strlen(text));
}

#define MI_V2(root, mnt) "30 23 0:26 " root " " mnt " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
#define MI_V1(root, mnt, opts)                                                                     \
    "31 23 0:27 " root " " mnt " rw,nosuid,nodev,noexec,relatime shared:5 - cgroup cgroup rw," opts "\n"
#define MI_OTHER "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"

static void fake_files(void)
{
    char *t = t_tmpdir("cgfake");
    char where[4096];
    double q;

    /* v2, nested: the pod's 2.5 CPUs is the smallest; the container's own cpu.max is "max" */
    char r[4096];
    snprintf(r, sizeof r, "%s/v2", t);
    put(r, "/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
    put(r, "/proc/self/mountinfo", MI_OTHER MI_V2("/", "/sys/fs/cgroup"));
    put(r, "/sys/fs/cgroup/cpu.max", "max 100000\n");
    put(r, "/sys/fs/cgroup/kubepods/cpu.max", "400000 100000\n");
    put(r, "/sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n");
    put(r, "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
    q = stk__cgroup_cpu_quota(r, where, sizeof where);
    T_CHECK(fabs(q - 2.5) < 1e-9, "v2 nested quota %g", q);
    T_CHECK(!strcmp(where, "/sys/fs/cgroup/kubepods/pod1"), "v2 quota set in %s", where);
    stk_cpu_budget b;
    stk__cpu_budget_at(r, NULL, &b);
    T_CHECK(fabs(b.quota - 2.5) < 1e-9, "budget quota %g", b.quota);
    int want = b.affinity < 2 ? b.affinity : 2; /* floor(2.5) */
    T_CHECK(b.usable == want && b.workers == want && b.local_ranks == 1, "usable %d workers %d (want %d)",
            b.usable, b.workers, want);
    T_CHECK(strstr(b.note, "cgroup quota 2.50 CPUs in /sys/fs/cgroup/kubepods/pod1") != NULL, "note: %s", b.note);
    /* local ranks divide the usable cores, never below 1 */
    stk__cpu_budget_at(r, "4", &b);
    T_CHECK(b.local_ranks == 4 && b.workers == 1, "4 local ranks: workers %d", b.workers);
    T_CHECK(strstr(b.note, "/ 4 local ranks (LOCAL_WORLD_SIZE)") != NULL, "note: %s", b.note);
    const char *bad[] = {"0", "-2", "two", "3x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stk__cpu_budget_at(r, bad[i], &b);
        T_CHECK(b.local_ranks == 1 && b.workers == want, "LOCAL_WORLD_SIZE='%s': ranks %d workers %d", bad[i],
                b.local_ranks, b.workers);
        T_CHECK(!bad[i][0] || strstr(b.note, "LOCAL_WORLD_SIZE ignored") != NULL, "note for '%s': %s", bad[i],
                b.note);
    }

    /* v1 (hybrid: the cpu controller on v1, an empty v2 hierarchy too): quota 150000/100000, the
     * parent's -1 is no limit */
    snprintf(r, sizeof r, "%s/v1", t);
    put(r, "/proc/self/cgroup", "12:pids:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n");
    put(r, "/proc/self/mountinfo",
        MI_OTHER MI_V1("/", "/sys/fs/cgroup/cpu,cpuacct", "cpu,cpuacct") MI_V1("/", "/sys/fs/cgroup/pids", "pids")
            MI_V2("/", "/sys/fs/cgroup/unified"));
    put(r, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put(r, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put(r, "/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us", "-1\n");
    put(r, "/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
    put(r, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n");
    put(r, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    put(r, "/sys/fs/cgroup/pids/docker/abc/cpu.cfs_quota_us", "10000\n"); /* not the cpu hierarchy */
    q = stk__cgroup_cpu_quota(r, where, sizeof where);
    T_CHECK(fabs(q - 1.5) < 1e-9, "v1 quota %g", q);
    T_CHECK(!strcmp(where, "/sys/fs/cgroup/cpu,cpuacct/docker/abc"), "v1 quota set in %s", where);
    stk__cpu_budget_at(r, "2", &b);
    T_CHECK(b.usable == 1 && b.workers == 1, "quota 1.5 -> usable %d workers %d", b.usable, b.workers);

    /* a container: its own cgroup (/docker/abc) bind-mounted at /sys/fs/cgroup */
    snprintf(r, sizeof r, "%s/bind", t);
    put(r, "/proc/self/cgroup", "0::/docker/abc\n");
    put(r, "/proc/self/mountinfo", MI_OTHER MI_V2("/docker/abc", "/sys/fs/cgroup"));
    put(r, "/sys/fs/cgroup/cpu.max", "100000 100000\n");
    q = stk__cgroup_cpu_quota(r, where, sizeof where);
    T_CHECK(fabs(q - 1.0) < 1e-9 && !strcmp(where, "/sys/fs/cgroup"), "bind-mounted quota %g in %s", q, where);

    /* an escaped mount point (a space in it) */
    snprintf(r, sizeof r, "%s/esc", t);
    put(r, "/proc/self/cgroup", "0::/a\n");
    put(r, "/proc/self/mountinfo", MI_V2("/", "/mnt/cg\\040two"));
    put(r, "/mnt/cg two/a/cpu.max", "300000 100000\n");
    q = stk__cgroup_cpu_quota(r, where, sizeof where);
    T_CHECK(fabs(q - 3.0) < 1e-9 && !strcmp(where, "/mnt/cg two/a"), "escaped mount point: %g in %s", q, where);

    /* nothing readable: no quota, the budget is the affinity mask */
    snprintf(r, sizeof r, "%s/none", t);
    t_mkdirs(r);
    q = stk__cgroup_cpu_quota(r, where, sizeof where);
    T_CHECK(q == 0 && where[0] == '\0', "no files: quota %g", q);
    stk__cpu_budget_at(r, NULL, &b);
    T_CHECK(b.quota == 0 && b.usable == b.affinity && b.workers == (b.affinity > 1024 ? 1024 : b.affinity),
            "no quota: usable %d affinity %d", b.usable, b.affinity);
    T_CHECK(strstr(b.note, "no cgroup CPU quota") != NULL, "note: %s", b.note);
    t_rmtree(t);
    free(t);
}

static int loader_default_workers(char *note, size_t cap)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    double v;
    T_OK(stk_loader_get(h, STK_P_WORKERS, &v));
    size_t need = stk_loader_workers_note(h, note, cap);
    T_CHECK(need > 0 && need < cap, "workers note length %zu", need);
    stk_loader_destroy(h);
    return (int)v;
}

static void affinity_and_ranks(void)
{
    cpu_set_t all;
    T_CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity: %s", strerror(errno));
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &all))
            first = c;
    T_CHECK(first >= 0, "an empty affinity mask");
    unsetenv("LOCAL_WORLD_SIZE");
    stk_cpu_budget full;
    T_OK(stk_cpu_budget_get(&full));
    T_CHECK(full.affinity == CPU_COUNT(&all), "budget affinity %d, mask %d", full.affinity, CPU_COUNT(&all));
    char note[512];
    int w = loader_default_workers(note, sizeof note);
    T_CHECK(w == full.workers && !strcmp(note, full.note), "default %d vs budget %d (%s)", w, full.workers, note);
    printf("this machine: %s\n", note);

    /* pinned to one CPU */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    T_CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity: %s", strerror(errno));
    w = loader_default_workers(note, sizeof note);
    T_CHECK(w == 1, "one CPU in the mask: default %d workers", w);
    T_CHECK(strstr(note, "workers 1 = 1 usable cores (affinity 1 of ") != NULL, "note: %s", note);
    T_CHECK(sched_setaffinity(0, sizeof all, &all) == 0, "restoring the mask: %s", strerror(errno));

    /* torchrun's LOCAL_WORLD_SIZE */
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    w = loader_default_workers(note, sizeof note);
    int want = full.usable / 2 < 1 ? 1 : full.usable / 2;
    T_CHECK(w == want, "LOCAL_WORLD_SIZE=2: default %d workers, want %d (usable %d)", w, want, full.usable);
    T_CHECK(strstr(note, "/ 2 local ranks (LOCAL_WORLD_SIZE)") != NULL, "note: %s", note);
    /* set by the caller: the note says so */
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_WORKERS, want + 3));
    stk_loader_workers_note(h, note, sizeof note);
    T_CHECK(strstr(note, "set by the caller (default here: workers ") != NULL, "note: %s", note);
    T_CHECK(stk_loader_workers_note(h, NULL, 0) == strlen(note), "length query");
    stk_loader_destroy(h);
    unsetenv("LOCAL_WORLD_SIZE");
}

/* ---- a real cgroup --------------------------------------------------------------------------- */

static int write_str(const char *path, const char *s)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return -errno;
    int ok = fputs(s, f) >= 0;
    int rc = fclose(f);
    return ok && rc == 0 ? 0 : -errno;
}

static int read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

/* Create DIR with a 1-CPU quota (v2: cpu.max; v1: cfs). Returns 0, or fills WHY. */
static int make_cgroup(char *dir, size_t cap, char *why, size_t wcap)
{
    char buf[1024];
    /* v2: a cgroup2 root with the cpu controller (enabled for children of the root cgroup) */
    if (read_line("/sys/fs/cgroup/cgroup.controllers", buf, sizeof buf) == 0 && strstr(buf, "cpu")) {
        snprintf(dir, cap, "/sys/fs/cgroup/stk-test-%d", (int)getpid());
        read_line("/sys/fs/cgroup/cgroup.subtree_control", buf, sizeof buf);
        if (!strstr(buf, "cpu") && write_str("/sys/fs/cgroup/cgroup.subtree_control", "+cpu")) {
            snprintf(why, wcap, "cgroup v2: cannot enable the cpu controller (%s)", strerror(errno));
            return -1;
        }
        if (mkdir(dir, 0755)) {
            snprintf(why, wcap, "cgroup v2: mkdir %s: %s", dir, strerror(errno));
            return -1;
        }
        char f[4200];
        snprintf(f, sizeof f, "%s/cpu.max", dir);
        int rc = write_str(f, "100000 100000");
        if (rc) {
            snprintf(why, wcap, "cgroup v2: writing %s: %s", f, strerror(-rc));
            rmdir(dir);
            return -1;
        }
        return 0;
    }
    /* v1: the cpu controller's hierarchy */
    const char *mnts[] = {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"};
    for (size_t i = 0; i < 2; i++) {
        char probe[256];
        snprintf(probe, sizeof probe, "%s/cpu.cfs_quota_us", mnts[i]);
        if (access(probe, F_OK))
            continue;
        snprintf(dir, cap, "%s/stk-test-%d", mnts[i], (int)getpid());
        if (mkdir(dir, 0755)) {
            snprintf(why, wcap, "cgroup v1: mkdir %s: %s", dir, strerror(errno));
            return -1;
        }
        char f[4200];
        snprintf(f, sizeof f, "%s/cpu.cfs_period_us", dir);
        int rc = write_str(f, "100000");
        if (!rc) {
            snprintf(f, sizeof f, "%s/cpu.cfs_quota_us", dir);
            rc = write_str(f, "100000");
        }
        if (rc) {
            snprintf(why, wcap, "cgroup v1: writing %s: %s", f, strerror(-rc));
            rmdir(dir);
            return -1;
        }
        return 0;
    }
    snprintf(why, wcap, "no cgroup v2 cpu controller at /sys/fs/cgroup and no cgroup v1 cpu hierarchy");
    return -1;
}

static void real_cgroup(void)
{
    if (geteuid() != 0) {
        printf("cgroup part skipped: not root (a cgroup with a quota cannot be made)\n");
        return;
    }
    char dir[4096], why[4400];
    if (make_cgroup(dir, sizeof dir, why, sizeof why)) {
        printf("cgroup part skipped: %s\n", why);
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    T_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        char procs[4200], me[32];
        snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
        snprintf(me, sizeof me, "%d", (int)getpid());
        int rc = write_str(procs, me);
        if (rc) {
            fprintf(stderr, "moving into %s: %s\n", procs, strerror(-rc));
            _exit(3);
        }
        unsetenv("LOCAL_WORLD_SIZE");
        stk_cpu_budget b;
        if (stk_cpu_budget_get(&b) != STK_OK)
            _exit(1);
        char note[512];
        int w = loader_default_workers(note, sizeof note);
        printf("in a 1-CPU cgroup: %s\n", note);
        fflush(stdout);
        int ok = fabs(b.quota - 1.0) < 1e-9 && b.usable == 1 && w == 1 && strstr(note, "cgroup quota 1.00 CPUs in ") &&
                 strstr(note, dir + strlen(dir) - strlen(strrchr(dir, '/')));
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    /* the child has exited: the cgroup is empty and can go */
    for (int i = 0; i < 50 && rmdir(dir) && errno == EBUSY; i++)
        usleep(20000);
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 3, "could not move a process into %s", dir);
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "in a 1-CPU cgroup the budget/default is wrong (status %d)", st);
}

int main(void)
{
    fake_files();
    affinity_and_ranks();
    real_cgroup();
    printf("ok\n");
    return 0;
}
