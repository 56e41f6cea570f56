/* results.csv and the summary table, both derived from the records of a results directory. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/app/exp/exp.h"
#include "core/app/exp/results.h"
#include "core/app/exp/results_internal.h"

void ig_exp_buf_add(ig_exp_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void ig_exp_buf_puts(ig_exp_buf *b, const char *s) {
    ig_exp_buf_add(b, s, strlen(s));
}

void ig_exp_buf_printf(ig_exp_buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        ig_exp_buf_add(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ig_exp_buf_add(b, big, (size_t)n);
    free(big);
}

void ig_exp_buf_free(ig_exp_buf *b) {
    free(b->s);
    *b = (ig_exp_buf){0};
}

char *ig_exp_scalar_text(json_object *v) {
    switch (json_object_get_type(v)) {
    case json_type_null:
        return strdup("");
    case json_type_string:
        return strdup(json_object_get_string(v));
    case json_type_boolean:
        return strdup(json_object_get_boolean(v) ? "true" : "false");
    case json_type_int: {
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRId64, json_object_get_int64(v));
        return strdup(buf);
    }
    default: /* doubles as they were written; objects and arrays as JSON text */
        return strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
    }
}

static int add_cell(json_object *row, json_object *cols, json_object *seen, const char *path,
                    const char *text) {
    json_object *t = json_object_new_string(text);
    if (!t || json_object_object_add(row, path, t) != 0) {
        json_object_put(t);
        return -1;
    }
    if (seen && !json_object_object_get_ex(seen, path, NULL)) {
        json_object *name = json_object_new_string(path);
        if (!name || json_object_array_add(cols, name) != 0) {
            json_object_put(name);
            return -1;
        }
        if (json_object_object_add(seen, path, NULL) != 0) return -1;
    }
    return 0;
}

int ig_exp_flatten(json_object *v, const char *prefix, json_object *row, json_object *cols,
                   json_object *seen) {
    if (json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, k, c) {
            char *path = *prefix ? NULL : strdup(k);
            if (*prefix && asprintf(&path, "%s.%s", prefix, k) < 0) path = NULL;
            if (!path) return -1;
            int rc = ig_exp_flatten(c, path, row, cols, seen);
            free(path);
            if (rc) return rc;
        }
        return 0;
    }
    if (json_object_is_type(v, json_type_array)) {
        ig_exp_buf b = {0};
        ig_exp_buf_puts(&b, "");
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            char *t = ig_exp_scalar_text(json_object_array_get_idx(v, i));
            if (!t) {
                ig_exp_buf_free(&b);
                return -1;
            }
            if (i) ig_exp_buf_puts(&b, ";");
            ig_exp_buf_puts(&b, t);
            free(t);
        }
        int rc = b.oom ? -1 : add_cell(row, cols, seen, prefix, b.s);
        ig_exp_buf_free(&b);
        return rc;
    }
    char *t = ig_exp_scalar_text(v);
    if (!t) return -1;
    int rc = add_cell(row, cols, seen, prefix, t);
    free(t);
    return rc;
}

char *ig_results_csv_field(const char *s) {
    if (!strpbrk(s, ",\"\r\n")) return strdup(s);
    size_t n = strlen(s), q = 0;
    for (size_t i = 0; i < n; i++) q += s[i] == '"';
    char *o = malloc(n + q + 3), *p = o;
    if (!o) return NULL;
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') *p++ = '"';
        *p++ = s[i];
    }
    *p++ = '"';
    *p = '\0';
    return o;
}

ig_status ig_exp_write_atomic(const char *path, const char *data, size_t len, ig_error *err) {
    size_t pl = strlen(path) + 32;
    char *tmp = malloc(pl);
    if (!tmp) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    snprintf(tmp, pl, "%s.tmp.%ld", path, (long)getpid());
    ig_status rc = IG_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = ig_error_set(err, IG_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    size_t off = 0;
    int bad = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            bad = errno;
            break;
        }
        off += (size_t)w;
    }
    if (!bad && fsync(fd) != 0) bad = errno;
    if (close(fd) != 0 && !bad) bad = errno;
    if (!bad && rename(tmp, path) != 0) bad = errno;
    if (bad) {
        unlink(tmp);
        rc = ig_error_set(err, IG_ERR_IO, "cannot write %s: %s", path, strerror(bad));
    }
    free(tmp);
    return rc;
}

ig_status ig_results_write_csv(const ig_results *r, ig_error *err) {
    int n = ig_results_count(r);
    json_object *cols = json_object_new_array(), *seen = json_object_new_object();
    json_object **rows = calloc((size_t)n + 1, sizeof *rows);
    ig_exp_buf b = {0};
    ig_status rc = IG_OK;
    if (!cols || !seen || !rows) goto oom;
    for (int i = 0; i < n; i++) {
        rows[i] = json_object_new_object();
        if (!rows[i] || ig_exp_flatten(ig_results_get(r, i), "", rows[i], cols, seen) != 0)
            goto oom;
    }
    size_t nc = json_object_array_length(cols);
    for (size_t c = 0; c < nc; c++) {
        char *f = ig_results_csv_field(json_object_get_string(json_object_array_get_idx(cols, c)));
        if (!f) goto oom;
        ig_exp_buf_puts(&b, c ? "," : "");
        ig_exp_buf_puts(&b, f);
        free(f);
    }
    ig_exp_buf_puts(&b, "\n");
    for (int i = 0; i < n; i++) {
        for (size_t c = 0; c < nc; c++) {
            json_object *cell;
            const char *name = json_object_get_string(json_object_array_get_idx(cols, c));
            const char *text =
                json_object_object_get_ex(rows[i], name, &cell) ? json_object_get_string(cell) : "";
            char *f = ig_results_csv_field(text);
            if (!f) goto oom;
            ig_exp_buf_puts(&b, c ? "," : "");
            ig_exp_buf_puts(&b, f);
            free(f);
        }
        ig_exp_buf_puts(&b, "\n");
    }
    if (b.oom) goto oom;
    char *path = ig_exp_path_join(ig_results_dir(r), "results.csv");
    if (!path) goto oom;
    rc = ig_exp_write_atomic(path, b.s, b.n, err);
    free(path);
    goto out;
oom:
    rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory writing results.csv");
out:
    if (rows)
        for (int i = 0; i < n; i++) json_object_put(rows[i]);
    free(rows);
    json_object_put(cols);
    json_object_put(seen);
    ig_exp_buf_free(&b);
    return rc;
}

/* ---- summary table ---- */

static json_object *path_get(json_object *o, const char *a, const char *b) {
    json_object *v;
    if (!json_object_object_get_ex(o, a, &v)) return NULL;
    if (b && !json_object_object_get_ex(v, b, &v)) return NULL;
    return v;
}

static int is_number(json_object *v) {
    return json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int);
}

enum { COL_PLAIN = 0, COL_CI, COL_NOISY, COL_SPEEDUP, COL_PRED, COL_RANK };

typedef struct sum_col {
    const char *title;
    const char *metric; /* NULL: elapsed_s at the top level */
    const char *fmt;
    double scale;
    int kind; /* COL_CI: the metric's <metric>_stats.ci95 as "lo-hi"; COL_NOISY: "noisy" when
                 metrics.noisy; COL_SPEEDUP: metrics.speedup.<metric>.median and its interval */
} sum_col;

/* decode throughput is the headline of a policy comparison; FlexGen's prefill-included throughput
 * follows it */
static const sum_col metric_cols[] = {
    {"decode tok/s", "decode_throughput_tok_s", "%.2f", 1, COL_PLAIN},
    {"95% CI", "decode_throughput_tok_s", "%.2f", 1, COL_CI},
    {"", "noisy", "", 1, COL_NOISY},
    {"speedup", "decode_throughput_tok_s", "%.2f", 1, COL_SPEEDUP},
    {"rank", "decode_throughput_tok_s", "", 1, COL_RANK},
    {"pred/meas", "decode_throughput_tok_s", "%.2f", 1, COL_PRED},
    {"tok/s", "throughput_tok_s", "%.2f", 1, COL_PLAIN},
    {"ppl", "ppl", "%.3f", 1, COL_PLAIN},
    {"kv_read", "kv_read_fraction", "%.3f", 1, COL_PLAIN},
    {"h2d MB", "h2d_bytes", "%.1f", 1e-6, COL_PLAIN},
    {"elapsed s", NULL, "%.1f", 1, COL_PLAIN},
};
#define N_METRIC_COLS (int)(sizeof metric_cols / sizeof metric_cols[0])
#define LABEL_MAX     56

static json_object *metric_of(json_object *rec, const sum_col *c) {
    json_object *v =
        c->metric ? path_get(rec, "metrics", c->metric) : path_get(rec, "elapsed_s", 0);
    return is_number(v) ? v : NULL;
}

/* The config of a record without its mode, as canonical text (the key of its twin), or NULL. */
static char *twin_key(json_object *rec) {
    json_object *cfg = path_get(rec, "config", 0), *cp = NULL;
    if (!cfg || json_object_deep_copy(cfg, &cp, NULL) != 0 || !cp) return NULL;
    json_object_object_del(cp, "mode");
    char *k = ig_exp_canonical_json(cp);
    json_object_put(cp);
    return k;
}

/* For a modeled record: its prediction of the metric over the measurement of its measured twin
 * (the record whose config differs only in the mode); 0 when it has none. */
static int pred_cell(const ig_results *r, json_object *rec, const char *metric, char *out,
                     size_t n) {
    json_object *mode = path_get(rec, "mode", 0), *pv = path_get(rec, "metrics", metric);
    if (!mode || strcmp(json_object_get_string(mode), "modeled") != 0 || !is_number(pv)) return 0;
    char *key = twin_key(rec);
    int found = 0;
    for (int i = 0; key && !found && i < ig_results_count(r); i++) {
        json_object *o = ig_results_get(r, i), *om = path_get(o, "mode", 0);
        json_object *ov = path_get(o, "metrics", metric), *st = path_get(o, "status", 0);
        if (!om || strcmp(json_object_get_string(om), "measured") != 0 || !is_number(ov) || !st ||
            strcmp(json_object_get_string(st), "ok") != 0 || !(json_object_get_double(ov) > 0))
            continue;
        char *k2 = twin_key(o);
        if (k2 && !strcmp(k2, key)) {
            snprintf(out, n, "%.2f", json_object_get_double(pv) / json_object_get_double(ov));
            found = 1;
        }
        free(k2);
    }
    free(key);
    return found;
}

/* The cell of a derived column; 0 when the record has nothing for it. */
static int derived_cell(const ig_results *r, json_object *rec, const sum_col *c, char *out,
                        size_t n) {
    json_object *mx = path_get(rec, "metrics", 0), *v = NULL, *ci = NULL;
    if (!mx) return 0;
    if (c->kind == COL_PRED) return pred_cell(r, rec, c->metric, out, n);
    if (c->kind == COL_RANK) { /* "2=/4": second of four, tied with at least one other point */
        json_object *rk, *of, *tied;
        if (!json_object_object_get_ex(mx, "rank", &v) ||
            !json_object_object_get_ex(v, "rank", &rk) || !json_object_object_get_ex(v, "of", &of))
            return 0;
        int t = json_object_object_get_ex(v, "tied_points", &tied) &&
                json_object_array_length(tied) > 0;
        snprintf(out, n, "%d%s/%d", json_object_get_int(rk), t ? "=" : "", json_object_get_int(of));
        return 1;
    }
    if (c->kind == COL_NOISY) {
        if (!json_object_object_get_ex(mx, "noisy", &v)) return 0;
        snprintf(out, n, "%s", json_object_get_boolean(v) ? "noisy" : "");
        return 1;
    }
    char name[96];
    if (c->kind == COL_CI) {
        snprintf(name, sizeof name, "%s_stats", c->metric);
        if (!json_object_object_get_ex(mx, name, &v) || !json_object_object_get_ex(v, "ci95", &ci))
            return 0;
    } else {
        json_object *sp;
        if (!json_object_object_get_ex(mx, "speedup", &sp) ||
            !json_object_object_get_ex(sp, c->metric, &v))
            return 0;
        json_object *med;
        if (!json_object_object_get_ex(v, "median", &med) ||
            !json_object_object_get_ex(v, "ci95", &ci))
            return 0;
        snprintf(out, n, "%.2fx (%.2f-%.2f)", json_object_get_double(med),
                 json_object_get_double(json_object_array_get_idx(ci, 0)),
                 json_object_get_double(json_object_array_get_idx(ci, 1)));
        return 1;
    }
    if (!json_object_is_type(ci, json_type_array) || json_object_array_length(ci) != 2) return 0;
    snprintf(out, n, "%.2f-%.2f", json_object_get_double(json_object_array_get_idx(ci, 0)),
             json_object_get_double(json_object_array_get_idx(ci, 1)));
    return 1;
}

void ig_results_print_summary(const ig_results *r, FILE *f) {
    int n = ig_results_count(r);
    if (n == 0) {
        fprintf(f, "no results in %s\n", ig_results_dir(r));
        return;
    }
    int show[N_METRIC_COLS] = {0};
    char tmp[64];
    for (int i = 0; i < n; i++)
        for (int c = 0; c < N_METRIC_COLS; c++)
            if (metric_cols[c].kind
                    ? derived_cell(r, ig_results_get(r, i), &metric_cols[c], tmp, sizeof tmp)
                    : metric_of(ig_results_get(r, i), &metric_cols[c]) != NULL)
                show[c] = 1;
    /* cells[i][col]: 0 point, 1 label, 2 status, 3.. metrics; row -1 is the header */
    enum { NCOLS = 3 + N_METRIC_COLS, CELL = 64 };
    char(*cells)[NCOLS][CELL] = calloc((size_t)n + 1, sizeof *cells);
    if (!cells) return;
    int width[NCOLS] = {0};
    snprintf(cells[0][0], CELL, "point");
    snprintf(cells[0][1], CELL, "label");
    snprintf(cells[0][2], CELL, "status");
    for (int c = 0; c < N_METRIC_COLS; c++)
        snprintf(cells[0][3 + c], CELL, "%s", metric_cols[c].title);
    for (int i = 0; i < n; i++) {
        json_object *rec = ig_results_get(r, i), *v;
        char(*row)[CELL] = cells[i + 1];
        v = path_get(rec, "point", 0);
        snprintf(row[0], CELL, "%s", v ? json_object_get_string(v) : "?");
        v = path_get(rec, "label", 0);
        char label[1024]; /* from the config: no control characters on the terminal */
        ig_text_term_safe(v ? json_object_get_string(v) : "", label, sizeof label);
        size_t ll = strlen(label);
        if (ll > LABEL_MAX) /* the start and the end (the policy), the middle elided */
            snprintf(row[1], CELL, "%.*s...%s", 28, label, label + ll - (LABEL_MAX - 31));
        else
            snprintf(row[1], CELL, "%s", label);
        v = path_get(rec, "status", 0);
        snprintf(row[2], CELL, "%s", v ? json_object_get_string(v) : "?");
        for (int c = 0; c < N_METRIC_COLS; c++) {
            if (metric_cols[c].kind) {
                if (!derived_cell(r, rec, &metric_cols[c], row[3 + c], CELL))
                    snprintf(row[3 + c], CELL, "-");
                continue;
            }
            v = metric_of(rec, &metric_cols[c]);
            if (v)
                snprintf(row[3 + c], CELL, metric_cols[c].fmt,
                         json_object_get_double(v) * metric_cols[c].scale);
            else
                snprintf(row[3 + c], CELL, "-");
        }
    }
    for (int i = 0; i <= n; i++)
        for (int c = 0; c < NCOLS; c++) {
            int w = (int)strlen(cells[i][c]);
            if (w > width[c]) width[c] = w;
        }
    /* the regime, when every measured point shares it: where the KV cache lives, which link */
    char regime[160] = "";
    for (int i = 0; i < n; i++) {
        json_object *rec = ig_results_get(r, i), *v, *cfg, *pl, *lk, *kv;
        if (json_object_object_get_ex(rec, "mode", &v) &&
            strcmp(json_object_get_string(v), "measured") != 0)
            continue;
        char one[160] = "-";
        if (json_object_object_get_ex(rec, "config", &cfg) &&
            json_object_object_get_ex(cfg, "placement", &pl) &&
            json_object_object_get_ex(pl, "kv", &kv) && json_object_object_get_ex(kv, "cpu", &v) &&
            json_object_get_double(v) > 0) {
            double pc = json_object_get_double(v);
            if (json_object_object_get_ex(pl, "link", &lk) && lk &&
                json_object_object_get_ex(lk, "h2d_gbps", &v))
                snprintf(one, sizeof one,
                         "measured points: %g%% of the KV cache in host memory behind the link "
                         "model, %g GB/s host->device",
                         pc, json_object_get_double(v));
            else
                snprintf(one, sizeof one,
                         "measured points: %g%% of the KV cache in host memory, no link model", pc);
        }
        if (!regime[0])
            snprintf(regime, sizeof regime, "%s", one);
        else if (strcmp(regime, one) != 0)
            snprintf(regime, sizeof regime, "-");
    }
    if (regime[0] && strcmp(regime, "-") != 0) fprintf(f, "%s\n", regime);
    for (int i = 0; i <= n; i++) {
        fprintf(f, "%*s  %-*s  %-*s", width[0], cells[i][0], width[1], cells[i][1], width[2],
                cells[i][2]);
        for (int c = 0; c < N_METRIC_COLS; c++)
            if (show[c]) fprintf(f, "  %*s", width[3 + c], cells[i][3 + c]);
        fputc('\n', f);
    }
    for (int i = 0; i < n; i++) {
        json_object *rec = ig_results_get(r, i);
        json_object *st = path_get(rec, "status", 0), *e = path_get(rec, "error", 0);
        if (st && strcmp(json_object_get_string(st), "ok") != 0) {
            char msg[IG_ERROR_MSG_MAX * 2];
            ig_text_term_safe(json_object_is_type(e, json_type_string) ? json_object_get_string(e)
                                                                       : "(no message)",
                              msg, sizeof msg);
            fprintf(f, "point %s failed: %s\n", cells[i + 1][0], msg);
        }
    }
    free(cells);
}
