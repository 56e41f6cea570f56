/* The progress line of a running experiment: redrawn in place on a terminal, plain log lines
 * otherwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "core/app/exp/results.h"

struct ig_progress {
    int n, tty;
    FILE *f;
    ig_progress_clock clock;
    void *ctx;
    double t0, cur_start, last_draw, done_time;
    int cur; /* point running, -1 none */
    char *cur_label;
    int n_done, n_failed, n_skipped;
};

static double mono_now(void *ctx) {
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ig_progress_format_duration(double s, char *buf, size_t n) {
    if (!(s >= 0) || !isfinite(s)) {
        snprintf(buf, n, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
}

void ig_progress_format_line(char *buf, size_t n, int i, int n_points, const char *label,
                             double elapsed, double eta, int width) {
    char head[48], el[32], et[32], tail[80];
    snprintf(head, sizeof head, "[%d/%d] ", i + 1, n_points);
    ig_progress_format_duration(elapsed, el, sizeof el);
    ig_progress_format_duration(eta, et, sizeof et);
    snprintf(tail, sizeof tail, "  %s  ETA %s", el, et);
    int room = width - 1 - (int)strlen(head) - (int)strlen(tail);
    int ll = (int)strlen(label ? label : "");
    if (!label) label = "";
    if (ll <= room)
        snprintf(buf, n, "%s%s%s", head, label, tail);
    else if (room >= 4)
        snprintf(buf, n, "%s%.*s...%s", head, room - 3, label, tail);
    else
        snprintf(buf, n, "%s%s", head, tail + 2);
}

ig_progress *ig_progress_start_ex(int n_points, FILE *f, int tty, ig_progress_clock clock,
                                  void *clock_ctx) {
    ig_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_points;
    p->f = f;
    p->tty = tty;
    p->clock = clock ? clock : mono_now;
    p->ctx = clock_ctx;
    p->t0 = p->clock(p->ctx);
    p->cur = -1;
    p->last_draw = -1e30;
    return p;
}

ig_progress *ig_progress_start(int n_points, FILE *f) {
    return ig_progress_start_ex(n_points, f, isatty(fileno(f)), NULL, NULL);
}

static int term_width(const ig_progress *p) {
    struct winsize ws;
    if (ioctl(fileno(p->f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int w = c ? atoi(c) : 0;
    return w >= 20 ? w : 100;
}

/* Seconds left: the mean time of the points finished in this run for each point not finished,
 * less what the current one has already taken; -1 before any point finished. */
static double eta(const ig_progress *p, double now) {
    if (p->n_done == 0) return -1;
    double mean = p->done_time / p->n_done;
    int left = p->n - p->n_done - p->n_skipped;
    if (left < 0) left = 0;
    double e = mean * left;
    if (p->cur >= 0) {
        double cur = now - p->cur_start;
        e -= cur < mean ? cur : mean;
    }
    return e > 0 ? e : 0;
}

static void draw(ig_progress *p) {
    if (p->cur < 0) return;
    double now = p->clock(p->ctx);
    char line[1024];
    ig_progress_format_line(line, sizeof line, p->cur, p->n, p->cur_label, now - p->cur_start,
                            eta(p, now), term_width(p));
    fprintf(p->f, "\r%s\033[K", line);
    fflush(p->f);
    p->last_draw = now;
}

void ig_progress_point(ig_progress *p, int i, const char *label) {
    if (!p) return;
    free(p->cur_label);
    p->cur_label = strdup(label ? label : "");
    p->cur = i;
    p->cur_start = p->clock(p->ctx);
    if (p->tty) {
        draw(p);
    } else {
        fprintf(p->f, "[%d/%d] start: %s\n", i + 1, p->n, label ? label : "");
        fflush(p->f);
    }
}

void ig_progress_point_quiet(ig_progress *p, int i, const char *label) {
    if (!p) return;
    free(p->cur_label);
    p->cur_label = strdup(label ? label : "");
    p->cur = i;
}

void ig_progress_skip_point(ig_progress *p, int i, const char *label) {
    if (!p) return;
    p->n_skipped++;
    if (!p->tty) {
        fprintf(p->f, "[%d/%d] skipped (already done): %s\n", i + 1, p->n, label ? label : "");
        fflush(p->f);
    }
}

void ig_progress_tick(ig_progress *p) {
    if (!p || !p->tty || p->cur < 0) return;
    if (p->clock(p->ctx) - p->last_draw >= 0.5) draw(p);
}

void ig_progress_done_point(ig_progress *p, int i, const char *status, double elapsed) {
    if (!p) return;
    int ok = status && !strcmp(status, "ok");
    p->n_done++;
    p->n_failed += !ok;
    p->done_time += elapsed > 0 ? elapsed : 0;
    const char *label = p->cur == i && p->cur_label ? p->cur_label : "";
    double now = p->clock(p->ctx);
    char el[32], et[32];
    snprintf(el, sizeof el, "%.1f s", elapsed);
    p->cur = -1;
    ig_progress_format_duration(eta(p, now), et, sizeof et);
    if (p->tty) {
        /* A failed point keeps its own line; the next point redraws the progress line. */
        if (!ok) fprintf(p->f, "\r\033[K[%d/%d] %s: %s (%s)\n", i + 1, p->n, status, label, el);
    } else {
        fprintf(p->f, "[%d/%d] %s: %s (%s, ETA %s)\n", i + 1, p->n, status ? status : "?", label,
                el, et);
    }
    fflush(p->f);
}

void ig_progress_finish(ig_progress *p) {
    if (!p) return;
    char total[32];
    ig_progress_format_duration(p->clock(p->ctx) - p->t0, total, sizeof total);
    if (p->tty) fprintf(p->f, "\r\033[K");
    fprintf(p->f, "%d points: %d ok, %d failed, %d skipped (already done), in %s\n", p->n,
            p->n_done - p->n_failed, p->n_failed, p->n_skipped, total);
    fflush(p->f);
    free(p->cur_label);
    free(p);
}
