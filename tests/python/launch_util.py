# SPDX-License-Identifier: MIT
"""What the launcher (python -m stoker, stoker run) says about each DataLoader, read from a
job's stderr: one line per loader per process, "stoker[rank R]: DataLoader #N (FILE:LINE,
DATASET, batch_size=B): accelerated fully | accelerated partly (in Python: ...) | not
accelerated: WHY"."""
import re

LINE = re.compile(r"^stoker(?:\[rank (\d+)\])?: DataLoader #(\d+) \(([^,]+), (\w+), "
                  r"batch_size=(\w+)\): (accelerated fully|accelerated partly|not accelerated)"
                  r"(.*)$", re.M)
LEVEL = {"accelerated fully": "full", "accelerated partly": "partly", "not accelerated": "not"}


def loader_lines(stderr):
    """[{rank, n, site, dataset, batch_size, level ('full' | 'partly' | 'not'), detail}]"""
    out = []
    for m in LINE.finditer(stderr):
        rank, n, site, ds, bs, level, rest = m.groups()
        out.append({"rank": None if rank is None else int(rank), "n": int(n), "site": site,
                    "dataset": ds, "batch_size": bs, "level": LEVEL[level],
                    "detail": rest.lstrip(": ").strip()})
    return out


def check_levels(lines, expected, stderr):
    """Assert one line per loader of EXPECTED ({N: (FILE:LINE, level, substring of the detail
    or None)}, N the loader's number in its process) and nothing else."""
    got = {ln["n"]: ln for ln in lines}
    assert len(got) == len(lines), "a loader reported twice:\n" + stderr
    assert set(got) == set(expected), "loaders %s, expected %s:\n%s" % (
        sorted(got), sorted(expected), stderr)
    for n, (site, level, why) in expected.items():
        ln = got[n]
        assert ln["site"] == site, "#%d built at %s, expected %s:\n%s" % (n, ln["site"], site, stderr)
        assert ln["level"] == level, "#%d (%s): %s (%s), expected %s:\n%s" % (
            n, site, ln["level"], ln["detail"], level, stderr)
        if why is not None:
            assert why in ln["detail"], "#%d (%s): %r lacks %r" % (n, site, ln["detail"], why)


RESTART = re.compile(r"^stoker(?:\[rank \d+\])?: DataLoader #(\d+) \([^)]*\): stoker cannot start "
                     r"this pass", re.M)


def restarts(stderr):
    """Numbers of the loaders whose pass stoker could not start (torch's runs them after)."""
    return [int(m.group(1)) for m in RESTART.finditer(stderr)]
