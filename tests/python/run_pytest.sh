#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run one pytest file under Debian's /usr/bin/python3 (numpy, torch, PIL, lmdb come from Debian
# packages). Exit 77 (skip) when that interpreter or pytest is missing; pytest's 5 (no tests
# collected) is a failure.
set -u
PY=${STOKER_TEST_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
"$PY" -c 'import pytest' 2>/dev/null || { echo "skip: pytest missing for $PY"; exit 77; }
export PYTHONPATH="${SRC_DIR}/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# ASan/TSan builds: a Python host process would need the sanitizer runtime preloaded; the
# Python tests run in the normal build only.
if [ -n "${STOKER_SANITIZE:-}" ]; then echo "skip: python tests run in the normal build"; exit 77; fi
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
