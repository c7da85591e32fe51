"""The core-set loop of the CVM papers, written once for every formulation and both implementations.

[001], Sec. 4 (and [000] Sec. 3, [004] Alg. 1):

    1. Initialise S_0, c_0, R_0                                          (Sec. 4.1.1)
    2. Terminate if no phi~(z) lies outside the stop rule's ball          (Sec. 4.1.2, eq. (12))
    3. Add the furthest point to the core set                             (Sec. 4.1.3, eq. (13))
    4. c_{t+1}, R_{t+1} = MEB(S_{t+1}) by a warm-started QP               (Sec. 4.1.4)
    5. t += 1, go to 2.

The loop knows no kernel and no QP: it talks to a *numerics* object, ``ops``, that owns the core set,
its weights and the inner solver.  ``refimpl.meb.MEBOps`` (NumPy), ``fastimpl._engine.FastMEBOps``
(Cython), ``refimpl.constrained_meb.ConstrainedOps`` (NumPy, SOR) and ``fastimpl._mmda.FastConstrainedOps``
(C scans) implement it.  All random draws and all decisions are made here, so that every
implementation of the numerics selects the same core vectors for the same ``random_state``.

The numerics interface (squared distances are the unshifted ||c - phi~(z)||^2 + Delta_z of eq. (12)):

    ops.n                         number of (augmented) points z
    ops.init_problem              the MEBProblem whose labels/kernel the initialisation uses (and .mirror)
    ops.furthest_from(z, idx)     the candidate of idx furthest from phi~(z) (initialisation)
    ops.start(z_a, z_b)           S_0 = {z_a, z_b}, all weight on z_a
    ops.add(zs)                   append the points zs with zero weight
    ops.add_warm(zs, alpha)       (a seeded start) add(zs), then the weights alpha over the whole core set
                                  and their gradient (``initial_weights``)
    ops.solve(tol, method, bound) warm-started core-set QP until its KKT gap (in squared-distance units)
                                  is <= tol or ``bound`` steps were made; returns the steps made
    ops.step_bound()              the bound on inner steps for one solve at the current core-set size
    ops.ball()                    a :class:`Ball` (R^2, margin, S, smallest and largest core distance)
    ops.scan(idx, k, d2_over)     a :class:`Scan` of the candidates idx (None: all n points)
    ops.in_core(z), ops.n_support(), ops.n_core(), ops.n_eval

Two update strategies share this loop:

* ``batch=False`` -- the papers': one core vector per iteration (the furthest candidate), and the
  core-set QP solved to the fixed inner tolerance of :func:`inner_tolerance` after each.
* ``batch=True`` -- beyond the papers (issue "Large core sets in seconds"): every violator of the
  sample is added at once (up to ``MAX_ADD``), and the inner QP is solved only to a fraction THETA
  of the outer gap it was called for, never tighter than needed; the stop test then also checks the
  core set itself (its own furthest vector), and an inexact solve is finished to the final tolerance
  before the loop may stop.  Nothing about the guarantee changes: R_tau^2 is a lower bound on r*^2
  for *any* feasible alpha (weak duality), and the rule is tested on the same points.
"""
from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .progress import Progress

#: The stopping rules of step 2.  With g = 2 Q alpha - l the gradient of the dual, the squared distance
#: of z to the center is d_z^2 = alpha'Q alpha - g_z, and d_z^2 - R^2 = alpha'g - g_z is the Frank-Wolfe
#: duality gap of coordinate z:
#:
#: * 'radius' (the paper's): d_z^2 <= (1+eps)^2 R^2.  R^2 = c0 - (margin term) is dominated by the
#:   constant c0 = k~(z,z) + Delta (kappa + 1 + 1/C for the L2-SVM, eta for CVR) when the margin term is
#:   small, so eps R^2 can exceed the whole margin and the test then accepts points that violate it
#:   (Loosli & Canu, JMLR 2007).
#: * 'margin': d_z^2 - R^2 <= ((1+eps)^2 - 1) S, S = |R^2 - c0| the margin term (rho for the L2-SVMs,
#:   the dual objective p/C^2 for CVR, c'c for MMDA's constrained ball): the same test with eps measured
#:   against what the model is made of.  It bounds the dual suboptimality (f - f*)/S <= (1+eps)^2 - 1.
#: * 'gap': LIBSVM's rule, max_{alpha_t > 0} g_t - min_z g_z <= 2 eps S, i.e. d_z^2 <= min_{alpha_t>0}
#:   d_t^2 + 2 eps S.  For the L2-SVM rescaled to LIBSVM's form (rho = 1) this is its maximal-violating-
#:   pair test with tolerance eps.
#: * 'hybrid': the paper's radius test, but never looser than d_z^2 - R^2 <= 2 HYBRID_NU tau, tau the
#:   functional-margin scale of :class:`Ball`: d_z^2 - R^2 <= min(((1+eps)^2 - 1) R^2, 2 nu tau).  It is at
#:   least as tight as 'radius', so the (1+eps)^2 bound of 001 eqs. (14)-(15) holds unchanged.  For the
#:   two-class L2-SVM tau = rho and d_z^2 - R^2 = 2 (rho - y_z f(x_z)) for a point outside the core set, so
#:   the cap with nu = 1 reads y_z f(x_z) >= 0: whatever eps and the kernel width, the loop cannot stop
#:   while a sampled training point is misclassified.  For CVR tau = epsbar / C and d_z^2 - R^2 =
#:   (2/C)(|y - f(x)| - epsbar) above the tube, so the cap reads |y - f(x)| <= (1 + nu) epsbar.
#:
#: When the problem has no constant part (an MEB with a non-constant kernel diagonal), S = R^2 and
#: 'margin' is 'radius'.  The estimators' default is chosen by measurement (README, Design notes).
STOPS = ("radius", "margin", "gap", "hybrid")
#: nu of the 'hybrid' rule: a point outside the core set passes only if it violates the margin rho by at
#: most nu rho (nu = 1: the two-class L2-SVM classifies it correctly).  Chosen by measurement (README,
#: "Stopping rule"): bounded core sets need nu >= 1 on the checkerboard at the paper's width (nu = 0.99:
#: 2,800 core vectors and 30 s at m = 1e6; nu = 1: 1,200 and 3 s), and nu > 1 can stop at a poor model on
#: overlapping classes (nu = 1.01: 74% test accuracy on two overlapping Gaussians, 92.4% at nu = 1).
HYBRID_NU = 1.0

#: batch=True: at most this many violators of one scan join the core set at once
MAX_ADD = 64
#: batch=True: the inner QP stops at THETA times the outer gap (d_max^2 - R^2) it was called for
THETA = 0.5

# --- wide samples ----------------------------------------------------------------------------------
#: batch=True, wide=True: the sample of an iteration grows (doubling, up to WIDE_MAX times sample_size,
#: and below n / 2) while it finds fewer than MAX_ADD / 2 violators, and shrinks (halving) once it finds
#: MAX_ADD.  Each iteration then adds up to MAX_ADD core vectors however rare the violators are.  Chosen
#: where a scan costs little against an iteration's fixed costs (the new rows of Q, the solve): at
#: large d, where the fast engine scans through its kernel block (fastimpl/_kblock.pxi), |S| per
#: candidate.  On Fashion-MNIST T-shirt/shirt (10,000 x 784) the papers' 59 found 3.7 violators per
#: iteration, 754 iterations for 2,782 core vectors.
WIDE_MAX = 64
#: wide=True: at most this many violators join at once (MAX_ADD otherwise)
WIDE_MAX_ADD = 128


def next_growth(growth: int, n_new: int, max_add: int = MAX_ADD) -> int:
    """The sample's next multiple of sample_size after an iteration that added n_new core vectors."""
    if n_new < max_add // 2:
        return min(2 * growth, WIDE_MAX)
    if n_new >= max_add:
        return max(growth // 2, 1)
    return growth

#: dense=True (CVR's mirrored problems, with wide): once the sample would cover this fraction of the rows a
#: full scan computes (a mirrored input's kernel row serves both of its halves, so m of the 2m points), the
#: iteration scans every point instead.  A noisy regression set ends with 40-80% of its points in the core
#: set; its last violators are a few per thousand, and the samples of WIDE_MAX x sample_size that looked for
#: them cost half a full scan each while seeing a quarter of the points (compactiv, 6,553 rows: 20 such
#: iterations, two fifths of the fit).  A full scan finds them all at once, and a clean one ends the loop
#: with an exact test, so the fit also needs no confirmations and no certificate scan of its own.
DENSE_FULL_FRAC = 0.0625
#: ... and an iteration adds up to this fraction of the core set (at least max_add) of its furthest violators:
#: the core set grows geometrically, not by max_add, where most points violate.  Chosen on compactiv, puma32h,
#: CASP, make_regression and the smooth 3-D set (10,000-row caps, fold 0; FRAC 0.0625-0.125 and ADD
#: 0.125-0.25 within 15% of each other; ADD 0.5 or 1 adds early violators that pruning removes again,
#: compactiv 1.4-2.1x slower; scanning every iteration in full, FRAC 0, smooth 3-D 2.4x slower).
DENSE_ADD = 0.25
# --- end wide samples ------------------------------------------------------------------------------


def caller_stacklevel(level: int) -> int:
    """``stacklevel`` for a warning issued ``level`` frames below the code to blame, past the wrappers on the
    way: a module whose globals set ``_WARNINGS_PASS_THROUGH = True`` (corevector.engine_policy's ``with_policy``)
    is not the caller a warning should name."""
    frame = sys._getframe(level)
    while frame is not None and frame.f_globals.get("_WARNINGS_PASS_THROUGH"):
        frame, level = frame.f_back, level + 1
    return level


@dataclass
class Ball:
    """The current ball: R^2 (the dual objective, a lower bound on r*^2), the margin term
    ``margin`` = alpha'Q alpha (c'c for MMDA), its scale S = |R^2 - c0|, the functional-margin scale
    tau = |R^2 - c0 - margin| / 2 (rho for the L2-SVMs, epsbar / C for CVR: half the dual objective's
    linear part minus the margin term), and the smallest squared distance over the support (alpha > 0)
    and the largest over the whole core set."""

    R2: float
    margin: float
    S: float
    tau: float
    d2_sv_min: float
    d2_core_max: float
    #: the functional margin itself is negative (R^2 - c0 - margin < 0; CVR: epsbar < 0), tau its magnitude
    negative: bool = False

    @classmethod
    def make(cls, R2, margin, c0, d2_sv_min, d2_core_max):
        """The ball from R^2, the margin term and the constant c0 of the linear term (None: none)."""
        two_tau = R2 - (c0 or 0.0) - margin
        return cls(R2, margin, margin_scale(R2, c0), max(abs(two_tau) / 2.0, np.finfo(float).tiny), d2_sv_min,
                   d2_core_max, bool(two_tau < 0))


@dataclass
class Scan:
    """A scan of candidates: the furthest (first within a relative TIE of the maximum) and its squared
    distance; ``top``/``top_d2``: for a full scan, up to k points with d^2 > d2_over, largest first (ties to
    the lower index); ``sample_d2``: every candidate's d^2 when the scan covered an explicit sample."""

    best: int
    d2: float
    top: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    top_d2: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sample_d2: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class LoopOutcome:
    """What the loop hands back to the formulation-specific wrapper (fit_meb, fit_constrained_meb)."""

    ball: Ball
    r_cert2: float
    n_iter: int
    converged: bool
    history: dict
    n_solves: int
    n_capped: int
    last_capped: bool
    #: the settle rule (:class:`Settle`) ended the loop: its decisions on the probe had stopped changing
    settled: bool = False
    #: the settle rule's checks: (core-set size, probe points that changed side; -1 at the first)
    settle_checks: list = field(default_factory=list)


def make_rng(random_state) -> np.random.Generator:
    """One numpy Generator from the sklearn-style ``random_state`` (None, int, RandomState, Generator)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return np.random.default_rng(random_state)
    raise TypeError(f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}")


def margin_scale(R2: float, c0) -> float:
    """S = |R^2 - c0|, the part of the dual objective that is not the constant linear term c0
    (S = R^2 when the linear term has no constant part, c0 None)."""
    S = abs(R2 - c0) if c0 is not None else abs(R2)
    return max(S, np.finfo(float).tiny)


def d2_threshold(stop: str, eps: float, ball: Ball, nu: float = HYBRID_NU) -> float:
    """The largest squared distance a point may have and pass ``stop`` (see :data:`STOPS`; ``nu`` is the
    'hybrid' rule's cap, :data:`HYBRID_NU` unless the formulation has its own, e.g. CVR's tube)."""
    slack = (1.0 + eps) ** 2 - 1.0
    if stop == "radius":
        return ball.R2 + slack * ball.R2
    if stop == "margin":
        return ball.R2 + slack * ball.S
    if stop == "gap":
        return ball.d2_sv_min + 2.0 * eps * ball.S
    # a negative margin (CVR's epsbar < 0: a core set that does not fit its targets yet) caps nu at 1: the cap
    # 2 nu tau of a negative tube would otherwise let |y - f| <= (nu - 1) |epsbar| pass, every point once nu > 1
    # (CCPP, hybrid_cap=2: 25 support vectors, epsbar -89, test R^2 -0.39); at nu <= 1 nothing changes
    if ball.negative:
        nu = min(nu, 1.0)
    return ball.R2 + min(slack * ball.R2, 2.0 * nu * ball.tau)


def stop_accepts(stop: str, eps: float, ball: Ball, d2: float, nu: float = HYBRID_NU) -> bool:
    """Step 2: does a point at squared distance d2 pass ``stop``?"""
    return d2 <= d2_threshold(stop, eps, ball, nu)


#: The core-set QP is never solved more loosely than this fraction of the margin term S.  The outer test
#: may accept points up to a large fraction of S (eps = 0.7 under 'margin' accepts every correctly
#: classified point); if the inner QP stopped as loosely, the model on the core set itself would be
#: poor (two overlapping Gaussians, 'margin' at eps = 0.74: 73% test accuracy instead of 92.5%).
INNER_EPS_MAX = 1e-2


def inner_tolerance(stop: str, eps: float, ball: Ball) -> float:
    """Final stopping gap of the core-set QP: eps R^2 for 'radius' (001 Sec. 4.1.4), min(eps, INNER_EPS_MAX) S
    for the margin-relative rules (an inner QP looser than the outer test would make every outer check
    fail), the smaller of the two for 'hybrid'."""
    tiny = np.finfo(float).tiny
    rel = min(eps, INNER_EPS_MAX) * max(ball.S, tiny)
    if stop == "radius":
        return eps * max(ball.R2, tiny)
    if stop == "hybrid":
        return max(min(eps * ball.R2, rel), tiny)
    return rel


def kkt_gap(ball: Ball, r_cert2: float) -> float:
    """The certified maximal-violation gap (max_{alpha>0} g - min_z g) / (2 S) from a full scan: in
    distances, (r_cert^2 - min_{alpha>0} d^2) / (2 S) -- LIBSVM's gap in the units of its tolerance."""
    return (r_cert2 - ball.d2_sv_min) / (2.0 * ball.S) if np.isfinite(r_cert2) else float("nan")


def warn_if_radius_too_coarse(stop: str, eps: float, ball: Ball):
    """Under 'radius', warn when the allowed slack ((1+eps)^2 - 1) R^2 is not small against the margin
    term S: the test cannot then tell margin violators from support vectors (Loosli & Canu)."""
    slack = ((1.0 + eps) ** 2 - 1.0) * ball.R2
    if stop == "radius" and slack > 0.1 * ball.S:
        warnings.warn(f"stop='radius' with eps={eps:g}: the slack ((1+eps)^2-1) R^2 = {slack:.3g} is not small "
                      f"against the margin term {ball.S:.3g}, so points violating the margin may pass the test and "
                      "the model can be inaccurate; use stop='margin' or 'hybrid', or a smaller eps",
                      ConvergenceWarning, stacklevel=3)


def initial_pair(problem, rng, sample_size, furthest_from):
    """001 Sec. 4.1.1: z arbitrary, z_a furthest from z, z_b furthest from z_a.

    For classification z_b is restricted to the class opposite to z_a: by eq. (10) the
    feature-space distance between opposite-class points is 2(kappa + 1 + 1/C) + 2 k(x_a, x_b),
    so z_b is the opposite-class point closest to z_a in input space (the SimpleSVM heuristic).
    With sampling, both searches run over random samples of ``sample_size`` points, which makes
    the initialisation O(1) as in Sec. 4.3.
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


def _sample_violators(scan: Scan, idx, threshold, ops, k):
    """batch=True: the candidates to add -- the violators of the scan that are not core vectors yet,
    without duplicates, in the order drawn (a full scan: index order), at most k, the furthest k if
    there are more (stable: ties to the earlier candidate)."""
    if idx is None:  # a full scan returns its top-k list
        return sorted(int(z) for z in scan.top if not ops.in_core(int(z)))
    d2 = np.asarray(scan.sample_d2)
    order = np.flatnonzero(d2 > threshold)
    if len(order) > k:  # the furthest k (a stable sort: ties to the earlier candidate), in the order drawn
        order = np.sort(order[np.argsort(-d2[order], kind="stable")[:k]])
    seen, out = set(), []
    for p in order.tolist():
        z = int(idx[p])
        if z not in seen and not ops.in_core(z):
            seen.add(z)
            out.append(z)
    return out


class _CoreSetLoop:
    """One fit: the state steps 1-5 share (random draws, inner-solve bookkeeping, history)."""

    def __init__(self, ops, eps, stop, tol, batch, method_for, random_state, wide=False, prune=False, dense=False):
        self.ops, self.eps, self.stop, self.tol, self.batch = ops, eps, stop, tol, batch
        self.wide, self.growth = wide and batch, 1   # wide samples: sample_size x growth
        self.max_add = WIDE_MAX_ADD if self.wide else MAX_ADD
        self.dense = dense and self.wide
        # the rows a full scan computes: a mirrored input's kernel row serves both of its halves
        self.full_rows = ops.n // 2 if ops.init_problem.mirror else ops.n
        self.method_for = method_for
        self.rng = make_rng(random_state)
        if hasattr(ops, "draws"):  # numerics over rows kept elsewhere fetch the rows of the draws ahead
            self.rng = ops.draws(self.rng)  # (corevector.chunked.ops: the same draws, the same generator)
        self.t0 = time.perf_counter()
        self.history = {"core_set_size": [], "radius": [], "elapsed": [], "inner_steps": [], "inner_capped": []}
        self.solves = self.capped = self.steps = 0
        self.last_capped = False
        self.tighten = 1.0      # shrinks the inner tolerance when the core set itself fails the test
        self.finished = False   # the last solve used the final tolerance (batch=True)
        self.clean_full_d2 = None  # a clean full scan made by confirm() at the final center
        self.prune = prune and hasattr(ops, "prune")
        self.pruned = 0
        self.work = 0   # candidates scanned times the core set's size: the loop's work, whatever the numerics

    def count(self, idx):
        """Count a scan of the candidates idx (None: every point) at the current core set."""
        self.work += (self.ops.n if idx is None else len(idx)) * self.ops.n_core()

    @property
    def k_add(self):
        """The violators this iteration may add: max_add, and under dense DENSE_ADD of the core set."""
        return max(self.max_add, int(DENSE_ADD * self.ops.n_core())) if self.dense else self.max_add

    def next_sample(self, sample_size):
        """The candidates of the next scan (None: every point; wide: sample_size x growth, below n / 2; dense:
        every point once that reaches DENSE_FULL_FRAC of a full scan's rows)."""
        n = self.ops.n
        if sample_size is None:
            return None
        count = max(min(sample_size * self.growth, n // 2), sample_size)
        if self.dense and count >= DENSE_FULL_FRAC * self.full_rows:
            return None
        return self.rng.integers(0, n, size=count)

    def few_left(self, idx, scan, ball, thr, sample_size, n_confirm):
        """dense: does a full scan that replaced the samples leave no more violators than the sampled test
        lets pass?  A clean sample and its n_confirm confirmations make a violator fraction above
        1 / (sample_size (1 + n_confirm)) unlikely (probability e^-1 at that fraction), so a full scan with at
        most that many violators, all outside the core set, ends the loop as they would; its maximum, at this
        centre, is the certificate (which then reports them).  CASP (8,000 rows) spent 4 full scans on its
        last 7 core vectors."""
        if not (self.dense and idx is None and ball.d2_core_max <= thr):
            return False
        left = len(scan.top)  # (the list is cut at k_add: below it, every violator)
        return left < self.k_add and left <= self.ops.n // (sample_size * (1 + n_confirm))

    def final_tol(self, ball):
        return self.tol if self.tol is not None else inner_tolerance(self.stop, self.eps, ball)

    def solve(self, tol_now):
        bound = self.ops.step_bound()
        self.steps = self.ops.solve(self.tighten * tol_now, self.method_for(self.ops), bound)
        self.solves += 1
        self.last_capped = self.steps >= bound
        self.capped += self.last_capped

    def maybe_prune(self):
        """prune=True: drop the weightless core vectors well inside the ball (PRUNE_KAPPA, PRUNE_FRAC)."""
        ball = self.ops.ball()
        c0 = getattr(self.ops, "c0", None)  # (the chunked numerics' init_problem is a view without it)
        c0 = (self.ops.init_problem.constant_term or 0.0) if c0 is None else c0
        two_tau = ball.R2 - c0 - ball.margin   # 2 epsbar / C for CVR: the tube's margin, when positive
        if two_tau > 0:
            n_core = self.ops.n_core()
            self.pruned += self.ops.prune(ball.R2 - PRUNE_KAPPA * two_tau, max(1, int(PRUNE_FRAC * n_core)))

    def record(self, ball):
        h = self.history
        h["core_set_size"].append(self.ops.n_core())
        h["radius"].append(float(np.sqrt(max(ball.R2, 0.0))))
        h["elapsed"].append(time.perf_counter() - self.t0)
        h["inner_steps"].append(self.steps)
        h["inner_capped"].append(bool(self.last_capped))

    def confirm(self, n, sample_size, n_confirm, thr):
        """(Beyond the paper) after a clean sample, n_confirm more at the same center: one clean sample of
        59 only says that, with probability 0.95, fewer than 5% of the points fail the test; 1 + n_confirm
        clean samples bound that fraction near 3/(59 (1 + n_confirm)).  They are drawn and scanned in
        blocks of 1, 2, 4, ... samples (few calls); once the draws left would cover n points, one full scan
        replaces them (exact, and cheaper).  Returns (idx, scan) of the first failing sample (batch=True:
        of the whole failing block, whose violators all join the core set; idx None: the full scan), or
        (None, None) when all are clean; ``self.clean_full_d2`` keeps a clean full scan's maximum for the
        certificate."""
        done, block = 0, 1
        k = self.max_add if self.batch else 0
        while done < n_confirm:
            if (n_confirm - done) * sample_size >= n:
                self.count(None)
                scan = self.ops.scan(None, k, thr)
                if scan.d2 <= thr:
                    self.clean_full_d2 = scan.d2
                    return None, None
                return None, scan
            b = min(block, n_confirm - done)
            idx = self.rng.integers(0, n, size=b * sample_size)
            self.count(idx)
            scan = self.ops.scan(idx, 0, thr)
            bad = np.flatnonzero(scan.sample_d2 > thr)
            if bad.size:
                if self.batch:  # every violator of the block was found at this center: use them all
                    return idx, scan
                first = idx[bad[0] // sample_size * sample_size:][:sample_size]
                return first, self.ops.scan(first, k, thr)
            done += b
            block *= 2
        return None, None

    def update(self, ball, scan, idx, thr):
        """Steps 3-4 after a failed test: add the furthest point (or every violator) and re-solve."""
        ops = self.ops
        if not self.batch:
            if ops.in_core(scan.best):
                # A core vector outside the ball: the last QP stopped early (at its step bound, or at a
                # user tol above eps R^2).  Re-solve it 10x tighter instead of adding a duplicate; the
                # re-solve counts as an iteration, so max_iter still bounds the loop.
                self.tighten *= 0.1
            else:
                ops.add([scan.best])
            self.solve(self.final_tol(ball))
            return
        new = _sample_violators(scan, idx, thr, ops, self.k_add) if scan.d2 > thr else []
        if self.wide and idx is not None:
            self.growth = next_growth(self.growth, len(new), self.k_add)
        if new:
            ops.add(new)
            self.solve(max(self.final_tol(ball), THETA * (scan.d2 - ball.R2)))  # as far as the outer gap asks
            if self.prune:
                self.maybe_prune()
        else:
            # only core vectors violate: finish their QP (10x tighter if it was finished already and
            # reached its tolerance; a QP stopped by its step bound just continues from where it is)
            if self.finished and not self.last_capped:
                self.tighten *= 0.1
            self.solve(self.final_tol(ball))
        self.finished = not new


# --- settled decisions (beyond the papers) -----------------------------------------------------------
#: settle=True: the loop also stops once more core vectors no longer change its decisions.  On overlapping
#: classes the 'hybrid' cap (a sampled training point must be classified correctly) keeps the loop going
#: until the core set holds nearly every misclassified training point: with n_confirm = 100 the points that
#: fail the test must fall below about 1/6,000 of the data, so the core set grows with m (generated
#: Fashion-MNIST, trouser against the rest: 2,139 core vectors at 10^5 rows, 9,157 at 10^6 in 845 s) while
#: the decisions stop changing long before.  Each time the core set
#: has grown by SETTLE_GROWTH (from SETTLE_FIRST core vectors on), the core-set QP is finished to the final
#: tolerance and the side of the hybrid cap (d^2 <= R^2 + 2 tau: for the two-class L2-SVM, y f(x) >= 0, the
#: predicted class) is read on a probe of SETTLE_PROBE points drawn once from the loop's stream; the loop
#: stops when at most SETTLE_CHANGED of them changed side since the last check.  The certificate's full scan
#: then reports the ratio reached (it may exceed (1+eps)^2: the points left out are misclassified training
#: points the exact L2-SVM would weight).  A check also waits until the loop's work since the last (candidates
#: scanned times the core set's size, counted the same in every implementation) is SETTLE_WORK times the
#: check's own (the probe against the core set): where violators are plentiful the core set grows cheaply and
#: the checks would dominate (two overlapping Gaussians, 2·10^5 points, about 33,000 core vectors: +4% to +45%
#: wall with a check at every 15%, and the rule never fired: their decisions keep moving with the boundary's
#: noise), while on the rare violators of a large wide fit the loop's scans outweigh the probe many times over.
SETTLE_PROBE = 16384
SETTLE_FIRST = 1000
SETTLE_GROWTH = 1.15
SETTLE_CHANGED = 0.0025
SETTLE_WORK = 10.0


class Settle:
    """The settle rule's state: the probe, the core-set size of the next check and the last decisions."""

    def __init__(self, rng, n, probe=SETTLE_PROBE, first=SETTLE_FIRST, growth=SETTLE_GROWTH,
                 changed=SETTLE_CHANGED, work=SETTLE_WORK):
        self.probe = rng.integers(0, n, size=probe)
        self.next, self.growth, self.changed, self.work = first, growth, changed, work
        self.last = None
        self.done = 0      # the loop's work at the end of the last check
        self.checks = []   # (core-set size, probe points that changed side; -1 at the first check)

    @classmethod
    def begin(cls, loop, n):
        """The rule of a fit over n points: the probe comes from the loop's own stream, drawn only when the
        rule is on (a fit without it makes the draws it always made), so that chunked numerics read it ahead
        with the other draws; they keep its rows for the fit (``hold``)."""
        rule = cls(loop.rng, n)
        if hasattr(loop.ops, "hold"):
            loop.ops.hold(rule.probe)
        return rule

    def due(self, n_core: int, work: int) -> bool:
        """A check is due once the core set has grown by ``growth`` and the loop's work (candidates scanned
        times the core set's size) since the last check is ``work`` times the check's own."""
        return n_core >= self.next and work - self.done >= self.work * len(self.probe) * n_core

    def check(self, loop) -> bool:
        """After an iteration of ``loop``: if a check is due, finish the core-set QP (an unfinished one's
        decisions move by ~1%), read the probe's sides and return whether they settled."""
        ops = loop.ops
        if not self.due(ops.n_core(), loop.work):
            return False
        loop.solve(loop.final_tol(ops.ball()))
        loop.count(self.probe)
        return self.settled(ops.n_core(), ops.scan(self.probe, 0, np.inf), ops.ball(), loop.work)

    def settled(self, n_core: int, scan: Scan, ball: Ball, work: int = 0) -> bool:
        """Record the probe's sides at this ball (``work``: the loop's, the check's included); True when at most
        ``changed`` of them moved."""
        self.next = max(int(n_core * self.growth), n_core + 1)
        self.done = work
        side = np.asarray(scan.sample_d2) <= ball.R2 + 2.0 * ball.tau
        moved = -1 if self.last is None else int(np.count_nonzero(side != self.last))
        self.last = side
        self.checks.append((n_core, moved))
        return 0 <= moved <= self.changed * len(self.probe)


def settle_checks_array(checks):
    """The settle rule's checks (:attr:`Settle.checks`: core-set size, probe points moved) as an estimator's
    fitted ``settle_checks_``: an int64 array of shape (n_checks, 2), (0, 2) where there were none."""
    return np.array(checks, dtype=np.int64).reshape(-1, 2)


# --- pruning ----------------------------------------------------------------------------------------
#: prune=True (CVR's batched loop): after a solve, core vectors of weight 0 lying inside the ball by more than
#: PRUNE_KAPPA times the tube's margin 2 tau (for CVR: |y - f| < (1 - PRUNE_KAPPA) epsbar on their side of the
#: tube) leave the core set, once at least PRUNE_FRAC of it qualifies.  They joined as violators of an early
#: center (the core set's first centers are kernel ridge fits on its own points, epsbar < 0) and carry no
#: weight: on Friedman #1 (10,000 points, CVR()) 2,683 of the 6,121 core vectors ended inside the tube, a
#: quarter of them at |y - f| < epsbar / 4, and each costs every SMO step and every new Q row O(1).  The center
#: is unchanged (their weights are 0); one that violates again is found by the scans and joins again.
PRUNE_KAPPA = 0.25
PRUNE_FRAC = 0.1


#: iterations in a row that change neither the core set nor the ball before the loop is declared stalled
STALL_ITERATIONS = 200


class Stall:
    """Detects a loop that cannot progress: STALL_ITERATIONS iterations in a row whose violators change
    neither the core set nor the ball (R^2 and the margin term bit for bit).  It happens when the ball's
    quantities reach the resolution of float64: an L2-SVM at a very large C on data that are not separable,
    whose margin rho shrinks as 1/C (CVMClassifier(C=1e12) on overlapping Gaussians: rho = 4e-14 of R^2 = 2;
    the loop ran to max_iter = 100,000 in minutes and ended at 62% accuracy).  Sampling draws new candidates
    each iteration, so the same ball for 200 iterations is not a sampling accident."""

    def __init__(self):
        self.last, self.count = None, 0

    def stuck(self, n_core, ball):
        key = (n_core, ball.R2, ball.margin)
        self.count = self.count + 1 if key == self.last else 0
        self.last = key
        return self.count >= STALL_ITERATIONS

    def message(self, ball, stop, hint):
        rel = ball.S / ball.R2 if ball.R2 else float("nan")
        return (f"the core-set loop stalled: for {STALL_ITERATIONS} iterations the violators of the stop={stop!r} "
                f"test changed neither the core set nor the ball (margin term {ball.S:.3g} = {rel:.2g} of "
                f"R^2 = {ball.R2:.3g}, near the resolution of float64){hint}; the certified ratio reports what "
                "was reached")


def warm_weights(core, initial, weights):
    """The core set's weights (core order) of a warm start: each core vector's weight in ``weights`` (aligned
    with ``initial``; a point listed twice counts once, at its first weight), 0 for the others; None when
    they are all 0.  Not yet scaled to the simplex (``ops.warm`` scales them)."""
    initial = np.asarray(initial, dtype=np.int64).reshape(-1)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if weights.shape != initial.shape:
        raise ValueError(f"initial_weights must hold one weight per initial point ({initial.size}), "
                         f"got {weights.size}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("initial_weights must be finite and nonnegative")
    first = dict(zip(initial.tolist()[::-1], weights.tolist()[::-1]))  # (reversed: the first occurrence wins)
    alpha = np.array([first.get(int(z), 0.0) for z in np.asarray(core).tolist()], dtype=np.float64)
    return alpha if alpha.sum() > 0 else None


def run_core_set_loop(ops, eps, *, stop="radius", sample_size=59, n_confirm=0, max_iter=10_000, tol=None,
                      random_state=None, certify=True, verbose=False, label="MEB", batch=False,
                      method_for=lambda ops: None, hybrid_nu=HYBRID_NU, wide=False, stall_hint="",
                      prune=False, dense=False, initial=None, initial_weights=None, settle=False) -> LoopOutcome:
    """Steps 1-5 above on the numerics ``ops``; ``method_for(ops)`` names the inner solver for the next
    solve (e.g. 'active_set' or 'smo', switched by the caller's policy); ``hybrid_nu`` the cap of
    stop='hybrid' (:func:`d2_threshold`); ``wide``: with ``batch``, the iterations' samples grow while
    violators are rare (:data:`WIDE_MAX`); ``dense``: with ``wide``, full scans replace samples that would
    cover a large part of the points, and an iteration adds violators in proportion to the core set
    (:data:`DENSE_FULL_FRAC`, :data:`DENSE_ADD`); ``stall_hint`` ends the warning of a stalled loop
    (:class:`Stall`); ``initial``: (beyond the paper) points to add to the core set after step 1, before the
    first solve -- a caller that can predict most of the final core set (CVR's pilot on noisy targets) saves
    the iterations that would find them; ``initial_weights`` (one per point of ``initial``, nonnegative): the
    first solve starts from these weights, scaled to the simplex (the core set's other points at 0), instead
    of from the initial pair's ``e_a`` (:func:`warm_weights`); ``settle``: (beyond the paper, with sampling)
    also stop once more core vectors no longer change the decisions on a probe sample (:class:`Settle`).
    See the module docstring."""
    n = ops.n
    if sample_size is not None and sample_size >= n:
        sample_size = None  # sampling more points than exist is a full scan
    # (dense only replaces samples: a loop that scans every point adds max_add, as it always did)
    loop = _CoreSetLoop(ops, eps, stop, tol, batch, method_for, random_state, wide, prune and batch,
                        dense and sample_size is not None)
    z_a, z_b = initial_pair(ops.init_problem, loop.rng, sample_size, ops.furthest_from)   # step 1
    ops.start(z_a, z_b)
    probe = Settle.begin(loop, n) if settle and sample_size is not None else None
    if initial is not None and len(initial):
        new = [int(z) for z in dict.fromkeys(np.asarray(initial, dtype=np.int64).tolist()) if not ops.in_core(z)]
        # the core set after the addition: the initial pair, then the new points in order
        alpha = None if initial_weights is None else warm_weights(
            np.concatenate([np.asarray(ops.core_set(), dtype=np.int64), np.asarray(new, dtype=np.int64)]),
            initial, initial_weights)
        if alpha is None:
            ops.add(new)
        else:
            ops.add_warm(new, alpha)
    loop.solve(loop.final_tol(ops.ball()))
    progress = Progress(verbose, label)
    converged, settled, n_iter, last_scan = False, False, 0, None
    stall = Stall()
    while True:
        ball = ops.ball()
        loop.record(ball)
        progress.update(n_iter, ops.n_core(), ball.R2)
        thr = d2_threshold(stop, eps, ball, hybrid_nu)
        idx = loop.next_sample(sample_size)
        loop.count(idx)
        scan = ops.scan(idx, loop.k_add if batch else 0, thr)
        clean = scan.d2 <= thr and (not batch or ball.d2_core_max <= thr)
        if clean or loop.few_left(idx, scan, ball, thr, sample_size, n_confirm):         # step 2
            if idx is None:
                converged, last_scan = True, scan.d2
                break
            idx, scan = loop.confirm(n, sample_size, n_confirm, thr)
            if scan is None:
                converged, last_scan = True, loop.clean_full_d2
                break
        if n_iter >= max_iter:
            warnings.warn(f"the core-set loop stopped at max_iter={max_iter} before the stop={stop!r} test held; "
                          "the certified ratio reports what was reached", ConvergenceWarning,
                          stacklevel=caller_stacklevel(3))
            break
        if stall.stuck(ops.n_core(), ball):
            warnings.warn(stall.message(ball, stop, stall_hint), ConvergenceWarning, stacklevel=caller_stacklevel(3))
            break
        loop.update(ball, scan, idx, thr)                                                 # steps 3-4
        n_iter += 1
        if probe is not None and probe.check(loop):
            settled = True
            break
    ball = ops.ball()
    progress.close(n_iter, ops.n_core(), ball.R2)
    if certify and last_scan is None:
        last_scan = ops.scan(None, 0, np.inf).d2
    return LoopOutcome(ball=ball, r_cert2=float(last_scan) if certify else float("nan"), n_iter=n_iter,
                       converged=converged, history=loop.history, n_solves=loop.solves, n_capped=loop.capped,
                       last_capped=loop.last_capped, settled=settled,
                       settle_checks=[] if probe is None else list(probe.checks))
