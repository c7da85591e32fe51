"""Verification of the (1+eps)^2 guarantee against an exact solver: one library for the CLI, the
report and the tests.

[001] Sec. 4.2 (eqs. (14)-(15)) guarantees, under full scans
(``sample_size=None``) and the paper's radius rule, that the engine's R_tau satisfies

    R_tau^2 <= r*^2 <= (1+eps)^2 R_tau^2,

with r* the radius of the exact MEB.  This module builds small random problems of every bounded
formulation (:func:`make_problem`), brackets r*^2 with the independent exact QP of
:mod:`refimpl.exact_qp` (cvxopt), runs an engine and checks the two inequalities plus the engine's
own certificate (:func:`check_case`); :func:`verify_cases` runs a whole grid.

The engine is a parameter (``engines``: name -> ``fit_meb``) so that the reference never imports
the compiled package: ``corevector verify`` passes both implementations, the tests and the report
pass what they test.  The default is the reference engine alone.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from .kernels import KERNELS

#: relative slack of the verify checks (floating point of engine and exact solver)
VERIFY_RTOL = 1e-7
#: the formulations :func:`make_problem` builds (CVR through Property 3 of 000: same MEB bound)
FORMULATIONS = ("two_class", "one_class", "meb", "cvr")
#: name -> (sizes, number of seeds, kernels, eps values)
VERIFY_GRIDS = {
    "tiny": ((40,), 1, ("rbf",), (1e-1, 1e-3)),
    "quick": ((60, 200), 2, ("rbf", "laplacian", "poly"), (1e-1, 1e-2, 1e-3, 1e-4)),
    "full": ((50, 150, 300), 5, KERNELS, (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)),  # every kernel
}


def exact_meb(problem):
    """(lower, upper) bracket of the exact r*^2 from the exact-QP baseline (:mod:`refimpl.exact_qp`)."""
    from .exact_qp import exact_meb as _exact

    lower, upper, _ = _exact(problem)
    return lower, upper


def make_problem(formulation, m, kernel, seed, C=10.0, d=3):
    """A random small problem of one formulation: Gaussian blobs in d dimensions, gamma='beta'."""
    from . import cvm, cvr
    from .kernels import make_kernel_spec

    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown formulation {formulation!r}; expected one of {FORMULATIONS}")
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    X = rng.normal(size=(m, d)) + 0.75 * y[:, None]
    if kernel == "poly":
        spec = make_kernel_spec(X, "poly", "beta", degree=2, coef0=1.0)
    else:
        spec = make_kernel_spec(X, kernel, "beta")
    if formulation == "two_class":
        return cvm.two_class_problem(X, y, spec, C)
    if formulation == "one_class":
        return cvm.one_class_problem(X, spec, C)
    if formulation == "meb":
        return cvm.svdd_problem(X, spec)
    # L2-SVR on a smooth target (000 eqs. (7)-(8), (15)): 2m augmented points
    target = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=m)
    return cvr.cvr_problem(X, target, spec, C, 0.5)


def check_case(case, res, lo, hi, rtol=VERIFY_RTOL):
    """Check R^2 <= r*^2 and r*^2 <= (1+eps)^2 R^2 (each with slack 1+rtol) for one fit.

    ``case`` is a dict with at least ``eps``; ``res`` has ``radius2``, ``r_cert2``,
    ``certified_ratio``, ``n_iter`` and ``core_set``; ``lo <= r*^2 <= hi`` is the exact bracket.
    Returns ``case`` extended with the measured ratios, ``ok`` and the ``reason`` of any failure.
    """
    R2 = float(res.radius2)
    eps = case["eps"]
    bound = (1.0 + eps) ** 2
    reasons = []
    # R^2 is the dual value of a feasible point, so it cannot exceed r*^2 <= hi.
    if not R2 <= hi * (1 + rtol):
        reasons.append(f"R^2={R2:.12g} > r*^2={hi:.12g}")
    # the guarantee: r*^2 <= (1+eps)^2 R^2 (lo <= r*^2 is what we can prove exceeds it)
    if not lo <= bound * R2 * (1 + rtol):
        reasons.append(f"r*^2/R^2={lo / R2:.12g} > (1+eps)^2={bound:.12g}")
    # the engine's own certificate must also satisfy the bound and enclose the exact ball
    cr = float(res.certified_ratio)
    if not cr <= bound * (1 + rtol):
        reasons.append(f"certified_ratio={cr:.12g} > (1+eps)^2")
    if not float(res.r_cert2) >= lo * (1 - rtol):
        reasons.append(f"r_cert^2={float(res.r_cert2):.12g} < r*^2={lo:.12g}")
    if hi - lo > 1e-6 * abs(hi):
        reasons.append(f"exact solver inexact: gap {hi - lo:.3g}")
    return dict(case, R2=R2, r_cert2=float(res.r_cert2), certified_ratio=cr, exact_lo=lo, exact_hi=hi,
                lower_ratio=R2 / lo if lo > 0 else np.inf, upper_ratio=lo / R2 if R2 > 0 else np.inf,
                bound=bound, n_iter=int(res.n_iter), core_size=len(res.core_set),
                ok=not reasons, reason="; ".join(reasons))


def reference_engines():
    """{'ref': refimpl.meb.fit_meb}: the default engine set (refimpl never imports fastimpl)."""
    from .meb import fit_meb

    return {"ref": fit_meb}


def grid_problems(sizes, n_seeds, kernels, formulations=FORMULATIONS, seed=0):
    """The (formulation, kernel, m, seed) tuples of a grid, in the order the checks run them."""
    return [(f, k, m, seed + s) for m in sizes for s in range(n_seeds) for k in kernels for f in formulations]


def check_problem(problem, case, engines, eps_grid):
    """Every (engine, eps) fit of one problem against one exact solve; yields :func:`check_case` rows."""
    lo, hi = exact_meb(problem)
    for impl, fit_meb in engines.items():
        for eps in eps_grid:
            with warnings.catch_warnings():  # the bound is the radius rule's; its accuracy warning is moot here
                warnings.filterwarnings("ignore", message="stop='radius' with eps")
                res = fit_meb(problem, float(eps), sample_size=None, random_state=case["seed"], certify=True,
                              stop="radius")
            yield check_case(dict(case, impl=impl, eps=eps), res, lo, hi)


def verify_cases(grid="quick", *, seed=0, engines=None, formulations=FORMULATIONS, progress=True):
    """Run a verification grid; yields one dict per (problem, engine, eps) fit.

    ``grid`` is a name of :data:`VERIFY_GRIDS` or a tuple ``(sizes, n_seeds, kernels, eps_grid)``;
    ``engines`` maps an implementation name to its ``fit_meb`` (default: :func:`reference_engines`).

    Keys: formulation, kernel, m, seed, impl, eps, R2 (engine radius^2), r_cert2, certified_ratio,
    exact_lo/exact_hi (bracket of r*^2), lower_ratio = R2 / r*^2 (must be <= 1),
    upper_ratio = r*^2 / R2 (must be <= (1+eps)^2), ok, reason.
    """
    sizes, n_seeds, kernels, eps_grid = VERIFY_GRIDS[grid] if isinstance(grid, str) else grid
    engines = reference_engines() if engines is None else engines
    problems = grid_problems(sizes, n_seeds, kernels, formulations, seed)
    try:
        from tqdm import tqdm
        it = tqdm(problems, desc="verify", unit="problem", disable=not progress, file=sys.stderr)
    except ImportError:  # pragma: no cover - tqdm is a declared dependency
        it = problems
    for formulation, kernel, m, s in it:
        problem = make_problem(formulation, m, kernel, s)
        yield from check_problem(problem, dict(formulation=formulation, kernel=kernel, m=m, seed=s),
                                 engines, eps_grid)


def format_table(rows):
    """The per-(formulation, kernel, impl, eps) summary table of a verification run."""
    groups = {}
    for r in rows:
        groups.setdefault((r["formulation"], r["kernel"], r["impl"], r["eps"]), []).append(r)
    head = ["formulation", "kernel", "impl", "eps", "n", "max R2/r*2", "max r*2/R2", "max cert", "(1+eps)^2",
            "fail"]
    lines = [head]
    for (f, k, impl, eps), g in groups.items():
        lines.append([f, k, impl, f"{eps:.0e}", str(len(g)), f"{max(r['lower_ratio'] for r in g):.9f}",
                      f"{max(r['upper_ratio'] for r in g):.9f}", f"{max(r['certified_ratio'] for r in g):.9f}",
                      f"{(1 + eps) ** 2:.9f}", str(sum(not r["ok"] for r in g))])
    widths = [max(len(row[c]) for row in lines) for c in range(len(head))]
    out = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)
