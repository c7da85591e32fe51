"""CVM (001 Fig. 2 setting) and the sklearn SVC baseline on the checkerboard, over (impl, m)."""
from .common import M_GRID, CoreSetTracks, EstimatorBenchmark

C, GAMMA, EPS, SAMPLE_SIZE = 1e4, 1.0, 1e-6, 59


class CVMCheckerboard(CoreSetTracks, EstimatorBenchmark):
    """CVMClassifier, gamma=1, C=1e4, eps=1e-6, 59 random candidates per iteration, the paper's stop rule."""

    params = (["ref", "fast"], M_GRID)
    max_m = {"ref": 100_000, "fast": 1_000_000}

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from fastimpl import CVMClassifier
        return CVMClassifier(C=C, gamma=GAMMA, eps=EPS, sample_size=SAMPLE_SIZE, random_state=0, impl=impl,
                             stop="radius")


class CVMCheckerboardMargin(CoreSetTracks, EstimatorBenchmark):
    """The same with the default margin-relative stop rule (converges to the exact L2-SVM: #SV grows with m)."""

    params = (["ref", "fast"], M_GRID)
    max_m = {"ref": 10_000, "fast": 100_000}

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from fastimpl import CVMClassifier
        return CVMClassifier(C=C, gamma=GAMMA, eps=EPS, sample_size=SAMPLE_SIZE, random_state=0, impl=impl,
                             stop="margin")


class SVCCheckerboard(EstimatorBenchmark):
    """sklearn.svm.SVC (LIBSVM, L1-SVM) with the same C and gamma: the baseline of 001 Fig. 2."""

    params = (["libsvm"], M_GRID)
    max_m = {"libsvm": 100_000}

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from sklearn.svm import SVC
        return SVC(C=C, gamma=GAMMA, cache_size=500)
