"""The input checks of a chunked X (:func:`validate`: scikit-learn's ``validate_data``, the same checks and
messages, from one chunked pass) and the kernel resolved from that pass's statistics (:func:`kernel_spec`:
refimpl's own rules, :func:`refimpl.kernels.gamma_of_spread` and :func:`refimpl.kernels.check_kernel_extent`,
given the chunked statistics instead of an array)."""
from __future__ import annotations

import numpy as np

from refimpl import kernels as K

from .detect import is_dask, require_dask
from .rows import ChunkedRows

__all__ = ["validate", "check_features", "kernel_spec"]


def _name(estimator):
    return type(estimator).__name__


def validate(estimator, X, y="no_validation", *, reset=True, ensure_min_samples=1, y_numeric=False, **_ignored):
    """scikit-learn's ``validate_data`` for a chunked X: the same checks and messages (2-D, numeric, at
    least ``ensure_min_samples`` rows and one feature, no NaN or infinity, y of matching length), from one
    chunked pass whose statistics (column ranges, variances) the kernel width reuses.  Returns the
    :class:`ChunkedRows` (and y as a NumPy array: labels and targets are 1 value a row, read whole)."""
    from sklearn.utils.validation import _check_y, check_consistent_length

    if is_dask(X):
        require_dask()
    Xc = ChunkedRows.of(X)
    src = Xc.source
    if len(src.shape) != 2:
        raise ValueError(f"Expected 2D array, got {len(src.shape)}D array instead: a chunked X of shape {src.shape}")
    if src.dtype.kind not in "biuf":
        raise ValueError(f"{_name(estimator)}: a chunked X must hold real numbers, got dtype {src.dtype}")
    m, d = Xc.shape
    if m < ensure_min_samples:
        raise ValueError(f"Found array with {m} sample(s) (shape={Xc.shape}) while a minimum of {ensure_min_samples} "
                         f"is required by {_name(estimator)}.")
    if d < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={Xc.shape}) while a minimum of 1 is required by "
                         f"{_name(estimator)}.")
    if not reset:
        check_features(estimator, d)
    st = Xc.stats
    if st["nan"]:
        raise ValueError(f"Input X contains NaN.\n{_name(estimator)} does not accept missing values encoded as NaN "
                         "natively.")
    if st["inf"]:
        raise ValueError("Input X contains infinity or a value too large for dtype('float64').")
    if reset:
        estimator.n_features_in_ = d
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    if isinstance(y, str) and y == "no_validation":
        return Xc
    if y is None:
        raise ValueError(f"{_name(estimator)} requires y to be passed, but the target y is None.")
    if is_dask(y):
        y = y.compute()
    y = _check_y(np.asarray(y), y_numeric=y_numeric, estimator=estimator)
    check_consistent_length(Xc, y)
    return Xc, y


def check_features(estimator, d):
    n = getattr(estimator, "n_features_in_", None)
    if n is not None and d != n:
        raise ValueError(f"X has {d} features, but {_name(estimator)} is expecting {n} features as input.")


def kernel_spec(X, kernel, gamma, degree, coef0, normalize):
    """:func:`refimpl.kernels.checked_kernel_spec` from the statistics of the chunked pass: gamma='scale' is
    width_gamma of d Var X over every entry, 'beta' of 2 sum_f Var(X[:, f]) (both merged per block, so they can differ
    from NumPy's single-array sums in the last bits), with the same refusals of widths and kernel values that
    float64 cannot hold, and the same messages."""
    st, (m, d) = X.stats, X.shape
    g = gamma
    if isinstance(gamma, str) and gamma in ("beta", "scale"):
        if (gamma == "scale" and st["min"].min() == st["max"].max()) or \
                (gamma == "beta" and np.all(st["min"] == st["max"])):
            g = 1.0
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                if gamma == "beta":
                    what, value = "beta (mean squared pairwise distance)", float(2.0 * st["col_var"].sum())
                else:
                    what, value = "n_features * Var(X)", d * float(st["var"])
            g = K.gamma_of_spread(gamma, what, value, st["absmax"], kernel)
    spec = K.make_kernel_spec(np.zeros((1, d)), kernel, g, degree, coef0, normalize)
    if m * d == 0:
        return spec
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        value = float(np.sum((st["max"] - st["min"]) ** 2)) if spec.radial else float(st["sqmax"])
    K.check_kernel_extent(spec, value, st["absmax"])
    return spec
