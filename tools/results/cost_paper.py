#!/usr/bin/env python3
"""The cost model's prediction for the InfiniGen paper's speed setting, next to the paper's claims.

Setting (InfiniGen, OSDI'24, Fig 14): OPT-13B, batch 20, prompt 1920 + 128 generated tokens,
weights 100% on the GPU, KV cache 100% in CPU memory, one RTX A6000 on PCIe 3.0 x16
(configs/hardware/a6000-pcie3.yaml). The batch is one GPU batch of 20 sequences
(--gpu-batch 20 --num-gpu-batches 1), as the artifact's speed scripts run it.

For each KV policy this runs
    igen plan --shape opt-13b --hardware a6000-pcie3 --prompt-len 1920 --gen-len 128
              --gpu-batch 20 --num-gpu-batches 1 --percent 100,0,0,100,100,0 ... --json
  full       f16 KV, every row fetched every step (FlexGen)
  int4       4-bit KV in groups of 64 (FlexGen's compression): 0.28x the bytes, all fetched
  h2o        20% of the rows kept (budget 0.2) and all of them fetched
  infinigen  all rows kept on the CPU, 20% fetched per step, plus the partial key cache (ratio 0.2
             of head_dim, f16) on the GPU and its speculation cost (partial query matmul + partial
             scores over every cached token, every layer)
and writes docs/results/cost_model_paper.md (and the raw JSON next to it).

Usage: tools/results/cost_paper.py [--igen build/igen] [--out docs/results]
"""
import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BASE = ["plan", "--shape", "opt-13b", "--hardware", "a6000-pcie3", "--prompt-len", "1920",
        "--gen-len", "128", "--gpu-batch", "20", "--num-gpu-batches", "1",
        "--percent", "100,0,0,100,100,0", "--json"]

POLICIES = [
    ("full", ["--policy", "full"]),
    ("int4", ["--policy", "int4"]),
    ("h2o", ["--policy", "h2o"]),
    ("infinigen", ["--policy", "infinigen"]),
    ("infinigen (measured fetch profile)",
     ["--policy", "infinigen", "--set", "fetch_profile=configs/policies/infinigen-smollm2-135m.yaml"]),
]
PROFILE = "configs/policies/infinigen-smollm2-135m.yaml"
# Fig 16a: batch 8, total sequence 512 / 1024 / 1536 / 2048 with 128 generated tokens
FIG16A = [384, 896, 1408, 1920]


def run(igen, extra):
    out = subprocess.run([igen] + BASE + extra, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        sys.exit("igen plan failed: %s" % out.stderr.strip())
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = {name: run(a.igen, extra) for name, extra in POLICIES}
    with open(os.path.join(a.out, "cost_model_paper.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    full = res["full"]["cost"]
    gib = 1 << 30
    rows = []
    for name, _ in POLICIES:
        r = res[name]
        c = r["cost"]
        d = c["decode_layer_last"]
        dev = r["tiers"]["device"]
        rows.append("| %s | %.2f | %.2fx | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f |" % (
            name, c["decode_throughput_tok_s"],
            c["decode_throughput_tok_s"] / full["decode_throughput_tok_s"],
            c["decode_step_s"] * 1e3, d["h2d"] * 1e3, d["compute"] * 1e3,
            c["prefill_s"], dev["bytes"] / gib, r["tiers"]["host"]["kv"] / gib))
    ig = res["infinigen"]["cost"]["decode_throughput_tok_s"]
    ratios = {n: ig / res[n]["cost"]["decode_throughput_tok_s"] for n in ("full", "int4", "h2o")}
    igp = res["infinigen (measured fetch profile)"]["cost"]["decode_throughput_tok_s"]
    ratios_p = {n: igp / res[n]["cost"]["decode_throughput_tok_s"] for n in ("full", "int4", "h2o")}
    # Fig 16a: decode time per token against the sequence length, h2o and infinigen (profile)
    f16 = {}
    for pl in FIG16A:
        base = [x if x != "1920" else str(pl) for x in BASE]
        base = [x if x != "20" else "8" for x in base]
        for name, extra in [("h2o", ["--policy", "h2o"]),
                            ("infinigen (profile)", POLICIES[-1][1]),
                            ("full", ["--policy", "full"])]:
            out = subprocess.run([a.igen] + base + extra, capture_output=True, text=True, cwd=REPO)
            if out.returncode != 0:
                sys.exit("igen plan failed: %s" % out.stderr.strip())
            f16[(pl, name)] = json.loads(out.stdout)["cost"]["decode_step_s"]
    f16_rows = []
    for pl in FIG16A:
        f16_rows.append("| %d | %.1f | %.1f | %.1f | %.2fx |" % (
            pl + 128, f16[(pl, "full")] * 1e3, f16[(pl, "h2o")] * 1e3,
            f16[(pl, "infinigen (profile)")] * 1e3,
            f16[(pl, "h2o")] / f16[(pl, "infinigen (profile)")]))
    g_h2o = f16[(FIG16A[-1], "h2o")] / f16[(FIG16A[0], "h2o")]
    g_ig = f16[(FIG16A[-1], "infinigen (profile)")] / f16[(FIG16A[0], "infinigen (profile)")]
    md = """# The cost model on the InfiniGen paper's setting

Generated by `tools/results/cost_paper.py` (raw output: `cost_model_paper.json`). Prediction only:
nothing ran on an A6000.

Setting: OPT-13B (configs/models/opt-13b.yaml, f16 weights), batch 20 as **one GPU batch of 20**
(`--gpu-batch 20 --num-gpu-batches 1`), prompt 1920 + 128 generated tokens, weights 100%% on the GPU,
KV cache 100%% in CPU memory, activations on the GPU; hardware `configs/hardware/a6000-pcie3.yaml`
(RTX A6000, PCIe 3.0 x16 assumed at 12 GB/s each way, 100 / 12 TFLOPS prefill / decode matmuls,
650 GB/s device memory; every number is a stated assumption, not a measurement).

| policy | decode tok/s | vs full | decode step (ms, 40 layers) | h2d of the last layer, last step (ms) | compute of the last layer, last step (ms) | prefill (s) | device GiB | host KV GiB |
|---|---|---|---|---|---|---|---|---|
%s

Policy settings: `full` fetches every KV row every step; `int4` stores and moves 4-bit KV (groups of
64 along head_dim: 72 bytes per 128-value head row instead of 256); `h2o` keeps 20%% of the rows and
fetches them all; `infinigen` keeps every row on the CPU, fetches 20%% per step, and pays for its
partial key cache (20%% of head_dim, f16, on the GPU) and the speculation (partial query matmul and
partial scores over every cached token) in every layer. The decode step is the max of the
overlapped activities per layer (weights are resident, so it is KV transfer vs compute).

## Against the paper's claims

`../shared/reference/INFINIGEN.md` records the paper's headline for this figure: InfiniGen is
1.63x-32.93x faster than the baselines in Fig 14 (OPT-13B, batch 20, 1920 + 128) and up to 3.00x
faster than prior KV cache management methods overall. The per-baseline bars of Fig 14 are not in the
reference notes, so only the range can be compared.

Predicted InfiniGen speedup in decode throughput: **%.2fx over full fetch (FlexGen), %.2fx over
int4, %.2fx over H2O**.

- Every policy here is transfer bound (the KV rows of 20 x ~2k tokens cross PCIe every layer), so
  the predicted order follows the bytes moved: full 1, int4 0.28 (4-bit codes), InfiniGen at its
  cap 0.24 (every row in its 2 dense layers, 20%% in the other 38), H2O 0.20. Against full the
  speedup (%.2fx) is inside the paper's range; against int4 (%.2fx) %s the paper's lower end
  (1.63x). The paper's upper end (32.93x) is against UVM-based baselines, which the cost model does
  not represent (no page-fault migration model), so nothing here can reproduce it.
- H2O keeps and fetches 20%% of the rows in every layer. InfiniGen at its cap fetches 20%% in the
  speculated layers and every row in its first two (`dense_layers`, as the authors' artifact runs
  it), so it moves more bytes than H2O and, both being transfer bound, the model predicts it at
  %.2fx H2O's speed: its speculation (partial query matmul and partial scores) lands in the compute
  activity, which stays under the KV transfer in every layer (compute column), and its partial key
  cache only costs device memory (+3.6 GiB here). The paper reports InfiniGen ahead of H2O in
  speed; at a fixed 20%% fetch nothing in this model can put it there, and the model does not
  capture what makes a real H2O run slower (its per-step score accumulation and eviction
  bookkeeping). What moves InfiniGen ahead here is a fetch that shrinks with the sequence (next
  section); its advantage at the cap is memory-neutral accuracy (it keeps every row), not speed.
- Ratios, not absolute tokens/s, are what this comparison can support: the A6000 profile's rates
  are data-sheet based assumptions. The issue's acceptance check of the cost model is the
  predicted-vs-measured table on the CPU backend (`igen profile-hw` profile), which belongs with the
  execution side.

## With InfiniGen's measured fetch profile

The row `infinigen (measured fetch profile)` prices InfiniGen's KV reads with what its threshold
rule really read on SmolLM2-135M as the sequence grew (`%s`, made by `igen ppl --fetch-profile`,
docs/planner.md "Fetch profiles"): 0.21 of the rows at a context of 192, 0.14 at 1983, over all
layers. Nothing was measured on OPT-13B (no OPT weights here), so this is a proxy for the *shape*
of InfiniGen's fetch curve, not OPT's numbers. With it the predicted speedup in Fig 14's setting is
**%.2fx over full, %.2fx over int4, %.2fx over H2O** (against H2O because the proxy reads 14%% of
all rows at 2k tokens, its two dense layers included, where H2O reads 20%%).

Fig 16a's setting (batch 8, 128 generated tokens), decode time per step in ms (40 layers):

| total length | full | h2o (20%%) | infinigen (profile) | h2o / infinigen |
|---|---|---|---|---|
%s

From 512 to 2048 tokens H2O's step time grows %.2fx and InfiniGen's %.2fx. The direction of the
paper's Fig 16a statement (InfiniGen's time grows far more slowly with the sequence length than
H2O's) appears once the model is fed the measured fetch behaviour, and not at the cap, where both
grow alike; its size ("far more slowly") is more than this proxy gives: SmolLM2's speculated
layers still read 7%% of the rows at 2k tokens, and the two dense layers read all of theirs.
""" % ("\n".join(rows), ratios["full"], ratios["int4"], ratios["h2o"], ratios["full"], ratios["int4"],
       "inside" if ratios["int4"] >= 1.63 else "below", ratios["h2o"], PROFILE,
       ratios_p["full"], ratios_p["int4"], ratios_p["h2o"], "\n".join(f16_rows), g_h2o, g_ig)
    with open(os.path.join(a.out, "cost_model_paper.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
