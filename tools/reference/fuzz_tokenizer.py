#!/usr/bin/env python3
"""Differential check of igen's tokenizer against Hugging Face `tokenizers` on random strings.

    cmake --build build   # builds build/tests/tokenize_lines
    /opt/refvenv/bin/python tools/reference/fuzz_tokenizer.py [--n 2000] [--gguf MODEL]

For every fixture tokenizer (tests/fixtures/tokenizer) and, if given, the SmolLM2 GGUF (built as in
make_tokenizer_fixtures.py), encodes random strings mixing scripts, digits, emoji, whitespace runs,
contractions and special tokens with both, and compares ids and decoded text. Prints the first
mismatches and exits non-zero if any.
"""
import argparse
import json
import os
import random
import subprocess
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_fixtures as fixtures  # noqa: E402

POOLS = [
    "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  ", "\n", "\t",
    "\r\n", ".,;:!?'\"()-_/\\<>|[]{}@#$%^&*+=~`", "'s 't 're 've 'm 'll 'd 'S 'T",
    "\u00e9\u00fc\u00df\u00f1\u00e7\u00f8\u00e5\u0153", "\u0391\u0392\u0393\u03b1\u03b2\u03b3\u03bb\u03cc\u03b3\u03bf\u03c2",
    "\u043c\u0438\u0440\u041f\u0440\u0438\u0432\u0435\u0442", "\u65e5\u672c\u8a9e\u4e2d\u6587\u5b57",
    "\ud55c\uad6d\uc5b4", "\u0661\u0662\u0663\u0664\u0665", "\u00bd\u00be\u2163\u00b2\u00b3",
    "\U0001F600\U0001F44D\U0001F3FD\U0001F468\u200d\U0001F469\u200d\U0001F467",
    "\u00a0\u3000\u2028\u180e\u0085\u200b\u200d", "\U0001e4d0\U00011f50\U00016ff4\u1c89",
    "\u017fK\ufb01", "\u0301\u0308", "\u2581", "\u0120", "<0x41>",
]


def rand_string(rng, specials):
    out = []
    for _ in range(rng.randint(0, 12)):
        if specials and rng.random() < 0.1:
            out.append(rng.choice(specials))
        else:
            p = rng.choice(POOLS)
            out.append("".join(rng.choice(p) if len(p) > 1 else p for _ in range(rng.randint(1, 6))))
    return "".join(out)


def check(driver, path, hf, specials, add_bos, n, seed):
    rng = random.Random(seed)
    strings = [rand_string(rng, specials) for _ in range(n)]
    res = subprocess.run([driver, path, str(int(add_bos))], input="".join(json.dumps(s) + "\n" for s in strings).encode(),
                         capture_output=True, check=True)
    bad = 0
    for s, line in zip(strings, res.stdout.decode().split("\n")):
        ids = hf.encode(s, add_special_tokens=add_bos).ids
        dec = hf.decode(ids, skip_special_tokens=False)
        if line.startswith("ERR"):
            got_ids, got_dec = None, line
        else:
            a, b = line.split("\t")
            got_ids, got_dec = ([int(x) for x in a.split()] if a else []), json.loads(b)
        if got_ids != ids or got_dec != dec:
            bad += 1
            if bad <= 5:
                print("MISMATCH %r\n  tokenizers %s %r\n  igen       %s %r" % (s, ids, dec, got_ids, got_dec))
    print("%-40s %d strings, %d mismatches" % (os.path.basename(path), n, bad))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--driver", default=os.path.join(fixtures.ROOT, "build", "tests", "tokenize_lines"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--gguf", help="SmolLM2 GGUF (optional)")
    args = ap.parse_args()
    F = fixtures.OUT
    sl = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    sp = ["<s>", "</s>", "<unk>"]
    runs = [
        ("bytelevel_tokenizer.json", "bytelevel_tokenizer.json", False, sl + ["<mask>", "<tool>"]),
        ("bytelevel_split_tokenizer.json", "bytelevel_split_tokenizer.json", True, sl + ["<mask>", "<tool>"]),
        ("spm_tokenizer.json", "spm_tokenizer.json", True, sp),
        ("spm_metaspace_tokenizer.json", "spm_metaspace_tokenizer.json", True, sp),
        ("bytelevel.gguf", "bytelevel_tokenizer.json", False, sl + ["<tool>"]),
        ("spm.gguf", "spm_tokenizer.json", True, sp),
    ]
    bad = 0
    for i, (mine, ref, bos, specials) in enumerate(runs):
        bad += check(args.driver, os.path.join(F, mine), Tokenizer.from_file(os.path.join(F, ref)), specials, bos, args.n, i)
    if args.gguf:
        bad += check(args.driver, args.gguf, fixtures.smollm2_from_gguf(args.gguf), sl, False, args.n, 99)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
