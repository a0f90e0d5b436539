#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A class folder that cannot be listed (mode 000, as an unprivileged user) in an ImageFolder read
# directly (no pack): opening it fails, naming the folder and the cause, in `stoker info` and in
# stoker.Loader (it used to be an empty class in silence: the loader delivered the other classes'
# images and never said one folder's were missing). The permission only binds an unprivileged
# user and the tests run as root, so the commands run as `nobody` (setpriv), as in
# test_pack_unreadable_dir.sh; the test skips (77) where privileges cannot be dropped.
. "$(dirname "$0")/cli_util.sh"
unprivileged_workdir
"$MK" "$W/src" 3 4 16 48 9 >/dev/null || fail "stk-mkfolder"
chmod -R a+rX "$W/src"
# readable: the folder opens, 12 images in 3 classes
as_user "$STOKER" info "$W/src" >"$T/out" 2>"$T/err" || { cat "$T/out" "$T/err"; fail "info on the readable folder"; }
chmod 000 "$W/src/class_001"
as_user ls "$W/src/class_001" >/dev/null 2>&1 && { echo "skip: mode 000 does not bind the unprivileged user here"; exit 77; }

as_user "$STOKER" info "$W/src" >"$T/out" 2>"$T/err"; rc=$?
[ "$rc" != 0 ] || { cat "$T/out" "$T/err"; fail "info on a folder with an unreadable class exited 0"; }
grep -qF "$W/src/class_001: unreadable directory: Permission denied; its images would be left out" "$T/err" ||
    { cat "$T/out" "$T/err"; fail "info names the folder and the cause"; }

PY=${STOKER_TEST_PYTHON:-/usr/bin/python3}
# (the sanitizer builds run no Python host: it would need their runtime preloaded)
export PYTHONPATH="${SRC_DIR:-}/bindings/python" PYTHONDONTWRITEBYTECODE=1
if [ -z "${STOKER_SANITIZE:-}" ] && [ -x "$PY" ] && [ -n "${SRC_DIR:-}" ] && as_user "$PY" -c "import numpy, stoker" 2>/dev/null; then
    as_user "$PY" - "$W/src" >"$T/py" 2>&1 <<'PYEOF' || { cat "$T/py"; fail "stoker.Loader"; }
import sys
import stoker
try:
    loader = stoker.Loader(sys.argv[1], 4, size=16)
    n = sum(len(b[1]) for b in loader)
    raise SystemExit("stoker.Loader read %d images and raised nothing" % n)
except stoker.StokerError as e:
    want = sys.argv[1] + "/class_001: unreadable directory: Permission denied"
    assert want in str(e), str(e)
    print("raised:", e)
PYEOF
    cat "$T/py"
else
    echo "note: the stoker.Loader case not run (sanitizer build, or no Python with numpy that the unprivileged user can run)"
fi
chmod 755 "$W/src/class_001"
echo ok
