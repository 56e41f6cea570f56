/* Summary statistics of repeated measurements: median, min, max, mean, standard deviation, a 95%
 * confidence interval of the mean (Student's t), a 95% prediction interval for another run's
 * median and the relative spread that marks a noisy point.
 * Pure functions over plain arrays (tests/test_exp.c checks them against hand calculations). */
#ifndef IG_EXP_STATS_H
#define IG_EXP_STATS_H

typedef struct ig_stats {
    int n;
    double median, min, max, mean;
    double sd;               /* sample standard deviation (n - 1); 0 for n = 1 */
    double ci95_lo, ci95_hi; /* mean -/+ t(0.975, n - 1) sd / sqrt(n); both the mean for n = 1 */
    /* 95% prediction interval for the median of another run of n repeats of the same point:
     * mean -/+ t(0.975, n - 1) sd sqrt(1/n + v_n), v_n the variance of the median of n standard
     * normal samples (ig_stats_median_var); both the mean for n = 1 */
    double pi95_lo, pi95_hi;
    double spread; /* (max - min) / median; 0 when the median is 0 */
} ig_stats;

/* Two-sided 95% quantile of Student's t with df degrees of freedom (df >= 1; 1.96 beyond 1000). */
double ig_stats_t975(int df);
/* Variance of the median of n independent standard normal samples (n >= 1): exact values for
 * n <= 30 (tools/stats/median_variance.py), pi / (2 n) beyond (its asymptote, slightly larger). */
double ig_stats_median_var(int n);
/* Summary of x[0 .. n) (n >= 1; x is not modified). */
void ig_stats_summarize(const double *x, int n, ig_stats *out);

#endif
