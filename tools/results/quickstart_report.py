#!/usr/bin/env python3
"""The main job's results page: two runs of configs/experiments/quickstart.yaml side by side.

Reads RUN1/results.jsonl and RUN2/results.jsonl (two `igen run` of the quickstart, one after the
other on an idle machine) and prints Markdown:
  - per run, every measured point: prompt length, policy, decode throughput (median of the repeats)
    with its 95% interval and min-max, the noisy flag, the speedup over full fetch (median of the
    per-round ratios), the fraction of KV rows fetched, prefill time, perplexity, and the modeled
    twin's prediction with predicted / measured;
  - the stability check the issue asks for: is every point's median inside the other run's 95%
    interval, both the confidence interval of the mean (`ci95`) and the prediction interval for
    another run's median (`pi95`), beside what a machine whose speed holds perfectly still would
    score on the same check (a seeded simulation: every repeat an independent normal draw), and
    is the policy ordering by decode throughput at each prompt length the same in both runs;
  - per point, the largest share of a repeat's CPU time stolen by the hypervisor (cpu_steal_frac_max),
    which is what explains a VM's speed changing between repeats or runs.

Usage: tools/results/quickstart_report.py RUN1 RUN2 [--plot PNG] > docs/results/quickstart.md
Nothing is fitted or chosen after looking: every number is read from the records as written.
"""
import argparse
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stats"))
import median_variance  # noqa: E402  (tools/stats/median_variance.py: Var(median of n normals))

# t(0.975, df), df = 1 .. 30: the table of core/app/exp/stats.c
T975 = [12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010,
        2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739,
        2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423]


def load(d):
    recs = []
    with open(os.path.join(d, "results.jsonl"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    return recs


def key(r):
    c = r["config"]
    return (c["workload"]["prompt_len"], c["policy"]["name"])


def table(recs):
    meas = {key(r): r for r in recs if r.get("mode") == "measured" and r.get("status") == "ok"}
    mod = {key(r): r for r in recs if r.get("mode") == "modeled" and r.get("status") == "ok"}
    return meas, mod


def fmt(x, p=1):
    return "-" if x is None else f"{x:.{p}f}"


def steal(m):
    """The largest share of a repeat's CPU time the hypervisor gave to other guests, in percent
    ("-" for records made before igen recorded it)."""
    x = m.get("cpu_steal_frac_max")
    return "-" if x is None else f"{100 * x:.0f}%"


def run_rows(meas, mod):
    out = ["| prompt | policy | decode tok/s | 95% CI | min-max | noisy | max steal | vs full "
           "| KV rows fetched | prefill s | ppl | modeled tok/s | pred/meas |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in sorted(meas):
        m = meas[k]["metrics"]
        st = m.get("decode_throughput_tok_s_stats", {})
        ci = st.get("ci95", [None, None])
        sp = m.get("speedup", {}).get("decode_throughput_tok_s", {}).get("median")
        md = mod.get(k, {}).get("metrics", {}).get("decode_throughput_tok_s")
        v = m.get("decode_throughput_tok_s")
        out.append(
            f"| {k[0]} | {k[1]} | {fmt(v)} | {fmt(ci[0])}-{fmt(ci[1])} | "
            f"{fmt(st.get('min'))}-{fmt(st.get('max'))} | {'yes' if m.get('noisy') else ''} | "
            f"{steal(m)} | {fmt(sp, 2)}x | {fmt(m.get('kv_read_fraction'), 3)} | {fmt(m.get('prefill_s'))} | "
            f"{fmt(m.get('ppl'), 2)} | {fmt(md)} | {fmt(md / v if md and v else None, 2)} |")
    return out


def order(meas, P):
    pts = [(meas[k]["metrics"]["decode_throughput_tok_s"], k[1]) for k in meas if k[0] == P]
    return [p for _, p in sorted(pts, reverse=True)]


def rank_order(meas, P):
    """The ordering the repeats support (metrics.rank: a point is faster than another only when
    the 95% interval of the geometric mean of their per-round ratios lies above 1): points of equal rank in braces,
    fastest first; None when the records have no ranks."""
    pts = [(meas[k]["metrics"].get("rank", {}).get("rank"), k[1]) for k in meas if k[0] == P]
    if not pts or any(r is None for r, _ in pts):
        return None
    groups = {}
    for r, p in pts:
        groups.setdefault(r, []).append(p)
    return [sorted(groups[r]) for r in sorted(groups)]


def faster_pairs(meas, P):
    """(a, b) for every pair where a is faster than b with significance at prompt length P."""
    by_point = {meas[k]["point"]: k[1] for k in meas if k[0] == P}
    out = set()
    for k in meas:
        if k[0] != P:
            continue
        for j in meas[k]["metrics"].get("rank", {}).get("slower_points", []):
            if j in by_point:
                out.add((k[1], by_point[j]))
    return out


def median_var(n):
    xs, ph, F = median_variance.grid()
    return median_variance.median_var(n, xs, ph, F)


def steady_machine(points, n, trials=20000, seed=1):
    """The stability check on a machine whose speed holds perfectly still: two runs of `points`
    points, n repeats each, every repeat an independent standard normal draw (the check does not
    depend on the mean or the spread). Per interval kind ("ci", "pi"): the mean number of the
    2 * points checks missed, the share of pairs of runs with no miss, and the miss count k such
    that a steady machine misses at most k in at least 95% of pairs; and a function giving the
    share of pairs with at least k misses."""
    rng = random.Random(seed)
    t = T975[n - 2]
    v = median_var(n)
    misses = {"ci": [], "pi": []}

    def run():
        x = [rng.gauss(0, 1) for _ in range(n)]
        srt = sorted(x)
        med = srt[n // 2] if n % 2 else 0.5 * (srt[n // 2 - 1] + srt[n // 2])
        m = sum(x) / n
        sd = math.sqrt(sum((y - m) ** 2 for y in x) / (n - 1))
        return med, m, t * sd / math.sqrt(n), t * sd * math.sqrt(1 / n + v)

    for _ in range(trials):
        c = {"ci": 0, "pi": 0}
        for _ in range(points):
            a, b = run(), run()
            for (med, _, _, _), (_, m, hc, hp) in ((a, b), (b, a)):
                c["ci"] += abs(med - m) > hc
                c["pi"] += abs(med - m) > hp
        for kind in c:
            misses[kind].append(c[kind])
    out = {}
    for kind, xs in misses.items():
        xs.sort()
        out[kind] = {"mean": sum(xs) / trials, "none": xs.count(0) / trials,
                     "q95": xs[int(0.95 * trials)],
                     "at_least": (lambda xs: lambda k: sum(1 for y in xs if y >= k) / len(xs))(xs)}
    return out


def contradictions(m1, m2, P):
    """Pairs ordered one way with significance in run 1 and the other way in run 2."""
    f1, f2 = faster_pairs(m1, P), faster_pairs(m2, P)
    return sorted((a, b) for a, b in f1 if (b, a) in f2)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run1")
    ap.add_argument("run2")
    ap.add_argument("--plot", default=None, help="the plot to show (a path relative to the page)")
    a = ap.parse_args()
    runs = [table(load(a.run1)), table(load(a.run2))]
    r0 = next(r for r in load(a.run1) if r.get("mode") == "measured")
    mach = r0.get("machine", {})
    print("# The main job: decode throughput under a PCIe-like KV link, measured and modeled\n")
    print("Generated by `tools/results/quickstart_report.py` from two runs of the quickstart")
    print("(`configs/experiments/quickstart.yaml`), one after the other on an idle machine: "
          f"{mach.get('cpu', '?')}, {mach.get('cores', '?')} cores, igen {r0.get('git_commit', '?')}.")
    w = r0["config"]["workload"]
    print(f"SmolLM2-135M (f32), batch {w['batch']}, {w['gen_len']} decode steps per repeat, the whole "
          "KV cache homed in host memory")
    print("behind the link model at 12 GB/s each way + 10 us (every fetched row is counted and")
    print("timed), 3 repeats per point interleaved over the policies, each point prefilled once and")
    print("its repeats decoding on (`measure.prefill: once`). The modeled column is the cost model's")
    print("prediction for the same setting from a profile of this machine made by the run")
    print("(`hardware: this`, the link replaced by the same model).\n")
    if a.plot:
        print(f"![decode throughput vs sequence length]({a.plot})\n")
    for i, (meas, mod) in enumerate(runs):
        print(f"## Run {i + 1}\n")
        print("\n".join(run_rows(meas, mod)))
        print()
    print("## Stability: run 1 against run 2\n")
    print("CI: the 95% confidence interval of the mean (`ci95`; the plot's bars are the min-max); PI: the 95%")
    print("prediction interval for another run's median (`pi95`, docs/config.md).\n")
    print("| prompt | policy | median 1 | CI 2 | in | PI 2 | in | median 2 | CI 1 | in | PI 1 | in |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    n = 0
    ok = {"ci": 0, "pi": 0}
    reps = None
    (m1, _), (m2, _) = runs
    for k in sorted(set(m1) & set(m2)):
        a1, a2 = m1[k]["metrics"], m2[k]["metrics"]
        v1, v2 = a1["decode_throughput_tok_s"], a2["decode_throughput_tok_s"]
        s1 = a1.get("decode_throughput_tok_s_stats", {})
        s2 = a2.get("decode_throughput_tok_s_stats", {})
        reps = s1.get("n", reps)
        c1, c2 = s1.get("ci95", [v1, v1]), s2.get("ci95", [v2, v2])
        p1, p2 = s1.get("pi95"), s2.get("pi95")
        if p1 is None or p2 is None:
            sys.exit(f"{k}: the records have no pi95 (made before igen wrote it): rerun the quickstart")
        row = [f"{k[0]}", k[1], f"{v1:.1f}"]
        for iv, x in ((c2, v1), (p2, v1)):
            inside = iv[0] <= x <= iv[1]
            row += [f"{iv[0]:.1f}-{iv[1]:.1f}", "yes" if inside else "NO"]
        row.append(f"{v2:.1f}")
        for iv, x in ((c1, v2), (p1, v2)):
            inside = iv[0] <= x <= iv[1]
            row += [f"{iv[0]:.1f}-{iv[1]:.1f}", "yes" if inside else "NO"]
        ok["ci"] += (c2[0] <= v1 <= c2[1]) + (c1[0] <= v2 <= c1[1])
        ok["pi"] += (p2[0] <= v1 <= p2[1]) + (p1[0] <= v2 <= p1[1])
        n += 2
        print("| " + " | ".join(row) + " |")
    print()
    if reps and 2 <= reps <= 31:
        sm = steady_machine(n // 2, reps)
        print(f"The same check on a machine whose speed holds perfectly still ({n // 2} points, {reps} "
              "repeats, every repeat an")
        print("independent normal draw; 20000 simulated pairs of runs, seed 1, "
              "`steady_machine` in this script):\n")
        print(f"| interval | medians inside, observed | misses, observed | misses, steady machine: "
              f"mean | 95% of steady pairs miss at most | steady pairs with no miss | "
              f"steady pairs missing at least as many as observed |")
        print("|---|---|---|---|---|---|---|")
        for kind, name in (("ci", "CI of the mean"), ("pi", "PI of another run's median")):
            st, miss = sm[kind], n - ok[kind]
            print(f"| {name} | {ok[kind]} of {n} | {miss} | {st['mean']:.1f} | {st['q95']} | "
                  f"{100 * st['none']:.0f}% | {100 * st['at_least'](miss):.1f}% |")
        print()
        # the check a correct tool passes 95% of the time on a machine that holds still: no more
        # PI misses than 95% of steady pairs show ("every median inside", taken literally, fails
        # most steady pairs: the "no miss" column)
        pm, pq = n - ok["pi"], sm["pi"]["q95"]
        print(f"Reproducible as a steady machine would be (PI misses at most the 95th percentile of "
              f"steady pairs, {pq}): **{'yes' if pm <= pq else 'NO'}** ({pm} missed).\n")
    # the speedups over the baseline, computed round by round within a run (both policies of a
    # round run back to back): what a paper reports, and what drift between runs cancels from
    sp_rows, sp_n, sp_ok = [], 0, {"ci": 0, "pi": 0}
    for k in sorted(set(m1) & set(m2)):
        s1 = m1[k]["metrics"].get("speedup", {})
        s2 = m2[k]["metrics"].get("speedup", {})
        if s1.get("baseline_point") is None or k[1] == s1.get("baseline"):
            continue
        d1, d2 = s1.get("decode_throughput_tok_s", {}), s2.get("decode_throughput_tok_s", {})
        if "pi95" not in d1 or "pi95" not in d2:
            continue
        v1, v2 = d1["median"], d2["median"]
        row = [f"{k[0]}", k[1], f"{v1:.3f}"]
        for iv, x in ((d2["ci95"], v1), (d2["pi95"], v1)):
            row += [f"{iv[0]:.3f}-{iv[1]:.3f}", "yes" if iv[0] <= x <= iv[1] else "NO"]
        row.append(f"{v2:.3f}")
        for iv, x in ((d1["ci95"], v2), (d1["pi95"], v2)):
            row += [f"{iv[0]:.3f}-{iv[1]:.3f}", "yes" if iv[0] <= x <= iv[1] else "NO"]
        sp_ok["ci"] += (d2["ci95"][0] <= v1 <= d2["ci95"][1]) + (d1["ci95"][0] <= v2 <= d1["ci95"][1])
        sp_ok["pi"] += (d2["pi95"][0] <= v1 <= d2["pi95"][1]) + (d1["pi95"][0] <= v2 <= d1["pi95"][1])
        sp_n += 2
        sp_rows.append("| " + " | ".join(row) + " |")
    if sp_rows:
        base = next(iter(m1.values()))["metrics"].get("speedup", {}).get("baseline", "?")
        print(f"The speedups over {base} (per round, median of the rounds), the same check:\n")
        print("| prompt | policy | speedup 1 | CI 2 | in | PI 2 | in | speedup 2 | CI 1 | in | PI 1 | in |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(sp_rows))
        print()
        if reps and 2 <= reps <= 31:
            sm = steady_machine(sp_n // 2, reps)
            print(f"Speedups inside the other run's interval: CI {sp_ok['ci']} of {sp_n} (a steady machine "
                  f"misses {sm['ci']['mean']:.1f} on average, at most {sm['ci']['q95']} in 95% of pairs), PI "
                  f"{sp_ok['pi']} of {sp_n} ({sm['pi']['mean']:.1f}, at most {sm['pi']['q95']}).\n")
    print("| prompt | ordering, run 1 (fastest first) | ordering, run 2 | same |")
    print("|---|---|---|---|")
    for P in sorted({k[0] for k in m1}):
        o1, o2 = order(m1, P), order(m2, P)
        print(f"| {P} | {' > '.join(o1)} | {' > '.join(o2)} | {'yes' if o1 == o2 else 'NO'} |")
    print()
    ranked = [P for P in sorted({k[0] for k in m1}) if rank_order(m1, P) and rank_order(m2, P)]
    if ranked:
        print("The ordering the repeats support (`metrics.rank`: a policy is faster than another")
        print("only when the 95% t-interval of the geometric mean of their per-round speed ratios")
        print("lies above 1; a policy's rank is 1 + the number of policies faster than it, so equal")
        print("ranks share braces. Ranks are not a total order: a group above another does not mean")
        print("that every pair between them is separated, so the separated pairs of each run are")
        print("listed too, and the last column is the real check: a pair separated one way in run 1")
        print("and the other way in run 2):\n")
        print("| prompt | ranks, run 1 | ranks, run 2 | separated, run 1 | separated, run 2 | "
              "pairs ordered oppositely |")
        print("|---|---|---|---|---|---|")
        for P in ranked:
            r1, r2 = rank_order(m1, P), rank_order(m2, P)
            s1 = " > ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in r1)
            s2 = " > ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in r2)
            bad = contradictions(m1, m2, P)
            sep = [", ".join(a + " > " + b for a, b in sorted(faster_pairs(m, P))) or "none"
                   for m in (m1, m2)]
            print(f"| {P} | {s1} | {s2} | {sep[0]} | {sep[1]} | "
                  f"{', '.join(a + ' > ' + b for a, b in bad) or 'none'} |")
        print()


if __name__ == "__main__":
    sys.exit(main())
