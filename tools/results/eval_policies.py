#!/usr/bin/env python3
"""Task accuracy of every KV policy at 50/25/12.5% budgets (InfiniGen's Fig. 11 setting).

For each task and policy configuration this runs
    igen eval --task T --shots K --limit N --policy P [--set ...] --json --quiet
(the context is the prompt; the last context token and the continuation are decoded one token per
step with the policy active), plus the passkey task, collects every JSON record into
docs/results/eval_policies.jsonl and writes the table docs/results/eval_policies.md.

Budgets: a fraction of the current sequence length, the convention of docs/policies.md.
  h2o        heavy_ratio = recent_ratio = budget / 2
  streaming  window_ratio = budget (plus its 4 sink tokens)
  quest      budget_ratio = budget (2 dense layers, as the paper)
  infinigen  max_fetch = budget (alpha and the rest at their defaults; skew calibrated on
             WikiText-2, not on any task). InfiniGen's threshold decides how much it reads below
             that cap, so its column "read" says what it actually fetched.
full (dense, every token) and int4 (4-bit groups, every token) have no budget.

Usage: tools/results/eval_policies.py [--limit 8] [--shots 5] [--baseline-limit 0]
           [--tasks copa,...] [--budgets 0.5,0.25,0.125] [--resume] [--table-only]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = ["copa", "openbookqa", "winogrande", "piqa", "rte", "lambada", "passkey"]
WIKI = os.path.join(REPO, "..", "shared", "data", "wikitext-2-raw", "wiki.test.raw")
SKEW = os.path.join(REPO, "results", "smollm2_wikitext2.skew")  # not committed


def configs(budgets):
    out = [("full", None, []), ("int4", None, ["bits=4"])]
    for b in budgets:
        out += [
            ("h2o", b, [f"heavy_ratio={b / 2:g}", f"recent_ratio={b / 2:g}"]),
            ("streaming", b, [f"window_ratio={b:g}"]),
            ("quest", b, [f"budget_ratio={b:g}"]),
            ("infinigen", b, [f"max_fetch={b:g}", f"skew={SKEW}"]),
        ]
    return out


def task_args(task, args):
    if task == "passkey":
        return ["--length", str(args.passkey_length), "--depth", args.passkey_depths,
                "--seeds", str(args.passkey_seeds)]
    shots = 0 if task == "lambada" else args.shots  # LAMBADA is scored zero-shot, as usual
    return ["--shots", str(shots)]


def rel(c):
    return os.path.relpath(c, REPO) if os.path.isabs(c) else c


def run(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return json.loads(p.stdout), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=8, help="items per task for the policy runs")
    ap.add_argument("--baseline-limit", type=int, default=0,
                    help="also run the full cache (no policy) on this many items per task")
    ap.add_argument("--shots", type=int, default=5)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--budgets", default="0.5,0.25,0.125")
    ap.add_argument("--passkey-length", type=int, default=512)
    ap.add_argument("--passkey-depths", default="0.25,0.5,0.75")
    ap.add_argument("--passkey-seeds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    ap.add_argument("--resume", action="store_true", help="keep the records already written")
    ap.add_argument("--table-only", action="store_true", help="only rewrite the table")
    args = ap.parse_args()
    tasks = args.tasks.split(",")
    budgets = [float(b) for b in args.budgets.split(",")]
    jsonl = os.path.join(args.out, "eval_policies.jsonl")
    os.makedirs(args.out, exist_ok=True)
    records = []
    if args.table_only or args.resume:
        if os.path.exists(jsonl):
            records = [json.loads(l) for l in open(jsonl) if l.strip()]
        if args.table_only:
            write_table(args, records)
            return
    else:
        open(jsonl, "w").close()
    if any(name == "infinigen" for name, _, _ in configs(budgets)) and not os.path.exists(SKEW):
        os.makedirs(os.path.dirname(SKEW), exist_ok=True)
        print(f"calibrating InfiniGen on WikiText-2 -> {rel(SKEW)}", file=sys.stderr)
        subprocess.run([args.igen, "calibrate", "--text", WIKI, "--out", SKEW, "--quiet"], check=True)
    done = {(r["task"], r["run"]) for r in records}
    env = dict(os.environ, OMP_WAIT_POLICY="passive")  # the machine is shared: do not spin
    os.environ.update(env)
    jobs = []
    if args.baseline_limit > 0:
        jobs += [(t, "baseline", None, [], args.baseline_limit) for t in tasks]
    jobs += [(t, f"{name}" + (f"@{b:g}" if b else ""), name, sets, args.limit)
             for t in tasks for name, b, sets in configs(budgets)]
    t_all = time.time()
    for task, run_name, policy, sets, limit in jobs:
        if (task, run_name) in done:
            continue
        cmd = [args.igen, "eval", "--task", task, "--limit", str(limit), "--batch", str(args.batch),
               "--json", "--quiet"] + task_args(task, args)
        if policy:
            cmd += ["--policy", policy]
            for s in sets:
                cmd += ["--set", s]
        print(f"{task:10s} {run_name:16s} ...", end="", file=sys.stderr, flush=True)
        rec, secs = run(cmd)
        budget = next((b for n, b, s in configs(budgets) if n == policy and s == sets), None)
        rec.update({"run": run_name, "budget": budget, "wall_s": secs,
                    "command": " ".join(rel(c) for c in cmd)})
        records.append(rec)
        with open(jsonl, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f" acc {rec['acc']:.3f} +- {rec['acc_stderr']:.3f} ({secs:.0f} s)", file=sys.stderr)
    print(f"total {time.time() - t_all:.0f} s", file=sys.stderr)
    write_table(args, records)


def fmt(r):
    return f"{r['acc']:.3f} ± {r['acc_stderr']:.3f}"


def write_table(args, records):
    tasks = [t for t in TASKS if any(r["task"] == t for r in records)]
    runs = []
    for r in records:
        if r["run"] != "baseline" and r["run"] not in runs:
            runs.append(r["run"])
    by = {(r["task"], r["run"]): r for r in records}
    cmd = (f"tools/results/eval_policies.py --limit {args.limit} --shots {args.shots}"
           + (f" --baseline-limit {args.baseline_limit}" if args.baseline_limit else ""))
    lines = [
        "# Task accuracy with the KV policy active (SmolLM2-135M)",
        "",
        f"Made by `{cmd}` (raw records with each exact command in `eval_policies.jsonl`;",
        "`docs/eval.md` explains the scoring). Multiple-choice tasks are "
        f"{args.shots}-shot, LAMBADA zero-shot, passkey "
        f"{args.passkey_length} tokens at depths {args.passkey_depths} x {args.passkey_seeds} keys.",
        "Each cell: acc ± lm-eval's standard error (sample sd / sqrt(n)); acc_norm for OpenBookQA and PIQA",
        "is in the JSONL. `read` = KV rows attended / context rows over all decode steps (all tasks);",
        "`*` marks a cell more than 2 combined standard errors (sqrt(se^2 + se_full^2)) from `full`;",
        "unmarked differences are within that and cannot be told apart from noise at this n.",
        "",
    ]
    base = [r for r in records if r["run"] == "baseline"]
    if base:
        lines += ["## Full cache (no policy)", "", "| task | n | acc | acc_norm | ppl | command |", "|---|---|---|---|---|---|"]
        for r in base:
            an = f"{r['acc_norm']:.3f} ± {r['acc_norm_stderr']:.3f}" if "acc_norm" in r else "-"
            pp = f"{r['ppl']:.2f} ± {r['ppl_stderr']:.2f}" if "ppl" in r else "-"
            lines.append(f"| {r['task']} | {r['n']} | {fmt(r)} | {an} | {pp} | `{r['command']}` |")
        lines.append("")
    ns = {t: by[(t, runs[0])]["n"] for t in tasks if runs and (t, runs[0]) in by}
    lines += ["## Every policy", "",
              "| run | " + " | ".join(f"{t} (n {ns.get(t, '?')})" for t in tasks) + " | mean acc | read | lambada ppl |",
              "|---|" + "---|" * (len(tasks) + 3)]
    for run in runs:
        cells, accs, reads, toks = [], [], 0.0, 0
        for t in tasks:
            r = by.get((t, run))
            if not r:
                cells.append("")
                continue
            f = by.get((t, "full"))
            mark = ""
            if f and run != "full":
                se = math.hypot(r["acc_stderr"], f["acc_stderr"])
                # se = 0 (both all right or all wrong): any difference is beyond it
                if abs(r["acc"] - f["acc"]) > 2 * se:
                    mark = " *"
            cells.append(fmt(r) + mark)
            accs.append(r["acc"])
            k = r.get("kv_decode_tokens", 0)
            reads += r.get("kv_context_fraction", 0) * k
            toks += k
        mean = sum(accs) / len(accs) if accs else float("nan")
        lam = by.get(("lambada", run))
        ppl = f"{lam['ppl']:.0f} ± {lam['ppl_stderr']:.0f}" if lam and "ppl" in lam else "-"
        lines.append(f"| {run} | " + " | ".join(cells) + f" | {mean:.3f} | {reads / toks if toks else 0:.2f} | {ppl} |")
    lines += [""]
    with open(os.path.join(args.out, "eval_policies.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
