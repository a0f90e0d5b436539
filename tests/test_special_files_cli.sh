#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Special files among the sources: an ImageFolder holding a FIFO x.JPEG, a socket s.jpg, a
# symlink z.jpg to /dev/zero (and a directory y.jpg, walked as torchvision walks it). `stoker
# pack` finishes (it used to wait for ever on the FIFO), packs every regular image, skips and
# names each special file with its kind in pack-report.tsv, on stderr and in the skipped count;
# a list file naming the FIFO, the socket and a directory does the same; `stoker verify` on the
# folder (the files layout) and with --decode lists the three as bad records, with the reason,
# instead of hanging. Every command runs under `timeout`: a hang fails the test.
. "$(dirname "$0")/cli_util.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: no $PY (binds the socket)"; exit 77; }
[ -c /dev/zero ] || { echo "skip: no /dev/zero"; exit 77; }

src="$T/src"
"$MK" "$src" 2 3 16 48 0 >/dev/null || fail "stk-mkfolder"
c0="$src/class_000"
mkfifo "$c0/x.JPEG" || fail "mkfifo"
"$PY" -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$c0/s.jpg" || fail "socket"
[ -S "$c0/s.jpg" ] || fail "no socket at $c0/s.jpg"
ln -s /dev/zero "$c0/z.jpg"
mkdir "$c0/y.jpg"
cp "$(find "$src/class_001" -name '*.jpg' | sort | head -1)" "$c0/y.jpg/inner.jpg"
# regular images: 6 generated + y.jpg/inner.jpg (torchvision walks the directory y.jpg)
good=7

to() { timeout 60 "$@"; }
expect_rc 0 to "$STOKER" pack "$src" "$T/ds" --threads 2
grep -q "packed $good records (2 classes)" "$T/out" || { cat "$T/out" "$T/err"; fail "$good records packed"; }
grep -q "skipped 3 files that cannot be packed" "$T/out" || { cat "$T/out"; fail "3 skipped in the summary"; }
rep="$T/ds/pack-report.tsv"
grep -qF "$c0/x.JPEG	not a regular file: FIFO" "$rep" || { cat "$rep"; fail "report names the FIFO"; }
grep -qF "$c0/s.jpg	not a regular file: socket" "$rep" || { cat "$rep"; fail "report names the socket"; }
grep -qF "$c0/z.jpg	not a regular file: character device" "$rep" || { cat "$rep"; fail "report names /dev/zero"; }
[ "$(grep -c . "$rep")" = 3 ] || { cat "$rep"; fail "3 lines in the report"; }
grep -qF "skipped $c0/x.JPEG: not a regular file: FIFO" "$T/err" || { cat "$T/err"; fail "stderr names the FIFO"; }
expect_rc 0 to "$STOKER" ls "$T/ds"
grep -q "y.jpg/inner.jpg" "$T/out" || { cat "$T/out"; fail "the directory y.jpg is walked"; }

# a list file naming them (and the directory itself)
{
    find "$src/class_001" -name '*.jpg' | sort | sed 's/$/\t1/'
    printf '%s\t0\n' "$c0/x.JPEG" "$c0/s.jpg" "$c0/z.jpg" "$c0/y.jpg"
} >"$T/list.txt"
expect_rc 0 to "$STOKER" pack "$T/list.txt" "$T/ds2"
grep -q "packed 3 records" "$T/out" || { cat "$T/out" "$T/err"; fail "3 records packed from the list"; }
grep -qF "$c0/x.JPEG	not a regular file: FIFO" "$T/ds2/pack-report.tsv" || fail "list: the FIFO"
grep -qF "$c0/y.jpg	not a regular file: directory" "$T/ds2/pack-report.tsv" || { cat "$T/ds2/pack-report.tsv"; fail "list: the directory"; }

# verify on the folder itself (the files layout): 3 bad records, named, no hang
for dec in "" --decode; do
    expect_rc 3 to "$STOKER" verify "$src" $dec
    grep -q "10 records, 3 bad" "$T/out" || { cat "$T/out" "$T/err"; fail "verify $dec: 3 of 10 bad"; }
    grep -qP "^BAD\t\d+\t$c0/x.JPEG\t.*not a regular file: FIFO" "$T/out" || { cat "$T/out"; fail "verify $dec: the FIFO"; }
    grep -qP "^BAD\t\d+\t$c0/s.jpg\t.*not a regular file: socket" "$T/out" || { cat "$T/out"; fail "verify $dec: the socket"; }
    grep -qP "^BAD\t\d+\t$c0/z.jpg\t.*not a regular file: character device" "$T/out" || { cat "$T/out"; fail "verify $dec: /dev/zero"; }
done
echo "test_special_files_cli: ok"
