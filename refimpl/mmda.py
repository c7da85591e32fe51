"""Maximum margin discriminant analysis (MMDA) features by core vectors ([004]).

Sec. II.  For a binary problem with labels y_i in {-1, +1}, MMDA extracts directions one at a
time.  The first is the weight vector w_1 of the L2-SVM (1); after s unit directions
u_q = w_q / ||w_q|| the next solves (2): the same SVM with the extra constraints u_q'w = 0, whose
dual is (3) and whose primal is recovered by (8):

    w = sum_i alpha_i y_i phi(x_i) + sum_q gamma_q u_q,      b = sum_i alpha_i y_i.

By induction (Sec. II, after eq. (9)) each u_q is a kernel expansion over training points; here
it is kept sparse, over the core vectors of its own fit and of the earlier directions only.

Sec. IV.  Problem (3) is solved through the constrained MEB (19) by the CVM loop
(``refimpl.constrained_meb``: core sets, SOR on the sub-problem, normalisation (35) and
Appendix II).  Its (alpha, gamma) then give w by (8).  For gamma the last block of the KKT
conditions (Sec. IV-C2), U'Phi Y alpha + U'U gamma = 0, is solved exactly: with U'U = I one
Gauss-Seidel sweep over the gamma coordinates (omega = 1) gives gamma = -U'Phi Y alpha, so that

    w = Phi Y alpha - U U'Phi Y alpha,    ||w||^2 = (Y alpha)'K(Y alpha) - ||U'Phi Y alpha||^2,

which is orthogonal to u_1 .. u_s up to round-off whatever the tolerance eps of the core-set loop.
U'Phi Y alpha = Phi~_t'U~ alpha uses the rows of eq. (38) the loop already computed.

Multi-class problems use one-versus-all (Sec. II): one binary problem per class (class c
against the rest), ``n_components`` directions each; with two classes a single problem
(the second class positive, as scikit-learn orders binary labels).

The same extraction runs with any solver of (3): ``baselines.mmda_svm`` plugs in the exact
dense QP, MMDA(SVM), the paper's baseline.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import cvm
from .constrained_meb import ConstrainedMEBProblem, ConstrainedOps, Projections, fit_constrained_meb
from .kernels import KernelSpec, kernel_block
from .meb import make_rng


@dataclass
class Direction:
    """What one solve of (3) hands to the extraction: the support (alpha > 0), its alpha, the rows
    y_l U'phi(x_l) of the support (eq. (38)) and the fit's diagnostics."""

    support: np.ndarray
    alpha: np.ndarray
    proj_support: np.ndarray
    info: dict = field(default_factory=dict)


@dataclass
class BinaryDirections:
    """The directions of one binary problem: u_q = sum_j coef[j, q] phi(x_{points_j})."""

    points: np.ndarray          # training indices of the expansion points
    coef: np.ndarray            # (n_points, n_components)
    info: list                  # per direction: diagnostics of its fit


def solve_cvm(eps, *, sample_size=59, n_confirm=30, max_iter=10_000, tol=None, omega=1.0, certify=True,
              stop="radius", ops_class=ConstrainedOps):
    """The MMDA(CVM) solver of (3): the constrained MEB (19) by core sets (Sec. IV), ``stop`` one of
    ``refimpl.driver.STOPS`` (the paper's 'radius' by default)."""

    def solve(problem: ConstrainedMEBProblem, seed) -> Direction:
        res = fit_constrained_meb(problem, eps, sample_size=sample_size, n_confirm=n_confirm, max_iter=max_iter,
                                  tol=tol, omega=omega, random_state=seed, certify=certify, stop=stop,
                                  ops_class=ops_class)
        sv = res.alpha > 0
        info = dict(core_set_size=len(res.core_set), n_support=int(sv.sum()), n_iter=res.n_iter,
                    kernel_evaluations=res.kernel_evaluations, certified_ratio=res.certified_ratio,
                    radius=float(np.sqrt(max(res.radius2, 0.0))), radius2=res.radius2, r_cert2=res.r_cert2,
                    converged=res.converged, sor_steps=res.sor_steps, b=float(res.alpha_mmda[sv] @ (
                        problem.base.sign[res.core_set[sv]] if problem.base.sign is not None else 1.0)))
        return Direction(res.core_set[sv], res.alpha_mmda[sv], res.proj_core[sv], info)

    return solve


def add_direction(X, spec: KernelSpec, points, coef, d: Direction, y_pm, raw_block=None):
    """Append u = w / ||w|| of eq. (8) (gamma from the exact last KKT row, see the module docstring).

    Returns the new (points, coef) and ||w||.  A direction that vanishes (w in span{u}: the
    feature space is exhausted, e.g. a linear kernel with more directions than dimensions) is
    returned as zeros with a warning.
    """
    raw_block = raw_block or (lambda A, B: kernel_block(spec, A, B))
    ay = d.alpha * y_pm[d.support]
    Utv = d.proj_support.T @ d.alpha if coef.shape[1] else np.zeros(0)   # U'Phi Y alpha (eq. (38) rows)
    vv = float(ay @ raw_block(X[d.support], X[d.support]) @ ay)          # ||Phi Y alpha||^2
    w2 = vv - float(Utv @ Utv)
    new = np.setdiff1d(d.support, points)  # sorted, not yet expansion points
    points2 = np.concatenate([points, new]).astype(np.intp)
    coef2 = np.zeros((len(points2), coef.shape[1] + 1))
    coef2[:len(points), :coef.shape[1]] = coef
    pos = {int(p): k for k, p in enumerate(points2)}
    a = np.zeros(len(points2))
    if coef.shape[1]:
        a[:len(points)] -= coef @ Utv          # + sum_q gamma_q u_q with gamma = -U'Phi Y alpha
    for i, v in zip(d.support, ay):
        a[pos[int(i)]] += v
    if not np.isfinite(w2) or w2 <= 1e-12 * max(vv, np.finfo(float).tiny):
        warnings.warn("an MMDA direction vanished (w lies in the span of the previous ones): the feature "
                      "space is exhausted; the feature is set to zero", RuntimeWarning, stacklevel=3)
        return points2, coef2, 0.0
    coef2[:, -1] = a / np.sqrt(w2)
    return points2, coef2, float(np.sqrt(w2))


def extract_binary(X, y_pm, spec: KernelSpec, C, n_components, solve, seeds, raw_block=None) -> BinaryDirections:
    """MMDA on one binary problem: n_components orthonormal directions, one solve of (3) each (direction q
    with the random_state ``seeds[q]``)."""
    base = cvm.two_class_problem(X, y_pm, spec, C)
    points = np.zeros(0, dtype=np.intp)
    coef = np.zeros((0, 0))
    infos = []
    for seed in seeds[:n_components]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        problem = ConstrainedMEBProblem(base, Projections(X[points], coef))
        d = solve(problem, seed)
        points, coef, wnorm = add_direction(X, spec, points, coef, d, base.sign.astype(np.float64), raw_block)
        infos.append(dict(d.info, w_norm=wnorm, n_expansion=int(np.count_nonzero(coef[:, -1])),
                          cpu_time=time.process_time() - cpu0, wall_time=time.perf_counter() - wall0))
    return BinaryDirections(points, coef, infos)


def one_vs_all(y, classes):
    """The binary problems of Sec. II: one per class (+1 for the class), or one for two classes."""
    if len(classes) == 2:
        return [np.where(y == classes[1], 1, -1).astype(np.int8)]
    return [np.where(y == c, 1, -1).astype(np.int8) for c in classes]


def fit_mmda(X, y, spec: KernelSpec, C, n_components, solve, random_state=None, raw_block=None, run=None):
    """All binary problems; returns (classes, [BinaryDirections]).  ``run(fn, tasks, shared)``, when given,
    computes ``[fn(*shared, *t) for t in tasks]`` in its own way (corevector.parallel.run_tasks: the
    one-vs-all problems as separate tasks on a cluster)."""
    classes = np.unique(y)
    rng = make_rng(random_state)
    problems = one_vs_all(y, classes)
    # every direction's seed drawn here, in the order of a loop over the problems, so that the problems
    # are independent of each other and may be solved in any order, or at once
    seeds = [[int(rng.integers(0, 2**31 - 1)) for _ in range(n_components)] for _ in problems]

    def binary(X, y_pm, problem_seeds):
        return extract_binary(X, y_pm, spec, C, n_components, solve, problem_seeds, raw_block)
    tasks = list(zip(problems, seeds))
    return classes, (run(binary, tasks, (X,)) if run is not None else [binary(X, *t) for t in tasks])


def transform(X_train, spec, binaries, X, raw_block=None):
    """Features u_q'phi(x) = sum_j coef_jq k(x_j, x) of every direction, class by class."""
    raw_block = raw_block or (lambda A, B: kernel_block(spec, A, B))
    cols = [raw_block(X, X_train[b.points]) @ b.coef if len(b.points) else np.zeros((len(X), b.coef.shape[1]))
            for b in binaries]
    return np.hstack(cols) if cols else np.zeros((len(X), 0))
