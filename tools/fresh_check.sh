#!/usr/bin/env bash
# The README's two commands on a really fresh Debian machine: builds a minimal Debian root with
# debootstrap (--variant=minbase, nothing but what apt needs), puts a clean clone of this
# repository's HEAD and ../shared into it, and runs there, as a new user would, the main job
# (tools/quickstart.sh) and the test command (tools/test.sh: both builds, or with --tests fast the
# Release build only). A package that tools/setup.sh forgets to install fails here even when this
# machine happens to have it.
#
#   tools/fresh_check.sh [--suite bookworm] [--mirror URL] [--root DIR] [--keep] [--log FILE]
#                        [--tests full|fast]
#
# Needs root (debootstrap, chroot, bind mounts). Inside the root it gives only what any new user's
# machine has beyond Debian: the CUDA toolkit of this machine (bind-mounted read-only at its real
# path, with the /usr/local/cuda link, and nvcc on PATH as NVIDIA's install guide says), and this
# machine's way to reach the package registries (its apt sources, local CA certificates and
# /etc/pip.conf). Every mount is undone on every exit path before the root is removed.
#   --suite S    Debian release to test (default bookworm, Debian 12)
#   --mirror U   Debian mirror (default: the first URI of this machine's apt sources)
#   --root DIR   where to build the root (default: a new directory under /var/tmp); with --keep it
#                is left in place, and an existing root there is reused (no debootstrap)
#   --keep       keep the root after the run (for looking inside)
#   --log FILE   also write the whole log to FILE
#   --tests T    full: the README's test command as it is, tools/test.sh (Release and ASan + UBSan
#                builds; what CI runs); fast (default): tools/test.sh --fast (Release build only)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
suite=bookworm
mirror=""
root=""
keep=0
log=""
tests=fast
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite=$2; shift 2 ;;
    --mirror) mirror=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --log) log=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "fresh_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$log" ]; then
  exec > >(tee "$log") 2>&1
fi
case "$tests" in
  full) test_cmd="tools/test.sh" ;;
  fast) test_cmd="tools/test.sh --fast" ;;
  *) echo "fresh_check.sh: --tests full or fast, not '$tests'" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
  echo "fresh_check.sh: needs root (debootstrap, chroot and bind mounts)" >&2
  exit 2
fi
t0=$(date +%s)
stamp() { echo "fresh: [$(( $(date +%s) - t0 )) s] $*"; }

# ---- what the host gives --------------------------------------------------------------------------
if ! command -v debootstrap >/dev/null; then
  stamp "installing debootstrap on this machine"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
sources=""
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [ -f "$f" ] && grep -q '^[^#]*debian' "$f" && { sources=$f; break; }
done
if [ -z "$mirror" ]; then
  if [ -n "$sources" ]; then
    mirror=$(grep -m1 -oE '(URIs:|deb) +https?://[^ ]+' "$sources" | awk '{print $2}')
  fi
  mirror=${mirror:-http://deb.debian.org/debian}
fi
cuda_real=""
if [ -e /usr/local/cuda ]; then
  cuda_real=$(readlink -f /usr/local/cuda)
fi

# ---- the root and its mounts ----------------------------------------------------------------------
made_root=0
if [ -z "$root" ]; then
  root=$(mktemp -d /var/tmp/igen-fresh.XXXXXX)
  made_root=1
fi
mkdir -p "$root"
# mktemp -d makes it 0700, which inside the chroot is the mode of "/": every user but root (apt's
# _apt, munge's postinst running as munge) would be refused everything
chmod 755 "$root"
root=$(cd "$root" && pwd)
case "$root" in
  /|/usr|/usr/*|/etc|/etc/*|/bin|/sbin|/lib|/lib64|/proc|/sys|/dev|/dev/*)
    echo "fresh_check.sh: refusing root directory $root" >&2; exit 2 ;;
esac
mounted=()
mounts_under_root() { awk -v r="$root/" 'index($2"/", r) == 1 {print $2}' /proc/self/mounts; }
cleanup() {
  local rc=$?
  set +e
  # innermost first; a busy one is detached lazily, so nothing under the root stays mounted
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}"
  done
  for m in $(mounts_under_root | sort -r); do umount "$m" 2>/dev/null || umount -l "$m"; done
  if [ -n "$(mounts_under_root)" ]; then
    echo "fresh: still mounted under $root, not removing it:" $(mounts_under_root) >&2
  elif [ "$keep" = 1 ]; then
    echo "fresh: root kept at $root"
  elif [ "$made_root" = 1 ] || [ -f "$root/.igen-fresh-root" ]; then
    rm -rf --one-file-system "$root"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bind() { # bind SRC DEST [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}

if [ -x "$root/bin/bash" ] && [ -f "$root/.igen-fresh-root" ]; then
  stamp "reusing the root at $root"
else
  stamp "debootstrap --variant=minbase $suite from $mirror into $root"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$root.debootstrap.log" 2>&1 || {
    tail -30 "$root.debootstrap.log" >&2
    echo "fresh_check.sh: debootstrap failed (log above)" >&2
    exit 1
  }
  rm -f "$root.debootstrap.log"
  touch "$root/.igen-fresh-root"
fi

mount -t proc proc "$root/proc" && mounted+=("$root/proc")
mount -t sysfs sysfs "$root/sys" && mounted+=("$root/sys")
bind /dev "$root/dev"
bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")
if [ -n "$cuda_real" ]; then
  bind "$cuda_real" "$root$cuda_real" ro
  ln -sfn "$cuda_real" "$root/usr/local/cuda"
fi

# the registries, reached as this machine reaches them
if [ -n "$sources" ]; then
  rm -f "$root/etc/apt/sources.list"
  mkdir -p "$root/etc/apt/sources.list.d"
  cp "$sources" "$root/etc/apt/sources.list.d/$(basename "$sources")"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb CI="${CI:-}" \
    PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "$1"
}
stamp "installing ca-certificates and git (a new user has cloned the repository)"
in_root 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates git >/dev/null && update-ca-certificates >/dev/null'

# a clean clone of HEAD and ../shared beside it, as laid out for a user
rm -rf "$root/work"
mkdir -p "$root/work"
git clone -q --no-local "$repo" "$root/work/igen"
git -C "$root/work/igen" checkout -q "$(git -C "$repo" rev-parse HEAD)"
if [ -d "$repo/../shared" ]; then
  cp -r "$repo/../shared" "$root/work/shared"
  chmod -R a-w "$root/work/shared"
fi
stamp "clone of $(git -C "$repo" rev-parse --short HEAD) in the root: $(in_root '. /etc/os-release; echo "$PRETTY_NAME, Debian $(cat /etc/debian_version)"')"

# The main job as the README gives it, but smaller (IGEN_QUICKSTART_SMOKE: one timed repeat, batch
# 4, prompts of 128 and 256 tokens; every part of it runs: the link model, the skew calibration,
# the profile of this machine, the modeled twins, the plots): what this stage checks is that it
# runs on a fresh machine, not its numbers, and the full job's eight minutes would be a third of
# CI's time.
stamp "main job: tools/quickstart.sh (IGEN_QUICKSTART_SMOKE=1)"
in_root 'cd /work/igen && IGEN_QUICKSTART_SMOKE=1 tools/quickstart.sh'
stamp "test command: $test_cmd"
in_root "cd /work/igen && $test_cmd"
stamp "fresh Debian $suite: main job and tests passed"
