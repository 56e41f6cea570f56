/* GGUF models (llama.cpp's naming): Llama-architecture metadata and tensors, dequantized at load
 * into the storage dtype. llama.cpp's converter permutes the rows of attn_q / attn_k so that its
 * interleaved RoPE applies; we undo that permutation so one (rotate-half) RoPE serves both formats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/model/model_internal.h"

typedef struct gguf_loader {
    ig_model *m;
    const char *path;
} gguf_loader;

static ig_status meta_int(const gguf_loader *L, const char *key, int has_def, int def, int *out,
                          ig_error *err) {
    if (ig_gguf_find_key(L->m->gguf, key) < 0 && has_def) {
        *out = def;
        return IG_OK;
    }
    int64_t v = 0;
    IG_TRY(ig_gguf_get_i64(L->m->gguf, key, &v, err));
    if (v < 0 || v > (1LL << 30))
        return ig_error_set(err, IG_ERR_FORMAT, "%s: key '%s': value %lld out of range", L->path,
                            key, (long long)v);
    *out = (int)v;
    return IG_OK;
}

static ig_status meta_float(const gguf_loader *L, const char *key, float def, float *out,
                            ig_error *err) {
    if (ig_gguf_find_key(L->m->gguf, key) < 0) {
        *out = def;
        return IG_OK;
    }
    return ig_gguf_get_f32(L->m->gguf, key, out, err);
}

static const ig_gguf_tensor *find_tensor(const gguf_loader *L, const char *name, ig_error *err) {
    const ig_gguf_tensor *t = ig_gguf_find_tensor(L->m->gguf, name);
    if (!t) ig_error_set(err, IG_ERR_NOT_FOUND, "%s: tensor '%s' is missing", L->path, name);
    return t;
}

/* Inverse of llama.cpp's permute(): GGUF row h*hd + 2i + j holds Hugging Face row h*hd + j*hd/2 +
 * i. */
static void unpermute_rows(void *data, size_t row_bytes, int n_heads, int hd, void *tmp) {
    char *base = data;
    size_t head_bytes = row_bytes * (size_t)hd;
    for (int h = 0; h < n_heads; h++) {
        char *head = base + (size_t)h * head_bytes;
        memcpy(tmp, head, head_bytes);
        for (int i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy(head + (size_t)(j * (hd / 2) + i) * row_bytes,
                       (char *)tmp + (size_t)(2 * i + j) * row_bytes, row_bytes);
    }
}

/* The igen weight type a GGUF tensor type is kept as with keep_stored, or -1 (converted). */
static int stored_type(uint32_t ggml_type) {
    switch (ggml_type) {
    case IG_GGML_F32:
        return IG_DTYPE_F32;
    case IG_GGML_F16:
        return IG_DTYPE_F16;
    case IG_GGML_BF16:
        return IG_DTYPE_BF16;
    case IG_GGML_Q4_0:
        return IG_DTYPE_Q4_0;
    case IG_GGML_Q4_1:
        return IG_DTYPE_Q4_1;
    case IG_GGML_Q8_0:
        return IG_DTYPE_Q8_0;
    default:
        return -1;
    }
}

/* A matrix quantized at load into m->dtype (q4g64, ...): read as f32 (dequantized if the file
 * holds another quantization), rows un-permuted, then quantized. */
static ig_status load_quantized(gguf_loader *L, const ig_gguf_tensor *t, const char *name,
                                int64_t rows, int64_t cols, int permute_heads, ig_weight *w,
                                ig_error *err) {
    ig_model *m = L->m;
    if (!ig_dtype_row_ok(m->dtype, cols))
        return ig_model_block_error(L->path, name, m->dtype, cols, err);
    size_t row_bytes = (size_t)cols * sizeof(float);
    float *f = ig_malloc(row_bytes * (size_t)rows, err);
    if (!f) return IG_ERR_NOMEM;
    ig_status rc = ig_gguf_tensor_read(m->gguf, t, IG_DTYPE_F32, f, err);
    if (rc == IG_OK && permute_heads) {
        int hd = (int)(rows / permute_heads);
        void *tmp = ig_malloc(row_bytes * (size_t)hd, err);
        if (!tmp) rc = IG_ERR_NOMEM;
        if (tmp) unpermute_rows(f, row_bytes, permute_heads, hd, tmp);
        free(tmp);
    }
    if (rc == IG_OK) rc = ig_model_matrix_from_f32(m, L->path, name, f, rows, cols, w, err);
    free(f);
    return rc;
}

/* A [rows][cols] matrix (ggml ne = {cols, rows}); permute_heads > 0 undoes the Q/K permutation. */
static ig_status load_matrix(gguf_loader *L, const char *name, int64_t rows, int64_t cols,
                             int permute_heads, ig_weight *w, ig_error *err) {
    const ig_gguf_tensor *t = find_tensor(L, name, err);
    if (!t) return IG_ERR_NOT_FOUND;
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
        return ig_error_set(err, IG_ERR_SHAPE,
                            "%s: tensor '%s': expected ne [%lld, %lld] (in, out), found %d dims "
                            "[%lld, %lld]",
                            L->path, name, (long long)cols, (long long)rows, t->n_dims,
                            (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1));
    ig_model *m = L->m;
    w->rows = rows;
    w->cols = cols;
    int stored = m->keep_stored ? stored_type(t->type) : -1;
    if (stored >= 0 && !ig_dtype_row_ok((ig_dtype)stored, cols)) stored = -1;
    w->dtype = stored >= 0 ? (ig_dtype)stored : m->dtype;
    if (stored < 0 && ig_dtype_is_quant(m->dtype))
        return load_quantized(L, t, name, rows, cols, permute_heads, w, err);
    int in_place =
        !permute_heads && ((t->type == IG_GGML_F32 && w->dtype == IG_DTYPE_F32) ||
                           (t->type == IG_GGML_F16 && w->dtype == IG_DTYPE_F16) ||
                           (t->type == IG_GGML_BF16 && w->dtype == IG_DTYPE_BF16) || stored >= 0);
    if (in_place && !m->copy_mapped) {
        w->data = t->data;
        m->mapped_bytes += ig_dtype_row_bytes(w->dtype, cols) * (size_t)rows;
        return IG_OK;
    }
    size_t row_bytes = ig_dtype_row_bytes(w->dtype, cols);
    void *buf = ig_model_alloc(m, row_bytes * (size_t)rows, err);
    if (!buf) return IG_ERR_NOMEM;
    if (stored >= 0 || in_place) /* the bytes as stored (rows un-permuted below) */
        memcpy(buf, t->data, row_bytes * (size_t)rows);
    else
        IG_TRY(ig_gguf_tensor_read(m->gguf, t, w->dtype, buf, err));
    if (permute_heads) {
        int hd = (int)(rows / permute_heads);
        void *tmp = ig_malloc(row_bytes * (size_t)hd, err);
        if (!tmp) return IG_ERR_NOMEM;
        unpermute_rows(buf, row_bytes, permute_heads, hd, tmp);
        free(tmp);
    }
    w->data = buf;
    return IG_OK;
}

static ig_status load_vector(gguf_loader *L, const char *name, int64_t n, const float **out,
                             ig_error *err) {
    const ig_gguf_tensor *t = find_tensor(L, name, err);
    if (!t) return IG_ERR_NOT_FOUND;
    if (t->n_dims != 1 || t->ne[0] != n)
        return ig_error_set(err, IG_ERR_SHAPE,
                            "%s: tensor '%s': expected shape [%lld], found %d dims, %lld elements",
                            L->path, name, (long long)n, t->n_dims, (long long)t->n_elements);
    if (t->type == IG_GGML_F32) {
        *out = t->data;
        return IG_OK;
    }
    float *buf = ig_model_alloc(L->m, (size_t)n * sizeof(float), err);
    if (!buf) return IG_ERR_NOMEM;
    IG_TRY(ig_gguf_tensor_read(L->m->gguf, t, IG_DTYPE_F32, buf, err));
    *out = buf;
    return IG_OK;
}

static ig_status read_config(gguf_loader *L, ig_error *err) {
    ig_model *m = L->m;
    ig_model_config *c = &m->cfg;
    const char *arch = NULL;
    size_t arch_len = 0;
    IG_TRY(ig_gguf_get_str(m->gguf, "general.architecture", &arch, &arch_len, err));
    if (arch_len != 5 || memcmp(arch, "llama", 5) != 0)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "%s: general.architecture '%.*s' is not supported (supported in GGUF: "
                            "llama)",
                            L->path, (int)(arch_len > 64 ? 64 : arch_len), arch);
    c->arch = IG_ARCH_LLAMA;
    IG_TRY(meta_int(L, "llama.block_count", 0, 0, &c->n_layer, err));
    IG_TRY(meta_int(L, "llama.embedding_length", 0, 0, &c->d_model, err));
    IG_TRY(meta_int(L, "llama.feed_forward_length", 0, 0, &c->d_ffn, err));
    IG_TRY(meta_int(L, "llama.attention.head_count", 0, 0, &c->n_head, err));
    IG_TRY(meta_int(L, "llama.attention.head_count_kv", 1, c->n_head, &c->n_kv_head, err));
    IG_TRY(meta_int(L, "llama.context_length", 0, 0, &c->max_pos, err));
    int def_hd = c->n_head > 0 ? c->d_model / c->n_head : 0;
    IG_TRY(meta_int(L, "llama.attention.key_length", 1, def_hd, &c->head_dim, err));
    IG_TRY(meta_int(L, "llama.rope.dimension_count", 1, c->head_dim, &c->rot_dim, err));
    IG_TRY(meta_float(L, "llama.rope.freq_base", 10000.0f, &c->rope_theta, err));
    IG_TRY(meta_float(L, "llama.attention.layer_norm_rms_epsilon", 1e-5f, &c->norm_eps, err));
    uint64_t n_tokens = 0;
    ig_gguf_vtype et;
    if (ig_gguf_find_key(m->gguf, "tokenizer.ggml.tokens") >= 0)
        IG_TRY(ig_gguf_get_arr_info(m->gguf, "tokenizer.ggml.tokens", &et, &n_tokens, err));
    IG_TRY(meta_int(L, "llama.vocab_size", 1, (int)n_tokens, &c->vocab, err));
    if (ig_gguf_find_key(m->gguf, "llama.rope.scaling.type") >= 0) {
        const char *st = NULL;
        size_t sl = 0;
        IG_TRY(ig_gguf_get_str(m->gguf, "llama.rope.scaling.type", &st, &sl, err));
        if (!(sl == 4 && !memcmp(st, "none", 4)))
            return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                "%s: llama.rope.scaling.type '%.*s' is not supported", L->path,
                                (int)(sl > 32 ? 32 : sl), st);
    }
    c->tied_embeddings = ig_gguf_find_tensor(m->gguf, "output.weight") == NULL;
    if (ig_gguf_find_tensor(m->gguf, "blk.0.attn_q.bias"))
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "%s: attention biases (blk.0.attn_q.bias) are not supported for GGUF "
                            "Llama",
                            L->path);
    IG_TRY(ig_model_config_validate(c, L->path, err));
    if (c->rot_dim != c->head_dim)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "%s: partial rotary (rope.dimension_count %d < head_dim %d) is not "
                            "supported for GGUF Llama",
                            L->path, c->rot_dim, c->head_dim);
    return IG_OK;
}

ig_status ig_model_load_gguf(ig_model *m, const char *file, ig_error *err) {
    IG_TRY(ig_gguf_open(file, &m->gguf, err));
    gguf_loader L = {m, file};
    IG_TRY(read_config(&L, err));
    const ig_model_config *c = &m->cfg;
    m->layers = ig_calloc((size_t)c->n_layer, sizeof *m->layers, err);
    if (!m->layers) return IG_ERR_NOMEM;
    int64_t d = c->d_model, f = c->d_ffn;
    int64_t qd = (int64_t)c->n_head * c->head_dim, kvd = (int64_t)c->n_kv_head * c->head_dim;
    IG_TRY(load_matrix(&L, "token_embd.weight", c->vocab, d, 0, &m->tok_embd, err));
    IG_TRY(load_vector(&L, "output_norm.weight", d, &m->final_norm_w, err));
    if (c->tied_embeddings)
        m->lm_head = m->tok_embd;
    else
        IG_TRY(load_matrix(&L, "output.weight", c->vocab, d, 0, &m->lm_head, err));
    char n[128];
    for (int i = 0; i < c->n_layer; i++) {
        ig_layer *l = &m->layers[i];
        struct {
            const char *suffix;
            ig_weight *w;
            int64_t rows, cols;
            int permute;
        } mats[] = {
            {"attn_q", &l->wq, qd, d, c->n_head}, {"attn_k", &l->wk, kvd, d, c->n_kv_head},
            {"attn_v", &l->wv, kvd, d, 0},        {"attn_output", &l->wo, d, qd, 0},
            {"ffn_gate", &l->w_gate, f, d, 0},    {"ffn_up", &l->w_up, f, d, 0},
            {"ffn_down", &l->w_down, d, f, 0},
        };
        for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
            snprintf(n, sizeof n, "blk.%d.%s.weight", i, mats[k].suffix);
            IG_TRY(load_matrix(&L, n, mats[k].rows, mats[k].cols, mats[k].permute, mats[k].w, err));
        }
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", i);
        IG_TRY(load_vector(&L, n, d, &l->attn_norm_w, err));
        snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", i);
        IG_TRY(load_vector(&L, n, d, &l->ffn_norm_w, err));
    }
    IG_TRY(ig_tokenizer_load_gguf(m->gguf, &m->tok, err));
    m->cfg.bos = ig_tokenizer_bos(m->tok);
    m->cfg.eos = ig_tokenizer_eos(m->tok);
    return IG_OK;
}
