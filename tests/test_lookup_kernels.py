"""kernel='precomputed' and callable kernels (issue 44, item 1): the same models as the built-in kernels, fast ==
ref, an independent judge on the same Gram matrix (liblinear's L2-SVM on an explicit factor of it, and SVC), the
checks of bad input, the interchange formats, and the memory a fit with a Gram matrix allocates."""
from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.spatial.distance import cdist
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel
from sklearn.svm import SVC, LinearSVC

from corevector import (CVDD, CVR, MEB, MMDA, CVMClassifier, SparseSVR, load_libsvm_model, load_model,
                        save_libsvm_model, save_model)

G_RBF = 0.4


def data(m=120, seed=1, n_test=40, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 3))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    if classes == 3:
        y = y + (X[:, 2] > 0.8)
    return X, y, rng.normal(size=(n_test, 3))


def rbf(A, B):
    return rbf_kernel(A, B, gamma=G_RBF)


#: built-in kernel options, and the same kernel as scikit-learn's pairwise function (Laplacian: Euclidean, 000, from
#: coordinate differences: scikit-learn's euclidean_distances goes through ||a||^2 + ||b||^2 - 2 a'b, whose
#: cancellation the square root turns into ~1e-8 errors of the kernel itself)
BUILT_IN = {
    "rbf": (dict(kernel="rbf", gamma=G_RBF), rbf),
    "poly": (dict(kernel="poly", gamma=0.3, degree=2, coef0=1.0),
             lambda A, B: polynomial_kernel(A, B, degree=2, gamma=0.3, coef0=1.0)),
    "linear": (dict(kernel="linear", gamma=1.0), linear_kernel),
    "laplacian": (dict(kernel="laplacian", gamma=0.7), lambda A, B: np.exp(-0.7 * cdist(A, B))),
}
#: the decision values of a precomputed or callable kernel against the built-in one (issue 44: within 1e-10)
MODEL_TOL = 1e-10


def fitted_three(E, kernel, X, y, Xt, **kw):
    """(built-in, precomputed, callable) fits of E and their decision values on Xt."""
    opts, f = BUILT_IN[kernel]
    b = E(**opts, **kw).fit(X, y)
    p = E(kernel="precomputed", **kw).fit(f(X, X), y)
    c = E(kernel=f, **kw).fit(X, y)
    method = "predict" if E is CVR else "decision_function"
    return (b, p, c), [getattr(b, method)(Xt), getattr(p, method)(f(Xt, X)), getattr(c, method)(Xt)]


@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("kernel", list(BUILT_IN))
def test_classifier_lookup_kernels_give_the_built_in_model(kernel, impl):
    """Precomputed and callable kernels (constant diagonal: rbf, laplacian; not: poly, linear, the generalized CVM)
    give the built-in kernel's model: the same support vectors, coefficients and decision values within 1e-10."""
    X, y, Xt = data(classes=3)
    kw = dict(C=10.0, eps=1e-6, sample_size=None, stop="margin", random_state=0, impl=impl)
    (b, p, c), (db, dp, dc) = fitted_three(CVMClassifier, kernel, X, y, Xt, **kw)
    for est, d in ((p, dp), (c, dc)):
        np.testing.assert_array_equal(est.support_, b.support_)
        np.testing.assert_allclose(est.dual_coef_, b.dual_coef_, rtol=0, atol=MODEL_TOL)
        np.testing.assert_allclose(d, db, rtol=0, atol=MODEL_TOL)
    assert p.kernel_spec_.source is None and c.kernel_spec_.source is None  # no training kernel kept
    np.testing.assert_array_equal(c.support_vectors_, b.support_vectors_)


@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("E", [MEB, CVDD, CVR])
def test_ball_and_regressor_lookup_kernels_give_the_built_in_model(E, impl):
    X, y, Xt = data()
    target = X[:, 0] + np.sin(X[:, 1]) if E is CVR else None
    _, (db, dp, dc) = fitted_three(E, "rbf", X, target, Xt, random_state=0, impl=impl)
    np.testing.assert_allclose(dp, db, rtol=0, atol=MODEL_TOL)
    np.testing.assert_allclose(dc, db, rtol=0, atol=MODEL_TOL)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(12, 80), C=st.floats(0.1, 100.0),
       sample=st.sampled_from([None, 10]), kernel=st.sampled_from(["rbf", "poly", "linear"]))
def test_fast_equals_ref_on_lookup_kernels(seed, m, C, sample, kernel):
    """The two engines on the same precomputed and callable problems: the same core set and model."""
    X, y, _ = data(m, seed, 1)
    if len(np.unique(y)) < 2:
        y[0] = 1 - y[0]
    _, f = BUILT_IN[kernel]
    for k, Xin in (("precomputed", f(X, X)), (f, X)):
        kw = dict(C=C, kernel=k, sample_size=sample, random_state=seed, eps=1e-6, stop="margin")
        fast = CVMClassifier(impl="fast", **kw).fit(Xin, y)
        ref = CVMClassifier(impl="ref", **kw).fit(Xin, y)
        np.testing.assert_array_equal(fast.core_set_, ref.core_set_)
        np.testing.assert_allclose(fast.dual_coef_, ref.dual_coef_, rtol=0, atol=1e-9)
        np.testing.assert_allclose(fast.intercept_, ref.intercept_, rtol=0, atol=1e-9)
        assert fast.certified_ratio_ >= 1.0 - 1e-9


def test_cvm_on_a_gram_matrix_is_the_l2_svm_that_liblinear_solves():
    """The independent judge on the same Gram matrix: the two-class CVM is the L2-SVM with a penalised bias
    (001 eq. (8)); liblinear's LinearSVC (squared hinge, intercept penalised as a feature of 1) solves it in the
    primal on an explicit factor Phi of the Gram matrix (Phi Phi' = K), with C_lin = C / 2 and the margin scaled to
    1: f_cvm / rho = f_lin.  SVC on the same Gram matrix (hinge loss) agrees on the labels."""
    X, y, Xt = data(m=100)
    K = rbf(X, X)
    lam, U = np.linalg.eigh(K)
    keep = lam > 1e-10 * lam.max()
    Phi = U[:, keep] * np.sqrt(lam[keep])
    Phi_t = rbf(Xt, X) @ U[:, keep] / np.sqrt(lam[keep])  # the Nystrom extension: exact on the training span
    C = 5.0
    cvm = CVMClassifier(kernel="precomputed", C=C, eps=1e-8, sample_size=None, stop="gap", random_state=0).fit(K, y)
    lin = LinearSVC(C=C / 2, loss="squared_hinge", dual=True, tol=1e-10, max_iter=1_000_000, intercept_scaling=1.0)
    lin.fit(Phi, y)
    f_cvm = cvm.decision_function(rbf(Xt, X)) / cvm.rho_
    np.testing.assert_allclose(f_cvm, lin.decision_function(Phi_t), rtol=0, atol=2e-5)
    svc = SVC(kernel="precomputed", C=C).fit(K, y)
    agree = np.mean(svc.predict(rbf(Xt, X)) == cvm.predict(rbf(Xt, X)))
    assert agree >= 0.9, agree


@pytest.mark.parametrize("E", [CVMClassifier, CVDD, MEB, CVR])
def test_to_sklearn_carries_precomputed_and_callable_kernels(E):
    X, y, Xt = data(classes=2 if E is not CVMClassifier else 3)
    target = X[:, 0] if E is CVR else (y if E is CVMClassifier else None)
    method = "predict" if E is CVR else "decision_function"
    p = E(kernel="precomputed", random_state=0).fit(rbf(X, X), target)
    c = E(kernel=rbf, random_state=0).fit(X, target)
    sp_, sc = p.to_sklearn(), c.to_sklearn()
    assert sp_.kernel == "precomputed" and sc.kernel is rbf
    # (MEB's export is raised by the slack of its predict, MEMBERSHIP_RTOL r^2: see _libsvm_layout)
    tol = 1e-12 + (MEB.MEMBERSHIP_RTOL * p.certified_radius_ ** 2 if E is MEB else 0.0)
    np.testing.assert_allclose(getattr(sp_, method)(rbf(Xt, X)), getattr(p, method)(rbf(Xt, X)), rtol=0, atol=tol)
    np.testing.assert_allclose(getattr(sc, method)(Xt), getattr(c, method)(Xt), rtol=0, atol=tol)
    np.testing.assert_array_equal(sp_.support_, np.sort(p.support_) if E is not CVMClassifier else sp_.support_)


@pytest.mark.parametrize("E", [CVMClassifier, CVDD, CVR])
def test_files_store_precomputed_models_and_refuse_callables(E, tmp_path):
    X, y, Xt = data(classes=3)
    target = X[:, 0] if E is CVR else (y if E is CVMClassifier else None)
    method = "predict" if E is CVR else "decision_function"
    p = E(kernel="precomputed", random_state=0).fit(rbf(X, X), target)
    Kt = rbf(Xt, X)
    path = str(tmp_path / "m.model")
    save_libsvm_model(p, path)
    with open(path) as f:
        assert "kernel_type precomputed" in f.read()
    np.testing.assert_allclose(getattr(load_libsvm_model(path), method)(Kt), getattr(p, method)(Kt), rtol=0, atol=1e-12)
    save_model(p, str(tmp_path / "m.cvm"))
    np.testing.assert_array_equal(getattr(load_model(str(tmp_path / "m.cvm")), method)(Kt), getattr(p, method)(Kt))
    c = E(kernel=rbf, random_state=0).fit(X, target)
    with pytest.raises(ValueError, match="callable kernel cannot be written as a LIBSVM model file"):
        save_libsvm_model(c, str(tmp_path / "c.model"))
    with pytest.raises(TypeError, match="callable kernel cannot be saved in a model file"):
        save_model(c, str(tmp_path / "c.cvm"))
    assert not os.path.exists(tmp_path / "c.cvm")


# ------------------------------------------------------------------------------------------------ bad input
def test_sigmoid_is_refused_as_not_psd():
    X, y, _ = data()
    with pytest.raises(ValueError, match="not positive semi-definite"):
        CVMClassifier(kernel="sigmoid").fit(X, y)
    with pytest.raises(ValueError, match="kernel"):
        CVMClassifier(kernel="nonsense").fit(X, y)


def test_precomputed_shapes_are_checked():
    X, y, Xt = data()
    K = rbf(X, X)
    with pytest.raises(ValueError, match="square Gram matrix"):
        CVMClassifier(kernel="precomputed").fit(K[:, :50], y)
    clf = CVMClassifier(kernel="precomputed", random_state=0).fit(K, y)
    with pytest.raises(ValueError, match="against the m_train = 120 training points, got 60 columns"):
        clf.predict(rbf(Xt, X[:60]))
    with pytest.raises(ValueError, match="not symmetric"):
        bad = K.copy()
        bad[3, 7] += 1e-3
        CVMClassifier(kernel="precomputed").fit(bad, y)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        CVMClassifier(kernel="precomputed").fit(K - 0.5 * np.eye(len(K)) - 0.2, y)
    with pytest.raises(ValueError, match="normalize=True is not available"):
        CVMClassifier(kernel="precomputed", normalize=True).fit(K, y)
    with pytest.raises(ValueError, match="constant diagonal"):
        MEB(kernel="precomputed").fit(linear_kernel(X) + np.eye(len(X)))


def test_a_callable_is_checked_block_by_block():
    X, y, _ = data()
    with pytest.raises(ValueError, match="returned an array of shape"):
        CVMClassifier(kernel=lambda A, B: rbf(A, B)[:, :1]).fit(X, y)
    with pytest.raises(ValueError, match="non-finite"):
        CVMClassifier(kernel=lambda A, B: rbf(A, B) * np.nan).fit(X, y)
    with pytest.raises(ValueError, match="not symmetric"):
        CVMClassifier(kernel=lambda A, B: rbf(A, B) + A[:, :1] * 0.1).fit(X, y)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        CVMClassifier(kernel=lambda A, B: -rbf(A, B) + 2.0).fit(X, y)


def test_a_callable_is_called_by_blocks_never_per_pair():
    X, y, _ = data(m=200)
    shapes = []

    def k(A, B):
        shapes.append((A.shape[0], B.shape[0]))
        return rbf(A, B)

    for impl in ("fast", "ref"):
        shapes.clear()
        clf = CVMClassifier(kernel=k, impl=impl, random_state=0).fit(X, y)
        evaluated = sum(a * b for a, b in shapes)
        assert evaluated > 0 and len(shapes) < evaluated / 20, (impl, len(shapes), evaluated)
        assert clf.predict(X).shape == (200,)


def test_estimators_without_lookup_kernels_refuse_them():
    X, y, _ = data()
    for est in (MMDA(kernel="precomputed"), SparseSVR(kernel=rbf)):
        with pytest.raises(ValueError, match="does not take kernel="):
            est.fit(rbf(X, X) if est.kernel == "precomputed" else X, y.astype(float))


def test_a_fit_on_a_gram_matrix_allocates_no_second_one():
    """The Gram matrix is the user's m x m; the fit reads it in place: its Python/NumPy allocations peak below half
    of another m x m (the symmetry test reads it by blocks of SYMMETRY_BLOCK rows, the fast engine looks entries
    up).  The reference's scans hold blocks of SCAN_BLOCK candidates x the support (here all 2,000 candidates), as
    they do for every kernel: below one m x m."""
    X, y, _ = data(m=2000)
    K = rbf(X, X)
    for impl in ("fast", "ref"):
        tracemalloc.start()
        CVMClassifier(kernel="precomputed", impl=impl, random_state=0).fit(K, y)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < (0.5 if impl == "fast" else 1.0) * K.nbytes, (impl, peak, K.nbytes)


@pytest.mark.parametrize("E", [CVMClassifier, MEB, CVDD, CVR])
def test_precomputed_predict_names_the_kernel_matrix_it_needs(E):
    """predict, decision_function and score_samples of a precomputed model take K(X_test, X_train): another count of
    columns is refused naming the n x m_train matrix and the m_train training points, not features."""
    X, y, Xt = data()
    target = X[:, 0] if E is CVR else (y if E is CVMClassifier else None)
    est = E(kernel="precomputed", random_state=0).fit(rbf(X, X), target)
    want = (r"kernel='precomputed': predict needs the n x m_train kernel matrix against the m_train = 120 training "
            r"points, got 119 columns")
    methods = ["predict"] + [m for m in ("decision_function", "score_samples") if hasattr(est, m)]
    for method in methods:
        with pytest.raises(ValueError, match=want):
            getattr(est, method)(rbf(Xt, X[:119]))
        with pytest.raises(ValueError, match=want):
            getattr(est, method)(rbf(Xt, X[:119]).tolist())
        assert len(getattr(est, method)(rbf(Xt, X))) == len(Xt)


# ------------------------------------------------------------------------- the callable's bounded column store
def rbf_cdist(A, B):
    """The Gaussian kernel by cdist (a cheap callable: the small-cache fits below compute many columns again)."""
    return np.exp(-G_RBF * cdist(A, B, "sqeuclidean"))


def callable_engine_fit(m, cache_size):
    """The fast engine's two-class fit of rbf_cdist on m points with ``cache_size`` bytes: (result, engine)."""
    from fastimpl._engine import FastMEBOps, fit_meb
    from refimpl.cvm import two_class_problem
    from refimpl.kernels import index_points, make_kernel_spec
    X, y, _ = data(m, seed=4, n_test=1)
    problem = two_class_problem(index_points(m), np.where(y > 0, 1, -1), make_kernel_spec(X, rbf_cdist), C=10.0)
    made = []

    def ops(p, cache):
        made.append(FastMEBOps(p, cache))
        return made[-1]

    result = fit_meb(problem, 1e-3, ops_class=ops, cache_size=cache_size, sample_size=59, random_state=0,
                     stop="margin")
    return result, made[0]


def test_callable_columns_stay_within_cache_size_and_give_the_same_fit():
    """A callable's columns (m_rows x 8 bytes each) are kept within half of cache_size, the least recently used
    computed again on a miss: with 512 KB on 1,500 rows (a column is 12 KB, the core set over a hundred) the engine's
    own memory -- Q rows, stores and columns, MemoryState's peak -- stays within cache_size (and the two rows an SMO
    step holds, as for every kernel: test_fast_vs_ref_scale) where keeping every
    column would take more than twice it, and the fit is the one with room for every column, bit for bit (each
    column is computed by itself, so its values do not depend on what was cached)."""
    from fastimpl._engine import lookup_column_state
    small_budget, rows = 512 * 2**10, 1500
    big, big_ops = callable_engine_fit(rows, 400 * 2**20)
    small, small_ops = callable_engine_fit(rows, small_budget)
    np.testing.assert_array_equal(small.core_set, big.core_set)
    np.testing.assert_array_equal(small.alpha, big.alpha)
    assert small.radius2 == big.radius2
    n_core = len(small.core_set)
    assert n_core * rows * 8 > 2 * small_budget                  # every column kept would overrun the budget
    cached, slots, held, peak, budget, computed, _ = lookup_column_state(small_ops)
    assert cached == slots < n_core and peak * 8 <= budget * 8 <= small_budget // 2
    assert computed > 2 * n_core                                   # columns were evicted and computed again
    state = small_ops.memory_state()
    row_bytes = 8 * (n_core + n_core // 4 + 16)                    # (the two rows an SMO step holds at once)
    assert state.budget == small_budget and state.peak <= small_budget + 2 * row_bytes, state
    assert state.stores >= held * 8
    big_cached, _, big_held, _, _, big_computed, _ = lookup_column_state(big_ops)
    assert big_computed == big_cached >= n_core                    # with room, each column is computed once
    assert big_ops.memory_state().peak > small_budget


@pytest.mark.parametrize("classes", [2, 3])
def test_callable_fit_with_a_small_cache_is_the_fit_with_a_large_one(classes):
    """CVMClassifier with a callable and cache_size of a few columns (one-vs-one pairs: columns over a pair's rows)
    gives the model of a cache that holds everything: the same support vectors, coefficients and decision values."""
    X, y, Xt = data(m=900, seed=2, classes=classes)
    kw = dict(kernel=rbf_cdist, C=10.0, random_state=0)
    big = CVMClassifier(cache_size=400, **kw).fit(X, y)
    small = CVMClassifier(cache_size=0.1, **kw).fit(X, y)   # 100 KB: under 7 columns of 7.2 KB, half for columns
    assert len(big.support_) > 20
    np.testing.assert_array_equal(small.support_, big.support_)
    np.testing.assert_array_equal(small.dual_coef_, big.dual_coef_)
    np.testing.assert_array_equal(small.intercept_, big.intercept_)
    np.testing.assert_array_equal(small.decision_function(Xt), big.decision_function(Xt))
