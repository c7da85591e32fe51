"""Every reader a user feeds a file to, fuzzed (issue 26): LIBSVM and CSV data, PLY, XYZ, OFF and OBJ point
clouds and meshes, corevector model files and LIBSVM model files.

Each target runs ``FUZZ_EXAMPLES`` (2,000) hypothesis examples in the default suite -- 20,000 under the
``slow`` marker (``FUZZ_EXAMPLES_SLOW``) -- on grammar-generated files whose validity is known by
construction (LIBSVM, CSV, XYZ: the result must equal the expected one, or the error must name the first
bad line) and on valid files mutated (truncated, bit-flipped, spliced, numbers replaced by huge, negative or
non-finite ones).  The property: a correct result, or a ``ValueError`` of one line that names the file;
never another exception (a crash), never a hang (pytest-timeout).  ``test_hostile_files_stay_in_memory``
reads the worst cases (a 2 GB single line, huge declared counts and shapes, a gzip bomb) in a process whose
address space is limited to 256 MB beyond the interpreter.
"""
import gzip
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from corevector import CVMClassifier, SparseSVR, load_libsvm_model, load_model, save_libsvm_model, save_model
from refimpl.datasets import load_csv, load_libsvm
from refimpl.mesh_io import read_mesh, read_points, write_mesh, write_ply

#: examples per fuzz target: 2,000 in the default suite (COREVECTOR_FUZZ_EXAMPLES overrides it), 20,000 in
#: the slow test that reruns them
FUZZ_EXAMPLES = int(os.environ.get("COREVECTOR_FUZZ_EXAMPLES", "2000"))
FUZZ_EXAMPLES_SLOW = 20000
_FOLDER = tempfile.mkdtemp(prefix="cv-fuzz-")


def _fuzz(n):
    return settings(max_examples=n, deadline=None, derandomize=False, database=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


def _write(name, data):
    path = os.path.join(_FOLDER, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _one_line_error(exc, path):
    text = str(exc)
    assert "\n" not in text and path in text, text
    return text


# ------------------------------------------------------------------------------------------------ mutations
_SEED = st.integers(0, 2**63 - 1)
_NUMBERS = [b"4294967296", b"-1", b"99999999999999999999", b"nan", b"inf", b"1e308", b"-0", b"0", b" ", b"\n",
            b"\r\n", b"\xff\xfe", b"\x00"]


def mutated(seeds):
    """One of ``seeds`` (bytes) with one to four random edits: truncation, a flipped bit, inserted, deleted or
    duplicated bytes, a number (huge, negative, non-finite) or a line break spliced in.  Drawn from one
    hypothesis integer (a seed): structure from a strategy would cost ~100 draws an example."""
    def build(seed):
        rng = random.Random(seed)
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.choice(["truncate", "flip", "insert", "number", "delete", "dup"])
            pos = rng.randint(0, max(len(data) - 1, 0))
            if op == "truncate":
                del data[pos:]
            elif op == "flip" and data:
                data[pos] ^= 1 << rng.randint(0, 7)
            elif op == "insert":
                data[pos:pos] = rng.randbytes(rng.randint(1, 8))
            elif op == "delete":
                del data[pos:pos + rng.randint(1, 16)]
            elif op == "dup":
                data[pos:pos] = data[pos:pos + rng.randint(1, 64)]
            else:
                data[pos:pos] = rng.choice(_NUMBERS)
        return bytes(data)
    return _SEED.map(build)


# ------------------------------------------------------------------------------------------------ LIBSVM data
def _libsvm_file(seed):
    """(bytes, expected rows [(label, {index: value})], or the number of the first bad line, or 'empty'):
    a LIBSVM file of a few lines whose validity is known by construction."""
    rng = random.Random(seed)
    lines, rows, bad = [], [], None
    for lineno in range(1, rng.randint(1, 6) + 1):
        kind = rng.choice(["data", "data", "data", "blank", "comment"])
        if kind == "blank":
            lines.append(rng.choice([b"", b"  ", b"\t"]))
            continue
        if kind == "comment":
            lines.append(b"# " + rng.randbytes(rng.randint(0, 10)).replace(b"\n", b"").replace(b"\r", b""))
            continue
        ok = True
        label = round(rng.uniform(-1e6, 1e6), 3)
        tokens = [rng.choice([repr(label), "%g" % label, "%+.3f" % label]).encode()]
        if rng.randint(0, 9) == 0:
            tokens[0] = rng.choice([b"nan", b"inf", b"abc", b"1_0", b"0x1"])
            ok = False
        idx = sorted({rng.choice([rng.randint(1, 20), rng.randint(1, 2**31 - 1)]) for _ in range(rng.randint(0, 4))})
        feats = {}
        for j in idx:
            v = rng.choice([rng.uniform(-1e3, 1e3), float(rng.randint(-5, 5)), rng.uniform(-1, 1) * 1e-300])
            tokens.append(b"%d:%s" % (j, repr(v).encode()))
            feats[j] = v
        if rng.randint(0, 5) == 0:
            tokens.insert(rng.randint(1, len(tokens)),
                          rng.choice([b"0:1", b"2147483648:1", b"-3:1", b"1:nan", b"1:inf", b"1:x", b"a:b", b"1:2:3",
                                      b"5", b"1_0:1", b"1:1e999", b"99999999999999999999:1"]))
            ok = False
        if rng.randint(0, 7) == 0 and len(idx) >= 2:
            tokens[1], tokens[2] = tokens[2], tokens[1]  # decreasing indices
            ok = False
        if rng.random() < 0.3:
            tokens.insert(1, b"qid:%d" % rng.randint(0, 99))
        line = rng.choice([b" ", b"\t", b"  "]).join(tokens) + rng.choice([b"", b" ", b" # tail"])
        lines.append(line)
        if not ok and bad is None:
            bad = lineno
        rows.append((float(tokens[0]) if ok else None, feats))
    end = rng.choice([b"\n", b"\r\n"])
    data = end.join(lines) + rng.choice([end, b""])
    if bad is not None:
        return data, bad
    return data, (rows if rows else "empty")


libsvm_files = _SEED.map(_libsvm_file)


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(case=libsvm_files, gz=st.booleans())
def test_fuzz_libsvm_reader(case, gz):
    data, expected = case
    path = _write("f.libsvm", gzip.compress(data, mtime=0) if gz else data)
    try:
        X, y = load_libsvm(path)
    except ValueError as exc:
        text = _one_line_error(exc, path)
        if expected == "empty":
            assert "no samples" in text or "is empty" in text
        else:
            assert isinstance(expected, int) and f"line {expected}:" in text, (text, expected)
        return
    assert isinstance(expected, list), expected
    assert X.format == "csr" and X.shape[0] == len(expected) and np.array_equal(y, [r[0] for r in expected])
    top = max([max(f) for _, f in expected if f] or [0])
    assert X.shape[1] == top
    for i, (_, feats) in enumerate(expected):
        row = X.getrow(i)
        assert dict(zip((row.indices + 1).tolist(), row.data.tolist())) == feats


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(data=mutated([b"1 1:0.5 3:2\n-1 2:1.5 # c\n\n+1 qid:3 1:1 4:-2\n", b"0.25 7:1e-3\n", b"1 1:0.5 2000000000:1\n"]))
def test_fuzz_libsvm_reader_mutated(data):
    path = _write("m.libsvm", data)
    try:
        X, y = load_libsvm(path)
    except ValueError as exc:
        _one_line_error(exc, path)
        return
    assert X.shape[0] == len(y) > 0 and np.all(np.isfinite(X.data)) and np.all(np.isfinite(y))
    assert X.nnz == 0 or (X.indices.min() >= 0 and X.indices.max() < X.shape[1] <= 2**31 - 1)


# ------------------------------------------------------------------------------------------------ CSV
def _csv_file(seed):
    """(bytes, expected rows [(features, target)] or the first bad line or 'empty', header): numeric features,
    the last column a target of numbers or words."""
    rng = random.Random(seed)
    k = rng.randint(1, 3)
    header = rng.random() < 0.5
    lines, rows, bad = [], [], None
    lineno = 0
    if header:
        lines.append(",".join("".join(rng.choice("abcxyz") for _ in range(rng.randint(1, 4)))
                              for _ in range(k + 1)).encode())
        lineno = 1
    for _ in range(rng.randint(1, 5)):
        kind = rng.choice(["row", "row", "row", "blank", "comment"])
        lineno += 1
        if kind == "blank":
            lines.append(b"")
            continue
        if kind == "comment":
            lines.append(b"# note, with a comma")
            continue
        vals = [rng.choice([rng.uniform(-1e6, 1e6), float(rng.randint(-9, 9))]) for _ in range(k)]
        target = rng.choice(["1", "-1", "2.5", "cat", "dog"])
        fields = [repr(v) for v in vals] + [target]
        ok = True
        if rng.randint(0, 7) == 0:
            fields[rng.randint(0, k - 1)] = rng.choice(["", "NA", "x", "inf", "nan", "1_0"])
            ok = False
        lines.append(",".join(rng.choice([f, f" {f} "]) for f in fields).encode())
        if not ok and bad is None:
            bad = lineno
        rows.append((vals, target))
    data = b"\n".join(lines) + b"\n"
    if bad is not None:
        return data, bad, header
    return data, (rows if rows else "empty"), header


csv_files = _SEED.map(_csv_file)


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(case=csv_files, gz=st.booleans())
def test_fuzz_csv_reader(case, gz):
    data, expected, header = case
    path = _write("f.csv", gzip.compress(data, mtime=0) if gz else data)
    try:
        X, y = load_csv(path, skip_header=header)
    except ValueError as exc:
        text = _one_line_error(exc, path)
        if expected == "empty":
            assert "no data rows" in text or "is empty" in text
        else:
            # a first row with too many columns is the reference width: the error is then on a later line
            assert isinstance(expected, int) and ("line" in text), (text, expected)
            assert f"line {expected}" in text or "columns" in text, (text, expected)
        return
    assert isinstance(expected, list), (expected, X)
    assert np.array_equal(X, [r[0] for r in expected])
    targets = [r[1] for r in expected]
    if all(t in ("1", "-1") for t in targets):
        assert y.dtype.kind == "i" and np.array_equal(y, [int(t) for t in targets])
    elif all(t in ("1", "-1", "2.5") for t in targets):
        assert y.dtype.kind == "f" and np.array_equal(y, [float(t) for t in targets])
    else:
        assert list(y) == targets


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(data=mutated([b"x1,x2,label\n1.5,2,cat\n3,-4e2,dog\n", b"1,2,3\n4,5,6\n", b'"a","b"\n1,"2"\n']))
def test_fuzz_csv_reader_mutated(data):
    path = _write("m.csv", data)
    try:
        X, y = load_csv(path)
    except ValueError as exc:
        _one_line_error(exc, path)
        return
    assert X.ndim == 2 and X.shape[0] == len(y) > 0 and np.all(np.isfinite(X))


# ------------------------------------------------------------------------------------------------ meshes
def _mesh_seeds():
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.5]])
    faces = np.array([[0, 1, 2], [0, 1, 3], [1, 2, 3]])
    seeds = {}
    for ext, kw in ((".ply", {"binary": True}), ("-a.ply", {"binary": False}), (".obj", {})):
        p = os.path.join(_FOLDER, "seed" + ext)
        if ext.endswith(".ply"):
            write_ply(p, verts, faces, **kw)
        else:
            write_mesh(p, verts, faces)
        with open(p, "rb") as f:
            seeds[ext] = f.read()
    seeds[".off"] = b"OFF\n4 3 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1.5\n3 0 1 2\n3 0 1 3\n4 1 2 3 0\n"
    seeds[".xyz"] = b"0 0 0\n1 0 0 # c\n0 1 0\n\n0 0 1.5\n"
    return seeds


_SEEDS = _mesh_seeds()


def _check_mesh_read(path, reader):
    try:
        out = reader(path)
    except ValueError as exc:
        _one_line_error(exc, path)
        return
    verts, faces = out if isinstance(out, tuple) else (out, None)
    assert verts.ndim == 2 and verts.shape[1] == 3 and verts.dtype == np.float64 and np.all(np.isfinite(verts))
    if faces is not None:
        assert faces.ndim == 2 and faces.shape[1] == 3 and faces.dtype == np.int64
        assert faces.size == 0 or (faces.min() >= 0 and faces.max() < len(verts))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("ext", [".ply", "-a.ply", ".obj", ".off", ".xyz"])
def test_fuzz_mesh_readers(ext):
    """PLY (binary, ascii), OBJ, OFF, XYZ: read_points and read_mesh on mutated files."""
    suffix = ".ply" if ext.endswith(".ply") else ext
    readers = [read_points] + ([read_mesh] if suffix != ".xyz" else [])

    @_fuzz(FUZZ_EXAMPLES)
    @given(data=mutated([_SEEDS[ext]]))
    def run(data):
        path = _write("m" + suffix, data)
        for reader in readers:
            _check_mesh_read(path, reader)

    run()


def _xyz_file(seed):
    rng = random.Random(seed)
    lines, pts, bad, width = [], [], None, None
    for lineno in range(1, rng.randint(1, 6) + 1):
        if rng.randint(0, 4) == 0:
            lines.append(rng.choice(["", "# c", "  "]))
            continue
        n = rng.randint(3, 5) if width is None else width
        vals = [rng.uniform(-1e5, 1e5) for _ in range(n)]
        toks = [repr(v) for v in vals]
        ok = True
        if rng.randint(0, 6) == 0:
            toks[rng.randint(0, n - 1)] = rng.choice(["nan", "inf", "x", "1_0"])
            ok = False
        if rng.randint(0, 8) == 0:
            toks = toks[:2]
            ok = False
        width = width or n
        lines.append(" ".join(toks))
        if not ok and bad is None:
            bad = lineno
        pts.append(vals[:3])
    return "\n".join(lines).encode() + b"\n", (bad if bad is not None else pts)


xyz_files = _SEED.map(_xyz_file)


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(case=xyz_files)
def test_fuzz_xyz_reader(case):
    data, expected = case
    path = _write("g.xyz", data)
    try:
        P = read_points(path)
    except ValueError as exc:
        text = _one_line_error(exc, path)
        assert isinstance(expected, int) and f"line {expected}" in text, (text, expected)
        return
    assert isinstance(expected, list) and np.array_equal(P, np.array(expected).reshape(-1, 3))


# ------------------------------------------------------------------------------------------------ model files
def _small_models():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    models = {}
    for name, est in (("svr", SparseSVR(n_basis=4, random_state=0).fit(X, X[:, 0])),
                      ("cvm", CVMClassifier(random_state=0, C=10).fit(X, y))):
        p = os.path.join(_FOLDER, f"seed-{name}.cvm")
        save_model(est, p)
        with open(p, "rb") as f:
            models[name] = (f.read(), est)
    lib = os.path.join(_FOLDER, "seed.libsvm-model")
    save_libsvm_model(models["cvm"][1], lib)
    with open(lib, "rb") as f:
        return X, models, f.read()


_MX, _MODELS, _LIBSVM_MODEL = _small_models()


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(data=mutated([m[0] for m in _MODELS.values()]))
def test_fuzz_model_files_bytes(data):
    """A damaged model file is refused, or (a change the format does not cover: a timestamp, padding) loads
    as the very model it was."""
    path = _write("m.cvm", data)
    try:
        est = load_model(path)
    except ValueError as exc:
        _one_line_error(exc, path)
        return
    original = next(e for b, e in _MODELS.values() if type(e) is type(est))
    assert np.array_equal(est.predict(_MX), original.predict(_MX))


def _random_json(rng, depth=0):
    kind = rng.randint(0, 9 if depth < 2 else 6)
    if kind == 8:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == 9:
        return {rng.choice(["a", "array", "csr", "float", "tuple"]): _random_json(rng, depth + 1)}
    return [None, True, rng.randint(-2**70, 2**70), rng.choice([0.5, -1e308, 1e-320, 3.0]),
            "".join(rng.choice("ab_-.0") for _ in range(rng.randint(0, 5))), {"array": "coef_"},
            {"float": rng.choice(["nan", "inf", "x"])}, rng.randint(-3, 3)][kind]


def _mutated_header(seed):
    """A model file whose header.json has one value replaced (at a random path) by arbitrary JSON, or
    removed; the members' checksums are recomputed, so only the reader's own checks stand between it and
    the model."""
    rng = random.Random(seed)
    with zipfile.ZipFile(io.BytesIO(_MODELS[rng.choice(sorted(_MODELS))][0])) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    header = json.loads(members["header.json"])
    node, key = header, None
    for _ in range(rng.randint(1, 4)):
        keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys:
            break
        key = rng.choice(keys)
        if rng.random() < 0.5 or not isinstance(node[key], (dict, list)) or not node[key]:
            break
        node, key = node[key], None
    if key is not None:
        if rng.randint(0, 4) == 0 and isinstance(node, dict):
            del node[key]
        else:
            node[key] = _random_json(rng)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, json.dumps(header) if n == "header.json" else d)
    return buf.getvalue()


mutated_headers = _SEED.map(_mutated_header)


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(data=mutated_headers)
def test_fuzz_model_files_headers(data):
    """Any JSON in any place of the header: refused in one line, or an estimator that predicts."""
    path = _write("h.cvm", data)
    try:
        est = load_model(path)
    except ValueError as exc:
        _one_line_error(exc, path)
        return
    pred = est.predict(_MX)
    assert pred.shape == (len(_MX),)


@pytest.mark.timeout(600)
@_fuzz(FUZZ_EXAMPLES)
@given(data=mutated([_LIBSVM_MODEL]))
def test_fuzz_libsvm_model_files(data):
    path = _write("m.libsvm-model", data)
    try:
        est = load_libsvm_model(path)
    except ValueError as exc:
        _one_line_error(exc, path)
        return
    X = np.zeros((3, est.n_features_in_))
    assert est.predict(X).shape == (3,)


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_fuzz_everything_longer():
    """Every target above with FUZZ_EXAMPLES_SLOW examples (bash run.sh report --full runs the slow tests)."""
    env = {**os.environ, "COREVECTOR_FUZZ_EXAMPLES": str(FUZZ_EXAMPLES_SLOW)}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-k", "fuzz", __file__,
                          "-p", "no:cacheprovider"], capture_output=True, text=True, env=env, timeout=7000)
    assert res.returncode == 0, res.stdout[-3000:]


# ------------------------------------------------------------------------------------------------ memory
_HOSTILE = textwrap.dedent("""
    import json, resource, sys
    import numpy as np, scipy.linalg
    from corevector import load_model, load_libsvm_model
    from refimpl.datasets import load_csv, load_libsvm
    from refimpl.mesh_io import read_mesh, read_points
    a = np.random.default_rng(0).random((64, 64)) + 64 * np.eye(64)
    scipy.linalg.cho_factor(a @ a.T); np.linalg.cholesky(a @ a.T)  # start OpenBLAS before the limit

    def vm_size():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))

    resource.setrlimit(resource.RLIMIT_AS, (vm_size() + int(sys.argv[1]) * 2**20, resource.RLIM_INFINITY))
    readers = {"libsvm": load_libsvm, "csv": load_csv, "points": read_points, "mesh": read_mesh,
               "model": load_model, "libsvm_model": load_libsvm_model}
    for reader, path in json.loads(sys.argv[2]):
        try:
            readers[reader](path)
            print(json.dumps([path, "ok", ""]), flush=True)
        except ValueError as exc:
            print(json.dumps([path, "ValueError", str(exc)]), flush=True)
        except BaseException as exc:
            print(json.dumps([path, type(exc).__name__, str(exc)]), flush=True)
""")


def test_hostile_files_stay_in_memory(tmp_path):
    """The stated bound: every reader reads any of these files within 256 MB beyond the interpreter
    (RLIMIT_AS), with a one-line ValueError naming the file: a 2 GB single line (a sparse file: no disk
    used) in every text format, huge declared counts and shapes, a gzip bomb, a ZIP whose member claims
    more than the file holds."""
    cases = []

    def line_2gb(name, head=b""):
        p = tmp_path / name
        with open(p, "wb") as f:
            f.write(head)
            f.truncate(2**31)  # 2 GB of zero bytes on one line, in a sparse file
        return str(p)

    for reader, name, head in (("libsvm", "big.libsvm", b"1 1:"), ("csv", "big.csv", b"1,2,"),
                               ("points", "big.xyz", b"1 2 "), ("points", "big.off", b"OFF\n"),
                               ("points", "big.obj", b"v 1 2 "), ("points", "big.ply", b"ply\n"),
                               ("points", "bigascii.ply", b"ply\nformat ascii 1.0\nelement vertex 1\nproperty "
                                                          b"float x\nproperty float y\nproperty float z\n"
                                                          b"end_header\n"),
                               ("libsvm_model", "big.model", b"svm_type c_svc\nkernel_type rbf\n")):
        cases.append((reader, line_2gb(name, head)))
    p = tmp_path / "count.ply"
    p.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 4000000000\nproperty float x\n"
                  b"property float y\nproperty float z\nend_header\n" + b"\0" * 24)
    cases.append(("points", str(p)))
    p = tmp_path / "count.off"
    p.write_bytes(b"OFF\n2147483647 2147483647 0\n0 0 0\n")
    cases.append(("mesh", str(p)))
    p = tmp_path / "bomb.libsvm"
    p.write_bytes(gzip.compress(b"\0" * (100 << 20), compresslevel=1))
    cases.append(("libsvm", str(p)))
    p = tmp_path / "bomb.csv"
    p.write_bytes(gzip.compress(b"1," * (50 << 20), compresslevel=1))
    cases.append(("csv", str(p)))
    # a model whose array member declares a 10^12-entry shape, and one whose ZIP entry claims 4 GB
    seed, _ = _MODELS["svr"]
    with zipfile.ZipFile(io.BytesIO(seed)) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    npy = members["coef_.npy"]
    members["coef_.npy"] = npy.replace(b"'shape': (4,)", b"'shape': (1000000000000,)")
    p = tmp_path / "shape.cvm"
    with zipfile.ZipFile(p, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    cases.append(("model", str(p)))
    raw = bytearray(seed)
    cd = raw.rfind(b"PK\x01\x02")
    raw[cd + 24:cd + 28] = (2**32 - 1).to_bytes(4, "little")  # the last entry's uncompressed size
    p = tmp_path / "claims.cvm"
    p.write_bytes(bytes(raw))
    cases.append(("model", str(p)))
    nested = tmp_path / "nested.cvm"
    with zipfile.ZipFile(nested, "w") as zf:
        zf.writestr("header.json", "[" * 100000 + "]" * 100000)
    cases.append(("model", str(nested)))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", _HOSTILE, "256", json.dumps(cases)], capture_output=True,
                         text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    results = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(results) == len(cases)
    for path, kind, message in results:
        assert kind == "ValueError", (path, kind, message)
        assert "\n" not in message and path in message, message


# ------------------------------------------------------------------------------------------------ issue 27, item 7
@pytest.mark.parametrize("name, kw", [("m.ply", {}), ("m-ascii.ply", {"binary": False}), ("m.obj", {})])
def test_read_points_reads_every_format_write_mesh_writes(tmp_path, name, kw):
    """read_points refused the .obj files write_mesh writes."""
    verts = np.random.default_rng(0).normal(size=(10, 3))
    faces = np.array([[0, 1, 2], [2, 3, 4], [5, 6, 9]])
    path = tmp_path / name
    write_mesh(path, verts, faces, **kw)
    exact = name.endswith(".obj")  # OBJ holds float64 exactly, PLY float32
    expected = verts if exact else verts.astype(np.float32).astype(np.float64)
    assert np.array_equal(read_points(path), expected)
    v, f = read_mesh(path)
    assert np.array_equal(v, expected) and np.array_equal(f, faces)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("reader", [read_points, read_mesh])
def test_a_signalling_nan_in_a_binary_ply_is_a_one_line_error(tmp_path, reader):
    """Found by the fuzzer: a float32 signalling NaN (0x7f800001) raised NumPy's RuntimeWarning in the cast
    to float64 before the reader's own check of the coordinates could name the vertex."""
    path = tmp_path / "snan.ply"
    write_ply(path, np.eye(3), np.array([[0, 1, 2]]), binary=True)
    data = bytearray(path.read_bytes())
    start = data.index(b"end_header\n") + len(b"end_header\n")
    data[start + 4:start + 8] = np.array([0x7F800001], dtype="<u4").tobytes()  # vertex 0's y
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"snan\.ply: non-finite coordinates \(vertex 0\)") as exc:
        reader(path)
    _one_line_error(exc.value, str(path))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the levels' own, not the mesh's
def test_an_empty_mesh_warns():
    """surf.mesh(resolution=4) returned an empty mesh silently."""
    from corevector import ImplicitSurface

    P = np.random.default_rng(0).normal(size=(200, 3))
    P /= np.linalg.norm(P, axis=1)[:, None]
    surf = ImplicitSurface(random_state=0).fit(P)
    with pytest.warns(UserWarning, match=r"mesh\(resolution=4\) found no surface.*raise resolution"):
        verts, faces = surf.mesh(resolution=4)
    assert len(faces) == 0
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        verts, faces = surf.mesh(resolution=16)
    assert len(faces) > 0
