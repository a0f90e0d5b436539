# SPDX-License-Identifier: MIT
# stoker's launcher in every Python process of a job. `python -m stoker` (for the processes its
# script starts) and `stoker run` (for all of them; it writes this file into a private directory)
# put this file's directory first on PYTHONPATH with STOKER_LAUNCH=1, so each Python process
# imports it at start-up: DataLoader workers started by spawn, torchrun's children, DDP's spawn.
# It imports nothing heavy: when the process itself imports torch, a meta-path finder runs
# stoker.launch.install() right after torch's import (docs/FRAMEWORKS.md). It then chains to
# the sitecustomize it shadows (Debian's, a virtualenv's), as Python would have run it.
import os
import sys


def _stk_launch_hook():
    if os.environ.get("STOKER_LAUNCH") != "1":
        return

    def install():
        try:
            from stoker import launch
        except Exception as e:  # noqa: BLE001 — no stoker here: the job runs as it is
            sys.stderr.write("stoker: the stoker package cannot be imported in this Python "
                             "(%s: %s); DataLoaders are torch's\n" % (type(e).__name__, e))
            return
        launch.install()

    if "torch" in sys.modules:
        install()
        return

    class Finder:
        def find_spec(self, name, path=None, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            import importlib.util
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            orig_exec = spec.loader.exec_module

            def exec_module(module):
                orig_exec(module)
                install()
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def _stk_launch_chain():
    # run the sitecustomize this file shadows: the next one on sys.path after this directory.
    # Once per process (a doctor's hook before this one chains to this one, not back).
    if getattr(sys, "_stoker_launch_site", False):
        return
    sys._stoker_launch_site = True
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


if not getattr(sys, "_stoker_launch_site", False):
    try:
        _stk_launch_hook()
    except Exception:   # noqa: BLE001 — never break the job's start-up
        pass
_stk_launch_chain()
