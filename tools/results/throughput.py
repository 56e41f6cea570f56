#!/usr/bin/env python3
"""Decode throughput of the KV policies in one run (SmolLM2-135M by default, CPU backend).

For each configuration this runs
    igen bench-decode --batch B --prompt-len L --gen-len G --policy NAME [--set ...] --json
one after the other in the same session (so the ratios compare like with like on a shared machine),
appends every JSON record to docs/results/throughput.jsonl as it completes and writes the table
docs/results/throughput.md with each policy's decode tokens/s relative to the best dense baseline
measured in the same run (the faster of `full` attending in place over the home tier and `full`
copying the whole cache into a working set first).

InfiniGen uses a skew file calibrated on PTB (the prompts come from WikiText-2), made with
`igen calibrate` into results/ if missing (results/ is not committed).

Usage: tools/results/throughput.py [--batch 8] [--prompt-len 4096] [--gen-len 64] [--repeat 1]
                                   [--only full,infinigen] [--igen build/igen] [--out docs/results]
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PTB = os.path.join(REPO, "..", "shared", "data", "ptb", "ptb.test.txt")

# (label, policy, settings, extra flags); the first two are the dense baselines
CONFIGS = [
    ("full (in place)", "full", [], ["--kv-access", "inplace"]),
    ("full (copy)", "full", [], ["--kv-access", "copy"]),
    ("infinigen", "infinigen", [], []),
    ("h2o", "h2o", [], []),
    ("int4", "int4", [], []),
    ("streaming", "streaming", [], []),
    ("quest", "quest", [], []),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=4096)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each configuration (interleaved)")
    ap.add_argument("--only", help="comma-separated policy names")
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    skew = os.path.join(REPO, "results", "smollm2_ptb.skew")
    if not os.path.exists(skew):
        os.makedirs(os.path.dirname(skew), exist_ok=True)
        print(f"calibrating InfiniGen on PTB -> {skew}", file=sys.stderr)
        subprocess.run([args.igen, "calibrate", "--text", PTB, "--out", skew, "--quiet"], check=True)
    only = set(args.only.split(",")) if args.only else None
    configs = [c for c in CONFIGS if not only or c[1] in only]
    jsonl = os.path.join(args.out, "throughput.jsonl")
    open(jsonl, "w").close()
    records = []
    for rep in range(args.repeat):
        for label, name, sets, extra in configs:
            if name == "infinigen":
                sets = sets + [f"skew={skew}"]
            cmd = [args.igen, "bench-decode", "--batch", str(args.batch), "--prompt-len", str(args.prompt_len),
                   "--gen-len", str(args.gen_len), "--json", "--quiet", "--policy", name] + extra
            for s in sets:
                cmd += ["--set", s]
            print(f"[{rep + 1}/{args.repeat}] {label:18s} ...", end="", file=sys.stderr, flush=True)
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
            rec = json.loads(p.stdout)
            rec.update({"label": label, "repeat": rep, "settings": " ".join([os.path.basename(x) for x in sets] + extra), "wall_s": time.time() - t0,
                        "command": " ".join(os.path.relpath(c, REPO) if os.path.isabs(c) else c for c in cmd)})
            records.append(rec)
            with open(jsonl, "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f" {rec['decode_tokens_per_s']:.1f} tok/s decode, prefill {rec['prefill_s']:.0f} s",
                  file=sys.stderr)

    def best(label):
        v = [r["decode_tokens_per_s"] for r in records if r["label"] == label]
        return max(v) if v else None

    dense = max(v for v in (best(c[0]) for c in CONFIGS[:2]) if v is not None) if any(
        best(c[0]) for c in CONFIGS[:2]) else None
    r0 = records[0]
    lines = [
        f"# Decode throughput per KV policy (batch {args.batch}, prompt {args.prompt_len}, "
        f"{args.gen_len} generated tokens, {r0['threads']} threads, CPU backend)",
        "",
        "Made by `tools/results/throughput.py`; raw records (each with its command) in `throughput.jsonl`.",
        "tok/s = generated tokens of the whole batch per second of decode (best of the repeats);",
        "vs dense = against the faster dense baseline of this run; fetched = rows attended / context",
        "rows; moved = KV bytes a GPU run would copy host->device per decode step (all layers, whole batch);",
        "read = KV bytes this run read per step; select / attention / transfer = seconds over the decode.",
        "",
        "| run | settings | decode tok/s | vs dense | fetched | moved MB/step | read MB/step | select s | attention s | transfer s | prefill s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, name, _, _ in configs:
        rs = [r for r in records if r["label"] == label]
        r = max(rs, key=lambda x: x["decode_tokens_per_s"])
        tps = r["decode_tokens_per_s"]
        rel = f"{tps / dense:.2f}x" if dense else ""
        lines.append(
            f"| {label} | {r['settings'] or '-'} | {tps:.1f} | {rel} | "
            f"{r.get('kv_context_fraction', 0):.3f} | {r.get('kv_h2d_bytes_per_step', 0) / 1e6:.0f} | "
            f"{r.get('kv_read_bytes_per_token', 0) * args.batch / 1e6:.0f} | {r.get('time_select_s', 0):.2f} | "
            f"{r.get('time_attention_s', 0):.2f} | {r.get('time_transfer_s', 0):.2f} | {r['prefill_s']:.0f} |")
    with open(os.path.join(args.out, "throughput.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
