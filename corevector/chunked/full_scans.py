"""The full scans of a chunked fit (:class:`FullScans`, a part of :class:`corevector.chunked.ops.ChunkedMEBOps`):
every candidate's d^2 computed beside each block of the data by :func:`corevector.chunked.scans.scan_block`
-- on a cluster's workers, or in this process for a local store, or over the row buffer when it holds every
row (``resident``) -- and merged into the driver's :class:`refimpl.driver.Scan`; and the initialisation's
furthest point over many candidates.  What a scan broadcasts is the support's rows and weights; what comes
back is a few hundred bytes a block."""
from __future__ import annotations

import pickle

import numpy as np

from refimpl.driver import Scan
from refimpl.kernels import kernel_diag
from refimpl.simplex_qp import TIE

from .local_source import LocalSource
from .scans import best_of, furthest_block, merge_scans, scan_block
from .source import phase

__all__ = ["FullScans"]


class FullScans:
    """The full scans of :class:`~corevector.chunked.ops.ChunkedMEBOps` (it holds the state they read: the
    problem, X and ``scan_X``, the local engine, the row buffer and its slots)."""

    def _support(self):
        """What a full scan broadcasts: the support's rows (core order, alpha > 0), alpha_t s_t, and the
        core set's augmented indices and weights (for the ridge term of a candidate that is a core vector)."""
        core_l = np.asarray(self.local.core_set(), dtype=np.int64)
        alpha = np.asarray(self.local.weights(), dtype=np.float64)
        core = self._global(core_l)
        sv = alpha > 0
        rows = self._rows(core[sv])
        SV = self.buf[self.slots.lookup(rows)]
        s = np.ones(len(core)) if self.problem.sign is None else self.problem.sign[self._rows(core)].astype(np.float64)
        if self.mirror:
            s = np.where(core >= self.m, -s, s)
        return core, alpha, sv, SV, s

    def _shared(self, k, d2_over):
        p = self.problem
        core, alpha, sv, SV, s = self._support()
        svcoef = alpha[sv] * s[sv]
        svsum = 0.0
        for c in svcoef.tolist():  # the engine's running sum, in core order
            svsum += c
        order = np.argsort(core)
        if self.impl == "fast":
            marg = float(self.local.ball().margin)
        else:
            lo = self.local
            marg = float(lo.alpha @ (lo.grad + lo.l)) / 2.0
        # the inputs in the core set: the in-memory scans take their sums from the core-set QP's gradient
        # (fastimpl known_sums), so these scans finish them from the same numbers
        known = self.local.known_sums() if self.impl == "fast" and hasattr(self.local, "known_sums") else None
        if known is not None:
            slots, ka = known
            by_row = np.argsort(self.row_of[slots], kind="stable")
            known = (np.ascontiguousarray(self.row_of[slots][by_row], dtype=np.int64), np.ascontiguousarray(ka[by_row]))
        return dict(impl=self.impl, spec=p.kernel, SV=np.ascontiguousarray(SV), svcoef=svcoef, svsum=svsum,
                    known=known,
                    alpha_sv=alpha[sv], s_sv=s[sv], core_sv=core[sv], marg=marg, lb=float(p.label_bias),
                    c0=self.c0, diag_add=float(p.diag_add), has_pdiag=p.point_diag is not None,
                    has_delta=bool(p.has_delta), lconst=bool((not p.has_delta) and p.kernel.constant_diagonal),
                    has_offset=p.offset is not None, mirror=self.mirror, m=self.m,
                    core=core[order], core_alpha=alpha[order], k=k, over=d2_over,
                    # every row's box, for the block scans' screens (scans.scan_block)
                    box=tuple(np.asarray(b, dtype=np.float64) for b in self.X.box),
                    # blocks read here, one after another: their scans screen through the fit's kernel block
                    # (and fill it); not on workers, nor in the local scheduler's threads
                    row_block=self._install if isinstance(self.scan_X.source, LocalSource) else None,
                    # elsewhere the block's sums go to the blocks with their rows (_block_extra), and each
                    # support vector's place in the core set tells a row's tail beyond its entries
                    sv_core=np.flatnonzero(sv), svsq=np.einsum("ij,ij->i", SV, SV), max_sq=self._max_sq(self.X))

    def _block_extra(self, sh):
        """The per-block arguments of a full scan: the fit's per-row columns, and where the kernel block keyed by
        rows applies but the blocks are scanned elsewhere (a cluster's workers, the local scheduler's threads),
        each row's sums from the block (row_block's ``partial_sums``: no coordinates needed), which the block's
        scan completes with the core vectors beyond the row's entries (scans._block_and_tail) instead of
        summing the whole support again."""
        if self._install is None or sh["row_block"] is not None or not len(sh["svcoef"]):
            return self.extra if self.scan_extra is None else self.scan_extra
        ka, s1, reach, rho, fixed = self._install.partial_sums(np.arange(self.m))
        sh.update(rho=float(rho), fixed=float(fixed))
        self.stats["scan_block_entries"] += int(reach.sum(dtype=np.int64))
        out = []
        for (b, pidx, _), e in zip(self.X.plan(), self.extra):
            if pidx is None:
                lo, hi = self.X.source.bounds[b], self.X.source.bounds[b + 1]
                out.append((e, (ka[lo:hi], s1[lo:hi], reach[lo:hi])))
            else:
                out.append((e, (ka[pidx], s1[pidx], reach[pidx])))
        return out

    def _scan_all(self, k, d2_over):
        # the driver's certificate is the one full scan with no threshold
        with phase("full scan" if np.isfinite(d2_over) else "certificate"):
            return self._scan_all_blocks(k, d2_over)

    def _scan_all_blocks(self, k, d2_over):
        sh = self._shared(k, d2_over)
        extra = self._block_extra(sh)
        parts = self.scan_X.map_blocks(scan_block, sh, extra, combine=merge_scans)
        self.stats["scans"] += 1
        self.stats["scan_blocks"] += len(self.scan_X.plan())
        self.stats["scan_bytes"] += len(pickle.dumps(parts, protocol=5))
        nsv = len(sh["svcoef"])
        n_known = 0 if sh["known"] is None else len(sh["known"][0])  # (the in-memory scans' count)
        self._n_eval += ((self.m - n_known) if self.impl == "fast" else self.n) * nsv
        c0 = self.c0
        best = max(p["vmax"] for p in parts)
        thr = best - TIE * (abs(best) + abs(c0))
        first = min((z for p in parts for z, v in zip(p["band_z"].tolist(), p["band_v"].tolist()) if v >= thr),
                    default=None)
        if max(p["cut_v"] for p in parts) >= thr:
            # a band list was cut short of a candidate at or above thr: ask every block for its first one
            again = self.scan_X.map_blocks(scan_block, dict(sh, band=thr, k=0), extra, combine=merge_scans)
            first = min(int(p["band_z"][0]) for p in again if len(p["band_z"]))
        if k > 0:
            tz = np.concatenate([p["top_z"] for p in parts])
            tv = np.concatenate([p["top_v"] for p in parts])
            order = np.lexsort((tz, -tv))[:k]
            top, top_d2 = tz[order], tv[order]
        else:
            top, top_d2 = np.zeros(0, dtype=np.intp), np.zeros(0)
        return Scan(int(first), best + c0, top=top.astype(np.intp), top_d2=top_d2 + c0)

    def _furthest_chunked(self, z, idx):
        """Initialisation over many candidates (no sampling, or a sample that missed a class): the furthest
        of idx from z by one pass beside the data (the reference's arithmetic: k~ rows of refimpl.kernels)."""
        p = self.problem
        r = int(self._rows([z])[0])
        with phase("row fetch"):
            xz = self.X.take([r])[0]
        sz = (1.0 if p.sign is None else float(p.sign[r])) * (-1.0 if (self.mirror and z >= self.m) else 1.0)
        cz = float(p.point_diag[r]) if p.point_diag is not None else float(p.diag_add)
        kzz = float(kernel_diag(p.kernel, xz[None])[0]) + p.label_bias + cz
        mask = np.zeros(self.n, dtype=bool) if len(idx) < self.n else None
        if mask is not None:
            mask[idx] = True
        sh = dict(spec=p.kernel, xz=xz, z=z, sz=sz, cz=cz, kzz=kzz, lb=float(p.label_bias), eta=float(p.eta),
                  has_delta=bool(p.has_delta), const=bool(p.kernel.constant_diagonal), mirror=self.mirror, m=self.m,
                  diag_add=float(p.diag_add))
        masks = [None] * len(self.extra) if mask is None else self._mask_parts(mask)
        extra = [(e, mk) for e, mk in zip(self.extra, masks)]
        with phase("initialisation"):
            parts = self.X.map_blocks(furthest_block, sh, extra, combine=best_of)
        self._n_eval += len(idx)
        return best_of(parts, sh)[1]

    def _mask_parts(self, mask):
        halves = (mask[:self.m], mask[self.m:]) if self.mirror else (mask,)
        out = []
        for b, pidx, _ in self.X.plan():
            if pidx is None:
                lo, hi = self.X.source.bounds[b], self.X.source.bounds[b + 1]
                out.append(tuple(h[lo:hi] for h in halves))
            else:
                out.append(tuple(h[pidx] for h in halves))
        return out
