"""The fast engine's two-thread SMO (``fastimpl/_smo.pxi``: ``_Duo``) makes the one-thread solve's steps.

On a large core set the solve hands the upper part of each O(|S|) pass (a new Q row's entries, the two
passes of the second-order choice of j, the gradient update) to a second thread.  Every value is formed as in
one thread, so the weights, the gradient and the step count must be the one-thread solve's bit for bit:
with every row split (policy 1), with a cache too small for the rows (rows extended from where they stopped,
recomputed after eviction), and when the second thread is given up mid-solve (every hand-off a stall).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from threadpoolctl import threadpool_limits

import fastimpl._engine as E
from corevector import CVMClassifier, CVR
from refimpl import cvm, cvr
from refimpl.kernels import KernelSpec


@pytest.fixture
def duo_policy():
    """Two OpenMP threads (whatever earlier tests left), and the engine's policy and stall test restored after."""
    old, old_stalls = E._set_duo_policy(0), E._set_duo_stalls(200_000.0, 3)
    with threadpool_limits(limits=2, user_api="openmp"):
        yield E._set_duo_policy
    E._set_duo_policy(old)
    E._set_duo_stalls(*old_stalls)


def _problem(kind, kernel, m, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, d))
    if kind == "cvr":
        y = np.sin(X[:, 0]) + 0.3 * rng.standard_normal(m)
        return cvr.cvr_problem(X, (y - y.mean()) / y.std(), kernel, 100.0, 0.05)
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(m) > 0, 1.0, -1.0)
    return cvm.two_class_problem(X, y, kernel, 10.0)


def _solve(P, policy, cache_size, stall=None, seed=0):
    """(alpha, grad, steps) of two warm-started solves on one core set: the first from weights of ``seed``,
    the second, tighter, from the first's end."""
    E._set_duo_policy(policy)
    E._set_duo_stalls(*(stall or (200_000.0, 3)))
    rng = np.random.default_rng(seed)
    ops = E.FastMEBOps(P, cache_size)
    ops.start(0, P.n - 1)
    zs = [int(z) for z in rng.choice(np.arange(1, P.n - 1), size=min(P.n - 2, 300), replace=False)]
    ops.add(zs[:200])
    ops.warm(rng.uniform(0.0, 1.0, ops.n_core()))
    s1 = ops.solve(1e-6, "smo", 10**6)
    ops.add(zs[200:])
    s2 = ops.solve(1e-9, "smo", 10**6)
    _, alpha, grad, _, _, _ = E._debug_state(ops)
    return alpha, grad, (s1, s2)


CASES = [("cvr", KernelSpec("rbf", gamma=0.3), 3), ("cvr", KernelSpec("laplacian", gamma=0.5), 5),
         ("cvm", KernelSpec("rbf", gamma=0.2), 4), ("cvm", KernelSpec("poly", gamma=0.5, coef0=1.0, degree=2), 3),
         ("cvm", KernelSpec("rbf", gamma=0.02), 20)]   # d = 20: rows by BLAS, only the passes split


@pytest.mark.parametrize("kind,kernel,d", CASES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("cache_size", [64 * 2**20, 300 * 8 * 40])
def test_two_threads_make_the_one_thread_steps(duo_policy, kind, kernel, d, cache_size):
    P = _problem(kind, kernel, 400, d, seed=1)
    a1, g1, s1 = _solve(P, -1, cache_size)
    before = E._duo_stats()[1]
    a2, g2, s2 = _solve(P, 1, cache_size)
    assert E._duo_stats()[1] > before
    assert s1 == s2 and s1[0] > 0 and s1[1] > 0
    np.testing.assert_array_equal(a2, a1)
    np.testing.assert_array_equal(g2, g1)
    # the second thread given up after its fifth hand-off: the rest of the solve in one thread, the same steps
    a3, g3, s3 = _solve(P, 1, cache_size, stall=(-1.0, 5))
    assert s3 == s1
    np.testing.assert_array_equal(a3, a1)
    np.testing.assert_array_equal(g3, g1)


@pytest.mark.parametrize("retry", [1, 7, 64])
def test_a_solve_that_gave_its_worker_up_tries_two_threads_again(duo_policy, retry):
    """After the stalls that end its second thread, a solve goes on alone for ``retry`` steps (doubling) and
    then on two threads again: it does take them again, and the steps and the model are the one-thread
    solve's."""
    P = _problem("cvr", KernelSpec("rbf", gamma=0.3), 400, 3, seed=4)
    a1, g1, s1 = _solve(P, -1, 64 * 2**20)
    old = E._set_duo_retry(retry, 4 * retry)
    try:
        before = E._duo_stats()
        a2, g2, s2 = _solve(P, 1, 64 * 2**20, stall=(-1.0, 3))  # (every hand-off stalls: give up after 3)
        after = E._duo_stats()
    finally:
        E._set_duo_retry(*old)
    quits, retries = after[4] - before[4], after[5] - before[5]
    assert retries > 0 and quits >= retries  # it tried again, and (every hand-off stalling) gave up again
    assert s2 == s1
    np.testing.assert_array_equal(a2, a1)
    np.testing.assert_array_equal(g2, g1)


@pytest.mark.parametrize("start", [1, 5, 40])
def test_the_default_policy_hands_over_after_its_first_steps(duo_policy, start):
    """Policy 0 makes a solve's first steps in one thread and the rest on two: the steps of one run."""
    P = _problem("cvr", KernelSpec("rbf", gamma=0.3), 400, 3, seed=2)
    a1, g1, s1 = _solve(P, -1, 64 * 2**20)
    old = E._set_duo_start(0, start)
    try:
        before = E._duo_stats()[1]
        a2, g2, s2 = _solve(P, 0, 64 * 2**20)
        assert E._duo_stats()[1] > before
    finally:
        E._set_duo_start(*old)
    assert s2 == s1 and min(s1) > start
    np.testing.assert_array_equal(a2, a1)
    np.testing.assert_array_equal(g2, g1)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), m=st.integers(40, 300), gamma=st.floats(0.05, 2.0))
def test_two_threads_on_random_problems(seed, m, gamma):
    old = E._set_duo_policy(0)
    try:
        P = _problem("cvr", KernelSpec("rbf", gamma=gamma), m, 3, seed)
        with threadpool_limits(limits=2, user_api="openmp"):
            a1, g1, s1 = _solve(P, -1, 8 * 40 * m, seed=seed)
            a2, g2, s2 = _solve(P, 1, 8 * 40 * m, seed=seed)
    finally:
        E._set_duo_policy(old)
    assert s1 == s2
    np.testing.assert_array_equal(a2, a1)
    np.testing.assert_array_equal(g2, g1)


@pytest.mark.parametrize("est", [lambda: CVR(random_state=0), lambda: CVMClassifier(random_state=0, solver="smo")])
@pytest.mark.parametrize("as_sparse", [False, True])
def test_estimators_fit_the_same_model(duo_policy, est, as_sparse):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((1500, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.standard_normal(1500)
    model = est()
    if isinstance(model, CVMClassifier):
        y = (y > 0).astype(int)
    Xin = sparse.csr_matrix(X) if as_sparse else X
    fits = []
    for policy in (-1, 1):
        duo_policy(policy)
        before = E._duo_stats()[1]
        fits.append(est().fit(Xin, y))
        handoffs = E._duo_stats()[1] - before
        assert (handoffs > 0) == (policy == 1)
    one, two = fits
    np.testing.assert_array_equal(two.support_, one.support_)
    np.testing.assert_array_equal(two.dual_coef_, one.dual_coef_)
    np.testing.assert_array_equal(two.intercept_, one.intercept_)
    assert two.n_iter_ == one.n_iter_
