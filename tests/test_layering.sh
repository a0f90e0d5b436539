#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The direction of src/ (docs/ARCHITECTURE.md) is enforced by the build: for every pair of
# layers (L, M), a file compiled with L's flags (taken from compile_commands.json) that includes
# one of M's headers compiles if and only if L may depend on M. A wrong-way include fails.
# Also: every source under src/ is compiled (listed in src/CMakeLists.txt, none forgotten).
set -u
[ -n "${BUILD_DIR:-}" ] && [ -f "$BUILD_DIR/compile_commands.json" ] || { echo "skip: no compile_commands.json"; exit 77; }
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
exec "$PY" - "$BUILD_DIR/compile_commands.json" "$SRC_DIR" <<'PYEOF'
import json, os, shlex, subprocess, sys, tempfile
db, src = sys.argv[1], os.path.join(sys.argv[2], "src")
# the allowed direction, as docs/ARCHITECTURE.md draws it
allowed = {
    "core": set(),
    "fetch": {"core"},
    "dataset": {"fetch", "core"},
    "decode": {"core"},
    "stage": {"core"},
    "read": {"dataset", "core"},
    "loader": {"read", "dataset", "decode", "stage", "core"},
    "pack": {"dataset", "decode", "fetch", "core"},
}
layers = sorted(allowed)
on_disk = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
fails = []
if on_disk != layers:
    fails.append(f"src/ folders {on_disk} != layers {layers}")
headers = {l: sorted(f for f in os.listdir(os.path.join(src, l)) if f.endswith(".h")) for l in layers}
cmds, compiled = {}, set()
for e in json.load(open(db)):
    f = os.path.realpath(e["file"])
    compiled.add(f)
    rel = os.path.relpath(f, os.path.realpath(src))
    if rel.startswith("..") or not f.endswith(".c"):
        continue
    layer = rel.split(os.sep)[0]
    cmds.setdefault(layer, e)
for l in layers:
    names = os.listdir(os.path.join(src, l))
    for f in names:
        p = os.path.realpath(os.path.join(src, l, f))
        # an optional backend (X.c) and its stand-in (X_none.c): the build compiles one of them
        alt = f[:-2] + "_none.c" if f.endswith(".c") else None
        if alt in names and os.path.realpath(os.path.join(src, l, alt)) in compiled:
            continue
        if f.endswith((".c", ".cu")) and p not in compiled and not f.endswith("_none.c") and not f.endswith("_stub.c") and not f.endswith(".cu"):
            fails.append(f"src/{l}/{f} is not compiled: list it in src/CMakeLists.txt")
tmp = tempfile.mkdtemp()
checked = 0
for l in layers:
    if l not in cmds:
        fails.append(f"no compile command for layer {l}")
        continue
    e = cmds[l]
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    # drop the output and the source, keep flags; compile a probe instead
    out, keep, skip = [], [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            skip = a != "-c"
            continue
        if os.path.realpath(os.path.join(e["directory"], a)) == os.path.realpath(e["file"]):
            continue
        if a in ("-MD", "-MMD"):
            continue
        keep.append(a)
    for m in layers:
        if not headers[m]:
            continue
        h = headers[m][0]
        probe = os.path.join(tmp, f"probe_{l}_{m}.c")
        with open(probe, "w") as fp:
            fp.write(f'#include "{h}"\nint stk_probe_{l}_{m}(void);\nint stk_probe_{l}_{m}(void) {{ return 0; }}\n')
        r = subprocess.run([args[0], *keep, "-fsyntax-only", probe], cwd=e["directory"],
                           capture_output=True, text=True)
        ok = r.returncode == 0
        want = m == l or m in allowed[l]
        checked += 1
        if ok != want:
            fails.append(f"layer {l} including {m}/{h}: {'compiles' if ok else 'fails'}, "
                         f"expected {'compiles' if want else 'fails'}\n{r.stderr[-400:]}")
        elif not want and "No such file" not in r.stderr and "file not found" not in r.stderr:
            fails.append(f"layer {l} including {m}/{h} failed for another reason:\n{r.stderr[-400:]}")
for f in fails:
    print("FAIL:", f)
print(f"test_layering: {checked} layer pairs checked, {len(fails)} failures")
sys.exit(1 if fails else 0)
PYEOF
