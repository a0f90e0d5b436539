# SPDX-License-Identifier: MIT
"""With torch absent (an import hook refuses it), the binding yields NumPy arrays and works."""

import json
import subprocess
import sys
import textwrap

from conftest import SUBPROCESS_ENV

SCRIPT = textwrap.dedent(r'''
    import sys, json
    class BlockTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith(("torch.", "torchvision")):
                raise ImportError("torch blocked for this test")
            return None
    sys.meta_path.insert(0, BlockTorch())
    import numpy as np
    import stoker
    path = sys.argv[1]
    out = {}
    with stoker.Loader(path, 8, size=24, workers=2, return_index=True, seed=4) as loader:
        seen, kinds = [], set()
        for images, labels, idx in loader:
            kinds.add((type(images).__name__, str(images.dtype), type(labels).__name__,
                       str(labels.dtype), images.shape[1:]))
            seen.extend(idx.tolist())
        out["kinds"] = sorted(map(str, kinds))
        out["seen"] = sorted(seen)
        out["labels"] = {int(i): int(y) for x, ys, ii in loader for i, y in zip(ii, ys)}
        out["samples"] = loader.stats()["samples"]
    with stoker.Loader(path, 8, size=24, dtype="float32", mean=0.5, std=0.25) as f:
        x, _ = next(iter(f))
        out["float"] = [str(x.dtype), float(x.min()), float(x.max())]
    with stoker.Loader(path, 8, size=24, dtype="bfloat16") as f:
        x, _ = next(iter(f))
        out["bf16"] = str(x.dtype)
    out["torch_loaded"] = "torch" in sys.modules
    print(json.dumps(out))
''')


def test_numpy_path_without_torch(shards):
    path, labels = shards
    r = subprocess.run([sys.executable, "-c", SCRIPT, path], env=SUBPROCESS_ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["torch_loaded"] is False
    assert out["kinds"] == [str(("ndarray", "uint8", "ndarray", "int64", (3, 24, 24)))]
    assert out["seen"] == list(range(len(labels)))
    assert {int(k): v for k, v in out["labels"].items()} == labels
    assert out["samples"] == 2 * len(labels)
    dtype, lo, hi = out["float"]
    assert dtype == "float32" and -2.0 <= lo and hi <= 2.0 and lo < hi   # (x/255 - .5)/.25
    assert out["bf16"] == "uint16"     # raw bfloat16 bits: NumPy has no bfloat16
