# SPDX-License-Identifier: MIT
"""`stoker pack` labels and orders an ImageFolder exactly as torchvision.datasets.ImageFolder does
(class_to_idx and the order of samples), on names chosen to trip a naive implementation: mixed
case, dashes vs slashes in nested folders, unicode, upper-case and non-JPEG extensions, files
with no image extension, hidden and symlinked class folders. The packed records are read back
with python-lmdb (source path from the `sources` database, label from the record header)."""

import os
import struct
import subprocess

import numpy as np
import pytest

from conftest import jpeg_bytes

lmdb = pytest.importorskip("lmdb")
tv_folder = pytest.importorskip("torchvision.datasets.folder")


def stoker_cli():
    exe = os.environ.get("STOKER")
    if not exe or not os.path.exists(exe):
        pytest.skip("STOKER (the CLI) not set")
    return exe


FILES = [
    # (path under root, is an image by extension)
    "B/x.jpg", "a/1.jpg", "a/10.JPG", "a/2.jpeg", "a/Z.Jpeg", "a/_u.jpg",
    "a-b/q.jpg", "a_b/q.jpg", "a.b/q.jpg",
    "nested/x/y/1.jpg", "nested/x-y/1.jpg", "nested/x/1.jpg", "nested/x.y/1.jpg", "nested/x0/1.jpg",
    "nested/X/1.jpg", "nested/1.jpg", "nested/x/y/z/deep.jpg", "nested/x/y-z/d.jpg",
    "été/ä.jpg", "été/a.jpg", "été/z.jpg", "été/Ä.jpg", "zz/日本.jpg", "zz/ascii.jpg",
    "Été/e.jpg", "émeu/é.jpg",
    ".hidden/h.jpg", " space/s.jpg", "exts/a.png", "exts/b.PNG", "exts/c.webp", "exts/d.tiff",
    "exts/e.bmp", "exts/f.jpeg", "exts/g.ppm", "exts/h.pgm", "exts/i.tif",
]
IGNORED = ["a/notes.txt", "a/noext", "nested/x/readme.md", "root_file.jpg"]


def build_tree(root, with_empty=False):
    rng = np.random.default_rng(3)
    data = jpeg_bytes(rng, 16, 16)
    for i, rel in enumerate(FILES + IGNORED):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        # every file holds JPEG bytes (the extension decides what is listed), unique per file
        p.write_bytes(data + i.to_bytes(4, "little"))
    # a class folder that is a symlink to a directory elsewhere
    other = root.parent / (root.name + "-elsewhere")
    (other / "inner").mkdir(parents=True)
    (other / "inner" / "l.jpg").write_bytes(data + b"link")
    (other / "k.jpg").write_bytes(data + b"link2")
    os.symlink(other, root / "linked")
    if with_empty:
        (root / "m_empty").mkdir()
        (root / "m_only_text").mkdir()
        (root / "m_only_text" / "t.txt").write_text("x")


def pack_and_read(exe, root, dst):
    r = subprocess.run([exe, "pack", str(root), str(dst), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    names = sorted(p for p in os.listdir(dst) if p.startswith("shard-") and p.endswith(".lmdb"))
    samples, classes = [], None
    for name in names:
        env = lmdb.open(str(dst / name), subdir=False, readonly=True, lock=False, max_dbs=3)
        recs = env.open_db(b"records", create=False)
        meta = env.open_db(b"meta", create=False)
        srcs = env.open_db(b"sources", create=False)
        with env.begin() as txn:
            classes = txn.get(b"classes", db=meta).decode().split("\n")
            for key, value in txn.cursor(db=recs):
                label = struct.unpack("<i", value[4:8])[0]
                samples.append((txn.get(key, db=srcs).decode(), label))
        env.close()
    return classes, samples


def test_same_as_torchvision(tmp_path):
    exe = stoker_cli()
    root = tmp_path / "root"
    root.mkdir()
    build_tree(root)
    ds = tv_folder.ImageFolder(str(root))
    classes, samples = pack_and_read(exe, root, tmp_path / "ds")
    assert classes == ds.classes
    assert {c: i for i, c in enumerate(classes)} == ds.class_to_idx
    want = [(os.path.relpath(p, root), t) for p, t in ds.samples]
    assert samples == want
    # the traps are really in the expected order (not just equal by luck)
    rel = [s for s, _ in samples]
    # directory "nested/x" itself first, then "x-y" and "x.y" ('-' and '.' sort before '/'), then "x/y"
    assert rel.index("nested/x/1.jpg") < rel.index("nested/x-y/1.jpg") < rel.index("nested/x.y/1.jpg") \
        < rel.index("nested/x/y/1.jpg")
    assert rel.index("nested/x/y/1.jpg") < rel.index("nested/x/y-z/d.jpg") < rel.index("nested/x/y/z/deep.jpg")
    assert classes.index(" space") == 0 and classes.index("B") < classes.index("a")


def test_empty_classes_kept(tmp_path):
    """torchvision raises on a class without images; stoker keeps the class (its label counts, as
    class_to_idx says) and packs the others with the same labels."""
    exe = stoker_cli()
    root = tmp_path / "root"
    root.mkdir()
    build_tree(root, with_empty=True)
    with pytest.raises(FileNotFoundError):
        tv_folder.ImageFolder(str(root))
    tv_classes, class_to_idx = tv_folder.find_classes(str(root))
    assert "m_empty" in tv_classes and "m_only_text" in tv_classes
    idx = {c: i for i, c in enumerate(tv_classes)}
    nonempty = {c: i for c, i in class_to_idx.items() if not c.startswith("m_")}
    want = [(os.path.relpath(p, root), t) for p, t in
            tv_folder.make_dataset(str(root), nonempty, extensions=tv_folder.IMG_EXTENSIONS)]
    classes, samples = pack_and_read(exe, root, tmp_path / "ds")
    assert classes == tv_classes
    assert samples == want
    assert all(idx[s.split("/")[0]] == t for s, t in samples)
