#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack MANIFEST` from the command line: a CSV with a bad line, a missing file and an
# unknown class packs the rest (exit 0), names each on stderr and in pack-report.tsv with its
# manifest line; --strict exits 1 naming the first bad line; `stoker info` shows the targets;
# bad manifest options are usage errors (exit 2); a JSON Lines label-list manifest.
. "$(dirname "$0")/cli_util.sh"

"$MK" "$T/src" 2 4 16 64 0 >/dev/null || fail "stk-mkfolder"
mapfile -t imgs < <(cd "$T/src" && find . -name '*.jpg' | sort | sed 's|^\./|src/|')
[ "${#imgs[@]}" = 8 ] || fail "want 8 images, got ${#imgs[@]}"
printf 'cat\ndog\nowl\n' >"$T/classes.txt"
{
    echo "path,label,box"
    for i in 0 1 2 3 4; do echo "${imgs[$i]},dog,$i 0.5 1 2"; done
    echo "${imgs[5]},zebra,1 2 3 4"        # line 7: unknown class
    echo "missing.jpg,cat,1 2 3 4"         # line 8: no such file
    echo "${imgs[6]},cat,1 2"              # line 9: two values
    echo "${imgs[7]},owl,\"9,5 1 2 3\""     # line 10: not a number (a quoted cell)
} >"$T/train.csv"

expect_rc 0 "$STOKER" pack "$T/train.csv" "$T/ds" --classes "$T/classes.txt" --target-field box
grep -q "packed 5 records (3 classes)" "$T/out" || { cat "$T/out"; fail "5 records packed"; }
grep -q "set aside 3 manifest lines" "$T/out" || fail "summary counts the bad lines"
grep -q "targets: float32 x 4 values per record" "$T/out" || fail "summary shows the targets"
rep="$T/ds/pack-report.tsv"
grep -qF "$T/train.csv line 7	unknown class \`zebra\` (not in $T/classes.txt)" "$rep" || { cat "$rep"; fail "line 7"; }
grep -qF "$T/train.csv line 9	2 values, but the first record has 4" "$rep" || fail "line 9"
grep -qF "$T/train.csv line 10	field \`box\`: \`9,5 1 2 3\` is not a number" "$rep" || fail "line 10"
grep -qF "$T/missing.jpg	unreadable: No such file or directory ($T/train.csv line 8)" "$rep" || fail "line 8"
grep -qF "skipped $T/train.csv line 7: unknown class" "$T/err" || fail "stderr names line 7"
expect_rc 0 "$STOKER" info "$T/ds"
grep -q "targets: *float32 x 4 values per record" "$T/out" || fail "info shows the targets"
grep -q "classes: *3 (cat, dog, owl)" "$T/out" || fail "info shows the classes"

expect_rc 1 "$STOKER" pack "$T/train.csv" "$T/ds2" --classes "$T/classes.txt" --target-field box --strict
grep -qF "$T/train.csv line 7: unknown class \`zebra\`" "$T/err" || { cat "$T/err"; fail "--strict names line 7"; }
[ -e "$T/ds2/.stoker-pack-incomplete" ] || [ ! -e "$T/ds2" ] || fail "--strict leaves no finished dataset"

expect_rc 2 "$STOKER" pack "$T/train.csv" "$T/ds3" --target-type float16
expect_rc 2 "$STOKER" pack "$T/train.csv" "$T/ds3" --path-field
expect_rc 1 "$STOKER" pack "$T/train.csv" "$T/ds3" --path-field file
grep -q "no column \`file\`" "$T/err" || fail "missing path column named"
expect_rc 1 "$STOKER" pack "$T/train.csv" "$T/ds3" --multi-label --target-field box
grep -q "not both" "$T/err" || fail "multi-label with values refused"

{
    for i in 0 1 2; do printf '{"path": "%s", "label": ["dog", "cat"]}\n' "${imgs[$i]}"; done
    printf '{"path": "%s", "label": []}\n' "${imgs[3]}"
} >"$T/ml.jsonl"
expect_rc 0 "$STOKER" pack "$T/ml.jsonl" "$T/ml" --multi-label
grep -q "targets: label lists of up to 2 (int32, -1 padded) over 2 classes" "$T/out" || { cat "$T/out"; fail "label lists"; }
echo ok
