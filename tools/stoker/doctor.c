/* SPDX-License-Identifier: MIT */
/*
 * `stoker doctor [options] -- COMMAND [ARGS...]`: runs the user's training command unchanged and
 * says where it waits. This file runs the job and collects: it writes the in-process hook (the
 * embedded doctor_hook.py) as sitecustomize.py into a private directory put first on PYTHONPATH,
 * starts the command in its own process group, samples it from outside every --interval
 * (doctor_sample.c), reads the hook's event lines as they are appended, stops the job after
 * --seconds (SIGINT to the group as a terminal's Ctrl-C does, then SIGTERM, then SIGKILL, each
 * after a bounded wait), and hands everything to doctor_verdict.c (analysis), doctor_rules.c
 * (verdict), doctor_report.c and doctor_svg.c (output).
 * Why the split (sampler outside, hook as small as possible): docs/doctor.md.
 */
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
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
extern const unsigned char dr_preload_so[];
extern const size_t dr_preload_so_len;

#define EXIT_USAGE 2     /* the doctor's own errors: usage, a command that cannot be run, ... */
#define EXIT_JOB_2 125   /* the job exited with 2, which would read as the doctor's usage error */
#define STOP_INT_WAIT_S 5.0   /* after SIGINT, before SIGTERM */
#define STOP_TERM_WAIT_S 3.0  /* after SIGTERM, before SIGKILL */

static const char usage_doctor[] =
    "usage: stoker doctor [--seconds N] [--json FILE] [--plot FILE.svg] [--interval MS]\n"
    "                     [--events FILE] [--gpu-step-ms MS] -- COMMAND [ARGS...]\n"
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
    "  --events FILE   keep the hook's raw events in FILE (docs/doctor.md)\n"
    "  --gpu-step-ms MS  for a CPU-only job: the step's time on the GPU it would move to; the\n"
    "                  doctor then says whether the input side would keep up (without it: the\n"
    "                  CPU step 20-50x faster, stated as an assumption)\n"
    "\n"
    "GPU figures need NVIDIA's libnvidia-ml.so.1 (loaded at run time if present).\n"
    "The job runs in its own process group: Ctrl-C on the doctor stops it the same way.\n"
    "\n"
    "The job's stderr passes through the doctor, which keeps its last lines: when the job fails\n"
    "(a non-zero exit status, or a signal the doctor did not send), the report gives its status,\n"
    "how long it ran and those lines.\n"
    "\n"
    "exit codes: 2    the doctor's own error: usage, a command that cannot be run, or a --json\n"
    "                 or --plot file it cannot write after a job that succeeded\n"
    "            125  the job exited with status 2 (kept apart from the doctor's 2)\n"
    "            else the job's exit status (128+N if a signal N ended it; 0 when the doctor\n"
    "                 stopped it after --seconds)\n";

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

static void parse_counters(const char *p, int64_t c[DR_NC])
{
    for (int i = 0; i < DR_NC; i++) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p)
            break;
        c[i] = v;
        p = end;
    }
}

static void add_step(dr_run *r, const dr_step *s)
{
    if (r->nsteps == 0)
        r->main_pid = s->pid;
    GROW(r->steps, r->nsteps, r->capsteps);
    r->steps[r->nsteps++] = *s;
}

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    while (n--)
        v = v << 8 | b[n];
    return v;
}

#define BLOCK_MAX 8000 /* the hook writes <= 4000 bytes of records a block; the tail buffer is 8 KiB */

/* "B pid base lid dtype bs count nbytes counters": the bytes of records that follow, or -1 */
static long block_len(const char *line)
{
    int pid, lid, bs, count;
    long long base;
    long nb;
    char dt[16];
    if (sscanf(line, "B %d %lld %d %15s %d %d %ld", &pid, &base, &lid, dt, &bs, &count, &nb) != 7 || nb < 0 ||
        nb > BLOCK_MAX)
        return -1;
    return nb;
}

/* a block of batch records (docs/doctor.md, "The event format"): per batch the gap since the
 * previous batch's end (the first: since base) and the wait, uint32 little-endian. The header
 * has the loader, the dtype and size of the block's first batch, which every batch gets, and the
 * counters summed over the steps that began with the block's batches, which its first batch gets */
static void on_block(dr_run *r, const char *line, const unsigned char *b, size_t nb)
{
    dr_step s;
    memset(&s, 0, sizeof s);
    long long base;
    int count, n = 0;
    long len;
    if (sscanf(line, "B %d %lld %d %15s %d %d %ld %n", &s.pid, &base, &s.lid, s.dtype, &s.bs, &count, &len,
               &n) < 7)
        return;
    parse_counters(line + n, s.c);
    int64_t prev = base;
    for (size_t o = 0; count-- > 0 && o + 8 <= nb; o += 8) {
        s.t0 = prev + (int64_t)le(b + o, 4);
        s.t1 = s.t0 + (int64_t)le(b + o + 4, 4);
        prev = s.t1;
        add_step(r, &s);
        memset(s.c, 0, sizeof s.c);
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
        if (sscanf(line, "I %d %lld %lld %7s %d %d %d %d %d %d", &it.pid, &a, &b, it.kind, &it.workers, &it.bs,
                   &it.pin, &it.lid, &it.mem, &it.persistent) >= 7) {
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
        if (sscanf(line, "N %d %lld %lld %d %15s %d %n", &s.pid, &a, &b, &s.bs, s.dtype, &s.lid, &n) >= 6) {
            s.t0 = a;
            s.t1 = a + b; /* the wait, not the end time: shorter lines */
            parse_counters(line + n, s.c);
            add_step(r, &s);
        }
        break;
    }
    case 'S': {
        dr_save s;
        memset(&s, 0, sizeof s);
        if (sscanf(line, "S %d %lld %lld %lld %15s", &s.pid, &a, &b, &c, s.kind) >= 4) {
            if (!s.kind[0])
                snprintf(s.kind, sizeof s.kind, "torch.save");
            s.t0 = a;
            s.t1 = b;
            s.bytes = c;
            GROW(r->saves, r->nsaves, r->capsaves);
            r->saves[r->nsaves++] = s;
        }
        break;
    }
    case 'C': { /* a checkpoint file the job wrote itself: its open..close, for the plot */
        dr_save s;
        memset(&s, 0, sizeof s);
        if (sscanf(line, "C %d %lld %lld", &s.pid, &a, &b) == 3) {
            s.t0 = a;
            s.t1 = b;
            GROW(r->ckfiles, r->nckfiles, r->capckfiles);
            r->ckfiles[r->nckfiles++] = s;
        }
        break;
    }
    case 'E':
        r->e_count++;
        break;
    case 'L': {
        dr_stkstats L;
        memset(&L, 0, sizeof L);
        int ln = 0;
        if (sscanf(line, "L %d %d %d %d %lf %lf %lf %lf %lf %lld %lld %15s%n", &L.pid, &L.lid, &L.rthreads,
                   &L.dthreads, &L.rbusy, &L.rstarved, &L.dbusy, &L.dstarved, &L.wall, &L.errors,
                   &L.substituted, L.bottleneck, &ln) == 12) {
            /* the fetch fields, appended since 0.5 (a line without them leaves zeros) */
            if (sscanf(line + ln, " %lld %lf %lf %lld %lld", &L.fbytes, &L.fbusy, &L.fstarved, &L.fhits,
                       &L.fmisses) != 5)
                L.fbytes = L.fhits = L.fmisses = 0, L.fbusy = L.fstarved = 0;
            int i = 0;
            while (i < r->nstk && !(r->stk[i].pid == L.pid && r->stk[i].lid == L.lid))
                i++;
            if (i < DR_MAXSTK) {
                r->stk[i] = L;
                if (i == r->nstk)
                    r->nstk++;
            }
        }
        break;
    }
    case 'X':
        if (sscanf(line, "X %d %lld %n", &pid, &a, &n) >= 2 && pid == r->main_pid) {
            r->x_t = a;
            parse_counters(line + n, r->x_c);
        }
        break;
    case 'K': /* the hook's own time per batch: the median of the batches it timed itself on */
        if (sscanf(line, "K %d %lld %lld", &pid, &a, &b) == 3 && pid == r->main_pid && a > 0) {
            r->hook_timed = a;
            r->hook_ns = b;
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
            long nb = p[0] == 'B' ? block_len(p) : -1;
            if (nb >= 0) { /* a block header: its records follow, maybe not all read yet */
                if (t->len - (size_t)(nl + 1 - t->buf) < (size_t)nb)
                    break;
                *nl = 0;
                on_block(r, p, (const unsigned char *)nl + 1, (size_t)nb);
                p = nl + 1 + nb;
                continue;
            }
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

/* ---- the job's stderr: passed through, its last lines kept ------------------------------------ */
typedef struct errpipe {
    int fd;                /* read end, non-blocking; -1 when closed */
    char ring[8192];       /* the last bytes the job wrote */
    size_t len;
} errpipe;

static void err_drain(errpipe *e)
{
    char buf[4096];
    while (e->fd >= 0) {
        ssize_t k = read(e->fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k == 0) {
            close(e->fd);
            e->fd = -1;
        }
        if (k <= 0)
            return;
        for (ssize_t o = 0; o < k;) { /* pass it on unchanged */
            ssize_t w = write(STDERR_FILENO, buf + o, (size_t)(k - o));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            o += w;
        }
        size_t n = (size_t)k > sizeof e->ring ? sizeof e->ring : (size_t)k;
        if (e->len + n > sizeof e->ring) {
            size_t drop = e->len + n - sizeof e->ring;
            memmove(e->ring, e->ring + drop, e->len - drop);
            e->len -= drop;
        }
        memcpy(e->ring + e->len, buf + (size_t)k - n, n);
        e->len += n;
    }
}

/* the last DR_ERR_LINES non-empty lines ('\r' ends a line too: progress bars) into out */
static void err_lines(const errpipe *e, char *out, size_t cap)
{
    size_t end = e->len, starts[DR_ERR_LINES], ends[DR_ERR_LINES];
    int n = 0;
    while (end > 0 && n < DR_ERR_LINES) {
        while (end > 0 && (e->ring[end - 1] == '\n' || e->ring[end - 1] == '\r' || e->ring[end - 1] == ' '))
            end--;
        if (!end)
            break;
        size_t b = end;
        while (b > 0 && e->ring[b - 1] != '\n' && e->ring[b - 1] != '\r')
            b--;
        starts[n] = b;
        ends[n++] = end;
        end = b;
    }
    size_t o = 0;
    out[0] = 0;
    for (int i = n - 1; i >= 0 && o + 1 < cap; i--) {
        for (size_t j = starts[i]; j < ends[i] && o + 2 < cap; j++) {
            unsigned char c = (unsigned char)e->ring[j];
            out[o++] = c < 0x20 && c != '\t' ? '?' : (char)c;
        }
        if (i && o + 1 < cap)
            out[o++] = '\n';
        out[o] = 0;
    }
}

/* sleep until the absolute time `until` (CLOCK_MONOTONIC ns), passing the job's stderr on meanwhile */
static void wait_until(errpipe *e, int64_t until)
{
    for (;;) {
        int64_t now = dr_now();
        if (now >= until)
            return;
        if (e->fd < 0) {
            struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
            return;
        }
        struct pollfd p = {.fd = e->fd, .events = POLLIN};
        int ms = (int)((until - now + 999999) / 1000000);
        if (poll(&p, 1, ms) > 0)
            err_drain(e);
        else if (g_signal)
            return;
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

int dr_write_file(const char *path, const void *data, size_t n, int excl)
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
    double seconds = 0, interval_ms = 100, gpu_step_ms = 0;
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
        } else if (!strcmp(a, "--gpu-step-ms")) {
            if (!v || parse_seconds(v, &gpu_step_ms) != 0) {
                usage_error("--gpu-step-ms needs a positive number of milliseconds (got `%s`)", v ? v : "");
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
    char dir[PATH_MAX], hook[PATH_MAX + 32], evpath[PATH_MAX + 32], preload[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/stoker-doctor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "stoker doctor: cannot create a directory %s: %s\n", dir, strerror(errno));
        return EXIT_USAGE;
    }
    snprintf(hook, sizeof hook, "%s/sitecustomize.py", dir);
    snprintf(preload, sizeof preload, "%s/stk_doctor_preload.so", dir);
    if (events)
        snprintf(evpath, sizeof evpath, "%s", events);
    else
        snprintf(evpath, sizeof evpath, "%s/events", dir);
    if (dr_write_file(hook, dr_hook_py, dr_hook_py_len, 1) != 0 || dr_write_file(evpath, "", 0, !events) != 0 ||
        dr_write_file(preload, dr_preload_so, dr_preload_so_len, 1) != 0) {
        fprintf(stderr, "stoker doctor: cannot write %s, %s or %s: %s\n", hook, evpath, preload, strerror(errno));
        unlink(hook);
        unlink(preload);
        if (!events)
            unlink(evpath);
        rmdir(dir);
        return EXIT_USAGE;
    }

    dr_run r;
    memset(&r, 0, sizeof r);
    r.argv = cmd;
    r.seconds = seconds;
    r.interval = interval_ms / 1000.0;
    r.gpu_step_ms = gpu_step_ms;
    tail t = {.fd = open(evpath, O_RDONLY | O_CLOEXEC), .len = 0};
    static errpipe ej;
    ej.fd = -1;
    ej.len = 0;
    dr_sampler *smp = dr_sampler_create(&r);
    int ret = EXIT_USAGE;
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

    int ep[2], sp[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        fprintf(stderr, "stoker doctor: pipe: %s\n", strerror(errno));
        goto out;
    }
    if (pipe2(sp, O_CLOEXEC) != 0) {
        fprintf(stderr, "stoker doctor: pipe: %s\n", strerror(errno));
        close(ep[0]);
        close(ep[1]);
        goto out;
    }
    fflush(NULL);
    r.t_start = dr_now();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "stoker doctor: fork: %s\n", strerror(errno));
        close(ep[0]);
        close(ep[1]);
        close(sp[0]);
        close(sp[1]);
        goto out;
    }
    if (pid == 0) {
        if (dup2(sp[1], STDERR_FILENO) < 0)
            _exit(127);
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
        /* launchers that set PYTHONPATH themselves: the preload puts the hook back in front */
        setenv("STOKER_DOCTOR_HOOKDIR", dir, 1);
        const char *lp = getenv("LD_PRELOAD");
        char *nl = malloc(strlen(preload) + (lp ? strlen(lp) : 0) + 2);
        if (nl) {
            sprintf(nl, "%s%s%s", preload, lp && *lp ? ":" : "", lp && *lp ? lp : "");
            setenv("LD_PRELOAD", nl, 1);
        }
        execvp(cmd[0], cmd);
        int e = errno;
        if (write(ep[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    setpgid(pid, pid);
    close(ep[1]);
    close(sp[1]);
    ej.fd = sp[0];
    fcntl(ej.fd, F_SETFL, fcntl(ej.fd, F_GETFL) | O_NONBLOCK);
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
        wait_until(&ej, next);
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
    err_drain(&ej);
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
    r.failed = !stage && !g_signal && (r.exited ? r.exit_code != 0 : 1);
    err_lines(&ej, r.err_tail, sizeof r.err_tail);
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
        ret = r.exit_code == EXIT_USAGE ? EXIT_JOB_2 : r.exit_code;
    else
        ret = 128 + r.term_signal;
    if (werr && ret == 0)
        ret = EXIT_USAGE;
out:
    if (ej.fd >= 0)
        close(ej.fd);
    if (t.fd >= 0)
        close(t.fd);
    dr_sampler_destroy(smp);
    unlink(hook);
    unlink(preload);
    if (!events)
        unlink(evpath);
    rmdir(dir);
    free(r.ticks);
    free(r.steps);
    free(r.iters);
    free(r.saves);
    free(r.ckfiles);
    return ret;
}
