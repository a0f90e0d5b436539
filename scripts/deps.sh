#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages stoker's build, tools and tests need — only those missing.
# Run as root (or with sudo). Does nothing when everything is present.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config clang
  liblmdb-dev lmdb-utils libjpeg62-turbo-dev libturbojpeg0-dev libjpeg-turbo-progs liburing-dev
  python3 python3-numpy python3-pil python3-pytest python3-lmdb python3-torch python3-torchvision
  valgrind fio
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
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
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
