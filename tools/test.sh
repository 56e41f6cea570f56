#!/usr/bin/env bash
# Runs the whole test suite twice: a Release build (build/) and an AddressSanitizer + UBSan build
# (build-asan/), each with ctest. Exits non-zero if any test fails. GPU tests report SKIPPED where
# there is no GPU. The model-dependent tests need tools/setup.sh to have installed the model.
#   tools/test.sh            both builds
#   tools/test.sh --fast     Release build only
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
fast=0
[ "${1:-}" = "--fast" ] && fast=1
export OMP_WAIT_POLICY=passive
if command -v clang-format >/dev/null; then
  unformatted=$(cd "$repo" && git ls-files '*.c' '*.h' '*.cu' '*.cpp' | while read -r f; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
  if [ -n "$unformatted" ]; then
    echo "test.sh: not clang-formatted (run clang-format -i):" $unformatted >&2
    exit 1
  fi
fi
# The test programs run side by side (one per core): none asserts on time, and each has its own
# scratch directory.
jobs=$(nproc 2>/dev/null || echo 2)
"$repo/tools/build.sh" "$repo/build"
ctest --test-dir "$repo/build" --output-on-failure -j "$jobs"
if [ "$fast" = 0 ]; then
  # One GPU architecture in this build (sm_80 code plus its PTX, which newer GPUs compile when
  # loading it): the sanitizers check the host side, and the Release build above compiles all four.
  "$repo/tools/build.sh" "$repo/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIG_SANITIZE=ON \
    -DCMAKE_CUDA_ARCHITECTURES=80
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$repo/tests/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$repo/build-asan" --output-on-failure -j "$jobs"
fi
