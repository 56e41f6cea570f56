#!/usr/bin/env python3
"""Perplexity of every KV policy on WikiText-2 and PTB with the policy active during decoding.

For each data set and policy this runs
    igen ppl --text T --ctx CTX --prefill P --windows W --policy NAME [--set ...] --recall --json
(teacher-forced decode: the first P tokens of each window are a prompt, the rest are decoded one
token per step with the policy selecting / evicting / quantizing), collects every JSON record into
docs/results/policy_ppl.jsonl and writes the table docs/results/policy_ppl.md.

InfiniGen needs a skewing file: it is calibrated on the *other* data set (PTB when evaluating on
WikiText-2 and vice versa), so nothing is fitted to the text it is evaluated on.

Usage: tools/results/policy_ppl.py [--windows 8] [--ctx 2048] [--prefill 256] [--budget 0.2]
                                   [--igen build/igen] [--out docs/results]
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


def policies(budget):
    """Policy name -> settings that give each sparse policy the same token budget."""
    half = budget / 2
    return [
        ("full", []),
        ("infinigen", [f"max_fetch={budget}"]),
        ("h2o", [f"heavy_ratio={half}", f"recent_ratio={half}"]),
        ("int4", ["bits=4"]),
        ("streaming", [f"window_ratio={budget}"]),
        ("quest", [f"budget_ratio={budget}"]),
    ]


def run(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return json.loads(p.stdout), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--prefill", type=int, default=256)
    ap.add_argument("--budget", type=float, default=0.2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    ap.add_argument("--only", help="comma-separated policy names")
    ap.add_argument("--table-only", action="store_true",
                    help="only rewrite policy_ppl.md from the records in policy_ppl.jsonl")
    ap.add_argument("--resume", action="store_true",
                    help="keep the records already in policy_ppl.jsonl and run only the missing ones")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.table_only:
        records = [json.loads(l) for l in open(os.path.join(args.out, "policy_ppl.jsonl")) if l.strip()]
        write_table(args, records)
        return
    skew = {}
    for name, path in DATA.items():
        other = [p for n, p in DATA.items() if n != name][0]
        skew[name] = os.path.join(REPO, "results", f"smollm2_{'ptb' if name == 'wikitext2' else 'wikitext2'}.skew")  # not committed
        os.makedirs(os.path.dirname(skew[name]), exist_ok=True)
        if not os.path.exists(skew[name]):
            print(f"calibrating InfiniGen on {other} -> {skew[name]}", file=sys.stderr)
            subprocess.run([args.igen, "calibrate", "--text", other, "--out", skew[name], "--quiet"], check=True)
    records = []
    jsonl = os.path.join(args.out, "policy_ppl.jsonl")
    if args.resume and os.path.exists(jsonl):
        records = [json.loads(l) for l in open(jsonl) if l.strip()]
    else:
        open(jsonl, "w").close()
    done = {(r["data"], r["policy"]) for r in records}
    only = set(args.only.split(",")) if args.only else None
    for data, text in DATA.items():
        for name, sets in policies(args.budget):
            if (only and name not in only) or (data, name) in done:
                continue
            if name == "infinigen":
                sets = sets + [f"skew={skew[data]}"]
            cmd = [args.igen, "ppl", "--text", text, "--ctx", str(args.ctx), "--prefill", str(args.prefill),
                   "--windows", str(args.windows), "--batch", str(args.batch), "--json", "--quiet", "--recall",
                   "--policy", name]
            for s in sets:
                cmd += ["--set", s]
            print(f"{data:10s} {name:10s} ...", end="", file=sys.stderr, flush=True)
            rec, secs = run(cmd)
            rec.update({"data": data, "command": " ".join(os.path.relpath(c, REPO) if os.path.isabs(c) else c for c in cmd),
                        "wall_s": secs})
            records.append(rec)
            with open(os.path.join(args.out, "policy_ppl.jsonl"), "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f" ppl {rec['ppl']:.3f} ({secs:.0f} s)", file=sys.stderr)
    write_table(args, records)


def settings_of(rec):
    """The --set arguments of the record's command (the skew file by its name only)."""
    parts = rec.get("command", "").split()
    sets = [parts[i + 1] for i, p in enumerate(parts[:-1]) if p == "--set"]
    return " ".join(os.path.basename(x) if x.startswith("skew=") else x for x in sets).replace("skew=", "skew ")


def write_table(args, records):
    lines = [
        f"# Perplexity with the KV policy active (SmolLM2-135M, ctx {args.ctx}, prefill {args.prefill}, "
        f"{args.windows} windows, budget {args.budget:.0%})",
        "",
        "Made by `tools/results/policy_ppl.py`; raw records in `policy_ppl.jsonl` (each with its command).",
        "ppl counts only the tokens predicted by decode steps (positions prefill+1 .. ctx-1 of each window).",
        "fetched = selected rows / context rows per decode step; resident = rows kept in the home tier /",
        "context rows; moved = KV bytes a GPU run would copy host->device per decoded token; recall = share",
        "of the exact top-k (k = rows attended) of the true attention scores that the policy attended.",
        "",
        "| data | policy | settings | ppl | vs full | fetched | resident | moved KiB/token | recall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    full = {r["data"]: r["ppl"] for r in records if r["policy"] == "full"}
    for r in records:
        base = full.get(r["data"])
        delta = f"{100 * (r['ppl'] - base) / base:+.2f}%" if base else ""
        lines.append(
            f"| {r['data']} | {r['policy']} | {settings_of(r) or '-'} | {r['ppl']:.3f} | {delta} | "
            f"{r.get('kv_context_fraction', 0):.3f} | {r.get('kv_resident_fraction', 0):.3f} | "
            f"{r.get('kv_h2d_bytes_per_token', 0) / 1024:.0f} | {r.get('recall', float('nan')):.3f} |")
    with open(os.path.join(args.out, "policy_ppl.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))




if __name__ == "__main__":
    main()
