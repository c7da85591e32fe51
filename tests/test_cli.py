"""End-to-end tests of the ``corevector`` command line (fastimpl/cli.py) and the data loaders."""
import os
import pickle
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fastimpl import cli
from fastimpl.model_file import load_model
from helpers import engines
from refimpl import verify
from refimpl.datasets import checkerboard, load_csv, load_libsvm

REPO = Path(__file__).resolve().parent.parent
#: True when the corevector under test runs from this checkout (editable install), False for an
#: installed wheel (the CLI tests then run against site-packages, see the README)
FROM_CHECKOUT = Path(cli.__file__).resolve().parent.parent == REPO
needs_checkout = pytest.mark.skipif(not FROM_CHECKOUT, reason="report/bench run only from a source checkout; "
                                    "this corevector is an installed wheel")


def run_cli_subprocess(*args, cwd=None):
    """The installed console entry point's module, as a user runs it (no PYTHONPATH: the package
    must import from the environment alone)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "fastimpl.cli", *map(str, args)], capture_output=True, text=True,
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
    np.testing.assert_allclose(Xl, data_files.X, rtol=1e-12)
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
    ("1,nan,3\n", "NaN"),
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
    with pytest.raises(ValueError, match="LIBSVM"):
        load_libsvm(tmp_path / "bad.libsvm")


# ------------------------------------------------------------------------------ verify
def test_verify_tiny_passes_and_prints_table(capsys):
    assert cli.main(["verify", "--tiny", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "0 violation(s)" in out
    for form in verify.FORMULATIONS:
        assert form in out
    assert "fast" in out and "ref" in out


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
    assert cli.main(["predict", str(model), str(data_files.features_only)]) == 0
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
    (["fit", "{dir}/bad.libsvm", "--model", "{tmp}/m.pkl"], "LIBSVM"),
    (["fit", "{csv}", "--model", "{tmp}/m.pkl", "--estimator", "meb", "--C", "2"], "does not apply"),
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
    assert cli.main(["predict", str(model), str(wide)]) == 1
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
    bad.write_text("1,2\n3,oops\n")
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
