#!/usr/bin/env bash
# Builds the seed corpora of the fuzz harnesses (tests/fuzz, docs/fuzzing.md) from the fixtures:
#   tools/fuzz_seeds.sh OUTDIR [HARNESS...]     (default: every harness)
# OUTDIR/HARNESS/ is emptied and gets one file per seed, named after its path in the repository.
# Files over 1 MiB are left out. Sources per harness (tests/test_fuzz_regress.c feeds the same files
# through the harness functions: keep the two lists in step):
#   gguf, gguf_tokenizer  tests/fixtures/**/*.gguf
#   safetensors           tests/fixtures/**/*.safetensors, **/model.safetensors.index.json
#   tokenizer_json        tests/fixtures/**/*tokenizer.json, tests/fixtures/tokenizer/hostile/*.json
#   exp_yaml              tests/fixtures/exp/**/*.yaml, configs/experiments/*.yaml
#   hwprof, modelshape    configs/hardware/*.yaml, configs/models/*.yaml, tests/fixtures/plan/*.yaml
#   topo                  tests/fixtures/topo/*.xml, <shared data>/hwloc/*.xml when present
# and, for every harness, tests/fuzz/seeds/HARNESS/* (hand-written) and tests/fixtures/fuzz/
# HARNESS/* (inputs that once crashed it; not HARNESS/open/, findings still open). <shared data> is
# $IGEN_SHARED_DATA or ../shared/data.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
all=(gguf safetensors tokenizer_json gguf_tokenizer exp_yaml hwprof modelshape topo)
harnesses=("${all[@]}")
max_bytes=$((1 << 20))

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
  [ $# -ge 1 ] && exit 0
  exit 2
fi
out=$1
shift
if [ $# -gt 0 ]; then harnesses=("$@"); fi
for h in "${harnesses[@]}"; do
  case " ${all[*]} " in
    *" $h "*) ;;
    *)
      echo "fuzz_seeds.sh: unknown harness '$h' (one of: ${all[*]})" >&2
      exit 2
      ;;
  esac
done

fx=$repo/tests/fixtures
shared=${IGEN_SHARED_DATA:-$repo/../shared/data}
if [ -d "$shared" ]; then shared=$(cd "$shared" && pwd); fi

# Fixture files of one harness, one path a line (tests/fixtures/fuzz is not a seed-type source).
sources() {
  local f=(find "$fx" -path "$fx/fuzz" -prune -o -type f)
  case $1 in
    gguf | gguf_tokenizer) "${f[@]}" -name '*.gguf' -print ;;
    safetensors) "${f[@]}" \( -name '*.safetensors' -o -name 'model.safetensors.index.json' \) -print ;;
    tokenizer_json)
      "${f[@]}" -name '*tokenizer.json' -print
      find "$fx/tokenizer/hostile" -maxdepth 1 -type f -name '*.json'
      ;;
    exp_yaml)
      find "$fx/exp" -type f -name '*.yaml'
      find "$repo/configs/experiments" -maxdepth 1 -type f -name '*.yaml'
      ;;
    hwprof | modelshape)
      find "$repo/configs/hardware" "$repo/configs/models" "$fx/plan" -maxdepth 1 -type f \
        -name '*.yaml'
      ;;
    topo)
      find "$fx/topo" -maxdepth 1 -type f -name '*.xml'
      if [ -d "$shared/hwloc" ]; then find "$shared/hwloc" -maxdepth 1 -type f -name '*.xml'; fi
      ;;
  esac
  # open/: findings not fixed yet, which would stop every run at once
  for d in "$repo/tests/fuzz/seeds/$1" "$fx/fuzz/$1"; do
    if [ -d "$d" ]; then find "$d" -path "$fx/fuzz/$1/open" -prune -o -type f -print; fi
  done
}

for h in "${harnesses[@]}"; do
  list=$(sources "$h")
  dir=$out/$h
  rm -rf "$dir"
  mkdir -p "$dir"
  n=0 skipped=0
  while IFS= read -r f; do
    [ -n "$f" ] || continue
    if [ "$(stat -c %s "$f")" -gt "$max_bytes" ]; then
      skipped=$((skipped + 1))
      continue
    fi
    case $f in
      "$shared"/*) rel=shared/${f#"$shared"/} ;;
      *) rel=${f#"$repo"/} ;;
    esac
    cp "$f" "$dir/${rel//\//_}"
    n=$((n + 1))
  done < <(printf '%s\n' "$list" | sort)
  note=""
  [ "$skipped" = 0 ] || note=" ($skipped over 1 MiB left out)"
  echo "fuzz_seeds: $h: $n seeds in $dir$note"
done
