# SPDX-License-Identifier: MIT
"""python -m stoker SCRIPT [ARGS...] | python -m stoker -m MODULE [ARGS...]

Runs a training script unchanged, as ``python SCRIPT ARGS`` would (as __main__, with sys.argv
and sys.path[0] set), with every torch.utils.data.DataLoader it builds run by stoker where stoker
can, torch's own where it cannot; one line per loader on stderr says which (stoker.launch).
"""

import os
import runpy
import sys

USAGE = """usage: python -m stoker SCRIPT [ARGS...]
       python -m stoker -m MODULE [ARGS...]

Run a training script unchanged with stoker's DataLoader: every torch.utils.data.DataLoader
the script (or a library it uses) builds is run by stoker where stoker reproduces its dataset
and transforms exactly, and stays torch's own where it does not. At each loader's first pass
one line on stderr says "accelerated fully", "accelerated partly (in Python: ...)" or "not
accelerated: <why>". Processes the script starts (DataLoader workers, torchrun, DDP spawn)
get the same replacement. For a command that is not `python SCRIPT` (torchrun, a shell
script), use `stoker run -- COMMAND`.
"""


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        import stoker
        print("stoker %s" % stoker.__version__)
        return 0
    module = None
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.stderr.write("python -m stoker: -m needs a module name\n\n" + USAGE)
            return 2
        module, rest = argv[1], argv[2:]
    else:
        script, rest = argv[0], argv[1:]
        if not os.path.exists(script):
            sys.stderr.write("python -m stoker: %s: no such file\n" % script)
            return 2

    from . import launch
    launch.child_environment(os.environ)
    try:
        import torch.utils.data  # noqa: F401
    except ImportError:
        sys.stderr.write("stoker: torch is not importable: the script runs without stoker\n")
    else:
        launch.install()

    if module is not None:
        sys.argv = [module] + rest
        sys.path.insert(0, os.getcwd())
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [script] + rest
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
