#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `pack --keep-damaged` and `verify --decode` give the same verdict on every record: 120 seeded
# damages of generated JPEGs (cuts, bit flips in the scan, deleted runs, junk before EOI) are
# packed with --keep-damaged; the records the pack lists as kept-damaged are exactly those
# verify --decode calls bad. Junk between the last scan and EOI ("N extraneous bytes before
# marker 0xd9") used to be seen by pack's check only (it reads to EOI; the full decode stopped at
# the last row), so such records passed verify --decode.
. "$(dirname "$0")/cli_util.sh"
"$MK" "$T/base" 1 20 96 320 11 >/dev/null || fail "stk-mkfolder"
mkdir -p "$T/src/c"
/usr/bin/python3 - "$T" <<'PYEOF' || fail "making the damaged files"
import os, random, sys
t = sys.argv[1]
rnd = random.Random(27)
base = t + "/base/class_000"
srcs = sorted(os.path.join(base, f) for f in os.listdir(base))
for k in range(120):
    d = bytearray(open(srcs[k % len(srcs)], "rb").read())
    kind = k % 4
    if kind == 0:
        d = d[: rnd.randint(len(d) // 3, len(d) - 3)]
    elif kind == 1:
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randint(len(d) // 2, len(d) - 3)
            d[i] ^= 1 << rnd.randint(0, 7)
    elif kind == 2:
        i = rnd.randint(len(d) // 2, len(d) - 40)
        del d[i:i + rnd.randint(1, 30)]
    else:
        d = d[:-2] + bytes(rnd.randint(1, 64)) + b"\xff\xd9"
    open("%s/src/c/%03d_%d.jpg" % (t, k, kind), "wb").write(bytes(d))
PYEOF
expect_rc 0 "$STOKER" pack "$T/src" "$T/ds" --keep-damaged --quiet
grep "	kept-damaged: " "$T/ds/pack-report.tsv" | sed 's|^.*/src/c/||; s|	.*||' | sort >"$T/pack"
"$STOKER" verify "$T/ds" --decode >"$T/verify" 2>"$T/err"; rc=$?
[ "$rc" = 3 ] || { cat "$T/err"; fail "verify --decode exited $rc, want 3"; }
grep "^BAD	" "$T/verify" | sed 's|^.*(c/||; s|)	.*||' | sort >"$T/bad"
[ "$(wc -l <"$T/pack")" -ge 40 ] || fail "too few damaged files: $(wc -l <"$T/pack")"
grep -q "extraneous bytes before marker 0xd9" "$T/ds/pack-report.tsv" || fail "no junk-before-EOI case"
diff "$T/pack" "$T/bad" || fail "pack --keep-damaged and verify --decode disagree (< pack only, > verify only)"
echo "ok: $(wc -l <"$T/pack") damaged records, the same verdicts"
