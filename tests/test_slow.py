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
