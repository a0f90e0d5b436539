#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A manifest line without its label — an empty CSV/TSV cell, JSON Lines `"label": null` or no
# `label` key — is a bad line listed with its line number (before 0.5 it was packed as label -1
# even with --labels index or --strict); --strict fails at it; a manifest with no label field at
# all fails the pack; `--labels none` (asked for) packs unlabelled data with label -1.
. "$(dirname "$0")/cli_util.sh"
"$MK" "$T/src" 2 3 16 48 3 >/dev/null || fail "stk-mkfolder"
mapfile -t imgs < <(cd "$T/src" && find . -name '*.jpg' | sort | sed 's|^\./|src/|')
[ "${#imgs[@]}" = 6 ] || fail "want 6 images"

printf 'path,label\n%s,1\n%s,\n%s,0\n' "${imgs[0]}" "${imgs[1]}" "${imgs[2]}" >"$T/m.csv"
printf 'path\tlabel\n%s\t\n%s\t1\n' "${imgs[0]}" "${imgs[1]}" >"$T/m.tsv"
{
    printf '{"path": "%s", "label": 1}\n' "${imgs[0]}"
    printf '{"path": "%s", "label": null}\n' "${imgs[1]}"
    printf '{"path": "%s"}\n' "${imgs[2]}"
    printf '{"path": "%s", "label": 0}\n' "${imgs[3]}"
} >"$T/m.jsonl"

for mode in auto index; do
    expect_rc 0 "$STOKER" pack "$T/m.csv" "$T/csv-$mode" --labels $mode --quiet
    grep -qxF "$T/m.csv line 3	empty label (column \`label\`); unlabelled data needs --labels none" \
        "$T/csv-$mode/pack-report.tsv" || { cat "$T/csv-$mode/pack-report.tsv"; fail "csv ($mode): line 3"; }
    grep -qF "skipped $T/m.csv line 3: empty label" "$T/err" || { cat "$T/err"; fail "csv ($mode): stderr"; }
    expect_rc 0 "$STOKER" ls "$T/csv-$mode"
    [ "$(cut -f3 "$T/out" | tr '\n' ' ')" = "1 0 " ] || { cat "$T/out"; fail "csv ($mode): labels"; }

    expect_rc 0 "$STOKER" pack "$T/m.tsv" "$T/tsv-$mode" --format tsv --labels $mode --quiet
    grep -qF "$T/m.tsv line 2	empty label" "$T/tsv-$mode/pack-report.tsv" || fail "tsv ($mode): line 2"

    expect_rc 0 "$STOKER" pack "$T/m.jsonl" "$T/jl-$mode" --labels $mode --quiet
    rep="$T/jl-$mode/pack-report.tsv"
    grep -qxF "$T/m.jsonl line 2	null label (field \`label\`); unlabelled data needs --labels none" "$rep" || { cat "$rep"; fail "jsonl ($mode): null"; }
    grep -qxF "$T/m.jsonl line 3	no label (field \`label\`); unlabelled data needs --labels none" "$rep" || { cat "$rep"; fail "jsonl ($mode): missing"; }
    expect_rc 0 "$STOKER" ls "$T/jl-$mode"
    [ "$(cut -f3 "$T/out" | tr '\n' ' ')" = "1 0 " ] || { cat "$T/out"; fail "jsonl ($mode): labels"; }
done
expect_rc 0 "$STOKER" pack "$T/m.csv" "$T/csv-sum"
grep -q "set aside 1 manifest line that cannot be used" "$T/out" || { cat "$T/out"; fail "summary counts it"; }

expect_rc 1 "$STOKER" pack "$T/m.jsonl" "$T/strict" --strict
grep -qF "$T/m.jsonl line 2: null label" "$T/err" || { cat "$T/err"; fail "--strict names line 2"; }

# no label field at all: the pack fails, naming --labels none; with it, label -1 for every record
printf 'path\n%s\n%s\n' "${imgs[4]}" "${imgs[5]}" >"$T/nolabel.csv"
expect_rc 1 "$STOKER" pack "$T/nolabel.csv" "$T/nl"
grep -qF "no record has the label field \`label\`" "$T/err" && grep -qF -- "--labels none" "$T/err" || { cat "$T/err"; fail "no label field"; }
expect_rc 0 "$STOKER" pack "$T/nolabel.csv" "$T/nl" --labels none --quiet
expect_rc 0 "$STOKER" ls "$T/nl"
[ "$(cut -f3 "$T/out" | tr '\n' ' ')" = "-1 -1 " ] || { cat "$T/out"; fail "--labels none: -1"; }
# --labels none does not read the label field: the JSONL packs whole, unlabelled
expect_rc 0 "$STOKER" pack "$T/m.jsonl" "$T/jl-none" --labels none --quiet
[ ! -s "$T/jl-none/pack-report.tsv" ] || { cat "$T/jl-none/pack-report.tsv"; fail "--labels none: no bad line"; }
expect_rc 0 "$STOKER" ls "$T/jl-none"
[ "$(cut -f3 "$T/out" | tr '\n' ' ')" = "-1 -1 -1 -1 " ] || { cat "$T/out"; fail "--labels none: jsonl"; }
echo ok
