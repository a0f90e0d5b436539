# SPDX-License-Identifier: MIT
"""device="cuda": batches on the GPU through __cuda_array_interface__, ordered on torch's current
stream, equal to the host pipeline's output. Skipped without a CUDA build or device."""

import pytest

from conftest import torch_or_skip

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


@pytest.fixture
def cuda(stoker_mod):
    torch = torch_or_skip()
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    if not stoker_mod.has_cuda():
        pytest.skip("libstoker built without CUDA or sees no device")
    return torch


@pytest.mark.parametrize("dtype,layout", [("uint8", "NCHW"), ("float16", "NCHW"),
                                          ("float32", "NHWC"), ("bfloat16", "NCHW")])
def test_device_batches_equal_host_batches(stoker_mod, shards, cuda, dtype, layout):
    torch = cuda
    path, labels = shards
    norm = {} if dtype == "uint8" else {"mean": MEAN, "std": STD}
    kw = dict(size=32, workers=2, return_index=True, seed=12, dtype=dtype, layout=layout, **norm)
    side = torch.cuda.Stream()
    with stoker_mod.Loader(path, 8, device="cpu", **kw) as host, \
            stoker_mod.Loader(path, 8, device="cuda:0", **kw) as dev:
        seen = []
        with torch.cuda.stream(side):          # a non-default current stream
            for (h, hl, hi), (d, dl, di) in zip(host, dev):
                assert d.is_cuda and d.device.index == 0 and not h.is_cuda
                assert d.dtype == h.dtype and d.shape == h.shape
                assert torch.equal(hl, dl) and torch.equal(hi, di)
                out = d.float().cpu()          # queued on `side`, after the batch is ready
                if dtype == "uint8":
                    assert torch.equal(out, h.float())
                else:   # GPU conversion vs CPU conversion: the same formula, 1 ulp at most
                    tol = {"float16": 2.0 ** -9 * 4, "bfloat16": 2.0 ** -6 * 4,
                           "float32": 1e-6}[dtype]
                    assert (out - h.float()).abs().max().item() <= tol
                seen.extend(di.tolist())
        assert sorted(seen) == list(range(len(labels)))
        st = dev.stats()
        assert st["device"] == 0 and st["h2d_bytes"] > 0


def test_cuda_batch_survives_until_the_next_step(stoker_mod, shards, cuda):
    torch = cuda
    path, _ = shards
    with stoker_mod.Loader(path, 8, size=32, device="cuda", seed=1, array="torch") as dev, \
            stoker_mod.Loader(path, 8, size=32, device="cpu", seed=1) as host:
        for (d, _), (h, _) in zip(dev, host):
            torch.cuda._sleep(1000000)         # keep the stream busy: release must wait for it
            total = d.sum()
            assert total.item() == h.sum().item()
