# SPDX-License-Identifier: MIT
"""Manifests and per-record targets through the Python binding.

stoker.pack reads CSV, TSV and JSON Lines manifests (class names, label lists, value vectors of
every target type); the targets come back through stoker.Dataset, through stoker.Loader (every
record once per epoch, each sample's row equal to its manifest line's) and through python-lmdb
alone, following docs/FORMAT.md ("Targets"). Bad manifest lines are reported with their file and
line, or fatal under strict. A dataset without targets behaves as before targets existed.

Images are real JPEGs written with PIL; each one is unique, so a record's payload names the
manifest line it came from.
"""

import hashlib
import importlib.util
import io
import json
import os
import struct

import numpy as np
import pytest

from conftest import jpeg_bytes

HAVE_TORCH = importlib.util.find_spec("torch") is not None
TYPES = ["uint8", "int32", "int64", "float32", "float64"]
NAMES = ["cat", "dog", "eel"]   # class names the manifests use (sorted: label = position)


# ---- helpers ---------------------------------------------------------------------------------
def make_images(root, n, seed, big=False):
    """N unique JPEGs under ROOT/img (some in a subfolder): [(path relative to ROOT, bytes)]."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        rel = "img/%s%03d.jpg" % ("sub/" if i % 4 == 1 else "", i)
        if big:
            # noise compresses badly: about 1/4 MiB each, so that 1 MiB shards split the dataset
            from PIL import Image
            px = rng.integers(0, 256, size=(300, 400, 3), dtype=np.uint8)
            buf = io.BytesIO()
            Image.fromarray(px, "RGB").save(buf, "JPEG", quality=95)
            data = buf.getvalue()
        else:
            data = jpeg_bytes(rng, 40 + (i * 7) % 50, 36 + (i * 11) % 40, gray=(i % 9 == 4),
                              subsampling=i % 3)
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        out.append((rel, data))
    return out


def sha(data):
    return hashlib.sha1(bytes(data)).hexdigest()


def manifest_rows(ds, images):
    """For each dataset index, the position in IMAGES of the image its record holds."""
    where = {sha(data): k for k, (_rel, data) in enumerate(images)}
    return [where[sha(ds.read(i)[0])] for i in range(len(ds))]


def as_np(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def epoch(stoker, path, *, shuffle, batch_size=4, **kw):
    """One eval epoch with return_index=True: the batches as tuples of NumPy arrays (images
    dropped), and the raw first batch (to check types)."""
    out = []
    first = None
    with stoker.Loader(path, batch_size, train=False, size=24, resize=24, shuffle=shuffle,
                       seed=11, return_index=True, workers=2, **kw) as loader:
        for batch in loader:
            if first is None:
                first = batch
            out.append(tuple(as_np(x) for x in batch[1:]))
    return out, first


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)
    return str(path)


def torch_dtype(name):
    torch = pytest.importorskip("torch")
    return {"uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
            "float32": torch.float32, "float64": torch.float64}[name]


def check_delivery(stoker, path, expected, *, shuffle, labels=None, **kw):
    """Every record once in the epoch; each sample's target row = EXPECTED[its index]; with
    LABELS (target='both') its label too. Returns the epoch's order."""
    batches, first = epoch(stoker, path, shuffle=shuffle, **kw)
    order = []
    for batch in batches:
        idx = batch[-1]
        rows = batch[-2]
        assert rows.shape == (len(idx), expected.shape[1]), rows.shape
        assert rows.dtype == expected.dtype
        np.testing.assert_array_equal(rows, expected[idx])
        if labels is not None:
            assert len(batch) == 3      # labels, targets, index
            np.testing.assert_array_equal(batch[0], labels[idx])
        else:
            assert len(batch) == 2      # targets, index
        order.extend(int(i) for i in idx)
    assert sorted(order) == list(range(len(expected)))
    assert [len(b[-1]) for b in batches] == [4] * (len(expected) // 4) + (
        [len(expected) % 4] if len(expected) % 4 else [])
    return order, first


# ---- value targets of every type ---------------------------------------------------------------
def value_rows(dtype, n, seed):
    """N rows of 3 values each that DTYPE holds, its extremes among them."""
    rng = np.random.default_rng(seed)
    extremes = {
        "uint8": [[0, 255, 1], [255, 0, 128]],
        "int32": [[-2 ** 31, 2 ** 31 - 1, 0], [-1, 1, 123456789]],
        "int64": [[-2 ** 63, 2 ** 63 - 1, 2 ** 53 + 1], [-(2 ** 53) - 3, 0, 7]],
        "float32": [[3.0e38, -1.0e-30, 0.1], [-2.5, 1.0 / 3.0, 16777217.0]],
        "float64": [[1.0e300, 5e-324, 0.1], [-2.5, 1.0 / 3.0, 2.0 ** 60 + 1]],
    }[dtype]
    rows = list(extremes)
    while len(rows) < n:
        if dtype == "uint8":
            rows.append([int(v) for v in rng.integers(0, 256, 3)])
        elif dtype in ("int32", "int64"):
            bound = 2 ** 31 if dtype == "int32" else 2 ** 62
            rows.append([int(v) for v in rng.integers(-bound, bound, 3)])
        else:
            rows.append([float(v) for v in rng.normal(0, 1000, 3)])
    return rows


def num_text(v):
    return str(v) if isinstance(v, int) else repr(v)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("dtype", TYPES)
def test_value_targets_round_trip(tmp_path, stoker_mod, dtype, fmt):
    """Value fields of each type: the dataset, the loader (shuffle off and on) and the labels
    of target='both' all give back the manifest's rows."""
    stoker = stoker_mod
    n = 13
    images = make_images(str(tmp_path), n, seed=TYPES.index(dtype) + 10 * (fmt == "csv"))
    rows = value_rows(dtype, n, seed=5)
    names = [NAMES[(2 * k + 1) % 3] for k in range(n)]
    if fmt == "csv":
        # x: one number per cell; v: two numbers in one cell, split at label_sep
        text = "path,label,x,v\n" + "".join(
            '%s,%s,%s,"%s;%s"\n' % (rel, name, num_text(r[0]), num_text(r[1]), num_text(r[2]))
            for (rel, _d), name, r in zip(images, names, rows))
        manifest = write_text(tmp_path / "m.csv", text)
        kw = {"label_sep": ";"}
    else:
        # v: a JSON array
        text = "".join(json.dumps({"path": rel, "label": name, "x": r[0], "v": r[1:]}) + "\n"
                       for (rel, _d), name, r in zip(images, names, rows))
        manifest = write_text(tmp_path / "m.jsonl", text)
        kw = {}
    dst = str(tmp_path / "ds")
    res = stoker.pack(manifest, dst, target_fields=["x", "v"], target_type=dtype, threads=2,
                      **kw)
    assert res["records"] == n and res["bad_lines"] == 0 and res["skipped"] == 0
    assert res["classes"] == 3

    want = np.array(rows, dtype=np.dtype(dtype))
    with stoker.Dataset(dst) as ds:
        assert ds.target_info == {"dtype": np.dtype(dtype), "kind": "values", "size": 3,
                                  "classes": 0}
        assert ds.info()["target"] == ds.target_info
        assert ds.classes == NAMES
        order = manifest_rows(ds, images)
        assert order == list(range(n)), "records in manifest order"
        expected = want[order]
        got = ds.targets()
        assert got.dtype == np.dtype(dtype) and got.shape == (n, 3)
        np.testing.assert_array_equal(got, expected)
        for i in range(n):
            t = ds.target(i)
            assert t.dtype == np.dtype(dtype) and t.shape == (3,)
            np.testing.assert_array_equal(t, expected[i])
        np.testing.assert_array_equal(ds.target(-1), expected[-1])
        with pytest.raises(IndexError):
            ds.target(n)
        labels = np.array([NAMES.index(names[k]) for k in order], dtype=np.int64)
        assert [ds.read(i)[1] for i in range(n)] == list(labels)

    orders = []
    for shuffle in (False, True):
        o, first = check_delivery(stoker, dst, expected, shuffle=shuffle)
        orders.append(o)
        if not shuffle:
            assert o == list(range(n))
        if HAVE_TORCH:
            assert first[1].dtype == torch_dtype(dtype)
            assert first[-1].dtype == torch_dtype("int64")
        else:
            assert first[1].dtype == np.dtype(dtype)
    assert orders[0] != orders[1], "shuffle=True permutes the epoch"
    # target='both': labels (from the class names) before the targets
    check_delivery(stoker, dst, expected, shuffle=True, target="both", labels=labels)
    # target='label': today's (images, labels[, index])
    batches, _ = epoch(stoker, dst, shuffle=False, target="label")
    assert all(len(b) == 2 for b in batches)
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), labels)


def test_value_targets_numpy_arrays(tmp_path, stoker_mod):
    """array='numpy': targets are NumPy arrays of the target type (a copy that outlives the
    batch: copy=True releases it before the tuple is returned)."""
    stoker = stoker_mod
    images = make_images(str(tmp_path), 9, seed=3)
    rows = value_rows("float64", 9, seed=2)
    text = "".join(json.dumps({"path": rel, "y": r}) + "\n" for (rel, _d), r in zip(images, rows))
    manifest = write_text(tmp_path / "m.ndjson", text)
    dst = str(tmp_path / "ds")
    res = stoker.pack(manifest, dst, target_fields="y", target_type=np.float64, labels="none")
    assert res["records"] == 9 and res["classes"] == 0
    with stoker.Dataset(dst) as ds:
        expected = np.array(rows)[manifest_rows(ds, images)]
        # unlabelled by request (labels="none"): every label is -1
        assert [ds.read(i)[1] for i in range(9)] == [-1] * 9
    for copy in (False, True):
        _o, first = check_delivery(stoker, dst, expected, shuffle=True, array="numpy", copy=copy)
        assert isinstance(first[1], np.ndarray) and first[1].dtype == np.float64


# ---- class names: CSV with a classes file, TSV ------------------------------------------------
def test_csv_class_names_and_quoting(tmp_path, stoker_mod):
    """A CSV whose labels are class names looked up in a classes file (its order, not the sorted
    one; a class nobody uses still counts), RFC 4180 quoting in paths, value targets; labels
    through Dataset and Loader(target='both')."""
    stoker = stoker_mod
    images = make_images(str(tmp_path), 10, seed=21)
    # a file name with a comma and a quote: quoted in the CSV
    odd = "img/odd, \"name\".jpg"
    os.rename(os.path.join(str(tmp_path), images[3][0]), os.path.join(str(tmp_path), odd))
    images[3] = (odd, images[3][1])
    classes = ["zebra", "ant", "mole", "bee"]
    classes_file = write_text(tmp_path / "classes.txt", "\n".join(classes) + "\n")
    names = ["ant", "bee", "zebra", "ant", "bee", "zebra", "bee", "bee", "ant", "zebra"]
    lines = ["path,score,label"]
    for k, ((rel, _d), name) in enumerate(zip(images, names)):
        cell = '"%s"' % rel.replace('"', '""') if ("," in rel or '"' in rel) else rel
        lines.append("%s,%s,%s" % (cell, repr(k * 0.25 - 1.0), name))
    manifest = write_text(tmp_path / "m.csv", "\n".join(lines) + "\n")
    dst = str(tmp_path / "ds")
    res = stoker.pack(manifest, dst, classes=classes_file, target_fields="score")
    assert res["records"] == 10 and res["bad_lines"] == 0 and res["classes"] == 4
    want = np.array([[k * 0.25 - 1.0] for k in range(10)], dtype=np.float32)
    with stoker.Dataset(dst) as ds:
        assert ds.classes == classes
        assert ds.target_info["dtype"] == np.float32 and ds.target_info["size"] == 1
        order = manifest_rows(ds, images)
        labels = np.array([classes.index(names[k]) for k in order])
        assert [ds.read(i)[1] for i in range(10)] == list(labels)
        np.testing.assert_array_equal(ds.targets(), want[order])
    _o, first = check_delivery(stoker, dst, want[order], shuffle=True, target="both",
                               labels=labels)
    with stoker.Loader(dst, 4, train=False, size=24) as loader:
        assert loader.classes == classes
        assert loader.target_info["kind"] == "values"


def test_tsv_manifest(tmp_path, stoker_mod):
    """A TSV manifest (by its name) with other field names, class names from the manifest
    (sorted), a value cell split at ','."""
    stoker = stoker_mod
    images = make_images(str(tmp_path), 11, seed=31)
    names = [("wolf", "fox", "bear")[k % 3] for k in range(11)]
    vals = [[k, -k, 2 * k + 1] for k in range(11)]
    lines = ["file\temb\tspecies"] + ["%s\t%s\t%s" % (rel, ",".join(str(v) for v in val), name)
                                      for (rel, _d), val, name in zip(images, vals, names)]
    manifest = write_text(tmp_path / "m.tsv", "\n".join(lines) + "\n")
    dst = str(tmp_path / "ds")
    res = stoker.pack(manifest, dst, path_field="file", label_field="species",
                      target_fields=["emb"], target_type="int32", label_sep=",")
    assert res["records"] == 11 and res["bad_lines"] == 0
    with stoker.Dataset(dst) as ds:
        assert ds.classes == ["bear", "fox", "wolf"]
        order = manifest_rows(ds, images)
        assert [ds.classes[ds.read(i)[1]] for i in range(11)] == [names[k] for k in order]
        expected = np.array(vals, dtype=np.int32)[order]
        np.testing.assert_array_equal(ds.targets(), expected)
    for shuffle in (False, True):
        check_delivery(stoker, dst, expected, shuffle=shuffle)


# ---- label lists ---------------------------------------------------------------------------
def test_jsonl_multi_label(tmp_path, stoker_mod):
    """JSON Lines with a list of class names per image: an int32 label list padded with -1
    (the first label is the record's label), multi_hot=True gives the 0/1 rows, 'both' gives
    the labels, with torch and with NumPy."""
    stoker = stoker_mod
    n = 14
    images = make_images(str(tmp_path), n, seed=41)
    tags = ["sky", "sea", "tree", "road", "car"]
    lists = [[tags[(k + j * 2) % 5] for j in range(k % 4)] for k in range(n)]   # 0..3 labels
    text = "".join(json.dumps({"path": rel, "tags": lst}) + "\n"
                   for (rel, _d), lst in zip(images, lists))
    manifest = write_text(tmp_path / "m.jsonl", text)
    dst = str(tmp_path / "ds")
    res = stoker.pack(manifest, dst, label_field="tags", multi_label=True, threads=2)
    assert res["records"] == n and res["bad_lines"] == 0
    names = sorted(tags)
    idx_lists = [[names.index(t) for t in lst] for lst in lists]
    want = np.full((n, 3), -1, dtype=np.int32)
    hot = np.zeros((n, 5), dtype=np.float32)
    for k, lst in enumerate(idx_lists):
        want[k, :len(lst)] = lst
        hot[k, lst] = 1.0
    with stoker.Dataset(dst) as ds:
        assert ds.classes == names
        assert ds.target_info == {"dtype": np.dtype(np.int32), "kind": "labels", "size": 3,
                                  "classes": 5}
        order = manifest_rows(ds, images)
        np.testing.assert_array_equal(ds.targets(), want[order])
        first_labels = np.array([lst[0] if lst else -1 for lst in idx_lists])[order]
        assert [ds.read(i)[1] for i in range(n)] == list(first_labels)
    for shuffle in (False, True):
        check_delivery(stoker, dst, want[order], shuffle=shuffle)
        check_delivery(stoker, dst, hot[order], shuffle=shuffle, multi_hot=True)
        check_delivery(stoker, dst, hot[order], shuffle=shuffle, multi_hot=True, array="numpy")
    check_delivery(stoker, dst, hot[order], shuffle=True, multi_hot=True, target="both",
                   labels=first_labels)
    with stoker.Loader(dst, 4, train=False, size=24, multi_hot=True) as loader:
        assert loader.target_info == {"dtype": np.dtype(np.float32), "kind": "values",
                                      "size": 5, "classes": 0}
    with pytest.raises(ValueError, match="multi_hot"):
        stoker.Loader(dst, 4, multi_hot=True, target="label")


def test_csv_multi_label_with_classes_file(tmp_path, stoker_mod):
    """A CSV cell of several class names split at label_sep, looked up in a classes file:
    the multi-hot width is the file's class count."""
    stoker = stoker_mod
    images = make_images(str(tmp_path), 8, seed=51)
    classes = ["person", "bike", "dog", "cat", "bird", "boat"]
    classes_file = write_text(tmp_path / "c.txt", "\n".join(classes) + "\n")
    lists = [["dog"], ["cat", "person"], ["bike", "bird", "boat", "dog"], ["boat"], ["cat"],
             ["person", "bike"], ["bird"], ["dog", "cat"]]
    lines = ["path,labels"] + ["%s,%s" % (rel, "|".join(lst))
                               for (rel, _d), lst in zip(images, lists)]
    manifest = write_text(tmp_path / "m.csv", "\n".join(lines) + "\n")
    dst = str(tmp_path / "ds")
    res = stoker.pack(manifest, dst, label_field="labels", multi_label=True, label_sep="|",
                      classes=classes_file)
    assert res["records"] == 8 and res["classes"] == 6
    hot = np.zeros((8, 6), dtype=np.float32)
    for k, lst in enumerate(lists):
        hot[k, [classes.index(c) for c in lst]] = 1.0
    with stoker.Dataset(dst) as ds:
        assert ds.target_info["classes"] == 6 and ds.target_info["size"] == 4
        order = manifest_rows(ds, images)
        rows = ds.targets()
        for i, k in enumerate(order):
            got = [int(v) for v in rows[i] if v >= 0]
            assert got == [classes.index(c) for c in lists[k]]
            assert list(rows[i][len(got):]) == [-1] * (4 - len(got))
    check_delivery(stoker, dst, hot[order], shuffle=True, multi_hot=True)


# ---- the shard format, read by python-lmdb alone ------------------------------------------------
@pytest.mark.parametrize("case", ["int64", "float32", "uint8", "labels"])
def test_targets_read_with_python_lmdb(tmp_path, stoker_mod, case):
    """docs/FORMAT.md "Targets": meta target_dtype/size/kind(/classes) and a `targets` database
    keyed as `records`, K little-endian elements per value; over several shards."""
    lmdb = pytest.importorskip("lmdb")
    n = 10
    images = make_images(str(tmp_path), n, seed=61, big=True)
    if case == "labels":
        lists = [["b", "a"], [], ["c"], ["a", "b", "c"], ["c", "a"], ["b"], [], ["a"], ["c"],
                 ["b", "c"]]
        text = "".join(json.dumps({"path": rel, "label": lst}) + "\n"
                       for (rel, _d), lst in zip(images, lists))
        kw = {"multi_label": True}
        want = {rel: [ord(c) - ord("a") for c in lst] + [-1] * (3 - len(lst))
                for (rel, _d), lst in zip(images, lists)}
        # the record header's label: the list's first entry, -1 for an empty list
        header_label = {rel: want[rel][0] for rel in want}
        dtype, kind, size = "int32", "labels", 3
    else:
        rows = value_rows(case, n, seed=8)
        text = "".join(json.dumps({"path": rel, "label": k % 2, "t": r}) + "\n"
                       for k, ((rel, _d), r) in enumerate(zip(images, rows)))
        kw = {"target_fields": "t", "target_type": case}
        want = {rel: r for (rel, _d), r in zip(images, rows)}
        header_label = {rel: k % 2 for k, (rel, _d) in enumerate(images)}
        dtype, kind, size = case, "values", 3
    manifest = write_text(tmp_path / "m.jsonl", text)
    dst = tmp_path / "ds"
    res = stoker_mod.pack(manifest, str(dst), shard_bytes=1 << 20, **kw)
    assert res["records"] == n
    shards = sorted(p for p in os.listdir(dst) if p.startswith("shard-") and p.endswith(".lmdb"))
    assert len(shards) >= 2, "1 MiB shards: the test wants several"
    le = {"uint8": "<u1", "int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}
    seen = 0
    for name in shards:
        env = lmdb.open(str(dst / name), subdir=False, readonly=True, lock=False, max_dbs=4)
        meta = env.open_db(b"meta", create=False)
        records = env.open_db(b"records", create=False)
        sources = env.open_db(b"sources", create=False)
        targets = env.open_db(b"targets", create=False)
        with env.begin() as txn:
            assert txn.get(b"target_dtype", db=meta) == dtype.encode()
            assert int(txn.get(b"target_size", db=meta)) == size
            assert txn.get(b"target_kind", db=meta) == kind.encode()
            if kind == "labels":
                assert int(txn.get(b"target_classes", db=meta)) == 3
                assert txn.get(b"classes", db=meta).decode().split("\n") == ["a", "b", "c"]
            else:
                assert txn.get(b"target_classes", db=meta) is None
            rkeys = [bytes(k) for k, _v in txn.cursor(db=records)]
            tkeys = [bytes(k) for k, _v in txn.cursor(db=targets)]
            assert tkeys == rkeys and rkeys
            assert [struct.unpack(">Q", k)[0] for k in rkeys] == list(range(len(rkeys)))
            for key in rkeys:
                value = txn.get(key, db=records)
                payload = bytes(value[16:])
                rel = txn.get(key, db=sources).decode()
                assert payload == dict(images)[rel]
                assert struct.unpack("<i", value[4:8])[0] == header_label[rel]
                t = np.frombuffer(txn.get(key, db=targets), dtype=le[dtype])
                assert t.shape == (size,)
                np.testing.assert_array_equal(t, np.array(want[rel], dtype=np.dtype(dtype)))
                seen += 1
        env.close()
    assert seen == n
    # stoker reads the same rows across the shards
    with stoker_mod.Dataset(str(dst)) as ds:
        assert ds.info()["shards"] == len(shards)
        order = manifest_rows(ds, images)
        expected = np.array([want[images[k][0]] for k in order], dtype=np.dtype(dtype))
        np.testing.assert_array_equal(ds.targets(), expected)
    check_delivery(stoker_mod, str(dst), expected, shuffle=True)


# ---- bad manifests ----------------------------------------------------------------------------
BAD_CSV = """path,label,a
img/000.jpg,cat,1
img/sub/001.jpg,dog,2,extra
img/002.jpg,gnu,3
img/missing.jpg,eel,4
img/003.jpg,eel,4 5
,eel,4
img/004.jpg,eel,x
img/sub/005.jpg,dog,1e60
img/006.jpg,eel,6
"""


def test_bad_manifest_lines_are_reported(tmp_path, stoker_mod):
    """Bad lines (field count, unknown class with classes=, value count, no path, not a number,
    out of float32's range) and a missing file: the pack goes on; pack-report.tsv names each
    line of the manifest, the missing file with its line too."""
    images = make_images(str(tmp_path), 7, seed=71)
    classes_file = write_text(tmp_path / "classes.txt", "cat\ndog\neel\n")
    manifest = write_text(tmp_path / "m.csv", BAD_CSV)
    dst = tmp_path / "ds"
    res = stoker_mod.pack(manifest, str(dst), classes=classes_file, target_fields="a")
    assert res["records"] == 2 and res["bad_lines"] == 6 and res["skipped"] == 1
    report = (dst / "pack-report.tsv").read_text().splitlines()
    bad = {}
    for line in report:
        where, why = line.split("\t")
        bad[where] = why
    assert len(bad) == 7, report
    m = manifest
    assert "header has 3" in bad["%s line 3" % m]
    assert "unknown class `gnu`" in bad["%s line 4" % m] and "classes.txt" in bad["%s line 4" % m]
    assert "2 values" in bad["%s line 6" % m]
    assert "path" in bad["%s line 7" % m]
    assert "`x` is not a number" in bad["%s line 8" % m]
    assert "float32" in bad["%s line 9" % m]
    missing = os.path.join(str(tmp_path), "img", "missing.jpg")
    assert bad[missing].startswith("unreadable: ") and bad[missing].endswith("(%s line 5)" % m)
    with stoker_mod.Dataset(str(dst)) as ds:
        assert len(ds) == 2
        got = {sha(ds.read(i)[0]): (ds.read(i)[1], ds.target(i).tolist()) for i in range(2)}
    assert got == {sha(images[0][1]): (0, [1.0]), sha(images[6][1]): (2, [6.0])}


@pytest.mark.parametrize("line,reason", [
    ("img/002.jpg,gnu,3", "unknown class `gnu`"),
    ("img/sub/001.jpg,dog,2,extra", "4 fields, but the header has 3"),
    ("img/missing.jpg,eel,4", "unreadable"),
])
def test_strict_bad_manifest_line_raises(tmp_path, stoker_mod, line, reason):
    """strict=True: the first bad line or file raises, naming the manifest and its line."""
    make_images(str(tmp_path), 4, seed=72)
    classes_file = write_text(tmp_path / "classes.txt", "cat\ndog\neel\n")
    manifest = write_text(tmp_path / "m.csv", "path,label,a\nimg/000.jpg,cat,1\n%s\n"
                          "img/003.jpg,eel,3\n" % line)
    dst = tmp_path / "ds"
    with pytest.raises(stoker_mod.StokerError) as ei:
        stoker_mod.pack(manifest, str(dst), classes=classes_file, target_fields="a",
                        strict=True)
    msg = str(ei.value)
    assert "%s line 3" % manifest in msg and reason in msg, msg
    assert not os.path.exists(dst / "shard-00000.lmdb")
    # without strict the same manifest packs, the line set aside
    res = stoker_mod.pack(manifest, str(dst), classes=classes_file, target_fields="a",
                          force=True)
    assert res["records"] == 2
    assert res["bad_lines"] + res["skipped"] == 1


def test_pack_argument_errors(tmp_path, stoker_mod):
    manifest = write_text(tmp_path / "m.csv", "path,a\n")
    for kw in ({"target_fields": "a", "target_type": "int16"},
               {"target_fields": "a", "target_type": ">f4"},
               {"target_type": "float32"},                   # no target_fields
               {"format": "xml"},
               {"target_fields": []},
               {"quality": 0}):
        with pytest.raises(ValueError):
            stoker_mod.pack(manifest, str(tmp_path / "ds"), **kw)
    # the library's refusal: a label list and value fields at once
    with pytest.raises(stoker_mod.InvalidArgument, match="not both"):
        stoker_mod.pack(manifest, str(tmp_path / "ds"), target_fields="a", multi_label=True)


# ---- datasets without targets -------------------------------------------------------------------
def test_dataset_without_targets_unchanged(shards, stoker_mod):
    """An ImageFolder packed without a manifest: target kind none; Loader(target='auto') yields
    (images, labels[, index]) exactly as target='label' does; asking for targets is refused."""
    stoker = stoker_mod
    path, truth = shards
    with stoker.Dataset(path) as ds:
        assert ds.target_info == {"dtype": None, "kind": "none", "size": 0, "classes": 0}
        with pytest.raises(stoker.InvalidArgument, match="no targets"):
            ds.target(0)
        with pytest.raises(stoker.InvalidArgument):
            ds.targets()
    results = {}
    for target in ("auto", "label"):
        batches, first = epoch(stoker, path, shuffle=True, target=target)
        assert all(len(b) == 2 for b in batches)       # labels, index
        idx = np.concatenate([b[1] for b in batches])
        labels = np.concatenate([b[0] for b in batches])
        assert sorted(idx.tolist()) == list(range(len(truth)))
        assert labels.tolist() == [truth[int(i)] for i in idx]
        if HAVE_TORCH:
            assert first[1].dtype == torch_dtype("int64")
        results[target] = (idx.tolist(), labels.tolist())
        with stoker.Loader(path, 4, train=False, size=24, target=target) as loader:
            assert loader.target_info["kind"] == "none"
            images, labels = next(iter(loader))
            assert len(labels) == 4
    assert results["auto"] == results["label"]
    with pytest.raises(stoker.InvalidArgument, match="no targets"):
        stoker.Loader(path, 4, target="both")
    with pytest.raises(stoker.InvalidArgument, match="label list"):
        stoker.Loader(path, 4, multi_hot=True)
    with pytest.raises(ValueError):
        stoker.Loader(path, 4, target="labels")


# ---- the writer API (stk_writer_set_targets / stk_writer_add_target) -----------------------------
def write_with_targets(dst, items, info):
    """A dataset written with the C writer: ITEMS are (payload, label, target row as bytes).
    Returns the status of each add (the writer stops at a failing one)."""
    import ctypes
    from stoker import _lib
    lib = _lib.get()
    w = ctypes.c_void_p()
    assert lib.stk_writer_create(ctypes.byref(w)) == 0
    rcs = []
    try:
        assert lib.stk_writer_set_targets(w, ctypes.byref(info)) == 0, _lib.text(
            lib.stk_writer_last_error(w))
        assert lib.stk_writer_open(w, os.fsencode(dst)) == 0
        for k, (payload, label, row) in enumerate(items):
            rc = lib.stk_writer_add_target(w, payload, len(payload), label, b"item%d" % k, row)
            rcs.append((rc, _lib.text(lib.stk_writer_last_error(w)) if rc else ""))
            if rc:
                return rcs
        assert lib.stk_writer_finish(w) == 0, _lib.text(lib.stk_writer_last_error(w))
    finally:
        lib.stk_writer_destroy(w)
    return rcs


def test_substituted_sample_carries_its_substitutes_target(tmp_path, stoker_mod):
    """A record that does not decode is replaced by another, good record (not strict): its
    sample carries that record's target and label together (since 0.5; it kept the bad record's
    own before), and its index stays the bad record's (stk_loader_batch_targets)."""
    from stoker import _lib
    rng = np.random.default_rng(81)
    n, bad = 11, 6
    want = np.arange(n * 2, dtype=np.float32).reshape(n, 2) * 0.5 - 3.0
    items = []
    for k in range(n):
        payload = b"not a jpeg at all" if k == bad else jpeg_bytes(rng, 40 + k, 30 + k)
        items.append((payload, k % 3, want[k].tobytes()))
    dst = str(tmp_path / "ds")
    info = _lib.TargetInfo(_lib.TDT_FLOAT32, _lib.TARGET_VALUES, 2, 0)
    assert all(rc == 0 for rc, _m in write_with_targets(dst, items, info))
    with stoker_mod.Dataset(dst) as ds:
        np.testing.assert_array_equal(ds.targets(), want)
    with stoker_mod.Loader(dst, 4, train=False, size=24, shuffle=True, return_index=True,
                           target="both", max_bad_fraction=1.0) as loader:
        seen = []
        for _images, labels, targets, idx in loader:
            idx, labels, targets = as_np(idx), as_np(labels), as_np(targets)
            for x, y, t in zip(idx, labels, targets):
                if x != bad:
                    np.testing.assert_array_equal(t, want[x])
                    assert y == x % 3
                    continue
                sub = [j for j in range(n) if j != bad and np.array_equal(want[j], t)]
                assert len(sub) == 1 and y == sub[0] % 3, (t, y)
            seen.extend(idx.tolist())
        assert sorted(seen) == list(range(n))
        # this epoch's (the loader may already be reading the next one)
        errors = [e for e in loader.stats()["errors"] if e["epoch"] == 0]
        assert [e["index"] for e in errors] == [bad], errors


def test_writer_refuses_bad_label_lists(tmp_path, stoker_mod):
    """A label list holds indices 0..classes-1, then -1 padding: anything else is refused,
    naming the record."""
    from stoker import _lib
    rng = np.random.default_rng(82)
    img = jpeg_bytes(rng, 32, 32)
    info = _lib.TargetInfo(_lib.TDT_INT32, _lib.TARGET_LABELS, 3, 4)
    rows = [[0, 3, -1], [2, -1, -1], [-1, 1, -1]]    # the third: an index after padding
    items = [(img, 0, np.array(r, dtype="<i4").tobytes()) for r in rows]
    rcs = write_with_targets(str(tmp_path / "a"), items, info)
    assert [rc for rc, _m in rcs] == [0, 0, _lib.STK_E_INVALID]
    assert "record 2" in rcs[2][1] and "item2" in rcs[2][1], rcs[2][1]
    rcs = write_with_targets(str(tmp_path / "b"), [(img, 0, np.array([4, -1, -1], "<i4")
                                                    .tobytes())], info)
    assert rcs[0][0] == _lib.STK_E_INVALID      # 4 classes: 0..3
