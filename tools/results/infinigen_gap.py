#!/usr/bin/env python3
"""Why InfiniGen is further from full attention on SmolLM2-135M than in the paper: ablations.

Same protocol as policy_ppl.py (WikiText-2 or PTB test, windows of 2048, prompt 256, teacher-forced decode
with the policy active), one variable at a time:

  oracle-0.2   the exact top-20% keys of the layer's own query per KV head (quest with pages of one
               token: its page bound is then the exact q.k; max over the group's query heads), layers
               0-1 dense like InfiniGen. The best any 20% selection of this kind can do.
  oracle-0.4   the same at 40%.
  ig-exact-cols  InfiniGen with partial_ratio=1 (all columns: the partial score is the exact q.k
               of the layer-ahead query), so only the speculation from layer i-1's input differs.
  ig-nocap     InfiniGen without the 20% cap (max_fetch=1): what the alpha threshold asks for.
  ig-0.4       InfiniGen with max_fetch=0.4.
  ig-noskew    InfiniGen without the skewing rotation (identity).
  ig-alpha8    InfiniGen with alpha=8 (a wider threshold): reads the same ~20% as the others.

InfiniGen's skew file is calibrated on the other data set (as in policy_ppl.py).

Writes docs/results/infinigen_gap_DATA.{md,jsonl}; the full/infinigen/h2o rows are read from
policy_ppl.jsonl when present (same settings), else run.

Usage: tools/results/infinigen_gap.py [--data wikitext2|ptb] [--windows 4] [--igen build/igen]
                                      [--out docs/results]
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = {
    "wikitext2": os.path.join(REPO, "..", "shared", "data", "wikitext-2-raw", "wiki.test.raw"),
    "ptb": os.path.join(REPO, "..", "shared", "data", "ptb", "ptb.test.txt"),
}

def runs(SKEW):
    return [
    ("full", "full", []),
    ("h2o-0.2", "h2o", ["heavy_ratio=0.1", "recent_ratio=0.1"]),
    ("infinigen", "infinigen", ["max_fetch=0.2", "skew=" + SKEW]),
    ("oracle-0.2", "quest", ["page_size=1", "budget_ratio=0.2", "dense_layers=2"]),
    ("oracle-0.4", "quest", ["page_size=1", "budget_ratio=0.4", "dense_layers=2"]),
    ("ig-exact-cols", "infinigen", ["max_fetch=0.2", "partial_ratio=1", "skew=" + SKEW]),
    ("ig-nocap", "infinigen", ["max_fetch=1", "skew=" + SKEW]),
    ("ig-0.4", "infinigen", ["max_fetch=0.4", "skew=" + SKEW]),
    ("ig-noskew", "infinigen", ["max_fetch=0.2"]),
    ("ig-alpha8", "infinigen", ["max_fetch=0.2", "alpha=8", "skew=" + SKEW]),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--data", choices=sorted(DATA), default="wikitext2")
    ap.add_argument("--resume", action="store_true", help="reuse the runs already in the jsonl")
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    args = ap.parse_args()
    other = "ptb" if args.data == "wikitext2" else "wikitext2"
    SKEW = os.path.join(REPO, "results", f"smollm2_{other}.skew")
    TEXT = DATA[args.data]
    if not os.path.exists(SKEW):
        os.makedirs(os.path.dirname(SKEW), exist_ok=True)
        subprocess.run([args.igen, "calibrate", "--text", DATA[other], "--out", SKEW, "--quiet"], check=True)
    known = {}
    table = os.path.join(args.out, "policy_ppl.jsonl")
    if os.path.exists(table):
        for l in open(table):
            r = json.loads(l)
            if r.get("data") == args.data and r.get("windows") == args.windows:
                known[r["policy"]] = r
    jsonl = os.path.join(args.out, f"infinigen_gap_{args.data}.jsonl")
    before = {}
    if args.resume and os.path.exists(jsonl):
        before = {r["label"]: r for r in (json.loads(l) for l in open(jsonl) if l.strip())}
    open(jsonl, "w").close()
    recs = []
    for label, name, sets in runs(SKEW):
        reuse = {"full": "full", "h2o-0.2": "h2o", "infinigen": "infinigen"}.get(label)
        if label in before:
            rec = before[label]
        elif reuse in known:
            rec = dict(known[reuse])
            rec["label"] = label
            rec["reused_from"] = "policy_ppl.jsonl"
        else:
            cmd = [args.igen, "ppl", "--text", TEXT, "--ctx", "2048", "--prefill", "256", "--windows", str(args.windows),
                   "--batch", "4", "--json", "--quiet", "--policy", name]
            for s in sets:
                cmd += ["--set", s]
            print(f"{label:14s} ...", end="", file=sys.stderr, flush=True)
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
            rec = json.loads(p.stdout)
            rec.update({"label": label, "wall_s": time.time() - t0,
                        "command": " ".join(os.path.relpath(c, REPO) if os.path.isabs(c) else c for c in cmd)})
            print(f" ppl {rec['ppl']:.3f}", file=sys.stderr)
        recs.append(rec)
        with open(jsonl, "a") as f:
            f.write(json.dumps(rec) + "\n")
    full = recs[0]["ppl"]
    lines = [f"# InfiniGen on SmolLM2-135M: ablations ({args.data}, ctx 2048, prompt 256, {args.windows} windows)", "",
             f"Made by `tools/results/infinigen_gap.py --data {args.data}`; raw records in "
             f"`infinigen_gap_{args.data}.jsonl`.", "",
             "| run | policy settings | ppl | vs full | rows read / context |", "|---|---|---|---|---|"]
    for r in recs:
        lines.append(f"| {r['label']} | {r.get('policy', '')} {r.get('policy_params', '')} | {r['ppl']:.3f} | "
                     f"{100 * (r['ppl'] - full) / full:+.1f}% | {r.get('kv_context_fraction', 1):.3f} |")
    with open(os.path.join(args.out, f"infinigen_gap_{args.data}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
