# SPDX-License-Identifier: MIT
"""stoker.DataLoader through Hugging Face Accelerate (CPU): prepare(loader) and
skip_first_batches(loader, k) keep stoker decoding (the loader Accelerate rebuilds is a
stoker.DataLoader over Accelerate's own sharded batch sampler; its stoker.Loader counts the
decoded images) and yield exactly the batches Accelerate yields over torch's DataLoader for the
same dataset (eval transform: bit-exact; shuffled alike from the same seed), the skip dropping
exactly the first k; with 2 processes (torchrun, gloo) each process reads Accelerate's share:
disjoint but for Accelerate's own even_batches padding, together the dataset.
Needs Accelerate (the torch 2.x venv): skipped where it is not installed."""

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import SUBPROCESS_ENV, make_imagefolder, torch_or_skip
from conftest import free_port as _free_port

torch = torch_or_skip()
accelerate = pytest.importorskip("accelerate", reason="Accelerate is not installed for this "
                                 "Python (it runs in the torch 2.x venv: scripts/venv-torch2.sh)")
T = pytest.importorskip("torchvision.transforms")

# Run in each process (and in this one for the single-process case): for shuffle off and on,
# the same calls on Accelerate over torch's DataLoader and over stoker.DataLoader, the global
# seed reset before each prepare (with several processes Accelerate seeds the sampler's
# generator from it and draws the sampler, as stoker.DataLoader then does too: the same order).
JOB = textwrap.dedent(r'''
    import hashlib, json, sys
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    import accelerate
    import stoker

    def run(root):
        acc = accelerate.Accelerator(cpu=True)
        ds = ImageFolder(root, T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()]))
        which = {hashlib.sha1(ds[i][0].numpy().tobytes()).hexdigest(): i for i in range(len(ds))}
        ids = lambda batches: [[which[hashlib.sha1(x.numpy().tobytes()).hexdigest()] for x in b[0]]
                               for b in batches]
        res = {"rank": acc.process_index, "world": acc.num_processes}
        for shuffle in (False, True):
            got = {}
            for kind in ("torch", "stoker"):
                cls = stoker.DataLoader if kind == "stoker" else torch.utils.data.DataLoader
                dl = cls(ds, batch_size=4, shuffle=shuffle, num_workers=1)
                torch.manual_seed(5)
                prepared = acc.prepare(dl)
                e0, e1 = list(prepared), list(prepared)
                skipped = acc.skip_first_batches(prepared, 1)
                sk = list(skipped)
                got[kind] = dict(e0=e0, e1=e1, sk=sk, len=len(prepared), sklen=len(skipped))
                if kind == "stoker":
                    base, sbase = prepared.base_dataloader, skipped.base_dataloader
                    assert type(base) is stoker.DataLoader, type(base)
                    assert type(sbase) is stoker.DataLoader, type(sbase)
                    n0 = sum(len(b[1]) for b in e0 + e1)
                    assert base.loader.stats()["decode"]["items"] >= n0, base.loader.stats()
                    assert sbase.loader.stats()["decode"]["items"] >= sum(len(b[1]) for b in sk)
                    assert not dl.loader.stats()["started"]    # the unprepared one never ran
                    dl.close(); base.close(); sbase.close()
            a, b = got["torch"], got["stoker"]
            for key in ("e0", "e1", "sk"):
                assert len(a[key]) == len(b[key]), (shuffle, key)
                if shuffle and acc.num_processes == 1:
                    # one process: Accelerate keeps the loader's own sampler, and
                    # stoker.DataLoader's shuffle is its library's permutation (not randperm;
                    # torch's draws from the global RNG at each pass, stoker's does not)
                    seen = sum(ids(b[key]), [])
                    assert len(set(seen)) == len(seen) == sum(len(y) for _, y in a[key])
                    continue
                for (xa, ya), (xb, yb) in zip(a[key], b[key]):
                    assert torch.equal(xa, xb) and torch.equal(ya, yb), (shuffle, key)
            assert a["len"] == b["len"] and a["sklen"] == b["sklen"] == b["len"] - 1
            res["shuffle" if shuffle else "plain"] = dict(
                e0=ids(b["e0"]), e1=ids(b["e1"]), sk=ids(b["sk"]), len=b["len"])
        return res

    if __name__ == "__main__":
        res = run(sys.argv[1])
        with open("%s/rank%d.json" % (sys.argv[2], res["rank"]), "w") as f:
            json.dump(res, f)
''')


def _load_job(tmp_path):
    path = tmp_path / "accel_job.py"
    path.write_text(JOB)
    sys.path.insert(0, str(tmp_path))
    try:
        import accel_job
    finally:
        sys.path.remove(str(tmp_path))
    return accel_job


def test_single_process_prepare_and_skip_keep_stoker(tmp_path):
    root = tmp_path / "data"
    make_imagefolder(str(root), per_class=(5, 4, 4), seed=2)       # 13 samples, 4 batches
    res = _load_job(tmp_path).run(str(root))
    plain = res["plain"]
    assert plain["e0"] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12]]
    assert plain["e1"] == plain["e0"] and plain["sk"] == plain["e0"][1:]
    e0, e1 = res["shuffle"]["e0"], res["shuffle"]["e1"]
    assert sorted(sum(e0, [])) == list(range(13)) and sorted(sum(e1, [])) == list(range(13))
    assert e0 != e1 and e0 != plain["e0"]


def test_prepared_mix_collate_stays_in_place(tmp_path):
    """A MixUp passed as collate_fn survives Accelerate's rebuild (soft targets, stoker's)."""
    import stoker
    from torchvision.datasets import ImageFolder
    root = tmp_path / "data"
    make_imagefolder(str(root), per_class=(5, 4, 4), seed=3)
    ds = ImageFolder(str(root), T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor()]))
    dl = stoker.DataLoader(ds, batch_size=4, collate_fn=stoker.MixUp(alpha=0.4, num_classes=3))
    prepared = accelerate.Accelerator(cpu=True).prepare(dl)
    assert type(prepared.base_dataloader) is stoker.DataLoader
    x, y = next(iter(prepared))
    assert y.dtype == torch.float32 and tuple(y.shape) == (4, 3)
    assert torch.allclose(y.sum(1), torch.ones(4))
    dl.close()
    prepared.base_dataloader.close()


def test_two_processes_shard_like_accelerate(tmp_path):
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed not available")
    root = tmp_path / "data"
    make_imagefolder(str(root), per_class=(7, 6, 6), seed=5)        # 19 samples
    n = 19
    script = tmp_path / "accel_job.py"
    script.write_text(JOB)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in SUBPROCESS_ENV.items() if k not in ("RANK", "WORLD_SIZE")}
    env["OMP_NUM_THREADS"] = "1"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--master_addr",
                        "127.0.0.1", "--master_port", str(_free_port()), "--nproc_per_node", "2",
                        "--redirects", "3", "--log_dir", str(tmp_path / "logs"),
                        str(script), str(root), str(out)],
                       env=env, capture_output=True, text=True, timeout=300)
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs").rglob("std*.log")))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:] + logs[-4000:]
    ranks = [json.loads((out / ("rank%d.json" % k)).read_text()) for k in range(2)]
    assert [x["world"] for x in ranks] == [2, 2]
    for kind in ("plain", "shuffle"):
        for key in ("e0", "e1"):
            a, b = (sum(x[kind][key], []) for x in ranks)
            # 5 batches of 4 over 19 samples, padded by Accelerate (even_batches) to 3 per rank
            assert len(a) == len(b) == 12, (kind, key)
            assert set(a) | set(b) == set(range(n)), (kind, key)
            assert len(a) + len(b) - len(set(a) | set(b)) == 24 - n, (kind, key)
        for x in ranks:
            assert x[kind]["len"] == 3
            assert x[kind]["sk"] == x[kind]["e0"][1:] or kind == "shuffle"
    assert sum(ranks[0]["plain"]["e0"], []) == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 0]
    assert ranks[0]["shuffle"]["e0"] != ranks[0]["shuffle"]["e1"]


def test_accelerate_imported_after_the_loader(tmp_path):
    """accelerate imported only after the stoker.DataLoader is built: still stoker's."""
    root = tmp_path / "data"
    make_imagefolder(str(root), per_class=(3, 3, 2), seed=4)
    code = textwrap.dedent('''
        import sys
        import torchvision.transforms as T
        from torchvision.datasets import ImageFolder
        import stoker
        ds = ImageFolder(sys.argv[1], T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()]))
        dl = stoker.DataLoader(ds, batch_size=3)
        assert "accelerate" not in sys.modules
        import accelerate
        p = accelerate.Accelerator(cpu=True).prepare(dl)
        assert type(p.base_dataloader) is stoker.DataLoader, type(p.base_dataloader)
        assert [y.tolist() for _, y in p] == [[0, 0, 0], [1, 1, 1], [2, 2]]
        print("ok")
    ''')
    r = subprocess.run([sys.executable, "-c", code, str(root)], env=SUBPROCESS_ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
