#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack` killed with SIGKILL mid-way, then the same command again: the dataset is
# complete, `stoker verify` passes, and it equals an uninterrupted pack record for record
# (`stoker ls`) and in its pack report. While interrupted, no shard looks complete that is not:
# readers refuse the directory (exit 1, "interrupted pack").
. "$(dirname "$0")/cli_util.sh"

# many 1 MiB shards: 3 classes x 60 JPEGs of 200..480 px
"$MK" "$T/src" 3 60 200 480 21 >/dev/null || fail "stk-mkfolder"
printf 'not a jpeg' >"$T/src/class_001/zz_bad.jpg"
"$STOKER" pack "$T/src" "$T/ref" --shard-size 1M --quiet || fail "reference pack"
nref=$(ls "$T/ref"/shard-*.lmdb | wc -l)
[ "$nref" -ge 5 ] || fail "reference has only $nref shards"

killed=0
for attempt in 1 2 3 4 5; do
    rm -rf "$T/ds"
    "$STOKER" pack "$T/src" "$T/ds" --shard-size 1M --threads 1 --quiet &
    pid=$!
    # SIGKILL as soon as the second shard is complete
    while kill -0 "$pid" 2>/dev/null; do
        if [ -e "$T/ds/shard-00001.lmdb" ]; then
            kill -9 "$pid" 2>/dev/null
            break
        fi
        sleep 0.002
    done
    wait "$pid" 2>/dev/null
    rc=$?
    if [ "$rc" = 137 ] && [ ! -e "$T/ds/shard-$(printf %05d $((nref - 1))).lmdb" ]; then
        killed=1
        break
    fi
done
[ "$killed" = 1 ] || fail "could not kill the pack mid-way"
[ -e "$T/ds/.stoker-pack-incomplete" ] || fail "marker left by the killed pack"
"$STOKER" info "$T/ds" >"$T/out" 2>"$T/err" && fail "info accepted an interrupted pack"
grep -q "interrupted pack" "$T/err" || { cat "$T/err"; fail "message says interrupted pack"; }
"$STOKER" verify "$T/ds" >/dev/null 2>&1 && fail "verify accepted an interrupted pack"

# the same command finishes the job
"$STOKER" pack "$T/src" "$T/ds" --shard-size 1M --threads 1 >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "re-run"; }
grep -q "resumed an interrupted pack" "$T/out" || { cat "$T/out"; fail "re-run says it resumed"; }
[ ! -e "$T/ds/.stoker-pack-incomplete" ] || fail "marker removed"
ls "$T/ds" | grep -q '\.tmp$' && fail "temp files left"
"$STOKER" verify "$T/ds" --decode >"$T/out" || { cat "$T/out"; fail "verify after resume"; }
"$STOKER" ls "$T/ref" >"$T/ls.ref"
"$STOKER" ls "$T/ds" >"$T/ls.ds"
sed "s#$T/ref#X#g" "$T/ls.ref" >"$T/a"; sed "s#$T/ds#X#g" "$T/ls.ds" >"$T/b"
cmp -s "$T/a" "$T/b" || { diff "$T/a" "$T/b" | head; fail "resumed dataset differs from the uninterrupted one"; }
cmp -s "$T/ref/pack-report.tsv" "$T/ds/pack-report.tsv" || fail "pack report differs"
grep -q "zz_bad.jpg" "$T/ds/pack-report.tsv" || fail "report lists the bad file"
echo ok
