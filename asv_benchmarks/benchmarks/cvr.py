"""CVR (000 Sec. 4.1) on Friedman #1 over (impl, m): time, core-set size, #SV, R^2 and RMSE on 2,000 test points."""
from .common import M_GRID, CoreSetTracks, EstimatorBenchmark, RegressionTracks, by_size

# C and mu as tuned by reports/cvr.py on a 2,000-point subset of Friedman #1 (gamma = 1/beta)
C, MU, EPS = 1e4, 0.01, 1e-6


def friedman1(m, seed):
    from refimpl.datasets import friedman
    return friedman(int(m), 1, random_state=seed)


class CVRFriedman1(CoreSetTracks, RegressionTracks, EstimatorBenchmark):
    """CVR with the default stop rule; the reference only up to 1e4 (its NumPy SMO beyond 1,000 SVs)."""

    params = (["ref", "fast"], M_GRID)
    max_m = by_size({"ref": 1_000, "fast": 10_000}, {"ref": 10_000, "fast": 100_000})
    dataset = staticmethod(friedman1)

    def setup_cache(self):
        return self.prepare_cache()

    def fit(self, impl, X, y):
        self._m = X.shape[0]  # the paper's (C, mu) fix the per-point weight C / (mu m) only with m known
        return super().fit(impl, X, y)

    def make_estimator(self, impl):
        from corevector import CVR
        return CVR.from_paper(C, MU, self._m, eps=EPS, random_state=0, impl=impl)


class SVRFriedman1(RegressionTracks, EstimatorBenchmark):
    """sklearn.svm.SVR (LIBSVM) at the same kernel width, the CVR paper's baseline."""

    params = (["libsvm"], M_GRID)
    max_m = by_size({"libsvm": 0}, {"libsvm": 30_000})
    dataset = staticmethod(friedman1)

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from sklearn.svm import SVR
        # gamma = 1/beta for 10 uniform features: beta = 2 * 10 / 12
        return SVR(C=100.0, epsilon=0.5, gamma=0.6, cache_size=1000)
