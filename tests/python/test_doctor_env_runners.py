# SPDX-License-Identifier: MIT
"""`stoker doctor -- poetry run python job.py` and `stoker doctor -- uv run ... python job.py`: the
environment managers' runners exec the interpreter with an environment they changed (VIRTUAL_ENV,
PATH) after probing the interpreter with `python -I` of their own; the hook must still reach the
job, and a Python process seen without it (such a probe) must be named with its reason, never the
job.
poetry is Debian's python3-poetry (scripts/deps.sh); uv is on PyPI only, so it is installed once
into a cache directory ($STK_UV_VENV, default ~/.cache/stoker/uv-venv), pinned; without network
and without that cache the uv test is skipped and says why. conda/micromamba are in neither Debian
nor PyPI: not tested (docs/doctor.md). Asserts on what the doctor recorded
(batches, processes hooked or not), never on time.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "doctor_jobs.py")
STOKER = os.environ.get("STOKER") or os.path.join(os.environ.get("BUILD_DIR", "build"), "stoker")
PY = sys.executable
HANG = 1200                         # a guard against a hang, not a time the job must fit in
UV_PIN = "uv==0.13.9"
STEPS = 200

if not os.access(STOKER, os.X_OK):
    pytest.skip("no stoker CLI at %s" % STOKER, allow_module_level=True)


def doctor(tmp_path, cmd, env):
    js = str(tmp_path / "doctor.json")
    p = subprocess.run([STOKER, "doctor", "--json", js, "--"] + cmd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=HANG, env=env)
    assert p.returncode == 0, p.stderr
    with open(js) as f:
        return json.load(f), p.stderr


def python_on_path(tmp_path):
    # `python` on PATH is this interpreter (Debian has no /usr/bin/python); a venv is named by
    # VIRTUAL_ENV, which both runners honour
    b = tmp_path / "bin"
    b.mkdir()
    os.symlink(PY, str(b / "python"))
    env = dict(os.environ, PATH=str(b) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("VIRTUAL_ENV", None)
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    return env


def assert_job_hooked(d, err):
    # the job's batches were all seen (so its interpreter loaded the hook); any Python process
    # without the hook is named with a reason, and is not the job
    j = d["job"]
    assert j["batches"] == STEPS, (j, err)
    assert j["python_processes_hooked"] >= 1, (j, err)
    for p in j["python_processes_without_hook"]:
        assert p["why"] and "doctor_jobs.py" not in p["cmd"], (p, err)
        if p["why"].startswith("run with -I"):  # the runner's probe of the interpreter, said so
            assert "uv and poetry probe the interpreter" in p["why"], (p, err)
        assert "WITHOUT THE HOOK: Python process %d" % p["pid"] in err, err


def test_poetry_run(tmp_path):
    poetry = shutil.which("poetry")
    if not poetry:
        pytest.skip("no poetry (Debian's python3-poetry, scripts/deps.sh)")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "job"\nversion = "0.1.0"\ndescription = ""\nauthors = ["a <a@b.c>"]\n'
        'packages = []\n\n[tool.poetry.dependencies]\npython = ">=3.9"\n\n'
        '[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n')
    env = python_on_path(tmp_path)
    # the project's environment is the interpreter's own (no virtualenv created, no network);
    # the PYTHONPATH set in front of it replaces the doctor's
    env.update(POETRY_VIRTUALENVS_CREATE="false", POETRY_CACHE_DIR=str(tmp_path / "poetry-cache"),
               POETRY_NO_INTERACTION="1")
    d, err = doctor(tmp_path, ["env", "-C", str(proj), "PYTHONPATH=%s" % tmp_path, poetry, "run", "python",
                               JOBS, "tiny", "--steps", str(STEPS)], env)
    assert_job_hooked(d, err)
    # poetry itself is a Python program: it loads the hook too (in a venv it also probes the
    # interpreter with `python -I -`, named as unhooked above)
    assert d["job"]["python_processes_hooked"] >= 2, d["job"]


def uv_binary():
    venv = os.environ.get("STK_UV_VENV") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stoker", "uv-venv")
    uv = os.path.join(venv, "bin", "uv")
    stamp = os.path.join(venv, ".stoker-pins")
    if os.access(uv, os.X_OK) and os.path.exists(stamp) and open(stamp).read() == UV_PIN:
        return uv, None
    if os.path.exists(venv) and not os.path.exists(stamp):
        return None, "%s exists but was not made by this test (no %s)" % (venv, stamp)
    shutil.rmtree(venv, ignore_errors=True)
    try:
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True, timeout=300,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", UV_PIN], check=True,
                       timeout=600, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        out = getattr(e, "output", b"") or b""
        shutil.rmtree(venv, ignore_errors=True)
        return None, "could not install %s from PyPI into %s (offline?): %s %s" % (
            UV_PIN, venv, e, out.decode(errors="replace")[-300:])
    with open(stamp, "w") as f:
        f.write(UV_PIN)
    return uv, None


def test_uv_run(tmp_path):
    uv, why = uv_binary()
    if not uv:
        pytest.skip(why)
    env = python_on_path(tmp_path)
    # no project, the given interpreter, nothing downloaded; uv probes the interpreter with its
    # own `python -I` first (once per cache: a fresh cache here, so the probe runs)
    env.update(UV_OFFLINE="1", UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never",
               UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    d, err = doctor(tmp_path, ["env", "PYTHONPATH=%s" % tmp_path, uv, "run", "--no-project", "--python", PY,
                               "python", JOBS, "tiny", "--steps", str(STEPS)], env)
    assert_job_hooked(d, err)
