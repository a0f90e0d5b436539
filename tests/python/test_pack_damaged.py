# SPDX-License-Identifier: MIT
"""stoker.pack from Python: a JPEG that does not decode fully is skipped (``skipped``) unless
``keep_damaged=True`` stores it byte for byte (``kept_damaged``); a .gif in an ImageFolder is
left out as torchvision's ImageFolder leaves it (``ignored``); all of them are named in
pack-report.tsv. A DST whose lock another pack holds raises StokerIOError (errno EBUSY) naming
that pack's pid, at once, and writes nothing."""

import errno
import fcntl
import io
import os

import pytest

import stoker

Image = pytest.importorskip("PIL.Image")

GIF = bytes.fromhex("474946383961010001008000000000ffffff21f90401000000002c00000000010001000002024401003b")


def jpeg(w, h):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 7) % 256, (y * 5) % 256, (x * y) % 256) for y in range(h) for x in range(w)])
    b = io.BytesIO()
    im.save(b, "JPEG", quality=90)
    return b.getvalue()


def make_src(root):
    c = root / "c"
    c.mkdir(parents=True)
    good = jpeg(96, 64)
    cut = good[: len(good) * 2 // 3]
    (c / "a_good.jpg").write_bytes(good)
    (c / "b_cut.jpg").write_bytes(cut)
    (c / "c_anim.gif").write_bytes(GIF)
    return good, cut


def report(dst):
    return dict(line.split("\t", 1) for line in (dst / "pack-report.tsv").read_text().splitlines())


def test_damaged_skipped_or_kept_and_gif_named(tmp_path):
    src = tmp_path / "src"
    good, cut = make_src(src)
    r = stoker.pack(src, tmp_path / "d1", threads=1)
    assert (r["records"], r["skipped"], r["kept_damaged"], r["ignored"]) == (1, 1, 0, 1), r
    rep = report(tmp_path / "d1")
    assert rep[str(src / "c" / "b_cut.jpg")] == "damaged JPEG: truncated: Premature end of JPEG file"
    assert rep[str(src / "c" / "c_anim.gif")].startswith("extension .gif is not one of torchvision")
    with stoker.Dataset(tmp_path / "d1") as ds:
        assert len(ds) == 1 and ds[0][0] == good

    r = stoker.pack(src, tmp_path / "d2", threads=1, keep_damaged=True)
    assert (r["records"], r["skipped"], r["kept_damaged"], r["ignored"]) == (2, 0, 1, 1), r
    rep = report(tmp_path / "d2")
    assert rep[str(src / "c" / "b_cut.jpg")] == "kept-damaged: damaged JPEG: truncated: Premature end of JPEG file"
    with stoker.Dataset(tmp_path / "d2") as ds:
        assert [ds[i][0] for i in range(len(ds))] == [good, cut]


def test_locked_dst_raises_ebusy_naming_the_holder(tmp_path):
    src = tmp_path / "src"
    make_src(src)
    dst = tmp_path / "dst"
    dst.mkdir()
    with open(dst / ".stoker-pack.lock", "w") as f:   # what a running pack holds
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write("%d\n" % os.getpid())
        f.flush()
        with pytest.raises(stoker.StokerIOError) as e:
            stoker.pack(src, dst, threads=1)
        assert e.value.errno == errno.EBUSY
        assert "is being packed by pid %d" % os.getpid() in str(e.value)
        assert sorted(os.listdir(dst)) == [".stoker-pack.lock"]
    r = stoker.pack(src, dst, threads=1)   # the lock released: packs
    assert r["records"] == 1
    assert not (dst / ".stoker-pack.lock").exists()
