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
"$repo/build/igen" run configs/experiments/quickstart.yaml "${sets[@]}"
echo
echo "plots: $repo/results/quickstart/plots/decode_throughput_vs_seqlen.png (decode only, the"
echo "       headline) and throughput_vs_seqlen.png (prefill included, FlexGen's figure)"
