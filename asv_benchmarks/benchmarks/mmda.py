"""MMDA(CVM) feature extraction (004 Sec. V setting: Gaussian kernel with the paper's beta, C = 1,
eps = 1e-3) on the checkerboard, over (impl, m): fit time, memory, transform time, core-set size;
and the sampled distance scan of the fast implementation."""
import numpy as np

from .common import M_GRID, EstimatorBenchmark


class MMDACheckerboard(EstimatorBenchmark):
    """corevector.MMDA with 3 directions; track_n_support counts the expansion points of all features."""

    params = (["ref", "fast"], M_GRID)
    max_m = {"ref": 10_000, "fast": 100_000}

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from corevector import MMDA
        return MMDA(n_components=3, C=1.0, eps=1e-3, random_state=0, impl=impl)

    def time_predict(self, cache, impl, m):
        self.model.transform(self.Xt)

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
    with s projected directions."""

    params = ([50, 300, 1000], [0, 2])
    param_names = ["n_sv", "s"]

    def setup(self, n_sv, s):
        from fastimpl._mmda import FastConstrainedOps
        from refimpl import cvm
        from refimpl.constrained_meb import ConstrainedMEBProblem, Projections
        from refimpl.kernels import make_kernel_spec
        rng = np.random.default_rng(0)
        m, d = 7494, 16
        X = rng.normal(size=(m, d))
        y = np.where(rng.random(m) < 0.1, 1, -1).astype(np.int8)
        spec = make_kernel_spec(X, "rbf", "beta")
        E = rng.choice(m, 300, replace=False)
        B = np.linalg.qr(rng.normal(size=(300, s)))[0] if s else np.zeros((0, 0))
        proj = Projections(X[E], B) if s else Projections.empty(d)
        self.ops = FastConstrainedOps(ConstrainedMEBProblem(cvm.two_class_problem(X, y, spec, 1.0), proj))
        self.S = rng.choice(m, n_sv, replace=False)
        self.alpha = rng.random(n_sv)
        self.gamma = rng.normal(size=s)
        self.idx = rng.integers(0, m, size=59)
        self.ops.furthest(self.idx, self.S, self.alpha, self.gamma, float(self.alpha.sum()), 0.5)  # tables

    def time_furthest(self, n_sv, s):
        self.ops.furthest(self.idx, self.S, self.alpha, self.gamma, float(self.alpha.sum()), 0.5)
