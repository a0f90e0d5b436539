/* SPDX-License-Identifier: MIT */
/*
 * `stoker doctor [options] -- COMMAND [ARGS...]`: runs the user's training command unchanged and
 * says where it waits. This file runs the job and collects: it writes the in-process hook (the
 * embedded doctor_hook.py) as sitecustomize.py into a private directory put first on PYTHONPATH,
 * starts the command in its own process group, samples it from outside every --interval
 * (doctor_sample.c), reads the hook's event lines as they are appended, stops the job after
 * --seconds (SIGINT to the group as a terminal's Ctrl-C does, then SIGTERM, then SIGKILL, each
 * after a bounded wait), and hands everything to doctor_verdict.c / doctor_svg.c.
 * Why the split (sampler outside, hook as small as possible): docs/doctor.md.
 */
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern const unsigned char dr_hook_py[];
extern const size_t dr_hook_py_len;

#define EXIT_USAGE 2
#define STOP_INT_WAIT_S 5.0   /* after SIGINT, before SIGTERM */
#define STOP_TERM_WAIT_S 3.0  /* after SIGTERM, before SIGKILL */

static const char usage_doctor[] =
    "usage: stoker doctor [--seconds N] [--json FILE] [--plot FILE.svg] [--interval MS]\n"
    "                     [--events FILE] -- COMMAND [ARGS...]\n"
    "\n"
    "Run COMMAND (your training job, unchanged) and tell where it waits, in the usual\n"
    "troubleshooting order: 1 GPU in use, 2 CPU/memory/disk/network of the job's processes,\n"
    "3 data loading (wait for each batch, from a hook injected into the job's Python:\n"
    "torch DataLoader and stoker.Loader), 4 batch size and GPU memory headroom, 5 host-syncing\n"
    "calls, host-to-device copies and checkpoint writes per step, 6 mixed precision, and\n"
    "7 the verdict: the one stage that bounds the job and the next step to try.\n"
    "The report goes to stderr when the job ends (the job's own output is untouched).\n"
    "\n"
    "options:\n"
    "  --seconds N     stop the job after N seconds (SIGINT to its process group, then SIGTERM\n"
    "                  after 5 s, SIGKILL after 3 s more) and diagnose what ran\n"
    "  --json FILE     every figure as JSON\n"
    "  --plot FILE     a timeline as SVG: GPU use, CPU by role, disk, data wait per step,\n"
    "                  checkpoints\n"
    "  --interval MS   sampling interval [100]\n"
    "  --events FILE   keep the hook's raw event lines in FILE\n"
    "\n"
    "GPU figures need NVIDIA's libnvidia-ml.so.1 (loaded at run time if present).\n"
    "The job runs in its own process group: Ctrl-C on the doctor stops it the same way.\n"
    "\n"
    "exit codes: the job's exit status (128+N if a signal N ended it; 0 when the doctor stopped\n"
    "            it after --seconds), 2 usage error or a command that cannot be run\n";

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    g_signal = sig;
}

/* ---- the event stream ------------------------------------------------------------------------- */
typedef struct tail {
    int fd;
    char buf[8192];
    size_t len;
} tail;

#define GROW(arr, n, cap)                                                                     \
    do {                                                                                      \
        if ((n) == (cap)) {                                                                   \
            size_t nc_ = (cap) ? (cap) * 2 : 256;                                             \
            void *p_ = realloc((arr), nc_ * sizeof *(arr));                                   \
            if (!p_)                                                                          \
                return;                                                                       \
            (arr) = p_;                                                                       \
            (cap) = nc_;                                                                      \
        }                                                                                     \
    } while (0)

static int in_list(const int *a, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (a[i] == v)
            return 1;
    return 0;
}

static void parse_counters(const char *p, int64_t c[11])
{
    for (int i = 0; i < 11; i++) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p)
            break;
        c[i] = v;
        p = end;
    }
}

static void on_event(dr_run *r, char *line)
{
    int pid, n;
    long long a, b, c;
    switch (line[0]) {
    case 'H':
        if (sscanf(line, "H %d %lld", &pid, &a) == 2) {
            r->hooked++;
            if (r->npy < 64 && !in_list(r->py_pids, r->npy, pid))
                r->py_pids[r->npy++] = pid;
            if (!r->main_pid)
                r->main_pid = pid;
        }
        break;
    case 'W':
        if (sscanf(line, "W %d", &pid) == 1 && r->nworkers_seen < 256 &&
            !in_list(r->worker_pids, r->nworkers_seen, pid))
            r->worker_pids[r->nworkers_seen++] = pid;
        break;
    case 'I': {
        dr_iter it;
        memset(&it, 0, sizeof it);
        if (sscanf(line, "I %d %lld %lld %7s %d %d %d", &it.pid, &a, &b, it.kind, &it.workers, &it.bs,
                   &it.pin) == 7) {
            it.t0 = a;
            it.t1 = b;
            GROW(r->iters, r->niters, r->capiters);
            r->iters[r->niters++] = it;
            if (it.workers > r->max_workers)
                r->max_workers = it.workers;
        }
        break;
    }
    case 'N': {
        dr_step s;
        memset(&s, 0, sizeof s);
        if (sscanf(line, "N %d %lld %lld %d %15s %n", &s.pid, &a, &b, &s.bs, s.dtype, &n) >= 5) {
            s.t0 = a;
            s.t1 = b;
            parse_counters(line + n, s.c);
            if (r->nsteps == 0)
                r->main_pid = s.pid;
            GROW(r->steps, r->nsteps, r->capsteps);
            r->steps[r->nsteps++] = s;
        }
        break;
    }
    case 'S': {
        dr_save s;
        if (sscanf(line, "S %d %lld %lld %lld", &s.pid, &a, &b, &c) == 4) {
            s.t0 = a;
            s.t1 = b;
            s.bytes = c;
            GROW(r->saves, r->nsaves, r->capsaves);
            r->saves[r->nsaves++] = s;
        }
        break;
    }
    case 'E':
        r->e_count++;
        break;
    case 'X':
        if (sscanf(line, "X %d %lld %n", &pid, &a, &n) >= 2 && pid == r->main_pid) {
            r->x_t = a;
            parse_counters(line + n, r->x_c);
        }
        break;
    case 'F':
        if (!r->hook_fail[0])
            snprintf(r->hook_fail, sizeof r->hook_fail, "%.200s", line);
        break;
    default:
        break;
    }
}

static void tail_read(tail *t, dr_run *r)
{
    if (t->fd < 0)
        return;
    for (;;) {
        ssize_t k = read(t->fd, t->buf + t->len, sizeof t->buf - 1 - t->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        t->len += (size_t)k;
        t->buf[t->len] = 0;
        char *p = t->buf, *nl;
        while ((nl = memchr(p, '\n', t->len - (size_t)(p - t->buf)))) {
            *nl = 0;
            on_event(r, p);
            p = nl + 1;
        }
        size_t rest = t->len - (size_t)(p - t->buf);
        if (rest == sizeof t->buf - 1) /* a line longer than the buffer: drop it */
            rest = 0;
        memmove(t->buf, p, rest);
        t->len = rest;
    }
}

/* ---- the command ------------------------------------------------------------------------------ */
static int find_command(const char *cmd)
{
    struct stat sb;
    if (strchr(cmd, '/'))
        return stat(cmd, &sb) == 0 && S_ISREG(sb.st_mode) && access(cmd, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[PATH_MAX];
    for (const char *p = path;; ) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (snprintf(buf, sizeof buf, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd) < (int)sizeof buf &&
            stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && access(buf, X_OK) == 0)
            return 1;
        if (!e)
            return 0;
        p = e + 1;
    }
}

static int write_file(const char *path, const void *data, size_t n, int excl)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (excl ? O_EXCL : O_TRUNC), 0600);
    if (fd < 0)
        return -1;
    const char *p = data;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            close(fd);
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return close(fd);
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "stoker doctor: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", usage_doctor);
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v <= 0 || v > 1e7)
        return -1;
    *out = v;
    return 0;
}

int cmd_doctor(int argc, char **argv)
{
    const char *json = NULL, *plot = NULL, *events = NULL;
    double seconds = 0, interval_ms = 100;
    int i = 0;
    while (i < argc) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_doctor, stdout);
            return 0;
        }
        if (a[0] != '-')
            break;
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seconds")) {
            if (!v) {
                usage_error("%s needs a number of seconds", a);
                return EXIT_USAGE;
            }
            if (parse_seconds(v, &seconds) != 0) {
                usage_error("--seconds needs a positive number of seconds (got `%s`)", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--interval")) {
            if (!v || parse_seconds(v, &interval_ms) != 0 || interval_ms < 10 || interval_ms > 10000) {
                usage_error("--interval needs milliseconds, 10..10000 (got `%s`)", v ? v : "");
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--json") || !strcmp(a, "--plot") || !strcmp(a, "--events")) {
            if (!v || !*v) {
                usage_error("%s needs a file name", a);
                return EXIT_USAGE;
            }
            *(a[2] == 'j' ? &json : a[2] == 'p' ? &plot : &events) = v;
        } else {
            usage_error("unknown option %s", a);
            return EXIT_USAGE;
        }
        i += 2; /* the option and its value */
    }
    if (i >= argc) {
        usage_error("%s", "no command to run: stoker doctor [options] -- COMMAND [ARGS...]");
        return EXIT_USAGE;
    }
    char **cmd = argv + i;
    if (!find_command(cmd[0])) {
        fprintf(stderr, "stoker doctor: `%s`: command not found (or not an executable file)\n", cmd[0]);
        return EXIT_USAGE;
    }

    /* the hook's directory and the event file */
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], hook[PATH_MAX + 32], evpath[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/stoker-doctor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "stoker doctor: cannot create a directory %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(hook, sizeof hook, "%s/sitecustomize.py", dir);
    if (events)
        snprintf(evpath, sizeof evpath, "%s", events);
    else
        snprintf(evpath, sizeof evpath, "%s/events", dir);
    if (write_file(hook, dr_hook_py, dr_hook_py_len, 1) != 0 || write_file(evpath, "", 0, !events) != 0) {
        fprintf(stderr, "stoker doctor: cannot write %s or %s: %s\n", hook, evpath, strerror(errno));
        unlink(hook);
        if (!events)
            unlink(evpath);
        rmdir(dir);
        return 1;
    }

    dr_run r;
    memset(&r, 0, sizeof r);
    r.argv = cmd;
    r.seconds = seconds;
    r.interval = interval_ms / 1000.0;
    tail t = {.fd = open(evpath, O_RDONLY | O_CLOEXEC), .len = 0};
    dr_sampler *smp = dr_sampler_create(&r);
    int ret = 1;
    if (!smp || t.fd < 0) {
        fprintf(stderr, "stoker doctor: out of memory or cannot read %s\n", evpath);
        goto out;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        fprintf(stderr, "stoker doctor: pipe: %s\n", strerror(errno));
        goto out;
    }
    fflush(NULL);
    r.t_start = dr_now();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "stoker doctor: fork: %s\n", strerror(errno));
        close(ep[0]);
        close(ep[1]);
        goto out;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a doctor killed outright does not leave the job behind */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        const char *pp = getenv("PYTHONPATH");
        char *np = malloc(strlen(dir) + (pp ? strlen(pp) : 0) + 2);
        if (np) {
            sprintf(np, "%s%s%s", dir, pp && *pp ? ":" : "", pp && *pp ? pp : "");
            setenv("PYTHONPATH", np, 1);
        }
        setenv("STOKER_DOCTOR_EVENTS", evpath, 1);
        execvp(cmd[0], cmd);
        int e = errno;
        if (write(ep[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    setpgid(pid, pid);
    close(ep[1]);
    int e = 0;
    ssize_t k;
    while ((k = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    if (k == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        fprintf(stderr, "stoker doctor: cannot run `%s`: %s\n", cmd[0], strerror(e));
        ret = EXIT_USAGE;
        goto out;
    }
    r.pid = pid;
    dr_sampler_limits(smp, &r);
    fprintf(stderr, "stoker doctor: watching `%s` (pid %d)%s\n", cmd[0], (int)pid,
            seconds > 0 ? ", it will be stopped after --seconds" : "");

    int64_t step_ns = (int64_t)(r.interval * 1e9), next = r.t_start + step_ns;
    int stage = 0, status = 0, by_seconds = 0;
    int64_t t_stage = 0;
    for (;;) {
        struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        int64_t now = dr_now();
        tail_read(&t, &r);
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            r.t_end = dr_now();
            break;
        }
        dr_sampler_tick(smp, &r, now);
        if (!stage && ((seconds > 0 && now - r.t_start >= (int64_t)(seconds * 1e9)) || g_signal)) {
            by_seconds = !g_signal;
            stage = 1;
            t_stage = now;
            r.t_stop = now;
            r.stop_signal = SIGINT;
            kill(-pid, SIGINT);
        } else if (stage == 1 && now - t_stage >= (int64_t)(STOP_INT_WAIT_S * 1e9)) {
            stage = 2;
            t_stage = now;
            r.stop_signal = SIGTERM;
            kill(-pid, SIGTERM);
        } else if (stage == 2 && now - t_stage >= (int64_t)(STOP_TERM_WAIT_S * 1e9)) {
            stage = 3;
            r.stop_signal = SIGKILL;
            kill(-pid, SIGKILL);
        }
        next += step_ns;
        if (next < now)
            next = now + step_ns;
    }
    if (stage)
        kill(-pid, SIGKILL); /* what is left of the job we stopped (orphaned workers) */
    tail_read(&t, &r);
    dr_sampler_finish(smp, &r);
    if (WIFEXITED(status)) {
        r.exited = 1;
        r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.term_signal = WTERMSIG(status);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        r.self_cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                       ru.ru_stime.tv_usec / 1e6;

    dr_result *res = dr_analyse(&r);
    if (!res) {
        fprintf(stderr, "stoker doctor: out of memory\n");
        goto out;
    }
    dr_report(&r, res, stderr);
    int werr = 0;
    if (json && dr_json(&r, res, json) != 0) {
        fprintf(stderr, "stoker doctor: cannot write %s: %s\n", json, strerror(errno));
        werr = 1;
    }
    if (plot && dr_svg(&r, res, plot) != 0) {
        fprintf(stderr, "stoker doctor: cannot write %s: %s\n", plot, strerror(errno));
        werr = 1;
    }
    dr_result_free(res);
    if (by_seconds)
        ret = 0;
    else if (g_signal && stage)
        ret = 128 + g_signal;
    else if (r.exited)
        ret = r.exit_code;
    else
        ret = 128 + r.term_signal;
    if (werr && ret == 0)
        ret = 1;
out:
    if (t.fd >= 0)
        close(t.fd);
    dr_sampler_destroy(smp);
    unlink(hook);
    if (!events)
        unlink(evpath);
    rmdir(dir);
    free(r.ticks);
    free(r.steps);
    free(r.iters);
    free(r.saves);
    return ret;
}
