# SPDX-License-Identifier: MIT
"""Two ranks launched with `python3 -m torch.distributed.run --nproc_per_node 2` (gloo, CPU):
rank and world size come from torch.distributed; the parts are disjoint, cover the dataset and
have equal batch counts (an all_reduce per step would hang otherwise)."""

import json
import textwrap

import numpy as np
import pytest

from conftest import jpeg_bytes, torch_or_skip, torchrun, write_dataset

WORKER = textwrap.dedent(r'''
    import datetime, json, os, sys
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    import stoker
    even, odd, out = sys.argv[1], sys.argv[2], sys.argv[3]
    res = {"rank": dist.get_rank(), "world": dist.get_world_size()}
    for name, path, kw in (("even_pad", even, {}), ("odd_pad", odd, {}),
                           ("odd_drop", odd, {"dist_mode": "drop"})):
        with stoker.Loader(path, 5, size=16, workers=1, return_index=True, seed=6, **kw) as ld:
            assert (ld.rank, ld.world_size) == (res["rank"], res["world"])
            idx, steps = [], 0
            for images, labels, index in ld:
                idx.extend(index.tolist())
                t = torch.ones(1)
                dist.all_reduce(t)            # a DDP-like collective per step
                assert t.item() == res["world"]
                steps += 1
            res[name] = {"indices": idx, "batches": steps, "len": len(ld)}
    with open(os.path.join(out, "rank%d.json" % res["rank"]), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()
''')


def test_two_ranks_with_torch_distributed_run(tmp_path, shards, stoker_mod):
    torch = torch_or_skip()
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed not available")
    even, labels = shards
    rng = np.random.default_rng(8)
    odd = write_dataset(str(tmp_path / "odd"), [(jpeg_bytes(rng, 40, 40), k % 3)
                                                 for k in range(35)])
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    torchrun(tmp_path, script, [even, odd, out])
    ranks = [json.loads((out / ("rank%d.json" % k)).read_text()) for k in range(2)]
    assert [x["rank"] for x in ranks] == [0, 1] and all(x["world"] == 2 for x in ranks)

    n = len(labels)
    a, b = (set(x["even_pad"]["indices"]) for x in ranks)
    assert not a & b and a | b == set(range(n))              # disjoint, covering
    counts = [(x["even_pad"]["batches"], len(x["even_pad"]["indices"])) for x in ranks]
    assert counts[0] == counts[1] == (4, n // 2)
    assert all(x["even_pad"]["len"] == 4 for x in ranks)

    # 35 records, PAD: 18 each (one sample wraps around, as DistributedSampler), all covered
    pad = [x["odd_pad"]["indices"] for x in ranks]
    assert len(pad[0]) == len(pad[1]) == 18
    assert set(pad[0]) | set(pad[1]) == set(range(35))
    assert ranks[0]["odd_pad"]["batches"] == ranks[1]["odd_pad"]["batches"] == 4
    # 35 records, DROP: 17 each, disjoint
    drop = [set(x["odd_drop"]["indices"]) for x in ranks]
    assert len(drop[0]) == len(drop[1]) == 17 and not drop[0] & drop[1]
    assert ranks[0]["odd_drop"]["batches"] == ranks[1]["odd_drop"]["batches"]
