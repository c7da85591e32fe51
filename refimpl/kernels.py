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

Sparse input: every function here also takes ``scipy.sparse`` CSR rows (never densified as a whole).  The
radial kernels then go through row norms, ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a'b, with the pairs that
cancellation may have spoiled (||a - b||^2 below 1e-6 (||a||^2 + ||b||^2)) recomputed exactly by a
sparse subtraction of the two rows; the dot-product kernels through sparse products.  (The Laplacian
here is Euclidean, so row norms serve it as they serve the Gaussian.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist

#: The kernels, listed once: the estimators' constraints, the command line's --kernel choices and the
#: tests read this tuple.  A new kernel adds its name here, its code below, its values in _raw_block and
#: _raw_diag, and the same formula in C (fastimpl/_krows.pxd).
KERNELS = ("rbf", "laplacian", "poly", "linear")
#: integer codes shared with the Cython implementation (fastimpl/_krows.pxd)
KERNEL_CODES = {"rbf": 0, "laplacian": 1, "poly": 2, "linear": 3}
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

    @property
    def code(self) -> int:
        return KERNEL_CODES[self.name]

    @property
    def radial(self) -> bool:
        """True for the kernels of ||x - y|| (:data:`RADIAL_KERNELS`)."""
        return self.name in RADIAL_KERNELS

    @property
    def constant_diagonal(self) -> bool:
        """True when k(x, x) is the same for every x (condition (4) of 001)."""
        return self.normalize or self.radial

    def diag_constant(self) -> float:
        """kappa = k(x, x) for constant-diagonal kernels."""
        if not self.constant_diagonal:
            raise ValueError(f"kernel {self.name!r} has no constant diagonal")
        return 1.0


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
            value = largest_self_kernel(spec, value)
            what = "the largest kernel value k(x, x) of X"
            # the engine multiplies kernel values together (QP steps, squared distances): products of two
            # must stay finite, so k(x, x) <= sqrt(largest float) ~ 1.3e154
            bad = not value <= math.sqrt(np.finfo(np.float64).max) or 0.0 < value < tiny
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


def make_kernel_spec(X, kernel="rbf", gamma="beta", degree=3, coef0=0.0, normalize=False) -> KernelSpec:
    """Validate kernel options and return a resolved :class:`KernelSpec`."""
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


def _raw_block(spec: KernelSpec, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    if spec.radial:
        # squared distances summed from coordinate differences: ||a||^2 + ||b||^2 - 2 a'b loses ~1e-16 |a|^2
        # to cancellation, which the Laplacian's square root turns into a ~1e-8 error of k(x, x) = 1
        sq = _sparse_sqdist(A, B) if sp.issparse(A) or sp.issparse(B) else cdist(A, B, "sqeuclidean")
        if spec.name == "rbf":
            return np.exp(-spec.gamma * sq)
        return np.exp(-spec.gamma * np.sqrt(sq))
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


def kernel_block(spec: KernelSpec, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The |A| x |B| block [k(a_i, b_j)]."""
    K = _raw_block(spec, A, B)
    if spec.normalize and not spec.radial:
        da, db = _raw_diag(spec, A), _raw_diag(spec, B)
        with np.errstate(divide="ignore", invalid="ignore"):
            K = K / np.sqrt(np.outer(da, db))
        K[~np.isfinite(K)] = 0.0  # k(x,x) = 0 only for x = 0 under the linear kernel
    return K


def kernel_diag(spec: KernelSpec, A: np.ndarray) -> np.ndarray:
    """[k(a_i, a_i)]."""
    if spec.normalize:
        d = _raw_diag(spec, A)
        return np.where(d > 0, 1.0, 0.0)
    return _raw_diag(spec, A)


#: test points per block in kernel_expansion (bounds temporary memory independently of n)
EXPANSION_BLOCK = 2048


def kernel_expansion(spec: KernelSpec, SV: np.ndarray, coef: np.ndarray, X: np.ndarray) -> np.ndarray:
    """f(x) = sum_t coef_t k(sv_t, x) for every row x of X, in blocks (no |X| x |SV| matrix at once)."""
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
    out = np.empty(X.shape[0])
    for start in range(0, X.shape[0], EXPANSION_BLOCK):
        out[start:start + EXPANSION_BLOCK] = kernel_block(spec, X[start:start + EXPANSION_BLOCK], SV) @ coef
    return out
