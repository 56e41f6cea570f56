#!/usr/bin/env bash
# Configures and builds igen into a build directory (default: build/, Release).
#   tools/build.sh [BUILD_DIR] [extra cmake -D options...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$repo/build}
shift || true
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake -S "$repo" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
else
  cmake -S "$repo" -B "$dir" "$@" >/dev/null
fi
cmake --build "$dir" -j "$(nproc)"
