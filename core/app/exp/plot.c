/* Plots of a results directory with gnuplot; see plot.h. */
#include "core/app/exp/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/app/exp/results.h"
#include "core/app/exp/results_internal.h"

static const char *const bd_parts[5] = {"attention", "ffn", "transfer", "prediction", "other"};

/* One "ok" record, with what the plots need. */
typedef struct pt {
    json_object *rec;   /* borrowed from the store */
    const char *policy; /* config.policy.name */
    char *params;       /* "k=v,k=v" (sorted keys) */
    char *curve;        /* the ppl plot's curve: policy and its non-numeric params (a sweep of
                           the numeric ones, the budget knobs, is one curve) */
    char *variant;      /* policy, or "policy params" when it has several variants */
    char *other;        /* the other varying settings, "" if none */
    char *other_nt;     /* the same without workload.text (the ppl plot's panels) */
    const char *text;   /* config.workload.text, "" if none */
    char *series;       /* variant + other */
    long seq, batch;    /* -1 if absent */
    double tp, ppl, kv; /* NAN if absent */
    double dtp;         /* metrics.decode_throughput_tok_s, NAN if absent */
    double tp_lo, tp_hi, dtp_lo, dtp_hi; /* min and max over the repeats (the value if none) */
    int tp_noisy, dtp_noisy;             /* metrics.noisy_metrics names it */
    int has_bd;
    double bd[5];
} pt;

typedef struct plotter {
    const char *dir;
    /* the throughput plots' file stem and title: "throughput" (metrics.throughput_tok_s), or
     * "decode_throughput" while the points' tp holds metrics.decode_throughput_tok_s */
    const char *tp_stem, *tp_title;
    /* ", KV in host memory behind a 12 GB/s link (model)" when every measured point homes KV in
     * host memory with the same link model on; "" otherwise */
    char regime[160];
    char *plots;   /* DIR/plots */
    char *gnuplot; /* the binary */
    FILE *log;
    pt *pts;
    int n;
    int n_written;
} plotter;

static json_object *get_path(json_object *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *t = strtok_r(buf, ".", &save); t && o; t = strtok_r(NULL, ".", &save))
        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, t, &o))
            return NULL;
    return o;
}

static double num_at(json_object *o, const char *path) {
    json_object *v = get_path(o, path);
    if (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))
        return json_object_get_double(v);
    return NAN;
}

static long int_at(json_object *o, const char *path) {
    json_object *v = get_path(o, path);
    return json_object_is_type(v, json_type_int) ? (long)json_object_get_int64(v) : -1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "k=v,k=v" of a flattened object, keys sorted. */
static char *sorted_pairs(json_object *flat, const char *sep) {
    int n = json_object_object_length(flat), i = 0;
    const char **keys = calloc((size_t)n + 1, sizeof *keys);
    if (!keys) return NULL;
    json_object_object_foreach(flat, k, v) {
        (void)v;
        keys[i++] = k;
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_str);
    ig_exp_buf b = {0};
    ig_exp_buf_puts(&b, "");
    for (i = 0; i < n; i++)
        ig_exp_buf_printf(&b, "%s%s=%s", i ? sep : "", keys[i],
                          json_object_get_string(json_object_object_get(flat, keys[i])));
    free(keys);
    if (b.oom) {
        ig_exp_buf_free(&b);
        return NULL;
    }
    return b.s;
}

/* The policy parameters that set a budget (tools/results/frontier.py has the same list): a curve
 * of the perplexity plot sweeps these and fixes every other parameter. */
static int is_budget_knob(const char *param) {
    static const char *const knobs[] = {"max_fetch", "heavy_ratio", "recent_ratio", "budget_ratio",
                                        "window_ratio"};
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
        if (!strcmp(param, knobs[i])) return 1;
    return 0;
}

static int excluded_axis(const char *path) {
    static const char *const ex[] = {
        "workload.prompt_len", "workload.gen_len", "workload.batch", "metrics", "name", "output"};
    if (!strcmp(path, "policy") || !strncmp(path, "policy.", 7)) return 1;
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
        if (!strcmp(path, ex[i])) return 1;
    return 0;
}

static void free_points(plotter *p) {
    for (int i = 0; i < p->n; i++) {
        free(p->pts[i].params);
        free(p->pts[i].curve);
        free(p->pts[i].variant);
        free(p->pts[i].other);
        free(p->pts[i].other_nt);
        free(p->pts[i].series);
    }
    free(p->pts);
    p->pts = NULL;
    p->n = 0;
}

/* Collects the "ok" records and labels them. */
static ig_status gather(plotter *p, const ig_results *r, ig_error *err) {
    int n = ig_results_count(r);
    p->pts = calloc((size_t)n + 1, sizeof *p->pts);
    json_object **flat = calloc((size_t)n + 1, sizeof *flat);
    json_object *cols = json_object_new_array(), *seen = json_object_new_object();
    json_object *variants = json_object_new_object(); /* policy -> {params: null} */
    ig_status rc = IG_OK;
    if (!p->pts || !flat || !cols || !seen || !variants) goto oom;
    for (int i = 0; i < n; i++) {
        json_object *rec = ig_results_get(r, i), *st;
        if (!json_object_object_get_ex(rec, "status", &st) ||
            strcmp(json_object_get_string(st), "ok") != 0)
            continue;
        pt *q = &p->pts[p->n];
        q->rec = rec;
        json_object *md = get_path(rec, "mode");
        if (!md || !strcmp(json_object_get_string(md), "measured")) {
            json_object *h2d = get_path(rec, "config.placement.link.h2d_gbps");
            json_object *kvc = get_path(rec, "config.placement.kv.cpu");
            char one[160] = "-";
            if (h2d && kvc && json_object_get_double(kvc) > 0)
                snprintf(one, sizeof one, ", KV in host memory behind a %.3g GB/s link (model)",
                         json_object_get_double(h2d));
            if (!p->regime[0])
                snprintf(p->regime, sizeof p->regime, "%s", one);
            else if (strcmp(p->regime, one) != 0)
                snprintf(p->regime, sizeof p->regime, "-"); /* mixed: said nowhere */
        }
        json_object *name = get_path(rec, "config.policy.name");
        q->policy = json_object_is_type(name, json_type_string) ? json_object_get_string(name)
                                                                : "(no policy)";
        json_object *pf = json_object_new_object();
        if (!pf) goto oom;
        json_object *params = get_path(rec, "config.policy.params");
        if ((params && ig_exp_flatten(params, "", pf, NULL, NULL) != 0) ||
            !(q->params = sorted_pairs(pf, ","))) {
            json_object_put(pf);
            goto oom;
        }
        /* the curve: every parameter but the budget knobs (what a curve sweeps) names it */
        json_object *pt_ = json_object_new_object();
        if (!pt_) {
            json_object_put(pf);
            goto oom;
        }
        json_object_object_foreach(pf, pk, pv) {
            if (!is_budget_knob(pk)) json_object_object_add(pt_, pk, json_object_get(pv));
        }
        char *tp = sorted_pairs(pt_, ",");
        json_object_put(pt_);
        ig_exp_buf cb = {0};
        if (tp && tp[0])
            ig_exp_buf_printf(&cb, "%s %s", q->policy, tp);
        else
            ig_exp_buf_puts(&cb, q->policy);
        free(tp);
        q->curve = cb.s;
        if (cb.oom || !q->curve) {
            json_object_put(pf);
            goto oom;
        }
        json_object_put(pf);
        json_object *vs;
        if (!json_object_object_get_ex(variants, q->policy, &vs)) {
            vs = json_object_new_object();
            if (!vs || json_object_object_add(variants, q->policy, vs) != 0) {
                json_object_put(vs);
                goto oom;
            }
        }
        if (json_object_object_add(vs, q->params, NULL) != 0) goto oom;
        long pl = int_at(rec, "config.workload.prompt_len");
        long gl = int_at(rec, "config.workload.gen_len");
        q->seq = pl >= 0 && gl >= 0 ? pl + gl : -1;
        q->batch = int_at(rec, "config.workload.batch");
        q->tp = num_at(rec, "metrics.throughput_tok_s");
        q->dtp = num_at(rec, "metrics.decode_throughput_tok_s");
        q->tp_lo = num_at(rec, "metrics.throughput_tok_s_stats.min");
        q->tp_hi = num_at(rec, "metrics.throughput_tok_s_stats.max");
        q->dtp_lo = num_at(rec, "metrics.decode_throughput_tok_s_stats.min");
        q->dtp_hi = num_at(rec, "metrics.decode_throughput_tok_s_stats.max");
        if (isnan(q->tp_lo) || isnan(q->tp_hi)) q->tp_lo = q->tp_hi = q->tp;
        if (isnan(q->dtp_lo) || isnan(q->dtp_hi)) q->dtp_lo = q->dtp_hi = q->dtp;
        json_object *nm = get_path(rec, "metrics.noisy_metrics");
        for (size_t k = 0;
             json_object_is_type(nm, json_type_array) && k < json_object_array_length(nm); k++) {
            const char *m = json_object_get_string(json_object_array_get_idx(nm, k));
            if (m && !strcmp(m, "throughput_tok_s")) q->tp_noisy = 1;
            if (m && !strcmp(m, "decode_throughput_tok_s")) q->dtp_noisy = 1;
        }
        q->ppl = num_at(rec, "metrics.ppl");
        /* the perplexity run's own read fraction where recorded (the throughput run's otherwise) */
        q->kv = num_at(rec, "metrics.ppl_read_fraction");
        if (isnan(q->kv)) q->kv = num_at(rec, "metrics.kv_read_fraction");
        json_object *tx = get_path(rec, "config.workload.text");
        q->text = json_object_is_type(tx, json_type_string) ? json_object_get_string(tx) : "";
        for (int k = 0; k < 5; k++) {
            char path[64];
            snprintf(path, sizeof path, "metrics.breakdown_s.%s", bd_parts[k]);
            q->bd[k] = num_at(rec, path);
            if (!isnan(q->bd[k])) q->has_bd = 1;
        }
        for (int k = 0; k < 5; k++)
            if (isnan(q->bd[k])) q->bd[k] = 0;
        flat[p->n] = json_object_new_object();
        json_object *cfg = get_path(rec, "config");
        if (!flat[p->n] || (cfg && ig_exp_flatten(cfg, "", flat[p->n], cols, seen) != 0)) goto oom;
        p->n++;
    }
    /* The config paths (other than the plotted axes) whose value differs between points. */
    size_t nc = json_object_array_length(cols);
    char *varying = calloc(nc + 1, 1);
    if (!varying) goto oom;
    for (size_t c = 0; c < nc; c++) {
        const char *path = json_object_get_string(json_object_array_get_idx(cols, c));
        if (excluded_axis(path)) continue;
        const char *first = NULL;
        /* a record without the path (written before the setting existed) varies nothing */
        for (int i = 0; i < p->n && !varying[c]; i++) {
            json_object *v;
            if (!json_object_object_get_ex(flat[i], path, &v)) continue;
            const char *t = json_object_get_string(v);
            if (!first)
                first = t;
            else if (strcmp(first, t) != 0)
                varying[c] = 1;
        }
    }
    for (int i = 0; i < p->n; i++) {
        pt *q = &p->pts[i];
        json_object *vs = json_object_object_get(variants, q->policy);
        ig_exp_buf b = {0}, o = {0}, ont = {0};
        if (json_object_object_length(vs) > 1 && q->params[0])
            ig_exp_buf_printf(&b, "%s %s", q->policy, q->params);
        else
            ig_exp_buf_puts(&b, q->policy);
        ig_exp_buf_puts(&o, "");
        ig_exp_buf_puts(&ont, "");
        for (size_t c = 0; c < nc; c++) {
            if (!varying[c]) continue;
            const char *path = json_object_get_string(json_object_array_get_idx(cols, c));
            json_object *v;
            const char *val =
                json_object_object_get_ex(flat[i], path, &v) ? json_object_get_string(v) : "-";
            ig_exp_buf_printf(&o, "%s%s=%s", o.n ? " " : "", path, val);
            if (strcmp(path, "workload.text") != 0)
                ig_exp_buf_printf(&ont, "%s%s=%s", ont.n ? " " : "", path, val);
        }
        q->variant = b.s;
        q->other = o.s;
        q->other_nt = ont.s;
        if (b.oom || o.oom || ont.oom || !q->variant || !q->other || !q->other_nt) {
            free(varying);
            goto oom;
        }
        ig_exp_buf s = {0};
        ig_exp_buf_printf(&s, "%s%s%s", q->variant, q->other[0] ? " " : "", q->other);
        q->series = s.s;
        if (s.oom || !q->series) {
            free(varying);
            goto oom;
        }
    }
    free(varying);
    goto out;
oom:
    rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory reading the results");
out:
    for (int i = 0; flat && i < n; i++) json_object_put(flat[i]);
    free(flat);
    json_object_put(cols);
    json_object_put(seen);
    json_object_put(variants);
    return rc;
}

/* ---- gnuplot ---- */

/* 'text' for gnuplot (single quotes: no escapes, a quote doubled). */
static void gp_quote(ig_exp_buf *b, const char *s) {
    ig_exp_buf_puts(b, "'");
    for (; *s; s++) ig_exp_buf_puts(b, *s == '\'' ? "''" : (char[]){*s, 0});
    ig_exp_buf_puts(b, "'");
}

static char *find_gnuplot(void) {
    const char *env = getenv("IGEN_GNUPLOT");
    if (env && *env) return access(env, X_OK) == 0 ? strdup(env) : NULL;
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    char *copy = strdup(path), *save = NULL, *found = NULL;
    if (!copy) return NULL;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *cand = ig_exp_path_join(*d ? d : ".", "gnuplot");
        struct stat st;
        if (cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            found = cand;
        else
            free(cand);
    }
    free(copy);
    return found;
}

/* Writes NAME.dat and NAME.gp (the body drawn once as PNG, once as SVG), runs gnuplot in
 * DIR/plots and checks both images. */
static ig_status draw(plotter *p, const char *name, const char *data, const char *body, int w,
                      int h, ig_error *err) {
    ig_exp_buf path = {0}, gp = {0};
    ig_status rc = IG_OK;
    ig_exp_buf_printf(&path, "%s/%s.dat", p->plots, name);
    ig_exp_buf_printf(&gp,
                      "# Drawn by igen plot from ../results.jsonl; redraw with: cd %s && gnuplot "
                      "%s.gp\n",
                      p->plots, name);
    for (int svg = 0; svg < 2; svg++) {
        if (svg)
            ig_exp_buf_printf(
                &gp, "set terminal svg size %d,%d dynamic noenhanced font 'sans,11'\n", w, h);
        else
            ig_exp_buf_printf(&gp, "set terminal pngcairo size %d,%d noenhanced font 'sans,10'\n",
                              w, h);
        ig_exp_buf_printf(&gp, "set output '%s.%s'\nreset\nset datafile separator '\\t'\n", name,
                          svg ? "svg" : "png");
        ig_exp_buf_puts(&gp, body);
        ig_exp_buf_puts(&gp, "unset output\n");
    }
    if (path.oom || gp.oom) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = ig_exp_write_atomic(path.s, data, strlen(data), err);
    if (rc != IG_OK) goto out;
    path.n = 0;
    ig_exp_buf_printf(&path, "%s/%s.gp", p->plots, name);
    if (path.oom) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = ig_exp_write_atomic(path.s, gp.s, gp.n, err);
    if (rc != IG_OK) goto out;

    char script[300];
    snprintf(script, sizeof script, "%s.gp", name);
    pid_t pid = fork();
    if (pid < 0) {
        rc = ig_error_set(err, IG_ERR_IO, "cannot start gnuplot: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        if (chdir(p->plots) != 0) _exit(126);
        int lg = open("gnuplot.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in >= 0) dup2(in, 0);
        if (lg >= 0) {
            dup2(lg, 1);
            dup2(lg, 2);
        }
        execl(p->gnuplot, "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            rc = ig_error_set(err, IG_ERR_IO, "waiting for gnuplot: %s", strerror(errno));
            goto out;
        }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        rc = ig_error_set(err, IG_ERR_IO,
                          "gnuplot (%s) failed on %s/%s.gp (%s %d); its messages are in "
                          "%s/gnuplot.log",
                          p->gnuplot, p->plots, name, WIFEXITED(st) ? "exit status" : "signal",
                          WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), p->plots);
        goto out;
    }
    for (int svg = 0; svg < 2; svg++) {
        path.n = 0;
        ig_exp_buf_printf(&path, "%s/%s.%s", p->plots, name, svg ? "svg" : "png");
        struct stat sb;
        if (path.oom || stat(path.s, &sb) != 0 || sb.st_size == 0) {
            rc = ig_error_set(err, IG_ERR_IO, "gnuplot wrote no %s (see %s/gnuplot.log)",
                              path.s ? path.s : name, p->plots);
            goto out;
        }
    }
    p->n_written++;
    if (p->log) fprintf(p->log, "wrote %s/%s.png and .svg\n", p->plots, name);
out:
    ig_exp_buf_free(&path);
    ig_exp_buf_free(&gp);
    return rc;
}

static void skipped(plotter *p, const char *name, const char *why) {
    if (p->log) fprintf(p->log, "skipped %s: %s\n", name, why);
}

/* ---- the plots ---- */

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* Distinct values of a field among the points that pass `keep`, sorted; returns the count. */
static int distinct(const plotter *p, long *out, int (*keep)(const pt *), int which) {
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        const pt *q = &p->pts[i];
        long v = which == 0 ? q->seq : q->batch;
        if (v < 0 || (keep && !keep(q))) continue;
        int dup = 0;
        for (int k = 0; k < n && !dup; k++) dup = out[k] == v;
        if (!dup) out[n++] = v;
    }
    qsort(out, (size_t)n, sizeof *out, cmp_long);
    return n;
}

/* The throughput fields and the decode-throughput fields trade places (the decode plot). */
static void swap_tp(pt *q) {
    double t = q->tp;
    q->tp = q->dtp;
    q->dtp = t;
    t = q->tp_lo;
    q->tp_lo = q->dtp_lo;
    q->dtp_lo = t;
    t = q->tp_hi;
    q->tp_hi = q->dtp_hi;
    q->dtp_hi = t;
    int k = q->tp_noisy;
    q->tp_noisy = q->dtp_noisy;
    q->dtp_noisy = k;
}

static int has_tp(const pt *q) {
    return !isnan(q->tp) && q->seq >= 0;
}

/* The series names of the points that pass `keep`, in order of first appearance. */
static json_object *series_of(const plotter *p, int (*keep)(const pt *, const void *),
                              const void *ctx, int by_policy) {
    json_object *s = json_object_new_array();
    json_object *seen = json_object_new_object();
    if (!s || !seen) {
        json_object_put(s);
        json_object_put(seen);
        return NULL;
    }
    for (int i = 0; i < p->n; i++) {
        const pt *q = &p->pts[i];
        if (!keep(q, ctx)) continue;
        char name[1024];
        if (by_policy)
            snprintf(name, sizeof name, "%s%s%s", q->policy, q->other[0] ? " " : "", q->other);
        else
            snprintf(name, sizeof name, "%s", q->series);
        if (json_object_object_get_ex(seen, name, NULL)) continue;
        json_object_object_add(seen, name, NULL);
        json_object_array_add(s, json_object_new_string(name));
    }
    json_object_put(seen);
    return s;
}

typedef struct tp_ctx {
    long batch; /* -1: any */
} tp_ctx;

static int keep_tp(const pt *q, const void *c) {
    const tp_ctx *t = c;
    return has_tp(q) && (t->batch < 0 || q->batch == t->batch);
}

/* Removes "mode=measured" / "mode=modeled" (and the space after it) from s. */
static void strip_mode(char *s) {
    static const char *const tags[] = {"mode=measured", "mode=modeled"};
    for (int t = 0; t < 2; t++) {
        char *m = strstr(s, tags[t]);
        if (!m) continue;
        char *rest = m + strlen(tags[t]);
        if (*rest == ' ') rest++;
        memmove(m, rest, strlen(rest) + 1);
    }
}

/* The line colour of a series: gnuplot's linetype k + 1 for the k-th distinct series name once
 * the mode is taken out, so that a modeled series and its measured twin share a colour. */
static int colour_of(json_object *series, const char *name) {
    char key[1024];
    snprintf(key, sizeof key, "%s", name);
    strip_mode(key);
    int distinct = 0;
    size_t n = json_object_array_length(series);
    for (size_t s = 0; s < n; s++) {
        char cur[1024];
        snprintf(cur, sizeof cur, "%s",
                 json_object_get_string(json_object_array_get_idx(series, s)));
        strip_mode(cur);
        int seen = 0;
        for (size_t t = 0; t < s && !seen; t++) {
            char prev[1024];
            snprintf(prev, sizeof prev, "%s",
                     json_object_get_string(json_object_array_get_idx(series, t)));
            strip_mode(prev);
            seen = !strcmp(prev, cur);
        }
        if (!strcmp(cur, key)) return distinct + 1; /* the first with this name: not seen */
        distinct += !seen;
    }
    return distinct + 1;
}

/* One panel of throughput against sequence length (data blocks appended to `data`, starting at
 * block *index). */
static void tp_panel(const plotter *p, long batch, const long *seqs, int n_seqs, int multi_batch,
                     ig_exp_buf *data, ig_exp_buf *body, int *index) {
    tp_ctx c = {batch};
    json_object *series = series_of(p, keep_tp, &c, 0);
    int any_noisy = 0;
    if (!series) {
        body->oom = 1;
        return;
    }
    const char *rg = strcmp(p->regime, "-") ? p->regime : "";
    if (multi_batch)
        ig_exp_buf_printf(body, "set title '%s, batch %ld%s'\n", p->tp_title, batch, rg);
    else
        ig_exp_buf_printf(body, "set title '%s%s'\n", p->tp_title, rg);
    ig_exp_buf_puts(body, "set xlabel 'sequence length (prompt + generated tokens)'\n"
                          "set offsets graph 0.04, graph 0.04, 0, 0\n"
                          "set ylabel 'tokens/s (median; bars: min-max of the repeats)'\n"
                          /* below the axes, in columns: inside, a measured line and its
                           * modeled twin leave no corner free (the quickstart's H2O line
                           * ran under the key) */
                          "set key below horizontal maxcols 3\nset grid\nset yrange [0:*]\n"
                          "set xtics (");
    for (int k = 0; k < n_seqs; k++) ig_exp_buf_printf(body, "%s%ld", k ? ", " : "", seqs[k]);
    ig_exp_buf_puts(body, ")\nplot ");
    size_t ns = json_object_array_length(series);
    for (size_t s = 0; s < ns; s++) {
        const char *name = json_object_get_string(json_object_array_get_idx(series, s));
        ig_exp_buf_printf(data, "# %s\n", name);
        for (int k = 0; k < n_seqs; k++) {
            /* the last point of this series at this length */
            const pt *hit = NULL;
            for (int i = 0; i < p->n; i++)
                if (keep_tp(&p->pts[i], &c) && p->pts[i].seq == seqs[k] &&
                    !strcmp(p->pts[i].series, name))
                    hit = &p->pts[i];
            if (hit) {
                ig_exp_buf_printf(data, "%ld\t%.9g\t%.9g\t%.9g\t%d\n", seqs[k], hit->tp, hit->tp_lo,
                                  hit->tp_hi, hit->tp_noisy);
                any_noisy |= hit->tp_noisy;
            }
        }
        ig_exp_buf_puts(data, "\n\n");
        /* a modeled series (mode=modeled) is a dashed line in its measured twin's colour */
        int modeled = strstr(name, "mode=modeled") != NULL;
        int colour = colour_of(series, name);
        if (modeled)
            ig_exp_buf_printf(body,
                              "%s'%s.dat' index %d using 1:2 with lines dt 2 lw 2 lc %d title ",
                              s ? ", \\\n     " : "", "DATNAME", *index, colour);
        else
            ig_exp_buf_printf(
                body, "%s'%s.dat' index %d using 1:2:3:4 with yerrorlines lw 2 lc %d title ",
                s ? ", \\\n     " : "", "DATNAME", *index, colour);
        gp_quote(body, name);
        ig_exp_buf_printf(body,
                          ", \\\n     '%s.dat' index %d using 1:($5 > 0 ? $2 : 1/0) with points "
                          "pt 6 ps 2.6 lc rgb 'red' notitle",
                          "DATNAME", (*index)++);
    }
    if (any_noisy)
        ig_exp_buf_puts(body, ", \\\n     NaN with points pt 6 ps 2.6 lc rgb 'red' title "
                              "'noisy (spread > measure.noise)'");
    ig_exp_buf_puts(body, "\n");
    json_object_put(series);
}

/* Replaces the DATNAME placeholder with the plot's name. */
static char *with_name(const char *body, const char *name) {
    ig_exp_buf b = {0};
    ig_exp_buf_puts(&b, "");
    const char *s = body, *hit;
    while ((hit = strstr(s, "DATNAME"))) {
        ig_exp_buf_add(&b, s, (size_t)(hit - s));
        ig_exp_buf_puts(&b, name);
        s = hit + 7;
    }
    ig_exp_buf_puts(&b, s);
    if (b.oom) {
        ig_exp_buf_free(&b);
        return NULL;
    }
    return b.s;
}

static ig_status finish(plotter *p, const char *name, ig_exp_buf *data, ig_exp_buf *body, int w,
                        int h, ig_error *err) {
    ig_status rc;
    char *b = body->oom || data->oom ? NULL : with_name(body->s, name);
    if (!b)
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    else
        rc = draw(p, name, data->s, b, w, h, err);
    free(b);
    ig_exp_buf_free(data);
    ig_exp_buf_free(body);
    return rc;
}

static ig_status plot_throughput(plotter *p, ig_error *err) {
    long *seqs = calloc((size_t)p->n + 1, sizeof *seqs);
    long *batches = calloc((size_t)p->n + 1, sizeof *batches);
    ig_status rc = IG_OK;
    if (!seqs || !batches) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto out;
    }
    int ns = distinct(p, seqs, has_tp, 0), nb = distinct(p, batches, has_tp, 1);
    if (ns < 2) {
        char why[128];
        char stem[64];
        snprintf(why, sizeof why, "needs %s at 2 or more sequence lengths (found %d)", p->tp_title,
                 ns);
        snprintf(stem, sizeof stem, "%s_vs_seqlen", p->tp_stem);
        skipped(p, stem, why);
        goto out;
    }
    if (nb < 1) batches[nb++] = -1;
    /* all batches in one file (one panel each), then one file per batch when there are several */
    for (int f = -1; f < (nb > 1 ? nb : 0) && rc == IG_OK; f++) {
        ig_exp_buf data = {0}, body = {0};
        ig_exp_buf_printf(&data, "# sequence_length\t%s_tok_s, one block per series\n", p->tp_stem);
        ig_exp_buf_puts(&body, "");
        int index = 0, w = 900, h = 600;
        char name[64];
        snprintf(name, sizeof name, "%s_vs_seqlen", p->tp_stem);
        if (f < 0 && nb > 1) {
            int cols = (int)ceil(sqrt((double)nb)), rows = (nb + cols - 1) / cols;
            w = 700 * cols;
            h = 500 * rows;
            ig_exp_buf_printf(&body, "set multiplot layout %d,%d\n", rows, cols);
            for (int k = 0; k < nb; k++) tp_panel(p, batches[k], seqs, ns, 1, &data, &body, &index);
            ig_exp_buf_puts(&body, "unset multiplot\n");
        } else if (f < 0) {
            tp_panel(p, batches[0], seqs, ns, 0, &data, &body, &index);
        } else {
            snprintf(name, sizeof name, "%s_vs_seqlen_b%ld", p->tp_stem, batches[f]);
            tp_panel(p, batches[f], seqs, ns, 1, &data, &body, &index);
        }
        rc = finish(p, name, &data, &body, w, h, err);
    }
out:
    free(seqs);
    free(batches);
    return rc;
}

typedef struct sp_ctx {
    long seq;
} sp_ctx;

static int keep_sp(const pt *q, const void *c) {
    return has_tp(q) && q->seq == ((const sp_ctx *)c)->seq && q->batch >= 0 &&
           strcmp(q->policy, "full") != 0;
}

/* The `full` point with the same sequence length, batch and other settings as q. */
static const pt *full_of(const plotter *p, const pt *q) {
    const pt *hit = NULL;
    for (int i = 0; i < p->n; i++) {
        const pt *f = &p->pts[i];
        if (!strcmp(f->policy, "full") && has_tp(f) && f->tp > 0 && f->seq == q->seq &&
            f->batch == q->batch && !strcmp(f->other, q->other))
            hit = f;
    }
    return hit;
}

static ig_status plot_speedup(plotter *p, ig_error *err) {
    const char *name = "speedup_vs_batch";
    /* the largest sequence length at which some policy has a full baseline */
    long seq = -1;
    for (int i = 0; i < p->n; i++)
        if (has_tp(&p->pts[i]) && strcmp(p->pts[i].policy, "full") && full_of(p, &p->pts[i]) &&
            p->pts[i].seq > seq)
            seq = p->pts[i].seq;
    if (seq < 0) {
        skipped(p, name,
                "needs throughput of the 'full' policy and of another policy at the "
                "same settings");
        return IG_OK;
    }
    sp_ctx c = {seq};
    long *batches = calloc((size_t)p->n + 1, sizeof *batches);
    if (!batches) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    int nb = 0;
    for (int i = 0; i < p->n; i++) {
        const pt *q = &p->pts[i];
        if (!keep_sp(q, &c) || !full_of(p, q)) continue;
        int dup = 0;
        for (int k = 0; k < nb && !dup; k++) dup = batches[k] == q->batch;
        if (!dup) batches[nb++] = q->batch;
    }
    qsort(batches, (size_t)nb, sizeof *batches, cmp_long);
    if (nb < 2) {
        free(batches);
        skipped(p, name, "needs 2 or more batch sizes with a 'full' baseline");
        return IG_OK;
    }
    json_object *series = series_of(p, keep_sp, &c, 0);
    ig_exp_buf data = {0}, body = {0};
    if (!series) body.oom = 1;
    ig_exp_buf_puts(&data, "# batch\tspeedup over full, one block per series\n");
    ig_exp_buf_printf(&body,
                      "set title 'speedup over full, sequence length %ld'\n"
                      "set xlabel 'batch size'\nset ylabel 'speedup (x)'\nset grid\n"
                      "set key bottom right box opaque\nset yrange [0:*]\nset xtics (",
                      seq);
    for (int k = 0; k < nb; k++) ig_exp_buf_printf(&body, "%s%ld", k ? ", " : "", batches[k]);
    ig_exp_buf_puts(&body, ")\nplot 1 with lines dt 2 lc rgb 'gray' title 'full'");
    for (size_t s = 0; series && s < json_object_array_length(series); s++) {
        const char *sn = json_object_get_string(json_object_array_get_idx(series, s));
        ig_exp_buf_printf(&data, "# %s\n", sn);
        for (int k = 0; k < nb; k++) {
            const pt *hit = NULL;
            for (int i = 0; i < p->n; i++)
                if (keep_sp(&p->pts[i], &c) && p->pts[i].batch == batches[k] &&
                    !strcmp(p->pts[i].series, sn) && full_of(p, &p->pts[i]))
                    hit = &p->pts[i];
            if (hit)
                ig_exp_buf_printf(&data, "%ld\t%.9g\n", batches[k], hit->tp / full_of(p, hit)->tp);
        }
        ig_exp_buf_puts(&data, "\n\n");
        ig_exp_buf_printf(&body,
                          ", \\\n     'DATNAME.dat' index %zu using 1:2 with linespoints "
                          "lw 2 title ",
                          s);
        gp_quote(&body, sn);
    }
    ig_exp_buf_puts(&body, "\n");
    json_object_put(series);
    free(batches);
    return finish(p, name, &data, &body, 900, 600, err);
}

static int keep_ppl(const pt *q, const void *c) {
    (void)c;
    return !isnan(q->ppl) && !isnan(q->kv);
}

static int cmp_kv(const void *a, const void *b) {
    double x = (*(const pt *const *)a)->kv, y = (*(const pt *const *)b)->kv;
    return x < y ? -1 : x > y;
}

/* Perplexity against the measured fraction of KV rows read, one panel per text, one curve per
 * policy (its budget sweep), and per panel the Pareto front over every point: those with a lower
 * perplexity than every point that reads as little or less. */
static ig_status plot_ppl(plotter *p, ig_error *err) {
    const char *name = "ppl_vs_budget";
    int n = 0;
    for (int i = 0; i < p->n; i++) n += keep_ppl(&p->pts[i], NULL);
    if (n < 2) {
        char why[160];
        snprintf(why, sizeof why,
                 "needs 2 or more points with both metrics.ppl and metrics.ppl_read_fraction or "
                 "metrics.kv_read_fraction (found %d)",
                 n);
        skipped(p, name, why);
        return IG_OK;
    }
    const char **texts = calloc((size_t)p->n + 1, sizeof *texts);
    const pt **sel = calloc((size_t)p->n + 1, sizeof *sel);
    json_object *series = json_object_new_array(), *seen = json_object_new_object();
    ig_exp_buf data = {0}, body = {0};
    if (!texts || !sel || !series || !seen) body.oom = 1;
    int nt = 0;
    for (int i = 0; texts && seen && series && i < p->n; i++) {
        const pt *q = &p->pts[i];
        if (!keep_ppl(q, NULL)) continue;
        int dup = 0;
        for (int k = 0; k < nt && !dup; k++) dup = !strcmp(texts[k], q->text);
        if (!dup) texts[nt++] = q->text;
        char sn[1024];
        snprintf(sn, sizeof sn, "%s%s%s", q->curve, q->other_nt[0] ? " " : "", q->other_nt);
        if (!json_object_object_get_ex(seen, sn, NULL)) {
            json_object_object_add(seen, sn, NULL);
            json_object_array_add(series, json_object_new_string(sn));
        }
    }
    ig_exp_buf_puts(&data, "# kv_read_fraction\tppl\tlabel; per text one block per policy, then "
                           "the Pareto front\n");
    if (nt > 1) ig_exp_buf_printf(&body, "set multiplot layout 1,%d\n", nt);
    int block = 0;
    size_t ns = series ? json_object_array_length(series) : 0;
    for (int t = 0; t < nt && !body.oom; t++) {
        const char *slash = strrchr(texts[t], '/');
        ig_exp_buf_puts(&body, "set title 'perplexity against the KV rows read");
        if (texts[t][0]) {
            ig_exp_buf_puts(&body, ": ");
            for (const char *c = slash ? slash + 1 : texts[t]; *c; c++)
                ig_exp_buf_puts(&body, *c == '\'' ? "''" : (char[]){*c, 0});
        }
        ig_exp_buf_puts(&body,
                        "'\nset xlabel 'fraction of the KV rows read (measured, all layers)'\n"
                        "set ylabel 'perplexity'\nset grid\nset key top right\nset logscale y\n"
                        "set xrange [0:*]\nset offsets 0, graph 0.05, graph 0.05, graph 0.05\n"
                        "plot ");
        for (size_t k = 0; k < ns; k++) {
            const char *sn = json_object_get_string(json_object_array_get_idx(series, k));
            int m = 0;
            for (int i = 0; i < p->n; i++) {
                const pt *q = &p->pts[i];
                char qn[1024];
                snprintf(qn, sizeof qn, "%s%s%s", q->curve, q->other_nt[0] ? " " : "", q->other_nt);
                if (keep_ppl(q, NULL) && !strcmp(q->text, texts[t]) && !strcmp(qn, sn))
                    sel[m++] = q;
            }
            if (!m) continue;
            qsort(sel, (size_t)m, sizeof *sel, cmp_kv);
            ig_exp_buf_printf(&data, "# %s | %s\n", texts[t], sn);
            for (int k2 = 0; k2 < m; k2++)
                ig_exp_buf_printf(&data, "%.9g\t%.9g\t%s\n", sel[k2]->kv, sel[k2]->ppl,
                                  sel[k2]->params[0] ? sel[k2]->params : sel[k2]->policy);
            ig_exp_buf_puts(&data, "\n\n");
            ig_exp_buf_printf(&body,
                              "'DATNAME.dat' index %d using 1:2 with linespoints lw 2 lc %d dt %d "
                              "pt %d ps 1.2 title ",
                              block++, (int)(k % 8) + 1, (int)(k / 8 % 4) + 1,
                              k / 8 % 2 ? 5 : 7); /* 8 colors, then dashed with squares */
            gp_quote(&body, sn);
            ig_exp_buf_puts(&body, ", \\\n     ");
        }
        /* the Pareto front of this panel */
        int m = 0;
        for (int i = 0; i < p->n; i++)
            if (keep_ppl(&p->pts[i], NULL) && !strcmp(p->pts[i].text, texts[t]))
                sel[m++] = &p->pts[i];
        qsort(sel, (size_t)m, sizeof *sel, cmp_kv);
        ig_exp_buf_printf(&data, "# %s | Pareto front\n", texts[t]);
        double best = INFINITY;
        for (int k2 = 0; k2 < m; k2++)
            if (sel[k2]->ppl < best) {
                best = sel[k2]->ppl;
                ig_exp_buf_printf(&data, "%.9g\t%.9g\t%s %s\n", sel[k2]->kv, sel[k2]->ppl,
                                  sel[k2]->policy, sel[k2]->params);
            }
        ig_exp_buf_puts(&data, "\n\n");
        ig_exp_buf_printf(&body,
                          "'DATNAME.dat' index %d using 1:2 with lines dt 2 lw 1.5 lc rgb 'black' "
                          "title 'Pareto front', \\\n     "
                          "'' index %d using 1:2 with points pt 6 ps 2.2 lc rgb 'black' notitle\n",
                          block, block);
        block++;
    }
    if (nt > 1) ig_exp_buf_puts(&body, "unset multiplot\n");
    json_object_put(series);
    json_object_put(seen);
    free(sel);
    free(texts);
    return finish(p, name, &data, &body, nt > 1 ? 800 * nt : 900, 600, err);
}

static ig_status plot_breakdown(plotter *p, ig_error *err) {
    const char *name = "latency_breakdown";
    long seq = -1, batch = -1;
    int any = 0;
    for (int i = 0; i < p->n; i++)
        if (p->pts[i].has_bd) {
            any = 1;
            if (p->pts[i].seq > seq) seq = p->pts[i].seq;
        }
    if (!any) {
        skipped(p, name, "no point has metrics.breakdown_s");
        return IG_OK;
    }
    for (int i = 0; i < p->n; i++)
        if (p->pts[i].has_bd && p->pts[i].seq == seq && p->pts[i].batch > batch)
            batch = p->pts[i].batch;
    ig_exp_buf data = {0}, body = {0};
    ig_exp_buf_puts(&data, "# variant");
    for (int k = 0; k < 5; k++) ig_exp_buf_printf(&data, "\t%s_s", bd_parts[k]);
    ig_exp_buf_puts(&data, "\n");
    /* bars in order of first appearance */
    json_object *done = json_object_new_object();
    if (!done) body.oom = 1;
    for (int i = 0; done && i < p->n; i++) {
        const pt *q = NULL;
        for (int j = p->n - 1; j >= 0; j--)
            if (p->pts[j].has_bd && p->pts[j].seq == seq && p->pts[j].batch == batch &&
                !strcmp(p->pts[j].series, p->pts[i].series)) {
                q = &p->pts[j];
                break;
            }
        if (!q || json_object_object_get_ex(done, q->series, NULL)) continue;
        json_object_object_add(done, q->series, NULL);
        ig_exp_buf_puts(&data, q->series);
        for (int k = 0; k < 5; k++) ig_exp_buf_printf(&data, "\t%.9g", q->bd[k]);
        ig_exp_buf_puts(&data, "\n");
    }
    json_object_put(done);
    ig_exp_buf_printf(&body, "set title 'latency breakdown, sequence length %ld", seq);
    if (batch >= 0) ig_exp_buf_printf(&body, ", batch %ld", batch);
    ig_exp_buf_puts(&body, "'\nset style data histograms\nset style histogram rowstacked\n"
                           "set style fill solid 0.85 border -1\nset boxwidth 0.6\n"
                           "set ylabel 'time (s)'\nset yrange [0:*]\nset grid ytics\n"
                           "set key outside right\nset xtics rotate by -25\n"
                           "plot 'DATNAME.dat' using 2:xtic(1) title 'attention'");
    for (int k = 1; k < 5; k++)
        ig_exp_buf_printf(&body, ", '' using %d title '%s'", k + 2, bd_parts[k]);
    ig_exp_buf_puts(&body, "\n");
    return finish(p, name, &data, &body, 900, 600, err);
}

ig_status ig_plot_results_ex(const char *dir, FILE *log, int *n_written, ig_error *err) {
    if (n_written) *n_written = 0;
    plotter p = {.dir = dir, .log = log, .tp_stem = "throughput", .tp_title = "throughput"};
    ig_results *r = NULL;
    ig_status rc = IG_OK;
    char *jsonl = ig_exp_path_join(dir, "results.jsonl");
    struct stat st;
    if (!jsonl) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    if (stat(jsonl, &st) != 0) {
        rc = ig_error_set(err, IG_ERR_NOT_FOUND, "%s: no such file (is %s a results directory?)",
                          jsonl, dir);
        goto out;
    }
    p.gnuplot = find_gnuplot();
    if (!p.gnuplot) {
        const char *env = getenv("IGEN_GNUPLOT");
        rc = ig_error_set(err, IG_ERR_NOT_FOUND,
                          "gnuplot is not installed (%s%s%s); install it (Debian/Ubuntu: sudo "
                          "apt-get install gnuplot-nox) and rerun 'igen plot %s'",
                          env && *env ? "IGEN_GNUPLOT=" : "no 'gnuplot' on PATH",
                          env && *env ? env : "", env && *env ? " is not executable" : "", dir);
        goto out;
    }
    rc = ig_results_open(dir, &r, err);
    if (rc != IG_OK) goto out;
    p.plots = ig_exp_path_join(dir, "plots");
    if (!p.plots) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = ig_exp_mkdir_p(p.plots, err);
    if (rc != IG_OK) goto out;
    char *glog = ig_exp_path_join(p.plots, "gnuplot.log");
    if (glog) unlink(glog);
    free(glog);
    rc = gather(&p, r, err);
    if (rc != IG_OK) goto out;
    if (p.n == 0) {
        if (log) fprintf(log, "no plots: %s has no point with status \"ok\"\n", jsonl);
        goto out;
    }
    rc = plot_throughput(&p, err);
    int any_dtp = 0;
    for (int i = 0; i < p.n; i++) any_dtp |= !isnan(p.pts[i].dtp);
    if (rc == IG_OK && any_dtp) { /* the decode phase alone (prefill excluded) */
        for (int i = 0; i < p.n; i++) {
            swap_tp(&p.pts[i]);
        }
        p.tp_stem = "decode_throughput";
        p.tp_title = "decode throughput";
        rc = plot_throughput(&p, err);
        for (int i = 0; i < p.n; i++) {
            swap_tp(&p.pts[i]);
        }
        p.tp_stem = p.tp_title = "throughput";
    }
    if (rc == IG_OK) rc = plot_speedup(&p, err);
    if (rc == IG_OK) rc = plot_ppl(&p, err);
    if (rc == IG_OK) rc = plot_breakdown(&p, err);
out:
    if (n_written) *n_written = p.n_written;
    free_points(&p);
    ig_results_free(r);
    free(p.plots);
    free(p.gnuplot);
    free(jsonl);
    return rc;
}

ig_status ig_plot_results(const char *dir, int *n_written, ig_error *err) {
    return ig_plot_results_ex(dir, stdout, n_written, err);
}
