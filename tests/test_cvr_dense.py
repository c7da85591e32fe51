"""Dense scans in CVR's batched loop (issue 49; refimpl.driver.DENSE_FULL_FRAC, DENSE_ADD): once a sample would
cover a large part of the points the loop scans them all, and an iteration adds violators in proportion to the
core set.  The two engines make the same iterations, the loop ends on a clean full scan that an independent
computation confirms, and no iteration adds more than its budget."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastimpl._engine as E
from corevector import engine_policy
from corevector.engine_policy import loop_settings, with_policy
from refimpl import cvr, driver, meb
from refimpl.kernels import KernelSpec


def _problem(m=1500, C_paper=2e3, mu=0.02, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (m, 3))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.3 * rng.standard_normal(m)  # noisy: most points leave the tube
    y = (y - y.mean()) / y.std()
    return cvr.cvr_problem(X, y, KernelSpec("rbf", gamma=0.5), C_paper, mu)


def _every_d2(P, out):
    """Every augmented point's squared distance from the returned centre, in NumPy over the whole problem (the
    n x |S| block of a test-sized problem), and c0: what the certificate and the stop test must agree with."""
    S, a, c0 = np.asarray(out.core_set), np.asarray(out.alpha), P.constant_term or 0.0
    every = np.arange(P.n)
    return a @ P.block(S, S) @ a - 2 * P.block(every, S) @ a + P.shifted_linear_term(every) + c0, c0


@pytest.fixture
def wide_from_1000(monkeypatch):
    """The wide (and so dense) loop from 1,000 augmented points, so that a test-sized problem runs it."""
    monkeypatch.setattr(engine_policy, "WIDE_MIN_N_MIRROR", 1000)


class _Counting(E.FastMEBOps):
    full = sampled = 0

    def scan(self, idx, k, d2_over):
        if idx is None:
            type(self).full += 1
        else:
            type(self).sampled += 1
        return super().scan(idx, k, d2_over)


def _fit(fit_meb, problem, **kw):
    return with_policy(fit_meb)(problem, 1e-2, stop="hybrid", solver="auto", random_state=0, n_confirm=100, **kw)


def test_policy_makes_only_mirrored_problems_dense():
    from refimpl.cvm import two_class_problem
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 2))
    cls = two_class_problem(X, np.where(X[:, 0] > 0, 1.0, -1.0), KernelSpec("rbf", gamma=1.0), 10.0)
    assert loop_settings("auto", _problem(m=200))["dense"] is True
    assert loop_settings("auto", cls)["dense"] is False
    assert "dense" not in loop_settings("smo", _problem(m=200))  # the papers' loop


@pytest.mark.parametrize("seed", [0, 1])
def test_fast_and_ref_make_the_same_dense_iterations(wide_from_1000, seed):
    a = _fit(E.fit_meb, _problem(seed=seed))
    b = _fit(meb.fit_meb, _problem(seed=seed))
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-9)
    assert a.n_iter == b.n_iter
    np.testing.assert_allclose(a.r_cert2, b.r_cert2, rtol=1e-10)


def test_the_loop_ends_on_a_clean_full_scan_an_independent_computation_confirms(wide_from_1000):
    _Counting.full = _Counting.sampled = 0
    P = _problem()
    out = _fit(meb.fit_meb, P, ops_class=_Counting)
    assert out.converged
    assert _Counting.full >= 2 and _Counting.sampled >= 1  # it started sampling and went on with full scans
    # every augmented point's d^2 from the returned alpha, in NumPy over the whole problem (the m x m block of
    # a test-sized problem): the furthest is the certificate, and each one passes the hybrid test at the end
    d2, c0 = _every_d2(P, out)
    np.testing.assert_allclose(d2.max(), out.r_cert2, rtol=1e-9)
    ball = driver.Ball.make(out.radius2, out.margin, c0, 0.0, 0.0)
    thr = driver.d2_threshold("hybrid", 1e-2, ball)
    assert d2.max() <= thr * (1 + 1e-12)


def test_no_iteration_adds_more_than_its_budget(wide_from_1000):
    out = _fit(E.fit_meb, _problem())
    sizes = np.asarray(out.history["core_set_size"])
    budget = np.maximum(driver.WIDE_MAX_ADD, (driver.DENSE_ADD * sizes[:-1]).astype(int))
    assert np.all(np.diff(sizes) <= budget)
    assert np.diff(sizes).max() > driver.WIDE_MAX_ADD  # the budget grew with the core set at least once


def test_rows_kept_on_disk_make_the_same_dense_fit(wide_from_1000, tmp_path, monkeypatch):
    """A memory map goes through the chunked numerics (corevector.chunked), whose problem view must make the
    driver choose its full scans as the in-memory problem does: the same core set and coefficients."""
    from corevector import CVR
    from corevector.chunked import rows as chunked_rows
    monkeypatch.setattr(chunked_rows, "MATERIALIZE_BYTES", 20_000)  # kept on disk (36 KB), pilots read in pieces
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, (1500, 3)).astype(np.float32)  # (a float64 map would be read in place)
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.3 * rng.standard_normal(1500)
    np.save(tmp_path / "x.npy", X)
    X = X.astype(np.float64)
    Xm = np.load(tmp_path / "x.npy", mmap_mode="r")
    kw = dict(C=10.0, mu=0.05, gamma=0.5, random_state=0)  # (the pilots and gamma='scale' sum X in another order)
    a = CVR(**kw).fit(X, y)
    b = CVR(**kw).fit(Xm, y)
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)


def test_a_full_scan_with_few_violators_ends_the_loop_and_certifies_them(wide_from_1000):
    """refimpl.driver._CoreSetLoop.few_left: with n_confirm=5 the sampled test lets a fraction 1/(59 x 6) of the
    points violate, so a full scan with at most 3,000 // 354 = 8 violators ends the loop; the certificate is its
    maximum, at the final centre, and so reports them."""
    left = []
    for seed in (0, 1, 2):
        P = _problem(seed=seed)
        out = with_policy(E.fit_meb)(P, 1e-2, stop="hybrid", solver="auto", random_state=0, n_confirm=5)
        d2, c0 = _every_d2(P, out)
        S = np.asarray(out.core_set)
        np.testing.assert_allclose(d2.max(), out.r_cert2, rtol=1e-9)
        thr = driver.d2_threshold("hybrid", 1e-2, driver.Ball.make(out.radius2, out.margin, c0, 0.0, 0.0))
        assert out.converged and not np.any(d2[S] > thr * (1 + 1e-12))  # only points outside the core set
        left.append(int(np.sum(d2 > thr)))
    assert max(left) <= P.n // (59 * 6)
    assert max(left) > 0  # the rule ended a loop before its scan was clean


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(60, 240), noise=st.floats(0.0, 1.0), C_paper=st.sampled_from([2e2, 2e3, 2e4]),
       mu=st.sampled_from([0.005, 0.02, 0.1]), seed=st.integers(0, 2**16), n_confirm=st.sampled_from([0, 5, 100]))
def test_dense_loops_agree_in_both_engines_on_random_problems(monkeypatch, m, noise, C_paper, mu, seed, n_confirm):
    """fast == ref on random mirrored problems run through the wide, dense loop (from 100 augmented points, so that
    every iteration of these small problems scans in full): the same iterations, core set and coefficients, and
    a certificate that is the largest squared distance over every point."""
    monkeypatch.setattr(engine_policy, "WIDE_MIN_N_MIRROR", 100)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (m, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + noise * rng.standard_normal(m)
    y = (y - y.mean()) / (y.std() or 1.0)
    P = cvr.cvr_problem(X, y, KernelSpec("rbf", gamma=0.5), C_paper, mu)
    kw = dict(stop="hybrid", solver="auto", random_state=seed, n_confirm=n_confirm)
    a = with_policy(E.fit_meb)(P, 1e-2, **kw)
    b = with_policy(meb.fit_meb)(P, 1e-2, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-9)
    assert a.n_iter == b.n_iter
    d2, _ = _every_d2(P, a)
    np.testing.assert_allclose(d2.max(), a.r_cert2, rtol=1e-8, atol=1e-12)
