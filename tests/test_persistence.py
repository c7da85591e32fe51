"""Model files (issue 26): every estimator round-trips bit for bit in both implementations, nothing in a file
is ever executed, and a file that breaks its class's declaration is refused in one line naming it."""
import io
import json
import re
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

import corevector
from corevector import (CVDD, CVR, MEB, MMDA, CVMClassifier, ImplicitSurface, SparseSVR, load_model,
                        save_model)
from corevector.io.model_files import ModelFileError, schemas
from corevector.registry import ESTIMATORS

_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(80, 3))
_Y2 = np.where(_X[:, 0] > 0, 1, -1)
_Y3 = (_X[:, 0] > 0).astype(int) + (_X[:, 1] > 0)
_P = _RNG.normal(size=(60, 3))
_P /= np.linalg.norm(_P, axis=1)[:, None]
_XT = _RNG.normal(size=(40, 3))

#: (name, estimator, X, y, the prediction methods compared bit for bit): every registry class, the
#: classifier binary, one-vs-one with probabilities, and on CSR input with string labels
CASES = [
    ("cvm-binary", lambda: CVMClassifier(C=10), _X, _Y2, ("decision_function", "predict")),
    ("cvm-ovo-proba", lambda: CVMClassifier(probability=True, class_weight="balanced"), _X, _Y3,
     ("decision_function", "predict", "predict_proba")),
    ("cvm-csr-str", lambda: CVMClassifier(kernel="poly", degree=2, coef0=1.0), sp.csr_matrix(_X * (_X > 0)),
     np.array(["a", "b", "c"])[_Y3], ("decision_function", "predict")),
    ("cvdd", lambda: CVDD(C=5), _X, None, ("decision_function", "predict", "score_samples")),
    ("meb", lambda: MEB(kernel="linear"), _X, None, ("decision_function", "predict")),
    ("cvr", lambda: CVR(C=10), _X, np.sin(_X[:, 0]) + _X[:, 1], ("predict",)),
    ("sparse-svr", lambda: SparseSVR(n_basis=12, delta=np.inf), _X, np.sin(_X[:, 0]), ("predict",)),
    ("mmda", lambda: MMDA(n_components=2), _X, _Y3, ("transform",)),
    ("surface", lambda: ImplicitSurface(sigmas=(0.3, 0.15, 0.07), eps=1e-3, stop="margin"), _P, None,
     ("decision_function",)),
]


@pytest.fixture(scope="module")
def fitted():
    out = {}
    for name, make, X, y, methods in CASES:
        for impl in ("fast", "ref"):
            est = make().set_params(impl=impl, random_state=0)
            out[name, impl] = (est.fit(X) if y is None else est.fit(X, y)), X, methods
    return out


def test_every_registry_class_is_declared_and_covered():
    assert set(schemas()) == {e.cls for e in ESTIMATORS}
    covered = {type(make()) for _, make, *_ in CASES}
    assert covered == {e.cls for e in ESTIMATORS}


@pytest.mark.parametrize("name", [c[0] for c in CASES])
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_round_trip_is_bit_for_bit(fitted, tmp_path, name, impl):
    est, X, methods = fitted[name, impl]
    path = tmp_path / "m.cvm"
    header = save_model(est, path)
    assert header["estimator"] == type(est).__name__
    back = load_model(path)
    assert type(back) is type(est) and back.get_params() == est.get_params()
    Xt = X[:40] if name == "surface" else (sp.csr_matrix(_XT) if sp.issparse(X) else _XT)
    for m in methods:
        a, b = getattr(est, m)(Xt), getattr(back, m)(Xt)
        assert a.dtype == b.dtype and np.array_equal(a, b), m
    # every fitted attribute comes back equal, arrays with their dtypes, but the fit's times (not stored: NaN)
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("_"):
            _assert_same(getattr(back, k), v, k)
    # the file is deterministic: the same model gives the same bytes
    save_model(back, tmp_path / "again.cvm")
    assert (tmp_path / "again.cvm").read_bytes() == path.read_bytes()


#: the fitted values that are times of the fit: not stored (one fit gives one file), read back as NaN
TIMES = {"elapsed", "fit_time", "cpu_time", "fit_time_", "fit_cpu_time_", "cpu_time_"}


def _assert_same(a, b, name):
    if name.rsplit(".", 1)[-1] in TIMES:
        assert np.shape(a) == np.shape(b) and np.all(np.isnan(a)), name
        return
    if sp.issparse(b):
        assert sp.issparse(a) and type(a) is type(b) and a.shape == b.shape, name
        for part in ("data", "indices", "indptr"):
            assert np.array_equal(getattr(a, part), getattr(b, part)) and \
                getattr(a, part).dtype == getattr(b, part).dtype, name
    elif isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b, equal_nan=b.dtype.kind == "f"), name
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), name
        for x, y in zip(a, b):
            _assert_same(x, y, name)
    elif isinstance(b, dict):
        assert a.keys() == b.keys(), name
        for k in b:
            _assert_same(a[k], b[k], f"{name}.{k}")
    elif hasattr(b, "__dataclass_fields__"):
        for k in b.__dataclass_fields__:
            _assert_same(getattr(a, k), getattr(b, k), f"{name}.{k}")
    elif isinstance(b, float) and np.isnan(b):
        assert np.isnan(a), name
    else:
        assert a == b, name


def test_feature_names_of_a_dataframe_fit_survive(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(_X, columns=["a", "b", "c"])
    est = CVMClassifier(random_state=0).fit(df, _Y2)
    header = save_model(est, tmp_path / "m.cvm")
    assert header["feature_names"] == ["a", "b", "c"]
    back = load_model(tmp_path / "m.cvm")
    assert list(back.feature_names_in_) == ["a", "b", "c"]
    assert np.array_equal(back.predict(df), est.predict(df))


def test_an_undeclared_fitted_attribute_is_refused_at_save(tmp_path):
    est = MEB(random_state=0).fit(_X)
    est.extra_thing_ = 1.0
    with pytest.raises(TypeError, match=r"fitted attribute\(s\) \['extra_thing_'\].*declaration"):
        save_model(est, tmp_path / "m.cvm")
    assert not (tmp_path / "m.cvm").exists()
    with pytest.raises(ValueError, match="must be fitted"):
        save_model(MEB(), tmp_path / "m.cvm")


# ------------------------------------------------------------------------------------------------ no code runs
def _old_pickle_file(path, payload):
    header = {"format": "corevector-model", "version": 1, "corevector_version": "0.1.0",
              "estimator": "CVMClassifier", "n_features": 2, "data_format": "csv"}
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)


class _System:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def test_the_crafted_model_file_runs_nothing(tmp_path):
    """Issue 26's file: a valid header and a pickled os.system call.  Loaded through the Python API and the
    command line, in a fresh process: the command never runs (its marker file is never created), the load
    is refused in one line, and nothing is unpickled (pickle's loaders are replaced by traps)."""
    marker = tmp_path / "ran"
    crafted = tmp_path / "crafted.pkl"
    _old_pickle_file(crafted, pickle.dumps(_System(f"touch {marker}")))
    # the same call in a new-format file: an object array holding it (np.save with allow_pickle)
    npz = tmp_path / "crafted.cvm"
    good = tmp_path / "good.cvm"
    save_model(MEB(random_state=0).fit(_X[:, :2]), good)
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(npz, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "support_vectors_.npy":
                buf = io.BytesIO()
                np.save(buf, np.array([_System(f"touch {marker}")], dtype=object), allow_pickle=True)
                data = buf.getvalue()
            zout.writestr(info.filename, data)
    data = tmp_path / "d.csv"
    np.savetxt(data, np.c_[_X[:5, :2], _Y2[:5]], delimiter=",")
    script = f"""
import pickle, sys
def trap(*a, **k):
    raise SystemExit("pickle was called")
pickle.load = pickle.loads = trap
pickle.Unpickler = trap
from corevector import load_model
from corevector.cli import command as cli
for path in ({str(crafted)!r}, {str(npz)!r}):
    try:
        load_model(path)
    except ValueError as exc:
        print("refused:", exc)
    print("cli", cli.main(["predict", path, {str(data)!r}]))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert not marker.exists()
    assert "pickle was called" not in res.stdout + res.stderr
    assert res.stdout.count("refused:") == 2 and res.stdout.count("cli 1") == 2
    assert "pickle format of corevector 0.1" in res.stdout and "--allow-unsafe-pickle" in res.stdout
    assert "dtype |O is not allowed (an object array: pickle)" in res.stdout and "support_vectors_" in res.stdout
    assert "Traceback" not in res.stderr and res.stderr.count("error:") == 2


def test_old_pickle_files_load_only_behind_the_named_option(tmp_path):
    est = CVMClassifier(random_state=0).fit(_X[:, :2], _Y2)
    old = tmp_path / "old.pkl"
    _old_pickle_file(old, pickle.dumps(est))
    with pytest.raises(ModelFileError, match="no longer read: unpickling can run any code"):
        load_model(old)
    back = load_model(old, allow_unsafe_pickle=True)
    assert np.array_equal(back.decision_function(_X[:, :2]), est.decision_function(_X[:, :2]))


def test_old_pickle_files_that_are_damaged_or_mislabelled_are_refused(tmp_path):
    """Behind the option too, a pickle-format file is checked: a payload that does not unpickle, or an
    estimator of another class than its header names, is refused in one line naming the file."""
    est = CVDD(random_state=0).fit(_X[:, :2])
    damaged, other = tmp_path / "damaged.pkl", tmp_path / "other.pkl"
    _old_pickle_file(damaged, pickle.dumps(est)[:-20])
    _old_pickle_file(other, pickle.dumps(est))  # the header says CVMClassifier
    for path, words in ((damaged, r"damaged\.pkl: damaged model file \(\w+ while reading the pickled estimator\)$"),
                        (other, r"other\.pkl: the header names CVMClassifier but the file holds a CVDD$")):
        with pytest.raises(ModelFileError) as exc:
            load_model(path, allow_unsafe_pickle=True)
        assert re.search(words, str(exc.value)), exc.value


# ------------------------------------------------------------------------------------------------ validation
def _rewrite(src, dst, edit_header=None, edit_member=None):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "header.json" and edit_header:
                h = json.loads(data)
                edit_header(h)
                data = json.dumps(h).encode()
            elif edit_member and info.filename in edit_member:
                data = edit_member[info.filename](data)
            if data is not None:
                zout.writestr(info.filename, data)


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _set(h, path, value):
    node = h
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


@pytest.mark.parametrize("edit, member, message", [
    (("attributes", "kernel_spec_", "name"), None, "kernel_spec_.name: 'sigmoid' is not one of"),
    (("attributes", "kernel_spec_", "gamma"), None, "kernel_spec_.gamma: non-finite"),
    (("n_features",), None, "n_features_in_"),
    (("params", "kernel"), None, "invalid parameters of CVMClassifier"),
    (("params", "no_such"), None, "unknown parameter"),
    (("estimator",), None, "unknown estimator"),
    (("attributes", "pairs_"), None, "class pairs"),
    (None, ("intercept_.npy", np.array([np.nan])), "intercept_: non-finite values"),
    (None, ("support_vectors_.npy", np.zeros((3, 7))), "support_vectors_: n_features is 7 here but 2 in the header"),
    (None, ("dual_coef_.npy", np.zeros((1, 2))), "dual_coef_: n_sv is 2 here but"),
    (None, ("support_.npy", -np.ones(3, dtype=np.int64)), "support_: an entry -1 is below 0"),
    (None, ("classes_.npy", np.array([1 + 2j, 3j])), "dtype <c16 is not allowed"),
    (None, ("intercept_.npy", None), "missing member 'intercept_.npy'"),
])
def test_values_that_break_the_declaration_are_refused(tmp_path, edit, member, message):
    est = CVMClassifier(random_state=0).fit(_X[:, :2], _Y2)
    good = tmp_path / "good.cvm"
    save_model(est, good)
    bad = tmp_path / "bad.cvm"
    values = {("attributes", "kernel_spec_", "name"): "sigmoid",
              ("attributes", "kernel_spec_", "gamma"): {"float": "inf"}, ("n_features",): 3,
              ("params", "kernel"): "sigmoid", ("params", "no_such"): 1, ("estimator",): "os.system",
              ("attributes", "pairs_"): [[1, 0]]}
    _rewrite(good, bad, edit_header=(lambda h: _set(h, edit, values[edit])) if edit else None,
             edit_member={member[0]: lambda _, v=member[1]: None if v is None else _npy(v)} if member else None)
    with pytest.raises(ModelFileError) as exc:
        load_model(bad)
    text = str(exc.value)
    assert message in text and str(bad) in text and "\n" not in text


def test_damaged_and_foreign_files_are_refused(tmp_path):
    good = tmp_path / "good.cvm"
    save_model(CVDD(random_state=0).fit(_X), good)
    raw = bytearray(good.read_bytes())
    i = raw.index(b"\x93NUMPY") + 200  # inside the first array's data: the CRC-32 catches it
    raw[i] ^= 0x10
    flipped = tmp_path / "flipped.cvm"
    flipped.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="flipped.cvm.*CRC"):
        load_model(flipped)
    plain_npz = tmp_path / "plain.npz"
    np.savez(plain_npz, a=np.zeros(3))
    with pytest.raises(ModelFileError, match="is not a corevector model file"):
        load_model(plain_npz)
    with pytest.raises(ModelFileError, match="not found"):
        load_model(tmp_path / "nope.cvm")
    # the same member referenced twice (memory would grow per reference): refused
    twice = tmp_path / "twice.cvm"
    _rewrite(good, twice, edit_header=lambda h: _set(h, ("attributes", "xi_"), {"array": "center_coef_"}))
    with pytest.raises(ModelFileError, match="referenced twice"):
        load_model(twice)


def test_save_load_are_exported_and_documented():
    assert corevector.save_model is save_model and corevector.load_model is load_model
    assert "allow_unsafe_pickle" in load_model.__doc__ and "runs whatever code" in load_model.__doc__


# ------------------------------------------------------------------------------------------------ issue 44
@pytest.mark.parametrize("name", [c[0] for c in CASES])
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_two_fits_of_the_same_data_and_seed_give_the_same_bytes(fitted, tmp_path, name, impl):
    """The fit's times (history_['elapsed'], ImplicitSurface's and MMDA's timings) are not stored, so a second fit
    writes the bytes of the first (history_['elapsed'] made them differ)."""
    est, X, _ = fitted[name, impl]
    make, y = next((c[1], c[3]) for c in CASES if c[0] == name)
    again = make().set_params(impl=impl, random_state=0)
    again = again.fit(X) if y is None else again.fit(X, y)
    save_model(est, tmp_path / "a.cvm")
    save_model(again, tmp_path / "b.cvm")
    assert (tmp_path / "a.cvm").read_bytes() == (tmp_path / "b.cvm").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.cvm") as zf:
        header = json.loads(zf.read("header.json"))
        assert not any("elapsed" in n or "time" in n for n in zf.namelist())
    assert header["version"] == 3


def _as_version_2(monkeypatch):
    """save_model as format version 2 wrote: the times stored (Timing and History's 'elapsed' as plain values)."""
    from corevector.io import model_files, modelspec

    monkeypatch.setattr(model_files, "VERSION", 2)
    monkeypatch.setattr(modelspec.Timing, "dump", lambda self, value, w, name: self.item.dump(value, w, name))
    monkeypatch.setattr(modelspec.History, "TIMING_KEYS", ())


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_version_2_files_are_read_with_their_times(fitted, tmp_path, monkeypatch, name):
    est, X, methods = fitted[name, "fast"]
    with monkeypatch.context() as m:
        _as_version_2(m)
        save_model(est, tmp_path / "v2.cvm")
    with zipfile.ZipFile(tmp_path / "v2.cvm") as zf:
        assert json.loads(zf.read("header.json"))["version"] == 2
    back = load_model(tmp_path / "v2.cvm")
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("_"):
            _assert_same_with_times(getattr(back, k), v, k)
    Xt = X[:40] if name == "surface" else (sp.csr_matrix(_XT) if sp.issparse(X) else _XT)
    for f in methods:
        assert np.array_equal(getattr(back, f)(Xt), getattr(est, f)(Xt)), f
    # and written again today, as version 3
    save_model(back, tmp_path / "v3.cvm")
    save_model(est, tmp_path / "v3-direct.cvm")
    assert (tmp_path / "v3.cvm").read_bytes() == (tmp_path / "v3-direct.cvm").read_bytes()


def _assert_same_with_times(a, b, name):
    global TIMES
    saved, TIMES = TIMES, set()
    try:
        _assert_same(a, b, name)
    finally:
        TIMES = saved


def test_a_time_left_out_is_only_a_time(fitted, tmp_path):
    """null is accepted where a time is declared, nowhere else; a history list left out gets NaN of its length."""
    est, *_ = fitted["cvr", "fast"]
    save_model(est, tmp_path / "m.cvm")
    with zipfile.ZipFile(tmp_path / "m.cvm") as zf:
        header = json.loads(zf.read("header.json"))
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    assert header["attributes"]["history_"]["elapsed"] is None
    elapsed = load_model(tmp_path / "m.cvm").history_["elapsed"]
    assert len(elapsed) == len(est.history_["radius"]) > 0 and np.all(np.isnan(elapsed))
    for path, value in ((("history_", "radius"), None), (("epsilon_bar_",), None)):
        bad = json.loads(json.dumps(header))
        node = bad["attributes"]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        p = tmp_path / "bad.cvm"
        with zipfile.ZipFile(p, "w") as zf:
            for n, data in members.items():
                if n == "history_.radius.npy" and path[-1] == "radius":
                    continue
                zf.writestr(n, json.dumps(bad) if n == "header.json" else data)
        with pytest.raises(ModelFileError, match="must be stored|expected a number") as exc:
            load_model(p)
        assert "\n" not in str(exc.value)


# ------------------------------------------------------------------------------------------------ the refusal table
# Every array a model file declares, in every class: a wrong dtype kind, an extra dimension, an axis one entry
# longer where its length is declared (a number, or a dimension another value binds), an entry out of range,
# a non-finite float and a member one row short of its header's shape are each refused, in one line naming
# the file and the attribute.  The rows are made from the declarations (schemas()) and the fitted CASES, and
# test_the_table_covers_every_declared_array checks that the CASES reach every declared array.
from corevector.io import modelspec as ms  # noqa: E402


def _walk(spec, node, where, members, index=()):
    """("array", where, member, declaration, list index) for each array the header node references, and
    ("dim", name) for each dimension a non-array value binds; Timing values left out (null) are skipped."""
    if isinstance(spec, ms.Timing):
        if node is not None:
            yield from _walk(spec.item, node, where, members, index)
    elif isinstance(spec, ms.Array):
        yield "array", where, node["array"] + ".npy", spec, index
    elif isinstance(spec, ms.Matrix):
        if "dense" in node:
            yield "array", where, node["dense"]["array"] + ".npy", ms.Array("f", spec.shape), index
        else:
            c = node["csr"]
            nnz = len(np.load(io.BytesIO(members[c["data"]["array"] + ".npy"])))
            yield "array", where + ".data", c["data"]["array"] + ".npy", ms.Array("f", (None,)), index
            yield "array", where + ".indices", c["indices"]["array"] + ".npy", ms.Array("i", (nnz,)), index
            yield "array", where + ".indptr", c["indptr"]["array"] + ".npy", ms.Array("i", (c["shape"][0] + 1,)), index
    elif isinstance(spec, ms.ListOf):
        if isinstance(spec.length, str):
            yield "dim", spec.length
        for k, v in enumerate(node):
            yield from _walk(spec.item, v, f"{where}[{k}]", members, index + (k,))
    elif isinstance(spec, ms.Either):
        yield from _walk(spec.options[node["either"]], node["value"], where, members, index)
    elif isinstance(spec, ms.Struct):
        for k, s in spec.fields.items():
            yield from _walk(s, node[k], f"{where}.{k}", members, index)
    elif isinstance(spec, ms.History):
        for k, v in node.items():
            if v is not None:
                yield "array", f"{where}.{k}", v["array"] + ".npy", ms.Array("fib", (None,), finite=False), index
    elif isinstance(spec, ms.Scalar) and spec.dim:
        yield "dim", spec.dim
    elif isinstance(spec, ms.PairList):
        yield "dim", "n_pairs"


def _dim_name(name, index):
    return name.format(i=".".join(map(str, index))) if "{i}" in name else name


def _table(est, tmp_path):
    """(header, members, rows) of ``est``'s file; a row is (check, where, member, new member bytes, expected
    words of the refusal)."""
    path = tmp_path / "good.cvm"
    save_model(est, path)
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read("header.json"))
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    items = [x for name, spec in schemas()[type(est)].attributes.items()
             for x in _walk(spec, header["attributes"][name], name, members)]
    binders = {"n_features": 1}
    for x in items:
        names = [x[1]] if x[0] == "dim" else [_dim_name(n, x[4]) for n in x[3].shape if isinstance(n, str)]
        for n in names:
            binders[n] = binders.get(n, 0) + 1
    rows = []
    for x in items:
        if x[0] == "array":
            rows += _rows(*x[1:], members, binders)
    return header, members, rows


def _wrong_kind(a, kinds):
    kinds = kinds.replace("i", "iu")
    for make in (lambda: a.astype(np.int64), lambda: a.astype(np.float64) + 0.5, lambda: a.astype(np.bool_),
                 lambda: a.astype(str)):
        try:
            b = make()
        except ValueError:  # (strings that are not numbers)
            continue
        if b.dtype.kind not in kinds:
            return b
    return None


def _rows(where, member, spec, index, members, binders):
    a = np.load(io.BytesIO(members[member]), allow_pickle=False)
    out = []
    wrong = _wrong_kind(a, spec.kinds)
    if wrong is not None:
        out.append(("dtype", where, member, _npy(wrong), [re.escape(f": {where}: dtype {wrong.dtype.str} where kind")]))
    out.append(("dimensions", where, member, _npy(a[None]),
                [re.escape(f": {where}: {a.ndim + 1} dimensions where {a.ndim} are expected")]))
    for axis, want in enumerate(spec.shape):
        if want is None or (isinstance(want, str) and binders.get(_dim_name(want, index), 0) < 2):
            continue  # a length nothing else states
        pad = [(0, 0)] * a.ndim
        pad[axis] = (0, 1)
        longer = np.pad(a, pad, mode="edge") if a.shape[axis] else np.pad(a, pad)
        name = _dim_name(want, index) if isinstance(want, str) else None
        # the first value that binds a dimension is named by the one that disagrees with it
        n, w = a.shape[axis] + 1, re.escape(where)
        words = ([re.escape(f"{where}: axis {axis} has {n} entries where {want} are expected")] if name is None
                 else [rf": {w}: {name} is {n} here but \d+ in .+$|: \S+: {name} is \d+ here but {n} in {w}$"])
        out.append((f"length of axis {axis}", where, member, _npy(longer), words))
    if a.size and a.dtype.kind in "iu" and spec.low is not None:
        bad = a.copy()
        bad.flat[0] = spec.low - 1
        out.append(("range", where, member, _npy(bad), [re.escape(f": {where}: an entry {spec.low - 1} is below {spec.low}")]))
    if a.size and a.dtype.kind == "f" and spec.finite:
        bad = a.copy()
        bad.flat[0] = np.nan
        out.append(("finite", where, member, _npy(bad), [re.escape(f": {where}: non-finite values")]))
    raw = members[member]
    short = raw[:len(raw) - max(a.itemsize * (a.size // max(len(a), 1)), 1)] if a.size else raw + b"\0"
    out.append(("byte count", where, member, short, [re.escape(f": {where}: damaged array member {member!r} (shape "),
                                                     r"needs \d+ bytes, the member holds \d+\)$"]))
    return out


def _refusal(path, members, member, data):
    with zipfile.ZipFile(path, "w") as zf:  # (a correct CRC-32: only the declaration can refuse it)
        for n, d in members.items():
            zf.writestr(n, data if n == member else d)
    with pytest.raises(ModelFileError) as exc:
        load_model(path)
    return str(exc.value)


CHECKS = ("dtype", "dimensions", "length", "range", "finite", "byte count")


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_every_declared_array_refuses_what_breaks_its_declaration(fitted, tmp_path, name, check):
    est, *_ = fitted[name, "fast"]
    _, members, rows = _table(est, tmp_path)
    bad = tmp_path / "bad.cvm"
    failures = []
    for kind, where, member, data, words in rows:
        if not kind.startswith(check):
            continue
        try:
            text = _refusal(bad, members, member, data)
        except BaseException as exc:  # noqa: BLE001 -- loaded, or refused with another error: listed below
            failures.append(f"{kind} of {where}: {type(exc).__name__}: {exc}")
            continue
        if not (text.startswith(f"{bad}: ") and all(re.search(w, text) for w in words) and "\n" not in text):
            failures.append(f"{kind} of {where}: {text}")
    assert not failures, "\n".join(failures)


def _declared_arrays(spec, where):
    """The paths of the arrays a declaration can hold (Either: each option; lists: their item), without
    the times a file leaves out."""
    if isinstance(spec, (ms.Array, ms.Matrix, ms.History)):
        yield where
    elif isinstance(spec, ms.ListOf):
        yield from _declared_arrays(spec.item, where + "[]")
    elif isinstance(spec, ms.Either):
        for k, o in enumerate(spec.options):
            yield from _declared_arrays(o, f"{where}|{k}")
    elif isinstance(spec, ms.Struct):
        for k, s in spec.fields.items():
            yield from _declared_arrays(s, f"{where}.{k}")


def test_the_table_covers_every_declared_array(fitted, tmp_path):
    """The CASES' files hold every array a declaration can hold (both options of an Either, CSR and dense
    support vectors), so that the refusal table has rows for every declared dtype, shape and range."""
    declared, held, kinds = set(), set(), set()
    for cls, schema in schemas().items():
        for name, spec in schema.attributes.items():
            declared |= {(cls.__name__, p) for p in _declared_arrays(spec, name)}
    for name, *_ in CASES:
        est, *_ = fitted[name, "fast"]
        header, _, rows = _table(est, tmp_path)
        kinds |= {r[0].split(" of ")[0] for r in rows}
        for attr, spec in schemas()[type(est)].attributes.items():
            held |= {(type(est).__name__, p) for p in _held_arrays(spec, header["attributes"][attr], attr)}
    assert declared == held, sorted(declared ^ held)
    assert {k.split(" of ")[0] for k in kinds} >= {"dtype", "dimensions", "length", "range", "finite", "byte count"}


def _held_arrays(spec, node, where):
    if isinstance(spec, (ms.Array, ms.Matrix, ms.History)):
        yield where
    elif isinstance(spec, ms.ListOf):
        for v in node:
            yield from _held_arrays(spec.item, v, where + "[]")
    elif isinstance(spec, ms.Either):
        yield from _held_arrays(spec.options[node["either"]], node["value"], f"{where}|{node['either']}")
    elif isinstance(spec, ms.Struct):
        for k, s in spec.fields.items():
            yield from _held_arrays(s, node[k], f"{where}.{k}")


# ------------------------------------------------------------------------------------------------ the other checks
def _npy_bytes(descr, shape, data=b""):
    """A .npy member with this header text, as NumPy writes format 1.0 (padded to 64 bytes)."""
    text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {shape}, }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1") + data


def _deep(n):
    return json.loads("[" * n + "]" * n) if n < 500 else None


def _set_attr(path, value):
    return lambda h, m: _set(h, ("attributes",) + path, value)


def _member(name, data):
    def edit(h, m):
        m[name] = data
    return edit


def _drop_member(name):
    return lambda h, m: m.pop(name)


def _rename_list(attr, keep):
    def edit(h, m):
        h["attributes"][attr] = h["attributes"][attr][:keep]
    return edit


def _csr(field, fn):
    """Edit the CSR support vectors' member ``field`` (data, indices, indptr) by ``fn(array)``."""
    def edit(h, m):
        name = h["attributes"]["support_vectors_"]["csr"][field]["array"] + ".npy"
        m[name] = _npy(fn(np.load(io.BytesIO(m[name]))))
    return edit


def _history_short(h, m):
    a = np.load(io.BytesIO(m["history_.radius.npy"]))
    m["history_.radius.npy"] = _npy(a[:-1])


def _one_more_column(h, m):
    a = np.load(io.BytesIO(m["expansion_coef_.0.npy"]))
    m["expansion_coef_.0.npy"] = _npy(np.c_[a, a[:, :1]])


#: (case, what the edit breaks, the edit of (header, members), the refusal's words after "FILE: ")
READER_ROWS = [
    # array references and .npy headers (members written with a correct CRC-32)
    ("cvdd", "an array reference", _set_attr(("intercept_",), 1.0), r"intercept_: expected an array reference"),
    ("cvdd", ".npy magic", _member("intercept_.npy", b"NOTANPY!" + b"\0" * 80),
     r"intercept_: damaged array member 'intercept_.npy' \(not a \.npy array of format 1\.0\)"),
    ("cvdd", ".npy version", _member("intercept_.npy", b"\x93NUMPY\x02\x00" + _npy(np.zeros(1))[8:]),
     r"intercept_: damaged .*not a \.npy array of format 1\.0"),
    ("cvdd", ".npy header length", _member("intercept_.npy", b"\x93NUMPY\x01\x00\xff\x00{'descr'"),
     r"intercept_: damaged .*truncated \.npy header"),
    ("cvdd", ".npy header syntax", _member("intercept_.npy", _npy_bytes("<f8", "(1,), 'x': (1,)", bytes(8))),
     r"intercept_: damaged .*malformed \.npy header"),
    ("cvdd", "an object array", _member("intercept_.npy", _npy_bytes("|O", "(1,)", bytes(8))),
     r"intercept_: damaged .*dtype \|O is not allowed \(an object array: pickle\)"),
    ("cvdd", "a datetime array", _member("intercept_.npy", _npy_bytes("<M8", "(1,)", bytes(8))),
     r"intercept_: damaged .*dtype <M8 is not allowed"),
    ("cvdd", "float16", _member("intercept_.npy", _npy(np.zeros(1, np.float16))),
     r"intercept_: damaged .*dtype <f2 is not allowed"),
    ("cvdd", "the byte order", _member("intercept_.npy", _npy(np.zeros(1, ">f8"))),
     r"intercept_: damaged .*dtype >f8 is not in this machine's byte order"),
    ("cvdd", "a shape no member holds", _member("intercept_.npy", _npy_bytes("<f8", "(10000000000000000,)", bytes(8))),
     r"intercept_: damaged .*shape \(10000000000000000,\) of <f8 needs 80000000000000000 bytes, the member holds 8\)"),
    # scalars
    ("cvdd", "a float", _set_attr(("rho_",), "x"), r"rho_: expected a number"),
    ("cvdd", "a finite float", _set_attr(("rho_",), {"float": "nan"}), r"rho_: non-finite value nan"),
    ("cvdd", "an integer", _set_attr(("n_iter_",), 1.5), r"n_iter_: expected an integer"),
    ("cvdd", "an integer, not a bool", _set_attr(("n_iter_",), True), r"n_iter_: expected an integer"),
    ("cvdd", "an integer's range", _set_attr(("n_iter_",), -1), r"n_iter_: -1 is below 0"),
    ("cvdd", "a bool", _set_attr(("converged_",), 1), r"converged_: expected true or false"),
    ("cvr", "a float's range", _set_attr(("C_",), -1.0), r"C_: -1\.0 is below 0\.0"),
    ("cvr", "a positive scale", _set_attr(("y_scale_",), 0.0), r"y_scale_: 0\.0 is below 2\.2250738585072014e-308"),
    ("sparse-svr", "a string", _set_attr(("stop_reason_",), 3), r"stop_reason_: expected a string"),
    ("sparse-svr", "a string's choices", _set_attr(("stop_reason_",), "bogus"), r"stop_reason_: 'bogus' is not one of"),
    ("sparse-svr", "a scalar's dimension", lambda h, m: _set(h, ("attributes", "n_basis_"), h["attributes"]["n_basis_"] + 1),
     r"basis_indices_: n_basis is \d+ here but \d+ in n_basis_"),
    # kernels
    ("cvdd", "a kernel's fields", _set_attr(("kernel_spec_",), {"name": "rbf"}), r"kernel_spec_: malformed kernel"),
    ("cvdd", "a positive gamma", _set_attr(("kernel_spec_", "gamma"), 0.0),
     r"kernel_spec_: invalid kernel parameters gamma=0\.0"),
    ("cvdd", "a degree >= 1", _set_attr(("kernel_spec_", "degree"), 0), r"kernel_spec_\.degree: 0 is below 1"),
    ("cvdd", "a degree <= 10000", _set_attr(("kernel_spec_", "degree"), 10_001),
     r"kernel_spec_: invalid kernel parameters gamma=\S+, degree=10001"),
    ("cvm-csr-str", "poly's coef0 >= 0", _set_attr(("kernel_spec_", "coef0"), -1.0),
     r"kernel_spec_\.coef0: -1\.0 is below 0\.0"),
    ("cvdd", "normalize", _set_attr(("kernel_spec_", "normalize"), "yes"), r"kernel_spec_\.normalize: expected true or false"),
    ("cvdd", "the parameter kernel", _set_attr(("kernel_spec_", "name"), "linear"),
     r"the fitted kernel 'linear' is not the parameter kernel='rbf'"),
    # CSR support vectors
    ("cvdd", "dense or CSR", _set_attr(("support_vectors_",), {"coo": 1}), r"support_vectors_: expected a dense or CSR matrix"),
    ("cvm-csr-str", "the CSR container", _set_attr(("support_vectors_", "csr", "container"), "coo_matrix"),
     r"support_vectors_: malformed CSR description"),
    ("cvm-csr-str", "the CSR shape", _set_attr(("support_vectors_", "csr", "shape"), [3, -1]),
     r"support_vectors_: malformed CSR description"),
    ("cvm-csr-str", "the CSR width", lambda h, m: _set(h, ("attributes", "support_vectors_", "csr", "shape", 1), 7),
     r"support_vectors_: n_features is 7 here but 3 in the header"),
    ("cvm-csr-str", "indptr's end", _csr("indptr", lambda a: np.r_[a[:-1], a[-1] - 1]),
     r"support_vectors_: row offsets \(indptr\) out of order or bounds"),
    ("cvm-csr-str", "indptr's order", _csr("indptr", lambda a: np.r_[a[:1], a[2:3], a[1:2], a[3:]]),
     r"support_vectors_: row offsets \(indptr\) out of order or bounds"),
    ("cvm-csr-str", "indptr's start", _csr("indptr", lambda a: a + 1),
     r"support_vectors_: row offsets \(indptr\) out of order or bounds"),
    ("cvm-csr-str", "a column index", _csr("indices", lambda a: np.where(np.arange(len(a)) == 0, 3, a).astype(a.dtype)),
     r"support_vectors_: a column index out of bounds"),
    # lists, alternatives, structures, histories
    ("mmda", "a list", _set_attr(("expansion_index_",), {}), r"expansion_index_: expected a list"),
    ("surface", "a list's length", lambda h, m: h["attributes"]["bounds_"].append(h["attributes"]["bounds_"][0]),
     r"bounds_: 3 items where 2 are expected"),
    ("mmda", "lists of one length", _rename_list("expansion_index_", 2),
     r"expansion_vectors_: n_problems is 3 here but 2 in expansion_index_"),
    ("cvm-ovo-proba", "an alternative", _set_attr(("n_iter_", "either"), 5), r"n_iter_: malformed alternative"),
    ("cvm-ovo-proba", "an alternative's index", _set_attr(("n_iter_", "either"), True), r"n_iter_: malformed alternative"),
    ("surface", "a structure's fields", lambda h, m: h["attributes"]["levels_"][0].pop("C"),
     r"levels_\[0\]: expected the fields"),
    ("cvr", "a history", _set_attr(("history_",), []), r"history_: expected a dict"),
    ("cvr", "a history's lengths", _history_short, r"history_: lists of different lengths"),
    # across attributes
    ("cvm-binary", "the class pairs", _set_attr(("pairs_",), [[1, 0]]), r"pairs_: the class pairs must be"),
    ("cvm-binary", "probabilities per pair", lambda h, m: (m.__setitem__("probA_.npy", _npy(np.zeros(2))),
                                                          m.__setitem__("probB_.npy", _npy(np.zeros(2)))),
     r"probA_/probB_ must hold one value per pair, or none \(none only without probability=True\)"),
    ("cvm-binary", "probabilities with probability=True", lambda h, m: _set(h, ("params", "probability"), True),
     r"probA_/probB_ must hold one value per pair, or none \(none only without probability=True\)"),
    ("mmda", "the components' columns", _one_more_column,
     r"the expansion coefficients' columns must add up to n_components_"),
    ("cvm-binary", "feature names", lambda h, m: (_set(h, ("attributes", "feature_names_in_"), {"array": "fn"}),
                                                 m.__setitem__("fn.npy", _npy(np.array(["a", "b", "c", "d"])))),
     r"feature_names_in_: n_features is 4 here but 3 in the header"),
    ("cvm-binary", "the attributes", lambda h, m: h["attributes"].pop("rho_"), r"do not match its declaration \(unknown \[\], missing \['rho_'\]\)"),
    ("cvm-binary", "an attributes dict", lambda h, m: _set(h, ("attributes",), []), r"malformed attributes"),
    ("cvm-binary", "no other member", _member("extra.npy", _npy(np.zeros(1))), r"unexpected member\(s\) \['extra\.npy'\]"),
    # the header
    ("cvm-binary", "the format", lambda h, m: _set(h, ("format",), "other"),
     r"is not a corevector model file \(no 'corevector-model' header\)"),
    ("cvm-binary", "the version's type", lambda h, m: _set(h, ("version",), "3"), r"invalid model format version '3'"),
    ("cvm-binary", "a newer version", lambda h, m: _set(h, ("version",), 99), r"model format version 99\); .*upgrade corevector"),
    ("cvm-binary", "a version in a ZIP", lambda h, m: _set(h, ("version",), 1), r"model format version 1 in a ZIP file"),
    ("cvm-binary", "the header's fields", lambda h, m: _set(h, ("extra",), 1), r"the header's fields are not those of format version 3"),
    ("cvm-binary", "the feature count", lambda h, m: _set(h, ("n_features",), -1), r"invalid feature count -1"),
    ("cvm-binary", "the feature names", lambda h, m: _set(h, ("feature_names",), ["a"]), r"feature_names must be null or 3 strings"),
    ("cvm-binary", "the target name", lambda h, m: _set(h, ("target_name",), 5), r"target_name must be null or a string"),
    ("cvm-binary", "the data format", lambda h, m: _set(h, ("data_format",), "xml"), r"unknown data_format"),
    ("cvm-binary", "the params", lambda h, m: _set(h, ("params",), []), r"malformed params"),
    ("cvm-binary", "a parameter value", lambda h, m: _set(h, ("params", "C"), {"set": [1]}),
     r"invalid parameters of CVMClassifier \(malformed parameter value\)"),
    ("cvm-binary", "a parameter's depth", lambda h, m: _set(h, ("params", "C"), _deep(20)),
     r"invalid parameters of CVMClassifier \(nested too deeply\)"),
    ("cvm-binary", "a parameter dict's keys", lambda h, m: _set(h, ("params", "class_weight"), {"dict": [[[1], 2.0]]}),
     r"invalid parameters of CVMClassifier \(a dict key must be a number or a string\)"),
]


def _write_zip(path, header, members, compress=()):
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            data = json.dumps(header).encode() if n == "header.json" else d
            zf.writestr(zipfile.ZipInfo(n), data, compress_type=zipfile.ZIP_DEFLATED if n in compress else None)


@pytest.mark.parametrize("case, what, edit, words", READER_ROWS, ids=[f"{r[0]}: {r[1]}" for r in READER_ROWS])
def test_every_check_of_the_reader_refuses_its_file(fitted, tmp_path, case, what, edit, words):
    """Each check of the reader beyond the declared arrays' (those: the table above) refuses a file that
    breaks it, in one line naming the file and what is wrong."""
    est, *_ = fitted[case, "fast"]
    save_model(est, tmp_path / "good.cvm")
    with zipfile.ZipFile(tmp_path / "good.cvm") as zf:
        header = json.loads(zf.read("header.json"))
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    edit(header, members)
    bad = tmp_path / "bad.cvm"
    _write_zip(bad, header, members)
    with pytest.raises(ModelFileError) as exc:
        load_model(bad)
    text = str(exc.value)
    assert re.match(re.escape(f"{bad}") + r"(: | )", text) and re.search(words, text) and "\n" not in text, text


def test_every_check_of_the_zip_container_refuses_its_file(fitted, tmp_path, monkeypatch):
    """The container's checks: members, their compression and sizes, the header member's presence, size,
    nesting and JSON; a directory; a damaged ZIP."""
    from corevector.io import model_files
    est, *_ = fitted["cvdd", "fast"]
    good = tmp_path / "good.cvm"
    save_model(est, good)
    with zipfile.ZipFile(good) as zf:
        header = json.loads(zf.read("header.json"))
        members = {i.filename: zf.read(i) for i in zf.infolist()}

    def refused(path, words):
        with pytest.raises(ModelFileError) as exc:
            load_model(path)
        assert str(path) in str(exc.value) and re.search(words, str(exc.value)) and "\n" not in str(exc.value), exc.value

    bad = tmp_path / "bad.cvm"
    _write_zip(bad, header, members, compress={"intercept_.npy"})
    refused(bad, r"member 'intercept_\.npy' is compressed or encrypted")
    _write_zip(bad, header, {k: v for k, v in members.items() if k != "header.json"})
    refused(bad, r"is not a corevector model file \(no header\.json\)")
    with zipfile.ZipFile(bad, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr("header.json", json.dumps(header))
        zf.writestr("header.json", json.dumps(header))
    refused(bad, r"member 'header\.json' appears twice")
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("header.json", "[" * 100_000 + "]" * 100_000)
    refused(bad, r"header\.json is nested too deeply")
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("header.json", '{"format": NaN}')
    refused(bad, r"damaged header\.json \(NaN is not JSON\)")
    # a member's size in the central directory larger than the file
    raw = bytearray(good.read_bytes())
    cd = raw.index(b"PK\x01\x02")
    raw[cd + 20:cd + 28] = (10**9).to_bytes(4, "little") * 2  # compressed and uncompressed sizes
    bad.write_bytes(bytes(raw))
    refused(bad, r"member 'header\.json' declares 1000000000 bytes, more than the file holds")
    bad.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    refused(bad, r"is not a corevector model file or is damaged")
    refused(tmp_path, r"not a regular file")
    (tmp_path / "notes.txt").write_text("a text file\n")
    refused(tmp_path / "notes.txt", r"is not a corevector model file \(models are written by 'corevector fit'")
    unreadable = tmp_path / "unreadable.cvm"  # (root reads any file: Linux's /proc/self/mem fails to read at 0)
    if os.geteuid() != 0:
        unreadable.write_bytes(good.read_bytes())
        unreadable.chmod(0)
    elif os.path.isfile("/proc/self/mem"):
        unreadable = "/proc/self/mem"
    refused(unreadable, r"^cannot read .*: (Permission denied|Input/output error)$")
    monkeypatch.setattr(model_files, "MAX_MEMBERS", 3)
    refused(good, rf"{len(members)} members \(at most 3\)")
    monkeypatch.setattr(model_files, "MAX_MEMBERS", 100_000)
    monkeypatch.setattr(model_files, "MAX_HEADER_BYTES", 100)
    refused(good, r"header\.json of \d+ bytes \(at most 100\)")


def test_a_time_that_cannot_be_left_out_is_a_declaration_error():
    """Timing reads a time left out (null) as NaN of its declared shape; a declaration whose shape is not known
    by then, or not a float, cannot be read without its values (a check of the declarations themselves)."""
    r = ms.Reader("m.cvm", None, {}, 0)
    assert np.isnan(ms.Timing(ms.Scalar(float)).load(None, r, "t"))
    r.dims["n"] = 2
    assert np.isnan(ms.Timing(ms.Array("f", ("n",))).load(None, r, "t")).all()
    for spec in (ms.Timing(ms.Array("f", ("unbound",))), ms.Timing(ms.Scalar(int)), ms.Timing(ms.Array("i", (2,)))):
        with pytest.raises(ModelFileError, match=r"^m\.cvm: t: a time that cannot be left out$"):
            spec.load(None, r, "t")
