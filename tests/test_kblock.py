"""The kernel block of the fast engine's scans at large d (fastimpl/_kblock.pxi), and the wide samples of
the default loop there (refimpl.driver.WIDE_MAX): the block's sums are a screen whose bound holds, every
decision is the exact path's (fast == ref, the same core sets), the certificate bounds the exact MEB, and
the block respects cache_size."""
import numpy as np
import pytest

from helpers import exact_meb, random_problem
import corevector.engine_policy as policy
from corevector.engine_policy import WIDE_MIN_N as DEFAULT_WIDE_MIN_N  # before any fixture lowers it
from corevector.engine_policy import with_policy


def _default_block_min_work():
    from fastimpl import _engine
    value = _engine._set_block_min_work(0)
    _engine._set_block_min_work(value)
    return value


DEFAULT_KB_MIN_WORK = _default_block_min_work()  # before any fixture lowers it

pytestmark = pytest.mark.filterwarnings("ignore:stop='radius' with eps")
ALPHA_TOL = 1e-6
RADIUS_RTOL = 1e-7


@pytest.fixture
def block_everywhere():
    """The block on whatever d (tests run small d for speed as well)."""
    from fastimpl import _engine
    old = _engine._set_block_policy(1)
    yield
    _engine._set_block_policy(old)


def _fit_both(problem, eps, cache_size=200 * 2**20, **kw):
    from fastimpl._engine import FastMEBOps
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default
    from refimpl.meb import fit_meb as _papers_fit_ref
    from corevector.engine_policy import with_policy
    fit_ref = with_policy(_papers_fit_ref)  # the estimators' solver='auto' by default

    made = []

    def ops(p, cache):
        made.append(FastMEBOps(p, cache))
        return made[-1]
    a = fit_ref(problem, eps, **kw)
    b = fit_fast(problem, eps, ops_class=ops, cache_size=cache_size, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=ALPHA_TOL, rtol=0)
    assert a.n_iter == b.n_iter
    for x, y in ((a.radius2, b.radius2), (a.r_cert2, b.r_cert2)):
        assert abs(x - y) <= RADIUS_RTOL * max(1.0, abs(x))
    return a, b, made[0]


@pytest.fixture(autouse=True)
def wide_at_test_sizes(monkeypatch):
    """solver='auto' widens its samples from corevector.engine_policy.WIDE_MIN_N points on, and the block runs from
    KB_MIN_WORK = m d on; these problems are smaller, so both thresholds are lowered to run those paths at
    test sizes (test_wide_samples_from_wide_min_n checks
    the threshold itself)."""
    from fastimpl import _engine
    monkeypatch.setattr(policy, "WIDE_MIN_N", 0)
    old = _engine._set_block_min_work(0)  # and the block's m d threshold (test_block_from_its_min_work)
    yield
    _engine._set_block_min_work(old)


@pytest.mark.parametrize("formulation", ["meb", "one_class", "two_class"])
@pytest.mark.parametrize("solver,sample_size", [("auto", 59), ("auto", None), ("smo", 59)])
def test_block_scans_choose_the_reference_core_vectors(formulation, solver, sample_size):
    """d = 20 (the block's default range): the same core vectors, weights and certificate as the NumPy
    reference, with the wide samples of solver='auto' and the papers' loop alike."""
    problem = random_problem(formulation, "rbf", m=700, d=20, C=10.0, seed=5, gamma=0.05)
    a, b, ops = _fit_both(problem, 1e-3, stop="margin" if formulation != "meb" else "radius", solver=solver,
                          sample_size=sample_size, random_state=5)
    on, filled, nbytes, _, _ = ops.block_state()
    assert on and filled == len(b.core_set) and nbytes > 0
    assert len(b.core_set) > 20


def test_block_with_a_tail_and_weights(block_everywhere):
    """d = 3 with the block forced, per-point ridges (sample weights) and a core set beyond one panel: the
    tail of core vectors outside the block is summed exactly, and the fit is still the reference's."""
    problem = random_problem("two_class", "rbf", m=800, d=3, C=10.0, seed=2, weighted=True, gamma=2.0)
    a, b, ops = _fit_both(problem, 1e-2, stop="hybrid", sample_size=59, random_state=2, solver="auto")
    assert len(b.core_set) > 130 and ops.block_state()[0]


def test_screened_sums_stay_within_their_bound():
    """|block sum - exact sum| <= rho * sum |coef| k_f for every input, at the centre a fit reached
    (Fashion-like nonnegative inputs, d = 64, a wide kernel: values near 1, where single precision rounds
    most)."""
    from fastimpl._engine import FastMEBOps, _block_sums
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default

    rng = np.random.default_rng(0)
    X = rng.random((900, 64)) ** 3
    y = np.where(X[:, :8].sum(1) + 0.2 * rng.normal(size=900) > 1.0, 1.0, -1.0)
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    problem = cvm.two_class_problem(X, y, make_kernel_spec(X, "rbf", gamma=0.02), 1.0)
    made = []
    fit_fast(problem, 1e-2, stop="hybrid", random_state=0, ops_class=lambda p, c: made.append(FastMEBOps(p, c))
             or made[-1])
    scr, scale, ext, rho = _block_sums(made[0], np.arange(900))
    assert 0 < rho < 1e-6 and scale.min() > 0
    assert np.all(np.abs(scr - ext) <= rho * scale + 1e-13 * scale)
    assert np.max(np.abs(scr - ext)) > 0  # single precision did round


def test_certificate_through_the_block_bounds_the_exact_meb():
    """Full scans through the block: R^2 <= r*^2 <= (1+eps)^2 R^2 against cvxopt, r_cert^2 >= r*^2."""
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default
    problem = random_problem("two_class", "rbf", m=150, d=20, C=10.0, seed=3, gamma=0.05)
    lo, hi, _ = exact_meb(problem)
    for eps in (1e-1, 1e-3):
        res = fit_fast(problem, eps, sample_size=None, random_state=0, solver="auto", stop="radius")
        assert res.converged and res.radius2 <= hi * (1 + 1e-9)
        assert lo <= (1 + eps) ** 2 * res.radius2 * (1 + 1e-9)
        assert res.r_cert2 >= lo * (1 - 1e-9)


def test_block_stays_within_cache_size_and_stops_growing():
    """A budget too small for the whole block: the block stops at its share of cache_size (one panel of
    128 core vectors here), the core vectors beyond it are summed exactly -- or, once they outnumber the
    support, the scans take the support's path -- everything held stays within the budget, and the fit is
    the reference's.  A budget too small for one panel leaves the block off."""
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2000, 20))
    y = np.where(X[:, 0] + 0.05 * rng.normal(size=2000) > 0, 1.0, -1.0)
    problem = cvm.two_class_problem(X, y, make_kernel_spec(X, "rbf", gamma=0.01), 100.0)
    kw = dict(stop="hybrid", sample_size=59, random_state=7, solver="auto")
    budget = 2 * 2**20
    a, b, ops = _fit_both(problem, 1e-2, cache_size=budget, **kw)
    on, filled, nbytes, _, _ = ops.block_state()
    rows, factor, stores, peak, held_budget = ops.memory_state()
    assert on and filled == 128 < len(b.core_set) and nbytes <= 0.75 * budget
    assert rows + factor + stores <= budget
    assert ops.support_scans() > 0 and np.count_nonzero(b.alpha) < len(b.core_set) - filled
    _, _, ops = _fit_both(problem, 1e-2, cache_size=2**20, **kw)
    assert not ops.block_state()[0]


def test_support_scans_on_blas_rows_split_over_threads_bit_for_bit():
    """At d >= 16 without the block (a budget too small for one panel), the support's full and sampled scans
    split their GEMM blocks over the engine's threads while fit_meb keeps BLAS single-threaded (10^6 x 784,
    stop='radius': 36.6 -> 23.5 s): 1 and 2 threads give the same fit bit for bit, and it is the
    reference's."""
    from threadpoolctl import threadpool_limits

    from fastimpl import _engine
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2500, 20))  # two chunks of a full scan
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=len(X)) > 0, 1.0, -1.0)
    problem = cvm.two_class_problem(X, y, make_kernel_spec(X, "rbf", gamma=0.01), 10.0)
    kw = dict(stop="hybrid", sample_size=300, random_state=7, solver="auto", cache_size=2**20)
    old = _engine._set_scan_parallel_min_work(0)
    try:
        with threadpool_limits(limits=1, user_api="openmp"):
            fits = [with_policy(_engine.fit_meb)(problem, 1e-2, **kw)]
        with threadpool_limits(limits=2, user_api="openmp"):
            _, b, ops = _fit_both(problem, 1e-2, **kw)  # the reference's
        assert not ops.block_state()[0]
        fits.append(b)
    finally:
        _engine._set_scan_parallel_min_work(old)
    np.testing.assert_array_equal(fits[0].core_set, fits[1].core_set)
    np.testing.assert_array_equal(fits[0].alpha, fits[1].alpha)
    assert fits[0].r_cert2 == fits[1].r_cert2


def test_threads_give_the_same_fit_bit_for_bit():
    """The block's extension and full scans run in parallel tiles and chunks, each value computed by one
    thread in a fixed order: 1 and 2 threads give the same model bit for bit."""
    from threadpoolctl import threadpool_limits

    from corevector import CVMClassifier
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 40))
    y = (X[:, 0] + X[:, 1] ** 2 + rng.normal(size=3000) > 1).astype(int)
    from fastimpl import _engine
    models = []
    old = _engine._set_block_parallel_min_work(0)
    try:
        for t in (1, 2):
            with threadpool_limits(limits=t, user_api="openmp"):
                models.append(CVMClassifier(random_state=0, sample_size=None).fit(X, y))
    finally:
        _engine._set_block_parallel_min_work(old)
    np.testing.assert_array_equal(models[0].core_set_, models[1].core_set_)
    np.testing.assert_array_equal(models[0].dual_coef_, models[1].dual_coef_)
    assert models[0].kernel_evaluations_ == models[1].kernel_evaluations_  # counted outside the threads


def test_parallel_sampled_scans_give_the_serial_fit_bit_for_bit():
    """Wide samples sum their candidates through the block in parallel chunks (tails included: the block
    is extended only every KB_EXTEND_MIN core vectors); each candidate's sums are computed as the serial
    ones are, so the serial scans, 1 thread and 2 threads give the same model bit for bit."""
    from threadpoolctl import threadpool_limits

    from corevector import CVMClassifier
    from fastimpl import _engine
    rng = np.random.default_rng(2)
    X = rng.normal(size=(4000, 30))
    y = (X[:, 0] + X[:, 1] ** 2 + rng.normal(size=4000) > 1).astype(int)
    models = []
    for work, t in ((2**62, 2), (0, 1), (0, 2)):
        old = _engine._set_sample_parallel_min(work)
        try:
            with threadpool_limits(limits=t, user_api="openmp"):
                models.append(CVMClassifier(random_state=0).fit(X, y))
        finally:
            _engine._set_sample_parallel_min(old)
    assert len(models[0].core_set_) > 100
    for m in models[1:]:
        np.testing.assert_array_equal(models[0].core_set_, m.core_set_)
        np.testing.assert_array_equal(models[0].dual_coef_, m.dual_coef_)
        assert models[0].certified_ratio_ == m.certified_ratio_


@pytest.mark.parametrize("n_new,growth,expected", [(0, 1, 2), (10, 32, 64), (10, 64, 64), (70, 8, 8),
                                                   (128, 8, 4), (200, 1, 1)])
def test_wide_samples_grow_while_violators_are_rare(n_new, growth, expected):
    from refimpl.driver import WIDE_MAX_ADD, next_growth
    assert next_growth(growth, n_new, WIDE_MAX_ADD) == expected


def test_wide_samples_where_the_block_runs_whatever_the_layout():
    import scipy.sparse as sp

    from corevector.engine_policy import wide_samples
    dense = random_problem("two_class", "rbf", m=50, d=20, seed=0, gamma=0.1)
    assert wide_samples("auto", dense) and not wide_samples("smo", dense)
    assert not wide_samples("auto", random_problem("two_class", "rbf", m=50, d=3, seed=0, gamma=0.1))
    assert not wide_samples("auto", random_problem("two_class", "laplacian", m=50, d=20, seed=0, gamma=0.1))
    assert not wide_samples("auto", random_problem("cvr", "rbf", m=50, d=20, seed=0, gamma=0.1))
    import dataclasses
    # CSR rows of the same data decide as the dense ones: same draws, same model (tests/test_sparse.py)
    assert wide_samples("auto", dataclasses.replace(dense, X=sp.csr_matrix(dense.X)))


def test_wide_samples_from_wide_min_n(monkeypatch):
    """Below WIDE_MIN_N points the wide samples cost more than they save (corevector/engine_policy.py's measurements):
    the default loop keeps the papers' sample there, and widens from the threshold on."""
    import numpy as np

    from corevector.engine_policy import wide_samples
    WIDE_MIN_N = DEFAULT_WIDE_MIN_N
    monkeypatch.setattr(policy, "WIDE_MIN_N", WIDE_MIN_N)  # the autouse fixture lowered it
    small = random_problem("two_class", "rbf", m=50, d=20, seed=0, gamma=0.1)
    import dataclasses
    assert not wide_samples("auto", small)
    rows = np.resize(small.X, (WIDE_MIN_N, small.X.shape[1]))
    assert wide_samples("auto", dataclasses.replace(small, X=rows))
    assert not wide_samples("auto", dataclasses.replace(small, X=rows[:-1]))


def test_block_from_its_min_work():
    """By default the block runs from KB_MIN_WORK = m d on (below, the exact rows cost less): off for
    1,000 x 20, on for 20,000 x 20.  (Fits with the block against the reference: the tests above.)"""
    from fastimpl import _engine
    from fastimpl._engine import FastMEBOps
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    assert DEFAULT_KB_MIN_WORK > 1000 * 20
    rng = np.random.default_rng(4)
    states = []
    for m in (1000, max(20_000, DEFAULT_KB_MIN_WORK // 20)):
        X = rng.normal(size=(m, 20))
        y = np.where(X[:, 0] + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)
        problem = cvm.two_class_problem(X, y, make_kernel_spec(X, "rbf", gamma=0.05), 10.0)
        old = _engine._set_block_min_work(DEFAULT_KB_MIN_WORK)
        try:
            states.append(FastMEBOps(problem).block_state()[0])  # decided when the numerics are set up
        finally:
            _engine._set_block_min_work(old)
    assert states == [False, True]
