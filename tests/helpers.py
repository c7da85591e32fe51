"""Shared test helpers (plain functions, no fixtures): random problems, the engines by name, the
independent exact solver.  Fixtures live in conftest.py; tests import these with ``from helpers import ...``."""
import numpy as np

from refimpl import cvm, cvr
from refimpl.exact_qp import exact_meb as _exact_meb
from refimpl.kernels import make_kernel_spec

FORMULATIONS = ("meb", "one_class", "two_class", "cvr")


def random_regression(m, d, seed):
    """A smooth target with noise: y = sin(x_1) + x_2 / 2 + N(0, 0.1^2)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, min(1, d - 1)] + 0.1 * rng.normal(size=m)
    return X, y


def random_weights(m, seed, low=0.2, high=5.0):
    """Per-point weights w_i in [low, high) (scikit-learn's sample_weight), log-uniform, from their own stream."""
    rng = np.random.default_rng([seed, 7])
    return np.exp(rng.uniform(np.log(low), np.log(high), m))


def random_problem(formulation, kernel, m=120, d=3, C=10.0, seed=0, mu=0.5, weighted=False, **kernel_opts):
    """A random MEB problem of the formulation; 'cvr' has 2m augmented points (000 eq. (8)).
    ``weighted``: per-point C_i = C w_i (:func:`random_weights`; the hard MEB has no C and ignores it)."""
    w = random_weights(m, seed) if weighted else None
    if formulation == "cvr":
        X, y = random_regression(m, d, seed)
        return cvr.cvr_problem(X, y, make_kernel_spec(X, kernel, **kernel_opts), C, mu, w)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    spec = make_kernel_spec(X, kernel, **kernel_opts)
    if formulation == "meb":
        return cvm.svdd_problem(X, spec)
    if formulation == "one_class":
        return cvm.one_class_problem(X, spec, C, w)
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=m) > 0, 1.0, -1.0)
    return cvm.two_class_problem(X, y, spec, C, w)


def exact_meb(problem):
    """(lower, upper, alpha*) around r*^2 from the exact dual solver (refimpl.exact_qp, cvxopt).

    It shares problem.block/linear_term with the engine, so it checks the solver, not the
    formulation; tests/test_oracles.py checks the formulation against primal problems."""
    return _exact_meb(problem)


def engine(impl):
    """The ``fit_meb`` of an implementation ('fast' or 'ref')."""
    from corevector.numerics import numerics

    return numerics(impl).fit_meb


def engines(impls=("fast", "ref")):
    """{impl: fit_meb} for :func:`refimpl.verify.verify_cases`."""
    return {impl: engine(impl) for impl in impls}


class _Missing:
    """An optional dependency that is not installed: the first use of one of its names skips the test that
    uses it, so that a module of tests skips only the tests that need what is missing."""

    def __init__(self, name, reason):
        self._name, self._reason = name, reason

    def __getattr__(self, attr):
        if attr.startswith("_"):  # (pytest's and inspect's own probes)
            raise AttributeError(attr)
        import pytest
        pytest.skip(f"needs {self._name}: {self._reason}")


def optional(name):
    """The module ``name``, or a stand-in whose use skips the test (:class:`_Missing`): per dependency, where
    ``pytest.importorskip`` at a module's top would skip all of its tests when any one is missing."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        return _Missing(name, str(exc) or "not installed")


def quick_worker_starts():
    """A dask config (``with``) under which a LocalCluster's worker processes fork from a server that imported
    corevector already (a worker starts, or restarts after a kill, in a fraction of the time), and a killed
    worker is not retired while its nanny starts it again (after 15 s, distributed's default, a worker killed
    twice in a row may be restarting when its first loss is looked at again).  The tests' clusters only."""
    import dask
    from distributed.utils import get_mp_context
    config = dask.config.set({"distributed.deploy.lost-worker-timeout": "1h",
                              "distributed.worker.multiprocessing-method": "forkserver"})
    get_mp_context().set_forkserver_preload(["distributed", "dask.array", "corevector", "corevector.chunked.methods",
                                             "corevector.chunked.scans", "corevector.chunked.staged_rows"])
    return config
