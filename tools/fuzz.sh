#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz (docs/fuzzing.md).
#   tools/fuzz.sh HARNESS SECONDS [--jobs N] [--keep-going] [-- LIBFUZZER_ARGS...]
#   tools/fuzz.sh --all SECONDS [--jobs N] [--keep-going]   every harness in turn, SECONDS each
#   tools/fuzz.sh --list                        the harnesses
#   tools/fuzz.sh --help
# Configures and builds build-fuzz/ with clang when needed (IG_FUZZ=ON, IG_CUDA=OFF, no tests;
# override the directory with IGEN_FUZZ_BUILD), rebuilds the seeds from the fixtures
# (tools/fuzz_seeds.sh), then fuzzes on one core (--jobs N: N processes) with
# -max_total_time=SECONDS -rss_limit_mb=2048 -timeout=10 and the harness's -max_len and dictionary.
# A run stops at its first finding; --keep-going fuzzes in libFuzzer's fork mode instead (-fork=N,
# crashes, timeouts and OOMs recorded and skipped), to get past a known one.
# The growing corpus is kept in build-fuzz/corpus/HARNESS, findings (crash-*, leak-*, timeout-*,
# oom-*) go to build-fuzz/artifacts/HARNESS/, the log to build-fuzz/logs/HARNESS.log.
# Exit status: 0 when nothing was found, 1 when a harness found something (its artifacts are
# listed), 2 for a usage or build error.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
harnesses=(gguf safetensors tokenizer_json gguf_tokenizer exp_yaml hwprof modelshape topo)
build=${IGEN_FUZZ_BUILD:-$repo/build-fuzz}

usage() { sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }
die() {
  echo "fuzz.sh: $*" >&2
  exit 2
}

# Longest input per harness: the binary formats hold the fixtures' whole models (under 1 MiB),
# the text formats are kilobytes.
max_len() {
  case $1 in
    gguf | gguf_tokenizer | safetensors) echo 1048576 ;;
    tokenizer_json | topo) echo 262144 ;;
    *) echo 65536 ;;
  esac
}

all=0 seconds="" jobs=1 keep_going=0 extra=()
target=""
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help)
      usage
      exit 0
      ;;
    --list)
      printf '%s\n' "${harnesses[@]}"
      exit 0
      ;;
    --all) all=1 ;;
    --keep-going) keep_going=1 ;;
    --jobs)
      [ $# -ge 2 ] || die "--jobs needs a number"
      jobs=$2
      shift
      ;;
    --jobs=*) jobs=${1#--jobs=} ;;
    --)
      shift
      extra=("$@")
      break
      ;;
    -*) die "unknown option $1 (see --help)" ;;
    *)
      if [ "$all" = 0 ] && [ -z "$target" ]; then
        target=$1
      elif [ -z "$seconds" ]; then
        seconds=$1
      else
        die "unexpected argument $1 (see --help)"
      fi
      ;;
  esac
  shift
done
if [ "$all" = 1 ] && [ -n "$target" ] && [ -z "$seconds" ]; then
  seconds=$target
  target=""
fi
[ "$all" = 1 ] || [ -n "$target" ] || {
  usage >&2
  exit 2
}
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || die "SECONDS must be a positive integer"
[[ "$jobs" =~ ^[0-9]+$ ]] && [ "$jobs" -gt 0 ] || die "--jobs needs a positive integer"
if [ "$all" = 1 ]; then
  [ -z "$target" ] || die "--all takes no HARNESS"
  run_list=("${harnesses[@]}")
else
  case " ${harnesses[*]} " in
    *" $target "*) run_list=("$target") ;;
    *) die "unknown harness '$target' (one of: ${harnesses[*]})" ;;
  esac
fi

# ---- one run per build directory: runs share its tmp/ (emptied per harness) and corpora ------------
mkdir -p "$build"
exec 9>"$build/.fuzz.lock"
flock -n 9 || die "another tools/fuzz.sh is running in $build (wait for it, or set IGEN_FUZZ_BUILD)"

# ---- build ----------------------------------------------------------------------------------------
cc=${CC:-clang}
case $(basename "$cc") in
  clang*) ;;
  *) die "the fuzz build needs clang (CC=$cc)" ;;
esac
command -v "$cc" >/dev/null || die "$cc not found (Debian: apt-get install clang)"
rt=$("$cc" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a
[ -f "$rt" ] || die "libFuzzer is missing ($rt); on Debian 12: apt-get install libclang-rt-14-dev"
if [ ! -f "$build/CMakeCache.txt" ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  echo "fuzz.sh: configuring $build"
  CC=$cc cmake -S "$repo" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIG_FUZZ=ON \
    -DIG_CUDA=OFF -DBUILD_TESTING=OFF >"$build.configure.log" 2>&1 ||
    die "configure failed, see $build.configure.log"
  rm -f "$build.configure.log"
fi
targets=()
for h in "${run_list[@]}"; do targets+=("fuzz_$h"); done
echo "fuzz.sh: building ${targets[*]}"
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)" >"$build/fuzz-build.log" 2>&1 || {
  tail -n 30 "$build/fuzz-build.log" >&2
  die "build failed, see $build/fuzz-build.log"
}
"$repo/tools/fuzz_seeds.sh" "$build/seeds" "${run_list[@]}"

# ---- run ------------------------------------------------------------------------------------------
# Leaks are findings; third-party runtimes' one-time allocations and hwloc's leaks on malformed
# input are not (tests/fuzz/lsan.supp).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$repo/tests/fuzz/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
# The harnesses' scratch directories (igen-fuzz-*): a process that crashes leaves its own behind.
export TMPDIR=$build/tmp

summary=()
found=0
for h in "${run_list[@]}"; do
  corpus=$build/corpus/$h art=$build/artifacts/$h logdir=$build/logs
  mkdir -p "$corpus" "$art" "$logdir"
  log=$logdir/$h.log
  rm -f "$logdir/$h".job-*.log
  rm -rf "$TMPDIR"
  mkdir -p "$TMPDIR"
  stamp=$(mktemp)
  args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len="$(max_len "$h")"
    -artifact_prefix="$art/" -print_final_stats=1)
  dict=$repo/tests/fuzz/dict/$h.dict
  [ -f "$dict" ] && args+=(-dict="$dict")
  if [ "$keep_going" = 1 ]; then
    args+=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  elif [ "$jobs" -gt 1 ]; then
    args+=(-jobs="$jobs" -workers="$jobs")
  fi
  echo "fuzz.sh: fuzz_$h for ${seconds} s (log: $log)"
  start=$(date +%s)
  set +e
  # with -jobs, libFuzzer writes one fuzz-N.log per job into the current directory
  (cd "$logdir" && "$build/fuzz/fuzz_$h" "${args[@]}" "${extra[@]}" "$corpus" "$build/seeds/$h" \
    </dev/null >"$log" 2>&1)
  rc=$?
  set -e
  wall=$(($(date +%s) - start))
  if [ "$jobs" -gt 1 ] && [ "$keep_going" = 0 ]; then
    for f in "$logdir"/fuzz-*.log; do
      [ -f "$f" ] && mv "$f" "$logdir/$h.job-${f##*/fuzz-}"
    done
    logs=("$logdir/$h".job-*.log)
  else
    logs=("$log")
  fi
  execs=0 cov="" ft="" corp=""
  for f in "${logs[@]}"; do
    [ -f "$f" ] || continue
    e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$f" | tail -n 1)
    [ -n "$e" ] || e=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$f" | tail -n 1)
    execs=$((execs + ${e:-0}))
    line=$(grep -E '^#[0-9]+.*cov: ' "$f" | tail -n 1 || true)
    if [ -n "$line" ]; then
      cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
      ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
      corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$line")
    fi
  done
  new=$(find "$art" -maxdepth 1 -type f -newer "$stamp" | sort)
  rm -f "$stamp"
  rm -rf "$TMPDIR"
  if [ "$rc" = 0 ] && [ -z "$new" ]; then
    result=ok
  else
    found=1
    result="FOUND (exit $rc)"
    echo "fuzz.sh: fuzz_$h found something (exit $rc); tail of $log:" >&2
    grep -E 'ERROR|SUMMARY|check failed|Test unit written|==[0-9]+==' "${logs[@]}" | tail -n 12 >&2 ||
      tail -n 12 "$log" >&2
    if [ -n "$new" ]; then
      echo "fuzz.sh: artifacts:" >&2
      printf '%s\n' "$new" | sed 's/^/  /' >&2
    fi
  fi
  summary+=("$(printf '%-15s %6ss %10s execs  cov %-6s ft %-6s corpus %-12s %s' "$h" "$wall" \
    "$execs" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result")")
done
echo "fuzz.sh: summary (${seconds} s per harness, ${jobs} job(s)):"
printf '  %s\n' "${summary[@]}"
exit "$found"
