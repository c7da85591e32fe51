"""Shared pieces of the corevector benchmarks.

A benchmark of a new algorithm is a few declarative lines in its own module::

    class CVRFriedman(CoreSetTracks, EstimatorBenchmark):
        params = (["ref", "fast"], M_GRID)
        max_m = by_size({"ref": 1e3, "fast": 1e4}, {"ref": 1e4, "fast": 1e6})
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
size is generated once in ``setup_cache`` (pickled into asv's cache folder) and every model the
``time_predict`` / ``track_*`` benchmarks read is fitted there, once per parameter set, so that
``time_fit`` and ``peakmem_fit`` are the only benchmarks that fit.

**Sizes.**  The default grid is the regression check's (a whole run of the suite in minutes); with the
environment variable ``COREVECTOR_BENCH_SIZES=full`` every class adds its larger m (``by_size``), and the
scikit-learn baselines (``impl='libsvm'``, which measure no code of this project) run.

**What a time is.**  Every ``time_*`` benchmark measures CPU seconds of the benchmark process
(``timer = time.process_time``) with OpenMP and BLAS limited to one thread (:func:`one_thread`): on a
shared machine wall time follows the other jobs (the same fit took 0.21-0.37 s wall against 0.155-0.164 s
CPU on 2 busy cores), while the work a commit does is what a regression check asks about.  Parallel
speed-ups are the reports' business (``reports/``).

**Samples.**  A sample averages ``number`` calls, chosen per parameter set from the time one call took
in ``setup_cache`` (:data:`SAMPLE_SECONDS` of CPU per sample, at most :data:`MAX_NUMBER` calls).  On a shared
machine the cost of the same call drifts with the other jobs by 10-25% from one minute to the next, more
than between the samples of one minute: so a benchmark takes its samples in :data:`ROUNDS` rounds, which asv
spreads over the whole run (round 1 of every benchmark, then round 2, ...), a few samples each
(:data:`REPEAT`), and its quartiles measure that drift too.  ``setup`` keeps what it loaded in the process
(:func:`loaded`), since asv runs it again before every timed call, and warms the process up there: one fit of
a small subset, one prediction; so no timed call is a process's first (``warmup_time = 0``), and
``time_predict`` times warm, repeated calls.

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
import time
import warnings
from pathlib import Path

import numpy as np

try:  # asv with --python=same imports the package from the current interpreter
    import corevector  # noqa: F401
except ImportError:  # a plain checkout: use the working tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import corevector  # noqa: F401

from sklearn.exceptions import ConvergenceWarning  # noqa: E402

#: 'full' (COREVECTOR_BENCH_SIZES=full): every class adds its larger training-set sizes
FULL = os.environ.get("COREVECTOR_BENCH_SIZES", "").strip().lower() == "full"


def by_size(default, full):
    """``full`` under COREVECTOR_BENCH_SIZES=full, else ``default``."""
    return full if FULL else default


#: training-set sizes (log-spaced); each class caps them per implementation with max_m
M_GRID = by_size([1_000, 10_000, 100_000], [1_000, 10_000, 30_000, 100_000, 1_000_000])
N_TEST = 2_000
SEED = 0
#: CPU seconds a time sample aims at (``number`` calls of a fast function are averaged into one sample)
SAMPLE_SECONDS = 0.05
MAX_NUMBER = 5000
#: rounds of a time benchmark (each in a process of its own, spread over the run) and samples per round:
#: (at least, at most, seconds after which a round stops once it has the least)
ROUNDS = 6
REPEAT = (2, 5, 1.0)
#: rows of the warm-up fit in ``setup``
WARM_ROWS = 200
#: the warning of ``stop='radius'`` when its slack is coarse against the margin (refimpl.driver
#: ``warn_if_radius_too_coarse``): expected in the papers' setting gamma = 1, C = 1e4, eps = 1e-6
RADIUS_TOO_COARSE = (ConvergenceWarning, r"stop='radius' with eps=")


def checkerboard(m, seed):
    """The 4 x 4 checkerboard of 001 Sec. 5.1."""
    from refimpl.datasets import checkerboard as cb
    return cb(int(m), random_state=seed)


_ONE_THREAD = []


def one_thread():
    """OpenMP and BLAS limited to one thread in this process (once; the engine's extension is loaded first,
    so that threadpoolctl sees its OpenMP runtime)."""
    if not _ONE_THREAD:
        import fastimpl._engine  # noqa: F401
        from threadpoolctl import threadpool_limits
        _ONE_THREAD.append(threadpool_limits(limits=1))


def cpu_seconds(func):
    """(CPU seconds of one call of ``func``, its result)."""
    t0 = time.process_time()
    out = func()
    return time.process_time() - t0, out


def calls_per_sample(seconds):
    """``number`` for a function whose call took ``seconds`` of CPU: SAMPLE_SECONDS per sample."""
    return int(min(MAX_NUMBER, max(1, round(SAMPLE_SECONDS / max(seconds, 1e-6)))))


def set_number(method, number):
    """asv reads a benchmark's ``number`` from the function first, after ``setup``: set it per parameter set."""
    method.__func__.number = int(number)


_LOADED = {}


def loaded(key, load):
    """``load()`` once per process and key: asv runs ``setup`` again before every timed call."""
    if key not in _LOADED:
        _LOADED[key] = load()
    return _LOADED[key]


def warm_up(call):
    """``call()`` once, its warnings and errors ignored: the code paths of a fit, loaded and run once in this
    process before any timed call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            call()
        except Exception:  # noqa: BLE001  (a subset the estimator rejects warms nothing: no harm)
            pass


def forget(key):
    """What :func:`loaded` kept under ``key`` (None if nothing), no longer kept."""
    return _LOADED.pop(key, None)


class EstimatorBenchmark(abc.ABC):
    """time_fit, peakmem_fit, time_predict, track_test_accuracy, track_n_support over (impl, m)."""

    param_names = ["impl", "m"]
    params = ([], [])
    #: impl -> largest m to run
    max_m = {}
    #: (m, seed) -> (X, y)
    dataset = staticmethod(checkerboard)
    timeout = 1800
    timer = staticmethod(time.process_time)
    number = 1
    rounds = ROUNDS
    repeat = REPEAT
    warmup_time = 0.0  # (setup warms up)
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

    def predict(self, model, X):
        """What ``time_predict`` times."""
        return model.predict(X)

    def data(self, m):
        """(X, y, X_test, y_test) of size m: ``dataset(m, SEED)`` and a shared test set."""
        X, y = self.dataset(m, SEED)
        Xt, yt = self.dataset(N_TEST, SEED + 10_000)
        return X, y, Xt, yt

    def _combos(self):
        impls, sizes = self.params
        return [(impl, m) for impl in impls for m in sizes if m <= self.max_m.get(impl, 0)]

    def prepare_cache(self):
        """Every data set once (pickled), the models used by predict/track fitted once per parameter set,
        and the CPU seconds of one fit and one prediction (they set ``number``).

        Call it from the subclass' own ``setup_cache`` (see the module docstring)."""
        one_thread()
        files, models, seconds = {}, {}, {}
        for m in sorted({m for _, m in self._combos()}):
            files[m] = os.path.abspath(f"{type(self).__name__}_{m}.pkl")
            with open(files[m], "wb") as f:
                pickle.dump(self.data(m), f, protocol=pickle.HIGHEST_PROTOCOL)
        for impl, m in self._combos():
            with open(files[m], "rb") as f:
                X, y, Xt, yt = pickle.load(f)
            t_fit, model = cpu_seconds(lambda: self.fit(impl, X, y))
            if t_fit < 1.0:  # the first fit of a process pays for its imports: time a second one
                t_fit = cpu_seconds(lambda: self.fit(impl, X, y))[0]
            self.predict(model, Xt)
            t_pred = cpu_seconds(lambda: self.predict(model, Xt))[0]
            models[(impl, m)] = pickle.dumps(model)
            seconds[(impl, m)] = (t_fit, t_pred)
        return {"owner": type(self).__name__, "files": files, "models": models, "seconds": seconds}

    def setup(self, cache, impl, m):
        if m > self.max_m.get(impl, 0):
            raise NotImplementedError(f"{impl} is not run above m={self.max_m.get(impl, 0):g}")
        if cache.get("owner") != type(self).__name__:
            raise RuntimeError(f"{type(self).__name__} received the setup_cache of {cache.get('owner')}: "
                               "define `def setup_cache(self): return self.prepare_cache()` in the class")
        one_thread()
        self.X, self.y, self.Xt, self.yt, self.model = loaded((type(self).__name__, impl, m),
                                                              lambda: self._load(cache, impl, m))
        t_fit, t_pred = cache["seconds"][(impl, m)]
        set_number(self.time_fit, calls_per_sample(t_fit))
        set_number(self.time_predict, calls_per_sample(t_pred))

    def _load(self, cache, impl, m):
        with open(cache["files"][m], "rb") as f:
            X, y, Xt, yt = pickle.load(f)
        model = pickle.loads(cache["models"][(impl, m)])
        self.predict(model, Xt)  # warm: the timed calls are not the model's first
        warm_up(lambda: self.fit(impl, X[:WARM_ROWS], None if y is None else y[:WARM_ROWS]))
        return X, y, Xt, yt, model

    def time_fit(self, cache, impl, m):
        self.fit(impl, self.X, self.y)

    def peakmem_fit(self, cache, impl, m):
        self.fit(impl, self.X, self.y)

    def time_predict(self, cache, impl, m):
        self.predict(self.model, self.Xt)

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
           "FULL", "by_size", "checkerboard", "one_thread", "cpu_seconds", "calls_per_sample", "set_number",
           "loaded", "forget", "warm_up", "ROUNDS", "REPEAT"]
