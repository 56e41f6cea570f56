/* Reference kernels: one obvious loop per formula, double accumulation, no SIMD, no threads. They
 * define what the fast kernels must compute; speed is not a goal here (the reference sampler even
 * sorts the whole vocabulary). Allocation is allowed: these never run on a hot path. */
#include "kernels/cpu/cpu_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/status.h"
#include "kernels/cpu/kvquant.h"

void ig_ref_linear(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wtype, int64_t N,
                   const float *bias, float *y) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = bias ? bias[n] : 0.0;
            for (int64_t k = 0; k < K; k++)
                s += (double)x[m * K + k] * (double)ig_load_f32(wtype, W, (size_t)(n * K + k));
            y[m * N + n] = (float)s;
        }
}

void ig_ref_embed(const void *table, ig_dtype ttype, int64_t dim, const int32_t *ids, int64_t n,
                  float *out) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < dim; d++)
            out[i * dim + d] = ig_load_f32(ttype, table, (size_t)ids[i] * (size_t)dim + (size_t)d);
}

void ig_ref_rmsnorm(const float *x, const float *w, int64_t rows, int64_t dim, float eps,
                    float *y) {
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < dim; i++) ss += (double)x[r * dim + i] * x[r * dim + i];
        double rms = sqrt(ss / (double)dim + eps);
        for (int64_t i = 0; i < dim; i++) y[r * dim + i] = (float)(x[r * dim + i] / rms * w[i]);
    }
}

void ig_ref_layernorm(const float *x, const float *w, const float *b, int64_t rows, int64_t dim,
                      float eps, float *y) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < dim; i++) mean += xr[i];
        mean /= (double)dim;
        for (int64_t i = 0; i < dim; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)dim;
        for (int64_t i = 0; i < dim; i++) {
            double t = (xr[i] - mean) / sqrt(var + eps) * w[i];
            y[r * dim + i] = (float)(b ? t + b[i] : t);
        }
    }
}

/* Hugging Face's f32 arithmetic, step by step (this is the definition, not an approximation). */
void ig_ref_rope_table(float theta, int rot_dim, int64_t max_pos, float *cos_tab, float *sin_tab) {
    int half = rot_dim / 2;
    for (int64_t pos = 0; pos < max_pos; pos++)
        for (int i = 0; i < half; i++) {
            float exponent = (float)(2 * i) / (float)rot_dim;
            float inv_freq = 1.0f / powf(theta, exponent);
            float angle = (float)pos * inv_freq;
            cos_tab[pos * half + i] = cosf(angle);
            sin_tab[pos * half + i] = sinf(angle);
        }
}

void ig_ref_rope(float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                 const int32_t *pos, const float *cos_tab, const float *sin_tab) {
    int half = rot_dim / 2;
    for (int64_t t = 0; t < n_tok; t++)
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + (t * n_heads + h) * (int64_t)head_dim;
            for (int i = 0; i < half; i++) {
                float c = cos_tab[(int64_t)pos[t] * half + i];
                float s = sin_tab[(int64_t)pos[t] * half + i];
                float x1 = xh[i], x2 = xh[i + half];
                /* out = x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1). */
                float p1 = x1 * c, q1 = -x2 * s;
                float p2 = x2 * c, q2 = x1 * s;
                xh[i] = p1 + q1;
                xh[i + half] = p2 + q2;
            }
        }
}

void ig_ref_silu_mul(const float *gate, const float *up, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * up[i]);
    }
}

void ig_ref_relu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (x[i] < 0) x[i] = 0;
}

void ig_ref_gelu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0))));
}

void ig_ref_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void ig_ref_scale(float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void ig_ref_softmax(float *x, int64_t n) {
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    if (m == -INFINITY) {
        for (int64_t i = 0; i < n; i++) x[i] = 0;
        return;
    }
    for (int64_t i = 0; i < n; i++) sum += exp(x[i] - m);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(exp(x[i] - m) / sum);
}

double ig_ref_log_prob(const float *logits, int64_t n, int32_t target) {
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++)
        if (logits[i] > m) m = logits[i];
    for (int64_t i = 0; i < n; i++) sum += exp(logits[i] - m);
    return logits[target] - m - log(sum);
}

/* out = sum_j softmax_j(scale q.k_j) v_j over n rows (type t, widened exactly), all in double. */
static void ref_attend(const float *q, const void *const *krow, const void *const *vrow, ig_dtype t,
                       int64_t n, int hd, float scale, double *p, float *probs, float *out) {
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int d = 0; d < hd; d++) s += (double)q[d] * ig_load_f32(t, krow[j], (size_t)d);
        p[j] = s * scale;
        if (p[j] > m) m = p[j];
    }
    for (int64_t j = 0; j < n; j++) {
        p[j] = exp(p[j] - m);
        sum += p[j];
    }
    for (int d = 0; d < hd; d++) {
        double o = 0;
        for (int64_t j = 0; j < n; j++) o += p[j] / sum * ig_load_f32(t, vrow[j], (size_t)d);
        out[d] = (float)o;
    }
    if (probs)
        for (int64_t j = 0; j < n; j++) probs[j] = (float)(p[j] / sum);
}

void ig_ref_attention_colsum(const float *q, int64_t n_q, int64_t p0, const float *k,
                             const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                             int hd, float scale, float *colsum, int64_t colsum_stride,
                             float *out) {
    int64_t n_ctx = p0 + n_q, cap = n_ctx > 0 ? n_ctx : 1;
    double *p = malloc((size_t)cap * sizeof *p);
    float *probs = malloc((size_t)cap * sizeof *probs);
    const void **kr = malloc((size_t)cap * sizeof *kr);
    const void **vr = malloc((size_t)cap * sizeof *vr);
    double *acc = colsum ? calloc((size_t)n_head * (size_t)cap, sizeof *acc) : NULL;
    IG_ASSERT(p && probs && kr && vr && (!colsum || acc));
    int group = n_head / n_kv_head;
    for (int64_t i = 0; i < n_q; i++)
        for (int h = 0; h < n_head; h++) {
            int g = h / group;
            int64_t n = p0 + i + 1; /* causal: positions 0 .. p0+i */
            for (int64_t j = 0; j < n; j++) {
                kr[j] = k + ((int64_t)g * stride_tokens + j) * hd;
                vr[j] = v + ((int64_t)g * stride_tokens + j) * hd;
            }
            int64_t o = (i * n_head + h) * hd;
            ref_attend(q + o, kr, vr, IG_DTYPE_F32, n, hd, scale, p, probs, out + o);
            if (acc)
                for (int64_t j = 0; j < n; j++) acc[h * cap + j] += probs[j];
        }
    if (colsum)
        for (int h = 0; h < n_head; h++)
            for (int64_t j = 0; j < n_ctx; j++) {
                float *c = colsum + h * colsum_stride + j;
                *c = (float)(*c + acc[h * cap + j]);
            }
    free(p);
    free(probs);
    free(kr);
    free(vr);
    free(acc);
}

void ig_ref_attention(const float *q, int64_t n_q, int64_t p0, const float *k, const float *v,
                      int64_t stride_tokens, int n_head, int n_kv_head, int hd, float scale,
                      float *out) {
    ig_ref_attention_colsum(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale, NULL, 0,
                            out);
}

void ig_ref_attention_rows_t(const float *q, ig_dtype kv_dtype, const void *const *k_rows,
                             const void *const *v_rows, int64_t row_stride, const int64_t *n_rows,
                             int64_t max_rows, int n_head, int n_kv_head, int hd, float scale,
                             float *probs_out, float *out) {
    int64_t cap = max_rows > 0 ? max_rows : 1;
    double *p = malloc((size_t)cap * sizeof *p);
    const void **kr = malloc((size_t)cap * sizeof *kr);
    const void **vr = malloc((size_t)cap * sizeof *vr);
    IG_ASSERT(p && kr && vr);
    size_t rb = (size_t)row_stride * ig_dtype_size(kv_dtype);
    int group = n_head / n_kv_head;
    for (int h = 0; h < n_head; h++) {
        int g = h / group;
        int64_t n = n_rows[g];
        for (int64_t j = 0; j < n; j++) {
            kr[j] = (const char *)k_rows[g] + (size_t)j * rb;
            vr[j] = (const char *)v_rows[g] + (size_t)j * rb;
        }
        float *probs = probs_out ? probs_out + h * max_rows : NULL;
        if (probs)
            for (int64_t j = 0; j < max_rows; j++) probs[j] = 0;
        if (n == 0) {
            for (int d = 0; d < hd; d++) out[h * hd + d] = 0;
            continue;
        }
        ref_attend(q + h * hd, kr, vr, kv_dtype, n, hd, scale, p, probs, out + h * hd);
    }
    free(p);
    free(kr);
    free(vr);
}

void ig_ref_attention_rows(const float *q, const float *const *k_rows, const float *const *v_rows,
                           const int64_t *n_rows, int64_t max_rows, int n_head, int n_kv_head,
                           int hd, float scale, float *probs_out, float *out) {
    const void **kr = malloc((size_t)n_kv_head * sizeof *kr);
    const void **vr = malloc((size_t)n_kv_head * sizeof *vr);
    IG_ASSERT(kr && vr);
    for (int g = 0; g < n_kv_head; g++) {
        kr[g] = k_rows[g];
        vr[g] = v_rows[g];
    }
    ig_ref_attention_rows_t(q, IG_DTYPE_F32, kr, vr, hd, n_rows, max_rows, n_head, n_kv_head, hd,
                            scale, probs_out, out);
    free(kr);
    free(vr);
}

/* ---- token selection ------------------------------------------------------------------------- */

static const float *g_ref_scores; /* for the qsort comparator (single-threaded) */

/* Larger value first (NaN below everything, -0 == +0), then lower index. */
static int ref_topk_rank(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = g_ref_scores[i], y = g_ref_scores[j];
    int xn = isnan(x), yn = isnan(y);
    if (xn != yn) return xn ? 1 : -1;
    if (!xn && x != y) return x > y ? -1 : 1;
    return i < j ? -1 : 1;
}

static int ref_int_cmp(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    return (i > j) - (i < j);
}

float ig_ref_page_bound(const float *q, const float *kmin, const float *kmax, int hd) {
    double s = 0;
    for (int i = 0; i < hd; i++) {
        double a = (double)q[i] * kmin[i], b = (double)q[i] * kmax[i];
        s += a > b ? a : b;
    }
    return (float)s;
}

int64_t ig_ref_topk(const float *s, int64_t n, int64_t k, int32_t *idx_out) {
    if (k <= 0 || n <= 0) return 0;
    if (k > n) k = n;
    int32_t *order = malloc((size_t)n * sizeof *order);
    IG_ASSERT(order);
    for (int64_t i = 0; i < n; i++) order[i] = (int32_t)i;
    g_ref_scores = s;
    qsort(order, (size_t)n, sizeof *order, ref_topk_rank);
    qsort(order, (size_t)k, sizeof *order, ref_int_cmp);
    memcpy(idx_out, order, (size_t)k * sizeof *order);
    free(order);
    return k;
}

/* ---- KV quantization (the definition of the format in kvquant.h) ----------------------------- */

/* x rounded to binary16 toward -inf (up = 0) or +inf (up = 1): round to nearest, then one step. */
static uint16_t ref_f16_directed(float x, int up) {
    uint16_t h = ig_f32_to_f16(x);
    float f = ig_f16_to_f32(h);
    if (!up && f > x) h = h == 0x0000 ? 0x8001 : (h & 0x8000) ? h + 1 : h - 1;
    if (up && f < x) h = h == 0x8000 ? 0x0001 : (h & 0x8000) ? h - 1 : h + 1;
    return h;
}

/* Into the f16 range; NaN becomes -65504 (fmaxf returns the number). */
static float ref_clamp_f16(float x) {
    return fminf(fmaxf(x, -65504.0f), 65504.0f);
}

void ig_ref_kvq_quantize_rows(const float *x, int64_t n_rows, int hd, int bits, int group,
                              uint8_t *out) {
    size_t rb = ig_kvq_row_bytes(hd, bits, group), bb = (size_t)(4 + group * bits / 8);
    IG_ASSERT(rb > 0);
    int L = (1 << bits) - 1;
    for (int64_t r = 0; r < n_rows; r++)
        for (int b = 0; b < hd / group; b++) {
            const float *xg = x + r * hd + b * group;
            uint8_t *blk = out + (size_t)r * rb + (size_t)b * bb;
            float lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < group; i++) {
                lo = fminf(lo, ref_clamp_f16(xg[i]));
                hi = fmaxf(hi, ref_clamp_f16(xg[i]));
            }
            lo += 0.0f; /* -0 -> +0 */
            hi += 0.0f;
            uint16_t mh = ref_f16_directed(lo, 0);
            float mn = ig_f16_to_f32(mh);
            uint16_t sh = ref_f16_directed((hi - mn) / (float)L, 1);
            float sc = ig_f16_to_f32(sh);
            float inv = sc > 0.0f ? 1.0f / sc : 0.0f;
            blk[0] = (uint8_t)(mh & 0xff);
            blk[1] = (uint8_t)(mh >> 8);
            blk[2] = (uint8_t)(sh & 0xff);
            blk[3] = (uint8_t)(sh >> 8);
            memset(blk + 4, 0, bb - 4);
            for (int i = 0; i < group; i++) {
                float t = (ref_clamp_f16(xg[i]) - mn) * inv;
                unsigned code = (unsigned)nearbyintf(fminf(fmaxf(t, 0.0f), (float)L));
                blk[4 + i * bits / 8] |= (uint8_t)(code << (i * bits % 8));
            }
        }
}

void ig_ref_kvq_dequantize_rows(const uint8_t *in, int64_t n_rows, int hd, int bits, int group,
                                float *out) {
    size_t rb = ig_kvq_row_bytes(hd, bits, group), bb = (size_t)(4 + group * bits / 8);
    IG_ASSERT(rb > 0);
    for (int64_t r = 0; r < n_rows; r++)
        for (int b = 0; b < hd / group; b++) {
            const uint8_t *blk = in + (size_t)r * rb + (size_t)b * bb;
            float mn = ig_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
            float sc = ig_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
            for (int i = 0; i < group; i++) {
                unsigned code = (blk[4 + i * bits / 8] >> (i * bits % 8)) & ((1u << bits) - 1u);
                out[r * hd + b * group + i] = fmaf((float)code, sc, mn);
            }
        }
}

int32_t ig_ref_sample_argmax(const float *logits, int64_t n) {
    int32_t best = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(logits[i])) continue;
        if (best < 0 || logits[i] > logits[best]) best = (int32_t)i;
    }
    return best < 0 ? 0 : best;
}

static const float *g_ref_logits; /* for the qsort comparator; the reference is single-threaded */

static int ref_rank(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float li = isnan(g_ref_logits[i]) ? -INFINITY : g_ref_logits[i];
    float lj = isnan(g_ref_logits[j]) ? -INFINITY : g_ref_logits[j];
    if (li != lj) return li > lj ? -1 : 1;
    return i < j ? -1 : 1;
}

int32_t ig_ref_sample(const float *logits, int64_t n, float temperature, float top_p, ig_rng *rng) {
    int32_t best = ig_ref_sample_argmax(logits, n);
    if (!(temperature > 0.0f) || !(top_p > 0.0f)) return best;
    float mx = logits[best] / temperature;
    if (!isfinite(mx)) return best;
    /* Unnormalised weights e_i = exp(l_i / T - max) in f32, as ig_sample (same token for a seed).
     */
    float *e = malloc((size_t)n * sizeof *e);
    int32_t *order = malloc((size_t)n * sizeof *order);
    IG_ASSERT(e && order);
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        float ei = expf(logits[i] / temperature - mx);
        e[i] = isnan(ei) ? 0.0f : ei;
        total += e[i];
        order[i] = (int32_t)i;
    }
    double u = ig_rng_uniform(rng);
    int64_t kept = n;
    if (top_p < 1.0f) {
        g_ref_logits = logits;
        qsort(order, (size_t)n, sizeof *order, ref_rank);
        /* Keep rank k iff the probability mass ranked before it is below top_p. */
        double before = 0;
        kept = 0;
        while (kept < n && (kept == 0 || before < (double)top_p * total))
            before += e[order[kept++]];
    }
    double kept_mass = 0;
    for (int64_t j = 0; j < kept; j++) kept_mass += e[order[j]];
    double r = u * kept_mass, c = 0;
    int32_t tok = order[kept - 1];
    for (int64_t j = 0; j < kept; j++) {
        if (e[order[j]] <= 0.0f) continue;
        c += e[order[j]];
        if (c > r) {
            tok = order[j];
            break;
        }
    }
    /* top_p >= 1 walks index order; the last token with weight is the fallback. */
    if (c <= r)
        for (int64_t j = kept - 1; j >= 0; j--)
            if (e[order[j]] > 0.0f) {
                tok = order[j];
                break;
            }
    free(e);
    free(order);
    return tok;
}
