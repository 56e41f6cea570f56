#!/usr/bin/env bash
# The main job on the embedded default: installs packages and the default model (SmolLM2-135M),
# builds igen, generates text, and measures perplexity on the first windows of WikiText-2.
#   tools/quickstart.sh [--no-apt]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/tools/setup.sh" "$@"
"$repo/tools/build.sh" "$repo/build"
igen="$repo/build/igen"
echo
echo "== igen generate (greedy, 48 tokens)"
"$igen" generate --prompt "The three most important inventions of the nineteenth century were" -n 48
text="$repo/../shared/data/wikitext-2-raw/wiki.test.raw"
if [ ! -f "$text" ]; then
  echo "quickstart: $text not found; pass any text file to 'igen ppl --text FILE'" >&2
  exit 0
fi
echo
echo "== igen ppl (WikiText-2 test, 4 windows of 1024 tokens)"
mkdir -p "$repo/results"
"$igen" ppl --text "$text" --ctx 1024 --windows 4 --json | tee "$repo/results/quickstart_ppl.json"
