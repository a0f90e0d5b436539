# SPDX-License-Identifier: MIT
"""Elastic resume under `python3 -m torch.distributed.run` (gloo, CPU): a state_dict taken
mid-epoch by 2 ranks resumes on 3 ranks, one taken by 3 ranks resumes on 1, and across the two
runs every sample of the epoch is delivered exactly once (the stated pad repeats aside), whatever
the worker counts. Each rank writes the dataset indices it saw to a file; the test counts them.
A malformed state, or one from another dataset or seed, is refused naming the field."""

import json
import textwrap

import numpy as np
import pytest

from conftest import jpeg_bytes, torch_or_skip, torchrun, write_dataset

N = 47          # records: divisible by neither 2 nor 3
BS = 4

# argv: dataset, out dir, role. Every rank writes out/<role>.rank<r>.json with what it saw.
WORKER = textwrap.dedent(r'''
    import datetime, json, os, sys
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    import stoker
    path, out, role = sys.argv[1], sys.argv[2], sys.argv[3]
    rank, world = dist.get_rank(), dist.get_world_size()
    BS = 4

    def loader(**kw):
        return stoker.Loader(path, BS, size=16, return_index=True, seed=5, **kw)

    def run(ld, stop_after=None):
        """Indices of the batches yielded; with STOP_AFTER, the state_dict after that many."""
        idx, state = [], None
        for k, (images, labels, index) in enumerate(ld):
            idx.extend(index.tolist())
            t = torch.ones(1)
            dist.all_reduce(t)                # a DDP-like collective per step
            if stop_after is not None and k + 1 == stop_after:
                state = ld.state_dict()
                break
        return idx, state

    def save(name, **res):
        with open(os.path.join(out, "%s.rank%d.json" % (name, rank)), "w") as f:
            json.dump(dict(rank=rank, world=world, **res), f)

    if role == "w2":
        # epoch 0 on 2 ranks (1 worker each), checkpoint after 3 batches
        with loader(workers=1) as ld:
            idx, state = run(ld, stop_after=3)
        save("a", indices=idx, state=state)
    elif role == "w3":
        # 2 -> 3: every rank loads rank 0's state of the 2-rank run (2 workers each)
        state = json.load(open(os.path.join(out, "a.rank0.json")))["state"]
        with loader(workers=2) as ld:
            ld.load_state_dict(state)
            assert ld.epoch == 0
            idx, _ = run(ld)
            after = ld.state_dict()
        save("b", indices=idx, after=after)
        # epoch 1 on 3 ranks, checkpoint after 2 batches, all ranks' states kept
        with loader(workers=1, epoch=1) as ld:
            idx, state = run(ld, stop_after=2)
        save("c", indices=idx, state=state)
    elif role == "w1":
        # 3 -> 1: the list of every rank's state of the 3-rank run
        states = [json.load(open(os.path.join(out, "c.rank%d.json" % r)))["state"]
                  for r in range(3)]
        with loader(workers=2, dist_mode="drop") as ld:
            ld.load_state_dict(states)
            assert ld.epoch == 1
            idx, _ = run(ld)
        save("d", indices=idx)
    dist.destroy_process_group()
''')


def _launch(tmp_path, script, nproc, args, tag):
    torchrun(tmp_path, script, args, nproc=nproc, launcher_args=("--monitor_interval", "0.2"),
             log_dir="logs-" + tag)


def _read(out, name, world):
    res = [json.loads((out / ("%s.rank%d.json" % (name, r))).read_text()) for r in range(world)]
    assert [x["rank"] for x in res] == list(range(world)) and all(x["world"] == world
                                                                  for x in res)
    return res


def _order(stoker_mod, path, epoch):
    """The epoch's global order (one rank, no padding): position -> dataset index."""
    with stoker_mod.Loader(path, N, size=16, return_index=True, seed=5, workers=1,
                           rank=0, world_size=1, epoch=epoch) as ld:
        (_, _, idx), = list(ld)
    return idx.tolist()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    rng = np.random.default_rng(15)
    path = str(tmp_path_factory.mktemp("elastic") / "ds")
    write_dataset(path, [(jpeg_bytes(rng, 24 + k % 9, 20 + k % 7), k % 3) for k in range(N)])
    return path


def test_resume_2_to_3_and_3_to_1_ranks(tmp_path, dataset, stoker_mod):
    torch = torch_or_skip()
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed not available")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    for nproc, role in ((2, "w2"), (3, "w3"), (1, "w1")):
        _launch(tmp_path, script, nproc, [dataset, str(out), role], role)
    report = []

    # ---- 2 -> 3, epoch 0: 2 ranks x 3 batches x 4 = 24 delivered, 23 left over 3 ranks (PAD:
    # 8 each, the rest's first sample repeated once)
    a, b = _read(out, "a", 2), _read(out, "b", 3)
    state = a[0]["state"]
    assert state["version"] == 3 and state["world_size"] == 2 and state["epoch"] == 0
    assert state["segments"] is None                  # the global order: no history
    assert state["next_sample"] == 12 and state["consumed"] == 24 and state["base"] == 0
    assert state["dataset"]["count"] == N
    assert a[1]["state"]["consumed"] == 24            # both ranks agree
    first = [i for x in a for i in x["indices"]]
    second = [i for x in b for i in x["indices"]]
    assert len(first) == 24 and [len(x["indices"]) for x in b] == [8, 8, 8]
    counts = np.bincount(first + second, minlength=N)
    order = _order(stoker_mod, dataset, 0)
    assert not set(first) & set(order[24:])           # run 1 delivered exactly the prefix
    assert sorted(first) == sorted(order[:24])
    assert counts.min() == 1, "a sample of epoch 0 was never delivered"
    repeats = [i for i in range(N) if counts[i] > 1]
    assert repeats == [order[24]] and counts[order[24]] == 2, repeats  # the PAD repeat
    assert all(x["after"]["epoch"] == 1 and x["after"]["next_sample"] == 0 for x in b)
    report.append("2->3 epoch 0: run1 %d + run2 %d samples, %d distinct of %d, pad repeats %d"
                  % (len(first), len(second), int((counts > 0).sum()), N, len(repeats)))

    # ---- 3 -> 1, epoch 1: 3 ranks x 2 batches x 4 = 24 delivered, 23 left on 1 rank (DROP:
    # nothing to drop with one rank); the list of the 3 ranks' states is loaded
    c, d = _read(out, "c", 3), _read(out, "d", 1)
    assert all(x["state"]["consumed"] == 24 and x["state"]["world_size"] == 3 for x in c)
    first = [i for x in c for i in x["indices"]]
    second = d[0]["indices"]
    assert len(first) == 24 and len(second) == N - 24
    counts = np.bincount(first + second, minlength=N)
    assert counts.min() == 1 and counts.max() == 1, "3->1: not every sample exactly once"
    order = _order(stoker_mod, dataset, 1)
    assert second == order[24:]                       # the rest, in the epoch's order
    report.append("3->1 epoch 1: run1 %d + run2 %d samples, each of %d exactly once"
                  % (len(first), len(second), N))
    print("\n".join(report))


def _state(stoker_mod, path, **kw):
    with stoker_mod.Loader(path, BS, size=16, seed=5, workers=1, rank=1, world_size=2,
                           **kw) as ld:
        it = iter(ld)
        next(it)
        next(it)
        return ld.state_dict()


def test_malformed_or_foreign_state_is_refused(tmp_path, dataset, stoker_mod):
    good = _state(stoker_mod, dataset)
    assert good["consumed"] == 2 * BS * 2 and good["rank"] == 1
    rng = np.random.default_rng(3)
    other = write_dataset(str(tmp_path / "other"),
                          [(jpeg_bytes(rng, 24, 20), k % 3) for k in range(N)])

    def refused(state, match, path=dataset, **kw):
        with stoker_mod.Loader(path, BS, size=16, seed=kw.pop("seed", 5), workers=1,
                               rank=0, world_size=3, **kw) as ld:
            with pytest.raises(ValueError, match=match):
                ld.load_state_dict(state)

    refused(good, "field 'dataset' is from another dataset", path=other)   # same count
    refused(good, "field 'seed'", seed=6)
    refused(good, "field 'shuffle'", shuffle=False)
    for key in ("version", "dataset", "epoch", "consumed", "next_sample", "world_size"):
        bad = dict(good)
        del bad[key]
        refused(bad, "field '%s' is missing" % key)
    refused(dict(good, version=4), "field 'version' = 4 is not supported")
    refused({k: v for k, v in good.items() if k != "segments"}, "field 'segments' is missing")
    refused(dict(good, epoch="1"), "field 'epoch' must be int")
    refused(dict(good, consumed=good["consumed"] + 1), "field 'consumed'")
    refused(dict(good, base=N + 1), "field 'base'")
    refused(dict(good, rank=2), "'rank' = 2")
    refused(dict(good, dataset={"count": N}), "field 'dataset' must be")
    refused([good, dict(good, rank=0, next_sample=good["next_sample"] + BS,
                        consumed=good["consumed"] + 2 * BS)], "field 'next_sample' differs")
    refused([good], "not every rank")
    refused("state", "must be a dict")
    # a good one loads, and the next pass is the rest of the epoch on this rank's share
    with stoker_mod.Loader(dataset, BS, size=16, seed=5, workers=1, rank=0, world_size=3,
                           return_index=True) as ld:
        ld.load_state_dict(good)
        got = [i for _, _, idx in ld for i in idx.tolist()]
    order = _order(stoker_mod, dataset, 0)
    rest = order[good["consumed"]:]
    assert got == (rest + rest)[0:3 * ((len(rest) + 2) // 3):3]
    # a version-2 state (before the segments field) still loads, to the same rest
    v2 = {k: v for k, v in good.items() if k != "segments"}
    v2["version"] = 2
    with stoker_mod.Loader(dataset, BS, size=16, seed=5, workers=1, rank=0, world_size=3,
                           return_index=True) as ld:
        ld.load_state_dict(v2)
        assert [i for _, _, idx in ld for i in idx.tolist()] == got
