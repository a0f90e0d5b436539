# SPDX-License-Identifier: MIT
"""The `stoker` and `loaderbench` commands of an installed wheel.

The wheel carries the two C programs in ``stoker/bin`` next to ``libstoker.so.0`` (they find it
through their RUNPATH); pip installs these functions as the console scripts ``stoker`` and
``loaderbench`` in the environment's ``bin/``, and each replaces itself with the program (exec:
same arguments, exit status, signals and terminal). From a source checkout or a ``cmake
--install`` tree the programs are ``build/stoker`` / ``<prefix>/bin/stoker`` instead.
"""

import os
import sys


def _exec(name):
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.access(exe, os.X_OK):
        sys.stderr.write("%s: %s is missing: this stoker package was not installed from a wheel "
                         "(pip install <stoker checkout>); run the program from the CMake build "
                         "or install tree instead\n" % (name, exe))
        return 127
    os.execv(exe, [name] + sys.argv[1:])
    return 127  # not reached


def stoker():
    """Entry point of the `stoker` console script (pack, info, verify, ...)."""
    return _exec("stoker")


def loaderbench():
    """Entry point of the `loaderbench` console script."""
    return _exec("loaderbench")
