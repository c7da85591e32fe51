"""The per-row methods of a fitted estimator on a chunked X (:mod:`corevector.chunked`): ``predict``,
``decision_function``, ``score`` and the other methods one row at a time, run per block beside the data, and
the kernel expansions of ``CoreVectorBase`` over a :class:`~corevector.chunked.ChunkedRows`."""
from __future__ import annotations

import uuid

import numpy as np

from .chunked import ChunkedRows, _as_float, _check_features, _source, is_dask, require_dask


class _Method:
    """estimator.method on one block (picklable: runs on a worker)."""

    def __init__(self, estimator, method):
        self.estimator, self.method = estimator, method

    def __call__(self, block):
        return getattr(self.estimator, self.method)(_as_float(block))


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
        Xc = ChunkedRows(_source(X)) if not is_dask(X) else None
    d = X.shape[1] if len(X.shape) == 2 else None
    if d is None:
        raise ValueError(f"Expected 2D array, got {len(X.shape)}D array instead")
    _check_features(estimator, d)
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
    parts = Xc.map_blocks(_block_method, fn)
    first = parts[0][1]
    out = np.empty((Xc.shape[0],) + first.shape[1:], dtype=first.dtype)
    for pidx, vals in parts:
        out[pidx] = vals
    return out


def _block_expansion(X, shared, pb):
    from corevector.numerics import numerics
    impl, spec, SV, coef = shared
    return pb[0], numerics(impl).kernel_expansion(spec, SV, coef, X)


def expansion(impl, spec, SV, coef, X):
    """sum_t coef_t k(sv_t, x) for every row x of a :class:`ChunkedRows`, per block beside the data."""
    out = np.empty(X.shape[0])
    for pidx, vals in X.map_blocks(_block_expansion, (impl, spec, np.ascontiguousarray(SV, dtype=np.float64),
                                                      np.ascontiguousarray(coef, dtype=np.float64))):
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
