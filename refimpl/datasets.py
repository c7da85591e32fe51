"""Data sets for the experiments, and loaders for a user's own files.

* :func:`checkerboard` -- the synthetic benchmark of 001_1b97d3ee98da12aa.txt Sec. 5.1: points drawn
  uniformly in [0, n_cells)^2 (a 4 x 4 board by default), labelled by the colour of their cell.
* :func:`load_libsvm` -- a LIBSVM / SVMlight text file (``label index:value ...``), as a dense array.
* :func:`load_csv` -- a numeric comma-separated file, one sample per row, one column holding the target.

The loaders raise ``ValueError`` with a one-line message naming the file for anything that is not
a readable, non-empty, all-numeric data file, so that command-line tools can report it cleanly.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["checkerboard", "load_libsvm", "load_csv"]


def checkerboard(m, random_state=None, n_cells=4):
    """The checkerboard of 001 Sec. 5.1.

    Parameters
    ----------
    m : int -- number of points (>= 1).
    random_state : None, int or numpy Generator.
    n_cells : int -- cells per side; the paper uses a 4 x 4 board.

    Returns
    -------
    X : (m, 2) float64 array, uniform in [0, n_cells)^2.
    y : (m,) int array, +1 where floor(x1) + floor(x2) is even and -1 where it is odd.
    """
    m = int(m)
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if int(n_cells) < 1:
        raise ValueError(f"n_cells must be >= 1, got {n_cells}")
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    X = rng.uniform(0.0, float(n_cells), size=(m, 2))
    parity = (np.floor(X[:, 0]).astype(np.int64) + np.floor(X[:, 1]).astype(np.int64)) % 2
    y = np.where(parity == 0, 1, -1).astype(int)
    return X, y


def _check_file(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"data file not found: {path}")
    if not os.path.isfile(path):
        raise ValueError(f"not a regular file: {path}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"data file is empty: {path}")
    return path


def load_libsvm(path, n_features=None):
    """Read a LIBSVM/SVMlight file with :func:`sklearn.datasets.load_svmlight_file`.

    Returns ``(X, y)`` with X a dense C-contiguous float64 array (the CVM engines take dense input)
    and y the float labels as stored in the file.
    """
    from sklearn.datasets import load_svmlight_file

    path = _check_file(path)
    try:
        X, y = load_svmlight_file(path, n_features=n_features, dtype=np.float64)
    except (ValueError, UnicodeDecodeError, RuntimeError) as exc:
        raise ValueError(f"cannot parse {path} as LIBSVM format: {str(exc).splitlines()[0] if str(exc) else exc!r}") \
            from exc
    if X.shape[0] == 0:
        raise ValueError(f"no samples in {path}")
    return np.ascontiguousarray(X.toarray()), np.asarray(y)


def load_csv(path, target=-1, delimiter=",", skip_header="auto"):
    """Read a numeric CSV file: one sample per row, the column ``target`` (default: last) is y.

    Parameters
    ----------
    path : str or path-like.
    target : int or None -- column index of the target (negative counts from the end); None means
        the file has no target column (y is returned as None).
    delimiter : str.
    skip_header : 'auto', bool -- 'auto' skips the first line when it is not numeric.

    Returns
    -------
    X : (n, d) float64 array; y : (n,) array (int when all targets are integral) or None.
    """
    path = _check_file(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if skip_header == "auto":
        skip_header = bool(lines) and not _is_numeric_row(lines[0].split(delimiter))
    if skip_header:
        lines = lines[1:]
    if not lines:
        raise ValueError(f"no data rows in {path}")
    rows = []
    for k, line in enumerate(lines, start=1 + int(bool(skip_header))):
        fields = [s.strip() for s in line.split(delimiter)]
        try:
            rows.append([float(s) for s in fields])
        except ValueError:
            raise ValueError(f"{path}: non-numeric value on data line {k}: {line[:60]!r}") from None
        if len(rows[-1]) != len(rows[0]):
            raise ValueError(f"{path}: data line {k} has {len(rows[-1])} columns, expected {len(rows[0])}")
    data = np.asarray(rows, dtype=np.float64)
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{path}: contains NaN or infinite values")
    if target is None:
        return np.ascontiguousarray(data), None
    n_cols = data.shape[1]
    if not -n_cols <= int(target) < n_cols:
        raise ValueError(f"{path}: target column {target} out of range for {n_cols} columns")
    if n_cols < 2:
        raise ValueError(f"{path}: needs at least one feature column besides the target")
    t = int(target) % n_cols
    y = data[:, t]
    X = np.delete(data, t, axis=1)
    if np.all(y == np.round(y)):
        y = y.astype(int)
    return np.ascontiguousarray(X), y


def _is_numeric_row(fields):
    try:
        [float(s) for s in fields]
        return True
    except ValueError:
        return False
