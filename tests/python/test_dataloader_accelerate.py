# SPDX-License-Identifier: MIT
"""stoker.DataLoader through Hugging Face Accelerate (single process, CPU): prepare(loader) and
skip_first_batches(loader, k) accept it (it is a torch DataLoader) and yield the batches torch's
DataLoader yields for the same dataset (eval transform: bit-exact), the skip dropping exactly
the first k. Accelerate rebuilds the loader as its own torch DataLoader over the dataset, so
the prepared loader is no longer decoded by stoker (bindings/python/README.md, Frameworks).
Needs Accelerate (the torch 2.x venv): skipped where it is not installed."""

import pytest

from conftest import make_imagefolder, torch_or_skip

torch = torch_or_skip()
accelerate = pytest.importorskip("accelerate", reason="Accelerate is not installed for this "
                                 "Python (it runs in the torch 2.x venv: scripts/venv-torch2.sh)")
T = pytest.importorskip("torchvision.transforms")
from torchvision.datasets import ImageFolder  # noqa: E402


def test_prepare_and_skip_first_batches(tmp_path):
    import stoker
    root = tmp_path / "data"
    make_imagefolder(str(root), per_class=(5, 4, 4), seed=2)
    ds = ImageFolder(str(root), T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()]))
    want = list(torch.utils.data.DataLoader(ds, batch_size=3))
    acc = accelerate.Accelerator(cpu=True)
    loader = stoker.DataLoader(ds, batch_size=3)
    assert isinstance(loader, torch.utils.data.DataLoader)
    assert [(x.tolist(), y.tolist()) for x, y in loader] == \
        [(x.tolist(), y.tolist()) for x, y in want]
    prepared = acc.prepare(loader)
    got = list(prepared)
    assert len(got) == len(want) == len(prepared)
    for (xa, ya), (xb, yb) in zip(got, want):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    skipped = list(acc.skip_first_batches(prepared, 2))
    assert len(skipped) == len(want) - 2
    for (xa, ya), (xb, yb) in zip(skipped, want[2:]):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    loader.close()
