#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stk-test: timeout 1800
# stoker doctor's GPU half without a GPU: a stand-in libnvidia-ml.so.1 (tests/doctor/fake_nvml.c,
# found through LD_LIBRARY_PATH) reports one 80 GiB GPU, a set utilisation and memory, and the
# job as a process with a context. The report and --json carry those figures; with torch, a
# compute job on a "GPU" at 20% and 2 GiB is too small for it, at 95% it is compute-bound and
# the next step is mixed precision (the job uses no autocast); a job of sub-millisecond steps whose
# loader keeps up, on a "GPU" at 20%, is launch-bound: a batch that would fill the GPU, merged
# steps, CUDA graphs, no worker advice; at 95% it is not.
set -u
STOKER=${STOKER:-build/stoker}
FAKE=${FAKE_NVML_DIR:-build/tests/fake-nvml}
PY=/usr/bin/python3
[ -f "$FAKE/libnvidia-ml.so.1" ] || { echo "skip: no $FAKE/libnvidia-ml.so.1"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { cat "$T/err" 2>/dev/null; echo "FAIL: $*"; exit 1; }
export LD_LIBRARY_PATH=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

FAKE_NVML_UTIL=37 FAKE_NVML_USED_MIB=2048 "$STOKER" doctor --json "$T/a.json" -- sleep 1.5 2>"$T/err" \
    || fail "doctor on sleep"
grep -q "GPU0 Fake GPU: busy 37% on average (max 37%), memory 2.0 of 80.0 GiB at most" "$T/err" || fail "GPU line"
grep -q "the job holds a context on a GPU" "$T/err" || fail "context"
grep -q "GPU0 headroom 78.0 GiB" "$T/err" || fail "headroom"
$PY - "$T/a.json" <<'PY' || fail "json"
import json, sys
d = json.load(open(sys.argv[1]))["gpu"]
g = d["devices"][0]
assert d["nvml"] and d["job_holds_context"] == 1, d
assert g["name"] == "Fake GPU" and g["util_mean_pct"] == 37 and g["mem_total_bytes"] == 80 * 2**30, g
assert g["mem_used_max_bytes"] == 2048 * 2**20, g
PY

if $PY -c 'import torch' 2>/dev/null; then
    JOBS="$(dirname "$0")/python/doctor_jobs.py"
    FAKE_NVML_UTIL=20 FAKE_NVML_USED_MIB=2048 "$STOKER" doctor --seconds 120 -- $PY "$JOBS" compute --steps 4 2>"$T/err" \
        || fail "doctor on compute"
    grep -q "^7. verdict: too small for the GPU: GPU busy 20% of the time, 2.0 of 80.0 GiB in use" "$T/err" \
        || fail "too small"
    grep -q "next: batch 32 -> 64" "$T/err" || fail "too small: next"
    FAKE_NVML_UTIL=95 FAKE_NVML_USED_MIB=60000 "$STOKER" doctor --seconds 120 -- $PY "$JOBS" compute --steps 4 2>"$T/err" \
        || fail "doctor on compute"
    grep -q "^7. verdict: compute-bound: .*next: mixed precision" "$T/err" || fail "compute-bound on a GPU"
    FAKE_NVML_UTIL=20 FAKE_NVML_USED_MIB=2048 "$STOKER" doctor --seconds 120 -- $PY "$JOBS" launch --steps 3000 \
        2>"$T/err" || fail "doctor on launch"
    grep -q "^7. verdict: too small for the GPU (launch-bound): GPU busy 20% of the time while a step takes" "$T/err" \
        || fail "launch-bound"
    grep -q "next: batch 64 -> 512 (scale the learning rate with it; 2.0 of 80.0 GiB in use), merge several steps' work into one .*CUDA graph" \
        "$T/err" || fail "launch-bound: next"
    grep "^7. verdict" "$T/err" | grep -q "workers [0-9]" && fail "launch-bound: worker advice"
    FAKE_NVML_UTIL=95 FAKE_NVML_USED_MIB=2048 "$STOKER" doctor --seconds 120 -- $PY "$JOBS" launch --steps 3000 \
        2>"$T/err" || fail "doctor on launch at 95%"
    grep -q "^7. verdict: " "$T/err" || fail "launch at 95%: no verdict"
    grep -q "launch-bound" "$T/err" && fail "launch-bound with the GPU busy 95% of the time"
else
    echo "skip: the torch part (no torch for $PY)"
fi
echo ok
