"""solver='auto': how the estimators run the core-set loop on a problem -- the engine's tuning, beyond the papers.

:func:`refimpl.meb.fit_meb` runs the papers' loop by default (one core vector per iteration, the core-set QP by
SMO) and takes everything else as explicit settings: an inner-solver function, ``batch``, ``wide``, ``prune`` and
``dense``.  This module is where the estimators' ``solver='auto'`` turns into those settings for a given problem
(:func:`loop_settings`), with the measurements behind each threshold; :func:`with_policy` wraps an
implementation's ``fit_meb`` so that it accepts ``solver='auto'`` (:mod:`corevector.numerics` hands out the
wrapped functions).  The decisions read the problem only, never the implementation or how X is stored, so both
engines, and chunked and in-memory rows, make the same draws and give the same model.
"""
from __future__ import annotations

import functools

import numpy as np

from refimpl.meb import SOLVERS as PAPER_SOLVERS

#: refimpl.driver.caller_stacklevel: the loop's warnings name the code that called with_policy's wrapper
_WARNINGS_PASS_THROUGH = True

__all__ = ["SOLVERS", "loop_settings", "with_policy", "auto_max_free", "wide_samples", "solver_policy"]

#: the estimators' solvers: 'auto' (default) runs the batched loop of refimpl.driver (every violator of the
#: sample at once, the inner QP to a fraction of the outer gap) with the active set while the support is small
#: and SMO beyond (AUTO_MAX_FREE); 'smo' and 'active_set' run the papers' loop with that inner solver.
SOLVERS = ("auto",) + tuple(PAPER_SOLVERS)

#: solver='auto' uses the active-set method while at most this many core vectors carry weight, then
#: SMO.  An exact Newton step costs O(|F|^2) per change of the free set, an SMO step O(|S|) from cached
#: rows, and SMO needs few steps per core vector when K~ is well-conditioned: on two overlapping
#: Gaussians (C = 1, 2,000 support vectors) the active set took 10.9 s of a fit that SMO does in 0.5 s.
AUTO_MAX_FREE = 1000
#: ... but SMO crawls when K~ is ill-conditioned, i.e. when its ridge c (1/C for the L2-SVMs, mu m/C for
#: CVR) is small against the diagonal: on the checkerboard at C = 1e4 (ridge 5e-5 of the diagonal) it hit
#: its step bound of 3.5e5 steps on every core-set QP after the switch.  Below SMO_MIN_RIDGE the active set
#: is kept up to AUTO_MAX_FREE_TIGHT free vectors (its factor takes 8 |F|^2 bytes: 512 MB at 8,000).
SMO_MIN_RIDGE = 1e-3
AUTO_MAX_FREE_TIGHT = 8000


#: ... and for CVR's mirrored problems while at most this many: its ridge mu m / C_paper = 1 / (2 C)
#: is ~1% of the diagonal, where SMO needs ~20-50 steps of O(|S|) per core vector and an active-set step costs
#: O(|F|^2) whatever the conditioning.  Friedman #1, 10,000 points, C = 25, mu = 0.01 std y (1,072 SVs): the
#: active set held the support near 1,000 free vectors for 240 solves, 5.8 of the fit's 6.2 s CPU; SMO from
#: 200 free vectors on: 0.62 s for the same model (RMSE 1.13 / 1.14)
AUTO_MAX_FREE_MIRROR = 200


def auto_max_free(problem) -> int:
    """solver='auto': the support size beyond which the fit switches to SMO, for this problem."""
    ridge = problem.min_ridge / max(float(problem.eta), np.finfo(float).tiny)
    if getattr(problem, "mirror", False) and ridge >= SMO_MIN_RIDGE:
        return AUTO_MAX_FREE_MIRROR
    return AUTO_MAX_FREE if ridge >= SMO_MIN_RIDGE else AUTO_MAX_FREE_TIGHT


#: solver='auto' widens the samples of its iterations (``refimpl.driver.WIDE_MAX``) for a Gaussian kernel from
#: this many coordinates on (CVR's mirrored points excepted): where the fast engine scans dense rows through
#: its kernel block (fastimpl/_kblock.pxi), a candidate costs |S| multiply-adds, not |S| d.  The decision
#: reads the problem's shape, never how its rows are stored: CSR, chunked and dense rows of the same data
#: make the same draws and so give the same model (the sparse input's contract, tests/test_sparse.py), though only
#: dense rows run the block
WIDE_MIN_D = 16
#: ... and from this many points on.  Below it a sample of up to WIDE_MAX x sample_size rows is a large part
#: of the problem and the wider scans cost more than the iterations they save: measured (fit wall s, wide /
#: not, fresh processes) on the one-vs-one pairs of letter (0.73 / 0.45 for 5,000 points, 26 classes),
#: optdigits, pendigits and satimage (+25-45%), pendigits one-vs-rest at 7,694 (+25%), Fashion-MNIST
#: T-shirt/shirt at 2,000 (0.18 / 0.15); it pays from ~5,000 points of a hard problem (T-shirt/shirt: 0.70 /
#: 0.82 at 5,000, 2.25 / 3.65 at 10,000) and is neutral on letter one-vs-rest at 14,000 (0.078 / 0.077).
#: Confirmed on Fashion T-shirt/shirt pooled to d = 49 and 196 at 10,000 (0.84 / 1.21, 0.99 / 1.36).
WIDE_MIN_N = 8192


#: CVR's mirrored problems widen their samples (and, dense, switch to full scans) from this many augmented
#: points (2m) on, at any d: there the iteration's fixed cost is the core-set QP (SMO over thousands of core
#: vectors, ill-conditioned at C = 25), not the scan.  Friedman #1 (d = 10), 10,000 points, CVR() with SMO from
#: 200 free vectors: 770 solves and 284,000 SMO steps (3.95 s CPU) -> 90 solves and 97,000 steps (1.86 s), the
#: same RMSE.  With the dense scans it pays from 2,048 inputs: chosen on the panel's wine quality white (3,918
#: training rows; 179 iterations, 400 -> 242 ms wall) and abalone (134 -> 121 ms), confirmed on Friedman #1 and
#: make_regression(noise=10) at 2,500 and 3,500 rows, draws 0-2 (1.1-2.7x faster, R^2 equal or higher on all
#: 12).  From 1,024 inputs it was slower on airfoil and wizmir (1,200 rows: 42 -> 51 ms, 45 -> 48 ms).
WIDE_MIN_N_MIRROR = 4096
#: ... and at any size where the loop starts from a seeded core set (``n_initial > 0``; CVR seeds every fit below
#: ``CVR.SEED_ALL_BELOW`` inputs): a seeded core set holds most of the support at once, so the few violators left
#: are found by full scans in a few iterations.  Unseeded, the narrow loop stays: from 0 augmented points the dense
#: loop alone was slower on the panel's small sets (laser, concrete, treasury, wizmir: 52-69 -> 72-93 ms), seeded
#: and dense 29-39 ms


def wide_samples(solver: str, problem, n_initial: int = 0) -> bool:
    """Does the loop widen its samples on this problem (see :data:`WIDE_MIN_D`, :data:`WIDE_MIN_N` and
    :data:`WIDE_MIN_N_MIRROR`), started from ``n_initial`` initial core vectors?  Asked once per fit, above both
    engines, so both make the same draws, whatever the layout of X."""
    if solver == "auto" and problem.mirror:
        return problem.n >= WIDE_MIN_N_MIRROR or n_initial > 0
    return (solver == "auto" and problem.kernel.name == "rbf" and not problem.mirror
            and problem.X.shape[1] >= WIDE_MIN_D and problem.X.shape[0] >= WIDE_MIN_N)


def solver_policy(solver: str, problem, n_initial: int = 0):
    """``method_for(ops)`` of the driver: the inner solver of the next core-set QP.  'auto' switches
    from the active set to SMO once more than :func:`auto_max_free` core vectors carry weight, for good
    (switching back would need a new O(|F|^3) factorisation); a loop started from more initial core vectors
    than that (``n_initial``) starts with SMO, since its first QP would take them all into the active set's
    factor (3,000 seeded core vectors of wine quality: 16 s against 1.2 s grown from the pair)."""
    if solver != "auto":
        return lambda ops: solver
    limit = auto_max_free(problem)
    state = {"smo": n_initial > limit}

    def method_for(ops):
        if not state["smo"] and ops.n_support() > limit:
            state["smo"] = True
        return "smo" if state["smo"] else "active_set"
    return method_for


def loop_settings(solver: str, problem, n_initial: int = 0) -> dict:
    """refimpl.meb.fit_meb's ``solver``, ``batch``, ``wide``, ``prune`` and ``dense`` for the estimators'
    ``solver`` on ``problem`` (``n_initial`` initial core vectors): 'auto' is the batched loop (widened samples
    per :func:`wide_samples`, pruning and dense scans for CVR's mirrored problems) with :func:`solver_policy`'s
    switch; 'smo' and 'active_set' are the papers' loop."""
    if solver != "auto":
        return dict(solver=solver)
    return dict(solver=solver_policy(solver, problem, n_initial), batch=True,
                wide=wide_samples(solver, problem, n_initial),
                prune=bool(problem.mirror), dense=bool(problem.mirror))


def with_policy(fit_meb):
    """``fit_meb`` (an implementation's :func:`refimpl.meb.fit_meb`) accepting the estimators' ``solver``,
    'auto' included, by :func:`loop_settings`."""
    @functools.wraps(fit_meb)
    def fit(problem, eps, *, solver="auto", **options):
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        initial = options.get("initial")
        return fit_meb(problem, eps, **loop_settings(solver, problem, 0 if initial is None else len(initial)),
                       **options)
    return fit
