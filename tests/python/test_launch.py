# SPDX-License-Identifier: MIT
"""python -m stoker SCRIPT and stoker run -- COMMAND (stoker.launch): an unmodified script's
torch.utils.data.DataLoader is stoker's where stoker can run it (batches equal to torch's for an
eval transform), torch's own where not (a Lambda; worker processes by spawn and fork, with the
launcher in them), a subclass stays torch's; one line per loader says which; torchrun children
each get it."""
import os
import subprocess
import sys

import pytest

from conftest import SUBPROCESS_ENV, torch_or_skip
from launch_util import check_levels, loader_lines

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "launch_job.py")
STOKER = os.environ.get("STOKER") or os.path.join(os.environ.get("BUILD_DIR", "build"), "stoker")

# launch_job.py's loaders in the order of their first pass: (the line that builds it, level,
# part of the reason). #2 (a Lambda first, worker_init_fn, worker processes) stays torch's;
# #4 (a Lambda after ToTensor) is "partly": stoker.DataLoader runs the pipeline's tail in Python.
SINGLE = {1: ("launch_job.py:46", "full", None),
          2: ("launch_job.py:56", "not", None),
          3: ("launch_job.py:63", "not", "a subclass of DataLoader (__main__.Mine)"),
          4: ("launch_job.py:68", "partly", "Lambda")}


def _needs():
    torch_or_skip()
    pytest.importorskip("torchvision")


def _run(cmd, timeout=240, **env):
    env = {k: v for k, v in dict(SUBPROCESS_ENV, **env).items() if v != ""}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "rc %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-6000:])
    return p


def test_python_m_stoker_spawn_workers(imagefolder):
    _needs()
    root, _ = imagefolder
    p = _run([sys.executable, "-m", "stoker", JOB, root, "single", "spawn"])
    assert "JOB OK" in p.stdout
    check_levels(loader_lines(p.stderr), SINGLE, p.stderr)


def test_stoker_run_fork_workers(imagefolder, tmp_path):
    _needs()
    if not os.access(STOKER, os.X_OK):
        pytest.skip("the stoker CLI is not built (%s)" % STOKER)
    root, _ = imagefolder
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = _run([STOKER, "run", "--", sys.executable, JOB, root, "single", "fork"], TMPDIR=str(tmp))
    assert "JOB OK" in p.stdout
    check_levels(loader_lines(p.stderr), SINGLE, p.stderr)
    assert not [n for n in os.listdir(tmp) if n.startswith("stoker-run-")]   # its files removed


def test_stoker_run_torchrun_ranks(imagefolder, tmp_path):
    torch = torch_or_skip()
    pytest.importorskip("torchvision")
    if not os.access(STOKER, os.X_OK):
        pytest.skip("the stoker CLI is not built (%s)" % STOKER)
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    root, _ = imagefolder
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    # --redirects/--tee 1 and a static rendezvous: as test_distributed.py (torch 1.13 under
    # Python 3.11 dies on their defaults; static starts quicker than c10d)
    p = _run([STOKER, "run", "--", sys.executable, "-m", "torch.distributed.run",
              "--master_addr", "127.0.0.1", "--master_port", str(port), "--nproc_per_node", "2",
              "--redirects", "1", "--tee", "1", "--log_dir", str(tmp_path / "logs"),
              JOB, root, "ddp"], OMP_NUM_THREADS="1", RANK="", WORLD_SIZE="")
    assert "JOB OK rank 0" in p.stdout and "JOB OK rank 1" in p.stdout, p.stdout
    lines = loader_lines(p.stderr)
    assert sorted(ln["rank"] for ln in lines) == [0, 1], p.stderr
    assert all(ln["level"] == "full" and ln["site"] == "launch_job.py:82" for ln in lines), p.stderr


def test_usage():
    p = subprocess.run([sys.executable, "-m", "stoker"], env=SUBPROCESS_ENV, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "usage: python -m stoker SCRIPT" in p.stdout
    p = subprocess.run([sys.executable, "-m", "stoker", "/nonexistent/train.py"],
                       env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no such file" in p.stderr
    if os.access(STOKER, os.X_OK):
        p = subprocess.run([STOKER, "run"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "no command to run" in p.stderr
        p = subprocess.run([STOKER, "run", "--", "/nonexistent/cmd"], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and "cannot run" in p.stderr
