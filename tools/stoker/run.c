/* SPDX-License-Identifier: MIT */
/*
 * stoker run -- COMMAND [ARGS...]: run a training command unchanged with stoker's DataLoader in
 * every Python process it starts. The launcher's start-up file (the Python package's
 * _site/sitecustomize.py, embedded at build time) is written into a private directory put first
 * on PYTHONPATH, with STOKER_LAUNCH=1; each Python process of the job then replaces
 * torch.utils.data.DataLoader when it imports torch (stoker.launch). Works for `python SCRIPT`,
 * torchrun and shell scripts alike; the package stoker must be importable by the job's Python.
 * Returns the command's exit status (128 + N for a signal N). Design: docs/FRAMEWORKS.md.
 */
#include "run.h"
#include "doctor.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#define EXIT_USAGE 2

extern const unsigned char launch_site_py[];
extern const size_t launch_site_py_len;

static const char usage_run[] =
    "usage: stoker run [--] COMMAND [ARGS...]\n"
    "\n"
    "Run COMMAND (python train.py ..., torchrun ..., a shell script) unchanged, with every\n"
    "torch.utils.data.DataLoader its Python processes build run by stoker where stoker reproduces\n"
    "the dataset and transforms exactly, and torch's own where not. At each loader's first pass\n"
    "one line on stderr says \"accelerated fully\", \"accelerated partly (in Python: ...)\" or\n"
    "\"not accelerated: <why>\". The Python package stoker must be importable by the job's\n"
    "Python (pip install stoker, or PYTHONPATH). Same as `python -m stoker SCRIPT ARGS`.\n"
    "\n"
    "exit codes: the command's own (128 + N when a signal N ended it), 2 usage error or the\n"
    "            command cannot be started\n";

/* the private directory, its file and the byte code Python may have cached beside it */
static void remove_dir(const char *dir)
{
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/sitecustomize.py", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/__pycache__", dir);
    DIR *d = opendir(p);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!strncmp(de->d_name, "sitecustomize.", 14)) {
                char f[PATH_MAX + 600];
                snprintf(f, sizeof f, "%s/%s", p, de->d_name);
                unlink(f);
            }
        }
        closedir(d);
        rmdir(p);
    }
    rmdir(dir);
}

int cmd_run(int argc, char **argv)
{
    int i = 0;
    if (i < argc && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))) {
        fputs(usage_run, stdout);
        return 0;
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    if (i >= argc) {
        fprintf(stderr, "stoker run: no command to run\n\n%s", usage_run);
        return EXIT_USAGE;
    }
    char **cmd = argv + i;

    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], site[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/stoker-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "stoker run: cannot create a directory %s: %s\n", dir, strerror(errno));
        return EXIT_USAGE;
    }
    snprintf(site, sizeof site, "%s/sitecustomize.py", dir);
    if (dr_write_file(site, launch_site_py, launch_site_py_len, 1) != 0) {
        fprintf(stderr, "stoker run: cannot write %s: %s\n", site, strerror(errno));
        remove_dir(dir);
        return EXIT_USAGE;
    }

    const char *pp = getenv("PYTHONPATH");
    size_t n = strlen(dir) + (pp ? strlen(pp) : 0) + 2;
    char *np = malloc(n);
    if (!np) {
        fprintf(stderr, "stoker run: out of memory\n");
        remove_dir(dir);
        return EXIT_USAGE;
    }
    snprintf(np, n, "%s%s%s", dir, pp && *pp ? ":" : "", pp && *pp ? pp : "");

    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        fprintf(stderr, "stoker run: pipe: %s\n", strerror(errno));
        free(np);
        remove_dir(dir);
        return EXIT_USAGE;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("PYTHONPATH", np, 1);
        setenv("STOKER_LAUNCH", "1", 1);
        execvp(cmd[0], cmd);
        int e = errno;
        if (write(ep[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    free(np);
    close(ep[1]);
    int status = EXIT_USAGE;
    if (pid < 0) {
        fprintf(stderr, "stoker run: fork: %s\n", strerror(errno));
        close(ep[0]);
        goto out;
    }
    /* the job shares the terminal's process group: Ctrl-C reaches it; the runner waits for it */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int e = 0;
    ssize_t k;
    while ((k = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (k == (ssize_t)sizeof e) {
        fprintf(stderr, "stoker run: cannot run `%s`: %s\n", cmd[0], strerror(e));
        status = EXIT_USAGE;
    } else if (WIFEXITED(ws)) {
        status = WEXITSTATUS(ws);
    } else if (WIFSIGNALED(ws)) {
        status = 128 + WTERMSIG(ws);
    }
out:
    remove_dir(dir);
    return status;
}
