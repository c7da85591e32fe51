"""refimpl.verify: the library behind `corevector verify`, the report's ratio experiment and the
bound tests, and the part of the full verification grid that fits the default suite.

The full grid (m up to 300, five seeds, four kernels, eps down to 1e-5, every formulation, both
implementations) runs in test_slow.py; here it runs without its m = 300 problems and with three of
its five seeds, so every kernel, eps and formulation of it is checked on every run of the suite.
"""
import numpy as np
import pytest

from helpers import engines
from refimpl import verify


def test_grid_problems_order_and_seeds():
    probs = verify.grid_problems((10, 20), 2, ("rbf", "poly"), ("meb", "cvr"), seed=5)
    assert len(probs) == 2 * 2 * 2 * 2
    assert probs[0] == ("meb", "rbf", 10, 5) and probs[1] == ("cvr", "rbf", 10, 5)
    assert probs[-1] == ("cvr", "poly", 20, 6)


@pytest.mark.parametrize("formulation", verify.FORMULATIONS)
def test_make_problem_builds_each_formulation(formulation):
    p = verify.make_problem(formulation, 30, "rbf", 0)
    assert p.m == 30 and p.n == (60 if formulation == "cvr" else 30)
    q = verify.make_problem(formulation, 30, "rbf", 0)
    np.testing.assert_array_equal(p.X, q.X)          # a seed gives one problem
    with pytest.raises(ValueError, match="formulation"):
        verify.make_problem("svr", 30, "rbf", 0)


def test_default_engine_is_the_reference():
    """refimpl's verification runs refimpl's own fit_meb (the papers' loop) unless given engines (the CLI
    gives corevector.numerics' fit_meb, the estimators' solver='auto')."""
    from refimpl.meb import fit_meb
    assert verify.reference_engines() == {"ref": fit_meb}


FULL_SIZES, FULL_SEEDS, FULL_KERNELS, FULL_EPS = verify.VERIFY_GRIDS["full"]
CI_SEEDS = 3
CI_GRID = (tuple(m for m in FULL_SIZES if m < 300), CI_SEEDS, FULL_KERNELS, FULL_EPS)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("formulation", verify.FORMULATIONS)
def test_full_grid_without_its_largest_problems(formulation):
    """R^2 <= r*^2 <= (1+eps)^2 R^2 and the certificate, for both engines, against cvxopt."""
    rows = list(verify.verify_cases(CI_GRID, engines=engines(), formulations=(formulation,), progress=False))
    assert len(rows) == len(CI_GRID[0]) * CI_SEEDS * len(FULL_KERNELS) * 2 * len(FULL_EPS)
    bad = [f"{r['kernel']} m={r['m']} seed={r['seed']} {r['impl']} eps={r['eps']:g}: {r['reason']}"
           for r in rows if not r["ok"]]
    assert not bad, "\n".join(bad)
