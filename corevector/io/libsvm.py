"""A fitted model outside corevector: LIBSVM's text model files, and scikit-learn's ``SVC``, ``SVR`` and
``OneClassSVM``.

The L2-SVMs of the Core Vector Machine are kernel expansions plus a bias, which is what LIBSVM's models
hold: the two-class machine of 001 eq. (11) decides by f(x) = sum_i alpha_i y_i (k(x_i, x) + 1) =
sum_i alpha_i y_i k(x_i, x) + b with b = sum_i alpha_i y_i (the bias penalised in the primal is folded
into the kernel by the +1 of k~; ``CVMClassifier.intercept_`` is that b).  LIBSVM decides by
sum_i sv_coef_i k(x_i, x) - rho, so ``sv_coef = dual_coef_`` and ``rho = -b`` exactly, with the kernel's
parameters as they are (rbf's gamma, poly's gamma, coef0 and degree; the linear kernel gamma x'y, whose
gamma LIBSVM's linear kernel lacks, as the polynomial kernel of degree 1 and coef0 0 unless gamma is 1).  The same holds per pair of a
one-vs-one model (LIBSVM's layout: support vectors grouped by class, each with one coefficient per other
class), for CVDD's one-class machine (``rho = -intercept_``), for CVR (LIBSVM's epsilon_svr) and for the
MEB with the Gaussian kernel: its decision r^2 - ||c - phi(x)||^2 = 2 sum_i alpha_i k(x_i, x) - (rho + 1
- r^2) since k(x, x) = 1, a one-class model with coefficients 2 alpha, its rho lowered by the slack
``MEB.MEMBERSHIP_RTOL r^2`` of ``MEB.predict`` so that the two predict alike at a decision value of 0 (LIBSVM's
one-class models predict +1 where it is positive).  LIBSVM has no Laplacian kernel and no
normalised polynomial or linear kernel, and its labels are integers: such models raise a ValueError.

* :func:`save_libsvm_model` / :func:`load_libsvm_model`: the text format of LIBSVM's ``svm_save_model``
  (its README, "model file"), read back as a corevector estimator (c_svc and nu_svc as CVMClassifier,
  one_class as CVDD, epsilon_svr and nu_svr as CVR) that predicts what LIBSVM predicts.  Numbers are
  written with 17 significant digits, so they read back exactly.  LIBSVM files do not record the feature
  count; when the support vectors' highest index is below it, the last support vector carries an explicit
  ``n:0`` entry (a zero, which LIBSVM reads and ignores in every kernel) so that the count survives.
* :func:`~corevector._libsvm_layout.to_sklearn` (the estimators' ``to_sklearn()``): the fitted scikit-learn
  estimator with the same decision function, built on scikit-learn's own LIBSVM layout, so tools that know
  scikit-learn's SVMs (skl2onnx, skops) take the model unchanged.  The model in LIBSVM's terms, which both
  use, is :mod:`corevector._libsvm_layout`'s (each estimator class names its layout there).

A model read from a LIBSVM file carries no fit diagnostics: ``core_set_``, ``n_iter_`` and the like are
empty, zero or NaN, and ``support_`` numbers the support vectors in the file's order.
"""
from __future__ import annotations

import math
import os

import numpy as np
import scipy.sparse as sp

from refimpl.driver import settle_checks_array
from refimpl.kernels import KernelSpec, selector_rows

from .._libsvm_layout import DENSE_MAX_ENTRIES, KERNEL_BY_LIBSVM, LibsvmModel, from_estimator, to_sklearn
from ..registry import by_name
from .files import atomic_write

__all__ = ["save_libsvm_model", "load_libsvm_model", "to_sklearn", "LibsvmModelError"]

#: the largest line a model file may hold (a support vector of ~3 million nonzeros), and the most classes
MAX_LINE_BYTES = 64 << 20
MAX_CLASSES = 10_000
#: LIBSVM stores labels and feature indices as C ints
INT_MAX = 2**31 - 1


class LibsvmModelError(ValueError):
    """A LIBSVM model file that cannot be read (one-line message naming the file and line)."""


# ------------------------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------------------------
def _num(v):
    return repr(float(v))  # the shortest string that reads back as the same double


def _int_labels(labels, est_name):
    lab = np.asarray(labels)
    if lab.dtype.kind in "iub":
        out = lab.astype(np.int64)
    elif lab.dtype.kind == "f" and np.all(np.isfinite(lab)) and np.all(lab == np.round(lab)):
        out = lab.astype(np.int64)
    else:
        raise ValueError(f"LIBSVM model files hold integer class labels; this {est_name} has labels "
                         f"{lab[:3].tolist()}... (use save_model, or refit on integer labels)")
    if np.any(np.abs(out) > INT_MAX):
        raise ValueError(f"LIBSVM model files hold C int labels; {out[np.abs(out) > INT_MAX][0]} is too large")
    return out


def save_libsvm_model(estimator, path):
    """Write a fitted estimator as a LIBSVM model file.

    LIBSVM's ``svm-predict`` and its bindings read the file, and it predicts the same decision values
    (see the module docstring).

    Parameters
    ----------
    estimator : CVMClassifier, CVDD, MEB or CVR
        A fitted estimator: CVMClassifier two-class or one-vs-one (with its probability sigmoids), CVDD,
        MEB with the Gaussian kernel, or CVR.
    path : str or os.PathLike
        The file to write (atomically).

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        For what LIBSVM cannot express: the Laplacian kernel, a normalised non-radial kernel,
        non-integer class labels.

    See Also
    --------
    load_libsvm_model : Read a LIBSVM model file.
    save_model : The native model files (every estimator).

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import make_blobs
    >>> from corevector import CVMClassifier, save_libsvm_model, load_libsvm_model
    >>> X, y = make_blobs(200, centers=3, random_state=0)
    >>> clf = CVMClassifier(random_state=0).fit(X, y)
    >>> path = save_libsvm_model(clf, os.path.join(tempfile.mkdtemp(), "clf.model"))
    >>> with open(path) as f:
    ...     f.readline().strip()
    'svm_type c_svc'
    >>> bool((load_libsvm_model(path).predict(X) == clf.predict(X)).all())
    True
    """
    m = from_estimator(estimator)
    if m.kernel_type == "callable":
        raise ValueError(f"{type(estimator).__name__} with a callable kernel cannot be written as a LIBSVM model file: "
                         "the file names its kernel and holds no code (to_sklearn() carries the callable; or "
                         "precompute the kernel: kernel='precomputed' models are written)")
    lines = [f"svm_type {m.svm_type}", f"kernel_type {m.kernel_type}"]
    if m.kernel_type == "polynomial":
        lines.append(f"degree {m.degree}")
    if m.kernel_type in ("polynomial", "rbf"):
        lines.append(f"gamma {_num(m.gamma)}")
    if m.kernel_type == "polynomial":
        lines.append(f"coef0 {_num(m.coef0)}")
    nr_class = 2 if m.labels is None else len(m.labels)
    lines += [f"nr_class {nr_class}", f"total_sv {m.sv.shape[0]}", "rho " + " ".join(map(_num, m.rho))]
    if m.labels is not None:
        lines.append("label " + " ".join(str(v) for v in _int_labels(m.labels, type(estimator).__name__)))
    if m.prob_a is not None:
        lines += ["probA " + " ".join(map(_num, m.prob_a)), "probB " + " ".join(map(_num, m.prob_b))]
    if m.n_sv is not None:
        lines.append("nr_sv " + " ".join(str(int(v)) for v in m.n_sv))
    lines.append("SV")
    lines += _sv_lines(m)
    with atomic_write(path) as f:
        f.write("\n".join(lines) + "\n")
    return path


def _sv_lines(m):
    """The support vectors' lines: coefficients, then index:value pairs (a precomputed kernel: 0:serial)."""
    lines, sv = [], m.sv
    top = int(sv.indices.max()) + 1 if sv.nnz else 0
    for i in range(sv.shape[0]):
        lo, hi = sv.indptr[i], sv.indptr[i + 1]
        order = np.argsort(sv.indices[lo:hi], kind="stable")
        idx, val = sv.indices[lo:hi][order], sv.data[lo:hi][order]
        parts = [_num(c) for c in m.sv_coef[:, i]]
        if m.kernel_type == "precomputed":
            # LIBSVM's precomputed support vector: 0:serial, its 1-based training serial number; the feature count
            # (the training points') is the last line's explicit zero, which LIBSVM's precomputed kernel never reads
            parts.append(f"0:{int(m.support[i]) + 1}")
            top = 0
        else:
            parts += [f"{j + 1}:{_num(v)}" for j, v in zip(idx, val) if v != 0]
        if i == sv.shape[0] - 1 and top < m.n_features:
            parts.append(f"{m.n_features}:0")  # the feature count (a zero, ignored by every kernel)
        lines.append(" ".join(parts))
    return lines


# ------------------------------------------------------------------------------------------------------
# reading
# ------------------------------------------------------------------------------------------------------
def _lines(path):
    """(line number, text) of the file, each line at most MAX_LINE_BYTES (longer: an error naming it)."""
    with open(path, "rb") as f:
        lineno = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                raise LibsvmModelError(f"{path} line {lineno}: longer than {MAX_LINE_BYTES} bytes")
            try:
                text = raw.decode("ascii")
            except UnicodeDecodeError:
                raise LibsvmModelError(f"{path} line {lineno}: not ASCII text") from None
            yield lineno, text


def _float(tok, path, lineno, what):
    try:
        v = float(tok)
    except ValueError:
        raise LibsvmModelError(f"{path} line {lineno}: {what} {tok[:40]!r} is not a number") from None
    if not math.isfinite(v):
        raise LibsvmModelError(f"{path} line {lineno}: non-finite {what} {tok[:40]!r}")
    return v


def _int(tok, path, lineno, what, low=None):
    try:
        v = int(tok)
    except ValueError:
        raise LibsvmModelError(f"{path} line {lineno}: {what} {tok[:40]!r} is not an integer") from None
    if abs(v) > INT_MAX or (low is not None and v < low):
        raise LibsvmModelError(f"{path} line {lineno}: {what} {v} out of range")
    return v


def _header_lines(path, it):
    """({key: (line number, values)}, the line number of 'SV') of the lines before 'SV'; a key may appear
    once, and must be one of LIBSVM's."""
    head, seen = {}, {}
    for lineno, text in it:
        tok = text.split()
        if not tok:
            continue
        key, vals = tok[0], tok[1:]
        if key in seen:
            raise LibsvmModelError(f"{path} line {lineno}: {key} appears twice (line {seen[key]})")
        seen[key] = lineno
        if key == "SV":
            sv_line = lineno
            break
        head[key] = (lineno, vals)
    else:
        raise LibsvmModelError(f"{path}: not a LIBSVM model file (no 'SV' line)" if seen else f"{path}: empty file")
    unknown = set(head) - {"svm_type", "kernel_type", "degree", "gamma", "coef0", "nr_class", "total_sv", "rho",
                           "label", "probA", "probB", "prob_density_marks", "nr_sv"}
    if unknown:
        key = min(unknown, key=lambda k: head[k][0])
        raise LibsvmModelError(f"{path} line {head[key][0]}: unknown text {key[:40]!r}")
    return head, sv_line


def _parse(path):
    """The :class:`LibsvmModel` of a LIBSVM model file, every field checked."""
    it = _lines(path)
    head, sv_line = _header_lines(path, it)

    def field(key, required=True):
        if key not in head:
            if required:
                raise LibsvmModelError(f"{path}: no '{key}' line before 'SV' (line {sv_line})")
            return None, None
        return head[key]

    ln, v = field("svm_type")
    if v != ["c_svc"] and v != ["nu_svc"] and v != ["one_class"] and v != ["epsilon_svr"] and v != ["nu_svr"]:
        raise LibsvmModelError(f"{path} line {ln}: svm_type must be one of c_svc, nu_svc, one_class, "
                               f"epsilon_svr, nu_svr")
    svm_type = {"nu_svc": "c_svc", "nu_svr": "epsilon_svr"}.get(v[0], v[0])
    ln, v = field("kernel_type")
    if len(v) != 1 or (v[0] not in KERNEL_BY_LIBSVM and v[0] != "precomputed"):
        raise LibsvmModelError(f"{path} line {ln}: kernel_type must be one of {sorted(KERNEL_BY_LIBSVM)} or "
                               f"precomputed (corevector has no sigmoid kernel: it is not positive semi-definite)")
    kernel_type = v[0]

    def scalar(key, conv, default, **kw):
        ln, v = field(key, required=False)
        if v is None:
            return default
        if len(v) != 1:
            raise LibsvmModelError(f"{path} line {ln}: {key} needs one value")
        return conv(v[0], path, ln, key, **kw)

    degree = scalar("degree", _int, 3, low=1)
    gamma = scalar("gamma", _float, 1.0)
    coef0 = scalar("coef0", _float, 0.0)
    if kernel_type != "linear" and not gamma > 0:
        raise LibsvmModelError(f"{path} line {head['gamma'][0]}: gamma must be positive")
    if kernel_type == "polynomial" and coef0 < 0:
        raise LibsvmModelError(f"{path} line {head['coef0'][0]}: coef0 must be >= 0 (else the kernel is not PSD)")
    nr_class = scalar("nr_class", _int, None, low=2)
    total_sv = scalar("total_sv", _int, None, low=0)
    if nr_class is None or total_sv is None:
        raise LibsvmModelError(f"{path}: nr_class and total_sv are required")
    if nr_class > MAX_CLASSES or (svm_type != "c_svc" and nr_class != 2):
        raise LibsvmModelError(f"{path} line {head['nr_class'][0]}: nr_class {nr_class} out of range")
    n_pairs = nr_class * (nr_class - 1) // 2

    def vector(key, n, conv, required, **kw):
        ln, v = field(key, required)
        if v is None:
            return None
        if len(v) != n:
            raise LibsvmModelError(f"{path} line {ln}: {key} has {len(v)} values where {n} are expected")
        return np.array([conv(t, path, ln, key, **kw) for t in v])

    rho = vector("rho", n_pairs, _float, True)
    classify = svm_type == "c_svc"
    labels = vector("label", nr_class, _int, classify) if classify else None
    n_sv = vector("nr_sv", nr_class, _int, classify, low=0) if classify else None
    prob_a = vector("probA", n_pairs, _float, False) if classify else None
    prob_b = vector("probB", n_pairs, _float, False) if classify else None
    if (prob_a is None) != (prob_b is None):
        raise LibsvmModelError(f"{path}: probA and probB come together")
    if not classify and ("label" in head or "nr_sv" in head):
        raise LibsvmModelError(f"{path}: label and nr_sv belong to classification models")
    if classify:
        if len(set(labels.tolist())) != nr_class:
            raise LibsvmModelError(f"{path} line {head['label'][0]}: repeated class labels")
        if int(n_sv.sum()) != total_sv:
            raise LibsvmModelError(f"{path} line {head['nr_sv'][0]}: nr_sv adds up to {int(n_sv.sum())}, "
                                   f"total_sv is {total_sv}")
    sv, sv_coef = _support_vectors_of(path, it, nr_class - 1, total_sv, kernel_type == "precomputed")
    n_features, support = _precomputed_support(sv) if kernel_type == "precomputed" else (sv.shape[1], np.arange(total_sv))
    return LibsvmModel(svm_type, kernel_type, gamma, degree, coef0, sv, sv_coef, rho, labels, n_sv, prob_a,
                       prob_b, n_features, support)


def _precomputed_support(sv):
    """(training points, support vectors' training indices) of a precomputed model's support vectors: 0:serial
    (1-based serial numbers) read as column 0; the count is the largest index or serial that the file names."""
    serial = np.full(sv.shape[0], 0, dtype=np.int64)
    rows = np.repeat(np.arange(sv.shape[0]), np.diff(sv.indptr))
    first = sv.indices == 0
    serial[rows[first]] = sv.data[first].astype(np.int64)
    return max(int(serial.max(initial=0)), sv.shape[1] - 1), serial - 1


def _support_vectors_of(path, it, n_coef, total_sv, precomputed=False):
    """(SV as CSR, sv_coef (n_coef, l)) of the lines after 'SV' (the line iterator ``it``).  ``precomputed``: each
    line starts with 0:serial (LIBSVM's precomputed kernel, a positive integer serial number), kept as column 0,
    the features shifted by one."""
    coef_rows, data, indices, indptr = [], [], [], [0]
    for lineno, text in it:
        tok = text.split()
        if not tok:
            continue
        if len(coef_rows) == total_sv:
            raise LibsvmModelError(f"{path} line {lineno}: more support vectors than total_sv = {total_sv}")
        if len(tok) < n_coef:
            raise LibsvmModelError(f"{path} line {lineno}: {n_coef} coefficients expected")
        coef_rows.append([_float(t, path, lineno, "coefficient") for t in tok[:n_coef]])
        last = 0
        rest = tok[n_coef:]
        if precomputed:
            head, sep, val = rest[0].partition(":") if rest else ("", "", "")
            if head != "0" or not sep:
                raise LibsvmModelError(f"{path} line {lineno}: a precomputed kernel's support vector starts with "
                                       "0:serial")
            indices.append(0)
            data.append(float(_int(val, path, lineno, "serial number", low=1)))
            rest = rest[1:]
        for t in rest:
            i, sep, val = t.partition(":")
            if not sep:
                raise LibsvmModelError(f"{path} line {lineno}: {t[:40]!r} is not index:value")
            j = _int(i, path, lineno, "feature index", low=1)
            if j <= last:
                raise LibsvmModelError(f"{path} line {lineno}: feature indices must increase ({j} after {last})")
            last = j
            indices.append(j if precomputed else j - 1)
            data.append(_float(val, path, lineno, "value"))
        indptr.append(len(indices))
    if len(coef_rows) != total_sv:
        raise LibsvmModelError(f"{path}: {len(coef_rows)} support vectors where total_sv is {total_sv} (truncated?)")
    n_features = max(indices) + 1 if indices else 0
    sv = sp.csr_matrix((np.array(data, dtype=np.float64), np.array(indices, dtype=np.int32),
                        np.array(indptr, dtype=np.int64)), shape=(total_sv, n_features))
    return sv, np.array(coef_rows, dtype=np.float64).reshape(total_sv, n_coef).T.copy()


def load_libsvm_model(path):
    """Read a LIBSVM model file as a corevector estimator.

    The estimator holds the file's support vectors, coefficients and biases and predicts the decision
    values LIBSVM predicts (within rounding).  It carries no fit diagnostics (module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        A model file written by LIBSVM (``svm-train``), ThunderSVM or :func:`save_libsvm_model`.

    Returns
    -------
    CVMClassifier or CVDD or CVR
        CVMClassifier for c_svc and nu_svc, CVDD for one_class, CVR for epsilon_svr and nu_svr.

    Raises
    ------
    LibsvmModelError
        For a malformed file, naming the file and line.

    See Also
    --------
    save_libsvm_model : Write a LIBSVM model file.
    load_model : The native model files.

    Examples
    --------
    >>> import os, tempfile
    >>> from corevector import load_libsvm_model
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.model")
    >>> lines = ["svm_type c_svc", "kernel_type rbf", "gamma 0.5", "nr_class 2", "total_sv 2", "rho 0",
    ...          "label 1 -1", "nr_sv 1 1", "SV", "1 1:1", "-1 1:-1"]
    >>> with open(path, "w") as f:
    ...     for line in lines:
    ...         print(line, file=f)
    >>> clf = load_libsvm_model(path)
    >>> clf.predict([[2.0], [-2.0]]).tolist()
    [1, -1]
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise LibsvmModelError(f"model file not found: {path}" if not os.path.exists(path)
                               else f"not a regular file: {path}")
    try:
        m = _parse(path)
    except OSError as exc:
        raise LibsvmModelError(f"cannot read {path}: {exc.strerror}") from None
    return _to_estimator(m)


def _support_vectors(sv, n_features):
    sv = sp.csr_matrix((sv.data, sv.indices, sv.indptr), shape=(sv.shape[0], n_features))
    if sv.shape[0] * n_features <= DENSE_MAX_ENTRIES:
        return np.ascontiguousarray(sv.toarray())
    return sv


def _no_diagnostics(est, n_pairs=None):
    nan = float("nan")
    if n_pairs is None:
        est.core_set_ = est.support_.copy()
        est.n_iter_, est.radius_, est.certified_ratio_, est.certified_radius_ = 0, nan, nan, nan
        est.history_, est.converged_, est.kernel_evaluations_, est.kkt_gap_ = {}, True, 0, nan
    else:
        est.core_set_ = est.support_.copy()
        z = np.zeros(n_pairs)
        est.n_iter_ = np.zeros(n_pairs, dtype=np.int64) if n_pairs > 1 else 0
        est.radius_ = est.certified_ratio_ = est.kkt_gap_ = z + nan if n_pairs > 1 else nan
        est.history_ = [{} for _ in range(n_pairs)] if n_pairs > 1 else {}
        est.converged_ = np.ones(n_pairs, dtype=bool) if n_pairs > 1 else True
        est.settled_ = np.zeros(n_pairs, dtype=bool) if n_pairs > 1 else False
        none = settle_checks_array([])
        est.settle_checks_ = [none.copy() for _ in range(n_pairs)] if n_pairs > 1 else none
        est.kernel_evaluations_ = np.zeros(n_pairs, dtype=np.int64) if n_pairs > 1 else 0


def _to_estimator(m):
    CVMClassifier, CVDD, CVR = (by_name(name).cls for name in ("CVMClassifier", "CVDD", "CVR"))
    if m.kernel_type == "precomputed":
        spec = KernelSpec("precomputed")
        kw = dict(kernel="precomputed")
        SV = selector_rows(m.support, m.n_features)   # (refimpl.kernels.selector_rows)
    else:
        kernel = KERNEL_BY_LIBSVM[m.kernel_type]
        gamma = m.gamma if kernel != "linear" else 1.0
        spec = KernelSpec(kernel, gamma, m.degree, m.coef0, False)
        kw = dict(kernel=kernel, gamma=gamma, degree=m.degree, coef0=m.coef0)
        SV = _support_vectors(m.sv, m.n_features)
    l = m.sv.shape[0]
    nan = float("nan")
    if m.svm_type == "c_svc":
        est = CVMClassifier(probability=m.prob_a is not None, **kw)
        k = len(m.labels)
        rank = np.empty(k, dtype=int)
        rank[np.argsort(m.labels, kind="stable")] = np.arange(k)   # file class -> sorted class index
        pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
        pair_of = {p: i for i, p in enumerate(pairs)}
        start = np.concatenate([[0], np.cumsum(m.n_sv)])
        dual = np.zeros((len(pairs), l))
        intercept = np.zeros(len(pairs))
        prob_a = np.zeros(len(pairs)) if m.prob_a is not None else np.empty(0)
        prob_b = np.zeros(len(pairs)) if m.prob_a is not None else np.empty(0)
        p_file = 0
        for i in range(k):
            for j in range(i + 1, k):
                # LIBSVM's pair (i, j): class i's vectors carry row j - 1, class j's row i
                f = np.zeros(l)
                f[start[i]:start[i + 1]] = m.sv_coef[j - 1, start[i]:start[i + 1]]
                f[start[j]:start[j + 1]] = m.sv_coef[i, start[j]:start[j + 1]]
                a, b, sign = rank[i], rank[j], 1.0
                if a > b:  # the pair in sorted label order decides for the other class: flip it
                    a, b, sign = b, a, -1.0
                p = pair_of[(a, b)]
                dual[p] = sign * f
                intercept[p] = -sign * m.rho[p_file]
                if m.prob_a is not None:  # P(first | f) = 1 / (1 + exp(A f + B)); flipped: A, -B
                    prob_a[p], prob_b[p] = m.prob_a[p_file], sign * m.prob_b[p_file]
                p_file += 1
        est.classes_ = np.sort(m.labels)
        est.class_weight_ = np.ones(k)
        est.pairs_ = pairs
        est.support_ = np.asarray(m.support, dtype=np.intp)
        est.support_vectors_ = SV
        est.dual_coef_ = dual
        est.intercept_ = intercept
        _no_diagnostics(est, len(pairs))
        n = len(pairs)
        est.rho_ = est.dual_objective_ = np.full(n, nan) if n > 1 else nan
        est.xi_ = [np.zeros(0) for _ in range(n)] if n > 1 else np.zeros(0)
        est.probA_, est.probB_ = prob_a, prob_b
    elif m.svm_type == "one_class":
        est = CVDD(**kw)
        est.support_ = np.asarray(m.support, dtype=np.intp)
        est.support_vectors_ = SV
        est.center_coef_ = m.sv_coef[0].copy()
        est.dual_coef_ = est.center_coef_[None, :]
        est.intercept_ = np.array([-m.rho[0]])
        est.rho_ = est.offset_ = float(m.rho[0])
        est.dual_objective_ = nan
        est.xi_ = np.zeros(l)
        _no_diagnostics(est)
    else:
        est = CVR(**kw)
        est.support_ = np.asarray(m.support, dtype=np.intp)
        est.support_vectors_ = SV
        est.dual_coef_ = m.sv_coef.copy()
        est.intercept_ = -m.rho.copy()
        est.C_ = est.mu_ = est.hybrid_cap_ = est.epsilon_bar_ = est.eta_ = est.dual_objective_ = est.tube_weight_ = nan
        est.y_mean_, est.y_scale_, est.n_mu_refits_ = 0.0, 1.0, 0
        est.xi_ = est.xi_star_ = np.zeros(l)
        _no_diagnostics(est)
    est.kernel_spec_ = spec
    est.n_features_in_ = int(m.n_features)
    return est
