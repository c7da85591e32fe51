"""Rows a chunked source keeps in memory (corevector.chunked): a fit's core vectors, whose rows the fit
held already (corevector._chunked_ops.fit_meb), so that reading the model's support vectors afterwards costs
no pass over the store."""
import numpy as np

from ._row_slots import positions_in


def remember(source, rows, values):
    """Keep ``values`` (float64) of the source rows ``rows`` on the source: a fit's core vectors, whose rows
    the fit held already.  The fitted model's support vectors are among them, so reading those after the
    fit (``ChunkedRows.materialize``) costs no pass over the store (10^7 x 2 zarr: 0.23 s of a 4.3 s fit)."""
    rows = np.asarray(rows, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64).reshape(len(rows), -1)
    old = getattr(source, "known", None)
    if old is not None:
        rows, values = np.concatenate([old[0], rows]), np.concatenate([old[1], values])
    rows, first = np.unique(rows, return_index=True)
    source.known = (rows, values[first])


def take_known(source, rows, fetch):
    """``fetch(rows)`` for the rows the source does not keep (:func:`remember`), the kept ones from memory
    (float64: exact for float32 and float64 sources alike)."""
    known = getattr(source, "known", None)
    if known is None or len(rows) == 0:
        return fetch(rows)
    krows, kvals = known
    pos, hit = positions_in(krows, rows)
    if not hit.any():
        return fetch(rows)
    out = np.empty((len(rows),) + tuple(source.shape[1:]), dtype=np.float64)
    out[hit] = kvals[pos[hit]]
    if not hit.all():
        out[~hit] = fetch(rows[~hit])
    return out
