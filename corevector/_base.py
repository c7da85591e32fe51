"""What every estimator over the core-set engine shares: :class:`CoreVectorBase` (its parameters, the
engine call, the fitted diagnostics, kernel expansions for prediction), the shared parameter
documentation, and the per-point weight helpers.

Thin Python classes in the style of ``sklearn/svm/_base.py``: validate (scikit-learn's
``_parameter_constraints``, :mod:`corevector._validation`), build the MEB problem of the formulation
(:mod:`refimpl.cvm`, :mod:`refimpl.cvr`), run the core-set loop on the numerics of the chosen
implementation (:func:`corevector.numerics.numerics`: ``impl='fast'`` Cython, ``impl='ref'`` NumPy), and
recover the model.  Every fitted estimator reports what its fit achieved: ``core_set_``, ``n_iter_``,
``radius_``, ``rho_``, ``certified_ratio_`` (r_cert^2 / R_tau^2 from a full scan, see :mod:`refimpl.meb`),
``kkt_gap_`` and a per-iteration ``history_``.

Chunked inputs (Dask, zarr, HDF5, memory maps) take the same path: the checks, the kernel width, the engine
call and the expansions below hand a :class:`~corevector.chunked.rows.ChunkedRows` to :mod:`corevector.chunked`,
and each estimator class routes its methods there with :func:`~corevector.chunked.methods.accepts_chunked`.
"""
from __future__ import annotations

import re
import threading
import warnings
from collections import defaultdict
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import _check_sample_weight, validate_data

from refimpl.driver import HYBRID_NU, settle_checks_array
from refimpl.kernels import KERNELS, compact_columns, index_points, point_indices, selector_rows
from refimpl.meb import validate_engine_params

from . import chunked
from ._libsvm_layout import to_sklearn
from ._validation import CORE_CONSTRAINTS, check_eps, check_psd_kernel, checked_kernel_spec, is_lookup_kernel
from .chunked.fit import fit_meb as chunked_fit_meb
from .chunked.methods import expansion as chunked_expansion
from .numerics import numerics

#: labels per slice of the passes over all m labels
SLICE = 1 << 16


def _classes(y):
    """np.unique(y), through a bincount for integer labels of a small range (np.unique hashes every label:
    ~25 ms at m = 1e6, a tenth of a whole 1M-point fit; the bincount ~3 ms)."""
    if y.dtype.kind in "iu" and y.size:
        lo, hi = int(y.min()), int(y.max())
        if hi - lo < 1 << 16:
            # in slices of 2^16 labels: an intp copy of all m labels would cost 8 bytes a row (800 MB at 1e8);
            # 2^16 keeps the temporary at 0.5 MB (a chunked fit's caller holds no O(m) floats)
            counts = np.zeros(hi - lo + 1, dtype=np.int64)
            for s in range(0, y.size, SLICE):
                counts += np.bincount(y[s:s + SLICE].astype(np.intp) - lo, minlength=hi - lo + 1)
            return (np.flatnonzero(counts) + lo).astype(y.dtype)
    return np.unique(y)


def _signs(positive):
    """int8 signs: +1 where ``positive``, -1 elsewhere (no int64/float64 temporaries of length m)."""
    out = np.asarray(positive, dtype=bool).view(np.int8) * np.int8(2)  # 0/1 -> 0/2, one byte a point
    out -= 1
    return out


def _signs_of(y, label):
    """``_signs(y == label)`` in slices: no boolean temporary of length m beside the signs."""
    out = np.empty(len(y), dtype=np.int8)
    for s in range(0, len(y), SLICE):
        out[s:s + SLICE] = _signs(y[s:s + SLICE] == label)
    return out


def _point_weights(X, sample_weight, factor=None):
    """w_i = factor_i * sample_weight_i (scikit-learn's C_i = C class_weight[y_i] sample_weight_i), checked
    as scikit-learn checks sample weights; None when no weight was given.  A ValueError names
    ``sample_weight`` (negative, non-finite, wrong length, all zero)."""
    if sample_weight is None and factor is None:
        return None
    try:
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True, copy=True)
    except ValueError as exc:
        raise ValueError(exc.args[0] if "sample_weight" in str(exc) else f"sample_weight: {exc}") from None
    if factor is not None:
        w *= factor
    if not np.all(np.isfinite(w)):
        raise ValueError("sample_weight (times class_weight) must be finite")
    if not np.any(w > 0):
        raise ValueError("sample_weight (times class_weight) must be positive for at least one sample")
    return w


def _drop_zero_weights(w):
    """The rows of positive weight (None: all rows): a point of weight 0 has no slack penalty, and is
    left out of the fit as LIBSVM leaves it out -- the fit is exactly the fit without it."""
    if w is None or np.all(w > 0):
        return None
    return np.flatnonzero(w > 0)


def _take(members, local):
    """Training-set indices of a pair's local indices (``members`` None: the pair is the whole set)."""
    return local if members is None else members[local]



_DOC = """
    eps : float, default={eps}
        Tolerance of the core-set loop's stop rule ([001] Sec. 4): the paper's ``(1 + eps)`` ball test
        under ``stop='radius'`` and ``'hybrid'``, the fraction ``(1 + eps)^2 - 1`` of the margin term
        under ``'margin'``, LIBSVM's tolerance relative to the margin under ``'gap'``.  Must lie in
        (0, 1), and in (0, sqrt(3) - 1) under ``'margin'``, beyond which the test passes misclassified
        points (``corevector._validation.EPS_MAX``).
    kernel : {kernels}, 'precomputed' or callable, default='rbf'
        The kernel k: Gaussian ``exp(-gamma ||x - y||^2)``, Laplacian ``exp(-gamma ||x - y||)``
        (Euclidean, as in [000]; scikit-learn's ``laplacian_kernel`` uses the L1 norm), polynomial
        ``(gamma x'y + coef0)^degree`` or linear ``gamma x'y``.  Kernels whose ``k(x, x)`` is not
        constant are handled by the generalized CVM ([000] Sec. 3.2).  'precomputed' (X is the Gram matrix
        K(X_train, X_train) at fit, K(X_test, X_train) at predict) or a callable ``kernel(A, B)`` returning
        the block [k(a_i, b_j)] (called on blocks of rows) as scikit-learn's SVC; 'sigmoid' is refused (not
        positive semi-definite).  See the user guide's "Precomputed and callable kernels".
    gamma : float or {{'scale', 'beta', 'auto'{gamma_extra}}}, default='{gamma}'
        {gamma_doc}{gamma_more}
    degree : int, default=3
        Degree of the polynomial kernel; ignored by the other kernels.
    coef0 : float, default=0.0
        Independent term of the polynomial kernel (non-negative); ignored by the other kernels.
    normalize : bool, default=False
        Use ``k(x, y) / sqrt(k(x, x) k(y, y))``, which gives any kernel a constant diagonal.
    sample_size : int or None, default=59
        Random candidates per iteration (the probabilistic speed-up, [001] Sec. 4.1.2); None scans
        all points, which is what the ``(1 + eps)^2`` guarantee needs.
    n_confirm : int, default=100
        (Beyond the paper) with sampling, stop only after ``1 + n_confirm`` consecutive clean samples
        (about 6,000 draws: at most ~0.05% of the training points fail the test, at 95% confidence);
        0 is the paper's rule.  Once the draws would cover every point, one full scan replaces them.  A loop
        that scans every point instead of sampling (CVR's, from 2,048 rows) stops once at most a fraction
        ``1 / (sample_size (1 + n_confirm))`` of the points fail the test, none of them a core vector.
    max_iter : int, default=100000
        Bound on the core-set loop's iterations; a ``ConvergenceWarning`` says when it stops the fit.
    tol : float or None, default=None
        Inner QP stopping gap; None follows the stop rule (``refimpl.driver.inner_tolerance``).
    solver : {{'auto', 'active_set', 'smo'}}, default='auto'
        'auto': the batched loop (every violator of a sample joins the core set, the core-set QP solved
        as far as the outer gap asks, finished before the loop may stop), with the exact active-set
        method while the support is small and SMO beyond (``corevector.engine_policy.auto_max_free``).  'smo' is
        the paper's algorithm (one core vector per iteration, warm-started SMO, [001] Sec. 4.1.4);
        'active_set' the same loop with the exact active-set Newton method.
    stop : {{'hybrid', 'margin', 'radius', 'gap'}}, default='{stop}'
        The test that ends the core-set loop (``refimpl.driver.STOPS``): 'radius' is the paper's
        ``(1 + eps)`` ball test; 'margin' measures eps against the margin term instead of the whole
        radius (Loosli & Canu 2007); 'gap' is LIBSVM's maximal-violating-pair test; 'hybrid' is the
        paper's test never looser than "the functional margin of every sampled point is at least 0"
        (for the two-class CVM: every sampled training point is classified correctly).  Every fit
        reports ``certified_ratio_`` and ``kkt_gap_`` whatever the rule.
    cache_size : float, default=1000
        Megabytes for all the memory the core set holds (fast implementation): the cache of the
        core-set QP's kernel rows, the active set's Cholesky factor, the stores of the core and
        support vectors and, on dense data with many features, the scans' kernel block; all but the
        rows evict cached rows as they grow.  It is a bound, reached only by large core sets: 200 MB
        (LIBSVM's default) held a third too little for Fashion-MNIST T-shirt/shirt at 10,000 images
        (2,960 core vectors), and its inner solves took three times as long.
    certify : bool, default=True
        Run the final full scan that certifies the fit: ``certified_ratio_ = (r_cert / R)^2``.  It is
        the only O(m) step of a sampled fit; False skips it (``certified_ratio_`` is then nan).
    random_state : int, RandomState instance, Generator or None, default=None
        Seed of the random samples of the core-set loop; an int makes fits reproducible (the same
        seed gives the same core set in both implementations).
    impl : {{'fast', 'ref'}}, default='fast'
        The Cython engine or the readable NumPy reference (same core set, same model).
    verbose : bool, default=False
        Show a progress bar during the fit.
"""


#: the kernels' names as a numpydoc set, from refimpl.kernels.KERNELS (a new kernel is listed where it is computed)
KERNEL_CHOICES = "{" + ", ".join(repr(k) for k in KERNELS) + "}"
KERNELS_MARK = "%KERNELS%"
#: the description of ``gamma``, shared by every estimator with a kernel (the rule is refimpl.kernels.width_gamma)
GAMMA_MARK = "%GAMMA%"
GAMMA_DOC = """
        The kernel's width.  'scale' and 'beta' are widths of the data in the kernel's own distance
        (``refimpl.kernels.width_gamma``), so that the fitted model is the same, up to rounding, for X
        and for X times any constant.  With s = ``n_features Var(X)`` ('scale', scikit-learn's) or
        s = beta, the mean squared pairwise distance ('beta', the papers' width, computed exactly in
        O(m d); ``2 n_features`` on standardised data), gamma is ``1 / s`` for the Gaussian, polynomial
        and linear kernels, whose gamma multiplies a squared length, and ``1 / sqrt(s)`` for the
        Laplacian, whose gamma multiplies a distance.  'auto' is ``1 / n_features``; a number is used
        as given (neither follows the data's scale).  The linear kernel at gamma=1.0 is LIBSVM's and
        scikit-learn's ``x'y``.
"""


def _doc(gamma_extra="", gamma_more="", **defaults):
    return _DOC.format(kernels=KERNEL_CHOICES, gamma_doc=GAMMA_DOC.strip(), gamma_extra=gamma_extra,
                       gamma_more=gamma_more, **defaults)


def _fill_mark(cls, mark, text):
    """Put ``text`` at ``mark`` in the class's docstring (its first line at the mark's indentation); a
    docstring without the mark is an error, so a class cannot silently lose the shared text."""
    if mark not in (cls.__doc__ or ""):
        raise ValueError(f"{cls.__name__}'s docstring has no {mark} mark")
    cls.__doc__ = cls.__doc__.replace(mark, text.strip("\n").lstrip())
    return cls


def kernel_doc(cls):
    """Class decorator: the kernels' names at the KERNELS mark of the class's docstring, the description of
    gamma at its GAMMA mark."""
    return _fill_mark(_fill_mark(cls, KERNELS_MARK, KERNEL_CHOICES), GAMMA_MARK, GAMMA_DOC)


class WarningsOncePerFit:
    """Collects the warnings of a fit's sub-fits (one-vs-one pairs, cross-validation folds) and re-emits each
    kind once, saying in how many sub-fits it arose: CVMClassifier(stop='radius', C=1e4) on the 10 digits
    raised 43 ConvergenceWarnings, one per pair.  Two messages are of one kind when they differ only in their
    numbers; the first one is shown.

    Use ``with collector.part(name, rank): ...`` around each sub-fit (``rank``: its place among them; by
    default the order of the calls), then ``collector.emit(total, what)``."""

    def __init__(self):
        self._seen = defaultdict(list)  # (category, template) -> [(rank, message, part name)]
        self._local = None              # threaded(): each thread's records
        self._calls = 0

    @contextmanager
    def part(self, name, rank=None):
        rank = self._calls if rank is None else rank
        self._calls += 1
        if self._local is not None:  # sub-fits in several threads (threaded): this thread's own records
            records = self._local.records = []
            try:
                yield
            finally:
                self._local.records = None
                self._note(records, name, rank)
            return
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            yield
        self._note(records, name, rank)

    @contextmanager
    def threaded(self):
        """Around sub-fits that run in several threads at once: ``catch_warnings`` is process-wide, so one
        catch serves them all and each warning goes to the part of the thread that raised it (others are
        shown as usual)."""
        local = threading.local()
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            shown = warnings.showwarning

            def keep(message, category, filename, lineno, file=None, line=None):
                records = getattr(local, "records", None)
                if records is None:
                    shown(message, category, filename, lineno, file, line)
                else:
                    records.append(warnings.WarningMessage(message, category, filename, lineno, file, line))
            warnings.showwarning = keep
            self._local = local
            try:
                yield
            finally:
                self._local = None

    def _note(self, records, name, rank):
        for r in records:
            if issubclass(r.category, ResourceWarning):
                # a finalizer's warning (a file or a subprocess of someone else's collected while the sub-fit
                # ran) is not the sub-fit's: shown as it came, under the caller's filters
                warnings.warn_explicit(r.message, r.category, r.filename, r.lineno, source=r.source)
                continue
            message = str(r.message)
            key = (r.category, re.sub(r"\d+(?:\.\d*)?(?:e[-+]?\d+)?", "#", message))
            self._seen[key].append((rank, message, name))

    def emit(self, total, what="pairs"):
        """Each kind once, the sub-fit first in rank order giving its message (sub-fits in threads finish in
        any order); kinds in the order of their first sub-fit."""
        kinds = sorted(self._seen.items(), key=lambda kv: min(h[0] for h in kv[1]))
        for (category, _), hits in kinds:
            hits = sorted(hits, key=lambda h: h[0])
            _, message, first = hits[0]
            if total > 1:
                parts = list(dict.fromkeys(name for _, _, name in hits))
                message += f" [{len(parts)} of {total} {what}, first {first}]"
            warnings.warn(message, category, stacklevel=4)
        self._seen.clear()


#: where a class docstring takes the parameters every core-set estimator shares (:func:`shared_doc`)
SHARED_PARAMETERS = "%SHARED_PARAMETERS%"
#: where a single-ball estimator's docstring (MEB, CVDD, CVR) takes the fitted diagnostics they share
#: (CoreVectorBase._set_diagnostics sets them; CVMClassifier documents its per-pair forms itself)
FIT_DIAGNOSTICS = "%FIT_DIAGNOSTICS%"
_FIT_DIAGNOSTICS_DOC = """
    n_iter_ : int
        Iterations of the core-set loop.
    converged_ : bool
        Whether the stop test ended the loop (False: ``max_iter`` did, with a ``ConvergenceWarning``).
    kernel_evaluations_ : int
        Number of base-kernel evaluations the fit made.
    history_ : dict of lists
        Per iteration: ``'core_set_size'``, ``'radius'``, ``'elapsed'`` (seconds since the start),
        ``'inner_steps'`` and ``'inner_capped'`` of the core-set QP.
    kernel_spec_ : KernelSpec
        The resolved kernel (``gamma`` as a number).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen during ``fit``; defined only when X has string column names
        (a pandas DataFrame).
"""


def shared_doc(fit_diagnostics=False, **defaults):
    """Class decorator: put the shared parameters' documentation, with this class's defaults, at the
    SHARED_PARAMETERS mark of its docstring, and with ``fit_diagnostics`` the shared fitted attributes at
    the FIT_DIAGNOSTICS mark.  (A docstring built with ``+`` is an expression, not a docstring: the
    class's ``__doc__`` was None and ``help()`` showed the mixin's.)"""
    def decorate(cls):
        _fill_mark(cls, SHARED_PARAMETERS, _doc(**defaults))
        return _fill_mark(cls, FIT_DIAGNOSTICS, _FIT_DIAGNOSTICS_DOC) if fit_diagnostics else cls
    return decorate


class CoreVectorBase(BaseEstimator):
    """What every estimator over the core-set engine shares: its parameters and their checks, the
    engine call, the fitted diagnostics, and kernel expansions for prediction."""

    #: the cap of stop='hybrid' (refimpl.driver.d2_threshold): 1 for the L2-SVMs (a sampled point passes
    #: only if it is on the right side of the margin's half-way mark, i.e. classified correctly)
    HYBRID_NU = HYBRID_NU

    _parameter_constraints: dict = dict(CORE_CONSTRAINTS)

    def _validated(self, X, *args, **kwargs):
        """``validate_data`` of a fit: for chunked X its chunked checks, which keep X where it is.

        A lookup kernel (``kernel='precomputed'``, a callable) is resolved here, on the whole training set (its
        checks: refimpl.kernels.gram_source, callable_source), and the fit goes on with the training points'
        indices (refimpl.kernels.index_points) in place of X: subsets, pairs and folds keep the training
        indices, and the engines look the kernel up.  :meth:`_finish_lookup` ends such a fit."""
        check_psd_kernel(self)
        lookup = is_lookup_kernel(self.kernel)
        if chunked.needs_chunked(X):
            if lookup:
                raise ValueError(f"{type(self).__name__}: kernel={self._kernel_shown()} takes X in memory (a NumPy "
                                 "array); chunked inputs (Dask, zarr, HDF5, memory maps) are read by blocks of rows, "
                                 "and a lookup kernel reads any pair of training points")
            return chunked.validate(self, X, *args, **kwargs)
        self.__dict__.pop("_lookup_spec", None)
        out = validate_data(self, X, *args, **kwargs)
        if not lookup:
            return out
        Xv = out[0] if isinstance(out, tuple) else out
        self._lookup_spec = checked_kernel_spec(Xv, self.kernel, self.gamma, self.degree, self.coef0, self.normalize)
        P = index_points(Xv.shape[0])
        return (P,) + tuple(out[1:]) if isinstance(out, tuple) else P

    def _kernel_shown(self):
        return "'precomputed'" if isinstance(self.kernel, str) else "a callable"

    def _check_predict_kernel(self, X):
        """Before a prediction's ``validate_data``: a model fitted with kernel='precomputed' takes the n x m_train
        matrix K(X_test, X_train), and X of another count of columns is refused saying so (scikit-learn's message
        would speak of features)."""
        spec = getattr(self, "kernel_spec_", None)
        if spec is None or spec.name != "precomputed":
            return
        shape = X.shape if hasattr(X, "shape") else np.shape(X)
        m = getattr(self, "n_features_in_", None)
        if m is not None and len(shape) == 2 and shape[1] != m:
            raise ValueError(f"kernel='precomputed': predict needs the n x m_train kernel matrix against the m_train = "
                             f"{m} training points, got {shape[1]} columns")

    def _finish_lookup(self):
        """The end of a fit with a lookup kernel: ``kernel_spec_`` without the training kernel (a fitted model
        keeps no Gram matrix nor training rows), and a callable's support vectors as their training rows (what
        its predictions call it with); a precomputed kernel's ``support_vectors_`` are the rows e_i of the identity
        at the support vectors' training indices i (refimpl.kernels.selector_rows): the columns of K(X_test,
        X_train) that prediction reads, with the training points' count of features."""
        spec = getattr(self, "kernel_spec_", None)
        self.__dict__.pop("_lookup_spec", None)
        if spec is None or not spec.lookup or spec.source is None:
            return
        if spec.name == "callable":
            self.support_vectors_ = spec.source.data[point_indices(self.support_vectors_)]
        else:
            self.support_vectors_ = selector_rows(point_indices(self.support_vectors_), spec.source.m)
        self.kernel_spec_ = spec.fitted()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR input for fit and predict; other formats become CSR
        return tags

    def _check_fit_params(self, n_samples):
        check_eps(self, self.eps, self.stop)
        # (solver is checked by the parameter constraints: 'auto' is corevector.engine_policy's, not refimpl's)
        validate_engine_params(self.eps, self.sample_size, self.max_iter, self.tol, max(n_samples, 2),
                               self.n_confirm, stop=self.stop)

    def _kernel_spec(self, X, gamma=None):
        """The resolved kernel of X, at ``gamma`` (default: this estimator's)."""
        if is_lookup_kernel(self.kernel):  # (resolved on the whole training set by _validated)
            return self._lookup_spec
        check = chunked.kernel_spec if isinstance(X, chunked.ChunkedRows) else checked_kernel_spec
        return check(X, self.kernel, self.gamma if gamma is None else gamma, self.degree, self.coef0, self.normalize)

    def _run(self, problem, random_state=None, label=None, initial=None, initial_weights=None):
        """The core-set loop on ``problem`` with this estimator's options (one engine call for all);
        ``initial``: augmented points that start in the core set, ``initial_weights`` the weights the first
        solve starts from (``refimpl.meb.fit_meb``)."""
        if isinstance(problem.X, chunked.ChunkedRows):
            fit_meb = chunked_fit_meb(self.impl)
        else:
            fit_meb = numerics(self.impl).fit_meb
        return fit_meb(
            problem, float(self.eps), sample_size=self.sample_size, max_iter=self.max_iter, tol=self.tol,
            random_state=self.random_state if random_state is None else random_state,
            n_confirm=self.n_confirm, solver=self.solver, stop=self.stop, certify=self.certify,
            cache_size=int(self.cache_size * 2**20), verbose=self.verbose, hybrid_nu=self._hybrid_nu(),
            label=label or f"{type(self).__name__} ({self.impl})", stall_hint=self._stall_hint(), initial=initial,
            initial_weights=initial_weights, settle=self._settle(problem))

    def _settle(self, problem):
        """Whether the loop on ``problem`` also stops once its decisions settle (refimpl.driver.Settle): the
        classifier's ``settle`` decides; off elsewhere."""
        return False

    def _stall_hint(self):
        """What the user can change when the core-set loop stalls at float64's resolution (refimpl.driver.Stall):
        for the estimators with a C, a C so large that the margin shrinks to rounding on data that are not
        separable."""
        C = getattr(self, "C", None)
        if not isinstance(C, (int, float)):
            return ""
        return (f"; C={float(C):g} is likely too large for these data: on data that are not separable the "
                "L2-SVM's margin shrinks as 1/C, so lower C")

    def _hybrid_nu(self):
        return self.HYBRID_NU

    def _expansion(self, X, SV, coef):
        if isinstance(SV, chunked.ChunkedRows):
            SV = SV.materialize()
        if self.kernel_spec_.lookup:  # (refimpl.kernels.lookup_expansion)
            return numerics(self.impl).kernel_expansion(self.kernel_spec_, SV, coef, X)
        if isinstance(X, chunked.ChunkedRows):  # e.g. a cross-validation fold's held-out rows
            return chunked_expansion(self.impl, self.kernel_spec_, SV, coef, X)
        # the support vectors take the layout of X (they are few): CSR against CSR, dense against dense
        if sp.issparse(X) and not sp.issparse(SV):
            SV = sp.csr_matrix(SV)
        elif not sp.issparse(X) and sp.issparse(SV):
            SV = SV.toarray()
        if sp.issparse(X):  # only the stored columns when there are far more columns than entries
            SV, X = compact_columns(SV, X)
        return numerics(self.impl).kernel_expansion(self.kernel_spec_, SV, coef, X)

    def to_sklearn(self):
        """Return the fitted scikit-learn SVM with this model's decision function.

        The model as a scikit-learn ``SVC`` (CVMClassifier), ``OneClassSVM`` (CVDD; MEB with the Gaussian
        kernel) or ``SVR`` (CVR), for tools that know those (skl2onnx, skops); see
        :func:`corevector._libsvm_layout.to_sklearn`.

        Returns
        -------
        sklearn.svm.SVC or sklearn.svm.OneClassSVM or sklearn.svm.SVR
            A fitted estimator whose ``decision_function`` equals this one's within rounding.
        """
        return to_sklearn(self)

    @staticmethod
    def _diagnostics(result):
        return dict(core_set=result.core_set, n_iter=result.n_iter,
                    radius=float(np.sqrt(max(result.radius2, 0.0))), certified_ratio=result.certified_ratio,
                    history=result.history, converged=result.converged, settled=getattr(result, "settled", False),
                    settle_checks=settle_checks_array(getattr(result, "settle_checks", [])),
                    kernel_evaluations=result.kernel_evaluations, kkt_gap=result.kkt_gap,
                    margin_scale=result.margin_scale)

    def _set_diagnostics(self, result):
        """The fitted diagnostics of a single-ball estimator (core set, radius, certificate, history)."""
        diag = self._diagnostics(result)
        self.core_set_ = diag["core_set"]
        self.n_iter_ = diag["n_iter"]
        self.radius_ = diag["radius"]
        self.certified_ratio_ = diag["certified_ratio"]
        # r_cert covers every training point; it is the radius the fitted ball is used with
        self.certified_radius_ = float(np.sqrt(result.r_cert2)) if np.isfinite(result.r_cert2) else self.radius_
        self.history_ = diag["history"]
        self.converged_ = diag["converged"]
        self.kernel_evaluations_ = diag["kernel_evaluations"]
        self.kkt_gap_ = diag["kkt_gap"]

