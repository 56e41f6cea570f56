#!/usr/bin/env python3
"""Overlap of weight streaming with compute on this machine: runs build/bench_overlap (weights 100%
in host memory, streamed through the link model at several bandwidths, overlap on and off, against
the compute-only step of the same run) and writes docs/results/overlap.{md,json}.

Usage: tools/results/overlap.py [--batch 8] [--prompt-len 128] [--steps 16] [--links off,16,8,4,2]
                                [--threads N] [--out docs/results]
"""
import argparse
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--links", default="off,16,8,4,2")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    js = os.path.join(args.out, "overlap.json")
    cmd = [os.path.join(REPO, "build", "bench_overlap"), "--batch", str(args.batch), "--prompt-len",
           str(args.prompt_len), "--steps", str(args.steps), "--links", args.links, "--json", js]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    subprocess.run(cmd, check=True)
    d = json.load(open(js))
    lines = [f"# Weight streaming overlap (SmolLM2-135M f32, batch {d['batch']}, prompt {d['prompt_len']}, "
             f"{d['steps']} decode steps)", "",
             "Made by `tools/results/overlap.py` (runs `build/bench_overlap`; raw numbers in `overlap.json`).",
             "Every weight is placed in host memory and streamed into the device region one layer at a time",
             "through the link model. compute = the decode step with every weight on the device, measured in",
             "the same run; transfer = the measured time of one step's weight loads; step/max = 1.0 is",
             "perfect overlap; step/sum = 1.0 is no overlap at all.", "",
             f"Compute-only step: {d['compute_step_s'] * 1e3:.1f} ms.", "",
             "| link GB/s | overlap | step ms | transfer ms | compute waited ms | step / max(compute, transfer) | step / (compute + transfer) |",
             "|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        lines.append(f"| {r['link']} | {'on' if r['overlap'] else 'off'} | {r['step_s'] * 1e3:.1f} | "
                     f"{r['transfer_s'] * 1e3:.1f} | {r['wait_s'] * 1e3:.1f} | {r['step_over_max']:.2f} | "
                     f"{r['step_over_sum']:.2f} |")
    with open(os.path.join(args.out, "overlap.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
