/* SPDX-License-Identifier: MIT */
/*
 * stoker doctor's --plot: one SVG timeline of the run, lanes sharing the time axis: GPU
 * utilisation, CPU cores by role (stacked) against the cores the job may use, disk throughput,
 * and the wait for each batch; torch.save calls are shaded across all lanes. Drawn per pixel column,
 * not per sample, so an hour-long run stays small; text kept inside the width. Plain SVG 1.1 so that
 * a browser, rsvg-convert or an editor shows it the same.
 */
#include "doctor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 1100.0
#define LEFT 90.0
#define RIGHT 180.0
#define LANE 120.0
#define GAP 34.0

static const char *role_col[DR_NROLES] = {"#d62728", "#1f77b4", "#2ca02c", "#9e9e9e"};
static const char *role_lbl[DR_NROLES] = {"main thread", "DataLoader workers", "stoker threads", "other"};

typedef struct plot {
    FILE *f;
    double t1;   /* seconds on the x axis */
} plot;

static double X(const plot *p, double t)
{
    double x = LEFT + (W - LEFT - RIGHT) * t / p->t1;
    return x < LEFT ? LEFT : x > W - RIGHT ? W - RIGHT : x;
}

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

static double nice_max(double v)
{
    if (v <= 0)
        return 1;
    double p = pow(10, floor(log10(v)));
    for (int m = 1; m <= 10; m = m == 1 ? 2 : m == 2 ? 5 : 10)
        if (m * p >= v)
            return m * p;
    return 10 * p;
}

static void lane(const plot *p, double y, const char *title, const char *unit, double ymax)
{
    FILE *f = p->f;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#bbb\"/>\n", LEFT, y,
            W - LEFT - RIGHT, LANE);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", LEFT, y - 8, title);
    for (int i = 0; i <= 2; i++) {
        double v = ymax * i / 2, yy = y + LANE - LANE * i / 2;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g%s</text>\n", LEFT - 6,
                yy + 4, v, i == 2 ? unit : "");
        if (i == 1)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, yy, W - RIGHT, yy);
    }
}

static void legend(const plot *p, double y, int i, const char *col, const char *txt)
{
    fprintf(p->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n",
            W - RIGHT + 12, y + 6 + 18 * i, col, W - RIGHT + 30, y + 16 + 18 * i, txt);
}

/* a line through (t, v) of the ticks, v picked by fn; where several ticks share a pixel column
 * (a long run), the column's min and max: the line stays the envelope, the file stays small */
static void series(const plot *p, const dr_run *r, double y, double ymax, double (*fn)(const dr_tick *, int),
                   int arg, const char *col, const char *dash)
{
    if (!r->nticks)
        return;
    fprintf(p->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s%s%s points=\"", col,
            dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    for (size_t i = 0; i < r->nticks;) {
        double x = X(p, r->ticks[i].t), lo = INFINITY, hi = -INFINITY;
        size_t j = i;
        for (; j < r->nticks && floor(X(p, r->ticks[j].t)) == floor(x); j++) {
            double v = fn(&r->ticks[j], arg);
            v = v > ymax ? ymax : v < 0 ? 0 : v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        fprintf(p->f, "%.1f,%.1f ", x, y + LANE - LANE * lo / ymax);
        if (hi > lo)
            fprintf(p->f, "%.1f,%.1f ", x, y + LANE - LANE * hi / ymax);
        i = j;
    }
    fprintf(p->f, "\"/>\n");
}

/* text of `len` characters at font size `fs`: its width, on the safe side (DejaVu Sans: ~0.6 em
 * for lower case, 0.64 digits; rendered and measured by tests/doctor/svg_render_check.py) */
#define EM 0.6
#define EM_BOLD 0.66
static double text_w(size_t len, double fs) { return EM * fs * (double)len; }

/* the characters of s (from its start) that fit in `px` at font size fs, cut at a space */
static size_t fit(const char *s, double px, double fs, double em)
{
    size_t len = strlen(s), n = (size_t)(px / (em * fs));
    if (len <= n)
        return len;
    size_t cut = n;
    while (cut > n / 2 && s[cut] != ' ')
        cut--;
    return cut > n / 2 ? cut : n;
}

/* a paragraph wrapped to the plot's width, at most `lines` lines (the last cut with "..."); returns
 * the next line's y */
static double para(FILE *f, const char *prefix, const char *s, double y, double fs, int lines, const char *attr)
{
    size_t pl = strlen(prefix);
    double em = strstr(attr, "bold") ? EM_BOLD : EM;
    for (int line = 0; *s && line < lines; line++, y += fs + 4) {
        double avail = W - LEFT - 20 - (line == 0 ? em * fs * (double)pl : 0);
        size_t cut = fit(s, avail, fs, em);
        int last = line == lines - 1 && cut < strlen(s);
        if (last && cut > 3)
            cut -= 3;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\"%s>%s", LEFT, y, fs, attr, line == 0 ? prefix : "");
        char part[400];
        snprintf(part, sizeof part, "%.*s%s", (int)(cut < 390 ? cut : 390), s, last ? "..." : "");
        esc(f, part);
        fprintf(f, "</text>\n");
        s += cut;
        while (*s == ' ')
            s++;
    }
    return y;
}

static double f_gpu(const dr_tick *k, int g) { return k->gpu_util[g]; }
static double f_rd(const dr_tick *k, int a) { (void)a; return k->job_rd_bps / 1e6; }
static double f_wr(const dr_tick *k, int a) { (void)a; return k->job_wr_bps / 1e6; }
static double f_rq(const dr_tick *k, int a)
{
    (void)a;
    double s = 0;
    for (int j = 0; j < DR_NROLES; j++)
        s += k->rq[j];
    return s;
}

int dr_svg(const dr_run *r, const dr_result *a, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    plot p = {f, (double)((r->t_end ? r->t_end : r->t_start) - r->t_start) / 1e9};
    if (p.t1 <= 0)
        p.t1 = 1;
    int gpu_lane = r->nvml && r->ngpu; /* lanes only for what the machine has */
    int lanes = 3 + gpu_lane;

    /* the header first, into memory: its height (the figures and the next step wrapped whole,
     * up to 8 and 6 lines) places the lanes below it, so nothing overlaps */
    char *hb = NULL;
    size_t hn = 0;
    FILE *hf = open_memstream(&hb, &hn);
    if (!hf) {
        fclose(f);
        return -1;
    }
    fprintf(hf, "<text x=\"%.1f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">stoker doctor: ", LEFT);
    char cmd[200] = "";
    size_t n = 0;
    for (char **q = r->argv; *q && n < sizeof cmd - 4; q++)
        n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s%s", q == r->argv ? "" : " ", *q);
    if (n >= sizeof cmd)
        n = sizeof cmd - 1;
    size_t room = (size_t)((W - LEFT - 20) / (EM_BOLD * 16)) - 15; /* after "stoker doctor: " */
    if (n > room && room > 4)
        snprintf(cmd + room - 3, sizeof cmd - (room - 3), "...");
    esc(hf, cmd);
    fprintf(hf, "</text>\n");
    /* the verdict (a failed job's says so first), its figures, the next step */
    const char *stage, *figs, *nx;
    dr_result_verdict(a, &stage, &figs, &nx);
    int64_t w0, w1;
    dr_result_window(a, &w0, &w1);
    char head[200];
    if (r->failed && strncmp(stage, "the job failed", 14)) {
        if (r->exited)
            snprintf(head, sizeof head, "verdict: the job FAILED (exit code %d); before it: %s", r->exit_code, stage);
        else
            snprintf(head, sizeof head, "verdict: the job FAILED (signal %d); before it: %s", r->term_signal, stage);
    } else
        snprintf(head, sizeof head, "verdict: %s", stage);
    double yh = para(hf, "", head, 46, 14, 2, " font-weight=\"bold\" fill=\"#b00\"");
    double y0 = para(hf, "", figs, yh + 2, 12, 8, " fill=\"#b00\"");
    char nxs[1024]; /* the report's "(above)" points at lines the picture does not have */
    snprintf(nxs, sizeof nxs, "%s", nx);
    for (char *q; (q = strstr(nxs, " (above)"));)
        memmove(q, q + 8, strlen(q + 8) + 1);
    double yn = para(hf, "next: ", nxs, y0 + 4, 12, 6, " font-weight=\"bold\"");
    if (!gpu_lane) {
        char g[240];
        snprintf(g, sizeof g, "no GPU lane: %s", r->nvml ? r->nvml_why : r->nvml_why[0] ? r->nvml_why : "no NVML");
        yn = para(hf, "", g, yn + 4, 11, 1, " fill=\"#777\"");
    }
    fclose(hf);
    const double TOP = yn + 40;  /* the marker row (training loop starts, stop) at TOP - 24 */
    double H = TOP + lanes * (LANE + GAP) + 40;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
    fwrite(hb, 1, hn, f);
    free(hb);

    /* checkpoints, behind everything */
    double ybot = TOP + lanes * (LANE + GAP) - GAP;
    double cx0 = -1, cx1 = -1; /* the pending shade: saves closer than a pixel are merged */
    for (size_t i = 0; i <= r->nsaves + r->nckfiles; i++) { /* save calls, then the files written after */
        double x0 = W, x1 = W;
        if (i < r->nsaves + r->nckfiles) {
            const dr_save *sv = i < r->nsaves ? &r->saves[i] : &r->ckfiles[i - r->nsaves];
            x0 = X(&p, (double)(sv->t0 - r->t_start) / 1e9);
            x1 = X(&p, (double)(sv->t1 - r->t_start) / 1e9);
            if (cx0 >= 0 && x0 <= cx1 + 1 && x0 >= cx0) {
                cx1 = x1 > cx1 ? x1 : cx1;
                continue;
            }
        }
        if (cx0 >= 0)
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ff9800\" opacity=\"0.18\"/>\n",
                    cx0, TOP - 14, cx1 - cx0 > 1 ? cx1 - cx0 : 1, ybot - TOP + 14);
        cx0 = x0;
        cx1 = x1;
    }
    /* evaluation passes, shaded across the lanes */
    const int64_t *e0, *e1;
    int nev = dr_result_evals(a, &e0, &e1);
    for (int i = 0; i < nev; i++) {
        double x0 = X(&p, (double)(e0[i] - r->t_start) / 1e9), x1 = X(&p, (double)(e1[i] - r->t_start) / 1e9);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#607d8b\" opacity=\"0.16\"/>\n",
                x0, TOP - 14, x1 - x0 > 1 ? x1 - x0 : 1, ybot - TOP + 14);
    }

    double y = TOP;
    /* 1: GPU, when there is one */
    static const char *gcol[4] = {"#6a1b9a", "#00897b", "#f57c00", "#3949ab"};
    if (gpu_lane) {
        lane(&p, y, "GPU utilisation", "%", 100);
        for (int g = 0; g < r->ngpu; g++) {
            series(&p, r, y, 100, f_gpu, g, gcol[g % 4], NULL);
            char lbl[32];
            snprintf(lbl, sizeof lbl, "GPU%d", g);
            if (g < 5)
                legend(&p, y, g, gcol[g % 4], lbl);
        }
        y += LANE + GAP;
    }

    /* 2: CPU by role, stacked */
    /* a fixed axis, 0 .. the cores the job may use: a spike (workers starting) is clipped and
     * marked, not allowed to squash the rest of the run into a thin strip */
    double cmax = ceil(r->allowed > 0 ? r->allowed : 1);
    lane(&p, y, "CPU cores by role", " cores", cmax);
    for (int j = DR_NROLES - 1; j >= 0 && r->nticks; j--) {
        /* area from 0 to the sum of roles 0..j; ticks sharing a pixel column: their mean */
        fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.85\" points=\"%.1f,%.1f ", role_col[j], X(&p, r->ticks[0].t - r->ticks[0].dt), y + LANE);
        for (size_t i = 0; i < r->nticks;) {
            double xa = X(&p, r->ticks[i].t - r->ticks[i].dt), sum = 0;
            size_t k = i;
            for (; k < r->nticks && (k == i || floor(X(&p, r->ticks[k].t)) == floor(X(&p, r->ticks[i].t))); k++) {
                double s = 0;
                for (int q = 0; q <= j; q++)
                    s += r->ticks[k].cpu[q];
                sum += s > cmax ? cmax : s;
            }
            double s = sum / (double)(k - i);
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", xa, y + LANE - LANE * s / cmax, X(&p, r->ticks[k - 1].t),
                    y + LANE - LANE * s / cmax);
            i = k;
        }
        fprintf(f, "%.1f,%.1f\"/>\n", X(&p, r->ticks[r->nticks - 1].t), y + LANE);
    }
    series(&p, r, y, cmax, f_rq, 0, "#000", "4,3");
    double lastmark = -1;
    for (size_t i = 0; i < r->nticks; i++) { /* clipped: a red tick above the lane */
        double st = 0;
        for (int j = 0; j < DR_NROLES; j++)
            st += r->ticks[i].cpu[j];
        if ((st > cmax * 1.02 || f_rq(&r->ticks[i], 0) > cmax * 1.02) && floor(X(&p, r->ticks[i].t)) != lastmark) {
            lastmark = floor(X(&p, r->ticks[i].t)); /* one mark a pixel column */
            fprintf(f, "<path d=\"M%.1f %.1fl-3 -5h6z\" fill=\"#c62828\"/>\n", X(&p, r->ticks[i].t), y - 1);
        }
    }
    double ya = y + LANE - LANE * (r->allowed > cmax ? cmax : r->allowed) / cmax;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"1.2\"/>\n", LEFT, ya,
            W - RIGHT, ya);
    for (int j = 0; j < DR_NROLES; j++)
        legend(&p, y, j, role_col[j], role_lbl[j]);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-dasharray=\"4,3\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">waiting for a CPU</text>\n",
            W - RIGHT + 10, y + 94, W - RIGHT + 26, y + 94, W - RIGHT + 30, y + 98);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">cores allowed (%g)</text>\n",
            W - RIGHT + 10, y + 112, W - RIGHT + 26, y + 112, W - RIGHT + 30, y + 116, r->allowed);

    /* 3: disk */
    y += LANE + GAP;
    double dmax = 0; /* the job's own storage bytes (/proc/PID/io), not the whole devices' */
    for (size_t i = 0; i < r->nticks; i++) {
        if (r->ticks[i].job_rd_bps / 1e6 > dmax)
            dmax = r->ticks[i].job_rd_bps / 1e6;
        if (r->ticks[i].job_wr_bps / 1e6 > dmax)
            dmax = r->ticks[i].job_wr_bps / 1e6;
    }
    dmax = nice_max(dmax);
    lane(&p, y, "Disk: the job's processes", " MB/s", dmax);
    series(&p, r, y, dmax, f_rd, 0, "#1565c0", NULL);
    series(&p, r, y, dmax, f_wr, 0, "#e65100", NULL);
    legend(&p, y, 0, "#1565c0", "read");
    legend(&p, y, 1, "#e65100", "write");
    legend(&p, y, 2, "#ff9800", "checkpoints");

    /* 4: data wait per batch */
    y += LANE + GAP;
    double wmax = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (r->steps[i].pid == r->main_pid && (double)(r->steps[i].t1 - r->steps[i].t0) / 1e6 > wmax)
            wmax = (double)(r->steps[i].t1 - r->steps[i].t0) / 1e6;
    wmax = nice_max(wmax);
    lane(&p, y, "Wait for each batch", " ms", wmax);
    if (!r->nsteps)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#777\">no batches seen</text>\n", LEFT + 12,
                y + LANE / 2);
    /* per pixel column the longest wait in it (an hour of batches stays ~800 bars), adjacent
     * columns of the same height as one bar */
    enum { NCOL = (int)(W - LEFT - RIGHT) + 2 };
    double colh[NCOL];
    for (int c = 0; c < NCOL; c++)
        colh[c] = -1;
    for (size_t i = 0; i < r->nsteps; i++) {
        const dr_step *s = &r->steps[i];
        if (s->pid != r->main_pid)
            continue;
        double ms = (double)(s->t1 - s->t0) / 1e6, h = LANE * (ms > wmax ? wmax : ms) / wmax;
        double x0 = X(&p, (double)(s->t0 - r->t_start) / 1e9), x1 = X(&p, (double)(s->t1 - r->t_start) / 1e9);
        h = h > 0.5 ? h : 0.5;
        for (int c = (int)(x0 - LEFT); c <= (int)(x1 - LEFT) && c < NCOL; c++)
            if (c >= 0 && h > colh[c])
                colh[c] = h;
    }
    for (int c = 0; c < NCOL;) {
        int e = c + 1;
        while (e < NCOL && colh[e] == colh[c])
            e++;
        if (colh[c] > 0)
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#c62828\"/>\n", LEFT + c,
                    y + LANE - colh[c], e - c, colh[c]);
        c = e;
    }
    legend(&p, y, 0, "#c62828", "wait, max a pixel");
    /* host-sync calls (.item(), .cpu(), .numpy(), cuda.synchronize) made by the steps: a mark a
     * pixel column under the lane (the counters travel per block of batches: where they were) */
    int marks = 0;
    double lastx = -1;
    for (size_t i = 0; i < r->nsteps; i++) {
        const dr_step *s = &r->steps[i];
        if (s->pid != r->main_pid || !(s->c[0] + s->c[1] + s->c[2] + s->c[3]))
            continue;
        double x = floor(X(&p, (double)(s->t0 - r->t_start) / 1e9));
        if (x == lastx)
            continue;
        lastx = x;
        marks++;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"1.5\" height=\"6\" fill=\"#6a1b9a\"/>\n", x, y + LANE - 6);
    }
    if (marks)
        legend(&p, y, 1, "#6a1b9a", "host-sync calls");
    if (nev)
        legend(&p, y, marks ? 2 : 1, "#607d8b", "evaluation");

    /* time axis */
    double yb = y + LANE;
    double step = nice_max(p.t1 / 8);
    for (double t = 0; t <= p.t1 + 1e-9; t += step)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g s</text>\n",
                X(&p, t), yb, X(&p, t), yb + 5, X(&p, t), yb + 18, t);
    if (w0 > r->t_start && w0 < w1 && r->nsteps) {
        double xw = X(&p, (double)(w0 - r->t_start) / 1e9);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#2e7d32\" stroke-dasharray=\"2,2\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#2e7d32\" text-anchor=\"%s\">training loop starts</text>\n",
                xw, TOP - 30, xw, yb, xw - 3 - text_w(20, 11) < LEFT ? xw + 3 : xw - 3, TOP - 24,
                xw - 3 - text_w(20, 11) < LEFT ? "start" : "end");
    }
    if (r->t_stop) {
        double xs = X(&p, (double)(r->t_stop - r->t_start) / 1e9);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-dasharray=\"2,2\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\"%s>stop</text>\n", xs, TOP - 30, xs, yb,
                xs + 3 + text_w(4, 11) > W ? xs - 3 : xs + 3, TOP - 24,
                xs + 3 + text_w(4, 11) > W ? " text-anchor=\"end\"" : "");
    }
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}
