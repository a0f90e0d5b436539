# SPDX-License-Identifier: MIT
# stoker doctor's in-process hook. The doctor writes this file as `sitecustomize.py` into a private
# directory that it puts first on PYTHONPATH, so every Python process of the job imports it at
# start-up, without any change to the training script. It then chains to the sitecustomize it
# shadows (Debian's, a virtualenv's). It imports nothing heavy: torch and stoker are patched
# only when the job itself imports them (a meta-path finder wraps their module loaders).
# Everything it measures is appended to the file named by STOKER_DOCTOR_EVENTS: one text line per
# event, batches as blocks of binary records (format in docs/doctor.md); all analysis is in the doctor.
import os
import sys


def _stk_doctor_install():
    path = os.environ.get("STOKER_DOCTOR_EVENTS")
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError:
        return
    import io
    import time
    now = time.monotonic_ns
    pid = os.getpid()
    st = {"fd": fd, "in_next": False, "flushed": 0, "pid": pid, "in_save": False, "buf_saved": False,
          "buf_t0": 0, "buf_t1": 0, "nb": 0}
    # per-step counters, reset at every batch: .item() .cpu() .numpy() cuda.synchronize,
    # of those on CUDA tensors, H2D pinned, H2D pageable, H2D bytes, ns inside the sync calls,
    # autocast entries fp16, autocast entries bf16; then file writes outside the save calls
    # (which time their own): ns and bytes to checkpoint files, to log files, to other files,
    # and checkpoint files opened for writing outside a save call
    C = [0] * 18

    # batches go into a preallocated block of binary records (docs/doctor.md, "The event format"),
    # written with one write() when it is nearly full or 0.2 s old: no formatting, no syscall per
    # batch; every other event flushes the block first (the file stays in order) and goes at once
    import struct
    pack_into = struct.Struct("<IIHI").pack_into
    kinds = {}                              # which counters are non-zero -> record layout
    BLK = 3900                              # + one record (<= 158 bytes) + header: < the reader's 8 KiB
    blk = bytearray(BLK + 160)
    pos = count = base = prev = flushed = 0
    blid = 0
    bdt = "-"
    ZERO = [0] * len(C)
    ZERO_S = "-"                            # all counters zero: most batches

    def forked():
        # a forked child (a DataLoader worker): its parent's pending batches are not its own
        nonlocal pos, count
        pos = count = 0
        st["pid"] = os.getpid()
    os.register_at_fork(after_in_child=forked)

    def write(data):
        f = st["fd"]
        if f is not None:
            try:
                os.write(f, data)
            except OSError:
                st["fd"] = None

    def flush_block():
        nonlocal pos, count, flushed
        if count:
            write(b"B %d %d %d %s %d %d\n" % (st["pid"], base, blid, bdt.encode(), count, pos) + blk[:pos])
        pos = count = 0
        flushed = prev

    def emit(line):
        flush_block()
        write(line.encode())

    def counters():
        if not any(C):
            return ZERO_S
        s = " ".join(map(str, C))
        C[:] = ZERO
        return s

    K = [0] * 1025                          # batches the hook timed itself on, its ns in the last 1024

    def batch(t0, t1, n, dt, lid):
        # one record: the gap since the previous batch's end, the wait, the batch size, a mask of
        # the non-zero counters and those counters; anything that does not fit: a text N line
        nonlocal pos, count, base, prev, blid, bdt
        if count and (lid != blid or dt != bdt):
            flush_block()
        if not count:
            base = prev = t0
            blid = lid
            bdt = dt
        gap = t0 - prev
        if gap >> 32 or (t1 - t0) >> 32 or n >> 16 or gap < 0:
            emit("N %d %d %d %d %s %d %s\n" % (st["pid"], t0, t1 - t0, n, dt, lid, counters()))
            prev = t1
            return
        if any(C):
            # the same counters are non-zero step after step (loss.item(): c0 and c8): their
            # mask, record layout and size are looked up, not rebuilt
            key = tuple(map(bool, C))
            kind = kinds.get(key)
            if kind is None:
                idx = [i for i, v in enumerate(key) if v]
                kind = kinds[key] = (sum(1 << i for i in idx), idx, 14 + 8 * len(idx),
                                     struct.Struct("<IIHI%dq" % len(idx)).pack_into)
            mask, idx, size, pk = kind
            pk(blk, pos, gap, t1 - t0, n, mask, *[C[i] for i in idx])
            pos += size
            C[:] = ZERO
        else:
            pack_into(blk, pos, gap, t1 - t0, n, 0)
            pos += 14
        count += 1
        prev = t1
        if pos >= BLK or t1 - flushed > 200000000:
            flush_block()

    emit("H %d %d %d %d.%d\n" % (pid, now(), os.getppid(), sys.version_info[0], sys.version_info[1]))
    install_writes(st, C, now, emit)

    dtypes = {}

    def batch_size(b):
        if isinstance(b, (list, tuple)) and b:
            b = b[0]
        elif isinstance(b, dict) and b:
            b = next(iter(b.values()))
        s = getattr(b, "shape", None)
        d = getattr(b, "dtype", None)
        n = dtypes.get(d)
        if n is None:
            n = dtypes[d] = str(d).replace("torch.", "").replace(" ", "") if d is not None else "-"
        return (int(s[0]) if s else 0), n

    def wrap_next(orig):
        def __next__(self):
            t0 = now()
            st["in_next"] = True
            st["buf_saved"] = False
            nb = st["nb"] = st["nb"] + 1
            timed = not nb & 63             # the hook times its own work on 1 batch in 64
            if timed:
                tb = now()
            try:
                b = orig(self)
            except StopIteration:
                emit("E %d %d\n" % (os.getpid(), now()))
                raise
            finally:
                st["in_next"] = False
            t1 = now()
            try:                            # the usual batch: a tuple or list of tensors
                x = b[0] if type(b) is tuple or type(b) is list else b
                n = len(x)
                dt = dtypes[x.dtype]
            except Exception:
                n, dt = batch_size(b)
            batch(t0, t1, n, dt, getattr(self, "_stk_lid", 0))
            if timed:
                K[K[0] % 1024 + 1] = tb - t0 + now() - t1
                K[0] += 1
            return b
        return __next__

    lids = {}

    def loader_id(loader):
        # which loader an iterator belongs to (training and validation apart): a small number per
        # loader object, kept on it (the id() of a freed loader may come back)
        lid = getattr(loader, "_stk_lid", 0)
        if not lid:
            lid = len(lids) + 1
            lids[lid] = 1
            try:
                loader._stk_lid = lid
            except Exception:
                lid = 0
        return lid

    def wrap_iter(orig, kind, workers, pin):
        def __iter__(self):
            t0 = now()
            it = orig(self)
            lid = loader_id(self)
            try:
                it._stk_lid = lid
            except Exception:
                pass
            emit("I %d %d %d %s %d %d %d %d\n" % (os.getpid(), t0, now(), kind, workers(self),
                                                  int(getattr(self, "batch_size", 0) or 0),
                                                  pin(self), lid))
            return it
        return __iter__

    def timed_save(orig_save, kind):
        # a save call (torch.save, np.save, safetensors' save_file): its time and bytes; into a
        # path, or into a buffer that the job then writes to a file (Lightning does so): that
        # file's writes are timed as the rest of the checkpoint (install_writes)
        def save(*a, **k):
            f = a[1] if len(a) > 1 else (k.get("f") or k.get("file") or k.get("filename"))
            if kind == "np.save" and a:
                f = a[0]
            t0 = now()
            path = isinstance(f, (str, bytes, os.PathLike))
            try:
                p0 = f.tell() if not path and hasattr(f, "tell") else 0
            except (OSError, ValueError):
                p0 = 0
            outer = st["in_save"]
            st["in_save"] = True
            try:
                return orig_save(*a, **k)
            finally:
                st["in_save"] = outer
                t1 = now()
                try:
                    n = os.stat(f).st_size if path else f.tell() - p0
                except (OSError, ValueError, AttributeError, TypeError):
                    n = 0
                if not outer:
                    st["buf_saved"] = not path and not isinstance(getattr(f, "raw", f), io.FileIO)
                    st["buf_t1"] = t1
                    emit("S %d %d %d %d %s\n" % (os.getpid(), t0, t1, n, kind))
        return save

    def patch_numpy(m):
        m.save = timed_save(m.save, "np.save")

    def patch_safetensors(m):
        if hasattr(m, "save_file"):
            m.save_file = timed_save(m.save_file, "safetensors")

    def patch_dataloader(m):
        m._BaseDataLoaderIter.__next__ = wrap_next(m._BaseDataLoaderIter.__next__)
        m.DataLoader.__iter__ = wrap_iter(m.DataLoader.__iter__, "torch",
                                          lambda s: int(s.num_workers),
                                          lambda s: int(bool(s.pin_memory)))

    def patch_worker(m):
        import functools
        orig = m._worker_loop

        @functools.wraps(orig)
        def _worker_loop(*a, **k):
            emit("W %d %d %d\n" % (os.getpid(), now(), os.getppid()))
            return orig(*a, **k)
        m._worker_loop = _worker_loop

    def patch_stoker(m):
        m._Iter.__next__ = wrap_next(m._Iter.__next__)
        m.Loader.__iter__ = wrap_iter(m.Loader.__iter__, "stoker",
                                      lambda s: int(getattr(s, "workers", 0) or 0),
                                      lambda s: 1)

    def patch_torch(torch):
        T = torch.Tensor
        here = os.path.dirname(torch.__file__) + os.sep
        getframe = sys._getframe

        def user_call():
            # calls from torch's own code (optimizers reading step counters) and from the data
            # pipeline (transforms drawing random numbers while the loop waits) are not the step's
            return not st["in_next"] and not getframe(2).f_code.co_filename.startswith(here)

        def counted(orig, slot):
            def call(self, *a, **k):
                if not user_call():
                    return orig(self, *a, **k)
                t = now()
                r = orig(self, *a, **k)
                C[8] += now() - t
                C[slot] += 1
                if self.is_cuda:
                    C[4] += 1
                return r
            return call

        def h2d(self):
            C[5 if self.is_pinned() else 6] += 1
            C[7] += self.numel() * self.element_size()

        orig_to = T.to

        def to(self, *a, **k):
            d = k.get("device")
            if d is None:
                for x in a:
                    if isinstance(x, (str, torch.device)):
                        d = x
                        break
                    if isinstance(x, T):
                        d = x.device
                        break
                    if isinstance(x, int) and not isinstance(x, bool):
                        d = "cuda"
                        break
            if d is not None:
                cuda = str(d).startswith("cuda")
                if cuda and not self.is_cuda:
                    h2d(self)
                elif not cuda and self.is_cuda and str(d).startswith("cpu") and user_call():
                    t = now()
                    r = orig_to(self, *a, **k)
                    C[8] += now() - t
                    C[1] += 1
                    C[4] += 1
                    return r
            return orig_to(self, *a, **k)

        orig_cuda = T.cuda

        def cuda(self, *a, **k):
            if not self.is_cuda:
                h2d(self)
            return orig_cuda(self, *a, **k)

        T.item = counted(T.item, 0)
        T.cpu = counted(T.cpu, 1)
        T.numpy = counted(T.numpy, 2)
        T.to = to
        T.cuda = cuda
        orig_sync = torch.cuda.synchronize

        def synchronize(*a, **k):
            t = now()
            r = orig_sync(*a, **k)
            C[8] += now() - t
            C[3] += 1
            C[4] += 1
            return r
        torch.cuda.synchronize = synchronize

        save = timed_save(torch.save, "torch.save")
        torch.save = save
        torch.serialization.save = save

        AC = getattr(getattr(torch, "amp", None), "autocast_mode", None)
        AC = getattr(AC, "autocast", None)
        if AC is not None:
            orig_enter = AC.__enter__

            def __enter__(self):
                r = orig_enter(self)
                if getattr(self, "_enabled", True):
                    dt = getattr(self, "fast_dtype", None)
                    if dt == torch.float16:
                        C[9] += 1
                    elif dt == torch.bfloat16:
                        C[10] += 1
                return r
            AC.__enter__ = __enter__

    targets = {"torch": patch_torch,
               "torch.utils.data.dataloader": patch_dataloader,
               "torch.utils.data._utils.worker": patch_worker,
               "stoker.loader": patch_stoker,
               "numpy": patch_numpy,
               "safetensors.torch": patch_safetensors,
               "safetensors.numpy": patch_safetensors}

    class Finder:
        def find_spec(self, name, path=None, target=None):
            fn = targets.pop(name, None)
            if fn is None:
                return None
            spec = None
            for f in sys.meta_path:
                if f is self or not hasattr(f, "find_spec"):
                    continue
                spec = f.find_spec(name, path, target)
                if spec is not None:
                    break
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            orig_exec = spec.loader.exec_module

            def exec_module(module):
                orig_exec(module)
                try:
                    fn(module)
                except Exception as e:  # a torch we do not know: measure less, never break the job
                    emit("F %d %d %s\n" % (os.getpid(), now(), (name + ":" + repr(e)).replace("\n", " ")[:200]))
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())

    import atexit

    def at_exit():
        if os.getpid() == pid:
            if K[0]:                        # the median: a preempted batch does not count
                ks = sorted(K[1:min(K[0], 1024) + 1])
                emit("K %d %d %d\n" % (pid, K[0], ks[len(ks) // 2]))
            emit("X %d %d %s\n" % (pid, now(), counters()))
    atexit.register(at_exit)


CKPT_EXT = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npy", ".npz", ".pkl", ".pickle", ".h5",
            ".msgpack", ".tar")
LOG_EXT = (".log", ".csv", ".txt", ".json", ".jsonl", ".yaml", ".out")


def install_writes(st, C, now, emit):
    """Time the job's file writes, by kind of file: builtins.open for writing returns the usual
    buffered (or text) file over a FileIO whose write() is timed; os.fsync / fdatasync are timed
    for the file they sync. Reads and other opens go straight to the real open()."""
    import builtins
    import io
    orig_open = builtins.open
    FileIO = io.FileIO
    fdcls = {}

    def kind(file):
        if st["in_save"]:
            return -1                       # inside a save call: timed by it
        name = os.fsdecode(file) if isinstance(file, (str, bytes, os.PathLike)) else ""
        if st["buf_saved"]:                 # the file a save into a buffer is written to: the
            st["buf_saved"] = False         # time since the save (getvalue()...) is the save's
            st["buf_t0"] = st["buf_t1"]
            return 0
        low = name.lower()
        if low.endswith(CKPT_EXT):
            C[17] += 1
            return 0
        if low.endswith(LOG_EXT) or "tfevents" in low:
            return 1
        return 2

    class TimedFileIO(FileIO):
        # a file written within one step (a checkpoint, a log line appended by open/write/close) is
        # timed open to close: serialisation between its writes (pickle.dump) is part of it; a file
        # kept open across batches (a log) has its writes and syncs timed as they happen
        _stk_k = -1
        _stk_t0 = _stk_b0 = 0

        def write(self, b):
            k = self._stk_k
            if k < 0 or st["in_save"]:
                return FileIO.write(self, b)
            t = now()
            n = FileIO.write(self, b)
            C[12 + 2 * k] += n or 0
            if st["nb"] != self._stk_b0:
                C[11 + 2 * k] += now() - t
            return n

        def close(self):
            if self.closed:
                return
            fdcls.pop(self.fileno(), None)
            k = self._stk_k
            t = now()
            FileIO.close(self)
            if k >= 0 and not st["in_save"]:
                t1 = now()
                C[11 + 2 * k] += t1 - (self._stk_t0 if st["nb"] == self._stk_b0 else t)
                if k == 0 and st["nb"] == self._stk_b0:   # a checkpoint file: its span, for the plot
                    emit("C %d %d %d\n" % (st["pid"], self._stk_t0, t1))

    def open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True,
             opener=None):
        if (not isinstance(mode, str) or isinstance(file, int) or buffering == 0 or "U" in mode
                or not ("w" in mode or "a" in mode or "x" in mode or "+" in mode)):
            return orig_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
        t0 = now()
        raw = TimedFileIO(file, "".join(c for c in mode if c in "rwxa+"), closefd, opener=opener)
        try:
            k = kind(file)
            raw._stk_k = k
            if k >= 0:
                if k == 0 and st["buf_t0"]:  # written from a buffer a save just filled
                    t0 = st["buf_t0"]
                    st["buf_t0"] = 0
                raw._stk_t0 = t0
                raw._stk_b0 = st["nb"]
                fdcls[raw.fileno()] = raw
            size = buffering
            if size < 0 or size == 1:
                try:
                    size = os.fstat(raw.fileno()).st_blksize
                except OSError:
                    size = 0
                if size <= 1:
                    size = io.DEFAULT_BUFFER_SIZE
            buf = (io.BufferedRandom if "+" in mode else io.BufferedWriter)(raw, size)
            if "b" in mode:
                return buf
            t = io.TextIOWrapper(buf, encoding, errors, newline, line_buffering=buffering == 1 or raw.isatty())
            t.mode = mode
            return t
        except BaseException:
            raw.close()
            raise

    def timed_sync(orig):
        def sync(fd):
            raw = fdcls.get(fd if isinstance(fd, int) else fd.fileno())
            if raw is not None and st["nb"] == raw._stk_b0:
                return orig(fd)             # inside its file's open..close, timed there
            k = raw._stk_k if raw is not None else 2
            t = now()
            try:
                return orig(fd)
            finally:
                if not st["in_save"]:
                    C[11 + 2 * k] += now() - t

        return sync

    builtins.open = open
    io.open = open
    os.fsync = timed_sync(os.fsync)
    if hasattr(os, "fdatasync"):
        os.fdatasync = timed_sync(os.fdatasync)


def _stk_doctor_chain():
    # run the sitecustomize this file shadows, as Python would have
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


try:
    _stk_doctor_install()
except Exception:
    pass
_stk_doctor_chain()
