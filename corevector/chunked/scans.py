"""The block functions of a chunked fit's full scans (:mod:`corevector.chunked.ops`): what runs beside each
block of the data -- on a Dask worker, or in the caller for a local store -- and the merge of their results.

Each block returns its largest squared distance, the candidates within the tie band of it and its top-k
violators: a few hundred bytes, whatever the block's size.  The values are formed by the in-memory engine's
own kernel routine (``kernel_expansion`` of :func:`corevector.numerics.numerics`, or
``refimpl.kernels.kernel_block``) and its finishing arithmetic, term by term, so they match the in-memory
scan's.  The compiled path screens first, as the in-memory scans do (``screened_expansion``: the float exp or
Taylor screen at d < 16; at d >= 16 the fit's kernel block keyed by rows: for blocks read in the caller,
whose entries the scan fills from the block's rows, ``row_block``; for blocks scanned elsewhere, the block's
sums of their rows sent with them and completed beside the rows, :func:`_block_and_tail`),
and computes exactly only the candidates whose screened value may reach a decision
(:func:`_exact_near_decisions`); the others cannot change the block's result.
"""
from __future__ import annotations

import numpy as np

from refimpl.kernels import kernel_block, kernel_diag, radial_of_sqdist, sqdist_by_product
from refimpl.meb import SCAN_BLOCK
from refimpl.simplex_qp import TIE

from ..numerics import numerics
from .row_slots import positions_in

__all__ = ["scan_block", "merge_scans", "furthest_block", "best_of", "BAND_KEEP"]

#: candidates within this many TIEs of a block's maximum are returned (the first of them within TIE of the
#: global maximum is the scan's furthest point, as in the in-memory scans)
BAND_KEEP = 256


def _ridge_of_core(z, sh, cdiag):
    """(where, ridge): the candidates among ``z`` that are core vectors (positions in z) and their alpha_z c_z,
    as the engines add it.  A whole block's candidates are a run of consecutive indices, whose core vectors
    are one slice of the sorted core (two binary searches); the others are looked up one by one (at 10^7 x 2
    the lookups of every candidate were a tenth of a zarr fit)."""
    core, calpha = sh["core"], sh["core_alpha"]
    if len(core) == 0 or len(z) == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    if z[-1] - z[0] == len(z) - 1 and bool((np.diff(z) == 1).all()):
        a, b = np.searchsorted(core, (z[0], z[-1] + 1))
        where = (core[a:b] - z[0]).astype(np.intp)
        return where, calpha[a:b] * cdiag[where]
    p, hit = positions_in(core, z)
    where = np.flatnonzero(hit)
    return where, calpha[p[where]] * cdiag[where]


def _ref_d2(X, z, s, cd, offset, raw, sh):
    """d^2 - c0 of the candidates z by the reference's arithmetic (refimpl.meb.MEBOps._dist2: blocks of
    SCAN_BLOCK rows, MEBProblem.block, then the shifted linear term)."""
    spec, lb = sh["spec"], sh["lb"]
    Ka = np.zeros(len(z))
    for a in range(0, len(z) if len(sh["svcoef"]) else 0, SCAN_BLOCK):
        sl = slice(a, a + SCAN_BLOCK)
        K = kernel_block(spec, X[sl], sh["SV"]) + lb
        K *= np.outer(s[sl], sh["s_sv"])
        if sh["diag_add"] or sh["has_pdiag"]:
            K += cd[sl, None] * (z[sl, None] == sh["core_sv"][None, :])
        Ka[sl] = K @ sh["alpha_sv"]
    if sh["has_delta"]:
        ld = s * offset if sh["has_offset"] else np.zeros(len(z))
    elif spec.constant_diagonal:
        ld = np.zeros(len(z))
    else:
        ld = raw + lb + cd
    return sh["marg"] - 2.0 * Ka + ld


def _fast_d2(ka, z_all, s_all, cd, offset, raw, sh, rows=None):
    """d^2 - c0 of each half's candidates from ka_z = sum_t coef_t k(sv_t, x_z) by the engine's finishing
    arithmetic (fastimpl _finish_d2), and a bound on the magnitude of its terms (for the round-off of a
    screened value's finish); ``rows``: only those of the block."""
    if rows is not None:
        ka, cd = ka[rows], cd[rows]
        offset = offset[rows] if offset is not None else None
        raw = raw[rows] if raw is not None else None
    lb = sh["lb"]
    vals, scale = [], abs(sh["marg"])
    for z, s in zip(z_all, s_all):
        if rows is not None:
            z, s = z[rows], s[rows]
        kal = s * (ka + lb * sh["svsum"])
        if sh["diag_add"] != 0.0 or sh["has_pdiag"]:
            where, ridge = _ridge_of_core(z, sh, cd)
            kal[where] += ridge
        if sh["has_delta"]:
            ld = s * offset if sh["has_offset"] else 0.0
        elif sh["lconst"]:
            ld = 0.0
        else:
            ld = raw + lb + cd
        vals.append(sh["marg"] - 2.0 * kal + ld)
        if len(z):
            scale = max(scale, abs(sh["marg"]) + 2.0 * float(np.max(np.abs(kal))) + float(np.max(np.abs(ld))))
    return vals, scale


#: rows of a block whose tails are computed together (sorted by where their tails start)
TAIL_ROWS = 64


def _block_and_tail(X, sh, part):
    """(ka, err) of a block's rows from their sums in the fit's kernel block (``part``: the caller's
    row_block ``partial_sums`` of these rows, whose entries cover the core vectors before ``reach``) and the
    rest of each row's sum, over the support vectors from its reach on, computed here in double: every value
    of a row against a core vector the block holds is taken from it, as the scans of blocks read in the caller
    take it (``row_block.expansion``), rather than the whole support again.  Rows are sorted by where their
    tails start and summed TAIL_ROWS at a time, each group from its lowest start, the entries before a row's
    own start masked.  ``err`` bounds |ka - kernel_expansion's sums| for every row: the block's values
    within rho of the exact path's (its bound, kb_bound), the tail's -- squared distances from this GEMM and
    these squared norms, not the engine's: both sides' norms and products each within d eps max|x|^2 of the
    true ones -- within expm1(gamma (8 d + 32) eps max|x|^2) + 16 eps, and both sums' roundings (``fixed``)."""
    ka, s1, reach = (np.array(a) for a in part)
    SV, coef, gamma = sh["SV"], sh["svcoef"], float(sh["spec"].gamma)
    nsv, d = len(coef), X.shape[1]
    first = np.searchsorted(sh["sv_core"], reach)  # row i's tail: the support vectors first[i]:
    tail = np.flatnonzero(first < nsv)  # (most rows: none, their entries cover the support)
    tail = tail[np.argsort(first[tail], kind="stable")]
    svsq = sh["svsq"]
    for a in range(0, len(tail), TAIL_ROWS):
        g = tail[a:a + TAIL_ROWS]
        j0 = int(first[g[0]])
        K = radial_of_sqdist(sh["spec"], sqdist_by_product(X[g], SV[j0:], b_sq=svsq[j0:]))
        K[np.arange(j0, nsv)[None, :] < first[g, None]] = 0.0
        ka[g] += K @ coef[j0:]
        s1[g] += K @ np.abs(coef[j0:])
    eps = np.finfo(np.float64).eps
    rho = max(sh["rho"], float(np.expm1(gamma * (8.0 * d + 32.0) * eps * sh["max_sq"] * 1.01)) + 16.0 * eps)
    return ka, rho * float(s1.max(initial=0.0)) + sh["fixed"]


def _known_sums(pidx, ka, known):
    """Overwrite, in place, the sums ka of the block's inputs (view rows pidx) that ``known`` (sorted rows, their
    sums) holds; returns the mask of those inputs (exact already: no screen's error applies to them)."""
    rows, values = known
    if not len(rows):
        return np.zeros(len(pidx), dtype=bool)
    pos = np.minimum(np.searchsorted(rows, pidx), len(rows) - 1)
    hit = rows[pos] == pidx
    ka[hit] = values[pos[hit]]
    return hit


def _exact_near_decisions(X, ka, err, scale, vals_all, z_all, s_all, cd, offset, raw, sh, exact=None):
    """Replace, in place, the screened d^2 of every candidate that may reach a decision of the scan by the
    exact one (kernel_expansion's sums of those rows, which are each row's own).

    A screened ka is within ``err`` of the exact one, so a screened d^2 is within E = 2 err plus the
    round-off of both finishes (a few ulps of ``scale``).  Candidates whose screened value is below
    every threshold less E -- the block's band (vmax - 2 TIE (|vmax| + |c0|) of the exact maximum, itself
    >= the screened maximum less E), ``over`` and a given band -- are certainly outside all three and keep
    their screened values (the in-memory scans' rule, _screens.pxi); the block's maximum, its band and its
    violators are then exactly the unscreened scan's."""
    E = 2.0 * err + 16.0 * np.finfo(np.float64).eps * (scale + 2.0 * err)
    vmax = max((float(v.max()) for v in vals_all if len(v)), default=-np.inf)
    c0 = sh["c0"]
    floor = vmax - 2.0 * E - 2.0 * TIE * (abs(vmax) + E + abs(c0))
    if sh["k"] > 0:
        floor = min(floor, sh["over"] - c0 - E)
    if sh.get("band") is not None:
        floor = min(floor, sh["band"] - E)
    near = np.zeros(len(ka), dtype=bool)
    for v in vals_all:
        near |= v >= floor
    if exact is not None:
        near &= ~exact
    rows = np.flatnonzero(near)
    if len(rows) == 0:
        return
    ka = ka.copy()
    ka[rows] = numerics("fast").kernel_expansion(sh["spec"], sh["SV"], sh["svcoef"], X[rows])
    again, _ = _fast_d2(ka, z_all, s_all, cd, offset, raw, sh, rows=rows)
    for v, e in zip(vals_all, again):
        v[rows] = e


def scan_block(X, sh, pb):
    """One block's part of a full scan: for each half (CVR's mirrored points are the second), the largest
    d^2 - c0, the candidates within 2 TIE of it (lowest indices first), and the k largest beyond ``over``."""
    pidx, extra = pb
    part = None
    if len(extra) == 2:  # (the per-row columns, the rows' sums from the fit's kernel block: _block_and_tail)
        extra, part = extra
    sign, offset, pdiag = extra[:3]
    spec, m = sh["spec"], sh["m"]
    nsv = len(sh["svcoef"])
    s_in = np.ones(len(pidx)) if sign is None else sign.astype(np.float64)
    cd = np.full(len(pidx), sh["diag_add"]) if pdiag is None else pdiag
    halves = 2 if sh["mirror"] else 1
    if sh["impl"] == "fast":
        if not nsv:
            ka, err = np.zeros(len(pidx)), -1.0
        elif sh.get("row_block") is not None:  # (a block read in the caller: through the fit's kernel block)
            ka, err = sh["row_block"].expansion(X, pidx)
        elif part is not None:  # (elsewhere: the block's sums sent with the block, completed here)
            ka, err = _block_and_tail(X, sh, part)
        else:
            ka, err = numerics("fast").screened_expansion(spec, sh["SV"], sh["svcoef"], X, *sh["box"])
        raw = None
        if not sh["lconst"] and not sh["has_delta"]:
            raw = kernel_diag(spec, X)
    else:
        raw = kernel_diag(spec, X)
    out = dict(vmax=-np.inf, band_z=[], band_v=[], cut_v=-np.inf, top_z=[], top_v=[])
    over, k, c0 = sh["over"], sh["k"], sh["c0"]
    z_all = [pidx + h * m for h in range(halves)]
    s_all = [-s_in if h == 1 else s_in for h in range(halves)]
    if sh["impl"] == "fast":
        exact = None
        if sh.get("known") is not None:  # the inputs in the core set: their sums as the in-memory scans take them
            exact = _known_sums(pidx, ka, sh["known"])
        vals_all, scale = _fast_d2(ka, z_all, s_all, cd, offset, raw, sh)
        if err >= 0.0:
            _exact_near_decisions(X, ka, err, scale, vals_all, z_all, s_all, cd, offset, raw, sh, exact)
    else:
        vals_all = [_ref_d2(X, z, s, cd, offset, raw, sh) for z, s in zip(z_all, s_all)]
    for z, v in zip(z_all, vals_all):
        if len(v):
            out["vmax"] = max(out["vmax"], float(v.max()))
    band_thr = sh.get("band")
    for z, v in zip(z_all, vals_all):
        if band_thr is None:
            vmax = out["vmax"]
            sel = np.flatnonzero(v >= vmax - 2.0 * TIE * (abs(vmax) + abs(c0)))
        else:
            sel = np.flatnonzero(v >= band_thr)
        sel = sel[np.argsort(z[sel], kind="stable")]
        out["band_z"].append(z[sel])
        out["band_v"].append(v[sel])
        if k > 0:
            viol = np.flatnonzero(v > over - c0) if sh["impl"] == "fast" else np.flatnonzero(v + c0 > over)
            keep = viol[np.lexsort((z[viol], -v[viol]))][:k]
            out["top_z"].append(z[keep])
            out["top_v"].append(v[keep])
    bz, bv = np.concatenate(out["band_z"]), np.concatenate(out["band_v"])
    order = np.argsort(bz, kind="stable")
    bz, bv = bz[order], bv[order]
    if len(bz) > BAND_KEEP and band_thr is None:  # the largest value left out of the band list
        out["cut_v"] = float(bv[BAND_KEEP:].max())
    out["band_z"], out["band_v"] = bz[:BAND_KEEP], bv[:BAND_KEEP]
    out["top_z"] = np.concatenate(out["top_z"]) if out["top_z"] else np.zeros(0, dtype=np.int64)
    out["top_v"] = np.concatenate(out["top_v"]) if out["top_v"] else np.zeros(0)
    return out


def merge_scans(parts, sh):
    """One scan result from those of several slices or blocks, as the client would read them all: the
    largest value; the band lists merged (lowest indices first, at most BAND_KEEP, ``cut_v`` the largest
    value left out), less the candidates below ``vmax - 2 TIE (|vmax| + |c0|)`` (no threshold of the scan,
    best - TIE (|best| + |c0|) with best >= vmax, reaches them); the k largest violators of them all."""
    vmax = max(p["vmax"] for p in parts)
    cut_v = max(p["cut_v"] for p in parts)
    bz = np.concatenate([p["band_z"] for p in parts])
    bv = np.concatenate([p["band_v"] for p in parts])
    if sh.get("band") is None:
        keep = bv >= vmax - 2.0 * TIE * (abs(vmax) + abs(sh["c0"]))
        bz, bv = bz[keep], bv[keep]
    order = np.argsort(bz, kind="stable")
    bz, bv = bz[order], bv[order]
    if len(bz) > BAND_KEEP and sh.get("band") is None:
        cut_v = max(cut_v, float(bv[BAND_KEEP:].max()))
    tz = np.concatenate([p["top_z"] for p in parts])
    tv = np.concatenate([p["top_v"] for p in parts])
    top = np.lexsort((tz, -tv))[:sh["k"]] if sh["k"] > 0 else np.zeros(0, dtype=np.int64)
    return dict(vmax=vmax, band_z=bz[:BAND_KEEP], band_v=bv[:BAND_KEEP], cut_v=cut_v, top_z=tz[top], top_v=tv[top])


def best_of(parts, _sh):
    """The (value, index) of the largest value of several (the lowest index among equals; -1: none)."""
    best_v, best_z = -np.inf, -1
    for v, zz in parts:
        if zz >= 0 and (v > best_v or (v == best_v and zz < best_z)):
            best_v, best_z = v, zz
    return best_v, best_z


def furthest_block(X, sh, pb):
    """(best value, its augmented index) of one block for the initialisation's furthest point (the
    reference's arithmetic, refimpl.meb.MEBOps.furthest_from)."""
    pidx, (percol, masks) = pb
    sign, offset, pdiag = percol
    m, lb = sh["m"], sh["lb"]
    k = kernel_block(sh["spec"], X, sh["xz"][None])[:, 0] + lb
    s_in = np.ones(len(pidx)) if sign is None else sign.astype(np.float64)
    cd = np.full(len(pidx), sh["diag_add"]) if pdiag is None else pdiag
    raw = kernel_diag(sh["spec"], X)
    best_v, best_z = -np.inf, -1
    for h in range(2 if sh["mirror"] else 1):
        z = pidx + h * m
        s = -s_in if h == 1 else s_in
        v = sh["sz"] * s * k
        v = np.where(z == sh["z"], v + sh["cz"], v)
        if sh["has_delta"]:
            lin = sh["eta"] + (s * offset if offset is not None else 0.0)
        else:
            lin = raw + lb + cd
        v = sh["kzz"] - 2.0 * v + lin
        if masks is not None:
            v = np.where(masks[h], v, -np.inf)
        if len(v):
            j = int(np.argmax(v))
            if v[j] > best_v:
                best_v, best_z = float(v[j]), int(z[j])
    return best_v, best_z
