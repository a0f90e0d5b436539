# SPDX-License-Identifier: MIT
# Sourced by the CLI tests (test_cli.sh, test_pack_manifest_cli.sh, test_pack_resume.sh): skip without the stoker
# binary or stk-mkfolder, a temp dir $T removed at exit, fail, expect_rc CODE cmd... (stdout and
# stderr to $T/out and $T/err).
set -u
[ -n "${STOKER:-}" ] && [ -x "$STOKER" ] || { echo "skip: STOKER not set"; exit 77; }
MK="$TEST_TOOLS_DIR/stk-mkfolder"
[ -x "$MK" ] || { echo "skip: $MK missing"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect_rc() { # expect_rc CODE cmd...
    local want=$1; shift
    "$@" >"$T/out" 2>"$T/err"; local rc=$?
    [ "$rc" = "$want" ] || { cat "$T/out" "$T/err"; fail "'$*' exited $rc, want $want"; }
}
