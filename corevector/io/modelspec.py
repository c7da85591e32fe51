"""The declared types of model-file values (:mod:`corevector.io.model_files`): each turns a value into JSON
(its arrays go to the file's ``.npy`` members) and checks a JSON node, and the arrays it names, before it
becomes a value again.

:class:`Scalar`, :class:`Array`, :class:`Matrix` (dense or CSR), :class:`KernelSpecSpec`, :class:`ListOf`,
:class:`Either`, :class:`History`, :class:`Struct` (a dataclass), :class:`PairList` and :class:`Timing` (a
time of the fit, not stored); :class:`Reader`
reads each array member once, after checking its ``.npy`` header (:func:`_npy_header`, parsed strictly,
never evaluated) against the member's size, and binds the dimensions named in declarations.
"""
from __future__ import annotations

import math
import re
import struct
import zipfile
from dataclasses import dataclass, fields

import numpy as np
import scipy.sparse as sp

#: the header member of a model file (never read as an array)
HEADER_MEMBER = "header.json"
#: the dtypes an array may have (by kind; byte order '<', '>' or '|'): never an object array
_KINDS = {"f": (4, 8), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "b": (1,), "U": None}


class ModelFileError(ValueError):
    """A file that is not a model this corevector can read (one-line message naming the file)."""


def dump_float(v):
    v = float(v)
    return v if math.isfinite(v) else {"float": repr(v)}


def load_float(node):
    if isinstance(node, dict) and set(node) == {"float"} and node["float"] in ("inf", "-inf", "nan"):
        return float(node["float"])
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return float(node)
    raise TypeError("expected a number")


class Writer:
    """Collects the arrays of one file (member name -> array)."""

    def __init__(self):
        self.arrays = {}

    def array(self, name, arr):
        if name in self.arrays:
            raise ValueError(f"two arrays named {name!r}")
        self.arrays[name] = arr
        return {"array": name}


class Reader:
    """Reads the referenced arrays of one file, each at most once, with the dimensions bound so far."""

    def __init__(self, path, zf, infos, file_size):
        self.path, self.zf, self.infos, self.file_size = path, zf, infos, file_size
        self.used = {HEADER_MEMBER}
        self.dims = {}
        self.bound_at = {}  # dimension name -> where it was bound first (an attribute, or the header)
        self.index = []  # the list positions being read, for the dimension names with '{i}'

    def fail(self, where, what):
        return ModelFileError(f"{self.path}: {where}: {what}")

    def dim(self, name):
        return name.format(i=".".join(map(str, self.index))) if "{i}" in name else name

    def bind(self, where, name, value):
        key = self.dim(name)
        have = self.dims.setdefault(key, value)
        first = self.bound_at.setdefault(key, where)
        if have != value:
            raise self.fail(where, f"{key} is {value} here but {have} in {first}")

    def array(self, where, node):
        if not isinstance(node, dict) or set(node) != {"array"} or not isinstance(node["array"], str):
            raise self.fail(where, "expected an array reference")
        member = node["array"] + ".npy"
        if member in self.used:
            raise self.fail(where, f"member {member!r} is referenced twice")
        info = self.infos.get(member)
        if info is None:
            raise self.fail(where, f"missing member {member!r}")
        self.used.add(member)
        try:
            with self.zf.open(info) as f:
                shape, fortran, dtype, start = _npy_header(f)
                count = math.prod(shape)
                nbytes = count * dtype.itemsize
                if nbytes != info.file_size - start:
                    raise ValueError(f"shape {shape} of {dtype.str} needs {nbytes} bytes, the member holds "
                                     f"{info.file_size - start}")
                # (the member holds exactly these bytes: a short read would raise, not return fewer)
                buf = bytearray(f.read(nbytes))
                f.read(1)  # at the end: the CRC-32 of the member is checked now
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, struct.error, SyntaxError, TypeError,
                OverflowError, KeyError, NotImplementedError, UnicodeDecodeError) as exc:
            raise self.fail(where, f"damaged array member {member!r} ({one_line(exc)})") from None
        return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape, order="F" if fortran else "C")


#: the header of a .npy file as NumPy writes it (format 1.0: magic, version, 2-byte length, a dict literal)
_NPY_HEADER = re.compile(r"\{'descr': '([<>|])([A-Za-z])(\d{0,10})', 'fortran_order': (True|False), "
                         r"'shape': \(((?:\d{1,19}, ?)*(?:\d{1,19})?)\), \} *\n")


def _npy_header(f):
    """(shape, fortran_order, dtype, offset of the data) of the .npy stream ``f``: NumPy's own header format
    1.0, parsed strictly (no ast evaluation; a dtype of :data:`_KINDS` only)."""
    head = f.read(10)
    if len(head) != 10 or head[:8] != b"\x93NUMPY\x01\x00":
        raise ValueError("not a .npy array of format 1.0")
    size = int.from_bytes(head[8:10], "little")
    text = f.read(size)
    if len(text) != size:
        raise ValueError("truncated .npy header")
    m = _NPY_HEADER.fullmatch(text.decode("latin1"))
    if m is None:
        raise ValueError("malformed .npy header")
    order, kind, width, fortran, dims = m.groups()
    shape = tuple(int(n) for n in dims.replace(" ", "").split(",") if n)
    if kind not in _KINDS:
        raise ValueError(f"dtype {order}{kind}{width} is not allowed" + (" (an object array: pickle)" if kind == "O" else ""))
    dtype = np.dtype(f"{order}{kind}{width}")  # (a simple dtype: the pattern admits no fields or subarrays)
    sizes = _KINDS[kind]
    if sizes is not None and dtype.itemsize not in sizes:
        raise ValueError(f"dtype {dtype.str} is not allowed")
    if not dtype.isnative:
        raise ValueError(f"dtype {dtype.str} is not in this machine's byte order")
    return shape, fortran == "True", dtype, 10 + size


def one_line(exc):
    text = " ".join(str(exc).split())
    return (text[:200] or type(exc).__name__)


class Spec:
    """A declared type: ``dump`` turns a value into JSON (arrays go to the writer), ``load`` checks a JSON
    node (and the arrays it names) and returns the value."""

    def accepts(self, value):
        return True

    def dump(self, value, w, name):  # pragma: no cover - abstract
        raise NotImplementedError

    def load(self, node, r, where):  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class Scalar(Spec):
    """A Python scalar: ``kind`` float, int, bool or str.  Floats are finite unless ``finite=False``;
    ``low`` bounds numbers from below (inclusive); ``choices`` lists the allowed strings; ``dim`` binds an
    integer to a dimension name."""

    kind: type
    finite: bool = True
    low: float | None = None
    choices: tuple | None = None
    dim: str | None = None

    def accepts(self, value):
        if self.kind is float:
            return isinstance(value, (float, np.floating))
        if self.kind is int:
            return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        if self.kind is bool:
            return isinstance(value, (bool, np.bool_))
        return isinstance(value, str)

    def dump(self, value, w, name):
        if not self.accepts(value):
            raise TypeError(f"{name}: expected {self.kind.__name__}, got {type(value).__name__}")
        if self.kind is float:
            return dump_float(value)
        return self.kind(value)

    def load(self, node, r, where):
        try:
            if self.kind is float:
                value = load_float(node)
            elif self.kind is int:
                if not isinstance(node, int) or isinstance(node, bool):
                    raise TypeError("expected an integer")
                value = node
            elif self.kind is bool:
                if not isinstance(node, bool):
                    raise TypeError("expected true or false")
                value = node
            else:
                if not isinstance(node, str):
                    raise TypeError("expected a string")
                value = node
        except TypeError as exc:
            raise r.fail(where, str(exc)) from None
        if self.kind is float and self.finite and not math.isfinite(value):
            raise r.fail(where, f"non-finite value {value}")
        # a non-finite scalar may be nan (unknown: a model read from a LIBSVM file has no C or mu)
        unknown = self.kind is float and math.isnan(value)
        if self.low is not None and self.kind in (int, float) and not unknown and not value >= self.low:
            raise r.fail(where, f"{value} is below {self.low}")
        if self.choices is not None and value not in self.choices:
            raise r.fail(where, f"{value!r} is not one of {self.choices}")
        if self.dim is not None:
            r.bind(where, self.dim, value)
        return value


@dataclass
class Array(Spec):
    """A NumPy array: its dtype kinds (``'f'`` float, ``'i'`` integer, ``'b'`` bool, ``'U'`` str), its shape
    (an int, a dimension name bound across the file, or None per axis), finiteness of floats, and the
    lowest value of integers (``low``, inclusive)."""

    kinds: str = "f"
    shape: tuple = (None,)
    finite: bool = True
    low: int | None = None

    def accepts(self, value):
        return isinstance(value, np.ndarray)

    def dump(self, value, w, name):
        if not isinstance(value, np.ndarray) or value.dtype.kind not in self.kinds.replace("i", "iu") \
                or value.ndim != len(self.shape):
            raise TypeError(f"{name}: expected a {len(self.shape)}-d array of kind {self.kinds!r}, got "
                            f"{type(value).__name__} {getattr(value, 'dtype', '')} {getattr(value, 'shape', '')}")
        return w.array(name, value)

    def load(self, node, r, where):
        a = r.array(where, node)
        if a.dtype.kind not in self.kinds.replace("i", "iu"):
            raise r.fail(where, f"dtype {a.dtype.str} where kind {self.kinds!r} is expected")
        if a.ndim != len(self.shape):
            raise r.fail(where, f"{a.ndim} dimensions where {len(self.shape)} are expected")
        for axis, (n, want) in enumerate(zip(a.shape, self.shape)):
            if isinstance(want, int) and n != want:
                raise r.fail(where, f"axis {axis} has {n} entries where {want} are expected")
            if isinstance(want, str):
                r.bind(where, want, n)
        if a.dtype.kind == "f" and self.finite and not np.all(np.isfinite(a)):
            raise r.fail(where, "non-finite values")
        if a.dtype.kind in "iu" and a.size and self.low is not None and a.min() < self.low:
            raise r.fail(where, f"an entry {a.min()} is below {self.low}")
        return a


@dataclass
class Matrix(Spec):
    """A 2-d float64 matrix: a dense array or a CSR matrix (scipy's csr_matrix or csr_array), whose structure
    is checked (offsets in order and within bounds, column indices within the shape); ``shape``: a dimension
    name or None per axis."""

    shape: tuple = (None, "n_features")

    def accepts(self, value):
        return isinstance(value, np.ndarray) or (sp.issparse(value) and value.format == "csr")

    def dump(self, value, w, name):
        if isinstance(value, np.ndarray):
            return {"dense": Array("f", self.shape).dump(value, w, name)}
        if not (sp.issparse(value) and value.format == "csr"):
            raise TypeError(f"{name}: expected an array or a CSR matrix, got {type(value).__name__}")
        return {"csr": {"container": "csr_array" if isinstance(value, sp.sparray) else "csr_matrix",
                        "shape": [int(n) for n in value.shape],
                        "data": w.array(name + ".data", value.data),
                        "indices": w.array(name + ".indices", value.indices),
                        "indptr": w.array(name + ".indptr", value.indptr)}}

    def load(self, node, r, where):
        if isinstance(node, dict) and set(node) == {"dense"}:
            return Array("f", self.shape).load(node["dense"], r, where)
        if not (isinstance(node, dict) and set(node) == {"csr"} and isinstance(node["csr"], dict)
                and set(node["csr"]) == {"container", "shape", "data", "indices", "indptr"}):
            raise r.fail(where, "expected a dense or CSR matrix")
        c = node["csr"]
        shape = c["shape"]
        if c["container"] not in ("csr_matrix", "csr_array") or not (
                isinstance(shape, list) and len(shape) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**63 for n in shape)):
            raise r.fail(where, "malformed CSR description")
        for n, want in zip(shape, self.shape):  # (named axes bound across the file, or None)
            if want is not None:
                r.bind(where, want, n)
        data = Array("f", (None,)).load(c["data"], r, where + ".data")
        indices = Array("i", (len(data),)).load(c["indices"], r, where + ".indices")
        indptr = Array("i", (shape[0] + 1,)).load(c["indptr"], r, where + ".indptr")
        if indptr[0] != 0 or indptr[-1] != len(data) or np.any(np.diff(indptr) < 0):
            raise r.fail(where, "row offsets (indptr) out of order or bounds")
        if len(indices) and (indices.min() < 0 or indices.max() >= shape[1]):
            raise r.fail(where, "a column index out of bounds")
        cls = sp.csr_array if c["container"] == "csr_array" else sp.csr_matrix
        m = cls((data, indices, indptr), shape=tuple(shape), copy=False)
        m.indices, m.indptr = indices, indptr  # the index dtypes as written (scipy may narrow them)
        return m


@dataclass
class KernelSpecSpec(Spec):
    """A resolved :class:`refimpl.kernels.KernelSpec`: a known kernel, gamma finite and positive, an integer
    degree >= 1, a finite coef0 (>= 0 for 'poly', which is otherwise not PSD)."""

    def accepts(self, value):
        from refimpl.kernels import KernelSpec
        return isinstance(value, KernelSpec)

    def dump(self, value, w, name):
        if not self.accepts(value):
            raise TypeError(f"{name}: expected a KernelSpec")
        if value.name == "callable":
            raise TypeError(f"{name}: a callable kernel is code, which model files do not hold")
        out = {"name": value.name, "gamma": dump_float(value.gamma), "degree": int(value.degree),
               "coef0": dump_float(value.coef0), "normalize": bool(value.normalize)}
        if value.name == "precomputed":  # (its constant diagonal, which MEB's distances use, or None)
            out["kappa"] = None if value.kappa is None else dump_float(value.kappa)
        return out

    def load(self, node, r, where):
        from refimpl.kernels import KERNELS, KernelSpec
        keys = {"name", "gamma", "degree", "coef0", "normalize"}
        if not isinstance(node, dict) or set(node) not in (keys, keys | {"kappa"}):
            raise r.fail(where, "malformed kernel")
        name = Scalar(str, choices=KERNELS + ("precomputed",)).load(node["name"], r, where + ".name")
        if name == "precomputed":  # a Gram matrix's model: the support vectors are training indices
            if set(node) != keys | {"kappa"}:
                raise r.fail(where, "malformed kernel")
            kappa = None if node["kappa"] is None else Scalar(float, low=0.0).load(node["kappa"], r, where + ".kappa")
            return KernelSpec("precomputed", kappa=kappa)
        if "kappa" in node:
            raise r.fail(where, "malformed kernel")
        gamma = Scalar(float).load(node["gamma"], r, where + ".gamma")
        degree = Scalar(int, low=1).load(node["degree"], r, where + ".degree")
        coef0 = Scalar(float, low=0.0 if name == "poly" else None).load(node["coef0"], r, where + ".coef0")
        normalize = Scalar(bool).load(node["normalize"], r, where + ".normalize")
        if not gamma > 0 or degree > 10_000:
            raise r.fail(where, f"invalid kernel parameters gamma={gamma}, degree={degree}")
        return KernelSpec(name, gamma, degree, coef0, normalize)


@dataclass
class ListOf(Spec):
    """A list (or a tuple, ``tuple=True``) of values of one declared type; ``length`` an int or dimension
    name.  Dimension names with ``{i}`` in the items are bound per position (``n_sv{i}``)."""

    item: Spec
    length: int | str | None = None
    tuple: bool = False

    def accepts(self, value):
        return isinstance(value, tuple if self.tuple else list)

    def dump(self, value, w, name):
        if not self.accepts(value):
            raise TypeError(f"{name}: expected a {'tuple' if self.tuple else 'list'}")
        return [self.item.dump(v, w, f"{name}.{k}") for k, v in enumerate(value)]

    def load(self, node, r, where):
        if not isinstance(node, list):
            raise r.fail(where, "expected a list")
        if isinstance(self.length, int) and len(node) != self.length:
            raise r.fail(where, f"{len(node)} items where {self.length} are expected")
        if isinstance(self.length, str):
            r.bind(where, self.length, len(node))
        out = []
        for k, v in enumerate(node):
            r.index.append(k)
            try:
                out.append(self.item.load(v, r, f"{where}[{k}]"))
            finally:
                r.index.pop()
        return tuple(out) if self.tuple else out


@dataclass
class Either(Spec):
    """One of several declared types (the first that accepts the value when writing), e.g. a per-pair
    diagnostic: a scalar for a binary CVMClassifier, an array for one-vs-one."""

    options: tuple

    def accepts(self, value):
        return any(o.accepts(value) for o in self.options)

    def dump(self, value, w, name):
        for k, o in enumerate(self.options):
            if o.accepts(value):
                return {"either": k, "value": o.dump(value, w, name)}
        raise TypeError(f"{name}: unexpected {type(value).__name__}")

    def load(self, node, r, where):
        if not (isinstance(node, dict) and set(node) == {"either", "value"} and isinstance(node["either"], int)
                and not isinstance(node["either"], bool) and 0 <= node["either"] < len(self.options)):
            raise r.fail(where, "malformed alternative")
        return self.options[node["either"]].load(node["value"], r, where)


@dataclass
class Timing(Spec):
    """A measured time (wall-clock or CPU seconds) of one fit: not stored, so that two fits of the same data and
    seed give the same bytes.  Written as JSON null and read as NaN (an array of NaN of its declared shape);
    a file of format version 2, which stored times, is read with them (``item`` checks them)."""

    item: Spec

    def accepts(self, value):
        return self.item.accepts(value)

    def dump(self, value, w, name):
        if not self.item.accepts(value):
            raise TypeError(f"{name}: unexpected {type(value).__name__}")
        return None

    def load(self, node, r, where):
        if node is not None:  # format version 2
            return self.item.load(node, r, where)
        if isinstance(self.item, Scalar) and self.item.kind is float:
            return float("nan")
        if isinstance(self.item, Array) and self.item.kinds == "f":
            shape = tuple(n if isinstance(n, int) else r.dims.get(r.dim(n)) for n in self.item.shape)
            if all(isinstance(n, int) for n in shape):
                return np.full(shape, np.nan)
        raise r.fail(where, "a time that cannot be left out")


@dataclass
class History(Spec):
    """A fit's ``history_``: a dict from a name to a list of numbers (stored as 1-d arrays); the lists of
    :data:`TIMING_KEYS` are times, not stored (JSON null, read as NaN: :class:`Timing`)."""

    #: history lists that are times (seconds since the fit's start)
    TIMING_KEYS = ("elapsed",)

    def accepts(self, value):
        return isinstance(value, dict)

    def dump(self, value, w, name):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise TypeError(f"{name}: expected a dict with string keys")
        out = {}
        for k, v in value.items():
            arr = np.asarray(v)
            if arr.ndim != 1 or arr.dtype.kind not in "fiub":
                raise TypeError(f"{name}.{k}: expected a list of numbers")
            out[k] = None if k in self.TIMING_KEYS else w.array(f"{name}.{k}", arr)
        return out

    def load(self, node, r, where):
        if not isinstance(node, dict):
            raise r.fail(where, "expected a dict")
        out = {k: Array("fib", (None,), finite=False).load(v, r, f"{where}.{k}").tolist()
               for k, v in node.items() if v is not None}
        left_out = [k for k, v in node.items() if v is None]
        if left_out:
            if any(k not in self.TIMING_KEYS for k in left_out):
                raise r.fail(where, f"{sorted(left_out)[0]!r} is not a time and must be stored")
            lengths = {len(v) for v in out.values()}
            if len(lengths) > 1:
                raise r.fail(where, "lists of different lengths")
            n = lengths.pop() if lengths else 0
            out.update({k: [float("nan")] * n for k in left_out})
            out = {k: out[k] for k in node}  # the written order
        return out


@dataclass
class Struct(Spec):
    """A dataclass instance (e.g. :class:`refimpl.surface.Level`), field by declared field."""

    cls: type
    fields: dict

    def accepts(self, value):
        return isinstance(value, self.cls)

    def dump(self, value, w, name):
        if not isinstance(value, self.cls):
            raise TypeError(f"{name}: expected a {self.cls.__name__}")
        names = {f.name for f in fields(value)}
        if names != set(self.fields):
            raise TypeError(f"{name}: the fields of {self.cls.__name__} {sorted(names)} are not the declared "
                            f"{sorted(self.fields)}")
        return {k: s.dump(getattr(value, k), w, f"{name}.{k}") for k, s in self.fields.items()}

    def load(self, node, r, where):
        if not isinstance(node, dict) or set(node) != set(self.fields):
            raise r.fail(where, f"expected the fields {sorted(self.fields)}")
        return self.cls(**{k: s.load(node[k], r, f"{where}.{k}") for k, s in self.fields.items()})


@dataclass
class PairList(Spec):
    """CVMClassifier's ``pairs_``: the pairs (a, b), a < b, of class indices in LIBSVM's order."""

    def accepts(self, value):
        return isinstance(value, list)

    def dump(self, value, w, name):
        return [[int(a), int(b)] for a, b in value]

    def load(self, node, r, where):
        n = r.dims.get("n_classes")
        expected = [[a, b] for a in range(n) for b in range(a + 1, n)] if n is not None else None
        if node != expected:
            raise r.fail(where, "the class pairs must be (a, b), a < b, of every two classes in order")
        r.bind(where, "n_pairs", len(node))
        return [tuple(p) for p in node]


@dataclass
class Schema:
    """The persisted attributes of one estimator class, in reading order (dimensions are bound by the first
    attribute that names them), the checks across attributes no single declaration expresses, the
    attributes that are not persisted (recomputed or transient), and where its feature count comes from."""

    attributes: dict
    checks: tuple = ()
    transient: tuple = ()
    n_features: str | int = "n_features_in_"
