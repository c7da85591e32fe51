"""Every estimator through every command (issue 44, item 2): ``fit``, ``predict``, ``convert`` in both directions
and ``verify`` for CVMClassifier, CVDD, MEB, CVR, SparseSVR, MMDA and ImplicitSurface.  Each pair either does
the right thing (``predict`` on an MMDA model writes its transform, on a surface its implicit values) or fails
with one line naming the estimator and what the command supports; none prints a traceback."""
import contextlib
import io

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from corevector.cli import command as cli
from corevector.io import model_files
from corevector.registry import CLI_ESTIMATORS

#: the LIBSVM svm_type each estimator is written as (None: it has no LIBSVM model)
LIBSVM_TYPE = {"cvm": "c_svc", "cvdd": "one_class", "meb": "one_class", "cvr": "epsilon_svr", "ssvr": None,
               "mmda": None, "surface": None}
#: the class a LIBSVM model file reads back as (MEB's is a one-class model: CVDD)
READ_BACK = {"cvm": "CVMClassifier", "cvdd": "CVDD", "meb": "CVDD", "cvr": "CVR"}
#: verify's formulation of each estimator (None: verify has none and says why)
FORMULATION = {"cvm": "two_class", "cvdd": "one_class", "meb": "meb", "cvr": "cvr", "ssvr": None, "mmda": None,
               "surface": None}
COMMANDS = ("fit", "predict", "convert-to-libsvm", "convert-to-native", "verify")


def test_the_matrix_covers_every_estimator():
    assert set(LIBSVM_TYPE) == set(FORMULATION) == set(CLI_ESTIMATORS)
    assert {e.cls.__name__ for e in CLI_ESTIMATORS.values()} == {
        "CVMClassifier", "CVDD", "MEB", "CVR", "SparseSVR", "MMDA", "ImplicitSurface"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("estimators")
    X, y = make_blobs(150, centers=3, n_features=4, cluster_std=2.0, random_state=0)
    np.savetxt(d / "cls.csv", np.c_[X, y], delimiter=",", fmt="%.17g")
    rng = np.random.default_rng(0)
    Xr = rng.uniform(-2, 2, size=(200, 3))
    yr = np.sin(Xr[:, 0]) + Xr[:, 1] + 0.1 * rng.normal(size=200)
    np.savetxt(d / "reg.csv", np.c_[Xr, yr], delimiter=",", fmt="%.17g")
    u = rng.normal(size=(500, 3))  # ImplicitSurface's docstring example: the unit sphere with 1% noise
    P = u / np.linalg.norm(u, axis=1, keepdims=True) * (1 + 0.01 * rng.normal(size=(500, 1)))
    np.savetxt(d / "pts.csv", P, delimiter=",", fmt="%.17g")
    data = {"cvm": "cls.csv", "cvdd": "cls.csv", "meb": "cls.csv", "cvr": "reg.csv", "ssvr": "reg.csv",
            "mmda": "cls.csv", "surface": "pts.csv"}
    arrays = {"cls.csv": (X, y), "reg.csv": (Xr, yr), "pts.csv": (P, None)}
    models = {}
    for name, f in data.items():
        models[name] = d / f"{name}.cvm"
        code, _, err = run(["fit", str(d / f), "--model", str(models[name]), "--estimator", name])
        assert code == 0, err
    return {name: (d / f, arrays[f], models[name]) for name, f in data.items()}


def run(argv):
    """(exit status, stdout, stderr) of ``corevector ARGV`` in this process; an exception escaping main() -- a
    traceback for the user -- fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, out.getvalue(), err.getvalue()


def one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", list(CLI_ESTIMATORS))
def test_every_estimator_through_every_command(files, tmp_path, name, command):
    data, (X, y), model = files[name]
    cls = CLI_ESTIMATORS[name].cls.__name__
    task = CLI_ESTIMATORS[name].task
    est = model_files.load_model(model)
    if command == "fit":
        out = tmp_path / "m.cvm"
        code, _, err = run(["fit", data, "--model", out, "--estimator", name])
        assert code == 0 and f"fitted {cls} on {len(X)} x {X.shape[1]} (csv)" in err, err
        assert type(model_files.load_model(out)).__name__ == cls
        assert out.read_bytes() == model.read_bytes()  # one fit, one file
    elif command == "predict":
        code, out, err = run(["predict", model, data])
        assert code == 0, err
        lines = out.splitlines()
        assert len(lines) == len(X)
        if task == "transformer":  # MMDA's transform, one comma-separated row per line, every digit
            values = np.array([[float(v) for v in line.split(",")] for line in lines])
            assert np.array_equal(values, est.transform(X)) and values.shape[1] == est.n_components_
            assert f"{cls}: {est.n_components_} component(s) of {len(X)} samples" in err
        elif task == "surface":  # the implicit values f - 1
            assert np.array_equal(np.array([float(v) for v in lines]), est.decision_function(X))
            assert "implicit values f - 1" in err
        elif task == "classifier":
            assert np.array_equal(np.array([int(v) for v in lines]), est.predict(X))
            assert "accuracy" in err
        elif task == "outlier":
            assert set(lines) <= {"1", "-1"} and "inliers" in err
        else:
            np.testing.assert_allclose(np.array([float(v) for v in lines]), est.predict(X), rtol=1e-15)
            assert "RMSE" in err
    elif command == "convert-to-libsvm":
        out = tmp_path / "m.model"  # LIBSVM's format by the extension
        code, _, err = run(["convert", model, out])
        if LIBSVM_TYPE[name] is None:
            line = one_line(err)
            assert code == 1 and not out.exists()
            assert f"{cls} has no LIBSVM equivalent" in line and "CVMClassifier, CVDD, MEB and CVR" in line
        else:
            assert code == 0 and f"({'libsvm'})" in err, err
            assert out.read_text().startswith(f"svm_type {LIBSVM_TYPE[name]}\n")
            # LIBSVM's model predicts what the model does (MEB: its export agrees at decision 0 too)
            code, pred, err = run(["predict", out, data])
            assert code == 0, err
            _, ours, _ = run(["predict", model, data])
            if task == "regressor":
                np.testing.assert_allclose(np.array(pred.split(), float), np.array(ours.split(), float), rtol=1e-12)
            else:
                assert pred == ours
    else:
        if command == "convert-to-native" and LIBSVM_TYPE[name] is not None:
            lib = tmp_path / "m.model"
            assert run(["convert", model, lib])[0] == 0
            out = tmp_path / "back.cvm"
            code, _, err = run(["convert", lib, out])
            assert code == 0 and "(native)" in err, err
            back = model_files.load_model(out)
            assert type(back).__name__ == READ_BACK[name]
            f = "predict" if task == "regressor" else "decision_function"
            ref = getattr(est, f)(X)
            if cls == "MEB":  # the LIBSVM model carries MEB.predict's slack in rho
                ref = ref + est.MEMBERSHIP_RTOL * est.certified_radius_ ** 2
            np.testing.assert_allclose(getattr(back, f)(X), ref, rtol=0, atol=1e-12)
        elif command == "convert-to-native":  # no LIBSVM form: native to native, the same bytes
            out = tmp_path / "again.cvm"
            code, _, err = run(["convert", model, out])
            assert code == 0 and "(native)" in err, err
            assert out.read_bytes() == model.read_bytes()
        else:  # verify
            code, out, err = run(["verify", "--tiny", "--estimator", name, "--no-progress"])
            if FORMULATION[name] is None:
                line = one_line(err)
                assert code == 1 and cls in line and "(cvm, cvdd, meb, cvr)" in line
            else:
                assert code == 0 and "0 violation(s)" in out, out + err
                rows = [r.split()[0] for r in out.splitlines() if r.strip().endswith(" 0")]
                assert rows and set(rows) == {FORMULATION[name]}


@pytest.mark.parametrize("name", [n for n, e in CLI_ESTIMATORS.items() if e.task != "classifier"])
def test_predict_probability_names_the_estimator(files, name):
    data, _, model = files[name]
    code, out, err = run(["predict", model, data, "--probability"])
    line = one_line(err)
    assert code == 1 and out == ""
    assert "--probability needs a CVMClassifier" in line and CLI_ESTIMATORS[name].cls.__name__ in line
