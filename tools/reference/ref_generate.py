#!/usr/bin/env python3
"""Reference greedy continuations of SmolLM2-135M (GGUF) with transformers.

Same model loader and tokenizer as ref_ppl.py (gguf-py dequantization, Q/K un-permuted, float32, eager
attention, CPU; SmolLM2's tokenizer rebuilt from the GGUF). For each prompt: the prompt is tokenized without
BOS (SmolLM2's tokenizer adds none) and without a chat template, then 32 tokens are generated greedily with
the KV cache (never stopping at EOS), checked against transformers' generate(do_sample=False) and against a
no-cache recompute. Records ids, text and the top1-top2 logit gap at every step.

Usage: python tools/reference/ref_generate.py [--model GGUF] [--n-new 32] [--out JSON] [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import refcommon as rc  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "In 1969, the Apollo 11 mission landed the first humans on the Moon. Neil Armstrong and Buzz Aldrin "
    "spent about two hours outside, while Michael Collins stayed in orbit. After they",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(rc.DEFAULT_MODEL))
    ap.add_argument("--n-new", type=int, default=32)
    ap.add_argument("--out", default=str(rc.REPO / "tests" / "fixtures" / "ref" / "smollm2_greedy.json"))
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    rc.setup_torch(args.threads)
    t_start = time.time()
    model_path = Path(args.model)
    tok, tinfo = rc.smollm_tokenizer_from_gguf(str(model_path))
    model, load_stats = rc.load_gguf_llama(str(model_path))
    load_stats.update(rc.verify_qk_unpermuted(model, str(model_path)))

    results = []
    for prompt in PROMPTS:
        enc = tok.encode(prompt, add_special_tokens=True).ids
        assert enc == tok.encode(prompt, add_special_tokens=False).ids, "the tokenizer added special tokens"
        t0 = time.time()
        new, gaps = rc.greedy_with_cache(model, enc, args.n_new)
        gap_nocache = rc.check_greedy_without_cache(model, enc, new)
        gen = rc.generate_greedy(model, enc, args.n_new)
        assert gen == new, f"generate() {gen} != manual greedy {new}"
        row = {
            "prompt": prompt,
            "prompt_ids": enc,
            "prompt_tokens": len(enc),
            "greedy_ids": new,
            "greedy_text": tok.decode(new, skip_special_tokens=False),
            "full_text": tok.decode(enc + new, skip_special_tokens=False),
            "eos_in_greedy": tinfo["eos_token_id"] in new,
            "greedy_ids_until_eos": new[: new.index(tinfo["eos_token_id"]) + 1] if tinfo["eos_token_id"] in new
            else new,
            "top2_gap_per_step": [round(g, 6) for g in gaps],
            "min_top2_gap": min(gaps),
            "min_top2_gap_until_eos": min(gaps[: new.index(tinfo["eos_token_id"]) + 1] if tinfo["eos_token_id"] in new
                                          else gaps),
            "argmin_top2_gap_step": gaps.index(min(gaps)),
            "min_top2_gap_nocache": gap_nocache,
            "seconds": round(time.time() - t0, 1),
        }
        results.append(row)
        rc.log(f"{len(enc)} prompt tokens -> {row['greedy_text']!r}; min gap {row['min_top2_gap']:.4f} "
               f"at step {row['argmin_top2_gap_step']}")

    out = {
        "model": rc.rel(model_path),
        "model_sha256": rc.sha256_file(model_path),
        "n_new": args.n_new,
        "results": results,
        "min_top2_gap": min(min(r["min_top2_gap"], r["min_top2_gap_nocache"]) for r in results),
        "notes": "greedy = argmax at each step with the KV cache (== generate(do_sample=False), checked), "
                 "EOS does not stop it; no BOS, no chat template; top2 gap = logit[top1] - logit[top2] "
                 "(float32 logits); a step whose gap is below ~1e-3 could legitimately flip in another "
                 "implementation",
        "tokenizer": {**tinfo, "built_by": "refcommon.smollm_tokenizer_from_gguf"},
        "loader": {"how": "transformers AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., dtype=float32, "
                          "attn_implementation='eager')", **load_stats},
        "dtype": "float32",
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "seconds": round(time.time() - t_start, 1),
        "versions": rc.versions(),
        "generator": "tools/reference/ref_generate.py",
    }
    rc.write_json(args.out, out)
    rc.record_reference(args.out)
    rc.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
