"""Sparse high-dimensional input: m x 5,000 CSR rows at 1% density with a planted sparse linear
rule (:func:`refimpl.datasets.sparse_planted`), CVMClassifier (fast, ref) beside SVC on the same CSR data."""
import warnings

from sklearn.exceptions import ConvergenceWarning

D, DENSITY, C = 5000, 0.01, 10.0
M_SPARSE = [1_000, 5_000, 20_000]


class SparseCSR:
    """time_fit, peakmem_fit, time_predict, track_test_accuracy, track_n_support on CSR input."""

    param_names = ["impl", "m"]
    params = (["fast", "ref", "libsvm"], M_SPARSE)
    max_m = {"fast": 20_000, "ref": 1_000, "libsvm": 20_000}
    timeout = 3600
    number = 1
    repeat = (1, 3, 60.0)
    warmup_time = 0.0

    def setup(self, impl, m):
        if m > self.max_m[impl]:
            raise NotImplementedError(f"{impl} is not run above m={self.max_m[impl]:g}")
        from refimpl.datasets import sparse_planted
        X, y = sparse_planted(m + m // 4, D, DENSITY, 0)
        nt = m // 4
        self.X, self.y, self.Xt, self.yt = X[nt:], y[nt:], X[:nt], y[:nt]
        self.gamma = float(1.0 / (D * (self.X.multiply(self.X).mean() - self.X.mean() ** 2)))
        self.model = None

    def _fit(self, impl):
        if impl == "libsvm":
            from sklearn.svm import SVC
            est = SVC(C=C, gamma=self.gamma)
        else:
            from corevector import CVMClassifier
            est = CVMClassifier(C=C, gamma=self.gamma, random_state=0, impl=impl)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=ConvergenceWarning)  # SVC's max_iter notice, if any
            return est.fit(self.X, self.y)

    def _model(self, impl):
        if self.model is None:
            self.model = self._fit(impl)
        return self.model

    def time_fit(self, impl, m):
        self._fit(impl)

    def peakmem_fit(self, impl, m):
        self._fit(impl)

    def time_predict(self, impl, m):
        self._model(impl).predict(self.Xt)

    def track_test_accuracy(self, impl, m):
        return float(self._model(impl).score(self.Xt, self.yt))
    track_test_accuracy.unit = "accuracy"

    def track_n_support(self, impl, m):
        return int(len(self._model(impl).support_))
    track_n_support.unit = "vectors"
