/* lm-evaluation-harness's metrics and their standard errors (lm_eval/api/metrics.py): argmax of
 * log-likelihoods (acc) or of log-likelihood per character (acc_norm), the sample standard error
 * of a mean, perplexity of per-item log-likelihoods and its bootstrap standard error. */
#include <math.h>
#include <stdlib.h>

#include "core/eval/eval.h"
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
