#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# loaderbench's command line: every bad argument exits 2 with a message that names the option
# and the value; a path that exists but is no dataset exits 1 naming it; --help documents every
# option, the JSON fields and the exit codes. Nothing here runs a benchmark.
set -euo pipefail
: "${LOADERBENCH:?LOADERBENCH not set (run through ctest)}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-lb-args.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0

# expect_error STATUS PATTERN ARGS...: exit STATUS, stderr matches PATTERN, nothing on stdout
expect_error() {
    local want=$1 pat=$2
    shift 2
    local rc=0
    "$LOADERBENCH" --cache-dir "$tmp/cache" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" != "$want" ]; then
        echo "FAIL: loaderbench $* exited $rc, want $want"; cat "$tmp/out" "$tmp/err"; exit 1
    fi
    if ! grep -qE -- "$pat" "$tmp/err"; then
        echo "FAIL: loaderbench $*: stderr does not match '$pat':"; cat "$tmp/err"; exit 1
    fi
    if [ -s "$tmp/out" ]; then
        echo "FAIL: loaderbench $*: wrote to stdout:"; cat "$tmp/out"; exit 1
    fi
    n=$((n + 1))
}

expect_error 2 "--workers: '0' is not a worker count" --workers 0
expect_error 2 "--workers: 'abc' is not a worker count" --workers 1,abc
expect_error 2 "--workers: 2 is listed twice" --workers 2,2
expect_error 2 "--workers: empty list" --workers ,
expect_error 2 "--layouts: unknown layout 'tape'" --layouts files,tape
expect_error 2 "--cache: 'hot' is neither warm nor cold" --cache hot
expect_error 2 "--batch-size: '0' is not an integer 1..65536" --batch-size 0
expect_error 2 "--batch-size: '12x' is not an integer" --batch-size 12x
expect_error 2 "--mode: 'test' is neither train nor eval" --mode test
expect_error 2 "--stage: 'gpu' is not read, decode or full" --stage gpu
expect_error 2 "--repeat: '0' is not an integer 1..101" --repeat 0
expect_error 2 "--seconds: '-1' is not a number of seconds" --seconds -1
expect_error 2 "--seconds: 'nan' is not a number of seconds" --seconds nan
expect_error 2 "--epochs: '0' is not an integer" --epochs 0
expect_error 2 "--seconds and --epochs exclude each other" --seconds 2 --epochs 1
expect_error 2 "--step-ms: 'fast' is not a number of milliseconds" --step-ms fast
expect_error 2 "--autotune needs --step-ms" --autotune
expect_error 2 "--device: 'tpu' is neither a CUDA device number nor cpu" --device tpu
expect_error 2 "--size: '8' is not an integer 16..1024" --size 8
expect_error 2 "--sample-images: '5' is not an integer 100..100000" --sample-images 5
expect_error 2 "--read-delay-us: '-3' is not an integer" --read-delay-us -3
expect_error 2 "unknown option '--bogus'" --bogus
expect_error 2 "option '--workers' needs a value" --workers
expect_error 2 "one DATASET at most" "$tmp" "$tmp"
expect_error 2 "DATASET '$tmp/nope': No such file or directory" "$tmp/nope"
expect_error 2 "--json/--csv/--plot: empty file name" --json ""
# exists, but no dataset: a runtime failure naming the path
printf 'not an image' >"$tmp/junk.bin"
expect_error 1 "cannot open dataset $tmp/junk.bin" "$tmp/junk.bin"

# --help: exit 0, every option, the JSON point fields, the exit codes
"$LOADERBENCH" --help >"$tmp/help"
for opt in --workers --layouts --cache --batch-size --mode --stage --size --repeat --seconds --epochs \
    --step-ms --autotune --device --read-delay-us --cache-dir --sample-images --seed --json --csv --plot --quiet --help \
    --version; do
    grep -q -- "$opt" "$tmp/help" || { echo "FAIL: --help does not document $opt"; exit 1; }
done
for field in layout workers mode stage cache batch_size repeat images_per_s images_per_s_min \
    images_per_s_max mb_per_s cpu_cores read_busy read_starved read_blocked decode_busy decode_starved \
    decode_blocked stager_busy stager_starved stager_blocked wait_fraction step_ms \
    trainer_wait_fraction step_mode step_reason step_calibrated_ms step_kernel_ms step_input trainer \
    calibration_target_ms calibrated_ms gpu-kernel sleep io_backend bottleneck; do
    grep -qw -- "$field" "$tmp/help" || { echo "FAIL: --help does not document the JSON field $field"; exit 1; }
done
grep -q "Exit status: 0" "$tmp/help" && grep -q "2 bad arguments" "$tmp/help" ||
    { echo "FAIL: --help does not document the exit codes"; exit 1; }
"$LOADERBENCH" --version | grep -q "^loaderbench (stoker " || { echo "FAIL: --version"; exit 1; }
echo "PASS: $n bad command lines rejected with clear errors"
