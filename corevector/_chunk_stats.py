"""The statistics of a chunked X's validation pass (:mod:`corevector.chunked`): one block's part, computed
beside the data, and their merge on the client."""
from __future__ import annotations

import numpy as np

__all__ = ["block_stats", "merge_stats"]


def block_stats(X, _shared, pb):
    """One block's part of the validation pass: non-finite values, column ranges, sums and centred sums of
    squares (per column and over all entries), the largest squared row norm and |x|."""
    n = X.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        nan = bool(np.isnan(X).any())
        inf = bool(np.isinf(X).any())
        mean = X.mean(axis=0)
        dev = X - mean
        m2 = (dev * dev).sum(axis=0)
        amean = float(X.mean())
        adev = X - amean
        am2 = float((adev * adev).sum())
        sq = np.einsum("ij,ij->i", X, X)
        return dict(n=n, nan=nan, inf=inf, min=X.min(axis=0), max=X.max(axis=0), mean=mean, m2=m2,
                    amean=amean, am2=am2, sqmax=float(sq.max()) if n else 0.0,
                    absmax=float(np.abs(X).max()) if X.size else 0.0)


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
