#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# loaderbench's verdict and its datasets, on a small default sample (200 JPEGs):
#  - trainer step 0: the loader is the bottleneck on this CPU-bound sample and the verdict names
#    the decode stage;
#  - every read delayed 50 ms (--read-delay-us, stoker's fault injection): storage-bound;
#  - a trainer step much longer than a batch takes to make: "keeps up", the trainer waits < 5%;
#    the step is a GPU kernel when the build has CUDA and nvidia-smi lists a GPU (calibrated and
#    measured within 10% of the step, reading the device batches), else a sleep whose reason says
#    why ("no CUDA in this build" / "no CUDA device (...)"): expected from the build and the
#    machine, never taken from the tool's own answer;
#  - --autotune with such a step finds 1 worker;
#  - --stage read measures the storage path alone (no decode stage in the figures);
#  - a shard directory as DATASET: the files layout is skipped, and said so;
#  - an ImageFolder as DATASET: packed into the cache for the shard layouts, files layout run;
#  - a foreign LMDB (key -> image bytes) as DATASET: the shard read paths, no files layout.
set -euo pipefail
: "${LOADERBENCH:?LOADERBENCH not set (run through ctest)}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY missing"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-lb-verdict.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
C="$tmp/cache"
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; exit 1; }
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# 1. step 0: the loader is the bottleneck, and on 200 small JPEGs that is decode
"$LOADERBENCH" --cache-dir "$C" --sample-images 200 --layouts shards-direct,shards-buffered --workers 1 \
    --seconds 1 --batch-size 16 --json "$tmp/s0.json" >"$tmp/s0.out" 2>"$tmp/s0.err" || fail "step 0 run"
grep -q "^verdict: decode-bound" "$tmp/s0.out" || fail "step 0: verdict does not name decode"
[ "$(json "$tmp/s0.json" 'd["bottleneck"]')" = decode ] || fail "step 0: JSON bottleneck"
[ "$(json "$tmp/s0.json" 'len(d["points"])')" = 2 ] || fail "step 0: 2 points expected"

# 1b. slow storage (every read delayed 50 ms before it is issued, in line on the io_uring
#     submitter: ~20 reads/s against a decoder that makes hundreds of images/s, still ~80 under
#     ASan on a loaded machine): storage-bound
"$LOADERBENCH" --cache-dir "$C" --sample-images 200 --layouts shards-direct --workers 1 --seconds 1 \
    --batch-size 8 --read-delay-us 50000 --json "$tmp/slow.json" >"$tmp/slow.out" 2>"$tmp/slow.err" ||
    fail "slow storage run"
grep -q "^verdict: storage-bound: the decode workers waited for data" "$tmp/slow.out" ||
    fail "slow storage: verdict does not say storage-bound"
"$PY" - "$tmp/slow.json" <<'EOF' || fail "slow storage: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["points"][0]
assert d["bottleneck"] == "read" and p["bottleneck"] == "read", d["bottleneck"]
assert p["decode_starved"] >= 0.25 and p["read_starved"] > 0.3, p
assert p["images_per_s"] < 25, p["images_per_s"]
EOF

# 2. a 400 ms step for a 16-image batch (a few tens of ms to make): the loader keeps up.
#    Which step to expect comes from outside the tool: the build's features (stoker's version
#    string, set by CMake) and the machine (nvidia-smi -L lists a GPU).
cuda_built=0
version=$("$LOADERBENCH" --version)
grep -qw cuda <<<"$version" && cuda_built=1
gpu_here=0
gpus=$(nvidia-smi -L 2>/dev/null) || gpus=""
grep -q "^GPU " <<<"$gpus" && gpu_here=1
if [ $cuda_built = 1 ] && [ $gpu_here = 1 ]; then want_step=gpu-kernel
elif [ $cuda_built = 1 ]; then want_step=no-device
else want_step=no-cuda; fi
echo "trainer step expected: $want_step (CUDA built: $cuda_built, GPU listed by nvidia-smi: $gpu_here)"
"$LOADERBENCH" --cache-dir "$C" --sample-images 200 --layouts shards-direct --workers 1 --seconds 2.5 \
    --batch-size 16 --step-ms 400 --json "$tmp/s400.json" --csv "$tmp/s400.csv" >"$tmp/s400.out" 2>"$tmp/s400.err" ||
    fail "step 400 run"
grep -q "^verdict: the loader keeps up" "$tmp/s400.out" || fail "step 400: verdict does not say keeps up"
if [ $want_step = gpu-kernel ]; then
    grep -q "^trainer step mode: gpu-kernel — a 400 ms kernel per batch on device 0, calibrated at " "$tmp/s400.out" ||
        fail "step 400: the text does not report the GPU kernel mode"
else
    grep -q "^trainer step mode: sleep — " "$tmp/s400.out" || fail "step 400: the text does not report the sleep mode"
fi
"$PY" - "$tmp/s400.json" "$tmp/s400.csv" "$want_step" <<'EOF' || fail "step 400: JSON"
import csv, json, sys
d = json.load(open(sys.argv[1]))
want = sys.argv[3]
p = d["points"][0]
assert d["bottleneck"] == "trainer", d["bottleneck"]
assert p["step_ms"] == 400 and p["trainer_wait_fraction"] is not None, p
assert 0 <= p["trainer_wait_fraction"] < 0.05, p["trainer_wait_fraction"]
# the trainer consumed about one batch per step: images/s is capped by the step
assert p["images_per_s"] <= 16 / 0.4 * 1.15, p["images_per_s"]
t = d["trainer"]
assert t["step_ms"] == 400, t
if want == "gpu-kernel":
    # a kernel of 400 ms per batch, calibrated once and measured per step, within 10%
    assert t["mode"] == "gpu-kernel" and t["reason"] is None and t["device"] == 0, t
    assert d["machine"]["cuda_devices"] >= 1, d["machine"]
    assert t["calibration_target_ms"] == 400 and abs(t["calibrated_ms"] - 400) <= 40, t
    assert p["step_mode"] == "gpu-kernel" and p["step_reason"] is None, p
    assert p["step_calibrated_ms"] == t["calibrated_ms"], p
    assert abs(p["step_kernel_ms"] - 400) <= 40, p["step_kernel_ms"]
    # the default device is the GPU: device batches, which the kernel reads
    assert p["device"] == 0 and p["step_input"] == "device-batch", p
else:
    assert t["mode"] == "sleep" and t["device"] == -1 and t["calibrated_ms"] is None, t
    if want == "no-cuda":
        assert t["reason"] == "no CUDA in this build", t["reason"]
    else:
        # CUDA built, no GPU: the runtime found no device and says why
        assert t["reason"].startswith("no CUDA device (cudaGetDeviceCount"), t["reason"]
    assert d["machine"]["cuda_devices"] == 0, d["machine"]
    assert p["step_mode"] == "sleep" and p["step_reason"] == t["reason"], p
    assert p["step_calibrated_ms"] is None and p["step_kernel_ms"] is None and p["step_input"] is None, p
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 1, rows
r = rows[0]
assert r["step_mode"] == p["step_mode"] and r["step_reason"] == (p["step_reason"] or ""), r
if want == "gpu-kernel":
    assert abs(float(r["step_calibrated_ms"]) - t["calibrated_ms"]) < 1e-3 * t["calibrated_ms"], r
    assert r["step_input"] == "device-batch", r
else:
    assert r["step_calibrated_ms"] == "" and r["step_kernel_ms"] == "" and r["step_input"] == "", r
print("trainer step:", t)
EOF

# 3. autotune with that step: one worker is enough
"$LOADERBENCH" --cache-dir "$C" --sample-images 200 --layouts shards-direct --workers 1 --seconds 1.5 \
    --batch-size 16 --step-ms 400 --autotune --json "$tmp/at.json" >"$tmp/at.out" 2>"$tmp/at.err" || fail "autotune run"
grep -q "autotune: 1 worker keep" "$tmp/at.out" || fail "autotune did not report 1 worker"
[ "$(json "$tmp/at.json" 'd["autotune"]["workers"]')" = 1 ] || fail "autotune JSON"

# 4. the storage path alone
"$LOADERBENCH" --cache-dir "$C" --sample-images 200 --stage read --layouts shards-direct --workers 1 \
    --seconds 0.5 --json "$tmp/rd.json" >"$tmp/rd.out" 2>"$tmp/rd.err" || fail "stage read run"
"$PY" - "$tmp/rd.json" <<'EOF' || fail "stage read: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["points"][0]
assert p["stage"] == "read" and p["decode_busy"] is None and p["stager_busy"] is None, p
assert p["images_per_s"] > 0 and p["mb_per_s"] > 0 and p["bottleneck"] == "read", p
assert "storage path alone" in d["verdict"], d["verdict"]
EOF

base=$(ls -d "$C"/loaderbench-default-*-n200-*)
# 5. a shard dataset: no files layout
"$LOADERBENCH" --cache-dir "$C" --workers 1 --seconds 0.5 --batch-size 16 --json "$tmp/sh.json" \
    "$base/shards" >"$tmp/sh.out" 2>"$tmp/sh.err" || fail "shard dataset run"
grep -q "skipping the files layout: a shard dataset has no file-per-image layout" "$tmp/sh.err" ||
    fail "the files layout was not reported as skipped"
"$PY" - "$tmp/sh.json" <<'EOF' || fail "shard dataset: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dataset"]["kind"] == "shards" and d["dataset"]["records"] == 200, d["dataset"]
assert [s["layout"] for s in d["skipped_layouts"]] == ["files"], d["skipped_layouts"]
assert sorted(p["layout"] for p in d["points"]) == ["lmdb-mmap", "shards-buffered", "shards-direct"]
EOF

# 6. an ImageFolder: files layout on the folder, shard layouts on a packed copy in the cache
"$LOADERBENCH" --cache-dir "$tmp/cache2" --workers 1 --seconds 0.5 --batch-size 16 \
    --layouts files,shards-direct --json "$tmp/if.json" "$base/imagefolder" >"$tmp/if.out" 2>"$tmp/if.err" ||
    fail "ImageFolder run"
ls "$tmp"/cache2/packed-imagefolder-*/shard-00000.lmdb >/dev/null || fail "no packed copy in the cache"
"$PY" - "$tmp/if.json" <<'EOF' || fail "ImageFolder: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dataset"]["kind"] == "imagefolder" and d["dataset"]["records"] == 200, d["dataset"]
assert sorted(p["layout"] for p in d["points"]) == ["files", "shards-direct"], d["points"]
assert all(p["error"] is None and p["images_per_s"] > 0 for p in d["points"])
EOF

# 7. a foreign LMDB (main database: key -> JPEG bytes, as LSUN), written by python-lmdb
if "$PY" -c "import lmdb" 2>/dev/null; then
    "$PY" - "$base/imagefolder" "$tmp/foreign" <<'EOF'
import glob, lmdb, sys
env = lmdb.open(sys.argv[2], map_size=1 << 28)
with env.begin(write=True) as t:
    for i, p in enumerate(sorted(glob.glob(sys.argv[1] + "/*/*.JPEG"))):
        t.put(b"%08d" % i, open(p, "rb").read())
env.close()
EOF
    "$LOADERBENCH" --cache-dir "$C" --workers 1 --seconds 0.5 --batch-size 16 --json "$tmp/lm.json" \
        "$tmp/foreign" >"$tmp/lm.out" 2>"$tmp/lm.err" || fail "foreign LMDB run"
    "$PY" - "$tmp/lm.json" <<'EOF' || fail "foreign LMDB: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dataset"]["kind"] == "lmdb" and d["dataset"]["records"] == 200, d["dataset"]
assert [s["layout"] for s in d["skipped_layouts"]] == ["files"], d["skipped_layouts"]
assert len(d["points"]) == 3 and all(p["error"] is None and p["images_per_s"] > 0 for p in d["points"])
EOF
else
    echo "python3-lmdb missing: foreign LMDB part skipped"
fi
echo "PASS"
