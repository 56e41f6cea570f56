#!/usr/bin/env bash
# Decode throughput of two igen builds on this machine, in one session: `igen bench-decode` run
# with build A and build B alternately (A B A B ...), so that a drift in the machine's speed hits
# both; prints each pair's tokens/s and the ratio B/A per pair, with its median, min and max, per
# policy. For "the change is not slower" checks between two commits (docs/ARCHITECTURE.md).
#
#   bench/decode_ab.sh [--rounds N] [--policies "full h2o"] [--model GGUF] A_IGEN B_IGEN
#                      [-- extra bench-decode options]
#
# Defaults: 5 rounds, policies full and h2o, the default model (models/), batch 8, prompts of 128
# random tokens, 64 generated. The policy name `none` runs the engine without a policy. Build an older commit with, for example:
#   git worktree add /tmp/old OLD && cmake -S /tmp/old -B /tmp/old/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF && cmake --build /tmp/old/build --target igen
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rounds=5
policies="full h2o"
model=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "decode_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "decode_ab.sh: two igen binaries are needed (see --help)" >&2
  exit 2
fi
a=$1 b=$2
shift 2
[ "${1:-}" = "--" ] && shift
for bin in "$a" "$b"; do
  [ -x "$bin" ] || { echo "decode_ab.sh: $bin is not an executable" >&2; exit 2; }
done
if [ -z "$model" ]; then
  model=$(ls "$repo"/models/*.gguf 2>/dev/null | head -n 1 || true)
  [ -n "$model" ] || { echo "decode_ab.sh: no model in $repo/models (tools/setup.sh)" >&2; exit 2; }
fi
run() { # BIN POLICY [extra options] -> tokens/s
  local bin=$1 pol=$2 out
  shift 2
  local popt=(--policy "$pol")
  [ "$pol" = none ] && popt=() # the engine without a policy (dense f32 cache, the plain path)
  out=$("$bin" bench-decode --model "$model" "${popt[@]}" --batch 8 --prompt-len 128 \
    --gen-len 64 --random "$@" 2>&1 | grep -oE '= [0-9.]+ tokens/s' | grep -oE '[0-9.]+' || true)
  [ -n "$out" ] || { echo "decode_ab.sh: $bin bench-decode --policy $pol printed no tokens/s" >&2; exit 1; }
  echo "$out"
}
echo "A = $a"
echo "B = $b"
echo "model $model, $rounds rounds, alternating A B"
for pol in $policies; do
  ratios=()
  for r in $(seq 1 "$rounds"); do
    ta=$(run "$a" "$pol" "$@")
    tb=$(run "$b" "$pol" "$@")
    ratios+=("$(awk -v x="$tb" -v y="$ta" 'BEGIN { printf "%.4f", x / y }')")
    echo "  $pol round $r: A $ta tok/s, B $tb tok/s, B/A ${ratios[-1]}"
  done
  printf '%s\n' "${ratios[@]}" | sort -g | awk -v p="$pol" '
    { v[NR] = $1 }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%s: decode tok/s B/A per pair, median %.3f [min %.3f, max %.3f]\n", p, m, v[1], v[NR] }'
done
