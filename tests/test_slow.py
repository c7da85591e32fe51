"""Long checks (marked slow): excluded from the default suite, run by `bash run.sh report --full`
and by `bash run.sh test -m slow`.  The part of the verification grid that fits the CI budget
runs in the default suite (test_verify.py); the full grid, with its m = 300 problems, runs here."""
import pytest

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1800)
def test_verify_full_grid_has_no_violation():
    """The (1+eps)^2 bound on the full verification grid (m up to 300, four kernels, eps down to 1e-5,
    four formulations, both implementations) against the exact solver: 2,400 fits."""
    from corevector.cli import main
    assert main(["verify", "--no-progress"]) == 0


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("m", [100_000, 1_000_000])
def test_checkerboard_at_scale(m):
    """001 Sec. 5.1 at the paper's scale: accuracy >= 99%, a core set that does not grow with m.

    The core-set bound fails on main at m = 1e5 (1,773 > 1,000) since the default stop became
    'margin'; the engine's defaults are being reworked, so the threshold is left as the paper's
    claim until then (issue 13)."""
    from corevector import CVMClassifier
    from refimpl.datasets import checkerboard
    X, y = checkerboard(m, random_state=1)
    Xt, yt = checkerboard(2000, random_state=2)
    clf = CVMClassifier(C=1e4, gamma=1.0, eps=1e-6, random_state=0).fit(X, y)
    assert clf.score(Xt, yt) >= 0.99
    assert len(clf.core_set_) < 1000
    assert 1.0 <= clf.certified_ratio_ < 1.001


@pytest.mark.timeout(1800)
def test_installed_wheel_imports_outside_the_checkout(tmp_path):
    """Issue 23: ``from corevector import CVMClassifier, __version__`` works from an installed wheel, in a fresh
    virtual environment, run from a folder outside the checkout (so nothing is imported from the tree), and
    the installed estimator fits."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(root)], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    wheel = next(wheels.glob("corevector-*.whl"))
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True)
    code = ("import corevector, numpy as np; from corevector import CVMClassifier, __version__; "
            "X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int); "
            "print(__version__, corevector.__file__, CVMClassifier(random_state=0).fit(X, y).score(X, y))")
    out = subprocess.run([str(py), "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    version, where, score = out.split()
    assert version == __import__("corevector").__version__
    assert str(venv) in where and str(root) not in where
    assert float(score) > 0.95
