#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack` into a filesystem too small for the dataset (a 20 MiB tmpfs, then a 24 MiB ext4
# loop image): exit 1 with a message naming the shard and the bytes it needs (no SIGBUS from a
# store through the shard's map), the incomplete-marker left; the same command after the
# filesystem has grown resumes and finishes, and every record equals its source file, each
# source exactly once. With under 4 MiB free when the first shard starts (its first reservation
# fails), no temp shard is left behind either. Needs root (mount); skips (77) saying why when a
# mount is refused.
set -u
[ -n "${STOKER:-}" ] && [ -x "$STOKER" ] || { echo "skip: STOKER not set"; exit 77; }
MK="$TEST_TOOLS_DIR/stk-mkfolder"
[ -x "$MK" ] || { echo "skip: $MK missing"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: needs root to mount a small tmpfs"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-enospc.XXXXXX")
M="$T/mnt"
mkdir -p "$M"
cleanup() { mountpoint -q "$M" && umount "$M"; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# about 45 MB of JPEGs: more than the small filesystems hold
"$MK" "$T/src" 2 100 600 900 5 >/dev/null || fail "stk-mkfolder"
printf 'not a jpeg' >"$T/src/class_001/zz_bad.jpg"

# DST full: pack fails cleanly; then the filesystem grows (GROW = a command) and the same pack
# resumes. $1 = a name for the messages.
full_then_resume() {
    local what=$1 grow=$2
    "$STOKER" pack "$T/src" "$M/ds" --shard-size 4M --quiet >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = 1 ] || { cat "$T/err"; fail "$what: pack into a full filesystem exited $rc, not 1"; }
    grep -q "shard-[0-9]*\.lmdb\.tmp: cannot reserve disk space: the shard needs [0-9]* bytes" "$T/err" ||
        { cat "$T/err"; fail "$what: message names the shard and the bytes it needs"; }
    grep -q "No space left on device" "$T/err" || { cat "$T/err"; fail "$what: message says ENOSPC"; }
    [ -e "$M/ds/.stoker-pack-incomplete" ] || fail "$what: incomplete-marker left"
    ls "$M/ds" | grep -q '\.tmp$' && fail "$what: temp shard left behind"
    "$STOKER" verify "$M/ds" >/dev/null 2>&1 && fail "$what: verify accepted the interrupted pack"
    echo "$what: $(cat "$T/err")"

    eval "$grow" || fail "$what: cannot grow the filesystem"
    "$STOKER" pack "$T/src" "$M/ds" --shard-size 4M >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "$what: resume"; }
    grep -q "resumed an interrupted pack" "$T/out" || { cat "$T/out"; fail "$what: re-run resumed"; }
    [ ! -e "$M/ds/.stoker-pack-incomplete" ] || fail "$what: marker removed"
    "$STOKER" verify "$M/ds" >"$T/out" || { cat "$T/out"; fail "$what: verify after resume"; }

    # every record = its source file, every source exactly once
    "$STOKER" ls "$M/ds" >"$T/ls" || fail "$what: ls"
    local n=0 idx name src
    : >"$T/seen"
    while IFS=$'\t' read -r idx _ _ _ _ name; do
        src=${name##*(}
        src=${src%)}
        "$STOKER" get "$M/ds" "$idx" -o "$T/rec" || fail "$what: get $idx"
        cmp -s "$T/rec" "$T/src/$src" || fail "$what: record $idx differs from $src"
        echo "$src" >>"$T/seen"
        n=$((n + 1))
    done <"$T/ls"
    local want
    want=$(find "$T/src" -name '*.jpg' ! -name zz_bad.jpg | wc -l)
    [ "$n" = "$want" ] || fail "$what: $n records, $want sources"
    [ "$(sort -u "$T/seen" | wc -l)" = "$want" ] || fail "$what: a source packed twice"
    grep -q "zz_bad.jpg" "$M/ds/pack-report.tsv" || fail "$what: report lists the bad file"
    echo "$what: resumed and verified $n records"
}

if ! mount -t tmpfs -o size=20m stk-enospc "$M" 2>"$T/err"; then
    echo "skip: cannot mount a tmpfs: $(cat "$T/err")"
    exit 77
fi
full_then_resume "tmpfs 20 MiB" 'mount -o remount,size=256m "$M"'
umount "$M"

# under 4 MiB free before the first shard: the pack fails at its first reservation and leaves
# no shard-00000.lmdb.tmp (it used to stay, sparse); with room again the same pack finishes
mount -t tmpfs -o size=20m stk-enospc "$M" || fail "cannot mount the tmpfs again"
head -c $((17 << 20)) /dev/zero >"$M/filler" || fail "filler"
free_kb=$(df -Pk "$M" | awk 'NR==2 {print $4}')
[ "$free_kb" -lt 4096 ] || fail "$free_kb KiB free: the filler should leave under 4 MiB"
timeout 120 "$STOKER" pack "$T/src" "$M/ds" --shard-size 4M --quiet >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || { cat "$T/err"; fail "under 4 MiB: pack exited $rc, not 1"; }
grep -q "shard-00000\.lmdb\.tmp: cannot reserve disk space" "$T/err" || { cat "$T/err"; fail "under 4 MiB: message"; }
left=$(ls -A "$M/ds" | grep '\.tmp$')
[ -z "$left" ] || fail "under 4 MiB: temp file left behind: $left"
echo "under 4 MiB free: $(cat "$T/err")"
rm -f "$M/filler"
mount -o remount,size=256m "$M" || fail "cannot grow the tmpfs"
timeout 120 "$STOKER" pack "$T/src" "$M/ds" --shard-size 4M --quiet >"$T/out" 2>"$T/err" ||
    { cat "$T/err"; fail "under 4 MiB: the pack with room again"; }
timeout 120 "$STOKER" verify "$M/ds" >"$T/out" || { cat "$T/out"; fail "under 4 MiB: verify"; }
umount "$M"

# ext4 on a loop device, when mkfs.ext4 and loop devices work here
if command -v mkfs.ext4 >/dev/null && truncate -s 24M "$T/ext4.img" && mkfs.ext4 -q -F "$T/ext4.img" 2>/dev/null &&
    mount -o loop "$T/ext4.img" "$M" 2>"$T/err"; then
    full_then_resume "ext4 24 MiB" 'umount "$M" && truncate -s 256M "$T/ext4.img" && e2fsck -fp "$T/ext4.img" >/dev/null && resize2fs -f "$T/ext4.img" >/dev/null 2>&1 && mount -o loop "$T/ext4.img" "$M"'
    umount "$M"
else
    echo "ext4 part not run: no mkfs.ext4 or loop device here ($(cat "$T/err" 2>/dev/null))"
fi
echo ok
