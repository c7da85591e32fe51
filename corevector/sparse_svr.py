"""SparseSVR: SSVR-SRS sparse support vector regression built in the primal ([002]).

A thin scikit-learn estimator over the SSVR-SRS loop :func:`refimpl.ssvr.ssvr_srs`, run with the
NumPy numerics (``impl='ref'``) or with the C numerics of :func:`fastimpl._ssvr.ssvr_srs`
(``impl='fast'``): the same draws and rules, so the same basis.  ``selection='random'`` gives RSVM
(a random basis refitted by the same primal solver).  Sparse (CSR) inputs stay sparse in both.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, Options, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl.progress import Steps
from refimpl.ssvr import AUTO_MAX_BASIS, SELECTIONS, ValidationPath, auto_delta

from ._validation import POSITIVE, refuse_lookup_kernel, checked_kernel_spec, plain, invalid_parameter, shared_constraints, store_params
from ._base import kernel_doc
from .numerics import numerics

#: basis size used when ``n_basis=None``
DEFAULT_N_BASIS = 100


def _n_jobs(n_jobs):
    """``n_jobs``, or 1 in a forked child (GNU OpenMP cannot start a team of threads there)."""
    import fastimpl
    return 1 if fastimpl.IN_FORKED_CHILD else n_jobs


def get_solver(impl):
    """(ssvr_srs, kernel_expansion) of the chosen implementation (corevector.numerics)."""
    num = numerics(impl)
    return num.ssvr_srs, num.kernel_expansion


@kernel_doc
class SparseSVR(RegressorMixin, BaseEstimator):
    """Sparse SVR by SSVR-SRS, built in the primal ([002] Table 1).

    Fits ``f(x) = sum_(j in P) beta_j k(x, x_j) + b`` by minimising the primal objective (8),
    ``sum_i l_(eps,Delta)(f(x_i) - y_i) + lam beta'K beta`` with the insensitive Huber loss (7), over
    expansions on a reduced set P of training points grown one at a time: each new basis function is
    the best of ``n_candidates`` random unused points under the normalised gradient criterion
    (eqs. (14)-(17)), then ``beta_P`` is refitted by finite Newton with an exact line search
    (eqs. (18)-(24)) and an incrementally updated Cholesky factor (Sec. 3.3).  Adding a function costs
    O(n m), and no n x n matrix is formed.

    Parameters
    ----------
    n_basis : int, 'auto' or None, default='auto'
        Number m of basis functions.  'auto': chosen on a hold-out of the training rows, at most 400, or
        every training row when the dense alternative wins there (see the Notes; the size chosen is
        ``n_basis_``); None: ``min(100, n_samples)``.  An int must not
        exceed n_samples (nor, with ``lam='auto'``, the rows left after the hold-out).
    lam : float or 'auto', default='auto'
        Regularisation lambda of (8) (``1 / (2C)`` in the SVR primal (1)).  With ``delta='auto'`` it is
        free of the targets' units.  'auto': chosen on the hold-out from 1e-4 .. 10 in half decades (the
        value chosen is ``lam_``).
    epsilon : float, default=0.0
        Width eps of the insensitive zone of the loss (7), in the targets' units.
    delta : float or 'auto', default='auto'
        Huber threshold ``Delta > epsilon`` of (7), in the targets' units; ``np.inf`` gives the
        insensitive quadratic loss.  'auto': ``Delta = epsilon + 3 s``, ``s = 1.4826 MAD(y)`` the
        targets' robust scale (``refimpl.ssvr.auto_delta``); the resolved value is ``delta_``.
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
    n_candidates : int, default=100
        Size of the random candidate subset O of (17).
    selection : {'srs', 'random'}, default='srs'
        'srs' is SSVR-SRS; 'random' is RSVM (uniformly random basis, same primal solver).
    fit_intercept : bool, default=True
        The paper drops the bias b (eq. (3)).  With True (beyond the paper) the targets are centred
        and ``b = mean(y)``, a constant offset that keeps the kernel expansion from spending basis
        functions on the mean; False is the paper's model exactly.
    tol : float, default=0.0
        Stop early when the last basis function decreased L by at most ``tol * L``.  The default 0
        grows the basis to ``n_basis`` (or to the kernel's numerical rank, with a warning for a given
        ``n_basis``): a decrease of the training objective says little about the test error (1e-6
        stopped Friedman #3 at 30,000 points after about 175 of 812 functions, 2.9% worse).
    max_newton : int, default=50
        Bound on finite Newton iterations per sub-problem (a ``ConvergenceWarning`` says when it binds).
    random_state : int, RandomState instance, Generator or None, default=None
        Seed of the hold-out split (under 'auto') and of the candidate draws; an int makes fits
        reproducible (the same basis and the same choices in both implementations).
    impl : {'fast', 'ref'}, default='fast'
        The C numerics or the readable NumPy reference (same draws and rules, so the same basis).
    n_jobs : int or None, default=None
        OpenMP threads for the candidate scoring of ``impl='fast'`` (None: ``OMP_NUM_THREADS`` if set,
        else all CPUs, or 1 when the 1-minute load average is already at least the CPU count, where
        spin-waiting OpenMP threads slow the fit down; -1: all CPUs; ignored by 'ref').  The fitted
        model does not depend on it.  In a process forked after an OpenMP region ran (a 'fork'
        multiprocessing pool), 1 whatever the value: GNU OpenMP would hang there (see ``fastimpl``).
    verbose : bool, default=False
        Show a progress bar over the basis functions, one step per function (under 'auto': of the
        growth on the fit rows).

    Attributes
    ----------
    basis_indices_ : ndarray of shape (`n_basis_`,)
        Training indices of the basis functions, in order of selection.
    basis_vectors_ : ndarray of shape (`n_basis_`, n_features)
        Their inputs (dense, also when X was sparse).
    coef_ : ndarray of shape (`n_basis_`,)
        The expansion coefficients ``beta_P``.
    intercept_ : float
        b (0 when ``fit_intercept=False``).
    objective_history_ : ndarray of shape (n_grown,)
        ``L(beta_P)`` of (18) after each basis function (non-increasing); under 'auto' those of the
        growth on the fit rows, which may go past the ``n_basis_`` functions kept.
    newton_iterations_ : ndarray of shape (n_grown,)
        Finite Newton iterations after each addition (of that growth under 'auto').
    n_basis_ : int
        Number of basis functions fitted (below ``n_basis`` after an early stop; chosen under 'auto').
    lam_ : float
        The lambda of the fit (``lam``, or the one chosen by ``lam='auto'``).
    validation_path_ : ValidationPath
        The hold-out scores behind the 'auto' choices: ``mse[k, j]`` is the hold-out mean squared error
        of the least-squares fit of the first ``n_basis[k]`` functions at ``lam[j]``; when the dense
        alternative was scored, a last row with ``n_basis[-1] = n_fit`` holds kernel ridge on every fit row
        (inf at the lams not scored); ``n_fit`` and ``n_val`` rows fitted and held out (empty, ``n_val=0``,
        when neither parameter is 'auto').
    stop_reason_ : str
        Why the basis stopped growing: 'n_basis', 'tol', 'zero_gradient', 'no_candidates' or
        'callback' (the callback returned True; also the hold-out rule's stop under ``n_basis='auto'``).
    converged_ : bool
        Whether every sub-problem met the finite Newton stopping rule.
    kernel_spec_ : KernelSpec
        The resolved kernel.
    delta_ : float
        The Huber threshold Delta the fit used (resolved from 'auto').
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen during ``fit``; defined only when X has string column names
        (a pandas DataFrame).

    See Also
    --------
    CVR : Core Vector Regression, sparse by its core set.
    sklearn.svm.SVR : LIBSVM's epsilon-SVR, the usual baseline.

    Notes
    -----
    **The defaults need no tuning.**  ``n_basis='auto', lam='auto'`` choose the basis size and lambda on
    a hold-out of the training rows (``refimpl.ssvr.ssvr_auto``): a random 20% of them (at most 2,000,
    drawn from ``random_state``) is held out; the basis grows by SSVR-SRS on the others at lam = 1e-2;
    at 25, 50, 75, 100, 150, 200, 300 and 400 functions the least-squares fits of the basis for every
    lam of the grid are scored on the hold-out (one generalized eigendecomposition each); the growth
    stops at the first of those sizes that is at least 100 and twice the best size so far (a size
    counts as better when it lowers the hold-out MSE by more than 0.1% of the hold-out targets'
    variance).  The model keeps the first functions up to the best size, with its best lam, and
    refits beta on all rows with the loss (7).  Smooth targets get a large basis and a weak lam, noisy
    ones a small basis and a strong lam (``validation_path_`` shows the scores).  The cost is bounded
    by the 400-function cap: about 2 s of CPU at 8,000 training rows.  Given values of ``n_basis`` and
    ``lam`` fit as before (no hold-out); with one of them given, the other is chosen.

    **The dense alternative.**  When the growth stopped on a flat curve (the rule above, not the cap),
    the set has at most 8,192 rows, the best hold-out MSE is above 1% of Var(y_V) and the grown basis
    leaves more than 10% of the kernel's trace on the fit rows F unspanned (the trace of the Nystrom
    residual ``K_FF - K_FP K_PP^-1 K_PF``, ``O(|F| m^2)``), the rule also scores kernel ridge with every fit
    row a basis function, ``(K_FF + lam I) alpha = y_F`` at the smallest lam of the grid (the
    least-squares fit above with P = F, by one Cholesky factorisation, ``|F|^3 / 3`` flops).  It is kept
    only when its hold-out MSE is below the sparse basis's best by more than 1% of Var(y_V); then the
    model is kernel ridge on all rows, ``(K + lam I) beta = y`` (the quadratic loss it was scored with;
    every row a basis function, ``n_basis_ = n_samples``).  Kernel ridge differs from the basis's fits
    only in the directions the basis leaves out, and only the weakly regularised dense fit is scored:
    at a strong lam kernel ridge has few effective degrees of freedom, which a basis of a few hundred
    functions already spans (the curve above measured that regime).  puma32h (8,192 rows, 32 inputs)
    needs it: with the isotropic Gaussian in 32 dimensions its signal is in many small kernel
    eigen-directions, and least-squares fits of random bases on one fold reach at most R^2 0.22 with
    100-3,000 functions, 0.28 with 4,000 and 0.49 with all 6,553 rows (with a few hundred functions no
    loss, selection or width changes that).  There the dense model is kept on every fold (5-fold R^2
    0.51 against ``SVR()``'s 0.27, about 6 s of CPU per fit against the basis's 1.3 s); the grown bases
    leave 25-32% of the kernel's trace out there, at most 2.4% on the other sets of the panel, where
    the dense fit is not scored and the models are unchanged.  Scoring it costs one factorisation of
    the fit rows' kernel matrix (a few seconds at 6,000 fit rows).

    With ``epsilon=0, delta='auto'`` the loss is Huber's (case (1) of (7)), quadratic within 3 robust
    standard deviations of y: least squares up to the outliers, which suits the squared error a user
    measures, and the fit is equivariant in the targets' scale (``c*y`` predicts c times the fit of
    y, so one lam grid serves every unit).  eps = 0 costs no sparsity: the basis size, not eps, makes
    the model sparse.  ``gamma='beta'`` (1 / (2 d) on standardised inputs) and ``fit_intercept=True``
    (b = mean(y)) complete the defaults.

    The rule's constants were chosen on the regression panel of ``reports.regression`` (5-fold R^2
    against ``SVR()`` on standardised targets with gamma = 1/(d Var X), rows capped at 10,000): on
    the seven sets where the former fixed defaults (100 functions, lam = 1e-2) fell more than 0.01
    short (diabetes, both wine qualities, compactiv, puma32h, grid_stability, Friedman #1) and then
    held on the other thirteen.  The defaults come within 0.01 of SVR's R^2 on 19 of the 20 sets
    (above it on most); the twentieth, puma32h, is reached by the dense alternative (above).

    The paper's settings remain available: ``SparseSVR(n_basis=m, lam=1e-2, epsilon=0.1, delta=0.3,
    fit_intercept=False)`` on inputs scaled to [-1, 1] ([002] Sec. 4, with eps and lam by cross
    validation there), and any setting can be tuned in one line, e.g.
    ``GridSearchCV(SparseSVR(n_basis=m), {"lam": [1e-3, 1e-2, 1e-1], "gamma": ["beta", 1.0]}).fit(X, y)``.

    ``selection='random'`` gives RSVM (a random basis refitted by the same primal solver),
    ``delta=np.inf`` the insensitive quadratic loss, ``fit_intercept=False`` the paper's bias-free
    model.  The growth stops at ``n_basis`` functions, when the relative decrease falls below ``tol``,
    when a whole draw of candidates is numerically dependent on the basis, or when the callback
    returns True.

    References
    ----------
    .. [002] L. Bo, L. Wang and L. Jiao. Selecting a Reduced Set for Building Sparse Support Vector Regression in
       the Primal. Advances in Knowledge Discovery and Data Mining (PAKDD), LNAI 4426, pp. 35-46, 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from corevector import SparseSVR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(600, 2))
    >>> y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.normal(size=600)
    >>> est = SparseSVR(n_basis=20, lam=1e-2, random_state=0).fit(X, y)
    >>> est.n_basis_, est.coef_.shape
    (20, (20,))
    >>> bool(est.score(X, y) > 0.9)
    True
    >>> auto = SparseSVR(random_state=0).fit(X, y)     # n_basis and lam chosen on a hold-out
    >>> bool(auto.score(X, y) > 0.9), auto.n_basis_ <= 400
    (True, True)
    """

    _parameter_constraints: dict = {
        **shared_constraints("kernel", "gamma", "degree", "coef0", "normalize", "random_state", "impl"),
        "n_basis": [Interval(Integral, 1, None, closed="left"), None, StrOptions({"auto"})],
        "lam": [POSITIVE, StrOptions({"auto"})],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "delta": [POSITIVE, Options(Real, {np.inf}), StrOptions({"auto"})],
        "n_candidates": [Interval(Integral, 1, None, closed="left")],
        "selection": [StrOptions(set(SELECTIONS))],
        "fit_intercept": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_newton": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Interval(Integral, 1, None, closed="left"), Options(Integral, {-1}), None],
        "verbose": ["verbose"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR input for fit and predict; other formats become CSR
        return tags

    def __init__(self, *, n_basis="auto", lam="auto", epsilon=0.0, delta="auto", kernel="rbf", gamma="beta", degree=3,
                 coef0=0.0, normalize=False, n_candidates=100, selection="srs", fit_intercept=True, tol=0.0,
                 max_newton=50, random_state=None, impl="fast", n_jobs=None, verbose=False):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, callback=None):
        """Fit the sparse expansion on (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training inputs; sparse ones are read as CSR rows, never densified.
        y : array-like of shape (n_samples,)
            Targets (not all equal).
        callback : callable, default=None
            Called as ``callback(basis_indices, beta)`` after every basis function (on the centred
            problem when ``fit_intercept``: add ``intercept_`` to its predictions; under 'auto', during
            the growth on the fit rows, with indices into X).  Returning True stops the growth
            (``stop_reason_ = 'callback'``).

        Returns
        -------
        SparseSVR
            The fitted estimator (``self``).
        """
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2,
                             y_numeric=True)
        if np.ptp(y) == 0:
            raise ValueError(f"y is constant ({plain(y[0])!r}): nothing to regress")
        n = X.shape[0]
        auto = self.n_basis == "auto" or self.lam == "auto"
        n_basis = min(DEFAULT_N_BASIS, n) if self.n_basis is None else self.n_basis
        if n_basis != "auto" and n_basis > n:
            raise invalid_parameter(self, "n_basis", f"at most n_samples={n}", n_basis)
        if self.delta == "auto":
            delta = auto_delta(y, self.epsilon)
        elif self.delta <= self.epsilon:  # the loss (7) needs Delta > eps
            raise invalid_parameter(self, "delta", f"greater than epsilon={self.epsilon!r}", self.delta)
        else:
            delta = float(self.delta)
        refuse_lookup_kernel(self, "SSVR-SRS (002) scores candidate basis vectors by kernel columns of its own "
                                   "numerics, which evaluate built-in kernels only")
        self.kernel_spec_ = checked_kernel_spec(X, self.kernel, self.gamma, self.degree, self.coef0, self.normalize)
        b = float(y.mean()) if self.fit_intercept else 0.0
        num = numerics(self.impl)
        steps = min(AUTO_MAX_BASIS, n) if n_basis == "auto" else n_basis
        with Steps(self.verbose, f"SparseSVR ({self.impl}) basis", steps, unit="basis") as bar:
            def count(basis, beta):
                bar.step()
                return callback is not None and callback(basis, beta) is True
            common = dict(epsilon=self.epsilon, delta=delta, n_candidates=self.n_candidates,
                          selection=self.selection, tol=self.tol, max_newton=self.max_newton,
                          random_state=self.random_state, callback=count, n_jobs=_n_jobs(self.n_jobs))
            if auto:
                res = num.ssvr_auto(X, y - b, self.kernel_spec_, n_basis=n_basis, lam=self.lam, **common)
            else:
                res = num.ssvr_srs(X, y - b, self.kernel_spec_, n_basis, lam=self.lam, **common)
        self.basis_indices_ = res.basis
        self.basis_vectors_ = X[res.basis].toarray() if sp.issparse(X) else X[res.basis]
        self.coef_ = res.beta
        self.intercept_ = b
        self.delta_ = delta
        self.objective_history_ = res.objective_history
        self.newton_iterations_ = res.newton_iterations
        self.n_basis_ = len(res.basis)
        self.stop_reason_ = res.stop_reason
        self.converged_ = res.converged
        self.lam_ = float(res.info["lam"]) if auto else float(self.lam)
        self.validation_path_ = res.info["path"] if auto else ValidationPath(
            np.zeros(0, dtype=np.intp), np.array([self.lam_]), np.zeros((0, 1)), n, 0)
        return self

    def predict(self, X):
        """Predict the targets of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``f(x) = sum_j coef_[j] k(basis_vectors_[j], x) + intercept_``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        if self.n_basis_ == 0:
            return np.full(X.shape[0], self.intercept_)
        _, expansion = get_solver(self.impl)
        return expansion(self.kernel_spec_, self.basis_vectors_, self.coef_, X) + self.intercept_


__all__ = ["SparseSVR"]
