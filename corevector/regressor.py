"""CVR: the L2-SVR as a center-constrained minimum enclosing ball (000)."""
from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl import cvr

from ._base import CoreVectorBase, _drop_zero_weights, _point_weights, shared_doc
from ._validation import POSITIVE, invalid_parameter, store_params
from .chunked.methods import accepts_chunked
from .cvr_pilot import auto_C_and_tube, tube_for_C

__all__ = ["CVR"]


@accepts_chunked
@shared_doc(eps="1e-2", gamma="select", stop="hybrid", fit_diagnostics=True, gamma_extra=", 'select'",
            gamma_more="""
        'select' (CVR's default): with ``C='auto'`` on at least ``AUTO_SELECT_ROWS`` points, the kernel
        ridge pilot of ``C='auto'`` (on ``AUTO_SELECT_PILOT_SIZE`` points) fits both 'scale' and 'beta'
        and keeps the width of the smaller hold-out error (Friedman #1 wants 'beta', puma32h and CASP
        'scale'); otherwise 'scale'.  ``kernel_spec_.gamma`` is the width used.""")
class CVR(RegressorMixin, CoreVectorBase):
    """Core Vector Regression: the L2-SVR solved as a center-constrained minimum enclosing ball ([000]).

    Solves the primal of [000] eq. (6), written with the C of scikit-learn's and LIBLINEAR's
    squared-loss SVR (a per-point weight against ``(1/2) ||w||^2``)::

        min (1/2)(||w||^2 + b^2) + C sum_i w_i (xi_i^2 + xi*_i^2) + 2 C mu M epsbar,   M = sum_i w_i
        s.t. y_i - (w'phi(x_i) + b) <= epsbar + xi_i,  (w'phi(x_i) + b) - y_i <= epsbar + xi*_i,

    (M = m unweighted) through its dual (7) as an MEB of 2m augmented points (eqs. (8), (15)); see
    ``refimpl.cvr``.  It is the paper's problem with ``C_paper = 2 C mu M`` (whose
    ``C_paper / (mu m)`` is 2 C; ``tube_weight_`` reports it).  ``predict(x) = w'phi(x) + b``.  mu is
    the mean error outside the tube: at the optimum ``mean(xi + xi*) = mu`` (eq. (9)), as nu in nu-SVR
    sets the fraction of points outside the tube.  It is not the error of the fit: a smaller mu gives a
    wider tube, not a closer fit (see the Notes).

    Parameters
    ----------
    C : float or 'auto', default='auto'
        Weight of each point's squared slacks against ``(1/2)(||w||^2 + b^2)``, as in scikit-learn's
        ``LinearSVR(loss='squared_epsilon_insensitive')``; it does not depend on the targets' units.
        'auto' chooses it from a kernel ridge pilot (``corevector.cvr_pilot``): the pilot's hold-out
        error on ``AUTO_PILOT_SIZE`` random points picks a C of ``AUTO_C_GRID``, and the fit uses
        ``min(AUTO_C_FACTOR C_pilot, AUTO_C_MAX)`` (``C_`` reports it): noisy targets get a small C, smooth
        ones up to ``AUTO_C_MAX``.  A fixed C of 25 was the earlier default (the paper's ``C / (mu m) = 50``).
    mu : float, 'auto' or 'ratio', default='auto'
        Mean error outside the tube, ``mean(xi + xi*)`` at the optimum, in the targets' units; too
        small a mu makes the tube nearly free and the fit flat (see the Notes).  'auto' sets the tube from
        the residuals r of the kernel ridge pilot (the L2-SVR with every point a support vector):
        ``mu = mean (|r| - q)_+`` with q the ``1 - p`` quantile of ``|r|``, so that about a fraction p of the
        points ends outside the tube and the core set is ~p m.  With ``C='auto'`` p follows the noise the
        pilot measured, ``p = min(max(f, AUTO_TUBE_NOISE e, AUTO_TUBE_CP / C), AUTO_TUBE_NOISY,
        TUBE_MAX_OUTSIDE max(1, AUTO_NOISY_MAX_OUTSIDE e) / M)`` with the floor ``f = min(AUTO_TUBE_OUTSIDE,
        max(AUTO_TUBE_CLEAN, AUTO_TUBE_CLEAN_SLOPE e_b))`` (e: its hold-out error relative to the targets'
        variance, e_b: that of the residuals' bulk, e scaled down where their largest ``AUTO_TUBE_TRIM``
        hold more of the mean square than a Gaussian tail would; nearly noiseless targets get a wider tube
        and a smaller core set); with a given C,
        ``p = min(max(TUBE_OUTSIDE, TUBE_CP / C), TUBE_MAX_OUTSIDE / M)`` from a pilot of that C on
        ``PILOT_SIZE`` points.  On smooth targets the core
        set so stays bounded beyond ~10,000 support vectors; on noisy ones it grows with m.  'ratio' is
        the earlier rule, ``mu = min(TUBE_RATIO max|y'| / (2 C M), MU_MAX_AUTO)`` (the tube weight
        ``C_paper = 6000 max|y'|``, LibCVM's), corrected as described in the Notes.
    normalize_y : bool, default=True
        Fit the standardised targets (see the Notes); False fits the paper's model on the raw targets.
    hybrid_cap : float, default=1.0
        With ``stop='hybrid'``, a sampled point outside the core set passes only if
        ``|y - f(x)| <= (1 + hybrid_cap) epsbar`` (the cap nu of ``refimpl.driver.d2_threshold``; the
        radius test applies as well).  Must be positive; smaller gives a tighter fit with more core
        vectors.  While the core set's tube is still negative (epsbar < 0) a cap above 1 counts as 1,
        so that no point passes a test that no point meets.
    %SHARED_PARAMETERS%

    Attributes
    ----------
    support_ : ndarray of shape (n_SV,)
        Training rows with ``lambda_i != lambda*_i``, in training order.
    support_vectors_ : ndarray or CSR matrix of shape (n_SV, n_features)
        Their inputs.
    dual_coef_ : ndarray of shape (1, n_SV)
        ``beta_i = C_paper (lambda_i - lambda*_i)`` in the targets' units (eq. (9)):
        ``f(x) = sum_i beta_i k(sv_i, x) + b``.
    intercept_ : ndarray of shape (1,)
        b in the targets' units (with ``normalize_y``, the targets' mean plus the scaled bias).
    C_ : float
        The C the fit used (lower than ``C`` when float64 needed it, with a ``ConvergenceWarning``).
    mu_ : float
        The mu the fit used, in the targets' units.
    hybrid_cap_ : float
        The cap of ``stop='hybrid'`` the fit used: ``hybrid_cap``, times the pilot's factor below 1 when
        ``mu='auto'`` widened the tube for the count bound.  ``CVR(C=est.C_, mu=est.mu_,
        gamma=est.kernel_spec_.gamma, hybrid_cap=est.hybrid_cap_)`` fits the same problem as ``est``, from
        another start where the automatic fit started seeded.
    tube_weight_ : float
        The paper's C of eq. (6), ``2 C_ mu_ M``, in the targets' units.
    y_mean_ : float
        The targets' (weighted) mean subtracted before the fit (0 when ``normalize_y=False``).
    y_scale_ : float
        The targets' (weighted) standard deviation they were divided by (1 when
        ``normalize_y=False``).
    epsilon_bar_ : float
        The tube width epsbar of eq. (10), in the targets' units (never negative after a
        ``mu='auto'`` fit).
    xi_ : ndarray of shape (n_SV,)
        Slacks xi of the support rows (eq. (9)), in the targets' units.
    xi_star_ : ndarray of shape (n_SV,)
        Slacks xi* of the support rows, in the targets' units.
    eta_ : float
        The constant of eq. (15); ``radius_^2 - eta_`` is the dual objective (7) reached (normalised
        units).
    n_mu_refits_ : int
        How many times ``mu='auto'`` refitted (0 with a given mu).
    core_set_ : ndarray of shape (n_core,)
        Indices of the core vectors among the 2m augmented points (``i < m``: lambda_i,
        ``i >= m``: lambda*_(i-m)).
    radius_ : float
        R, the radius of the core-set ball (the engine's normalised units).
    certified_radius_ : float
        r_cert, the largest distance of an augmented point to the center, from the final full scan.
    certified_ratio_ : float
        ``(r_cert / R)^2`` (at most ``(1 + eps)^2`` with ``sample_size=None``; nan when
        ``certify=False``).
    kkt_gap_ : float
        The certified maximal-violation gap from the final scan, relative to the margin term.
    dual_objective_ : float
        The optimal value of the dual (7) reached (normalised units).
    %FIT_DIAGNOSTICS%

    See Also
    --------
    SparseSVR : Sparse SVR built in the primal (SSVR-SRS).
    sklearn.svm.SVR : LIBSVM's epsilon-SVR, the usual baseline.

    Notes
    -----
    Targets of any location and scale: with ``normalize_y=True`` (default) the engine fits
    ``(y - mean y) / std y`` (weighted by ``sample_weight``), and the model is mapped back
    (predictions, tube, slacks and coefficients in the targets' units).  The paper's model penalises
    the bias b, so targets far from 0 (prices, temperatures in kelvin) cost a large b and the fit
    degrades without it: ``y + 1000`` gave ``R^2 = -1.7`` on sin data where SVR gives 0.98.
    ``normalize_y=False`` is the paper's model on the raw targets (what the implicit surfaces' one-set
    ``f(x) = 1`` needs).

    The tube is never degenerate: a tube width ``epsbar < 0`` (every point a support vector, both
    slacks active) means mu exceeds the fit's own error.  With ``mu='auto'`` or ``'ratio'`` the fit then
    lowers mu just below the error that degenerate fit measured and refits (and raises mu when the tube
    holds nearly every point: under 'ratio' ``epsbar > MU_RATIO_MAX mu``, under 'auto' fewer than
    ``MIN_SUPPORT`` support vectors), at most ``MU_REFITS`` times; with a given mu a
    ``ConvergenceWarning`` names ``mu``.  A tube weight ``2 C mu M`` beyond ``TUBE_WEIGHT_MAX``
    times ``max|y'|`` cannot be resolved in float64 by the MEB form (the targets enter the transformed
    kernel through ``2 y / C_paper`` against its O(1) diagonal): C is then lowered to that bound and a
    ``ConvergenceWarning`` names ``C`` (``C_`` is the value used; there the fitted function no longer
    depends on C: C = 1e8 and 1e10 give the same model).

    A given mu can also be too small.  The tube costs ``2 C mu M epsbar`` in the primal, so as mu falls
    the tube becomes nearly free and the optimum of the primal itself (not a fault of the solver, and
    whatever the targets' units: mu is scaled with them) tends to the flattest function whose tube
    holds every point: ``CVR(mu=1e-3)`` on ``make_regression(1000, 5, noise=5)`` (targets' standard
    deviation ~100) fits a tube of half-width ~300 with two support vectors, training R^2 0.08
    (``mu=1``: 0.997).  Such a fit (at most one support vector, or a tube wider than
    ``MU_RATIO_MAX mu`` around a function of training R^2 below ``FLAT_R2``) warns, naming ``mu``.

    Every fit is checked before it returns, and a ``ConvergenceWarning`` says what to change when it is
    not a regression: a negative tube width with few support vectors (at the optimum a negative width
    makes every point one) is a core-set loop that stopped far from its optimum, as
    ``stop='radius'`` at ``eps=1e-2`` does (CVR's ball radius is dominated by the constant eta); a
    training R^2 below 0 is a fit worse than the targets' mean, with ``normalize_y=False`` the
    penalised bias of targets far from 0 (targets + 1e6 gave R^2 -70).  The training R^2 of these
    checks is measured on at most ``R2_ROWS`` evenly spaced rows, a small cost against the fit.

    ``fit(X, y, sample_weight=w)`` weighs both slacks of point i by ``C w_i``; points of weight 0 are
    left out, and an integer weight k is the point repeated k times (the same primal, M counting the
    copies).  ``CVR.from_paper(C, mu, m)`` gives the paper's own parametrisation.

    References
    ----------
    .. [000] I. W. Tsang, J. T. Kwok and K. T. Lai. Core Vector Regression for Very Large Regression Problems.
       Proceedings of the 22nd International Conference on Machine Learning (ICML), pp. 912-919, 2005.

    Examples
    --------
    >>> import numpy as np
    >>> from corevector import CVR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(1_000, 2))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=1_000) + 1_000  # targets far from 0 are fine
    >>> reg = CVR(random_state=0).fit(X[:800], y[:800])
    >>> bool(reg.score(X[800:], y[800:]) > 0.9)
    True
    >>> bool(reg.epsilon_bar_ >= 0), bool(reg.support_.size < 800)
    (True, True)
    >>> reg.predict(X[:3]).shape
    (3,)
    """

    #: the model in LIBSVM's terms (corevector._libsvm_layout)
    _libsvm_layout = "epsilon_svr"

    _parameter_constraints: dict = {**CoreVectorBase._parameter_constraints,
                                    "gamma": [StrOptions({"scale", "beta", "auto", "select"}), POSITIVE],
                                    "C": [POSITIVE, StrOptions({"auto"})], "mu": [POSITIVE, StrOptions({"auto", "ratio"})],
                                    "normalize_y": ["boolean"], "hybrid_cap": [POSITIVE]}
    #: mu = "auto": a kernel ridge pilot -- the L2-SVR of the same C with every point a support vector, 000
    #: eq. (6) at epsbar < 0 -- fitted on PILOT_SIZE random points, its residuals measured on up to PILOT_SIZE others
    PILOT_SIZE = 1000
    #: ... sets the tube so that a fraction TUBE_OUTSIDE of the residuals lies outside it, but at most
    #: TUBE_MAX_OUTSIDE residuals' worth of the training set (the core set, and the QP's ``O(|S|^2)`` work, stay
    #: bounded as m grows): ``mu = mean (|r| - q)_+`` at q the ``1 - p`` quantile of ``|r|``,
    #: ``p = min(TUBE_OUTSIDE, TUBE_MAX_OUTSIDE / M)``
    TUBE_OUTSIDE = 0.2
    TUBE_MAX_OUTSIDE = 10000.0
    #: ... and at least TUBE_CP / C: a tube leaves only the points outside it in the loss, so a small C and a wide
    #: tube regularise twice (sin data, 2,000 points, C = 1: R^2 0.952 with p = 0.2, 0.973 at 0.3, 0.980 at 0.5;
    #: SVR 0.983)
    TUBE_CP = 0.5
    #: C = "auto" (corevector.cvr_pilot.auto_C_and_tube): kernel ridge pilots on AUTO_PILOT_SIZE random points,
    #: held out on as many others (below AUTO_TWO_WAY rows: on halves, each held out once), over AUTO_C_GRID,
    #: searched from AUTO_C_START; the fit takes AUTO_C_FACTOR times the pilot's C (the pilot's loss counts
    #: every point, CVR's only the fraction outside its tube), at most AUTO_C_MAX (Friedman #1 and the smooth
    #: sets gain nothing beyond 30 but a larger core set)
    AUTO_C_GRID = tuple(float(c) for c in 10.0 ** (np.arange(-4, 6) / 2))
    AUTO_C_START = 3.0
    AUTO_C_FACTOR = 3.0
    AUTO_C_MAX = 30.0
    AUTO_PILOT_SIZE = 500
    AUTO_TWO_WAY = 1000
    #: ... the search trying the larger C first where the start's relative hold-out error is below this (the
    #: same C on a unimodal error; one Cholesky fewer a pilot where the least error lies above the start)
    AUTO_SEARCH_UP_BELOW = 0.3
    #: ... and a tube leaving p = min(max(f, AUTO_TUBE_NOISE e, AUTO_TUBE_CP / C), AUTO_TUBE_NOISY)
    #: of the pilot's in-sample residuals outside, e its relative hold-out error: noisy targets need most points in
    #: the loss (5-fold R^2 against SVR(): diabetes -0.013 at p ~ 0.6, -0.005 with the AUTO_TUBE_CP / C term; grid
    #: stability -0.010 at AUTO_TUBE_OUTSIDE = 0.3, -0.007 at 0.4, for 1.4x the CPU time)
    AUTO_TUBE_OUTSIDE = 0.4
    #: ... the floor f = min(AUTO_TUBE_OUTSIDE, max(AUTO_TUBE_CLEAN, AUTO_TUBE_CLEAN_SLOPE e)) coming down on nearly
    #: noiseless targets, where the pilot's residuals are mostly its own misfit (5-fold R^2 minus SVR()'s at slope
    #: 3 / 4 / 5: CCPP, e ~ 0.06, -0.007 / -0.004 / -0.003; grid stability and Friedman #1, e 0.10-0.13, stay at
    #: 0.4 from slope 4; make_regression, e ~ 0.044, +0.001 at each with 994-1,438 SVs against 1,892)
    AUTO_TUBE_CLEAN = 0.1
    AUTO_TUBE_CLEAN_SLOPE = 5.0
    #: ... e in that floor being the error of the residuals' bulk: e times the share of the held-out mean square
    #: below the (1 - AUTO_TUBE_TRIM) quantile of ``|r|``, over a Gaussian's share (cvr_pilot._bulk_share). A few
    #: large misses do not say the targets are noisy: compactiv's pilot (e 0.12-0.26, held-out kurtosis 23-32)
    #: ends with a fit of relative error 0.05, and its floor goes from 0.4 to 0.2-0.33.  Shares down to
    #: AUTO_TUBE_TRIM_GAUSSIAN of a Gaussian's count as Gaussian: a misfit's residuals have slightly heavier tails
    #: (Friedman #1 0.93-1.0, grid stability 0.88-0.99; 500 Gaussian residuals 0.96-1.04), and those sets keep
    #: their floor.  Only where the pilot's in-sample residuals hold at least AUTO_TUBE_TRIM_OWN of a Gaussian's
    #: share: gross errors in the targets give its own residuals that tail too (a smooth target with 1% of them,
    #: 0.03-0.3; compactiv 0.82-0.88), and there a wider tube weighs them more (R^2 0.978 against 0.995)
    AUTO_TUBE_TRIM = 0.02
    AUTO_TUBE_TRIM_GAUSSIAN = 0.9
    AUTO_TUBE_TRIM_OWN = 0.5
    AUTO_TUBE_NOISE = 1.2
    AUTO_TUBE_NOISY = 0.8
    AUTO_TUBE_CP = 0.5
    #: where the pilot leaves at least this fraction outside the tube, the core set starts from the points it
    #: predicts outside (refimpl.meb.fit_meb's ``initial``): growing ~0.8 m core vectors from the initial pair
    #: took 531 solves on wine quality white (3,918 points; 1.1 s CPU), the started loop 0.37 s (abalone 0.57 ->
    #: 0.25 s; the same R^2).  At 0.35 the panel's sets at p = 0.4 start seeded too (fold medians: compactiv
    #: 0.54 -> 0.42 s, Friedman #1 and CCPP -8% and -19%, grid stability +5%; R^2 within 0.002), and Friedman #1
    #: at 3 * 10^4 points (p = 0.33) does not: seeded there, RMSE rose 1.044 -> 1.049 (10 draws; LIBSVM 1.060 on
    #: draw 0, seeded 1.072) for 25% less time
    SEED_MIN_OUTSIDE = 0.35
    #: ... and below SEED_ALL_BELOW points it always does, with the dense loop (corevector.engine_policy): grown
    #: from the pair, the narrow loop's 45-99 iterations of a few core vectors each were most of a small set's
    #: fit.  Chosen on laser, concrete, treasury and wizmir (fold medians 52-69 -> 29-39 ms, R^2 within 0.001),
    #: confirmed on airfoil, wine quality red, the sin data and diabetes (68 -> 31, 52 -> 43, 58 -> 32, 14 -> 9 ms;
    #: R^2 within 0.002).  From 2,048 points the loop is wide anyway
    SEED_ALL_BELOW = 2048
    #: under C='auto' the count bound TUBE_MAX_OUTSIDE grows to AUTO_NOISY_MAX_OUTSIDE e times it on noisy targets
    #: (e the pilot's relative hold-out error): CASP's 36,584 training rows (e ~ 0.69) at the plain bound (p =
    #: 0.27) gave R^2 0.338 in 16.5 s CPU against SVR()'s 0.419 in 28.1 s; p = 0.55 gave 0.451 in 62 s, no bound
    #: (p = 0.77) 0.489 in 103 s.  Friedman #1 (e ~ 0.07) keeps the plain bound
    AUTO_NOISY_MAX_OUTSIDE = 3.0
    #: gamma='select' chooses between 'scale' and 'beta' from this many rows on, on pilots of
    #: AUTO_SELECT_PILOT_SIZE points: the hold-out error of 500-point pilots preferred the wider 'beta' on
    #: puma32h, where the full fit wants 'scale' (R^2 0.23 against 0.28); 1,000-point pilots chose as the full
    #: fits do on Friedman #1 at 30,000 ('beta': RMSE 1.051 against 1.084), puma32h, CASP, airfoil and grid
    #: stability.  Below it 'scale'.
    AUTO_SELECT_ROWS = 10_000
    AUTO_SELECT_PILOT_SIZE = 1000

    def _kernel_spec(self, X, gamma=None):
        g = self.gamma if gamma is None else gamma
        return super()._kernel_spec(X, "scale" if isinstance(g, str) and g == "select" else g)
    #: mu = "ratio" (the earlier rule) starts from the tube weight 2 C mu M = ``TUBE_RATIO max|y'|``
    #: (LibCVM's ``C = s_ratio max|y|``)
    TUBE_RATIO = 6000.0
    #: ... at most MU_MAX_AUTO (a tenth of the normalised targets' spread)
    MU_MAX_AUTO = 1.0
    #: mu = "ratio" refits while epsbar < 0 or epsbar > MU_RATIO_MAX mu, at most MU_REFITS times ("auto": only while
    #: epsbar < 0, or while fewer than MIN_SUPPORT points lie outside the tube)
    MU_RATIO_MAX = 20.0
    MU_REFITS = 4
    MIN_SUPPORT = 2
    #: after a degenerate fit (epsbar < 0), mu = MU_DEGENERATE_FRACTION times its mean ``|y - f|``: epsbar >= 0
    #: needs mu below that error, and the largest such mu keeps the fit closest to the degenerate one
    MU_DEGENERATE_FRACTION = 0.7
    #: the largest tube weight 2 C mu M, relative to ``max|y'|``, that the MEB form resolves in float64
    TUBE_WEIGHT_MAX = 1e8
    #: a fit with epsbar < 0 and fewer support vectors than this fraction of the points ended far from its
    #: optimum (where every point is one); with more, mu exceeds the fit's error
    FULL_SUPPORT = 0.5
    #: a tube wider than MU_RATIO_MAX mu around a function of training R^2 below FLAT_R2 (or with at most one
    #: support vector) holds nearly every point around a flattened function: mu is too small
    FLAT_R2 = 0.5
    #: the training R^2 of the fit's diagnosis is measured on at most this many rows
    R2_ROWS = 2000

    def __init__(self, *, C="auto", mu="auto", normalize_y=True, hybrid_cap=1.0, eps=1e-2, kernel="rbf",
                 gamma="select", degree=3, coef0=0.0, normalize=False, sample_size=59, n_confirm=100,
                 max_iter=100_000, tol=None, solver="auto", stop="hybrid", cache_size=1000, certify=True,
                 random_state=None, impl="fast", verbose=False):
        store_params(self, locals())

    @classmethod
    def from_paper(cls, C, mu, m, **params):
        """Create the CVR of the paper's own (C, mu) of [000] eq. (6).

        The paper tunes C and mu on a subset and keeps them as m grows (Sec. 4.1), so its per-point
        weight ``C / (mu m)`` depends on m; this is
        ``CVR(C=C / (2 mu m), mu=mu, normalize_y=False, **params)``, the paper's model on the raw
        targets of ``m`` unweighted training points.

        Parameters
        ----------
        C : float
            The paper's C of eq. (6) (the weight of the mean squared slack).
        mu : float
            The paper's mu, the mean error outside the tube, in the targets' units.
        m : int
            Number of training points the model will be fitted on.
        **params : dict
            Further parameters of :class:`CVR`.

        Returns
        -------
        CVR
            An unfitted estimator.
        """
        return cls(C=C / (2.0 * mu * m), mu=mu, normalize_y=False, **params)

    def _hybrid_nu(self):
        return float(self.hybrid_cap) * getattr(self, "_nu_scale", 1.0)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the regressor on (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training inputs; sparse input is used as CSR.
        y : array-like of shape (n_samples,)
            Targets (not all equal), of any location and scale with ``normalize_y=True``.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-point weights w_i: both slacks of point i get the weight ``C w_i``.  Points of weight 0
            are left out; an integer weight k is the point repeated k times, in the primal.

        Returns
        -------
        CVR
            The fitted estimator (``self``).
        """
        X, y = self._validated(X, y, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2,
                             y_numeric=True)
        w = _point_weights(X, sample_weight)
        kept = _drop_zero_weights(w)
        Xk, yk, wk = (X, y, w) if kept is None else (X[kept], y[kept], w[kept])
        if len(yk) < 2:
            raise ValueError(f"sample_weight is positive for {len(yk)} sample; CVR needs 2")
        if np.ptp(yk) == 0:
            where = "" if kept is None else " where sample_weight > 0"
            raise ValueError(f"y is constant ({float(yk[0])!r}){where}: nothing to regress (an implicit "
                             "surface's one-set targets are fitted by corevector.surface, which expects them)")
        self._fit(Xk, yk, wk)
        if kept is not None:  # indices into the training set as given (core set: i < m lambda_i, i >= m lambda*_i)
            m, mk, z = X.shape[0], len(kept), self.core_set_
            self.support_ = kept[self.support_]
            self.core_set_ = np.where(z < mk, kept[z % mk], kept[z % mk] + m)
        self._finish_lookup()
        return self

    def _fit(self, X, y, weights=None):
        """Fit on validated (X, y) with positive ``weights`` (None: all 1); constant targets allowed with
        normalize_y=False (the one-set of 000 Sec. 4.2)."""
        self._validate_params()
        self._check_fit_params(X.shape[0])
        if not hasattr(self, "_lookup_spec"):  # (a lookup kernel's X here is the index points)
            self.n_features_in_ = X.shape[1]
        self.kernel_spec_ = self._kernel_spec(X)
        loc, scale = _target_normalisation(y, weights) if self.normalize_y else (0.0, 1.0)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            yn = (y - loc) / scale if self.normalize_y else y
        top = float(np.max(np.abs(yn))) or 1.0  # max|y'| = 0 only for the all-zero one-set
        M = float(X.shape[0] if weights is None else np.sum(weights))
        auto = self.mu in ("auto", "ratio")
        choice = None
        with np.errstate(over="ignore", under="ignore"):
            if self.C == "auto":
                choice = auto_C_and_tube(self, X, yn, weights, M, _seed_of(self.random_state))
            self._C_asked = C = float(self.C) if choice is None else choice.C
            if self.mu == "ratio":
                mu = min(self.TUBE_RATIO * top / (2 * C * M), self.MU_MAX_AUTO)
            elif auto:
                if choice is None:
                    choice = tube_for_C(self, X, yn, weights, C, M, _seed_of(self.random_state))
                mu = choice.mu
            else:
                mu = float(self.mu) / scale
        self._pilot_info = None if choice is None else choice.info
        self._initial = None if choice is None or self.mu != "auto" else choice.initial
        self._initial_weights = None if self._initial is None else choice.initial_weights
        self._nu_scale = choice.nu_scale if choice is not None and self.mu == "auto" else 1.0
        C, mu, fit = self._fit_tube(X, yn, weights, mu, M, top) if auto else self._fit_once(X, yn, weights, mu, M, top)
        problem, result, model = fit
        if C < self._C_asked:
            self._warn_fit("C_lowered", C=C, mu=mu * scale, M=M)
        self._set_fitted(X, problem, result, model, loc, scale, C, mu, M)
        self._diagnose(X, y, weights)
        return self

    def _diagnose(self, X, y, weights):
        """Warn (:meth:`_warn_fit`) when the fitted model is not what a regression asks for, saying what to
        change: a tube of negative width (``epsilon_bar_ < 0``), a tube that holds every training point around
        a flat function, a fit worse than the targets' mean (training R^2 < 0).  R^2 is measured on at most
        ``R2_ROWS`` training rows (evenly spaced), so that it costs little against the fit."""
        m, n_sv, ebar = X.shape[0], self.support_.size, self.epsilon_bar_
        r2 = self._training_r2(X, y, weights)
        facts = dict(ebar=ebar, n_sv=n_sv, m=m, r2=r2, mu=self.mu_, auto=self.mu == "auto")
        covered = False  # a warning below already says what to change about a negative R^2
        if ebar < 0:
            # at the optimum epsbar < 0 makes every point violate one side of the tube (xi + xi* >= -2 epsbar),
            # hence a support vector: a negative width with few support vectors is a fit the loop left early
            self._warn_fit("degenerate" if n_sv >= self.FULL_SUPPORT * m else "unfinished", **facts)
            covered = True
        elif np.isfinite(r2) and (n_sv <= 1 or (ebar > self.MU_RATIO_MAX * self.mu_ and r2 < self.FLAT_R2)):
            self._warn_fit("flat", **facts)
            covered = True
        if r2 < 0 and (not covered or not self.normalize_y):
            loc, spread = _target_normalisation(y, weights)
            self._warn_fit("worse_than_mean", y_mean=loc, y_std=spread, **facts)

    def _training_r2(self, X, y, weights):
        """R^2 of the fitted model on the training rows (at most R2_ROWS of them, evenly spaced, with their
        weights) against :meth:`_baseline_mse`; nan when that is 0 (constant targets)."""
        m = X.shape[0]
        rows = None if m <= self.R2_ROWS else np.linspace(0, m - 1, self.R2_ROWS).round().astype(np.intp)
        ys = y if rows is None else y[rows]
        ws = None if weights is None else (weights if rows is None else weights[rows])
        with np.errstate(over="ignore", invalid="ignore"):
            base = self._baseline_mse(ys, ws)
            if not base > 0 or not np.isfinite(base):
                return float("nan")
            f = self._expansion(X if rows is None else X[rows], self.support_vectors_, self.dual_coef_[0])
            mse = float(np.average((ys - (f + self.intercept_[0])) ** 2, weights=ws))
        return 1.0 - mse / base

    @staticmethod
    def _baseline_mse(y, weights):
        """The mean squared error R^2 is measured against: predicting the targets' (weighted) mean."""
        return float(np.average((y - np.average(y, weights=weights)) ** 2, weights=weights))

    def _warn_fit(self, kind, **f):
        """The ConvergenceWarning of a fit problem found by ``_fit`` / :meth:`_diagnose`, in this estimator's
        parameters (:class:`corevector.ImplicitSurface` phrases its levels' in its own)."""
        r2 = f"training R^2 = {f['r2']:.3g}" if np.isfinite(f.get("r2", np.nan)) else ""
        if kind == "C_lowered":
            msg = (f"CVR: C={self._C_asked:g} with mu={f['mu']:.3g} and {f['M']:g} points puts the tube weight "
                   f"2 C mu M above {self.TUBE_WEIGHT_MAX:g} max|y'|, beyond what float64 resolves in the MEB "
                   f"form; fitted with C={f['C']:.3g} (C_), where the fitted function no longer depends on C. "
                   "Pass a smaller C to silence this")
        elif kind == "degenerate":
            what = (f"mu='auto' did not reach a tube of positive width in {self.MU_REFITS} refits (mu_ = "
                    f"{f['mu']:.3g}); pass a mu below {f['mu']:.3g}" if f["auto"] else
                    f"mu={self.mu!r} exceeds the fit's mean error; lower mu (or leave it 'auto')")
            msg = (f"CVR: degenerate tube, epsilon_bar = {f['ebar']:.3g} < 0 (every point is a support vector with "
                   f"both slacks active{', ' + r2 if r2 else ''}): {what}")
        elif kind == "unfinished":
            msg = (f"CVR: the fit ended far from its optimum: epsilon_bar = {f['ebar']:.3g} < 0 with {f['n_sv']} "
                   f"support vectors of {f['m']} points{', ' + r2 if r2 else ''} (at the optimum a negative "
                   "epsilon_bar makes every point a support vector), so the stop test accepted a core set that "
                   f"does not fit the targets; {self._finish_advice()}")
        elif kind == "flat":
            what = (f"mu='auto' did not leave it in {self.MU_REFITS} refits (mu_ = {f['mu']:.3g}); pass a mu "
                    f"above {f['mu']:.3g}" if f["auto"] else
                    f"mu={self.mu!r} is too small for these targets; raise mu (or leave it 'auto')")
            msg = (f"CVR: the tube holds nearly every training point around a flattened function: epsilon_bar = "
                   f"{f['ebar']:.3g} with {f['n_sv']} support vector{'s' if f['n_sv'] != 1 else ''} of {f['m']} "
                   f"points, {r2}.  mu is the mean error outside the tube, not the error of the fit: the tube's "
                   "weight in the primal is 2 C mu M, so a small mu makes a wide tube nearly free and the "
                   f"flattest function inside it wins; {what}")
        else:  # worse_than_mean
            if not self.normalize_y:
                why = (f"the model penalises its bias b, and the targets' mean {f['y_mean']:.4g} lies "
                       f"{abs(f['y_mean']) / f['y_std']:.3g} standard deviations ({f['y_std']:.3g}) from 0; use "
                       "normalize_y=True (the default), which fits the standardised targets")
            else:
                why = f"the stop test accepted a core set that does not fit the targets; {self._finish_advice()}"
            msg = (f"CVR{'(normalize_y=False)' if not self.normalize_y else ''} fits worse than the targets' mean "
                   f"({r2} < 0): {why}")
        warnings.warn(msg, ConvergenceWarning, stacklevel=4)

    def _finish_advice(self):
        """What to change when the core-set loop ended far from the optimum."""
        if self.stop == "radius":
            return (f"stop='radius' with eps={self.eps:g} is too coarse for CVR (its ball's radius is dominated "
                    "by a constant); use stop='hybrid' (the default) or 'margin', or a smaller eps")
        return f"use a smaller eps (now {self.eps:g}), or sample_size=None"

    def _fit_once(self, X, yn, weights, mu, M, top):
        """(C, mu, (problem, result, model)) of the fit at this mu, C lowered where float64 needs it."""
        self.n_mu_refits_ = 0
        C = min(self._C_asked, self.TUBE_WEIGHT_MAX * top / (2 * mu * M))
        return C, mu, self._solve(X, yn, weights, C, mu, M, top)

    def _fit_tube(self, X, yn, weights, mu, M, top):
        """mu='auto': fits from this mu until the tube has a width 0 <= epsbar <= MU_RATIO_MAX mu, at most
        MU_REFITS refits, mu kept between the largest mu known too small (a tube holding nearly every point)
        and the smallest known too large (epsbar < 0).  The last fit of positive tube width is kept, and only
        its engine's warnings are issued: the others describe models the estimator does not keep (a stop='radius'
        fit refitted four times gave the same slack warning five times)."""
        too_small, too_large, kept = 0.0, np.inf, None
        for refit in range(self.MU_REFITS + 1):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                C, mu, fit = self._fit_once(X, yn, weights, mu, M, top)
            self.n_mu_refits_ = refit
            ebar = fit[2].epsilon_bar
            if ebar >= 0:
                kept = (C, mu, fit, refit, caught)
                if self.mu == "auto" and fit[2].support.size >= min(self.MIN_SUPPORT, X.shape[0]):
                    break
                if self.mu == "ratio" and ebar <= self.MU_RATIO_MAX * mu:
                    break
                # the tube holds nearly every point (a minimax fit): aim at a quarter of its width
                too_small = mu
                mu = min(ebar / 4, np.sqrt(mu * too_large))
            else:
                # mu exceeds the fit's error, which the degenerate fit measures (both slacks active,
                # xi - xi* = 2 (y - f)): aim just below it
                too_large = mu
                err = self._mean_error(fit[2], weights, mu)
                mu = max(self.MU_DEGENERATE_FRACTION * err, np.sqrt(mu * too_small) if too_small else mu / 64)
                mu = min(mu, too_large / 1.25)
        if kept is not None and fit[2].epsilon_bar < 0:
            C, mu, fit, self.n_mu_refits_, caught = kept
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        return C, mu, fit

    @staticmethod
    def _mean_error(model, weights, mu):
        """mean |y - f| of a degenerate fit (every point a support vector, xi - xi* = 2 (y - f)), weighted as
        the fit is (a point of weight k counts k times, as its k copies would)."""
        if not model.xi.size:
            return mu / 2
        err = np.abs(model.xi - model.xi_star) / 2
        return float(np.average(err, weights=None if weights is None else weights[model.support]))

    def _solve(self, X, yn, weights, C, mu, M, top):
        """(problem, result, model) of one engine run: the paper's (C_paper, mu_paper) = (2 C mu M, mu M / m)."""
        C_paper, mu_paper = 2 * C * mu * M, mu * M / X.shape[0]
        self._check_target_scale(top, C_paper, mu_paper, X.shape[0])
        problem = cvr.cvr_problem(X, yn, self.kernel_spec_, C_paper, mu_paper, weights)
        result = self._run(problem, initial=getattr(self, "_initial", None),
                           initial_weights=getattr(self, "_initial_weights", None))
        with np.errstate(over="ignore", invalid="ignore"):
            model = cvr.recover(problem, result, yn, C_paper)
        if not (np.all(np.isfinite(model.coef)) and np.isfinite(model.intercept)):
            raise ValueError(f"the fitted coefficients of CVR overflow float64 (max|y'| = {top:.3g}, "
                             f"C mu M = {C_paper:.3g}): lower C")
        return problem, result, model

    def _set_fitted(self, X, problem, result, model, loc, scale, C, mu, M):
        """The fitted attributes, mapped back to the targets' units."""
        self._set_diagnostics(result)
        self.support_ = model.support
        self.support_vectors_ = X[model.support]
        with np.errstate(over="ignore", invalid="ignore"):
            self.dual_coef_ = (model.coef * scale)[None, :]
            self.intercept_ = np.array([model.intercept * scale + loc])
        if not (np.all(np.isfinite(self.dual_coef_)) and np.all(np.isfinite(self.intercept_))):
            raise ValueError(f"y is of a scale float64 cannot hold for CVR: the fitted coefficients in the targets' "
                             f"units overflow (std y = {scale:.3g}); divide y by a constant and multiply the "
                             "predictions by it")
        self.C_, self.mu_, self.hybrid_cap_ = C, mu * scale, self._hybrid_nu()
        self.tube_weight_ = 2 * C * mu * M * scale
        self.y_mean_, self.y_scale_ = loc, scale
        self.epsilon_bar_ = model.epsilon_bar * scale
        self.xi_ = model.xi * scale
        self.xi_star_ = model.xi_star * scale
        self.eta_ = float(problem.eta)
        self.dual_objective_ = model.dual_objective

    def _check_target_scale(self, scale, C, mu, m):
        """ValueError for targets float64 cannot fit with this (paper's) C and mu: the engine's offsets
        (2/C) y and diagonal mu m / C, and C itself, must be normal floats."""
        tiny, big = np.finfo(np.float64).tiny, np.finfo(np.float64).max
        if scale < tiny:
            raise ValueError(f"y is of a scale float64 cannot hold: max|y| = {scale:.3g} is subnormal (below "
                             f"{tiny:.3g}), so the targets carry too few bits; multiply y by a constant and "
                             "divide the predictions by it (or leave normalize_y=True)")
        if not tiny <= C <= big:
            raise invalid_parameter(self, "C", f"such that the tube weight C mu m = {C:.3g} is a normal float", self.C)
        with np.errstate(over="ignore", under="ignore"):
            offset, diag = 2.0 * scale / C, mu * m / C
        if not tiny <= offset <= big:
            raise invalid_parameter(self, "C", f"such that 2 max|y| / (C mu m) = {offset:.3g} is a normal float "
                                    f"(max|y| = {scale:.3g})", self.C)
        # the engine multiplies diagonal entries together (QP steps): the ridge 1/C must stay below sqrt(max)
        if not tiny <= diag <= np.sqrt(big):
            raise invalid_parameter(self, "C", f"such that the ridge 1 / C = {diag:.3g} is a normal float below "
                                    f"{np.sqrt(big):.3g}", self.C)

    def predict(self, X):
        """Predict the targets of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``f(x) = sum_i dual_coef_[0, i] k(support_vectors_[i], x) + intercept_[0]``, in the
            targets' units.
        """
        check_is_fitted(self)
        self._check_predict_kernel(X)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        return self._expansion(X, self.support_vectors_, self.dual_coef_[0]) + self.intercept_[0]


def _seed_of(random_state):
    """An int seed for the pilot's draws from the estimator's random_state (None: fresh entropy)."""
    if random_state is None:
        return int(np.random.SeedSequence().entropy % 2**63)
    if isinstance(random_state, (int, np.integer)):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    return 0


def _target_normalisation(y, weights=None):
    """(mean, std) of the targets, weighted by ``weights``; computed on y / max|y| so that targets near the
    float64 limits neither overflow nor lose their spread (y + 1e300 still has the std of y)."""
    top = float(np.max(np.abs(y)))
    if not np.isfinite(top) or top == 0.0:
        raise ValueError(f"y must be finite and not all zero (max|y| = {top!r})")
    if top < np.finfo(np.float64).tiny:
        raise ValueError(f"y is of a scale float64 cannot hold: max|y| = {top:.3g} is subnormal (below "
                         f"{np.finfo(np.float64).tiny:.3g}), so the targets carry too few bits; multiply y by a "
                         "constant and divide the predictions by it")
    u = y / top
    mean = float(np.average(u, weights=weights))
    std = float(np.sqrt(np.average((u - mean) ** 2, weights=weights)))
    if std == 0.0:
        raise ValueError(f"y is constant ({float(y[0])!r}): nothing to regress")
    return mean * top, std * top
