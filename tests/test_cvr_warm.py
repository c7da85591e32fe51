"""CVR's seeded start and the full scans of its mirrored points (issue 49).

* ``ops.warm`` sets the core set's weights and their gradient (both engines), and the driver's
  ``initial_weights`` start the first solve from the pilot's predicted slacks (xi_i = lambda_i mu m, [000]
  eq. (9)) instead of from the initial pair: the same ball, in fewer SMO steps.
* The fast engine's full scans of mirrored problems take the sums of the inputs in the core set from the
  core-set QP's gradient (``known_sums``): they equal the kernel sums an independent computation gives, and the
  scans' results are those of every point's distance computed in NumPy.
* Kernel expansions at d >= 16 run BLAS single-threaded and leave the caller's BLAS threads as they were.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info, threadpool_limits

import fastimpl._engine as E
from corevector import CVR
from refimpl import cvr, driver, meb
from refimpl.kernels import KernelSpec, kernel_block

ENGINES = [E.FastMEBOps, meb.MEBOps]


def _problem(m=300, noise=0.5, C_paper=2e3, mu=0.02, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (m, d))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + noise * rng.standard_normal(m)
    y = (y - y.mean()) / (y.std() or 1.0)
    return cvr.cvr_problem(X, y, KernelSpec("rbf", gamma=0.5), C_paper, mu)


def _d2_of_core(P, S, a):
    """Every core vector's squared distance from the centre of weights a, from P's blocks (NumPy)."""
    Q = P.block(S, S)
    c0 = P.constant_term or 0.0
    return a @ Q @ a - 2 * Q @ a + P.shifted_linear_term(S) + c0


def _every_d2(P, S, a):
    every = np.arange(P.n)
    return a @ P.block(S, S) @ a - 2 * P.block(every, S) @ a + P.shifted_linear_term(every) + (P.constant_term or 0.0)


@pytest.mark.parametrize("cls", ENGINES)
def test_warm_sets_the_weights_and_their_gradient(cls):
    P = _problem()
    ops = cls(P, 64 * 2**20)
    ops.start(0, P.m)
    ops.add([3, 7, P.m + 11, 40, P.m + 41, 150])
    S = np.asarray(ops.core_set())
    w = np.linspace(0.0, 2.0, len(S))
    ops.warm(w)
    a = np.asarray(ops.weights())
    np.testing.assert_allclose(a, w / w.sum(), rtol=1e-15)
    ball = ops.ball()
    d2 = _d2_of_core(P, S, a)
    np.testing.assert_allclose(ball.d2_core_max, d2.max(), rtol=1e-12)
    np.testing.assert_allclose(ball.d2_sv_min, d2[a > 0].min(), rtol=1e-12)
    # and the solve from there reaches the ball of the core set, as from a cold start
    ops.solve(1e-12, "smo", 10**6)
    cold = cls(P, 64 * 2**20)
    cold.start(0, P.m)
    cold.add([3, 7, P.m + 11, 40, P.m + 41, 150])
    cold.solve(1e-12, "smo", 10**6)
    np.testing.assert_allclose(ops.ball().R2, cold.ball().R2, rtol=1e-10)


@pytest.mark.parametrize("cls", ENGINES)
@pytest.mark.parametrize("w, what", [([1.0, -1.0, 1.0], "nonnegative"), ([1.0, np.nan, 1.0], "finite"),
                                     ([0.0, 0.0, 0.0], "not all zero"), ([1.0, 1.0], "weights for a core set")])
def test_warm_refuses_weights_off_the_simplex(cls, w, what):
    P = _problem(m=50)
    ops = cls(P, 2**20)
    ops.start(0, P.m)
    ops.add([5])
    with pytest.raises(ValueError, match=what):
        ops.warm(w)


def test_initial_weights_are_checked_against_initial():
    with pytest.raises(ValueError, match="one weight per initial point"):
        driver.warm_weights([1, 2, 3], [1, 2, 3], [1.0, 2.0])
    with pytest.raises(ValueError, match="finite and nonnegative"):
        driver.warm_weights([1, 2], [1, 2], [1.0, -2.0])
    # a point listed twice counts once, at its first weight; core vectors not listed start at 0
    np.testing.assert_array_equal(driver.warm_weights([9, 1, 2], [1, 2, 1], [3.0, 4.0, 5.0]), [0.0, 3.0, 4.0])
    assert driver.warm_weights([9], [1], [1.0]) is None


def _seed(P, C_paper, mu):
    """A pilot's start: the points a kernel ridge fit on a subset puts outside its tube, and their slacks."""
    m, y = P.m, P.offset[:P.m] * C_paper / 2.0
    rng = np.random.default_rng(1)
    a = np.sort(rng.choice(m, 100, replace=False))
    K = kernel_block(P.kernel, P.X[a], P.X[a]) + 1.0
    beta = np.linalg.solve(K + np.eye(len(a)) / 10.0, y[a])
    r = y - (kernel_block(P.kernel, P.X, P.X[a]) + 1.0) @ beta
    q = np.quantile(np.abs(r), 0.3)
    up, lo = np.flatnonzero(r > q), np.flatnonzero(r < -q)
    return np.concatenate([up, m + lo]), np.concatenate([r[up] - q, -r[lo] - q])


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_a_warm_start_reaches_the_cold_starts_model_in_fewer_steps(impl, monkeypatch):
    """CVR on noisy targets, seeded by its pilot: started from the pilot's slacks, the first core-set QP takes
    fewer SMO steps than from the initial pair's weights, and both fits end certified, with the same
    accuracy."""
    import corevector.cvr_pilot as pilot
    X, y = _noisy(2000, seed=3)
    warm = CVR(random_state=0, impl=impl).fit(X, y)
    real = pilot._outside_of
    monkeypatch.setattr(pilot, "_outside_of", lambda *a, **k: (real(*a, **k)[0], None))
    cold = CVR(random_state=0, impl=impl).fit(X, y)
    assert cold._initial_weights is None and warm._initial_weights is not None
    assert warm.history_["inner_steps"][0] < 0.75 * cold.history_["inner_steps"][0]
    for fit in (warm, cold):
        assert fit.certified_ratio_ <= (1 + fit.eps) ** 2
    assert abs(warm.score(X, y) - cold.score(X, y)) < 0.01


def test_the_engines_make_the_same_warm_started_fit():
    C_paper, mu = 2e3, 0.02
    P = _problem(m=400, noise=1.0, C_paper=C_paper, mu=mu)
    initial, slack = _seed(P, C_paper, mu)
    kw = dict(solver="smo", stop="hybrid", random_state=0, n_confirm=10, initial=initial, initial_weights=slack)
    a, b = E.fit_meb(P, 1e-3, **kw), meb.fit_meb(P, 1e-3, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-9)
    assert a.n_iter == b.n_iter


@settings(max_examples=25, deadline=None)
@given(m=st.integers(30, 200), noise=st.floats(0.0, 1.5), n_add=st.integers(0, 120), seed=st.integers(0, 2**16),
       d=st.sampled_from([2, 20]))
def test_known_sums_are_the_kernel_sums_of_the_inputs_in_the_core_set(m, noise, n_add, seed, d):
    """After solves and additions, known_sums gives, for each input with a half in the core set, the sum over the
    support of alpha_t s_t k(x_t, x_p) as NumPy computes it, and a full scan's maximum and violators are those of
    every point's distance computed in NumPy."""
    P = _problem(m=m, noise=noise, seed=seed, d=d)
    rng = np.random.default_rng(seed)
    ops = E.FastMEBOps(P, 64 * 2**20)
    ops.start(0, m)
    ops.add([z for z in rng.choice(2 * m, min(n_add, 2 * m), replace=False).tolist() if not ops.in_core(z)])
    ops.solve(1e-10, "smo", 10**6)
    ops.add([z for z in dict.fromkeys(rng.choice(2 * m, 10).tolist()) if not ops.in_core(z)])  # weight 0
    S, a = np.asarray(ops.core_set()), np.asarray(ops.weights())
    rows, ka = ops.known_sums()
    np.testing.assert_array_equal(rows, np.unique(S % m))
    sv = a > 0
    s = np.where(S[sv] < m, 1.0, -1.0)
    direct = kernel_block(P.kernel, P.X[rows], P.X[S[sv] % m]) @ (a[sv] * s)
    np.testing.assert_allclose(ka, direct, rtol=1e-9, atol=1e-12)
    d2 = _every_d2(P, S, a)
    thr = float(np.quantile(d2, 0.8))
    scan = ops.scan(None, 5, thr)
    np.testing.assert_allclose(scan.d2, d2.max(), rtol=1e-9, atol=1e-12)
    over = np.flatnonzero(d2 > thr * (1 + 1e-9))
    top = set(np.asarray(scan.top).tolist())
    expect = set(over[np.argsort(-d2[over], kind="stable")][:5].tolist())
    assert len(top) == min(5, len(np.flatnonzero(d2 > thr)))
    assert top >= expect if len(expect) < 5 else len(top & expect) >= len(expect) - 1


def test_known_sums_are_for_mirrored_problems_only():
    from refimpl.cvm import two_class_problem
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    P = two_class_problem(X, np.where(X[:, 0] > 0, 1.0, -1.0), KernelSpec("rbf", gamma=1.0), 10.0)
    ops = E.FastMEBOps(P, 2**20)
    ops.start(0, 1)
    assert ops.known_sums() is None


def _noisy(m=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (m, 4))
    return X, np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 1.5 * rng.standard_normal(m)


def test_a_seeded_cvr_fit_starts_warm_in_both_engines_and_from_rows_on_disk(tmp_path):
    """Noisy targets: the pilot leaves most points outside the tube, the core set starts from them with their
    predicted slacks; the reference, the fast engine and a fit of rows kept in a float64 memory map agree."""
    X, y = _noisy()
    a = CVR(random_state=0).fit(X, y)
    assert a._pilot_info["p"] >= CVR.SEED_MIN_OUTSIDE and a._initial_weights is not None
    assert len(a._initial_weights) == len(a._initial) and np.all(a._initial_weights > 0)
    b = CVR(random_state=0, impl="ref").fit(X, y)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-6, atol=1e-9)
    path = tmp_path / "X.npy"
    np.save(path, X)
    c = CVR(random_state=0).fit(np.load(path, mmap_mode="r"), y)
    np.testing.assert_array_equal(a.support_, c.support_)
    np.testing.assert_array_equal(a.dual_coef_, c.dual_coef_)


def test_a_batch_beyond_the_cache_gives_the_gradients_and_fit_of_a_cache_that_holds_it():
    """A batch of new core vectors, and a warm start, whose Q rows the budget cannot hold (d = 3: the rows by
    thread, _parallel_rows and gradient_from_rows): the rows that do not fit are computed in scratch, so the
    small budget holds at most its rows, and the gradients, the ball and the solve from it are those of a
    budget that caches every row, bit for bit; so are CVR's seeded fits."""
    P = _problem(m=1500, noise=1.0)
    rng = np.random.default_rng(1)
    batch = [int(z) for z in rng.choice(np.arange(1, 2 * P.m), 900, replace=False) if z != P.m]
    runs = []
    for budget in (64 * 2**20, 400_000):
        ops = E.FastMEBOps(P, budget)
        ops.start(0, P.m)
        ops.add(batch)
        added = ops.ball()
        ops.warm(np.linspace(0.5, 1.5, ops.n_core()))
        warmed = ops.ball()
        ops.solve(1e-6, "smo", 10**6)
        runs.append((added, warmed, ops.ball(), np.asarray(ops.weights()), ops.memory_state()))
    (*big, big_mem), (*small, small_mem) = runs
    for x, y in zip(big[:3], small[:3]):
        assert (x.R2, x.margin, x.d2_core_max, x.d2_sv_min) == (y.R2, y.margin, y.d2_core_max, y.d2_sv_min)
    np.testing.assert_array_equal(big[3], small[3])
    row_bytes = 8 * (len(batch) + 2) * 5 // 4
    assert big_mem.cache > 0.9 * len(batch) * 8 * (len(batch) + 2)  # every row cached ...
    assert small_mem.cache <= small_mem.budget < 0.1 * big_mem.cache and small_mem.cache >= row_bytes  # ... few
    X, y = _noisy(3000, seed=5)
    a = CVR(random_state=0, cache_size=0.5).fit(X, y)
    b = CVR(random_state=0, cache_size=200).fit(X, y)
    assert a._initial_weights is not None and len(a._initial) > 1000
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    assert a.intercept_ == b.intercept_


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_add_warm_gives_add_then_warm_with_the_rows_beyond_the_cache_not_computed(kernel):
    """ops.add_warm(zs, alpha) is add(zs) then warm(alpha), bit for bit in the fast engine (the ball after it and
    the solve from it) and to rounding in the reference; where the budget cannot hold the batch's rows the fast
    engine does not compute the rows it would only have used for their Q_kk and gradient (Q_kk = k(x, x) = 1 for
    a radial kernel): fewer kernel values.  Weights of the wrong length are refused before the core set changes."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, (1500, 3))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + rng.standard_normal(1500)
    P = cvr.cvr_problem(X, (y - y.mean()) / y.std(), KernelSpec(kernel, gamma=0.5), 2e3, 0.02)
    batch = [int(z) for z in rng.choice(np.arange(1, 2 * P.m), 900, replace=False) if z != P.m]
    alpha = rng.uniform(0.5, 1.5, len(batch) + 2)

    def run(make, fused):
        ops = make()
        ops.start(0, P.m)
        e0 = ops.n_eval
        if fused:
            ops.add_warm(batch, alpha)
        else:
            ops.add(batch)
            ops.warm(alpha)
        warmed, evals = ops.ball(), ops.n_eval - e0
        ops.solve(1e-6, "smo", 10**6)
        return warmed, ops.ball(), np.asarray(ops.weights()), evals

    for budget in (64 * 2**20, 400_000):
        plain, fused = (run(lambda: E.FastMEBOps(P, budget), f) for f in (False, True))
        for x, z in zip(plain[:2], fused[:2]):
            assert (x.R2, x.margin, x.d2_core_max, x.d2_sv_min) == (z.R2, z.margin, z.d2_core_max, z.d2_sv_min)
        np.testing.assert_array_equal(plain[2], fused[2])
        if budget < 10**6:
            assert fused[3] < 0.8 * plain[3]       # most of the batch's rows were not computed twice
        else:
            assert fused[3] == plain[3]             # the cache holds them all: nothing to save
    ref = run(lambda: meb.MEBOps(P), True)
    np.testing.assert_allclose([ref[0].R2, ref[1].R2], [fused[0].R2, fused[1].R2], rtol=1e-9)
    np.testing.assert_allclose(ref[2], fused[2], atol=1e-6)
    for make in (lambda: E.FastMEBOps(P, 400_000), lambda: meb.MEBOps(P)):
        ops = make()
        ops.start(0, P.m)
        with pytest.raises(ValueError, match="weights"):
            ops.add_warm(batch, alpha[:-1])
        assert ops.n_core() == 2


def _blas_threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_expansions_at_large_d_run_blas_on_one_thread_and_leave_the_callers_threads():
    rng = np.random.default_rng(0)
    SV, X = rng.standard_normal((700, 32)), rng.standard_normal((3000, 32))
    coef = rng.standard_normal(700)
    spec = KernelSpec("rbf", gamma=0.05)
    with threadpool_limits(2, user_api="blas"):
        before = _blas_threads()
        f2 = E.kernel_expansion(spec, SV, coef, X)
        assert _blas_threads() == before
    with threadpool_limits(1, user_api="blas"):
        f1 = E.kernel_expansion(spec, SV, coef, X)
    np.testing.assert_array_equal(f1, f2)  # the same GEMM blocks either way
    np.testing.assert_allclose(f1, kernel_block(spec, X, SV) @ coef, rtol=1e-10, atol=1e-12)


def test_small_fits_start_seeded_and_dense_with_the_grown_fits_model():
    """Below CVR.SEED_ALL_BELOW points every C='auto' fit starts from the pilot's predicted support, warm, and runs
    the dense loop (engine_policy: wide once seeded); its model is the one grown from the initial pair by the
    narrow loop, to the loop's tolerance: the same C and tube, R^2 within 0.005 on held-out points."""
    from corevector.engine_policy import loop_settings
    rng = np.random.default_rng(5)
    X = rng.uniform(-3, 3, (900, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(900)
    XT = rng.uniform(-3, 3, (1000, 2))
    yT = np.sin(XT[:, 0]) + 0.1 * rng.standard_normal(1000)
    # seeded for its size alone: the noise rule's seed is switched off
    seeded = type("Small", (CVR,), {"SEED_MIN_OUTSIDE": 2.0})(random_state=0).fit(X, y)
    assert seeded._pilot_info["n_initial"] > 0
    grown = type("Grown", (CVR,), {"SEED_ALL_BELOW": 0, "SEED_MIN_OUTSIDE": 2.0})(random_state=0).fit(X, y)
    assert "n_initial" not in grown._pilot_info
    assert seeded.n_iter_ < grown.n_iter_ / 4
    assert seeded.C_ == grown.C_ and seeded.mu_ == grown.mu_
    assert abs(seeded.score(XT, yT) - grown.score(XT, yT)) < 0.005
    for fit in (seeded, grown):
        assert fit.certified_ratio_ <= (1 + fit.eps) ** 2
    P = _problem(m=200)
    assert loop_settings("auto", P, n_initial=50)["wide"] and not loop_settings("auto", P)["wide"]
