#!/usr/bin/env bash
# Builds llama.cpp's llama-bench from the llama-cpp-python sdist on PyPI, outside the project (it is
# never a dependency of igen: only the comparison of bench/weights_vs_llama_cpp.py uses it), and
# prints its path. The build is cached under $IGEN_LLAMA_DIR (default ~/.cache/igen-llama-cpp).
#   tools/results/llama_bench.sh            build if needed, print the llama-bench path
#   LLAMA_CPP_PYTHON_VERSION=0.3.36 ...     a given sdist version (default: the one below)
# CPU only (GGML_NATIVE: this machine's instruction set, as llama.cpp builds by default), no CUDA,
# no server, no tests. About 6 minutes on 2 cores.
# Without AMX unless IGEN_LLAMA_AMX=1: on the 2-core development VM (which reports amx_int8),
# llama.cpp's AMX matmul dies with SIGILL at its first tileloadd in prompt processing (llama.cpp
# 0.3.36's vendored ggml); without it ggml uses its AVX-512 (VNNI) kernels, as on any CPU without
# AMX. igen uses no AMX either. Set IGEN_LLAMA_AMX=1 on a machine where it works.
set -euo pipefail
ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
dir=${IGEN_LLAMA_DIR:-$HOME/.cache/igen-llama-cpp}/$ver
amx=${IGEN_LLAMA_AMX:-0}
build=$dir/build
noamx=()
if [ "$amx" != 1 ]; then
    build=$dir/build-noamx
    noamx=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
           "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
fi
bin=$build/bin/llama-bench
if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
mkdir -p "$dir"
if [ ! -d "$dir/src" ]; then
    tmp=$(mktemp -d)
    python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$tmp" >&2
    tar xzf "$tmp"/llama_cpp_python-"$ver".tar.gz -C "$tmp"
    mv "$tmp/llama_cpp_python-$ver/vendor/llama.cpp" "$dir/src"
    rm -rf "$tmp"
fi
cmake -S "$dir/src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DGGML_NATIVE=ON "${noamx[@]}" \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build "$build" --target llama-bench -j "$(nproc)" >&2
echo "$bin"
