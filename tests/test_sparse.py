"""Sparse (CSR) input (issue 15): kernels of CSR rows against the dense ones (scipy's cdist and NumPy
products, an independent path), every estimator that takes CSR giving the dense model on the same data in
both engines, fast == ref on CSR, predictions across layouts, and the errors of bad or unsupported input."""
import numpy as np
import pytest
import scipy.sparse as sp

from corevector import CVDD, CVR, MEB, MMDA, CVMClassifier, ImplicitSurface, SparseSVR
from corevector.numerics import numerics
from refimpl.kernels import KERNELS, kernel_block, kernel_diag, make_kernel_spec, resolve_gamma


def sparse_data(m=160, d=40, density=0.1, seed=0):
    """CSR rows with two exact duplicates and an empty row (the norms' corner cases)."""
    X = sp.random(m, d, density=density, format="lil", random_state=seed)
    X[3] = X[5]
    X[7] = 0.0
    X = X.tocsr()
    X.eliminate_zeros()
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d)
    s = X @ w
    return X, np.where(s > np.median(s), 1, -1), s + 0.05 * rng.standard_normal(m)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("normalize", [False, True])
def test_kernel_block_and_diag_of_csr_rows_match_dense(kernel, normalize):
    X, _, _ = sparse_data()
    D = X.toarray()
    spec = make_kernel_spec(D, kernel, "scale", normalize=normalize)
    np.testing.assert_allclose(kernel_block(spec, X[:30], X), kernel_block(spec, D[:30], D), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(kernel_diag(spec, X), kernel_diag(spec, D), rtol=1e-13, atol=0)
    # a duplicated row: the Laplacian's k(x, x') = 1 exactly (cancellation recomputed from the difference)
    assert kernel_block(spec, X[3], X[5])[0, 0] == pytest.approx(kernel_block(spec, D[3:4], D[5:6])[0, 0], abs=1e-15)


@pytest.mark.parametrize("gamma", ["scale", "beta", "auto"])
def test_gamma_of_csr_matches_dense(gamma):
    X, _, _ = sparse_data()
    assert resolve_gamma(gamma, X, "rbf") == pytest.approx(resolve_gamma(gamma, X.toarray(), "rbf"), rel=1e-12)
    # no spread at all: scikit-learn's convention, gamma = 1
    assert resolve_gamma(gamma if gamma != "auto" else "scale", sp.csr_matrix((5, 4)), "rbf") == 1.0


@pytest.mark.parametrize("kernel", KERNELS)
def test_fast_kernel_expansion_of_csr_matches_ref_dense(kernel):
    X, _, _ = sparse_data()
    D = X.toarray()
    spec = make_kernel_spec(D, kernel, "scale")
    coef = np.random.default_rng(1).standard_normal(25)
    want = numerics("ref").kernel_expansion(spec, D[:25], coef, D)
    for sv, x in ((X[:25], X), (D[:25], X), (X[:25], D)):
        got = numerics("fast").kernel_expansion(spec, sv, coef, x, min_parallel_work=0)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def _fit_out(est, X, y, s):
    """(support, scores on X) of a fit of est on X."""
    if isinstance(est, CVMClassifier):
        est.fit(X, y)
        return est.support_, est.decision_function(X)
    if isinstance(est, CVR):
        est.fit(X, s)
        return est.support_, est.predict(X)
    est.fit(X)
    return est.support_, est.decision_function(X)


ESTIMATORS = [MEB, CVDD, CVMClassifier, CVR]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_sparse_fit_is_the_dense_model_and_fast_equals_ref(cls, kernel):
    X, y, s = sparse_data()
    D = X.toarray()
    kw = dict(kernel=kernel, random_state=0)
    if cls is MEB:
        kw["eps"] = 1e-3
    out = {}
    for impl in ("ref", "fast"):
        for name, data in (("csr", X), ("dense", D)):
            out[impl, name] = _fit_out(cls(impl=impl, **kw), data, y, s)
    sup, ref = out["ref", "dense"]
    scale = np.max(np.abs(ref)) + 1e-300
    for key, (sup_k, val) in out.items():
        assert np.array_equal(sup_k, sup), key
        # the Laplacian's square root turns the norms' ~1e-16 cancellation into ~1e-8 on near-duplicates
        np.testing.assert_allclose(val, ref, rtol=0, atol=(1e-6 if kernel == "laplacian" else 1e-9) * scale,
                                   err_msg=str(key))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [8, 40])
def test_sparse_svr_on_csr_is_the_dense_model_and_fast_equals_ref(kernel, d):
    """SparseSVR on CSR rows selects the dense fit's basis and predicts what it predicts, in both engines: the
    fast engine's CSR rows, its k_row rows (d = 8) and BLAS rows (d = 40) against the reference's differences."""
    X, _, s = sparse_data(d=d, density=0.3 if d == 8 else 0.1)
    D = X.toarray()
    out = {}
    for impl in ("ref", "fast"):
        for name, data in (("csr", X), ("dense", D)):
            est = SparseSVR(n_basis=6 if kernel == "linear" else 15, kernel=kernel, random_state=0, impl=impl)
            est.fit(data, s)
            assert not sp.issparse(est.basis_vectors_)
            out[impl, name] = (est.basis_indices_, est.predict(D), est.predict(X))
    basis, ref, _ = out["ref", "dense"]
    # the Laplacian's square root turns the norms' ~1e-16 cancellation into ~1e-8 on near-duplicates
    tol = (1e-6 if kernel == "laplacian" else 1e-9) * np.max(np.abs(ref))
    for key, (b, on_dense, on_csr) in out.items():
        assert np.array_equal(b, basis), key
        np.testing.assert_allclose(on_dense, ref, rtol=0, atol=tol, err_msg=str(key))
        np.testing.assert_allclose(on_csr, ref, rtol=0, atol=tol, err_msg=str(key))


@pytest.mark.parametrize("cls", [CVDD, CVMClassifier, CVR])
def test_weighted_sparse_fit_is_the_weighted_dense_model(cls):
    """sample_weight on CSR rows: the per-point ridge 1/C_i reaches the CSR store's diagonal as it reaches
    the dense one (zero weights drop their rows from the CSR matrix), both engines."""
    X, y, s = sparse_data()
    w = np.random.default_rng(1).uniform(0.2, 3.0, X.shape[0])
    w[[2, 11]] = 0.0
    D = X.toarray()
    out = {}
    for impl in ("ref", "fast"):
        for name, data in (("csr", X), ("dense", D)):
            est = cls(impl=impl, random_state=0)
            est.fit(data, s if cls is CVR else y, sample_weight=w) if cls is not CVDD else est.fit(data, sample_weight=w)
            score = est.predict(D) if cls is CVR else est.decision_function(D)
            out[impl, name] = (est.support_, score)
    sup, ref = out["ref", "dense"]
    assert not np.isin([2, 11], sup).any()
    for key, (sup_k, val) in out.items():
        assert np.array_equal(sup_k, sup), key
        np.testing.assert_allclose(val, ref, rtol=0, atol=1e-9 * np.max(np.abs(ref)), err_msg=str(key))
    unweighted = cls(impl="fast", random_state=0)
    unweighted.fit(X, s) if cls is CVR else unweighted.fit(X, y) if cls is CVMClassifier else unweighted.fit(X)
    got = unweighted.predict(D) if cls is CVR else unweighted.decision_function(D)
    assert np.max(np.abs(got - ref)) > 1e-6 * np.max(np.abs(ref))  # the weights reached the fit


@pytest.mark.parametrize("n_classes", [2, 3])
def test_probabilities_of_csr_rows_are_the_dense_ones(n_classes):
    """predict_proba takes CSR rows as every other prediction method does: a model fitted on CSR rows gives
    the probabilities of the same model fitted on the dense rows, for CSR and dense queries alike."""
    X, _, s = sparse_data(m=150)
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, n_classes + 1)[1:-1]))
    D = X.toarray()
    csr = CVMClassifier(probability=True, random_state=0).fit(X, y)
    dense = CVMClassifier(probability=True, random_state=0).fit(D, y)
    want = dense.predict_proba(D)
    np.testing.assert_allclose(csr.predict_proba(X), want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(csr.predict_proba(D), want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(csr.predict_log_proba(X), np.log(want), rtol=1e-9, atol=1e-12)


def test_multiclass_and_cross_layout_prediction():
    X, _, s = sparse_data(m=210)
    y = np.digitize(s, np.quantile(s, [1 / 3, 2 / 3]))
    D = X.toarray()
    a = CVMClassifier(random_state=0).fit(X, y)
    b = CVMClassifier(random_state=0, impl="ref").fit(D, y)
    assert sp.issparse(a.support_vectors_) and not sp.issparse(b.support_vectors_)
    np.testing.assert_allclose(a.decision_function(D), b.decision_function(X), atol=1e-9)
    assert np.array_equal(a.predict(X), b.predict(D))
    # a planted linear rule is learnt: better than the 1/3 of chance by far
    assert a.score(X, y) > 0.8


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_bad_sparse_input_names_X(cls):
    X, y, s = sparse_data()
    target = s if cls is CVR else y
    bad = X.copy()
    bad.data[4] = np.nan
    with pytest.raises(ValueError, match="X"):
        cls().fit(bad, target) if cls in (CVR, CVMClassifier) else cls().fit(bad)
    est = cls(random_state=0).fit(X, target) if cls in (CVR, CVMClassifier) else cls(random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 41 features"):
        est.predict(sp.random(3, 41, density=0.2, format="csr", random_state=0))
    with pytest.raises(ValueError, match="X"):
        est.predict(bad)


def test_mmda_without_sparse_support_raises_type_error_naming_X():
    X, y, s = sparse_data()
    with pytest.raises(TypeError, match="Sparse data was passed for X"):
        MMDA(n_components=1).fit(X, y)


def test_implicit_surface_refuses_sparse_points():
    P = sp.random(50, 3, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match="Sparse data was passed for points"):
        ImplicitSurface().fit(P)
