"""Writing files so that a failure leaves nothing half-written: :func:`atomic_write`, which every writer of
corevector's files uses (model files, LIBSVM model files, the command line's outputs)."""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile

__all__ = ["atomic_write"]


@contextlib.contextmanager
def atomic_write(path, binary=False):
    """Open a temporary file next to ``path`` for writing; on success, rename it onto ``path``: a failed write
    (disk full, file size limit, an exception while writing) leaves the previous file as it was and no
    partial file behind.

    The temporary file lives in the same folder (``os.replace`` is atomic only within a file system)
    and is flushed and fsync'ed before the rename; on any exception it is removed and ``path`` is left
    untouched.  The new file gets the mode of the file it replaces, else the umask's default.  An OS error
    names ``path``, not the temporary file; a ``path`` that is a folder is refused before anything is written.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"output directory does not exist: {folder}")
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a folder, not a file", path)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path) from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _new_file_mode(path))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise type(exc)(exc.errno, exc.strerror, path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_file_mode(path):
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:  # a new file: what open() would give it
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
