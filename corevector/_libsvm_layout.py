"""A fitted model in LIBSVM's terms (:class:`LibsvmModel`: support vectors, coefficients, rho per pair), and the
scikit-learn SVM built from it (:func:`to_sklearn`, the estimators' ``to_sklearn()``).

Each estimator class that has a LIBSVM equivalent says which in its ``_libsvm_layout`` attribute: 'c_svc'
(CVMClassifier), 'one_class' (CVDD), 'meb' (MEB with the Gaussian kernel, as a one-class model) or
'epsilon_svr' (CVR).  Why these models are LIBSVM's, term by term, is in :mod:`corevector.io.libsvm`, which
writes and reads them as LIBSVM's model files.  This module imports no estimator: the estimators' own
``to_sklearn()`` uses it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

__all__ = ["LibsvmModel", "from_estimator", "to_sklearn", "LAYOUTS", "KERNEL_NAMES", "DENSE_MAX_ENTRIES"]

#: the layouts an estimator class may declare in ``_libsvm_layout``
LAYOUTS = ("c_svc", "one_class", "meb", "epsilon_svr")
#: corevector kernel -> LIBSVM kernel_type
KERNEL_NAMES = {"linear": "linear", "poly": "polynomial", "rbf": "rbf"}
KERNEL_BY_LIBSVM = {v: k for k, v in KERNEL_NAMES.items()}
#: support-vector matrices up to this many entries are dense when read back (else CSR)
DENSE_MAX_ENTRIES = 10_000_000


@dataclass
class LibsvmModel:
    """A model in LIBSVM's terms (``svm_model``): decision values sum_i sv_coef[., i] k(SV_i, x) - rho."""

    svm_type: str
    kernel_type: str
    gamma: float
    degree: int
    coef0: float
    sv: sp.csr_matrix          # (l, n_features)
    sv_coef: np.ndarray        # (nr_class - 1, l)
    rho: np.ndarray            # (n_pairs,)
    labels: np.ndarray | None  # (nr_class,) for classification; any labels for to_sklearn, ints in a file
    n_sv: np.ndarray | None    # (nr_class,) support vectors per class, grouped in label order
    prob_a: np.ndarray | None
    prob_b: np.ndarray | None
    n_features: int
    support: np.ndarray        # (l,) the training indices of the support vectors, in this order


# ------------------------------------------------------------------------------------------------------
# corevector estimator -> LIBSVM's terms
# ------------------------------------------------------------------------------------------------------
def _kernel(est):
    spec = est.kernel_spec_
    if spec.name == "precomputed":
        # LIBSVM's kernel_type precomputed: each support vector is its training serial number (0:i, 1-based),
        # and prediction reads the test row's kernel values at those serials
        return "precomputed", 0.0, 3, 0.0
    if spec.name == "callable":
        return "callable", 0.0, 3, 0.0
    if spec.name not in KERNEL_NAMES:
        raise ValueError(f"{type(est).__name__} with kernel={spec.name!r} has no LIBSVM or scikit-learn SVM "
                         f"equivalent (kernels: {sorted(KERNEL_NAMES)})")
    if spec.normalize and not spec.radial:
        raise ValueError(f"{type(est).__name__} with normalize=True and kernel={spec.name!r} has no LIBSVM or "
                         f"scikit-learn SVM equivalent")
    if spec.name == "linear" and spec.gamma != 1.0:
        # LIBSVM's (and scikit-learn's) linear kernel is x'y, with no gamma: gamma x'y is its polynomial
        # kernel of degree 1, coef0 0, computed as pow(gamma x'y + 0, 1), the same value
        return "polynomial", float(spec.gamma), 1, 0.0
    return KERNEL_NAMES[spec.name], float(spec.gamma), int(spec.degree), float(spec.coef0)


def _csr(X):
    return sp.csr_matrix(X, dtype=np.float64)


def from_estimator(est):
    """The :class:`LibsvmModel` of a fitted CVMClassifier, CVDD, MEB or CVR: the layout their class declares
    in ``_libsvm_layout`` ('c_svc', 'one_class', 'meb', 'epsilon_svr'); a TypeError for a class without one."""
    layout = getattr(type(est), "_libsvm_layout", None)
    if layout not in LAYOUTS:
        raise TypeError(f"{type(est).__name__} has no LIBSVM equivalent (CVMClassifier, CVDD, MEB and CVR have)")
    check_is_fitted(est)
    kernel_type, gamma, degree, coef0 = _kernel(est)
    d = int(est.n_features_in_)
    # (a precomputed kernel's support vectors are their training indices: one column, read as such by the writers)
    SV = _csr(est.support_vectors_)
    common = dict(kernel_type=kernel_type, gamma=gamma, degree=degree, coef0=coef0, n_features=d)
    if layout == "c_svc":
        return _classifier(est, SV, common)
    if layout == "one_class":
        return LibsvmModel("one_class", sv=SV, sv_coef=est.center_coef_[None, :].copy(),
                           rho=np.array([-est.intercept_[0]]), labels=None, n_sv=None, prob_a=None, prob_b=None,
                           support=np.asarray(est.support_), **common)
    if layout == "meb":
        spec = est.kernel_spec_
        if spec.name != "rbf" and not (spec.lookup and spec.kappa is not None):
            raise ValueError(f"MEB with kernel={spec.name!r} has no LIBSVM one-class equivalent: its "
                             f"decision function holds k(x, x), which only the Gaussian kernel keeps constant")
        kappa = float(spec.kappa) if spec.lookup else 1.0
        r2 = est.certified_radius_ ** 2
        # MEB.predict is +1 where r^2 - d^2 + MEMBERSHIP_RTOL r^2 > 0, LIBSVM's one-class rule (+1 where the
        # decision value is positive) on a rho lowered by that slack: the two agree at 0 and on the training
        # points a few ulps outside the ball they define
        slack = type(est).MEMBERSHIP_RTOL * r2
        return LibsvmModel("one_class", sv=SV, sv_coef=2.0 * est.center_coef_[None, :],
                           rho=np.array([est.rho_ + kappa - r2 - slack]), labels=None, n_sv=None, prob_a=None,
                           prob_b=None, support=np.asarray(est.support_), **common)
    return LibsvmModel("epsilon_svr", sv=SV, sv_coef=est.dual_coef_.copy(), rho=-est.intercept_.copy(),
                       labels=None, n_sv=None, prob_a=None, prob_b=None, support=np.asarray(est.support_), **common)


def _classifier(est, SV, common):
    """LIBSVM's one-vs-one layout: support vectors grouped by class (in classes_ order), each with the
    coefficients of the pairs of its class against every other class (row o - 1 for a class o above its
    own, row o below), rho = -b per pair (a, b) in LIBSVM's order."""
    k = len(est.classes_)
    dual, pairs = est.dual_coef_, est.pairs_
    pair_of = {p: i for i, p in enumerate(pairs)}
    # the class of each support vector: the pair (a, b) coefficient is alpha y with y = +1 for class a
    cls = np.full(dual.shape[1], -1)
    for p, (a, b) in enumerate(pairs):
        nz = dual[p] != 0
        cls[nz & (dual[p] > 0)] = a
        cls[nz & (dual[p] < 0)] = b
    if np.any(cls < 0):
        raise ValueError("a support vector has no nonzero coefficient")
    order = np.argsort(cls, kind="stable")
    coef = np.zeros((k - 1, len(order)))
    for col, s in enumerate(order):
        c = cls[s]
        for o in range(k):
            if o != c:
                coef[o - 1 if o > c else o, col] = dual[pair_of[(min(c, o), max(c, o))], s]
    prob = len(est.probA_) > 0
    return LibsvmModel("c_svc", sv=SV[order], sv_coef=coef, rho=-est.intercept_.copy(), labels=est.classes_,
                       n_sv=np.bincount(cls, minlength=k), prob_a=est.probA_.copy() if prob else None,
                       prob_b=est.probB_.copy() if prob else None, support=np.asarray(est.support_)[order],
                       **common)


def _every_entry_csr(a):
    """``a`` as a CSR matrix that stores every entry, zeros too: scikit-learn's sparse SVMs pass the ``.data`` of
    their ``_dual_coef_`` to LIBSVM as the dense (n_class - 1) x n_SV coefficients (``sp.csr_matrix(a)`` drops
    the zeros of a one-vs-one model, whose support vectors have none in the pairs of other classes)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    rows, cols = a.shape
    indptr = np.arange(rows + 1, dtype=np.int64) * cols
    return sp.csr_matrix((a.ravel(), np.tile(np.arange(cols, dtype=np.int32), rows), indptr), shape=(rows, cols))


def _lookup_parts(out, m, SV):
    """A precomputed or callable kernel's parts of the scikit-learn SVM ``out``."""
    if m.kernel_type == "precomputed":
        # scikit-learn's precomputed SVMs keep no support vectors: LIBSVM reads column support_[i] of K(X_test, X_train)
        out.support_vectors_ = np.empty((0, 0))
        out.shape_fit_ = (int(m.n_features), int(m.n_features))
        out._gamma = 0.0
    elif m.kernel_type == "callable":
        # scikit-learn evaluates kernel(X, X_fit) and predicts from it as from a precomputed kernel, reading the
        # columns support_: X_fit here is the support vectors themselves, so support_ numbers them 0 .. l - 1
        out._BaseLibSVM__Xfit = SV
        out.support_ = np.arange(SV.shape[0], dtype=np.int32)
        out._gamma = 0.0


def to_sklearn(estimator):
    """Return the fitted scikit-learn SVM with the estimator's decision function.

    The result's ``decision_function`` / ``predict`` equals the estimator's up to rounding (scikit-learn
    evaluates the same expansion through LIBSVM; an MEB's decision values are raised by the slack
    ``MEMBERSHIP_RTOL r^2`` its ``predict`` allows, so the two predict alike at 0), with its support vectors,
    coefficients, intercepts and, for ``probability=True``, Platt's sigmoids.  A model fitted on sparse rows
    gives a sparse SVM, which predicts on sparse and dense input.  Tools built on scikit-learn's SVMs take it as it is:
    skl2onnx (ONNX), skops (safe persistence), anything that reads ``dual_coef_`` and ``support_vectors_``.

    Parameters
    ----------
    estimator : CVMClassifier, CVDD, MEB or CVR
        A fitted estimator (MEB with the Gaussian kernel).

    Returns
    -------
    sklearn.svm.SVC or sklearn.svm.OneClassSVM or sklearn.svm.SVR
        ``SVC`` for CVMClassifier, ``OneClassSVM`` for CVDD and MEB, ``SVR`` for CVR.

    Raises
    ------
    ValueError
        For what those SVMs cannot express (:mod:`corevector.io.libsvm`'s docstring lists it).
    """
    from sklearn.svm import SVC, SVR, OneClassSVM  # (here: ~100 modules of scikit-learn a fit never needs)

    m = from_estimator(estimator)
    kernel = {"polynomial": "poly", "callable": estimator.kernel_spec_.function}.get(m.kernel_type, m.kernel_type)
    kw = dict(kernel=kernel, gamma="scale" if m.gamma == 0 else m.gamma, degree=m.degree, coef0=m.coef0)
    # a model fitted on sparse rows (CSR support vectors) predicts on sparse input, as an SVC fitted on them does
    # (scikit-learn's sparse SVMs take dense input too); a large one is sparse whatever it was fitted on
    sparse = (sp.issparse(getattr(estimator, "support_vectors_", None))
              or m.sv.shape[0] * m.n_features > DENSE_MAX_ENTRIES) and m.kernel_type != "precomputed"
    SV = sp.csr_matrix((m.sv.data, m.sv.indices, m.sv.indptr), shape=(m.sv.shape[0], m.n_features))
    SV = SV if sparse else np.ascontiguousarray(SV.toarray())
    l = m.sv.shape[0]
    if m.svm_type == "c_svc":
        prob = m.prob_a is not None
        out = SVC(C=float(estimator.C), probability=prob, **kw)
        out.classes_ = np.asarray(estimator.classes_)
        out.class_weight_ = np.asarray(estimator.class_weight_, dtype=np.float64)
        out._n_support = np.asarray(m.n_sv, dtype=np.int32)
        out._probA = m.prob_a.copy() if prob else np.empty(0)
        out._probB = m.prob_b.copy() if prob else np.empty(0)
        n_pairs = len(m.rho)
        out._num_iter = np.zeros(n_pairs, dtype=np.int32)
        out.n_iter_ = out._num_iter
        out._effective_probability = prob
    else:
        out = (OneClassSVM(**kw) if m.svm_type == "one_class" else
               SVR(C=float(estimator.C_) if np.isfinite(getattr(estimator, "C_", np.nan)) else 1.0, **kw))
        out._n_support = np.array([l, l], dtype=np.int32)
        out._probA = out._probB = np.empty(0)
        out._num_iter = np.zeros(1, dtype=np.int32)
        out.n_iter_ = 0
        out._effective_probability = False
    out._sparse = sparse
    out.n_features_in_ = int(m.n_features)
    out.support_ = np.asarray(m.support, dtype=np.int32)
    out.support_vectors_ = SV
    out._gamma = float(m.gamma)
    out.fit_status_ = 0
    out.shape_fit_ = (l, int(m.n_features))
    _lookup_parts(out, m, SV)
    out._dual_coef_ = _every_entry_csr(m.sv_coef) if sparse else np.ascontiguousarray(m.sv_coef)
    out._intercept_ = -np.asarray(m.rho, dtype=np.float64)
    if m.svm_type == "c_svc" and len(m.labels) == 2:  # scikit-learn's public sign for two classes
        out.dual_coef_, out.intercept_ = -out._dual_coef_, -out._intercept_
    else:
        out.dual_coef_, out.intercept_ = out._dual_coef_, out._intercept_.copy()
    if m.svm_type == "one_class":
        out.offset_ = -out._intercept_
    if hasattr(estimator, "feature_names_in_"):
        out.feature_names_in_ = estimator.feature_names_in_
    return out
