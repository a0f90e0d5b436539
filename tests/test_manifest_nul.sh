#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A NUL byte in any field of any manifest format is a bad line, listed with its line number: it
# used to cut the text, so `img.jpg\0/etc/passwd` packed as img.jpg (and `1\0x` as label 1).
. "$(dirname "$0")/cli_util.sh"
"$MK" "$T/src" 1 2 16 32 5 >/dev/null || fail "stk-mkfolder"
mapfile -t imgs < <(cd "$T/src" && find . -name '*.jpg' | sort | sed 's|^\./|src/|')
a=${imgs[0]} b=${imgs[1]}

check() { # check NAME MANIFEST LINE [pack options]: LINE is bad for a NUL, the other record packs
    local name=$1 m=$2 line=$3; shift 3
    expect_rc 0 "$STOKER" pack "$m" "$T/ds-$name" --quiet "$@"
    grep -qE "^$m line $line	NUL byte" "$T/ds-$name/pack-report.tsv" || { cat -A "$T/ds-$name/pack-report.tsv"; fail "$name: line $line"; }
    expect_rc 0 "$STOKER" ls "$T/ds-$name"
    [ "$(wc -l <"$T/out")" = 1 ] || { cat "$T/out"; fail "$name: one record"; }
    grep -q "($b)$" "$T/out" || { cat "$T/out"; fail "$name: the good record"; }
}
printf 'path,label\n%s\0/etc/passwd,0\n%s,0\n' "$a" "$b" >"$T/path.csv"; check csv-path "$T/path.csv" 2
printf 'path,label\n%s,0\n%s,1\0x\n' "$b" "$a" >"$T/label.csv"; check csv-label "$T/label.csv" 3
printf 'path,label,note\n%s,0,a\0b\n%s,0,ok\n' "$a" "$b" >"$T/note.csv"; check csv-other "$T/note.csv" 2
printf 'path\tlabel\n%s\0x\t0\n%s\t0\n' "$a" "$b" >"$T/p.tsv"; check tsv-path "$T/p.tsv" 2 --format tsv
printf 'path\tlabel\n%s\t0\n%s\t0\0\n' "$b" "$a" >"$T/l.tsv"; check tsv-label "$T/l.tsv" 3 --format tsv
printf '{"path": "%s\\u0000/etc/passwd", "label": 0}\n{"path": "%s", "label": 0}\n' "$a" "$b" >"$T/p.jsonl"; check jsonl-path "$T/p.jsonl" 1
printf '{"path": "%s", "label": 0}\n{"path": "%s", "label": "c\\u0000d"}\n' "$b" "$a" >"$T/l.jsonl"; check jsonl-label "$T/l.jsonl" 2 --labels names
printf '{"path": "%s", "label": 0, "x": ["\\u0000"]}\n{"path": "%s", "label": 0}\n' "$a" "$b" >"$T/o.jsonl"; check jsonl-other "$T/o.jsonl" 1
printf '%s\0/etc/passwd\t0\n%s\t0\n' "$a" "$b" >"$T/p.txt"; check list-path "$T/p.txt" 1
printf '%s\t0\n%s\t1\0x\n' "$b" "$a" >"$T/l.txt"; check list-label "$T/l.txt" 2
echo ok
