/* lm-evaluation-harness's metrics and their standard errors (lm_eval/api/metrics.py): argmax of
 * log-likelihoods (acc) or of log-likelihood per character (acc_norm), the sample standard error
 * of a mean, perplexity of per-item log-likelihoods and its bootstrap standard error; the answer
 * matching of the generated tasks (passkey's exact match, RULER's multi-value score). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/eval/eval.h"
#include "kernels/cpu/cpu_kernels.h"

int ig_eval_argmax(const double *ll, const double *lens, int n) {
    int best = 0;
    double bv = -INFINITY;
    for (int i = 0; i < n; i++) {
        double v = lens ? ll[i] / lens[i] : ll[i];
        if (v > bv) { /* numpy's argmax: the first of equal maxima */
            bv = v;
            best = i;
        }
    }
    return best;
}

double ig_eval_mean_stderr(const double *x, int n) {
    if (n < 2) return 0;
    double mu = 0;
    for (int i = 0; i < n; i++) mu += x[i];
    mu /= n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - mu) * (x[i] - mu);
    return sqrt(ss / (n - 1)) / sqrt((double)n);
}

double ig_eval_perplexity(const double *ll, int n) {
    if (n < 1) return NAN;
    double s = 0;
    for (int i = 0; i < n; i++) s += ll[i];
    return exp(-s / n);
}

double ig_eval_perplexity_stderr(const double *ll, int n, int iters, uint64_t seed) {
    if (n < 2 || iters < 2) return 0;
    ig_rng rng;
    ig_rng_seed(&rng, seed);
    double *ppl = malloc((size_t)iters * sizeof *ppl);
    if (!ppl) return NAN;
    for (int k = 0; k < iters; k++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += ll[ig_rng_next(&rng) % (uint64_t)n];
        ppl[k] = exp(-s / n);
    }
    double mu = 0;
    for (int k = 0; k < iters; k++) mu += ppl[k];
    mu /= iters;
    double ss = 0;
    for (int k = 0; k < iters; k++) ss += (ppl[k] - mu) * (ppl[k] - mu);
    free(ppl);
    return sqrt(ss / (iters - 1));
}

int ig_eval_digits_match(const char *text, long value, int digits) {
    const char *p = text;
    while (*p && (*p < '0' || *p > '9')) p++;
    long v = 0;
    int n = 0;
    for (; *p >= '0' && *p <= '9'; p++, n++)
        if (n < 18) v = v * 10 + (*p - '0');
    return n == digits && v == value;
}

double ig_eval_niah_score(const char *text, const int *values, int n) {
    if (n < 1) return 0;
    int found = 0;
    for (int i = 0; i < n; i++) {
        char v[24];
        snprintf(v, sizeof v, "%d", values[i]);
        found += strstr(text, v) != NULL;
    }
    return (double)found / n;
}
