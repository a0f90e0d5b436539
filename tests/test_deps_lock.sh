#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/deps.sh and the dpkg lock. Another process holds /var/lib/dpkg/lock-frontend the way
# apt and dpkg take it (an fcntl lock: flock(1) takes a flock(2) lock, which apt never sees);
# deps.sh, told that an installed package is missing (STK_DEPS_ASSUME_MISSING), must
#   1. say it is waiting (naming the holder), keep waiting while the lock is held, then, once
#      it is released, run apt-get install (which finds nothing new to install) and succeed;
#   2. with a short bound, give up with a clear error (exit 75) while the lock is still held;
#   3. with nothing missing, return at once without touching apt, even while the lock is held.
# stk-test: normal-only (it holds the machine's real dpkg lock for a few seconds)
# stk-test: once (scripts/deps.sh and the dpkg lock: no file of any build tree is involved)
set -u
SRC_DIR=${SRC_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (the dpkg lock file)"; exit 77; }
command -v apt-get >/dev/null && [ -e /var/lib/dpkg/lock-frontend ] || { echo "skip: no apt/dpkg"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: no /usr/bin/python3 (holds the fcntl lock)"; exit 77; }
PKG=pkg-config
dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q "install ok installed" || { echo "skip: $PKG not installed"; exit 77; }
apt-cache policy "$PKG" | grep -q "Candidate: [^(]" || { echo "skip: no package lists (deps.sh would run apt-get update)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-depslock.XXXXXX")
holder=
cleanup() { [ -n "$holder" ] && kill "$holder" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

# hold LOCK for SECONDS; the file READY appears once it is held
hold() {
  rm -f "$T/ready"
  "$PY" -c 'import fcntl, sys, time
f = open("/var/lib/dpkg/lock-frontend", "w")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(float(sys.argv[1]))' "$1" "$T/ready" &
  holder=$!
  for _ in $(seq 3000); do [ -e "$T/ready" ] && return 0; sleep 0.1; done   # hang guard, 300 s
  fail "lock holder did not get the lock (another apt running?)"
}

# 1. waits while the lock is held (however long deps.sh takes to get there: the machine may be
#    loaded), then proceeds once it is released
hold 600
STK_DEPS_ASSUME_MISSING=$PKG STK_DEPS_LOCK_TIMEOUT=300 bash "$SRC_DIR/scripts/deps.sh" run >"$T/wait.log" 2>&1 &
deps=$!
for _ in $(seq 1200); do
  grep -q "waiting for the package manager lock" "$T/wait.log" && break
  kill -0 "$deps" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$deps" 2>/dev/null || { wait "$deps"; fail "deps.sh ended (exit $?) while the lock was held"; }
grep -q "waiting for the package manager lock.*lock-frontend.*held by process $holder" "$T/wait.log" ||
  fail "no waiting message naming the lock and its holder (pid $holder) within 120 s"
sleep 3
kill -0 "$deps" 2>/dev/null || fail "deps.sh did not keep waiting"
kill "$holder"; wait "$holder" 2>/dev/null; holder=
wait "$deps"
rc=$?
[ "$rc" -eq 0 ] || fail "deps.sh exit $rc after the lock was released"
grep -q "installing $PKG" "$T/wait.log" || fail "deps.sh did not go on to install"
grep -q "deps.sh: done" "$T/wait.log" || fail "deps.sh did not finish"
echo "deps.sh waited while the lock was held, then installed nothing new"

# 2. bounded: a lock held longer than the bound is a clear error
#    (the holder keeps the lock 600 s: deps.sh gave up by its bound, not because the lock came
#    free, when the holder is still alive after it returned; no wall-clock bound on the return)
hold 600
STK_DEPS_ASSUME_MISSING=$PKG STK_DEPS_LOCK_TIMEOUT=3 bash "$SRC_DIR/scripts/deps.sh" run >"$T/bound.log" 2>&1
rc=$?
[ "$rc" -eq 75 ] || fail "expected exit 75 when the lock stays held, got $rc"
grep -q "gave up after waiting 3 s" "$T/bound.log" || fail "no clear error after the bound"
grep -q "held by process $holder" "$T/bound.log" || fail "the error does not name the holder (pid $holder)"
kill -0 "$holder" 2>/dev/null || fail "the lock holder ended before deps.sh gave up"

# 3. nothing missing: no apt, no wait, while the lock is still held
bash "$SRC_DIR/scripts/deps.sh" run >"$T/none.log" 2>&1 || fail "deps.sh with nothing missing failed"
[ ! -s "$T/none.log" ] || fail "deps.sh with nothing missing printed: $(cat "$T/none.log")"
kill -0 "$holder" 2>/dev/null || fail "the lock holder ended before check 3"
echo ok
