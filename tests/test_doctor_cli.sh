#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stk-test: timeout 1800
# stoker doctor around jobs that are not constructed bottlenecks: bad input (exit 2 and a clear
# message), exit statuses passed through (a failing, a killed, a crashing job), the stop sequence
# (SIGINT, then SIGTERM, then SIGKILL for a job that ignores the first two), the system half for a
# job that is not Python or never iterates a loader, the hook chaining to a sitecustomize already
# on PYTHONPATH, and valid --json / --plot. Only the CLI runs instrumented (ASan builds too); the
# jobs are separate processes. The torch part is skipped without torch.
set -u
STOKER=${STOKER:-build/stoker}
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect() { # expect CODE PATTERN -- ARGS...: exit code and a stderr pattern
    local code=$1 pat=$2; shift 3
    "$STOKER" doctor "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = "$code" ] || { cat "$T/err"; fail "doctor $* exited $rc, expected $code"; }
    grep -q -- "$pat" "$T/err" || { cat "$T/err"; fail "doctor $*: no \`$pat\` in stderr"; }
}

# ---- bad input
expect 2 "no command to run" --
expect 2 "no command to run" -- --
expect 2 "no command to run" -- --seconds 3
expect 2 "command not found" -- /nonexistent/train
expect 2 "command not found" -- stoker-no-such-command-xyz
expect 2 "positive number of seconds (got \`abc\`)" -- --seconds abc -- true
expect 2 "positive number of seconds (got \`0\`)" -- --seconds 0 -- true
expect 2 "positive number of seconds (got \`5s\`)" -- --seconds 5s -- true
expect 2 "needs a number of seconds" -- --seconds
expect 2 "unknown option --frobnicate" -- --frobnicate -- true
expect 2 "needs a file name" -- --json
expect 2 "10..10000" -- --interval 1 -- true
expect 2 "gpu-step-ms needs a positive number of milliseconds (got \`x\`)" -- --gpu-step-ms x -- true
"$STOKER" doctor --help | grep -q "usage: stoker doctor" || fail "doctor --help"
"$STOKER" --help | grep -q "doctor" || fail "doctor missing from stoker --help"

# ---- not Python: the system half, the exit status, valid JSON and SVG
expect 0 "7. verdict: unknown: no training step seen: no Python process" -- --json "$T/a.json" --plot "$T/a.svg" -- true
grep -q "^2. CPU" "$T/err" || fail "no CPU section"
$PY -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['verdict']['stage']=='unknown' and d['job']['exit_code']==0" "$T/a.json" || fail "json"
$PY -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$T/a.svg" || fail "svg is not XML"
expect 3 "exit status 3" -- sh -c 'exit 3'
expect 137 "killed by signal 9" -- sh -c 'kill -9 $$'

# ---- a failing job: its status, runtime and last stderr lines in the report; its stderr still
# reaches the terminal; a job's own 2 is not the doctor's usage 2
expect 3 "FAILED     the job exited with code 3 after [0-9.]* s (0 training steps); its last stderr lines:" -- \
    --plot "$T/f.svg" -- sh -c 'echo first line >&2; echo "no such dataset: /data/x" >&2; exit 3'
grep -q "^              | no such dataset: /data/x$" "$T/err" || { cat "$T/err"; fail "last stderr line not in the report"; }
# the plot has the advice but not the report's stderr lines: no "(above)" pointing at nothing
grep -q "fix the error its last stderr lines show, then" "$T/f.svg" || fail "the plot lacks the failed job's advice"
! grep -q "(above)" "$T/f.svg" || fail "the plot refers to lines above that it does not have"
grep -q "^7. verdict: the job failed: it exited with code 3 after [0-9.]* s, before any training step: no such dataset: /data/x; next: fix" "$T/err" || { cat "$T/err"; fail "failure verdict"; }
[ "$(grep -c '^no such dataset: /data/x$' "$T/err")" = 1 ] || fail "the job's stderr is not passed through once"
expect 125 "exited with code 2" -- sh -c 'echo "usage: train.py [-h]" >&2; exit 2'
grep -q "the doctor exits 125 for it" "$T/err" || fail "125 not explained"
expect 130 "was killed by signal 2 (Interrupt)" -- sh -c 'kill -INT $$'
"$STOKER" doctor --help | grep -q "125  the job exited with status 2" || fail "--help does not document 125"

# ---- the SVG: the CPU lane's axis is the allowed cores (1 here), a run queue of 3 busy loops on
# that core is clipped and marked rather than rescaling the lane; the disk lane is the job's own
if command -v taskset >/dev/null; then
    expect 0 "stopped by the doctor" -- --seconds 1.5 --plot "$T/cpu.svg" -- \
        taskset -c 0 sh -c 'for i in 1 2 3; do (while :; do :; done) & done; wait'
    grep -q '>1 cores</text>' "$T/cpu.svg" || fail "the CPU lane's axis is not the 1 allowed core"
    grep -q 'fill="#c62828"' "$T/cpu.svg" || fail "no clipped-spike marker"
    grep -q "Disk: the job's processes" "$T/cpu.svg" || fail "the disk lane is not the job's own"
fi

# ---- the network row says whose traffic it is: a namespace shared with other processes is a total
expect 0 "namespace total: the job shares its network namespace" -- sleep 0.3
if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
    expect 0 "(the job's own network namespace)" -- --seconds 1.5 -- unshare -n sleep 30
fi

# ---- the stop sequence: which signal ended the job is the kernel's answer (the doctor's wait
# status), not how long the run took: a sleep 30 that SIGINT did not end would exit 0 by itself;
# a job that ignores INT and TERM ends by SIGKILL, and no earlier than 5 s + 3 s after the stop
# (a lower bound: a loaded machine only makes it later)
term_signal() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['job']['term_signal'])" "$1"; }
expect 0 "stopped by the doctor after 1.0 s (SIGINT)" -- --seconds 1 --json "$T/stop.json" -- sleep 30
[ "$(term_signal "$T/stop.json")" = 2 ] || fail "SIGINT did not end sleep"
s=$(date +%s)
expect 0 "SIGINT, SIGTERM, then SIGKILL" -- --seconds 0.5 --json "$T/stop.json" -- sh -c 'trap "" INT TERM; sleep 30; exit 0'
e=$(( $(date +%s) - s ))
[ "$(term_signal "$T/stop.json")" = 9 ] || fail "the escalation did not end the job with SIGKILL"
[ "$e" -ge 8 ] || fail "escalation took $e s (5 s + 3 s expected)"

# ---- the job's storage bytes count a child once: a shell whose child wrote 24 MiB (fsynced, seen
# alive by the sampler) and which then reaped it (its /proc/PID/io now holds the child's bytes too)
if [ -x "$PY" ]; then
    W='import os,time
f=open(os.environ["OUT"],"wb")
for i in range(24):
    f.write(b"x"*(1<<20)); f.flush(); os.fsync(f.fileno()); time.sleep(0.05)'
    OUT="$T/io" expect 0 "exit status 0" -- --json "$T/io.json" -- sh -c "$PY -c '$W'; sleep 0.5"
    $PY -c "import json,sys; w=json.load(open(sys.argv[1]))['disk']['job_write_bytes']; assert 0.9*(24<<20) <= w <= 1.3*(24<<20), w" "$T/io.json" \
        || { cat "$T/err"; fail "the job's write bytes are not the 24 MiB its child wrote"; }
    grep -q "devices, totals of all processes" "$T/err" || fail "device rows not labelled as all processes"
fi

# ---- Python: the hook loads, chains to an existing sitecustomize, a job that never iterates
if [ -x "$PY" ]; then
    mkdir "$T/site"
    printf 'import os\nopen(os.environ["MARK"], "w").write("ran")\n' >"$T/site/sitecustomize.py"
    MARK="$T/mark" PYTHONPATH="$T/site" expect 0 "never iterated a torch DataLoader" -- --events "$T/ev" -- \
        $PY -c 'import sys; assert "sitecustomize" in sys.modules'
    [ "$(cat "$T/mark" 2>/dev/null)" = ran ] || fail "the existing sitecustomize did not run"
    grep -q "^H " "$T/ev" || fail "no hello event from the hook"
    expect 0 "no Python process of the job loaded the hook" -- $PY -I -c 'pass'
    # the plot of a long run: one element per pixel column, not per batch (the old one: 14 MB),
    # well-formed, every label inside the picture
    D="$(dirname "$0")/doctor"
    expect 0 "200000 batches" -- --plot "$T/long.svg" -- $PY -I "$D/long_events_job.py"
    $PY "$D/svg_check.py" "$T/long.svg" 1000000 || fail "the long run's plot"
fi

# ---- torch: a job that crashes after 3 steps still gets its diagnosis and its exit status
if [ -x "$PY" ] && $PY -c 'import torch' 2>/dev/null; then
    JOBS="$(dirname "$0")/python/doctor_jobs.py"
    expect 1 "exit status 1" -- --json "$T/c.json" --plot "$T/c.svg" -- $PY "$JOBS" crash
    grep -q "constructed crash after 3 steps" "$T/err" || fail "the job's traceback is not passed through"
    grep -q "^7. verdict: " "$T/err" || fail "no verdict for a crashing job"
    $PY -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['job']['batches']==3, d['job']; assert d['job']['exit_code']==1" "$T/c.json" || fail "crash json"
    $PY -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$T/c.svg" || fail "svg is not XML"
    $PY "$(dirname "$0")/doctor/svg_check.py" "$T/c.svg" 1000000 || fail "the crash job's plot"
    # the events stay compact: 3000 sub-millisecond batches as binary records, every one read back;
    # the hook's own time per batch reported
    expect 0 "3000 batches" -- --events "$T/tiny.ev" --json "$T/t.json" -- $PY "$JOBS" tiny --steps 3000
    $PY -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['job']['batches']==3000, d['job']; assert 0 < d['watching']['hook_us_per_batch'] < 1000, d['watching']" "$T/t.json" \
        || fail "tiny json"
    ev=$(stat -c %s "$T/tiny.ev")
    [ "$ev" -le $((3000 * 20)) ] || fail "events file of $ev bytes for 3000 batches (> 20 bytes a batch)"
    # counters travel per block of batches, summed: per step exactly what each step did; autocast
    # counts the steps it was entered in (twice a step here), not its entries
    cat >"$T/ac.py" <<'PY'
import torch
ds = torch.utils.data.TensorDataset(torch.randn(1920, 32), torch.randint(0, 10, (1920,)))
m = torch.nn.Linear(32, 10)
for x, y in torch.utils.data.DataLoader(ds, batch_size=16):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(out.float(), y)
    loss.item()
    loss.item()
    x.numpy()
PY
    expect 0 "autocast fp16 in 0, bf16 in 120 of 120 steps" -- $PY "$T/ac.py"
    grep -q "per step: .item() 2.0, .cpu() 0.0, .numpy() 1.0" "$T/err" || { cat "$T/err"; fail "per-step counters"; }
else
    echo "skip: the torch part (no torch for $PY)"
fi
echo ok
