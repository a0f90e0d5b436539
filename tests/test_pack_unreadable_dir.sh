#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A class folder pack cannot read (mode 000) is listed in pack-report.tsv and counted in the
# summary (it used to become an empty class: exit 0, "3 classes", nothing reported); --strict
# fails naming it. The permission only binds an unprivileged user and the tests run as root, so
# the packs run as `nobody` (setpriv); the test skips (77) where privileges cannot be dropped or
# `nobody` cannot run the build's stoker.
. "$(dirname "$0")/cli_util.sh"
unprivileged_workdir
"$MK" "$W/src" 3 4 16 48 9 >/dev/null || fail "stk-mkfolder"
chmod -R a+rX "$W/src"
chmod 000 "$W/src/class_001"
as_user ls "$W/src/class_001" >/dev/null 2>&1 && { echo "skip: mode 000 does not bind the unprivileged user here"; exit 77; }

as_user "$STOKER" pack "$W/src" "$W/ds" >"$T/out" 2>"$T/err"; rc=$?
[ "$rc" = 0 ] || { cat "$T/out" "$T/err"; fail "pack exited $rc"; }
grep -qxF "$W/src/class_001	unreadable directory: Permission denied (the images in it are not packed)" "$W/ds/pack-report.tsv" ||
    { cat "$W/ds/pack-report.tsv"; fail "the folder is listed"; }
grep -q "packed 8 records (3 classes)" "$T/out" || { cat "$T/out"; fail "8 records, 3 classes"; }
grep -q "skipped 1 file that cannot be packed" "$T/out" || { cat "$T/out"; fail "the summary counts it"; }
grep -qF "skipped $W/src/class_001: unreadable directory" "$T/err" || { cat "$T/err"; fail "stderr names it"; }
# the labels of the other classes do not move
as_user "$STOKER" ls "$W/ds" >"$T/ls" || fail "ls"
[ "$(cut -f3 "$T/ls" | tr '\n' ' ')" = "0 0 0 0 2 2 2 2 " ] || { cat "$T/ls"; fail "labels"; }

as_user "$STOKER" pack "$W/src" "$W/ds2" --strict >"$T/out" 2>"$T/err"; rc=$?
[ "$rc" = 1 ] || { cat "$T/out" "$T/err"; fail "--strict exited $rc, want 1"; }
grep -qF "$W/src/class_001: unreadable directory: Permission denied" "$T/err" || { cat "$T/err"; fail "--strict names it"; }
chmod 755 "$W/src/class_001"
echo ok
