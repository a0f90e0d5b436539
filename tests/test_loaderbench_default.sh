#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# loaderbench with no DATASET: the real embedded default (synthesise ~2000 JPEGs, pack them,
# sweep every layout over the default worker counts) runs end to end from a clean cache and
# exits 0; the JSON holds every point with the fields --help documents; the CSV has a row per
# point (its fetch columns empty); the SVG is well-formed XML with one series per layout; a
# second run reuses the cached sample. How long the default takes is a benchmark, not a test
# (bench/loaderbench_default.sh): here only ctest's timeout guards against a hang.
set -euo pipefail
: "${LOADERBENCH:?LOADERBENCH not set (run through ctest)}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY missing"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-lb-default.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# sanitizer builds run everything several times slower: there the point is memory and UB
# checking of the same code paths, so the sample is smaller and the runs shorter
extra=()
images=2000
if [ -n "${STOKER_SANITIZE:-}" ]; then
    images=400
    extra=(--sample-images "$images" --seconds 0.5)
fi
"$LOADERBENCH" --cache-dir "$tmp/cache" --json "$tmp/out.json" --csv "$tmp/out.csv" \
    --plot "$tmp/out.svg" "${extra[@]}" >"$tmp/stdout" 2>"$tmp/stderr" || {
    echo "FAIL: loaderbench exited $?"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
cat "$tmp/stdout"

grep -q "synthesised $images JPEGs" "$tmp/stderr" || { echo "FAIL: no synthesis message"; cat "$tmp/stderr"; exit 1; }
grep -q "^verdict: " "$tmp/stdout" || { echo "FAIL: no verdict"; exit 1; }
grep -q "peak memory: host batch ring" "$tmp/stdout" || { echo "FAIL: no peak memory line"; exit 1; }

# the documented JSON fields: take them from --help itself, so help and output cannot drift
"$LOADERBENCH" --help >"$tmp/help"
"$PY" - "$tmp/out.json" "$tmp/out.csv" "$tmp/out.svg" "$tmp/help" "$images" <<'EOF'
import csv, json, math, os, sys
import xml.etree.ElementTree as ET

jpath, cpath, spath, hpath = sys.argv[1:5]
images = int(sys.argv[5])
d = json.load(open(jpath))
help_text = open(hpath).read()
cores = os.cpu_count()
layouts = ["files", "shards-buffered", "shards-direct", "lmdb-mmap"]
workers, w = [], 1
while w < cores:
    workers.append(w)
    w *= 2
workers.append(cores)

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

fields = ["layout", "workers", "mode", "stage", "cache", "batch_size", "size", "step_ms", "repeat",
          "runs", "images_per_s", "images_per_s_min", "images_per_s_max", "mb_per_s", "cpu_cores",
          "read_busy", "read_starved", "read_blocked", "read_threads",
          "decode_busy", "decode_starved", "decode_blocked", "decode_threads",
          "stager_busy", "stager_starved", "stager_blocked", "stager_threads",
          "wait_fraction", "trainer_wait_fraction", "step_mode", "step_reason", "step_calibrated_ms",
          "step_kernel_ms", "step_input", "wall_s", "samples", "batches", "bad_records",
          "disk_read_bytes", "io_backend", "io_direct", "io_note", "host_ring_bytes", "pinned_bytes",
          "device_bytes", "reader_pool_bytes", "device", "bottleneck", "error"]
for f in fields:
    if f not in help_text:
        fail("--help does not document the point field %r" % f)

if d["dataset"]["kind"] != "default" or d["dataset"]["records"] != images:
    fail("dataset: %r" % d["dataset"])
pts = d["points"]
want = {(l, w) for l in layouts for w in workers}
got = {(p["layout"], p["workers"]) for p in pts}
if got != want or len(pts) != len(want):
    fail("points %s, want %s" % (sorted(got), sorted(want)))
for p in pts:
    missing = [f for f in fields if f not in p]
    if missing:
        fail("point %s/%s lacks %s" % (p.get("layout"), p.get("workers"), missing))
    if p["error"] is not None:
        fail("point %s/%d failed: %s" % (p["layout"], p["workers"], p["error"]))
    if not (p["images_per_s"] > 0 and p["images_per_s_min"] <= p["images_per_s"] <= p["images_per_s_max"]):
        fail("images/s of %s/%d: %r" % (p["layout"], p["workers"], p))
    if len(p["runs"]) != p["repeat"] or p["repeat"] != 1:
        fail("runs/repeat: %r" % p)
    if not p["mb_per_s"] > 0 or not p["cpu_cores"] > 0:
        fail("MB/s or CPU of %s/%d is zero" % (p["layout"], p["workers"]))
    for s in ("read", "decode"):
        for k in ("busy", "starved", "blocked"):
            v = p["%s_%s" % (s, k)]
            if v is None or not (0 <= v <= 1):
                fail("%s_%s = %r at %s/%d" % (s, k, v, p["layout"], p["workers"]))
    if p["decode_threads"] != p["workers"]:
        fail("decode_threads %r != workers %r" % (p["decode_threads"], p["workers"]))
    if p["trainer_wait_fraction"] is not None or p["step_ms"] != 0:
        fail("no trainer step was asked for: %r" % p)
    if any(p[k] is not None for k in ("step_mode", "step_reason", "step_calibrated_ms", "step_kernel_ms",
                                      "step_input")):
        fail("no trainer step, yet step fields: %r" % p)
    if p["samples"] < 1 or p["batches"] < 1 or p["bad_records"] != 0:
        fail("samples/batches/bad: %r" % p)
    if p["host_ring_bytes"] <= 0:
        fail("host ring bytes: %r" % p)
    if (p["layout"] == "shards-direct") != bool(p["io_direct"]):
        fail("io_direct %r on %s" % (p["io_direct"], p["layout"]))
    if p["layout"] == "lmdb-mmap" and p["io_backend"] != "mmap":
        fail("lmdb-mmap ran on %r" % p["io_backend"])
    if p["bottleneck"] not in ("read", "decode", "stager", "trainer"):
        fail("bottleneck %r" % p["bottleneck"])
# CPU-bound default: the verdict names the decode stage
if "decode" not in d["verdict"] or d["bottleneck"] != "decode":
    fail("verdict does not name decode: %r (%r)" % (d["verdict"], d["bottleneck"]))
if d["trainer"] != {"step_ms": 0, "mode": None, "reason": None, "device": -1, "calibration_target_ms": None,
                    "calibrated_ms": None}:
    fail("trainer without --step-ms: %r" % d["trainer"])
if d["memory"]["host_ring_bytes"] <= 0 or d["memory"]["max_rss_bytes"] <= 0:
    fail("memory: %r" % d["memory"])

rows = list(csv.DictReader(open(cpath)))
# the JSON's fields but runs, and the fetch object's figures as fetch_* columns (empty: local)
fetch_cols = ["fetch_" + k for k in ("shards", "cache_hits", "cache_misses", "hit_rate", "bytes",
                                     "requests", "retries", "busy_s", "starved_s",
                                     "link_bytes_per_s", "inflight", "open_s")]
if len(rows) != len(pts) or set(rows[0].keys()) != (set(fields) - {"runs"}) | set(fetch_cols):
    fail("CSV: %d rows, columns %s" % (len(rows), sorted(rows[0].keys()) if rows else None))
if any(r[c] != "" for r in rows for c in fetch_cols):
    fail("CSV: fetch columns filled for a local dataset: %r" % rows[0])

root = ET.parse(spath).getroot()
ns = "{http://www.w3.org/2000/svg}"
if root.tag != ns + "svg":
    fail("SVG root is %r" % root.tag)
series = [g for g in root.iter(ns + "g") if g.get("class") == "series"]
names = [g.get("data-layout") for g in series]
if sorted(names) != sorted(layouts):
    fail("SVG series %r" % names)
for g in series:
    if len(g.findall(ns + "polyline")) != 1 or len(g.findall(ns + "circle")) != len(workers):
        fail("series %s: %d polylines, %d markers" % (g.get("data-layout"), len(g.findall(ns + "polyline")),
                                                       len(g.findall(ns + "circle"))))
texts = "".join(t.text or "" for t in root.iter(ns + "text"))
for want_text in ("images/s", "decode workers", "loaderbench"):
    if want_text not in texts:
        fail("SVG lacks the text %r" % want_text)
print("ok: %d points, verdict: %s" % (len(pts), d["verdict"].splitlines()[0]))
EOF

# the second run reuses the cached sample (no synthesis, no packing)
"$LOADERBENCH" --cache-dir "$tmp/cache" "${extra[@]}" --layouts shards-direct --workers 1 --seconds 0.5 \
    >"$tmp/stdout2" 2>"$tmp/stderr2" || { echo "FAIL: second run"; cat "$tmp/stderr2"; exit 1; }
if grep -qE "synthesised|packed" "$tmp/stderr2"; then
    echo "FAIL: the second run rebuilt the cached sample"; cat "$tmp/stderr2"; exit 1
fi
echo "PASS"
