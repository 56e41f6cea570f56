/* Hugging Face model directories: config.json (OPT, Llama), safetensors weights (single or
 * sharded) and tokenizer.json. Tensor names and shapes follow transformers' checkpoints. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/base/mapfile.h"
#include "core/model/model_internal.h"

typedef struct cfg_reader {
    json_object *root;
    const char *path;
} cfg_reader;

static json_object *cfg_get(const cfg_reader *r, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(r->root, key, &v)) return NULL;
    if (json_object_is_type(v, json_type_null)) return NULL;
    return v;
}

/* Integer key; required unless a default is given (has_def). */
static ig_status cfg_int(const cfg_reader *r, const char *key, int has_def, int def, int *out,
                         ig_error *err) {
    json_object *v = cfg_get(r, key);
    if (!v) {
        if (has_def) {
            *out = def;
            return IG_OK;
        }
        return ig_error_set(err, IG_ERR_FORMAT, "%s: missing key '%s' (expected an integer)",
                            r->path, key);
    }
    if (!json_object_is_type(v, json_type_int))
        return ig_error_set(err, IG_ERR_FORMAT, "%s: key '%s': expected an integer, found %s",
                            r->path, key, json_type_to_name(json_object_get_type(v)));
    int64_t x = json_object_get_int64(v);
    if (x < -(1LL << 31) || x > (1LL << 31) - 1)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: key '%s': %lld is out of range", r->path, key,
                            (long long)x);
    *out = (int)x;
    return IG_OK;
}

static ig_status cfg_float(const cfg_reader *r, json_object *v, const char *key, double def,
                           float *out, ig_error *err) {
    if (!v) {
        *out = (float)def;
        return IG_OK;
    }
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return ig_error_set(err, IG_ERR_FORMAT, "%s: key '%s': expected a number, found %s",
                            r->path, key, json_type_to_name(json_object_get_type(v)));
    *out = (float)json_object_get_double(v);
    return IG_OK;
}

static ig_status cfg_bool(const cfg_reader *r, const char *key, int def, int *out, ig_error *err) {
    json_object *v = cfg_get(r, key);
    if (!v) {
        *out = def;
        return IG_OK;
    }
    if (!json_object_is_type(v, json_type_boolean))
        return ig_error_set(err, IG_ERR_FORMAT, "%s: key '%s': expected true/false, found %s",
                            r->path, key, json_type_to_name(json_object_get_type(v)));
    *out = json_object_get_boolean(v);
    return IG_OK;
}

static const char *cfg_str(const cfg_reader *r, const char *key) {
    json_object *v = cfg_get(r, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* bos/eos may be an integer or a list (first element). */
static int32_t cfg_token_id(const cfg_reader *r, const char *key) {
    json_object *v = cfg_get(r, key);
    if (v && json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0)
        v = json_object_array_get_idx(v, 0);
    if (v && json_object_is_type(v, json_type_int)) return (int32_t)json_object_get_int64(v);
    return -1;
}

static ig_status parse_config(ig_model *m, const cfg_reader *r, ig_error *err) {
    ig_model_config *c = &m->cfg;
    const char *type = cfg_str(r, "model_type");
    if (!type)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: missing key 'model_type' (expected a string)",
                            r->path);
    if (!strcmp(type, "opt")) {
        c->arch = IG_ARCH_OPT;
        IG_TRY(cfg_int(r, "hidden_size", 0, 0, &c->d_model, err));
        IG_TRY(cfg_int(r, "num_attention_heads", 0, 0, &c->n_head, err));
        c->n_kv_head = c->n_head;
        IG_TRY(cfg_int(r, "num_hidden_layers", 0, 0, &c->n_layer, err));
        IG_TRY(cfg_int(r, "ffn_dim", 0, 0, &c->d_ffn, err));
        IG_TRY(cfg_int(r, "vocab_size", 0, 0, &c->vocab, err));
        IG_TRY(cfg_int(r, "max_position_embeddings", 0, 0, &c->max_pos, err));
        int proj = 0, before = 1, affine = 1, bias = 1;
        IG_TRY(cfg_int(r, "word_embed_proj_dim", 1, c->d_model, &proj, err));
        IG_TRY(cfg_bool(r, "do_layer_norm_before", 1, &before, err));
        IG_TRY(cfg_bool(r, "layer_norm_elementwise_affine", 1, &affine, err));
        IG_TRY(cfg_bool(r, "enable_bias", 1, &bias, err));
        IG_TRY(cfg_bool(r, "tie_word_embeddings", 1, &c->tied_embeddings, err));
        if (proj != c->d_model)
            return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                "%s: word_embed_proj_dim %d != hidden_size %d (OPT-350m style "
                                "projections are not supported)",
                                r->path, proj, c->d_model);
        if (!before)
            return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                "%s: do_layer_norm_before=false (post-LayerNorm OPT) is not "
                                "supported",
                                r->path);
        if (!affine || !bias)
            return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                "%s: OPT without LayerNorm affine parameters or biases is not "
                                "supported",
                                r->path);
        const char *act = cfg_str(r, "activation_function");
        if (act && strcmp(act, "relu"))
            return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                "%s: activation_function '%s' is not supported for OPT (expected "
                                "relu)",
                                r->path, act);
        c->head_dim = c->n_head > 0 ? c->d_model / c->n_head : 0;
        if (c->n_head > 0 && c->head_dim * c->n_head != c->d_model)
            return ig_error_set(err, IG_ERR_FORMAT,
                                "%s: hidden_size %d is not divisible by num_attention_heads %d",
                                r->path, c->d_model, c->n_head);
        c->norm_eps = 1e-5f; /* torch.nn.LayerNorm default, used by transformers' OPT */
        c->pos_offset = 2;
        c->attn_bias = c->mlp_bias = 1;
    } else if (!strcmp(type, "llama")) {
        c->arch = IG_ARCH_LLAMA;
        IG_TRY(cfg_int(r, "hidden_size", 0, 0, &c->d_model, err));
        IG_TRY(cfg_int(r, "num_attention_heads", 0, 0, &c->n_head, err));
        IG_TRY(cfg_int(r, "num_key_value_heads", 1, c->n_head, &c->n_kv_head, err));
        IG_TRY(cfg_int(r, "num_hidden_layers", 0, 0, &c->n_layer, err));
        IG_TRY(cfg_int(r, "intermediate_size", 0, 0, &c->d_ffn, err));
        IG_TRY(cfg_int(r, "vocab_size", 0, 0, &c->vocab, err));
        IG_TRY(cfg_int(r, "max_position_embeddings", 0, 0, &c->max_pos, err));
        int def_hd = c->n_head > 0 ? c->d_model / c->n_head : 0;
        IG_TRY(cfg_int(r, "head_dim", 1, def_hd, &c->head_dim, err));
        IG_TRY(cfg_float(r, cfg_get(r, "rms_norm_eps"), "rms_norm_eps", 1e-6, &c->norm_eps, err));
        IG_TRY(cfg_bool(r, "attention_bias", 0, &c->attn_bias, err));
        IG_TRY(cfg_bool(r, "mlp_bias", 0, &c->mlp_bias, err));
        IG_TRY(cfg_bool(r, "tie_word_embeddings", 0, &c->tied_embeddings, err));
        const char *act = cfg_str(r, "hidden_act");
        if (act && strcmp(act, "silu"))
            return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                "%s: hidden_act '%s' is not supported for Llama (expected silu)",
                                r->path, act);
        /* rope_theta at top level (transformers 4) or inside rope_parameters (transformers 5);
         * only the default (unscaled) RoPE is implemented. */
        json_object *theta = cfg_get(r, "rope_theta");
        json_object *params = cfg_get(r, "rope_parameters");
        if (!params) params = cfg_get(r, "rope_scaling");
        if (params && json_object_is_type(params, json_type_object)) {
            json_object *v = NULL;
            if (!theta && json_object_object_get_ex(params, "rope_theta", &v)) theta = v;
            const char *rt = NULL;
            if (json_object_object_get_ex(params, "rope_type", &v) ||
                json_object_object_get_ex(params, "type", &v))
                rt = json_object_get_string(v);
            if (rt && strcmp(rt, "default"))
                return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                    "%s: rope_type '%s' is not supported (only default RoPE)",
                                    r->path, rt);
        }
        IG_TRY(cfg_float(r, theta, "rope_theta", 10000.0, &c->rope_theta, err));
        c->rot_dim = c->head_dim;
    } else {
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "%s: model_type '%s' is not supported (supported: opt, llama)", r->path,
                            type);
    }
    c->bos = cfg_token_id(r, "bos_token_id");
    c->eos = cfg_token_id(r, "eos_token_id");
    return ig_model_config_validate(c, r->path, err);
}

typedef struct hf_loader {
    ig_model *m;
    const char *dir;
} hf_loader;

static const ig_st_tensor *hf_find(const hf_loader *L, const char *name, ig_error *err) {
    const ig_st_tensor *t = ig_safetensors_find(L->m->st, name);
    if (!t)
        ig_error_set(err, IG_ERR_NOT_FOUND, "%s: tensor '%s' is missing from the checkpoint",
                     L->dir, name);
    return t;
}

static ig_status hf_check_float(const hf_loader *L, const ig_st_tensor *t, ig_error *err) {
    if (!ig_dtype_is_float_storage(t->dtype))
        return ig_error_set(err, IG_ERR_SHAPE, "%s: tensor '%s': expected f32/f16/bf16, found %s",
                            t->file, t->name, ig_dtype_name(t->dtype));
    return IG_OK;
}

static void shape_str(const ig_st_tensor *t, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && used < n; i++)
        used +=
            (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

static ig_status hf_matrix(hf_loader *L, const char *name, int64_t rows, int64_t cols, ig_weight *w,
                           ig_error *err) {
    const ig_st_tensor *t = hf_find(L, name, err);
    if (!t) return IG_ERR_NOT_FOUND;
    IG_TRY(hf_check_float(L, t, err));
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        char found[128];
        shape_str(t, found, sizeof found);
        return ig_error_set(err, IG_ERR_SHAPE,
                            "%s: tensor '%s': expected shape [%lld, %lld], found %s", t->file, name,
                            (long long)rows, (long long)cols, found);
    }
    w->rows = rows;
    w->cols = cols;
    w->dtype = L->m->keep_stored ? t->dtype : L->m->dtype;
    if (t->dtype == w->dtype && !L->m->copy_mapped) {
        w->data = t->data; /* used in place, from the mapping */
        L->m->mapped_bytes += (size_t)(rows * cols) * ig_dtype_size(w->dtype);
        return IG_OK;
    }
    size_t n = (size_t)(rows * cols);
    if (ig_dtype_is_quant(w->dtype)) { /* quantized at load, through an f32 copy */
        float *f = ig_malloc(n * sizeof(float), err);
        if (!f) return IG_ERR_NOMEM;
        ig_convert(IG_DTYPE_F32, f, t->dtype, t->data, n);
        ig_status rc = ig_model_matrix_from_f32(L->m, t->file, name, f, rows, cols, w, err);
        free(f);
        return rc;
    }
    void *buf = ig_model_alloc(L->m, n * ig_dtype_size(w->dtype), err);
    if (!buf) return IG_ERR_NOMEM;
    ig_convert(w->dtype, buf, t->dtype, t->data, n);
    w->data = buf;
    return IG_OK;
}

static ig_status hf_vector(hf_loader *L, const char *name, int64_t n, const float **out,
                           ig_error *err) {
    const ig_st_tensor *t = hf_find(L, name, err);
    if (!t) return IG_ERR_NOT_FOUND;
    IG_TRY(hf_check_float(L, t, err));
    if (t->ndim != 1 || t->shape[0] != n) {
        char found[128];
        shape_str(t, found, sizeof found);
        return ig_error_set(err, IG_ERR_SHAPE, "%s: tensor '%s': expected shape [%lld], found %s",
                            t->file, name, (long long)n, found);
    }
    if (t->dtype == IG_DTYPE_F32) {
        *out = t->data;
        return IG_OK;
    }
    float *buf = ig_model_alloc(L->m, (size_t)n * sizeof(float), err);
    if (!buf) return IG_ERR_NOMEM;
    ig_convert(IG_DTYPE_F32, buf, t->dtype, t->data, (size_t)n);
    *out = buf;
    return IG_OK;
}

/* Some OPT checkpoints store "decoder.*" instead of "model.decoder.*". */
static const char *opt_prefix(const ig_model *m) {
    return ig_safetensors_find(m->st, "model.decoder.embed_tokens.weight") ? "model.decoder."
                                                                           : "decoder.";
}

static ig_status load_opt(hf_loader *L, ig_error *err) {
    ig_model *m = L->m;
    const ig_model_config *c = &m->cfg;
    const char *p = opt_prefix(m);
    char n[256];
    int64_t d = c->d_model, f = c->d_ffn;
    snprintf(n, sizeof n, "%sembed_tokens.weight", p);
    IG_TRY(hf_matrix(L, n, c->vocab, d, &m->tok_embd, err));
    snprintf(n, sizeof n, "%sembed_positions.weight", p);
    IG_TRY(hf_matrix(L, n, c->max_pos + c->pos_offset, d, &m->pos_embd, err));
    snprintf(n, sizeof n, "%sfinal_layer_norm.weight", p);
    IG_TRY(hf_vector(L, n, d, &m->final_norm_w, err));
    snprintf(n, sizeof n, "%sfinal_layer_norm.bias", p);
    IG_TRY(hf_vector(L, n, d, &m->final_norm_b, err));
    for (int i = 0; i < c->n_layer; i++) {
        ig_layer *l = &m->layers[i];
        struct {
            const char *suffix;
            ig_weight *w;
            const float **b;
            int64_t rows, cols;
        } mats[] = {
            {"self_attn.q_proj", &l->wq, &l->bq, d, d},
            {"self_attn.k_proj", &l->wk, &l->bk, d, d},
            {"self_attn.v_proj", &l->wv, &l->bv, d, d},
            {"self_attn.out_proj", &l->wo, &l->bo, d, d},
            {"fc1", &l->w_up, &l->b_up, f, d},
            {"fc2", &l->w_down, &l->b_down, d, f},
        };
        for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
            snprintf(n, sizeof n, "%slayers.%d.%s.weight", p, i, mats[k].suffix);
            IG_TRY(hf_matrix(L, n, mats[k].rows, mats[k].cols, mats[k].w, err));
            snprintf(n, sizeof n, "%slayers.%d.%s.bias", p, i, mats[k].suffix);
            IG_TRY(hf_vector(L, n, mats[k].rows, mats[k].b, err));
        }
        snprintf(n, sizeof n, "%slayers.%d.self_attn_layer_norm.weight", p, i);
        IG_TRY(hf_vector(L, n, d, &l->attn_norm_w, err));
        snprintf(n, sizeof n, "%slayers.%d.self_attn_layer_norm.bias", p, i);
        IG_TRY(hf_vector(L, n, d, &l->attn_norm_b, err));
        snprintf(n, sizeof n, "%slayers.%d.final_layer_norm.weight", p, i);
        IG_TRY(hf_vector(L, n, d, &l->ffn_norm_w, err));
        snprintf(n, sizeof n, "%slayers.%d.final_layer_norm.bias", p, i);
        IG_TRY(hf_vector(L, n, d, &l->ffn_norm_b, err));
    }
    if (c->tied_embeddings || !ig_safetensors_find(m->st, "lm_head.weight"))
        m->lm_head = m->tok_embd;
    else
        IG_TRY(hf_matrix(L, "lm_head.weight", c->vocab, d, &m->lm_head, err));
    return IG_OK;
}

static ig_status load_llama(hf_loader *L, ig_error *err) {
    ig_model *m = L->m;
    const ig_model_config *c = &m->cfg;
    char n[256];
    int64_t d = c->d_model, f = c->d_ffn;
    int64_t qd = (int64_t)c->n_head * c->head_dim, kvd = (int64_t)c->n_kv_head * c->head_dim;
    IG_TRY(hf_matrix(L, "model.embed_tokens.weight", c->vocab, d, &m->tok_embd, err));
    IG_TRY(hf_vector(L, "model.norm.weight", d, &m->final_norm_w, err));
    for (int i = 0; i < c->n_layer; i++) {
        ig_layer *l = &m->layers[i];
        struct {
            const char *suffix;
            ig_weight *w;
            const float **b;
            int64_t rows, cols;
            int has_bias;
        } mats[] = {
            {"self_attn.q_proj", &l->wq, &l->bq, qd, d, c->attn_bias},
            {"self_attn.k_proj", &l->wk, &l->bk, kvd, d, c->attn_bias},
            {"self_attn.v_proj", &l->wv, &l->bv, kvd, d, c->attn_bias},
            {"self_attn.o_proj", &l->wo, &l->bo, d, qd, c->attn_bias},
            {"mlp.gate_proj", &l->w_gate, NULL, f, d, 0},
            {"mlp.up_proj", &l->w_up, &l->b_up, f, d, c->mlp_bias},
            {"mlp.down_proj", &l->w_down, &l->b_down, d, f, c->mlp_bias},
        };
        for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
            snprintf(n, sizeof n, "model.layers.%d.%s.weight", i, mats[k].suffix);
            IG_TRY(hf_matrix(L, n, mats[k].rows, mats[k].cols, mats[k].w, err));
            if (mats[k].has_bias) {
                snprintf(n, sizeof n, "model.layers.%d.%s.bias", i, mats[k].suffix);
                IG_TRY(hf_vector(L, n, mats[k].rows, mats[k].b, err));
            }
        }
        snprintf(n, sizeof n, "model.layers.%d.input_layernorm.weight", i);
        IG_TRY(hf_vector(L, n, d, &l->attn_norm_w, err));
        snprintf(n, sizeof n, "model.layers.%d.post_attention_layernorm.weight", i);
        IG_TRY(hf_vector(L, n, d, &l->ffn_norm_w, err));
    }
    if (c->tied_embeddings) /* a stored lm_head.weight, if any, is the same tensor */
        m->lm_head = m->tok_embd;
    else
        IG_TRY(hf_matrix(L, "lm_head.weight", c->vocab, d, &m->lm_head, err));
    return IG_OK;
}

ig_status ig_model_load_hf(ig_model *m, const char *dir, ig_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = NULL;
    ig_status rc = ig_read_file(path, &text, NULL, err);
    if (rc != IG_OK) {
        if (!ig_path_exists(path))
            return ig_error_set(err, IG_ERR_NOT_FOUND, "%s: not a model directory (no config.json)",
                                dir);
        return rc;
    }
    enum json_tokener_error jerr = json_tokener_success;
    json_object *root = json_tokener_parse_verbose(text, &jerr);
    free(text);
    if (!root || !json_object_is_type(root, json_type_object)) {
        if (root) json_object_put(root);
        return ig_error_set(err, IG_ERR_FORMAT, "%s: not a JSON object (%s)", path,
                            root ? "wrong top-level type" : json_tokener_error_desc(jerr));
    }
    cfg_reader r = {root, path};
    rc = parse_config(m, &r, err);
    json_object_put(root);
    if (rc != IG_OK) return rc;

    rc = ig_safetensors_open(dir, &m->st, err);
    if (rc != IG_OK) return rc;
    m->layers = ig_calloc((size_t)m->cfg.n_layer, sizeof *m->layers, err);
    if (!m->layers) return IG_ERR_NOMEM;
    hf_loader L = {m, dir};
    rc = m->cfg.arch == IG_ARCH_OPT ? load_opt(&L, err) : load_llama(&L, err);
    if (rc != IG_OK) return rc;

    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!ig_path_exists(path))
        return ig_error_set(err, IG_ERR_NOT_FOUND,
                            "%s: tokenizer missing (expected tokenizer.json beside config.json)",
                            path);
    rc = ig_tokenizer_load_hf(path, &m->tok, err);
    if (rc != IG_OK) return rc;
    if (ig_tokenizer_vocab_size(m->tok) > m->cfg.vocab)
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: tokenizer has %d tokens but the model's vocab_size is %d", path,
                            ig_tokenizer_vocab_size(m->tok), m->cfg.vocab);
    if (m->cfg.bos < 0) m->cfg.bos = ig_tokenizer_bos(m->tok);
    if (m->cfg.eos < 0) m->cfg.eos = ig_tokenizer_eos(m->tok);
    return IG_OK;
}
