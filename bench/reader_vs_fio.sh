#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# reader_vs_fio.sh — stoker's read stage against fio, LMDB's mdb_get path and small files, cold
# cache, interleaved repeats, medians. The read stage's speed targets:
#   1. whole packed dataset, random order: stoker (io_uring, O_DIRECT, queue depth QD) vs fio
#      (io_uring, O_DIRECT, randread, the same mean block size, queue depth and bytes, same file):
#      target >= 90% of fio's MB/s and CPU-s per GB no worse than fio's;
#   2. a random 10% of the records: stoker vs mdb_get with default readahead and with
#      MDB_NORDAHEAD (file cache dropped with posix_fadvise DONTNEED, checked with mincore):
#      target >= 5x the better mdb_get variant (records/s);
#   3. the same images as small files (open/read/close per record) vs the packed shard.
# The reader is also run with CRC32C verification off (fio checks nothing) to separate the cost
# of reading from the cost of checking.
#
# usage: bench/reader_vs_fio.sh [BUILD_DIR]
# env:   ROUNDS (5), QD (32), SHARDS (/work/data/reader-shards: packed once from FILES with one
#        shard), FILES (/work/data/imagenet-like), OUT (results file, default $SHARDS.results.txt)
# Needs fio and /usr/bin/python3 (for the medians). The disk of these VMs swings from run to run:
# compare only figures from one run; the order of the configurations rotates every round.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${ROUNDS:-5}
QD=${QD:-32}
FILES=${FILES:-/work/data/imagenet-like}
SHARDS=${SHARDS:-/work/data/reader-shards}
OUT=${OUT:-$SHARDS.results.txt}
RB=$BUILD/readbench
MG=$BUILD/mdbget
for t in "$RB" "$MG" "$BUILD/stoker"; do
  [ -x "$t" ] || { echo "missing $t: build first (cmake --build $BUILD)" >&2; exit 1; }
done
command -v fio >/dev/null || { echo "fio not installed" >&2; exit 1; }

if [ ! -f "$SHARDS/shard-00000.lmdb" ]; then
  echo "packing $FILES into $SHARDS (one shard)"
  "$BUILD/stoker" pack "$FILES" "$SHARDS" --shard-size 4G --quiet
fi
SHARD=$SHARDS/shard-00000.lmdb
[ ! -e "$SHARDS/shard-00001.lmdb" ] || { echo "$SHARDS has more than one shard; fio reads one file" >&2; exit 1; }
FSIZE=$(stat -c %s "$SHARD")

# the reader's request sizes, to give fio the same mean block size and total bytes
probe=$("$RB" "$SHARDS" --qd "$QD" --drop)
get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
RECS=$(get records "$probe")
DISK=$(get disk_bytes "$probe")
BS=$(( (DISK / RECS + 2048) / 4096 * 4096 ))
echo "dataset: $RECS records, shard $FSIZE bytes; reader requests $DISK bytes, mean $((DISK / RECS)) -> fio bs $BS, iodepth $QD"

: >"$OUT"
run_fio() {
  local tf json
  tf=$(mktemp) json=$(mktemp)
  /usr/bin/time -f "%U %S" -o "$tf" fio --name=randread --filename="$SHARD" --readonly --ioengine=io_uring \
    --direct=1 --rw=randread --bs="$BS" --iodepth="$QD" --size="$FSIZE" --io_size="$DISK" \
    --invalidate=1 --output-format=json >"$json"
  /usr/bin/python3 - "$json" "$tf" <<'EOF'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
j = job["read"]
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
rt = j["runtime"] / 1000.0
b = j["io_bytes"]
# CPU two ways: the whole fio process (/usr/bin/time: startup and its status thread included) and
# fio's own figure for the job thread alone (usr_cpu + sys_cpu, percent of the job's runtime)
jc = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * job["job_runtime"] / 1000.0
print("tool=fio backend=fio_io_uring records=%d disk_bytes=%d wall_s=%.4f rec_s=%.1f disk_MB_s=%.1f "
      "payload_MB_s=%.1f cpu_s=%.4f cpu_s_per_GB=%.4f job_cpu_s=%.4f job_cpu_s_per_GB=%.4f" % (
      j["total_ios"], b, rt, j["total_ios"] / rt, b / rt / 1e6, b / rt / 1e6, u + s, (u + s) / (b / 1e9),
      jc, jc / (b / 1e9)))
EOF
  rm -f "$tf" "$json"
}

configs=(reader_full fio reader_nocrc reader_10pct mdb_readahead mdb_nordahead files)
run_config() {
  case $1 in
    reader_full)   "$RB" "$SHARDS" --qd "$QD" --drop ;;
    reader_nocrc)  "$RB" "$SHARDS" --qd "$QD" --drop --no-crc ;;
    fio)           run_fio ;;
    reader_10pct)  "$RB" "$SHARDS" --qd "$QD" --fraction 0.1 --drop ;;
    mdb_readahead) "$MG" "$SHARD" --fraction 0.1 --drop ;;
    mdb_nordahead) "$MG" "$SHARD" --fraction 0.1 --drop --nordahead ;;
    files)         "$RB" "$FILES" --layout files --drop ;;
  esac
}

for ((r = 0; r < ROUNDS; r++)); do
  n=${#configs[@]}
  for ((k = 0; k < n; k++)); do
    c=${configs[$(( (k + r) % n ))]}
    line=$(run_config "$c")
    echo "round=$r config=$c $line" | tee -a "$OUT"
  done
done

/usr/bin/python3 - "$OUT" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
    rows.setdefault(kv["config"], []).append(kv)
def med(c, k):
    return statistics.median(float(r[k]) for r in rows[c])
print()
print("medians over %d interleaved rounds" % len(rows["fio"]))
print("%-15s %10s %12s %12s %10s %12s" % ("config", "records/s", "disk MB/s", "payload MB/s", "CPU s", "CPU-s/GB"))
for c in ["reader_full", "fio", "reader_nocrc", "reader_10pct", "mdb_readahead", "mdb_nordahead", "files"]:
    if c in rows:
        print("%-15s %10.0f %12.1f %12.1f %10.3f %12.3f" % (c, med(c, "rec_s"), med(c, "disk_MB_s"),
              med(c, "payload_MB_s"), med(c, "cpu_s"), med(c, "cpu_s_per_GB")))
# ratios per round (side by side), then their median
def ratio(a, b, k):
    return statistics.median(float(x[k]) / float(y[k]) for x, y in zip(rows[a], rows[b]))
print()
print("reader / fio, disk MB/s:            %.2f  (target >= 0.90)" % ratio("reader_full", "fio", "disk_MB_s"))
def ratio_k(a, ka, b, kb):
    return statistics.median(float(x[ka]) / float(y[kb]) for x, y in zip(rows[a], rows[b]))
print("fio CPU-s per GB: whole process %.3f, job thread only %.3f" % (med("fio", "cpu_s_per_GB"), med("fio", "job_cpu_s_per_GB")))
print("reader / fio, CPU-s per GB:         %.2f vs fio's process, %.2f vs fio's job thread  (target <= 1.00;"
      " the reader also CRC32Cs every payload)" % (ratio("reader_full", "fio", "cpu_s_per_GB"),
      ratio_k("reader_full", "cpu_s_per_GB", "fio", "job_cpu_s_per_GB")))
print("reader without CRC / fio, MB/s:      %.2f" % ratio("reader_nocrc", "fio", "disk_MB_s"))
print("reader without CRC / fio, CPU-s/GB:  %.2f vs fio's process, %.2f vs fio's job thread" % (
      ratio("reader_nocrc", "fio", "cpu_s_per_GB"), ratio_k("reader_nocrc", "cpu_s_per_GB", "fio", "job_cpu_s_per_GB")))
best = "mdb_readahead" if med("mdb_readahead", "rec_s") >= med("mdb_nordahead", "rec_s") else "mdb_nordahead"
print("reader 10%% / %s, records/s: %.1f  (target >= 5)" % (best, ratio("reader_10pct", best, "rec_s")))
for m in ["mdb_readahead", "mdb_nordahead"]:
    print("  %s: read amplification %.2f (bytes pulled into the page cache / payload bytes)" %
          (m, med(m, "read_amplification")))
print("reader (shard) / files, records/s:  %.2f" % ratio("reader_full", "files", "rec_s"))
EOF
