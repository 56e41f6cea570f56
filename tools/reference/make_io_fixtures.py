#!/usr/bin/env python3
"""Writes the golden fixtures for igen's model-file readers (tests/test_gguf.c, test_dequant.c,
test_safetensors.c) with independent reference code: gguf-py's writer, quantizers and dequantizers,
and the safetensors package. It never reads igen's own output, so the C tests can fail.

Run with the reference environment (torch, gguf-py, numpy, safetensors):
    /opt/refvenv/bin/python tools/reference/make_io_fixtures.py [--model PATH] [--out DIR]

Outputs (all tiny and synthetic, except the few numbers taken from the real model):
    quants.gguf            one tensor per supported ggml type plus '<name>.expected' F32 tensors
                           holding gguf.quants.dequantize() of it; metadata of every value type
    smollm2_expected.json  facts and dequantized samples of the real SmolLM2 GGUF (if present)
    st_single/model.safetensors          one tensor per supported dtype + __metadata__
    st_sharded/model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json
    VERSIONS.json          versions of python, numpy, gguf, torch, safetensors and the seed
"""
import argparse
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

SEED = 20240611
QK_K = 256

# Tensor shapes are numpy (row-major) shapes; in GGUF ne is the reverse. Kept small: the whole
# fixture stays well under 100 KB.
QUANT_TYPES = [
    ("f32", QT.F32, (3, 64)),
    ("f16", QT.F16, (3, 64)),
    ("bf16", QT.BF16, (3, 64)),
    ("q4_0", QT.Q4_0, (3, 64)),
    ("q4_1", QT.Q4_1, (3, 64)),
    ("q5_0", QT.Q5_0, (3, 64)),
    ("q5_1", QT.Q5_1, (3, 64)),
    ("q8_0", QT.Q8_0, (2, 3, 64)),  # a 3-D tensor: ne = {64, 3, 2}
    ("q2_k", QT.Q2_K, (2, 256)),
    ("q3_k", QT.Q3_K, (2, 256)),
    ("q4_k", QT.Q4_K, (2, 256)),
    ("q5_k", QT.Q5_K, (2, 256)),
    ("q6_k", QT.Q6_K, (2, 256)),
]

# Byte offsets of the f16 scale fields inside one block, for types whose blocks are made from random
# bytes (gguf-py has no quantizer for the K-quants): random bytes there could be inf/NaN, so these
# fields get finite random halves instead. Every other byte (quants, packed 6-bit scales) stays
# random, which exercises every bit pattern of the unpacking code.
F16_FIELDS = {
    QT.Q2_K: [QK_K // 16 + QK_K // 4, QK_K // 16 + QK_K // 4 + 2],  # d, dmin at the end
    QT.Q3_K: [QK_K // 8 + QK_K // 4 + 12],                          # d at the end
    QT.Q4_K: [0, 2],                                                # d, dmin first
    QT.Q5_K: [0, 2],
    QT.Q6_K: [QK_K // 2 + QK_K // 4 + QK_K // 16],                  # d at the end
}


def quantized_bytes(rng, qtype, shape):
    """Raw block bytes (uint8, shape (..., row_bytes)) for a tensor of the given element shape."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype in F16_FIELDS:
        n_blocks = int(np.prod(shape)) // block_size
        raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
        for off in F16_FIELDS[qtype]:
            halves = (rng.standard_normal(n_blocks) * 0.02).astype(np.float16)
            raw[:, off:off + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
        return raw.reshape(gguf.quants.quant_shape_to_byte_shape(shape, qtype))
    data = rng.standard_normal(shape).astype(np.float32)
    # A few exact zeros and a constant block test the d == 0 paths of the quantizers.
    flat = data.reshape(-1)
    flat[:32] = 0.0
    flat[32:64] = 0.75
    q = gguf.quants.quantize(data, qtype)
    return np.ascontiguousarray(q)


def float_tensor(rng, qtype, shape):
    data = rng.standard_normal(shape).astype(np.float32)
    flat = data.reshape(-1)
    # Special values: signed zero, infinities, a NaN, subnormals of each format, large values.
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, -65504.0, 6e-8, -6e-8, 1e-40, 3.0e38]
    flat[: len(special)] = np.array(special, dtype=np.float32)
    if qtype == QT.F32:
        return data
    if qtype == QT.F16:
        with np.errstate(over="ignore"):
            return data.astype(np.float16)
    # BF16: gguf-py's own converter (round to nearest even, quiet NaN), stored as raw uint8 bytes.
    return gguf.quants.quantize(data, QT.BF16)


def write_quants_gguf(path, rng):
    w = gguf.GGUFWriter(path, arch="igen-test")
    # A non-default alignment exercises general.alignment; the writer pads tensor data to it.
    w.add_custom_alignment(64)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 3.25)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo w\u00f6rld")
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62))
    w.add_float64("test.f64", -1.0e300)
    w.add_uint32("test.small_i64_as_u32", 7)
    w.add_int64("test.i64_fits_u32", 123456)
    w.add_int32("test.negative", -1)
    w.add_array("test.arr_i32", [1, -2, 3, -4])
    w.add_array("test.arr_f32", [0.5, -1.5, 2.25])
    w.add_array("test.arr_str", ["a", "bc", "", "d\u00e9f"])
    w.add_array("test.arr_bool", [True, False, True])
    w.add_key_value("test.arr_u64", [1, 2**64 - 1], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.UINT64)
    w.add_key_value("test.arr_u8", [0, 255, 7], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.UINT8)
    w.add_key_value("test.arr_nested", [[1, 2], [3]], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.ARRAY)

    manifest = []
    for name, qtype, shape in QUANT_TYPES:
        if qtype in (QT.F32, QT.F16, QT.BF16):
            data = float_tensor(rng, qtype, shape)
        else:
            data = quantized_bytes(rng, qtype, shape)
        raw = data.view(np.uint8) if data.dtype != np.uint8 else data
        if qtype == QT.F32:
            w.add_tensor(name, data)
            expected = data.copy()
        elif qtype == QT.F16:
            w.add_tensor(name, data)
            expected = gguf.quants.dequantize(raw.reshape(-1), qtype)
        else:
            w.add_tensor(name, data, raw_dtype=qtype)
            expected = gguf.quants.dequantize(data, qtype)
        expected = np.asarray(expected, dtype=np.float32).reshape(shape)
        w.add_tensor(name + ".expected", np.ascontiguousarray(expected))
        manifest.append(name)
    w.add_array("test.tensor_names", manifest)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def model_expectations(model_path):
    """Facts about the real model read with gguf-py's GGUFReader (independent of igen)."""
    r = gguf.GGUFReader(model_path)
    h = hashlib.sha256()
    with open(model_path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    out = {"model_file": os.path.basename(model_path), "model_sha256": h.hexdigest(),
           "n_tensors": len(r.tensors),
           "n_kv": len(r.fields) - 3,  # GGUFReader adds GGUF.version/tensor_count/kv_count
           "alignment": int(r.alignment), "data_offset": int(r.data_offset)}
    out["general.architecture"] = r.fields["general.architecture"].contents()
    out["llama.block_count"] = int(r.fields["llama.block_count"].contents())
    out["n_vocab_tokens"] = len(r.fields["tokenizer.ggml.tokens"].data)
    out["token_100"] = r.fields["tokenizer.ggml.tokens"].contents(100)
    tensors = {t.name: t for t in r.tensors}
    samples = {}
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight",
                 "output_norm.weight"):
        t = tensors[name]
        vals = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        bits = vals.view(np.uint32).astype(np.uint64)
        n = vals.size
        # An order-defined, bit-exact checksum: sum over i of bits[i] * (i + 1), mod 2^64.
        with np.errstate(over="ignore"):
            weighted = np.sum(bits * np.arange(1, n + 1, dtype=np.uint64), dtype=np.uint64)
        idx = sorted({0, 1, 31, 32, 33, n // 3, n // 2, n - 33, n - 1}
                     | set(int(i) for i in np.random.default_rng(SEED).integers(0, n, 7)))
        samples[name] = {
            "type": t.tensor_type.name,
            "ne": [int(x) for x in t.shape],
            "n_elements": int(n),
            "n_bytes": int(t.n_bytes),
            "file_offset": int(t.data_offset),
            "checksum_bits_weighted": str(int(weighted)),  # a string: JSON numbers lose precision
            "sum": math.fsum(float(v) for v in vals),
            "indices": idx,
            "values": [float(vals[i]) for i in idx],
            "bits": [int(bits[i]) for i in idx],
        }
    out["tensors"] = samples
    return out


def sort_metadata(path):
    """The safetensors package writes __metadata__ in hash-map order, which changes from run to run;
    rewrite it in key order (same bytes, same length) so that regenerated fixtures are identical."""
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n, (len(text), n)
    blob[8:8 + n] = text + b" " * (n - len(text))
    with open(path, "wb") as f:
        f.write(blob)


def write_safetensors(out_dir):
    import torch
    from safetensors.torch import save_file

    # Values are exact in every dtype and follow simple formulas the C test recomputes.
    def ramp(n):
        return torch.arange(n, dtype=torch.float64)

    single = {
        "f32": (ramp(6) * 0.25 - 1.0).to(torch.float32).reshape(2, 3),
        "f16": (ramp(8) * 0.5 - 2.0).to(torch.float16).reshape(2, 2, 2),
        "bf16": (ramp(4) * 2.0 - 3.0).to(torch.bfloat16),
        "i32": (torch.arange(6, dtype=torch.int32) * -7 + 5).reshape(3, 2),
        "i64": torch.tensor([-(2**40), 0, 2**40 + 3], dtype=torch.int64),
        "u8": torch.tensor([0, 1, 254, 255], dtype=torch.uint8),
        "i8": torch.tensor([-128, -1, 0, 127], dtype=torch.int8),
        "f64": torch.tensor([[1.0e-300, -2.5]], dtype=torch.float64),
        "scalar": torch.tensor(4.5, dtype=torch.float32),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
    }
    d = os.path.join(out_dir, "st_single")
    os.makedirs(d, exist_ok=True)
    save_file(single, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt", "producer": "make_io_fixtures.py"})
    sort_metadata(os.path.join(d, "model.safetensors"))

    d = os.path.join(out_dir, "st_sharded")
    os.makedirs(d, exist_ok=True)
    shards = {
        "model-00001-of-00002.safetensors": {
            "layers.0.weight": (ramp(12) - 6.0).to(torch.float32).reshape(3, 4),
            "layers.0.bias": (ramp(3) * 0.5).to(torch.float16),
        },
        "model-00002-of-00002.safetensors": {
            "layers.1.weight": (ramp(8) * -0.25).to(torch.bfloat16).reshape(2, 4),
            "embed.ids": torch.arange(5, dtype=torch.int64),
        },
    }
    weight_map, total = {}, 0
    for fname, tensors in shards.items():
        save_file(tensors, os.path.join(d, fname), metadata={"format": "pt", "shard": fname})
        sort_metadata(os.path.join(d, fname))
        for k, v in tensors.items():
            weight_map[k] = fname
            total += v.numel() * v.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(repo, "tests", "fixtures", "io"))
    ap.add_argument("--model", default=os.environ.get("IGEN_MODEL") or os.path.join(
        repo, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rng = np.random.default_rng(SEED)
    write_quants_gguf(os.path.join(args.out, "quants.gguf"), rng)
    write_safetensors(args.out)
    if os.path.exists(args.model):
        exp = model_expectations(args.model)
        with open(os.path.join(args.out, "smollm2_expected.json"), "w") as f:
            json.dump(exp, f, indent=1)
            f.write("\n")
    else:
        print(f"note: {args.model} not found; smollm2_expected.json not regenerated",
              file=sys.stderr)

    versions = {
        "generator": "tools/reference/make_io_fixtures.py",
        "seed": SEED,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gguf": importlib.metadata.version("gguf"),
        "torch": importlib.metadata.version("torch"),
        "safetensors": importlib.metadata.version("safetensors"),
    }
    with open(os.path.join(args.out, "VERSIONS.json"), "w") as f:
        json.dump(versions, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
