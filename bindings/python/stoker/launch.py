# SPDX-License-Identifier: MIT
"""A training script run unchanged with stoker's DataLoader (``python -m stoker SCRIPT ARGS``,
``stoker run -- python SCRIPT ARGS``).

install() puts a subclass of torch's DataLoader in place of torch.utils.data.DataLoader (and
torch.utils.data.dataloader.DataLoader), so that every DataLoader the script or a library builds
after it (``from torch.utils.data import DataLoader`` included) is one. That subclass is a whole
torch DataLoader (torch's __init__ runs; isinstance, len, sampler, batch_sampler hold); at its
first iter() it builds a stoker.DataLoader from the same arguments and, when stoker takes them,
hands out stoker's passes; when stoker refuses (ValueError), torch's own passes, unchanged. One
line per loader on stderr says which, and why. Subclasses of DataLoader (timm's
MultiEpochsDataLoader, a user's) are torch's, untouched. How it reaches child processes: the
package's _site/sitecustomize.py (docs/FRAMEWORKS.md).
"""

import inspect
import os
import sys
import traceback

ENV = "STOKER_LAUNCH"          # "1": install() in every Python process that imports torch
PREFIX = "stoker"              # the per-loader line starts "stoker: DataLoader #N ..."

_state = {"torch": None, "cls": None, "count": 0}


def torch_dataloader():
    """torch's own DataLoader class (also after install())."""
    if _state["torch"] is not None:
        return _state["torch"]
    import torch.utils.data as tud
    return getattr(tud.DataLoader, "_stoker_torch_original", tud.DataLoader)


def _say(text):
    rank = ""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            rank = "[rank %d]" % dist.get_rank()
    except Exception:   # noqa: BLE001 — a torch without distributed: no rank in the line
        pass
    sys.stderr.write("%s%s: %s\n" % (PREFIX, rank, text))
    sys.stderr.flush()


# frames skipped when naming where a DataLoader was built: torch's and stoker's own, and the
# frameworks that rebuild a user's DataLoader from its arguments (Lightning, Accelerate) or
# build it for the user (timm's create_loader)
_SKIP = ("torch/utils/data/", "/lightning/", "/lightning_fabric/", "/pytorch_lightning/",
         "/accelerate/", "/timm/data/")
_HERE = os.path.abspath(__file__).replace(os.sep, "/")
_PKG = os.path.dirname(_HERE) + "/"


def _where():
    """file:line of the frame that built the DataLoader: the innermost outside _SKIP."""
    for fr in reversed(traceback.extract_stack()[:-2]):
        f = os.path.abspath(fr.filename).replace(os.sep, "/")
        if f.startswith(_PKG) or any(k in f for k in _SKIP):
            continue
        return "%s:%d" % (os.path.basename(f), fr.lineno)
    return "?"


def _built_by_stoker():
    """True when the innermost frame outside this module, torch's DataLoader code and the
    frameworks of _SKIP (Lightning wraps __init__) is stoker's package."""
    f = sys._getframe(2)
    while f is not None:
        name = os.path.abspath(f.f_code.co_filename).replace(os.sep, "/")
        if name != _HERE and not any(k in name for k in _SKIP):
            return name.startswith(_PKG)
        f = f.f_back
    return False


def _short(text, n=300):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3] + "..."


def _reason(err):
    """The first line of a stoker refusal (the supported list that follows is the docs')."""
    import re
    text = str(err).split("\nstoker.DataLoader supports:")[0]
    text = re.sub(r"^stoker\.DataLoader cannot reproduce (.*?) exactly, so it refuses it[:.] ?",
                  r"\1: ", text, flags=re.S)
    return _short(text.replace("\nInstead:", " Instead:"), 400).rstrip(":")


def _level(dl, caught):
    """("fully" | "partly" | "not", detail) for a built stoker.DataLoader DL: its
    ``acceleration`` ((level, detail), level "full", "partial" or "none") when it has one, else
    its plan (mode "c", "tail" with the steps in Python, "torch" with the reason), else the
    warnings of its construction: one that names Python makes it "partly"."""
    acc = getattr(dl, "acceleration", None)
    if isinstance(acc, tuple) and len(acc) == 2:
        level, detail = acc
        return {"full": "fully", "partial": "partly", "none": "not"}.get(level, level), detail
    plan = getattr(dl, "_plan", None)
    mode = getattr(plan, "mode", None)
    if mode == "torch":
        return "not", _short(getattr(plan, "reason", None) or "stoker cannot read it")
    if mode == "tail":
        return "partly", _short("; ".join(getattr(plan, "python", None) or []) or "its tail")
    if mode == "c":
        return "fully", ""
    py = [str(w.message) for w in caught if "Python" in str(w.message)]
    if py:
        return "partly", _short("; ".join(py))
    return "fully", ""


def _build(args):
    """(level, detail, stoker.DataLoader or None) for a DataLoader built with ARGS (its
    arguments by name): stoker's with strict=True when it takes them; else, where
    stoker.DataLoader can run part of a pipeline in Python (a `strict` argument), the one it
    builds without strict, unless it would only wrap torch's DataLoader; else ("not", why)."""
    import warnings
    if args is None:
        return "not", "its arguments do not bind to DataLoader's", None
    try:
        from . import dataloader as sdl
        cls = sdl.DataLoader
        params = inspect.signature(cls.__init__).parameters
    except Exception as e:   # noqa: BLE001 — no torchvision, ...: torch's runs it
        return "not", "stoker.DataLoader is not usable here (%s: %s)" % (
            type(e).__name__, _short(e)), None
    kw = dict(args)
    kw.pop("kwargs", None)
    unknown = [k for k in kw if k not in params]
    if unknown:
        return "not", "stoker.DataLoader has no argument %s" % ", ".join(unknown), None
    tries = [True, False] if "strict" in params else [None]
    why = None
    for strict in tries:
        if strict is not None:
            kw["strict"] = strict
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                dl = cls(**kw)
        except ValueError as e:
            why = why or _reason(e)
            continue
        except Exception as e:   # noqa: BLE001 — a failure of stoker's must not stop the job
            return "not", "stoker.DataLoader failed (%s: %s); torch's runs it" % (
                type(e).__name__, _short(e)), None
        level, detail = ("fully", "") if strict else _level(dl, caught)
        if level == "not":
            _close(dl)
            return "not", detail or why, None
        for w in caught:     # stoker's own warnings (pin_memory, what runs in Python) reach the user
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return level, detail, dl
    return "not", why, None


def _close(dl):
    try:
        dl.close()
    except Exception:   # noqa: BLE001
        pass


def _build_class(base):
    sig = inspect.signature(base.__init__)

    class DataLoader(base):
        """torch.utils.data.DataLoader, run by stoker where stoker can (stoker.launch)."""
        _stoker_torch_original = base

        def __init__(self, *args, **kwargs):
            base.__init__(self, *args, **kwargs)
            if type(self) is not _state["cls"]:   # a subclass: torch's, untouched
                if not type(self).__module__.startswith("stoker."):
                    self._stk_where = _where()
                return
            self._stk = None                # the stoker.DataLoader, once built
            self._stk_said = False
            self._stk_args = None
            if _built_by_stoker():          # stoker's own (its torch fallback, the Python
                self._stk_said = True       # tail's workers): torch's, not reported
                return
            try:
                bound = sig.bind(self, *args, **kwargs)
                self._stk_args = dict(list(bound.arguments.items())[1:])
            except TypeError:
                pass
            self._stk_where = _where()

        def _stk_decide(self):
            if self._stk_said:
                return self._stk
            self._stk_said = True
            _state["count"] += 1
            n = self._stk_n = _state["count"]
            ds = getattr(self, "dataset", None)
            head = "DataLoader #%d (%s, %s, batch_size=%s)" % (
                n, self._stk_where, type(ds).__name__, getattr(self, "batch_size", None))
            level, detail, dl = _build(self._stk_args)
            if level == "not":
                _say("%s: not accelerated: %s" % (head, detail))
                return None
            _say("%s: accelerated %s%s" % (head, level, (" (in Python: %s)" % detail) if detail else ""))
            self._stk = dl
            return dl

        def __iter__(self):
            if type(self) is not _state["cls"]:
                if hasattr(self, "_stk_where") and not getattr(self, "_stk_said", False):
                    self._stk_said = True     # a DataLoader subclass (not stoker's own): torch's
                    _state["count"] += 1
                    _say("DataLoader #%d (%s, %s, batch_size=%s): not accelerated: a subclass of "
                         "DataLoader (%s.%s), run as torch's" % (
                             _state["count"], self._stk_where, type(self.dataset).__name__,
                             self.batch_size, type(self).__module__, type(self).__qualname__))
                return base.__iter__(self)
            dl = self._stk_decide()
            if dl is None:
                return base.__iter__(self)
            try:
                return iter(dl)
            except Exception as e:   # noqa: BLE001 — a pass stoker cannot start: torch's from now on
                self._stk = None
                _say("DataLoader #%d (%s): stoker cannot start this pass (%s: %s); torch's "
                     "DataLoader runs this loader from now on" % (
                         self._stk_n, self._stk_where, type(e).__name__, _short(e, 200)))
                _close(dl)
                return base.__iter__(self)

        def __len__(self):
            dl = getattr(self, "_stk", None)
            return len(dl) if dl is not None else base.__len__(self)

        @property
        def stoker_loader(self):
            """The stoker.DataLoader that runs this loader's passes, or None (torch's)."""
            return getattr(self, "_stk", None)

    # torch's signature, for code that reads it (Lightning's re-instantiation, stoker's own
    # torch fallback keeping the arguments torch knows)
    DataLoader.__init__.__signature__ = sig
    DataLoader.__module__ = "torch.utils.data.dataloader"
    DataLoader.__qualname__ = "DataLoader"
    return DataLoader


def install(tud=None):
    """Replace torch.utils.data.DataLoader by stoker's launcher subclass (idempotent)."""
    if tud is None:
        import torch.utils.data as tud
    import torch.utils.data.dataloader as tdl
    if _state["cls"] is not None and tud.DataLoader is _state["cls"]:
        return _state["cls"]
    base = getattr(tud.DataLoader, "_stoker_torch_original", tud.DataLoader)
    _state["torch"] = base
    try:                             # stoker's own DataLoader class binds torch's, built first
        from . import dataloader as sdl
        getattr(sdl, "DataLoader")
    except Exception:   # noqa: BLE001 — decided per loader at its first pass
        pass
    cls = _build_class(base)
    _state["cls"] = cls
    tud.DataLoader = cls
    if not _module_uses_name(tdl, "DataLoader"):
        tdl.DataLoader = cls
    return cls


def _module_uses_name(mod, name):
    """True when a function of MOD reads the global NAME (torch 1.13's DataLoader.__setattr__
    calls super(DataLoader, self): replacing that global would make it recurse)."""
    import types

    def codes(obj, depth=0):
        if isinstance(obj, types.FunctionType):
            yield obj.__code__
        elif isinstance(obj, (staticmethod, classmethod)):
            yield from codes(obj.__func__, depth)
        elif isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    yield from codes(f, depth)
        elif isinstance(obj, type) and depth == 0 and obj.__module__ == mod.__name__:
            for v in vars(obj).values():
                yield from codes(v, 1)

    def names(code):
        yield from code.co_names
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                yield from names(c)
    return any(name in names(c) for v in list(vars(mod).values()) for c in codes(v))


def uninstall():
    """Put torch's DataLoader back."""
    if _state["cls"] is None:
        return
    import torch.utils.data as tud
    import torch.utils.data.dataloader as tdl
    tud.DataLoader = _state["torch"]
    if tdl.DataLoader is _state["cls"]:
        tdl.DataLoader = _state["torch"]
    _state["cls"] = None


def site_dir():
    """The directory whose sitecustomize.py makes every Python process started with it first
    on PYTHONPATH (and STOKER_LAUNCH=1) install() when it imports torch."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def child_environment(env):
    """ENV for the processes the script starts (DataLoader workers by spawn, torchrun, DDP
    spawn): the launcher in each, stoker importable."""
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [site_dir(), pkg_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    seen, path = set(), []
    for p in parts:
        if p not in seen:
            seen.add(p)
            path.append(p)
    env["PYTHONPATH"] = os.pathsep.join(path)
    env[ENV] = "1"
    return env
