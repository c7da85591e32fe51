"""MMDA(CVM) ([004]): the constrained MEB, its SOR solver, the features, the baselines.

Independent references: cvxopt's interior-point QP for problem (3) (MMDA(SVM)) and for the
constrained MEB dual (20)-(21) (p* of Theorem 2); scipy's dense eigensolvers for Property 1 and KFD.
"""
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from corevector import MMDA
from refimpl import cvm, mmda
from refimpl.baselines.kfd import fit_kfd, kfd_transform
from refimpl.baselines.mmda_svm import dense_G, exact_constrained_meb, solve_mmda_qp
from refimpl.constrained_meb import ConstrainedMEBProblem, Projections, fit_constrained_meb
from refimpl.kernels import KERNELS, kernel_block, make_kernel_spec
from refimpl.sor import sor_solve

EXAMPLES = int(os.environ.get("COREVECTOR_HYPOTHESIS_EXAMPLES", 60))


def blobs(m, n_classes=2, d=3, seed=0, spread=1.0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, m)
    y[:n_classes] = np.arange(n_classes)
    centers = rng.normal(size=(n_classes, d)) * 2.0
    return centers[y] + spread * rng.normal(size=(m, d)), y


def projected_problem(m=60, s=2, seed=0, kernel="rbf", C=1.0):
    """A binary constrained MEB (19) whose s directions are MMDA directions of the same data."""
    X, y = blobs(m, 2, seed=seed, spread=1.5)
    y_pm = np.where(y == 1, 1, -1).astype(np.int8)
    spec = make_kernel_spec(X, kernel, gamma=0.4 if kernel != "linear" else 1.0)
    points, coef = np.zeros(0, dtype=np.intp), np.zeros((0, 0))
    if s:
        rng = np.random.default_rng(seed)
        b = mmda.extract_binary(X, y_pm, spec, C, s, mmda.solve_cvm(1e-4, sample_size=None),
                                [int(rng.integers(0, 2**31 - 1)) for _ in range(s)])
        points, coef = b.points, b.coef
    base = cvm.two_class_problem(X, y_pm, spec, C)
    return ConstrainedMEBProblem(base, Projections(X[points], coef)), X, y_pm, spec


# ------------------------------------------------------------------ scikit-learn compatibility
@parametrize_with_checks([MMDA(random_state=0), MMDA(random_state=0, impl="ref")])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ orthonormal directions
def test_exact_solvers_agree():
    """MMDA(SVM)'s active-set solver and cvxopt's interior point give the same features."""
    X, y = blobs(80, 3, seed=9, spread=1.5)
    a = MMDA(n_components=3, method="svm", qp_solver="active_set").fit(X, y)
    b = MMDA(n_components=3, method="svm", qp_solver="interior_point").fit(X, y)
    for pa, pb in zip(a.expansion_index_, b.expansion_index_):
        np.testing.assert_array_equal(pa, pb)
    fa, fb = a.transform(X), b.transform(X)
    np.testing.assert_allclose(fa, fb, atol=1e-7 * np.abs(fb).max())


@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("method", ["cvm", "svm"])
def test_directions_are_orthonormal_through_their_expansions(impl, method):
    """u_p'u_q = sum_ij B_ip B_jq k(e_i, e_j) = delta_pq (Sec. II), for every binary problem."""
    X, y = blobs(90, 3, seed=1, spread=1.5)
    model = MMDA(n_components=4, eps=1e-3, method=method, impl=impl, random_state=0).fit(X, y)
    assert model.n_components_ == 12 and len(model.expansion_coef_) == 3
    for V, B in zip(model.expansion_vectors_, model.expansion_coef_):
        UU = B.T @ kernel_block(model.kernel_spec_, V, V) @ B
        np.testing.assert_allclose(UU, np.eye(4), atol=1e-8)
    # the features of the training data are the projections u_q'phi(x)
    F = model.transform(X)
    assert F.shape == (90, 12) and np.all(np.isfinite(F))


# ------------------------------------------------------------------ Property 1 and (35)
@settings(max_examples=max(5, EXAMPLES // 6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), s=st.integers(0, 3), C=st.sampled_from([0.1, 1.0, 10.0]),
       kernel=st.sampled_from(["rbf", "linear", "poly"]))
def test_property_1_G_is_positive_definite(seed, s, C, kernel):
    """G of (24) is pd, and its Schur complement K^ - PP' >= (1/C) I (Lemma 2)."""
    problem, *_ = projected_problem(m=40, s=s if kernel != "linear" else min(s, 1), seed=seed, kernel=kernel, C=C)
    K, P, _ = dense_G(problem)
    G = np.block([[K, P], [P.T, np.eye(P.shape[1])]])
    assert np.linalg.eigvalsh(0.5 * (G + G.T)).min() > 0
    schur = K - P @ P.T
    ev = np.linalg.eigvalsh(0.5 * (schur + schur.T))
    # Lemma 2 assumes U'U = I; the directions come from eps-approximate fits, normalised and orthogonalised in
    # floating point, so U'U = I + E with a measured E, which moves K^ - PP' by up to ||E|| ||P||^2.  Beyond
    # that, a relative 1e-8 ||K^ - PP'||: the worst case hypothesis drew (poly, ||K|| = 3.8e3, s = 3, seed
    # 19337, C = 10) fell 6.8e-6 = 1.8e-9 ||K|| below 1/C with ||E|| ||P||^2 = 1.1e-6, where a fixed 1e-9 failed
    proj = problem.proj
    E = proj.B.T @ kernel_block(problem.base.kernel, proj.X, proj.X) @ proj.B - np.eye(proj.s) if proj.s else None
    orth = np.linalg.norm(E, 2) * np.linalg.norm(P, 2) ** 2 if proj.s else 0.0
    assert orth <= 1e-6 * np.abs(ev).max()                    # the directions are orthonormal to round-off
    assert ev.min() >= 1.0 / C - orth - 1e-8 * np.abs(ev).max()


@pytest.mark.parametrize("seed,s", [(0, 0), (1, 1), (2, 2), (3, 3)])
def test_correspondence_35_and_appendix_II(seed, s):
    """The exact solutions of (3) and of (21), each from cvxopt, satisfy (35) and Appendix II."""
    problem, *_ = projected_problem(m=50, s=s, seed=seed)
    alpha, gamma, _ = solve_mmda_qp(problem, polish=False)
    lower, upper, a_t, g_t = exact_constrained_meb(problem)
    A = alpha.sum()
    assert A > 0                                              # footnote 3
    np.testing.assert_allclose(a_t, alpha / A, atol=1e-6)     # (35)
    np.testing.assert_allclose(g_t, gamma / A, atol=1e-6)
    K, P, _ = dense_G(problem)
    G = np.block([[K, P], [P.T, np.eye(P.shape[1])]])
    xt = np.concatenate([a_t, g_t])
    back = xt / float(xt @ G @ xt)                            # Appendix II
    np.testing.assert_allclose(back, np.concatenate([alpha, gamma]), atol=1e-5 * max(1.0, A))
    # (42): alpha'1 = alpha'K^alpha + 2 alpha'Y Phi'U gamma + gamma'U'U gamma
    x = np.concatenate([alpha, gamma])
    assert abs(A - x @ G @ x) <= 1e-6 * A


# ------------------------------------------------------------------ SOR (Algorithm 3)
@settings(max_examples=max(5, EXAMPLES // 4), deadline=None)
@given(seed=st.integers(0, 2**16), t=st.integers(1, 25), s=st.integers(0, 4), omega=st.sampled_from([0.7, 1.0, 1.5]))
def test_sor_solves_the_bound_constrained_qp(seed, t, s, omega):
    """Algorithm 3 reaches the minimiser of (36) (alpha >= 0, gamma free) found by cvxopt."""
    from cvxopt import matrix, solvers
    from fastimpl._mmda import sor_solve as sor_fast
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(t + s, t + s + 2))
    G = A @ A.T + 0.1 * np.eye(t + s)
    b = np.concatenate([np.zeros(s), np.ones(t)])
    bounded = np.arange(t + s) >= s
    sol = solvers.qp(matrix(G), matrix(-b), matrix(-np.eye(t + s)[bounded]), matrix(np.zeros(t)),
                     options={"show_progress": False, "abstol": 1e-12, "reltol": 1e-12, "feastol": 1e-12})
    x_star = np.asarray(sol["x"]).ravel()
    results = []
    for solver in (sor_solve, sor_fast):
        x = np.zeros(t + s)
        g = G @ x - b
        steps, res = solver(G, g, x, bounded, omega, 1e-10, 10**6)
        assert res <= 1e-10 and steps < 10**6
        assert np.all(x[bounded] >= 0)
        np.testing.assert_allclose(g, G @ x - b, atol=1e-8)
        f = lambda v: 0.5 * v @ G @ v - b @ v  # noqa: E731
        assert f(x) <= f(x_star) + 1e-8 * max(1.0, abs(f(x_star)))
        results.append((steps, x))
    # the C loop makes the same steps as the reference
    assert results[0][0] == results[1][0]
    np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-12)


def test_sor_moves_the_lowest_index_among_tied_changes():
    """Step 5 moves the coordinate with the largest |delta|, the lowest index among ties: on G = I with
    b = 1 every alpha coordinate wants the same change 1, so the first step moves x_0 alone, then x_1;
    the C loop makes the same steps."""
    from fastimpl._mmda import sor_solve as sor_fast
    for solver in (sor_solve, sor_fast):
        for steps, moved in ((1, [1.0, 0.0, 0.0]), (2, [1.0, 1.0, 0.0])):
            x, g = np.zeros(3), -np.ones(3)
            solver(np.eye(3), g, x, np.ones(3, dtype=bool), 1.0, 1e-12, steps)
            np.testing.assert_array_equal(x, moved)


# ------------------------------------------------------------------ Theorem 2
@settings(max_examples=max(5, EXAMPLES // 6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), s=st.integers(0, 3), eps=st.sampled_from([1e-1, 1e-2, 1e-3]),
       impl=st.sampled_from(["fast", "ref"]))
def test_theorem_2_approximation_ratio(seed, s, eps, impl):
    """max(R_tau^2/p*, p*/R_tau^2) <= (1+eps)^2, p* bracketed by cvxopt's solution of (20)."""
    from fastimpl._mmda import FastConstrainedOps
    from refimpl.constrained_meb import ConstrainedOps
    problem, *_ = projected_problem(m=45, s=s, seed=seed)
    ops = FastConstrainedOps if impl == "fast" else ConstrainedOps
    res = fit_constrained_meb(problem, eps, sample_size=None, random_state=seed, ops_class=ops)
    lower, upper, *_ = exact_constrained_meb(problem)
    R2 = res.radius2
    bound = (1 + eps) ** 2 * (1 + 1e-9)
    assert R2 <= upper * (1 + 1e-9)                 # R_tau <= r_MEB (the core set's ball is no larger)
    assert upper / R2 <= bound and R2 / lower <= bound
    assert res.converged and res.certified_ratio <= bound
    assert res.r_cert2 >= lower * (1 - 1e-9)        # the certificate encloses every point
    # (35): the center's weights are a distribution, and Appendix II rescales them back
    assert np.all(res.alpha >= 0) and abs(res.alpha.sum() - 1) < 1e-12
    np.testing.assert_allclose(res.alpha_mmda * res.margin, res.alpha, rtol=1e-12)


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_eps_to_zero_gives_the_exact_mmda_features(impl):
    """At eps -> 0 (full scans) MMDA(CVM)'s features converge to MMDA(SVM)'s (Theorem 2, eps = 0)."""
    X, y = blobs(50, 3, seed=5, spread=1.5)
    Xt, _ = blobs(40, 3, seed=6, spread=1.5)
    exact = MMDA(n_components=3, method="svm", qp_solver="interior_point", impl=impl).fit(X, y).transform(Xt)
    errs = []
    for eps in (1e-4, 1e-8):
        approx = MMDA(n_components=3, eps=eps, sample_size=None, impl=impl, random_state=0).fit(X, y).transform(Xt)
        errs.append(np.abs(approx - exact).max() / np.abs(exact).max())
    assert errs[1] <= 1e-4
    assert errs[1] <= errs[0]


# ------------------------------------------------------------------ the (G x)_l scans in C
@settings(max_examples=max(5, EXAMPLES // 4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), s=st.integers(0, 3), kernel=st.sampled_from(KERNELS),
       t=st.integers(1, 40), nq=st.integers(1, 80))
def test_fast_gx_equals_reference_gx(seed, s, kernel, t, nq):
    """FastConstrainedOps.gx (one C pass) equals ConstrainedOps.gx (NumPy) to round-off, with the
    projection term (s > 0), the diagonal term c alpha_l of candidates in the core set, zero alphas,
    repeated candidates, and the same kernel-evaluation count; and so does ``furthest``."""
    from fastimpl._mmda import FastConstrainedOps
    from refimpl.constrained_meb import ConstrainedOps
    problem, X, *_ = projected_problem(m=60, s=s if kernel != "linear" else min(s, 1), seed=seed, kernel=kernel)
    rng = np.random.default_rng(seed)
    S = rng.choice(60, t, replace=False)
    alpha = rng.random(t) * 2
    alpha[rng.random(t) < 0.3] = 0.0
    gamma = rng.normal(size=problem.s)
    idx = np.concatenate([rng.integers(0, 60, nq), S[: nq // 4]])
    ref, fast = ConstrainedOps(problem), FastConstrainedOps(problem)
    a = ref.gx(idx, S, alpha, gamma)
    b = fast.gx(idx, S, alpha, gamma)
    # the Laplacian's sqrt amplifies the round-off of the reference's ||a||^2 + ||b||^2 - 2a'b at
    # distance ~0 (a candidate against itself): sqrt(||a||^2 1e-16) ~ 1e-8 in the exponent
    rtol = 1e-6 if kernel == "laplacian" else 1e-12
    np.testing.assert_allclose(b, a, rtol=0, atol=rtol * max(1.0, np.abs(a).max()))
    assert fast.n_eval == ref.n_eval
    # the scratch position map is left clean for the next call
    assert np.all(fast._pos == -1)
    np.testing.assert_allclose(fast.gx(idx, S, alpha, gamma), b, rtol=0, atol=0)
    # G_t's entries: the same bits (SOR takes the same steps in both implementations)
    np.testing.assert_array_equal(fast.kt_block(idx[:5], S), ref.kt_block(idx[:5], S))
    np.testing.assert_array_equal(fast.linear_term(idx), ref.linear_term(idx))
    # the furthest candidate: same d^2 (to round-off) and the same one unless two are within round-off
    A = max(alpha.sum(), 1e-3)
    cc = float(rng.random()) + 0.1
    za, da = ref.furthest(idx, S, alpha, gamma, A, cc)
    zb, db = fast.furthest(idx, S, alpha, gamma, A, cc)
    assert abs(da - db) <= 10 * rtol * max(1.0, abs(da), np.abs(a).max() / A)
    d2 = cc - 2.0 * a / A + problem.base.linear_term(idx)
    assert za == zb or abs(d2[list(idx).index(zb)] - da) <= 10 * rtol * max(1.0, abs(da), np.abs(a).max() / A)


# ------------------------------------------------------------------ fast == ref
@settings(max_examples=max(5, EXAMPLES // 4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), n_classes=st.integers(2, 3), m=st.integers(20, 70),
       kernel=st.sampled_from(["rbf", "laplacian", "poly"]), sample_size=st.sampled_from([None, 15, 59]),
       eps=st.sampled_from([1e-2, 1e-3]), n_components=st.integers(1, 3))
def test_fast_equals_ref(seed, n_classes, m, kernel, sample_size, eps, n_components):
    X, y = blobs(m, n_classes, seed=seed, spread=1.5)
    kw = dict(n_components=n_components, eps=eps, kernel=kernel, gamma=0.3, coef0=1.0, degree=2,
              sample_size=sample_size, random_state=seed)
    a = MMDA(impl="ref", **kw).fit(X, y)
    b = MMDA(impl="fast", **kw).fit(X, y)
    for pa, pb in zip(a.expansion_index_, b.expansion_index_):
        np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(a.core_set_size_, b.core_set_size_)
    np.testing.assert_array_equal(a.n_iter_, b.n_iter_)
    for ca, cb in zip(a.expansion_coef_, b.expansion_coef_):
        np.testing.assert_allclose(ca, cb, atol=1e-6 * max(1.0, np.abs(ca).max()), rtol=0)
    Xt = np.random.default_rng(seed).normal(size=(30, 3)) * 2
    fa, fb = a.transform(Xt), b.transform(Xt)
    np.testing.assert_allclose(fa, fb, atol=1e-6 * max(1.0, np.abs(fa).max()), rtol=0)
    np.testing.assert_allclose(a.certified_ratio_, b.certified_ratio_, rtol=1e-7)


def test_same_seed_same_model():
    X, y = blobs(200, 3, seed=2, spread=2.0)
    a = MMDA(n_components=2, random_state=3).fit(X, y)
    b = MMDA(n_components=2, random_state=3).fit(X, y)
    for ca, cb in zip(a.expansion_coef_, b.expansion_coef_):
        np.testing.assert_array_equal(ca, cb)


# ------------------------------------------------------------------ features are discriminative
def test_features_separate_the_classes_and_are_sparse():
    from sklearn.neighbors import KNeighborsClassifier
    X, y = blobs(900, 4, d=5, seed=7, spread=1.0)
    X, y, Xt, yt = X[:600], y[:600], X[600:], y[600:]
    model = MMDA(n_components=2, random_state=0).fit(X, y)
    knn = KNeighborsClassifier(1).fit(model.transform(X), y)
    raw = KNeighborsClassifier(1).fit(X, y).score(Xt, yt)
    # 8 features do at least as well as the 5 raw inputs for 1-NN (Table II's comparison)
    assert knn.score(model.transform(Xt), yt) >= raw - 0.02
    assert np.all(model.n_support_ <= model.core_set_size_)
    assert np.all(model.n_expansion_ < len(X))           # a sparse expansion, not all m points
    assert np.all(model.kernel_evaluations_ > 0) and np.all(model.converged_)


# ------------------------------------------------------------------ KFD baseline
def test_kfd_directions_solve_the_generalized_eigenproblem():
    """KFD's directions are the leading generalized eigenvectors of (M, N_mu) (checked by scipy's eigh)."""
    from scipy.linalg import eigh
    X, y = blobs(80, 3, seed=4, spread=1.0)
    spec = make_kernel_spec(X, "rbf", gamma=0.3)
    model = fit_kfd(X, y, spec, reg=1e-2)
    assert model.coef.shape == (80, 2)
    K = kernel_block(spec, X, X)
    M = np.zeros((80, 80))
    N = K @ K
    kbar = K.mean(1)
    for c in range(3):
        kc = K[:, y == c].mean(1)
        M += (y == c).sum() * np.outer(kc - kbar, kc - kbar)
        N -= (y == c).sum() * np.outer(kc, kc)
    N += 1e-2 * np.trace(N) / 80 * np.eye(80)
    lam = eigh(M, N, eigvals_only=True)[::-1][:2]
    np.testing.assert_allclose(model.eigenvalues, lam, rtol=1e-6)
    for q in range(2):
        a = model.coef[:, q]
        np.testing.assert_allclose(a @ M @ a / (a @ N @ a), lam[q], rtol=1e-6)
    F = kfd_transform(model, spec, X)
    from sklearn.neighbors import KNeighborsClassifier
    assert KNeighborsClassifier(1).fit(F, y).score(F, y) == 1.0


# ------------------------------------------------------------------ bad input and bounds
@pytest.mark.parametrize("params,name", [
    (dict(n_components=0), "n_components"),
    (dict(n_components=1000), "n_components"),   # more than n_samples
    (dict(n_components=1.5), "n_components"),
    (dict(eps=0.0), "eps"),
    (dict(eps=-1.0), "eps"),
    (dict(eps="small"), "eps"),
    (dict(C=0.0), "C"),
    (dict(C=np.inf), "C"),
    (dict(C="1"), "C"),
    (dict(omega=2.0), "omega"),
    (dict(method="qp"), "method"),
    (dict(method="svm", qp_solver="smo"), "qp_solver"),
    (dict(impl="gpu"), "impl"),
    (dict(kernel="sigmoid"), "kernel"),
    (dict(sample_size=0), "sample_size"),
])
def test_bad_parameters_are_named(params, name):
    """Every bad parameter, of any type, raises scikit-learn's InvalidParameterError naming it."""
    X, y = blobs(30, 2)
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of MMDA"):
        MMDA(**params).fit(X, y)


def test_bad_data():
    X, y = blobs(30, 2)
    with pytest.raises(ValueError, match="one class"):
        MMDA().fit(X, np.zeros(30))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MMDA().fit(Xn, y)
    with pytest.raises(ValueError):
        MMDA().fit(X, y[:10])
    model = MMDA().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.transform(X[:, :2])


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_max_iter_bound_warns(impl):
    X, y = blobs(80, 2, seed=3, spread=2.0)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        model = MMDA(max_iter=2, sample_size=None, impl=impl, random_state=0).fit(X, y)
    assert not model.converged_[0]
    assert model.certified_ratio_[0] > 1.0   # it reports what was reached


@settings(max_examples=max(5, EXAMPLES // 6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), m=st.integers(30, 150), s=st.integers(0, 2), C=st.sampled_from([0.1, 1.0, 10.0]))
def test_active_set_matches_interior_point(seed, m, s, C):
    """MMDA(SVM)'s active-set solver reaches the KKT point of (3) that cvxopt finds, including problems
    where a batch of entering coordinates is degenerate (a zero ratio step must not drop the others)."""
    from fastimpl._mmda import FastConstrainedOps
    problem, *_ = projected_problem(m=m, s=s, seed=seed, C=C)
    a1, g1, _ = solve_mmda_qp(problem, FastConstrainedOps, solver="active_set")
    a2, g2, _ = solve_mmda_qp(problem, solver="interior_point", polish=False)
    # the interior point is accurate to its own tolerance only; the KKT check below is the exact one
    np.testing.assert_allclose(a1, a2, atol=1e-5 * max(1.0, a2.max()))
    np.testing.assert_allclose(g1, g2, atol=1e-5 * max(1.0, np.abs(g2).max(initial=0.0)))
    K, P, _ = dense_G(problem)
    g = (K - P @ P.T) @ a1 - 1.0
    assert g.min() >= -1e-8 and np.all(np.abs(g[a1 > 0]) <= 1e-8)   # KKT of (3), gamma eliminated


# ------------------------------------------------------------------ the constrained MEB's distances, directly
@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("s", [0, 2])
@pytest.mark.parametrize("sample_size", [20, None])
def test_scans_and_ball_are_the_distances_to_the_center_23(impl, s, sample_size):
    """The numerics' squared distances against eq. (23) written out here with scikit-learn's kernel:
    with x~ = [a~; g~] the normalised solution (35), c'c = a~'K~a~ + 2 a~'Phi~'U~ g~ + g~'g~ and
    d_l^2 = c'c - 2 (K~ a~ + Phi~'U~ g~)_l + eta (eta = 2 + 1/C for the RBF kernel: k(x, x) = 1, Delta = 0),
    R^2 = eta - c'c (22).  Checked: a sampled scan's distances, a full scan's maximum, the ball's smallest
    distance over the support and largest over the core set, the result's radius; and a converged fit
    raises no ConvergenceWarning."""
    from sklearn.metrics.pairwise import rbf_kernel

    from fastimpl._mmda import FastConstrainedOps
    from refimpl.constrained_meb import ConstrainedOps
    problem, X, y_pm, _ = projected_problem(m=50, s=s, seed=2, C=1.0)
    made = []
    base = FastConstrainedOps if impl == "fast" else ConstrainedOps

    class Ops(base):
        def __init__(self, *args):
            super().__init__(*args)
            made.append(self)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = fit_constrained_meb(problem, 1e-3, sample_size=sample_size, random_state=0, ops_class=Ops)
    ops = made[0]
    y = y_pm.astype(float)
    Kt = np.outer(y, y) * (rbf_kernel(X, X, gamma=0.4) + 1.0) + np.eye(len(X)) / 1.0
    P = (rbf_kernel(X, problem.proj.X, gamma=0.4) @ problem.proj.B) * y[:, None] if s else np.zeros((len(X), 0))
    S, a, g = res.core_set, res.alpha, res.gamma_tilde
    Gx = Kt[:, S] @ a + P @ g
    cc = a @ Kt[np.ix_(S, S)] @ a + 2 * a @ P[S] @ g + g @ g
    eta = 2.0 + 1.0
    d2 = cc - 2 * Gx + eta
    tol = 1e-9 * eta
    assert abs(res.margin - cc) <= tol and abs(res.radius2 - (eta - cc)) <= tol
    idx = np.random.default_rng(1).integers(0, len(X), 30)
    np.testing.assert_allclose(ops.scan(idx, 0, np.inf).sample_d2, d2[idx], atol=tol, rtol=0)
    assert abs(ops.scan(None, 0, np.inf).d2 - d2.max()) <= tol
    ball = ops.ball()
    assert abs(ball.d2_sv_min - d2[S[a > 0]].min()) <= tol and abs(ball.d2_core_max - d2[S].max()) <= tol
    # the core-set QP was solved to the engine's inner tolerance eps R^2: no core vector lies further
    # outside the sphere (SOR stops at g_l >= -eps R^2 1'alpha / 2, and d_l^2 - R^2 = -2 g_l / 1'alpha)
    assert (d2[S] - res.radius2).max() <= 1e-3 * res.radius2 * 1.01
    # Appendix II: (alpha, gamma) of (3) are [a~; g~] / c'c, so (42) holds, 1'alpha = x'G x
    x = np.concatenate([res.alpha_mmda, res.gamma_mmda])
    G = np.block([[Kt[np.ix_(S, S)], P[S]], [P[S].T, np.eye(s)]])
    assert abs(res.alpha_mmda.sum() - x @ G @ x) <= 1e-9 * res.alpha_mmda.sum()
    # the initial pair: furthest_from maximises ||P (phi~(z) - phi~(z_l))||^2 + Delta_l over the candidates
    for z in (0, 7, 33):
        cand = np.random.default_rng(z).choice(len(X), 25, replace=False)
        dist = Kt[z, z] - 2 * Kt[z, cand] + Kt[cand, cand] - ((P[cand] - P[z]) ** 2).sum(1)
        assert ops.furthest_from(z, cand) == cand[int(np.argmax(dist))]


@pytest.mark.parametrize("omega", [0.0, 2.0, -0.5, 2.5, np.nan, True, "1", None])
def test_fit_constrained_meb_checks_omega(omega):
    """SOR's relaxation factor must be a number in the open interval (0, 2)."""
    problem, *_ = projected_problem(m=20, s=0, seed=0)
    with pytest.raises(ValueError, match="omega"):
        fit_constrained_meb(problem, 1e-2, omega=omega, sample_size=None)
    if omega == 0.0:   # and the open interval's inside, once
        for ok in (0.05, 1.95, np.float64(0.7), 1):
            assert fit_constrained_meb(problem, 1e-2, omega=ok, sample_size=None).converged


def test_the_sor_step_bound_warning_points_at_the_callers_line():
    """SOR crawling (omega = 0.01) towards an unreachable tol stops at its step bound; fit_constrained_meb
    says so, naming the code that called it."""
    problem, *_ = projected_problem(m=30, s=1, seed=0)
    with pytest.warns(ConvergenceWarning) as rec:
        res = fit_constrained_meb(problem, 1e-3, sample_size=None, tol=1e-300, max_iter=3, random_state=0,
                                  omega=0.01)
    assert [w.filename for w in rec if "SOR step bound" in str(w.message)] == [__file__]
    # the bound of sor.py, 500 steps per variable (t core vectors, s = 1 gamma) plus 1,000: none went past
    # it, the capped ones (the last one at least) stopped exactly there
    h = res.history
    bounds = [500 * (t + 1) + 1000 for t in h["core_set_size"]]
    assert h["inner_capped"][-1] and all(s <= b for s, b in zip(h["inner_steps"], bounds))
    assert h["inner_capped"] == [s == b for s, b in zip(h["inner_steps"], bounds)]
    assert res.sor_steps == sum(h["inner_steps"])


@pytest.mark.parametrize("s", [0, 1, 2])
@pytest.mark.parametrize("sample_size", [None, 15])
def test_kernel_evaluations_and_sor_steps_count_what_the_fit_did(s, sample_size):
    """kernel_evaluations is the number of kernel values the reference computed (every block of k and
    every expansion over the support, counted here as they are made: the entries of G_t, the rows of
    Phi~'U~, the scans); sor_steps the SOR steps of all core-set QPs, which the history lists per solve."""
    from refimpl.constrained_meb import ConstrainedOps

    count = [0]

    class Counted(ConstrainedOps):
        def raw_block(self, A, B):
            count[0] += len(A) * len(B)
            return super().raw_block(A, B)

        def expansion(self, SV, coef, Xq):
            count[0] += len(SV) * len(Xq)
            return super().expansion(SV, coef, Xq)

    problem, *_ = projected_problem(m=40, s=s, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # and a fit whose QPs reach their tol does not warn
        res = fit_constrained_meb(problem, 1e-3, sample_size=sample_size, random_state=0, ops_class=Counted)
    assert res.converged and count[0] > 0
    assert res.kernel_evaluations == count[0]
    assert res.sor_steps == sum(res.history["inner_steps"]) > 0


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_scan_ties_go_to_the_first_candidate(impl):
    """Points that appear twice (rows m..2m-1 repeat rows 0..m-1) and carry no weight are at exactly the same
    distance from the center (the ridge 1/C only separates a core vector from its copy): the full scan gives
    a tie to the lower index, a sampled scan to the candidate drawn first."""
    from fastimpl._mmda import FastConstrainedOps
    from refimpl.constrained_meb import ConstrainedOps
    X, y = blobs(20, 2, seed=3, spread=1.5)
    X2, y2 = np.vstack([X, X]), np.concatenate([y, y])
    y_pm = np.where(y2 == 1, 1, -1).astype(np.int8)
    base = cvm.two_class_problem(X2, y_pm, make_kernel_spec(X2, "rbf", gamma=0.4), 1.0)
    problem = ConstrainedMEBProblem(base, Projections(X2[:0], np.zeros((0, 0))))
    ops = (FastConstrainedOps if impl == "fast" else ConstrainedOps)(problem, 1.0)
    a, b = 0, int(np.flatnonzero(y_pm[:20] != y_pm[0])[0])
    ops.start(a, b)                                      # alpha = e_a: the center is phi~(z_a)
    d2 = ops.scan(np.arange(40), 0, np.inf).sample_d2
    far = int(np.argmax(d2[:20]))
    assert far not in (a,) and d2[far] == d2[far + 20] == d2.max()
    assert ops.scan(None, 0, np.inf).best == far
    assert ops.scan(np.array([far + 20, far, 5]), 0, np.inf).best == far + 20
    assert ops.scan(np.array([5, far, far + 20]), 0, np.inf).best == far


@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("s", [0, 2])
def test_furthest_from_with_a_varying_diagonal(impl, s):
    """The initial pair's search, ||P (phi~(z) - phi~(z_l))||^2 + Delta_l maximised, written out for the
    linear kernel, whose diagonal k(x, x) = x'x varies: K~ = y y'(X X' + 1) + I / C, Delta_l = eta - K~_ll
    with eta = max_l K~_ll (000 eq. (12)), rows of Phi~'U~ = y_l (X B_x)_l.  (With s = 0 the maximiser
    depends on K~_zl only; the projection term weighs it against the rest.)"""
    from fastimpl._mmda import FastConstrainedOps
    from refimpl.constrained_meb import ConstrainedOps
    problem, X, y_pm, _ = projected_problem(m=40, s=s, seed=4, kernel="linear", C=1.0)
    ops = (FastConstrainedOps if impl == "fast" else ConstrainedOps)(problem, 1.0)
    y = y_pm.astype(float)
    Kt = np.outer(y, y) * (X @ X.T + 1.0) + np.eye(len(X))
    P = (X @ problem.proj.X.T @ problem.proj.B) * y[:, None] if s else np.zeros((len(X), 0))
    rng = np.random.default_rng(0)
    for z in range(0, 40, 3):
        cand = rng.choice(len(X), 15, replace=False)
        dist = Kt[z, z] - 2 * Kt[z, cand] + Kt.diagonal().max() - ((P[cand] - P[z]) ** 2).sum(1)
        assert ops.furthest_from(z, cand) == cand[int(np.argmax(dist))], z


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_scan_near_ties_are_relative_to_the_size_of_the_distances(impl):
    """Two points at squared distances ~4e8 from the center that differ by ~1e-6 (2.5e-15 relative: far below
    TIE = 1e-12 relative, far above the round-off of the sums) are a tie, which a full scan gives to the lower
    index and a sample to the first drawn, whichever of the two is further."""
    from fastimpl._mmda import FastConstrainedOps
    from refimpl.constrained_meb import ConstrainedOps
    from refimpl.simplex_qp import TIE
    X = np.array([[1e4, 0.0], [0.0, 1.0], [-1e4 + 2.5e-11, 0.0], [-1e4, 0.0], [0.0, -1.0]])
    y_pm = np.array([1, -1, 1, 1, -1], dtype=np.int8)
    base = cvm.two_class_problem(X, y_pm, make_kernel_spec(X, "linear", gamma=1.0), 1.0)
    problem = ConstrainedMEBProblem(base, Projections(X[:0], np.zeros((0, 0))))
    y = y_pm.astype(float)
    Kt = np.outer(y, y) * (X @ X.T + 1.0) + np.eye(5)
    d2 = Kt[0, 0] - 2 * Kt[0] + Kt.diagonal().max()          # alpha = e_0: the center is phi~(z_0)
    assert 0 < d2[3] - d2[2] < TIE * d2[3] / 100 and d2[3] == d2.max()
    ops = (FastConstrainedOps if impl == "fast" else ConstrainedOps)(problem, 1.0)
    ops.start(0, 1)
    assert ops.scan(None, 0, np.inf).best == 2
    assert ops.scan(np.array([4, 2, 3]), 0, np.inf).best == 2
    assert ops.scan(np.array([4, 3, 2]), 0, np.inf).best == 3
