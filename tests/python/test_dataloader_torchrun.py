# SPDX-License-Identifier: MIT
"""stoker.DataLoader with no sampler under `python -m torch.distributed.run --nproc_per_node 2`
(gloo, CPU): with the process group initialised each rank reads its own share (rank and world
from torch.distributed), disjoint, covering the dataset, the same number of batches on both
ranks (a collective per step would hang otherwise), shuffled alike on both ranks (a shared
seed) and differently in epoch 1."""

import json
import textwrap

import pytest

from conftest import make_imagefolder, torch_or_skip, torchrun

WORKER = textwrap.dedent(r'''
    import datetime, hashlib, json, os, sys
    import torch
    import torch.distributed as dist
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    import stoker
    root, out = sys.argv[1], sys.argv[2]
    ds = ImageFolder(root, T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()]))
    which = {hashlib.sha1(ds[i][0].numpy().tobytes()).hexdigest(): i for i in range(len(ds))}
    res = {"rank": dist.get_rank()}
    for shuffle in (False, True):
        loader = stoker.DataLoader(ds, batch_size=4, shuffle=shuffle, num_workers=1)
        epochs = []
        for epoch in range(2):
            seen = []
            for x, y in loader:
                seen += [which[hashlib.sha1(i.numpy().tobytes()).hexdigest()] for i in x]
                t = torch.ones(1)
                dist.all_reduce(t)            # a DDP-like collective per step
            epochs.append(seen)
        res["shuffle" if shuffle else "plain"] = {"epochs": epochs, "len": len(loader)}
        loader.close()
    with open(os.path.join(out, "rank%d.json" % res["rank"]), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()
''')


def test_no_sampler_gives_each_rank_its_share(tmp_path):
    torch = torch_or_skip()
    pytest.importorskip("torchvision")
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed not available")
    root = tmp_path / "data"
    make_imagefolder(str(root), per_class=(7, 6, 6), seed=5)   # 19: one sample pads
    n = 19
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    torchrun(tmp_path, script, [root, out])
    ranks = [json.loads((out / ("rank%d.json" % k)).read_text()) for k in range(2)]
    for kind in ("plain", "shuffle"):
        for e in range(2):
            a, b = (x[kind]["epochs"][e] for x in ranks)
            assert len(a) == len(b) == (n + 1) // 2, (kind, e)
            assert set(a) | set(b) == set(range(n)), (kind, e)
            assert len(set(a) & set(b)) <= 1, (kind, e)     # at most the padded sample
        assert ranks[0][kind]["len"] == ranks[1][kind]["len"] == 3
    assert ranks[0]["plain"]["epochs"][0] == list(range(0, n, 2))
    e0, e1 = ranks[0]["shuffle"]["epochs"]
    assert e0 != e1                                          # a new order in epoch 1
