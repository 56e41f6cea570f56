/* Policy registry and parameter tables: parsing "key=value" settings with clear rejections. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"

extern const ig_policy_ops ig_policy_full;
extern const ig_policy_ops ig_policy_int4;
extern const ig_policy_ops ig_policy_h2o;
extern const ig_policy_ops ig_policy_streaming;
extern const ig_policy_ops ig_policy_quest;
extern const ig_policy_ops ig_policy_infinigen;

#define N_BUILTIN 6
#define MAX_EXTRA 16

/* The built-in tables, then the ones registered at run time, then NULL. */
static const ig_policy_ops *g_policies[N_BUILTIN + MAX_EXTRA + 1] = {
    &ig_policy_full,      &ig_policy_infinigen, &ig_policy_h2o, &ig_policy_int4,
    &ig_policy_streaming, &ig_policy_quest,     NULL,
};

const ig_policy_ops *const *ig_policy_list(void) {
    return g_policies;
}

ig_status ig_policy_register(const ig_policy_ops *ops, ig_error *err) {
    IG_TRY(ig_policy_ops_check(ops, err));
    int n = 0;
    while (g_policies[n]) n++;
    if (ig_policy_find(ops->name))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy %s: a policy of that name is already registered", ops->name);
    if (n >= N_BUILTIN + MAX_EXTRA)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy %s: the registry is full (%d policies registered at run time)",
                            ops->name, MAX_EXTRA);
    g_policies[n] = ops;
    g_policies[n + 1] = NULL;
    return IG_OK;
}

const ig_policy_ops *ig_policy_find(const char *name) {
    for (int i = 0; g_policies[i]; i++)
        if (!strcmp(g_policies[i]->name, name)) return g_policies[i];
    return NULL;
}

ig_status ig_policy_ops_check(const ig_policy_ops *ops, ig_error *err) {
    if (!ops || !ops->name || !ops->name[0])
        return ig_error_set(err, IG_ERR_INVALID_ARG, "a policy table without a name");
    if (ops->version < 1 || ops->version > IG_POLICY_API_VERSION)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy %s: interface version %d (this build accepts 1 to %d)",
                            ops->name, ops->version, IG_POLICY_API_VERSION);
    if (ops->evict && !ops->capacity)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy %s: an evict hook without the capacity hook that bounds it",
                            ops->name);
    return IG_OK;
}

/* The trivial lifetime hooks that a NULL in a table stands for. */
static ig_status default_init_dense(void *st, const ig_policy_env *env, const ig_policy_params *p,
                                    ig_policy_caps *caps, ig_error *err) {
    (void)st;
    (void)env;
    (void)p;
    (void)err;
    caps->dense = 1;
    return IG_OK;
}

static ig_status default_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                              ig_policy_caps *caps, ig_error *err) {
    (void)st;
    (void)env;
    (void)p;
    (void)caps;
    (void)err;
    return IG_OK;
}

static void default_fini(void *st) {
    (void)st;
}

static int64_t default_capacity(const void *st, int layer, int64_t n_tokens) {
    (void)st;
    (void)layer;
    return n_tokens;
}

ig_status ig_policy_ops_resolve(const ig_policy_ops *ops, ig_policy_ops *out, ig_error *err) {
    IG_TRY(ig_policy_ops_check(ops, err));
    *out = *ops;
    if (out->version < 2) out->cost_terms = NULL;
    if (!out->init)
        out->init = out->select || out->select_ahead ? default_init : default_init_dense;
    if (!out->fini) out->fini = default_fini;
    if (!out->capacity) out->capacity = default_capacity;
    return IG_OK;
}

ig_status ig_policy_get_cost_terms(const ig_policy_ops *ops, const ig_policy_params *p,
                                   const ig_model_config *cfg, ig_policy_cost_terms *t,
                                   ig_error *err) {
    memset(t, 0, sizeof *t);
    t->keep = 1;
    t->fetch = 1;
    ig_policy_ops r;
    IG_TRY(ig_policy_ops_resolve(ops, &r, err));
    return r.cost_terms ? r.cost_terms(p, cfg, t, err) : IG_OK;
}

typedef struct param_value {
    double num;
    char *str;
    int set;
} param_value;

struct ig_policy_params {
    const ig_policy_ops *ops;
    param_value *v;
};

static int find_param(const ig_policy_ops *ops, const char *name, size_t len) {
    for (int i = 0; i < ops->n_params; i++)
        if (strlen(ops->params[i].name) == len && !strncmp(ops->params[i].name, name, len))
            return i;
    return -1;
}

static void list_params(const ig_policy_ops *ops, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    if (ops->n_params == 0) {
        snprintf(buf, n, "(none)");
        return;
    }
    for (int i = 0; i < ops->n_params && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", ops->params[i].name);
}

static int choice_ok(const char *choices, const char *v) {
    size_t len = strlen(v);
    for (const char *c = choices; c && *c;) {
        const char *bar = strchr(c, '|');
        size_t cl = bar ? (size_t)(bar - c) : strlen(c);
        if (cl == len && !strncmp(c, v, len)) return 1;
        c = bar ? bar + 1 : NULL;
    }
    return 0;
}

static ig_status set_value(const ig_policy_ops *ops, const ig_param_spec *s, param_value *pv,
                           const char *text, ig_error *err) {
    char *end = NULL;
    switch (s->type) {
    case IG_PARAM_INT:
    case IG_PARAM_FLOAT: {
        errno = 0;
        double x = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(x))
            return ig_error_set(err, IG_ERR_INVALID_ARG, "policy %s: %s=%s: expected a %s",
                                ops->name, s->name, text,
                                s->type == IG_PARAM_INT ? "integer" : "number");
        if (s->type == IG_PARAM_INT && x != floor(x))
            return ig_error_set(err, IG_ERR_INVALID_ARG, "policy %s: %s=%s: expected an integer",
                                ops->name, s->name, text);
        if (x < s->min || x > s->max)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "policy %s: %s=%s is out of range [%g, %g] (%s)", ops->name,
                                s->name, text, s->min, s->max, s->doc);
        pv->num = x;
        return IG_OK;
    }
    case IG_PARAM_BOOL:
        if (!strcmp(text, "1") || !strcmp(text, "true") || !strcmp(text, "on"))
            pv->num = 1;
        else if (!strcmp(text, "0") || !strcmp(text, "false") || !strcmp(text, "off"))
            pv->num = 0;
        else
            return ig_error_set(err, IG_ERR_INVALID_ARG, "policy %s: %s=%s: expected true or false",
                                ops->name, s->name, text);
        return IG_OK;
    case IG_PARAM_ENUM:
        if (!choice_ok(s->choices, text))
            return ig_error_set(err, IG_ERR_INVALID_ARG, "policy %s: %s=%s: expected one of %s",
                                ops->name, s->name, text, s->choices);
        /* fall through */
    case IG_PARAM_STRING:
        free(pv->str);
        pv->str = strdup(text);
        if (!pv->str) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        return IG_OK;
    }
    return IG_ERR_INTERNAL;
}

ig_status ig_policy_params_parse(const ig_policy_ops *ops, const char *const *settings, int n,
                                 ig_policy_params **out, ig_error *err) {
    *out = NULL;
    ig_policy_params *p = ig_calloc(1, sizeof *p, err);
    if (!p) return IG_ERR_NOMEM;
    p->ops = ops;
    p->v = ig_calloc((size_t)(ops->n_params > 0 ? ops->n_params : 1), sizeof *p->v, err);
    if (!p->v) {
        free(p);
        return IG_ERR_NOMEM;
    }
    ig_status rc = IG_OK;
    for (int i = 0; i < ops->n_params && rc == IG_OK; i++)
        if (ops->params[i].def)
            rc = set_value(ops, &ops->params[i], &p->v[i], ops->params[i].def, err);
    for (int i = 0; i < n && rc == IG_OK; i++) {
        const char *eq = strchr(settings[i], '=');
        if (!eq || eq == settings[i]) {
            char valid[512];
            list_params(ops, valid, sizeof valid);
            rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                              "policy %s: '%s' is not key=value (parameters: %s)", ops->name,
                              settings[i], valid);
            break;
        }
        int k = find_param(ops, settings[i], (size_t)(eq - settings[i]));
        if (k < 0) {
            char valid[512];
            list_params(ops, valid, sizeof valid);
            rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                              "policy %s has no parameter '%.*s' (parameters: %s)", ops->name,
                              (int)(eq - settings[i]), settings[i], valid);
            break;
        }
        rc = set_value(ops, &ops->params[k], &p->v[k], eq + 1, err);
        p->v[k].set = 1;
    }
    if (rc != IG_OK) {
        ig_policy_params_free(p);
        return rc;
    }
    *out = p;
    return IG_OK;
}

void ig_policy_params_free(ig_policy_params *p) {
    if (!p) return;
    for (int i = 0; i < p->ops->n_params; i++) free(p->v[i].str);
    free(p->v);
    free(p);
}

static int index_of(const ig_policy_params *p, const char *name) {
    int k = find_param(p->ops, name, strlen(name));
    IG_ASSERT(k >= 0); /* a policy asked for a parameter it did not declare */
    return k;
}

double ig_params_num(const ig_policy_params *p, const char *name) {
    return p->v[index_of(p, name)].num;
}

const char *ig_params_str(const ig_policy_params *p, const char *name) {
    return p->v[index_of(p, name)].str;
}

int ig_params_is_set(const ig_policy_params *p, const char *name) {
    return p->v[index_of(p, name)].set;
}

const char *ig_policy_params_describe(const ig_policy_params *p, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->ops->n_params && used < n; i++) {
        const ig_param_spec *s = &p->ops->params[i];
        const param_value *v = &p->v[i];
        if (s->type == IG_PARAM_ENUM || s->type == IG_PARAM_STRING)
            used += (size_t)snprintf(buf + used, n - used, "%s%s=%s", i ? "," : "", s->name,
                                     v->str ? v->str : "");
        else
            used +=
                (size_t)snprintf(buf + used, n - used, "%s%s=%g", i ? "," : "", s->name, v->num);
    }
    return buf;
}

void ig_policy_tables_note(char *buf, size_t n, const char *what, const char *run, long long on_run,
                           int have_own, long long on_own, int run_failed, long long every,
                           long long total) {
    size_t used = strlen(buf);
    if (run && used < n) {
        snprintf(buf + used, n - used, "; %s on the %s backend in %lld of %lld selections", what,
                 run, on_run, total);
        used = strlen(buf);
    }
    if (have_own && (on_own || !run) && used < n) {
        snprintf(buf + used, n - used, "; on the policy's own cpu table in %lld of %lld (%s)",
                 on_own, total,
                 run_failed ? "after the run's table failed" : "the run gave none it could use");
        used = strlen(buf);
    }
    if (every > 0 && used < n)
        snprintf(buf + used, n - used, "; every entry in %lld (no table worked)", every);
}
