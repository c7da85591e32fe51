"""Model files of the ``corevector`` command line, and atomic writes.

A model file is one line of JSON, the *header*, followed by the pickled estimator::

    {"format": "corevector-model", "version": 1, "corevector_version": "0.1.0",
     "estimator": "CVMClassifier", "n_features": 2, "data_format": "csv"}\\n
    <pickle of the fitted estimator>

:func:`load_model` reads and checks the header **before** it unpickles anything, so a file that is not
a corevector model (a pickled scikit-learn ``SVC``, a CSV file, a truncated file, ...) is refused with
a clear message without running any of its content, and a model written by a newer corevector (a
header ``version`` above :data:`VERSION`) is refused with a request to upgrade.  The payload is still
a pickle: load only model files you trust, as with any pickle (scikit-learn's own advice).

:func:`atomic_write` writes a file through a temporary file in the same folder and ``os.replace``:
a failed write (disk full, file size limit, an exception while writing) leaves the previous file as
it was and no partial file behind.
"""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import stat
import tempfile

#: the ``format`` field of every header
FORMAT = "corevector-model"
#: the layout version this code writes and the newest it reads; raise it when the layout changes
VERSION = 1
#: a header is one short line; a longer first line is not a corevector header
MAX_HEADER_BYTES = 4096


def _estimator_classes():
    """The classes a model file may hold: those of the command line's estimators (corevector.registry)."""
    from .registry import CLI_ESTIMATORS

    return {e.cls.__name__: e.cls for e in CLI_ESTIMATORS.values()}


class ModelFileError(ValueError):
    """A file that is not a model this corevector can read (one-line message naming the file)."""


@contextlib.contextmanager
def atomic_write(path, binary=False):
    """Open a temporary file next to ``path`` for writing; on success, rename it onto ``path``.

    The temporary file lives in the same folder (``os.replace`` is atomic only within a file system)
    and is flushed and fsync'ed before the rename; on any exception it is removed and ``path`` is left
    untouched.  The new file gets the mode of the file it replaces, else the umask's default.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"output directory does not exist: {folder}")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _new_file_mode(path))
        os.replace(tmp, path)
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


def make_header(estimator, data_format=None):
    from . import __version__

    name = type(estimator).__name__
    if _estimator_classes().get(name) is not type(estimator):
        raise TypeError(f"estimator must be one of {sorted(_estimator_classes())}, got {name}")
    if not hasattr(estimator, "n_features_in_"):
        raise ValueError(f"estimator must be fitted before it is saved ({name} has no n_features_in_)")
    return {"format": FORMAT, "version": VERSION, "corevector_version": __version__, "estimator": name,
            "n_features": int(estimator.n_features_in_), "data_format": data_format}


def save_model(estimator, path, data_format=None):
    """Write ``estimator`` (a fitted CVMClassifier, CVDD, MEB or CVR) with its header, atomically.

    ``data_format`` ('csv' or 'libsvm') records what the model was trained on (information only:
    ``corevector predict`` reads the format from the data file).  Returns the header.
    """
    header = make_header(estimator, data_format)
    line = json.dumps(header).encode("ascii") + b"\n"
    with atomic_write(path, binary=True) as f:
        f.write(line)
        pickle.dump(estimator, f, protocol=pickle.HIGHEST_PROTOCOL)
    return header


def read_header(f, path="model"):
    """Read and check the header line of the open binary file ``f``; return it as a dict."""
    line = f.readline(MAX_HEADER_BYTES + 1)
    try:
        header = json.loads(line.decode("ascii")) if line.endswith(b"\n") else None
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ModelFileError(f"{path} is not a corevector model file (no '{FORMAT}' header; "
                             f"models are written by 'corevector fit' or corevector.model_file.save_model)")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(f"{path}: invalid model header version {version!r}")
    if version > VERSION:
        raise ModelFileError(f"{path} was written by corevector {header.get('corevector_version', '?')} "
                             f"(model format version {version}); this corevector reads up to version {VERSION}: "
                             f"upgrade corevector")
    if header.get("estimator") not in _estimator_classes():
        raise ModelFileError(f"{path}: unknown estimator {header.get('estimator')!r} in the model header")
    return header


def load_model(path):
    """Return ``(estimator, header)`` from a file written by :func:`save_model`.

    The header is checked before the pickle is read (see the module docstring); the unpickled object
    must then be the fitted estimator class the header names, with the header's feature count.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelFileError(f"model file not found: {path}")
    with open(path, "rb") as f:
        header = read_header(f, path)
        try:
            est = pickle.load(f)
        except Exception as exc:  # a truncated or damaged payload after a valid header
            raise ModelFileError(f"{path}: damaged model file ({type(exc).__name__} while reading the "
                                 f"pickled estimator)") from None
    cls = _estimator_classes()[header["estimator"]]
    if type(est) is not cls:
        raise ModelFileError(f"{path}: the header names {cls.__name__} but the file holds a {type(est).__name__}")
    if getattr(est, "n_features_in_", None) != header.get("n_features"):
        raise ModelFileError(f"{path}: the header says {header.get('n_features')} features, the estimator "
                             f"{getattr(est, 'n_features_in_', None)}")
    return est, header
