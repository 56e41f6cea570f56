/* Element-wise and row-wise kernels: embedding lookup, RMSNorm, LayerNorm, RoPE, activations,
 * softmax and log-probability. Row kernels go parallel only when a call carries enough work to pay
 * for a fork/join; RoPE keeps Hugging Face's exact f32 operation order (no fused multiply-add). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

/* Elements of work below which a row kernel stays on one thread. */
#define OPS_MIN_PER_THREAD (32 * 1024)

void ig_cpu_embed(const void *table, ig_dtype ttype, int64_t dim, const int32_t *ids, int64_t n,
                  float *out) {
    IG_ASSERT(ig_dtype_is_weight_storage(ttype) && ig_dtype_row_ok(ttype, dim));
    const ig_vec_ops *v = ig_cpu_vec();
    size_t row_bytes = ig_dtype_row_bytes(ttype, dim);
    for (int64_t i = 0; i < n; i++) {
        IG_ASSERT(ids[i] >= 0);
        const char *row = (const char *)table + (size_t)ids[i] * row_bytes;
        if (ig_dtype_is_quant(ttype))
            ig_cpu_dequant_row(ttype, row, out + i * dim, dim);
        else
            v->widen(row, ttype, dim, out + i * dim);
    }
}

void ig_cpu_rmsnorm(const float *x, const float *w, int64_t rows, int64_t dim, float eps,
                    float *y) {
    const ig_vec_ops *v = ig_cpu_vec();
    int nt = ig_cpu_threads_for(rows * dim, OPS_MIN_PER_THREAD);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        /* Hugging Face: x * rsqrt(mean(x^2) + eps), then weight * that, all f32. */
        float inv = 1.0f / sqrtf(v->sumsq(xr, dim) / (float)dim + eps);
        for (int64_t i = 0; i < dim; i++) yr[i] = w[i] * (xr[i] * inv);
    }
}

void ig_cpu_layernorm(const float *x, const float *w, const float *b, int64_t rows, int64_t dim,
                      float eps, float *y) {
    int nt = ig_cpu_threads_for(rows * dim, OPS_MIN_PER_THREAD);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        /* Two passes (mean, then centred squares) in double: no cancellation for large means. */
        double mean = 0;
        for (int64_t i = 0; i < dim; i++) mean += xr[i];
        mean /= (double)dim;
        double var = 0;
        for (int64_t i = 0; i < dim; i++) {
            double d = xr[i] - mean;
            var += d * d;
        }
        var /= (double)dim;
        double inv = 1.0 / sqrt(var + (double)eps);
        for (int64_t i = 0; i < dim; i++) {
            float t = (float)((xr[i] - mean) * inv); /* the mean need not be an f32 */
            yr[i] = b ? t * w[i] + b[i] : t * w[i];
        }
    }
}

void ig_cpu_rope_table(float theta, int rot_dim, int64_t max_pos, float *cos_tab, float *sin_tab) {
    int half = rot_dim / 2;
    for (int i = 0; i < half; i++) {
        /* torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), every step in f32. */
        float e = (float)(2 * i) / (float)rot_dim;
        float p = powf(theta, e);
        float inv_freq = 1.0f / p;
        for (int64_t pos = 0; pos < max_pos; pos++) {
            float angle = (float)pos * inv_freq;
            cos_tab[pos * half + i] = cosf(angle);
            sin_tab[pos * half + i] = sinf(angle);
        }
    }
}

void ig_cpu_rope(float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                 const int32_t *pos, const float *cos_tab, const float *sin_tab) {
    int half = rot_dim / 2;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *c = cos_tab + (int64_t)pos[t] * half;
        const float *s = sin_tab + (int64_t)pos[t] * half;
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + (t * n_heads + h) * (int64_t)head_dim;
            for (int i = 0; i < half; i++) {
                /* q*cos + rotate_half(q)*sin as torch rounds it: two products, then the sum. Kept
                 * in separate statements so that no compiler contracts them into an FMA. */
                float x1 = xh[i], x2 = xh[i + half];
                float a1 = x1 * c[i];
                float b1 = x2 * s[i];
                float a2 = x2 * c[i];
                float b2 = x1 * s[i];
                xh[i] = a1 - b1;
                xh[i + half] = a2 + b2;
            }
        }
    }
}

void ig_cpu_silu_mul(const float *gate, const float *up, int64_t n, float *out) {
    const ig_vec_ops *v = ig_cpu_vec();
    int nt = ig_cpu_threads_for(n, 4 * OPS_MIN_PER_THREAD);
    if (nt <= 1) {
        v->silu_mul(gate, up, n, out);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), k = omp_get_num_threads();
        int64_t i0 = n * t / k / 16 * 16, i1 = t == k - 1 ? n : n * (t + 1) / k / 16 * 16;
        v->silu_mul(gate + i0, up + i0, i1 - i0, out + i0);
    }
}

void ig_cpu_relu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0.0f ? 0.0f : x[i]; /* NaN stays NaN, as torch */
}

void ig_cpu_gelu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

void ig_cpu_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void ig_cpu_scale(float *x, float s, int64_t n) {
    ig_cpu_vec()->scale(x, s, n);
}

void ig_cpu_softmax(float *x, int64_t n) {
    ig_cpu_softmax_row(ig_cpu_vec(), x, n);
}

double ig_cpu_log_prob(const float *logits, int64_t n, int32_t target) {
    IG_ASSERT(target >= 0 && target < n);
    const ig_vec_ops *v = ig_cpu_vec();
    float m = v->max(logits, n);
    if (!isfinite(m)) return NAN; /* all -inf, or an inf/NaN logit: no finite answer */
    double s = v->exp_sub_sum_f64(logits, n, m);
    return (double)logits[target] - (double)m - log(s);
}
