# SPDX-License-Identifier: MIT
"""A streamed s3:// dataset under a real `torchrun` (python -m torch.distributed.run, gloo, CPU)
against the `s3` fixture's radosgw: stoker.Loader("s3://...", shuffle_window=2) in each rank,
rank and world size taken from torch.distributed (docs/FRAMEWORKS.md, docs/S3.md "Elastic resume
inside a streamed epoch").

- 2 ranks: each stops after 2 batches and saves state_dict() (torch.save, as a checkpoint), then
  reads the whole epoch again from a fresh cache (the uninterrupted run): the stopped run's
  batches are its first ones; the two ranks' records are disjoint and cover the dataset once.
- The same checkpoint resumed by 1 rank and by 3 ranks (new processes, fresh caches): the rest of
  the epoch is exactly the records the 2-rank run had not delivered, each once; the next epoch is
  whole, each record once over the ranks.
- Each rank fetches only what it reads: every cache is fresh and streamed without a limit (nothing
  is evicted), so the shard files in a rank's cache directory after the run are the shards it
  fetched; they are exactly the shards of the records it read (in the stopped run: a subset of
  its uninterrupted run's shards — what was fetched ahead), the ranks' sets disjoint in each
  epoch, and the fetch layer's own count of shards fetched agrees with the directory.
- Every image delivered equals Pillow's decode of the local copy's record (Resize and CenterCrop
  to the image's own size: the decode alone, dct_scaling=False), and its label the class folder
  of the JPEG whose bytes the record holds.
- The same through stoker.DataLoader over stoker.ImageFolder(url, shuffle_window=2) with
  stoker.ExactDistributedSampler (rank and world from torch.distributed): 2 ranks stop after 2
  batches with its state_dict(); 1 and 3 ranks resume it; the images delivered over both runs
  (matched to the records by their pixels, labels checked) are every record once."""

import hashlib
import io
import json
import os
import textwrap
from collections import Counter

import numpy as np
import pytest

import s3_link
from conftest import jpeg_bytes, torch_or_skip, torchrun

H, W, BS, STOP = 280, 300, 4, 2

WORKER = textwrap.dedent(r'''
    import datetime, glob, hashlib, json, os, sys
    cfg = json.load(open(sys.argv[1]))
    os.environ.update(cfg["env"])
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    import stoker
    rank, world = dist.get_rank(), dist.get_world_size()
    out = cfg["out"]

    def loader(cache):
        # rank and world size from torch.distributed; the decode alone (no resize, no crop)
        return stoker.Loader(cfg["url"], 4, train=False, size=(280, 300), resize=(280, 300),
                             dct_scaling=False, layout="NHWC", shuffle=True, seed=3,
                             shuffle_window=2, dist_mode="exact", return_index=True,
                             workers=1, cache=cache)

    def take(batch):
        x, y, idx = batch
        return [[int(i), int(l), hashlib.sha1(im.numpy().tobytes()).hexdigest()]
                for im, l, i in zip(x, y, idx)]

    def fetched(cache):
        return sorted(os.path.basename(p) for p in
                      glob.glob(os.path.join(cache, "**", "shard-*.lmdb"), recursive=True))

    def dataloader(cache):
        # stoker.DataLoader over stoker.ImageFolder(url, shuffle_window=2): the same stream
        import torchvision.transforms as T
        tf = T.Compose([T.Resize(280), T.CenterCrop((280, 300)), T.PILToTensor()])
        ds = stoker.ImageFolder(cfg["url"], tf, cache=cache, shuffle_window=2)
        return stoker.DataLoader(ds, batch_size=4, num_workers=1, sampler=(
            stoker.ExactDistributedSampler(ds, shuffle=True, seed=3)))

    def rows(x, y):   # NCHW tensors: the digest of each image as H x W x 3
        return [[int(l), hashlib.sha1(im.permute(1, 2, 0).contiguous().numpy().tobytes())
                 .hexdigest()] for im, l in zip(x, y)]

    res = {"rank": rank, "world": world}
    if cfg["phase"] == "save":
        dl, pre = dataloader(os.path.join(cfg["caches"], "dl-stop%d" % rank)), []
        for k, (x, y) in enumerate(dl):
            pre += rows(x, y)
            if k + 1 == cfg["stop"]:
                torch.save(dl.state_dict(), os.path.join(out, "dl-state%d.pt" % rank))
                break
        dl.close()
        res["dl_pre"] = pre
    else:
        dl = dataloader(os.path.join(cfg["caches"], "dl-%s%d" % (cfg["phase"], rank)))
        dl.load_state_dict(torch.load(os.path.join(cfg["states"], "dl-state0.pt")))
        res["dl_rest"] = [r for x, y in dl for r in rows(x, y)]
        dl.close()
    if cfg["phase"] == "save":
        cache = os.path.join(cfg["caches"], "stop%d" % rank)
        ld = loader(cache)
        assert ld.rank == rank and ld.world_size == world, (ld.rank, ld.world_size)
        pre = []
        for k, b in enumerate(ld):
            pre += take(b)
            if k + 1 == cfg["stop"]:
                torch.save(ld.state_dict(), os.path.join(out, "state%d.pt" % rank))
                break
        ld.close()
        res["pre"], res["fetched_stop"] = pre, fetched(cache)
        cache = os.path.join(cfg["caches"], "full%d" % rank)
        with loader(cache) as ld:
            res["full"] = [r for b in ld for r in take(b)]
            res["stats_full"] = ld.fetch_stats()
        res["fetched_full"] = fetched(cache)
    else:
        state = torch.load(os.path.join(cfg["states"], "state0.pt"))
        cache = os.path.join(cfg["caches"], "%s%d" % (cfg["phase"], rank))
        with loader(cache) as ld:
            ld.load_state_dict(state)
            res["rest"] = [r for b in ld for r in take(b)]
            res["next"] = [r for b in ld for r in take(b)]
            res["stats"] = ld.fetch_stats()
        res["fetched"] = fetched(cache)
    dist.barrier()
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()
''')


@pytest.fixture(scope="module")
def bucket(tmp_path_factory, stoker_mod):
    """(url, local shards, server env, {index: (class, sha1 of Pillow's decode)}): 144 noisy
    JPEGs of 300x280 in 3 class folders packed into shards of 1 MiB (12 shards), uploaded with
    boto3."""
    env = s3_link.server_env()
    root = tmp_path_factory.mktemp("s3torchrun")
    src = root / "src"
    rng = np.random.default_rng(11)
    cls = {}
    for c in range(3):
        d = src / ("c%d" % c)
        d.mkdir(parents=True)
        for i in range(48):
            data = jpeg_bytes(rng, W, H, subsampling=i % 3, quality=95)
            (d / ("%02d.jpg" % i)).write_bytes(data)
            cls[hashlib.sha1(data).hexdigest()] = c
    local = str(root / "ds")
    stoker_mod.pack(str(src), local, shard_bytes=1 << 20, threads=2)
    from PIL import Image
    truth = {}
    with stoker_mod.Dataset(local) as ds:
        assert ds.info()["shards"] >= 10, ds.info()
        for i in range(len(ds)):
            raw, label = ds.read(i)
            assert cls[hashlib.sha1(raw).hexdigest()] == label
            px = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))
            assert px.shape == (H, W, 3)
            truth[i] = (label, hashlib.sha1(px.tobytes()).hexdigest(),
                        "shard-%05d.lmdb" % ds.record(i)["shard"])
    url = s3_link.upload(local, "stk-torchrun-%d" % os.getpid())
    return url, local, env, truth


def launch(tmp_path, bucket, phase, nproc, states=None):
    url, _local, env, _truth = bucket
    out = tmp_path / ("out-%s" % phase)
    out.mkdir()
    cfg = {"url": url, "env": env, "out": str(out), "caches": str(tmp_path / "caches"),
           "phase": phase, "stop": STOP, "states": str(states) if states else None}
    (tmp_path / ("cfg-%s.json" % phase)).write_text(json.dumps(cfg))
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    torchrun(tmp_path, script, [tmp_path / ("cfg-%s.json" % phase)], nproc=nproc,
             log_dir="logs-%s" % phase)
    return out, [json.loads((out / ("rank%d.json" % r)).read_text()) for r in range(nproc)]


def check_samples(truth, rows, what):
    """Each [index, label, sha1 of the image] against the local copy decoded by Pillow."""
    for i, label, digest in rows:
        assert (label, digest) == truth[i][:2], (what, i, label, truth[i])


def by_digest(truth, rows, what):
    """[label, sha1 of the image] rows (stoker.DataLoader gives no index) as record indices,
    each checked against the local copy's label."""
    index = {v[1]: i for i, v in truth.items()}
    assert len(index) == len(truth)            # the noisy images differ
    out = []
    for label, digest in rows:
        assert digest in index, (what, label)
        assert truth[index[digest]][0] == label, (what, index[digest], label)
        out.append([index[digest]])
    return out


def shards_of(truth, rows):
    return {truth[r[0]][2] for r in rows}


def once(truth, rows, what):
    counts = Counter(r[0] for r in rows)
    assert sorted(counts) == list(range(len(truth))) and set(counts.values()) == {1}, (
        what, sorted(i for i in range(len(truth)) if counts[i] != 1))


def test_streamed_epoch_under_torchrun_resumes_on_1_and_3_ranks(tmp_path, bucket):
    torch = torch_or_skip()
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed not available")
    truth = bucket[3]
    n = len(truth)

    # 2 ranks: stop after STOP batches with a checkpoint; the uninterrupted epoch from fresh caches
    states, ranks = launch(tmp_path, bucket, "save", 2)
    pre = []
    for r in ranks:
        assert r["world"] == 2
        assert len(r["pre"]) == STOP * BS
        assert r["pre"] == r["full"][:STOP * BS], r["rank"]      # the same order, deterministic
        check_samples(truth, r["pre"] + r["full"], "2 ranks")
        assert r["fetched_full"] == sorted(shards_of(truth, r["full"])), r["rank"]
        assert r["stats_full"]["shards_fetched"] == len(r["fetched_full"]), r["stats_full"]
        assert set(r["fetched_stop"]) <= set(r["fetched_full"]), r        # fetched ahead: its own
        assert shards_of(truth, r["pre"]) <= set(r["fetched_stop"]), r
        pre += r["pre"]
    once(truth, ranks[0]["full"] + ranks[1]["full"], "2 ranks, one epoch")
    assert not set(ranks[0]["fetched_full"]) & set(ranks[1]["fetched_full"])
    left = set(range(n)) - {r[0] for r in pre}
    assert len(left) == n - 2 * STOP * BS
    dl_pre = [r for k in ranks for r in by_digest(truth, k["dl_pre"], "DataLoader, 2 ranks")]
    assert len(dl_pre) == 2 * STOP * BS and len({r[0] for r in dl_pre}) == len(dl_pre)

    # the checkpoint on 1 rank and on 3 ranks: the rest of the epoch exactly, then a whole epoch
    for world in (1, 3):
        _, ranks = launch(tmp_path, bucket, "w%d" % world, world, states=states)
        rest, nxt = [], []
        for r in ranks:
            assert r["world"] == world
            check_samples(truth, r["rest"] + r["next"], "%d ranks" % world)
            assert r["fetched"] == sorted(shards_of(truth, r["rest"]) |
                                          shards_of(truth, r["next"])), (world, r["rank"])
            assert r["stats"]["shards_fetched"] == len(r["fetched"]), r["stats"]
            rest += r["rest"]
            nxt += r["next"]
        once(truth, pre + rest, "2 -> %d ranks: the saved part and the rest" % world)
        assert {x[0] for x in rest} == left
        once(truth, nxt, "%d ranks, the next epoch" % world)
        once(truth, dl_pre + [x for r in ranks for x in by_digest(truth, r["dl_rest"], world)],
             "stoker.DataLoader, 2 -> %d ranks" % world)
        for a in range(world):
            for b in range(a + 1, world):
                for part in ("rest", "next"):
                    sa, sb = (shards_of(truth, ranks[k][part]) for k in (a, b))
                    assert not sa & sb, (world, part, a, b, sa & sb)
