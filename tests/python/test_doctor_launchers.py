# SPDX-License-Identifier: MIT
"""`stoker doctor -- LAUNCHER ... python job.py`: the hook reaches every Python process of the job's
tree whatever the launcher does to PYTHONPATH (env PYTHONPATH=x, bash -c with an export, a shell
script, taskset/nice, torchrun's children), through the preload library the doctor puts in
LD_PRELOAD; a Python process that still runs without it (a cleared environment, -I) is named in
the report with the reason. Asserts on what the doctor recorded (batches seen, processes hooked),
never on time: each job runs its fixed number of steps to the end.
"""
import os
import shutil
import subprocess

import pytest

pytest.importorskip("torch")

from doctor_run import JOBS, PY, require_cli, run_doctor  # noqa: E402

HANG = 1200                         # a guard against a hang, not a time the job must fit in

require_cli()


def doctor(tmp_path, cmd, rc=0):
    return run_doctor(tmp_path, cmd, HANG, rc=rc)


def tiny(steps=200):
    return [PY, JOBS, "tiny", "--steps", str(steps)]


def assert_hooked(d, err, steps=200, procs=1):
    j = d["job"]
    assert j["python_processes_without_hook"] == [], (j, err)
    assert j["python_processes_hooked"] >= procs, (j, err)
    assert j["batches"] == steps, (j, err)
    assert "WITHOUT THE HOOK" not in err and "loaded the hook" not in err, err


def test_env_sets_pythonpath(tmp_path):
    # env replaces PYTHONPATH (the doctor's directory was first on it): the hook still loads
    d, err = doctor(tmp_path, ["env", "PYTHONPATH=%s" % tmp_path] + tiny())
    assert_hooked(d, err)


def test_bash_c_exports_pythonpath(tmp_path):
    cmd = "export PYTHONPATH=/nonexistent; exec " + " ".join(tiny())
    d, err = doctor(tmp_path, ["bash", "-c", cmd])
    assert_hooked(d, err)


def test_shell_script_taskset_nice(tmp_path):
    if not shutil.which("taskset") or not shutil.which("nice"):
        pytest.skip("no taskset or nice")
    sh = tmp_path / "train.sh"
    sh.write_text("#!/bin/sh\nPYTHONPATH= ; export PYTHONPATH\n" + " ".join(tiny()) + "\n")
    sh.chmod(0o755)
    d, err = doctor(tmp_path, ["taskset", "-c", "0", "nice", "-n", "1", str(sh)])
    assert_hooked(d, err)


def test_torchrun_children(tmp_path):
    # torchrun's agent and its 2 worker processes: all three load the hook; the batches are the
    # first rank's (one training process is diagnosed)
    run = os.path.join(os.path.dirname(PY), "torchrun")
    if not os.access(run, os.X_OK):
        pytest.skip("no torchrun next to %s" % PY)
    plain = subprocess.run([run, "--standalone", "--nproc_per_node", "2"] + tiny(5)[1:],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=HANG)
    if plain.returncode != 0:
        pytest.skip("torchrun does not run here without the doctor: %s" % plain.stderr[-300:])
    d, err = doctor(tmp_path, [run, "--standalone", "--nproc_per_node", "2"] + tiny()[1:])
    assert_hooked(d, err, procs=3)


def test_cleared_environment_is_named(tmp_path):
    # env -i drops the doctor's variables: the hook cannot load, and the report says which
    # process ran without it and why (the sampler sees it: the job sleeps past a few samples)
    d, err = doctor(tmp_path, ["env", "-i", PY, "-c", "import time; time.sleep(1.5)"])
    up = d["job"]["python_processes_without_hook"]
    assert len(up) == 1 and "cleared" in up[0]["why"] and up[0]["cmd"].startswith(PY), (up, err)
    assert "WITHOUT THE HOOK: Python process %d" % up[0]["pid"] in err, err
    v = [l for l in err.splitlines() if l.startswith("7. verdict:")][0]
    assert "ran without the hook: its environment lacks the doctor's variables" in v, v


def test_isolated_mode_is_named(tmp_path):
    d, err = doctor(tmp_path, [PY, "-I", "-c", "import time; time.sleep(1.5)"])
    up = d["job"]["python_processes_without_hook"]
    assert len(up) == 1 and up[0]["why"].startswith("run with -I"), (up, err)
