#!/usr/bin/env bash
# The main job on the embedded default: installs packages and the default model (SmolLM2-135M),
# builds igen, and runs configs/experiments/quickstart.yaml (four KV policies over three prompt
# lengths on this machine: throughput, KV traffic and policy-active perplexity), which writes
# results/quickstart/{results.jsonl,results.csv,plots/*.png,*.svg} and prints a summary table.
#   tools/quickstart.sh [--no-apt]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/tools/setup.sh" "$@"
"$repo/tools/build.sh" "$repo/build"
cd "$repo"
text="$repo/../shared/data/wikitext-2-raw/wiki.test.raw"
sets=()
if [ ! -f "$text" ]; then
  echo "quickstart: $text not found: using README.md as the text instead" >&2
  sets=(--set "workload.text=$repo/README.md")
fi
# IGEN_QUICKSTART_REPEAT=N: N timed repeats per point instead of the experiment's 3 (CI's
# fresh-machine stage uses 1: it checks that the job runs, not its numbers)
out="$repo/results/quickstart"
if [ -n "${IGEN_QUICKSTART_REPEAT:-}" ]; then
  out="$repo/results/quickstart-repeat$IGEN_QUICKSTART_REPEAT"
  sets+=(--set "measure.repeat=$IGEN_QUICKSTART_REPEAT" --output "$out")
fi
"$repo/build/igen" run configs/experiments/quickstart.yaml "${sets[@]}"
echo
echo "plots: $out/plots/decode_throughput_vs_seqlen.png (decode only, the"
echo "       headline) and throughput_vs_seqlen.png (prefill included, FlexGen's figure)"
