"""The core-set MEB engine: Badoiu-Clarkson with the CVM refinements ([001], Sec. 4).

The loop itself (steps 1-5 of Sec. 4: initialisation, the (1+eps) test on a sample, the furthest
point, the warm-started core-set QP) is :func:`refimpl.driver.run_core_set_loop`, shared by every
formulation and both implementations.  This module holds the reference *numerics* of that loop for
the augmented-point problem of :mod:`refimpl.problem` (:class:`MEBOps`, readable NumPy) and
:func:`fit_meb`, which runs the loop on them and packages an :class:`MEBResult`.

Distances use eq. (12) (plus Delta, [000] eq. (13)) and touch only kernel
rows against the core set; no n x n matrix is ever formed.  With ``sample_size`` (default 59,
the probabilistic speed-up of Sec. 4.1.2) steps 2-3 look at a random sample only; with
``sample_size=None`` they scan all n points.

Certificate (beyond the paper).  Any feasible alpha gives a lower bound R_tau^2 = l'alpha -
alpha'Q alpha <= r_MEB^2 (weak duality on the subset S_tau, whose MEB is no larger than the
whole set's), and any center c gives an upper bound r_cert = max_l ||c - phi~(z_l)||.  So after
one full scan

    R_tau <= r_MEB <= r_cert,        certified_ratio = (r_cert / R_tau)^2,

and under full-scan termination certified_ratio <= (1+eps)^2, which is eq. (14)-(15).
With sampling it reports what the sampling actually achieved.

``fastimpl._engine.fit_meb`` is this same function with the Cython numerics (``ops_class``); the
same inputs and ``random_state`` give the same core set (the random draws are made identically).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .driver import (HYBRID_NU, STOPS, Ball, Scan, caller_stacklevel, d2_threshold, inner_tolerance, initial_pair,
                     kkt_gap, make_rng, margin_scale, run_core_set_loop, stop_accepts, warn_if_radius_too_coarse)
from .problem import MEBProblem
from .simplex_qp import TIE, active_set_simplex, smo_simplex

__all__ = ["MEBResult", "MEBOps", "fit_meb", "make_rng", "initial_pair", "STOPS", "SOLVERS", "stop_accepts",
           "inner_tolerance", "margin_scale", "d2_threshold", "kkt_gap", "validate_engine_params"]

#: rows per block in full scans (bounds temporary memory independently of n)
SCAN_BLOCK = 4096
#: SMO steps allowed per core-set QP, as a multiple of the core-set size
SMO_STEPS_PER_VECTOR = 200


def smo_step_bound(core_size: int) -> int:
    """The bound on SMO steps for one core-set QP (both engines use it)."""
    return SMO_STEPS_PER_VECTOR * core_size + 1000


@dataclass
class MEBResult:
    """What a fit of the MEB engine returns.

    core_set : indices (into the n augmented points) of the core vectors, in the order added.
    alpha : their weights (the center is c = sum alpha_i phi~(z_i)); zeros are allowed.
    radius2 : R_tau^2 = l'alpha - alpha'K~alpha, the dual objective of 001 eq. (2).
    margin : alpha'K~alpha (for the L2-SVMs this is rho, and -margin is the dual (7)/(9)).
    r_cert2 : max over all n points of the squared distance to the center (nan if not certified).
    certified_ratio : r_cert2 / radius2.
    n_iter : number of core-set updates (outer iterations).
    converged : whether the stop test ended the loop (False: max_iter did).
    history : per-iteration lists 'core_set_size', 'radius', 'elapsed', 'inner_steps', 'inner_capped'.
    kernel_evaluations : number of base-kernel evaluations made by the fit.
    margin_scale : S, the variable part of the dual objective the ``stop`` rules measure against
        (:func:`refimpl.driver.margin_scale`): rho for the L2-SVMs, p/C^2 for CVR.
    kkt_gap : (max_{alpha_t > 0} g_t - min_z g_z) / (2 S) over all n points (nan if not certified):
        LIBSVM's maximal-violating-pair gap in the units of its own tolerance (see ``STOPS``).
    stop : the rule that ended the loop.
    settled : the settle rule ended the loop (``refimpl.driver.Settle``): more core vectors no longer changed
        the decisions on its probe; ``converged`` is then False and ``certified_ratio`` reports what was reached.
    settle_checks : the settle rule's checks, (core-set size, probe points that changed side; -1 at the first).
    """

    core_set: np.ndarray
    alpha: np.ndarray
    radius2: float
    margin: float
    r_cert2: float
    certified_ratio: float
    n_iter: int
    converged: bool
    history: dict = field(default_factory=dict)
    kernel_evaluations: int = 0
    margin_scale: float = float("nan")
    kkt_gap: float = float("nan")
    stop: str = "radius"
    settled: bool = False
    settle_checks: list = field(default_factory=list)


#: the inner solvers of the core-set QP: 'smo' the paper's (001 Sec. 4.1.4, warm-started SMO), 'active_set' the
#: exact active-set Newton method (``simplex_qp.active_set_simplex``; SMO where Q_FF is singular).  The
#: estimators' solver='auto' (the batched loop, switching from the active set to SMO) is their engine's
#: policy, :mod:`corevector.engine_policy`, which passes fit_meb a solver function and the loop's settings.
SOLVERS = ("active_set", "smo")


def validate_engine_params(eps, sample_size, max_iter, tol, n, n_confirm=0, solver="smo", stop="radius",
                           hybrid_nu=HYBRID_NU):
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise TypeError(f"eps must be a number, got {type(eps).__name__}")
    if not np.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be positive and finite, got {eps}")
    if sample_size is not None:
        if isinstance(sample_size, bool) or not isinstance(sample_size, (int, np.integer)) or sample_size < 1:
            raise ValueError(f"sample_size must be a positive integer or None, got {sample_size!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if not (callable(solver) or solver in SOLVERS):
        raise ValueError(f"solver must be one of {SOLVERS} or a function of the numerics, got {solver!r}")
    if isinstance(n_confirm, bool) or not isinstance(n_confirm, (int, np.integer)) or n_confirm < 0:
        raise ValueError(f"n_confirm must be a non-negative integer, got {n_confirm!r}")
    if tol is not None and (not np.isfinite(tol) or tol <= 0):
        raise ValueError(f"tol must be positive or None, got {tol!r}")
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {STOPS}, got {stop!r}")
    if isinstance(hybrid_nu, bool) or not isinstance(hybrid_nu, (int, float, np.integer, np.floating)) \
            or not 0 < hybrid_nu < np.inf:
        raise ValueError(f"hybrid_nu must be a positive finite number, got {hybrid_nu!r}")
    if n < 2:
        raise ValueError(f"the MEB engine needs at least 2 points, got {n}")


class MEBOps:
    """The reference numerics of the core-set loop: Q = K~[S, S] kept dense, alpha, and the gradient
    g = 2 Q alpha - (l - c0) of the core-set QP (readable NumPy).

    The engine works with the shifted linear term l - c0 (``MEBProblem.shifted_linear_term``) and adds
    c0 back to R^2 and to squared distances (see simplex_qp.most_violating for why).
    """

    def __init__(self, problem: MEBProblem, cache_size=None):
        self.problem = self.init_problem = problem
        self.n = problem.n
        self.c0 = problem.constant_term or 0.0
        self.S: list[int] = []
        self._in = set()
        self.Q = np.zeros((0, 0))
        self.l = np.zeros(0)
        self.alpha = np.zeros(0)
        self.grad = np.zeros(0)
        self.free = None  # the active set's free set, kept across solves (insertion order)
        self.n_eval = 0

    # -- the core set
    def furthest_from(self, z, idx):
        """Initialisation: the candidate of idx maximising ||phi~(z) - phi~(z_l)||^2 + Delta_l."""
        p = self.problem
        self.n_eval += len(idx)
        d2 = p.diag([z])[0] - 2.0 * p.block(idx, [z])[:, 0] + p.linear_term(idx)
        return int(idx[int(np.argmax(d2))])

    def start(self, z_a, z_b):
        """S_0 = {z_a, z_b} with alpha = e_a: the MEB of z_a alone, then z_b joins with weight 0."""
        self.add([z_a])
        self.alpha[0] = 1.0
        self.grad[0] = 2.0 * self.Q[0, 0] - self.l[0]
        self.add([z_b])

    def add(self, zs):
        """Append each z with alpha_z = 0; its gradient entry is 2 (K~ alpha)_z - l_z."""
        for z in zs:
            z = int(z)
            row = self.problem.block([z], self.S + [z])[0]
            self.n_eval += len(row)
            k = len(self.S)
            Q = np.zeros((k + 1, k + 1))
            Q[:k, :k] = self.Q
            Q[k, :] = row
            Q[:, k] = row
            self.Q = Q
            self.S.append(z)
            self._in.add(z)
            self.l = np.append(self.l, self.problem.shifted_linear_term([z]))
            self.alpha = np.append(self.alpha, 0.0)
            self.grad = np.append(self.grad, 2.0 * float(row[:k] @ self.alpha[:k]) - self.l[-1])

    def in_core(self, z) -> bool:
        return int(z) in self._in

    def prune(self, d2_below, min_count) -> int:
        """Drop the core vectors of weight 0 with squared distance below ``d2_below``, if at least ``min_count``
        (see refimpl.driver.PRUNE_KAPPA): the center and the remaining gradients are unchanged."""
        margin = float(self.alpha @ (self.grad + self.l)) / 2.0
        drop = (self.alpha == 0.0) & (self.grad > margin + self.c0 - d2_below)
        cnt = int(drop.sum())
        if cnt == 0 or cnt < min_count:
            return 0
        keep = np.flatnonzero(~drop)
        self.S = [self.S[t] for t in keep]
        self._in = set(self.S)
        self.Q = self.Q[np.ix_(keep, keep)]
        self.l, self.alpha, self.grad = self.l[keep], self.alpha[keep], self.grad[keep]
        self.free = None
        return cnt

    def n_core(self) -> int:
        return len(self.S)

    def n_support(self) -> int:
        return int(np.count_nonzero(self.alpha))

    def core_set(self):
        return np.asarray(self.S, dtype=np.intp)

    # -- the core-set QP (001 Sec. 4.1.4)
    def step_bound(self) -> int:
        return smo_step_bound(len(self.S))

    def solve(self, tol, method, bound) -> int:
        """Warm-started QP on the core set to gap <= tol: the active set (falls back to SMO when Q_FF
        is singular) or SMO."""
        out = None
        if method == "active_set":
            if self.free is None:
                self.free = [int(t) for t in np.flatnonzero(self.alpha > 0)]
            out = active_set_simplex(self.Q, self.l, self.alpha, self.grad, tol, bound, self.free, shift=self.c0)
        if out is None:
            out = smo_simplex(self.Q, self.l, self.alpha, self.grad, tol, bound, shift=self.c0)
            self.free = None  # SMO moved alpha: the free set restarts from the support
        return out[0]

    # -- the ball and the scans (eq. (12))
    def ball(self) -> Ball:
        """R^2 = l'alpha - alpha'Q alpha (001 eq. (3)), margin alpha'Q alpha = alpha'(g + l)/2, and the
        core vectors' squared distances d_t^2 = margin - g_t (unshifted)."""
        margin = float(self.alpha @ (self.grad + self.l)) / 2.0
        R2 = self.c0 + (float(self.alpha @ self.l) - margin)
        d2 = margin + self.c0 - self.grad
        return Ball.make(R2, margin, self.problem.constant_term, float(d2[self.alpha > 0].min()), float(d2.max()))

    def _dist2(self, idx):
        """||c - phi~(z_l)||^2 + Delta_l - c0 for l in idx (001 eq. (12), 000 eq. (13)), shifted by c0."""
        sv = self.alpha > 0
        S = np.asarray(self.S)[sv]
        Ka = self.problem.block(idx, S) @ self.alpha[sv]
        self.n_eval += len(idx) * len(S)
        margin = float(self.alpha @ (self.grad + self.l)) / 2.0
        return margin - 2.0 * Ka + self.problem.shifted_linear_term(idx)

    def scan(self, idx, k, d2_over) -> Scan:
        """The furthest candidate (the first within a relative TIE of the maximum, so that round-off
        never breaks exact ties differently in the two engines) and, for a full scan, the k furthest
        candidates beyond d2_over.  Full scans run in blocks of SCAN_BLOCK rows."""
        if idx is not None:
            d2 = self._dist2(np.asarray(idx, dtype=np.intp))
            best = float(d2.max())
            p = int(np.flatnonzero(d2 >= best - TIE * (abs(best) + abs(self.c0)))[0])
            return Scan(int(idx[p]), best + self.c0, sample_d2=d2 + self.c0)
        block_max, cand, cand_d2 = [], [], []
        for start in range(0, self.n, SCAN_BLOCK):
            block = np.arange(start, min(start + SCAN_BLOCK, self.n))
            d2 = self._dist2(block)
            block_max.append(float(d2.max()))
            over = np.flatnonzero(d2 + self.c0 > d2_over)
            keep = over[np.lexsort((over, -d2[over]))][:k]   # this block's k furthest beyond d2_over
            cand.append(block[keep])
            cand_d2.append(d2[keep])
        best = max(block_max)
        thr = best - TIE * (abs(best) + abs(self.c0))
        b = next(i for i, v in enumerate(block_max) if v >= thr)   # the block of the first tied candidate
        block = np.arange(b * SCAN_BLOCK, min((b + 1) * SCAN_BLOCK, self.n))
        first = int(block[np.flatnonzero(self._dist2(block) >= thr)[0]])
        cand, cand_d2 = np.concatenate(cand), np.concatenate(cand_d2)
        order = np.lexsort((cand, -cand_d2))[:k]
        return Scan(first, best + self.c0, top=cand[order], top_d2=cand_d2[order] + self.c0)

    def weights(self):
        return self.alpha.copy()

    def add_warm(self, zs, alpha):
        """add(zs), then warm(alpha): ``alpha`` holds one weight per core vector of the core set that results
        (refimpl.driver's seeded start; the compiled numerics save a pass over the new rows here)."""
        zs = [int(z) for z in zs]
        a = np.asarray(alpha, dtype=np.float64).reshape(-1)
        if a.shape[0] != len(self.S) + len(zs):
            raise ValueError(f"warm: {a.shape[0]} weights for a core set of {len(self.S) + len(zs)}")
        self.add(zs)
        self.warm(a)

    def warm(self, alpha):
        """(Beyond the paper) Set the core set's weights, in core order, scaled to the simplex, and their
        gradient 2 Q alpha - l: a warm start for the next solve (refimpl.driver.run_core_set_loop's
        ``initial_weights``)."""
        a = np.array(alpha, dtype=np.float64).reshape(-1)
        if a.shape[0] != len(self.S):
            raise ValueError(f"warm: {a.shape[0]} weights for a core set of {len(self.S)}")
        if not np.all(np.isfinite(a)) or np.any(a < 0) or not a.sum() > 0:
            raise ValueError("warm: the weights must be finite, nonnegative and not all zero")
        self.alpha = a / a.sum()
        self.grad = 2.0 * (self.Q @ self.alpha) - self.l
        self.free = None


def fit_meb(problem: MEBProblem, eps: float, *, sample_size=59, max_iter=10_000, tol=None,
            random_state=None, cache_size=200 * 2**20, certify=True, verbose=False,
            n_confirm=0, solver="smo", stop="radius", label=None, ops_class=MEBOps,
            hybrid_nu=HYBRID_NU, stall_hint="", batch=False, wide=False, prune=False, dense=False,
            initial=None, initial_weights=None, settle=False) -> MEBResult:
    """Approximate the MEB of the augmented points of ``problem`` to within (1+eps) (001 Sec. 4).

    Parameters
    ----------
    problem : MEBProblem
    eps : float > 0 -- the (1+eps) tolerance of step 2.
    sample_size : int or None -- random candidates per iteration (001 eq. near (12): 59 gives a
        95% chance of hitting the top 5%); None scans all points, which the (1+eps)^2 bound needs.
    max_iter : int -- bound on outer iterations (core-set updates); a ConvergenceWarning says when it stops the fit.
    tol : float or None -- inner QP stopping gap; None means eps * R_t^2 ('radius') or eps * S (see
        ``refimpl.driver.inner_tolerance``).  If a core vector is ever found outside the ball (its QP
        stopped early), it is divided by 10.
    random_state : None, int, RandomState or Generator.
    cache_size : int -- bytes for the core-set kernel cache (the reference keeps Q dense; kept for API parity).
    certify : bool -- run the final full scan that gives ``r_cert2`` and ``certified_ratio``.
    verbose : bool -- show a progress bar (core-set size and R) while fitting; ``label`` names it.
    n_confirm : int -- (beyond the paper; 0, the paper's, by default) with sampling, stop only after
        1 + n_confirm consecutive samples find no point outside the (1+eps) ball.  One clean sample of 59 only
        says that, with probability 0.95, fewer than 5% of the points lie outside; 31 clean samples (1829
        points) bound the violating fraction near 0.16%.  Ignored by full scans, which are exact.
    solver : 'smo' (the paper's, 001 Sec. 4.1.4: warm-started SMO), 'active_set' (the exact active-set Newton
        method, ``simplex_qp.active_set_simplex``; SMO where Q_FF is singular), or a function ``method_for(ops)``
        naming the inner solver of each core-set QP (``corevector.engine_policy`` switches by support size).
    stop : 'radius', 'margin', 'gap' or 'hybrid' -- the test of step 2 (see ``refimpl.driver.STOPS``);
        'radius' is the paper's.
    hybrid_nu : float > 0 -- the cap of stop='hybrid': d^2 - R^2 <= 2 hybrid_nu tau (``refimpl.driver``;
        1 for the L2-SVMs: a sampled point passes only if classified correctly).
    ops_class : the numerics: :class:`MEBOps` (NumPy) or ``fastimpl._engine.FastMEBOps`` (Cython).
    stall_hint : str -- appended to the warning of a stalled loop (``refimpl.driver.STALL_ITERATIONS``): what
        the caller's user can change (e.g. "lower C").
    batch, wide, prune, dense : (beyond the paper) the batched loop of ``refimpl.driver`` (every violator of a
        sample at once, the inner QP to a fraction of the outer gap), with samples that grow while violators are
        rare (``wide``), weightless core vectors pruned (``prune``) and full scans once samples would cover a
        large part of the points (``dense``; both for CVR's mirrored problems).  False: the paper's
        loop, one core vector per iteration.  The estimators choose them (``corevector.engine_policy``).
    initial : sequence of int or None -- (beyond the paper) augmented points that join the core set after the
        initial pair, before the first solve (``refimpl.driver.run_core_set_loop``).
    initial_weights : sequence of float or None -- (beyond the paper) with ``initial``, the weights the first
        solve starts from (``refimpl.driver.run_core_set_loop``); None: from the initial pair's.
    settle : bool -- (beyond the paper; with sampling) also stop once more core vectors no longer change the
        decisions on a probe sample (``refimpl.driver.Settle``); ``settled`` says whether it ended the loop.
    """
    n = problem.n
    if not isinstance(settle, (bool, np.bool_)):
        raise TypeError(f"settle must be True or False, got {settle!r}")
    validate_engine_params(eps, sample_size, max_iter, tol, n, n_confirm, solver, stop, hybrid_nu)
    ops = ops_class(problem, int(cache_size))
    out = run_core_set_loop(ops, float(eps), stop=stop, sample_size=sample_size, n_confirm=n_confirm,
                            max_iter=max_iter, tol=tol, random_state=random_state, certify=certify,
                            verbose=verbose, label=label or f"MEB ({ops_class.__name__})",
                            batch=bool(batch), method_for=solver if callable(solver) else (lambda ops: solver),
                            hybrid_nu=float(hybrid_nu), wide=bool(wide), stall_hint=stall_hint, prune=bool(prune),
                            dense=bool(dense), initial=initial, initial_weights=initial_weights,
                            settle=bool(settle))
    if out.last_capped:
        # Intermediate QPs stopped by the bound are harmless (the next one warm-starts from them); the
        # final one defines the model, so its inexactness is worth a warning.
        warnings.warn(f"the final core-set QP stopped at its step bound before reaching tol "
                      f"({out.n_capped} of {out.n_solves} QPs did); the certified ratio reports the result",
                      ConvergenceWarning, stacklevel=caller_stacklevel(2))
    ball = out.ball
    warn_if_radius_too_coarse(stop, eps, ball)
    return MEBResult(core_set=ops.core_set(), alpha=np.asarray(ops.weights(), dtype=np.float64),
                     radius2=ball.R2, margin=ball.margin, r_cert2=out.r_cert2,
                     certified_ratio=out.r_cert2 / ball.R2 if ball.R2 > 0 else float("nan"),
                     n_iter=out.n_iter, converged=out.converged, history=out.history,
                     kernel_evaluations=int(ops.n_eval), margin_scale=ball.S,
                     kkt_gap=kkt_gap(ball, out.r_cert2), stop=stop, settled=out.settled,
                     settle_checks=out.settle_checks)
