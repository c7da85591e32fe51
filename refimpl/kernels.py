"""Kernel functions, computed on demand in rows and blocks.

The CVM papers never form the m x m kernel matrix: every quantity the engine needs
is a handful of kernel rows against the current core set ([001],
eq. (12)).  This module therefore exposes only ``kernel_block(spec, A, B)`` for small
blocks and ``kernel_diag(spec, A)`` for the diagonal.

Kernels (``x``, ``y`` in R^d):

* ``'rbf'``       Gaussian  exp(-gamma ||x - y||^2)           (001 Sec. 5: gamma = 1/beta)
* ``'laplacian'`` Laplacian exp(-gamma ||x - y||)  (Euclidean, [000] Sec. 4.2,
  gamma = 1/sigma; note scikit-learn's ``laplacian_kernel`` uses the L1 norm instead)
* ``'poly'``      (gamma x'y + coef0)^degree
* ``'linear'``    gamma x'y  (gamma = 1: the plain x'y of LIBSVM and scikit-learn, which ignore gamma here)

``normalize=True`` replaces k by k(x, y) / sqrt(k(x, x) k(y, y)), which makes any kernel
satisfy the constant-diagonal condition (4) of 001 (case (3) there).

The Gaussian width may be given as ``gamma='beta'``: the papers' heuristic
beta = (1/m^2) sum_ij ||x_i - x_j||^2 (001 Sec. 5) and gamma = 1/beta.  The double sum has
the closed form 2 (mean ||x||^2 - ||mean x||^2), so it is computed exactly in O(m d) for
any m, with no m x m work and no sampling.

The data-derived widths ``gamma='scale'`` (scikit-learn's, from n_features Var(X)) and ``'beta'`` give each
kernel a width in its own distance (:func:`width_gamma`): gamma multiplies a squared length in the Gaussian
(||x - y||^2) and in the dot-product kernels (x'y), a plain length in the Laplacian (||x - y||), so the
Laplacian takes the reciprocal of the square root.  Every kernel value, hence the fitted model, is then the
same for X and for X times any constant.

Kernels given on the training points (:data:`LOOKUP_KERNELS`, scikit-learn's ``kernel='precomputed'`` and
``kernel=callable``): the user's Gram matrix K(X, X), or a function ``kernel(A, B)`` of two blocks of rows
returning [k(a_i, b_j)].  Both are *looked up*: the engines see the training points as their indices (an
m x 1 column, :func:`index_points`) and the :class:`KernelSpec` carries, during a fit, the training kernel
(:class:`KernelSource`: the Gram matrix as given, never copied, or the function with the training rows, and
the diagonal k(x_i, x_i)).  A callable is evaluated by blocks of rows (``kernel(X[I], X[J])``), never pair by
pair; every block is checked (shape, finite values).  Their diagonal need not be constant: like the
polynomial and linear kernels they go through the generalized CVM (000 Sec. 3.2), and when the diagonal
*is* constant (a Gram matrix of a Gaussian kernel) kappa is its value, so the fit is the one of a built-in
kernel with that diagonal.  A fitted model keeps no training kernel: ``kernel_spec_`` then holds the name
(and the function), and prediction takes K(X_test, X_train) ('precomputed', whose columns at the support
vectors it reads) or calls the function on the test rows and the support vectors.  The sigmoid kernel
(:data:`NOT_PSD`) is refused: it is not positive semi-definite, so it defines no ball in a feature space.

Sparse input: every function here also takes ``scipy.sparse`` CSR rows (never densified as a whole).  The
radial kernels then go through row norms, ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a'b, with the pairs that
cancellation may have spoiled (||a - b||^2 below 1e-6 (||a||^2 + ||b||^2)) recomputed exactly by a
sparse subtraction of the two rows; the dot-product kernels through sparse products.  (The Laplacian
here is Euclidean, so row norms serve it as they serve the Gaussian.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist

#: The kernels, listed once: the estimators' constraints, the command line's --kernel choices and the
#: tests read this tuple.  A new kernel adds its name here, its code below, its values in _raw_block and
#: _raw_diag, and the same formula in C (fastimpl/_krows.pxd).
KERNELS = ("rbf", "laplacian", "poly", "linear")
#: the kernels given on the training points, looked up by index (see the module docstring): the Gram
#: matrix ('precomputed') or a function of two blocks of rows ('callable': the spec's name for kernel=f)
LOOKUP_KERNELS = ("precomputed", "callable")
#: integer codes shared with the Cython implementation (fastimpl/_krows.pxd); both lookups are code 4
KERNEL_CODES = {"rbf": 0, "laplacian": 1, "poly": 2, "linear": 3, "precomputed": 4, "callable": 4}
#: kernels scikit-learn's SVC has that no minimum enclosing ball can use, and why
NOT_PSD = {"sigmoid": "kernel='sigmoid' (tanh(gamma x'y + coef0)) is not positive semi-definite in general (its Gram "
                      "matrices have negative eigenvalues for every gamma > 0 on some data), so it defines no feature "
                      "space and no enclosing ball: the core-set loop's squared distances could be negative.  Use 'rbf', 'laplacian', 'poly' or 'linear', or "
                      "a positive semi-definite kernel as a callable or a precomputed Gram matrix"}
#: the kernels that are functions of ||x - y|| (k(x, x) = 1; computed from distances, not dot products)
RADIAL_KERNELS = ("rbf", "laplacian")


@dataclass(frozen=True)
class KernelSpec:
    """A fully resolved kernel: ``gamma`` is a positive float here, never a string."""

    name: str = "rbf"
    gamma: float = 1.0
    degree: int = 3
    coef0: float = 0.0
    normalize: bool = False
    #: the lookup kernels' constant diagonal k(x, x) (None: not constant, or not a lookup kernel)
    kappa: float | None = None
    #: kernel='callable': the user's function kernel(A, B)
    function: object = field(default=None, compare=False, repr=False)
    #: the training kernel of a lookup kernel during a fit (:class:`KernelSource`); None in a fitted model
    source: object = field(default=None, compare=False, repr=False)

    @property
    def code(self) -> int:
        return KERNEL_CODES[self.name]

    @property
    def lookup(self) -> bool:
        """True for the kernels given on the training points (:data:`LOOKUP_KERNELS`)."""
        return self.name in LOOKUP_KERNELS

    def fitted(self) -> "KernelSpec":
        """The spec a fitted model keeps: without the training kernel (a Gram matrix is m x m)."""
        return replace(self, source=None) if self.source is not None else self

    @property
    def radial(self) -> bool:
        """True for the kernels of ||x - y|| (:data:`RADIAL_KERNELS`)."""
        return self.name in RADIAL_KERNELS

    @property
    def constant_diagonal(self) -> bool:
        """True when k(x, x) is the same for every x (condition (4) of 001); for a lookup kernel, when the
        training points' k(x, x) are all equal (a Gram matrix of a Gaussian kernel)."""
        if self.lookup:
            return self.kappa is not None
        return self.normalize or self.radial

    def diag_constant(self) -> float:
        """kappa = k(x, x) for constant-diagonal kernels."""
        if not self.constant_diagonal:
            raise ValueError(f"kernel {self.name!r} has no constant diagonal")
        return float(self.kappa) if self.lookup else 1.0


def beta_heuristic(X: np.ndarray) -> float:
    """The papers' beta = (1/m^2) sum_{i,j} ||x_i - x_j||^2 (001 Sec. 5), exactly, in O(m d).

    sum_ij ||x_i - x_j||^2 = 2 m sum_i ||x_i - mean x||^2, so beta = 2 sum_f Var(X[:, f]): NumPy's
    two-pass variance, which, unlike 2 (mean ||x||^2 - ||mean x||^2), does not cancel away the spread
    of data far from the origin (X + 1e8).  inf when the squares overflow float64.
    """
    if sp.issparse(X):
        return float(2.0 * stored_column_variances(X).sum())
    return float(2.0 * dense_variance(X, axis=0).sum())


#: bytes of deviations formed at once by dense_variance (a block of rows)
VARIANCE_BLOCK_BYTES = 16 * 2**20


def dense_variance(X, axis=None):
    """NumPy's two-pass variance of all entries (``X.var()``) or of each column (``axis=0``), with the
    deviations from the mean formed a block of rows at a time.

    ``X.var()`` forms all of ``X - mean`` at once: a temporary as large as X, which doubled the peak memory
    of an in-memory fit at the default ``gamma='scale'`` (10^5 x 784: +598 MB beside X's float64 copy).  Up
    to VARIANCE_BLOCK_BYTES of X it is NumPy's computation, bit for bit; beyond, the blocks' sums of squares
    are added, which changes the last bits only.  inf or nan when the squares overflow or X is not finite.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        X = X.reshape(len(X), -1)
    count = X.size if axis is None else X.shape[0]
    step = max(1, VARIANCE_BLOCK_BYTES // max(8 * X.shape[1], 1))
    with np.errstate(over="ignore", invalid="ignore"):
        mean = X.mean(axis=axis, keepdims=True)
        total = 0.0 if axis is None else np.zeros(X.shape[1])
        for lo in range(0, X.shape[0], step):
            dev = X[lo:lo + step] - mean
            np.multiply(dev, dev, out=dev)
            total = total + dev.sum(axis=axis)
            del dev  # (before the next block's deviations are formed)
        return total / max(count, 1)


def stored_column_variances(X) -> np.ndarray:
    """Var(X[:, f]) of the columns f of a sparse matrix that hold a stored entry (every other column is all
    zeros, of variance 0), two-pass per column (the implicit zeros count), in O(nnz log nnz) whatever the
    number of columns: a LIBSVM file may name feature 2e9 in a 40-byte file, and an array per
    column would then take 16 GB."""
    X = sp.csr_matrix(X)
    m = X.shape[0]
    cols, col = np.unique(X.indices, return_inverse=True)  # col: the rank of each stored entry's column
    col = col.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.bincount(col, weights=X.data, minlength=len(cols)) / m
        nnz = np.bincount(col, minlength=len(cols))
        dev = X.data - mean[col]
        return (np.bincount(col, weights=dev * dev, minlength=len(cols)) + (m - nnz) * mean ** 2) / m


def sparse_column_spans_sq_sum(X) -> float:
    """sum_f (max_i X[i, f] - min_i X[i, f])^2 of a sparse matrix, the implicit zeros counted, in
    O(nnz log nnz) whatever the number of columns (scipy's ``X.max(axis=0)`` converts to CSC, an index
    array per column: 16 GB for a column index of 2e9)."""
    X = sp.csr_matrix(X)
    if X.nnz == 0:
        return 0.0
    cols, col = np.unique(X.indices, return_inverse=True)
    col = col.reshape(-1)
    hi = np.full(len(cols), -np.inf)
    lo = np.full(len(cols), np.inf)
    np.maximum.at(hi, col, X.data)
    np.minimum.at(lo, col, X.data)
    sparse_cols = np.bincount(col, minlength=len(cols)) < X.shape[0]  # a column with an implicit zero
    hi[sparse_cols] = np.maximum(hi[sparse_cols], 0.0)
    lo[sparse_cols] = np.minimum(lo[sparse_cols], 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sum((hi - lo) ** 2))


def sparse_variance(X) -> float:
    """Var of all m d entries of a sparse matrix (the implicit zeros count), two-pass."""
    n = X.shape[0] * X.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(X.data.sum()) / n
        dev = X.data - mean
        return float((np.dot(dev, dev) + (n - X.nnz) * mean * mean) / n)


def _no_spread(X, gamma) -> bool:
    """Every entry equal ('scale') or every row equal ('beta'), so the kernel does not depend on gamma."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if X.shape[0] * X.shape[1] == 0:
            return True
        if gamma == "scale":
            full = X.nnz == X.shape[0] * X.shape[1]
            data = X.data if full else np.concatenate([X.data, [0.0]])
            return bool(np.all(data == data[0]))
        return bool(np.all(stored_column_variances(X) == 0))
    X = np.asarray(X, dtype=np.float64)
    if X.size == 0:
        return True
    # (the extremes, not X == X[0]: no boolean temporary of X's size)
    return bool(X.min() == X.max()) if gamma == "scale" else bool(np.all(X.min(axis=0) == X.max(axis=0)))


#: gamma='scale'/'beta' must come from a spread that float64 holds to full precision: a variance or
#: beta below the smallest normal float (squared distances that underflow, e.g. X * 1e-160) or above the
#: largest (squares that overflow, X * 1e300) gives gamma = inf or 0 and a kernel that is all 0 or 1
_NORMAL = (np.finfo(np.float64).tiny, np.finfo(np.float64).max)


def max_abs(X) -> float:
    """max |X| (0 for an empty X), dense or sparse."""
    if sp.issparse(X):
        return float(np.max(np.abs(X.data))) if X.nnz else 0.0
    return float(np.max(np.abs(X))) if np.size(X) else 0.0


def row_sq_norms(A) -> np.ndarray:
    """||a_i||^2 of each row, dense or sparse."""
    if sp.issparse(A):
        A = sp.csr_matrix(A)
        return np.add.reduceat(np.append(A.data * A.data, 0.0), A.indptr[:-1]) * (np.diff(A.indptr) > 0)
    return (A * A).sum(1)


def _sparse_sqdist(A, B) -> np.ndarray:
    """||a_i - b_j||^2 for CSR rows A, B: row norms and a sparse product, with the pairs that
    cancellation may have spoiled (below 1e-6 of ||a||^2 + ||b||^2) recomputed exactly from a_i - b_j."""
    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    na, nb = row_sq_norms(A), row_sq_norms(B)
    dot = (A @ B.T).toarray()
    scale = na[:, None] + nb[None, :]
    sq = np.maximum(scale - 2.0 * dot, 0.0)
    for i, j in zip(*np.nonzero(sq <= 1e-6 * scale)):
        diff = A[i] - B[j]
        sq[i, j] = float(diff.data @ diff.data)
    return sq


#: sparse inputs of more columns than this are fitted and evaluated on their stored columns only
#: (:func:`compact_columns`); below it a dense scratch vector per column costs at most 8 MB
COMPACT_MIN_COLUMNS = 1 << 20


def compact_columns(*mats):
    """The CSR matrices ``mats`` (same number of columns) restricted to the columns where any of them stores
    an entry, renumbered in increasing order; the matrices as given when they have at most
    :data:`COMPACT_MIN_COLUMNS` columns or the stored ones are more than half of them.

    Every kernel here is a function of dot products and norms, hence of the stored columns only, and a
    monotone renumbering keeps each row's entries in their order, so every kernel value is computed from
    the same terms in the same order: bit for bit those of the uncompacted matrices.  What it saves is
    every array with one entry per column (the engines' dense scratch rows, scipy's CSC conversions):
    16 GB for the LIBSVM line ``1 1:0.5 2000000000:1``.  O(nnz log nnz)."""
    d = mats[0].shape[1]
    if d <= COMPACT_MIN_COLUMNS:
        return mats
    mats = tuple(sp.csr_matrix(m) for m in mats)
    cols = np.unique(np.concatenate([m.indices for m in mats]))
    if 2 * len(cols) > d:
        return mats
    width = max(len(cols), 1)
    return tuple(sp.csr_matrix((m.data, np.searchsorted(cols, m.indices).astype(m.indices.dtype), m.indptr),
                               shape=(m.shape[0], width)) for m in mats)


def _width_error(gamma, what, value, size):
    return ValueError(
        f"gamma={gamma!r} cannot be computed for this X: {what} = {value:.3g} is outside the normal float64 "
        f"range [{_NORMAL[0]:.3g}, {_NORMAL[1]:.3g}] (max|X| = {size:.3g}), so gamma and the kernel's squared "
        "distances would under- or overflow and every kernel value would be 0 or 1.  Rescale X (e.g. "
        "sklearn.preprocessing.StandardScaler) or pass gamma as a number.")


def width_gamma(kernel: str, spread: float) -> float:
    """gamma of the data-derived widths ``gamma='scale'`` and ``'beta'`` for ``kernel``, from the data's
    ``spread``, a squared length: n_features Var(X) for 'scale', beta (the mean squared pairwise distance) for
    'beta'.  The rule every place that resolves those widths calls.

    gamma multiplies ||x - y||^2 in the Gaussian and x'y in the polynomial and linear kernels, both squared
    lengths: gamma = 1 / spread.  It multiplies ||x - y|| in the Laplacian, a plain length:
    gamma = 1 / sqrt(spread), the reciprocal of the typical distance.  X times s multiplies spread by s^2,
    so gamma times the kernel's argument, and every kernel value, does not change: the fitted model is
    the same for X and for X * s (1/spread alone gave the Laplacian exp(-||x - y|| / (s spread)), a
    kernel of all ones for s = 1e-3 and chance accuracy).  ``spread <= 0`` gives inf (the callers refuse it).
    """
    if not spread > 0:
        return float("inf")
    return 1.0 / math.sqrt(spread) if kernel == "laplacian" else 1.0 / spread


def _size_of(size):
    """max|X| for a message: ``size`` itself, or ``size()`` (computed only when a message needs it)."""
    with np.errstate(over="ignore"):
        return float(size() if callable(size) else size)


def gamma_of_spread(gamma, what, value, size, kernel) -> float:
    """gamma = :func:`width_gamma` of ``value`` for gamma='scale' (``value`` = n_features Var(X)) or 'beta'
    (the mean squared pairwise distance), refusing a spread that float64 cannot hold (a ValueError naming
    ``what``, its value and ``size``, max|X|: a number, or a function that gives it).  The one rule, whether
    the spread comes from an array in memory (:func:`resolve_gamma`) or from a chunked pass's statistics."""
    g = width_gamma(kernel, value)
    if not (_NORMAL[0] <= value <= _NORMAL[1]) or not (0.0 < g < np.inf):
        raise _width_error(gamma, what, value, _size_of(size))
    return g


def check_kernel_extent(spec, value, size):
    """Refuse a kernel whose values on the training data float64 cannot hold (see
    :func:`checked_kernel_spec`).  ``value``: for the radial kernels the largest squared distance between two
    rows (the bounding box's squared diagonal), for the others the largest squared row norm; ``size``: max|X|
    (a number, or a function that gives it)."""
    tiny = np.finfo(np.float64).tiny
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if spec.radial:
            what = "the largest squared distance between two rows of X"
            bad = not np.isfinite(value) or 0.0 < value < tiny
        else:
            value = value if spec.lookup else largest_self_kernel(spec, value)
            what = "the largest kernel value k(x, x) of X"
            # the engine multiplies kernel values together (QP steps, squared distances): products of two
            # must stay finite, so k(x, x) <= sqrt(largest float) ~ 1.3e154
            bad = not value <= math.sqrt(np.finfo(np.float64).max) or 0.0 < value < tiny
    if bad and spec.lookup:
        raise ValueError(f"kernel={spec.name!r}: {what} is {value:.3g}, a scale float64 cannot hold (the engine "
                         "multiplies kernel values; at most sqrt(largest float) ~ 1.3e154, no subnormal number). "
                         "Rescale the kernel.")
    if bad:
        raise ValueError(f"X is of a scale float64 cannot hold for kernel={spec.name!r}: {what} is {value:.3g} "
                         f"(max|X| = {_size_of(size):.3g}), so the kernel values would over- or "
                         "underflow.  Rescale X (e.g. sklearn.preprocessing.StandardScaler).")


def resolve_gamma(gamma, X: np.ndarray, kernel: str) -> float:
    """Turn the user's ``gamma`` ('beta', 'scale', 'auto' or a positive number) into a float.

    'scale' and 'beta' are :func:`width_gamma` of n_features Var(X) and of beta, in the kernel's own
    distance.  Of data whose every row is the same they give 1.0 (scikit-learn's convention: the
    kernel is then the same for any gamma); data whose spread float64 cannot hold (variance or beta
    not a normal float, e.g. X * 1e-160 or X * 1e300) is a ValueError, never gamma = inf, 0 or a
    silent 1.0.
    """
    if isinstance(gamma, str):
        if gamma in ("beta", "scale"):
            if not sp.issparse(X):
                X = np.asarray(X, dtype=np.float64)
            if _no_spread(X, gamma):
                return 1.0  # no spread at all
            if gamma == "beta":
                what, value = "beta (mean squared pairwise distance)", beta_heuristic(X)
            else:
                var = sparse_variance(X) if sp.issparse(X) else float(dense_variance(X))  # (overflow: inf)
                what, value = "n_features * Var(X)", X.shape[1] * var
            return gamma_of_spread(gamma, what, value, lambda: max_abs(X), kernel)
        if gamma == "auto":
            return 1.0 / X.shape[1]
        raise ValueError(f"gamma must be a positive number or one of 'beta', 'scale', 'auto'; got {gamma!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)):
        raise TypeError(f"gamma must be a number or a string, got {type(gamma).__name__}")
    gamma = float(gamma)
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be positive and finite, got {gamma}")
    return gamma


# ------------------------------------------------------------------------------------------------------------------
# kernels given on the training points: kernel='precomputed' and kernel=callable
# ------------------------------------------------------------------------------------------------------------------
#: rows per block of the callable's diagonal, k(x_i, x_i) from kernel(X[b], X[b]) (its diagonal)
DIAG_BLOCK = 128
#: at most this many training points form the principal submatrix whose eigenvalues test PSD at a fit
PSD_SAMPLE = 200
#: rows per block of the Gram matrix's symmetry test (a block of rows against the same block of columns)
SYMMETRY_BLOCK = 256
#: relative tolerances of those tests, against max |k(x, x)|: a Gram matrix computed in float64 (X @ X.T, an
#: RBF through BLAS) is symmetric and PSD to ~1e-15; a kernel that is not is wrong by far more
SYMMETRY_RTOL = 1e-8
PSD_RTOL = 1e-8


def index_points(m: int) -> np.ndarray:
    """The m training points as the engines see them under a lookup kernel: their indices, an m x 1 float64
    column (exact up to 2^53).  Subsets (a one-vs-one pair, the rows of positive weight) keep the indices of
    the training set, so every lookup reads the training kernel."""
    return np.arange(m, dtype=np.float64)[:, None]


def point_indices(A) -> np.ndarray:
    """The training indices of index points (:func:`index_points`), or of the rows of a selector
    (:func:`selector_rows`)."""
    if sp.issparse(A):
        A = sp.csr_matrix(A)
        if np.any(np.diff(A.indptr) != 1):
            raise ValueError("a precomputed kernel's support vectors are rows with one stored entry each")
        return A.indices.astype(np.intp)
    A = np.asarray(A)
    return A.reshape(len(A), -1)[:, 0].astype(np.intp)


def selector_rows(indices, m: int) -> sp.csr_matrix:
    """A fitted precomputed kernel's support vectors: the rows e_i of the m x m identity at their training indices i,
    so that K(X_test, X_train) @ selector.T holds the columns prediction reads (and the rows have the training
    points' count of features, as the test rows of K(X_test, X_train) do)."""
    indices = np.asarray(indices, dtype=np.int64)
    n = len(indices)
    return sp.csr_matrix((np.ones(n), indices.astype(np.int32), np.arange(n + 1, dtype=np.int64)), shape=(n, m))


def _kernel_name(function) -> str:
    return getattr(function, "__name__", None) or type(function).__name__


def call_kernel(function, A, B) -> np.ndarray:
    """[k(a_i, b_j)] = ``function(A, B)``, checked: a finite float array of shape (len(A), len(B)); a ValueError
    that names the function and what it returned otherwise."""
    K = function(A, B)
    if sp.issparse(K):
        K = K.toarray()
    K = np.asarray(K, dtype=np.float64)
    want = (A.shape[0], B.shape[0])
    if K.shape != want:
        raise ValueError(f"kernel={_kernel_name(function)!r} returned an array of shape {K.shape} for blocks of "
                         f"{want[0]} and {want[1]} rows: a callable kernel must return the {want[0]} x {want[1]} "
                         "matrix [k(a_i, b_j)] of its two arguments' rows")
    if not np.all(np.isfinite(K)):
        raise ValueError(f"kernel={_kernel_name(function)!r} returned non-finite values (NaN or inf) for a "
                         f"block of {want[0]} x {want[1]} rows")
    return K


class KernelSource:
    """The training kernel of a lookup kernel during a fit: the Gram matrix ``gram`` (m x m, the user's array,
    read in place) or ``function`` with the training rows ``data``, and ``diag`` = [k(x_i, x_i)].

    Lookups read the upper triangle, k(i, j) = K[min(i, j), max(i, j)], in both engines, so that a Gram
    matrix whose halves differ in their last bits gives the same values to both."""

    def __init__(self, diag, gram=None, function=None, data=None):
        self.gram, self.function, self.data = gram, function, data
        self.diag = np.ascontiguousarray(diag, dtype=np.float64)

    @property
    def m(self) -> int:
        return len(self.diag)

    def block(self, I, J) -> np.ndarray:
        """[k(x_i, x_j)] for training indices i in I, j in J."""
        I, J = np.asarray(I, dtype=np.intp), np.asarray(J, dtype=np.intp)
        if self.gram is None:
            return call_kernel(self.function, self.data[I], self.data[J])
        out = np.empty((len(I), len(J)))
        for lo in range(0, len(I), SYMMETRY_BLOCK):  # (temporaries of SYMMETRY_BLOCK rows, not of the block)
            rows = I[lo:lo + SYMMETRY_BLOCK]
            out[lo:lo + len(rows)] = self.gram[np.ix_(rows, J)]
            lower = rows[:, None] > J[None, :]
            if lower.any():  # k(i, j) for i > j from the upper triangle, G[j, i]
                np.copyto(out[lo:lo + len(rows)], self.gram[np.ix_(J, rows)].T, where=lower)
        return out


def _refuse_lookup_options(name, normalize):
    if normalize:
        raise ValueError(f"normalize=True is not available with kernel={name!r}: normalise the kernel itself, "
                         "k(x, y) / sqrt(k(x, x) k(y, y)) (prediction with a precomputed kernel is given no k(x, x) "
                         "of the test points)")


def _check_psd(K, what):
    """A ValueError when the symmetric block K (principal submatrix of the kernel on a sample of the training
    points) has an eigenvalue below -PSD_RTOL max|eig|: a kernel with a negative eigenvalue there is not PSD."""
    ev = np.linalg.eigvalsh(0.5 * (K + K.T))
    scale = max(float(np.max(np.abs(ev))), np.finfo(np.float64).tiny)
    if ev[0] < -PSD_RTOL * scale:
        raise ValueError(f"{what} is not positive semi-definite: the kernel matrix of {len(K)} training points has "
                         f"the eigenvalue {ev[0]:.3g} (largest {ev[-1]:.3g}), and a minimum enclosing ball needs "
                         "k(x, y) = <phi(x), phi(y)> for some feature map phi")


def _psd_sample(m):
    """The training points whose kernel matrix the fit's PSD test reads (all of them up to PSD_SAMPLE)."""
    if m <= PSD_SAMPLE:
        return np.arange(m)
    return np.sort(np.random.default_rng(0).choice(m, PSD_SAMPLE, replace=False))


def _kappa(diag):
    """The constant k(x, x) of the training points, or None when they differ."""
    return float(diag[0]) if len(diag) and bool(np.all(diag == diag[0])) else None


def gram_source(G) -> KernelSource:
    """The training kernel of ``kernel='precomputed'``: G must be the square Gram matrix K(X_train, X_train)
    (dense, finite: the caller's input checks), symmetric (within SYMMETRY_RTOL max|k(x, x)|, tested by blocks of
    rows: no m x m temporary) with a non-negative diagonal, and PSD on a sample of PSD_SAMPLE points."""
    if sp.issparse(G):
        raise ValueError("kernel='precomputed' takes X as a dense Gram matrix (n_samples, n_samples); got a sparse "
                         "matrix")
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise ValueError(f"kernel='precomputed': X must be the square Gram matrix K(X_train, X_train) of shape "
                         f"(n_samples, n_samples); got shape {G.shape}")
    m = G.shape[0]
    diag = np.array(np.diagonal(G), dtype=np.float64)
    if np.any(diag < 0):
        i = int(np.argmin(diag))
        raise ValueError(f"kernel='precomputed': the Gram matrix's diagonal has k(x, x) = {diag[i]:.3g} < 0 at "
                         f"row {i}; a kernel has k(x, x) = ||phi(x)||^2 >= 0")
    tol = SYMMETRY_RTOL * max(float(diag.max(initial=0.0)), np.finfo(np.float64).tiny)
    for lo in range(0, m, SYMMETRY_BLOCK):
        hi = min(lo + SYMMETRY_BLOCK, m)
        gap = np.subtract(G[lo:hi, lo:], G[lo:, lo:hi].T)  # (one block of rows at a time: no m x m temporary)
        np.abs(gap, out=gap)
        if gap.size and gap.max() > tol:
            i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
            i, j = lo + int(i), lo + int(j)
            raise ValueError(f"kernel='precomputed': the Gram matrix is not symmetric: X[{i}, {j}] = {G[i, j]!r} but "
                             f"X[{j}, {i}] = {G[j, i]!r}")
    source = KernelSource(diag, gram=G)
    idx = _psd_sample(m)
    _check_psd(source.block(idx, idx), "kernel='precomputed'")
    return source


def callable_source(function, X) -> KernelSource:
    """The training kernel of ``kernel=function`` on the rows X: the diagonal by blocks of DIAG_BLOCK rows (each
    block's ``function(X[b], X[b])``), and on a sample of PSD_SAMPLE points a block that must be symmetric and PSD."""
    m = X.shape[0]
    diag = np.empty(m)
    for lo in range(0, m, DIAG_BLOCK):
        rows = X[lo:lo + DIAG_BLOCK]
        diag[lo:lo + DIAG_BLOCK] = np.diagonal(call_kernel(function, rows, rows))
    name = _kernel_name(function)
    if np.any(diag < 0):
        i = int(np.argmin(diag))
        raise ValueError(f"kernel={name!r} gives k(x, x) = {diag[i]:.3g} < 0 for training row {i}; a kernel has "
                         "k(x, x) = ||phi(x)||^2 >= 0")
    idx = _psd_sample(m)
    K = call_kernel(function, X[idx], X[idx])
    tol = SYMMETRY_RTOL * max(float(diag.max(initial=0.0)), np.finfo(np.float64).tiny)
    gap = np.abs(K - K.T)
    if gap.size and gap.max() > tol:
        i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
        raise ValueError(f"kernel={name!r} is not symmetric: k(x_{idx[i]}, x_{idx[j]}) = {K[i, j]!r} but "
                         f"k(x_{idx[j]}, x_{idx[i]}) = {K[j, i]!r}")
    _check_psd(K, f"kernel={name!r}")
    return KernelSource(diag, function=function, data=X)


def lookup_spec(X, kernel, normalize=False) -> KernelSpec:
    """The :class:`KernelSpec` of ``kernel='precomputed'`` (X the Gram matrix) or ``kernel=function`` (X the
    training rows), holding the checked training kernel (:func:`gram_source`, :func:`callable_source`)."""
    name = "precomputed" if isinstance(kernel, str) else "callable"
    _refuse_lookup_options(kernel if name == "precomputed" else _kernel_name(kernel), normalize)
    source = gram_source(X) if name == "precomputed" else callable_source(kernel, X)
    check_kernel_extent(KernelSpec(name, kappa=1.0), float(source.diag.max(initial=0.0)),
                        lambda: float(source.diag.max(initial=0.0)))
    return KernelSpec(name, 1.0, 3, 0.0, False, kappa=_kappa(source.diag),
                      function=None if name == "precomputed" else kernel, source=source)


def make_kernel_spec(X, kernel="rbf", gamma="beta", degree=3, coef0=0.0, normalize=False) -> KernelSpec:
    """Validate kernel options and return a resolved :class:`KernelSpec`."""
    if isinstance(kernel, str) and kernel in NOT_PSD:
        raise ValueError(NOT_PSD[kernel])
    if callable(kernel) or kernel == "precomputed":
        return lookup_spec(X, kernel, normalize)
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise ValueError(f"degree must be a positive integer, got {degree!r}")
    if isinstance(coef0, bool) or not isinstance(coef0, (int, float, np.integer, np.floating)) or not np.isfinite(coef0):
        raise ValueError(f"coef0 must be a finite number, got {coef0!r}")
    if kernel == "poly" and coef0 < 0:
        # (gamma x'y + coef0)^degree with coef0 < 0 is not positive semi-definite in general.
        raise ValueError(f"coef0 must be >= 0 for the polynomial kernel (else it is not PSD), got {coef0}")
    return KernelSpec(kernel, resolve_gamma(gamma, X, kernel), int(degree), float(coef0), bool(normalize))


def _column_spans(X):
    """max - min of every column of a 2-D float array.  A few columns are reduced one at a time: NumPy's
    axis-0 reduction of a C-ordered (m, 2) array runs an inner loop of length 2 per row and took ~50 ms
    at m = 1e6 (a quarter of a whole 1M-point fit), one strided pass per column ~2 ms."""
    if X.shape[1] <= 16:
        return np.array([np.ptp(X[:, j]) for j in range(X.shape[1])])
    return np.ptp(X, axis=0)


def largest_self_kernel(spec: KernelSpec, sq_max: float) -> float:
    """The largest k(x, x) of a dot-product kernel (unnormalised) over rows of largest ||x||^2 = ``sq_max``."""
    if spec.name == "poly":
        return float(np.power(spec.gamma * sq_max + spec.coef0, float(spec.degree)))
    return spec.gamma * sq_max


def checked_kernel_spec(X, kernel, gamma, degree, coef0, normalize):
    """:func:`refimpl.kernels.make_kernel_spec` (which refuses a gamma='scale'/'beta' that float64 cannot
    hold), then a ValueError when the kernel values of the training data would overflow (or, for the
    radial kernels, when every squared distance underflows), so a fit never runs on a kernel that is
    all 0, 1, inf or NaN: the largest squared distance (the bounding box's squared diagonal) must be
    finite for 'rbf' and 'laplacian', the largest k(x, x) (|k(x, y)| <= max k(x, x)) at most
    sqrt(largest float) ~ 1.3e154 for 'poly' and 'linear', where the engine multiplies kernel values
    (measured: a linear CVMClassifier on X * 1e100, k ~ 1e200, ran for more than a minute), and neither
    may be a nonzero subnormal number."""
    spec = make_kernel_spec(X, kernel, gamma, degree, coef0, normalize)
    if spec.lookup:  # (lookup_spec checked the training kernel's values)
        return spec
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
    if X.shape[0] * X.shape[1] == 0:
        return spec
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if spec.radial:
            if sp.issparse(X):  # column ranges with the implicit zeros, in O(nnz log nnz), never O(d)
                value = sparse_column_spans_sq_sum(X)
            else:
                value = float(np.sum(_column_spans(X) ** 2))
        else:
            value = float(np.max(row_sq_norms(X) if sp.issparse(X) else np.einsum("ij,ij->i", X, X)))
    check_kernel_extent(spec, value, lambda: max_abs(X))
    return spec


def radial_of_sqdist(spec: KernelSpec, sq: np.ndarray) -> np.ndarray:
    """A radial kernel's values exp(-gamma r) from the squared distances ``sq`` (r = sq for 'rbf', its root for
    the Laplacian), computed in place in ``sq`` (the same products and exp as -gamma * sq, bit for bit, without
    two more blocks of memory) and returned."""
    if spec.name != "rbf":
        np.sqrt(sq, out=sq)
    np.multiply(sq, -spec.gamma, out=sq)
    return np.exp(sq, out=sq)


def sqdist_by_product(A: np.ndarray, B: np.ndarray, a_sq=None, b_sq=None) -> np.ndarray:
    """Squared distances ||a_i||^2 + ||b_j||^2 - 2 a_i'b_j of dense rows through one product A B' (BLAS), clipped
    at 0; ``a_sq``, ``b_sq``: the rows' squared norms when known.  Each loses ~1e-16 |a|^2 to cancellation
    (:func:`_raw_block` sums coordinate differences instead, for the kernels' own values): for the pilots and
    screens that bound or tolerate that error."""
    a_sq = np.einsum("ij,ij->i", A, A) if a_sq is None else a_sq
    b_sq = np.einsum("ij,ij->i", B, B) if b_sq is None else b_sq
    r = A @ B.T
    r *= -2.0
    r += a_sq[:, None]
    r += b_sq[None, :]
    return np.maximum(r, 0.0, out=r)


def radial_block_by_product(spec: KernelSpec, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
    """A radial kernel's block [k(a_i, b_j)] of dense rows from :func:`sqdist_by_product` (B None: A's own block,
    its diagonal exactly k(a, a) = 1): one BLAS product instead of :func:`_raw_block`'s coordinate differences,
    for the pilots and solves whose regularisation dwarfs the ~1e-16 |a|^2 cancellation (the caller decides:
    the Laplacian's square root turns it into ~1e-8)."""
    A = np.asarray(A, dtype=np.float64)
    a_sq = np.einsum("ij,ij->i", A, A)
    if B is None:
        G = sqdist_by_product(A, A, a_sq, a_sq)
        np.fill_diagonal(G, 0.0)
    else:
        G = sqdist_by_product(A, np.asarray(B, dtype=np.float64), a_sq)
    return radial_of_sqdist(spec, G)


def _raw_block(spec: KernelSpec, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    if spec.radial:
        # squared distances summed from coordinate differences: ||a||^2 + ||b||^2 - 2 a'b loses ~1e-16 |a|^2
        # to cancellation, which the Laplacian's square root turns into a ~1e-8 error of k(x, x) = 1
        sq = _sparse_sqdist(A, B) if sp.issparse(A) or sp.issparse(B) else cdist(A, B, "sqeuclidean")
        return radial_of_sqdist(spec, np.asarray(sq, dtype=np.float64))
    dot = A @ B.T
    if sp.issparse(dot):
        dot = dot.toarray()
    dot = np.asarray(dot)
    if spec.name == "linear":
        return spec.gamma * dot
    return (spec.gamma * dot + spec.coef0) ** spec.degree


def _raw_diag(spec: KernelSpec, A: np.ndarray) -> np.ndarray:
    if spec.radial:
        return np.ones(A.shape[0])
    sq = row_sq_norms(A)
    if spec.name == "linear":
        return spec.gamma * sq
    return (spec.gamma * sq + spec.coef0) ** spec.degree


def _source(spec):
    if spec.source is None:
        raise ValueError(f"kernel={spec.name!r}: the training kernel is held by a fit only; a fitted model "
                         "predicts from K(X_test, X_train) ('precomputed') or its function's values")
    return spec.source


def kernel_block(spec: KernelSpec, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The |A| x |B| block [k(a_i, b_j)] (lookup kernels: A, B index points, :func:`index_points`)."""
    if spec.lookup:
        return _source(spec).block(point_indices(A), point_indices(B))
    K = _raw_block(spec, A, B)
    if spec.normalize and not spec.radial:
        da, db = _raw_diag(spec, A), _raw_diag(spec, B)
        with np.errstate(divide="ignore", invalid="ignore"):
            K = K / np.sqrt(np.outer(da, db))
        K[~np.isfinite(K)] = 0.0  # k(x,x) = 0 only for x = 0 under the linear kernel
    return K


def kernel_diag(spec: KernelSpec, A: np.ndarray) -> np.ndarray:
    """[k(a_i, a_i)] (lookup kernels: A index points)."""
    if spec.lookup:
        return _source(spec).diag[point_indices(A)]
    if spec.normalize:
        d = _raw_diag(spec, A)
        return np.where(d > 0, 1.0, 0.0)
    return _raw_diag(spec, A)


#: test points per block in kernel_expansion (bounds temporary memory independently of n)
EXPANSION_BLOCK = 2048


def kernel_expansion(spec: KernelSpec, SV: np.ndarray, coef: np.ndarray, X: np.ndarray) -> np.ndarray:
    """f(x) = sum_t coef_t k(sv_t, x) for every row x of X, in blocks (no |X| x |SV| matrix at once).

    Lookup kernels: during a fit (the spec holds the training kernel) X and SV are index points; in a fitted
    model, kernel='precomputed' takes X = K(X_test, X_train) and SV the support vectors' index points (its
    columns at them are read), kernel='callable' the test rows and the support vectors' rows."""
    if spec.lookup:
        return lookup_expansion(spec, SV, coef, X)
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
    out = np.empty(X.shape[0])
    for start in range(0, X.shape[0], EXPANSION_BLOCK):
        out[start:start + EXPANSION_BLOCK] = kernel_block(spec, X[start:start + EXPANSION_BLOCK], SV) @ coef
    return out


def lookup_expansion(spec: KernelSpec, SV, coef, X) -> np.ndarray:
    """:func:`kernel_expansion` of a lookup kernel (both implementations use it: it is a product of the user's
    kernel values with coef, by blocks of EXPANSION_BLOCK rows)."""
    coef = np.asarray(coef, dtype=np.float64)
    out = np.empty(X.shape[0])
    if spec.source is not None:
        sv = point_indices(SV)
        rows = point_indices(X)
        for start in range(0, len(rows), EXPANSION_BLOCK):
            out[start:start + EXPANSION_BLOCK] = spec.source.block(rows[start:start + EXPANSION_BLOCK], sv) @ coef
        return out
    if spec.name == "precomputed":
        sv = point_indices(SV)
        for start in range(0, X.shape[0], EXPANSION_BLOCK):
            blk = X[start:start + EXPANSION_BLOCK][:, sv]
            out[start:start + EXPANSION_BLOCK] = (blk.toarray() if sp.issparse(blk) else np.asarray(blk)) @ coef
        return out
    for start in range(0, X.shape[0], EXPANSION_BLOCK):
        out[start:start + EXPANSION_BLOCK] = call_kernel(spec.function, X[start:start + EXPANSION_BLOCK], SV) @ coef
    return out


def lookup_test_diag(spec: KernelSpec, X) -> np.ndarray:
    """k(x, x) of test points under a fitted lookup kernel: kappa for a precomputed kernel of constant diagonal
    (a K(X_test, X_train) holds no k(x, x)), the callable's diagonal by blocks of DIAG_BLOCK rows."""
    if spec.name == "precomputed":
        if spec.kappa is None:
            raise ValueError("kernel='precomputed' with a diagonal k(x, x) that is not constant: the distance to the "
                             "centre needs k(x, x) of the test points, which K(X_test, X_train) does not hold")
        return np.full(X.shape[0], float(spec.kappa))
    out = np.empty(X.shape[0])
    for lo in range(0, X.shape[0], DIAG_BLOCK):
        rows = X[lo:lo + DIAG_BLOCK]
        out[lo:lo + DIAG_BLOCK] = np.diagonal(call_kernel(spec.function, rows, rows))
    return out
