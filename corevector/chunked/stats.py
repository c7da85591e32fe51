"""The statistics of a chunked X's validation pass (:mod:`corevector.chunked.checks`): one block's part, computed
beside the data, and their merge on the client."""
from __future__ import annotations

import numpy as np

__all__ = ["block_stats", "merge_stats"]


def block_stats(X, _shared, pb):
    """One block's part of the validation pass: non-finite values, column ranges, sums and centred sums of
    squares (per column and over all entries), the largest squared row norm and |x|.

    Few passes over the block (it is the whole validation pass's work: 10^7 x 2, 0.7 s of NumPy in twelve
    passes before): the column sums double as the finiteness test (a sum is finite unless an entry is NaN or
    infinite, or the sum overflows, when the entries are looked at), and the centred sum of squares over all
    entries comes from the columns' (sum_f [M2_f + n (mean_f - mean)^2])."""
    n = X.shape[0]
    if n == 0 or X.size == 0:
        d = X.shape[1] if X.ndim > 1 else 0
        return dict(n=0, nan=False, inf=False, min=np.full(d, np.inf), max=np.full(d, -np.inf), mean=np.zeros(d),
                    m2=np.zeros(d), amean=0.0, am2=0.0, sqmax=0.0, absmax=0.0)
    # NumPy reduces a narrow block's columns slowly (axis 0 of an n x 2 array: 19 ms a pass for 10^6 rows,
    # against 3 ms to transpose it and under 1 ms a pass over the copy), so narrow blocks are read by column
    narrow = X.shape[1] < 16
    A, rows_axis = (np.ascontiguousarray(X.T), 1) if narrow else (X, 0)
    per_col, per_row = ("ij,ij->i", "ij,ij->j") if narrow else ("ij,ij->j", "ij,ij->i")
    with np.errstate(over="ignore", invalid="ignore"):
        colsum = A.sum(axis=rows_axis)
        if np.isfinite(colsum).all():
            nan = inf = False
        else:
            nan, inf = bool(np.isnan(A).any()), bool(np.isinf(A).any())
        mean = colsum / n
        dev = A - (mean[:, None] if narrow else mean)
        m2 = np.einsum(per_col, dev, dev)
        del dev
        amean = float(mean.mean())
        am2 = float(m2.sum() + n * np.sum((mean - amean) ** 2))
        sq = np.einsum(per_row, A, A)
        lo, hi = A.min(axis=rows_axis), A.max(axis=rows_axis)
        return dict(n=n, nan=nan, inf=inf, min=lo, max=hi, mean=mean, m2=m2, amean=amean, am2=am2,
                    sqmax=float(sq.max()), absmax=float(max(np.abs(lo).max(), np.abs(hi).max())))


def merge_stats(parts, d):
    """Chan et al.'s parallel merge of per-block means and centred sums of squares."""
    n, mean, m2, amean, am2 = 0, np.zeros(d), np.zeros(d), 0.0, 0.0
    out = dict(nan=False, inf=False, min=np.full(d, np.inf), max=np.full(d, -np.inf), sqmax=0.0, absmax=0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        for p in parts:
            nb = p["n"]
            if nb == 0:
                continue
            out["nan"] |= p["nan"]
            out["inf"] |= p["inf"]
            out["min"] = np.minimum(out["min"], p["min"])
            out["max"] = np.maximum(out["max"], p["max"])
            out["sqmax"] = max(out["sqmax"], p["sqmax"])
            out["absmax"] = max(out["absmax"], p["absmax"])
            tot = n + nb
            delta = p["mean"] - mean
            mean = mean + delta * (nb / tot)
            m2 = m2 + p["m2"] + delta * delta * (n * nb / tot)
            adelta = p["amean"] - amean
            amean = amean + adelta * (nb / tot)
            am2 = am2 + p["am2"] + adelta * adelta * (n * d * nb * d / (tot * d))
            n = tot
    out.update(n=n, col_var=m2 / max(n, 1), var=am2 / max(n * d, 1))
    return out
