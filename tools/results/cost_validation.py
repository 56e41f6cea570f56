#!/usr/bin/env python3
"""Cost model vs measurement on this machine (the CPU backend), in one run.

1. Before every round (--profile-once: before the first), `igen profile-hw --kernel-shape 9,3,64 --matmul-shape 576,576,192,1536,3,49152,30,B` measures
   this machine into a profile, with the decode kernels (attention over f32 and 4-bit rows,
   InfiniGen's selection) timed at SmolLM2-135M's attention shape and its decode matmuls at its own
   shapes at batch B (a layer's chain and the logits, f32 weights); its link section is then set to the link model used for the runs (so the
   model and the run see the same link).
2. For 3 placements x 3 prompt lengths (batch B, G generated tokens), the cost model's decode step
   time (`igen plan ... --json`, cost.decode_step_s, from that round's profile) is compared with the
   measured one (`igen bench-decode ... --json`, decode_s / G) of the same round: the median of the
   --rounds ratios, interleaved (every setting once per round, so drift of the machine hits every
   setting alike), with the measured range.
3. Writes docs/results/cost_model_cpu.{md,jsonl}.

Placements (FlexGen percentages W_GPU,W_CPU,C_GPU,C_CPU,A_GPU,A_CPU):
  device     100,0,100,0,100,0    everything in the device region, no policy (the plain engine)
  w50-host   50,50,100,0,100,0    half of each layer's weights streamed from host memory over the link
  host+kv    0,100,0,100,100,0    all weights streamed; KV homed in host memory, attention over it
                                  on the CPU in place (FlexGen's cpu_cache_compute), policy full
  kv-link/P  100,0,0,100,100,0    the paper's regime: weights on the device, the KV cache homed in
                                  host memory behind the link, each layer's fetch of the rows
                                  the policy selects timed by the link model (default access:
                                  attention reads the rows where they live, int4's decoded in
                                  the attention kernel; the compute thread waits until each
                                  fetch's modelled end), for every policy P of --policies (default full,
                                  int4, h2o, infinigen); infinigen runs with a skew calibrated on
                                  PTB and is predicted with its measured fetch profile
                                  (configs/policies/infinigen-smollm2-135m.yaml)

Usage: tools/results/cost_validation.py [--batch 8] [--gen-len 16] [--prompts 256,1024,2048]
                                        [--link 4] [--policies full,int4,h2o,infinigen]
                                        [--rounds 3] [--kernel-shape 9,3,64]
                                        [--matmul-shape auto] [--profile-once]
                                        [--igen build/igen] [--out docs/results]
"""
import argparse
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PLACEMENTS = [
    ("device", "100,0,100,0,100,0", [], []),
    ("w50-host", "50,50,100,0,100,0", [], []),
    ("host+kv", "0,100,0,100,100,0", ["--policy", "full", "--kv-access", "cpu"], ["--cpu-cache-compute"]),
]


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--gen-len", type=int, default=16)
    ap.add_argument("--prompts", default="256,1024,2048")
    ap.add_argument("--link", type=float, default=4.0, help="link model bandwidth, GB/s each way")
    ap.add_argument("--policies", default="full,int4,h2o,infinigen",
                    help="policies of the kv-link placement ('' for none)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of every setting, interleaved; the median counts")
    ap.add_argument("--kernel-shape", default="9,3,64",
                    help="attention shape (heads,KV heads,head dim) of the model, for profile-hw ('' : none)")
    ap.add_argument("--matmul-shape", default="auto",
                    help="decode matmul shape for profile-hw (D,Q,KV,FF,NF,V,L,M; auto: SmolLM2-135M "
                         "at --batch; '' : none)")
    ap.add_argument("--profile-once", action="store_true",
                    help="profile the machine once, before round 1 (default: before every round)")
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    args = ap.parse_args()
    placements = list(PLACEMENTS)
    skew = os.path.join(REPO, "results", "skew", "cost-validation-ptb.skew")
    for pol in [x for x in args.policies.split(",") if x]:
        run_extra, plan_extra = ["--policy", pol], ["--policy", pol]
        if pol == "infinigen":
            if not os.path.exists(skew):
                os.makedirs(os.path.dirname(skew), exist_ok=True)
                subprocess.run([args.igen, "calibrate", "--text",
                                os.path.join(REPO, "..", "shared", "data", "ptb", "ptb.test.txt"),
                                "--out", skew, "--quiet"], check=True)
            run_extra += ["--set", f"skew={skew}"]
            plan_extra += ["--set", "fetch_profile=configs/policies/infinigen-smollm2-135m.yaml"]
        placements.append((f"kv-link/{pol}", "100,0,0,100,100,0", run_extra, plan_extra))
    os.makedirs(os.path.join(REPO, "results"), exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    prof = os.path.join(REPO, "results", "cost_validation_profile.yaml")

    def profile(rnd):
        print(f"round {rnd + 1}: profiling this machine (igen profile-hw) ...", file=sys.stderr)
        subprocess.run([args.igen, "profile-hw", "--out", prof] +
                       (["--kernel-shape", args.kernel_shape] if args.kernel_shape else []) +
                       (["--matmul-shape", args.matmul_shape if args.matmul_shape != "auto"
                         else f"576,576,192,1536,3,49152,30,{args.batch}"] if args.matmul_shape else []),
                       check=True, capture_output=True)
        text = open(prof).read()
        for key in ("h2d_gbps", "d2h_gbps"):
            text = re.sub(rf"(\n  {key}: )[0-9.e+-]+", rf"\g<1>{args.link}", text)
        open(prof, "w").write(text)

    def plan(st):
        return run_json([args.igen, "plan", "--model", os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                         "--weight-dtype", "f32"] + ([] if "int4" in st["plan_extra"] else ["--kv", "f32"]) +
                        ["--hardware", prof, "--gpu-batch", str(args.batch),
                         "--num-gpu-batches", "1", "--percent", st["percent"], "--json"] + st["common"] +
                        st["plan_extra"])

    settings = []
    for name, pct, run_extra, plan_extra in placements:
        for L in [int(x) for x in args.prompts.split(",")]:
            common = ["--prompt-len", str(L), "--gen-len", str(args.gen_len)]
            link = [] if name == "device" else ["--link", f"h2d={args.link},d2h={args.link}"]
            cmd = [args.igen, "bench-decode", "--batch", str(args.batch), "--percent", pct, "--json",
                   "--quiet"] + common + run_extra + link
            settings.append({"placement": name, "percent": pct, "prompt_len": L, "common": common,
                             "plan_extra": plan_extra, "cmd": cmd, "plans": [], "runs": []})
    for rnd in range(args.rounds):
        # the machine's speed drifts by 10-30% over minutes here: each round's predictions come
        # from a profile made in that round, next to the runs they are compared with
        if rnd == 0 or not args.profile_once:
            profile(rnd)
            for st in settings:
                st["plans"].append(plan(st))
        else:
            for st in settings:
                st["plans"].append(st["plans"][0])
        for st in settings:
            meas = run_json(st["cmd"])
            st["runs"].append(meas)
            print(f"round {rnd + 1}/{args.rounds} {st['placement']:9s} prompt {st['prompt_len']:5d}: "
                  f"predicted {st['plans'][-1]['cost']['decode_step_s'] * 1e3:8.1f} ms, "
                  f"measured {meas['decode_s'] / args.gen_len * 1e3:8.1f} ms", file=sys.stderr)

    def median(v):
        v = sorted(v)
        n = len(v)
        return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])

    records = []
    jsonl = os.path.join(args.out, "cost_model_cpu.jsonl")
    with open(jsonl, "w") as f:
        for st in settings:
            steps = [m["decode_s"] / args.gen_len for m in st["runs"]]
            preds = [pl["cost"]["decode_step_s"] for pl in st["plans"]]
            ratios = [m / p for m, p in zip(steps, preds)]
            rec = {"placement": st["placement"], "percent": st["percent"], "prompt_len": st["prompt_len"],
                   "batch": args.batch, "gen_len": args.gen_len,
                   "link_gbps": None if st["placement"] == "device" else args.link,
                   "profile_every_round": not args.profile_once,
                   "predicted_step_s": median(preds), "predicted_step_s_runs": preds,
                   "measured_step_s": median(steps), "measured_step_s_runs": steps,
                   "ratio": median(ratios), "ratio_runs": ratios,
                   "kernel_rates": st["plans"][0].get("kernel_rates"),
                   "matmul_rates": st["plans"][0].get("matmul_rates"),
                   "kernel_rates_runs": [pl.get("kernel_rates") for pl in st["plans"]],
                   "matmul_rates_runs": [pl.get("matmul_rates") for pl in st["plans"]],
                   "fetch_source": st["plans"][0].get("fetch_source"),
                   "plan_cost": st["plans"][0]["cost"], "measured": st["runs"]}
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
    within = sum(1 for r in records if abs(r["ratio"] - 1) <= 0.25)
    lines = [
        f"# Cost model vs measurement on this machine (SmolLM2-135M f32, batch {args.batch}, "
        f"{args.gen_len} generated tokens)",
        "",
        "Made by `tools/results/cost_validation.py` in one run of "
        f"{args.rounds} interleaved rounds (every setting once per round). "
        + ("In every round `igen profile-hw` measured the machine first (its speed drifts by 10-30% over "
           "minutes here), " if not args.profile_once else "`igen profile-hw` measured the machine once, ")
        + f"the profile's link was set to the link model of the runs ({args.link} GB/s each way), "
        "`igen plan --json` predicted each setting's decode step time from it and "
        "`igen bench-decode --json` measured it. The ratio is the median of the rounds' "
        "measured/predicted pairs; predicted and measured are the medians of the rounds, with the "
        "measured range beside. Raw records in `cost_model_cpu.jsonl`.",
        "",
        "Decode-kernel rates used by the model (round 1; every round's in the records): "
        f"{records[0]['kernel_rates'] if records else '-'}.",
        "",
        f"Decode matmul rates used by the model (round 1): {records[0].get('matmul_rates') if records else '-'}.",
        "",
        "| placement | --percent | prompt | predicted ms/step | measured ms/step (median) | range | measured / predicted | per round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lo, hi = min(r["measured_step_s_runs"]), max(r["measured_step_s_runs"])
        lines.append(f"| {r['placement']} | {r['percent']} | {r['prompt_len']} | {r['predicted_step_s'] * 1e3:.1f} | "
                     f"{r['measured_step_s'] * 1e3:.1f} | {lo * 1e3:.1f}-{hi * 1e3:.1f} | {r['ratio']:.2f} | "
                     + ", ".join(f"{x:.2f}" for x in r["ratio_runs"]) + " |")
    lines += ["", f"Within 25%: {within} of {len(records)} (the goal is all)."]
    with open(os.path.join(args.out, "cost_model_cpu.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
