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
# IGEN_QUICKSTART_REPEAT=N: N timed repeats per point instead of the experiment's 3.
# IGEN_QUICKSTART_SMOKE=1: one repeat, batch 4, prompts of 128 and 256 tokens, 16 generated, the
# perplexity over one window of 128 tokens (CI's fresh-machine stage: it checks that every part of
# the job runs on a fresh machine, not its numbers, in under a minute instead of eight).
out="$repo/results/quickstart"
if [ "${IGEN_QUICKSTART_SMOKE:-0}" = 1 ]; then
  out="$repo/results/quickstart-smoke"
  sets+=(--set "measure.repeat=1" --set "workload.batch=4" --set "workload.prompt_len=[128,256]"
         --set "workload.gen_len=16" --set "workload.ppl.ctx=128" --set "workload.ppl.windows=1"
         --set "workload.ppl.prefill=32" --output "$out")
elif [ -n "${IGEN_QUICKSTART_REPEAT:-}" ]; then
  out="$repo/results/quickstart-repeat$IGEN_QUICKSTART_REPEAT"
  sets+=(--set "measure.repeat=$IGEN_QUICKSTART_REPEAT" --output "$out")
fi
"$repo/build/igen" run configs/experiments/quickstart.yaml "${sets[@]}"
echo
echo "plots: $out/plots/decode_throughput_vs_seqlen.png (decode only, the"
echo "       headline) and throughput_vs_seqlen.png (prefill included, FlexGen's figure)"
