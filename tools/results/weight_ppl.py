#!/usr/bin/env python3
"""Perplexity of every weight storage type of SmolLM2-135M, against transformers and against f32.

For each --dtypes entry this runs
    igen ppl --model GGUF --dtype T --text TEXT --ctx 1024 --windows 16 --json
    igen info --model GGUF --dtype T --json          (what is stored, MB read per token)
on WikiText-2 and PTB (../shared/data) and writes OUT.jsonl (one object per run) and OUT.md:
perplexity, its change against the transformers reference of the GGUF's own weights (gguf-py
dequantizes them; tests/fixtures/ref/smollm2_*_ctx1024_w16.json, made by
tools/reference/ref_ppl.py) and against igen's f32 run of the same windows.

`stored` keeps the GGUF's blocks (Q4_1 matrices, a Q8_0 embedding) and must equal f32, which
widens the same blocks at load, to 1e-4 relative: those two are the same weights. The others are
re-quantized from the GGUF's weights at load (q4g64/q8g64: FlexGen's group-wise format; q4_0,
q4_1, q8_0: ggml's blocks made by igen), so transformers has no reference of them: their cost is
the change against f32. Nothing here is tuned; the windows are the tests' (the first 16 of 1024).

Usage: tools/results/weight_ppl.py [--igen build/igen] [--model GGUF]
                                   [--dtypes stored,f32,f16,bf16,q8_0,q8g64,q4_1,q4_0,q4g64]
                                   [--out docs/results/weight_ppl]
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(REPO, "..", "shared", "data")
TEXTS = [("WikiText-2", "wikitext-2-raw/wiki.test.raw", "smollm2_wikitext2_ctx1024_w16.json"),
         ("PTB", "ptb/ptb.test.txt", "smollm2_ptb_ctx1024_w16.json")]


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"weight_ppl: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--igen", default=os.path.join(REPO, "build", "igen"))
    ap.add_argument("--model", default=os.path.join(REPO, "models",
                                                    "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--dtypes", default="stored,f32,f16,bf16,q8_0,q8g64,q4_1,q4_0,q4g64")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results", "weight_ppl"))
    a = ap.parse_args()
    for path in (a.igen, a.model):
        if not os.path.exists(path):
            sys.exit(f"weight_ppl: {path} not found (tools/setup.sh builds igen and fetches the model)")
    dtypes = a.dtypes.split(",")
    recs = []
    for label, rel, refname in TEXTS:
        text = os.path.join(SHARED, rel)
        ref = json.load(open(os.path.join(REPO, "tests", "fixtures", "ref", refname)))
        for dt in dtypes:
            t0 = time.time()
            print(f"{label} {dt} ...", end=" ", flush=True, file=sys.stderr)
            r = run_json([a.igen, "ppl", "--model", a.model, "--dtype", dt, "--text", text,
                          "--ctx", str(ref["ctx"]), "--windows", str(ref["windows"]), "--json"])
            info = run_json([a.igen, "info", "--model", a.model, "--dtype", dt, "--json"])
            rec = {"text": label, "dtype": dt, "ppl": r["ppl"], "windows": r["windows"],
                   "ctx": ref["ctx"], "transformers_ppl": ref["ppl"],
                   "stored": (info.get("dtypes") or "").removeprefix("stored: "),
                   "decode_bytes_per_token": info.get("decode_bytes_per_token"),
                   "seconds": round(time.time() - t0, 1)}
            recs.append(rec)
            print(f"ppl {r['ppl']:.6f} ({rec['seconds']} s)", file=sys.stderr)
    with open(a.out + ".jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    lines = ["# Perplexity of each weight storage type (SmolLM2-135M)", "",
             f"Made by `tools/results/weight_ppl.py` (raw: `{os.path.basename(a.out)}.jsonl`): "
             "`igen ppl --dtype T --ctx 1024 --windows 16` on the first 16 windows of 1024 tokens "
             "of each text, dense attention. `vs transformers`: against transformers on the "
             "GGUF's weights dequantized by gguf-py (tools/reference/ref_ppl.py); `vs f32`: "
             "against igen with those weights widened to f32. `stored` keeps the GGUF's own "
             "blocks; the other compressed types are re-quantized from them at load, so their "
             "reference is f32.", ""]
    for label, _, _ in TEXTS:
        rows = [r for r in recs if r["text"] == label]
        f32 = next((r["ppl"] for r in rows if r["dtype"] == "f32"), None)
        lines += [f"## {label}", "",
                  "| --dtype | stored as | MB read per token | ppl | vs transformers | vs f32 |",
                  "|---|---|---|---|---|---|"]
        for r in rows:
            mb = r["decode_bytes_per_token"]
            vt = (r["ppl"] - r["transformers_ppl"]) / r["transformers_ppl"]
            vf = (r["ppl"] - f32) / f32 if f32 else None
            lines.append(f"| {r['dtype']} | {r['stored'] or '-'} | "
                         f"{mb / 1e6:.0f} | {r['ppl']:.6f} | {100 * vt:+.4f}% | "
                         + (f"{100 * vf:+.4f}%" if vf is not None else "-") + " |")
        lines.append("")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
