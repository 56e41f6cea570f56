#!/usr/bin/env python3
"""The include rules between igen's layers, checked over the source tree (run by ctest as
test_layers).

A file may include headers of its own layer and of the layers below it, never above. Each layer
is one folder (the top level keeps core/, kernels/, offload/, policies/):

  base      core/base/     status, log, dtype, mapfile, threads
  model     core/model/    the model, its readers (io/) and tokenizers (tokenizer/)
  kernels   kernels/       backend table, cpu/, cuda/ (the CUDA emulator is test
                           infrastructure, tests/cuda_emu)
  offload   offload/
  policies  policies/
  engine    core/engine/
  app       core/app/      cli/ (the igen program), exp/, eval/

(docs/ARCHITECTURE.md, "The redesign"). An allowed crossing would be listed in KNOWN
with its reason; none is left. A new crossing, or a listed one that no longer exists (so the list
is kept true), fails with the file, line and header. The link check beside it: the
igen_layer_check_<layer> programs of the root CMakeLists.txt.

  tools/check_layers.py [ROOT]
"""
import os
import re
import sys

LAYERS = ["base", "model", "kernels", "offload", "policies", "engine", "app"]

KNOWN = set()  # (file, header) pairs allowed for now, each with its reason; none left


def layer_of(rel):
    for prefix, name in (("core/base/", "base"), ("core/model/", "model"),
                         ("kernels/", "kernels"), ("offload/", "offload"),
                         ("policies/", "policies"), ("core/engine/", "engine"),
                         ("core/app/", "app")):
        if rel.startswith(prefix):
            return name
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    found, errors, files = set(), [], 0
    for top in ("core", "kernels", "offload", "policies"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".c", ".h", ".cu", ".cuh", ".cpp")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                mine = layer_of(rel)
                if mine is None:
                    errors.append(f"{rel}: in no layer (add it to tools/check_layers.py)")
                    continue
                files += 1
                with open(os.path.join(root, rel), errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m:
                            continue
                        theirs = layer_of(m.group(1))
                        if theirs is None or LAYERS.index(theirs) <= LAYERS.index(mine):
                            continue
                        if (rel, m.group(1)) in KNOWN:
                            found.add((rel, m.group(1)))
                            continue
                        errors.append(f"{rel}:{lineno}: includes {m.group(1)}: layer {mine} may "
                                      f"not include layer {theirs} (above it)")
    for rel, inc in sorted(KNOWN - found):
        errors.append(f"{rel}: no longer includes {inc}: remove it from KNOWN in "
                      "tools/check_layers.py")
    for e in errors:
        print(e, file=sys.stderr)
    print(f"check_layers: {files} files, {len(found)} known crossings, {len(errors)} errors")
    return 1 if errors or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
