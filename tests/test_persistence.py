"""Model files (issue 26): every estimator round-trips bit for bit in both implementations, nothing in a file
is ever executed, and a file that breaks its class's declaration is refused in one line naming it."""
import io
import json
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
    (None, ("support_vectors_.npy", np.zeros((3, 7))), "support_vectors_: n_features is 7 here but 2 elsewhere"),
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
