/* Link model: throttled copies for the CPU backend (see link.h). */
#include "offload/link.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/log.h"

static ig_status parse_num(const char *what, const char *s, size_t len, double lo, double hi,
                           double *out, ig_error *err) {
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "link model: %s: expected a number", what);
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || !(v >= lo && v <= hi))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "link model: %s='%s': expected a number in [%g, %g]", what, buf, lo,
                            hi);
    *out = v;
    return IG_OK;
}

ig_status ig_link_parse(const char *spec, ig_link_model *out, ig_error *err) {
    memset(out, 0, sizeof *out);
    if (!spec || !*spec || strcmp(spec, "off") == 0) return IG_OK;
    ig_link_model m = {1, {0, 0}, {0, 0}};
    const char *p = spec;
    int fields = 0;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq) {
            if (fields > 0)
                return ig_error_set(
                    err, IG_ERR_INVALID_ARG,
                    "link model '%s': '%.*s' is not KEY=VALUE (keys: h2d, d2h, lat, "
                    "h2d_lat, d2h_lat)",
                    spec, (int)len, p);
            double v;
            IG_TRY(parse_num("bandwidth", p, len, 1e-6, 1e6, &v, err));
            m.gbps[0] = m.gbps[1] = v;
        } else {
            size_t kl = (size_t)(eq - p), vl = len - kl - 1;
            double v;
            if (kl == 3 && strncmp(p, "h2d", 3) == 0) {
                IG_TRY(parse_num("h2d", eq + 1, vl, 1e-6, 1e6, &v, err));
                m.gbps[IG_LINK_H2D] = v;
            } else if (kl == 3 && strncmp(p, "d2h", 3) == 0) {
                IG_TRY(parse_num("d2h", eq + 1, vl, 1e-6, 1e6, &v, err));
                m.gbps[IG_LINK_D2H] = v;
            } else if (kl == 3 && strncmp(p, "lat", 3) == 0) {
                IG_TRY(parse_num("lat", eq + 1, vl, 0, 1e6, &v, err));
                m.latency_s[0] = m.latency_s[1] = v * 1e-6;
            } else if (kl == 7 && strncmp(p, "h2d_lat", 7) == 0) {
                IG_TRY(parse_num("h2d_lat", eq + 1, vl, 0, 1e6, &v, err));
                m.latency_s[IG_LINK_H2D] = v * 1e-6;
            } else if (kl == 7 && strncmp(p, "d2h_lat", 7) == 0) {
                IG_TRY(parse_num("d2h_lat", eq + 1, vl, 0, 1e6, &v, err));
                m.latency_s[IG_LINK_D2H] = v * 1e-6;
            } else {
                return ig_error_set(err, IG_ERR_INVALID_ARG,
                                    "link model '%s': unknown key '%.*s' (keys: h2d, d2h, lat, "
                                    "h2d_lat, d2h_lat)",
                                    spec, (int)kl, p);
            }
        }
        fields++;
        p += len;
        if (*p == ',') p++;
    }
    if (m.gbps[0] <= 0 || m.gbps[1] <= 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "link model '%s': both h2d and d2h bandwidths are needed (GB/s)", spec);
    *out = m;
    return IG_OK;
}

const char *ig_link_describe(const ig_link_model *m, char *buf, size_t n) {
    if (!m || !m->on)
        snprintf(buf, n, "off");
    else
        snprintf(buf, n, "h2d %.3g GB/s + %.3g us, d2h %.3g GB/s + %.3g us", m->gbps[0],
                 m->latency_s[0] * 1e6, m->gbps[1], m->latency_s[1] * 1e6);
    return buf;
}

double ig_link_time(const ig_link_model *m, ig_link_dir dir, size_t bytes) {
    if (!m || !m->on) return 0;
    return m->latency_s[dir] + (double)bytes / (m->gbps[dir] * 1e9);
}

/* The modelled link is a DMA engine: waiting for it must not take a core from the compute threads.
 * With two cores and two compute threads, spinning through the last ~150 us of every fetch (as this
 * wait once did, after a sleep that stopped short) slowed the matmuls and the attention of the
 * steps the fetch ran beside by a third. So the wait sleeps, aiming early by this thread's running
 * mean of how late the scheduler wakes it (capped at 500 us), and spins only through what is left
 * when it wakes: the part of that mean the wake-up did not use, or a whole wait shorter than the
 * mean or than LINK_SPIN_S. It never returns before the deadline, and it is late by about what one
 * wake-up costs when the machine is loaded. */
#define LINK_SPIN_S 30e-6
static _Thread_local double wake_late_s = 60e-6;

void ig_link_wait_until(double deadline) {
    for (;;) {
        double now = ig_time_s(), left = deadline - now;
        if (left <= 0) return;
        double s = left - wake_late_s;
        if (left <= LINK_SPIN_S || s <= 0) {
            while (ig_time_s() < deadline) {
            }
            return;
        }
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        double late = ig_time_s() - (now + s);
        late = late < 0        ? 0
               : late > 500e-6 ? 500e-6
                               : late; /* one slow wake-up moves it a little */
        wake_late_s += 0.125 * (late - wake_late_s);
    }
}

double ig_link_schedule(const ig_link_model *m, ig_link_dir dir, double *free_at, double t_issue,
                        size_t bytes, double t_copied, double *started) {
    if (started) *started = t_issue;
    if (!bytes || !m || !m->on) return t_copied;
    double start = t_issue > *free_at ? t_issue : *free_at;
    *free_at = start + ig_link_time(m, dir, bytes);
    if (started) *started = start;
    return *free_at > t_copied ? *free_at : t_copied;
}

double ig_link_copy(const ig_link_model *m, ig_link_dir dir, void *dst, const void *src, size_t n) {
    double t0 = ig_time_s();
    if (n) memcpy(dst, src, n);
    if (m && m->on) ig_link_wait_until(t0 + ig_link_time(m, dir, n));
    return ig_time_s() - t0;
}
