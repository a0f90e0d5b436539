# SPDX-License-Identifier: MIT
"""stoker.pack(labels=..., max_line=...): among indices 0,1,2,10 a -1 is a bad line and the rest
keep their labels (before, every label became a class name: 0,1,2,10 packed as 1,2,4,3); a word
among numbers raises naming both lines; labels="names" and "index" say what they are; a line
longer than max_line is a bad line; bad values raise ValueError."""

import os

import numpy as np
import pytest

from conftest import jpeg_bytes


@pytest.fixture()
def images(tmp_path):
    rng = np.random.default_rng(3)
    paths = []
    for i in range(5):
        p = tmp_path / ("img%d.jpg" % i)
        p.write_bytes(jpeg_bytes(rng, 24, 20))
        paths.append(str(p))
    return paths


def _csv(tmp_path, images, odd):
    m = tmp_path / "m.csv"
    rows = zip(images, ["0", "1", odd, "2", "10"])
    m.write_text("path,label\n" + "".join("%s,%s\n" % r for r in rows))
    return str(m)


def _labels(stoker_mod, dst):
    with stoker_mod.Dataset(dst) as ds:
        return sorted(ds.read(i)[1] for i in range(len(ds)))


@pytest.mark.parametrize("odd", ["-1", "+3", "1.0", "99999999999", str(2 ** 70)])
def test_numeric_non_index_is_a_bad_line(stoker_mod, tmp_path, images, odd):
    dst = str(tmp_path / "ds")
    res = stoker_mod.pack(_csv(tmp_path, images, odd), dst, threads=1)
    assert res["bad_lines"] == 1 and res["classes"] == 0
    assert _labels(stoker_mod, dst) == [0, 1, 2, 10]
    report = open(os.path.join(dst, "pack-report.tsv")).read()
    assert "m.csv line 4\tlabel `%s` is not a class index 0..2147483647" % odd in report


def test_mixed_raises_and_modes(stoker_mod, tmp_path, images):
    m = _csv(tmp_path, images, "2**70")
    with pytest.raises(stoker_mod.StokerError, match=r"line 4: `2\*\*70`.*labels=\"index\""):
        stoker_mod.pack(m, str(tmp_path / "a"), threads=1)
    res = stoker_mod.pack(m, str(tmp_path / "b"), threads=1, labels="index")
    assert res["bad_lines"] == 1 and _labels(stoker_mod, str(tmp_path / "b")) == [0, 1, 2, 10]
    res = stoker_mod.pack(m, str(tmp_path / "c"), threads=1, labels="names")
    assert res["bad_lines"] == 0 and res["classes"] == 5
    with stoker_mod.Dataset(str(tmp_path / "c")) as ds:
        assert ds.classes == ["0", "1", "10", "2", "2**70"]
    with pytest.raises(ValueError, match="labels must be one of"):
        stoker_mod.pack(m, str(tmp_path / "d"), labels="numbers")


def test_max_line(stoker_mod, tmp_path, images):
    m = _csv(tmp_path, images, "x" * 5000)
    res = stoker_mod.pack(m, str(tmp_path / "a"), threads=1, max_line=4096)
    assert res["bad_lines"] == 1 and _labels(stoker_mod, str(tmp_path / "a")) == [0, 1, 2, 10]
    report = open(os.path.join(str(tmp_path / "a"), "pack-report.tsv")).read()
    assert "m.csv line 4\tthe line is longer than 4 KiB" in report
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="max_line"):
            stoker_mod.pack(m, str(tmp_path / "b"), max_line=bad)
