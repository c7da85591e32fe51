"""Model files: a fitted estimator as data, never as code.

A model file is a ZIP archive of uncompressed members that ``numpy.load(path, allow_pickle=False)`` also
opens: ``header.json``, a versioned JSON header, and one ``.npy`` member per fitted array::

    {"format": "corevector-model", "version": 3, "corevector_version": "0.1.0",
     "estimator": "CVMClassifier", "n_features": 2, "feature_names": ["x1", "x2"], "target_name": "label",
     "data_format": "csv", "params": {...}, "attributes": {...}}

``params`` are the constructor's arguments (``get_params``), ``attributes`` the fitted attributes: numbers
and strings in the JSON, arrays as references ``{"array": NAME}`` to the member ``NAME.npy``.

**One fit, one file.**  The times a fit measures (``history_['elapsed']``, ImplicitSurface's ``fit_time_``,
``fit_cpu_time_`` and its levels' times, MMDA's ``cpu_time_``) are not stored (:class:`Timing`: ``null`` in
the header, NaN when read), and the members carry a fixed date, so two fits of the same data with the same seed
write the same bytes.  Format version 2 stored the times; its files are read as they are.

**Loading runs no code from the file.**  Nothing is unpickled: arrays are read from their ``.npy`` bytes
with the dtypes of a short list (floats, integers, booleans, unicode strings; never an object array), and
the estimator is built by its own constructor from parameters that scikit-learn's constraints then check.
Every value is checked against the declaration of its class (:data:`SCHEMAS`) before it is set: its type,
dtype, number of dimensions and shape (dimensions that must agree across attributes -- support vectors
against coefficients, features against the header's ``n_features`` -- are bound by name), finiteness,
index ranges, a known kernel with valid parameters, the sparse structure of CSR support vectors (offsets
within bounds, column indices below the feature count), and that the file holds nothing else.  Sizes are
checked against the file before anything is allocated: an array's declared shape must match its member's
byte count, which must fit in the file, and each member is read once, so reading a file takes memory in
proportion to the file.  Member checksums (CRC-32) catch damaged bytes.  Any failure is a
:class:`ModelFileError`, one line naming the file.

**Adding an estimator** is one entry of :data:`SCHEMAS`: its persisted attributes and their declared types
(:class:`Scalar`, :class:`Array`, :class:`Matrix`, :class:`ListOf`, ...).  :func:`save_model` refuses an
estimator with a fitted attribute its declaration does not list, so a new attribute cannot be lost
silently.  The class table is :mod:`corevector.registry`.

**Old model files** (format version 1: a header line, then a pickle) are refused: unpickling can run any
code the file holds.  A file from a trusted source can be converted once with ``corevector convert OLD NEW
--allow-unsafe-pickle`` (or ``load_model(OLD, allow_unsafe_pickle=True)`` then :func:`save_model`).

Files are written atomically (:func:`corevector.io.files.atomic_write`).
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import stat
import struct
import tempfile
import zipfile

import numpy as np

from refimpl.ssvr import ValidationPath
from refimpl.surface import Level

from .._version import __version__
from ..registry import ESTIMATORS, by_name
from .files import atomic_write
from refimpl.kernels import NOT_PSD

from .modelspec import (HEADER_MEMBER, Array, Either, History, KernelSpecSpec, ListOf, Matrix, ModelFileError,
                        PairList, Reader, Scalar, Schema, Struct, Timing, Writer, dump_float, load_float, one_line)

__all__ = ["save_model", "load_model", "ModelFileError", "FORMAT", "VERSION", "schemas"]

#: the ``format`` field of every header
FORMAT = "corevector-model"
#: the layout version this code writes and the newest it reads (1 was the pickle format, refused; 2 stored the
#: fits' times, which 3 leaves out so that one fit gives one file, byte for byte)
VERSION = 3
#: the ZIP layout versions this code reads
READS = (2, 3)
#: the pickle format of corevector 0.1 (a JSON header line, then a pickle)
PICKLE_VERSION = 1
#: the JSON header's largest size (a few KB in practice)
MAX_HEADER_BYTES = 1 << 20
#: the largest number of members, and the deepest nesting of the header's values
MAX_MEMBERS = 100_000
MAX_DEPTH = 16
#: a fixed timestamp for every member, so that one model always gives the same bytes
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


# ------------------------------------------------------------------------------------------------------
# the declarations: one generic writer and reader walk them
# ------------------------------------------------------------------------------------------------------
# -- the declarations ------------------------------------------------------------------------------------
F = Scalar(float)
F_ANY = Scalar(float, finite=False)
F_POS = Scalar(float, low=0.0)
I_NONNEG = Scalar(int, low=0)
B = Scalar(bool)
KSPEC = KernelSpecSpec()
INDICES = Array("i", (None,), low=0)

#: the diagnostics every single-ball estimator (MEB, CVDD, CVR) reports (CoreVectorBase._set_diagnostics)
_BALL_DIAGNOSTICS = {
    "core_set_": INDICES, "n_iter_": I_NONNEG, "radius_": F_ANY, "certified_ratio_": F_ANY,
    "certified_radius_": F_ANY, "history_": History(), "converged_": B, "kernel_evaluations_": I_NONNEG,
    "kkt_gap_": F_ANY,
}


def _per_pair(scalar, kinds):
    """A CVMClassifier diagnostic: a scalar for two classes, one value per pair for more."""
    return Either((scalar, Array(kinds, ("n_pairs",), finite=False)))


def _check_probability(est, fail):
    n = len(est.probA_)
    if len(est.probB_) != n or n not in (0, len(est.pairs_)) or (est.probability and n == 0):
        fail("probA_/probB_ must hold one value per pair, or none (none only without probability=True)")


def _check_mmda(est, fail):
    if sum(c.shape[1] for c in est.expansion_coef_) != est.n_components_:
        fail("the expansion coefficients' columns must add up to n_components_")


def _schemas():
    """{estimator class name: :class:`Schema`}."""
    meb = {
        "kernel_spec_": KSPEC, **_BALL_DIAGNOSTICS,
        "support_": INDICES, "support_vectors_": Matrix(("n_sv", "n_features")),
        "center_coef_": Array("f", ("n_sv",)), "dual_coef_": Array("f", (1, "n_sv")),
        "intercept_": Array("f", (1,)), "rho_": F, "dual_objective_": F_ANY, "offset_": F,
    }
    return {
        "MEB": Schema(meb),
        "CVDD": Schema({**meb, "xi_": Array("f", ("n_sv",))}),
        "CVMClassifier": Schema({
            "classes_": Array("ifbU", ("n_classes",)), "class_weight_": Array("f", ("n_classes",)),
            "kernel_spec_": KSPEC, "pairs_": PairList(),
            "support_": INDICES, "support_vectors_": Matrix(("n_sv", "n_features")),
            "dual_coef_": Array("f", ("n_pairs", "n_sv")), "intercept_": Array("f", ("n_pairs",)),
            "core_set_": INDICES,
            "n_iter_": _per_pair(I_NONNEG, "i"), "radius_": _per_pair(F_ANY, "f"),
            "certified_ratio_": _per_pair(F_ANY, "f"), "history_": Either((History(), ListOf(History(), "n_pairs"))),
            "converged_": _per_pair(B, "b"), "settled_": _per_pair(B, "b"),
            "settle_checks_": Either((Array("i", (None, 2), low=-1), ListOf(Array("i", (None, 2), low=-1), "n_pairs"))),
            "kernel_evaluations_": _per_pair(I_NONNEG, "i"),
            "kkt_gap_": _per_pair(F_ANY, "f"), "rho_": _per_pair(F_ANY, "f"),
            "dual_objective_": _per_pair(F_ANY, "f"),
            "xi_": Either((Array("f", (None,)), ListOf(Array("f", (None,)), "n_pairs"))),
            "probA_": Array("f", ("n_prob",)), "probB_": Array("f", ("n_prob",)),
        }, checks=(_check_probability,)),
        "CVR": Schema({
            "kernel_spec_": KSPEC, "C_": Scalar(float, finite=False, low=0.0), "mu_": Scalar(float, finite=False, low=0.0),
            "hybrid_cap_": Scalar(float, finite=False, low=0.0),
            **_BALL_DIAGNOSTICS,
            "support_": INDICES, "support_vectors_": Matrix(("n_sv", "n_features")),
            "dual_coef_": Array("f", (1, "n_sv")), "intercept_": Array("f", (1,)),
            "epsilon_bar_": F_ANY, "xi_": Array("f", ("n_sv",)), "xi_star_": Array("f", ("n_sv",)),
            "eta_": F_ANY, "dual_objective_": F_ANY, "tube_weight_": F_ANY, "y_mean_": F,
            "y_scale_": Scalar(float, low=np.finfo(np.float64).tiny), "n_mu_refits_": I_NONNEG,
        }),
        "SparseSVR": Schema({
            "kernel_spec_": KSPEC, "n_basis_": Scalar(int, low=0, dim="n_basis"),
            "basis_indices_": Array("i", ("n_basis",), low=0),
            "basis_vectors_": Array("f", ("n_basis", "n_features")), "coef_": Array("f", ("n_basis",)),
            "intercept_": F, "delta_": Scalar(float, finite=False, low=0.0), "lam_": Scalar(float, low=0.0),
            # (the growth's histories: on the fit rows of the hold-out split under 'auto', where the basis
            # kept can be shorter than the basis grown)
            "objective_history_": Array("f", ("n_grown",), finite=False),
            "newton_iterations_": Array("i", ("n_grown",), low=0),
            "stop_reason_": Scalar(str, choices=("n_basis", "tol", "zero_gradient", "no_candidates", "callback")),
            "converged_": B,
            "validation_path_": Struct(ValidationPath, {
                "n_basis": Array("i", ("n_checkpoints",), low=1), "lam": Array("f", ("n_lams",)),
                "mse": Array("f", ("n_checkpoints", "n_lams"), finite=False), "n_fit": I_NONNEG, "n_val": I_NONNEG}),
        }),
        "MMDA": Schema({
            "classes_": Array("ifbU", ("n_classes",)), "kernel_spec_": KSPEC,
            "n_components_": Scalar(int, low=0, dim="n_out"),
            "expansion_index_": ListOf(Array("i", ("n_points{i}",), low=0), "n_problems"),
            "expansion_vectors_": ListOf(Array("f", ("n_points{i}", "n_features")), "n_problems"),
            "expansion_coef_": ListOf(Array("f", ("n_points{i}", None)), "n_problems"),
            **{k: Array(kind, ("n_out",), finite=False, low=0 if kind == "i" else None) for k, kind in (
                ("core_set_size_", "i"), ("n_support_", "i"), ("n_iter_", "i"), ("kernel_evaluations_", "i"),
                ("certified_ratio_", "f"), ("radius_", "f"), ("sor_steps_", "f"), ("converged_", "b"),
                ("n_expansion_", "i"))},
            "cpu_time_": Timing(Array("f", ("n_out",), finite=False)),
        }, checks=(_check_mmda,)),
        "ImplicitSurface": Schema({
            "center_": Array("f", (3,)), "scale_": Scalar(float, low=np.finfo(np.float64).tiny),
            "bounds_": ListOf(Array("f", (3,)), 2, tuple=True),
            "levels_": ListOf(Struct(Level, {
                "sigma": Scalar(float, low=np.finfo(np.float64).tiny),
                "support_vectors": Array("f", ("n_sv{i}", 3)), "coef": Array("f", ("n_sv{i}",)),
                "intercept": F, "scale": F, "n_core_vectors": I_NONNEG, "n_support_vectors": I_NONNEG,
                "fit_time": Timing(F_ANY), "cpu_time": Timing(F_ANY), "C": F_ANY, "mu": F_ANY,
                "n_iter": I_NONNEG,
                "certified_ratio": F_ANY, "epsilon_bar": F_ANY, "residual_rms_before": F_ANY,
                "residual_rms_after": F_ANY})),
            "fit_time_": Timing(F_ANY), "fit_cpu_time_": Timing(F_ANY), "n_core_vectors_": I_NONNEG,
            "n_support_vectors_": I_NONNEG, "n_points_": I_NONNEG,
        }, transient=("mesh_info_",), n_features=3),
    }


_SCHEMAS = None


def schemas():
    """{estimator class: :class:`Schema`} for every class of :data:`corevector.registry.ESTIMATORS` (the
    declarations are keyed by class name, the classes found in the registry)."""
    global _SCHEMAS
    if _SCHEMAS is None:
        table = _schemas()
        missing = [e.cls.__name__ for e in ESTIMATORS if e.cls.__name__ not in table]
        if missing:  # a new estimator in the registry needs its declaration here
            raise RuntimeError(f"no model-file declaration for {missing} (corevector/io/model_files.py)")
        _SCHEMAS = {e.cls: table[e.cls.__name__] for e in ESTIMATORS}
    return _SCHEMAS


def __getattr__(name):
    if name == "SCHEMAS":
        return schemas()
    raise AttributeError(name)


def _class_by_name(name):
    try:
        return by_name(name).cls
    except KeyError:
        return None


# ------------------------------------------------------------------------------------------------------
# parameters: JSON with tags for what JSON lacks (tuples, non-finite floats, dicts with other keys)
# ------------------------------------------------------------------------------------------------------
#: parameters whose value is kept only when it is plain data (a Generator or RandomState is not stored)
_DROPPABLE = ("random_state",)


def _dump_param(v, depth=0):
    if depth > MAX_DEPTH:
        raise TypeError("nested too deeply")
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, np.integer)) and not isinstance(v, np.bool_):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (float, np.floating)):
        return dump_float(v)
    if isinstance(v, tuple):
        return {"tuple": [_dump_param(x, depth + 1) for x in v]}
    if isinstance(v, list):
        return [_dump_param(x, depth + 1) for x in v]
    if isinstance(v, np.ndarray) and v.dtype.kind in "fiub" and v.ndim == 1:
        return {"ndarray": [_dump_param(x, depth + 1) for x in v.tolist()]}
    if isinstance(v, dict):
        return {"dict": [[_dump_param(k, depth + 1), _dump_param(x, depth + 1)] for k, x in v.items()]}
    raise TypeError(f"a parameter value of type {type(v).__name__} cannot be stored")


def _load_param(node, depth=0):
    if depth > MAX_DEPTH:
        raise TypeError("nested too deeply")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_load_param(x, depth + 1) for x in node]
    if isinstance(node, dict) and len(node) == 1:
        (tag, value), = node.items()
        if tag == "float":
            return load_float(node)
        if tag == "tuple" and isinstance(value, list):
            return tuple(_load_param(x, depth + 1) for x in value)
        if tag == "ndarray" and isinstance(value, list) and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            return np.array(value, dtype=np.float64)
        if tag == "dict" and isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
            out = {}
            for k, x in value:
                k = _load_param(k, depth + 1)
                if not isinstance(k, (bool, int, float, str, type(None))):
                    raise TypeError("a dict key must be a number or a string")
                out[k] = _load_param(x, depth + 1)
            return out
    raise TypeError("malformed parameter value")


# ------------------------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------------------------
def _fitted_attributes(est):
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}


def make_header(estimator, *, feature_names=None, target_name=None, data_format=None):
    """The header of ``estimator``'s model file (without ``params`` and ``attributes``)."""
    _refuse_callable_kernel(estimator)
    cls = type(estimator)
    if _class_by_name(cls.__name__) is not cls:
        raise TypeError(f"estimator must be one of {sorted(e.cls.__name__ for e in ESTIMATORS)}, got {cls.__name__}")
    schema = schemas()[cls]
    if isinstance(schema.n_features, int):
        n_features = schema.n_features
        fitted = all(hasattr(estimator, k) for k in schema.attributes)
    else:
        n_features = getattr(estimator, schema.n_features, None)
        fitted = n_features is not None
    if not fitted:
        raise ValueError(f"estimator must be fitted before it is saved ({cls.__name__} is not fitted)")
    if feature_names is None and hasattr(estimator, "feature_names_in_"):
        feature_names = [str(s) for s in estimator.feature_names_in_]
    if feature_names is not None:
        feature_names = [str(s) for s in feature_names]
        if len(feature_names) != n_features:
            raise ValueError(f"feature_names has {len(feature_names)} names for {n_features} features")
    return {"format": FORMAT, "version": VERSION, "corevector_version": __version__, "estimator": cls.__name__,
            "n_features": int(n_features), "feature_names": feature_names,
            "target_name": None if target_name is None else str(target_name), "data_format": data_format}


def _refuse_callable_kernel(estimator):
    if callable(getattr(estimator, "kernel", None)):
        raise TypeError(f"{type(estimator).__name__} with a callable kernel cannot be saved in a model file: model files "
                        "hold no code, by design (load_model runs none).  Save the function with your code and "
                        "refit, or precompute the kernel (kernel='precomputed' models are saved)")


def save_model(estimator, path, *, feature_names=None, target_name=None, data_format=None):
    """Write a fitted estimator to a model file, atomically.

    The file holds the header, the parameters and the fitted attributes declared for its class; loading it
    runs no code from it.

    Parameters
    ----------
    estimator : estimator
        Any fitted corevector estimator.
    path : str or os.PathLike
        The file to write.
    feature_names : sequence of str, optional
        The input columns' names, recorded for ``corevector predict`` (default: the estimator's
        ``feature_names_in_``, if any).
    target_name : str, optional
        The target column's name, recorded in the header.
    data_format : {'csv', 'libsvm'}, optional
        The training file's format, recorded in the header.

    Returns
    -------
    dict
        The header written.

    See Also
    --------
    load_model : Read the file back.
    save_libsvm_model : LIBSVM's text model format.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import make_blobs
    >>> from corevector import CVMClassifier, save_model, load_model
    >>> X, y = make_blobs(200, centers=2, random_state=0)
    >>> clf = CVMClassifier(random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "clf.cvm")
    >>> save_model(clf, path)["estimator"]
    'CVMClassifier'
    >>> bool((load_model(path).decision_function(X) == clf.decision_function(X)).all())
    True
    """
    header = make_header(estimator, feature_names=feature_names, target_name=target_name, data_format=data_format)
    cls = type(estimator)
    schema = schemas()[cls]
    generic = {"n_features_in_", "feature_names_in_"}
    extra = _fitted_attributes(estimator) - set(schema.attributes) - set(schema.transient) - generic
    if extra:
        raise TypeError(f"{cls.__name__} has fitted attribute(s) {sorted(extra)} that its model-file declaration "
                        f"(corevector/io/model_files.py) does not list; declare them (or mark them transient)")
    w = Writer()
    params, dropped = {}, []
    for k, v in estimator.get_params(deep=False).items():
        if k in _DROPPABLE and isinstance(v, (np.random.RandomState, np.random.Generator)):
            params[k], dropped = None, dropped + [k]
            continue
        try:
            params[k] = _dump_param(v)
        except TypeError as exc:
            raise TypeError(f"{cls.__name__} parameter {k}: {exc}") from None
    attributes = {}
    if "n_features_in_" in vars(estimator):
        attributes["n_features_in_"] = int(estimator.n_features_in_)
    if "feature_names_in_" in vars(estimator):
        attributes["feature_names_in_"] = w.array("feature_names_in_", np.asarray(
            [str(s) for s in estimator.feature_names_in_], dtype=str))
    for name, spec in schema.attributes.items():
        attributes[name] = spec.dump(getattr(estimator, name), w, name)
    header = {**header, "params": params, "params_not_stored": dropped, "attributes": attributes}
    text = json.dumps(header, allow_nan=False, ensure_ascii=True).encode("ascii")
    with atomic_write(path, binary=True) as f:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr(zipfile.ZipInfo(HEADER_MEMBER, _ZIP_DATE), text)
            for name, arr in w.arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
                zf.writestr(zipfile.ZipInfo(name + ".npy", _ZIP_DATE), buf.getvalue())
    return {k: header[k] for k in ("format", "version", "corevector_version", "estimator", "n_features",
                                   "feature_names", "target_name", "data_format")}


# ------------------------------------------------------------------------------------------------------
# reading
# ------------------------------------------------------------------------------------------------------
def _pickle_header(path, first):
    """The header dict of a corevector 0.1 pickle-format file (its first line), or None."""
    line = first.split(b"\n", 1)[0]
    try:
        header = json.loads(line.decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if isinstance(header, dict) and header.get("format") == FORMAT and header.get("version") == PICKLE_VERSION:
        return header
    return None


def _refuse_pickle(path):
    return ModelFileError(
        f"{path} is a model file in the pickle format of corevector 0.1, which is no longer read: unpickling "
        f"can run any code the file holds.  If you trust its source, convert it once with 'corevector convert "
        f"{path} NEW.cvm --allow-unsafe-pickle' (Python: load_model(path, allow_unsafe_pickle=True), then "
        f"save_model) and use the new file")


def load_model(path, *, allow_unsafe_pickle=False, return_header=False):
    """Read the estimator saved by :func:`save_model`, fitted and ready to predict.

    Nothing in the file is executed: the arrays and parameters are checked against the declaration of
    the estimator's class (see the module docstring) and the estimator is built from them.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.
    allow_unsafe_pickle : bool, default=False
        Read a file in corevector 0.1's pickle format, which is otherwise refused:
        **unpickling runs whatever code the file holds**; use it only to convert a file you trust.
    return_header : bool, default=False
        Also return the file's header.

    Returns
    -------
    estimator or tuple
        The estimator, or ``(estimator, header)`` when ``return_header`` is true.

    Raises
    ------
    ModelFileError
        For any problem, naming the file: not a model file, a damaged or truncated file, a format version
        newer than this corevector's, a value that fails its check.

    See Also
    --------
    save_model : Write a model file.
    load_libsvm_model : Read LIBSVM's text model format.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import make_regression
    >>> from corevector import CVR, save_model, load_model
    >>> X, y = make_regression(200, 3, noise=1.0, random_state=0)
    >>> path = os.path.join(tempfile.mkdtemp(), "reg.cvm")
    >>> _ = save_model(CVR(random_state=0).fit(X, y), path)
    >>> reg, header = load_model(path, return_header=True)
    >>> type(reg).__name__, reg.n_features_in_
    ('CVR', 3)
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"model file not found: {path}")
    if not os.path.isfile(path):
        raise ModelFileError(f"not a regular file: {path}")
    try:
        with open(path, "rb") as f:
            first = f.read(4096)
        size = os.path.getsize(path)
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc.strerror}") from None
    if not first.startswith(b"PK\x03\x04"):
        if _pickle_header(path, first) is not None:
            if not allow_unsafe_pickle:
                raise _refuse_pickle(path)
            est, header = _load_pickle_model(path)
            return (est, header) if return_header else est
        raise ModelFileError(f"{path} is not a corevector model file (models are written by 'corevector fit' "
                             f"or corevector.save_model)")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, struct.error, KeyError,
            NotImplementedError, UnicodeDecodeError, OverflowError, IndexError, TypeError) as exc:
        raise ModelFileError(f"{path} is not a corevector model file or is damaged ({one_line(exc)})") from None
    with zf:
        est, header = _read_zip(path, zf, size)
    return (est, header) if return_header else est


def _read_zip(path, zf, size):
    infos = {}
    members = zf.infolist()
    if len(members) > MAX_MEMBERS:
        raise ModelFileError(f"{path}: {len(members)} members (at most {MAX_MEMBERS})")
    for info in members:
        if info.filename in infos:
            raise ModelFileError(f"{path}: member {info.filename!r} appears twice")
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            raise ModelFileError(f"{path}: member {info.filename!r} is compressed or encrypted (corevector writes "
                                 f"stored members only)")
        if info.file_size > size or info.compress_size != info.file_size or info.header_offset >= size:
            raise ModelFileError(f"{path}: member {info.filename!r} declares {info.file_size} bytes, more than "
                                 f"the file holds")
        infos[info.filename] = info
    info = infos.get(HEADER_MEMBER)
    if info is None:
        raise ModelFileError(f"{path} is not a corevector model file (no {HEADER_MEMBER})")
    if info.file_size > MAX_HEADER_BYTES:
        raise ModelFileError(f"{path}: {HEADER_MEMBER} of {info.file_size} bytes (at most {MAX_HEADER_BYTES})")
    try:
        with zf.open(info) as f:
            text = f.read(MAX_HEADER_BYTES + 1)
        header = json.loads(text.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ModelFileError(f"{path}: {HEADER_MEMBER} is nested too deeply") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, struct.error, UnicodeDecodeError, KeyError,
            NotImplementedError, OverflowError, TypeError) as exc:
        raise ModelFileError(f"{path}: damaged {HEADER_MEMBER} ({one_line(exc)})") from None
    header = _check_header(path, header)
    cls = _class_by_name(header["estimator"])
    schema = schemas()[cls]
    r = Reader(path, zf, infos, size)
    r.dims["n_features"], r.bound_at["n_features"] = header["n_features"], "the header"
    est = _build(path, cls, header["params"])
    attrs = header["attributes"]
    if not isinstance(attrs, dict):
        raise ModelFileError(f"{path}: malformed attributes")
    expected = set(schema.attributes)
    if not isinstance(schema.n_features, int):
        expected.add("n_features_in_")
    unknown = set(attrs) - expected - {"feature_names_in_"}
    missing = expected - set(attrs)
    if unknown or missing:
        raise ModelFileError(f"{path}: the attributes of {cls.__name__} do not match its declaration "
                             f"(unknown {sorted(unknown)}, missing {sorted(missing)})")
    values = {}
    if "n_features_in_" in attrs:
        values["n_features_in_"] = Scalar(int, low=0).load(attrs["n_features_in_"], r, "n_features_in_")
        if values["n_features_in_"] != header["n_features"]:
            raise ModelFileError(f"{path}: the header says {header['n_features']} features, n_features_in_ "
                                 f"{values['n_features_in_']}")
    if "feature_names_in_" in attrs:
        names = Array("U", ("n_features",)).load(attrs["feature_names_in_"], r, "feature_names_in_")
        values["feature_names_in_"] = np.array(names.tolist(), dtype=object)
    for name, spec in schema.attributes.items():
        values[name] = spec.load(attrs[name], r, name)
    unused = set(infos) - r.used
    if unused:
        raise ModelFileError(f"{path}: unexpected member(s) {sorted(unused)[:3]}")
    for k, v in values.items():
        setattr(est, k, v)

    def fail(what):
        raise ModelFileError(f"{path}: {what}")

    if hasattr(est, "kernel_spec_") and est.kernel_spec_.name != est.kernel:
        fail(f"the fitted kernel {est.kernel_spec_.name!r} is not the parameter kernel={est.kernel!r}")
    for check in schema.checks:
        check(est, fail)
    return est, {k: header[k] for k in ("format", "version", "corevector_version", "estimator", "n_features",
                                        "feature_names", "target_name", "data_format")}


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _check_header(path, header):
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ModelFileError(f"{path} is not a corevector model file (no '{FORMAT}' header)")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(f"{path}: invalid model format version {version!r}")
    if version > VERSION:
        raise ModelFileError(f"{path} was written by corevector {str(header.get('corevector_version', '?'))[:40]} "
                             f"(model format version {version}); this corevector reads up to version {VERSION}: "
                             f"upgrade corevector")
    if version not in READS:
        raise ModelFileError(f"{path}: model format version {version} in a ZIP file (versions "
                             f"{', '.join(map(str, READS))} expected)")
    keys = {"format", "version", "corevector_version", "estimator", "n_features", "feature_names", "target_name",
            "data_format", "params", "params_not_stored", "attributes"}
    if set(header) != keys:
        raise ModelFileError(f"{path}: the header's fields are not those of format version {version}")
    name = header["estimator"]
    if not isinstance(name, str) or _class_by_name(name) is None:
        raise ModelFileError(f"{path}: unknown estimator {str(name)[:60]!r} in the model header")
    n = header["n_features"]
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < 2**62:
        raise ModelFileError(f"{path}: invalid feature count {str(n)[:40]}")
    names = header["feature_names"]
    if names is not None and not (isinstance(names, list) and len(names) == n
                                  and all(isinstance(s, str) for s in names)):
        raise ModelFileError(f"{path}: feature_names must be null or {n} strings")
    if header["target_name"] is not None and not isinstance(header["target_name"], str):
        raise ModelFileError(f"{path}: target_name must be null or a string")
    if header["data_format"] not in (None, "csv", "libsvm"):
        raise ModelFileError(f"{path}: unknown data_format")
    if not isinstance(header["params"], dict) or not isinstance(header["params_not_stored"], list):
        raise ModelFileError(f"{path}: malformed params")
    return header


@functools.lru_cache(maxsize=None)
def _param_names(cls):
    return frozenset(cls._get_param_names())


def _build(path, cls, params):
    """``cls(**params)`` with scikit-learn's parameter checks; unknown parameters are an error."""
    from sklearn.utils._param_validation import InvalidParameterError

    known = _param_names(cls)
    unknown = set(params) - known
    if unknown:
        raise ModelFileError(f"{path}: unknown parameter(s) {sorted(unknown)[:5]} of {cls.__name__}")
    try:
        values = {k: _load_param(v) for k, v in params.items()}
        est = cls(**values)
        est._validate_params()
        if isinstance(values.get("kernel"), str) and values["kernel"] in NOT_PSD:  # (passes the constraint for
            raise ValueError(NOT_PSD[values["kernel"]])                           # fit to say why it is refused)
    except (TypeError, ValueError, InvalidParameterError) as exc:
        raise ModelFileError(f"{path}: invalid parameters of {cls.__name__} ({one_line(exc)})") from None
    return est


def _load_pickle_model(path):
    """The estimator of a corevector 0.1 pickle-format file: **unpickles**, which runs code from the file.
    Only :func:`load_model` with ``allow_unsafe_pickle=True`` calls it."""
    import pickle

    with open(path, "rb") as f:
        line = f.readline(4097)
        header = _pickle_header(path, line)
        try:
            est = pickle.load(f)
        except Exception as exc:  # a truncated or damaged payload after a valid header
            raise ModelFileError(f"{path}: damaged model file ({type(exc).__name__} while reading the pickled "
                                 f"estimator)") from None
    cls = _class_by_name(str(header.get("estimator")))
    if cls is None or type(est) is not cls:
        raise ModelFileError(f"{path}: the header names {header.get('estimator')} but the file holds a "
                             f"{type(est).__name__}")
    n = getattr(est, "n_features_in_", None)
    return est, {"format": FORMAT, "version": PICKLE_VERSION, "corevector_version": header.get("corevector_version"),
                 "estimator": cls.__name__, "n_features": n, "feature_names": None, "target_name": None,
                 "data_format": header.get("data_format")}

