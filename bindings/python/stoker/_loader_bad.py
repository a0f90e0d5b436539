# SPDX-License-Identifier: MIT
"""stoker.Loader's bad-record messages as Python warnings.

The library logs the loader's first bad record (named, with its reason and the good record that
replaced it) and one summary line at the end of every epoch that had one (stk_loader_set_log).
It calls the log function only inside stk_loader_next, in the iterating thread, after its locks
are released: the callback here only keeps the text, and the iterating thread turns each into a
``stoker.BadRecordWarning`` once next() returned, so the warning points at the user's loop."""

import warnings

from . import _lib
from .errors import BadRecordWarning


class BadRecordLog:
    """The log function of one loader handle and the messages it has not warned about yet."""

    def __init__(self):
        self.pending = []
        self.fn = _lib.LogFn(self._keep)   # referenced as long as the loader: the C side holds it

    def _keep(self, _user, _level, msg):
        try:
            self.pending.append(_lib.text(msg))
        except Exception:   # noqa: BLE001 - never raise into C
            pass

    def install(self, lib, h):
        """Route handle H's messages here (before start)."""
        return lib.stk_loader_set_log(h, self.fn, None)

    def warn(self, stacklevel):
        """Warn about the messages kept so far (the iterating thread)."""
        while self.pending:
            warnings.warn("stoker: " + self.pending.pop(0), BadRecordWarning, stacklevel=stacklevel + 1)
