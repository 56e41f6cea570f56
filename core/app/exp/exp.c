/* Experiment files: loading, --set overrides, accessors (see exp.h; validation in exp_check.c,
 * expansion in exp_expand.c). */
#include "core/app/exp/exp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/exp/exp_schema.h"
#include "core/model/io/yaml_guard.h"

static ig_status nomem(ig_error *err) {
    return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
}

static ig_status read_all(const char *path, char **out, size_t *len, ig_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        if (cap >= IG_YAML_MAX_BYTES) {
            free(buf);
            fclose(f);
            return ig_error_set(err, IG_ERR_FORMAT,
                                "%s: larger than %zu MiB, the limit for an experiment file", path,
                                IG_YAML_MAX_BYTES >> 20);
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return nomem(err);
    if (bad) {
        free(buf);
        return ig_error_set(err, IG_ERR_IO, "%s: read error", path);
    }
    *out = buf;
    *len = n;
    return IG_OK;
}

/* model: PATH (or a list of paths) is model: {path: PATH}. */
static ig_status normalize(ig_exp *e, ig_error *err) {
    exp_entry *m = exp_map_entry(e->root, "model");
    if (!m || m->val->kind == EXP_MAP) return IG_OK;
    exp_node *map = exp_node_new(EXP_MAP, m->val->loc);
    if (!map) return nomem(err);
    if (!exp_map_add(map, "path", m->val->loc, m->val)) {
        exp_node_free(map);
        return nomem(err);
    }
    m->val = map;
    return IG_OK;
}

/* ---- --set KEY=VALUE ---- */

typedef struct seg {
    char name[128];
    int idx; /* [N], or -1 */
} seg;

static ig_status set_err(ig_error *err, const char *origin, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ig_status set_err(ig_error *err, const char *origin, const char *fmt, ...) {
    char what[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: %s", origin, what);
}

static int split_path(const char *key, seg *segs, int max) {
    int n = 0;
    const char *p = key;
    for (;;) {
        size_t l = strcspn(p, ".");
        if (l == 0 || l >= sizeof segs[0].name || n >= max) return -1;
        seg *s = &segs[n++];
        memcpy(s->name, p, l);
        s->name[l] = '\0';
        s->idx = -1;
        char *br = strchr(s->name, '[');
        if (br) {
            char *end = NULL;
            long v = strtol(br + 1, &end, 10);
            if (br == s->name || end == br + 1 || *end != ']' || end[1] || v < 0 || v > 100000)
                return -1;
            s->idx = (int)v;
            *br = '\0';
        }
        if (!p[l]) break;
        p += l + 1;
    }
    return n;
}

/* The key path must name a key of the schema. */
static ig_status set_check(const seg *s, int n, const char *origin, ig_error *err) {
    const exp_field *fields = exp_schema_top;
    for (int i = 0; i < n; i++) {
        const exp_field *f = exp_field_find(fields, s[i].name);
        if (!f)
            return set_err(err, origin, "unknown key '%s' (did you mean '%s'?)", s[i].name,
                           exp_field_closest(fields, s[i].name));
        int last = i == n - 1;
        if (f->t == F_POLICIES) {
            if (s[i].idx < 0) {
                if (last) return IG_OK;
                return set_err(err, origin,
                               "policies is a list: set policies[N].name or policies[N].params.P");
            }
            if (last) return IG_OK;
            const seg *t = &s[i + 1];
            if (t->idx >= 0 || (strcmp(t->name, "name") && strcmp(t->name, "params")))
                return set_err(err, origin, "unknown key '%s' (did you mean '%s'?)", t->name,
                               t->name[0] == 'n' ? "name" : "params");
            if (!strcmp(t->name, "name") && i + 1 != n - 1)
                return set_err(err, origin, "'name' takes a value, not sub-keys");
            if (i + 3 < n || (i + 2 < n && s[i + 2].idx >= 0))
                return set_err(err, origin, "a policy parameter takes a value, not sub-keys");
            return IG_OK;
        }
        if (s[i].idx >= 0)
            return set_err(err, origin,
                           "'%s' is not a list of entries: [N] only applies to "
                           "policies",
                           s[i].name);
        if (f->t == F_MAP) {
            fields = f->sub;
            continue;
        }
        if (f->t == F_SWEEP) {
            if (last) return IG_OK;
            if (strcmp(s[i + 1].name, "zip") || s[i + 1].idx >= 0 || i + 2 != n)
                return set_err(err, origin, "unknown key '%s' (did you mean 'zip'?)",
                               s[i + 1].name);
            return IG_OK;
        }
        if (!last) return set_err(err, origin, "'%s' takes a value, not sub-keys", s[i].name);
    }
    return IG_OK;
}

static ig_status apply_set(ig_exp *e, const char *set, ig_error *err) {
    const char *eq = strchr(set, '=');
    char *origin = NULL;
    if (asprintf(&origin, "--set %.*s", eq ? (int)(eq - set) : (int)strlen(set), set) < 0)
        return nomem(err);
    char **no = realloc(e->origins, sizeof *no * (size_t)(e->n_origins + 1));
    if (!no) {
        free(origin);
        return nomem(err);
    }
    e->origins = no;
    e->origins[e->n_origins++] = origin;
    if (!eq) return set_err(err, origin, "expected KEY=VALUE");
    seg segs[16];
    char key[512];
    snprintf(key, sizeof key, "%.*s", (int)(eq - set), set);
    int n = split_path(key, segs, 16);
    if (n <= 0) return set_err(err, origin, "'%s' is not a key path such as workload.batch", key);
    IG_TRY(set_check(segs, n, origin, err));
    exp_node *val = NULL;
    IG_TRY(exp_tree_parse(eq + 1, strlen(eq + 1), "--set", origin, &val, err));
    exp_loc here = {origin, 0, 0};
    exp_node *cur = e->root;
    ig_status st = IG_OK;
    for (int i = 0; i < n && st == IG_OK; i++) {
        int last = i == n - 1;
        if (cur->kind != EXP_MAP) {
            st = set_err(err, origin, "'%s' is %s in the file, not a mapping",
                         i ? segs[i - 1].name : "(top level)", exp_kind_name(cur));
            break;
        }
        exp_entry *en = exp_map_entry(cur, segs[i].name);
        if (segs[i].idx >= 0) {
            if (!en || en->val->kind != EXP_SEQ || segs[i].idx >= en->val->n_items) {
                st = set_err(err, origin, "%s has no entry [%d] (it has %d)", segs[i].name,
                             segs[i].idx,
                             en ? (en->val->kind == EXP_SEQ ? en->val->n_items : 1) : 0);
                break;
            }
            exp_node **slot = &en->val->items[segs[i].idx];
            if (last) {
                exp_node_free(*slot);
                *slot = val;
                val = NULL;
                break;
            }
            if ((*slot)->kind == EXP_SCALAR) {
                /* a policy given by name: make it {name: NAME} to add params */
                exp_node *map = exp_node_new(EXP_MAP, (*slot)->loc);
                if (!map || !exp_map_add(map, "name", (*slot)->loc, *slot)) {
                    free(map);
                    st = nomem(err);
                    break;
                }
                *slot = map;
            }
            cur = *slot;
            continue;
        }
        if (last) {
            if (en) {
                exp_node_free(en->val);
                en->val = val;
            } else if (!exp_map_add(cur, segs[i].name, here, val)) {
                st = nomem(err);
                break;
            }
            val = NULL;
            break;
        }
        if (!en) {
            exp_node *map = exp_node_new(EXP_MAP, here);
            if (!map) {
                st = nomem(err);
                break;
            }
            en = exp_map_add(cur, segs[i].name, here, map);
            if (!en) {
                exp_node_free(map);
                st = nomem(err);
                break;
            }
        }
        cur = en->val;
    }
    exp_node_free(val);
    return st;
}

/* ---- load ---- */

static ig_status load(ig_exp *e, const char *path, const char *const *sets, int n_sets,
                      ig_error *err) {
    e->path = strdup(path);
    e->dir = strdup(path);
    if (!e->path || !e->dir) return nomem(err);
    char *slash = strrchr(e->dir, '/');
    if (slash)
        *slash = slash == e->dir ? (slash[1] = '\0', '/') : '\0';
    else
        strcpy(e->dir, ".");
    char *text = NULL;
    size_t len = 0;
    IG_TRY(read_all(path, &text, &len, err));
    ig_status st = exp_tree_parse(text, len, path, NULL, &e->root, err);
    free(text);
    IG_TRY(st);
    exp_loc top = {NULL, 1, 1};
    if (!e->root) return exp_fail(err, path, top, "", "the file is empty");
    if (e->root->kind != EXP_MAP)
        return exp_fail(err, path, e->root->loc, "", "expected a mapping of keys, found %s",
                        exp_kind_name(e->root));
    IG_TRY(normalize(e, err));
    for (int i = 0; i < n_sets; i++) IG_TRY(apply_set(e, sets[i], err));
    IG_TRY(normalize(e, err));
    IG_TRY(exp_validate(e, err));
    /* name: the key, else the file's stem; output: the key, else results/<name> */
    exp_node *nm = exp_map_get(e->root, "name");
    if (nm) {
        e->name = strdup(nm->str);
    } else {
        const char *b = strrchr(path, '/');
        b = b ? b + 1 : path;
        size_t l = strlen(b);
        if (l > 5 && !strcmp(b + l - 5, ".yaml"))
            l -= 5;
        else if (l > 4 && !strcmp(b + l - 4, ".yml"))
            l -= 4;
        e->name = strndup(b, l);
    }
    if (!e->name) return nomem(err);
    exp_node *out = exp_map_get(e->root, "output");
    if (out)
        e->output = strdup(out->str);
    else if (asprintf(&e->output, "results/%s", e->name) < 0)
        e->output = NULL;
    if (!e->output) return nomem(err);
    return exp_expand(e, err);
}

ig_status ig_exp_load(const char *path, const char *const *sets, int n_sets, ig_exp **out,
                      ig_error *err) {
    *out = NULL;
    ig_exp *e = calloc(1, sizeof *e);
    if (!e) return nomem(err);
    ig_status st = load(e, path, sets, n_sets, err);
    if (st != IG_OK) {
        ig_exp_free(e);
        return st;
    }
    *out = e;
    return IG_OK;
}

void ig_exp_free(ig_exp *e) {
    if (!e) return;
    for (int i = 0; i < e->n_points; i++) {
        if (e->configs) json_object_put(e->configs[i]);
        if (e->labels) free(e->labels[i]);
    }
    free(e->configs);
    free(e->labels);
    free(e->keys);
    for (int i = 0; i < e->n_pol; i++) {
        exp_policy *p = &e->pol[i];
        if (p->settings)
            for (int k = 0; k < p->n_settings; k++) free(p->settings[k]);
        free(p->settings);
        free(p->specs);
        free(p->label);
    }
    free(e->pol);
    for (int i = 0; i < e->n_axes; i++) free(e->axes[i].name);
    free(e->axes);
    free(e->dim_len);
    exp_node_free(e->root);
    for (int i = 0; i < e->n_origins; i++) free(e->origins[i]);
    free(e->origins);
    free(e->path);
    free(e->dir);
    free(e->name);
    free(e->output);
    free(e);
}

/* ---- accessors ---- */

const char *ig_exp_name(const ig_exp *e) {
    return e->name;
}

const char *ig_exp_output_dir(const ig_exp *e) {
    return e->output;
}

const char *ig_exp_path(const ig_exp *e) {
    return e->path;
}

int ig_exp_n_points(const ig_exp *e) {
    return e->n_points;
}

int ig_exp_n_axes(const ig_exp *e) {
    return e->n_axes;
}

const char *ig_exp_axis_name(const ig_exp *e, int i) {
    return i >= 0 && i < e->n_axes ? e->axes[i].name : NULL;
}

int ig_exp_axis_len(const ig_exp *e, int i) {
    return i >= 0 && i < e->n_axes ? e->axes[i].len : 0;
}

json_object *ig_exp_point_config(const ig_exp *e, int i) {
    return i >= 0 && i < e->n_points ? e->configs[i] : NULL;
}

const char *ig_exp_point_label(const ig_exp *e, int i) {
    return i >= 0 && i < e->n_points ? e->labels[i] : NULL;
}

void ig_exp_point_key(const ig_exp *e, int i, char out[17]) {
    if (i >= 0 && i < e->n_points)
        memcpy(out, e->keys[i], 17);
    else
        out[0] = '\0';
}

static json_object *jget(json_object *o, const char *a, const char *b, const char *c) {
    json_object *v = o;
    const char *keys[3] = {a, b, c};
    for (int i = 0; i < 3 && keys[i] && v; i++)
        if (!json_object_object_get_ex(v, keys[i], &v)) return NULL;
    return v;
}

static const char *jstr(json_object *o, const char *a, const char *b, const char *c) {
    json_object *v = jget(o, a, b, c);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static int jint(json_object *o, const char *a, const char *b, const char *c) {
    return json_object_get_int(jget(o, a, b, c));
}

static double jnum(json_object *o, const char *a, const char *b, const char *c) {
    return json_object_get_double(jget(o, a, b, c));
}

/* The file a point uses for a key that names one (resolved by validation). */
static const char *resolved(const ig_exp *e, const int *ch, const char *a, const char *b) {
    exp_node *n = exp_map_get(e->root, a);
    if (b) n = exp_map_get(n, b);
    n = exp_pick(n, ch);
    return n ? (n->resolved ? n->resolved : n->str) : NULL;
}

ig_status ig_exp_point_get(const ig_exp *e, int i, ig_exp_point *out) {
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= e->n_points) return IG_ERR_INVALID_ARG;
    int ch[EXP_MAX_AXES];
    exp_point_choices(e, i, ch);
    json_object *c = e->configs[i];
    out->index = i;
    out->key = e->keys[i];
    out->label = e->labels[i];
    const char *mode = jstr(c, "mode", NULL, NULL);
    out->mode = mode && !strcmp(mode, "modeled") ? IG_EXP_MODELED : IG_EXP_MEASURED;
    out->model_path = resolved(e, ch, "model", "path");
    if (!out->model_path) out->model_path = "default";
    out->shape_path = resolved(e, ch, "model", "shape");
    out->dtype = jstr(c, "model", "dtype", NULL);
    const char *aq = jstr(c, "model", "act_quant", NULL);
    out->act8 = aq && !strcmp(aq, "q8");
    out->weights_mem = jstr(c, "model", "weights_mem", NULL);
    out->hardware_path = resolved(e, ch, "hardware", NULL);
    out->threads = jint(c, "threads", NULL, NULL);
    out->backend = jstr(c, "backend", NULL, NULL);
    out->kv_access = jstr(c, "placement", "kv_access", NULL);
    out->weights.gpu = jnum(c, "placement", "weights", "gpu");
    out->weights.cpu = jnum(c, "placement", "weights", "cpu");
    out->kv.gpu = jnum(c, "placement", "kv", "gpu");
    out->kv.cpu = jnum(c, "placement", "kv", "cpu");
    out->activations.gpu = jnum(c, "placement", "activations", "gpu");
    out->activations.cpu = jnum(c, "placement", "activations", "cpu");
    out->gpu_batch_size = jint(c, "placement", "gpu_batch_size", NULL);
    out->num_gpu_batches = jint(c, "placement", "num_gpu_batches", NULL);
    out->numa = jstr(c, "placement", "numa", NULL);
    out->disk_dir = jstr(c, "placement", "disk_dir", NULL);
    out->overlap = json_object_get_boolean(jget(c, "placement", "overlap", NULL));
    json_object *link = jget(c, "placement", "link", NULL);
    out->link = link != NULL;
    if (link) {
        out->link_h2d_gbps = jnum(link, "h2d_gbps", NULL, NULL);
        out->link_d2h_gbps = jnum(link, "d2h_gbps", NULL, NULL);
        out->link_latency_us = jnum(link, "latency_us", NULL, NULL);
    }
    out->batch = jint(c, "workload", "batch", NULL);
    out->prompt_len = jint(c, "workload", "prompt_len", NULL);
    out->gen_len = jint(c, "workload", "gen_len", NULL);
    out->text_path = resolved(e, ch, "workload", "text");
    out->ppl_ctx = jint(c, "workload", "ppl", "ctx");
    out->ppl_windows = jint(c, "workload", "ppl", "windows");
    out->ppl_prefill = jint(c, "workload", "ppl", "prefill");
    const exp_policy *p = &e->pol[ch[e->policy_axis]];
    out->policy = p->ops->name;
    out->settings = (const char *const *)p->settings;
    out->n_settings = p->n_settings;
    out->metric_throughput = (e->metrics & 1u) != 0;
    out->metric_ppl = (e->metrics & 2u) != 0;
    out->metric_recall = (e->metrics & 4u) != 0;
    out->metric_bytes = (e->metrics & 8u) != 0;
    out->repeat = jint(c, "measure", "repeat", NULL);
    out->warmup = json_object_get_boolean(jget(c, "measure", "warmup", NULL));
    out->noise = jnum(c, "measure", "noise", NULL);
    out->baseline = jstr(c, "measure", "baseline", NULL);
    const char *pf = jstr(c, "measure", "prefill", NULL);
    out->prefill_once = pf && !strcmp(pf, "once");
    return IG_OK;
}

void ig_exp_print_points(const ig_exp *e, FILE *f) {
    ig_exp_print_points_marked(e, f, NULL);
}

void ig_exp_print_points_marked(const ig_exp *e, FILE *f, const unsigned char *done) {
    fprintf(f, "experiment %s: %d point%s", e->name, e->n_points, e->n_points == 1 ? "" : "s");
    for (int a = 0; a < e->n_axes; a++)
        fprintf(f, "%s%s (%d)", a ? ", " : "; axes: ", e->axes[a].name, e->axes[a].len);
    fprintf(f, "\n");
    int w = 1;
    for (int n = e->n_points - 1; n >= 10; n /= 10) w++;
    for (int i = 0; i < e->n_points; i++)
        fprintf(f, "%*d  %s%s\n", w, i, done && done[i] ? "[done] " : "", e->labels[i]);
}
