/* Token sampling: a seeded xoshiro256** generator (seeded through splitmix64), argmax, and
 * temperature + nucleus (top-p) sampling. Deterministic for a seed on every machine: the order of
 * tokens is a total order (logit, then index) and the arithmetic is scalar, no SIMD, no threads. */
#include <math.h>
#include <stdlib.h>

#include "core/base/status.h"
#include "kernels/cpu/cpu_kernels.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ig_rng_seed(ig_rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t ig_rng_next(ig_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ig_rng_uniform(ig_rng *rng) {
    return (double)(ig_rng_next(rng) >> 11) * 0x1.0p-53;
}

int32_t ig_sample_argmax(const float *logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
    return (int32_t)best;
}

/* Descending logit (NaN ranks as -inf), then ascending index: a total order, so the sort is
 * reproducible whatever qsort does with equal keys. qsort takes no context: the logits being ranked
 * are passed in a thread-local. */
static _Thread_local const float *t_sort_logits;

static int cmp_rank(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float li = t_sort_logits[i], lj = t_sort_logits[j];
    if (isnan(li)) li = -INFINITY;
    if (isnan(lj)) lj = -INFINITY;
    if (li > lj) return -1;
    if (li < lj) return 1;
    return (i > j) - (i < j);
}

int32_t ig_sample(const float *logits, int64_t n, float temperature, float top_p, ig_rng *rng,
                  float *ws, int32_t *idx) {
    IG_ASSERT(n > 0 && n <= INT32_MAX);
    int32_t best = ig_sample_argmax(logits, n);
    if (!(temperature > 0.0f) || !(top_p > 0.0f)) return best;
    /* softmax(logits / T) as Hugging Face: divide, subtract the max, exp, normalise. */
    float mx = logits[best] / temperature;
    if (!isfinite(mx)) return best;
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(logits[i] / temperature - mx);
        ws[i] = isnan(e) ? 0.0f : e;
        total += ws[i];
    }
    double u = ig_rng_uniform(rng);
    if (!(top_p < 1.0f)) {
        /* Every token: walk in index order. */
        double r = u * total, c = 0;
        int32_t last = best;
        for (int64_t i = 0; i < n; i++) {
            if (ws[i] <= 0.0f) continue;
            c += ws[i];
            last = (int32_t)i;
            if (c > r) return (int32_t)i;
        }
        return last;
    }
    /* Nucleus. The kept set is a prefix of the rank order; every token of probability >= cut is
     * ranked before every token below it, and tokens below cut hold less than 1 - top_p in all,
     * so if the tokens >= cut reach top_p the nucleus lies among them: sort only those. */
    double target = (double)top_p * total; /* masses below are unnormalised, like ws */
    double cut = (1.0 - (double)top_p) / (double)n * total;
    int64_t m = 0;
    double cand_mass = 0;
    for (int64_t i = 0; i < n; i++)
        if ((double)ws[i] >= cut) {
            idx[m++] = (int32_t)i;
            cand_mass += ws[i];
        }
    if (!(cand_mass >= target)) { /* rounding left the candidates short: rank everything */
        m = 0;
        for (int64_t i = 0; i < n; i++) idx[m++] = (int32_t)i;
    }
    t_sort_logits = logits;
    qsort(idx, (size_t)m, sizeof *idx, cmp_rank);
    /* Keep token k iff the mass ranked before it is < top_p (at least one token). */
    int64_t kept = 0;
    double before = 0;
    while (kept < m && (kept == 0 || before < target)) before += ws[idx[kept++]];
    double r = u * before, c = 0;
    for (int64_t j = 0; j < kept; j++) {
        c += ws[idx[j]];
        if (c > r) return idx[j];
    }
    for (int64_t j = kept - 1; j > 0; j--) /* rounding: the last kept token with weight */
        if (ws[idx[j]] > 0.0f) return idx[j];
    return idx[0];
}
