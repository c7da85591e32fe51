"""Shared pieces of the corevector benchmarks.

A benchmark of a new algorithm is a few declarative lines in its own module::

    class CVRFriedman(CoreSetTracks, EstimatorBenchmark):
        params = (["ref", "fast"], M_GRID)
        max_m = {"ref": 1e4, "fast": 1e6}
        dataset = staticmethod(friedman)            # (m, seed) -> (X, y)

        def setup_cache(self):                      # required: one line, see below
            return self.prepare_cache()

        def make_estimator(self, impl):
            return CVR(C=1e4, eps=1e-6, impl=impl, random_state=0)

asv identifies a ``setup_cache`` by its source location, so an inherited one would be shared by
every class (and the second class would receive the first one's data): each concrete class
defines its own one-line ``setup_cache`` calling ``prepare_cache``.

Parameters are ``(impl, m)``; combinations with m above ``max_m[impl]`` are skipped by raising
NotImplementedError in ``setup`` (asv's convention for impossible combinations).  The data of every
size is generated once in ``setup_cache`` (saved as .npy files in asv's cache folder) and the
models needed by the ``time_predict`` / ``track_*`` benchmarks are fitted there too, so that
``time_fit`` and ``peakmem_fit`` are the only benchmarks that fit.

The mixins are abstract (``make_estimator`` is an abstractmethod), and asv does not collect
abstract classes; a subclass becomes a benchmark as soon as it defines ``make_estimator``.

Every fit goes through :meth:`EstimatorBenchmark.fit`, which silences the warnings listed in the
class' ``expected_warnings`` (category, message regex) and only those: the paper's settings raise a
warning by design (e.g. ``stop='radius'`` at eps = 1e-6), and asv would print it at every repeat.

Class names are chosen so that none is contained in another: ``asv run --bench NAME`` (a regular
expression searched in ``module.Class.method``) then selects that class alone.
"""
import abc
import os
import pickle
import sys
import warnings
from pathlib import Path

import numpy as np

try:  # asv with --python=same imports the package from the current interpreter
    import corevector  # noqa: F401
except ImportError:  # a plain checkout: use the working tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sklearn.exceptions import ConvergenceWarning  # noqa: E402

#: training-set sizes (log-spaced); each class caps them per implementation with max_m
M_GRID = [1_000, 10_000, 30_000, 100_000, 1_000_000]
N_TEST = 2_000
SEED = 0
#: the warning of ``stop='radius'`` when its slack is coarse against the margin (refimpl.driver
#: ``warn_if_radius_too_coarse``): expected in the papers' setting gamma = 1, C = 1e4, eps = 1e-6
RADIUS_TOO_COARSE = (ConvergenceWarning, r"stop='radius' with eps=")


def checkerboard(m, seed):
    """The 4 x 4 checkerboard of 001 Sec. 5.1."""
    from refimpl.datasets import checkerboard as cb
    return cb(int(m), random_state=seed)


class EstimatorBenchmark(abc.ABC):
    """time_fit, peakmem_fit, time_predict, track_test_accuracy, track_n_support over (impl, m)."""

    param_names = ["impl", "m"]
    params = ([], [])
    #: impl -> largest m to run
    max_m = {}
    #: (m, seed) -> (X, y)
    dataset = staticmethod(checkerboard)
    timeout = 1200
    # one fit per sample is plenty for fits that take seconds (asv defaults to many)
    number = 1
    repeat = (1, 3, 60.0)
    warmup_time = 0.0
    #: (warning category, message regex) pairs a fit of this benchmark raises by design: silenced
    expected_warnings = ()

    @abc.abstractmethod
    def make_estimator(self, impl):
        """A fresh, unfitted estimator for implementation ``impl``."""

    def fit(self, impl, X, y):
        """A fresh estimator fitted to (X, y), with the ``expected_warnings`` (and no others) silenced."""
        with warnings.catch_warnings():
            for category, message in self.expected_warnings:
                warnings.filterwarnings("ignore", message=message, category=category)
            return self.make_estimator(impl).fit(X, y)

    def _combos(self):
        impls, sizes = self.params
        return [(impl, m) for impl in impls for m in sizes if m <= self.max_m.get(impl, 0)]

    def prepare_cache(self):
        """Generate every training set once (to .npy files) and fit the models used by predict/track.

        Call it from the subclass' own ``setup_cache`` (see the module docstring)."""
        Xt, yt = self.dataset(N_TEST, SEED + 10_000)
        files, models = {}, {}
        for m in sorted({m for _, m in self._combos()}):
            X, y = self.dataset(m, SEED)
            name = f"{type(self).__name__}_{m}"
            np.save(name + "_X.npy", X)
            np.save(name + "_y.npy", y)
            files[m] = os.path.abspath(name)
        for impl, m in self._combos():
            X, y = np.load(files[m] + "_X.npy"), np.load(files[m] + "_y.npy")
            models[(impl, m)] = pickle.dumps(self.fit(impl, X, y))
        return {"owner": type(self).__name__, "files": files, "models": models, "Xt": Xt, "yt": yt}

    def setup(self, cache, impl, m):
        if m > self.max_m.get(impl, 0):
            raise NotImplementedError(f"{impl} is not run above m={self.max_m.get(impl, 0):g}")
        if cache.get("owner") != type(self).__name__:
            raise RuntimeError(f"{type(self).__name__} received the setup_cache of {cache.get('owner')}: "
                               "define `def setup_cache(self): return self.prepare_cache()` in the class")
        self.X = np.load(cache["files"][m] + "_X.npy")
        self.y = np.load(cache["files"][m] + "_y.npy")
        self.Xt, self.yt = cache["Xt"], cache["yt"]
        self.model = pickle.loads(cache["models"][(impl, m)])

    def time_fit(self, cache, impl, m):
        self.fit(impl, self.X, self.y)

    def peakmem_fit(self, cache, impl, m):
        self.fit(impl, self.X, self.y)

    def time_predict(self, cache, impl, m):
        self.model.predict(self.Xt)

    def track_test_accuracy(self, cache, impl, m):
        return float(self.model.score(self.Xt, self.yt))
    track_test_accuracy.unit = "accuracy"

    def track_n_support(self, cache, impl, m):
        return int(len(self.model.support_))
    track_n_support.unit = "vectors"


class CoreSetTracks(abc.ABC):
    """track_core_set_size and track_certified_ratio for the MEB-based estimators."""

    @abc.abstractmethod
    def make_estimator(self, impl):
        """See EstimatorBenchmark."""

    def track_core_set_size(self, cache, impl, m):
        return int(len(self.model.core_set_))
    track_core_set_size.unit = "vectors"

    def track_certified_ratio(self, cache, impl, m):
        """(r_cert / R)^2 from the final full scan; <= (1+eps)^2 is guaranteed only with sample_size=None."""
        return float(np.max(self.model.certified_ratio_))
    track_certified_ratio.unit = "ratio"


class RegressionTracks(abc.ABC):
    """track_test_rmse for the regressors: root mean squared error on the test points."""

    @abc.abstractmethod
    def make_estimator(self, impl):
        """See EstimatorBenchmark."""

    def track_test_rmse(self, cache, impl, m):
        return float(np.sqrt(np.mean((self.model.predict(self.Xt) - self.yt) ** 2)))
    track_test_rmse.unit = "RMSE"


__all__ = ["EstimatorBenchmark", "CoreSetTracks", "RegressionTracks", "M_GRID", "N_TEST", "RADIUS_TOO_COARSE",
           "checkerboard"]
