#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Create (once) or reuse a venv with PyPI's torch 2.x stack for the Python tests, and print its
# python. The Debian interpreter has torch 1.13, which lacks torchvision's v2 transforms, timm
# and Lightning; scripts/test.sh runs `ctest -L python` again under this venv so that those
# paths are tested on every run. Versions are pinned (the ones the tests were written against);
# the venv lives in a cache directory shared by runs on one machine ($STK_TORCH2_VENV, default
# ~/.cache/stoker/venv-torch2) and is rebuilt only when the pin list below changes. pip's wheel
# cache (~/.cache/pip) keeps a rebuild from downloading torch again.
set -euo pipefail
PKGS="torch==2.15.0 torchvision==0.29.2 timm==1.0.31 lightning==2.6.6 accelerate==1.16.0 \
pytest==9.2.0 numpy==2.4.6 pillow==13.0.0"
VENV=${STK_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/venv-torch2}
STAMP="$VENV/.stoker-pins"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$PKGS" ]; then
  echo "$VENV/bin/python"
  exit 0
fi
if [ -e "$VENV" ] && [ ! -f "$STAMP" ]; then
  echo "venv-torch2.sh: $VENV exists but was not made by this script (no $STAMP);" \
       "remove it or set STK_TORCH2_VENV to another directory" >&2
  exit 1
fi
{
  echo "== creating $VENV ($PKGS)"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  # shellcheck disable=SC2086  # PKGS is a word list
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet $PKGS
  echo "$PKGS" > "$STAMP"
} >&2
echo "$VENV/bin/python"
