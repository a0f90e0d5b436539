#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The device check of the CUDA stager, one script for a machine with an NVIDIA GPU.
# Prepare first, here: bash bench/device/prepare.sh (builds into .device/, which the run carries).
# Runs in under 5 minutes:
#   1. GPU tests: test_stager (device == CPU conversion for every dtype/layout/normalisation, a
#      slow-consumer race over 1000 batches, no device-memory growth, >2^31-element batch) and
#      test_cuda_loader (device batches == host batches, per-epoch loaders without growth),
#      and the Python binding's tests/python/test_*cuda*.py (torch streams).
#   2. (a) H2D GB/s of the stager vs a plain cudaMemcpyAsync from pinned memory (stager_h2d).
#   3. A dataset: make-imagenet-like (carried, with its photos) -> ImageFolder, packed to shards.
#   4. (b) synthetic trainer, GPU step longer than the loader's batch time: GPU idle between
#      steps, stoker (idle_gap) vs per-batch .cuda() (torch_idle.py).
#   5. (c) images/s: stoker vs PyTorch DataLoader, all cores (throughput.py).
#   6. loaderbench --step-ms 20: the trainer's step must be a GPU kernel (gpu-kernel mode),
#      calibrated and measured within 10% of 20 ms, reading the device batches (--device cpu:
#      spinning only); a part that fails otherwise.
#   7. stoker doctor on examples/train.py (unmodified, ResNet-18 on the GPU): a torch DataLoader
#      with 2 workers that starves the GPU, then stoker.Loader on the shards; NVML figures (GPU
#      busy, memory, the job's context) and the verdict of each; expected: input-bound, then not.
# Writes its logs and summary.txt to $OUT (default /tmp/stoker-check). Exit 0 when every part
# ran (targets missed are reported, not failures), 1 when a test failed or a part broke.
# Without a GPU it says so and exits 0; CHECK_SMOKE=1 then runs the parts that can run on a CPU
# (programs start and skip, data generation, packing, throughput.py --device cpu) on tiny data.
set -uo pipefail
cd "$(dirname "$0")/../.."
D=$PWD/.device
OUT=${OUT:-/tmp/stoker-check}
DATA=${CHECK_DATA:-/tmp/stoker-check-data}
COUNT=${CHECK_COUNT:-5000}
PY=${PYTHON:-python3}
NCPU=$(nproc)
mkdir -p "$OUT" "$DATA"
rm -f "$OUT"/{check.log,test_stager.txt,test_cuda_loader.txt,h2d.txt,idle.txt,throughput.txt,summary.txt} \
  "$OUT"/{loaderbench.txt,loaderbench-0.json,loaderbench-cpu.json} "$OUT"/doctor-*.{txt,json,svg}

main() {
if [ ! -x "$D/bin/stager_h2d" ]; then
  echo "check.sh: $D is missing: run bench/device/prepare.sh first (on the build machine) and carry .device"
  exit 2
fi
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export STOKER_LIBRARY=$D/lib/libstoker.so
export PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

gpu=1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then gpu=0; fi
"$D/bin/stager_h2d" 1 1 1 1 >/dev/null 2>&1
[ $? = 77 ] && gpu=0
if [ $gpu = 0 ]; then
  echo "check.sh: no GPU here (nvidia-smi / stk_cuda_device_count): nothing measured"
  if [ "${CHECK_SMOKE:-0}" != 1 ]; then exit 0; fi
  echo "== CHECK_SMOKE=1: what can run without a GPU, on tiny data"
  COUNT=60
fi

failed=()
part() { echo; echo "== $(date +%T) $*"; }
run() { # NAME TIMEOUT FILE CMD...: run, output also appended to FILE (- for none); record a
         # failure (77 = skipped is fine)
  local name=$1 t=$2 file=$3; shift 3
  [ "$file" = - ] && file=/dev/null
  timeout "$t" "$@" 2>&1 | tee -a "$file"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then failed+=("$name (exit $rc)"); fi
  return 0
}

part "machine"
[ $gpu = 1 ] && nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv
echo "cpus: $NCPU; python: $($PY -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>&1)"

part "1. GPU tests"
run test_stager 180 "$OUT/test_stager.txt" "$D/bin/test_stager"
run test_cuda_loader 180 "$OUT/test_cuda_loader.txt" "$D/bin/test_cuda_loader"
# the Python binding's GPU tests (torch streams, __cuda_array_interface__), when the repo has them
for t in tests/python/test_*cuda*.py; do
  [ -f "$t" ] || continue
  run "$(basename "$t" .py)" 180 "$OUT/test_cuda_loader.txt" "$PY" -m pytest -q -p no:cacheprovider "$t"
done

part "2. (a) H2D: stager vs plain cudaMemcpyAsync"
run stager_h2d 120 "$OUT/h2d.txt" "$D/bin/stager_h2d" 256 224 7 30

part "3. dataset: $COUNT images"
run generate 180 - "$PY" "$D/make-imagenet-like" --count "$COUNT" --classes 100 --seed 1 \
  --photo-cache "$D/photo-cache" --jobs "$NCPU" --force "$DATA/folder"
run pack 120 - "$PY" -c "import stoker, sys; r = stoker.pack(sys.argv[1], sys.argv[2], force=True); print('packed', r)" \
  "$DATA/folder" "$DATA/shards"

part "4. (b) GPU idle between steps: stoker vs per-batch .cuda()"
if [ $gpu = 1 ]; then
  run idle_gap 150 "$OUT/idle.txt" "$D/bin/idle_gap" "$DATA/shards" 256 "$NCPU" 120 1.5
  step_ns=$(sed -n 's/^RESULT idle .*step_ns=\([0-9]*\).*/\1/p' "$OUT/idle.txt")
  run torch_idle 150 "$OUT/idle.txt" "$PY" bench/device/torch_idle.py --step-ns "${step_ns:-50000000}"
else
  run idle_gap 30 - "$D/bin/idle_gap" "$DATA/shards"
  run torch_idle 60 - "$PY" bench/device/torch_idle.py --step-ns 1000000
fi

part "5. (c) images/s: stoker vs PyTorch DataLoader, $NCPU workers"
if [ $gpu = 1 ]; then
  run throughput 240 "$OUT/throughput.txt" "$PY" bench/device/throughput.py --folder "$DATA/folder" \
    --shards "$DATA/shards" --workers "$NCPU" --epochs 2 --rounds 3
else
  run throughput 240 "$OUT/throughput.txt" "$PY" bench/device/throughput.py --folder "$DATA/folder" \
    --shards "$DATA/shards" --workers 2 --epochs 1 --rounds 2 --batch 16 --device cpu
fi

part "6. loaderbench --step-ms: the simulated trainer's step is a GPU kernel"
# a GPU here: the step must be a kernel (gpu-kernel mode), calibrated and measured within 10% of
# MS, reading the device batches; --device cpu: host batches, the kernel only spins. No GPU
# (CHECK_SMOKE): the step must be a sleep, with a reason.
LB_MS=20
want=sleep
[ $gpu = 1 ] && want=gpu-kernel
for dev in 0 cpu; do
  run "loaderbench_step_$dev" 90 "$OUT/loaderbench.txt" "$D/bin/loaderbench" --cache-dir "$DATA/lbcache" \
    --sample-images 400 --layouts shards-direct --workers "$NCPU" --seconds 3 --batch-size 64 \
    --step-ms "$LB_MS" --device "$dev" --json "$OUT/loaderbench-$dev.json"
  run "loaderbench_step_${dev}_check" 30 "$OUT/loaderbench.txt" "$PY" - "$OUT/loaderbench-$dev.json" "$LB_MS" \
    "$want" "$dev" <<'EOF'
import json, sys
path, ms, want, dev = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
d = json.load(open(path))
t, p = d["trainer"], d["points"][0]
cal, kern = t["calibrated_ms"], p.get("step_kernel_ms")
bad = []
if t["mode"] != want:
    bad.append("mode %s, want %s (reason: %s)" % (t["mode"], want, t["reason"]))
if want == "gpu-kernel":
    if cal is None or abs(cal - ms) > 0.1 * ms:
        bad.append("calibrated %s ms, want %g +- 10%%" % (cal, ms))
    if kern is None or abs(kern - ms) > 0.1 * ms:
        bad.append("mean step kernel %s ms, want %g +- 10%%" % (kern, ms))
    want_input = "device-batch" if dev != "cpu" else "none"
    if p.get("step_input") != want_input:
        bad.append("step_input %s, want %s (point device %s)" % (p.get("step_input"), want_input, p.get("device")))
elif not t["reason"]:
    bad.append("sleep without a reason")
print("RESULT loaderbench_step device=%s mode=%s step_ms=%g calibrated_ms=%s kernel_ms=%s step_input=%s "
      "trainer_wait=%s images_per_s=%s reason=%r %s" % (dev, t["mode"], ms, cal, kern, p.get("step_input"),
      p.get("trainer_wait_fraction"), p.get("images_per_s"), t["reason"], "OK" if not bad else "FAIL: " + "; ".join(bad)))
sys.exit(1 if bad else 0)
EOF
done

part "7. stoker doctor on examples/train.py: a starving torch DataLoader, then stoker.Loader"
if [ -x "$D/bin/stoker" ]; then
  if [ $gpu = 1 ]; then
    dargs=(--seconds 75); targs=(--batch-size 128 --size 224 --steps 400 --warmup 5 --device cuda)
    tw=2; sw=$NCPU
  else
    dargs=(); targs=(--batch-size 8 --size 64 --steps 4 --device cpu); tw=1; sw=2
  fi
  for l in torch stoker; do
    data=$DATA/folder; w=$tw
    [ $l = stoker ] && data=$DATA/shards && w=$sw
    run "doctor_$l" 150 "$OUT/doctor-$l.txt" "$D/bin/stoker" doctor "${dargs[@]}" --json "$OUT/doctor-$l.json" \
      --plot "$OUT/doctor-$l.svg" -- "$PY" examples/train.py --data "$data" --loader $l --workers $w "${targs[@]}"
    "$PY" - "$OUT/doctor-$l.json" "$l" "$w" <<'EOF' | tee -a "$OUT/doctor-$l.txt"
import json, sys
d = json.load(open(sys.argv[1]))
g = d["gpu"]["devices"][0] if d["gpu"]["devices"] else {}
want = "input-bound" if sys.argv[2] == "torch" else "not input-bound"
got = d["verdict"]["stage"]
ok = got.startswith("input-bound") == (sys.argv[2] == "torch")
print("RESULT doctor_%s workers=%s verdict=%r gpu_util_mean=%s gpu_mem_max_gib=%.2f job_holds_context=%s "
      "wait_share=%.2f batches=%d next=%r %s" % (
      sys.argv[2], sys.argv[3], got, g.get("util_mean_pct"), g.get("mem_used_max_bytes", 0) / 2**30,
      d["gpu"]["job_holds_context"], d["data"]["wait_share"], d["job"]["batches"], d["verdict"]["next"],
      "OK" if ok else "MISSED (want %s)" % want))
EOF
  done
else
  echo "no $D/bin/stoker (prepare.sh builds it): part 7 skipped"
fi

part "summary"
{
  echo "stoker device check, $(date -u +%FT%TZ), gpu=$gpu"
  grep -h '^RESULT' "$OUT"/*.txt 2>/dev/null
  if [ ${#failed[@]} = 0 ]; then echo "all parts ran"; else printf 'FAILED: %s\n' "${failed[@]}"; fi
} | tee "$OUT/summary.txt"
[ ${#failed[@]} = 0 ]
}

main 2>&1 | tee "$OUT/check.log"
exit "${PIPESTATUS[0]}"
