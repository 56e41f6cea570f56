/* igen run's measurement protocol (docs/config.md, "Repeats, intervals, noise"): the points of a
 * group (the same config but for the policy) are measured interleaved, A B C A B C, so that drift
 * of the machine hits every policy alike: one untimed warm-up run (of the group's first point),
 * then `measure.repeat` timed rounds (with measure.prefill: once, every point is prefilled once
 * and kept, its rounds decoding on from there). Each record keeps every repeat's figures, and per
 * timed metric the median (the value reported), min, max, mean and a 95% interval; a point whose
 * relative spread exceeds `measure.noise` is marked noisy; with `measure.baseline` the speedups of
 * every point against the baseline policy are computed pair by pair within a round. Perplexity is
 * deterministic and runs once per point, after the timed rounds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/app/cli/cli.h"
#include "core/app/cli/run.h"
#include "core/app/exp/stats.h"
#include "core/base/log.h"
#include "kernels/backend.h"

/* Timed metrics: summarized over the repeats (the rest are the same in every repeat). */
static const char *const k_timed[] = {"throughput_tok_s", "decode_throughput_tok_s", "prefill_s",
                                      "decode_s"};
#define N_TIMED ((int)(sizeof k_timed / sizeof k_timed[0]))
/* The metrics whose spread decides "noisy", and whose ratios are the speedups. */
static const char *const k_headline[] = {"decode_throughput_tok_s", "throughput_tok_s"};

static void iso_now(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The source tree's commit, when igen runs from a checkout ("unknown" otherwise). */
static const char *git_commit(void) {
    static char c[64];
    if (c[0]) return c;
    snprintf(c, sizeof c, "unknown");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null", IG_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    if (p) {
        char line[64];
        if (fgets(line, sizeof line, p)) {
            line[strcspn(line, "\r\n")] = 0;
            if (line[0]) snprintf(c, sizeof c, "%s", line);
        }
        pclose(p);
    }
    return c;
}

static json_object *machine_json(void) {
    json_object *o = json_object_new_object();
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    json_object_object_add(o, "hostname", json_object_new_string(host));
    char cpu[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *v = strchr(line, ':');
                if (v) {
                    v++;
                    while (*v == ' ') v++;
                    v[strcspn(v, "\n")] = 0;
                    snprintf(cpu, sizeof cpu, "%s", v);
                }
                break;
            }
        fclose(f);
    }
    json_object_object_add(o, "cpu", json_object_new_string(cpu));
    json_object_object_add(o, "cores", json_object_new_int((int)sysconf(_SC_NPROCESSORS_ONLN)));
    /* the GPU a CUDA point may run on (probed once; null without one) */
    static int probed;
    static char gpu[128];
    if (!probed) {
        probed = 1;
        char why[256];
        ig_backend_info bi;
        if (ig_backend_cuda_compiled() && ig_backend_cuda_probe(why, sizeof why, &bi) > 0)
            snprintf(gpu, sizeof gpu, "%s", bi.device_name);
    }
    json_object_object_add(o, "gpu", gpu[0] ? json_object_new_string(gpu) : NULL);
    return o;
}

/* What explains noise: the load average, the cores' current clock where readable, threads. */
static json_object *machine_state(int threads) {
    json_object *o = json_object_new_object();
    double la[3];
    if (getloadavg(la, 3) == 3) {
        json_object *a = json_object_new_array();
        for (int i = 0; i < 3; i++) json_object_array_add(a, json_object_new_double(la[i]));
        json_object_object_add(o, "loadavg", a);
    }
    FILE *f = fopen("/proc/cpuinfo", "r");
    double mhz = 0;
    int n = 0;
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            double v;
            const char *colon = strchr(line, ':');
            if (!strncmp(line, "cpu MHz", 7) && colon && sscanf(colon + 1, "%lf", &v) == 1) {
                mhz += v;
                n++;
            }
        }
        fclose(f);
    }
    json_object_object_add(o, "cpu_mhz", n ? json_object_new_double(mhz / n) : NULL);
    json_object_object_add(
        o, "threads",
        json_object_new_int(threads > 0 ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN)));
    const char *wp = getenv("OMP_WAIT_POLICY");
    json_object_object_add(o, "omp_wait_policy", wp ? json_object_new_string(wp) : NULL);
    return o;
}

/* The whole machine's CPU time so far from /proc/stat's first line (clock ticks): the time the
 * hypervisor gave other guests while this one's vCPUs wanted to run (steal) and the total. A VM's
 * speed changes with its neighbours' load, which neither the load average nor the clock shows. */
static int cpu_ticks(unsigned long long *steal, unsigned long long *total) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8) return 0;
    *steal = v[7];
    *total = 0;
    for (int i = 0; i < 8; i++) *total += v[i];
    return 1;
}

static json_object *stats_json(const ig_stats *s) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "n", json_object_new_int(s->n));
    json_object_object_add(o, "median", json_object_new_double(s->median));
    json_object_object_add(o, "min", json_object_new_double(s->min));
    json_object_object_add(o, "max", json_object_new_double(s->max));
    json_object_object_add(o, "mean", json_object_new_double(s->mean));
    json_object_object_add(o, "sd", json_object_new_double(s->sd));
    json_object *ci = json_object_new_array();
    json_object_array_add(ci, json_object_new_double(s->ci95_lo));
    json_object_array_add(ci, json_object_new_double(s->ci95_hi));
    json_object_object_add(o, "ci95", ci);
    json_object *pi = json_object_new_array();
    json_object_array_add(pi, json_object_new_double(s->pi95_lo));
    json_object_array_add(pi, json_object_new_double(s->pi95_hi));
    json_object_object_add(o, "pi95", pi);
    json_object_object_add(o, "spread", json_object_new_double(s->spread));
    return o;
}

static double get_num(json_object *o, const char *k) {
    json_object *v;
    if (!o || !json_object_object_get_ex(o, k, &v)) return NAN;
    if (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))
        return json_object_get_double(v);
    return NAN;
}

typedef struct member {
    int index;
    ig_exp_point pt;
    json_object *rec, *metrics;
    json_object **reps; /* [repeat] metrics of each timed repeat */
    int failed, link_on;
    ig_run_session *sess; /* measure.prefill: once */
    ig_error err;
    double t0, elapsed;
} member;

/* The record's fixed fields; metrics and status are added at the end. */
static json_object *record_head(const ig_exp *x, int i) {
    json_object *rec = json_object_new_object();
    char started[64];
    iso_now(started, sizeof started);
    json_object_object_add(rec, "experiment", json_object_new_string(ig_exp_name(x)));
    json_object_object_add(rec, "point", json_object_new_int(i));
    json_object_object_add(rec, "n_points", json_object_new_int(ig_exp_n_points(x)));
    char key[17];
    ig_exp_point_key(x, i, key);
    json_object_object_add(rec, "key", json_object_new_string(key));
    json_object_object_add(rec, "label", json_object_new_string(ig_exp_point_label(x, i)));
    json_object_object_add(rec, "config", json_object_get(ig_exp_point_config(x, i)));
    json_object_object_add(rec, "started_at", json_object_new_string(started));
    return rec;
}

/* Median, min, max and interval of the timed metrics over the repeats; the other metrics from
 * the repeat whose decode throughput is the median (they are the same in every repeat, but for
 * the time breakdown, which belongs with the time it splits). */
static void summarize(member *m, int R) {
    json_object *mx = m->metrics;
    double v[1000];
    int med = 0;
    {
        double best = INFINITY, dt[1000];
        for (int r = 0; r < R; r++) dt[r] = get_num(m->reps[r], "decode_throughput_tok_s");
        ig_stats s;
        ig_stats_summarize(dt, R, &s);
        for (int r = 0; r < R; r++)
            if (fabs(dt[r] - s.median) < best) best = fabs(dt[r] - s.median), med = r;
    }
    json_object_object_foreach(m->reps[med], k, val) {
        int timed = 0;
        for (int t = 0; t < N_TIMED; t++) timed |= !strcmp(k, k_timed[t]);
        if (!timed) json_object_object_add(mx, k, json_object_get(val));
    }
    json_object *noisy = json_object_new_array();
    for (int t = 0; t < N_TIMED; t++) {
        int n = 0;
        for (int r = 0; r < R; r++) {
            double x = get_num(m->reps[r], k_timed[t]);
            if (!isnan(x)) v[n++] = x;
        }
        if (n < R || n == 0) continue;
        ig_stats s;
        ig_stats_summarize(v, n, &s);
        json_object_object_add(mx, k_timed[t], json_object_new_double(s.median));
        char name[96];
        snprintf(name, sizeof name, "%s_stats", k_timed[t]);
        json_object_object_add(mx, name, stats_json(&s));
        for (int h = 0; h < 2; h++)
            if (!strcmp(k_timed[t], k_headline[h]) && R > 1 && s.spread > m->pt.noise)
                json_object_array_add(noisy, json_object_new_string(k_timed[t]));
    }
    double steal = -1; /* the largest share of CPU time stolen from a repeat, where readable */
    for (int r = 0; r < R; r++) {
        double x = get_num(m->reps[r], "cpu_steal_frac");
        if (!isnan(x) && x > steal) steal = x;
    }
    json_object_object_del(mx, "cpu_steal_frac"); /* the median repeat's, copied above */
    if (steal >= 0) json_object_object_add(mx, "cpu_steal_frac_max", json_object_new_double(steal));
    json_object_object_add(mx, "noisy",
                           json_object_new_boolean(json_object_array_length(noisy) > 0));
    json_object_object_add(mx, "noisy_metrics", noisy);
    json_object *reps = json_object_new_array();
    for (int r = 0; r < R; r++) json_object_array_add(reps, json_object_get(m->reps[r]));
    json_object_object_add(mx, "repeats", reps);
}

/* Speedups against the group's baseline point, one ratio per round. */
static void speedups(member *ms, int n, int R) {
    const char *base = ms[0].pt.baseline;
    if (!base) return;
    int b = -1;
    for (int i = 0; i < n && b < 0; i++)
        if (!ms[i].failed && !strcmp(ms[i].pt.policy, base)) b = i;
    for (int i = 0; i < n; i++) {
        if (ms[i].failed) continue;
        json_object *sp = json_object_new_object();
        json_object_object_add(sp, "baseline", json_object_new_string(base));
        if (b < 0) {
            json_object_object_add(
                sp, "error",
                json_object_new_string("the baseline policy is not among this point's group (the "
                                       "points that differ from it only in the policy)"));
        } else {
            json_object_object_add(sp, "baseline_point", json_object_new_int(ms[b].index));
            for (int h = 0; h < 2; h++) {
                double v[1000];
                int k = 0;
                for (int r = 0; r < R; r++) {
                    double x = get_num(ms[i].reps[r], k_headline[h]);
                    double y = get_num(ms[b].reps[r], k_headline[h]);
                    if (!isnan(x) && !isnan(y) && y > 0) v[k++] = x / y;
                }
                if (k == 0) continue;
                ig_stats s;
                ig_stats_summarize(v, k, &s);
                json_object_object_add(sp, k_headline[h], stats_json(&s));
            }
        }
        json_object_object_add(ms[i].metrics, "speedup", sp);
    }
}

/* The group's ordering by decode throughput that the repeats can support: for every pair of points
 * the per-round ratios (rounds are interleaved, so round r of both shares the machine's state) and
 * the 95% t-interval of their logarithms' mean (the geometric mean ratio, so that i against j is
 * exactly the mirror of j against i); i is faster than j only when that interval lies above 1
 * (above 0 in logs). A point's rank
 * is 1 + the number of points faster than it, so points the measurements cannot separate share a
 * rank (a tie, not an order made from noise). */
static void ranks(member *ms, int n, int R) {
    const char *metric = "decode_throughput_tok_s";
    int live = 0;
    for (int i = 0; i < n; i++) live += !ms[i].failed;
    if (live < 2 || R < 2) return;
    for (int i = 0; i < n; i++) {
        if (ms[i].failed) continue;
        json_object *faster = json_object_new_array(), *slower = json_object_new_array();
        json_object *tied = json_object_new_array();
        int above = 0, valid = 1;
        for (int j = 0; j < n; j++) {
            if (j == i || ms[j].failed) continue;
            double v[1000];
            int k = 0;
            for (int r = 0; r < R; r++) {
                double x = get_num(ms[i].reps[r], metric), y = get_num(ms[j].reps[r], metric);
                if (!isnan(x) && !isnan(y) && x > 0 && y > 0) v[k++] = log(x / y);
            }
            if (k < 2) {
                valid = 0;
                continue;
            }
            ig_stats s;
            ig_stats_summarize(v, k, &s);
            json_object *idx = json_object_new_int(ms[j].index);
            if (s.ci95_lo > 0)
                json_object_array_add(slower, idx); /* i is faster than j */
            else if (s.ci95_hi < 0) {
                json_object_array_add(faster, idx);
                above++;
            } else
                json_object_array_add(tied, idx);
        }
        json_object *o = json_object_new_object();
        json_object_object_add(o, "metric", json_object_new_string(metric));
        if (valid) {
            json_object_object_add(o, "rank", json_object_new_int(1 + above));
            json_object_object_add(o, "of", json_object_new_int(live));
        }
        json_object_object_add(o, "faster_points", faster);
        json_object_object_add(o, "slower_points", slower);
        json_object_object_add(o, "tied_points", tied);
        json_object_object_add(
            o, "rule",
            json_object_new_string("pairwise per-round ratios; faster only when the 95% "
                                   "t-interval of their geometric mean excludes 1; rank = 1 + "
                                   "points faster"));
        json_object_object_add(ms[i].metrics, "rank", o);
    }
}

static int timed_metrics(const ig_exp_point *pt) {
    return pt->mode == IG_EXP_MEASURED &&
           (pt->metric_throughput || pt->metric_bytes || pt->metric_recall);
}

void ig_run_group(const ig_exp *x, const int *idx, int n, json_object **recs, ig_progress *pg,
                  const int *pg_idx) {
    member *ms = calloc((size_t)n, sizeof *ms);
    if (!ms) {
        for (int i = 0; i < n; i++) recs[i] = NULL;
        return;
    }
    for (int i = 0; i < n; i++) {
        member *m = &ms[i];
        m->index = idx[i];
        ig_error_clear(&m->err);
        m->rec = record_head(x, idx[i]);
        m->metrics = json_object_new_object();
        if (ig_exp_point_get(x, idx[i], &m->pt) != IG_OK) {
            m->failed = 1;
            ig_error_set(&m->err, IG_ERR_INTERNAL, "point %d out of range", idx[i]);
        }
    }
    int R = ms[0].pt.repeat > 0 ? ms[0].pt.repeat : 1;
    int timed = timed_metrics(&ms[0].pt);
    json_object *state_before = machine_state(ms[0].pt.threads);
    /* threads that sleep between parallel regions pay a wake-up in each of the ~150 regions of a
     * decode step: on a 2-core VM the quickstart's decode ran at 0.58x that way (docs/config.md)
     */
    static int warned_passive;
    const char *wp = getenv("OMP_WAIT_POLICY");
    if (timed && !warned_passive && wp && !strcasecmp(wp, "passive")) {
        warned_passive = 1;
        IG_WARN("OMP_WAIT_POLICY=passive: OpenMP threads sleep between parallel regions, which "
                "slows decoding (recorded in machine_state; unset it for timings to publish)");
    }
    for (int i = 0; i < n; i++) {
        ms[i].reps = calloc((size_t)R, sizeof *ms[i].reps);
        if (!ms[i].reps && !ms[i].failed) {
            ms[i].failed = 1;
            ig_error_set(&ms[i].err, IG_ERR_NOMEM, "out of memory");
        }
    }
    /* measure.prefill: once: every member's engine prefilled now (its warm-up: IG_RUN_WARMUP_STEPS
     * untimed decode steps), each round decoding on from where the last one stopped */
    int once = timed && ms[0].pt.prefill_once;
    for (int i = 0; once && i < n; i++) {
        member *m = &ms[i];
        if (m->failed) continue;
        if (pg && pg_idx) {
            char lab[1200];
            snprintf(lab, sizeof lab, "%s (prefill)", ig_exp_point_label(x, m->index));
            ig_progress_point(pg, pg_idx[i], lab);
        }
        double t0 = ig_time_s();
        m->t0 = t0;
        int link_on = 0;
        if (ig_run_session_open(&m->pt, R, m->pt.warmup ? IG_RUN_WARMUP_STEPS : 0, &m->sess,
                                &link_on, &m->err) != IG_OK)
            m->failed = 1;
        m->link_on |= link_on;
        m->elapsed += ig_time_s() - t0;
    }
    /* hardware: this samples the matmuls after each round only where a modeled point will use
     * the samples (a second or more each) */
    int sample_mm = 0;
    for (int i = 0; timed && i < ig_exp_n_points(x) && !sample_mm; i++) {
        ig_exp_point q;
        sample_mm = ig_exp_point_get(x, i, &q) == IG_OK && q.mode == IG_EXP_MODELED &&
                    q.hardware_path && !strcmp(q.hardware_path, "this");
    }
    /* rounds: -1 the warm-up (untimed, discarded), then 0 .. R-1; modeled points once */
    int first = timed && ms[0].pt.warmup && !once ? -1 : 0, last = timed ? R : 1;
    for (int r = first; r < last; r++) {
        for (int i = 0; i < n; i++) {
            member *m = &ms[i];
            if (m->failed) continue;
            /* one warm-up run per group, of its first point: each measurement also starts with
             * an untimed forward of its own (ig_cli_measure_decode) */
            if (r < 0 && i > 0) continue;
            if (pg && pg_idx) {
                char lab[1200];
                const char *l = ig_exp_point_label(x, m->index);
                if (r < 0)
                    snprintf(lab, sizeof lab, "%s (warm-up)", l);
                else if (timed && R > 1)
                    snprintf(lab, sizeof lab, "%s (repeat %d/%d)", l, r + 1, R);
                else
                    snprintf(lab, sizeof lab, "%s", l);
                ig_progress_point(pg, pg_idx[i], lab);
            }
            double t0 = ig_time_s();
            if (r == first && !once) m->t0 = t0;
            json_object *mx = json_object_new_object();
            ig_run_set_repeat(r);
            int link_on = 0;
            unsigned long long st0 = 0, tt0 = 0, st1 = 0, tt1 = 0;
            int ticks = timed && cpu_ticks(&st0, &tt0);
            ig_status st = m->sess ? ig_run_session_decode(m->sess, mx, &m->err)
                                   : ig_run_point_timed(&m->pt, mx, &link_on, &m->err);
            m->link_on |= link_on;
            /* the share of this repeat's CPU time stolen (null: shorter than a clock tick) */
            if (ticks && cpu_ticks(&st1, &tt1))
                json_object_object_add(
                    mx, "cpu_steal_frac",
                    tt1 > tt0 ? json_object_new_double((double)(st1 - st0) / (double)(tt1 - tt0))
                              : NULL);
            if (st != IG_OK) {
                m->failed = 1;
                /* what the failing run measured stays in the record */
                json_object_object_foreach(mx, k, v)
                    json_object_object_add(m->metrics, k, json_object_get(v));
                json_object_put(mx);
            } else if (r < 0) {
                json_object_put(mx);
            } else if (!timed) { /* modeled, or a point with nothing timed */
                json_object_object_foreach(mx, k, v)
                    json_object_object_add(m->metrics, k, json_object_get(v));
                json_object_put(mx);
            } else {
                m->reps[r] = mx;
            }
            m->elapsed += ig_time_s() - t0;
        }
        if (timed && r >= 0 && sample_mm) ig_run_sample_matmuls(&ms[0].pt); /* per round */
    }
    ig_run_set_repeat(-1);
    for (int i = 0; i < n; i++) { /* the engines go before the perplexity runs */
        ig_run_session_close(ms[i].sess);
        ms[i].sess = NULL;
    }
    if (timed) {
        for (int i = 0; i < n; i++)
            if (!ms[i].failed) summarize(&ms[i], R);
        speedups(ms, n, R);
        ranks(ms, n, R);
    }
    json_object *state_after = machine_state(ms[0].pt.threads);
    for (int i = 0; i < n; i++) {
        member *m = &ms[i];
        double t0 = ig_time_s();
        if (!m->failed && ig_run_point_ppl(&m->pt, m->metrics, &m->err) != IG_OK) m->failed = 1;
        m->elapsed += ig_time_s() - t0;
        json_object *rec = m->rec;
        json_object_object_add(
            rec, "mode",
            json_object_new_string(m->pt.mode == IG_EXP_MODELED ? "modeled" : "measured"));
        json_object_object_add(rec, "status", json_object_new_string(m->failed ? "error" : "ok"));
        json_object_object_add(rec, "error", m->failed ? json_object_new_string(m->err.msg) : NULL);
        json_object_object_add(rec, "igen_version", json_object_new_string(IG_VERSION));
        json_object_object_add(rec, "git_commit", json_object_new_string(git_commit()));
        json_object_object_add(rec, "machine", machine_json());
        json_object *ms_o = json_object_new_object();
        json_object_object_add(ms_o, "before", json_object_get(state_before));
        json_object_object_add(ms_o, "after", json_object_get(state_after));
        json_object_object_add(ms_o, "group_size", json_object_new_int(n));
        json_object_object_add(ms_o, "repeats", json_object_new_int(timed ? R : 1));
        json_object_object_add(ms_o, "warmup", json_object_new_boolean(timed && m->pt.warmup));
        json_object_object_add(ms_o, "prefill", json_object_new_string(once ? "once" : "every"));
        json_object_object_add(rec, "machine_state", ms_o);
        json_object_object_add(rec, "elapsed_s", json_object_new_double(m->elapsed));
        json_object_object_add(rec, "link_model", json_object_new_boolean(m->link_on));
        json_object_object_add(rec, "metrics", m->metrics);
        recs[i] = rec;
        for (int r = 0; r < R && m->reps; r++) json_object_put(m->reps[r]);
        free(m->reps);
    }
    json_object_put(state_before);
    json_object_put(state_after);
    free(ms);
}
