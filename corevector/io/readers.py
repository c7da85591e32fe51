"""Data files of the ``corevector`` command line: the format sniffed from the lines, LIBSVM and CSV files
read through :mod:`refimpl.datasets` (gzip or not), and CSV columns matched to a model's feature names.
Errors are :class:`CLIError`, one line naming the file and line (see :mod:`corevector.cli`)."""
from __future__ import annotations

import sys

import numpy as np
import scipy.sparse as sp

PROG = "corevector"


class CLIError(Exception):
    """An error to report as one line on stderr (exit status 1)."""


# --------------------------------------------------------------------------------------------
# data files: the format is read from the file itself
# --------------------------------------------------------------------------------------------
#: how many data lines (blank and '#' comment lines aside) sniff_format looks at
SNIFF_LINES = 50


def _is_number(token):
    from refimpl.datasets import _is_number as is_number

    return is_number(token)


def _text_lines(path, limit=None):
    """(line number, text) of the data file's lines that are neither blank nor '#' comments (gzip or not,
    UTF-8, each line capped by refimpl.datasets.MAX_LINE_BYTES), with the readers' errors as CLIError."""
    from refimpl.datasets import data_lines

    try:
        for lineno, raw in data_lines(path):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CLIError(f"{path} line {lineno} is not UTF-8 text") from None
            if line.strip() and not line.lstrip().startswith("#"):
                yield lineno, line
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _line_kind(line):
    """'libsvm' (label index:value ...), 'label' (a lone number: a LIBSVM line with no feature, or a
    one-column CSV line), 'csv' (holds a comma) or None (neither)."""
    tokens = line.split("#", 1)[0].split()
    if tokens and _is_number(tokens[0]):
        if len(tokens) == 1:
            return "label"
        if all(":" in t and (t.split(":", 1)[0] == "qid" or t.split(":", 1)[0].lstrip("+-").isdigit())
               for t in tokens[1:]):
            return "libsvm"
    return "csv" if "," in line else None


def sniff_format(path):
    """'libsvm' or 'csv', from the first SNIFF_LINES data lines of the file (not from its name).

    A line ``label index:value ...`` is LIBSVM, a line holding a comma is CSV (a header too).  The
    file is LIBSVM when its lines are LIBSVM (lines of a lone label allowed), CSV when they are CSV;
    a mix, a line that is neither, or only lone numbers (a LIBSVM file with no features cannot be
    told from a one-column CSV) is an error asking for ``--format``.  Gzip files are read decompressed.
    """
    kinds = {}
    lines = _text_lines(path)
    for k, (lineno, line) in enumerate(lines):
        if k == SNIFF_LINES:
            lines.close()
            break
        kind = _line_kind(line)
        if kind is None:
            lines.close()
            raise CLIError(f"{path} line {lineno} is neither LIBSVM ('label index:value ...') nor CSV "
                           f"(comma-separated): {line.strip()[:60]!r}; see --format")
        kinds.setdefault(kind, lineno)
    if not kinds:
        raise CLIError(f"no data lines in {path}")
    if "libsvm" in kinds and "csv" in kinds:
        raise CLIError(f"{path} mixes LIBSVM (line {kinds['libsvm']}) and CSV (line {kinds['csv']}) lines; "
                       f"see --format")
    if "libsvm" in kinds:
        return "libsvm"
    if "csv" in kinds:
        return "csv"
    raise CLIError(f"{path}: every line is a single number, which can be LIBSVM (labels, no features) or a "
                   f"one-column CSV; pass --format")


def _header_by_target(path, target):
    """True when the CSV file's first row is a header by its target column, else None (the readers' own
    rule decides: a header when none of its fields is a number or a missing-value token).

    ``target(n_columns)`` is the target column's index (None: the file has none).  The first row is a header
    when its target field is a name -- not a number, not a missing-value token -- while the target fields
    of the next rows (up to SNIFF_LINES of them) are numbers: ``1,2,label`` above rows of numeric labels
    is a header, whatever its feature names.  (Above string labels, a name cannot be told from a label:
    ``--header`` says so.)"""
    import csv

    from refimpl.datasets import MISSING_TOKENS

    lines = _text_lines(path)
    rows = []
    try:
        for fields in csv.reader(line for _, line in lines):
            rows.append([f.strip() for f in fields])
            if len(rows) > SNIFF_LINES:
                break
    except csv.Error:
        return None  # the reader names the malformed line
    finally:
        lines.close()
    if len(rows) < 2:
        return None
    t = target(len(rows[0]))
    if t is None:
        return None
    name = rows[0][t]
    if _is_number(name) or name.lower() in MISSING_TOKENS:
        return None
    below = [r[t] for r in rows[1:] if len(r) == len(rows[0])]
    return True if below and all(_is_number(v) for v in below) else None


def _table(path, header=None, text_column=None):
    from refimpl.datasets import read_csv_table

    try:
        return read_csv_table(path, header, text_column)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def read_csv(path, header=None):
    """All columns of a numeric CSV file (comma-separated; blank and '#' lines skipped; gzip or not), dense
    float64: :func:`refimpl.datasets.read_csv_table` (its header rule and errors naming line and column)."""
    return _table(path, header).values


def read_libsvm(path, n_features=None):
    """``(X, y)`` of a LIBSVM file: X a CSR matrix (kept sparse; see _estimator_input), y float labels
    (:func:`refimpl.datasets.load_libsvm`: 1-based indices, errors naming the line, gzip or not)."""
    from refimpl.datasets import load_libsvm

    try:
        return load_libsvm(path, n_features)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


#: a LIBSVM file made dense for an estimator that needs dense rows may take this many entries (80 MB of float64)
#: beyond twice its stored values: the readers' memory stays in proportion to the file (a 40-byte file naming
#: feature 2e9 is never a 2e9-column array), with this allowance for files of mostly zeros
DENSE_ALLOWANCE = 10_000_000


def _estimator_input(X, dense=False, who=None):
    """The one place where data files become estimator input: LIBSVM files stay CSR end to end (the
    estimators take sparse input), CSV data is a C-contiguous float64 array.  ``dense``: the
    estimator (named ``who``) takes dense rows only, and a CSR matrix is made dense when its dense array
    holds at most ``max(DENSE_ALLOWANCE, 2 stored values)`` entries (else a CLIError naming the sizes)."""
    if sp.issparse(X):
        if not dense:
            return sp.csr_matrix(X, dtype=np.float64)
        n, d = X.shape
        if n * d > max(DENSE_ALLOWANCE, 2 * (X.nnz + n)):
            raise CLIError(f"{who or 'this estimator'} takes dense rows only, and this LIBSVM file's {n} x {d} "
                           f"rows hold {X.nnz} stored values: {n * d} entries dense, more than the reader makes "
                           f"dense (max({DENSE_ALLOWANCE}, twice the stored values))")
        return np.ascontiguousarray(X.toarray(), dtype=np.float64)
    return np.ascontiguousarray(X, dtype=np.float64)


class Data:
    """A data file read for fit or predict: X, the target y (None: none in the file), its format, the
    feature names and the target's name (None: a file without a header row, or LIBSVM)."""

    def __init__(self, X, y, fmt, names=None, target_name=None):
        self.X, self.y, self.fmt, self.names, self.target_name = X, y, fmt, names, target_name


def read_training_data(path, fmt=None, header=None, n_features=None, numeric_target=False, target=True):
    """:class:`Data` for ``fit``: the target is the last CSV column, or the LIBSVM label.  A CSV target may
    hold strings (class labels) unless ``numeric_target`` (a regressor's).  ``target=False``: the file has
    no target (every CSV column is a feature; LIBSVM labels are dropped).  A first row is a header as
    :func:`_header_by_target` or :func:`refimpl.datasets.read_csv_table` says, unless ``header`` says."""
    from refimpl.datasets import labels_from_text

    fmt = fmt or sniff_format(path)
    if fmt == "libsvm":
        X, y = read_libsvm(path, n_features)
        return Data(X, y if target else None, fmt)
    if n_features is not None:
        raise CLIError("--n-features applies to LIBSVM files only (a CSV file has its columns)")
    if not target:
        t = _table(path, header)
        return Data(t.values, None, fmt, t.names)
    if header is None:
        header = _header_by_target(path, lambda n: n - 1 if n >= 2 else None)

    def last(names, n):
        if n < 2:
            raise CLIError(f"{path}: needs at least one feature column besides the target (last column)")
        return n - 1

    t = _table(path, header, last)
    y = labels_from_text(t.text)
    if numeric_target and y.dtype.kind not in "iuf":
        i = next(i for i, s in enumerate(t.text) if not _is_number(s) or not np.isfinite(float(s)))
        raise CLIError(f"{path} line {t.linenos[i]}, column {t.columns}: the target {t.text[i][:60]!r} is not a "
                       f"finite number (a regressor's targets are numbers)")
    names = t.names[:-1] if t.names is not None else None
    return Data(t.values, y, fmt, names, t.names[-1] if t.names is not None else None)


def read_prediction_data(path, n_features, fmt=None, header=None, names=None, target_name=None,
                         by_position=False):
    """:class:`Data` for ``predict`` with a model of ``n_features`` features, named ``names`` (None: unnamed).

    A CSV file with a header row is matched to a named model by column name (any order; a column named as
    the model's target is the target; any other column is an error); a named model needs a header row
    (or ``by_position``), and so needs a LIBSVM file ``by_position``.  Matched by position, the file has
    ``n_features`` columns, or one more: the target (last).  LIBSVM: the label is the target; a highest
    index below ``n_features`` is valid (missing indices are zeros: a note says so), one above is an error
    naming its line.
    """
    from refimpl.datasets import labels_from_text

    fmt = fmt or sniff_format(path)
    named = names is not None and not by_position
    if fmt != "libsvm" and header is None:  # a target column is the last of n_features + 1
        header = _header_by_target(path, lambda n: n - 1 if n == n_features + 1 else None)
    listed = ", ".join(names[:5]) + (", ..." if names is not None and len(names) > 5 else "") if names else ""
    if fmt == "libsvm":
        if named:
            raise CLIError(f"the model's features are named ({listed}), and {path} is LIBSVM, whose columns have "
                           f"no names: pass --by-position to match them by position")
        X, y = read_libsvm(path, n_features)
        top = int(X.indices.max()) + 1 if X.nnz else 0
        if top < n_features:
            print(f"{PROG} predict: note: the highest feature index in {path} is {top}, the model has "
                  f"{n_features} features; the missing ones are zeros (LIBSVM convention)", file=sys.stderr)
        return Data(X, y, fmt)
    plan = {}

    def choose(file_names, n):
        if file_names is not None and named:
            where = {}
            for j, s in enumerate(file_names):
                if s in where:
                    raise CLIError(f"{path}: two columns are named {s!r}")
                where[s] = j
            missing = [s for s in names if s not in where]
            if missing:
                raise CLIError(f"{path} has no column named {missing[0]!r} (the model's features: {listed}); "
                               f"columns are matched by name (--by-position matches them by position)")
            extra = [s for s in file_names if s not in names and s != target_name]
            if extra:
                raise CLIError(f"{path}: column {extra[0]!r} is neither a feature of the model ({listed}) nor "
                               f"its target ({target_name!r})")
            plan["features"] = [where[s] for s in names]
            return where.get(target_name)
        if file_names is None and named:
            raise CLIError(f"the model's features are named ({listed}), and {path} has no header row: add one "
                           f"(columns are matched by name), or pass --by-position")
        if n == n_features:
            plan["features"] = list(range(n))
            return None
        if n == n_features + 1:
            plan["features"] = list(range(n - 1))
            return n - 1
        raise CLIError(f"{path} has {n} columns; the model expects {n_features} features "
                       f"(or {n_features + 1} with the target in the last column)")

    t = _table(path, header, choose)
    cols = plan["features"]
    tcol = t.text_column
    numeric_index = [j if tcol is None or j < tcol else j - 1 for j in cols]
    X = t.values[:, numeric_index] if numeric_index != list(range(t.values.shape[1])) else t.values
    y = labels_from_text(t.text) if t.text is not None else None
    return Data(X, y, fmt, t.names)
