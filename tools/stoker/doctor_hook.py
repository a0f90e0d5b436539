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
    st = {"fd": fd, "pid": pid, "in_save": False, "buf_saved": -1, "buf_t0": 0, "buf_t1": 0}
    in_next = False                         # inside a loader's __next__: calls there are the loader's
    # counters, summed over the batches of a block and reset when it is written: .item() .cpu()
    # .numpy() cuda.synchronize, of those on CUDA tensors, H2D pinned, H2D pageable, H2D bytes, ns
    # inside the sync calls, steps with autocast fp16, with bf16; then file writes outside the save
    # calls (which time their own): ns and bytes to checkpoint files, to log files, to other files,
    # and checkpoint files opened for writing outside a save call
    C = [0] * 18

    # batches go into a preallocated block of binary records (docs/doctor.md, "The event format"),
    # written with one write() when it is full or 0.2 s old: no formatting, no syscall per batch;
    # every other event writes the pending block first (the file stays in order) and goes at once.
    # A record is the batch's two times; the block's header carries what changes slowly: the
    # loader, the dtype and size of its first batch, the counters summed over its batches
    import struct
    pack_into = struct.Struct("<II").pack_into
    BLK = 4000                              # bytes of records a block: with its header < the reader's 8 KiB
    blk = bytearray(BLK)
    pos = base = prev = flushed = bn = 0
    blid = -1                               # the block's loader; -1: no block pending
    bdt = "-"
    nb = 0                                  # batches asked for (file writes are told apart by step)
    ZERO = [0] * len(C)

    def forked():
        # a forked child (a DataLoader worker): its parent's pending batches are not its own
        nonlocal pos, blid
        pos = 0
        blid = -1
        C[:] = ZERO
        st["pid"] = os.getpid()
    os.register_at_fork(after_in_child=forked)

    def write(data):
        f = st["fd"]
        if f is not None:
            try:
                os.write(f, data)
            except OSError:
                st["fd"] = None

    def counters():
        if not any(C):
            return "-"                      # all counters zero
        s = " ".join(map(str, C))
        C[:] = ZERO
        return s

    def flush_block():
        nonlocal pos, blid, flushed
        if pos:
            write(b"B %d %d %d %s %d %d %d %s\n" % (st["pid"], base, blid, bdt.encode(), bn, pos // 8, pos,
                                                     counters().encode()) + blk[:pos])
        pos = 0
        blid = -1
        flushed = prev

    def emit(line):
        flush_block()
        write(line.encode())

    K = [0] * 1025                          # batches the hook timed itself on, its ns in the last 1024

    emit("H %d %d %d %d.%d\n" % (pid, now(), os.getppid(), sys.version_info[0], sys.version_info[1]))
    install_writes(st, C, now, emit, lambda: nb)

    dtypes = {}                             # dtype object -> its name in the events

    def batch_size(b):
        # the size of a batch (a tensor, or a tuple, list or dict of them) and its dtype's name
        if isinstance(b, (list, tuple)) and b:
            b = b[0]
        elif isinstance(b, dict) and b:
            b = next(iter(b.values()))
        s = getattr(b, "shape", None)
        d = getattr(b, "dtype", None)
        try:
            n = int(s[0]) if s else 0
        except (TypeError, IndexError, ValueError):
            n = 0
        try:
            name = dtypes.get(d)
        except TypeError:                   # not hashable
            name = d = None
        if name is None:
            name = str(d).replace("torch.", "").replace(" ", "")[:15] if d is not None else "-"
            if d is not None:
                dtypes[d] = name
        return n, name

    def iter_lid(it):
        # an iterator that takes no attribute (stoker's _Iter has __slots__): its loader's number
        return getattr(getattr(it, "_loader", None), "_stk_lid", 0)

    def block_start(lid, b, t0, t1):
        # a batch that starts a block: the first after a write, of another loader, or after a gap
        # over 4.29 s; one whose wait is over 4.29 s does not fit a record: a text line instead
        nonlocal pos, base, prev, blid, bdt, bn
        n, dt = batch_size(b)
        flush_block()
        if nb == 1:
            C[:] = ZERO                     # the set-up's, before the first batch: not a step's
        if t1 - t0 >> 32:
            emit("N %d %d %d %d %s %d %s\n" % (st["pid"], t0, t1 - t0, n, dt, lid, counters()))
            prev = t1
            return
        base = t0
        blid = lid
        bdt = dt
        bn = n
        pack_into(blk, 0, 0, t1 - t0)
        pos = 8
        prev = t1

    def wrap_next(orig):
        # the hook's hot path, once per batch: two clock reads, one pack_into a preallocated block;
        # the rest only at a block's start (a new loader, every 0.2 s) or for a gap over 4.29 s
        def __next__(self):
            nonlocal in_next, nb, pos, prev
            t0 = now()
            in_next = True
            nb += 1
            timed = not nb & 63             # the hook times its own work on 1 batch in 64
            if timed:
                tb = now()
            try:
                b = orig(self)
            except StopIteration:
                emit("E %d %d\n" % (os.getpid(), now()))
                lid = self._stk_lid or iter_lid(self)
                ld = stoker_loaders.get(lid)
                if ld is not None:
                    stoker_stats(lid, ld)
                raise
            finally:
                in_next = False
            t1 = now()
            lid = self._stk_lid or iter_lid(self)
            if lid == blid and t1 - flushed < 200000000:
                try:
                    pack_into(blk, pos, t0 - prev, t1 - t0)
                    pos += 8
                    prev = t1
                except struct.error:        # a gap or wait over 4.29 s
                    block_start(lid, b, t0, t1)
                else:
                    if pos == BLK:
                        flush_block()
            else:
                block_start(lid, b, t0, t1)
            if timed:
                K[K[0] % 1024 + 1] = tb - t0 + now() - t1
                K[0] += 1
            return b
        return __next__

    lids = {}

    def loader_id(loader):
        # which loader an iterator belongs to (training and validation apart): a small number per
        # dataset (a new DataLoader each epoch over the same dataset is the same training loader),
        # else per loader object (a dataset that takes no attribute: a list), kept on both (the
        # id() of a freed object may come back, an attribute does not)
        ds = getattr(loader, "dataset", None)
        lid = getattr(ds, "_stk_lid", 0) or getattr(loader, "_stk_lid", 0)
        if not lid:
            lid = len(lids) + 1
            lids[lid] = 1
        ok = 0
        for o in (ds, loader):
            if o is not None:
                try:
                    o._stk_lid = lid
                    ok = 1
                except Exception:
                    pass
        return lid if ok else 0

    def in_memory(loader):
        # data already in memory (a TensorDataset, a list of tensors or batches): no worker helps
        ds = getattr(loader, "dataset", None)
        return int(type(ds).__name__ == "TensorDataset" or isinstance(ds, (list, tuple)))

    def is_stoker(loader):
        # stoker.Loader, stoker.DataLoader (also if it becomes a torch DataLoader subclass)
        return type(loader).__module__.split(".")[0] == "stoker"

    def stoker_threads(s):
        return int(getattr(s, "decode_threads", None) or getattr(s, "num_workers", 0) or 0)

    import weakref
    stoker_loaders = weakref.WeakValueDictionary()  # lid -> loader: their own stats at the end

    def stoker_stats(lid, loader):
        # stoker's loader reports from its own counters (stats()): threads, per-stage busy and
        # starved seconds, bad records, the library's own verdict; cumulative, the last one counts
        try:
            d = loader.stats(max_errors=0)
            if not d.get("started"):
                return
            rd, dc, v = d["read"], d["decode"], d.get("verdict") or {}
            fx = d.get("fetch") or {}   # s3:// datasets (since 0.5): appended, older doctors stop before
            emit("L %d %d %d %d %.6f %.6f %.6f %.6f %.6f %d %d %s %d %.6f %.6f %d %d\n" % (
                os.getpid(), lid, rd["threads"], dc["threads"], rd["busy_s"], rd["starved_s"],
                dc["busy_s"], dc["starved_s"], d["wall_s"], d.get("error_count", 0), d.get("substituted", 0),
                (v.get("bottleneck_name") or "-").replace(" ", "_")[:15], fx.get("bytes", 0),
                fx.get("busy_s", 0.0), fx.get("starved_s", 0.0), fx.get("hits", 0), fx.get("misses", 0)))
        except Exception:
            pass

    iter_depth = [0]

    def wrap_iter(orig, kind, workers, pin, mem=lambda s: 0):
        def __iter__(self):
            if iter_depth[0]:               # a subclass's __iter__ through another patched one
                return orig(self)
            t0 = now()
            iter_depth[0] += 1
            try:
                it = orig(self)
            finally:
                iter_depth[0] -= 1
            k, wk = kind, workers
            if kind == "torch" and is_stoker(self):
                k, wk = "stoker", stoker_threads
            lid = loader_id(self)
            if k == "stoker":
                stoker_loaders[lid] = self
            try:
                it._stk_lid = lid
            except Exception:
                pass
            emit("I %d %d %d %s %d %d %d %d %d %d\n" % (os.getpid(), t0, now(), k, wk(self),
                                                        int(getattr(self, "batch_size", 0) or 0),
                                                        pin(self), lid, mem(self),
                                                        int(bool(getattr(self, "persistent_workers", 0)))))
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
                    st["buf_saved"] = -1 if path or isinstance(getattr(f, "raw", f), io.FileIO) else nb
                    st["buf_t1"] = t1
                    emit("S %d %d %d %d %s\n" % (os.getpid(), t0, t1, n, kind))
        return save

    def patch_numpy(m):
        m.save = timed_save(m.save, "np.save")

    def patch_safetensors(m):
        if hasattr(m, "save_file"):
            m.save_file = timed_save(m.save_file, "safetensors")

    def patch_dataloader(m):
        m._BaseDataLoaderIter._stk_lid = 0      # an iterator not made by DataLoader.__iter__
        m._BaseDataLoaderIter.__next__ = wrap_next(m._BaseDataLoaderIter.__next__)
        m.DataLoader.__iter__ = wrap_iter(m.DataLoader.__iter__, "torch",
                                          lambda s: int(s.num_workers),
                                          lambda s: int(bool(s.pin_memory)), in_memory)

    def patch_worker(m):
        import functools
        orig = m._worker_loop

        @functools.wraps(orig)
        def _worker_loop(*a, **k):
            emit("W %d %d %d\n" % (os.getpid(), now(), os.getppid()))
            return orig(*a, **k)
        m._worker_loop = _worker_loop

    def patch_stoker(m):
        m._Iter._stk_lid = 0
        m._Iter.__next__ = wrap_next(m._Iter.__next__)
        m.Loader.__iter__ = wrap_iter(m.Loader.__iter__, "stoker", stoker_threads, lambda s: 1)

    def patch_stoker_dataloader(m):
        # stoker.DataLoader's own __iter__ (it does not go through Loader.__iter__); also when it
        # is a torch DataLoader subclass: the outer of the patched __iter__s reports, as stoker
        D = getattr(m, "DataLoader", None)
        if D is not None and "__iter__" in D.__dict__:
            D.__iter__ = wrap_iter(D.__dict__["__iter__"], "stoker", stoker_threads, lambda s: 1)

    def patch_torch(torch):
        T = torch.Tensor
        here = os.path.dirname(torch.__file__) + os.sep
        getframe = sys._getframe

        def user_call():
            # calls from torch's own code (optimizers reading step counters) and from the data
            # pipeline (transforms drawing random numbers while the loop waits) are not the step's
            return not in_next and not getframe(2).f_code.co_filename.startswith(here)

        def counted(orig, slot):
            def call(self, *a, **k):        # user_call() inlined: one Python call less per call
                if in_next or getframe(1).f_code.co_filename.startswith(here):
                    return orig(self, *a, **k)
                t = now()
                r = orig(self, *a, **k)
                C[8] += now() - t
                C[slot] += 1
                if self.is_cuda:
                    C[4] += 1
                return r
            return call

        orig_item = T.item

        def item(self):                     # counted(T.item, 0) without the *a, **k to pack: the
                                            # one call most steps make (loss.item())
            if in_next or getframe(1).f_code.co_filename.startswith(here):
                return orig_item(self)
            t = now()
            r = orig_item(self)
            C[8] += now() - t
            C[0] += 1
            if self.is_cuda:
                C[4] += 1
            return r

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

        T.item = item
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

        # a training loop without a loader (tensors sliced in the loop): each backward() is a step,
        # a batch of the pseudo-loader "loop" that waited 0 ns, so the same rules read its steps;
        # only in a process that has not iterated a loader. Its size: the first input of the first
        # module called after the step's backward, on the first steps and 1 step in 64 (a global
        # forward pre-hook, removed at the next backward: never while torch iterates its hooks)
        ab = torch.autograd.backward
        reg = getattr(getattr(torch.nn, "modules", None), "module", None)
        reg = getattr(reg, "register_module_forward_pre_hook", None)
        lp = {"n": 0, "dt": None, "h": None, "steps": 0, "lid": 0, "on": True, "last": 0}

        class LoopBatch:
            __slots__ = ("shape", "dtype")

        lb = LoopBatch()
        lb.shape = (0,)
        lb.dtype = None

        def fwd_pre(mod, inp):
            if lp["dt"] is None:
                x = inp[0] if isinstance(inp, tuple) and inp else inp
                sh = getattr(x, "shape", None)
                if sh:
                    lp["n"] = int(sh[0])
                    lp["dt"] = x.dtype

        def arm():
            if reg is not None and lp["h"] is None:
                lp["dt"] = None
                try:
                    lp["h"] = reg(fwd_pre)
                except Exception:
                    pass

        def backward(*a, **k):
            r = ab(*a, **k)
            if lp["on"]:
                h = lp["h"]
                if h is not None:
                    lp["h"] = None
                    h.remove()
                if nb == lp["last"]:
                    loop_step()         # no loader batch since the last backward: the loop's step
                elif not lp["lid"]:
                    lp["on"] = False    # a loader's batches are the steps
                lp["last"] = nb
            return r

        class LoopIter:
            _stk_lid = 0

        li = LoopIter()

        def loop_step():
            nonlocal nb, pos, prev
            t = now()
            if not lp["lid"]:
                lid = len(lids) + 1
                lids[lid] = 1
                lp["lid"] = li._stk_lid = lid
                emit("I %d %d %d loop 0 %d 0 %d 1 0\n" % (os.getpid(), t, t, lp["n"], lid))
            if lp["dt"] is not None:
                lb.shape = (lp["n"],)
                lb.dtype = lp["dt"]
            lp["steps"] += 1
            nb += 1
            if li._stk_lid == blid and t - flushed < 200000000:
                try:
                    pack_into(blk, pos, t - prev, 0)
                    pos += 8
                    prev = t
                except struct.error:
                    block_start(li._stk_lid, lb, t, t)
                else:
                    if pos == BLK:
                        flush_block()
            else:
                block_start(li._stk_lid, lb, t, t)
            if lp["steps"] < 3 or not lp["steps"] & 63:
                arm()

        arm()
        torch.autograd.backward = backward

        save = timed_save(torch.save, "torch.save")
        torch.save = save
        torch.serialization.save = save

        AC = getattr(getattr(torch, "amp", None), "autocast_mode", None)
        AC = getattr(AC, "autocast", None)
        if AC is not None:
            orig_enter = AC.__enter__
            ac_step = [-1, -1]

            def __enter__(self):
                r = orig_enter(self)
                if getattr(self, "_enabled", True):
                    dt = getattr(self, "fast_dtype", None)
                    i = 9 if dt == torch.float16 else 10 if dt == torch.bfloat16 else 0
                    if i and ac_step[i - 9] != nb:     # a step counts once
                        ac_step[i - 9] = nb
                        C[i] += 1
                return r
            AC.__enter__ = __enter__

    targets = {"torch": patch_torch,
               "torch.utils.data.dataloader": patch_dataloader,
               "torch.utils.data._utils.worker": patch_worker,
               "stoker.loader": patch_stoker,
               "stoker.dataloader": patch_stoker_dataloader,
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
            for lid, ld in list(stoker_loaders.items()):
                stoker_stats(lid, ld)
            if K[0]:                        # the median: a preempted batch does not count
                ks = sorted(K[1:min(K[0], 1024) + 1])
                emit("K %d %d %d\n" % (pid, K[0], ks[len(ks) // 2]))
            emit("X %d %d %s\n" % (pid, now(), counters()))
    atexit.register(at_exit)


CKPT_EXT = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npy", ".npz", ".pkl", ".pickle", ".h5",
            ".msgpack", ".tar")
LOG_EXT = (".log", ".csv", ".txt", ".json", ".jsonl", ".yaml", ".out")


def install_writes(st, C, now, emit, step):
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
        if st["buf_saved"] == step():       # the file a save into a buffer is written to in the
            st["buf_saved"] = -1            # same step: the time since the save (getvalue()...) is the save's
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
            if step() != self._stk_b0:
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
                C[11 + 2 * k] += t1 - (self._stk_t0 if step() == self._stk_b0 else t)
                if k == 0 and step() == self._stk_b0:  # a checkpoint file: its span, for the plot
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
                raw._stk_b0 = step()
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
            if raw is not None and step() == raw._stk_b0:
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
