"""The MEB with projection constraints on its center, by core sets ([004], Sec. IV).

Problem (19): find the smallest ball enclosing the augmented points [phi~(z_i); delta_i] whose
center [c; 0] is orthogonal to given orthonormal directions u~_1 .. u~_s.  Its dual is (20)-(21),

    max  -a~'K~a~ - 2 a~'Phi~'U~ g~ - g~'U~'U~ g~    s.t.  a~ >= 0, 1'a~ = 1,

and the radius and center are (22)-(23):

    R^2 = a~'(diag K~ + Delta) - c'c,     c = sum_i a~_i phi~(z_i) + sum_q g~_q u~_q,
    c'c = x~' G x~  with  x~ = [a~; g~]  and  G of eq. (24)/(26).

Here the points are those of the two-class L2-SVM (004 eqs. (6)-(7), built by
``refimpl.cvm.two_class_problem``): k~ = y_i y_j (k + 1) + delta_ij / C, and Delta = eta - diag K~
(zero for the Gaussian kernel), so diag K~ + Delta = eta is constant as in (21).  The directions
live in the phi block of phi~ (Sec. IV-B2: U~ = [U; 0]), so u~_q'phi~(z_l) = y_l u_q'phi(x_l),
and every u_q is a kernel expansion u_q = sum_j B_jq phi(e_j) (Sec. II: "w ... can always be
expressed as a linear combination of phi(x_1), ..., phi(x_m)").

The squared distance of any point to the center (23) needs only kernel expansions:

    ||c - phi~(z_l)||^2 + Delta_l = c'c - 2 (G x~)_l + eta_l,
    (G x~)_l = (K~ a~)_l + y_l (U'phi(x_l))' g~,

with eta_l = k~(z_l, z_l) + Delta_l; no m x m matrix is formed.

Algorithm 1 (the CVM loop) is the loop of ``refimpl.driver`` with only step 4 changed, as the
paper says: the constrained MEB of the core set is found through the MMDA sub-problem (3) by SOR
(``refimpl.sor``, Algorithm 3), warm-started from the previous core set, and mapped to (a~, g~)
by the normalisation (35), x~ = x / 1'alpha.  Everything else is the driver's: the initial pair,
the random draws, the 59-point sampling with ``n_confirm`` confirmations, the stop rules
(``refimpl.driver.STOPS``, the paper's 'radius' by default), the max_iter bound and its
ConvergenceWarning, the re-solve when a core vector is found outside the ball and the certificate
scan.  :class:`ConstrainedOps` is the numerics interface the driver talks to.

The tolerance of the core-set QP follows the engine (tol = eps R^2 on squared distances): since
at the optimum of (3)  d_l^2 - R^2 = -2 g_l / 1'alpha  (g = G x - b, from (35) and (42)), the SOR
stops at |g| <= eps R^2 1'alpha / 2.

A note on the geometry (used by the tests as an independent check): with U'U = I the optimal
g~ is -U~'Phi~ a~ (the last KKT row), so c is the projection P a~-combination onto span{u}^perp
and the problem is the center-constrained MEB (000 eq. (13)) of the projected points with the
extra offsets Delta_l + ||U~'phi~(z_l)||^2.

``fastimpl._mmda`` supplies the same operations in C (its :class:`FastConstrainedOps`); the loop
below is shared so that both implementations make the same draws and the same decisions.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .driver import Ball, Scan, run_core_set_loop
from .kernels import kernel_block, kernel_expansion
from .meb import MEBResult, validate_engine_params
from .problem import MEBProblem
from .simplex_qp import TIE
from .sor import sor_solve, sor_step_bound

#: rows per block in full scans (bounds temporary memory independently of m)
SCAN_BLOCK = 4096
#: rows per block of ``ConstrainedOps.proj_rows``: NumPy's n_e-wide temporaries stay in cache
#: (8x faster than 4096-row blocks for n_e = 1000, where they are 33 MB each)
PROJ_BLOCK = 256


@dataclass
class Projections:
    """The previous unit directions u_1..u_s as kernel expansions u_q = sum_j B[j, q] phi(e_j).

    X : (n_e, d) coordinates of the expansion points e_j;  B : (n_e, s) coefficients.
    U'U = I is assumed (the u_q are orthonormal, Sec. II), as Lemma 2 does.
    """

    X: np.ndarray
    B: np.ndarray

    @classmethod
    def empty(cls, d):
        return cls(np.zeros((0, d)), np.zeros((0, 0)))

    @property
    def s(self) -> int:
        return self.B.shape[1]


@dataclass
class ConstrainedMEBProblem:
    """Problem (19): the augmented points of ``base`` (an L2-SVM ``MEBProblem``) and the directions."""

    base: MEBProblem
    proj: Projections

    @property
    def n(self):
        return self.base.n

    @property
    def s(self):
        return self.proj.s


@dataclass
class ConstrainedMEBResult(MEBResult):
    """``MEBResult`` plus the constrained MEB's gamma~ and the MMDA sub-problem's solution.

    alpha, gamma_tilde : (a~, g~) of (20)-(21) on the core set, by the normalisation (35).
    alpha_mmda, gamma_mmda : (alpha, gamma) of (3), recovered from (a~, g~) by Appendix II.
    proj_core : (t, s) rows y_l U'phi(x_l) of the core vectors (Phi~_t'U~ of eq. (38)).
    sor_steps : total SOR steps over all core-set QPs.
    """

    gamma_tilde: np.ndarray = None
    alpha_mmda: np.ndarray = None
    gamma_mmda: np.ndarray = None
    proj_core: np.ndarray = None
    sor_steps: int = 0


class ConstrainedOps:
    """The numeric kernels of the loop: kernel blocks, projections, and (G x)_l scans (NumPy).

    ``fastimpl._mmda.FastConstrainedOps`` overrides the scans (``gx``, ``furthest``), ``sor``,
    ``dense_block`` (the m x m matrices of the baselines), ``linear_term`` (a per-fit table) and the
    bookkeeping of ``kt_block``.  ``raw_block``, which fills the entries of G_t, is the same NumPy
    code in both: SOR then sees bit-identical matrices in both implementations and takes the same
    steps (a one-ulp difference in G_t could otherwise make it stop one step earlier or later, a
    difference of the order of its tolerance).
    """

    def __init__(self, problem: ConstrainedMEBProblem, omega=1.0):
        self.problem = problem
        self.base = self.init_problem = problem.base
        self.n = problem.n
        self.omega = float(omega)
        self.n_eval = 0
        self.total_steps = 0         # SOR steps over all core-set QPs
        self._proj = None            # Phi~'U~ of all points, filled at its first use
        self.st = None               # the core-set state (_CoreSetState), made by start()
        self._in = set()

    # -- the numerics interface of refimpl.driver.run_core_set_loop
    def furthest_from(self, z, idx):
        """Distance between projected points, ||P(phi~(z) - phi~(z_l))||^2 + Delta_l, maximised."""
        idx = np.asarray(idx, dtype=np.intp)
        b = self.base
        d2 = b.diag([z])[0] - 2.0 * self.kt_block(idx, [z])[:, 0] + b.linear_term(idx)
        if self.problem.s:
            pz = self.proj_rows([z])[0]
            d2 = d2 - ((self.proj_rows(idx) - pz) ** 2).sum(1)
        return int(idx[int(np.argmax(d2))])

    def start(self, z_a, z_b):
        """S_1: alpha_1 = [1], gamma_1 = 0 (Sec. IV-C2), then z_b joins with weight 0."""
        st = self.st = _CoreSetState(self, self.problem.s)
        s = st.s
        self.add([z_a])
        st.x[s] = 1.0
        st.g[:st.n] = st.G[:st.n, :st.n] @ st.x[:st.n]
        st.g[s] -= 1.0
        self.add([z_b])

    def add(self, zs):
        for z in zs:
            self.st.add(int(z))
            self._in.add(int(z))

    def in_core(self, z):
        return int(z) in self._in

    def n_core(self):
        return self.st.t

    def n_support(self):
        return int(np.count_nonzero(self.st.alpha))

    def core_set(self):
        return self.st.S.copy()

    def step_bound(self):
        return sor_step_bound(self.st.n)

    def solve(self, tol, method, bound):
        """SOR on (3) restricted to the core set (Algorithm 3), warm-started.  ``tol`` is on squared
        distances, like the engine's; since d_l^2 - R^2 = -2 g_l / 1'alpha, SOR stops at |g| <= tol 1'alpha / 2."""
        st = self.st
        A, _, _ = st.ball()
        nn = st.n
        steps, _ = self.sor(st.G[:nn, :nn], st.g[:nn], st.x[:nn], st.bounded[:nn], self.omega, tol * A / 2.0, bound)
        self.total_steps += steps
        return steps

    def ball(self) -> Ball:
        """R^2 and c'c of the normalised solution (eqs. (22), (35)); the core vectors' squared distances
        d_l^2 = c'c - 2 (G x)_l / A + eta_l with (G x)_l = g_l + 1."""
        st = self.st
        A, cc, R2 = st.ball()
        s, n = st.s, st.n
        d2 = cc - 2.0 * (st.g[s:n] + 1.0) / A + st.lin[s:n]
        return Ball.make(R2, cc, self.base.constant_term, float(d2[st.alpha > 0].min()), float(d2.max()))

    def scan(self, idx, k, d2_over) -> Scan:
        """The furthest candidate of idx (None: all n points, by ``furthest``), with every candidate's
        squared distance for an explicit sample; no top-k list (MMDA runs the papers' loop)."""
        st = self.st
        A, cc, _ = st.ball()
        if idx is None:
            z, d2 = self.furthest(np.arange(self.n), st.S, st.alpha, st.gamma, A, cc)
            return Scan(int(z), float(d2))
        idx = np.asarray(idx, dtype=np.intp)
        d2 = cc - 2.0 * self.gx(idx, st.S, st.alpha, st.gamma) / A + self.linear_term(idx)
        best = float(d2.max())
        p = int(np.flatnonzero(d2 >= best - TIE * abs(best))[0])
        return Scan(int(idx[p]), best, sample_d2=d2)

    # -- overridable numerics
    def raw_block(self, A, B):
        return kernel_block(self.base.kernel, A, B)

    def dense_block(self, A, B):
        return kernel_block(self.base.kernel, A, B)

    def expansion(self, SV, coef, Xq):
        return kernel_expansion(self.base.kernel, SV, coef, Xq)

    def sor(self, G, g, x, bounded, omega, tol, max_steps):
        return sor_solve(G, g, x, bounded, omega, tol, max_steps)

    def linear_term(self, idx):
        """eta_l = k~(z_l, z_l) + Delta_l (``MEBProblem.linear_term``)."""
        return self.base.linear_term(idx)

    # -- shared formulas
    def sign(self, idx):
        b = self.base
        return np.ones(len(idx)) if b.sign is None else b.sign[idx].astype(np.float64)

    def kt_block(self, rows, cols):
        """[k~(z_i, z_j)] = s_i s_j (k + beta_b) + delta_ij c  (004 eq. (6))."""
        rows = np.asarray(rows, dtype=np.intp)
        cols = np.asarray(cols, dtype=np.intp)
        b = self.base
        self.n_eval += len(rows) * len(cols)
        K = self.raw_block(b.X[rows], b.X[cols]) + b.label_bias
        K *= np.outer(self.sign(rows), self.sign(cols))
        if b.diag_add:
            K += b.diag_add * (rows[:, None] == cols[None, :])
        return K

    def proj_rows(self, idx):
        """[u~_q'phi~(z_l)] = y_l u_q'phi(x_l), (len(idx), s): rows of Phi~'U~ (eq. (30)), in blocks of
        PROJ_BLOCK rows (also for the m rows of the dense baselines)."""
        idx = np.asarray(idx, dtype=np.intp)
        P = self.problem.proj
        if P.s == 0:
            return np.zeros((len(idx), 0))
        self.n_eval += len(idx) * P.X.shape[0]
        out = np.empty((len(idx), P.s))
        for start in range(0, len(idx), PROJ_BLOCK):
            blk = idx[start:start + PROJ_BLOCK]
            out[start:start + PROJ_BLOCK] = self.raw_block(self.base.X[blk], P.X) @ P.B * self.sign(blk)[:, None]
        return out

    def proj_table(self):
        """``proj_rows`` of all n points, (n, s), for the scans of ``gx`` and the rows of G_t.

        The u's are fixed during a fit, so these rows are computed once, at the first use, in
        blocks of PROJ_BLOCK (n n_e kernel evaluations: the cost of the one full scan that the final
        certificate makes anyway); the sampled scans and the new core vectors then read them
        instead of evaluating the expansions of the u's again at every iteration.
        """
        if self._proj is None:
            self._proj = self.proj_rows(np.arange(self.base.n))
        return self._proj

    def furthest(self, idx, S, alpha, gamma, A, cc):
        """(index, squared distance) of the candidate furthest from the center (23) of x~ = x / A,
        A = 1'alpha, c'c = cc:  d_l^2 = c'c - 2 (G x)_l / A + eta_l.  Near-ties within a relative TIE
        go to the first candidate, as in ``refimpl.meb``."""
        d2 = cc - 2.0 * self.gx(idx, S, alpha, gamma) / A + self.linear_term(idx)
        best = float(d2.max())
        k = int(np.flatnonzero(d2 >= best - TIE * abs(best))[0])
        return int(idx[k]), best

    def gx(self, idx, S, alpha, gamma):
        """(G x)_l = (K~ alpha)_l + y_l (U'phi(x_l))'gamma for the candidates ``idx`` (eqs. (23), (40)).

        One kernel expansion over the support, and the rows of Phi~'U~ for the projection term:
        y_l sum_j alpha_j y_j (k(x_j, x_l) + beta_b) + c alpha_l [l in S] + (Phi~'U~ gamma)_l.
        """
        b = self.base
        idx = np.asarray(idx, dtype=np.intp)
        S = np.asarray(S, dtype=np.intp)
        sv = alpha > 0
        Ssv, asv = S[sv], alpha[sv]
        a_s = asv * self.sign(Ssv)
        SV = b.X[Ssv]
        out = np.empty(len(idx))
        for start in range(0, len(idx), SCAN_BLOCK):
            blk = idx[start:start + SCAN_BLOCK]
            out[start:start + SCAN_BLOCK] = self.expansion(SV, a_s, b.X[blk])
        self.n_eval += len(idx) * len(Ssv)
        out += b.label_bias * a_s.sum()
        out *= self.sign(idx)
        if b.diag_add and len(Ssv):
            order = np.argsort(Ssv, kind="stable")
            srt = Ssv[order]
            pos = np.searchsorted(srt, idx)
            pos[pos >= len(srt)] = 0
            hit = srt[pos] == idx
            out[hit] += b.diag_add * asv[order[pos[hit]]]
        if self.problem.s:
            out += self.proj_table()[idx] @ gamma
        return out


class _CoreSetState:
    """x = [gamma; alpha] (a fixed permutation of the paper's [alpha; gamma]: the s gamma's first,
    so that a new core vector is appended without moving anything), G_t of eq. (38) in a growing
    buffer, and g = G_t x - b; the core set S in a growing index buffer."""

    def __init__(self, ops: ConstrainedOps, s: int):
        self.ops = ops
        self.s = s
        self.t = 0                   # core vectors
        cap = s + 64
        self._S = np.zeros(cap, dtype=np.intp)
        self.G = np.zeros((cap, cap))
        self.G[:s, :s] = np.eye(s)   # U~'U~ = U'U = I (orthonormal directions, Lemma 2)
        self.x = np.zeros(cap)
        self.g = np.zeros(cap)
        self.bounded = np.zeros(cap, dtype=bool)
        self.lin = np.zeros(cap)     # eta_l = k~(z_l, z_l) + Delta_l of the core vectors

    @property
    def S(self):
        return self._S[:self.t]

    @property
    def n(self):
        return self.s + self.t

    def _grow(self):
        cap = 2 * self.G.shape[0]
        G = np.zeros((cap, cap))
        n = self.n
        G[:n, :n] = self.G[:n, :n]
        self.G = G
        for name in ("x", "g", "lin"):
            old = getattr(self, name)
            new = np.zeros(cap)
            new[:n] = old[:n]
            setattr(self, name, new)
        bounded = np.zeros(cap, dtype=bool)
        bounded[:n] = self.bounded[:n]
        self.bounded = bounded
        S = np.zeros(cap, dtype=np.intp)
        S[:self.t] = self.S
        self._S = S

    def add(self, z: int):
        """Append z with alpha_z = 0: its row of K~ and of Phi~'U~, and g_z = (G x)_z - 1."""
        if self.n == self.G.shape[0]:
            self._grow()
        s, n = self.s, self.n
        self._S[self.t] = z
        self.t += 1
        row = self.ops.kt_block([z], self.S)[0]
        p = self.ops.proj_table()[z] if s else np.zeros(0)
        self.G[n, :s] = p
        self.G[:s, n] = p
        self.G[n, s:n + 1] = row
        self.G[s:n + 1, n] = row
        self.bounded[n] = True
        self.x[n] = 0.0
        self.lin[n] = float(self.ops.linear_term([z])[0])
        self.g[n] = float(self.G[n, :n] @ self.x[:n]) - 1.0

    @property
    def alpha(self):
        return self.x[self.s:self.n]

    @property
    def gamma(self):
        return self.x[:self.s]

    def sums(self):
        """(1'alpha, x'Gx) with x'Gx = x'(g + b)."""
        n = self.n
        A = float(self.alpha.sum())
        xGx = float(self.x[:n] @ self.g[:n]) + A
        return A, xGx

    def ball(self):
        """(1'alpha, c'c, R^2) of the normalised solution x~ = x / 1'alpha (eqs. (35), (22))."""
        A, xGx = self.sums()
        cc = xGx / (A * A)
        R2 = float(self.lin[self.s:self.n] @ self.alpha) / A - cc
        return A, cc, R2


def fit_constrained_meb(problem: ConstrainedMEBProblem, eps: float, *, sample_size=59, n_confirm=0,
                        max_iter=10_000, tol=None, omega=1.0, random_state=None, certify=True, stop="radius",
                        verbose=False, ops_class=ConstrainedOps) -> ConstrainedMEBResult:
    """Algorithm 1 on the constrained MEB (19), step 4 by SOR on (3) (Algorithm 3).

    Parameters are those of ``refimpl.meb.fit_meb``; ``omega`` in (0, 2) is SOR's relaxation
    factor and ``ops_class`` the implementation of the numerics (NumPy here, C in ``fastimpl``).
    With ``sample_size=None`` (full scans) and stop='radius' Theorem 2 holds:
    R_tau^2 <= p* <= (1+eps)^2 R_tau^2.
    """
    n = problem.n
    validate_engine_params(eps, sample_size, max_iter, tol, n, n_confirm, "smo", stop)
    if isinstance(omega, bool) or not isinstance(omega, (int, float, np.integer, np.floating)) \
            or not 0.0 < omega < 2.0:
        raise ValueError(f"omega must be in (0, 2), got {omega!r}")
    ops = ops_class(problem, omega)
    out = run_core_set_loop(ops, float(eps), stop=stop, sample_size=sample_size, n_confirm=n_confirm,
                            max_iter=max_iter, tol=tol, random_state=random_state, certify=certify,
                            verbose=verbose, label="MMDA direction", method_for=lambda ops: "sor")
    if out.last_capped:
        warnings.warn(f"the final core-set QP stopped at the SOR step bound before reaching tol "
                      f"({out.n_capped} of {out.n_solves} QPs did); the certified ratio reports the result",
                      ConvergenceWarning, stacklevel=2)
    st, ball = ops.st, out.ball
    A, cc, R2 = st.ball()
    alpha_t = st.alpha.copy() / A            # (35)
    gamma_t = st.gamma.copy() / A
    scale = cc                               # Appendix II: [alpha; gamma] = [a~; g~] / (x~'G x~)
    return ConstrainedMEBResult(
        core_set=st.S.copy(), alpha=alpha_t, radius2=R2, margin=cc, r_cert2=out.r_cert2,
        certified_ratio=out.r_cert2 / R2 if R2 > 0 else float("nan"), n_iter=out.n_iter,
        converged=out.converged, history=out.history, kernel_evaluations=int(ops.n_eval),
        margin_scale=ball.S, stop=stop, gamma_tilde=gamma_t, alpha_mmda=alpha_t / scale,
        gamma_mmda=gamma_t / scale, proj_core=st.G[st.s:st.n, :st.s].copy(), sor_steps=int(ops.total_steps))
