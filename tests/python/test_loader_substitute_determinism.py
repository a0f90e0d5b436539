# SPDX-License-Identifier: MIT
"""The substitute of a bad record is a pure function of (seed, epoch, record): the batches —
images, labels, indices — are the same with 1 or 3 decode workers and after a resume from a
state_dict, train mode (random crops and flips) included."""

import warnings

import numpy as np

from conftest import assert_same_for_workers_and_resume, jpeg_bytes, torch_or_skip, write_dataset


def test_substitutes_same_for_any_worker_count_and_after_resume(stoker_mod, tmp_path):
    torch_or_skip()
    rng = np.random.default_rng(8)
    items = [(jpeg_bytes(rng, 50 + k % 7, 44), k % 4) for k in range(40)]
    for k in (2, 9, 10, 27, 33):
        items[k] = (b"plain text, not an image", items[k][1])
    path = write_dataset(str(tmp_path / "ds"), items)

    def open_loader(workers):
        return stoker_mod.Loader(path, 6, size=20, workers=workers, seed=11, epoch=1,
                                 return_index=True, max_bad_fraction=0.2)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stoker_mod.BadRecordWarning)
        assert_same_for_workers_and_resume(open_loader, counts=(1, 3))
        with open_loader(2) as loader:       # the substitutes are records' samples, not grey
            for images, labels, idx in loader:
                for x, y, i in zip(images.numpy(), labels.numpy(), idx.numpy()):
                    if i in (2, 9, 10, 27, 33):
                        assert not (x == 128).all() and y >= 0
