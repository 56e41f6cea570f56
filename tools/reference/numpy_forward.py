#!/usr/bin/env python3
"""A second, minimal implementation of the two architectures in plain numpy (float64), checked against the
transformers references in tests/fixtures. It exists to pin down, in readable form, exactly what the C engine
has to compute, and to show that the reference is what the README says it is:

- OPT: token embedding + learned position embedding at row pos + 2; per layer pre-LayerNorm ->
  q (scaled by head_dim^-0.5 after its bias), k, v -> causal softmax attention -> out_proj (+ bias) ->
  residual; LayerNorm -> fc1 (+ bias) -> ReLU -> fc2 (+ bias) -> residual; final LayerNorm; logits =
  x @ embed_tokens^T (tied).
- Llama: RMSNorm (x / sqrt(mean(x^2) + eps) * w); RoPE on q and k with theta from the config, in
  transformers' rotate_half layout (dimension i pairs with i + head_dim/2); grouped-query attention (query head
  h uses KV head h // (n_head / n_kv)); SwiGLU MLP down(silu(gate(x)) * up(x)); final RMSNorm; untied lm_head.
- GGUF: the same Llama read straight from tiny_llama.gguf with gguf-py (dequantized), WITHOUT undoing the
  Q/K permutation, using the interleaved RoPE (dimension 2i pairs with 2i+1, GGML's "NORM" rope) instead:
  the two are equivalent, so a loader may either un-permute the rows or use interleaved RoPE on them.

Usage: python tools/reference/numpy_forward.py [--fixtures DIR]   (prints the max |logit diff| per sequence)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import refcommon as rc  # noqa: E402


def load_safetensors_dir(d: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    files = sorted(d.glob("model*.safetensors"))
    out = {}
    for f in files:
        out.update({k: v.astype(np.float64) for k, v in load_file(str(f)).items()})
    return out


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def causal_attention(q, k, v):
    """q [T, H, D], k/v [T, H, D] (KV heads already expanded) -> [T, H*D]."""
    T, H, D = q.shape
    s = np.einsum("thd,shd->hts", q, k) / np.sqrt(D)
    s = np.where(np.tril(np.ones((T, T), dtype=bool))[None], s, -np.inf)
    return np.einsum("hts,shd->thd", softmax(s), v).reshape(T, H * D)


def layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope_angles(T, D, theta):
    inv = theta ** (-np.arange(0, D, 2, dtype=np.float64) / D)  # [D/2]
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]  # [T, D/2]
    return np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]


def rope_rotate_half(x, theta):
    """transformers' layout: pairs (i, i + D/2)."""
    T, _, D = x.shape
    cos, sin = rope_angles(T, D, theta)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rope_interleaved(x, theta):
    """GGML's NORM rope: pairs (2i, 2i + 1)."""
    T, _, D = x.shape
    cos, sin = rope_angles(T, D, theta)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x2 * cos + x1 * sin
    return out


def opt_forward(w, cfg, ids):
    H = cfg["num_attention_heads"]
    D = cfg["hidden_size"] // H
    T = len(ids)
    x = w["model.decoder.embed_tokens.weight"][ids] + w["model.decoder.embed_positions.weight"][np.arange(T) + 2]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.decoder.layers.{i}."

        def lin(name, h):
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        h = layernorm(x, w[p + "self_attn_layer_norm.weight"], w[p + "self_attn_layer_norm.bias"])
        # OPT multiplies q (bias included) by head_dim^-0.5; the same as dividing the scores, as causal_attention does
        q = lin("self_attn.q_proj", h).reshape(T, H, D)
        k = lin("self_attn.k_proj", h).reshape(T, H, D)
        v = lin("self_attn.v_proj", h).reshape(T, H, D)
        x = x + lin("self_attn.out_proj", causal_attention(q, k, v))
        h = layernorm(x, w[p + "final_layer_norm.weight"], w[p + "final_layer_norm.bias"])
        x = x + lin("fc2", np.maximum(lin("fc1", h), 0.0))
    x = layernorm(x, w["model.decoder.final_layer_norm.weight"], w["model.decoder.final_layer_norm.bias"])
    return x @ w["model.decoder.embed_tokens.weight"].T


def llama_forward(w, cfg, ids, rope=rope_rotate_half, wrong_gqa=False):
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    theta, eps = cfg["rope_theta"], cfg["rms_norm_eps"]
    T = len(ids)
    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, D), theta)
        k = rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, D), theta)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, D)
        if wrong_gqa:  # a deliberate mistake, for the checks in main(): query head h -> KV head h % KV
            k, v = np.tile(k, (1, H // KV, 1)), np.tile(v, (1, H // KV, 1))
        else:  # query head h -> KV head h // (H/KV)
            k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)
        x = x + causal_attention(q, k, v) @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    return rmsnorm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def load_gguf_llama_raw(path: Path):
    """Weights straight from the GGUF (dequantized by gguf-py), Q/K left permuted, HF names."""
    import gguf
    from gguf import GGUFReader

    r = GGUFReader(str(path))

    def f(name):
        return r.fields[name].contents()

    cfg = {"num_attention_heads": f("llama.attention.head_count"), "num_key_value_heads": f("llama.attention.head_count_kv"),
           "head_dim": f("llama.rope.dimension_count"), "rope_theta": f("llama.rope.freq_base"),
           "rms_norm_eps": f("llama.attention.layer_norm_rms_epsilon"), "num_hidden_layers": f("llama.block_count")}
    leaf = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
            "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
            "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    w = {}
    for t in r.tensors:
        a = gguf.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(list(reversed(t.shape.tolist())))
        n = t.name
        if n == "token_embd.weight":
            hf = "model.embed_tokens.weight"
        elif n == "output.weight":
            hf = "lm_head.weight"
        elif n == "output_norm.weight":
            hf = "model.norm.weight"
        else:
            _, i, lf, _ = n.split(".")
            hf = f"model.layers.{i}.{leaf[lf]}.weight"
        w[hf] = a
    return w, cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default=str(rc.REPO / "tests" / "fixtures"))
    args = ap.parse_args()
    from safetensors.numpy import load_file

    fx = Path(args.fixtures)
    worst = 0.0
    cases = []
    for name, kind in (("tiny_opt", "opt"), ("tiny_opt_sharded", "opt"), ("tiny_llama", "llama"),
                       ("tiny_llama_f16", "llama")):
        d = fx / name
        cfg = json.loads((d / "config.json").read_text())
        if kind == "llama":
            cfg["rope_theta"] = cfg["rope_parameters"]["rope_theta"]
        ref_dir = fx / "tiny_opt" if name == "tiny_opt_sharded" else d
        cases.append((name, load_safetensors_dir(d), cfg, kind, ref_dir / "reference.safetensors"))
    w, cfg = load_gguf_llama_raw(fx / "tiny_llama.gguf")
    cases.append(("tiny_llama.gguf (permuted Q/K + interleaved RoPE)", w, cfg, "gguf",
                  fx / "tiny_llama.gguf.reference.safetensors"))
    for name, w, cfg, kind, ref_path in cases:
        ref = load_file(str(ref_path))
        diffs = []
        for i in range(sum(1 for k in ref if k.startswith("tokens_"))):
            ids = ref[f"tokens_{i}"].astype(np.int64)
            if kind == "opt":
                logits = opt_forward(w, cfg, ids)
            elif kind == "llama":
                logits = llama_forward(w, cfg, ids)
            else:
                logits = llama_forward(w, cfg, ids, rope=rope_interleaved)
            diffs.append(float(np.abs(logits - ref[f"logits_{i}"]).max()))
        worst = max(worst, max(diffs))
        print(f"{name}: max |numpy - reference| per sequence: {['%.2e' % d for d in diffs]}")
    assert worst < 1e-3, worst
    print(f"OK (worst {worst:.2e})")

    # The fixtures are meant to catch the usual mistakes: each of these must move the logits by a lot.
    ref = load_file(str(fx / "tiny_llama" / "reference.safetensors"))
    ids = ref["tokens_3"].astype(np.int64)
    w = load_safetensors_dir(fx / "tiny_llama")
    cfg = json.loads((fx / "tiny_llama" / "config.json").read_text())
    cfg["rope_theta"] = cfg["rope_parameters"]["rope_theta"]
    mistakes = {
        "llama: interleaved RoPE on HF (un-permuted) weights": lambda: llama_forward(w, cfg, ids, rope=rope_interleaved),
        "llama: rope theta 10000": lambda: llama_forward(w, {**cfg, "rope_theta": 10000.0}, ids),
        "llama: no RMSNorm weights": lambda: llama_forward(
            {k: (np.ones_like(v) if "norm" in k else v) for k, v in w.items()}, cfg, ids),
        "llama: KV head h % n_kv instead of h // (n_head/n_kv)": lambda: llama_forward(w, cfg, ids, wrong_gqa=True),
    }
    wo = load_safetensors_dir(fx / "tiny_opt")
    ocfg = json.loads((fx / "tiny_opt" / "config.json").read_text())
    oref = load_file(str(fx / "tiny_opt" / "reference.safetensors"))
    oids = oref["tokens_3"].astype(np.int64)
    pos = wo["model.decoder.embed_positions.weight"]
    mistakes.update({
        "opt: positions without the offset of 2": lambda: opt_forward(
            {**wo, "model.decoder.embed_positions.weight": np.concatenate([pos[:0], pos[2:], pos[:2]])}, ocfg, oids),
        "opt: biases dropped": lambda: opt_forward(
            {k: (np.zeros_like(v) if k.endswith(".bias") and "norm" not in k else v) for k, v in wo.items()}, ocfg, oids),
        "opt: LayerNorm bias dropped": lambda: opt_forward(
            {k: (np.zeros_like(v) if k.endswith(".bias") and "norm" in k else v) for k, v in wo.items()}, ocfg, oids),
    })
    for what, fn in mistakes.items():
        r = oref["logits_3"] if what.startswith("opt") else ref["logits_3"]
        d = float(np.abs(fn() - r).max())
        print(f"mistake check: {what}: max |diff| {d:.2f}")
        assert d > 0.5, what





if __name__ == "__main__":
    main()
