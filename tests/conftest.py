"""Shared test helpers: random problems and an independent exact solver (cvxopt's interior point QP)."""
import numpy as np
import pytest

from refimpl import cvm
from refimpl.kernels import make_kernel_spec

FORMULATIONS = ("meb", "one_class", "two_class")


def random_problem(formulation, kernel, m=120, d=3, C=10.0, seed=0, **kernel_opts):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    spec = make_kernel_spec(X, kernel, **kernel_opts)
    if formulation == "meb":
        return cvm.svdd_problem(X, spec)
    if formulation == "one_class":
        return cvm.one_class_problem(X, spec, C)
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=m) > 0, 1.0, -1.0)
    return cvm.two_class_problem(X, y, spec, C)


def exact_meb(problem):
    """r*^2 of the MEB of all points, bracketed: returns (lo, hi, alpha*) with lo <= r*^2 <= hi.

    cvxopt solves min a'Qa - l'a on the simplex (the dual (2) of 001_1b97d3ee98da12aa.txt) to
    high accuracy; its alpha is projected onto the simplex, so lo = l'a - a'Qa is a feasible dual
    value (a lower bound) and hi = max_l dist^2(c(a), z_l) an enclosing radius (an upper bound).
    The bracket lets tests compare against r*^2 without trusting any solver's tolerance.
    """
    cvxopt = pytest.importorskip("cvxopt")
    n = problem.n
    idx = np.arange(n)
    Q = problem.block(idx, idx)
    l = problem.linear_term(idx)
    P = cvxopt.matrix(2.0 * Q)
    q = cvxopt.matrix(-l)
    G = cvxopt.matrix(-np.eye(n))
    h = cvxopt.matrix(np.zeros(n))
    A = cvxopt.matrix(np.ones((1, n)))
    b = cvxopt.matrix(1.0)
    sol = cvxopt.solvers.qp(P, q, G, h, A, b, options={"show_progress": False, "abstol": 1e-13,
                                                       "reltol": 1e-13, "feastol": 1e-13, "maxiters": 200})
    a = np.maximum(np.array(sol["x"]).ravel(), 0.0)
    a /= a.sum()
    Qa = Q @ a
    lo = float(l @ a - a @ Qa)
    hi = float(np.max(a @ Qa - 2.0 * Qa + l))
    return lo, hi, a


@pytest.fixture(params=["fast", "ref"])
def impl(request):
    return request.param


def engine(impl):
    if impl == "fast":
        from fastimpl._engine import fit_meb
    else:
        from refimpl.meb import fit_meb
    return fit_meb
