"""Helpers shared by the reference scripts in tools/reference/ (no side effects on import).

Everything here runs on the CPU in float32 with transformers' eager attention, so that the numbers are
an independent, boring reference for igen's C engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_WIKITEXT = REPO / ".." / "shared" / "data" / "wikitext-2-raw" / "wiki.test.raw"
DEFAULT_PTB = REPO / ".." / "shared" / "data" / "ptb" / "ptb.test.txt"


def versions() -> dict[str, str]:
    import gguf  # noqa: F401  (gguf-py has no __version__; ask the installed distribution)
    import safetensors
    import tokenizers
    import transformers
    from importlib.metadata import version

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "safetensors": safetensors.__version__,
        "gguf": version("gguf"),
        "numpy": np.__version__,
    }


def sha256_file(path: os.PathLike | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_ids(ids) -> str:
    """sha256 of a token id list written as little-endian int32 (how a C test can recompute it)."""
    return hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()


def setup_torch(threads: int | None = None) -> None:
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    if threads:
        torch.set_num_threads(threads)


def top2_gap(logits: torch.Tensor) -> float:
    """top1 - top2 of a 1-D logit vector (0.0 for an exact tie)."""
    v = torch.topk(logits.float(), 2).values
    return float(v[0] - v[1])


@torch.no_grad()
def greedy_with_cache(model, prompt: list[int], n_new: int) -> tuple[list[int], list[float]]:
    """Greedy decoding, one token at a time with transformers' KV cache (what generate(do_sample=False)
    does), never stopping at EOS. Returns (new token ids, top1-top2 logit gap at each step)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    # transformers 5.24 renamed past_key_values to `cache`; the DynamicCache is filled in place.
    out = model(input_ids=torch.tensor([prompt]), cache=cache, use_cache=True)
    toks, gaps = [], []
    for step in range(n_new):
        logits = out.logits[0, -1]
        t = int(torch.argmax(logits))
        toks.append(t)
        gaps.append(top2_gap(logits))
        if step + 1 < n_new:
            out = model(input_ids=torch.tensor([[t]]), cache=cache, use_cache=True)
    return toks, gaps


@torch.no_grad()
def check_greedy_without_cache(model, prompt: list[int], new: list[int]) -> float:
    """Re-runs prompt+new[:-1] in one forward pass without a cache; asserts that its argmax at each step
    reproduces `new` and returns the minimum top-2 gap seen on that path."""
    full = prompt + new[:-1]
    logits = model(input_ids=torch.tensor([full]), use_cache=False).logits[0]
    pos = range(len(prompt) - 1, len(full))
    pred = [int(torch.argmax(logits[p])) for p in pos]
    assert pred == new, f"greedy with cache {new} != without cache {pred}"
    return min(top2_gap(logits[p]) for p in pos)


@torch.no_grad()
def generate_greedy(model, prompt: list[int], n_new: int) -> list[int]:
    """transformers' generate(do_sample=False) for exactly n_new tokens: EOS does not stop it (the
    generation config's eos_token_id is set to an id outside the vocabulary; min_new_tokens would instead mask EOS out of the argmax)."""
    import copy

    cfg = copy.deepcopy(model.generation_config)
    # None would fall back to model.config.eos_token_id; an id past the vocabulary can never be produced.
    cfg.eos_token_id = int(model.config.vocab_size) + 1
    cfg.do_sample = False
    cfg.max_new_tokens = n_new
    cfg.pad_token_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                         generation_config=cfg)
    return out[0, len(prompt):].tolist()


# ---------------------------------------------------------------------------------------------------
# SmolLM2's tokenizer, rebuilt from a GGUF's tokenizer.ggml.* keys.
# ---------------------------------------------------------------------------------------------------
def smollm_tokenizer_from_gguf(gguf_path: str):
    """A `tokenizers.Tokenizer` equivalent to SmolLM2's tokenizer.json, from the vocabulary and merges
    stored in the GGUF.

    Why not the tokenizer transformers builds from the GGUF: transformers (5.x, integrations/gguf/
    gguf_tokenizer_mapping.py) turns a `tokenizer.ggml.model == "gpt2"` vocabulary into a GPT2Tokenizer
    whose pre-tokenizer is plain ByteLevel(use_regex=True); it overrides the split regex only for the
    `tokenizer.ggml.pre` values it lists, and "smollm" is not one of them. SmolLM2's own tokenizer.json
    (and llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM, regexes "\\p{N}" then the GPT-2 regex) first splits
    every digit on its own: Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False,
    use_regex=True)]. Without it "2024" becomes one or two tokens instead of four, so we build the
    tokenizer here: BPE over the GGUF's tokens/merges, that pre-tokenizer, a ByteLevel decoder, no
    post-processor (SmolLM2 adds no BOS; tokenizer.ggml.add_bos_token is false), and the tokens the
    GGUF marks CONTROL (type 3: <|endoftext|>, <|im_start|>, ...) as special added tokens, as in
    tokenizer.json.
    """
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    r = GGUFReader(gguf_path)

    def field(name):
        return r.fields[name].contents()

    assert field("tokenizer.ggml.model") == "gpt2", field("tokenizer.ggml.model")
    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in field("tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    assert len(vocab) == len(tokens), "duplicate token strings in the GGUF vocabulary"
    tok = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False, ignore_merges=False)
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    specials = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    tok.add_special_tokens(specials)
    info = {
        "pre": field("tokenizer.ggml.pre") if "tokenizer.ggml.pre" in r.fields else None,
        "add_bos_token": bool(field("tokenizer.ggml.add_bos_token")) if "tokenizer.ggml.add_bos_token" in r.fields else None,
        "bos_token_id": int(field("tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field("tokenizer.ggml.eos_token_id")),
        "n_tokens": len(tokens),
        "n_merges": len(merges),
        "n_control": len(specials),
    }
    return tok, info


# ---------------------------------------------------------------------------------------------------
# Loading a GGUF Llama with transformers, dequantized by gguf-py.
# ---------------------------------------------------------------------------------------------------
def load_gguf_llama(gguf_path: str, *, dtype=torch.float32):
    """AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=float32, eager attention).

    How transformers 5.x loads this (checked by the assertions below, not assumed):
    - integrations/gguf/ has a new loader that keeps blocks packed, but only for the architectures in
      GGUF_ARCHS (qwen35, qwen35moe, lfm2). "llama" goes through the legacy path,
      modeling_gguf_pytorch_utils.load_gguf_checkpoint, which calls gguf-py's
      `gguf.dequantize(tensor.data, tensor.tensor_type)` on every tensor (Q4_1, Q8_0, F16 and F32
      alike) and then LlamaTensorProcessor._reverse_permute_weights on attn_q (n_head) and attn_k
      (n_head_kv): reshape(n_head, head_dim//2, 2, in).swapaxes(1, 2), the exact inverse of
      convert_hf_to_gguf.py's LlamaModel.permute. So the model holds plain float32 weights in HF's
      (rotate_half) layout.
    - We wrap gguf.dequantize to count its calls and assert that every tensor in the file went through it.
    Returns (model, stats) where stats has the call count and the GGUF's tensor types.
    """
    import gguf
    from gguf import GGUFReader
    from transformers import AutoModelForCausalLM

    reader = GGUFReader(gguf_path)
    n_tensors = len(reader.tensors)
    types = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    del reader

    calls = {"n": 0, "types": {}}
    real = gguf.dequantize

    def counting_dequantize(data, qtype):
        calls["n"] += 1
        name = gguf.GGMLQuantizationType(qtype).name
        calls["types"][name] = calls["types"].get(name, 0) + 1
        return real(data, qtype)

    gguf.dequantize = counting_dequantize
    try:
        p = Path(gguf_path).resolve()
        model = AutoModelForCausalLM.from_pretrained(
            str(p.parent), gguf_file=p.name, dtype=dtype, attn_implementation="eager"
        )
    finally:
        gguf.dequantize = real
    model.eval()
    assert calls["n"] == n_tensors, f"gguf-py dequantize ran on {calls['n']} of {n_tensors} tensors"
    assert calls["types"] == types, (calls["types"], types)
    for p_ in model.parameters():
        assert p_.dtype == dtype
    return model, {"gguf_tensors": n_tensors, "gguf_tensor_types": types, "gguf_py_dequantize_calls": calls["n"]}


@torch.no_grad()
def verify_qk_unpermuted(model, gguf_path: str) -> dict:
    """Independent check of transformers' un-permutation: for the first and last layer, q_proj/k_proj in the
    loaded model must equal llama_unpermute(gguf-py dequantize(attn_q/attn_k)) exactly, and differ from the
    stored (permuted) rows."""
    import gguf
    from gguf import GGUFReader

    cfg = model.config
    n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    tensors = {t.name: t for t in GGUFReader(gguf_path).tensors}
    checked = []
    for i in sorted({0, cfg.num_hidden_layers - 1}):
        for g, hf, kv in (("attn_q", "q_proj", n_head), ("attn_k", "k_proj", n_kv)):
            t = tensors[f"blk.{i}.{g}.weight"]
            raw = gguf.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))
            want = llama_unpermute(raw, n_head, kv)
            got = getattr(model.model.layers[i].self_attn, hf).weight.detach().cpu().numpy()
            assert np.array_equal(got, want.astype(np.float32)), f"blk.{i}.{g}: not the un-permuted weights"
            assert not np.array_equal(got, raw), f"blk.{i}.{g}: the permutation was left in place"
            checked.append(f"blk.{i}.{g}.weight ({t.tensor_type.name})")
    return {"qk_unpermute_checked": checked}


def llama_permute(w: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute, verbatim in behaviour: HF's rotate_half row
    order within each head -> interleaved (GGML NORM-rope) order."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama_unpermute(w: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def canonicalize_safetensors_header(path: os.PathLike | str) -> None:
    """The safetensors package writes __metadata__ in hash-map order, which changes from run to run. Rewrite
    the JSON header in place with the metadata keys sorted (same length, same tensor entries and offsets,
    tensor bytes untouched) so that a rerun gives a byte-identical file."""
    import struct

    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        out = {}
        if "__metadata__" in header:
            out["__metadata__"] = dict(sorted(header.pop("__metadata__").items()))
        out.update(sorted(header.items()))
        text = json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        assert len(text) <= n, (len(text), n)
        f.seek(8)
        f.write(text + b" " * (n - len(text)))


def write_json(path: os.PathLike | str, obj) -> None:
    """Indented JSON, with lists of numbers kept on one line."""
    import re

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    text = re.sub(r"\[[-+\d\s,.eE]*\]", lambda m: json.dumps(json.loads(m.group(0))), text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


VERSIONS_JSON = Path(__file__).resolve().parent / "VERSIONS.json"
_SUMMARY_KEYS = ("ppl", "nll_sum", "tokens", "windows", "ctx", "text_sha256", "model_sha256", "min_top2_gap",
                 "seconds", "versions", "generator")


def record_reference(out_path: os.PathLike | str, versions_json: os.PathLike | str = VERSIONS_JSON) -> None:
    """Adds (or replaces) the summary of one reference JSON under "references" in VERSIONS.json."""
    data = json.loads(Path(out_path).read_text(encoding="utf-8"))
    vj = Path(versions_json)
    record = json.loads(vj.read_text(encoding="utf-8")) if vj.exists() else {}
    refs = record.setdefault("references", {})
    refs[rel(out_path)] = {k: data[k] for k in _SUMMARY_KEYS if k in data}
    record["references"] = dict(sorted(refs.items()))
    write_json(vj, record)


def rel(path: os.PathLike | str) -> str:
    """Path relative to the repo when it is inside or beside it, else absolute (for JSON records)."""
    p = Path(os.path.abspath(path))
    try:
        return os.path.relpath(p, REPO) if str(p).startswith(str(REPO.parent)) else str(p)
    except ValueError:
        return str(p)


def log(*a):
    print(*a, file=sys.stderr, flush=True)
