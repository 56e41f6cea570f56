#!/usr/bin/env python3
"""Retrieval with the KV policy active, every policy at the same budget: RULER-style needles
(niah_single: one 7-digit number to find; niah_multikey: the one asked for among 3 distractor
needles with other keys) hidden in haystacks cut from a real text (WikiText-2 test by default),
at several depths, many seeds (docs/eval.md, "Needle in a haystack").

For each task and policy this runs
    igen eval --task T --length L --depth D1,D2,D3 --seeds N --json --policy NAME --set ...
and writes RESULTS.jsonl (one JSON object per run) and RESULTS.md (accuracy per policy with its
standard error, and per depth).

Budgets (the frontier's equal-read settings, docs/results/kv_policies.md): every sparse policy at
20% of the sequence so far, layers 0-1 dense for h2o, quest and infinigen; InfiniGen with
fetch_rule=fixed (exactly the budget; with its default columns and with at least 24 of the 64),
and with its paper rule (threshold, alpha 5), its skew calibrated on PTB (not the haystack's
text). --only WORD runs only the policies whose "name settings" contain WORD and merges them into
the existing RESULTS.jsonl (a run of the same task, policy and settings is replaced).

Usage: tools/results/retrieval.py [--length 1024] [--depths 0.1,0.5,0.9] [--seeds 20]
                                  [--haystack FILE] [--igen build/igen] [--out docs/results/retrieval]
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(REPO, "..", "shared", "data")


def policies(skew, budget):
    half = budget / 2
    return [
        ("full", []),
        ("infinigen", [f"skew={skew}", "fetch_rule=fixed", f"max_fetch={budget}"]),
        ("infinigen", [f"skew={skew}", "fetch_rule=fixed", f"max_fetch={budget}",
                       "min_columns=24"]),
        ("infinigen", [f"skew={skew}"]),
        ("h2o", [f"heavy_ratio={half}", f"recent_ratio={half}", "dense_layers=2"]),
        ("quest", [f"budget_ratio={budget}", "dense_layers=2"]),
        ("streaming", [f"window_ratio={budget}"]),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--depths", default="0.1,0.5,0.9")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=float, default=0.2)
    ap.add_argument("--tasks", default="niah_single,niah_multikey")
    ap.add_argument("--haystack", default=os.path.join(SHARED, "wikitext-2-raw", "wiki.test.raw"))
    ap.add_argument("--calib", default=os.path.join(SHARED, "ptb", "ptb.test.txt"),
                    help="InfiniGen's skew is calibrated on this text")
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results", "retrieval"))
    ap.add_argument("--only", help="run only the policies whose 'name settings' contain this")
    a = ap.parse_args()
    skew = os.path.join(REPO, "results", "skew", "retrieval-calib.skew")
    os.makedirs(os.path.dirname(skew), exist_ok=True)
    if not os.path.exists(skew):
        print(f"calibrating InfiniGen's skew on {a.calib} ...", file=sys.stderr)
        subprocess.run([a.igen, "calibrate", "--text", a.calib, "--out", skew, "--quiet"],
                       check=True)
    runs = []
    kept = []
    if a.only and os.path.exists(a.out + ".jsonl"):
        with open(a.out + ".jsonl") as f:
            kept = [json.loads(line) for line in f if line.strip()]
    for task in a.tasks.split(","):
        for name, sets in policies(skew, a.budget):
            plain = [s for s in sets if not s.startswith("skew=")]
            if a.only and a.only not in " ".join([name] + plain):
                old = [r for r in kept if r.get("task") == task and r.get("policy") == name
                       and r.get("settings") == plain]
                runs.extend(old[:1])
                continue
            cmd = [a.igen, "eval", "--task", task, "--length", str(a.length), "--depth", a.depths,
                   "--seeds", str(a.seeds), "--haystack", a.haystack, "--json", "--quiet",
                   "--policy", name]
            for s in sets:
                cmd += ["--set", s]
            t0 = time.time()
            print(f"{task} {name} {' '.join(sets)} ...", file=sys.stderr, flush=True)
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
            rec = json.loads(out.stdout)
            rec["settings"] = [s for s in sets if not s.startswith("skew=")]
            rec["command"] = " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c
                                      for c in cmd)
            rec["wall_s"] = time.time() - t0
            runs.append(rec)
            print(f"  acc {rec.get('acc'):.3f} ({rec['wall_s']:.0f} s)", file=sys.stderr)
    with open(a.out + ".jsonl", "w") as f:
        for r in runs:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    depths = [float(d) for d in a.depths.split(",")]
    lines = [
        "# Retrieval with the policy active, every policy at the same budget",
        "",
        f"Made by `tools/results/retrieval.py --length {a.length} --depths {a.depths} --seeds "
        f"{a.seeds}` (raw: `{os.path.basename(a.out)}.jsonl`). SmolLM2-135M, prompts of "
        f"{a.length} tokens, haystacks cut from `{os.path.relpath(a.haystack, REPO)}` at a "
        f"seed-dependent offset, {a.seeds} seeds x {len(depths)} depths = "
        f"{a.seeds * len(depths)} prompts per cell, greedy answers, exact match of the 7-digit "
        f"number (docs/eval.md). Budget {a.budget:g} of the sequence so far for every sparse "
        "policy; layers 0-1 dense for h2o, quest and infinigen; InfiniGen's skew calibrated on "
        "PTB.",
        "",
        "| task | policy | settings | acc | stderr | " + " | ".join(f"depth {d:g}" for d in depths)
        + " | KV rows read |",
        "|---|---|---|---|---|" + "---|" * len(depths) + "---|",
    ]
    for r in runs:
        grid = {round(g["depth"], 6): g["acc"] for g in r.get("grid", [])}
        cells = [f"{grid[round(d, 6)]:.2f}" if round(d, 6) in grid else "-" for d in depths]
        kv = r.get("kv_context_fraction")
        lines.append(f"| {r.get('task')} | {r.get('policy')} | {','.join(r['settings']) or '-'} | "
                     f"{r.get('acc', 0):.3f} | {r.get('acc_stderr', 0):.3f} | "
                     + " | ".join(cells) + f" | {'-' if kv is None else f'{kv:.3f}'} |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
