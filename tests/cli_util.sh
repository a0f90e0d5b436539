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

unprivileged_workdir() { # as_user CMD runs CMD as `nobody` (as is when not root); W: a folder it can write
    command -v setpriv >/dev/null || { echo "skip: no setpriv"; exit 77; }
    if [ "$(id -u)" = 0 ]; then
        as_user() { setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; }
    else
        as_user() { "$@"; } # already unprivileged: mode 000 binds us
    fi
    as_user "$STOKER" --version >/dev/null 2>&1 || { echo "skip: cannot run $STOKER as an unprivileged user"; exit 77; }
    W="$T/w"
    chmod 0755 "$T" # mktemp -d made it 0700: the unprivileged user must reach $W
    mkdir -m 0777 "$W"
}
