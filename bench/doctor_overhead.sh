#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of watching a job with `stoker doctor`: the same torch training loop run plainly and
# under the doctor, alternately, REPEATS times each; each run prints its median step time. Two
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
run() { # run MODE STEPS doctor|plain -> "cpu_us wall_us" per step
    if [ "$3" = doctor ]; then
        "$STOKER" doctor -- "$PY" "$T/loop.py" "$1" "$2" 2>"$T/err" >"$T/o"
        grep -o "watching cost: .*" "$T/err" >>"$T/cost"
    else
        "$PY" "$T/loop.py" "$1" "$2" >"$T/o"
    fi
    awk '/cpu_per_step_us/ {c=$2} /median_step_us/ {w=$2} END {print c, w}' "$T/o"
}
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
cmp() { # cmp LABEL COLUMN
    local p d
    p=$(cut -d' ' -f"$2" "$T/plain" | med); d=$(cut -d' ' -f"$2" "$T/doc" | med)
    echo "  $1: plain ${p} us, under the doctor ${d} us: $(awk -v p="$p" -v d="$d" \
        'BEGIN {printf "%+.2f us (%+.2f%%)", d - p, 100 * (d - p) / p}')"
}
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in empty step; do
    steps=$([ $mode = empty ] && echo 3000 || echo 150)
    : >"$T/plain"; : >"$T/doc"; : >"$T/cost"
    for i in $(seq "$REPEATS"); do
        run $mode $steps plain >>"$T/plain"
        run $mode $steps doctor >>"$T/doc"
    done
    echo "$mode loop, $steps steps, medians of $REPEATS runs each:"
    cmp "job CPU per step" 1
    cmp "median wall step" 2
    echo "  doctor's own CPU (last run): $(tail -1 "$T/cost")"
done
