#!/usr/bin/env python3
"""The equal-budget comparison page of an `igen run` of configs/experiments/policy-frontier.yaml.

Reads RESULTS_DIR/results.jsonl (the records of policy-active perplexity runs; see
docs/config.md for the ppl_* metrics) and prints Markdown:
  - per text, every point: policy, its parameters, the measured fraction of KV rows read over all
    layers and in the policy's selected layers, perplexity and its change against `full` of the
    same run, the metadata a GPU would hold (as a fraction of the KV cache), and whether the point
    lies on the Pareto front (no other point reads as little or less with a lower perplexity);
  - the headline: per curve (a policy and its parameters other than the budget knobs, swept over its budget),
    perplexity at equal measured reads, interpolated linearly in log-perplexity between the two
    measured points around each read (never extrapolated: '-' outside a curve's range), ranked.

With --extra DIR (an `igen run` of configs/experiments/infinigen-sensitivity.yaml) a last section
compares InfiniGen's variants at one budget with the frontier's infinigen points at that budget.

Usage: tools/results/frontier.py RESULTS_DIR [--reads 0.15,0.25,0.4] [--extra DIR] > page.md
Nothing here is fitted: the reads are fixed before looking at the results, the same for every
text and policy.
"""
import argparse
import json
import math
import os
import sys


def load(path):
    recs = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("status") != "ok":
                continue
            recs[r["key"]] = r  # the last record of a key wins, as in igen
    return list(recs.values())


def num(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


# The parameters that set a policy's budget: a curve sweeps these and fixes every other one.
BUDGET_KNOBS = {"max_fetch", "heavy_ratio", "recent_ratio", "budget_ratio", "window_ratio"}


def curve_of(pol):
    params = pol.get("params") or {}
    text = ",".join(f"{k}={params[k]}" for k in sorted(params) if k not in BUDGET_KNOBS)
    return pol["name"] + (" " + text if text else "")


def params_of(pol):
    params = pol.get("params") or {}
    return ",".join(f"{k}={params[k]}" for k in sorted(params)) or "-"


def interp(points, x):
    """log-ppl linear in the read fraction between the measured points around x."""
    pts = sorted(points)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1 and x1 > x0:
            t = (x - x0) / (x1 - x0)
            return math.exp((1 - t) * math.log(y0) + t * math.log(y1))
    for x0, y0 in pts:
        if abs(x0 - x) < 1e-9:
            return y0
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results_dir")
    ap.add_argument("--reads", default="0.15,0.25,0.4",
                    help="measured read fractions (all layers) of the headline table")
    ap.add_argument("--extra", help="results of infinigen-sensitivity.yaml: a variants table")
    ap.add_argument("--extra-budget", type=float, default=0.2,
                    help="the frontier's max_fetch the variants are compared with")
    a = ap.parse_args()
    reads = [float(x) for x in a.reads.split(",")]
    recs = load(os.path.join(a.results_dir, "results.jsonl"))
    if not recs:
        sys.exit(f"frontier.py: no ok records in {a.results_dir}/results.jsonl")
    by_text = {}
    for r in recs:
        m = r.get("metrics", {})
        if "ppl" not in m:
            continue
        text = r["config"]["workload"].get("text") or "-"
        by_text.setdefault(text, []).append(r)

    r0 = recs[0]
    w = r0["config"]["workload"]
    ppl = w.get("ppl") or {}
    print(f"Experiment `{r0['experiment']}`, {len(recs)} points, igen {r0.get('igen_version')} "
          f"(commit {r0.get('git_commit')}), machine {r0.get('machine', {}).get('cpu', '?')}.")
    print(f"Windows of {ppl.get('ctx')} tokens, the first {ppl.get('prefill')} a prompt, "
          f"{ppl.get('windows')} windows per text; budgets are fractions of the sequence so far.")
    print("`read` is the measured fraction of KV rows attention read over all layers (the cost: "
          "what a GPU run moves), `read sel.` the same in the policy's selected layers (layers 2 "
          "and up for h2o, quest and infinigen here); `meta` the metadata a GPU run holds "
          "(partial keys, page bounds, scores) as a fraction of the KV cache. int4 reads every "
          "row at 4 bits (its bytes are about 14% of f32 rows).\n")

    for text, rs in by_text.items():
        name = os.path.basename(text)
        full = [r["metrics"]["ppl"] for r in rs if r["config"]["policy"]["name"] == "full"]
        base = full[0] if full else None
        pts = []
        for r in rs:
            m = r["metrics"]
            x = m.get("ppl_read_fraction", m.get("kv_read_fraction"))
            pts.append((x, m["ppl"], r))
        pts.sort(key=lambda p: (p[0], p[1]))
        front, best = set(), math.inf
        for x, y, r in pts:
            if y < best:
                best = y
                front.add(r["key"])
        print(f"## {name}\n")
        if base:
            print(f"`full` perplexity: {base:.3f}.\n")
        print("### At equal measured reads (the headline)\n")
        curves = {}
        for x, y, r in pts:
            curves.setdefault(curve_of(r["config"]["policy"]), []).append((x, y))
        print("| curve | " + " | ".join(f"ppl at read {x:g}" for x in reads) + " |")
        print("|---|" + "---|" * len(reads))
        rows = []
        for c, cp in curves.items():
            if len(cp) < 2:
                continue
            vals = [interp(cp, x) for x in reads]
            rows.append((c, vals))
        # rank by the middle read where every curve has a value, else by what exists
        mid = len(reads) // 2
        rows.sort(key=lambda cv: (cv[1][mid] is None, cv[1][mid] or 0))
        for c, vals in rows:
            cells = []
            for v in vals:
                if v is None:
                    cells.append("-")
                elif base:
                    cells.append(f"{v:.2f} ({100 * (v / base - 1):+.1f}%)")
                else:
                    cells.append(f"{v:.2f}")
            print(f"| {c} | " + " | ".join(cells) + " |")
        print()
        print("### Every point\n")
        print("| policy | params | read | read sel. | ppl | vs full | meta | Pareto |")
        print("|---|---|---|---|---|---|---|---|")
        for x, y, r in pts:
            m = r["metrics"]
            pol = r["config"]["policy"]
            sel = m.get("ppl_kv_read_fraction_selected_layers")
            meta = m.get("ppl_policy_meta_fraction")
            d = f"{100 * (y / base - 1):+.1f}%" if base else "-"
            print(f"| {pol['name']} | {params_of(pol)} | {x:.3f} | "
                  f"{'-' if sel is None else f'{sel:.3f}'} | {y:.3f} | {d} | "
                  f"{'-' if not meta else f'{meta:.3f}'} | {'yes' if r['key'] in front else ''} |")
        print()

    if a.extra:
        extra = load(os.path.join(a.extra, "results.jsonl"))
        print(f"## InfiniGen's choices at max_fetch {a.extra_budget:g}\n")
        print("Each row changes one thing against `fetch_rule=fixed` (the frontier's points at this "
              "budget are the first rows). `vs full` is against `full` of the frontier run.\n")
        texts = list(by_text)
        print("| variant | " + " | ".join(f"{os.path.basename(t)} ppl (vs full) | read sel." for t in texts) + " | meta |")
        print("|---|" + "---|---|" * len(texts) + "---|")
        rows = {}
        for r in [r for t in texts for r in by_text[t]] + extra:
            pol = r["config"]["policy"]
            if pol["name"] != "infinigen":
                continue
            pr = pol.get("params") or {}
            if r in extra or (pr.get("fetch_rule") == "fixed" and num(pr.get("max_fetch")) and
                              abs(float(pr["max_fetch"]) - a.extra_budget) < 1e-9):
                text = r["config"]["workload"].get("text") or "-"
                rows.setdefault(params_of(pol), {})[text] = r
        for v, per in rows.items():
            cells, meta = [], None
            for t in texts:
                r = per.get(t)
                if not r:
                    cells += ["-", "-"]
                    continue
                m = r["metrics"]
                full = [q["metrics"]["ppl"] for q in by_text[t] if q["config"]["policy"]["name"] == "full"]
                d = f" ({100 * (m['ppl'] / full[0] - 1):+.1f}%)" if full else ""
                sel = m.get("ppl_kv_read_fraction_selected_layers")
                cells += [f"{m['ppl']:.3f}{d}", "-" if sel is None else f"{sel:.3f}"]
                meta = m.get("ppl_policy_meta_fraction", meta)
            print(f"| {v} | " + " | ".join(cells) + f" | {'-' if meta is None else f'{meta:.3f}'} |")
        print()


if __name__ == "__main__":
    main()
