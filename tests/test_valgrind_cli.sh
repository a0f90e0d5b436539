#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The CLI tools under valgrind's memcheck: `stoker pack` (with a file it skips), info, ls, get,
# verify (--decode, and on a copy with a damaged payload: exit 3) and loaderbench (both
# shard read paths, 1 and 2 workers) on a small generated ImageFolder: no invalid access, no
# use of uninitialised memory, no leak (--leak-check=full; valgrind's own exit code 99 tells its
# findings from the tools' exit codes). The normal build only: the sanitizer builds have their
# own checkers, and the Release builds run the same code paths.
# stk-test: normal-only
. "$(dirname "$0")/cli_util.sh"
command -v valgrind >/dev/null || { echo "skip: no valgrind (Debian: valgrind)"; exit 77; }
[ -n "${LOADERBENCH:-}" ] && [ -x "$LOADERBENCH" ] || { echo "skip: LOADERBENCH not set"; exit 77; }
[ -z "${STOKER_SANITIZE:-}" ] || { echo "skip: a sanitizer build"; exit 77; }
# The reader's pread pool, not io_uring: under valgrind 3.19 a thread blocked in io_uring_enter
# keeps valgrind's one-thread-at-a-time lock (the other threads were seen waiting for it while
# that thread waited for completions: about 1 run in 7 hung beside two busy loops). io_uring's
# paths are checked by the ASan+UBSan and TSan runs of the suite.
export STOKER_DISABLE_URING=1
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null &&
  { echo "skip: a Release build (the normal build runs this)"; exit 77; }

vg() { # vg WANT_RC cmd...: run under memcheck; fail on a finding or another exit status
    local want=$1; shift
    valgrind -q --error-exitcode=99 --leak-check=full --log-file="$T/vg.log" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" != 99 ] || { cat "$T/vg.log"; fail "valgrind found errors in: $*"; }
    [ "$rc" = "$want" ] || { cat "$T/out" "$T/err"; fail "'$*' exited $rc, want $want"; }
}

"$MK" "$T/src" 3 6 16 120 3 >/dev/null || fail "stk-mkfolder"
: >"$T/src/class_001/empty.jpg"
vg 0 "$STOKER" pack "$T/src" "$T/ds" --threads 2 --quiet
vg 0 "$STOKER" info "$T/ds"
grep -q "^records: *18$" "$T/out" || { cat "$T/out"; fail "info: 18 records (the empty file skipped)"; }
vg 0 "$STOKER" ls "$T/ds"
vg 0 "$STOKER" verify "$T/ds" --decode
vg 0 "$STOKER" get "$T/ds" 3
# record 3's payload found in its shard by its bytes, 4 of them zeroed: verify finds it (exit 3)
cp "$T/out" "$T/r3"
cp -r "$T/ds" "$T/bad"
f=$(ls "$T/bad"/shard-*.lmdb | head -1)
pos=$(/usr/bin/python3 -c "import sys; d=open(sys.argv[1],'rb').read(); p=open(sys.argv[2],'rb').read(); print(d.find(p))" "$f" "$T/r3")
[ "$pos" -gt 0 ] || fail "record 3 in $f"
printf '\x00\x00\x00\x00' | dd of="$f" bs=1 seek=$((pos + 100)) conv=notrunc 2>/dev/null
vg 3 "$STOKER" verify "$T/bad"
vg 0 "$LOADERBENCH" "$T/ds" --workers 1,2 --layouts shards-buffered,lmdb-mmap --epochs 1 --size 32 \
    --batch-size 4 --device cpu --quiet --cache-dir "$T/cache"
echo "test_valgrind_cli: pack, info, ls, get, verify, loaderbench clean under memcheck"
