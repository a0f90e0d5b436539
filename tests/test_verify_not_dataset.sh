#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker verify` and `stoker info` on a folder that is no dataset (the parent of a dataset
# folder, /etc) exit 5 with a message, instead of "0 records, 0 bad" and 0; a report that cannot
# be written (stdout on /dev/full) fails the command.
. "$(dirname "$0")/cli_util.sh"
"$MK" "$T/src" 2 3 32 48 7 >/dev/null || fail "stk-mkfolder"
expect_rc 0 "$STOKER" pack "$T/src" "$T/parent/ds" --quiet

for cmd in verify info; do
    expect_rc 5 "$STOKER" $cmd "$T/parent"
    grep -q "$T/parent: not a dataset" "$T/err" || { cat "$T/err"; fail "$cmd: message"; }
    grep -q "$T/parent/ds holds shards: give that folder" "$T/err" || { cat "$T/err"; fail "$cmd: names the dataset below"; }
    [ ! -s "$T/out" ] || { cat "$T/out"; fail "$cmd: printed a report for no dataset"; }
    expect_rc 5 "$STOKER" $cmd /etc
    grep -q "/etc: not a dataset" "$T/err" || { cat "$T/err"; fail "$cmd /etc: message"; }
    # the dataset itself: as before
    expect_rc 0 "$STOKER" $cmd "$T/parent/ds"
done

# stdout that cannot be written: exit 1 (not 0), the reason on stderr
if [ -w /dev/full ]; then
    for cmd in "verify $T/parent/ds" "verify $T/parent/ds --decode" "info $T/parent/ds" "ls $T/parent/ds" "--help"; do
        # shellcheck disable=SC2086
        "$STOKER" $cmd >/dev/full 2>"$T/err"; rc=$?
        [ "$rc" = 1 ] || { cat "$T/err"; fail "stoker $cmd >/dev/full exited $rc, want 1"; }
        grep -q "No space left on device" "$T/err" || { cat "$T/err"; fail "stoker $cmd >/dev/full: reason"; }
    done
    # loaderbench's table on stdout is its report too
    if [ -n "${LOADERBENCH:-}" ] && [ -x "$LOADERBENCH" ]; then
        "$LOADERBENCH" "$T/parent/ds" --seconds 0.2 --workers 1 >/dev/full 2>"$T/err"; rc=$?
        [ "$rc" = 1 ] || { cat "$T/err"; fail "loaderbench >/dev/full exited $rc, want 1"; }
        grep -q "cannot write the report to standard output: No space left on device" "$T/err" ||
            { cat "$T/err"; fail "loaderbench >/dev/full: reason"; }
    fi
else
    echo "no writable /dev/full: the write-failure part is not run"
fi
echo ok
