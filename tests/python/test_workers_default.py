# SPDX-License-Identifier: MIT
"""The default number of decode workers in Python: the library's CPU budget, divided among
torchrun's local ranks (LOCAL_WORLD_SIZE), and stats()["workers_note"] says how it was chosen.
(How the budget is computed — affinity, cgroup quota — is tests/test_workers_default.c.)"""

import os
import subprocess
import sys

from conftest import SUBPROCESS_ENV

CODE = """
import os, sys, stoker
path = sys.argv[1]
with stoker.Loader(path, 4, train=False, size=32, array="numpy") as loader:
    next(iter(loader))
    st = loader.stats()
    print(st["decode"]["threads"])
    print(st["workers_note"])
    print(str(st).count(st["workers_note"]))
"""


def _run(path, lws):
    env = dict(SUBPROCESS_ENV)
    env.pop("LOCAL_WORLD_SIZE", None)
    if lws is not None:
        env["LOCAL_WORLD_SIZE"] = lws
    r = subprocess.run([sys.executable, "-c", CODE, path], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    threads, note, in_report = r.stdout.strip().splitlines()
    return int(threads), note, int(in_report)


def test_default_workers_follow_the_budget_and_local_ranks(shards):
    path, _ = shards
    usable = len(os.sched_getaffinity(0))
    threads, note, in_report = _run(path, None)
    assert note.startswith("workers %d = " % threads), note
    assert threads <= usable and "usable cores (affinity %d of " % usable in note, note
    assert in_report == 1, "the report shows the note"
    threads2, note2, _ = _run(path, "2")
    assert threads2 == max(1, threads // 2), (threads, threads2, note2)
    assert note2.endswith("/ 2 local ranks (LOCAL_WORLD_SIZE)"), note2
