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

Then, for each --decode-dtypes entry, the same windows in decode mode (`--prefill 1 --batch 16`:
every token through the decode GEMV), with and without `--act-quant q8` (int8 activations), to
show what llama.cpp's arithmetic costs in perplexity.

Usage: tools/results/weight_ppl.py [--igen build/igen] [--model GGUF]
                                   [--dtypes stored,f32,f16,bf16,q8_0,q8g64,q4_1,q4_0,q4g64]
                                   [--decode-dtypes stored,stored+q8,q8_0,q8_0+q8]
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
    ap.add_argument("--decode-dtypes", default="stored,stored+q8,q8_0,q8_0+q8",
                    help="types measured again in decode mode (--prefill 1: every token through "
                         "the decode GEMV); TYPE+q8: with --act-quant q8; empty: none")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results", "weight_ppl"))
    ap.add_argument("--reuse-prefill", action="store_true",
                    help="keep OUT.jsonl's prefill-mode records (and their command's date) and "
                         "run only the decode-mode ones")
    a = ap.parse_args()
    for path in (a.igen, a.model):
        if not os.path.exists(path):
            sys.exit(f"weight_ppl: {path} not found (tools/setup.sh builds igen and fetches the model)")
    dtypes = a.dtypes.split(",")
    recs = []
    if a.reuse_prefill:  # the prefill tables from OUT.jsonl as they stand, only decode mode rerun
        with open(a.out + ".jsonl") as f:
            recs = [r for r in map(json.loads, f) if r.get("mode") != "decode"]
        dtypes = []
    for label, rel, refname in TEXTS if dtypes else []:
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
    # decode mode: the same windows, the first token a prompt and every other one decoded in a
    # batch of 16 windows, so that every matmul runs the decode GEMV (M = 16), where
    # --act-quant q8 applies (prefill, M > 16, stays exact)
    dec = [d for d in a.decode_dtypes.split(",") if d]
    for label, rel, refname in TEXTS if dec else []:
        text = os.path.join(SHARED, rel)
        ref = json.load(open(os.path.join(REPO, "tests", "fixtures", "ref", refname)))
        for spec in dec:
            dt, _, act = spec.partition("+")
            t0 = time.time()
            print(f"{label} decode {spec} ...", end=" ", flush=True, file=sys.stderr)
            r = run_json([a.igen, "ppl", "--model", a.model, "--dtype", dt, "--text", text,
                          "--ctx", str(ref["ctx"]), "--windows", str(ref["windows"]),
                          "--batch", "16", "--prefill", "1", "--json"]
                         + (["--act-quant", act] if act else []))
            rec = {"text": label, "dtype": dt, "act_quant": act or "none", "mode": "decode",
                   "ppl": r["ppl"], "tokens": r["tokens"], "windows": r["windows"],
                   "ctx": ref["ctx"], "seconds": round(time.time() - t0, 1)}
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
        rows = [r for r in recs if r["text"] == label and r.get("mode") != "decode"]
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
    if dec:
        lines += ["## Decode path: exact and int8 activations", "",
                  "The same windows with `--prefill 1 --batch 16`: each window's first token is its "
                  "prompt and every later token is decoded one step at a time (teacher-forced), 16 "
                  "windows per batch, so every matmul runs the decode GEMV, where `--act-quant q8` "
                  "applies (activations quantized to int8 per block of 32, integer dot products: "
                  "llama.cpp's arithmetic; prefill stays exact). `vs exact`: against the same "
                  "weights without it. Its ppl is not the tables' above: it counts each "
                  "window's 1022 decode-step predictions, not the first (made from the "
                  "one-token prompt, the hardest of the window).", "",
                  "| text | --dtype | --act-quant | ppl | vs exact |", "|---|---|---|---|---|"]
        for label, _, _ in TEXTS:
            rows = [r for r in recs if r["text"] == label and r.get("mode") == "decode"]
            for r in rows:
                ex = next((x["ppl"] for x in rows
                           if x["dtype"] == r["dtype"] and x["act_quant"] == "none"), None)
                vs = f"{100 * (r['ppl'] - ex) / ex:+.4f}%" if ex and r["act_quant"] != "none" else "-"
                lines.append(f"| {label} | {r['dtype']} | {r['act_quant']} | {r['ppl']:.6f} | "
                             f"{vs} |")
        lines.append("")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
