"""fastimpl == refimpl past the block sizes: n > 4,096 augmented points.

test_fast_vs_ref.py compares the engines on problems of at most a few hundred points, where every
scan is one block.  Here n exceeds both the compiled engine's 2,048-point scan chunks and the
reference's 4,096-row NumPy blocks (SCAN_BLOCK of refimpl.meb and refimpl.constrained_meb), so the sampled candidate
scans, the certificate's full scan and the per-block bookkeeping are compared across block
boundaries, for every formulation, with fixed seeds.  Both engines make the same random draws, so
they must pick the same core vectors; alpha and the radii agree to round-off (the tolerances of
test_fast_vs_ref.py).
"""
import numpy as np
import pytest

from helpers import random_problem

ALPHA_TOL = 1e-6
RADIUS_RTOL = 1e-7
N = 4500     # > 4,096 (and 2 x 2,048); CVR has 2 N augmented points

pytestmark = [pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore:stop='radius' with eps")]


@pytest.mark.parametrize("formulation,kernel", [("meb", "rbf"), ("one_class", "poly"), ("two_class", "rbf"),
                                                ("two_class", "laplacian"), ("cvr", "rbf")])
def test_engines_agree_past_the_block_sizes(formulation, kernel):
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default
    from refimpl.meb import fit_meb as _papers_fit_ref
    from corevector.engine_policy import with_policy
    fit_ref = with_policy(_papers_fit_ref)  # the estimators' solver='auto' by default

    opts = {"gamma": 0.3} if kernel != "poly" else {"gamma": 0.3, "coef0": 1.0, "degree": 2}
    problem = random_problem(formulation, kernel, m=N, d=3, C=10.0, seed=11, **opts)
    assert problem.n > 4096
    # eps = 1e-2 under the paper's rule keeps the reference's core-set QPs small (CVR's diagonal
    # mu m / C spreads alpha over many points); the scans are over all n points whatever eps is
    kw = dict(sample_size=59, random_state=11, stop="radius", certify=True)
    a = fit_ref(problem, 1e-2, **kw)
    b = fit_fast(problem, 1e-2, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=ALPHA_TOL, rtol=0)
    assert a.n_iter == b.n_iter
    for x, y in ((a.radius2, b.radius2), (a.r_cert2, b.r_cert2), (a.margin_scale, b.margin_scale)):
        assert abs(x - y) <= RADIUS_RTOL * max(1.0, abs(x))
    # the certificate scanned every block: it encloses the core set's ball
    assert a.r_cert2 >= a.radius2 * (1 - 1e-12)


@pytest.mark.parametrize("formulation", ["meb", "two_class"])
@pytest.mark.parametrize("solver", ["smo", "auto"])
def test_full_scans_agree_past_the_block_sizes(formulation, solver):
    """sample_size=None: every iteration scans all n > 4,096 points.  solver='smo' adds the furthest point
    (the reference finds the block of the first tied maximum, then the point in it); 'auto' adds the
    MAX_ADD furthest violators, merged across the blocks.  Some core vectors lie past the first block."""
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default
    from refimpl.driver import MAX_ADD
    from refimpl.meb import fit_meb as _papers_fit_ref
    from corevector.engine_policy import with_policy
    fit_ref = with_policy(_papers_fit_ref)  # the estimators' solver='auto' by default

    problem = random_problem(formulation, "rbf", m=N, d=3, C=10.0, seed=11, gamma=0.3)
    kw = dict(sample_size=None, random_state=11, stop="radius", solver=solver)
    a = fit_ref(problem, 1e-2, **kw)
    b = fit_fast(problem, 1e-2, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=ALPHA_TOL, rtol=0)
    assert a.converged and a.n_iter == b.n_iter and a.core_set.max() >= 4096
    steps = np.diff(a.history["core_set_size"])
    assert steps.max() == (MAX_ADD if solver == "auto" else 1)


def test_mmda_engines_agree_past_the_block_sizes():
    """The constrained MEB of MMDA (004) with one previous direction: scans over n > 4,096."""
    from corevector import MMDA

    rng = np.random.default_rng(12)
    y = rng.integers(0, 2, N)
    X = rng.normal(size=(N, 3)) + 1.2 * y[:, None]
    kw = dict(n_components=2, eps=1e-2, gamma=0.5, random_state=12)
    a = MMDA(impl="ref", **kw).fit(X, y)
    b = MMDA(impl="fast", **kw).fit(X, y)
    for pa, pb in zip(a.expansion_index_, b.expansion_index_):
        np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(a.core_set_size_, b.core_set_size_)
    for ca, cb in zip(a.expansion_coef_, b.expansion_coef_):
        np.testing.assert_allclose(ca, cb, atol=1e-6 * max(1.0, np.abs(ca).max()), rtol=0)
    np.testing.assert_allclose(a.certified_ratio_, b.certified_ratio_, rtol=1e-7)


@pytest.fixture
def taylor_policy():
    """Set the fast engine's Taylor-screen policy for one test (0: by cost, 1: always where allowed,
    -1: never) and restore it afterwards."""
    from fastimpl._engine import _set_taylor_policy

    old = _set_taylor_policy(0)
    yield _set_taylor_policy
    _set_taylor_policy(old)


@pytest.mark.parametrize("gamma,C,policy,screens,last", [(0.3, 10.0, 0, True, "float"),
                                                         (1e-2, 1e5, -1, False, "float"),
                                                         (1e-2, 1e5, 0, True, "taylor")])
def test_screening_falls_back_to_exact_scans_where_it_cannot_decide(gamma, C, policy, screens, last,
                                                                    taylor_policy):
    """The fast engine screens scans -- with a single-precision exp, or by a Taylor expansion of a wide
    Gaussian -- and recomputes in double every candidate within the screen's error bound of a decision.
    A wide kernel at large C puts nearly every candidate within the single-precision bound (the margin is
    tiny against it), so that screen turns itself off; the Taylor expansion, whose bound is at round-off,
    still decides there (gamma = 0.3 is too narrow for it on this box: the float screen runs).  Either way
    the engines pick the same core vectors with the same weights, past the compiled engine's 2,048-point
    chunks."""
    from fastimpl._engine import FastMEBOps
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default
    from refimpl.meb import fit_meb as _papers_fit_ref
    from corevector.engine_policy import with_policy
    fit_ref = with_policy(_papers_fit_ref)  # the estimators' solver='auto' by default

    taylor_policy(policy)
    problem = random_problem("two_class", "rbf", m=2500, d=2, C=C, seed=5, gamma=gamma)
    made = []

    def fast_ops(p, cache):
        made.append(FastMEBOps(p, cache))
        return made[-1]

    kw = dict(sample_size=59, random_state=5, stop="hybrid", certify=True)
    a = fit_ref(problem, 1e-2, **kw)
    b = fit_fast(problem, 1e-2, ops_class=fast_ops, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=ALPHA_TOL, rtol=0)
    for x, y in ((a.radius2, b.radius2), (a.r_cert2, b.r_cert2)):
        assert abs(x - y) <= RADIUS_RTOL * max(1.0, abs(x))
    state = made[0].screening_state()
    assert state[0] is screens  # the certificate's full scan kept or dropped screening
    assert state[3] == last     # ... and which screen it ran


@pytest.mark.parametrize("formulation,weighted", [("meb", False), ("one_class", False), ("two_class", False),
                                                  ("two_class", True), ("cvr", False)])
def test_taylor_screen_leaves_every_fit_as_the_reference_makes_it(formulation, weighted, taylor_policy):
    """A Gaussian kernel wide against the data (2 gamma R^2 < 2 on this box) lets the fast engine
    screen every scan -- sampled and full, CVR's mirrored halves included -- by the Taylor expansion of
    _taylor.h (forced here even where the kernel sums would cost less).  Its error bound is proved, and
    every value a decision reads is computed again in double, so the fits are the reference's."""
    from fastimpl._engine import FastMEBOps
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default
    from refimpl.meb import fit_meb as _papers_fit_ref
    from corevector.engine_policy import with_policy
    fit_ref = with_policy(_papers_fit_ref)  # the estimators' solver='auto' by default

    taylor_policy(1)
    problem = random_problem(formulation, "rbf", m=2100, d=3, C=10.0, seed=7, gamma=0.02, weighted=weighted)
    made = []

    def fast_ops(p, cache):
        made.append(FastMEBOps(p, cache))
        return made[-1]

    # (CVR under 'hybrid' makes most of its 4,200 points core vectors: slow in the reference)
    kw = dict(sample_size=59, random_state=7, stop="radius" if formulation == "cvr" else "hybrid", certify=True)
    a = fit_ref(problem, 1e-2, **kw)
    b = fit_fast(problem, 1e-2, ops_class=fast_ops, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=ALPHA_TOL, rtol=0)
    assert a.n_iter == b.n_iter
    for x, y in ((a.radius2, b.radius2), (a.r_cert2, b.r_cert2)):
        assert abs(x - y) <= RADIUS_RTOL * max(1.0, abs(x))
    full_screens, _, _, last = made[0].screening_state()
    assert last == "taylor"
    assert full_screens  # the certificate's chunks were decided by the screen (at most half recomputed)


def test_cache_size_bounds_cache_rows_cholesky_factor_and_stores_together():
    """cache_size is the budget of all the memory the core set holds: the active set's
    Cholesky factor (1,023 free coordinates here, 8.4 MB charged; twice that while its buffer grows)
    and the stores of the core and support vectors take their share of the budget and evict cached
    kernel rows, so rows, factor and stores together stay within
    cache_size (plus the two rows a step holds at once) where the same fit with room for everything
    held more.  The fit is the same, bit for bit, with a budget that holds every row."""
    from fastimpl._engine import FastMEBOps
    from fastimpl._engine import fit_meb as _papers_fit_fast
    from corevector.engine_policy import with_policy
    fit_fast = with_policy(_papers_fit_fast)  # the estimators' solver='auto' by default

    problem = random_problem("two_class", "rbf", m=1200, d=2, C=1.0, seed=3, gamma=1.0)
    kw = dict(solver="active_set", stop="margin", sample_size=59, random_state=0, n_confirm=30)
    runs = {}
    for budget in (200 * 2**20, 18 * 2**20):
        made = []

        def ops(p, cache):
            made.append(FastMEBOps(p, cache))
            return made[-1]

        runs[budget] = (fit_fast(problem, 1e-3, ops_class=ops, cache_size=budget, **kw), made[0].memory_state())
    (big, (big_rows, big_factor, big_stores, big_peak, _)), (small, (rows, factor, stores, peak, budget)) = runs.values()
    np.testing.assert_array_equal(big.core_set, small.core_set)
    np.testing.assert_array_equal(big.alpha, small.alpha)
    n_core = len(small.core_set)
    assert factor == big_factor > budget // 3            # the factor took a large share of the budget ...
    assert big_peak > budget and rows < big_rows          # ... which, unbounded, the fit overran: rows were evicted
    assert 0 < stores == big_stores < 2**20                # the core and support stores are charged too
    row_bytes = 8 * (n_core + n_core // 4 + 16)
    assert peak <= budget + 2 * row_bytes
    assert rows + factor + stores <= budget
    assert big_peak <= 200 * 2**20
