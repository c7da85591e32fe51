"""An estimator's methods on a chunked X: :func:`accepts_chunked`, the class decorator that routes a chunked X
of ``fit``, ``score`` and the per-row methods (``predict``, ``decision_function`` ...) here, and those
methods run per block beside the data (:func:`apply`, :func:`score`), with the kernel expansions of
``CoreVectorBase`` over a :class:`~corevector.chunked.rows.ChunkedRows` (:func:`expansion`)."""
from __future__ import annotations

import functools
import uuid

import numpy as np
from sklearn.utils.metaestimators import available_if

from ..numerics import numerics
from .checks import check_features
from .detect import is_chunked_rows, is_dask, needs_chunked, require_dask
from .rows import ChunkedRows, source_of
from .source import as_float, phase

__all__ = ["accepts_chunked", "PER_ROW", "apply", "expansion", "score"]

#: the per-row methods that take a chunked X block by block beside the data (a Dask array gives a Dask array)
PER_ROW = ("predict", "decision_function", "score_samples", "predict_proba", "predict_log_proba")
#: an in-memory X that a per-row method's validation would copy (not float64 in C order: float32, say) is
#: taken in blocks of about this many bytes as float64: validate_data's copy of the whole X doubled its
#: memory and was slow to write (decision_function of 2e5 x 784 float32 rows against 682 support vectors:
#: 5.5-5.7 s and +0.8-1.0 GB whole, 2.9-3.1 s and no growth in blocks of 2,048-8,192 rows; float64 input,
#: copied by nobody, takes the same time either way)
PER_ROW_BLOCK_BYTES = 16 * 2**20


def accepts_chunked(cls):
    """Class decorator: the class's ``fit``, ``score`` and per-row methods (:data:`PER_ROW`) take a chunked X
    (Dask arrays, zarr arrays, HDF5 datasets, memory maps that are not float64 in C order).  In-memory inputs
    go through unchanged, except that a per-row method takes an X its validation would copy in blocks
    (:data:`PER_ROW_BLOCK_BYTES`).  ``fit`` reads the fitted rows (support vectors, views of X until then)
    into memory after the fit.  Methods routed already (inherited from a decorated class) are left alone."""
    for name in PER_ROW + ("fit", "score"):
        method = cls.__dict__.get(name, getattr(cls, name, None) if name == "score" else None)
        if method is None or getattr(method, "chunk_aware", False):
            continue
        if hasattr(method, "check") and hasattr(method, "fn"):  # sklearn's available_if (predict_proba)
            setattr(cls, name, available_if(method.check)(_routed(name, method.fn)))
        else:
            setattr(cls, name, _routed(name, method))
    return cls


def _row_blocks(X):
    """Row slices of about PER_ROW_BLOCK_BYTES (as float64) in which a per-row method takes X, or None to take
    it whole: a float64 C-ordered array (validation reads it in place), anything but a 2-D ndarray (sparse
    matrices, lists: their own paths), or an X of one block."""
    if not isinstance(X, np.ndarray) or X.ndim != 2 or (X.dtype == np.float64 and X.flags.c_contiguous):
        return None
    rows = max(1, PER_ROW_BLOCK_BYTES // (8 * max(X.shape[1], 1)))
    if X.shape[0] <= rows:
        return None
    return [slice(lo, lo + rows) for lo in range(0, X.shape[0], rows)]


def _routed(name, method):
    """``method`` (the class's own ``name``), with chunked inputs routed here."""
    if name == "fit":
        @functools.wraps(method)
        def fit(self, X, *args, **kwargs):
            out = method(self, X, *args, **kwargs)
            if needs_chunked(X):  # fitted rows (support vectors) were views of X: read them now
                for key, value in list(vars(self).items()):
                    if is_chunked_rows(value):
                        with phase("support vectors"):
                            setattr(self, key, value.materialize())
            return out
        fit.chunk_aware = True
        return fit
    if name == "score":
        @functools.wraps(method)
        def score_(self, X, y, *args, **kwargs):
            if needs_chunked(X):
                return score(self, X, y, *args, **kwargs)
            return method(self, X, y, *args, **kwargs)
        score_.chunk_aware = True
        return score_

    @functools.wraps(method)
    def per_row(self, X, *args, **kwargs):
        if needs_chunked(X):
            return apply(self, name, X)
        blocks = _row_blocks(X)
        if blocks is not None:  # every row's value depends on that row alone
            return np.concatenate([method(self, X[sl], *args, **kwargs) for sl in blocks])
        return method(self, X, *args, **kwargs)
    per_row.chunk_aware = True
    return per_row


class _Method:
    """estimator.method on one block (picklable: runs on a worker)."""

    def __init__(self, estimator, method):
        self.estimator, self.method = estimator, method

    def __call__(self, block):
        return getattr(self.estimator, self.method)(as_float(block))


def _call(block, fn):
    return fn(block)


def _block_method(X, shared, pb):
    return pb[0], shared(X)


def apply(estimator, method, X):
    """``estimator.method`` on every row of a chunked X, one block at a time beside the data: a Dask array
    (lazy, one task per block) for a Dask input, a NumPy array otherwise."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator)
    if isinstance(X, ChunkedRows):
        Xc = X
    else:
        if is_dask(X):
            require_dask()
        Xc = ChunkedRows(source_of(X)) if not is_dask(X) else None
    d = X.shape[1] if len(X.shape) == 2 else None
    if d is None:
        raise ValueError(f"Expected 2D array, got {len(X.shape)}D array instead")
    check_features(estimator, d)
    fn = _Method(estimator, method)
    if Xc is None:  # a Dask array in, a Dask array out
        import dask

        darr = X if X.numblocks[1] == 1 else X.rechunk({1: -1})
        probe = fn(np.zeros((1, d)))
        name = f"corevector-{method}-{uuid.uuid4().hex}"
        # the fitted model is one key of the graph, which every block's task reads: a worker receives it once.
        # Inside each task's function it was serialised with every block, and each queued task held its own
        # copy on the worker: 10^6 x 784 rows in chunks of 1,024 against a 4 MB model (657 support vectors)
        # filled two 2 GB workers to their pause threshold and the prediction never finished (now 25 s)
        model = dask.delayed(fn, pure=False, traverse=False)
        if probe.ndim == 1:
            return darr.map_blocks(_call, model, dtype=probe.dtype, drop_axis=1, name=name,
                                   meta=np.empty((0,), probe.dtype))
        return darr.map_blocks(_call, model, dtype=probe.dtype, chunks=(darr.chunks[0], (probe.shape[1],)), name=name,
                               meta=np.empty((0, 0), probe.dtype))
    with phase("prediction"):
        parts = Xc.map_blocks(_block_method, fn)
    first = parts[0][1]
    out = np.empty((Xc.shape[0],) + first.shape[1:], dtype=first.dtype)
    for pidx, vals in parts:
        out[pidx] = vals
    return out


def _block_expansion(X, shared, pb):
    impl, spec, SV, coef = shared
    return pb[0], numerics(impl).kernel_expansion(spec, SV, coef, X)


def expansion(impl, spec, SV, coef, X):
    """sum_t coef_t k(sv_t, x) for every row x of a :class:`ChunkedRows`, per block beside the data."""
    out = np.empty(X.shape[0])
    with phase("kernel expansion"):
        parts = X.map_blocks(_block_expansion, (impl, spec, np.ascontiguousarray(SV, dtype=np.float64),
                                                np.ascontiguousarray(coef, dtype=np.float64)))
    for pidx, vals in parts:
        out[pidx] = vals
    return out


def score(estimator, X, y, sample_weight=None):
    """The estimator's ``score`` (accuracy or R^2) of a chunked X: predictions per block, then the metric."""
    from sklearn.base import is_classifier
    from sklearn.metrics import accuracy_score, r2_score

    pred = apply(estimator, "predict", X)
    if is_dask(pred):
        pred = pred.compute()
    if is_dask(y):
        y = y.compute()
    metric = accuracy_score if is_classifier(estimator) else r2_score
    return float(metric(np.asarray(y), pred, sample_weight=sample_weight))
