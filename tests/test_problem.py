"""The augmented-point problem (refimpl/problem.py) and the formulation builders (refimpl/cvm.py,
refimpl/cvr.py): sizes, index maps, the constant eta, validation.  The matrices themselves are
checked against K~ written out from scikit-learn in test_oracles.py."""
import numpy as np
import pytest
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel

from refimpl import cvm, cvr
from refimpl.kernels import make_kernel_spec
from refimpl.problem import MEBProblem

rng = np.random.default_rng(0)
X = rng.normal(size=(7, 3))
Y = np.sin(X[:, 0]) + X[:, 1]
LABELS = np.array([1, -1, 1, 1, -1, -1, 1])
RBF = make_kernel_spec(X, "rbf", gamma=0.5)
POLY = make_kernel_spec(X, "poly", gamma=0.3, degree=2, coef0=1.0)
POLY_DIAG = np.diag(polynomial_kernel(X, degree=2, gamma=0.3, coef0=1.0))


def test_problem_sizes_and_index_map():
    p = cvm.svdd_problem(X, RBF)
    assert (p.m, p.n) == (7, 7)
    np.testing.assert_array_equal(p.base([0, 3, 6]), [0, 3, 6])
    q = cvr.cvr_problem(X, Y, RBF, 10.0, 0.5)               # 000 eq. (8): 2m points, z_{i+m} = (x_i, -)
    assert (q.m, q.n) == (7, 14)
    np.testing.assert_array_equal(q.base([0, 6, 7, 13, 8]), [0, 6, 0, 6, 1])
    assert q.base([7]).dtype == np.intp


def test_problem_stores_compact_contiguous_arrays():
    p = cvm.two_class_problem(np.asfortranarray(X), LABELS, RBF, 1.0)
    assert p.X.flags.c_contiguous and p.X.dtype == np.float64
    assert p.sign.dtype == np.int8 and p.labels is p.sign


@pytest.mark.parametrize("problem, c0", [
    (cvm.svdd_problem(X, RBF), 1.0),                                   # kappa
    (cvm.svdd_problem(X, POLY), None),                                 # diag(K) varies: no constant
    (cvm.one_class_problem(X, RBF, 4.0), 1.0 + 0.25),                  # kappa + 1/C
    (cvm.one_class_problem(X, POLY, 4.0), POLY_DIAG.max() + 0.25),     # eta = max diag K~
    (cvm.two_class_problem(X, LABELS, RBF, 4.0), 1.0 + 1.0 + 0.25),    # kappa + 1 + 1/C
    (cvm.two_class_problem(X, LABELS, POLY, 4.0), POLY_DIAG.max() + 1.25),
    (cvm.svdd_problem(X, make_kernel_spec(X, "poly", gamma=0.3, degree=2, coef0=1.0, normalize=True)), 1.0),
])
def test_constant_term_is_the_constant_linear_term(problem, c0):
    """c0 (the engines' shift) is the constant linear term diag K~ + Delta where there is one."""
    idx = np.arange(problem.n)
    if c0 is None:
        assert problem.constant_term is None
        np.testing.assert_allclose(problem.shifted_linear_term(idx), problem.linear_term(idx), rtol=1e-14)
    else:
        assert problem.constant_term == pytest.approx(c0, rel=1e-14)
        np.testing.assert_allclose(problem.linear_term(idx), c0, rtol=1e-14)
        np.testing.assert_array_equal(problem.shifted_linear_term(idx), 0.0)


def test_cvr_eta_is_the_smallest_keeping_delta_nonnegative():
    """000 eq. (15): Delta_z = eta - diag_z + s_z (2/C) y_p(z) >= 0 with equality somewhere."""
    C, mu = 5.0, 0.3
    q = cvr.cvr_problem(X, Y, RBF, C, mu)
    diag = 1.0 + 1.0 + mu * 7 / C
    assert q.eta == pytest.approx(diag + (2.0 / C) * np.abs(Y).max(), rel=1e-14)
    assert q.constant_term == q.eta and q.has_delta
    idx = np.arange(q.n)
    d = q.delta(idx)
    assert d.min() == pytest.approx(0.0, abs=1e-14) and np.all(d >= -1e-14)
    np.testing.assert_allclose(q.shifted_linear_term(idx), (2.0 / C) * np.concatenate([Y, -Y]), rtol=1e-14)


def test_has_delta_only_for_the_generalized_cvm_and_cvr():
    assert not cvm.svdd_problem(X, POLY).has_delta                   # the MEB uses diag(K) itself
    assert not cvm.one_class_problem(X, RBF, 1.0).has_delta          # constant diagonal: Delta = 0
    assert cvm.one_class_problem(X, POLY, 1.0).has_delta
    assert cvr.cvr_problem(X, Y, RBF, 1.0, 0.5).has_delta
    np.testing.assert_array_equal(cvm.svdd_problem(X, POLY).delta(np.arange(7)), 0.0)


def test_offset_needs_the_constant_linear_term_and_one_value_per_row():
    with pytest.raises(ValueError, match="constant_linear_term"):
        MEBProblem(X, RBF, offset=np.zeros(7))
    for shape in (6, 8, (7, 1)):
        with pytest.raises(ValueError, match="one value per row"):
            MEBProblem(X, RBF, constant_linear_term=True, offset=np.zeros(shape))
    for bad in (Y[:-1], np.append(Y, 1.0), Y[:, None]):
        with pytest.raises(ValueError, match="one target per row"):
            cvr.cvr_problem(X, bad, RBF, 1.0, 0.5)


@pytest.mark.parametrize("bad", [np.array([1, -1, 1, 1, -1, -1]), np.array([1, -1, 1, 1, -1, -1, 1, 1]),
                                 np.array([[1], [-1], [1], [1], [-1], [-1], [1]]),
                                 np.array([1, -1, 1, 1, -1, 0, 1]), np.array([2, -1, 1, 1, -1, -1, 1]),
                                 np.array([1, -1, 1, 1, -2, -1, 1])])
def test_cvm_module_two_class_labels_must_be_plus_minus_one(bad):
    with pytest.raises(ValueError, match="y_pm"):
        cvm.two_class_problem(X, bad, RBF, 1.0)


def test_cvm_module_recover_orders_support_and_sets_each_kind():
    """recover (001 eqs. (3), (7), (11)): support vectors in training order, alpha > 0 only."""
    from types import SimpleNamespace
    res = SimpleNamespace(core_set=np.array([5, 0, 3, 6]), alpha=np.array([0.5, 0.2, 0.0, 0.3]), margin=0.7)
    two = cvm.recover(cvm.two_class_problem(X, LABELS, RBF, 2.0), res, 2.0, "two_class")
    np.testing.assert_array_equal(two.support, [0, 5, 6])
    np.testing.assert_allclose(two.coef, [0.2 * 1, 0.5 * -1, 0.3 * 1])
    np.testing.assert_allclose(two.xi, [0.1, 0.25, 0.15])
    assert two.rho == 0.7
    one = cvm.recover(cvm.one_class_problem(X, RBF, 2.0), res, 2.0, "one_class")
    assert one.intercept == -0.7 and one.rho == 0.7
    meb = cvm.recover(cvm.svdd_problem(X, RBF), res, None, "meb")
    assert meb.intercept == 0.0
    np.testing.assert_array_equal(meb.xi, 0.0)
    for kind in ("three_class", "linear", "", "zeta"):  # unknown kinds sorting before, between and after the three
        with pytest.raises(ValueError, match="formulation"):
            cvm.recover(cvm.svdd_problem(X, RBF), res, None, kind)


def test_rbf_problem_eta_needs_no_data_pass():
    """For a constant-diagonal kernel eta = kappa + beta_b + c is known from the kernel alone."""
    K = rbf_kernel(X, gamma=0.5)
    p = cvm.two_class_problem(X, LABELS, RBF, 8.0)
    assert p.eta == pytest.approx(np.diag(K).max() + 1.0 + 1.0 / 8.0, rel=1e-15)


def test_cvr_recover_follows_eqs_9_and_10():
    """000 eqs. (9)-(10) on a hand-made core set of 2m augmented points: a row may enter as z_i
    (lambda_i) and as z_{i+m} (lambda*_i); rows with lambda_i = lambda*_i (here a zero weight) are
    not support vectors."""
    from types import SimpleNamespace
    C, mu, m = 2.0, 0.5, 7
    q = cvr.cvr_problem(X, Y, RBF, C, mu)
    res = SimpleNamespace(core_set=np.array([0, 7, 2, 10, 3]), alpha=np.array([0.4, 0.1, 0.0, 0.3, 0.2]),
                          margin=0.5)
    model = cvr.recover(q, res, Y, C)
    np.testing.assert_array_equal(model.support, [0, 3])                   # row 2: lambda = lambda* = 0
    np.testing.assert_allclose(model.coef, [C * (0.4 - 0.1), C * (0.2 - 0.3)])
    assert model.intercept == pytest.approx(C * (0.3 - 0.1))
    np.testing.assert_allclose(model.xi, np.array([0.4, 0.2]) * mu * m)
    np.testing.assert_allclose(model.xi_star, np.array([0.1, 0.3]) * mu * m)
    s_alpha_y = 0.4 * Y[0] - 0.1 * Y[0] - 0.3 * Y[3] + 0.2 * Y[3]             # alpha~'[y; -y]
    assert model.epsilon_bar == pytest.approx(s_alpha_y - C * 0.5)
    assert model.dual_objective == pytest.approx((2.0 / C) * s_alpha_y - 0.5)
    # row 0 only as its mirror z_m (index m itself): a support vector with lambda_0 = 0
    res = SimpleNamespace(core_set=np.array([m, 3]), alpha=np.array([0.6, 0.4]), margin=0.5)
    model = cvr.recover(q, res, Y, C)
    np.testing.assert_array_equal(model.support, [0, 3])
    np.testing.assert_allclose(model.coef, [-C * 0.6, C * 0.4])


def test_cvm_ridge_is_scale_over_c_i_scalar_for_equal_weights_and_refuses_bad_ones():
    """cvm.ridge gives the ridge scale / C_i of K~'s diagonal, C_i = C w_i: no weights or equal ones give
    the scalar scale / (C w) (the problem of C w, bit for bit), unequal ones the per-point array; weights
    that are not a 1-d array of finite positive values are a ValueError (estimators drop zero weights
    before building the problem)."""
    assert cvm.ridge(4.0) == (0.25, None)
    assert cvm.ridge(4.0, scale=2.0) == (0.5, None)
    assert cvm.ridge(2.0, np.array([3.0, 3.0, 3.0])) == (1.0 / 6.0, None)
    assert cvm.ridge(2.0, np.array([5.0]), scale=3.0) == (0.3, None)
    for w in ([3.0, 1.0], [1.0, 3.0], [2.0, 2.0, 1.0]):
        diag_add, point_diag = cvm.ridge(2.0, np.array(w), scale=3.0)
        assert diag_add == 0.0
        np.testing.assert_array_equal(point_diag, 3.0 / (2.0 * np.array(w)))
    for bad in ([1.0, 0.0], [1.0, -2.0], [1.0, np.inf], [1.0, np.nan], [[1.0, 2.0]], 2.0):
        with pytest.raises(ValueError, match="weights"):
            cvm.ridge(1.0, np.array(bad))


def test_point_diag_is_validated_and_enters_the_diagonal_of_k_tilde_dense_and_sparse():
    """A per-point ridge c_i (weighted fits) needs the generalized CVM's constant linear term, one finite
    value >= 0 per row (0 allowed: no ridge at that point), and no scalar diag_add beside it; K~ then
    has k(x_i, x_i) + beta_b + c_i on its diagonal, written here from scikit-learn's rbf_kernel, for
    dense and CSR rows (whose k(x, x) the problem keeps for every row)."""
    import scipy.sparse as sp
    rng = np.random.default_rng(3)
    Xd = rng.normal(size=(6, 3))
    c = np.array([0.5, 0.0, 2.0, 1.0, 0.25, 3.0])
    with pytest.raises(ValueError, match="constant_linear_term"):
        MEBProblem(Xd, RBF, point_diag=c)
    for bad in (c[:5], np.r_[c, 1.0], np.r_[c[:5], np.inf], np.r_[c[:5], np.nan], np.r_[c[:5], -1.0], c.reshape(2, 3), c[None, :]):
        with pytest.raises(ValueError, match="point_diag"):
            MEBProblem(Xd, RBF, point_diag=bad, constant_linear_term=True)
    with pytest.raises(ValueError, match="not both"):
        MEBProblem(Xd, RBF, point_diag=c, diag_add=0.5, constant_linear_term=True)
    sign = np.array([1, -1, 1, 1, -1, -1])
    K = rbf_kernel(Xd, gamma=0.5) + 1.0
    for X in (Xd, sp.csr_matrix(Xd)):
        q = MEBProblem(X, RBF, sign=sign, label_bias=1.0, point_diag=c, constant_linear_term=True)
        idx = np.arange(6)
        np.testing.assert_allclose(q.diag(idx), 1.0 + 1.0 + c, rtol=1e-15)
        assert q.eta == pytest.approx(1.0 + 1.0 + c.max(), rel=1e-15)     # eta = max diag K~ (000 Sec. 3.2)
        np.testing.assert_allclose(q.block(idx, idx), np.outer(sign, sign) * K + np.diag(c), rtol=1e-12, atol=1e-14)
        r = MEBProblem(X, RBF, sign=sign, label_bias=1.0, diag_add=0.5)
        np.testing.assert_allclose(r.diag(idx), 1.0 + 1.0 + 0.5, rtol=1e-15)
        np.testing.assert_allclose(r.block(idx, idx), np.outer(sign, sign) * K + 0.5 * np.eye(6), rtol=1e-12, atol=1e-14)
