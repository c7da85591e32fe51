"""Which inputs are read by chunks, and whether Dask is there: the first question every estimator method asks
of its X (:func:`needs_chunked`), before anything is read."""
from __future__ import annotations

import mmap
import sys

import numpy as np

__all__ = ["is_dask", "is_zarr", "is_h5py", "is_memmap", "is_chunked_rows", "needs_chunked", "require_dask",
           "distributed_client", "EXTRA_MESSAGE"]

EXTRA_MESSAGE = ("Dask inputs need the optional dependencies of corevector's 'dask' extra: "
                 "pip install 'corevector[dask]' (dask, distributed, zarr, h5py)")


def _top_module(X) -> str:
    return type(X).__module__.split(".")[0]


def is_dask(X) -> bool:
    return _top_module(X) == "dask" and hasattr(X, "chunks") and hasattr(X, "dask")


def is_zarr(X) -> bool:
    return _top_module(X) == "zarr" and hasattr(X, "chunks") and hasattr(X, "shape")


def is_h5py(X) -> bool:
    return _top_module(X) == "h5py" and hasattr(X, "chunks") and hasattr(X, "shape")


def is_memmap(X) -> bool:
    if isinstance(X, np.memmap):
        return True
    base = getattr(X, "base", None)
    while base is not None:
        if isinstance(base, mmap.mmap):
            return True
        base = getattr(base, "base", None)
    return False


def is_chunked_rows(X) -> bool:
    """True for the estimators' own view of chunked rows (:class:`corevector.chunked.rows.ChunkedRows`, which
    carries the marker ``chunked_rows``; refimpl.problem.MEBProblem recognises it by the same marker)."""
    return getattr(type(X), "chunked_rows", False) is True


def needs_chunked(X) -> bool:
    """True for the inputs that are read by chunks (see :mod:`corevector.chunked`)."""
    if is_chunked_rows(X) or is_dask(X) or is_zarr(X) or is_h5py(X):
        return True
    if isinstance(X, np.ndarray) and is_memmap(X):
        return not (X.dtype == np.float64 and X.flags.c_contiguous)
    return False


def require_dask():
    """dask.array and distributed, or an ImportError naming the extra."""
    try:
        import dask  # noqa: F401
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError(EXTRA_MESSAGE) from exc


def distributed_client():
    """The running ``dask.distributed`` client, or None (no client, or distributed not installed)."""
    mod = sys.modules.get("distributed")
    if mod is None:
        return None
    try:
        return mod.get_client()
    except ValueError:
        return None
