# SPDX-License-Identifier: MIT
"""The ctypes mirror of stoker.h matches the C compiler's layout; library lookup, version check,
install, the source-checkout lookup work (pip install: tests/test_wheel.sh)."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import PKG_DIR, REPO, SUBPROCESS_ENV

STRUCTS = {
    "stk_batch": "Batch",
    "stk_stats": "Stats",
    "stk_stage_stats": "StageStats",
    "stk_record_error": "RecordError",
    "stk_dataset_info": "DatasetInfo",
    "stk_record_info": "RecordInfo",
    "stk_pack_options": "PackOptions",
    "stk_pack_progress": "PackProgress",
    "stk_pack_result": "PackResult",
    "stk_decode_args": "DecodeArgs",
    "stk_cpu_budget": "CpuBudget",
    "stk_verdict": "Verdict",
    "stk_pack_ext_options": "PackExtOptions",
    "stk_target_info": "TargetInfo",
}


def _c_layout(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to compare struct layouts with")
    from stoker import _lib
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "stoker.h"', "int main(void) {"]
    for cname, pyname in STRUCTS.items():
        cls = getattr(_lib, pyname)
        lines.append('printf("sizeof %s %%zu\\n", sizeof(%s));' % (cname, cname))
        for field, _t in cls._fields_:
            lines.append('printf("field %s %s %%zu\\n", offsetof(%s, %s));'
                         % (cname, field, cname, field))
    # the status codes and parameter keys the binding hard-codes
    for name in dir(_lib):
        if not isinstance(getattr(_lib, name), int):
            continue
        if name.startswith(("STK_E_", "P_", "BOTTLENECK_", "VERDICT_", "TDT_", "TARGET_", "AUG_")) or name in ("STK_OK", "STK_END", "STK_TIMEOUT"):
            cname = name if name.startswith("STK_") else "STK_" + name
            lines.append('printf("const %s %%d\\n", (int)%s);' % (name, cname))
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def test_struct_layouts_and_constants_match_the_header(tmp_path, stoker_mod):
    import ctypes
    from stoker import _lib
    checked = 0
    for line in _c_layout(tmp_path):
        parts = line.split()
        if parts[0] == "const":
            assert getattr(_lib, parts[1]) == int(parts[2]), line
        elif parts[0] == "sizeof":
            cls = getattr(_lib, STRUCTS[parts[1]])
            assert ctypes.sizeof(cls) == int(parts[2]), line
        else:
            cls = getattr(_lib, STRUCTS[parts[1]])
            assert getattr(cls, parts[2]).offset == int(parts[3]), line
        checked += 1
    assert checked > 150


def test_stats_keeps_its_size_when_fields_take_reserved_words(stoker_mod):
    """stk_stats is filled by the library into the caller's struct: a field added in a release
    takes reserved words at the end, so a caller built against 0.3's header (552 bytes on
    LP64, reserved at 504) still passes a buffer of the right size (0.4's reserved[4] at 520 holds
    the fetch fields since 0.5)."""
    import ctypes
    from stoker import _lib
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("sizes pinned for LP64")
    assert ctypes.sizeof(_lib.Stats) == 552
    assert _lib.Stats.augment_s.offset == 504          # 0.3's reserved[0]
    assert _lib.Stats.augment_items.offset == 512      # 0.3's reserved[1]
    # 0.5: the fetch fields took 0.4's reserved[4] (520..552), nothing is left after them
    assert _lib.Stats.fetch_bytes.offset == 520 and _lib.Stats.fetch_busy_s.offset == 528
    assert _lib.Stats.fetch_starved_s.offset == 536
    assert _lib.Stats.cache_hits.offset == 544 and _lib.Stats.cache_misses.offset == 548
    assert _lib.Stats.cache_misses.offset + _lib.Stats.cache_misses.size == 552


def test_version_and_symbols(stoker_mod):
    from stoker import _lib
    lib = _lib.get()
    assert lib.missing == [], "symbols the binding declares but the library lacks"
    assert stoker_mod.__version__.startswith("%d.%d." % (_lib.EXPECTED_MAJOR, _lib.EXPECTED_MINOR))
    assert stoker_mod.version_string().startswith(stoker_mod.__version__)
    assert "CRC32C" in stoker_mod.strerror(_lib.STK_E_CRC)


def _run(code, env=None, cwd=None):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env or SUBPROCESS_ENV,
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_version_mismatch_is_a_clear_import_error():
    r = _run("""
        import stoker._lib as L
        L._lib = None
        L.EXPECTED_MINOR = 99
        try:
            L.get()
        except ImportError as e:
            print("ERR", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "ERR stoker: version mismatch" in r.stdout and "0.99" in r.stdout, r.stdout


def test_bad_stoker_library_is_a_clear_import_error(tmp_path):
    env = dict(SUBPROCESS_ENV, STOKER_LIBRARY=str(tmp_path / "nope.so"))
    r = _run("import stoker", env=env)
    assert r.returncode != 0
    assert "cannot load STOKER_LIBRARY=" in r.stderr and "nope.so" in r.stderr, r.stderr


def test_errors_carry_the_library_message(tmp_path, stoker_mod):
    missing = str(tmp_path / "no-such-dataset")
    with pytest.raises(stoker_mod.StokerError) as ei:
        stoker_mod.info(missing)
    assert "no-such-dataset" in str(ei.value)
    assert ei.value.status < 0 and ei.value.status_name
    with pytest.raises(stoker_mod.StokerError) as ei:
        stoker_mod.Loader(missing, 4)
    assert "no-such-dataset" in str(ei.value)
    with pytest.raises(ValueError):
        stoker_mod.Loader(missing, 0)
    with pytest.raises(ValueError):
        stoker_mod.Loader(missing, 4, dtype="int64")
    with pytest.raises(ValueError):
        stoker_mod.Loader(missing, 4, mean=(0.5, 0.5, 0.5))   # uint8 output takes no mean


def _build_dir():
    lib = os.environ.get("STOKER_LIBRARY", "")
    d = os.environ.get("BUILD_DIR") or os.path.dirname(lib)
    if not d or not os.path.exists(os.path.join(d, "cmake_install.cmake")):
        pytest.skip("no CMake build directory (BUILD_DIR) to install from")
    return d


def test_import_after_cmake_install(tmp_path):
    build = _build_dir()
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    site = prefix / "lib" / "python3" / "dist-packages"
    assert (site / "stoker" / "__init__.py").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("STOKER_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = _run("import stoker; print(stoker.library_path); print(stoker.__file__)", env=env,
             cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lib_path, pkg_file = r.stdout.split()
    assert lib_path.startswith(str(prefix)), lib_path      # found through the prefix
    assert pkg_file.startswith(str(site)), pkg_file


def test_source_checkout_finds_build_dir(tmp_path):
    """PYTHONPATH=<checkout>/bindings/python alone (the README's line) finds <checkout>/build."""
    built = os.path.join(REPO, "build", "libstoker.so")
    if not os.path.exists(built):
        pytest.skip("no %s (the README's build) in this checkout" % built)
    env = {k: v for k, v in os.environ.items() if k not in ("STOKER_LIBRARY", "PYTHONPATH",
                                                             "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = PKG_DIR
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = _run("import stoker; print(stoker.library_path)", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert os.path.realpath(r.stdout.strip()) == os.path.realpath(built), r.stdout
