# SPDX-License-Identifier: MIT
"""Elastic resume of stoker.Loader inside a streamed epoch (an s3:// dataset through caches of a
quarter of it: the shard-window order; docs/S3.md "Elastic resume inside a streamed epoch"),
against the `s3` fixture's radosgw, the ranks simulated one after another in this process: two
ranks save state_dict() (version 3, with the epoch's segments) after 2 batches, three ranks
load rank 0's state and read to the epoch's end (2 -> 3), and a 3-rank run saved again mid-way
resumes on 1 rank (2 -> 3 -> 1): every record exactly once over the runs, the resumed ranks'
shard sets disjoint; the next `for` after the resumed epoch is a whole epoch. A version-2 state
(no segments) resumes on the same world size still; on another world size the resume fails
naming stk_loader_resume_segments. A malformed 'segments' is refused naming the field."""

import os

import numpy as np
import pytest

import s3_link
from conftest import jpeg_bytes

BS = 4


@pytest.fixture(scope="module")
def streamed(tmp_path_factory, stoker_mod):
    """(url, local, a quarter of the shards' bytes): 96 noisy JPEGs packed into shards of
    1 MiB, uploaded with boto3."""
    s3_link.server_env()
    root = tmp_path_factory.mktemp("elastic")
    src = root / "src"
    rng = np.random.default_rng(7)
    for c in range(2):
        d = src / ("c%d" % c)
        d.mkdir(parents=True)
        for i in range(48):
            (d / ("%02d.jpg" % i)).write_bytes(jpeg_bytes(rng, 400, 380))
    local = str(root / "ds")
    res = stoker_mod.pack(str(src), local, shard_bytes=1 << 20, threads=2)
    assert res["shards"] >= 7, res
    names = s3_link.shard_names(local)
    total = sum(os.path.getsize(os.path.join(local, n)) for n in names)
    url = s3_link.upload(local, "stk-elastic-%d" % os.getpid())
    return url, local, total // 4


def loader(stoker_mod, url, cache, limit, rank, world):
    return stoker_mod.Loader(url, BS, size=16, return_index=True, seed=3, rank=rank,
                             world_size=world, dist_mode="exact", workers=2, cache=cache,
                             cache_bytes=limit)


def run(ld, stop_after=None):
    idx, state = [], None
    for k, (_images, _labels, index) in enumerate(ld):
        idx.extend(index.tolist())
        if stop_after is not None and k + 1 == stop_after:
            state = ld.state_dict()
            break
    return idx, state


def world_run(stoker_mod, streamed, tmp_path, tag, world, state=None, stop_after=None):
    url, local, limit = streamed
    seen, states, reader = [], [], {}
    assert url and limit
    for r in range(world):
        with loader(stoker_mod, url, str(tmp_path / ("%s%d" % (tag, r))), limit, r, world) as ld:
            if state is not None:
                ld.load_state_dict(state)
            idx, st = run(ld, stop_after)
        seen.extend(idx)
        states.append(st)
        reader[r] = idx
    return seen, states, reader


def test_elastic_resume_inside_streamed_epoch(stoker_mod, streamed, tmp_path):
    url, local, limit = streamed
    n = len(stoker_mod.Dataset(local))
    seen_a, states_a, _ = world_run(stoker_mod, streamed, tmp_path, "a", 2, stop_after=2)
    st = states_a[0]
    assert st["version"] == 3 and st["segments"] is not None, st
    assert len(st["segments"]) == 1 and st["segments"][0][0] == 2 and st["segments"][0][2] == 8
    assert states_a[1]["segments"] == st["segments"]
    # 2 -> 3: every record once over the two runs; no shard read by two resumed ranks
    seen_b, _, reader = world_run(stoker_mod, streamed, tmp_path, "b", 3, state=st)
    counts = np.bincount(np.array(seen_a + seen_b), minlength=n)
    assert counts.tolist() == [1] * n, np.nonzero(counts != 1)
    with stoker_mod.Dataset(local) as ds:
        shard_of = [ds.record(i)["shard"] for i in range(n)]
    sets = [set(shard_of[i] for i in reader[r]) for r in range(3)]
    for a in range(3):
        for b in range(a + 1, 3):
            assert not sets[a] & sets[b], (a, b, sets)

    # 2 -> 3 -> 1: the 3-rank run saved again after 1 batch (every rank's state, as a list)
    seen_c, states_c, _ = world_run(stoker_mod, streamed, tmp_path, "c", 3, state=st,
                                    stop_after=1)
    assert all(len(s["segments"]) == 2 and s["segments"][0] == st["segments"][0]
               for s in states_c), states_c
    seen_d, _, _ = world_run(stoker_mod, streamed, tmp_path, "d", 1, state=states_c)
    counts = np.bincount(np.array(seen_a + seen_c + seen_d), minlength=n)
    assert counts.tolist() == [1] * n, np.nonzero(counts != 1)



def test_old_states_and_bad_segments(stoker_mod, streamed, tmp_path):
    url, local, limit = streamed
    n = len(stoker_mod.Dataset(local))
    _, states, _ = world_run(stoker_mod, streamed, tmp_path, "e", 2, stop_after=2)
    v2 = {k: v for k, v in states[0].items() if k != "segments"}
    v2["version"] = 2
    # version 2 on the same world size: each rank continues its own list, as before
    seen = []
    for r in range(2):
        with loader(stoker_mod, url, str(tmp_path / ("f%d" % r)), limit, r, 2) as ld:
            full, _ = run(ld)
        with loader(stoker_mod, url, str(tmp_path / ("g%d" % r)), limit, r, 2) as ld:
            ld.load_state_dict(v2)
            rest, _ = run(ld)
        assert rest == full[8:], r
        seen.extend(rest)
    # version 2 on another world size: it has no segments, the library names the calls
    with loader(stoker_mod, url, str(tmp_path / "h"), limit, 0, 3) as ld:
        ld.load_state_dict(v2)
        with pytest.raises(Exception, match="resume_segments"):
            run(ld)
    # a malformed 'segments' is refused naming the field
    for bad in ([[2, 0, 8]], [[2, 2]], "x", [[0, 2, 8]], [[2, 2, -1]]):
        st = dict(states[0], segments=bad)
        with loader(stoker_mod, url, str(tmp_path / "i"), limit, 0, 3) as ld:
            with pytest.raises(ValueError, match="'segments'"):
                ld.load_state_dict(st)
    # after the resumed epoch, the next `for` is a whole epoch of the new world
    with loader(stoker_mod, url, str(tmp_path / "j"), limit, 0, 1) as ld:
        ld.load_state_dict(states[0])
        run(ld)
        whole, _ = run(ld)
    assert sorted(whole) == list(range(n))
