"""End-to-end tests of the ``corevector`` command line (corevector/cli/) and the data loaders."""
import ast
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from corevector.cli import command as cli
from corevector.io import files, model_files
from helpers import engines
from refimpl import verify
from refimpl.datasets import checkerboard, load_csv, load_libsvm

REPO = Path(__file__).resolve().parent.parent


def load_model(path):
    """(estimator, header) of a model file."""
    return model_files.load_model(path, return_header=True)
#: True when the corevector under test runs from this checkout (editable install), False for an
#: installed wheel (the CLI tests then run against site-packages, see the README)
FROM_CHECKOUT = Path(cli.__file__).resolve().parents[2] == REPO
needs_checkout = pytest.mark.skipif(not FROM_CHECKOUT, reason="report/bench run only from a source checkout; "
                                    "this corevector is an installed wheel")


def run_cli_subprocess(*args, cwd=None):
    """The installed console entry point's module, as a user runs it (no PYTHONPATH: the package
    must import from the environment alone)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "corevector.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    X, y = checkerboard(600, random_state=1)
    csv = d / "train.csv"
    np.savetxt(csv, np.c_[X, y], delimiter=",", header="x1,x2,label", comments="", fmt="%.17g")
    from sklearn.datasets import dump_svmlight_file
    libsvm = d / "train.libsvm"
    dump_svmlight_file(X, y, str(libsvm), zero_based=False)  # LIBSVM's 1-based indices
    features_only = d / "features.csv"
    np.savetxt(features_only, X[:50], delimiter=",", fmt="%.17g")
    return SimpleNamespace(dir=d, X=X, y=y, csv=csv, libsvm=libsvm, features_only=features_only)


# ------------------------------------------------------------------------------ data sets
def test_checkerboard_labels_follow_cell_parity():
    X, y = checkerboard(5000, random_state=0)
    assert X.shape == (5000, 2) and X.dtype == np.float64
    assert X.min() >= 0 and X.max() < 4
    cells = np.floor(X).astype(int)
    assert np.array_equal(y == 1, (cells.sum(axis=1) % 2) == 0)
    assert set(np.unique(y)) == {-1, 1}
    # all 16 cells are populated and the classes are balanced
    assert len({tuple(c) for c in cells}) == 16
    assert abs(np.mean(y == 1) - 0.5) < 0.05
    X2, y2 = checkerboard(5000, random_state=0)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)


def test_loaders_round_trip(data_files):
    X, y = load_csv(data_files.csv)
    np.testing.assert_allclose(X, data_files.X)
    assert np.array_equal(y, data_files.y) and y.dtype.kind == "i"
    Xl, yl = load_libsvm(data_files.libsvm)
    assert sp.issparse(Xl) and Xl.format == "csr"  # issue 27: LIBSVM data stay sparse
    np.testing.assert_allclose(Xl.toarray(), data_files.X, rtol=1e-12)
    assert np.array_equal(yl, data_files.y)
    # target in the first column
    p = data_files.dir / "first.csv"
    np.savetxt(p, np.c_[data_files.y, data_files.X], delimiter=",", fmt="%.17g")
    X0, y0 = load_csv(p, target=0)
    np.testing.assert_allclose(X0, data_files.X)
    assert np.array_equal(y0, data_files.y)


@pytest.mark.parametrize("content, match", [
    ("1,2,3\n4,x,6\n", "non-numeric"),
    ("1,2,3\n4,5\n", "columns"),
    ("a,b,c\n", "no data rows"),
    ("1,nan,3\n", "line 1, column 2: missing or non-finite value 'nan'"),
])
def test_load_csv_rejects_malformed_files(tmp_path, content, match):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(ValueError, match=match):
        load_csv(p)


def test_loaders_reject_missing_and_empty_files(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        load_csv(tmp_path / "nope.csv")
    (tmp_path / "empty.libsvm").write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_libsvm(tmp_path / "empty.libsvm")
    (tmp_path / "bad.libsvm").write_text("1 2:x\n")
    with pytest.raises(ValueError, match="bad.libsvm line 1: '2:x' is not index:value"):
        load_libsvm(tmp_path / "bad.libsvm")


# ------------------------------------------------------------------------------ verify
def test_verify_tiny_passes_and_prints_table(capsys):
    assert cli.main(["verify", "--tiny", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "0 violation(s)" in out
    for form in verify.FORMULATIONS:
        assert form in out
    assert "fast" in out and "ref" in out


def test_verify_exits_1_and_names_each_violation(monkeypatch, capsys):
    """An engine whose balls are too small (its R^2 halved: r*^2 > (1+eps)^2 R^2) fails verify: exit status 1,
    one VIOLATION line per failing fit naming it and its reason, the count in the last line; the honest
    engine's fits pass beside it."""
    real = cli.get_fit_meb

    def shrinking(impl):
        fit_meb = real(impl)
        if impl != "fast":
            return fit_meb

        def fit(problem, eps, **kwargs):
            res = fit_meb(problem, eps, **kwargs)
            return SimpleNamespace(radius2=res.radius2 / 2, r_cert2=res.r_cert2,
                                   certified_ratio=res.certified_ratio, n_iter=res.n_iter, core_set=res.core_set)
        return fit

    monkeypatch.setattr(cli, "get_fit_meb", shrinking)
    assert cli.main(["verify", "--tiny", "--estimator", "meb", "--no-progress"]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("VIOLATION")]
    n = sum(1 for line in out.splitlines() if re.match(r"\s*meb\s", line) and " fast " in line)
    assert lines and all(re.match(r"VIOLATION meb/\w+ m=\d+ seed=\d+ impl=fast eps=\S+: r\*\^2/R\^2=\S+ > "
                                  r"\(1\+eps\)\^2=", line) for line in lines), lines
    assert re.search(rf"\n(\d+) fits checked, {len(lines)} violation\(s\)", out) and n > 0


def test_an_interrupted_command_exits_130_in_one_line(tmp_path):
    """Ctrl-C (SIGINT) during a long command (verify's full grid): exit status 130 and one line on stderr, no
    traceback."""
    import signal
    import select
    import time
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    # SIGINT at its default and unblocked in the child: an ignored or blocked SIGINT survives exec (a process that
    # started the suite in the background, or a thread of an earlier test's cluster, leaves it so), and Python then
    # installs no KeyboardInterrupt handler: in the fresh-clone run verify went on past the signal for 120 s
    def sigint_default():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    proc = subprocess.Popen([sys.executable, "-m", "corevector.cli", "verify"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, preexec_fn=sigint_default)
    try:
        seen, deadline = b"", time.time() + 120
        while b"verify" not in seen and time.time() < deadline:  # (the progress bar: the grid has started)
            if select.select([proc.stderr], [], [], 1.0)[0]:
                seen += os.read(proc.stderr.fileno(), 4096)
        assert b"verify" in seen, seen
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # (0.3 s here; a loaded CI machine is slower)
    finally:
        proc.kill()
        proc.wait()  # (a Popen left running warns later, inside another test's warning records)
    err = (seen + err).decode()
    assert proc.returncode == 130, err
    assert err.rstrip().endswith("corevector: interrupted") and "Traceback" not in err, err


def test_verify_bounds_hold_against_exact_solver():
    rows = list(verify.verify_cases("tiny", seed=3, engines=engines(), progress=False))
    assert len(rows) == len(verify.FORMULATIONS) * 2 * 2  # formulations x impls x eps
    for r in rows:
        assert r["ok"], r["reason"]
        # exact bracket from cvxopt is tight
        assert r["exact_hi"] - r["exact_lo"] <= 1e-6 * r["exact_hi"]
        assert r["lower_ratio"] <= 1 + 1e-7                 # R^2 <= r*^2
        assert r["upper_ratio"] <= r["bound"] * (1 + 1e-7)  # r*^2 <= (1+eps)^2 R^2
        assert 1 - 1e-7 <= r["certified_ratio"] <= r["bound"] * (1 + 1e-7)


def test_exact_solver_matches_brute_force_on_two_points():
    # two points of an RBF MEB: r*^2 = (1 - k(x1, x2)) / 2
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    spec = make_kernel_spec(X, "rbf", 0.5)
    lo, hi = verify.exact_meb(cvm.svdd_problem(X, spec))
    expected = (1 - np.exp(-0.5)) / 2
    assert abs(lo - expected) < 1e-9 and abs(hi - expected) < 1e-9


def test_check_case_flags_violations():
    case = dict(formulation="meb", kernel="rbf", m=10, seed=0, impl="fast", eps=1e-2)
    good = SimpleNamespace(radius2=0.999, r_cert2=1.001, certified_ratio=1.001 / 0.999, n_iter=3, core_set=[0, 1])
    assert verify.check_case(case, good, 1.0, 1.0)["ok"]
    too_small = SimpleNamespace(radius2=0.9, r_cert2=1.0, certified_ratio=1.0 / 0.9, n_iter=3, core_set=[0, 1])
    r = verify.check_case(case, too_small, 1.0, 1.0)     # r*^2 / R^2 = 1.11 > 1.0201
    assert not r["ok"] and "(1+eps)^2" in r["reason"]
    too_big = SimpleNamespace(radius2=1.1, r_cert2=1.1, certified_ratio=1.0, n_iter=3, core_set=[0, 1])
    assert not verify.check_case(case, too_big, 1.0, 1.0)["ok"]  # R^2 > r*^2


# ------------------------------------------------------------------------------ fit / predict
@pytest.mark.parametrize("fmt", ["csv", "libsvm"])
def test_fit_then_predict(data_files, tmp_path, fmt, capsys):
    path = data_files.csv if fmt == "csv" else data_files.libsvm
    model = tmp_path / "model.pkl"
    rc = cli.main(["fit", str(path), "--model", str(model), "--C", "1e4", "--gamma", "1", "--eps", "1e-6",
                   "--random-state", "0", "--impl", "fast"])
    assert rc == 0 and model.exists()
    est, header = load_model(model)
    assert type(est).__name__ == "CVMClassifier" and est.C == 1e4 and est.gamma == 1.0
    assert est.score(data_files.X, data_files.y) > 0.9
    out = tmp_path / "pred.txt"
    assert cli.main(["predict", str(model), str(path), "--out", str(out)]) == 0
    pred = np.array([int(v) for v in out.read_text().split()])
    assert len(pred) == len(data_files.y) and set(pred) <= {-1, 1}
    assert np.mean(pred == data_files.y) > 0.9
    assert "accuracy" in capsys.readouterr().err


def test_predict_features_only_csv_to_stdout(data_files, tmp_path, capsys):
    model = tmp_path / "m.pkl"
    assert cli.main(["fit", str(data_files.csv), "--model", str(model), "--gamma", "1", "--C", "100"]) == 0
    capsys.readouterr()
    # the model's features are named (x1, x2) and this file has no header row: matched by position on request
    assert cli.main(["predict", str(model), str(data_files.features_only)]) == 1
    assert "has no header row" in one_line_error(capsys)
    assert cli.main(["predict", str(model), str(data_files.features_only), "--by-position"]) == 0
    lines = capsys.readouterr().out.split()
    assert len(lines) == 50 and set(lines) <= {"-1", "1"}


def test_fit_one_class_and_meb_with_full_scans(data_files, tmp_path):
    for est_name, extra in [("cvdd", ["--C", "10"]), ("meb", [])]:
        model = tmp_path / f"{est_name}.pkl"
        rc = cli.main(["fit", str(data_files.csv), "--model", str(model), "--estimator", est_name,
                       "--sample-size", "none", "--eps", "1e-3", *extra])
        assert rc == 0
        est, _ = load_model(model)
        assert est.sample_size is None
        assert est.certified_ratio_ <= (1 + 1e-3) ** 2 * (1 + 1e-9)


@pytest.mark.parametrize("args, message", [
    (["fit", "{dir}/missing.csv", "--model", "{tmp}/m.pkl"], "not found"),
    (["fit", "{dir}/bad.csv", "--model", "{tmp}/m.pkl"], "non-numeric"),
    (["fit", "{dir}/bad.libsvm", "--model", "{tmp}/m.pkl", "--format", "libsvm"], "line 1: label 'garbage'"),
    (["fit", "{csv}", "--model", "{tmp}/m.pkl", "--estimator", "meb", "--C", "2"], "--C does not apply to --estimator meb"),
    (["fit", "{csv}", "--model", "{tmp}/no/such/dir/m.pkl"], "does not exist"),
    (["predict", "{dir}/nope.pkl", "{csv}"], "not found"),
    (["predict", "{csv}", "{csv}"], "not a corevector model"),
])
def test_bad_input_gives_one_line_error(data_files, tmp_path, capsys, args, message):
    (data_files.dir / "bad.csv").write_text("1,2,3\n4,x,6\n")
    (data_files.dir / "bad.libsvm").write_text("garbage here\n")
    args = [a.format(dir=data_files.dir, tmp=tmp_path, csv=data_files.csv) for a in args]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.strip().count("\n") == 0  # one line


def test_predict_rejects_wrong_feature_count(data_files, tmp_path, capsys):
    model = tmp_path / "m.pkl"
    assert cli.main(["fit", str(data_files.csv), "--model", str(model), "--gamma", "1"]) == 0
    wide = tmp_path / "wide.csv"
    np.savetxt(wide, np.ones((5, 7)), delimiter=",")
    capsys.readouterr()
    assert cli.main(["predict", str(model), str(wide), "--by-position"]) == 1
    assert "expects 2 features" in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--C", "-1"], ["--gamma", "foo"], ["--sample-size", "0"],
                                    ["--estimator", "svm"], ["--eps", "nan"]])
def test_bad_option_values_exit_2(data_files, tmp_path, capsys, option):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", str(data_files.csv), "--model", str(tmp_path / "m.pkl"), *option])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err


def test_real_process_errors_have_no_traceback(data_files, tmp_path):
    """The console entry point, as a user runs it: non-zero status, a message, no traceback."""
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,1\n3,oops,2\n")
    res = run_cli_subprocess("fit", bad, "--model", tmp_path / "m.pkl", cwd=tmp_path)
    assert res.returncode == 1
    assert "non-numeric" in res.stderr and "Traceback" not in res.stderr
    res = run_cli_subprocess("predict", tmp_path / "missing.pkl", data_files.csv)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    res = run_cli_subprocess("fit", data_files.csv, "--model", tmp_path / "m.pkl", "--kernel", "sigmoid")
    assert res.returncode == 2 and "invalid choice" in res.stderr
    res = run_cli_subprocess()
    assert res.returncode == 2


def test_bench_builds_asv_command():
    cmd = cli.asv_command([])
    assert cmd[-4:] == ["run", "--python=same", "--quick", "--show-stderr"]
    cmd = cli.asv_command(["--bench", "CVM"])
    assert cmd[-2:] == ["--bench", "CVM"] and "run" in cmd
    cmd = cli.asv_command(["continuous", "HEAD~1", "HEAD"])
    assert cmd[-3:] == ["continuous", "HEAD~1", "HEAD"] and "--quick" not in cmd


@needs_checkout
def test_checkout_is_found_from_an_editable_install():
    assert cli.checkout_root() == REPO
    assert (cli.checkout_root() / "asv_benchmarks" / "asv.conf.json").is_file()


@pytest.mark.parametrize("command", [["report", "--tiny"], ["bench"]])
def test_report_and_bench_outside_a_checkout_say_so(monkeypatch, tmp_path, capsys, command):
    """An installed wheel has no reports/ or asv_benchmarks/: one line saying a checkout is needed, exit 1."""
    monkeypatch.setattr(cli, "REPO_ROOT", tmp_path)
    assert cli.checkout_root() is None
    assert cli.main(command) == 1
    err = capsys.readouterr().err
    assert "needs a source checkout" in err and err.strip().count("\n") == 0


def test_wheel_layout_report_is_refused_by_the_real_process(tmp_path):
    """Run from outside the checkout: whichever corevector is installed, `report` either finds its
    checkout (editable install) or refuses in one line (wheel); never a traceback."""
    res = run_cli_subprocess("report", "--only", "no_such_experiment", "--out", tmp_path / "out", cwd=tmp_path)
    assert "Traceback" not in res.stderr
    if FROM_CHECKOUT:
        assert res.returncode == 2 and "unknown experiment" in res.stderr
    else:
        assert res.returncode == 1 and "needs a source checkout" in res.stderr


def test_bench_missing_config_is_an_error(tmp_path, capsys):
    assert cli.main(["bench", "--config-dir", str(tmp_path)]) == 1
    assert "asv.conf.json" in capsys.readouterr().err


def test_fit_and_predict_cvr_on_csv(tmp_path, capsys):
    """corevector fit --estimator cvr / predict: the regression path end to end, with its errors."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 2))
    y = np.sin(X[:, 0]) + 0.05 * rng.normal(size=150)
    data = tmp_path / "reg.csv"
    np.savetxt(data, np.column_stack([X, y]), delimiter=",")
    model = tmp_path / "cvr.pkl"
    assert cli.main(["fit", str(data), "--model", str(model), "--estimator", "cvr", "--random-state", "0"]) == 0
    assert "training R^2" in capsys.readouterr().err
    out = tmp_path / "pred.txt"
    assert cli.main(["predict", str(model), str(data), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    pred = np.loadtxt(out)
    rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
    assert f"RMSE {rmse:.6g}" in err and rmse < 0.3
    # --mu is CVR's only
    assert cli.main(["fit", str(data), "--model", str(model), "--estimator", "cvm", "--mu", "0.1"]) != 0


# ------------------------------------------------------------------------------ issue 15: the CLI never corrupts, guarded inputs
def fit_model(data_files, tmp_path, *extra, name="m.pkl"):
    model = tmp_path / name
    assert cli.main(["fit", str(data_files.csv), "--model", str(model), "--gamma", "1", "--C", "100",
                     "--random-state", "0", *extra]) == 0
    return model


def one_line_error(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    return err


def run_with_file_size_limit(limit, *args):
    """The CLI in a process whose files may not grow beyond ``limit`` bytes (RLIMIT_FSIZE): a write past
    it fails with EFBIG, as on a full disk (Python ignores SIGXFSZ, so the write raises OSError)."""
    resource = pytest.importorskip("resource")

    def limit_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-m", "corevector.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120, preexec_fn=limit_files)


def test_failed_model_write_keeps_the_previous_model(data_files, tmp_path):
    model = fit_model(data_files, tmp_path)
    before = model.read_bytes()
    # a refit that cannot write more than half the model: the write fails part-way
    res = run_with_file_size_limit(len(before) // 2, "fit", data_files.csv, "--model", model, "--gamma", "2")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert model.read_bytes() == before                       # the previous model, intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pkl"]  # no temporary file left behind
    est, _ = load_model(model)
    assert est.gamma == 1.0


def test_failed_predict_out_leaves_no_partial_file(data_files, tmp_path):
    model = fit_model(data_files, tmp_path)
    out = tmp_path / "pred.txt"
    res = run_with_file_size_limit(100, "predict", model, data_files.csv, "--out", out)  # 600 lines > 100 bytes
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pkl"]
    # an earlier prediction file survives a failed rewrite
    out.write_text("previous\n")
    res = run_with_file_size_limit(100, "predict", model, data_files.csv, "--out", out)
    assert res.returncode == 1 and out.read_text() == "previous\n"


def test_atomic_write_removes_its_temporary_file_on_error(tmp_path):
    from corevector.io.files import atomic_write
    target = tmp_path / "f.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    with pytest.raises(RuntimeError):
        with atomic_write(target) as f:
            f.write("new, half written")
            raise RuntimeError("boom")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["f.txt"]
    with atomic_write(target) as f:
        f.write("new")
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["f.txt"]
    assert (os.stat(target).st_mode & 0o777) == 0o640  # the replaced file's mode is kept


@pytest.mark.parametrize("text, expected", [
    ("1 1:0.5 2:1\n-1 2:3\n", "libsvm"),
    ("# comment\n\n+1 qid:3 1:0.5 # trailing comment\n-1\n", "libsvm"),  # a label-only line is LIBSVM too
    ("x1,x2,label\n0.5,1,1\n", "csv"),
    ("0.5,1,1\n0.2,NA,-1\n", "csv"),
    ("1 1:0.5\n0.5,1,1\n", "mixes LIBSVM (line 1) and CSV (line 2)"),
    ("1 2 3\n", "line 1 is neither LIBSVM"),
    ("1\n-1\n", "pass --format"),  # lone numbers: LIBSVM without features or a one-column CSV
])
def test_sniff_format_reads_the_lines_not_the_name(tmp_path, text, expected):
    for name in ("data.csv", "data.libsvm"):  # the name plays no part
        p = tmp_path / name
        p.write_text(text)
        if expected in ("libsvm", "csv"):
            assert cli.sniff_format(p) == expected
        else:
            with pytest.raises(cli.CLIError, match=expected.replace("(", r"\(").replace(")", r"\)")):
                cli.sniff_format(p)


def test_predict_takes_the_format_from_the_file_not_the_model(data_files, tmp_path, capsys):
    """A model fitted on CSV predicts a LIBSVM file (and the other way round), whatever the file names."""
    csv_model = fit_model(data_files, tmp_path)
    libsvm_as_csv = tmp_path / "libsvm_content.csv"
    libsvm_as_csv.write_bytes(data_files.libsvm.read_bytes())
    csv_as_txt = tmp_path / "csv_content.txt"
    csv_as_txt.write_bytes(data_files.csv.read_bytes())
    est, header = load_model(csv_model)
    assert header["data_format"] == "csv"
    expected = est.predict(data_files.X)
    for data, extra in ((libsvm_as_csv, ["--by-position"]), (csv_as_txt, [])):  # LIBSVM has no column names
        out = tmp_path / "pred.txt"
        assert cli.main(["predict", str(csv_model), str(data), "--out", str(out), *extra]) == 0
        assert np.array_equal(np.loadtxt(out), expected)
        assert f"accuracy {np.mean(expected == data_files.y):.4f}" in capsys.readouterr().err
    # --format overrides the detection: the LIBSVM text read as CSV has one column
    assert cli.main(["predict", str(csv_model), str(libsvm_as_csv), "--format", "csv", "--by-position"]) == 1
    assert "has 1 columns; the model expects 2 features" in one_line_error(capsys)


def test_libsvm_feature_count_against_the_model(data_files, tmp_path, capsys):
    """LIBSVM: missing indices are zeros (a file whose highest index is below the model's feature count
    is valid, with a note); an index above it is an error naming its line.  CSV: the column count must
    be the model's (or one more, the target)."""
    model = fit_model(data_files, tmp_path)
    est, _ = load_model(model)
    narrow = tmp_path / "narrow.libsvm"
    narrow.write_text("1 1:0.5\n-1 1:2.5\n")  # feature 2 is zero on every line
    capsys.readouterr()
    out = tmp_path / "pred.txt"
    assert cli.main(["predict", str(model), str(narrow), "--out", str(out), "--by-position"]) == 0
    assert "highest feature index" in capsys.readouterr().err
    assert np.array_equal(np.loadtxt(out), est.predict(np.array([[0.5, 0.0], [2.5, 0.0]])))
    wide = tmp_path / "wide.libsvm"
    wide.write_text("1 1:0.5 2:1\n# a comment\n-1 1:0.5 2:1 3:1\n")
    assert cli.main(["predict", str(model), str(wide), "--by-position"]) == 1
    err = one_line_error(capsys)
    assert "line 3" in err and "feature index 3 is above the 2 features" in err
    for cols in (1, 4):
        bad = tmp_path / f"cols{cols}.csv"
        np.savetxt(bad, np.ones((3, cols)), delimiter=",")
        # one column: lone numbers could be LIBSVM labels too, so the format is given
        assert cli.main(["predict", str(model), str(bad), "--by-position",
                         *(["--format", "csv"] if cols == 1 else [])]) == 1
        assert f"has {cols} columns; the model expects 2 features" in one_line_error(capsys)


def test_libsvm_loader_keeps_csr(data_files):
    from sklearn.datasets import load_svmlight_file
    X, y = cli.read_libsvm(data_files.libsvm)
    assert sp.isspmatrix_csr(X) or (sp.issparse(X) and X.format == "csr")
    np.testing.assert_allclose(X.toarray(), data_files.X, rtol=1e-15)
    assert np.array_equal(y, data_files.y)
    # the estimators get the CSR matrix itself (issue 15: LIBSVM data stay sparse end to end)
    D = cli._estimator_input(X)
    assert sp.issparse(D) and D.format == "csr" and D.dtype == np.float64 and (D != X).nnz == 0
    Xs, _ = load_svmlight_file(str(data_files.libsvm), zero_based=False)
    assert (X != Xs).nnz == 0


@pytest.mark.parametrize("command", ["fit", "predict"])
def test_zero_index_is_rejected_naming_its_line(data_files, tmp_path, capsys, command):
    """scikit-learn's zero_based='auto' would read this file as 0-based and shift every column."""
    bad = tmp_path / "zero.libsvm"
    bad.write_text("1 1:0.5 2:1\n-1 1:1 2:0.5\n1 0:3 2:1\n")
    if command == "fit":
        argv = ["fit", str(bad), "--model", str(tmp_path / "z.pkl")]
    else:
        argv = ["predict", str(fit_model(data_files, tmp_path)), str(bad), "--by-position"]
    capsys.readouterr()
    assert cli.main(argv) == 1
    err = one_line_error(capsys)
    assert "line 3" in err and "feature index 0" in err and "start at 1" in err
    assert not (tmp_path / "z.pkl").exists()


def test_libsvm_non_finite_values_are_rejected_naming_their_line(tmp_path, capsys):
    bad = tmp_path / "nan.libsvm"
    bad.write_text("1 1:0.5 2:1\n-1 1:1 2:inf\n")
    assert cli.main(["fit", str(bad), "--model", str(tmp_path / "m.pkl")]) == 1
    assert "line 2: non-finite value 'inf' at feature index 2" in one_line_error(capsys)


def test_csv_first_row_with_na_is_data_not_a_header(data_files, tmp_path, capsys):
    """Old behaviour: 'NA,0.5,1' failed to parse, so it was dropped as a header and the fit went on."""
    rows = np.c_[data_files.X[:40], data_files.y[:40]]
    na = tmp_path / "na.csv"
    na.write_text("NA,0.5,1\n" + "\n".join(",".join(f"{v:.17g}" for v in r) for r in rows) + "\n")
    assert cli.main(["fit", str(na), "--model", str(tmp_path / "m.pkl")]) == 1
    err = one_line_error(capsys)
    assert "line 1, column 1: missing or non-finite value 'NA'" in err
    # a header by explicit choice
    assert cli.main(["fit", str(na), "--model", str(tmp_path / "m.pkl"), "--header"]) == 0
    assert "on 40 x 2" in capsys.readouterr().err


@pytest.mark.parametrize("text, header, result", [
    ("x1,x2,label\n1,2,3\n", None, (1, 3)),          # no number, no NA token: a header
    ("1,2,3\n4,5,6\n", None, (2, 3)),                # numbers: data
    ("x1,x2,label\n1,2,3\n", False, "line 1, column 1: non-numeric value 'x1'"),
    ("1,2,3\n4,5,6\n", True, (1, 3)),
    # an empty field is a missing value, so this row is data, and its first bad field is named
    ("x1,,label\n1,2,3\n", None, "line 1, column 1: non-numeric value 'x1'; if that row is a header, pass --header"),
    ("1,,3\n1,2,3\n", None, "line 1, column 2: missing or non-finite value ''"),
    ("# c\n1,2,3\n\n4,nan,6\n", None, "line 4, column 2: missing or non-finite value 'nan'"),
    ("1,2,3\n4,-inf,6\n", None, "line 2, column 2: missing or non-finite value '-inf'"),
    ("1,2,3\n4,?,6\n", None, "line 2, column 2: missing or non-finite value '?'"),
    ("1,2,3\n4,5\n", None, "line 2 has 2 columns, line 1 has 3"),
])
def test_read_csv_header_rule_and_errors(tmp_path, text, header, result):
    p = tmp_path / "d.csv"
    p.write_text(text)
    if isinstance(result, tuple):
        data = cli.read_csv(p, header)
        assert data.shape == result and data.dtype == np.float64
        assert np.array_equal(data[-1], [float(v) for v in text.strip().splitlines()[-1].split(",")])
    else:
        with pytest.raises(cli.CLIError, match=re.escape(result)):
            cli.read_csv(p, header)


def test_model_header_round_trip(data_files, tmp_path):
    import zipfile

    import corevector
    model = fit_model(data_files, tmp_path)
    with zipfile.ZipFile(model) as zf:
        header = json.loads(zf.read("header.json"))
    assert {k: header[k] for k in ("format", "version", "corevector_version", "estimator", "n_features",
                                   "feature_names", "target_name", "data_format")} == {
        "format": "corevector-model", "version": model_files.VERSION, "corevector_version": corevector.__version__,
        "estimator": "CVMClassifier", "n_features": 2, "feature_names": ["x1", "x2"], "target_name": "label",
        "data_format": "csv"}
    est, h = load_model(model)
    assert h["feature_names"] == ["x1", "x2"] and type(est) is corevector.CVMClassifier
    assert est.score(data_files.X, data_files.y) > 0.9
    # numpy reads the arrays without pickle
    with np.load(model, allow_pickle=False) as z:
        assert np.array_equal(z["support_vectors_"], est.support_vectors_)


class _Trap:
    """A pickle whose loading creates a file: proof that a foreign pickle was (not) unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_only_corevector_models_are_loaded(data_files, tmp_path, capsys):
    from sklearn.svm import SVC
    svc = tmp_path / "svc.pkl"
    svc.write_bytes(pickle.dumps(SVC().fit(data_files.X[:50], data_files.y[:50])))
    trap = tmp_path / "trap.pkl"
    marker = tmp_path / "unpickled"
    trap.write_bytes(pickle.dumps(_Trap(marker)))
    for foreign in (svc, trap, data_files.csv):
        assert cli.main(["predict", str(foreign), str(data_files.csv)]) == 1
        assert "is not a corevector model file" in one_line_error(capsys)
    # a corevector 0.1 model (a header line, then a pickle) holding the trap: refused, with how to convert it
    old = tmp_path / "old.pkl"
    old.write_bytes(json.dumps({"format": "corevector-model", "version": 1, "corevector_version": "0.1.0",
                                "estimator": "CVMClassifier", "n_features": 2, "data_format": "csv"}).encode()
                    + b"\n" + pickle.dumps(_Trap(marker)))
    assert cli.main(["predict", str(old), str(data_files.csv)]) == 1
    err = one_line_error(capsys)
    assert "pickle format of corevector 0.1" in err and "--allow-unsafe-pickle" in err
    assert not marker.exists()  # refused before unpickling
    # a model from a future format version is refused, with a request to upgrade
    model = fit_model(data_files, tmp_path)
    import zipfile
    with zipfile.ZipFile(model) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    header = json.loads(members["header.json"])
    future = tmp_path / "future.cvm"
    with zipfile.ZipFile(future, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, json.dumps({**header, "version": 99, "corevector_version": "9.0"}) if
                        name == "header.json" else data)
    capsys.readouterr()
    assert cli.main(["predict", str(future), str(data_files.csv)]) == 1
    assert "model format version 99" in one_line_error(capsys)
    truncated = tmp_path / "truncated.cvm"
    truncated.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    assert cli.main(["predict", str(truncated), str(data_files.csv)]) == 1
    assert "truncated.cvm" in one_line_error(capsys)


def test_convert_an_old_pickle_model_only_when_asked(data_files, tmp_path, capsys):
    """The documented way out for a trusted 0.1 model: convert once with --allow-unsafe-pickle."""
    model = fit_model(data_files, tmp_path)
    est, _ = load_model(model)
    old = tmp_path / "old.pkl"
    old.write_bytes(json.dumps({"format": "corevector-model", "version": 1, "corevector_version": "0.1.0",
                                "estimator": "CVMClassifier", "n_features": 2, "data_format": "csv"}).encode()
                    + b"\n" + pickle.dumps(est))
    new = tmp_path / "new.cvm"
    capsys.readouterr()
    assert cli.main(["convert", str(old), str(new)]) == 1
    assert "pickle format" in one_line_error(capsys)
    assert cli.main(["convert", str(old), str(new), "--allow-unsafe-pickle"]) == 0
    back, header = load_model(new)
    assert header["version"] == model_files.VERSION and np.array_equal(back.decision_function(data_files.X),
                                                       est.decision_function(data_files.X))
    # and to LIBSVM's format, which predict reads too
    lib = tmp_path / "m.libsvm-model"
    assert cli.main(["convert", str(new), str(lib), "--to", "libsvm"]) == 0
    assert lib.read_text().startswith("svm_type c_svc\nkernel_type rbf\n")
    out = tmp_path / "p.txt"
    assert cli.main(["predict", str(lib), str(data_files.libsvm), "--out", str(out)]) == 0
    assert np.array_equal(np.loadtxt(out), est.predict(data_files.X))


@pytest.mark.parametrize("estimator", ["cvdd", "meb"])
def test_predict_with_an_outlier_detector_reports_inlier_rates(data_files, tmp_path, capsys, estimator):
    model = tmp_path / f"{estimator}.pkl"
    extra = ["--C", "1"] if estimator == "cvdd" else []  # cvdd: 41% inliers; meb: all training points inside
    assert cli.main(["fit", str(data_files.csv), "--model", str(model), "--estimator", estimator, "--gamma", "1",
                     "--random-state", "0", *extra]) == 0
    capsys.readouterr()
    out = tmp_path / "pred.txt"
    assert cli.main(["predict", str(model), str(data_files.csv), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    pred = np.loadtxt(out)
    assert set(pred) <= {-1, 1}
    n_in = int(np.sum(pred == 1))
    assert (f"inliers {n_in / 600:.4f} ({n_in}), outliers {(600 - n_in) / 600:.4f} ({600 - n_in}) of 600 samples"
            in err)
    for c in (-1, 1):
        sel = data_files.y == c
        assert f"{c}: {np.mean(pred[sel] == 1):.4f} of {int(sel.sum())}" in err
    assert "RMSE" not in err and "accuracy" not in err


def test_version_matches_the_installed_metadata(capsys):
    from importlib.metadata import version
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"corevector {version('corevector')}"


def _capture_bench(monkeypatch, argv, capsys):
    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd) or 0)
    assert cli.main(argv) == 0
    return calls[0], capsys.readouterr().err


@needs_checkout
def test_bench_saves_results_against_head(monkeypatch, capsys):
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("the checkout is not a git repository")
    cmd, _ = _capture_bench(monkeypatch, ["bench", "--bench", "CVMCheckerboard"], capsys)
    i = cmd.index("--set-commit-hash")
    assert cmd[i + 1] == head.stdout.strip() and cmd[-2:] == ["--bench", "CVMCheckerboard"]
    assert cmd[cmd.index("run"):i] == ["run", "--python=same", "--quick", "--show-stderr"]
    # the user's own commit wins, and a full asv subcommand is passed as it is
    cmd, _ = _capture_bench(monkeypatch, ["bench", "--set-commit-hash=abc"], capsys)
    assert cmd.count("--set-commit-hash=abc") == 1 and "--set-commit-hash" not in cmd
    cmd, _ = _capture_bench(monkeypatch, ["bench", "continuous", "HEAD~1", "HEAD"], capsys)
    assert "--set-commit-hash" not in cmd


def test_bench_outside_a_git_checkout_says_results_are_not_saved(monkeypatch, tmp_path, capsys):
    conf = tmp_path / "asv_benchmarks"
    conf.mkdir()
    (conf / "asv.conf.json").write_text("{}")
    cmd, err = _capture_bench(monkeypatch, ["bench", "--config-dir", str(conf)], capsys)
    assert "--set-commit-hash" not in cmd
    assert "is not a git checkout" in err and "saves no results" in err


def test_fit_n_features_declares_the_libsvm_dimension(data_files, tmp_path, capsys):
    """A training file whose last features are all zero: --n-features gives the model its true dimension,
    so a test file that uses feature 3 is accepted; a training index above --n-features is an error."""
    model = tmp_path / "m3.pkl"
    assert cli.main(["fit", str(data_files.libsvm), "--model", str(model), "--n-features", "3", "--gamma", "1"]) == 0
    est, header = load_model(model)
    assert est.n_features_in_ == 3 and header["n_features"] == 3 and header["data_format"] == "libsvm"
    test = tmp_path / "t.libsvm"
    test.write_text("1 1:0.5 2:0.5 3:0\n-1 3:1\n")
    out = tmp_path / "p.txt"
    assert cli.main(["predict", str(model), str(test), "--out", str(out)]) == 0
    assert np.array_equal(np.loadtxt(out), est.predict(np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])))
    capsys.readouterr()
    assert cli.main(["fit", str(data_files.libsvm), "--model", str(model), "--n-features", "1"]) == 1
    assert "line 1: feature index 2 is above the 1 features expected" in one_line_error(capsys)
    assert cli.main(["fit", str(data_files.csv), "--model", str(model), "--n-features", "3"]) == 1
    assert "LIBSVM files only" in one_line_error(capsys)


@pytest.mark.parametrize("estimator", ["cvm", "cvr", "cvdd"])
def test_libsvm_fit_and_predict_stay_sparse(tmp_path, monkeypatch, estimator):
    """issue 15: a LIBSVM file reaches fit and predict as CSR, and a wide sparse file (400 x 200,000, 10
    nonzeros a row) is fitted with traced memory far below its dense size (640 MB)."""
    import tracemalloc

    from sklearn.datasets import dump_svmlight_file

    import corevector
    rng = np.random.default_rng(0)
    m, d = 400, 200_000
    X = sp.random(m, d, density=10 / d, format="csr", random_state=1)
    y = np.sign(X @ rng.standard_normal(d) + 1e-9)
    path = tmp_path / "wide.libsvm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    seen = []
    cls = {"cvm": corevector.CVMClassifier, "cvr": corevector.CVR, "cvdd": corevector.CVDD}[estimator]
    for name in ("fit", "predict"):
        orig = getattr(cls, name)

        def spy(self, X, *a, _orig=orig, _name=name, **k):
            seen.append((_name, sp.issparse(X)))
            return _orig(self, X, *a, **k)
        monkeypatch.setattr(cls, name, spy)
    model = tmp_path / "m.cvm"
    tracemalloc.start()
    try:
        assert cli.main(["fit", str(path), "--model", str(model), "--estimator", estimator, "--kernel", "linear"]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak  # the dense X alone would be 640 MB
    assert cli.main(["predict", str(model), str(path), "--out", str(tmp_path / "p.txt")]) == 0
    assert ("fit", True) in seen and ("predict", True) in seen and all(s for _, s in seen)


# ------------------------------------------------------------------------------------------------ issue 27, item 4
def _named_csv(path, X, y, names):
    path.write_text(",".join(names) + "\n" + "\n".join(",".join(f"{v:.17g}" for v in row) + f",{t}"
                                                       for row, t in zip(X, y)) + "\n")
    return path


def test_predict_matches_columns_by_name(data_files, tmp_path, capsys):
    """Issue 27: a model fitted on columns a,b,c predicted a file with columns c,b,a at 0.53 accuracy without
    a word.  The names are stored, the columns matched by name; a file without names is an error."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)) * [1.0, 3.0, 0.2]
    y = np.where(X[:, 0] + 0.1 * X[:, 1] > 0, 1, -1)
    train = _named_csv(tmp_path / "train.csv", X, y, ["a", "b", "c", "label"])
    model = tmp_path / "m.cvm"
    assert cli.main(["fit", str(train), "--model", str(model)]) == 0
    est, header = load_model(model)
    assert header["feature_names"] == ["a", "b", "c"] and header["target_name"] == "label"
    swapped = _named_csv(tmp_path / "swapped.csv", X[:, ::-1], y, ["c", "b", "a", "label"])
    out = tmp_path / "p.txt"
    capsys.readouterr()
    assert cli.main(["predict", str(model), str(swapped), "--out", str(out)]) == 0
    assert np.array_equal(np.loadtxt(out), est.predict(X))
    assert f"accuracy {np.mean(est.predict(X) == y):.4f}" in capsys.readouterr().err
    renamed = _named_csv(tmp_path / "renamed.csv", X, y, ["a", "b", "d", "label"])
    assert cli.main(["predict", str(model), str(renamed)]) == 1
    assert "has no column named 'c'" in one_line_error(capsys)
    bare = tmp_path / "bare.csv"
    np.savetxt(bare, X, delimiter=",")
    assert cli.main(["predict", str(model), str(bare)]) == 1
    assert "has no header row" in one_line_error(capsys)


def test_no_output_path_may_be_an_input_path(data_files, tmp_path, capsys):
    data = tmp_path / "data.csv"
    data.write_bytes(data_files.csv.read_bytes())
    before = data.read_bytes()
    assert cli.main(["fit", str(data), "--model", str(data)]) == 1
    assert "--model" in one_line_error(capsys) and data.read_bytes() == before
    link = tmp_path / "link.csv"
    os.symlink(data, link)
    assert cli.main(["fit", str(data), "--model", str(link)]) == 1
    assert "is the data file" in one_line_error(capsys)
    model = fit_model(data_files, tmp_path)
    model_bytes = model.read_bytes()
    capsys.readouterr()
    for target in (model, data_files.csv):
        assert cli.main(["predict", str(model), str(data_files.csv), "--out", str(target)]) == 1
        assert "--out" in one_line_error(capsys)
    assert model.read_bytes() == model_bytes


def test_os_errors_are_one_line(data_files, tmp_path, capsys):
    """--out pointing at a folder ended in "[Errno 21] Is a directory: '.adir.gb2878lj.tmp' -> 'adir'"."""
    model = fit_model(data_files, tmp_path)
    folder = tmp_path / "adir"
    folder.mkdir()
    capsys.readouterr()
    assert cli.main(["predict", str(model), str(data_files.csv), "--out", str(folder)]) == 1
    err = one_line_error(capsys)
    assert "is a folder" in err and ".tmp" not in err
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores the mode: the OS error cannot be provoked this way
            return
        assert cli.main(["fit", str(data_files.csv), "--model", str(locked / "m.cvm")]) == 1
        err = one_line_error(capsys)
        assert "locked" in err and "Permission denied" in err and ".tmp" not in err
    finally:
        os.chmod(locked, 0o700)


def test_os_error_message_names_the_file_not_the_temporary_one(tmp_path, monkeypatch, capsys):

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", src, None, dst)
    monkeypatch.setattr(files.os, "replace", refuse)
    target = tmp_path / "out.txt"
    with pytest.raises(PermissionError) as exc:
        with files.atomic_write(target) as f:
            f.write("x")
    assert exc.value.filename == str(target) and os.listdir(tmp_path) == []


def test_help_shows_each_estimators_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    from corevector import CVR, MEB, CVMClassifier
    assert f"cvm {CVMClassifier().gamma}, cvdd scale, meb {MEB().gamma}, cvr {CVR().gamma}" in out
    assert "default beta" not in out
    assert "cvm 0.01, cvdd 0.0001, meb 1e-06, cvr 0.01" in out and "not for meb" in out
    assert "--degree" in out and "--coef0" in out and "--class-weight" in out and "--probability" in out


def test_string_labels_gzip_and_probability(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 2))
    labels = np.array(["setosa", "versicolor", "virginica"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)]
    text = "x1,x2,species\n" + "\n".join(f"{a:.17g},{b:.17g},{c}" for (a, b), c in zip(X, labels)) + "\n"
    data = tmp_path / "iris.csv.gz"
    import gzip
    data.write_bytes(gzip.compress(text.encode()))
    model = tmp_path / "m.cvm"
    assert cli.main(["fit", str(data), "--model", str(model), "--probability", "--class-weight", "balanced"]) == 0
    est, _ = load_model(model)
    assert list(est.classes_) == ["setosa", "versicolor", "virginica"] and est.probability
    assert est.class_weight == "balanced"
    out = tmp_path / "p.txt"
    capsys.readouterr()
    assert cli.main(["predict", str(model), str(data), "--out", str(out), "--probability"]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "labels setosa versicolor virginica"
    first = lines[1].split()
    assert first[0] in est.classes_ and abs(sum(map(float, first[1:])) - 1) < 1e-4
    assert "accuracy" in capsys.readouterr().err
    # a regressor needs numeric targets: one line naming the line and column
    assert cli.main(["fit", str(data), "--model", str(model), "--estimator", "cvr"]) == 1
    assert "line 2, column 3: the target 'virginica'" in one_line_error(capsys) or \
        "column 3: the target" in capsys.readouterr().err


def test_gzip_libsvm_and_load_libsvm_is_sparse(data_files, tmp_path):
    import gzip
    gz = tmp_path / "train.libsvm.gz"
    gz.write_bytes(gzip.compress(data_files.libsvm.read_bytes()))
    X, y = load_libsvm(gz)
    assert sp.issparse(X) and X.format == "csr"
    np.testing.assert_allclose(X.toarray(), data_files.X, rtol=1e-15)
    assert cli.main(["fit", str(gz), "--model", str(tmp_path / "m.cvm")]) == 0


def test_two_fits_of_one_file_give_one_model(data_files, tmp_path):
    """The seed defaults to 0 (it was unset: 187 against 173 core vectors)."""
    a, b = tmp_path / "a.cvm", tmp_path / "b.cvm"
    for m in (a, b):
        assert cli.main(["fit", str(data_files.libsvm), "--model", str(m)]) == 0
    est = load_model(a)[0]
    assert est.random_state == 0
    assert a.read_bytes() == b.read_bytes()  # byte for byte: the fit's times are not stored (issue 44)
    c = tmp_path / "c.cvm"
    assert cli.main(["fit", str(data_files.libsvm), "--model", str(c), "--random-state", "5"]) == 0
    assert load_model(c)[0].random_state == 5


def test_poly_kernel_options_reach_the_estimator(data_files, tmp_path, capsys):
    model = tmp_path / "m.cvm"
    assert cli.main(["fit", str(data_files.csv), "--model", str(model), "--kernel", "poly", "--degree", "2",
                     "--coef0", "1.5", "--class-weight", "1:2,-1:0.5"]) == 0
    est, _ = load_model(model)
    assert (est.kernel, est.degree, est.coef0) == ("poly", 2, 1.5) and est.class_weight == {1: 2.0, -1: 0.5}
    assert est.kernel_spec_.degree == 2 and est.kernel_spec_.coef0 == 1.5
    capsys.readouterr()
    assert cli.main(["fit", str(data_files.csv), "--model", str(model), "--estimator", "cvr", "--probability"]) == 1
    assert "--probability does not apply to --estimator cvr" in one_line_error(capsys)


def test_bench_runs_asv_in_this_interpreter_and_names_the_checkout(monkeypatch, tmp_path, capsys):
    """`corevector bench check` ran asv without --python=same (a 310 MB environment in the installed
    checkout); subcommands that would build one now get --python=same, and bench says which checkout."""
    assert cli.asv_command(["check"])[-2:] == ["check", "--python=same"]
    assert cli.asv_command(["run", "--bench", "X"])[-4:] == ["run", "--python=same", "--bench", "X"]
    assert cli.asv_command(["check", "--python=3.11"])[-2:] == ["check", "--python=3.11"]
    assert "--python=same" not in cli.asv_command(["continuous", "HEAD~1", "HEAD"])
    conf = tmp_path / "asv_benchmarks"
    conf.mkdir()
    (conf / "asv.conf.json").write_text("{}")
    cmd, err = _capture_bench(monkeypatch, ["bench", "--config-dir", str(conf), "check"], capsys)
    assert "--python=same" in cmd and f"benchmarking the checkout {tmp_path}" in err


# ------------------------------------------------------------------------------ issue 44: files as users mean them
@pytest.mark.parametrize("first_row", ["1,2,label", "x1,2,label", "a,b,label"])
def test_a_header_is_a_header_when_the_target_column_holds_a_name(data_files, tmp_path, capsys, first_row):
    """'1,2,label' above numeric labels was a data row: the model got a class 'label' and the real labels
    became the strings '-1' and '1'.  A name above a column of numbers makes the row a header, and the labels
    stay numbers."""
    rows = np.c_[data_files.X[:200], data_files.y[:200]]
    p = tmp_path / "h.csv"
    p.write_text(first_row + "\n" + "\n".join(f"{a:.17g},{b:.17g},{int(c)}" for a, b, c in rows) + "\n")
    model = tmp_path / "m.cvm"
    assert cli.main(["fit", str(p), "--model", str(model)]) == 0
    assert "on 200 x 2 (csv)" in capsys.readouterr().err
    est, header = load_model(model)
    assert est.classes_.dtype.kind == "i" and est.classes_.tolist() == [-1, 1]
    assert header["feature_names"] == first_row.split(",")[:2] and header["target_name"] == "label"
    # predict reads the same file by its header (the model's features are named)
    assert cli.main(["predict", str(model), str(p)]) == 0
    out, err = capsys.readouterr()
    assert len(out.split()) == 200 and err.startswith("accuracy ")
    # --no-header still says otherwise: the row is data (a class 'label', or an error naming its value)
    code = cli.main(["fit", str(p), "--model", str(model), "--no-header"])
    if first_row == "1,2,label":
        assert code == 0 and "label" in load_model(model)[0].classes_.tolist()
    else:
        assert code == 1 and "line 1, column 1: non-numeric value" in one_line_error(capsys)


def test_numeric_looking_labels_stay_numbers(tmp_path):
    from corevector.io.readers import read_training_data

    p = tmp_path / "d.csv"
    p.write_text("1,2,label\n0.5,1,0\n1.5,2,1.0\n2.5,3,2\n")
    data = read_training_data(p)
    assert data.y.dtype.kind == "i" and data.y.tolist() == [0, 1, 2] and data.names == ["1", "2"]
    p.write_text("1,2,label\n0.5,1,0.5\n1.5,2,1\n")
    assert read_training_data(p).y.dtype.kind == "f"
    # string labels: a first row cannot be told from data by its label, and stays data unless --header
    p.write_text("1,2,label\n0.5,1,a\n1.5,2,b\n")
    assert read_training_data(p).names is None
    data = read_training_data(p, header=True)
    assert data.names == ["1", "2"] and data.target_name == "label" and data.y.tolist() == ["a", "b"]


def test_a_first_row_label_seen_once_suggests_header(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    p = tmp_path / "s.csv"
    p.write_text("1,2,label\n" + "\n".join(f"{a:.17g},{b:.17g},{'ab'[int(a > 0)]}" for a, b in X) + "\n")
    assert cli.main(["fit", str(p), "--model", str(tmp_path / "m.cvm")]) == 0
    err = capsys.readouterr().err
    assert "note: the label 'label' of" in err and "pass --header" in err
    assert cli.main(["fit", str(p), "--model", str(tmp_path / "m.cvm"), "--header"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_predict_warns_when_the_files_labels_are_not_the_models_classes(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = np.where(X[:, 0] > 0, "pos", "neg")
    train = tmp_path / "t.csv"
    train.write_text("\n".join(f"{a:.17g},{b:.17g},{c}" for (a, b), c in zip(X, y)) + "\n")
    model = tmp_path / "m.cvm"
    assert cli.main(["fit", str(train), "--model", str(model)]) == 0
    capsys.readouterr()
    numeric = tmp_path / "n.csv"
    numeric.write_text("\n".join(f"{a:.17g},{b:.17g},{int(a > 0)}" for a, b in X) + "\n")
    assert cli.main(["predict", str(model), str(numeric)]) == 0
    err = capsys.readouterr().err
    assert "warning: the labels in" in err and "(0, 1) share none with the model's classes (neg, pos)" in err
    assert "accuracy 0" not in err
    # some labels unknown: the accuracy, and a note on those
    mixed = tmp_path / "x.csv"
    mixed.write_text("\n".join(f"{a:.17g},{b:.17g},{c if k % 4 else 'other'}"
                                for k, ((a, b), c) in enumerate(zip(X, y))) + "\n")
    assert cli.main(["predict", str(model), str(mixed)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("accuracy ") and "label(s) other of" in err and "20 samples count as errors" in err
    # labels compared as written: a model of 1.0/-1.0 (LIBSVM labels) and a CSV of 1/-1 agree
    lib = tmp_path / "l.libsvm"
    lib.write_text("\n".join(f"{1.0 if a > 0 else -1.0} 1:{a:.17g} 2:{b:.17g}" for a, b in X) + "\n")
    assert cli.main(["fit", str(lib), "--model", str(model)]) == 0
    one = tmp_path / "one.csv"
    one.write_text("\n".join(f"{a:.17g},{b:.17g},{1 if a > 0 else -1}" for a, b in X) + "\n")
    capsys.readouterr()
    assert cli.main(["predict", str(model), str(one)]) == 0
    acc = float(capsys.readouterr().err.split()[1])
    assert acc > 0.9


@pytest.mark.parametrize("estimator", ["ssvr", "mmda"])
def test_libsvm_files_are_made_dense_for_estimators_of_dense_rows(data_files, tmp_path, capsys, estimator):
    """MMDA takes dense rows: a LIBSVM file is made dense for it (it answered with the Python API's 'Sparse data
    was passed ... Use .toarray()'); SparseSVR takes the CSR rows as they are, and predicts on them what it
    predicts on the dense array up to the rounding of its CSR kernel rows (squared distances from norms)."""
    model = tmp_path / "m.cvm"
    assert cli.main(["fit", str(data_files.libsvm), "--model", str(model), "--estimator", estimator]) == 0
    assert "(libsvm)" in capsys.readouterr().err
    out = tmp_path / "p.txt"
    assert cli.main(["predict", str(model), str(data_files.libsvm), "--out", str(out)]) == 0
    est = load_model(model)[0]
    X = load_libsvm(data_files.libsvm)[0].toarray()
    got = np.array([[float(v) for v in line.split(",")] for line in out.read_text().splitlines()])
    if estimator == "mmda":
        assert np.array_equal(got, est.transform(X))
    else:
        # (lam='auto' can pick a weak lam, whose coefficients of 10^2-10^3 carry the rows' rounding further)
        np.testing.assert_allclose(got, est.predict(X)[:, None], rtol=1e-8, atol=1e-9)


def test_making_dense_stays_within_the_readers_memory_guard(tmp_path, capsys):
    """A LIBSVM file naming feature 10^8 takes a few bytes as CSR; made dense it would take 800 MB a row, so
    an estimator of dense rows gets a one-line error instead (the CSR-taking estimators keep it sparse)."""
    from corevector.io.readers import DENSE_ALLOWANCE

    wide = sp.csr_matrix(([1.0, 2.0], ([0, 1], [3, 10**8 - 1])), shape=(2, 10**8))
    with pytest.raises(cli.CLIError, match="SparseSVR takes dense rows only"):
        cli._estimator_input(wide, dense=True, who="SparseSVR")
    assert sp.issparse(cli._estimator_input(wide))
    ok = sp.random(50, 40, density=0.1, format="csr", random_state=0)
    assert np.array_equal(cli._estimator_input(ok, dense=True), ok.toarray())
    assert 50 * 40 < DENSE_ALLOWANCE
    p = tmp_path / "wide.libsvm"
    p.write_text("1 1:0.5 100000000:1\n2 2:0.5\n1 3:1\n")
    assert cli.main(["fit", str(p), "--model", str(tmp_path / "m.cvm"), "--estimator", "mmda"]) == 1
    err = one_line_error(capsys)
    assert "MMDA takes dense rows only" in err and "3 x 100000000" in err


def test_convert_picks_the_format_from_the_extension(data_files, tmp_path, capsys):
    model = fit_model(data_files, tmp_path, name="m.cvm")
    lib = tmp_path / "m.model"
    assert cli.main(["convert", str(model), str(lib)]) == 0  # .model: LIBSVM's
    assert lib.read_text().startswith("svm_type c_svc\n") and "(libsvm)" in capsys.readouterr().err
    back = tmp_path / "back.cvm"
    assert cli.main(["convert", str(lib), str(back)]) == 0  # .cvm: corevector's
    assert back.read_bytes()[:4] == b"PK\x03\x04"
    other = tmp_path / "back.bin"
    assert cli.main(["convert", str(lib), str(other)]) == 0  # any other: corevector's
    assert other.read_bytes()[:4] == b"PK\x03\x04"
    forced = tmp_path / "forced.model"
    assert cli.main(["convert", str(model), str(forced), "--to", "native"]) == 0  # --to overrides
    assert forced.read_bytes()[:4] == b"PK\x03\x04"
    text = tmp_path / "text.cvm"
    assert cli.main(["convert", str(model), str(text), "--to", "libsvm"]) == 0
    assert text.read_text().startswith("svm_type c_svc\n")
    assert cli.convert_target("A.MODEL") == "libsvm" and cli.convert_target("a.cvm") == "native"


# ------------------------------------------------------------------------------ issue 44: help that matches the code
@pytest.mark.parametrize("command, words", [
    ("bench", ["usage: corevector bench", "asv_benchmarks/", "--python=same", "'corevector bench -- --help'"]),
    ("report", ["usage: corevector report", "reports/", "REPORT.md", "source checkout"]),
    ("verify", ["usage: corevector verify", "(1+eps)^2", "cvxopt", "--estimator", "exit status 1"]),
])
def test_bench_report_and_verify_have_their_own_help(monkeypatch, capsys, command, words):
    """'corevector bench --help' printed asv's help; report and verify had no description."""
    def no_subprocess(*a, **k):
        raise AssertionError("the help ran a subprocess")
    monkeypatch.setattr(cli.subprocess, "call", no_subprocess)
    monkeypatch.setattr(cli.subprocess, "run", no_subprocess)
    for flag in ("--help", "-h"):
        with pytest.raises(SystemExit) as exc:
            cli.main([command, flag])
        assert exc.value.code == 0
        out = " ".join(capsys.readouterr().out.split())
        for w in words:
            assert w in out, (w, out)


def test_bench_passes_any_other_help_to_asv():
    """Only '-h'/'--help' alone is ours: after '--' or an asv subcommand, asv's help."""
    assert cli.asv_command(["--", "--help"])[-5:] == ["run", "--python=same", "--quick", "--show-stderr", "--help"]
    assert cli.asv_command(["continuous", "--help"])[-2:] == ["continuous", "--help"]


def test_cvrs_defaults_in_help_and_docs_are_the_codes():
    """CVR's defaults as the code has them (C='auto' and mu='auto' from a kernel ridge pilot, with the constants
    of their rules), read from CVR itself, in 'corevector fit --help' and the documentation pages that state them
    (they said C = 3000 max|y|, mu = C / (50 m), and later C=25 after the code had moved on)."""
    from corevector import CVR

    params = CVR().get_params()
    C, mu = params["C"], params["mu"]
    assert C == "auto" and mu == "auto"
    parser = cli.build_parser()
    fit = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "fit")[1]
    text = " ".join(fit.format_help().split())
    assert (f"cvr auto: {CVR.AUTO_C_FACTOR:g} times the C of least hold-out error of a kernel ridge pilot on "
            f"{CVR.AUTO_PILOT_SIZE} points, at most {CVR.AUTO_C_MAX:g}") in text  # --C
    auto = (f"cvr auto: the tube set from the residuals of that kernel ridge pilot, leaving about a fraction "
            f"min(max(min({CVR.AUTO_TUBE_OUTSIDE:g}, max({CVR.AUTO_TUBE_CLEAN:g}, {CVR.AUTO_TUBE_CLEAN_SLOPE:g} e_b)), "
            f"{CVR.AUTO_TUBE_NOISE:g} e, {CVR.AUTO_TUBE_CP:g}/C), "
            f"{CVR.AUTO_TUBE_NOISY:g}, {CVR.TUBE_MAX_OUTSIDE:g} max(1, {CVR.AUTO_NOISY_MAX_OUTSIDE:g} e)/m)")
    assert auto in text
    assert (f"with a given C, min(max({CVR.TUBE_OUTSIDE:g}, {CVR.TUBE_CP:g}/C), {CVR.TUBE_MAX_OUTSIDE:g}/m) from a "
            f"pilot of that C on {CVR.PILOT_SIZE} points") in text
    for stale in ("3000", "C / (50 m)", "C/(50 m)", "cvr 25"):
        assert stale not in text
    defaults = (REPO / "docs" / "defaults.md").read_text()
    row = next(line for line in defaults.splitlines() if line.startswith("| `CVR` |"))
    assert "`C='auto'`" in row and f"`mu='{mu}'`" in row and "kernel ridge pilot" in row
    for k in ("C", "mu", "stop", "eps", "gamma", "normalize_y"):
        stated = re.search(rf"`{k}=([^`]+)`", row)
        assert stated and ast.literal_eval(stated.group(1)) == params[k], k
    assert (f"min({CVR.AUTO_C_FACTOR:g} C_pilot, {CVR.AUTO_C_MAX:g})" in row
            and f"p = min(max(min({CVR.AUTO_TUBE_OUTSIDE:g}, max({CVR.AUTO_TUBE_CLEAN:g}, "
                f"{CVR.AUTO_TUBE_CLEAN_SLOPE:g} e_b)), {CVR.AUTO_TUBE_NOISE:g} e, {CVR.AUTO_TUBE_CP:g}/C), "
                f"{CVR.AUTO_TUBE_NOISY:g}, {CVR.TUBE_MAX_OUTSIDE:,.0f} max(1, {CVR.AUTO_NOISY_MAX_OUTSIDE:g} e)/m)" in row)
    for page in ("defaults.md", "design.md", "guide.md"):
        text = (REPO / "docs" / page).read_text()
        for stale in ("3000·max|y|", "3000 max|y|", "C/(50 m)", "C / (50 m)"):
            assert stale not in text, (page, stale)
    assert "C='auto'" in (REPO / "docs" / "design.md").read_text()
