"""The MMDA transformer: maximum margin discriminant features by core vectors ([004]).

A thin scikit-learn estimator over :mod:`refimpl.mmda`: validate, resolve the kernel once on the
whole training set, extract ``n_components`` orthonormal directions per one-vs-all binary problem
with the chosen solver of MMDA's dual (3), and keep each direction as a sparse kernel expansion.
``transform`` projects new data onto them.  ``impl='fast'`` runs the numerics in C
(:mod:`fastimpl._mmda`), ``impl='ref'`` in NumPy; both share the loop and the random draws.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl import mmda as ref_mmda
from refimpl.baselines.mmda_svm import SOLVERS as QP_SOLVERS
from refimpl.progress import Steps

from ._validation import (refuse_lookup_kernel, plain, POSITIVE, check_eps, checked_kernel_spec, invalid_parameter, shared_constraints,
                          store_params)
from ._base import kernel_doc
from .parallel.tasks import run_tasks, submits_tasks
from .numerics import numerics

METHODS = ("cvm", "svm")
#: rows of new data per block in ``transform`` (bounds temporary memory)
TRANSFORM_BLOCK = 2048


def _numerics(impl, spec):
    """(ops class, raw kernel block) of the chosen implementation (corevector.numerics)."""
    num = numerics(impl)
    return num.constrained_ops, (lambda A, B: num.kernel_matrix(spec, A, B))


@kernel_doc
class MMDA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Maximum margin discriminant analysis features, MMDA(CVM) ([004] Secs. II and IV).

    Extracts large-margin features one direction at a time.  Each binary problem (one per class
    against the rest; a single one for two classes) gives ``n_components`` directions u_1, u_2, ...:
    u_1 is the normalised weight vector of the L2-SVM (1), and u_(s+1) that of the same SVM constrained
    to be orthogonal to u_1 .. u_s (problem (2)).  With ``method='cvm'`` each is found as a
    projection-constrained minimum enclosing ball by core vectors (a ``(1 + eps)^2``-approximation,
    Theorem 2) with SOR as the core-set solver; ``method='svm'`` solves the dual (3) exactly with a
    dense QP over all points (MMDA(SVM), the paper's baseline; m x m memory).  Each direction is kept
    as a sparse kernel expansion over its core vectors.

    Parameters
    ----------
    n_components : int, default=1
        Directions per binary problem; the output has ``n_components * n_problems`` features
        (N_c problems for N_c > 2 classes, one for two classes).
    C : float, default=1.0
        The L2-SVM's penalty (the paper uses C = 1).
    eps : float, default=1e-3
        The ``(1 + eps)`` tolerance of the core-set loop (the paper's Sec. V value); in (0, 1), and in
        (0, sqrt(3) - 1) under ``stop='margin'`` (``corevector._validation.EPS_MAX``).
    kernel : %KERNELS%, default='rbf'
        The kernel (see :class:`CVMClassifier`).
    gamma : float or {'beta', 'scale', 'auto'}, default='beta'
        %GAMMA%
    degree : int, default=3
        Degree of the polynomial kernel; ignored by the other kernels.
    coef0 : float, default=0.0
        Independent term of the polynomial kernel; ignored by the other kernels.
    normalize : bool, default=False
        Use ``k(x, y) / sqrt(k(x, x) k(y, y))``.
    method : {'cvm', 'svm'}, default='cvm'
        'cvm': MMDA(CVM), core vectors and SOR; 'svm': MMDA(SVM), the exact dense QP.
    sample_size : int or None, default=59
        Random candidates per core-set iteration; None scans all points (Theorem 2's setting).
    n_confirm : int, default=30
        With sampling, stop after ``1 + n_confirm`` consecutive clean samples.
    max_iter : int, default=10000
        Bound on core-set updates per direction (a ``ConvergenceWarning`` says when it stops a fit).
    tol : float or None, default=None
        Core-set QP tolerance on squared distances; None means ``eps R^2`` (``eps c'c`` for the margin
        rules).
    stop : {'radius', 'margin', 'gap', 'hybrid'}, default='radius'
        The test that ends each direction's core-set loop (``refimpl.driver.STOPS``): the paper's
        ``(1 + eps)`` ball test, or one measured against the margin term ``c'c`` of the constrained
        ball.
    omega : float, default=1.0
        SOR's relaxation factor (Algorithm 3), in (0, 2).
    certify : bool, default=True
        Run the final full scan of each direction that gives ``certified_ratio_``.
    qp_solver : {'active_set', 'interior_point'}, default='active_set'
        Exact dense solver of (3) for ``method='svm'`` (``refimpl.baselines.mmda_svm``): a primal
        active-set method, or cvxopt's interior point (independent of MMDA(CVM), slower).
    random_state : int, RandomState instance, Generator or None, default=None
        Seed of the random samples of the core-set loops.
    impl : {'fast', 'ref'}, default='fast'
        The C numerics or the readable NumPy reference (same loop, same random draws).
    verbose : bool, default=False
        Show a progress bar over the directions, one step per direction.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    n_components_ : int
        Number of output features, ``n_components`` times the number of binary problems.
    kernel_spec_ : KernelSpec
        The resolved kernel.
    expansion_vectors_ : list of ndarray
        Per binary problem, the expansion points' inputs.
    expansion_index_ : list of ndarray
        Per binary problem, the expansion points' training indices.
    expansion_coef_ : list of ndarray
        Per binary problem, the (n_points, n_components) coefficients: feature q of problem c is
        ``sum_j expansion_coef_[c][j, q] k(expansion_vectors_[c][j], x)``.
    core_set_size_ : ndarray of shape (`n_components_`,)
        Core vectors of each output feature's fit.
    n_support_ : ndarray of shape (`n_components_`,)
        Support vectors of each output feature's fit.
    n_iter_ : ndarray of shape (`n_components_`,)
        Core-set iterations of each output feature's fit.
    kernel_evaluations_ : ndarray of shape (`n_components_`,)
        Kernel evaluations made by each output feature's fit.
    certified_ratio_ : ndarray of shape (`n_components_`,)
        ``(r_cert / R)^2`` of each output feature's fit, from its final scan.
    radius_ : ndarray of shape (`n_components_`,)
        R, the radius of each output feature's core-set ball.
    sor_steps_ : ndarray of shape (`n_components_`,)
        SOR sweeps of each output feature's fit (nan for ``method='svm'``).
    converged_ : ndarray of shape (`n_components_`,)
        Whether each output feature's stop test ended its loop.
    n_expansion_ : ndarray of shape (`n_components_`,)
        Kernel evaluations each output feature needs on new data (the nonzero coefficients of its
        expansion).
    cpu_time_ : ndarray of shape (`n_components_`,)
        CPU time (all threads) of each output feature's extraction, in seconds.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen during ``fit``; defined only when X has string column names
        (a pandas DataFrame).

    See Also
    --------
    CVMClassifier : The L2-SVM whose weight vector is the first direction.
    sklearn.decomposition.KernelPCA : Unsupervised kernel features.

    Notes
    -----
    ``sample_size=None`` scans all points, which is the setting of Theorem 2's bound.  The constrained
    loop shares the engine's initialisation, sampling, confirmation and certificate code
    (``refimpl.constrained_meb``) and uses the paper's radius rule by default.  ``impl='fast'`` runs
    the numerics in C (``fastimpl._mmda``), ``impl='ref'`` in NumPy; both share the loop and the random
    draws.

    References
    ----------
    .. [004] I. W. Tsang, A. Kocsor and J. T. Kwok. Large-Scale Maximum Margin Discriminant Analysis Using Core
       Vector Machines. IEEE Transactions on Neural Networks 19(4), pp. 610-624, 2008.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from corevector import MMDA
    >>> X, y = load_iris(return_X_y=True)
    >>> mmda = MMDA(n_components=2, random_state=0)
    >>> F = mmda.fit_transform(X, y)  # 2 features for each of the 3 one-vs-rest problems
    >>> F.shape
    (150, 6)
    >>> mmda.get_feature_names_out()[:2]
    array(['mmda0', 'mmda1'], dtype=object)
    """

    _parameter_constraints: dict = {
        **shared_constraints("eps", "kernel", "gamma", "degree", "coef0", "normalize", "sample_size", "n_confirm",
                             "max_iter", "tol", "stop", "certify", "random_state", "impl", "verbose"),
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "C": [POSITIVE],
        "method": [StrOptions(set(METHODS))],
        "omega": [Interval(Real, 0, 2, closed="neither")],
        "qp_solver": [StrOptions(set(QP_SOLVERS))],
    }

    def __init__(self, n_components=1, *, C=1.0, eps=1e-3, kernel="rbf", gamma="beta", degree=3, coef0=0.0,
                 normalize=False, method="cvm", sample_size=59, n_confirm=30, max_iter=10000, tol=None,
                 stop="radius", omega=1.0, certify=True, qp_solver="active_set", random_state=None, impl="fast",
                 verbose=False):
        store_params(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Extract the directions from (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (dense).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).

        Returns
        -------
        MMDA
            The fitted transformer (``self``).
        """
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", ensure_min_samples=2)
        check_classification_targets(y)
        check_eps(self, self.eps, self.stop)
        if self.n_components > X.shape[0]:
            # no more orthogonal directions exist in the span of the training data
            raise invalid_parameter(self, "n_components", f"at most n_samples={X.shape[0]}", self.n_components)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"y has only one class ({plain(classes[0])!r}); MMDA needs at least 2")
        refuse_lookup_kernel(self, "MMDA's transform projects new points on directions expanded over training rows "
                                   "through its own constrained-MEB numerics, which evaluate built-in kernels only")
        spec = checked_kernel_spec(X, self.kernel, self.gamma, self.degree, self.coef0, self.normalize)
        ops_class, _ = _numerics(self.impl, spec)
        if self.method == "cvm":
            solve = ref_mmda.solve_cvm(float(self.eps), sample_size=self.sample_size, n_confirm=self.n_confirm,
                                       max_iter=self.max_iter, tol=self.tol, omega=float(self.omega),
                                       certify=self.certify, stop=self.stop, ops_class=ops_class)
        else:
            from refimpl.baselines.mmda_svm import solve_svm
            solve = solve_svm(ops_class, self.qp_solver)
        n_problems = 1 if len(classes) == 2 else len(classes)
        with Steps(self.verbose, f"MMDA ({self.impl}) directions", n_problems * int(self.n_components),
                   unit="direction") as bar:
            def solve_and_count(problem, seed):
                d = solve(problem, seed)
                bar.step(core_set=d.info.get("core_set_size", len(d.support)))
                return d
            # with a distributed client, the one-vs-all problems run as separate tasks on its workers
            # (corevector.parallel.run_tasks; the progress bar stays here and steps as they return)
            on_cluster = submits_tasks(n_problems, (X,))
            # the small blocks of the fit (||w||^2 over a support) use the same NumPy code in both
            # implementations, so that the directions, and the SOR steps of the next fit, agree bit for bit
            self.classes_, binaries = ref_mmda.fit_mmda(X, y, spec, float(self.C), int(self.n_components),
                                                        solve if on_cluster else solve_and_count,
                                                        self.random_state, run=run_tasks)
            if on_cluster:
                for b in binaries:
                    for info in b.info:
                        bar.step(core_set=info.get("core_set_size", 0))
        self.kernel_spec_ = spec
        self.expansion_index_ = [b.points for b in binaries]
        self.expansion_vectors_ = [X[b.points] for b in binaries]
        self.expansion_coef_ = [b.coef for b in binaries]
        infos = [i for b in binaries for i in b.info]
        self.n_components_ = len(infos)

        def per_feature(key, dtype=float):
            return np.array([i.get(key, np.nan) for i in infos], dtype=dtype)

        self.core_set_size_ = per_feature("core_set_size", int)
        self.n_support_ = per_feature("n_support", int)
        self.n_iter_ = per_feature("n_iter", int)
        self.kernel_evaluations_ = per_feature("kernel_evaluations", np.int64)
        self.certified_ratio_ = per_feature("certified_ratio")
        self.radius_ = per_feature("radius")
        self.sor_steps_ = per_feature("sor_steps")
        self.converged_ = per_feature("converged", bool)
        self.n_expansion_ = per_feature("n_expansion", int)
        self.cpu_time_ = per_feature("cpu_time")
        return self

    @property
    def _n_features_out(self):
        return self.n_components_

    def transform(self, X):
        """Project X onto the extracted directions.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to project (dense).

        Returns
        -------
        ndarray of shape (n_samples, `n_components_`)
            The features, class by class: the ``n_components`` directions of the first binary
            problem, then those of the next.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        _, raw_block = _numerics(self.impl, self.kernel_spec_)
        out = np.empty((X.shape[0], self.n_components_))
        col = 0
        for V, B in zip(self.expansion_vectors_, self.expansion_coef_):
            k = B.shape[1]
            for start in range(0, X.shape[0], TRANSFORM_BLOCK):
                blk = X[start:start + TRANSFORM_BLOCK]
                out[start:start + TRANSFORM_BLOCK, col:col + k] = raw_block(blk, V) @ B if len(V) else 0.0
            col += k
        return out
