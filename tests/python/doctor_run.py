# SPDX-License-Identifier: MIT
"""What the `stoker doctor` tests share: the CLI they run, the job script (doctor_jobs.py), and
one run of the doctor with its --json report read back. Not a test file: imported by them."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "doctor_jobs.py")
STOKER = os.environ.get("STOKER") or os.path.join(os.environ.get("BUILD_DIR", "build"), "stoker")
PY = sys.executable


def require_cli():
    """Skip the calling test module when the stoker CLI is not built."""
    if not os.access(STOKER, os.X_OK):
        pytest.skip("no stoker CLI at %s" % STOKER, allow_module_level=True)


def run_doctor(tmp_path, cmd, hang, rc=0, name="doctor", opts=()):
    """`stoker doctor OPTS --json TMP_PATH/NAME.json -- CMD`, asserting that it exits RC: (the
    report as the JSON reads, the doctor's stderr). HANG: seconds, a guard against a hang, not a
    time the job must fit in."""
    js = str(tmp_path / (name + ".json"))
    p = subprocess.run([STOKER, "doctor", *opts, "--json", js, "--"] + cmd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=hang)
    assert p.returncode == rc, p.stderr
    with open(js) as f:
        return json.load(f), p.stderr
