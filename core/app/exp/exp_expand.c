/* Sweep expansion: the cartesian product of the axes (zip groups advance together, the first
 * dimension slowest), each point's cross-field checks, its resolved config, label and key. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/exp/exp_schema.h"
#include "offload/yamlcfg.h"

void exp_point_choices(const ig_exp *e, int i, int *ch) {
    int dch[EXP_MAX_AXES];
    for (int d = e->n_dims - 1; d >= 0; d--) {
        dch[d] = i % e->dim_len[d];
        i /= e->dim_len[d];
    }
    for (int a = 0; a < e->n_axes; a++) ch[a] = dch[e->axes[a].dim];
}

exp_node *exp_pick(const exp_node *v, const int *ch) {
    if (!v) return NULL;
    if (v->kind == EXP_SEQ && v->axis >= 0) return v->items[ch[v->axis]];
    return (exp_node *)v;
}

/* ---- canonical JSON and its key ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t l) {
    if (b->oom) return;
    if (b->n + l + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + l + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, l);
    b->n += l;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}

static const int k_flags = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void canon(sbuf *b, json_object *o) {
    if (!o) {
        sb_str(b, "null");
        return;
    }
    switch (json_object_get_type(o)) {
    case json_type_object: {
        size_t n = (size_t)json_object_object_length(o), k = 0;
        const char **keys = calloc(n ? n : 1, sizeof *keys);
        if (!keys) {
            b->oom = 1;
            return;
        }
        json_object_object_foreach(o, key, val) {
            (void)val;
            keys[k++] = key;
        }
        qsort(keys, n, sizeof *keys, cmp_str);
        sb_str(b, "{");
        for (size_t i = 0; i < n; i++) {
            json_object *ks = json_object_new_string(keys[i]);
            if (i) sb_str(b, ",");
            if (ks)
                sb_str(b, json_object_to_json_string_ext(ks, k_flags));
            else
                b->oom = 1;
            json_object_put(ks);
            sb_str(b, ":");
            canon(b, json_object_object_get(o, keys[i]));
        }
        sb_str(b, "}");
        free(keys);
        return;
    }
    case json_type_array: {
        size_t n = json_object_array_length(o);
        sb_str(b, "[");
        for (size_t i = 0; i < n; i++) {
            if (i) sb_str(b, ",");
            canon(b, json_object_array_get_idx(o, i));
        }
        sb_str(b, "]");
        return;
    }
    default:
        sb_str(b, json_object_to_json_string_ext(o, k_flags));
    }
}

char *ig_exp_canonical_json(json_object *config) {
    sbuf b = {0};
    canon(&b, config);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

void ig_exp_config_key(json_object *config, char out[17]) {
    char *s = ig_exp_canonical_json(config);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = s ? s : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 0x100000001b3ull;
    }
    free(s);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* ---- resolved config ---- */

static json_object *typed(const exp_field *f, const char *text) {
    switch (f->t) {
    case F_INT:
        return json_object_new_int64(strtoll(text, NULL, 10));
    case F_NUM: {
        double d = strtod(text, NULL);
        char buf[64];
        ig_yamlcfg_fmt_double(buf, sizeof buf, d);
        return json_object_new_double_s(d, buf);
    }
    case F_BOOL:
        return json_object_new_boolean(!strcmp(text, "true"));
    default:
        return json_object_new_string(text);
    }
}

static json_object *policy_json(const exp_policy *p) {
    json_object *o = json_object_new_object(), *params = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(p->ops->name));
    for (int i = 0; i < p->n_settings; i++) {
        const char *eq = strchr(p->settings[i], '=');
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p->settings[i]), p->settings[i]);
        const char *v = eq + 1;
        json_object *j;
        switch (p->specs[i]->type) {
        case IG_PARAM_INT:
            j = json_object_new_int64((int64_t)strtod(v, NULL));
            break;
        case IG_PARAM_FLOAT: {
            double d = strtod(v, NULL);
            char buf[64];
            ig_yamlcfg_fmt_double(buf, sizeof buf, d);
            j = json_object_new_double_s(d, buf);
            break;
        }
        case IG_PARAM_BOOL:
            j = json_object_new_boolean(!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on"));
            break;
        default:
            j = json_object_new_string(v);
        }
        json_object_object_add(params, key, j);
    }
    json_object_object_add(o, "params", params);
    return o;
}

static json_object *build(const ig_exp *e, const exp_field *fields, const exp_node *map,
                          const int *ch, int top) {
    json_object *o = json_object_new_object();
    for (const exp_field *f = fields; f->key; f++) {
        exp_node *v = exp_map_get(map, f->key);
        json_object *j = NULL;
        const char *key = f->key;
        switch (f->t) {
        case F_SWEEP:
            continue;
        case F_POLICIES:
            key = "policy";
            j = policy_json(&e->pol[ch[e->policy_axis]]);
            break;
        case F_METRICS:
            j = json_object_new_array();
            for (int i = 0; exp_metric_names[i]; i++)
                if (e->metrics & (1u << i))
                    json_object_array_add(j, json_object_new_string(exp_metric_names[i]));
            break;
        case F_MAP:
            if ((f->flags & FL_OPTMAP) && (!v || v->kind != EXP_MAP)) break;
            j = build(e, f->sub, v, ch, 0);
            break;
        default: {
            exp_node *s = exp_pick(v, ch);
            if (top && !strcmp(f->key, "name"))
                j = json_object_new_string(e->name);
            else if (top && !strcmp(f->key, "output"))
                j = json_object_new_string(e->output);
            else if (s)
                j = typed(f, s->str);
            else if (f->def)
                j = typed(f, f->def);
        }
        }
        if (!j && (f->flags & FL_OMIT)) continue;
        json_object_object_add(o, key, j);
    }
    return o;
}

/* ---- labels and cross-field checks ---- */

static char *make_label(const ig_exp *e, const int *ch) {
    sbuf b = {0};
    sb_str(&b, "");
    for (int a = 0; a < e->n_axes; a++) {
        const exp_axis *ax = &e->axes[a];
        if (a) sb_str(&b, " ");
        sb_str(&b, ax->name);
        sb_str(&b, "=");
        if (a == e->policy_axis)
            sb_str(&b, e->pol[ch[a]].label);
        else
            sb_str(&b, ax->node->items[ch[a]]->str);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static double num_of(const exp_node *v, const int *ch, double def) {
    exp_node *s = exp_pick(v, ch);
    return s ? strtod(s->str, NULL) : def;
}

static ig_status point_checks(ig_exp *e, int i, const int *ch, ig_error *err) {
    char at[600] = "";
    if (e->n_points > 1) snprintf(at, sizeof at, " (point %d: %s)", i, e->labels[i]);
    exp_node *pl = exp_map_get(e->root, "placement");
    static const char *const groups[] = {"weights", "kv", "activations"};
    for (int g = 0; g < 3; g++) {
        exp_node *gm = exp_map_get(pl, groups[g]);
        if (!gm || gm->kind != EXP_MAP) continue;
        exp_node *gv = exp_map_get(gm, "gpu"), *cv = exp_map_get(gm, "cpu");
        double gpu = num_of(gv, ch, 100), cpu = num_of(cv, ch, 0);
        if (gpu + cpu > 100 + 1e-9) {
            char path[64];
            snprintf(path, sizeof path, "placement.%s", groups[g]);
            return exp_fail(err, e->path, gm->loc, path,
                            "gpu %g%s + cpu %g%s = %g percent, more than 100 (disk takes the "
                            "rest)%s",
                            gpu, gv ? "" : " (default)", cpu, cv ? "" : " (default)", gpu + cpu,
                            at);
        }
    }
    exp_node *ppl = exp_map_get(exp_map_get(e->root, "workload"), "ppl");
    if (ppl && ppl->kind == EXP_MAP) {
        exp_node *cn = exp_map_get(ppl, "ctx"), *pn = exp_map_get(ppl, "prefill");
        double ctx = num_of(cn, ch, 1024), pre = num_of(pn, ch, 256);
        if (pre > 0 && pre >= ctx - 1) {
            exp_node *where = pn ? exp_pick(pn, ch) : exp_pick(cn, ch);
            return exp_fail(err, e->path, where->loc,
                            pn ? "workload.ppl.prefill" : "workload.ppl.ctx",
                            "a prefill of %g tokens leaves nothing to decode in windows of %g "
                            "tokens (prefill must be < ctx - 1; 0 = no decode)%s",
                            pre, ctx, at);
        }
    }
    return IG_OK;
}

ig_status exp_expand(ig_exp *e, ig_error *err) {
    long long n = 1;
    for (int d = 0; d < e->n_dims; d++) {
        n *= e->dim_len[d];
        if (n > IG_EXP_MAX_POINTS) {
            exp_loc l = e->root->loc;
            return exp_fail(err, e->path, l, "", "the sweeps expand to more than %d points",
                            IG_EXP_MAX_POINTS);
        }
    }
    e->n_points = (int)n;
    e->configs = calloc((size_t)n, sizeof *e->configs);
    e->labels = calloc((size_t)n, sizeof *e->labels);
    e->keys = calloc((size_t)n, sizeof *e->keys);
    if (!e->configs || !e->labels || !e->keys)
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    int ch[EXP_MAX_AXES];
    for (int i = 0; i < e->n_points; i++) {
        exp_point_choices(e, i, ch);
        e->labels[i] = make_label(e, ch);
        if (!e->labels[i]) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        IG_TRY(point_checks(e, i, ch, err));
        e->configs[i] = build(e, exp_schema_top, e->root, ch, 1);
        if (!e->configs[i]) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        ig_exp_config_key(e->configs[i], e->keys[i]);
    }
    return IG_OK;
}
