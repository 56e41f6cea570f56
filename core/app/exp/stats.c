/* Summary statistics of repeated measurements; see stats.h. */
#include "core/app/exp/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* t(0.975, df) for df = 1 .. 30 (standard tables), then a few anchors. */
static const double k_t975[30] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060,
                                  2.2622,  2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199,
                                  2.1098,  2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
                                  2.0595,  2.0555, 2.0518, 2.0484, 2.0452, 2.0423};

double ig_stats_t975(int df) {
    if (df < 1) return NAN;
    if (df <= 30) return k_t975[df - 1];
    if (df <= 40) return 2.0211;
    if (df <= 60) return 2.0003;
    if (df <= 120) return 1.9799;
    if (df <= 1000) return 1.9623;
    return 1.9600;
}

/* Var(median of n standard normal samples), n = 1 .. 30: tools/stats/median_variance.py */
static const double k_median_var[30] = {1.000000, 0.500000, 0.448671, 0.298200, 0.286834, 0.214743,
                                        0.210447, 0.168181, 0.166101, 0.138327, 0.137162, 0.117517,
                                        0.116799, 0.102168, 0.101695, 0.090376, 0.090047, 0.081029,
                                        0.080791, 0.073438, 0.073260, 0.067149, 0.067012, 0.061853,
                                        0.061746, 0.057333, 0.057247, 0.053429, 0.053359, 0.050023};

double ig_stats_median_var(int n) {
    if (n < 1) return NAN;
    if (n <= 30) return k_median_var[n - 1];
    return 3.14159265358979323846 / (2.0 * n);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void ig_stats_summarize(const double *x, int n, ig_stats *out) {
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n < 1) return;
    double small[64], *s = n <= 64 ? small : malloc((size_t)n * sizeof *s);
    if (!s) { /* without a copy: min, max and mean only */
        out->min = out->max = x[0];
        for (int i = 0; i < n; i++) {
            out->mean += x[i] / n;
            if (x[i] < out->min) out->min = x[i];
            if (x[i] > out->max) out->max = x[i];
        }
        out->median = out->ci95_lo = out->ci95_hi = out->pi95_lo = out->pi95_hi = out->mean;
        return;
    }
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_d);
    out->min = s[0];
    out->max = s[n - 1];
    out->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += s[i];
    out->mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (s[i] - out->mean) * (s[i] - out->mean);
    out->sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    double h = n > 1 ? ig_stats_t975(n - 1) * out->sd / sqrt((double)n) : 0;
    out->ci95_lo = out->mean - h;
    out->ci95_hi = out->mean + h;
    double hp = n > 1 ? ig_stats_t975(n - 1) * out->sd * sqrt(1.0 / n + ig_stats_median_var(n)) : 0;
    out->pi95_lo = out->mean - hp;
    out->pi95_hi = out->mean + hp;
    out->spread = out->median != 0 ? (out->max - out->min) / fabs(out->median) : 0;
    if (s != small) free(s);
}
