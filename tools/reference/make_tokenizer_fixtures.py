#!/usr/bin/env python3
"""Golden values for tests/test_tokenizer.c, from an independent reference (Hugging Face `tokenizers`,
cross-checked with `transformers` and `sentencepiece`).

Run with the reference environment (tokenizers 0.23, transformers 5.x, gguf-py, sentencepiece):

    /opt/refvenv/bin/python tools/reference/make_tokenizer_fixtures.py [--gguf MODEL] [--wikitext FILE]

Writes tests/fixtures/tokenizer/:
  smollm2_wikitext2_test.json   (a) SmolLM2 GGUF vocab+merges in a HF Tokenizer: WikiText-2 test file
                                    (count, FNV-1a 64 of the ids as little-endian int32, first 64 ids)
                                    and ~20 tricky strings.
  bytelevel_tokenizer.json      (b) tiny byte-level BPE (SmolLM2's pre-tokenizer: Digits + ByteLevel)
  bytelevel_split_tokenizer.json     the same vocab with a Llama-3 style Split regex, ignore_merges, BOS
  spm_tokenizer.json                 tiny SentencePiece BPE with byte fallback (Llama-2 layout:
                                     Prepend/Replace normalizer, Replace/ByteFallback/Fuse/Strip decoder)
  spm_metaspace_tokenizer.json       the same vocab with the Metaspace pre-tokenizer and decoder
  bytelevel.gguf, spm.gguf           the tiny vocabularies as tokenizer-only GGUF files (no tensors)
  no_tokens.gguf, bad_pre.gguf       GGUFs for the error paths
  cases.json                         test strings with expected ids and decoded strings per tokenizer

The tiny vocabularies are trained here on generated text (a seeded random generator over a fixed
list of syllables, numbers and symbols); nothing is copied from a data set.
"""
import argparse
import hashlib
import json
import os
import random
import struct
import sys
import tempfile

import gguf
import sentencepiece as spm
import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def fnv1a64_ids(ids):
    h = 0xCBF29CE484222325
    for b in struct.pack("<%di" % len(ids), *ids):
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def versions():
    return {
        "tokenizers": tokenizers.__version__,
        "transformers": transformers.__version__,
        "sentencepiece": spm.__version__,
        "gguf": getattr(gguf, "__version__", "unknown"),
        "python": sys.version.split()[0],
    }


def write_json(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print("wrote", path, os.path.getsize(path), "bytes")


# ---------------------------------------------------------------------------------------------
# (a) SmolLM2 from its GGUF


def gguf_field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        return [f.contents(i) for i in range(len(f.data))]
    return f.contents()


def smollm2_from_gguf(path):
    """SmolLM2's own tokenizer.json shape (pre-tokenizer Sequence[Digits(individual), ByteLevel],
    ByteLevel decoder, the 17 control tokens as special added tokens) over the GGUF's vocab and merges."""
    r = gguf.GGUFReader(path)
    tokens = gguf_field(r, "tokenizer.ggml.tokens")
    merges = gguf_field(r, "tokenizer.ggml.merges")
    types = gguf_field(r, "tokenizer.ggml.token_type")
    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    )
    return tok


SMOL_TRICKY = [
    "Hello world",
    " Hello  world ",
    "I'm sure they'll say it's what we've done, isn't it? DON'T",
    "1234567890 and 3.14159, 2024-01-01, 1,000,000",
    "Numbers: \u0661\u0662\u0663 (Arabic-Indic) \u00bd \u2163",
    "caf\u00e9 na\u00efve Stra\u00dfe \u0141\u00f3d\u017a",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u05e2\u05d1\u05e8\u05d9\u05ea",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587",
    "emoji \U0001F600\U0001F44D\U0001F3FD family \U0001F468\u200d\U0001F469\u200d\U0001F467",
    "tabs\tand\nnewlines\n\n\nend",
    "many     spaces   \n   and trailing   ",
    "\n\n",
    "<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    "text<|endoftext|>more text",
    "<|im_start|><|im_end|>",
    "not special: <|im_start |> <im_start>",
    "def f(x):\n    return x ** 2  # square\n",
    "https://example.com/path?q=1&r=two#frag",
    "\u00a0non-breaking\u3000ideographic\u2028line sep",
    "\u180e mongolian vowel separator and \U0001e4d0 new letter",
    "",
]


def part_a(gguf_path, wikitext_path):
    tok = smollm2_from_gguf(gguf_path)
    with open(wikitext_path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")  # exactly as-is: no stripping, no newline translation
    ids = tok.encode(text, add_special_tokens=False).ids

    # transformers' own GGUF conversion, for comparison. It builds a GPT2Tokenizer (ByteLevel
    # pre-tokenizer without the Digits step) because tokenizer.ggml.pre=smollm is not in its table.
    note = {}
    try:
        tmp = tempfile.mkdtemp()
        os.symlink(os.path.abspath(gguf_path), os.path.join(tmp, "model.gguf"))
        tf = transformers.AutoTokenizer.from_pretrained(tmp, gguf_file="model.gguf")
        tf_ids = tf(text, add_special_tokens=False)["input_ids"]
        tricky_diff = [s for s in SMOL_TRICKY if tf(s, add_special_tokens=False)["input_ids"] != tok.encode(s, add_special_tokens=False).ids]
        first = next((i for i, (a, b) in enumerate(zip(ids, tf_ids)) if a != b), None)
        if first is None and len(ids) != len(tf_ids):
            first = min(len(ids), len(tf_ids))
        note = {
            "transformers_gguf_pre_tokenizer": json.loads(tf.backend_tokenizer.to_str())["pre_tokenizer"],
            "transformers_gguf_agrees_on_wikitext": first is None,
            "transformers_gguf_first_difference": first,
            "transformers_gguf_disagrees_on_tricky": tricky_diff,
        }
    except Exception as e:  # report, do not fail: the reference is the tokenizers build above
        note = {"transformers_gguf_error": repr(e)}

    cases = []
    for s in SMOL_TRICKY:
        e = tok.encode(s, add_special_tokens=False).ids
        d = tok.decode(e, skip_special_tokens=False)
        cases.append({"text": s, "ids": e, "decoded": d, "roundtrip": d == s})

    write_json(
        "smollm2_wikitext2_test.json",
        {
            "comment": "SmolLM2-135M-Instruct GGUF vocab+merges in a tokenizers.Tokenizer with "
            "pre_tokenizer Sequence[Digits(individual_digits), ByteLevel(add_prefix_space=false, "
            "use_regex=true)], ByteLevel decoder, control tokens (token_type 3) as special added "
            "tokens; made by tools/reference/make_tokenizer_fixtures.py",
            "versions": versions(),
            "gguf": os.path.basename(gguf_path),
            "wikitext": {
                "file": "wikitext-2-raw/wiki.test.raw",
                "bytes": len(raw),
                "sha256": hashlib.sha256(raw).hexdigest(),
                "count": len(ids),
                "fnv1a64": "%016x" % fnv1a64_ids(ids),
                "first_ids": ids[:64],
                # to locate a first difference: FNV-1a 64 of each block of 1024 ids
                "block_size": 1024,
                "block_fnv1a64": ["%016x" % fnv1a64_ids(ids[i : i + 1024]) for i in range(0, len(ids), 1024)],
            },
            "transformers_check": note,
            "cases": cases,
        },
    )
    print("wikitext: %d tokens, fnv %016x; transformers check: %s" % (len(ids), fnv1a64_ids(ids), note))


# ---------------------------------------------------------------------------------------------
# (b) tiny tokenizers trained on generated text

SYLLABLES = "ka lo mi ne ru sa ti vo pe da zu fi go hu ja lu mo ni pa ro se ta vu we xi yo ze".split()
UNICODE_WORDS = ["caf\u00e9", "na\u00efve", "\u00fcber", "Stra\u00dfe", "\u03bb\u03cc\u03b3\u03bf\u03c2",
                 "\u043c\u0438\u0440", "\u65e5\u672c", "\u6587\u5b57"]
PUNCT = [".", ",", "!", "?", ";", ":", "-", "(", ")", "\"", "'"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]


def generate_corpus(n_lines, seed):
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(120)]
    lines = []
    for _ in range(n_lines):
        parts = []
        for _ in range(rng.randint(3, 14)):
            r = rng.random()
            if r < 0.70:
                w = rng.choice(words)
                if rng.random() < 0.15:
                    w = w.capitalize()
                if rng.random() < 0.05:
                    w += rng.choice(CONTRACTIONS)
            elif r < 0.80:
                w = str(rng.randint(0, 99999))
            elif r < 0.88:
                w = rng.choice(UNICODE_WORDS)
            else:
                w = rng.choice(PUNCT)
            parts.append(w)
        sep = "  " if rng.random() < 0.05 else " "
        lines.append(sep.join(parts))
    return lines


CASES = [
    "",
    "Hello world",
    "kalo mine ruvo",
    " leading space",
    "trailing space ",
    "multiple   spaces  here",
    "tabs\tand\nnewlines\n\nhere\n",
    "I'm sure they'll say it's what we've done, DON'T",
    "Numbers 1234567 and 3.14159 and 42",
    "caf\u00e9 na\u00efve \u00fcber Stra\u00dfe",
    "\u03bb\u03cc\u03b3\u03bf\u03c2 \u043c\u0438\u0440 \u65e5\u672c\u6587\u5b57",
    "unseen: \u2603 snowman, \U0001D518 fraktur, emoji \U0001F600\U0001F44D\U0001F3FD",
    "  \n  ",
    "x",
]
BYTELEVEL_CASES = CASES + [
    "<|im_start|>user\nkalo mi<|im_end|>\n",
    "sa<|endoftext|>ti",
    "word <mask> word",
    "a<tool>b <tool> c",
]
SPM_CASES = CASES + [
    "<s>kalo</s>",
    "mine <s> ruvo",
    "<unk> and <s",
]


def train_bytelevel(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    # A non-special added token, and one that eats the spaces around it.
    tok.add_tokens([AddedToken("<tool>", normalized=False, special=False)])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, normalized=False, special=True)])
    return tok


def bytelevel_split_variant(tok):
    """Same vocab and merges, Llama-3 layout: Split(regex) + ByteLevel(use_regex=false),
    ignore_merges, BOS from a TemplateProcessing post-processor."""
    j = json.loads(tok.to_str())
    j["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }
    j["model"]["ignore_merges"] = True
    bos = "<|endoftext|>"
    bos_id = tok.token_to_id(bos)
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    return Tokenizer.from_str(json.dumps(j))


def train_spm(lines, workdir):
    """A real SentencePiece BPE model (byte fallback, digits split, identity normalization, as
    Llama's), converted to the tokenizer.json layout of Llama-2's hub tokenizer."""
    prefix = os.path.join(workdir, "tiny_spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_prefix=prefix,
        model_type="bpe",
        vocab_size=560,
        byte_fallback=True,
        split_digits=True,
        normalization_rule_name="identity",
        add_dummy_prefix=True,
        remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True,
        character_coverage=0.995,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    scores = [sp.get_score(i) for i in range(sp.get_piece_size())]
    types = []
    for i in range(sp.get_piece_size()):
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_byte(i):
            types.append(6)
        elif sp.is_unused(i):
            types.append(5)
        else:
            types.append(1)
    vocab = {p: i for i, p in enumerate(pieces)}
    # Merges as transformers' LlamaConverter derives them: every split of a piece into two pieces,
    # ranked by the score of the merged piece.
    merges = transformers.tokenization_utils_base.generate_merges(vocab, dict(zip(pieces, scores)))
    bpe = models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ["<unk>", "<s>", "</s>"]])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    return sp, tok, pieces, scores, types


def spm_metaspace_variant(tok):
    j = json.loads(tok.to_str())
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    j["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    return Tokenizer.from_str(json.dumps(j))


def write_gguf(name, kv):
    path = os.path.join(OUT, name)
    w = gguf.GGUFWriter(path, "llama")
    for key, (kind, val) in kv.items():
        getattr(w, "add_" + kind)(key, val)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", path, os.path.getsize(path), "bytes")


def expected(tok, strings, add_bos):
    out = []
    for s in strings:
        ids = tok.encode(s, add_special_tokens=add_bos).ids
        dec = tok.decode(ids, skip_special_tokens=False)
        plain = tok.encode(s, add_special_tokens=False).ids
        rt = tok.decode(plain, skip_special_tokens=False) == s
        out.append({"text": s, "ids": ids, "decoded": dec, "roundtrip": rt})
    return out


def part_b():
    lines = generate_corpus(3000, seed=20240601)
    work = tempfile.mkdtemp()
    report = {}

    bl = train_bytelevel(lines)
    bl.save(os.path.join(OUT, "bytelevel_tokenizer.json"))
    bls = bytelevel_split_variant(bl)
    bls.save(os.path.join(OUT, "bytelevel_split_tokenizer.json"))

    sp, st, pieces, scores, types = train_spm(lines, work)
    st.save(os.path.join(OUT, "spm_tokenizer.json"))
    sm = spm_metaspace_variant(st)
    sm.save(os.path.join(OUT, "spm_metaspace_tokenizer.json"))

    # sentencepiece itself agrees with the tokenizer.json on plain text (it does not parse <s> in
    # text, so the strings holding special tokens are left out of the comparison).
    plain = [s for s in SPM_CASES if "<" not in s]
    report["sentencepiece_agrees_on_plain_text"] = all(
        sp.encode(s, add_bos=True) == st.encode(s).ids for s in plain
    )
    report["sentencepiece_disagrees"] = [s for s in plain if sp.encode(s, add_bos=True) != st.encode(s).ids]

    # Tokenizer-only GGUF files.
    blj = json.loads(bl.to_str())
    bl_vocab = sorted(blj["model"]["vocab"].items(), key=lambda kv: kv[1])
    bl_tokens = [t for t, _ in bl_vocab]
    assert [i for _, i in bl_vocab] == list(range(len(bl_tokens)))
    for a in blj["added_tokens"]:
        if a["id"] >= len(bl_tokens):
            assert a["id"] == len(bl_tokens)
            bl_tokens.append(a["content"])
    bl_types = [1] * len(bl_tokens)
    for a in blj["added_tokens"]:
        bl_types[a["id"]] = 3 if a["special"] else 4
    bl_merges = [m if isinstance(m, str) else " ".join(m) for m in blj["model"]["merges"]]
    write_gguf("bytelevel.gguf", {
        "tokenizer.ggml.model": ("string", "gpt2"),
        "tokenizer.ggml.pre": ("string", "smollm"),
        "tokenizer.ggml.tokens": ("array", bl_tokens),
        "tokenizer.ggml.token_type": ("array", bl_types),
        "tokenizer.ggml.merges": ("array", bl_merges),
        "tokenizer.ggml.bos_token_id": ("uint32", bl.token_to_id("<|im_start|>")),
        "tokenizer.ggml.eos_token_id": ("uint32", bl.token_to_id("<|im_end|>")),
        "tokenizer.ggml.add_bos_token": ("bool", False),
    })
    write_gguf("spm.gguf", {
        "tokenizer.ggml.model": ("string", "llama"),
        "tokenizer.ggml.tokens": ("array", pieces),
        "tokenizer.ggml.scores": ("array", scores),
        "tokenizer.ggml.token_type": ("array", types),
        "tokenizer.ggml.bos_token_id": ("uint32", 1),
        "tokenizer.ggml.eos_token_id": ("uint32", 2),
        "tokenizer.ggml.unknown_token_id": ("uint32", 0),
        "tokenizer.ggml.add_bos_token": ("bool", True),
        "tokenizer.ggml.add_space_prefix": ("bool", True),
    })
    write_gguf("no_tokens.gguf", {
        "tokenizer.ggml.model": ("string", "gpt2"),
        "tokenizer.ggml.merges": ("array", ["a b"]),
    })
    write_gguf("bad_pre.gguf", {
        "tokenizer.ggml.model": ("string", "gpt2"),
        "tokenizer.ggml.pre": ("string", "no-such-pre"),
        "tokenizer.ggml.tokens": ("array", ["a", "b", "ab"]),
        "tokenizer.ggml.merges": ("array", ["a b"]),
    })

    # transformers' GGUF conversion of the tiny SentencePiece file, for the record: it uses the
    # Metaspace(prepend_scheme=first) layout, so it differs from llama.cpp / the Llama-2
    # tokenizer.json after a special token in the text ("mine <s> ruvo").
    try:
        tmp = tempfile.mkdtemp()
        os.symlink(os.path.join(OUT, "spm.gguf"), os.path.join(tmp, "spm.gguf"))
        tf = transformers.AutoTokenizer.from_pretrained(tmp, gguf_file="spm.gguf")
        report["transformers_gguf_spm_disagrees"] = [
            s for s in SPM_CASES if tf(s)["input_ids"] != st.encode(s).ids
        ]
    except Exception as e:
        report["transformers_gguf_spm_error"] = repr(e)

    write_json("cases.json", {
        "comment": "Expected ids (and HF decode of them) for the tiny tokenizers; add_bos says whether "
        "the ids include the post-processor's BOS. Made by tools/reference/make_tokenizer_fixtures.py",
        "versions": versions(),
        "report": report,
        "tokenizers": [
            {"file": "bytelevel_tokenizer.json", "kind": "byte_bpe", "add_bos": False, "bos": -1,
             "vocab_size": bl.get_vocab_size(), "cases": expected(bl, BYTELEVEL_CASES, False)},
            {"file": "bytelevel_split_tokenizer.json", "kind": "byte_bpe", "add_bos": True,
             "bos": bls.token_to_id("<|endoftext|>"), "vocab_size": bls.get_vocab_size(),
             "cases": expected(bls, BYTELEVEL_CASES, True)},
            {"file": "spm_tokenizer.json", "kind": "spm_bpe", "add_bos": True, "bos": 1,
             "vocab_size": st.get_vocab_size(), "cases": expected(st, SPM_CASES, True)},
            {"file": "spm_metaspace_tokenizer.json", "kind": "spm_bpe", "add_bos": True, "bos": 1,
             "vocab_size": sm.get_vocab_size(), "cases": expected(sm, SPM_CASES, True)},
            # GGUF files: same expectations as the tokenizer.json they were written from.
            {"file": "bytelevel.gguf", "kind": "byte_bpe", "add_bos": False,
             "bos": bl.token_to_id("<|im_start|>"), "vocab_size": len(bl_tokens),
             "cases": expected(bl, [s for s in BYTELEVEL_CASES if "<mask>" not in s], False)},
            {"file": "spm.gguf", "kind": "spm_bpe", "add_bos": True, "bos": 1, "vocab_size": len(pieces),
             "cases": expected(st, SPM_CASES, True)},
        ],
    })
    print("report:", json.dumps(report, ensure_ascii=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--wikitext", default=os.path.join(ROOT, "..", "shared", "data", "wikitext-2-raw", "wiki.test.raw"))
    ap.add_argument("--skip-a", action="store_true", help="only the tiny tokenizers (no model needed)")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    part_b()
    if not args.skip_a:
        part_a(args.gguf, args.wikitext)


if __name__ == "__main__":
    main()
