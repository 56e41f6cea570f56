#!/usr/bin/env python3
"""Reference perplexity of a GGUF Llama model (SmolLM2-135M by default), computed with transformers.

The model: AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=torch.float32,
attn_implementation="eager"). For llama, transformers 5.x takes its legacy GGUF path
(modeling_gguf_pytorch_utils.load_gguf_checkpoint): every tensor is dequantized by gguf-py's
`gguf.dequantize` (Q4_1, Q8_0 and F32 for SmolLM2) and attn_q / attn_k rows are un-permuted by
LlamaTensorProcessor (the inverse of llama.cpp's convert_hf_to_gguf.py LlamaModel.permute). This script
does not take that on trust: refcommon.load_gguf_llama counts the gguf-py dequantize calls (one per tensor
in the file) and refcommon.verify_qk_unpermuted recomputes Q/K of the first and last layer with gguf-py and
our own inverse permutation and requires exact equality. Weights are float32, computed on the CPU.

The tokenizer: see refcommon.smollm_tokenizer_from_gguf (SmolLM2's tokenizer rebuilt from the GGUF's
vocabulary and merges with SmolLM2's pre-tokenizer; transformers' own GGUF tokenizer lacks the Digits
split). The script also tokenizes the text with transformers' GGUF tokenizer and records whether the two
agree.

Protocol (igen's `ppl` command follows it exactly):
  1. read the text file as bytes, decode UTF-8 (strict);
  2. tokenize the WHOLE text once (no BOS: SmolLM2's tokenizer adds none; checked and printed);
  3. optionally keep the first --max-tokens tokens;
  4. cut into non-overlapping windows of --ctx tokens, dropping the incomplete tail; keep the first
     --windows N (all if not given);
  5. evaluate each window on its own, from an empty cache;
  6. NLL summed over positions 1..ctx-1 of each window (ctx-1 predicted tokens per window; the log-softmax
     taken in float64 over float32 logits);
  7. ppl = exp(nll_sum / predicted).

Usage:
  python tools/reference/ref_ppl.py [--model GGUF] [--text FILE|wikitext2|ptb] [--ctx 1024] [--windows 16]
                                    [--max-tokens N] [--out JSON] [--threads N]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import refcommon as rc  # noqa: E402


def tokenize_text(gguf_path: str, text_path: str):
    raw = Path(text_path).read_bytes()
    text = raw.decode("utf-8")  # strict
    tok, info = rc.smollm_tokenizer_from_gguf(gguf_path)
    if info["pre"] != "smollm":
        raise SystemExit(f"{gguf_path}: tokenizer.ggml.pre is {info['pre']!r}; this script rebuilds only SmolLM2's "
                         f"pre-tokenizer ('smollm')")
    with_special = tok.encode(text, add_special_tokens=True).ids
    plain = tok.encode(text, add_special_tokens=False).ids
    bos_added = with_special != plain
    assert not bos_added, "the tokenizer's post-processor added tokens"
    assert not info["add_bos_token"], "the GGUF asks for a BOS token"
    return raw, text, with_special, info, bos_added


def compare_with_hf_gguf_tokenizer(model_path: Path, text: str, ids: list[int]) -> dict:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(model_path.parent), gguf_file=model_path.name)
    hf_ids = hf(text, add_special_tokens=True)["input_ids"]
    first_diff = next((i for i, (a, b) in enumerate(zip(ids, hf_ids)) if a != b), None)
    if first_diff is None and len(ids) != len(hf_ids):
        first_diff = min(len(ids), len(hf_ids))
    return {
        "hf_gguf_pre_tokenizer": str(hf.backend_tokenizer.pre_tokenizer),
        "hf_gguf_tokens": len(hf_ids),
        "hf_gguf_agrees": first_diff is None,
        "hf_gguf_first_difference_at": first_diff,
    }


@torch.no_grad()
def window_nll(model, window: list[int]) -> float:
    x = torch.tensor([window])
    logits = model(input_ids=x, use_cache=False).logits[0]  # [ctx, vocab] float32
    logp = torch.log_softmax(logits.double(), dim=-1)
    tgt = x[0, 1:]
    return float(-logp[:-1].gather(1, tgt[:, None]).sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(rc.DEFAULT_MODEL))
    ap.add_argument("--text", default=str(rc.DEFAULT_WIKITEXT),
                    help="text file, or 'wikitext2' / 'ptb' for <repo>/../shared/data/... (default: wikitext2)")
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--windows", type=int, default=None, help="first N windows (default: all)")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-hf-tokenizer-check", action="store_true")
    args = ap.parse_args()
    args.text = {"wikitext2": str(rc.DEFAULT_WIKITEXT), "ptb": str(rc.DEFAULT_PTB)}.get(args.text, args.text)
    rc.setup_torch(args.threads)
    model_path = Path(args.model)
    t_start = time.time()

    t0 = time.time()
    raw, text, ids, tinfo, bos_added = tokenize_text(str(model_path), args.text)
    t_tok = time.time() - t0
    rc.log(f"tokenizer: {tinfo}; BOS added: {bos_added}; {len(ids)} tokens in {args.text} ({t_tok:.1f} s)")
    tcheck = {} if args.no_hf_tokenizer_check else compare_with_hf_gguf_tokenizer(model_path, text, ids)
    if tcheck:
        rc.log(f"transformers' GGUF tokenizer: {tcheck}")
    total_tokens = len(ids)
    if args.max_tokens is not None:
        ids = ids[: args.max_tokens]
    n_all = len(ids) // args.ctx
    n = n_all if args.windows is None else min(args.windows, n_all)
    if n == 0:
        raise SystemExit("no complete window")

    t0 = time.time()
    model, load_stats = rc.load_gguf_llama(str(model_path))
    load_stats.update(rc.verify_qk_unpermuted(model, str(model_path)))
    t_load = time.time() - t0
    rc.log(f"model: {load_stats} ({t_load:.1f} s)")

    t0 = time.time()
    per_window = []
    for w in range(n):
        nll = window_nll(model, ids[w * args.ctx:(w + 1) * args.ctx])
        per_window.append(nll)
        rc.log(f"window {w + 1}/{n}: nll {nll:.4f}  ppl so far "
               f"{math.exp(sum(per_window) / (len(per_window) * (args.ctx - 1))):.4f}  ({time.time() - t0:.0f} s)")
    t_eval = time.time() - t0
    predicted = n * (args.ctx - 1)
    nll_sum = float(sum(per_window))
    result = {
        "ppl": math.exp(nll_sum / predicted),
        "nll_sum": nll_sum,
        "tokens": predicted,
        "windows": n,
        "windows_available": n_all,
        "ctx": args.ctx,
        "max_tokens": args.max_tokens,
        "text": rc.rel(args.text),
        "text_bytes": len(raw),
        "text_sha256": rc.sha256_file(args.text),
        "text_tokens": total_tokens,
        "text_token_ids_sha256": rc.sha256_ids(ids[: n * args.ctx]),
        "text_token_ids_sha256_note": "sha256 of the evaluated ids (first windows*ctx tokens) as int32 little-endian",
        "first_token_ids": ids[:32],
        "bos_added": bos_added,
        "model": rc.rel(model_path),
        "model_sha256": rc.sha256_file(model_path),
        "tokenizer": {**tinfo, "built_by": "refcommon.smollm_tokenizer_from_gguf", **tcheck},
        "loader": {"how": "transformers AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., dtype=float32, "
                          "attn_implementation='eager')", **load_stats},
        "dtype": "float32",
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "per_window_nll": per_window,
        "seconds": {"tokenize": round(t_tok, 1), "load": round(t_load, 1), "eval": round(t_eval, 1),
                    "total": round(time.time() - t_start, 1)},
        "versions": rc.versions(),
        "protocol": "whole text tokenized once, no BOS; non-overlapping windows of ctx tokens, incomplete tail "
                    "dropped; each window from an empty cache; NLL over positions 1..ctx-1; ppl = exp(nll_sum/tokens)",
        "generator": "tools/reference/ref_ppl.py",
    }
    print(f"ppl {result['ppl']:.6f}  nll_sum {nll_sum:.6f}  tokens {predicted}  windows {n}/{n_all}  ctx {args.ctx}")
    if args.out:
        rc.write_json(args.out, result)
        rc.record_reference(args.out)
        rc.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
