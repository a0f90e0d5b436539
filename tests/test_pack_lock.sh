#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One pack at a time per DST. Pack A (2000 files) is stopped (SIGSTOP) while it writes DST; pack
# B of another source into the same DST — plain, with --force, and into a DST that B would
# resume — must exit 4 at once naming A's pid, and change nothing: A, continued, exits 0 and
# DST holds exactly the records A says it packed, every one of A's sources. A stale lock file
# (a dead pid in it, no lock held) and the lock file of a pack killed with SIGKILL block
# nothing: the next pack takes the lock, finishes (resuming the killed one) and removes the
# file. Every command runs under `timeout`, so a pack that waits for the lock fails the test
# instead of hanging it.
. "$(dirname "$0")/cli_util.sh"
[ "$(uname)" = Linux ] || { echo "skip: needs Linux (flock, /proc)"; exit 77; }

"$MK" "$T/a" 4 500 64 200 5 >/dev/null || fail "stk-mkfolder a"
"$MK" "$T/b" 3 6 32 64 6 >/dev/null || fail "stk-mkfolder b"
NA=$(find "$T/a" -name '*.jpg' | wc -l)
D="$T/dst/ds" # its parent does not exist either: A creates both
A_PID=
cleanup_a() { [ -n "$A_PID" ] && kill -CONT "$A_PID" 2>/dev/null && kill -KILL "$A_PID" 2>/dev/null; }
trap 'cleanup_a; rm -rf "$T"' EXIT

# start pack A in the background; return once it is writing D (its incomplete-marker is there)
start_a() {
    timeout 600 "$STOKER" pack "$T/a" "$D" --threads 1 --shard-size 1M "$@" >"$T/a.out" 2>"$T/a.err" &
    A_PID=$!
    local i
    for i in $(seq 1 60000); do   # a hang guard (10 min): ends as soon as A writes or dies
        [ -e "$D/.stoker-pack-incomplete" ] && return 0
        kill -0 "$A_PID" 2>/dev/null || break
        sleep 0.01
    done
    cat "$T/a.err"
    fail "pack A never started writing $D"
}
# timeout wraps A, so A_PID is timeout's pid: the packer is its child
packer_pid() { pgrep -P "$A_PID" -x stoker || pgrep -P "$A_PID"; }

# B while A is stopped: exit 4, naming A's pid. A stays stopped (SIGSTOP) until every B has
# returned, so a B that waited for A's lock instead of refusing would wait for ever: the timeout is
# a hang guard (exit 124, not 4), and no wall-clock bound is needed to tell "at once" from "waited"
b_refused() {
    local what=$1; shift
    timeout 300 "$STOKER" pack "$@" "$D" --quiet >"$T/b.out" 2>"$T/b.err"
    local rc=$?
    [ "$rc" = 4 ] || { cat "$T/b.out" "$T/b.err"; fail "$what: the second pack exited $rc, not 4 (DST busy)"; }
    grep -q "is being packed by pid $PACKER" "$T/b.err" || { cat "$T/b.err"; fail "$what: message names pid $PACKER"; }
    [ "$(ps -o stat= -p "$PACKER" | cut -c1)" = T ] || fail "$what: pack A is no longer stopped"
}

# ---- two packs into one DST --------------------------------------------------------------------
start_a
PACKER=$(packer_pid)
[ -n "$PACKER" ] || fail "no packer process under $A_PID"
kill -STOP "$PACKER"
[ -e "$D/.stoker-pack-incomplete" ] || fail "pack A finished before it could be stopped"
b_refused "plain" "$T/b"
b_refused "--force" "$T/b" --force
b_refused "same source (a resume)" "$T/a" --threads 1 --shard-size 1M
kill -CONT "$PACKER"
wait "$A_PID"
rc=$?
A_PID=
[ "$rc" = 0 ] || { cat "$T/a.err"; fail "pack A exited $rc after the refused packs"; }
grep -q "^packed $NA records (4 classes)" "$T/a.out" || { cat "$T/a.out"; fail "pack A's summary"; }
expect_rc 0 "$STOKER" verify "$D"
expect_rc 0 "$STOKER" ls "$D"
[ "$(wc -l <"$T/out")" = "$NA" ] || fail "DST holds $(wc -l <"$T/out") records, pack A said $NA"
# every record is one of A's files (ls names the source: "(class_001/img_00007.jpg)")
sed 's/.*(\(.*\))$/\1/' "$T/out" | sort >"$T/names"
(cd "$T/a" && find . -name '*.jpg' | sed 's|^\./||' | sort) >"$T/want"
cmp -s "$T/names" "$T/want" || fail "DST's records are not A's sources"
[ ! -e "$D/.stoker-pack.lock" ] || fail "the lock file is left after a finished pack"

# ---- a stale lock file: a dead pid in it, nothing holding it --------------------------------------
sh -c 'exit 0' &
DEAD=$!
wait "$DEAD"
mkdir -p "$T/stale"
echo "$DEAD" >"$T/stale/.stoker-pack.lock"
expect_rc 0 timeout 600 "$STOKER" pack "$T/b" "$T/stale" --quiet
[ ! -e "$T/stale/.stoker-pack.lock" ] || fail "stale lock file left"

# ---- a pack killed with SIGKILL: its lock file stays, and blocks nothing --------------------------
rm -rf "$T/dst"
start_a
PACKER=$(packer_pid)
kill -KILL "$PACKER"
wait "$A_PID" 2>/dev/null
A_PID=
[ -e "$D/.stoker-pack.lock" ] || fail "the killed pack left no lock file"
[ "$(cat "$D/.stoker-pack.lock")" = "$PACKER" ] || fail "the lock file holds $(cat "$D/.stoker-pack.lock"), not $PACKER"
expect_rc 0 timeout 600 "$STOKER" pack "$T/a" "$D" --threads 1 --shard-size 1M
grep -q "^packed $NA records" "$T/out" || { cat "$T/out"; fail "pack after the killed one"; }
expect_rc 0 "$STOKER" verify "$D"
[ ! -e "$D/.stoker-pack.lock" ] || fail "lock file left after the resumed pack"
echo ok
