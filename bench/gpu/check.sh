#!/usr/bin/env bash
# The one GPU check of issue 7, for a fresh machine with one NVIDIA GPU (nvcc, cuBLAS, CMake; no
# network needed):
#   bench/gpu/check.sh OUTDIR
# 1. configures and builds igen with CUDA (Release, only the GPU's own architecture, from
#    nvidia-smi's compute capability; never `native`) into $BUILD (default build-gpu/);
# 2. runs the CUDA tests (ctest -L cuda: kernels vs CPU, host side, the backend tables' conformance,
#    engine CUDA vs CPU);
# 3. measures pinned host->device bandwidth: cudaMemcpy of a large pinned buffer vs the KV row
#    gather (bench_h2d);
# 4. runs the throughput sweep bench/gpu/check.yaml (OPT-6.7B shape, dummy f16 weights on the GPU,
#    KV 100% in host memory, batch 8, sequence 512/1024/2048, policies full (rows gathered to the
#    GPU), full with decode attention on the CPU, int4, h2o, infinigen) with `igen run`;
# and writes into OUTDIR: gpu.txt (nvidia-smi: model, driver, date), ctest-cuda.log, h2d.json,
# results.jsonl, results.csv, plots/, summary.txt. Prints a summary table at the end.
# Budget: under 8 minutes on an H200 (CHECK_TIMEOUT_S bounds the sweep, default 330 s).
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
build=${BUILD:-$repo/build-gpu}
t_start=$(date +%s)
log() { echo "[check $(( $(date +%s) - t_start ))s] $*"; }

# ---- the machine ----
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,pcie.link.gen.max,pcie.link.width.max \
    --format=csv 2>&1
  echo
  nvidia-smi 2>&1
  echo
  nvcc --version 2>&1 | tail -2
} > "$out/gpu.txt"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
case "$cc" in
  [0-9][0-9]|[0-9][0-9][0-9]) arch=$cc ;;
  *) arch="80;86;89;90"; log "compute capability unknown (nvidia-smi: '$cc'): building $arch" ;;
esac
log "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); arch $arch"

# ---- build ----
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# ${gen[@]+...}: an empty array under `set -u` is an error in bash < 4.4
if ! cmake -S "$repo" -B "$build" ${gen[@]+"${gen[@]}"} -DCMAKE_BUILD_TYPE=Release -DIG_CUDA=ON -DIG_CUDA_EMU=OFF \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$out/build.log" 2>&1 ||
   ! cmake --build "$build" -j "$(nproc)" >> "$out/build.log" 2>&1; then
  tail -30 "$out/build.log"
  log "build failed (see $out/build.log)"
  exit 1
fi
log "built in $build"

# ---- CUDA tests ----
# Bounded as a whole, not only per test (4 tests x 300 s would overrun the session's GPU time);
# -k: a process stuck in the driver that ignores SIGTERM is killed, so the later steps still run.
timeout -k 10 "${CHECK_CTEST_TIMEOUT_S:-240}" \
  bash -c 'cd "$1" && ctest -L cuda --output-on-failure --timeout 200' _ "$build" \
  > "$out/ctest-cuda.log" 2>&1
ctest_rc=$?
grep -E "Test +#|tests passed|Skipped|Failed" "$out/ctest-cuda.log"
log "ctest -L cuda: exit $ctest_rc"

# ---- pinned H2D bandwidth ----
timeout -k 10 60 "$build/bench_h2d" --mib 1024 --row-bytes 256 > "$out/h2d.json" 2> "$out/h2d.err"
log "h2d: $(cat "$out/h2d.json" "$out/h2d.err")"

# ---- throughput sweep ----
timeout -k 10 "${CHECK_TIMEOUT_S:-330}" "$build/igen" run "$repo/bench/gpu/check.yaml" --output "$out" \
  2>&1 | tee "$out/run.log"
run_rc=${PIPESTATUS[0]}
log "igen run: exit $run_rc"

# ---- summary ----
{
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "ctest -L cuda exit: $ctest_rc; igen run exit: $run_rc; total $(( $(date +%s) - t_start )) s"
  echo "h2d: $(cat "$out/h2d.json")"
  if command -v python3 >/dev/null && [ -f "$out/results.jsonl" ]; then
    python3 - "$out/results.jsonl" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    c, m = r.get("config", {}), r.get("metrics", {}) or {}
    if not m or "decode_throughput_tok_s" not in m:
        continue
    wl, pl = c.get("workload", {}), c.get("placement", {})
    pol = (c.get("policy") or {}).get("name", "?")
    if pl.get("kv_access") == "cpu":
        pol += "(cpu attn)"
    seq = wl.get("prompt_len", 0) + wl.get("gen_len", 0)
    rows.setdefault(pol, {})[seq] = (m["decode_throughput_tok_s"], m.get("backend", "?"),
                                     m.get("kv_h2d_bytes", 0))
seqs = sorted({s for v in rows.values() for s in v})
print("decode throughput (tokens/s), batch 8, KV in host memory:")
print("%-18s" % "policy" + "".join("%12d" % s for s in seqs) + "   backend")
for pol, v in rows.items():
    be = next(iter(v.values()))[1]
    print("%-18s" % pol + "".join("%12.1f" % v[s][0] if s in v else "%12s" % "-" for s in seqs)
          + "   " + be)
top = max(seqs) if seqs else None
dense = [rows[p][top][0] for p in ("full", "full(cpu attn)") if p in rows and top in rows[p]]
if top and dense and "infinigen" in rows and top in rows["infinigen"]:
    print("InfiniGen / best dense baseline at sequence %d: %.2fx (goal >= 3x)"
          % (top, rows["infinigen"][top][0] / max(dense)))
PY
  fi
} | tee "$out/summary.txt"
[ "$ctest_rc" -eq 0 ] && [ "$run_rc" -eq 0 ]
