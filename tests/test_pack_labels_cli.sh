#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack MANIFEST --labels auto|index|names --max-line BYTES`: among indices 0,1,2,10 a
# `-1` is a bad line named in the report and the rest keep their labels (before: every label
# became a class name, 0,1,2,10 packed as 0,1,3,2, exit 0); a word among numbers fails naming
# both and the --labels choice; --labels names packs them as names; a line over --max-line is a
# bad line; bad values are usage errors; `pack --help` documents both options.
. "$(dirname "$0")/cli_util.sh"

"$MK" "$T/src" 1 5 16 32 0 >/dev/null || fail "stk-mkfolder"
mapfile -t imgs < <(cd "$T/src" && find . -name '*.jpg' | sort | sed 's|^\./|src/|')
[ "${#imgs[@]}" = 5 ] || fail "want 5 images, got ${#imgs[@]}"
labels_of() { "$STOKER" ls "$1" | cut -f3 | sort -n | tr '\n' ' '; }
csv() { # csv LABEL_OF_LINE_4: a manifest at $T/m.csv, lines 2..6 labelled 0 1 X 2 10
    printf 'path,label\n%s,0\n%s,1\n%s,%s\n%s,2\n%s,10\n' "${imgs[0]}" "${imgs[1]}" "${imgs[2]}" "$1" \
        "${imgs[3]}" "${imgs[4]}" >"$T/m.csv"
}

for odd in -1 +3 1.0 99999999999; do
    csv "$odd"
    rm -rf "$T/ds"
    expect_rc 0 "$STOKER" pack "$T/m.csv" "$T/ds"
    [ "$(labels_of "$T/ds")" = "0 1 2 10 " ] || fail "$odd: labels $(labels_of "$T/ds"), want 0 1 2 10"
    grep -qF "$T/m.csv line 4	label \`$odd\` is not a class index 0..2147483647" "$T/ds/pack-report.tsv" ||
        { cat "$T/ds/pack-report.tsv"; fail "$odd: line 4 in the report"; }
done

csv cat
expect_rc 1 "$STOKER" pack "$T/m.csv" "$T/ds2"
grep -q "line 2: \`0\`.*line 4: \`cat\`.*--labels index.*--labels names" "$T/err" || { cat "$T/err"; fail "mixed"; }
expect_rc 0 "$STOKER" pack "$T/m.csv" "$T/ds2" --labels index
[ "$(labels_of "$T/ds2")" = "0 1 2 10 " ] || fail "--labels index: $(labels_of "$T/ds2")"
expect_rc 0 "$STOKER" pack "$T/m.csv" "$T/ds3" --labels names
expect_rc 0 "$STOKER" info "$T/ds3"
grep -q "classes: *5 (0, 1, 10, 2, cat)" "$T/out" || { cat "$T/out"; fail "--labels names"; }
expect_rc 2 "$STOKER" pack "$T/m.csv" "$T/ds4" --labels numbers
expect_rc 2 "$STOKER" pack "$T/m.csv" "$T/ds4" --labels

long=$(head -c 2000 /dev/zero | tr '\0' 'x')
csv "$long"
expect_rc 0 "$STOKER" pack "$T/m.csv" "$T/ds5" --max-line 1K
[ "$(labels_of "$T/ds5")" = "0 1 2 10 " ] || fail "--max-line: $(labels_of "$T/ds5")"
grep -qF "$T/m.csv line 4	the line is longer than 1 KiB" "$T/ds5/pack-report.tsv" || fail "long line reported"
expect_rc 1 "$STOKER" pack "$T/m.csv" "$T/ds6" --max-line 1K --strict
grep -qF "m.csv line 4: the line is longer than 1 KiB" "$T/err" || { cat "$T/err"; fail "--strict names line 4"; }
expect_rc 2 "$STOKER" pack "$T/m.csv" "$T/ds6" --max-line 0
expect_rc 2 "$STOKER" pack "$T/m.csv" "$T/ds6" --max-line lots

expect_rc 0 "$STOKER" pack --help
grep -q -- "--labels MODE" "$T/out" && grep -q -- "--max-line BYTES" "$T/out" || fail "pack --help"
echo ok
