#!/usr/bin/env python3
"""Rewrite one CUDA source of kernels/cuda/ into host C++ for the CUDA emulator (emu.md).

Two rewrites, nothing else changes (a #line directive keeps compiler messages on the original):
  kernel<<<grid, block[, smem[, stream]]>>>(args);
      -> ig_emu_launch("kernel", dim3(grid), dim3(block), smem, stream, kernel, args);
  extern __shared__ T name[];
      -> T *name = (T *)ig_emu_dynamic_smem();
Usage: translate.py IN.cu OUT.cpp
"""
import os
import re
import sys

OPEN = "([{"
CLOSE = ")]}"


def fail(path, text, pos, what):
    line = text.count("\n", 0, pos) + 1
    sys.exit(f"{path}:{line}: translate.py: {what}")


def split_top(s):
    """Split s at commas outside (), [], {}."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def callee_start(text, end):
    """Start of the kernel expression that ends just before `end` (name, maybe name<targs>)."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":  # template arguments
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
        while i > 0 and text[i - 1].isspace():
            i -= 1
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def matching(text, i, open_ch, close_ch):
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_ch:
            depth += 1
        elif text[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j
    return -1


def translate(path, text):
    text = re.sub(
        r"extern\s+__shared__\s+([\w\s:]+?)\s*(\w+)\s*\[\s*\]\s*;",
        lambda m: f"{m.group(1)} *{m.group(2)} = ({m.group(1)} *)ig_emu_dynamic_smem();",
        text,
    )
    out, pos = [], 0
    while True:
        k = text.find("<<<", pos)
        if k < 0:
            out.append(text[pos:])
            break
        start = callee_start(text, k)
        if start < pos:
            fail(path, text, k, "launch overlaps the previous one")
        callee = " ".join(text[start:k].split())
        close = text.find(">>>", k)
        if close < 0:
            fail(path, text, k, "<<< without >>>")
        config = split_top(text[k + 3 : close])
        if not 2 <= len(config) <= 4:
            fail(path, text, k, f"launch configuration of {len(config)} items")
        while len(config) < 4:
            config.append("0")
        p = close + 3
        while text[p].isspace():
            p += 1
        if text[p] != "(":
            fail(path, text, p, "kernel launch without an argument list")
        q = matching(text, p, "(", ")")
        if q < 0:
            fail(path, text, p, "unbalanced argument list")
        args = text[p + 1 : q].strip()
        name = callee.replace('"', "")
        call = (
            f'ig_emu_launch("{name}", dim3({config[0]}), dim3({config[1]}), (size_t)({config[2]}), '
            f"(cudaStream_t)({config[3]}), {callee}"
        )
        call += (", " + args if args else "") + ")"
        # keep the line count so later #line numbers stay right
        call += "\n" * (text.count("\n", start, q + 1) - call.count("\n"))
        out.append(text[pos:start])
        out.append(call)
        pos = q + 1
    return "".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    body = translate(src, text)
    with open(dst + ".tmp", "w", encoding="utf-8") as f:
        f.write('#include "tests/cuda_emu/emu_device.h"\n')
        f.write(f'#line 1 "{src}"\n')
        f.write(body)
    os.replace(dst + ".tmp", dst)


if __name__ == "__main__":
    main()
