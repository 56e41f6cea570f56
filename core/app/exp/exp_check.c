/* Validation of an experiment tree against the schema (see exp_schema.h): keys, types, ranges,
 * referenced files, policies and their parameters, metrics and sweep.zip syntax; collects the swept
 * axes in document order and expands the policies' parameter lists in place. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/app/exp/exp_schema.h"
#include "offload/hwprof.h"
#include "offload/modelshape.h"
#include "offload/yamlcfg.h"

#define BIG_INT (1 << 30)

static const char *const k_modes[] = {"measured", "modeled", NULL};
static const char *const k_act_quant[] = {"none", "q8", NULL};
static const char *const k_weights_mem[] = {"auto", "map", "copy", NULL};
static const char *const k_dtypes[] = {"f32",  "f16",  "bf16", "q4g64",  "q8g64",
                                       "q4_0", "q4_1", "q8_0", "stored", NULL};
static const char *const k_backends[] = {"cpu", "cuda", "auto", NULL};
static const char *const k_kv_access[] = {"auto", "inplace", "copy", "cpu", NULL};
static const char *const k_prefill[] = {"every", "once", NULL};
const char *const exp_metric_names[] = {"throughput", "ppl", "recall", "bytes", NULL};

static const exp_field k_group[] = {
    {"gpu", F_NUM, "100", 0, 100, 0, CK_NONE, NULL, NULL},
    {"cpu", F_NUM, "0", 0, 100, 0, CK_NONE, NULL, NULL},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};
static const exp_field k_link[] = {
    {"h2d_gbps", F_NUM, NULL, 0, 1e6, FL_REQUIRED | FL_POSITIVE, CK_NONE, NULL, NULL},
    {"d2h_gbps", F_NUM, NULL, 0, 1e6, FL_REQUIRED | FL_POSITIVE, CK_NONE, NULL, NULL},
    {"latency_us", F_NUM, "0", 0, 1e9, 0, CK_NONE, NULL, NULL},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};
static const exp_field k_placement[] = {
    {"weights", F_MAP, NULL, 0, 0, 0, CK_NONE, NULL, k_group},
    {"kv", F_MAP, NULL, 0, 0, 0, CK_NONE, NULL, k_group},
    {"activations", F_MAP, NULL, 0, 0, 0, CK_NONE, NULL, k_group},
    {"gpu_batch_size", F_INT, "0", 0, BIG_INT, 0, CK_NONE, NULL, NULL},
    {"num_gpu_batches", F_INT, "1", 1, BIG_INT, 0, CK_NONE, NULL, NULL},
    {"numa", F_STR, "local", 0, 0, 0, CK_NUMA, NULL, NULL},
    {"disk_dir", F_STR, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
    {"overlap", F_BOOL, "true", 0, 0, 0, CK_NONE, NULL, NULL},
    {"kv_access", F_ENUM, "auto", 0, 0, 0, CK_NONE, k_kv_access, NULL},
    {"link", F_MAP, NULL, 0, 0, FL_OPTMAP, CK_NONE, NULL, k_link},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};
static const exp_field k_ppl[] = {
    {"ctx", F_INT, "1024", 2, 1 << 20, 0, CK_NONE, NULL, NULL},
    {"windows", F_INT, "2", 1, BIG_INT, 0, CK_NONE, NULL, NULL},
    {"prefill", F_INT, "256", 0, 1 << 20, 0, CK_NONE, NULL, NULL},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};
static const exp_field k_workload[] = {
    {"batch", F_INT, "1", 1, 1 << 20, 0, CK_NONE, NULL, NULL},
    {"prompt_len", F_INT, "512", 1, 1 << 24, 0, CK_NONE, NULL, NULL},
    {"gen_len", F_INT, "32", 1, 1 << 24, 0, CK_NONE, NULL, NULL},
    {"text", F_STR, NULL, 0, 0, 0, CK_TEXT, NULL, NULL},
    {"ppl", F_MAP, NULL, 0, 0, 0, CK_NONE, NULL, k_ppl},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};
static const exp_field k_model[] = {
    {"path", F_STR, "default", 0, 0, 0, CK_MODEL, NULL, NULL},
    {"shape", F_STR, NULL, 0, 0, 0, CK_SHAPE, NULL, NULL},
    {"dtype", F_ENUM, "f32", 0, 0, 0, CK_NONE, k_dtypes, NULL},
    {"act_quant", F_ENUM, NULL, 0, 0, FL_OMIT, CK_NONE, k_act_quant, NULL},
    {"weights_mem", F_ENUM, NULL, 0, 0, FL_OMIT, CK_NONE, k_weights_mem, NULL},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};
static const exp_field k_measure[] = {
    {"repeat", F_INT, "3", 1, 1000, FL_NOSWEEP, CK_NONE, NULL, NULL},
    {"warmup", F_BOOL, "true", 0, 0, FL_NOSWEEP, CK_NONE, NULL, NULL},
    {"noise", F_NUM, "0.1", 0, 100, FL_NOSWEEP, CK_NONE, NULL, NULL},
    {"baseline", F_STR, NULL, 0, 0, FL_NOSWEEP, CK_NONE, NULL, NULL},
    {"prefill", F_ENUM, "every", 0, 0, FL_NOSWEEP, CK_NONE, k_prefill, NULL},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};
const exp_field exp_schema_top[] = {
    {"name", F_STR, NULL, 0, 0, FL_NOSWEEP, CK_NAME, NULL, NULL},
    {"mode", F_ENUM, "measured", 0, 0, 0, CK_NONE, k_modes, NULL},
    {"model", F_MAP, NULL, 0, 0, 0, CK_NONE, NULL, k_model},
    {"hardware", F_STR, NULL, 0, 0, 0, CK_HW, NULL, NULL},
    {"threads", F_INT, "0", 0, 65536, 0, CK_NONE, NULL, NULL},
    {"backend", F_ENUM, "cpu", 0, 0, 0, CK_NONE, k_backends, NULL},
    {"placement", F_MAP, NULL, 0, 0, 0, CK_NONE, NULL, k_placement},
    {"workload", F_MAP, NULL, 0, 0, 0, CK_NONE, NULL, k_workload},
    {"policies", F_POLICIES, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
    {"metrics", F_METRICS, NULL, 0, 0, 0, CK_NONE, exp_metric_names, NULL},
    {"measure", F_MAP, NULL, 0, 0, FL_NOSWEEP, CK_NONE, NULL, k_measure},
    {"output", F_STR, NULL, 0, 0, FL_NOSWEEP, CK_NONE, NULL, NULL},
    {"sweep", F_SWEEP, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
    {NULL, 0, NULL, 0, 0, 0, CK_NONE, NULL, NULL},
};

const exp_field *exp_field_find(const exp_field *fields, const char *key) {
    for (int i = 0; fields[i].key; i++)
        if (!strcmp(fields[i].key, key)) return &fields[i];
    return NULL;
}

const char *exp_field_closest(const exp_field *fields, const char *key) {
    const char *best = fields[0].key;
    int bd = INT_MAX;
    for (int i = 0; fields[i].key; i++) {
        int d = ig_yamlcfg_edit_distance(key, fields[i].key);
        if (d < bd) bd = d, best = fields[i].key;
    }
    return best;
}

const exp_field *exp_field_lookup(const char *path) {
    const exp_field *fields = exp_schema_top, *f = NULL;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *seg = strtok_r(buf, ".", &save); seg;
         seg = strtok_r(NULL, ".", &save)) {
        if (!fields) return NULL;
        f = exp_field_find(fields, seg);
        if (!f) return NULL;
        fields = f->t == F_MAP ? f->sub : NULL;
    }
    return f;
}

/* ---- the walk ---- */

typedef struct vcx {
    ig_exp *e;
    ig_error *err;
} vcx;

static ig_status fail(vcx *c, exp_loc loc, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ig_status fail(vcx *c, exp_loc loc, const char *path, const char *fmt, ...) {
    char what[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return exp_fail(c->err, c->e->path, loc, path, "%s", what);
}

static ig_status nomem(vcx *c) {
    return ig_error_set(c->err, IG_ERR_NOMEM, "out of memory");
}

/* dst = path.key (or key at the top level), cut to n - 1 bytes. */
static void subpath(char *dst, size_t n, const char *path, const char *key) {
    size_t o = 0;
    const char *parts[3] = {path, path[0] ? "." : "", key};
    for (int i = 0; i < 3; i++)
        for (const char *s = parts[i]; *s && o + 1 < n; s++) dst[o++] = *s;
    dst[o] = '\0';
}

/* dst = path[i], cut to n - 1 bytes. */
static void idxpath(char *dst, size_t n, const char *path, int i) {
    char idx[24];
    snprintf(idx, sizeof idx, "[%d]", i);
    size_t o = 0;
    const char *parts[2] = {path, idx};
    for (int k = 0; k < 2; k++)
        for (const char *s = parts[k]; *s && o + 1 < n; s++) dst[o++] = *s;
    dst[o] = '\0';
}

/* A short printable copy of a scalar for messages. */
static const char *show(const exp_node *n, char *buf, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < n->len && i < 60 && o + 1 < len; i++) {
        unsigned char ch = (unsigned char)n->str[i];
        buf[o++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    buf[o] = '\0';
    if (n->len > 60 && o + 4 < len) memcpy(buf + o, "...", 4);
    return buf;
}

static const char *what_of(const exp_field *f, char *buf, size_t n) {
    switch (f->t) {
    case F_INT:
        return "an integer";
    case F_NUM:
        return "a number";
    case F_BOOL:
        return "true or false";
    case F_ENUM: {
        size_t o = (size_t)snprintf(buf, n, "one of ");
        for (int i = 0; f->names[i] && o < n; i++)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", f->names[i]);
        return buf;
    }
    default:
        return "a string";
    }
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
}

/* Finds a file named in the experiment: as given (absolute, or relative to the current directory),
 * then relative to the experiment file's directory, $IGEN_HOME and the source tree. */
static int find_path(const ig_exp *e, const char *p, int dir_ok, char *out, size_t n) {
    int (*ok)(const char *) = dir_ok ? exists : is_file;
    if (p[0] == '/' || ok(p)) {
        snprintf(out, n, "%s", p);
        return ok(p);
    }
    const char *home = getenv("IGEN_HOME");
    const char *bases[3] = {e->dir, home && *home ? home : NULL, IG_SOURCE_DIR};
    char buf[4096];
    for (int i = 0; i < 3; i++) {
        if (!bases[i]) continue;
        snprintf(buf, sizeof buf, "%s/%s", bases[i], p);
        if (ok(buf)) {
            snprintf(out, n, "%s", buf);
            return 1;
        }
    }
    return 0;
}

static int looks_like_path(const char *s) {
    size_t l = strlen(s);
    return strchr(s, '/') || (l > 5 && !strcmp(s + l - 5, ".yaml")) ||
           (l > 4 && !strcmp(s + l - 4, ".yml"));
}

/* A referenced model-shape or hardware file: found, then loaded with its own loader so that a
 * broken file reports its own FILE:LINE:COL. */
static ig_status check_ref(vcx *c, exp_node *v, const char *path, exp_check kind) {
    const char *dir = kind == CK_HW ? "hardware" : "models";
    const char *what = kind == CK_HW ? "hardware profile" : "model shape";
    char found[4096] = "";
    if (kind == CK_HW && !strcmp(v->str, "this")) { /* profiled by the run (run_point.c) */
        free(v->resolved);
        v->resolved = strdup("this");
        return v->resolved ? IG_OK : nomem(c);
    }
    if (looks_like_path(v->str)) {
        if (!find_path(c->e, v->str, 0, found, sizeof found))
            return fail(c, v->loc, path, "%s file '%s' not found", what, v->str);
    } else {
        for (const char *s = v->str; *s; s++)
            if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                  (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
                return fail(c, v->loc, path,
                            "'%s' is not a %s name (letters, digits, '-', '_', '.') "
                            "or a path",
                            v->str, what);
        const char *home = getenv("IGEN_HOME");
        char a[4096] = "", b[4096];
        if (home && *home) snprintf(a, sizeof a, "%s/configs/%s/%s.yaml", home, dir, v->str);
        snprintf(b, sizeof b, "%s/configs/%s/%s.yaml", IG_SOURCE_DIR, dir, v->str);
        if (a[0] && is_file(a))
            snprintf(found, sizeof found, "%s", a);
        else if (is_file(b))
            snprintf(found, sizeof found, "%s", b);
        else
            return fail(c, v->loc, path, "no %s '%s' (looked for %s%s%s; see configs/%s/)", what,
                        v->str, a, a[0] ? " and " : "", b, dir);
    }
    ig_error sub = {0};
    ig_status st;
    if (kind == CK_HW) {
        ig_hwprof *hp = malloc(sizeof *hp);
        if (!hp) return nomem(c);
        st = ig_hwprof_load(found, hp, &sub);
        free(hp);
    } else {
        ig_model_shape *ms = malloc(sizeof *ms);
        if (!ms) return nomem(c);
        st = ig_model_shape_load(found, ms, &sub);
        free(ms);
    }
    if (st != IG_OK) {
        if (v->loc.origin)
            return ig_error_set(c->err, st, "%s (the %s named by %s)", sub.msg, what,
                                v->loc.origin);
        return ig_error_set(c->err, st, "%s (the %s named at %s:%d:%d: %s)", sub.msg, what,
                            c->e->path, v->loc.line, v->loc.col, path);
    }
    free(v->resolved);
    v->resolved = strdup(found);
    return v->resolved ? IG_OK : nomem(c);
}

static ig_status check_special(vcx *c, exp_node *v, const exp_field *f, const char *path) {
    char buf[4096];
    switch (f->check) {
    case CK_NONE:
        return IG_OK;
    case CK_NAME:
        for (const char *s = v->str; *s; s++)
            if (*s == '/' || (unsigned char)*s < 0x20 || *s == ' ')
                return fail(c, v->loc, path,
                            "'%s' is not usable as a directory name (no '/', spaces or control "
                            "characters)",
                            v->str);
        if (!strcmp(v->str, ".") || !strcmp(v->str, ".."))
            return fail(c, v->loc, path, "'%s' is not usable as a name", v->str);
        return IG_OK;
    case CK_NUMA: {
        if (!strcmp(v->str, "local") || !strcmp(v->str, "interleave")) return IG_OK;
        int ok = 1, digits = 0;
        for (const char *s = v->str; *s && ok; s++) {
            if (*s >= '0' && *s <= '9')
                digits++;
            else if (*s == ',' && digits)
                digits = 0;
            else
                ok = 0;
        }
        if (ok && digits) return IG_OK;
        return fail(c, v->loc, path,
                    "'%s' is not local, interleave or a NUMA node list such as \"0,1\"", v->str);
    }
    case CK_MODEL:
        if (!strcmp(v->str, "default") || c->e->mode == IG_EXP_MODELED) return IG_OK;
        if (!strncmp(v->str, "dummy:", 6)) { /* random weights of a shape: the shape must load */
            ig_model_shape shape;
            ig_error e2;
            if (ig_model_shape_open(v->str + 6, &shape, &e2) != IG_OK)
                return fail(c, v->loc, path, "%s: %s", v->str, e2.msg);
            return IG_OK;
        }
        if (!find_path(c->e, v->str, 1, buf, sizeof buf))
            return fail(c, v->loc, path,
                        "model '%s' not found (a GGUF file or a Hugging Face directory; relative "
                        "paths are looked up from the current directory, the experiment's "
                        "directory and the igen tree)",
                        v->str);
        free(v->resolved);
        v->resolved = strdup(buf);
        return v->resolved ? IG_OK : nomem(c);
    case CK_TEXT:
        if (!find_path(c->e, v->str, 0, buf, sizeof buf))
            return fail(c, v->loc, path,
                        "text file '%s' not found (relative paths are looked up from the current "
                        "directory, the experiment's directory and the igen tree)",
                        v->str);
        free(v->resolved);
        v->resolved = strdup(buf);
        return v->resolved ? IG_OK : nomem(c);
    case CK_SHAPE:
    case CK_HW:
        return check_ref(c, v, path, f->check);
    }
    return IG_OK;
}

/* One scalar value of a leaf field. */
static ig_status check_value(vcx *c, exp_node *v, const exp_field *f, const char *path) {
    char sh[128], w[256];
    const char *what = what_of(f, w, sizeof w);
    if (v->kind == EXP_MAP) return fail(c, v->loc, path, "expected %s, found a mapping", what);
    if (v->kind == EXP_SEQ)
        return fail(c, v->loc, path,
                    "a list inside a list: a swept key takes a list of scalars, found %s in it",
                    "a list");
    show(v, sh, sizeof sh);
    if (exp_is_null(v)) return fail(c, v->loc, path, "expected %s, found nothing (null)", what);
    switch (f->t) {
    case F_INT:
    case F_NUM: {
        if (!v->plain)
            return fail(c, v->loc, path, "expected %s, found the quoted string \"%s\"", what, sh);
        char *end = NULL;
        errno = 0;
        double d;
        if (f->t == F_INT) {
            long long l = strtoll(v->str, &end, 10);
            d = (double)l;
        } else {
            d = strtod(v->str, &end);
        }
        if (errno || end == v->str || *end || !isfinite(d))
            return fail(c, v->loc, path, "expected %s, found '%s'", what, sh);
        int below = (f->flags & FL_POSITIVE) ? !(d > f->min) : d < f->min;
        if (below || d > f->max) {
            char lo[40], hi[40];
            snprintf(lo, sizeof lo, "%.15g", f->min);
            snprintf(hi, sizeof hi, "%.15g", f->max);
            if (f->flags & FL_POSITIVE)
                return fail(c, v->loc, path, "%s is out of range: must be > %s and <= %s", sh, lo,
                            hi);
            if (f->max >= BIG_INT)
                return fail(c, v->loc, path, "%s is out of range: must be >= %s", sh, lo);
            return fail(c, v->loc, path, "%s is out of range: must be in [%s, %s]", sh, lo, hi);
        }
        return IG_OK;
    }
    case F_BOOL:
        if (v->plain && (!strcmp(v->str, "true") || !strcmp(v->str, "false"))) return IG_OK;
        return fail(c, v->loc, path, "expected true or false, found '%s'", sh);
    case F_ENUM:
        for (int i = 0; f->names[i]; i++)
            if (!strcmp(v->str, f->names[i])) return IG_OK;
        {
            const char *best = f->names[0];
            int bd = INT_MAX;
            for (int i = 0; f->names[i]; i++) {
                int d = ig_yamlcfg_edit_distance(v->str, f->names[i]);
                if (d < bd) bd = d, best = f->names[i];
            }
            return fail(c, v->loc, path, "'%s' is not %s (did you mean '%s'?)", sh, what, best);
        }
    default:
        if (v->len == 0) return fail(c, v->loc, path, "expected %s, found an empty string", what);
        return check_special(c, v, f, path);
    }
}

static ig_status add_axis(vcx *c, const char *name, exp_node *node, int len, exp_loc loc) {
    ig_exp *e = c->e;
    if (e->n_axes >= EXP_MAX_AXES)
        return fail(c, loc, name, "more than %d swept keys", EXP_MAX_AXES);
    if (!e->axes) {
        e->axes = calloc(EXP_MAX_AXES, sizeof *e->axes);
        if (!e->axes) return nomem(c);
    }
    exp_axis *a = &e->axes[e->n_axes];
    a->name = strdup(name);
    if (!a->name) return nomem(c);
    a->node = node;
    a->len = len;
    a->zip = -1;
    a->dim = -1;
    a->loc = loc;
    if (node) node->axis = e->n_axes;
    e->n_axes++;
    return IG_OK;
}

static ig_status check_leaf(vcx *c, exp_node *v, const exp_field *f, const char *path) {
    if (v->kind != EXP_SEQ) return check_value(c, v, f, path);
    if (f->flags & FL_NOSWEEP) {
        char w[256];
        return fail(c, v->loc, path, "cannot be swept: expected %s, found a list",
                    what_of(f, w, sizeof w));
    }
    if (v->n_items == 0)
        return fail(c, v->loc, path, "the list is empty (a swept key needs values)");
    for (int i = 0; i < v->n_items; i++) {
        char sub[512];
        idxpath(sub, sizeof sub, path, i);
        IG_TRY(check_value(c, v->items[i], f, sub));
    }
    return add_axis(c, path, v, v->n_items, v->loc);
}

static ig_status check_map(vcx *c, exp_node *map, const exp_field *fields, const char *path);

/* ---- policies ---- */

static void list_policies(char *buf, size_t n) {
    size_t o = 0;
    buf[0] = '\0';
    const ig_policy_ops *const *all = ig_policy_list();
    for (int i = 0; all[i] && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", all[i]->name);
}

static const ig_param_spec *param_spec(const ig_policy_ops *ops, const char *name) {
    for (int i = 0; i < ops->n_params; i++)
        if (!strcmp(ops->params[i].name, name)) return &ops->params[i];
    return NULL;
}

/* Checks one "k=v" setting with the policy's own parser. */
static ig_status check_setting(vcx *c, const ig_policy_ops *ops, const char *k, exp_node *v,
                               const char *path) {
    char *s = NULL;
    if (asprintf(&s, "%s=%s", k, v->str) < 0) return nomem(c);
    const char *one[1] = {s};
    ig_policy_params *pp = NULL;
    ig_error sub = {0};
    ig_status st = ig_policy_params_parse(ops, one, 1, &pp, &sub);
    free(s);
    ig_policy_params_free(pp);
    if (st != IG_OK) return fail(c, v->loc, path, "%s", sub.msg);
    return IG_OK;
}

static ig_status add_variant(vcx *c, const ig_policy_ops *ops, exp_node *params, const int *pick,
                             exp_node *entry, const char *path) {
    ig_exp *e = c->e;
    exp_policy *np = realloc(e->pol, sizeof *np * (size_t)(e->n_pol + 1));
    if (!np) return nomem(c);
    e->pol = np;
    exp_policy *p = &e->pol[e->n_pol++];
    memset(p, 0, sizeof *p);
    p->ops = ops;
    int n = params ? params->n_ents : 0;
    p->settings = calloc((size_t)(n ? n : 1), sizeof *p->settings);
    p->specs = calloc((size_t)(n ? n : 1), sizeof *p->specs);
    if (!p->settings || !p->specs) return nomem(c);
    size_t cap = strlen(ops->name) + 3, o;
    for (int i = 0; i < n; i++) {
        exp_node *v = params->ents[i].val;
        if (v->kind == EXP_SEQ) v = v->items[pick[i]];
        if (asprintf(&p->settings[i], "%s=%s", params->ents[i].key, v->str) < 0) {
            p->settings[i] = NULL;
            return nomem(c);
        }
        p->n_settings++;
        p->specs[i] = param_spec(ops, params->ents[i].key);
        cap += strlen(p->settings[i]) + 1;
    }
    p->label = malloc(cap);
    if (!p->label) return nomem(c);
    o = (size_t)snprintf(p->label, cap, "%s", ops->name);
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(p->label + o, cap - o, "%s%s", i ? "," : "(", p->settings[i]);
    if (n) snprintf(p->label + o, cap - o, ")");
    /* the combination as a whole */
    ig_policy_params *pp = NULL;
    ig_error sub = {0};
    ig_status st =
        ig_policy_params_parse(ops, (const char *const *)p->settings, p->n_settings, &pp, &sub);
    ig_policy_params_free(pp);
    if (st != IG_OK) return fail(c, entry->loc, path, "%s", sub.msg);
    return IG_OK;
}

static ig_status check_policy(vcx *c, exp_node *ent, const char *path) {
    static const char *const keys[] = {"name", "params", NULL};
    exp_node *name = ent, *params = NULL;
    char sub[512], all[512];
    if (ent->kind == EXP_SEQ)
        return fail(c, ent->loc, path,
                    "a list inside a list: each policy is a name or {name: ..., params: {...}}");
    if (ent->kind == EXP_MAP) {
        name = NULL;
        for (int i = 0; i < ent->n_ents; i++) {
            exp_entry *en = &ent->ents[i];
            subpath(sub, sizeof sub, path, en->key);
            if (!strcmp(en->key, "name")) {
                name = en->val;
            } else if (!strcmp(en->key, "params")) {
                params = en->val;
            } else {
                const char *best = keys[0];
                int bd = INT_MAX;
                for (int k = 0; keys[k]; k++) {
                    int d = ig_yamlcfg_edit_distance(en->key, keys[k]);
                    if (d < bd) bd = d, best = keys[k];
                }
                return fail(c, en->kloc, sub, "unknown key '%s' (did you mean '%s'?)", en->key,
                            best);
            }
        }
        if (!name) return fail(c, ent->loc, path, "missing required key 'name'");
    }
    subpath(sub, sizeof sub, path, "name");
    const char *npath = ent->kind == EXP_MAP ? sub : path;
    if (name->kind != EXP_SCALAR)
        return fail(c, name->loc, npath,
                    "expected a policy name, found %s (list each policy as its own entry)",
                    exp_kind_name(name));
    if (exp_is_null(name)) return fail(c, name->loc, npath, "expected a policy name");
    const ig_policy_ops *ops = ig_policy_find(name->str);
    if (!ops) {
        const ig_policy_ops *const *pl = ig_policy_list();
        const char *best = pl[0]->name;
        int bd = INT_MAX;
        for (int i = 0; pl[i]; i++) {
            int d = ig_yamlcfg_edit_distance(name->str, pl[i]->name);
            if (d < bd) bd = d, best = pl[i]->name;
        }
        list_policies(all, sizeof all);
        return fail(c, name->loc, npath, "unknown policy '%s' (did you mean '%s'? policies: %s)",
                    name->str, best, all);
    }
    int n = 0;
    if (params) {
        char ppath[512];
        subpath(ppath, sizeof ppath, path, "params");
        if (params->kind != EXP_MAP)
            return fail(c, params->loc, ppath, "expected a mapping of parameters, found %s",
                        exp_kind_name(params));
        n = params->n_ents;
        for (int i = 0; i < n; i++) {
            exp_entry *en = &params->ents[i];
            subpath(sub, sizeof sub, ppath, en->key);
            if (!param_spec(ops, en->key)) {
                /* the policy's own parser words the error (with "did you mean"); a key it would
                 * read as something else (one holding '=') is refused here all the same */
                if (!strchr(en->key, '=')) {
                    exp_node fake = {.kind = EXP_SCALAR, .str = "0", .len = 1, .loc = en->kloc};
                    IG_TRY(check_setting(c, ops, en->key, &fake, sub));
                }
                char names[512] = "";
                for (int k = 0; k < ops->n_params; k++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             k ? ", " : "", ops->params[k].name);
                return fail(c, en->kloc, sub, "unknown parameter '%s' for policy '%s' (%s: %s)",
                            en->key, ops->name, ops->n_params ? "parameters" : "it takes none",
                            ops->n_params ? names : "-");
            }
            exp_node *v = en->val;
            if (v->kind == EXP_MAP)
                return fail(c, v->loc, sub,
                            "expected a value or a list of values, found a mapping");
            if (v->kind == EXP_SEQ) {
                if (v->n_items == 0)
                    return fail(c, v->loc, sub,
                                "the list is empty (a swept parameter needs values)");
                for (int k = 0; k < v->n_items; k++) {
                    char isub[540];
                    idxpath(isub, sizeof isub, sub, k);
                    if (v->items[k]->kind != EXP_SCALAR)
                        return fail(c, v->items[k]->loc, isub,
                                    "a list inside a list: a swept parameter takes a list of "
                                    "scalars, found %s in it",
                                    exp_kind_name(v->items[k]));
                    IG_TRY(check_setting(c, ops, en->key, v->items[k], isub));
                }
            } else {
                IG_TRY(check_setting(c, ops, en->key, v, sub));
            }
        }
    }
    /* the cartesian product of this entry's parameter lists, the first parameter slowest */
    int pick[64] = {0};
    if (n > 64) return fail(c, params->loc, path, "more than 64 parameters");
    for (;;) {
        IG_TRY(add_variant(c, ops, params, pick, ent, path));
        if (c->e->n_pol > IG_EXP_MAX_POINTS)
            return fail(c, ent->loc, path, "more than %d policy variants", IG_EXP_MAX_POINTS);
        int i = n - 1;
        for (; i >= 0; i--) {
            exp_node *v = params->ents[i].val;
            int len = v->kind == EXP_SEQ ? v->n_items : 1;
            if (++pick[i] < len) break;
            pick[i] = 0;
        }
        if (i < 0) break;
    }
    return IG_OK;
}

static ig_status check_policies(vcx *c, exp_node *v, const char *path) {
    if (v->kind == EXP_MAP)
        return fail(c, v->loc, path,
                    "expected a list of policies (names or {name: ..., params: {...}}), found a "
                    "mapping");
    if (v->kind == EXP_SCALAR) {
        IG_TRY(check_policy(c, v, path));
    } else {
        if (v->n_items == 0) return fail(c, v->loc, path, "the list is empty");
        for (int i = 0; i < v->n_items; i++) {
            char sub[512];
            idxpath(sub, sizeof sub, path, i);
            IG_TRY(check_policy(c, v->items[i], sub));
        }
    }
    c->e->policy_axis = c->e->n_axes;
    return add_axis(c, "policy", NULL, c->e->n_pol, v->loc);
}

/* ---- metrics, sweep ---- */

static ig_status check_metrics(vcx *c, exp_node *v, const exp_field *f, const char *path) {
    c->e->metrics_node = v;
    exp_node *one[1] = {v};
    exp_node **items = v->kind == EXP_SEQ ? v->items : one;
    int n = v->kind == EXP_SEQ ? v->n_items : 1;
    if (v->kind == EXP_MAP)
        return fail(c, v->loc, path, "expected a list of metrics, found a mapping");
    if (n == 0) return fail(c, v->loc, path, "the list is empty");
    unsigned bits = 0;
    for (int i = 0; i < n; i++) {
        char sub[512];
        if (v->kind == EXP_SEQ)
            idxpath(sub, sizeof sub, path, i);
        else
            snprintf(sub, sizeof sub, "%s", path);
        exp_node *m = items[i];
        if (m->kind != EXP_SCALAR)
            return fail(c, m->loc, sub, "expected a metric name, found %s", exp_kind_name(m));
        int k = -1;
        for (int j = 0; f->names[j]; j++)
            if (!strcmp(m->str, f->names[j])) k = j;
        if (k < 0) {
            const char *best = f->names[0];
            int bd = INT_MAX;
            for (int j = 0; f->names[j]; j++) {
                int d = ig_yamlcfg_edit_distance(m->str, f->names[j]);
                if (d < bd) bd = d, best = f->names[j];
            }
            char sh[128];
            return fail(c, m->loc, sub,
                        "unknown metric '%s' (did you mean '%s'? metrics: throughput, ppl, "
                        "recall, bytes)",
                        show(m, sh, sizeof sh), best);
        }
        if (bits & (1u << k)) return fail(c, m->loc, sub, "'%s' is listed twice", m->str);
        bits |= 1u << k;
    }
    c->e->metrics = bits;
    return IG_OK;
}

static ig_status check_sweep(vcx *c, exp_node *v, const char *path) {
    if (v->kind != EXP_MAP)
        return fail(c, v->loc, path, "expected a mapping (zip: [[KEY, KEY], ...]), found %s",
                    exp_kind_name(v));
    for (int i = 0; i < v->n_ents; i++) {
        exp_entry *en = &v->ents[i];
        char sub[512];
        subpath(sub, sizeof sub, path, en->key);
        if (strcmp(en->key, "zip"))
            return fail(c, en->kloc, sub, "unknown key '%s' (did you mean 'zip'?)", en->key);
        exp_node *z = en->val;
        if (z->kind != EXP_SEQ)
            return fail(c, z->loc, sub, "expected a list of groups such as [[KEY, KEY]], found %s",
                        exp_kind_name(z));
        for (int g = 0; g < z->n_items; g++) {
            char gp[540];
            idxpath(gp, sizeof gp, sub, g);
            exp_node *grp = z->items[g];
            if (grp->kind != EXP_SEQ)
                return fail(c, grp->loc, gp, "expected a list of key paths, found %s",
                            exp_kind_name(grp));
            if (grp->n_items < 2)
                return fail(c, grp->loc, gp, "a zip group needs at least two keys");
            for (int k = 0; k < grp->n_items; k++)
                if (grp->items[k]->kind != EXP_SCALAR || exp_is_null(grp->items[k]))
                    return fail(c, grp->items[k]->loc, gp,
                                "expected a key path such as "
                                "workload.prompt_len");
        }
        c->e->zip_node = z;
    }
    return IG_OK;
}

static ig_status check_map(vcx *c, exp_node *map, const exp_field *fields, const char *path) {
    if (map->kind != EXP_MAP)
        return fail(c, map->loc, path, "expected a mapping, found %s", exp_kind_name(map));
    for (int i = 0; i < map->n_ents; i++) {
        exp_entry *en = &map->ents[i];
        char sub[512];
        subpath(sub, sizeof sub, path, en->key);
        const exp_field *f = exp_field_find(fields, en->key);
        if (!f)
            return fail(c, en->kloc, sub, "unknown key '%s' (did you mean '%s'?)", en->key,
                        exp_field_closest(fields, en->key));
        exp_node *v = en->val;
        switch (f->t) {
        case F_MAP:
            if ((f->flags & FL_OPTMAP) && v->kind == EXP_SCALAR &&
                (exp_is_null(v) || (v->plain && !strcmp(v->str, "false"))))
                break;
            IG_TRY(check_map(c, v, f->sub, sub));
            break;
        case F_POLICIES:
            IG_TRY(check_policies(c, v, sub));
            break;
        case F_METRICS:
            IG_TRY(check_metrics(c, v, f, sub));
            break;
        case F_SWEEP:
            IG_TRY(check_sweep(c, v, sub));
            break;
        default:
            if (v->kind == EXP_MAP) {
                char w[256];
                return fail(c, v->loc, sub, "expected %s, found a mapping",
                            what_of(f, w, sizeof w));
            }
            IG_TRY(check_leaf(c, v, f, sub));
        }
    }
    for (int i = 0; fields[i].key; i++)
        if ((fields[i].flags & FL_REQUIRED) && !exp_map_get(map, fields[i].key))
            return fail(c, map->loc, path, "missing required key '%s'", fields[i].key);
    return IG_OK;
}

/* ---- after the walk: presence rules and zip groups ---- */

static ig_status check_zip(vcx *c) {
    ig_exp *e = c->e;
    exp_node *z = e->zip_node;
    for (int g = 0; z && g < z->n_items; g++) {
        exp_node *grp = z->items[g];
        char gp[64];
        snprintf(gp, sizeof gp, "sweep.zip[%d]", g);
        int first = -1;
        for (int k = 0; k < grp->n_items; k++) {
            exp_node *nm = grp->items[k];
            const char *want = !strcmp(nm->str, "policies") ? "policy" : nm->str;
            int a = -1;
            for (int i = 0; i < e->n_axes; i++)
                if (!strcmp(e->axes[i].name, want)) a = i;
            if (a < 0) {
                if (exp_field_lookup(nm->str))
                    return fail(c, nm->loc, gp,
                                "'%s' is not a list in this experiment (only list-valued keys can "
                                "be zipped)",
                                nm->str);
                const char *best = NULL;
                int bd = INT_MAX;
                for (int i = 0; i < e->n_axes; i++) {
                    int d = ig_yamlcfg_edit_distance(nm->str, e->axes[i].name);
                    if (d < bd) bd = d, best = e->axes[i].name;
                }
                return fail(c, nm->loc, gp, "'%s' is not a key of the experiment%s%s%s", nm->str,
                            best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
            }
            if (e->axes[a].zip >= 0) return fail(c, nm->loc, gp, "'%s' is zipped twice", nm->str);
            e->axes[a].zip = g;
            if (first < 0) {
                first = a;
            } else if (e->axes[a].len != e->axes[first].len) {
                return fail(c, grp->loc, gp,
                            "zipped keys must have equal lengths: %s has %d values but %s has %d",
                            e->axes[first].name, e->axes[first].len, e->axes[a].name,
                            e->axes[a].len);
            }
        }
    }
    /* dimensions: one per unzipped axis or zip group, at its first axis's position */
    e->dim_len = calloc((size_t)(e->n_axes ? e->n_axes : 1), sizeof *e->dim_len);
    if (!e->dim_len) return nomem(c);
    for (int i = 0; i < e->n_axes; i++) {
        exp_axis *a = &e->axes[i];
        if (a->zip >= 0)
            for (int j = 0; j < i; j++)
                if (e->axes[j].zip == a->zip) a->dim = e->axes[j].dim;
        if (a->dim < 0) {
            a->dim = e->n_dims++;
            e->dim_len[a->dim] = a->len;
        }
    }
    return IG_OK;
}

ig_status exp_validate(ig_exp *e, ig_error *err) {
    vcx c = {e, err};
    exp_node *root = e->root;
    /* the mode first: it decides what the other keys need */
    exp_entry *me = exp_map_entry(root, "mode");
    e->mode = IG_EXP_MEASURED;
    e->any_modeled = 0;
    if (me) {
        /* one mode, or a list of both (an axis: every point measured and modeled) */
        const exp_field *mf = exp_field_find(exp_schema_top, "mode");
        int measured = 0, modeled = 0;
        if (me->val->kind == EXP_SEQ) {
            for (int i = 0; i < me->val->n_items; i++) {
                char ip[32];
                snprintf(ip, sizeof ip, "mode[%d]", i);
                IG_TRY(check_leaf(&c, me->val->items[i], mf, ip));
                if (strcmp(me->val->items[i]->str, "modeled"))
                    measured = 1;
                else
                    modeled = 1;
            }
        } else {
            IG_TRY(check_leaf(&c, me->val, mf, "mode"));
            if (strcmp(me->val->str, "modeled"))
                measured = 1;
            else
                modeled = 1;
        }
        e->mode = measured ? IG_EXP_MEASURED : IG_EXP_MODELED;
        e->any_modeled = modeled;
        e->mode_node = me->val;
    }
    e->policy_axis = -1;
    e->metrics = 1; /* throughput */
    IG_TRY(check_map(&c, root, exp_schema_top, ""));
    if (e->policy_axis < 0) {
        /* no policies: the dense baseline */
        IG_TRY(add_variant(&c, ig_policy_find("full"), NULL, NULL, root, "policies"));
        e->policy_axis = e->n_axes;
        IG_TRY(add_axis(&c, "policy", NULL, 1, root->loc));
    }
    exp_node *model = exp_map_get(root, "model");
    if (e->any_modeled) {
        exp_loc at = e->mode_node->loc;
        if (!exp_map_get(model, "shape"))
            return fail(&c, at, "model.shape",
                        "mode: modeled needs the model's shape (model.shape: a name from "
                        "configs/models/ or a path)");
        if (!exp_map_get(root, "hardware"))
            return fail(&c, at, "hardware",
                        "mode: modeled needs a hardware profile (hardware: a name from "
                        "configs/hardware/ or a path)");
    }
    if (e->metrics & 2u) {
        exp_node *wl = exp_map_get(root, "workload");
        if (!exp_map_get(wl, "text")) {
            exp_node *m = e->metrics_node;
            char p[64] = "metrics";
            if (m->kind == EXP_SEQ)
                for (int i = 0; i < m->n_items; i++)
                    if (!strcmp(m->items[i]->str, "ppl")) {
                        snprintf(p, sizeof p, "metrics[%d]", i);
                        m = m->items[i];
                        break;
                    }
            return fail(&c, m->loc, p,
                        "the ppl metric needs workload.text (the text to measure perplexity on)");
        }
    }
    return check_zip(&c);
}
