# SPDX-License-Identifier: MIT
"""Datasets (open, describe, read records), stoker.pack and stoker.decode."""

import ctypes
import os
import sys
import threading

import numpy as np

from . import _lib
from . import errors as _errors

_LAYOUTS = {"auto": _lib.LAYOUT_AUTO, "shards": _lib.LAYOUT_SHARDS, "files": _lib.LAYOUT_FILES,
            "lmdb": _lib.LAYOUT_LMDB}

# STK_TDT_* <-> NumPy dtypes (targets are little-endian, as this host is)
TARGET_NP_DTYPE = {code: np.dtype(name) for code, name in _lib.TDT_NAMES.items()}
_TDT_BY_NP = {nd: code for code, nd in TARGET_NP_DTYPE.items()}


def parse_target_type(target_type):
    """"float32", "float64", "int32", "int64", "uint8" or the NumPy (or torch) dtype -> STK_TDT_*."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(target_type, torch.dtype):
        target_type = str(target_type).replace("torch.", "")
    try:
        nd = np.dtype(target_type)
    except TypeError:
        nd = None
    if nd is None or nd not in _TDT_BY_NP or (nd.byteorder == ">"):
        raise ValueError("target_type must be float32, float64, int32, int64 or uint8 (a name or "
                         "a NumPy dtype), not %r" % (target_type,))
    return _TDT_BY_NP[nd]


def target_info_dict(info):
    """A TargetInfo as {dtype (NumPy dtype or None), kind ("values", "labels" or "none"), size,
    classes}."""
    if info.dtype == _lib.TDT_NONE:
        return {"dtype": None, "kind": "none", "size": 0, "classes": 0}
    return {"dtype": TARGET_NP_DTYPE[info.dtype],
            "kind": _lib.TARGET_KIND_NAMES.get(info.kind, str(info.kind)),
            "size": int(info.size), "classes": int(info.classes)}


class Dataset:
    """An opened dataset (stoker shards, an ImageFolder root or a foreign LMDB; or, since 0.5,
    ``"s3://bucket/prefix"``: fetched into the cache directory ``cache`` (limit ``cache_bytes``)
    first, docs/S3.md; ``stream=True``, or a limit below the dataset, fetches no shard at open:
    a Loader fetches them as it reads, and ``ds[i]`` reads only shards a Loader has in the cache).

    ``len(ds)`` records; ``ds[i]`` -> (payload bytes, label); ``ds.record(i)`` -> dict of the
    record's shard, key, offset, length, label and CRC; ``ds.name(i)`` a printable name;
    ``ds.classes``; ``ds.info()``. Reads may come from several threads at once; ``close()``
    (or ``with``) frees the handle. Not usable in a fork() child of the process that opened it.

    Targets (a dataset packed from a manifest with several labels or value fields, see
    ``stoker.pack``): ``ds.target_info`` describes them, ``ds.target(i)`` is record I's target
    and ``ds.targets()`` all of them as an N x K NumPy array. A label list (kind "labels") is
    int32 class indices padded with -1. Datasets without targets have kind "none".
    """

    def __init__(self, path, *, layout="auto", foreign_label=None, allow_incomplete=False,
                 cache=None, cache_bytes=None, stream=False):
        self._lib = lib = _lib.get()
        self._h = None
        self._pid = os.getpid()
        self.path = _lib.path_arg(path)
        if layout not in _LAYOUTS:
            raise ValueError("layout must be one of %s" % ", ".join(_LAYOUTS))
        h = ctypes.c_void_p()
        self._check(lib.stk_dataset_create(ctypes.byref(h)), "stk_dataset_create")
        self._h = h
        self._check(lib.stk_dataset_set(h, _lib.P_LAYOUT, _LAYOUTS[layout]), "layout")
        if foreign_label is not None:
            self._check(lib.stk_dataset_set(h, _lib.P_FOREIGN_LABEL, int(foreign_label)),
                        "foreign_label")
        if allow_incomplete:
            self._check(lib.stk_dataset_set(h, _lib.P_ALLOW_INCOMPLETE, 1), "allow_incomplete")
        if cache is not None:
            self._check(lib.stk_dataset_set_cache_dir(h, _lib.fspath(cache)), "cache")
        if cache_bytes is not None:
            self._check(lib.stk_dataset_set(h, _lib.P_CACHE_BYTES, int(cache_bytes)), "cache_bytes")
        if stream:
            self._check(lib.stk_dataset_set(h, _lib.P_STREAM, 1), "stream")
        self._check(lib.stk_dataset_open(h, _lib.fspath(path)), "open %s" % self.path)
        self._count = int(lib.stk_dataset_count(h))

    def _check(self, rc, what):
        if rc < 0:
            detail = _lib.text(self._lib.stk_dataset_last_error(self._h)) if self._h else ""
            raise _errors.make(rc, detail, what)
        return rc

    def _usable(self):
        if os.getpid() != self._pid:
            raise _errors.StokerError("this stoker.Dataset was opened in process %d; open it "
                                      "again in the fork() child" % self._pid)
        if self._h is None:
            raise _errors.StateError("the dataset is closed", _lib.STK_E_STATE, "STK_E_STATE")

    def __len__(self):
        return self._count

    def _index(self, i):
        i = int(i)
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("record %d out of range (dataset has %d)" % (i, self._count))
        return i

    def record(self, i):
        """Describe record I: {index, shard, key, offset, length, label, crc32c, has_crc}."""
        self._usable()
        i = self._index(i)
        info = _lib.RecordInfo()
        self._check(self._lib.stk_dataset_record(self._h, i, ctypes.byref(info)), "record %d" % i)
        return {"index": info.index, "shard": info.shard, "key": info.key,
                "offset": info.offset, "length": info.length, "label": info.label,
                "crc32c": info.crc32c, "has_crc": bool(info.has_crc)}

    def read(self, i):
        """(payload bytes, label) of record I; the stored CRC32C is checked."""
        self._usable()
        i = self._index(i)
        lib = self._lib
        info = _lib.RecordInfo()
        n = ctypes.c_size_t()
        cap = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            rc = lib.stk_dataset_read(self._h, i, buf, cap, ctypes.byref(n), ctypes.byref(info))
            if rc == _lib.STK_E_RANGE and n.value > cap:
                cap = int(n.value)
                continue
            self._check(rc, "read record %d" % i)
            return buf.raw[:n.value], int(info.label)

    __getitem__ = read

    def name(self, i):
        """A printable name of record I ("shard-00001.lmdb key 42" or the file's path)."""
        self._usable()
        i = self._index(i)
        buf = ctypes.create_string_buffer(4096)
        self._check(self._lib.stk_dataset_record_name(self._h, i, buf, len(buf)), "name %d" % i)
        return _lib.text(buf.value)

    @property
    def classes(self):
        """Class names, label = position."""
        self._usable()
        n = self._info().classes
        return [_lib.text(self._lib.stk_dataset_class_name(self._h, k)) for k in range(n)]

    @property
    def target_info(self):
        """The records' target: {dtype: a NumPy dtype (uint8, int32, int64, float32, float64)
        or None, kind: "values" (a vector of numbers), "labels" (a list of class indices,
        int32 padded with -1) or "none" (no targets: every dataset packed without a manifest),
        size: K elements per record, classes: the class count of a label list (else 0)}."""
        self._usable()
        return target_info_dict(self._tinfo())

    def _tinfo(self):
        t = _lib.TargetInfo()
        self._check(self._lib.stk_dataset_target_info(self._h, ctypes.byref(t)), "target info")
        return t

    def _no_targets(self):
        return _errors.InvalidArgument("%s has no targets (packed without a manifest's label "
                                       "lists or value fields); its labels are ds[i][1]"
                                       % self.path, _lib.STK_E_INVALID, "STK_E_INVALID")

    def target(self, i):
        """Record I's target: a NumPy array of K elements of ``target_info["dtype"]`` (a copy).
        InvalidArgument when the dataset has no targets."""
        self._usable()
        i = self._index(i)
        t = self._tinfo()
        if t.dtype == _lib.TDT_NONE:
            raise self._no_targets()
        out = np.empty(int(t.size), dtype=TARGET_NP_DTYPE[t.dtype])
        self._check(self._lib.stk_dataset_target(self._h, i, out.ctypes.data_as(ctypes.c_void_p),
                                                 out.nbytes), "target of record %d" % i)
        return out

    def targets(self):
        """Every record's target as an N x K NumPy array (row = dataset index; a copy).
        InvalidArgument when the dataset has no targets."""
        self._usable()
        t = self._tinfo()
        if t.dtype == _lib.TDT_NONE:
            raise self._no_targets()
        out = np.empty((self._count, int(t.size)), dtype=TARGET_NP_DTYPE[t.dtype])
        row = out.strides[0] if self._count else 0
        base = out.ctypes.data
        fn = self._lib.stk_dataset_target
        for i in range(self._count):
            rc = fn(self._h, i, base + i * row, row)
            if rc < 0:
                self._check(rc, "target of record %d" % i)
        return out

    def _info(self):
        info = _lib.DatasetInfo()
        self._check(self._lib.stk_dataset_info_get(self._h, ctypes.byref(info)), "info")
        return info

    def fetch_stats(self):
        """The fetch counters of an s3:// dataset since its open, the open's download included
        (all 0 for a local path; docs/S3.md "Fetch stats"): shards, shards_cached (hits),
        shards_fetched (misses), bytes_fetched, requests, retries, fetch_s (busy), starved_s
        (waited for fetched bytes), bytes_cached, bytes_missed, link_bytes_per_s (bytes_fetched /
        fetch_s), inflight (STOKER_S3_INFLIGHT), cache_limit. Since 0.5."""
        self._usable()
        return _fetch_stats(self._lib, self._h)

    def info(self):
        """{path, layout, format_version, shards, shard_paths, shard_formats, classes, records,
        payload_bytes, file_bytes, max_record_bytes, target (as ``target_info``)}.
        shard_formats: each shard's format (2: its checksums cover the labels and targets,
        1: packed before stoker 0.5, the payload only; 0: not a stoker shard)."""
        self._usable()
        info = self._info()
        paths = []
        for k in range(max(info.shards, 1 if info.layout == _lib.LAYOUT_FILES else 0)):
            p = self._lib.stk_dataset_shard_path(self._h, k)
            if p:
                paths.append(_lib.text(p))
        formats = [self._lib.stk_dataset_shard_format(self._h, k) for k in range(len(paths))]
        return {"path": self.path, "layout": _lib.LAYOUT_NAMES.get(info.layout, str(info.layout)),
                "format_version": info.format_version, "shards": info.shards,
                "shard_paths": paths, "shard_formats": formats, "classes": self.classes,
                "records": info.records,
                "payload_bytes": info.payload_bytes, "file_bytes": info.file_bytes,
                "max_record_bytes": info.max_record_bytes, "target": self.target_info}

    def close(self):
        h, self._h = self._h, None
        if h is not None and os.getpid() == self._pid:
            self._lib.stk_dataset_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:   # noqa: BLE001
            pass


def _fetch_stats(lib, h):
    st = _lib.FetchStats()
    rc = lib.stk_dataset_fetch_stats(h, ctypes.byref(st))
    if rc:
        raise _errors.make(rc, "", "fetch_stats")
    return {k: getattr(st, k) for k, _ in st._fields_ if k != "reserved"}


def info(path, **kw):
    """Describe the dataset at PATH (a dict; see Dataset.info)."""
    with Dataset(path, **kw) as ds:
        return ds.info()


def _print_progress(p):
    done, total = p["files_done"], p["files_total"]
    frac = done / total if total else 0.0
    bar = "#" * int(frac * 30)
    sys.stderr.write("\rpack [%-30s] %d/%d files, %d skipped, %.1fs" %
                     (bar, done, total, p["skipped"], p["elapsed_s"]))
    if total and done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


_FORMATS = ("csv", "tsv", "jsonl", "list")


def _opt_text(value, name):
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise ValueError("%s must be a non-empty string without NUL bytes, not %r" % (name, value))
    return value.encode()


def pack(src, dst, *, shard_bytes=None, threads=None, strict=False, force=False, progress=None,
         max_side=None, quality=None, format=None, path_field=None, label_field=None,
         target_fields=None, classes=None, multi_label=False, target_type=None, label_sep=None,
         labels="auto", max_line=None, keep_damaged=False):
    """Pack SRC into a dataset of shards in DST. SRC is an ImageFolder root, a
    ``path<TAB>label`` list file, or a manifest: a CSV, TSV or JSON Lines file naming an image
    path and its label, labels or values per line (docs/FORMAT.md "Manifests").

    Returns {records, skipped, shards, classes, payload_bytes, resumed_records, elapsed_s,
    converted, resized, bad_lines, kept_damaged, ignored, over_loader_limit}. Files that
    cannot be packed (a JPEG over the pack's pixel limit that max_side does not resize, one that
    max_side should resize but cannot be, too) are
    skipped and listed in DST/pack-report.tsv (``path<TAB>reason``): every JPEG is decoded
    completely first, and one that does not decode fully (truncated, corrupt data: any libjpeg
    warning) is skipped with libjpeg's message, unless ``keep_damaged``, which stores it as it
    is (counted in ``kept_damaged``, listed as ``kept-damaged: <reason>``). Files of an
    ImageFolder's class folders whose extension torchvision's ImageFolder does not load (a
    .gif) are left out as ImageFolder leaves them, counted in ``ignored`` and listed; manifest
    lines that cannot be used (bad syntax, no path, an unknown class name, another value count
    than the first record's, a value outside TARGET_TYPE's range) are set aside, counted in
    ``bad_lines`` and listed there as ``<manifest> line N<TAB>reason``. Records whose image is
    over the loader's default pixel limit (89,478,485) are counted in ``over_loader_limit`` and
    listed as ``over-loader-limit: WxH ...``, a warning. With ``strict`` the
    first bad file or line raises instead, naming it. An existing dataset in DST raises
    DatasetExists unless ``force``; a DST that an interrupted pack left is finished. One pack
    at a time per DST: while another pack writes DST (it holds DST/.stoker-pack.lock) this
    raises StokerIOError (an OSError, errno EBUSY) naming its pid. PROGRESS: True prints a bar
    to stderr, or a callable receiving a dict (files_total, files_done, records_written,
    skipped, bytes_total, bytes_done, elapsed_s) about 4 times a second.

    Images: MAX_SIDE > 0 resizes images whose longer side is larger to that side (stored as
    JPEG at QUALITY, 1..100, default 95); non-JPEG sources are always stored as JPEG.

    Manifests:
      format: "csv", "tsv", "jsonl" or "list" (default: from SRC's name and first line).
      path_field: the column/key of the image path ["path"]; relative paths are relative to
        the manifest's folder.
      label_field: the column/key of the label: an index or a class name ["label"]. Every
        record needs one: an empty cell, a JSON null or a missing key is a bad line, and a
        manifest without the field fails, unless labels="none".
      labels: what the labels are. "index": class indices, decimal integers 0..2147483647
        (below the classes file's count); any other label makes its line bad. "names": class
        names (a JSON integer's digits too), from CLASSES or the sorted set the manifest uses.
        "auto" (default): indices when every label is numeric (so -1, +3, 1.0 or 99999999999
        among them are bad lines, never a renumbering), names when none is; numbers mixed with
        names raise, naming a line of each. "none" (since 0.5): unlabelled data, asked for
        explicitly: the label field is not read and every label is -1.
      classes: a file of class names, one per line (label = line number from 0); names not in
        it are bad lines. Default: the sorted names the manifest uses.
      multi_label: the label field holds several labels (a JSON list, or a CSV/TSV cell split
        at LABEL_SEP); they become each record's target, a label list (int32 class indices
        padded with -1 to the longest list) that stoker.Loader can hand out as multi-hot rows.
      target_fields: a field name or a list of them whose numbers, in that order, form each
        record's target vector (each field a number, a JSON array, or a CSV/TSV cell of
        numbers split at LABEL_SEP); every record must have as many numbers as the first.
      target_type: the element type of that vector: "float32" (default), "float64", "int32",
        "int64", "uint8" or the NumPy dtype; a value it cannot hold makes a bad line.
      label_sep: the separator inside one CSV/TSV cell [" "].
      max_line: the longest line in bytes [1 MiB]; a longer line (or CSV record) is a bad
        line, skipped without being read into memory.

    The packing runs in a background thread so that Ctrl-C raises KeyboardInterrupt at once;
    the unfinished pack then goes on until the process exits (shards are renamed into place
    only when complete, and a later pack into DST resumes it).
    """
    lib = _lib.get()
    opts = _lib.PackOptions()
    opts.shard_bytes = int(shard_bytes or 0)
    opts.threads = int(threads or 0)
    opts.strict = int(bool(strict))
    opts.force = int(bool(force))
    errbuf = ctypes.create_string_buffer(4096)
    opts.error = ctypes.cast(errbuf, ctypes.c_void_p)
    opts.error_cap = len(errbuf)
    ext = _lib.PackExtOptions()
    ext.size = ctypes.sizeof(_lib.PackExtOptions)
    if max_side is not None:
        if int(max_side) < 0:
            raise ValueError("max_side must be >= 0 (0: off), not %r" % (max_side,))
        ext.max_side = int(max_side)
    if quality is not None:
        if not 1 <= int(quality) <= 100:
            raise ValueError("quality must be 1..100, not %r" % (quality,))
        ext.quality = int(quality)
    if format is not None and format not in _FORMATS:
        raise ValueError("format must be one of %s, not %r" % (", ".join(_FORMATS), format))
    if target_fields is not None and not isinstance(target_fields, str):
        target_fields = list(target_fields)
        if not target_fields or not all(isinstance(f, str) and f and "," not in f
                                        for f in target_fields):
            raise ValueError("target_fields must be a field name or a list of names (without "
                             "commas), not %r" % (target_fields,))
        target_fields = ",".join(target_fields)
    ext.manifest_format = _opt_text(format, "format")
    ext.path_field = _opt_text(path_field, "path_field")
    ext.label_field = _opt_text(label_field, "label_field")
    ext.target_fields = _opt_text(target_fields, "target_fields")
    ext.classes_file = None if classes is None else _lib.fspath(classes)
    ext.label_sep = _opt_text(label_sep, "label_sep")
    ext.multi_label = int(bool(multi_label))
    if labels not in _lib.LABELS_MODES:
        raise ValueError("labels must be one of %s, not %r" % (", ".join(_lib.LABELS_MODES), labels))
    ext.labels = _lib.LABELS_MODES[labels]
    if max_line is not None:
        if isinstance(max_line, bool) or not isinstance(max_line, int) or max_line < 1:
            raise ValueError("max_line must be a number of bytes >= 1, not %r" % (max_line,))
        ext.max_line = max_line
    ext.keep_damaged = int(bool(keep_damaged))
    if target_type is not None:
        if target_fields is None:
            raise ValueError("target_type=%r needs target_fields (the fields holding the "
                             "values)" % (target_type,))
        ext.target_dtype = parse_target_type(target_type)
    cb_error = []
    if progress is True:
        progress = _print_progress
    if progress:
        def _cb(p, _user):
            if cb_error:
                return
            try:
                c = p.contents
                progress({k: getattr(c, k) for k, _t in _lib.PackProgress._fields_})
            except BaseException as e:   # noqa: BLE001 - re-raised in the caller's thread
                cb_error.append(e)
        cfn = _lib.PackProgressFn(_cb)
        opts.progress = cfn
    result = _lib.PackResult()
    src_b, dst_b = _lib.fspath(src), _lib.fspath(dst)
    out = {}

    def run():
        out["rc"] = lib.stk_pack_ext(src_b, dst_b, ctypes.byref(opts), ctypes.byref(ext),
                                     ctypes.byref(result))

    t = threading.Thread(target=run, name="stoker-pack", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.1)
    rc = out.get("rc", _lib.STK_E_STATE)
    if cb_error:
        raise cb_error[0]
    if rc < 0:
        raise _errors.make(rc, _lib.text(errbuf.value), "pack %s -> %s" % (src, dst))
    res = {k: getattr(result, k) for k, _t in _lib.PackResult._fields_}
    res.update(converted=ext.converted, resized=ext.resized, bad_lines=ext.bad_lines,
               kept_damaged=ext.kept_damaged, ignored=ext.ignored,
               over_loader_limit=ext.over_loader_limit)
    return res


class _Decoders(threading.local):
    def __init__(self):
        self.d = None
        self.pid = None


_decoders = _Decoders()


class _DecoderHandle:
    def __init__(self, lib):
        self._lib = lib
        self.h = ctypes.c_void_p()
        rc = lib.stk_decoder_create(ctypes.byref(self.h))
        if rc < 0:
            self.h = None
            raise _errors.make(rc, "", "stk_decoder_create")
        self.pid = os.getpid()

    def __del__(self):
        try:
            if self.h is not None and os.getpid() == self.pid:
                self._lib.stk_decoder_destroy(self.h)
        except Exception:   # noqa: BLE001
            pass


def _decoder(lib):
    d = _decoders.d
    if d is None or d.pid != os.getpid():
        d = _decoders.d = _DecoderHandle(lib)
    return d


def image_info(data):
    """(width, height, components) from a JPEG's headers."""
    lib = _lib.get()
    data = bytes(data)
    w, h, c = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    rc = lib.stk_image_info(data, len(data), ctypes.byref(w), ctypes.byref(h), ctypes.byref(c))
    if rc < 0:
        raise _errors.make(rc, "", "image_info")
    return w.value, h.value, c.value


def decode(data, *, crop=None, scale=8, max_pixels=0, strict=False):
    """Decode one JPEG (bytes-like) with libjpeg-turbo into an H×W×3 uint8 RGB NumPy array.

    CROP = (x, y, w, h) in full-size pixels decodes only that window; SCALE (1, 2, 4 or 8)
    decodes at scale/8 (output size ceil(w*scale/8) × ceil(h*scale/8), as libjpeg scales).
    MAX_PIXELS: images with more pixels raise DataError (0: the library's default limit).
    STRICT: libjpeg warnings (corrupt data decoded anyway) raise. Thread-safe (a decoder per
    thread); the GIL is released while decoding.
    """
    lib = _lib.get()
    if isinstance(data, np.ndarray):
        data = data.tobytes()
    data = bytes(data)
    args = _lib.DecodeArgs()
    if crop is not None:
        args.crop_x, args.crop_y, args.crop_w, args.crop_h = (int(v) for v in crop)
    if scale not in (1, 2, 4, 8):
        raise ValueError("scale must be 1, 2, 4 or 8 (decode at scale/8), not %r" % (scale,))
    args.scale_num = int(scale)
    args.max_pixels = int(max_pixels)
    args.strict = int(bool(strict))
    dec = _decoder(lib)
    w, h, warn = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    # size from the header, then one decode; STK_E_RANGE reports the exact size needed
    try:
        fw, fh, _c = image_info(data)
        cw, ch = (args.crop_w, args.crop_h) if crop is not None and args.crop_w else (fw, fh)
        guess = (-(-cw * args.scale_num // 8)) * (-(-ch * args.scale_num // 8)) * 3
    except _errors.StokerError:
        guess = 0
    for _attempt in range(2):
        out = np.empty(max(guess, 1), dtype=np.uint8)
        rc = lib.stk_decode(dec.h, data, len(data), ctypes.byref(args),
                            out.ctypes.data_as(ctypes.c_void_p), out.nbytes, ctypes.byref(w),
                            ctypes.byref(h), ctypes.byref(warn))
        need = w.value * h.value * 3
        if rc == _lib.STK_E_RANGE and need > out.nbytes:
            guess = need
            continue
        break
    if rc < 0:
        raise _errors.make(rc, _lib.text(lib.stk_decoder_last_error(dec.h)), "decode")
    return out[:need].reshape(h.value, w.value, 3)
