#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages stoker needs — only those missing — for one profile:
#   deps.sh run    building libstoker, the CLI and loaderbench (what scripts/run.sh needs)
#   deps.sh test   run + the tests: clang, torch/torchvision/numpy/PIL, valgrind, venv, the S3
#                  server of the s3 tests (Ceph's radosgw, scripts/s3-server.sh), boto3 ... (default)
# Run as root (or with sudo). Does nothing, and takes no lock, when everything is present.
#
# Another apt/dpkg (a fresh cloud VM's unattended-upgrades, a second deps.sh) may hold the
# package manager's locks: apt-get then fails at once with exit 100. Here it is retried, with a
# line saying who holds the lock, for up to STK_DEPS_LOCK_TIMEOUT seconds (default 600), then
# deps.sh fails naming the lock and the holder. (apt's own DPkg::Lock::Timeout covers the dpkg
# lock only, not `apt-get update`'s lists lock, so both commands go through the same wait.)
# `apt-get update` runs only when a missing package has no install candidate (no or old package
# lists), or when an install fails for another reason (stale lists): then once more after it.
#
# Environment: STK_DEPS_LOCK_TIMEOUT (seconds), STK_DEPS_ASSUME_MISSING="pkg ..." (treat
# installed packages as missing: the install path — lock wait included — runs for real and
# installs nothing new; tests/test_deps_lock.sh uses it).
set -euo pipefail

# the image decoders of `stoker pack` (libpng ... libstb) are optional for the build; with them
# pack takes PNG, WebP, GIF, BMP, TIFF sources too. jansson and libcsv read the manifests.
# libcurl and libxml2 are the fetch layer's (s3:// datasets; optional: STOKER_WITH_S3).
RUN_PKGS=(build-essential cmake pkg-config liblmdb-dev libjpeg62-turbo-dev liburing-dev
  libjansson-dev libcsv-dev libpng-dev libwebp-dev libgif-dev libtiff-dev libstb-dev
  libcurl4-openssl-dev libxml2-dev)
TEST_PKGS=(
  "${RUN_PKGS[@]}" clang ninja-build lmdb-utils libturbojpeg0-dev libjpeg-turbo-progs
  python3 python3-venv python3-numpy python3-pil python3-pytest python3-lmdb
  python3-torch python3-torchvision valgrind fio librsvg2-bin python3-poetry
  ceph-mon ceph-osd radosgw ceph-common python3-boto3 openssl
)
profile=${1:-test}
case "$profile" in
  run) PKGS=("${RUN_PKGS[@]}") ;;
  test) PKGS=("${TEST_PKGS[@]}") ;;
  *) echo "usage: deps.sh [run|test]   (run: build the library and tools; test: everything)" >&2; exit 2 ;;
esac
LOCK_TIMEOUT=${STK_DEPS_LOCK_TIMEOUT:-600}
[[ "$LOCK_TIMEOUT" =~ ^[0-9]+$ ]] || { echo "deps.sh: STK_DEPS_LOCK_TIMEOUT must be seconds, not '$LOCK_TIMEOUT'" >&2; exit 2; }
read -r -a assume_missing <<<"${STK_DEPS_ASSUME_MISSING:-}"

missing=()
for p in "${PKGS[@]}" "${assume_missing[@]}"; do
  # (outputs captured, not piped into grep -q: under pipefail an early grep exit is a SIGPIPE failure)
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [[ " ${assume_missing[*]} " == *" $p "* ]] || [[ "$status" != *"install ok installed"* ]]; then
    [[ " ${missing[*]} " == *" $p "* ]] || missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "deps.sh: missing packages (${missing[*]}) and not root: run as root" >&2; exit 1; fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-deps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

# apt_locked CMD...: run an apt-get command; while it fails only because another process holds
# a package manager lock, say so and retry until LOCK_TIMEOUT seconds after deps.sh started
# (then exit status 75).
apt_locked() {
  local rc said=0 now held
  while :; do
    rc=0
    $SUDO "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -ne 0 ] && grep -q -e "Could not get lock" -e "Unable to acquire the dpkg frontend lock" \
                                  -e "Unable to lock" "$tmp/err"; then
      now=$(date +%s)
      held=$(grep -m1 "Could not get lock" "$tmp/err" | sed 's/^E: //' || true)
      if [ $((now - start)) -ge "$LOCK_TIMEOUT" ]; then
        echo "deps.sh: error: gave up after waiting ${LOCK_TIMEOUT} s for the package manager lock." >&2
        echo "deps.sh: ${held:-$(head -1 "$tmp/err")}" >&2
        echo "deps.sh: another apt/dpkg is still running (on a fresh VM often unattended-upgrades);" \
             "let it finish, then rerun (STK_DEPS_LOCK_TIMEOUT=seconds waits longer)." >&2
        return 75
      fi
      if [ $((now - said)) -ge 30 ]; then
        echo "deps.sh: waiting for the package manager lock (${held:-held by another process})" \
             "— $((now - start)) s so far, giving up after ${LOCK_TIMEOUT} s" >&2
        said=$now
      fi
      sleep 2
      continue
    fi
    if [ "$rc" -ne 0 ]; then
      tail -20 "$tmp/out" >&2
      cat "$tmp/err" >&2
    fi
    return "$rc"
  done
}

no_candidate=0
for p in "${missing[@]}"; do
  policy=$(apt-cache policy "$p" 2>/dev/null || true)
  if ! grep -q "Candidate: [^(]" <<<"$policy"; then no_candidate=1; fi
done
if [ "$no_candidate" -eq 1 ]; then
  echo "deps.sh: apt-get update (package lists missing or old)" >&2
  apt_locked apt-get update -qq
fi
echo "deps.sh: installing ${missing[*]}" >&2
INSTALL=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
rc=0
apt_locked "${INSTALL[@]}" || rc=$?
if [ "$rc" -ne 0 ]; then
  if [ "$rc" -eq 75 ] || [ "$no_candidate" -eq 1 ]; then exit "$rc"; fi
  echo "deps.sh: install failed; apt-get update, then once more" >&2
  apt_locked apt-get update -qq
  apt_locked "${INSTALL[@]}"
fi
echo "deps.sh: done ($(( $(date +%s) - start )) s)" >&2
