# SPDX-License-Identifier: MIT
"""s3:// datasets from Python and the CLI, against the real S3 server of the `s3` CTest fixture
(scripts/s3-server.sh: Ceph's RADOS Gateway). The shards are uploaded with boto3 — a client
independent of stoker's own — and read back through stoker's fetch layer and cache:
stoker.Loader("s3://...") delivers the same images in the same order as the local dataset for the
same seed, every record once per epoch; stoker.Dataset reads the same bytes; `stoker info|ls|verify`
take s3:// paths; wrong credentials fail at once naming the endpoint."""

import os
import subprocess

import numpy as np
import pytest

from conftest import loader_epochs
from s3_link import read_server_env as _server_env


UPLOAD = """
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  region_name=os.environ["AWS_REGION"])
bucket, local, names = sys.argv[1], sys.argv[2], sys.argv[3:]
s3.create_bucket(Bucket=bucket)
for n in names:
    s3.upload_file(os.path.join(local, n), bucket, "sets/ds/" + n)
"""


@pytest.fixture(scope="module")
def s3_dataset(shards, tmp_path_factory):
    """(url, local path, cache dir): the packed shards uploaded with boto3."""
    env = _server_env()
    for k, v in env.items():
        os.environ[k] = v
    os.environ.pop("AWS_PROFILE", None)
    bucket = "stk-py-%d" % os.getpid()
    local, _ = shards
    names = sorted(n for n in os.listdir(local) if n.startswith("shard-") and n.endswith(".lmdb"))
    assert names
    # boto3 from Debian (python3-boto3) under /usr/bin/python3, whichever Python runs the test
    # (a venv may lack it): a client independent of stoker's own
    up = subprocess.run(["/usr/bin/python3", "-c", UPLOAD, bucket, local] + names,
                        capture_output=True, text=True, timeout=300)
    if up.returncode != 0 and "No module named 'boto3'" in up.stderr:
        pytest.fail("python3-boto3 missing (scripts/deps.sh test installs it)")
    assert up.returncode == 0, up.stderr
    cache = str(tmp_path_factory.mktemp("s3cache"))
    return "s3://%s/sets/ds" % bucket, local, cache


def test_loader_same_order_as_local(stoker_mod, s3_dataset):
    url, local, cache = s3_dataset
    kw = dict(size=32, resize=36, seed=5, workers=2)
    imgs_l, idx_l, ep_l = loader_epochs(stoker_mod, local, 2, **kw)
    imgs_s, idx_s, ep_s = loader_epochs(stoker_mod, url, 2, cache=cache, **kw)
    with stoker_mod.Loader(url, 4, cache=cache, size=32) as ld:   # the cache holds it now
        st = ld.fetch_stats()
        assert st["shards"] >= 1 and st["shards_cached"] == st["shards"], st
    n = len(stoker_mod.Dataset(local))
    for e in range(2):
        assert sorted(idx_s[ep_s == e].tolist()) == list(range(n)), "every record once per epoch"
    assert np.array_equal(idx_s, idx_l), "the order differs from the local dataset's"
    assert np.array_equal(imgs_s, imgs_l), "the images differ from the local dataset's"


def test_dataset_bytes_and_cache(stoker_mod, s3_dataset, tmp_path):
    url, local, _ = s3_dataset
    cache = str(tmp_path / "cache")
    with stoker_mod.Dataset(local) as a, stoker_mod.Dataset(url, cache=cache) as b:
        assert len(a) == len(b)
        for i in range(len(a)):
            assert a.read(i) == b.read(i), "record %d differs" % i
    cached = [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs if f.endswith(".lmdb")]
    assert cached and all(p.startswith(cache) for p in cached)
    with stoker_mod.Dataset(url, cache=cache) as b:   # the second open: from the cache
        st = b.fetch_stats()
        assert st["shards_cached"] == st["shards"] == len(cached) and st["bytes_fetched"] == 0, st
    with stoker_mod.Dataset(local) as a:
        assert a.fetch_stats()["shards"] == 0
    # a cache limit smaller than one shard: a clear error
    with pytest.raises(stoker_mod.StokerError if hasattr(stoker_mod, "StokerError") else Exception,
                       match="smaller than one shard"):
        stoker_mod.Dataset(url, cache=str(tmp_path / "small"), cache_bytes=1024)


def test_cli_info_ls_verify(s3_dataset, tmp_path):
    url, local, _ = s3_dataset
    cli = os.environ.get("STOKER")
    if not cli:
        pytest.skip("STOKER (the CLI) not set")
    env = dict(os.environ, STOKER_CACHE_DIR=str(tmp_path / "cache"))
    n = len(__import__("stoker").Dataset(local))
    info = subprocess.run([cli, "info", url], env=env, capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    assert str(n) in info.stdout
    ls = subprocess.run([cli, "ls", url], env=env, capture_output=True, text=True, timeout=120)
    ls_local = subprocess.run([cli, "ls", local], capture_output=True, text=True, timeout=120)
    assert ls.returncode == 0 and ls.stdout == ls_local.stdout
    ver = subprocess.run([cli, "verify", url], env=env, capture_output=True, text=True, timeout=300)
    assert ver.returncode == 0, ver.stdout + ver.stderr


def test_wrong_credentials_named(stoker_mod, s3_dataset, tmp_path, monkeypatch):
    url, _, _ = s3_dataset
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x" * 40)
    with pytest.raises(Exception) as ei:
        stoker_mod.Loader(url, 4, size=32, cache=str(tmp_path / "c"))
    msg = str(ei.value)
    assert os.environ["AWS_ENDPOINT_URL"] in msg and "SignatureDoesNotMatch" in msg, msg


def test_dataloader_imagefolder_s3(stoker_mod, s3_dataset, tmp_path):
    """stoker.ImageFolder("s3://...") feeds torch's DataLoader and stoker.DataLoader alike:
    the same eval batches, as from the local packed copy."""
    torch = pytest.importorskip("torch")
    T = pytest.importorskip("torchvision.transforms")
    from torch.utils.data import DataLoader as TorchDataLoader
    url, local, _ = s3_dataset
    tf = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()])
    ds = stoker_mod.ImageFolder(url, tf, cache=str(tmp_path / "c"))
    ref = stoker_mod.ImageFolder(local, tf)
    assert len(ds) == len(ref) and ds.classes == ref.classes
    ours = stoker_mod.DataLoader(ds, batch_size=5)
    a, b = list(ours), list(TorchDataLoader(ref, batch_size=5))
    assert len(a) == len(b)
    for (x, y), (u, v) in zip(a, b):
        assert torch.equal(x, u) and torch.equal(y, v)
    ours.close()
