# SPDX-License-Identifier: MIT
"""The README's Python snippet runs as written, on this machine (no GPU here: it must pick the
CPU by itself), with only its dataset path pointed at a small packed set."""

import os
import re
import subprocess
import sys

from conftest import REPO, SUBPROCESS_ENV

README_PATH = "/data/train-shards"


def _snippet():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md has no ```python block"
    return blocks[0]


def test_readme_python_snippet_runs(shards, tmp_path):
    code = _snippet()
    assert README_PATH in code, "the README snippet no longer reads %s: update this test" % README_PATH
    path, _labels = shards
    code = code.replace(README_PATH, path)
    script = tmp_path / "snippet.py"
    script.write_text(code + "\nprint('snippet-device', loader.device if hasattr(loader, 'device') else '?')\n")
    r = subprocess.run([sys.executable, str(script)], env=SUBPROCESS_ENV, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "snippet-device" in r.stdout, r.stdout[-2000:]
