"""The core-set MEB engine: Badoiu-Clarkson with the CVM refinements (001_1b97d3ee98da12aa.txt, Sec. 4).

    1. Initialise S_0, c_0, R_0                                         (Sec. 4.1.1)
    2. Terminate if no phi~(z) lies outside B(c_t, (1+eps) R_t)          (Sec. 4.1.2, eq. (12))
    3. Add the point furthest from c_t to the core set                    (Sec. 4.1.3, eq. (13))
    4. c_{t+1}, R_{t+1} = MEB(S_{t+1}) by a warm-started QP               (Sec. 4.1.4)
    5. t += 1, go to 2.

Distances use eq. (12) (plus Delta, 000_88c8f8810bf6206d.txt eq. (13)) and touch only kernel
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

``fit_meb`` has the same signature and the same result type in ``fastimpl._engine``; the same
inputs and ``random_state`` give the same core set (the random draws are made identically).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .problem import MEBProblem
from .progress import Progress
from .simplex_qp import TIE, active_set_simplex, smo_simplex

#: rows per block in full scans (bounds temporary memory independently of n)
SCAN_BLOCK = 4096
#: SMO steps allowed per core-set QP, as a multiple of the core-set size
SMO_STEPS_PER_VECTOR = 200


def smo_step_bound(core_size: int) -> int:
    """The bound on SMO steps for one core-set QP (both engines use it)."""
    return SMO_STEPS_PER_VECTOR * core_size + 1000


def warn_if_smo_capped(last_capped: bool, n_capped: int, n_solves: int):
    """Warn when the *final* core-set QP stopped at its step bound rather than its tolerance.

    Intermediate QPs that hit the bound are harmless: the next one warm-starts from them and
    continues the work (their count is in ``history['smo_capped']``).  The final one defines the
    returned model, so its inexactness is worth a ConvergenceWarning; the certified ratio still
    reports exactly what was achieved.
    """
    if last_capped:
        warnings.warn(f"the final core-set QP stopped at the SMO step bound before reaching tol "
                      f"({n_capped} of {n_solves} QPs did); the certified ratio reports the result",
                      ConvergenceWarning, stacklevel=3)


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
    converged : whether the (1+eps) test stopped the loop (False: max_iter did).
    history : per-iteration lists 'core_set_size', 'radius', 'elapsed', 'smo_steps', 'smo_capped'.
    kernel_evaluations : number of base-kernel evaluations made by the fit.
    margin_scale : S, the variable part of the dual objective the ``stop`` rules measure against
        (:func:`margin_scale`): rho for the L2-SVMs, p/C^2 for CVR.
    kkt_gap : (max_{alpha_t > 0} g_t - min_z g_z) / (2 S) over all n points (nan if not certified):
        LIBSVM's maximal-violating-pair gap in the units of its own tolerance (see :data:`STOPS`).
    stop : the rule that ended the loop.
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


def make_rng(random_state) -> np.random.Generator:
    """One numpy Generator from the sklearn-style ``random_state`` (None, int, RandomState, Generator)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return np.random.default_rng(random_state)
    raise TypeError(f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}")


SOLVERS = ("auto", "active_set", "smo")
#: solver='auto' uses the active-set method while at most this many core vectors carry weight,
#: then SMO for the rest of the fit.  An exact Newton step costs O(|F|^2) per new core vector, SMO
#: O(k |S|) for k steps; on the checkerboard k is ~1e4 at C=1e4 (active set 10-100x faster) but
#: ~1e3 at C=100, where core sets reach 4,000 vectors and SMO wins beyond ~1,000 (measured).
AUTO_MAX_FREE = 1000
#: Under the 'margin' and 'gap' rules the inner tolerance is eps times the margin term, orders of
#: magnitude tighter, and SMO's step count explodes on ill-conditioned Q (checkerboard, gamma=1/beta,
#: C=1e4, m=1e4: > 240 s with SMO against 19.5 s for the active set on a 2,500-vector core set).
#: There the active set is kept up to this many free vectors (its factor takes 8 |F|^2 bytes:
#: 512 MB at 8,000).
AUTO_MAX_FREE_TIGHT = 8000


def auto_max_free(stop: str) -> int:
    """solver='auto': the support size beyond which the fit switches to SMO, for this stop rule."""
    return AUTO_MAX_FREE if stop == "radius" else AUTO_MAX_FREE_TIGHT


#: The stopping rules of the core-set loop (step 2 of 001 Sec. 4).  With g = 2 Q alpha - l (the
#: gradient of the dual), d_z^2 = alpha'Q alpha - g_z is the squared distance of z to the center,
#: and d_z^2 - R^2 = alpha'g - g_z is the Frank-Wolfe duality gap of coordinate z:
#:
#: * 'radius' (the paper's): max_z d_z^2 <= (1+eps)^2 R^2.  R^2 = c0 - (margin term) is dominated by
#:   the constant c0 = k~(z,z) + Delta (kappa + 1 + 1/C for the L2-SVM, eta for CVR) when the margin
#:   term is small, so eps R^2 can exceed the whole margin and the test then accepts points that
#:   violate it (Loosli & Canu, JMLR 2007).
#: * 'margin': max_z d_z^2 - R^2 <= ((1+eps)^2 - 1) S, with S = |R^2 - c0| the margin term (rho for the
#:   L2-SVMs, the dual objective p/C^2 for CVR, alpha'K alpha for the MEB): the same geometric test
#:   with eps measured against what the model is made of.  It bounds the dual suboptimality:
#:   (f(alpha) - f*) / S <= (1+eps)^2 - 1.
#: * 'gap': LIBSVM's rule, max_{alpha_t > 0} g_t - min_z g_z <= 2 eps S.  For the L2-SVM rescaled to
#:   LIBSVM's form (rho = 1) this is exactly its maximal-violating-pair test with tolerance eps, so
#:   eps = 1e-3 matches sklearn's SVC(tol=1e-3) (the "matched KKT tolerance" of the Loosli-Canu study).
#:
#: When the problem has no constant part (an MEB with a non-constant kernel diagonal), S = R^2 and
#: 'margin' is 'radius'.  The default of the estimators is chosen by measurement (README, Design notes).
STOPS = ("radius", "margin", "gap")


def margin_scale(problem: MEBProblem, R2: float) -> float:
    """S = |R^2 - c0|, the part of the dual objective that is not the constant linear term c0."""
    c0 = problem.constant_term
    S = abs(R2 - c0) if c0 is not None else abs(R2)
    return max(S, np.finfo(float).tiny)


def stop_accepts(stop: str, eps: float, R2: float, d2: float, S: float, margin: float, gmax_sv: float) -> bool:
    """Step 2 of the loop: does the furthest candidate (at squared distance d2) pass ``stop``?

    ``margin`` is alpha'Q alpha, ``gmax_sv`` the largest gradient entry over the support; the
    smallest gradient over the candidates is margin - d2.  Shared by both engines.
    """
    if stop == "radius":
        return d2 <= (1.0 + eps) ** 2 * R2
    if stop == "margin":
        return d2 - R2 <= ((1.0 + eps) ** 2 - 1.0) * S
    return gmax_sv - (margin - d2) <= 2.0 * eps * S


def inner_tolerance(stop: str, eps: float, R2: float, S: float) -> float:
    """Default stopping gap of the core-set QP: eps R^2 for 'radius' (001 Sec. 4.1.4), eps S otherwise
    (an inner QP looser than the outer test would make every outer check fail)."""
    return eps * max(R2 if stop == "radius" else S, np.finfo(float).tiny)


def warn_if_radius_too_coarse(stop: str, eps: float, R2: float, S: float):
    """Under 'radius', warn when the allowed slack ((1+eps)^2 - 1) R^2 is not small against the margin
    term S: the test cannot then tell margin violators from support vectors (Loosli & Canu)."""
    slack = ((1.0 + eps) ** 2 - 1.0) * R2
    if stop == "radius" and slack > 0.1 * S:
        warnings.warn(f"stop='radius' with eps={eps:g}: the slack ((1+eps)^2-1) R^2 = {slack:.3g} is not small "
                      f"against the margin term {S:.3g}, so points violating the margin may pass the test and "
                      "the model can be inaccurate; use stop='margin' or a smaller eps",
                      ConvergenceWarning, stacklevel=3)


def kkt_gap(margin: float, r_cert2: float, S: float, gmax_sv: float) -> float:
    """The certified maximal-violation gap (max_{alpha>0} g - min_z g) / (2 S), from a full scan."""
    return (gmax_sv - (margin - r_cert2)) / (2.0 * S) if np.isfinite(r_cert2) else float("nan")


def validate_engine_params(eps, sample_size, max_iter, tol, n, n_confirm=0, solver="smo", stop="radius"):
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise TypeError(f"eps must be a number, got {type(eps).__name__}")
    if not np.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be positive and finite, got {eps}")
    if sample_size is not None:
        if isinstance(sample_size, bool) or not isinstance(sample_size, (int, np.integer)) or sample_size < 1:
            raise ValueError(f"sample_size must be a positive integer or None, got {sample_size!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if isinstance(n_confirm, bool) or not isinstance(n_confirm, (int, np.integer)) or n_confirm < 0:
        raise ValueError(f"n_confirm must be a non-negative integer, got {n_confirm!r}")
    if tol is not None and (not np.isfinite(tol) or tol <= 0):
        raise ValueError(f"tol must be positive or None, got {tol!r}")
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {STOPS}, got {stop!r}")
    if n < 2:
        raise ValueError(f"the MEB engine needs at least 2 points, got {n}")


class _CoreSetQP:
    """The growing core-set QP: Q = K~[S, S], l, alpha and g = 2 Q alpha - l (readable, dense)."""

    def __init__(self, problem: MEBProblem):
        self.problem = problem
        # the engine works with l - c0 (MEBProblem.shifted_linear_term) and adds c0 back to R^2
        self.c0 = problem.constant_term or 0.0
        self.S: list[int] = []
        self.Q = np.zeros((0, 0))
        self.l = np.zeros(0)
        self.alpha = np.zeros(0)
        self.grad = np.zeros(0)

    def add(self, z: int):
        """Append z with alpha_z = 0; its gradient entry is 2 (K~ alpha)_z - l_z."""
        row = self.problem.block([z], self.S + [z])[0]
        k = len(self.S)
        Q = np.zeros((k + 1, k + 1))
        Q[:k, :k] = self.Q
        Q[k, :] = row
        Q[:, k] = row
        self.Q = Q
        self.S.append(z)
        self.l = np.append(self.l, self.problem.shifted_linear_term([z]))
        self.alpha = np.append(self.alpha, 0.0)
        self.grad = np.append(self.grad, 2.0 * float(row[:k] @ self.alpha[:k]) - self.l[-1])
        return k + 1  # kernel evaluations made

    @property
    def margin(self) -> float:
        """alpha' Q alpha = alpha'(g + l) / 2."""
        return float(self.alpha @ (self.grad + self.l)) / 2.0

    @property
    def radius2(self) -> float:
        """R^2 = l'alpha - alpha'Q alpha (001 eq. (3)), = c0 + (l - c0)'alpha - alpha'Q alpha."""
        return self.c0 + (float(self.alpha @ self.l) - self.margin)


def _K_alpha(problem: MEBProblem, S, alpha, idx):
    """(K~ alpha)_l for l in idx, using only the core vectors with alpha > 0."""
    sv = alpha > 0
    return problem.block(idx, np.asarray(S)[sv]) @ alpha[sv], len(idx) * int(sv.sum())


def _dist2(problem, qp, idx):
    """Squared distances ||c_t - phi~(z_l)||^2 + Delta_l - c0 for l in idx (001 eq. (12), 000 eq. (13)),
    shifted by the constant c0 like the engine's linear term."""
    Ka, n_eval = _K_alpha(problem, qp.S, qp.alpha, idx)
    return qp.margin - 2.0 * Ka + problem.shifted_linear_term(idx), n_eval


def _furthest(problem, qp, idx):
    """Over a candidate set: (index of the furthest point, its dist^2, kernel evaluations).

    Full scans run in blocks so temporary memory does not grow with n.  Candidates within a
    relative TIE of the maximum count as tied and the first of them wins (exact ties in
    feature space, e.g. duplicate points, must not be broken by round-off differently in the
    ref and fast engines).  The first pass keeps only each block's maximum; the block holding
    the first tied candidate is then recomputed.
    """
    n_eval = 0
    block_max = []
    for start in range(0, len(idx), SCAN_BLOCK):
        d2, ne = _dist2(problem, qp, idx[start:start + SCAN_BLOCK])
        n_eval += ne
        block_max.append(d2.max())
    best_d2 = max(block_max)
    threshold = best_d2 - TIE * (abs(best_d2) + abs(qp.c0))  # relative to the unshifted distance
    b = next(k for k, v in enumerate(block_max) if v >= threshold)
    block = idx[b * SCAN_BLOCK:(b + 1) * SCAN_BLOCK]
    d2, _ = _dist2(problem, qp, block) if len(block_max) > 1 else (d2, 0)
    k = int(np.flatnonzero(d2 >= threshold)[0])
    return int(block[k]), float(best_d2) + qp.c0, n_eval


def initial_pair(problem: MEBProblem, rng, sample_size, furthest_from):
    """001 Sec. 4.1.1: z arbitrary, z_a furthest from z, z_b furthest from z_a.

    For classification z_b is restricted to the class opposite to z_a: by eq. (10) the
    feature-space distance between opposite-class points is 2(kappa + 1 + 1/C) + 2 k(x_a, x_b),
    so z_b is the opposite-class point closest to z_a in input space (the SimpleSVM heuristic).
    With sampling, both searches run over random samples of ``sample_size`` points, which makes
    the initialisation O(1) as in Sec. 4.3.

    ``furthest_from(z, idx)`` returns the candidate of ``idx`` furthest from z in feature space;
    each engine supplies its own, and both share these draws, in this order.
    """
    n = problem.n

    def candidates():
        return np.arange(n) if sample_size is None else rng.integers(0, n, size=sample_size)

    z = int(rng.integers(0, n))
    z_a = furthest_from(z, candidates())
    idx = candidates()
    if problem.labels is not None:
        opposite = idx[problem.labels[idx] != problem.labels[z_a]]
        if len(opposite) == 0:  # the sample missed the other class: fall back to a full scan of it
            opposite = np.flatnonzero(problem.labels != problem.labels[z_a])
        idx = opposite
    idx = idx[idx != z_a]
    if len(idx) == 0:
        idx = np.array([(z_a + 1) % n])
    return z_a, furthest_from(z_a, idx)


def fit_meb(problem: MEBProblem, eps: float, *, sample_size=59, max_iter=10_000, tol=None,
            random_state=None, cache_size=200 * 2**20, certify=True, verbose=False,
            n_confirm=30, solver="auto", stop="radius") -> MEBResult:
    """Approximate the MEB of the augmented points of ``problem`` to within (1+eps) (001 Sec. 4).

    Parameters
    ----------
    problem : MEBProblem
    eps : float > 0 -- the (1+eps) tolerance of step 2.
    sample_size : int or None -- random candidates per iteration (001 eq. near (12): 59 gives a
        95% chance of hitting the top 5%); None scans all points, which the (1+eps)^2 bound needs.
    max_iter : int -- bound on outer iterations (core-set updates); a ConvergenceWarning says when it stops the fit.
    tol : float or None -- SMO stopping gap; None means eps * R_t^2 (see ``simplex_qp``).  If a core
        vector is ever found outside the (1+eps) ball (its QP stopped early), it is divided by 10.
    random_state : None, int, RandomState or Generator.
    cache_size : int -- bytes for the core-set kernel cache (the reference keeps Q dense; kept for API parity).
    certify : bool -- run the final full scan that gives ``r_cert2`` and ``certified_ratio``.
    verbose : bool -- show a progress bar (core-set size and R) while fitting.
    n_confirm : int -- (beyond the paper) with sampling, stop only after 1 + n_confirm consecutive
        samples find no point outside the (1+eps) ball.  One clean sample of 59 only says that,
        with probability 0.95, fewer than 5% of the points lie outside; 31 clean samples (1829
        points) bound the violating fraction near 0.16%.  On the checkerboard (gamma=1, C=1e4,
        eps=1e-6) the paper's rule (n_confirm=0) left 1-5% test error, n_confirm=30 left
        0.25-0.8% at m = 1e4..1e6 (4 seeds each) for a few percent more fit time.
        Ignored by full scans, which are exact.
    solver : 'auto', 'active_set' or 'smo' -- the core-set QP solver: the exact active-set Newton
        method (``simplex_qp.active_set_simplex``; falls back to SMO when Q_FF is singular), the
        paper's warm-started SMO (``simplex_qp.smo_simplex``), or 'auto' (default): active set while
        at most auto_max_free(stop) core vectors carry weight, SMO after that (see AUTO_MAX_FREE).
    stop : 'radius', 'margin' or 'gap' -- the test of step 2 (see :data:`STOPS`); 'radius' is the paper's.
    """
    n = problem.n
    validate_engine_params(eps, sample_size, max_iter, tol, n, n_confirm, solver, stop)
    rng = make_rng(random_state)
    if sample_size is not None and sample_size >= n:
        sample_size = None  # sampling more points than exist is a full scan
    t0 = time.perf_counter()
    history = {"core_set_size": [], "radius": [], "elapsed": [], "smo_steps": [], "smo_capped": []}

    qp = _CoreSetQP(problem)
    n_eval = 0

    def furthest_from(z, idx):
        """||phi~(z) - phi~(z_l)||^2 + Delta_l, maximised over the candidates idx."""
        nonlocal n_eval
        n_eval += len(idx)
        d2 = problem.diag([z])[0] - 2.0 * problem.block(idx, [z])[:, 0] + problem.linear_term(idx)
        return int(idx[int(np.argmax(d2))])

    z_a, z_b = initial_pair(problem, rng, sample_size, furthest_from)
    # MEB of two points: all weight on z_a first, then one SMO solve balances the pair.
    n_eval += qp.add(z_a)
    qp.alpha[0] = 1.0
    qp.grad[0] = 2.0 * qp.Q[0, 0] - qp.l[0]
    n_eval += qp.add(z_b)

    smo_stats = [0, 0, False]  # [solves, solves stopped by the step bound, was the last one stopped]

    use_smo = [solver == "smo"]  # solver='auto' switches to SMO for good once the support is large
    free = [None]  # the active-set solver's free set, kept across core-set QPs (insertion order)
    tighten = [1.0]  # shrinks the inner tolerance when a core vector is found outside the ball

    def solve():
        R2 = qp.radius2
        inner_tol = tighten[0] * (tol if tol is not None else inner_tolerance(stop, eps, R2, margin_scale(problem, R2)))
        bound = smo_step_bound(len(qp.S))
        out = None
        if solver == "auto" and not use_smo[0] and np.count_nonzero(qp.alpha) > auto_max_free(stop):
            use_smo[0] = True  # one-way: switching back would need a new O(|F|^3) factorisation
        if solver == "active_set" or (solver == "auto" and not use_smo[0]):
            if free[0] is None:
                free[0] = [int(t) for t in np.flatnonzero(qp.alpha > 0)]
            out = active_set_simplex(qp.Q, qp.l, qp.alpha, qp.grad, inner_tol, bound, free[0], shift=qp.c0)
        if out is None:
            out = smo_simplex(qp.Q, qp.l, qp.alpha, qp.grad, inner_tol, bound, shift=qp.c0)
            free[0] = None  # SMO moved alpha: the free set restarts from the support
        steps, _ = out
        smo_stats[0] += 1
        smo_stats[1] += steps >= bound
        smo_stats[2] = steps >= bound
        return steps

    steps = solve()
    all_idx = np.arange(n)
    converged = False
    n_iter = 0
    progress = Progress(verbose, "CVM (ref)")
    last_scan = None  # (r^2 of a full scan at the final center) reused as the certificate
    clean = 0  # consecutive samples with no point outside the (1+eps) ball
    while True:
        R2 = qp.radius2
        if clean == 0:  # a re-drawn sample at the same center is not a new iteration
            history["core_set_size"].append(len(qp.S))
            history["radius"].append(float(np.sqrt(max(R2, 0.0))))
            history["elapsed"].append(time.perf_counter() - t0)
            history["smo_steps"].append(steps)
            history["smo_capped"].append(bool(smo_stats[2]))
            progress.update(n_iter, len(qp.S), R2)
        idx = all_idx if sample_size is None else rng.integers(0, n, size=sample_size)
        z, d2, ne = _furthest(problem, qp, idx)
        n_eval += ne
        if stop_accepts(stop, eps, R2, d2, margin_scale(problem, R2), qp.margin, _gmax_support(qp)):
            clean += 1
            if sample_size is None or clean > n_confirm:
                converged = True
                if sample_size is None:
                    last_scan = d2
                break
            continue  # draw another sample at the same center (no QP to solve)
        clean = 0
        if n_iter >= max_iter:
            warnings.warn(f"the MEB engine stopped at max_iter={max_iter} before the stop={stop!r} test held; "
                          "the certified ratio reports what was reached", ConvergenceWarning, stacklevel=3)
            break
        if z in qp.S:
            # A core vector outside the (1+eps)-ball: the last QP stopped early (at its step bound,
            # or at a user tol above eps R^2).  Re-solve it 10x tighter instead of adding a duplicate;
            # the re-solve counts as an iteration, so max_iter still bounds the loop.
            tighten[0] *= 0.1
        else:
            n_eval += qp.add(z)
        steps = solve()
        n_iter += 1

    progress.close(n_iter, len(qp.S), qp.radius2)
    warn_if_smo_capped(smo_stats[2], smo_stats[1], smo_stats[0])
    R2 = qp.radius2
    S = margin_scale(problem, R2)
    warn_if_radius_too_coarse(stop, eps, R2, S)
    if certify:
        if last_scan is None:
            _, last_scan, ne = _furthest(problem, qp, all_idx)
            n_eval += ne
        r_cert2 = float(last_scan)
    else:
        r_cert2 = float("nan")
    return MEBResult(core_set=np.asarray(qp.S, dtype=np.intp), alpha=qp.alpha.copy(), radius2=R2,
                     margin=qp.margin, r_cert2=r_cert2,
                     certified_ratio=r_cert2 / R2 if R2 > 0 else float("nan"),
                     n_iter=n_iter, converged=converged, history=history, kernel_evaluations=n_eval,
                     margin_scale=S, kkt_gap=kkt_gap(qp.margin, r_cert2, S, _gmax_support(qp)), stop=stop)


def _gmax_support(qp) -> float:
    """max g_t over the core vectors with alpha_t > 0 (unshifted: the engine's gradient is g + c0)."""
    return float(qp.grad[qp.alpha > 0].max()) - qp.c0
