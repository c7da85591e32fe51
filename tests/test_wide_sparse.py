"""Sparse inputs with far more columns than entries (issue 26): the 40-byte LIBSVM file ``1 1:0.5 2000000000:1``
fits in a few MB, because nothing on the fit or predict path allocates an array with one entry per column.

The per-column quantities of the kernel checks (gamma='beta', the radial kernels' scale check) are computed
over the stored columns only (:func:`refimpl.kernels.stored_column_variances`,
:func:`refimpl.kernels.sparse_column_spans_sq_sum`), and the engines see the stored columns only
(:func:`refimpl.kernels.compact_columns`), which leaves every kernel value bit for bit as it was.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from corevector import CVDD, CVR, MEB, CVMClassifier
from corevector.cli.command import DEFAULT_SEED
from corevector.numerics import numerics
from refimpl.kernels import (COMPACT_MIN_COLUMNS, beta_heuristic, checked_kernel_spec, compact_columns,
                             kernel_block, make_kernel_spec, resolve_gamma, sparse_column_spans_sq_sum,
                             stored_column_variances)


def _wide(m, d, nnz_per_row, seed):
    rng = np.random.default_rng(seed)
    cols = rng.choice(d, size=3 * nnz_per_row, replace=False)  # few distinct columns, far apart
    rows = []
    for _ in range(m):
        c = np.sort(rng.choice(cols, size=nnz_per_row, replace=False))
        rows.append(sp.csr_matrix((rng.normal(size=nnz_per_row), c, [0, nnz_per_row]), shape=(1, d)))
    return sp.vstack(rows, format="csr")


@pytest.mark.parametrize("seed", range(4))
def test_per_column_statistics_match_the_dense_ones(seed):
    X = _wide(7, 40, 3, seed)
    if seed == 3:
        X = sp.csr_matrix(np.vstack([X.toarray(), np.abs(X.toarray()).max(0) + 1]))  # a column with no zero
    D = X.toarray()
    var = D.var(axis=0)
    stored = np.unique(X.indices)
    np.testing.assert_allclose(stored_column_variances(X), var[stored], rtol=1e-13, atol=1e-15)
    assert np.all(var[np.setdiff1d(np.arange(40), stored)] == 0)
    np.testing.assert_allclose(beta_heuristic(X), beta_heuristic(D), rtol=1e-13)
    np.testing.assert_allclose(sparse_column_spans_sq_sum(X), np.sum(np.ptp(D, axis=0) ** 2), rtol=1e-13)
    for gamma in ("beta", "scale"):
        s, t = checked_kernel_spec(X, "rbf", gamma, 3, 0.0, False), checked_kernel_spec(D, "rbf", gamma, 3, 0.0, False)
        assert s.gamma == pytest.approx(t.gamma, rel=1e-13)


def test_per_column_statistics_of_a_huge_column_index_take_no_per_column_memory():
    """O(nnz): a column index of 2e9 would take 16 GB in any array of one entry per column."""
    X = sp.csr_matrix(([0.5, 1.0, 1.0, 0.25], [0, 1_999_999_999, 0, 2], [0, 2, 4]), shape=(2, 2_000_000_000))
    assert stored_column_variances(X).shape == (3,)
    assert sparse_column_spans_sq_sum(X) == pytest.approx(0.5 ** 2 + 1 + 0.25 ** 2)
    spec = checked_kernel_spec(X, "rbf", "beta", 3, 0.0, False)
    assert spec.gamma == pytest.approx(1 / (2 * (0.0625 + 0.25 + 0.015625)))


def test_compact_columns_leaves_kernel_values_bit_for_bit(impl):
    d = COMPACT_MIN_COLUMNS + 12_345
    A, B = _wide(9, d, 4, 0), _wide(5, d, 4, 1)
    A2, B2 = compact_columns(A, B)
    assert A2.shape[1] < 24 and B2.shape[1] == A2.shape[1]
    small = A[:, :1000]
    assert compact_columns(small)[0] is small  # at most COMPACT_MIN_COLUMNS columns: left as it is
    coef = np.random.default_rng(0).normal(size=B.shape[0])
    for kernel in ("rbf", "laplacian", "poly", "linear"):
        spec = make_kernel_spec(A, kernel, 0.3, 3, 1.0)
        assert np.array_equal(kernel_block(spec, A2, B2), kernel_block(spec, A, B))
        expand = numerics(impl).kernel_expansion
        assert np.array_equal(expand(spec, B2, coef, A2), expand(spec, B, coef, A))


_UNDER_LIMIT = textwrap.dedent("""
    import contextlib, io, json, resource, sys
    import numpy as np, scipy.linalg
    from corevector.cli import command as cli
    # OpenBLAS allocates its buffers on the first BLAS call and retries a failed mmap forever (a hang, not an
    # error): both copies (NumPy's, SciPy's) are started before the limit, as part of the interpreter
    a = np.random.default_rng(0).random((64, 64)) + 64 * np.eye(64)
    scipy.linalg.cho_factor(a @ a.T); np.linalg.cholesky(a @ a.T)

    def vm_size():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))

    resource.setrlimit(resource.RLIMIT_AS, (vm_size() + int(sys.argv[1]) * 2**20, resource.RLIM_INFINITY))
    for argv in json.loads(sys.argv[2]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(argv)
        print(json.dumps([rc, out.getvalue(), err.getvalue()]), flush=True)
""")


def test_the_forty_byte_libsvm_file_fits_in_50_mb(tmp_path):
    """Issue 26: ``1 1:0.5 2000000000:1`` asked for a dense 15 GiB array.  Fit and predict now run under an
    address-space limit of 50 MB beyond the interpreter (RLIMIT_AS, which counts every mapping, touched or
    not), both implementations; both resolve gamma='scale' (cvr's 'select' below 10,000 rows) over all 2e9 columns."""
    data = tmp_path / "wide.libsvm"
    data.write_text("1 1:0.5 2000000000:1\n-1 1:1 3:0.25\n")
    assert data.stat().st_size == 35
    runs = []
    for estimator in ("cvm", "cvr"):
        for impl in ("fast", "ref"):
            model = str(tmp_path / f"{estimator}-{impl}.cvm")
            runs += [["fit", str(data), "--model", model, "--estimator", estimator, "--impl", impl],
                     ["predict", model, str(data)]]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", _UNDER_LIMIT, "50", json.dumps(runs)], capture_output=True,
                         text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stderr
    results = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(results) == len(runs)
    for argv, (rc, out, err) in zip(runs, results):
        assert rc == 0, (argv, err)
        if argv[0] == "fit":
            assert "on 2 x 2000000000 (libsvm)" in err
        else:
            pred = np.array(out.split(), dtype=float)
            if "cvr" in argv[1]:
                # the L2-SVR shrinks towards the mean at finite C: the CLI's model is the Python API's on
                # the stored columns (1, 3, 2e9), same seed
                narrow = np.array([[0.5, 0.0, 1.0], [1.0, 0.25, 0.0]])
                impl = "fast" if "fast" in argv[1] else "ref"
                # (at the wide file's width: 'scale' is 1 / (d Var X) over every one of its 2e9 columns)
                wide = sp.csr_matrix((np.array([0.5, 1.0, 1.0, 0.25]), np.array([0, 1999999999, 0, 2]),
                                      np.array([0, 2, 4])), shape=(2, 2_000_000_000))
                g = resolve_gamma("scale", wide, "rbf")
                want = CVR(impl=impl, random_state=DEFAULT_SEED, gamma=g).fit(narrow, [1.0, -1.0]).predict(narrow)
                assert np.sign(pred).tolist() == [1, -1], argv
                np.testing.assert_allclose(pred, want, rtol=1e-9, atol=1e-12, err_msg=str(argv))
            else:
                assert np.abs(pred - [1, -1]).max() < 1e-12, argv


@pytest.mark.parametrize("cls", [CVMClassifier, CVDD, MEB, CVR])
def test_wide_sparse_fit_equals_the_fit_on_its_stored_columns(cls, impl):
    """The engines fit on the stored columns (compact_columns): the same model as a fit on the matrix that
    holds those columns only, bit for bit, and predictions on wide rows equal predictions on narrow ones."""
    d = COMPACT_MIN_COLUMNS * 3
    X = _wide(40, d, 3, 2)
    y = np.where(X[:, np.unique(X.indices)[0]].toarray().ravel() > 0, 1, -1)
    if cls is CVR:
        y = y + 0.1 * np.arange(40) / 40
    (narrow,) = compact_columns(X)
    assert narrow.shape[1] <= 9
    kw = dict(impl=impl, random_state=0, gamma=0.5)
    wide_fit = cls(**kw).fit(X, y)
    narrow_fit = cls(**kw).fit(narrow, y)
    assert np.array_equal(wide_fit.support_, narrow_fit.support_)
    assert np.array_equal(wide_fit.dual_coef_, narrow_fit.dual_coef_)
    f = "predict" if cls is CVR else "decision_function"
    assert np.array_equal(getattr(wide_fit, f)(X), getattr(narrow_fit, f)(narrow))
