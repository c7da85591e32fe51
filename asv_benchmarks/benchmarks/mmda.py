"""MMDA(CVM) feature extraction (004 Sec. V setting: Gaussian kernel with the paper's beta, C = 1,
eps = 1e-3) on the checkerboard, over (impl, m): fit time, memory, transform time, core-set size."""
from .common import M_GRID, EstimatorBenchmark


class MMDACheckerboard(EstimatorBenchmark):
    """fastimpl.MMDA with 3 directions; track_n_support counts the expansion points of all features."""

    params = (["ref", "fast"], M_GRID)
    max_m = {"ref": 10_000, "fast": 100_000}

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from fastimpl import MMDA
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
