# SPDX-License-Identifier: MIT
"""Exceptions raised by the stoker binding.

Every failing library call raises :class:`StokerError` (or a subclass chosen by the status code)
whose message is the library's per-handle text (``stk_*_last_error``: file, record and cause)
followed by the status name. ``e.status`` is the numeric status, ``e.status_name`` its symbol.
"""

import errno as _errno

from . import _lib


class StokerError(Exception):
    """A libstoker call failed. ``status``: the STK_E_* code or negated errno."""

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class DataError(StokerError, ValueError):
    """A record or the dataset itself is bad (corrupt, CRC mismatch, not a JPEG, too large,
    empty, truncated, unsupported format, incomplete or changed dataset)."""


class BadRecordWarning(UserWarning):
    """stoker.Loader met a bad record (the first of the loader: named, with its reason and the
    good record that replaced it) or ends an epoch that had some (a summary: count and commonest
    reasons)."""


class StokerIOError(StokerError, OSError):
    """An I/O error (STK_E_IO or a negated errno)."""

    def __init__(self, message, status=None, status_name=None):
        StokerError.__init__(self, message, status, status_name)
        if status is not None and -1000 < status < 0:
            self.errno = -status
        self.strerror = message


class StateError(StokerError, RuntimeError):
    """The call is not allowed in the loader's current state (STK_E_STATE)."""


class InvalidArgument(StokerError, ValueError):
    """An argument or parameter was refused (STK_E_INVALID, STK_E_BADPARAM, STK_E_RANGE)."""


class Cancelled(StokerError):
    """The wait was cancelled (STK_E_CANCELLED)."""


class Unsupported(StokerError, NotImplementedError):
    """Not supported by this build or machine (STK_E_UNSUPPORTED, STK_E_NODEVICE, STK_E_CUDA)."""


class DatasetExists(StokerError, FileExistsError):
    """The pack destination already holds a dataset (STK_E_EXISTS); pass force=True."""


class StokerTimeout(StokerError, TimeoutError):
    """No batch arrived within the loader's ``timeout``."""


class StokerMemoryError(StokerError, MemoryError):
    """Out of memory (STK_E_NOMEM)."""


_BY_STATUS = {
    _lib.STK_E_INVALID: InvalidArgument,
    _lib.STK_E_BADPARAM: InvalidArgument,
    _lib.STK_E_RANGE: InvalidArgument,
    _lib.STK_E_STATE: StateError,
    _lib.STK_E_NOMEM: StokerMemoryError,
    _lib.STK_E_FORMAT: DataError,
    _lib.STK_E_CORRUPT: DataError,
    _lib.STK_E_CRC: DataError,
    _lib.STK_E_DECODE: DataError,
    _lib.STK_E_NOT_JPEG: DataError,
    _lib.STK_E_TOO_LARGE: DataError,
    _lib.STK_E_EMPTY: DataError,
    _lib.STK_E_EMPTYSET: DataError,
    _lib.STK_E_TRUNCATED: DataError,
    _lib.STK_E_CHANGED: DataError,
    _lib.STK_E_INCOMPLETE: DataError,
    _lib.STK_E_LMDB: DataError,
    _lib.STK_E_EXISTS: DatasetExists,
    _lib.STK_E_CUDA: Unsupported,
    _lib.STK_E_NODEVICE: Unsupported,
    _lib.STK_E_UNSUPPORTED: Unsupported,
    _lib.STK_E_CANCELLED: Cancelled,
    _lib.STK_E_IO: StokerIOError,
}


def status_name(status):
    lib = _lib.get()
    return _lib.text(lib.stk_status_name(int(status)))


def strerror(status):
    lib = _lib.get()
    return _lib.text(lib.stk_strerror(int(status)))


def make(status, detail="", what=None):
    """The exception for STATUS with the library's DETAIL text (may be empty)."""
    name = status_name(status)
    generic = strerror(status)
    msg = detail.strip() if detail else ""
    if not msg:
        msg = generic
    elif generic and generic not in msg:
        msg = "%s (%s)" % (msg, generic)
    if what:
        msg = "%s: %s" % (what, msg)
    if name and name not in msg:
        msg = "%s [%s]" % (msg, name)
    if -1000 < status < 0:
        cls = StokerIOError
        if status == -_errno.ENOENT:
            cls = _FileNotFound
        elif status in (-_errno.EACCES, -_errno.EPERM):
            cls = _Permission
    else:
        cls = _BY_STATUS.get(status, StokerError)
    return cls(msg, status, name)


class _FileNotFound(StokerIOError, FileNotFoundError):
    pass


class _Permission(StokerIOError, PermissionError):
    pass
