/* Model shapes (modelshape.h): a YAML schema mirroring ig_model_config, arch-dependent defaults,
 * and lookup by name. Describes sizes only; weights are never read. */
#include "offload/modelshape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "offload/yamlcfg.h"

#ifndef IG_SOURCE_DIR
#define IG_SOURCE_DIR "."
#endif

/* Loaded into this, then resolved (defaults depend on the architecture). */
typedef struct shape_raw {
    char name[128], source[512];
    int arch;
    int n_layer, d_model, n_head, n_kv_head, head_dim, d_ffn, vocab, max_pos;
    double norm_eps, rope_theta;
    int tied, attn_bias, mlp_bias;
    int weight_dtype;
} shape_raw;

static const char *const arch_names[] = {"opt", "llama", NULL};
static const char *const wdtype_names[] = {"f32",  "f16",  "bf16", "int4", "int8",
                                           "q4_0", "q4_1", "q8_0", NULL};

#define I(k, m, req, lo, hi)                                                                       \
    {                                                                                              \
        .key = k, .kind = IG_YK_INT, .off = offsetof(shape_raw, m), .required = req, .min = lo,    \
        .max = hi, .present_off = -1                                                               \
    }
#define B(k, m)                                                                                    \
    { .key = k, .kind = IG_YK_BOOL, .off = offsetof(shape_raw, m), .present_off = -1 }

static int shape_check(const void *obj, const char **key, char *why, size_t n) {
    const shape_raw *s = obj;
    if (s->n_kv_head > 0 && s->n_head % s->n_kv_head) {
        *key = "n_kv_head";
        snprintf(why, n, "%d query heads are not a multiple of %d KV heads", s->n_head,
                 s->n_kv_head);
        return 1;
    }
    if (s->head_dim == 0 && s->d_model % s->n_head) {
        *key = "n_head";
        snprintf(why, n, "d_model %d is not a multiple of %d heads; give head_dim", s->d_model,
                 s->n_head);
        return 1;
    }
    return 0;
}

static const ig_yfield shape_fields[] = {
    {.key = "name",
     .kind = IG_YK_STR,
     .off = offsetof(shape_raw, name),
     .size = 128,
     .required = 1,
     .present_off = -1},
    {.key = "source",
     .kind = IG_YK_STR,
     .off = offsetof(shape_raw, source),
     .size = 512,
     .present_off = -1},
    {.key = "arch",
     .kind = IG_YK_ENUM,
     .off = offsetof(shape_raw, arch),
     .required = 1,
     .names = arch_names,
     .present_off = -1},
    I("n_layer", n_layer, 1, 1, 100000),
    I("d_model", d_model, 1, 1, 1 << 20),
    I("n_head", n_head, 1, 1, 65536),
    I("n_kv_head", n_kv_head, 0, 1, 65536),
    I("head_dim", head_dim, 0, 1, 65536),
    I("d_ffn", d_ffn, 1, 1, 1 << 22),
    I("vocab", vocab, 1, 1, 1 << 24),
    I("max_pos", max_pos, 1, 1, 1 << 26),
    {.key = "norm_eps",
     .kind = IG_YK_NUM,
     .off = offsetof(shape_raw, norm_eps),
     .min = 0,
     .max = 1,
     .min_exclusive = 1,
     .present_off = -1},
    {.key = "rope_theta",
     .kind = IG_YK_NUM,
     .off = offsetof(shape_raw, rope_theta),
     .min = 0,
     .max = 1e12,
     .min_exclusive = 1,
     .present_off = -1},
    B("tied_embeddings", tied),
    B("attn_bias", attn_bias),
    B("mlp_bias", mlp_bias),
    {.key = "weight_dtype",
     .kind = IG_YK_ENUM,
     .off = offsetof(shape_raw, weight_dtype),
     .names = wdtype_names,
     .present_off = -1},
    {.key = NULL},
};
static const ig_yfield shape_root = {
    .key = "", .kind = IG_YK_MAP, .sub = shape_fields, .present_off = -1, .check = shape_check};

static void raw_defaults(shape_raw *r) {
    memset(r, 0, sizeof *r);
    r->tied = r->attn_bias = r->mlp_bias = -1;
    r->weight_dtype = IG_PLAN_F16;
}

static void resolve(const shape_raw *r, ig_model_shape *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", r->name);
    snprintf(out->source, sizeof out->source, "%s", r->source);
    ig_model_config *c = &out->config;
    int opt = r->arch == 0;
    c->arch = opt ? IG_ARCH_OPT : IG_ARCH_LLAMA;
    c->n_layer = r->n_layer;
    c->d_model = r->d_model;
    c->n_head = r->n_head;
    c->n_kv_head = r->n_kv_head ? r->n_kv_head : r->n_head;
    c->head_dim = r->head_dim ? r->head_dim : r->d_model / r->n_head;
    c->d_ffn = r->d_ffn;
    c->vocab = r->vocab;
    c->max_pos = r->max_pos;
    c->norm_eps = (float)(r->norm_eps > 0 ? r->norm_eps : 1e-5);
    c->rope_theta = (float)(r->rope_theta > 0 ? r->rope_theta : 10000.0);
    c->rot_dim = opt ? 0 : c->head_dim;
    c->pos_offset = opt ? 2 : 0;
    c->attn_bias = r->attn_bias >= 0 ? r->attn_bias : opt;
    c->mlp_bias = r->mlp_bias >= 0 ? r->mlp_bias : opt;
    c->tied_embeddings = r->tied >= 0 ? r->tied : opt;
    c->bos = c->eos = -1;
    out->weight_dtype = (ig_plan_dtype)r->weight_dtype;
}

ig_status ig_model_shape_load_string(const char *text, size_t len, const char *name,
                                     ig_model_shape *out, ig_error *err) {
    shape_raw r;
    raw_defaults(&r);
    IG_TRY(ig_yamlcfg_load_string(text, len, name, &shape_root, &r, err));
    resolve(&r, out);
    return IG_OK;
}

ig_status ig_model_shape_load(const char *path, ig_model_shape *out, ig_error *err) {
    shape_raw r;
    raw_defaults(&r);
    IG_TRY(ig_yamlcfg_load_file(path, &shape_root, &r, err));
    resolve(&r, out);
    return IG_OK;
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

ig_status ig_model_shape_open(const char *name, ig_model_shape *out, ig_error *err) {
    size_t l = strlen(name);
    if (!l) return ig_error_set(err, IG_ERR_INVALID_ARG, "empty model shape name");
    if (strchr(name, '/') || (l > 5 && !strcmp(name + l - 5, ".yaml"))) {
        if (!is_file(name))
            return ig_error_set(err, IG_ERR_NOT_FOUND, "%s: no such model shape file", name);
        return ig_model_shape_load(name, out, err);
    }
    for (size_t i = 0; i < l; i++)
        if (!(name[i] == '-' || name[i] == '_' || name[i] == '.' ||
              (name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'z') ||
              (name[i] >= 'A' && name[i] <= 'Z')))
            return ig_error_set(err, IG_ERR_INVALID_ARG, "'%s' is not a model shape name or path",
                                name);
    char a[4096] = "", b[4096];
    const char *home = getenv("IGEN_HOME");
    if (home && *home) {
        snprintf(a, sizeof a, "%s/configs/models/%s.yaml", home, name);
        if (is_file(a)) return ig_model_shape_load(a, out, err);
    }
    snprintf(b, sizeof b, "%s/configs/models/%s.yaml", IG_SOURCE_DIR, name);
    if (is_file(b)) return ig_model_shape_load(b, out, err);
    return ig_error_set(err, IG_ERR_NOT_FOUND,
                        "no model shape '%s' (looked for %s%s%s; see configs/models/)", name,
                        a[0] ? a : "", a[0] ? " and " : "", b);
}

void ig_model_shape_from_model(const ig_model *m, ig_model_shape *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", ig_model_name(m));
    snprintf(out->source, sizeof out->source, "%s", ig_model_path(m));
    out->config = *ig_model_get_config(m);
    ig_dtype d = ig_model_dtype(m);
    out->weight_dtype = ig_plan_dtype_of_weight(d);
}
