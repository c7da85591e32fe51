"""MMDA(CVM) feature extraction (004 Sec. V setting: Gaussian kernel with the paper's beta, C = 1,
eps = 1e-3) on the checkerboard, over (impl, m): fit time, memory, transform time, core-set size;
and the sampled distance scan of the fast implementation against the size m of the data it draws from."""
import time

import numpy as np

from .common import M_GRID, REPEAT, ROUNDS, EstimatorBenchmark, by_size, calls_per_sample, cpu_seconds, loaded, one_thread, set_number


class MMDACheckerboard(EstimatorBenchmark):
    """corevector.MMDA with 3 directions; track_n_support counts the expansion points of all features."""

    params = (["ref", "fast"], M_GRID)
    max_m = by_size({"ref": 10_000, "fast": 100_000}, {"ref": 10_000, "fast": 1_000_000})

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from corevector import MMDA
        return MMDA(n_components=3, C=1.0, eps=1e-3, random_state=0, impl=impl)

    def predict(self, model, X):
        return model.transform(X)

    def track_test_accuracy(self, cache, impl, m):
        """1-NN accuracy on the extracted features."""
        from sklearn.neighbors import KNeighborsClassifier
        knn = KNeighborsClassifier(1).fit(self.model.transform(self.X), self.y)
        return float(knn.score(self.model.transform(self.Xt), self.yt))
    track_test_accuracy.unit = "accuracy"

    def track_n_support(self, cache, impl, m):
        return int(sum(len(p) for p in self.model.expansion_index_))
    track_n_support.unit = "vectors"

    def track_core_set_size(self, cache, impl, m):
        return int(self.model.core_set_size_.max())
    track_core_set_size.unit = "vectors"

    def track_certified_ratio(self, cache, impl, m):
        return float(self.model.certified_ratio_.max())
    track_certified_ratio.unit = "ratio"


class MMDASampledScan:
    """The hot path of MMDA(CVM)'s fast implementation: one sampled scan of the constrained core-set
    loop (004 eq. (23), ``FastConstrainedOps.furthest``), 59 candidates against n_sv support vectors
    in d = 16 (pendigits' shape: ~240 support vectors on average, ~6,000 scans per N_c features),
    with s projected directions, the candidates drawn from m points."""

    params = ([1_000, 10_000, 100_000], [50, 300], [0, 2])
    param_names = ["m", "n_sv", "s"]
    timer = staticmethod(time.process_time)
    rounds = ROUNDS
    repeat = REPEAT
    warmup_time = 0.0

    def setup(self, m, n_sv, s):
        one_thread()
        self.args, number = loaded((m, n_sv, s), lambda: self._build(m, n_sv, s))
        set_number(self.time_furthest, number)

    @staticmethod
    def _build(m, n_sv, s):
        from fastimpl._mmda import FastConstrainedOps
        from refimpl import cvm
        from refimpl.constrained_meb import ConstrainedMEBProblem, Projections
        from refimpl.kernels import make_kernel_spec
        rng = np.random.default_rng(0)
        d = 16
        X = rng.normal(size=(m, d))
        y = np.where(rng.random(m) < 0.1, 1, -1).astype(np.int8)
        spec = make_kernel_spec(X, "rbf", "beta")
        E = rng.choice(m, 300, replace=False)
        B = np.linalg.qr(rng.normal(size=(300, s)))[0] if s else np.zeros((0, 0))
        proj = Projections(X[E], B) if s else Projections.empty(d)
        ops = FastConstrainedOps(ConstrainedMEBProblem(cvm.two_class_problem(X, y, spec, 1.0), proj))
        S = rng.choice(m, n_sv, replace=False)
        alpha = rng.random(n_sv)
        args = (ops, rng.integers(0, m, size=59), S, alpha, rng.normal(size=s), float(alpha.sum()))
        _furthest(args)  # its tables, once
        return args, calls_per_sample(min(cpu_seconds(lambda: _furthest(args))[0] for _ in range(3)))

    def time_furthest(self, m, n_sv, s):
        _furthest(self.args)


def _furthest(args):
    ops, idx, S, alpha, gamma, total = args
    ops.furthest(idx, S, alpha, gamma, total, 0.5)
