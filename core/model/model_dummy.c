/* Dummy models (FlexGen's _DUMMY_ weights): every tensor of a configuration, filled with seeded
 * pseudo-random values, for measuring speed on model shapes whose checkpoints are not at hand.
 * Norm weights are 1 and biases 0, matrices uniform in +-1/sqrt(fan-in), so activations stay in a
 * normal range. No tokenizer: prompts must be token ids. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dtype.h"
#include "core/model/model_internal.h"

/* splitmix64: a fast, well-mixed stream for filling large buffers */
static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform values in +-1/sqrt(cols), converted chunk by chunk into dst of type t (a float type). */
static void fill(int64_t rows, int64_t cols, uint64_t *seed, ig_dtype t, void *dst) {
    size_t n = (size_t)rows * (size_t)cols, es = ig_dtype_size(t);
    float scale = 1.0f / sqrtf((float)cols), chunk[1024];
    for (size_t i = 0; i < n; i += 1024) {
        size_t k = n - i < 1024 ? n - i : 1024;
        for (size_t j = 0; j < k; j++)
            chunk[j] = ((float)(mix(seed) >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
        ig_convert(t, (char *)dst + i * es, IG_DTYPE_F32, chunk, k);
    }
}

static ig_status matrix(ig_model *m, int64_t rows, int64_t cols, uint64_t *seed, ig_weight *w,
                        ig_error *err) {
    size_t n = (size_t)rows * (size_t)cols;
    if (ig_dtype_is_quant(m->dtype)) { /* drawn in f32, then quantized */
        float *f = ig_malloc(n * sizeof(float), err);
        if (!f) return IG_ERR_NOMEM;
        fill(rows, cols, seed, IG_DTYPE_F32, f);
        ig_status rc = ig_model_matrix_from_f32(m, m->name, "matrix", f, rows, cols, w, err);
        free(f);
        return rc;
    }
    void *data = ig_model_alloc(m, n * ig_dtype_size(m->dtype), err);
    if (!data) return IG_ERR_NOMEM;
    fill(rows, cols, seed, m->dtype, data);
    *w = (ig_weight){data, m->dtype, rows, cols};
    return IG_OK;
}

static const float *vec(ig_model *m, int64_t n, float value, ig_error *err) {
    float *v = ig_model_alloc(m, (size_t)n * sizeof(float), err);
    if (v)
        for (int64_t i = 0; i < n; i++) v[i] = value;
    return v;
}

ig_status ig_model_create_dummy(const ig_model_config *c, ig_dtype dtype, uint64_t seed,
                                const char *name, ig_model **out, ig_error *err) {
    *out = NULL;
    if (!ig_dtype_is_weight_storage(dtype))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "dummy model: dtype %s (f32, f16, bf16 or a quantized weight format)",
                            ig_dtype_name(dtype));
    IG_TRY(ig_model_config_validate(c, name, err));
    ig_model *m = ig_calloc(1, sizeof *m, err);
    if (!m) return IG_ERR_NOMEM;
    m->cfg = *c;
    m->dtype = dtype;
    m->format = IG_FORMAT_HF;
    snprintf(m->name, sizeof m->name, "dummy:%s", name);
    size_t plen = strlen(name) + 7;
    m->path = malloc(plen);
    m->layers = ig_calloc((size_t)c->n_layer, sizeof *m->layers, err);
    if (!m->path || !m->layers) {
        ig_model_free(m);
        return ig_error_set(err, IG_ERR_NOMEM, "dummy model: out of memory");
    }
    snprintf(m->path, plen, "dummy:%s", name);
    uint64_t s = seed;
    int64_t d = c->d_model, f = c->d_ffn, qd = (int64_t)c->n_head * c->head_dim;
    int64_t kvd = (int64_t)c->n_kv_head * c->head_dim;
    int opt = c->arch == IG_ARCH_OPT;
    ig_status st = matrix(m, c->vocab, d, &s, &m->tok_embd, err);
    if (st == IG_OK && opt) st = matrix(m, c->max_pos + c->pos_offset, d, &s, &m->pos_embd, err);
    if (st == IG_OK && !c->tied_embeddings) st = matrix(m, c->vocab, d, &s, &m->lm_head, err);
    if (st == IG_OK && c->tied_embeddings) m->lm_head = m->tok_embd;
    m->final_norm_w = vec(m, d, 1.0f, err);
    if (opt) m->final_norm_b = vec(m, d, 0.0f, err);
    for (int l = 0; l < c->n_layer && st == IG_OK; l++) {
        ig_layer *L = &m->layers[l];
        L->attn_norm_w = vec(m, d, 1.0f, err);
        L->ffn_norm_w = vec(m, d, 1.0f, err);
        if (opt) {
            L->attn_norm_b = vec(m, d, 0.0f, err);
            L->ffn_norm_b = vec(m, d, 0.0f, err);
        }
        st = matrix(m, qd, d, &s, &L->wq, err);
        if (st == IG_OK) st = matrix(m, kvd, d, &s, &L->wk, err);
        if (st == IG_OK) st = matrix(m, kvd, d, &s, &L->wv, err);
        if (st == IG_OK) st = matrix(m, d, qd, &s, &L->wo, err);
        if (st == IG_OK && !opt) st = matrix(m, f, d, &s, &L->w_gate, err);
        if (st == IG_OK) st = matrix(m, f, d, &s, &L->w_up, err);
        if (st == IG_OK) st = matrix(m, d, f, &s, &L->w_down, err);
        if (c->attn_bias) {
            L->bq = vec(m, qd, 0.0f, err);
            L->bk = vec(m, kvd, 0.0f, err);
            L->bv = vec(m, kvd, 0.0f, err);
            L->bo = vec(m, d, 0.0f, err);
        }
        if (c->mlp_bias) {
            L->b_up = vec(m, f, 0.0f, err);
            L->b_down = vec(m, d, 0.0f, err);
        }
        if (st == IG_OK && (!L->attn_norm_w || !L->ffn_norm_w || (opt && !L->ffn_norm_b) ||
                            (c->attn_bias && !L->bo) || (c->mlp_bias && !L->b_down)))
            st = IG_ERR_NOMEM;
    }
    if (st == IG_OK && !m->final_norm_w) st = IG_ERR_NOMEM;
    if (st != IG_OK) {
        if (st == IG_ERR_NOMEM)
            ig_error_set(err, IG_ERR_NOMEM, "dummy model %s: out of memory for its weights", name);
        ig_model_free(m);
        return st;
    }
    *out = m;
    return IG_OK;
}
