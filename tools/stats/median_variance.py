#!/usr/bin/env python3
"""Variance of the median of n independent standard normal samples, n = 1 .. 30, by numerical
integration of the order statistics' densities (standard library only), and a check by
simulation that the prediction interval built from it covers another run's median 95% of the
time. The table is core/app/exp/stats.c's k_median_var; rerun to reproduce it:

    tools/stats/median_variance.py            # the table as C, then the coverage check
    tools/stats/median_variance.py --check 0  # the table only

The prediction interval (docs/config.md, "Repeats, intervals, noise"): from n repeats with mean
m and sample standard deviation s, another run's median of n repeats lies in
m -/+ t(0.975, n-1) s sqrt(1/n + v_n) with probability 0.95 when the repeats are independent
normal draws (any mean and variance): the t-approximation of a pivot whose numerator is not
exactly normal; the simulation below measures its real coverage.
"""
import argparse
import math
import random

H = 0.002  # grid step
LO, HI = -9.0, 9.0


def phi(x):
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def log_fact(k):
    return math.lgamma(k + 1)


def grid():
    n = int(round((HI - LO) / H))
    xs = [LO + i * H for i in range(n + 1)]
    return xs, [phi(x) for x in xs], [cdf(x) for x in xs]


def simpson_weights(m):
    """Composite Simpson weights for m+1 points (m even)."""
    w = [H / 3 * (4 if i % 2 else 2) for i in range(m + 1)]
    w[0] = w[m] = H / 3
    return w


def median_var(n, xs, ph, F):
    m = len(xs) - 1
    w = simpson_weights(m)
    if n % 2:
        k = (n + 1) // 2
        lc = log_fact(n) - log_fact(k - 1) - log_fact(n - k)
        s = 0.0
        for i, x in enumerate(xs):
            if F[i] <= 0 or F[i] >= 1:
                continue
            d = math.exp(lc + (k - 1) * math.log(F[i]) + (n - k) * math.log(1 - F[i])) * ph[i]
            s += w[i] * x * x * d
        return s
    # even n: the mean of order statistics k and k+1
    k = n // 2
    lc1 = log_fact(n) - log_fact(k - 1) - log_fact(n - k)  # density of X_k
    e2 = 0.0
    for i, x in enumerate(xs):
        if 0 < F[i] < 1:
            e2 += w[i] * x * x * math.exp(lc1 + (k - 1) * math.log(F[i]) + (n - k) * math.log(1 - F[i])) * ph[i]
    # E[X_k X_{k+1}]: joint density c F(x)^(k-1) (1-F(y))^(n-k-1) phi(x) phi(y), x < y
    lc2 = log_fact(n) - log_fact(k - 1) - log_fact(n - k - 1)
    inner = 0.0  # running trapezoid integral over x < y of x F(x)^(k-1) phi(x)
    prev = None
    exy = 0.0
    for i, y in enumerate(xs):
        g = y * (F[i] ** (k - 1)) * ph[i]
        if prev is not None:
            inner += 0.5 * H * (prev + g)
        prev = g
        if F[i] < 1:
            exy += w[i] * y * ((1 - F[i]) ** (n - k - 1)) * ph[i] * inner * math.exp(lc2)
    # Var((X_k + X_{k+1}) / 2) with E[X_k^2] = E[X_{k+1}^2] by symmetry, means 0
    return (2 * e2 + 2 * exy) / 4


def t975(df):
    table = [12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281]
    return table[df - 1]


def coverage(n, v, trials, rng):
    t = t975(n - 1)
    hit = 0
    for _ in range(trials):
        a = [rng.gauss(0, 1) for _ in range(n)]
        b = sorted(rng.gauss(0, 1) for _ in range(n))
        mb = b[n // 2] if n % 2 else 0.5 * (b[n // 2 - 1] + b[n // 2])
        m = sum(a) / n
        s = math.sqrt(sum((x - m) ** 2 for x in a) / (n - 1))
        h = t * s * math.sqrt(1 / n + v)
        hit += m - h <= mb <= m + h
    return hit / trials


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", type=int, default=100000, help="simulated pairs per n for the coverage check (0: none)")
    args = ap.parse_args()
    xs, ph, F = grid()
    vs = [median_var(n, xs, ph, F) for n in range(1, 31)]
    print("/* Var(median of n standard normal samples), n = 1 .. 30: tools/stats/median_variance.py */")
    print("static const double k_median_var[30] = {")
    for i in range(0, 30, 5):
        print("    " + ", ".join(f"{v:.6f}" for v in vs[i:i + 5]) + ",")
    print("};")
    print(f"/* n = 30: {vs[29]:.6f}; the asymptote pi / (2 n) = {math.pi / 60:.6f} */")
    if args.check:
        rng = random.Random(12345)
        for n in (2, 3, 5, 10):
            c = coverage(n, vs[n - 1], args.check, rng)
            print(f"coverage of another run's median, n = {n}: {c:.4f} ({args.check} simulated pairs)")


if __name__ == "__main__":
    main()
