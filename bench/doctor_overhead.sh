#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of watching a job with `stoker doctor`: an interleaved A/B of the same torch training
# loop run plainly (A) and under the doctor (B), REPEATS pairs (default 5) in turn; each run gives
# its median step time, its CPU per step and its whole wall time (start to exit, the interpreter's
# start-up and imports included); printed: the medians of each, their spread (min..max over the
# runs) and the median of the pairs' differences. Two
# loops: "empty" (a batch and a loss.item() per step, nothing else: the hook's cost per step in
# absolute terms) and "step" (a small MLP step of some ms: the cost as a share of a step).
# Figures: the job's CPU time per step (time.process_time: what the hook adds, insensitive to
# other load on a shared machine) and its median wall step; the doctor's own CPU (the sampler,
# outside the job) is printed by the doctor itself.
#   bash bench/doctor_overhead.sh [REPEATS]      (BUILD_DIR=build)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
STOKER=${STOKER:-${BUILD_DIR:-build}/stoker}
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat >"$T/loop.py" <<'EOF'
import statistics, sys, time
import torch, torch.nn as nn
torch.set_num_threads(1)
mode, steps = sys.argv[1], int(sys.argv[2])
x = torch.randn(4096, 256); y = torch.randint(0, 10, (4096,))
dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
times, n = [], 0
t = time.perf_counter()
c0 = None
while n < steps:
    for xb, yb in dl:
        if mode == "step":
            loss = loss_fn(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
            loss.item()
        else:
            yb.sum().item()
        now = time.perf_counter(); times.append(now - t); t = now; n += 1
        if n == 10:
            c0 = time.process_time()
        if n >= steps:
            break
print("cpu_per_step_us %.2f" % (1e6 * (time.process_time() - c0) / (steps - 10)))
print("median_step_us %.2f" % (1e6 * statistics.median(times[10:])))
EOF
run() { # run MODE STEPS doctor|plain -> "cpu_us wall_us job_s": per step, and the whole run
    local t0 t1
    t0=$(date +%s.%N)
    if [ "$3" = doctor ]; then
        "$STOKER" doctor -- "$PY" "$T/loop.py" "$1" "$2" 2>"$T/err" >"$T/o"
        grep -o "watching cost: .*" "$T/err" >>"$T/cost"
    else
        "$PY" "$T/loop.py" "$1" "$2" >"$T/o"
    fi
    t1=$(date +%s.%N)
    awk -v j="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')" \
        '/cpu_per_step_us/ {c=$2} /median_step_us/ {w=$2} END {print c, w, j}' "$T/o"
}
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
range() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo ".." hi}'; }
cmp() { # cmp LABEL COLUMN UNIT
    local p d pr dr pd
    p=$(cut -d' ' -f"$2" "$T/plain" | med); d=$(cut -d' ' -f"$2" "$T/doc" | med)
    pr=$(cut -d' ' -f"$2" "$T/plain" | range); dr=$(cut -d' ' -f"$2" "$T/doc" | range)
    pd=$(paste -d' ' <(cut -d' ' -f"$2" "$T/plain") <(cut -d' ' -f"$2" "$T/doc") | awk '{print $2 - $1}' | med)
    echo "  $1: plain ${p} $3 [${pr}], under the doctor ${d} $3 [${dr}]: $(awk -v p="$p" -v d="$d" -v u="$3" \
        'BEGIN {printf "%+.2f %s (%+.1f%%)", d - p, u, 100 * (d - p) / p}'); pairs' differences, median: ${pd} $3"
}
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in empty step; do
    steps=$([ $mode = empty ] && echo 3000 || echo 150)
    : >"$T/plain"; : >"$T/doc"; : >"$T/cost"
    for i in $(seq "$REPEATS"); do
        run $mode $steps plain >>"$T/plain"
        run $mode $steps doctor >>"$T/doc"
    done
    echo "$mode loop, $steps steps, $REPEATS interleaved pairs: medians [min..max]:"
    cmp "job CPU per step" 1 us
    cmp "median wall step" 2 us
    cmp "whole job (start to exit)" 3 s
    echo "  doctor's own CPU (last run): $(tail -1 "$T/cost")"
done
