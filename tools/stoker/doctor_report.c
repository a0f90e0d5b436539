/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's output: the text report (the seven points, then the verdict) and --json, from
 * the figures of doctor_verdict.c and the verdict of doctor_rules.c.
 */
#include "doctor_result.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const char *role_name[DR_NROLES] = {"main thread", "loader workers", "stoker threads", "other"};

/* ---- the text report ------------------------------------------------------------------------- */
static double mb(double b)
{
    return b / 1e6;
}

static double gib(double b)
{
    return b / 1073741824.0;
}

void dr_report(const dr_run *r, const dr_result *a, FILE *f)
{
    fprintf(f, "\n== stoker doctor: `");
    for (char **p = r->argv; *p; p++)
        fprintf(f, "%s%s", p == r->argv ? "" : " ", *p);
    fprintf(f, "`\n");
    if (r->t_stop)
        fprintf(f, "   ran %.1f s; stopped by the doctor after %.1f s (%s)", a->run_s,
                (double)(r->t_stop - r->t_start) / 1e9,
                r->stop_signal == SIGINT ? "SIGINT" : r->stop_signal == SIGTERM ? "SIGINT, then SIGTERM"
                                                                               : "SIGINT, SIGTERM, then SIGKILL");
    else
        fprintf(f, "   ran %.1f s", a->run_s);
    if (r->exited)
        fprintf(f, "; exit status %d\n", r->exit_code);
    else
        fprintf(f, "; killed by signal %d (%s)\n", r->term_signal, strsignal(r->term_signal));
    if (r->failed) {
        char how[96];
        dr_job_status(r, how, sizeof how);
        fprintf(f, "   FAILED     the job %s after %.1f s (%d training step%s)%s\n", how, a->run_s, a->nsteps,
                a->nsteps == 1 ? "" : "s", r->err_tail[0] ? "; its last stderr lines:" : "; it wrote nothing to stderr");
        for (const char *p = r->err_tail; *p;) {
            const char *e = strchr(p, '\n');
            int n = e ? (int)(e - p) : (int)strlen(p);
            fprintf(f, "              | %.*s\n", n, p);
            p += n + (e ? 1 : 0);
        }
        if (r->exited && r->exit_code == 2)
            fprintf(f, "              (the doctor exits 125 for it: its own exit status 2 means a usage error)\n");
    }
    fprintf(f, "   training window %.1f s, %d batches", a->wall, a->nsteps);
    if (!r->hooked)
        fprintf(f, " (no Python process of the job loaded the hook)");
    fprintf(f, "\n");
    const dr_pyproc *up[DR_MAXPY];
    int nup = dr_unhooked(r, up, DR_MAXPY);
    for (int i = 0; i < nup; i++)
        fprintf(f, "   WITHOUT THE HOOK: Python process %d `%s`: %s\n", up[i]->pid, up[i]->cmd, up[i]->why);

    fprintf(f, "1. GPU        ");
    if (!r->nvml)
        fprintf(f, "no GPU figures: %s%s\n", r->nvml_why,
                r->nvidia_dev ? "" : "; no /dev/nvidia0");
    else if (!r->ngpu)
        fprintf(f, "%s\n", r->nvml_why);
    else
        for (int g = 0; g < r->ngpu; g++)
            fprintf(f, "%sGPU%d %s: busy %.0f%% on average (max %.0f%%), memory %.1f of %.1f GiB at most\n",
                    g ? "              " : "", g, r->gpus[g].name, a->gutil[g], a->gutil_max[g], gib(a->gmem[g]),
                    gib(r->gpus[g].mem_total));
    fprintf(f, "              the job %s a GPU (%s)\n",
            r->gpu_ctx == 1 ? "holds a context on" : a->gpu_used ? "uses" : "does not use",
            r->gpu_ctx == 1 ? "NVML lists its process, or it has /dev/nvidiaN open" : a->gpu_used ? "CUDA tensors in the steps" : "no GPU device file open, no CUDA tensor");

    if (!a->nticks)
        fprintf(f, "   (the job ended before the first sample, %.0f ms after its start: no CPU, memory, disk "
                "or GPU figures)\n", 1e3 * r->interval);
    fprintf(f, "2. CPU        the job may use %g core%s (affinity %d of %d", r->allowed, r->allowed == 1 ? "" : "s",
            r->affinity, r->ncpu_online);
    if (r->quota > 0)
        fprintf(f, ", cgroup quota %.2f", r->quota);
    else
        fprintf(f, ", no cgroup quota");
    fprintf(f, "); it used %.2f on average, the machine %.2f\n", a->cpu_total, a->sys_cores);
    fprintf(f, "              ");
    for (int j = 0; j < DR_NROLES; j++)
        fprintf(f, "%s%s (%.0f thr) %.2f", j ? ", " : "", role_name[j], a->nth[j], a->cpu[j]);
    fprintf(f, " cores\n              waiting for a CPU: %.2f cores' worth of runnable threads", a->rq_total);
    if (r->psi_ok)
        fprintf(f, "; pressure (some): cpu %.0f%%, io %.0f%%, memory %.0f%%\n", 100 * a->psi[0], 100 * a->psi[1],
                100 * a->psi[2]);
    else
        fprintf(f, "; no /proc/pressure on this kernel\n");
    fprintf(f, "   memory     %.1f GiB available at least (of %.1f GiB)", gib(a->mem_avail_min), gib(r->mem_total));
    if (r->mem_limit > 0)
        fprintf(f, ", cgroup limit %.1f GiB", gib(r->mem_limit));
    fprintf(f, ", swap in use %.2f GiB; job RSS %.2f GiB at most (summed over its processes)\n",
            gib(a->swap_used_max), gib(a->rss_max));
    fprintf(f, "   disk       the job read %.1f MB and wrote %.1f MB of storage (its processes, /proc/PID/io); "
            "devices, totals of all processes:", mb(a->job_rd), mb(a->job_wr));
    int any = 0;
    for (int i = 0; i < r->ndevs; i++) {
        const dr_dev *d = &r->devs[i];
        double ri = (double)(d->r1[0] - d->r0[0]), rs = (double)(d->r1[1] - d->r0[1]) * 512;
        double wi = (double)(d->r1[2] - d->r0[2]), ws = (double)(d->r1[3] - d->r0[3]) * 512;
        if (!d->touched && ri + wi == 0)
            continue;
        double t = a->run_s > 0 ? a->run_s : 1;
        fprintf(f, "\n              %s%s: read %.1f MB/s (%.0f IOPS), write %.1f MB/s (%.0f IOPS)", d->name,
                d->touched ? " (job's files)" : "", mb(rs) / t, ri / t, mb(ws) / t, wi / t);
        any = 1;
    }
    fprintf(f, "%s\n", any ? "" : " none active");
    fprintf(f, "   network    received %.2f MB/s, sent %.2f MB/s, without lo (%s)\n", mb(a->net_rx), mb(a->net_tx),
            r->net_shared == 0 ? "the job's own network namespace"
                               : "namespace total: the job shares its network namespace with the doctor and other "
                                 "processes, whose traffic this includes");

    fprintf(f, "3. data       ");
    if (!a->nsteps)
        fprintf(f, "no batches seen (%s)\n", r->hooked ? "no DataLoader / stoker.Loader iterated" : "no hook");
    else {
        if (!strcmp(a->kind, "loop"))
            fprintf(f, "no loader: batches made in the training loop (each backward() a step), batch %d\n", a->bs);
        else
            fprintf(f, "%s loader, %s %d%s%s: waiting for the next batch %.0f%% of the time\n", a->kind,
                    strcmp(a->kind, "stoker") ? "num_workers" : "decode threads", a->workers,
                    a->pin ? ", pinned" : "", a->mem ? ", data in memory" : "", 100 * a->input_share);
        fprintf(f, "              per step: wait median %.1f ms, p99 %.1f ms; between batches median %.1f ms, "
                "p99 %.1f ms\n", 1e3 * a->wait_med, 1e3 * a->wait_p99, 1e3 * a->between_med, 1e3 * a->between_p99);
        fprintf(f, "              first batch %.0f ms; %d epoch start%s, %.0f ms each (iterator + first batch)\n",
                1e3 * a->first_batch, a->nepochs, a->nepochs == 1 ? "" : "s", 1e3 * a->epoch_start_mean);
        fprintf(f, "              the loader (%s): on a CPU %.0f%%, waiting for a CPU %.0f%%, in disk wait %.0f%%\n",
                a->loader_role, 100 * a->ld_busy, 100 * a->ld_rq, 100 * a->ld_disk);
        if (a->stk)
            fprintf(f, "              stoker's own stats: read %d threads busy %.1f s (starved %.1f s), decode %d threads "
                    "busy %.1f s (starved %.1f s) over %.1f s; %lld bad records, %lld substituted; its verdict: %s\n",
                    a->stk->rthreads, a->stk->rbusy, a->stk->rstarved, a->stk->dthreads, a->stk->dbusy,
                    a->stk->dstarved, a->stk->wall, a->stk->errors, a->stk->substituted, a->stk->bottleneck);
        if (a->eval_batches)
            fprintf(f, "              evaluation: %d batch%s from %d other loader%s in %d pass%s, %.1f s (%.0f%% of "
                    "the window); the figures above and the verdict are the training loader's\n",
                    a->eval_batches, a->eval_batches == 1 ? "" : "es", a->nloaders - 1, a->nloaders == 2 ? "" : "s",
                    a->eval_passes, a->eval_passes == 1 ? "" : "es", a->eval_s,
                    a->wall > 0 ? 100 * a->eval_s / a->wall : 0);
    }
    fprintf(f, "4. batch      ");
    if (a->nsteps)
        fprintf(f, "batch size %d (%s)", a->bs, a->dtype);
    else
        fprintf(f, "no batches seen");
    if (r->nvml && r->ngpu)
        for (int g = 0; g < r->ngpu; g++)
            fprintf(f, "; GPU%d headroom %.1f GiB", g, gib(r->gpus[g].mem_total - a->gmem[g]));
    else
        fprintf(f, "; GPU memory headroom unknown (no NVML)");
    fprintf(f, "\n");
    double steps = a->csteps > 0 ? a->csteps : 1;
    fprintf(f, "5. copies     per step: .item() %.1f, .cpu() %.1f, .numpy() %.1f, cuda.synchronize %.1f "
            "(%.1f on GPU tensors); %.1f%% of the time inside them\n", a->calls[0] / steps, a->calls[1] / steps,
            a->calls[2] / steps, a->calls[3] / steps, a->calls_dev / steps, 100 * a->sync_share);
    fprintf(f, "              host-to-device copies per step: %.1f pinned, %.1f pageable (%.1f MB)\n",
            a->h2d_pin / steps, a->h2d_page / steps, mb(a->h2d_bytes / steps));
    if (a->nsave) {
        char kinds[96];
        dr_save_kinds(a, kinds, sizeof kinds);
        char every[48]; /* two saves in one step are "2.0 a step", not "every 0 steps" */
        if (a->steps_per_save > 0 && a->steps_per_save < 0.95)
            snprintf(every, sizeof every, "%.1f a step", 1 / a->steps_per_save);
        else
            snprintf(every, sizeof every, "every %.0f steps", a->steps_per_save);
        fprintf(f, "   writes     checkpoints: %d (%s), %.1f MB and %.0f ms each (save call %.0f ms, file write + "
                "fsync %.0f ms), %s: %.0f%% of the time\n", a->nsave, kinds,
                mb(a->save_bytes / a->nsave), 1e3 * a->save_total / a->nsave, 1e3 * a->save_call_s / a->nsave,
                1e3 * a->wr_s[0] / a->nsave, every, 100 * a->save_share);
    } else {
        fprintf(f, "   writes     no checkpoint (torch.save, np.save, safetensors, a .pt/.ckpt/.npy/.pkl/... file)\n");
    }
    fprintf(f, "              log files %.1f MB in %.2f s (%.1f%%), other files %.1f MB in %.2f s (%.1f%%); "
            "the job's processes wrote %.1f MB of storage (/proc/PID/io)\n", mb(a->wr_b[1]), a->wr_s[1],
            100 * a->log_share, mb(a->wr_b[2]), a->wr_s[2], 100 * a->other_share, mb(a->job_wr));
    fprintf(f, "6. precision  ");
    if (a->nsteps)
        fprintf(f, "autocast fp16 in %d, bf16 in %d of %.0f steps; batches are %s\n", a->ac16, a->acbf,
                a->csteps, a->dtype);
    else
        fprintf(f, "no steps seen\n");
    if (r->hook_fail[0])
        fprintf(f, "   note       the hook could not patch everything: %s\n", r->hook_fail);
    fprintf(f, "7. %s\n", a->line);
    double job = a->run_s > 0 ? a->run_s : 1;
    fprintf(f, "   (watching cost: the doctor used %.2f s of CPU in %.1f s, %.2f%% of one core", r->self_cpu_s,
            a->run_s, 100 * r->self_cpu_s / job);
    if (r->hook_timed) {
        long long k = r->hook_timed < 1024 ? r->hook_timed : 1024;
        fprintf(f, "; the hook's batch path %.1f us per batch in the job's thread, median of %lld batch%s it timed",
                1e-3 * (double)r->hook_ns, k, k == 1 ? "" : "es");
    }
    fprintf(f, ")\n");
}

/* ---- JSON ------------------------------------------------------------------------------------- */
static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void jnum(FILE *f, const char *k, double v, int comma)
{
    if (!isfinite(v))
        v = 0;
    fprintf(f, "\"%s\": %.12g%s", k, v, comma ? ", " : "");
}

typedef struct jkv {
    const char *k;
    double v;
} jkv;

/* "k": v for each of the N fields, ", " between them, and after the last when COMMA */
static void jnums(FILE *f, const jkv *kv, size_t n, int comma)
{
    for (size_t i = 0; i < n; i++)
        jnum(f, kv[i].k, kv[i].v, i + 1 < n || comma);
}
#define JNUMS(f, comma, ...) \
    jnums(f, (const jkv[]){__VA_ARGS__}, sizeof((const jkv[]){__VA_ARGS__}) / sizeof(jkv), comma)

int dr_json(const dr_run *r, const dr_result *a, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double steps = a->csteps > 0 ? a->csteps : 1;
    fprintf(f, "{\n  \"command\": [");
    for (char **p = r->argv; *p; p++) {
        fprintf(f, "%s", p == r->argv ? "" : ", ");
        jstr(f, *p);
    }
    fprintf(f, "],\n  \"job\": {");
    JNUMS(f, 1, {"run_s", a->run_s}, {"window_s", a->wall},
          {"stopped_after_s", r->t_stop ? (double)(r->t_stop - r->t_start) / 1e9 : 0},
          {"stop_signal", r->stop_signal});
    fprintf(f, "\"exited\": %s, ", r->exited ? "true" : "false");
    JNUMS(f, 1, {"exit_code", r->exit_code}, {"term_signal", r->term_signal});
    fprintf(f, "\"failed\": %s, \"stderr_tail\": ", r->failed ? "true" : "false");
    jstr(f, r->err_tail);
    fprintf(f, ", ");
    jnum(f, "python_processes_hooked", r->hooked, 1);
    const dr_pyproc *up[DR_MAXPY];
    int nup = dr_unhooked(r, up, DR_MAXPY);
    fprintf(f, "\"python_processes_without_hook\": [");
    for (int i = 0; i < nup; i++) {
        fprintf(f, "%s{\"pid\": %d, \"cmd\": ", i ? ", " : "", up[i]->pid);
        jstr(f, up[i]->cmd);
        fprintf(f, ", \"why\": ");
        jstr(f, up[i]->why);
        fprintf(f, "}");
    }
    fprintf(f, "], ");
    jnum(f, "batches", a->nsteps, 0);
    fprintf(f, "},\n  \"gpu\": {\"nvml\": %s, \"why\": ", r->nvml ? "true" : "false");
    jstr(f, r->nvml_why);
    fprintf(f, ", \"job_holds_context\": %d, \"job_uses_gpu\": %s, \"devices\": [", r->gpu_ctx,
            a->gpu_used ? "true" : "false");
    for (int g = 0; g < r->ngpu; g++) {
        fprintf(f, "%s{\"name\": ", g ? ", " : "");
        jstr(f, r->gpus[g].name);
        fprintf(f, ", ");
        JNUMS(f, 0, {"util_mean_pct", a->gutil[g]}, {"util_max_pct", a->gutil_max[g]},
              {"mem_used_max_bytes", a->gmem[g]}, {"mem_total_bytes", r->gpus[g].mem_total});
        fprintf(f, "}");
    }
    fprintf(f, "]},\n  \"cpu\": {");
    JNUMS(f, 1, {"allowed_cores", r->allowed}, {"affinity_cores", r->affinity}, {"online_cores", r->ncpu_online},
          {"cgroup_quota_cores", r->quota}, {"used_cores", a->cpu_total}, {"machine_busy_cores", a->sys_cores},
          {"runqueue_wait_cores", a->rq_total}, {"step_cpu_median_s", a->cpu_step_med},
          {"step_cpu_lowest_s", a->cpu_step_lo}, {"step_cpu_highest_s", a->cpu_step_hi},
          {"step_cpu_stretches", a->cpu_step_chunks});
    static const char *rk[DR_NROLES] = {"main", "workers", "stoker", "other"};
    fprintf(f, "\"roles\": {");
    for (int j = 0; j < DR_NROLES; j++) {
        fprintf(f, "%s\"%s\": {", j ? ", " : "", rk[j]);
        JNUMS(f, 0, {"cores", a->cpu[j]}, {"runqueue_wait_cores", a->rq[j]}, {"threads_in_disk_wait", a->dth[j]},
              {"threads", a->nth[j]});
        fprintf(f, "}");
    }
    fprintf(f, "}, \"psi_some\": {");
    JNUMS(f, 0, {"available", r->psi_ok}, {"cpu", a->psi[0]}, {"io", a->psi[1]}, {"memory", a->psi[2]});
    fprintf(f, "}},\n  \"memory\": {");
    JNUMS(f, 0, {"total_bytes", r->mem_total}, {"available_min_bytes", a->mem_avail_min},
          {"swap_total_bytes", r->swap_total}, {"swap_used_max_bytes", a->swap_used_max},
          {"cgroup_limit_bytes", r->mem_limit}, {"job_rss_max_bytes", a->rss_max});
    fprintf(f, "},\n  \"disk\": {");
    JNUMS(f, 1, {"job_read_bytes", a->job_rd}, {"job_write_bytes", a->job_wr}, {"read_bytes_per_s", a->rd_bps},
          {"write_bytes_per_s", a->wr_bps}, {"read_iops", a->rd_iops}, {"write_iops", a->wr_iops});
    fprintf(f, "\"devices\": [");
    int first = 1;
    for (int i = 0; i < r->ndevs; i++) {
        const dr_dev *d = &r->devs[i];
        double t = a->run_s > 0 ? a->run_s : 1;
        if (!d->touched && d->r1[0] == d->r0[0] && d->r1[2] == d->r0[2])
            continue;
        fprintf(f, "%s{\"name\": ", first ? "" : ", ");
        first = 0;
        jstr(f, d->name);
        fprintf(f, ", \"job_files\": %s, ", d->touched ? "true" : "false");
        JNUMS(f, 0, {"read_bytes_per_s", (double)(d->r1[1] - d->r0[1]) * 512 / t},
              {"read_iops", (double)(d->r1[0] - d->r0[0]) / t},
              {"write_bytes_per_s", (double)(d->r1[3] - d->r0[3]) * 512 / t},
              {"write_iops", (double)(d->r1[2] - d->r0[2]) / t});
        fprintf(f, "}");
    }
    fprintf(f, "]},\n  \"network\": {");
    fprintf(f, "\"namespace_shared\": %s, ", r->net_shared == 0 ? "false" : "true");
    JNUMS(f, 0, {"rx_bytes_per_s", a->net_rx}, {"tx_bytes_per_s", a->net_tx});
    fprintf(f, "},\n  \"data\": {\"loader\": ");
    jstr(f, a->kind);
    fprintf(f, ", ");
    jnum(f, "num_workers", a->workers, 1);
    fprintf(f, "\"data_in_memory\": %s, ", a->mem ? "true" : "false");
    if (a->stk) {
        const dr_stkstats *k = a->stk;
        fprintf(f, "\"stoker\": {\"read_threads\": %d, \"decode_threads\": %d, ", k->rthreads, k->dthreads);
        JNUMS(f, 1, {"read_busy_s", k->rbusy}, {"read_starved_s", k->rstarved}, {"decode_busy_s", k->dbusy},
              {"decode_starved_s", k->dstarved}, {"wall_s", k->wall}, {"bad_records", (double)k->errors},
              {"substituted", (double)k->substituted});
        if (k->fhits + k->fmisses > 0) {
            fprintf(f, "\"fetch\": {");
            JNUMS(f, 0, {"bytes", (double)k->fbytes}, {"busy_s", k->fbusy}, {"starved_s", k->fstarved},
                  {"link_bytes_per_s", k->fbusy > 0 ? (double)k->fbytes / k->fbusy : 0},
                  {"cache_hits", (double)k->fhits}, {"cache_misses", (double)k->fmisses});
            fprintf(f, "}, ");
        }
        fprintf(f, "\"verdict\": ");
        jstr(f, k->bottleneck);
        fprintf(f, "}, ");
    }
    JNUMS(f, 1, {"pin_memory", a->pin}, {"wait_share", a->input_share}, {"wait_total_s", a->wait_total},
          {"iterator_creation_total_s", a->iter_total}, {"wait_median_s", a->wait_med}, {"wait_p99_s", a->wait_p99},
          {"between_batches_median_s", a->between_med}, {"between_batches_p99_s", a->between_p99},
          {"first_batch_s", a->first_batch}, {"epochs_started", a->nepochs},
          {"epoch_start_mean_s", a->epoch_start_mean}, {"loaders", a->nloaders}, {"eval_batches", a->eval_batches},
          {"eval_passes", a->eval_passes}, {"eval_s", a->eval_s});
    fprintf(f, "\"loader_role\": ");
    jstr(f, a->loader_role);
    fprintf(f, ", ");
    JNUMS(f, 0, {"loader_on_cpu_share", a->ld_busy}, {"loader_waiting_for_cpu_share", a->ld_rq},
          {"loader_disk_wait_share", a->ld_disk});
    fprintf(f, "},\n  \"batch\": {");
    jnum(f, "size", a->bs, 1);
    fprintf(f, "\"dtype\": ");
    jstr(f, a->dtype);
    fprintf(f, "},\n  \"copies\": {");
    JNUMS(f, 0, {"item_per_step", a->calls[0] / steps}, {"cpu_per_step", a->calls[1] / steps},
          {"numpy_per_step", a->calls[2] / steps}, {"cuda_synchronize_per_step", a->calls[3] / steps},
          {"sync_calls_per_step", a->calls_total / steps}, {"sync_calls_on_gpu_per_step", a->calls_dev / steps},
          {"sync_time_share", a->sync_share}, {"h2d_pinned_per_step", a->h2d_pin / steps},
          {"h2d_pageable_per_step", a->h2d_page / steps}, {"h2d_bytes_per_step", a->h2d_bytes / steps});
    fprintf(f, "},\n  \"writes\": {");
    JNUMS(f, 0, {"saves", a->nsave}, {"save_total_s", a->save_total}, {"save_share", a->save_share},
          {"save_bytes", a->save_bytes}, {"steps_per_save", a->steps_per_save}, {"save_call_s", a->save_call_s},
          {"checkpoint_write_s", a->wr_s[0]}, {"checkpoint_write_bytes", a->wr_b[0]},
          {"checkpoint_files_written", a->ckpt_opens}, {"log_write_s", a->wr_s[1]}, {"log_write_bytes", a->wr_b[1]},
          {"log_share", a->log_share}, {"other_write_s", a->wr_s[2]}, {"other_write_bytes", a->wr_b[2]},
          {"other_share", a->other_share});
    fprintf(f, "},\n  \"precision\": {");
    JNUMS(f, 0, {"autocast_fp16_steps", a->ac16}, {"autocast_bf16_steps", a->acbf});
    fprintf(f, "},\n  \"verdict\": {\"stage\": ");
    jstr(f, a->verdict);
    fprintf(f, ", \"figures\": ");
    jstr(f, a->figures);
    fprintf(f, ", \"next\": ");
    jstr(f, a->next);
    fprintf(f, ", \"borderline\": ");
    jstr(f, a->borderline);
    fprintf(f, "},\n  \"watching\": {");
    JNUMS(f, r->hook_timed != 0, {"doctor_cpu_s", r->self_cpu_s}, {"interval_s", r->interval},
          {"samples", (double)r->nticks});
    if (r->hook_timed)
        jnum(f, "hook_us_per_batch", 1e-3 * (double)r->hook_ns, 0);
    fprintf(f, "}\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}
