"""Sparse high-dimensional input: m x 5,000 CSR rows at 1% density with a planted sparse linear
rule (:func:`refimpl.datasets.sparse_planted`), CVMClassifier (fast, ref) beside SVC on the same CSR data."""
from sklearn.exceptions import ConvergenceWarning

from .common import N_TEST, CoreSetTracks, EstimatorBenchmark, by_size

D, DENSITY, C = 5000, 0.01, 10.0
M_SPARSE = by_size([500, 2_000], [500, 2_000, 5_000, 20_000])


def planted(m):
    """(X, y, X_test, y_test): m + N_TEST rows of one planted rule, the first N_TEST held out."""
    from refimpl.datasets import sparse_planted
    X, y = sparse_planted(m + N_TEST, D, DENSITY, 0)
    return X[N_TEST:], y[N_TEST:], X[:N_TEST], y[:N_TEST]


def width(X):
    """gamma = 1 / (d Var(X)), sklearn's 'scale', from the CSR matrix without densifying it."""
    return float(1.0 / (D * (X.multiply(X).mean() - X.mean() ** 2)))


class _OnCSR(EstimatorBenchmark):
    params = ([], M_SPARSE)

    def data(self, m):
        return planted(m)

    def fit(self, impl, X, y):
        self._gamma = width(X)
        return super().fit(impl, X, y)


class SparseCSR(CoreSetTracks, _OnCSR):
    """CVMClassifier(C=10, gamma='scale' of the data) with its other defaults, on CSR rows."""

    params = (["fast", "ref"], M_SPARSE)
    max_m = by_size({"fast": 2_000, "ref": 500}, {"fast": 20_000, "ref": 5_000})

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from corevector import CVMClassifier
        return CVMClassifier(C=C, gamma=self._gamma, random_state=0, impl=impl)


class SVCSparse(_OnCSR):
    """sklearn.svm.SVC with the same C and gamma on the same CSR rows."""

    params = (["libsvm"], M_SPARSE)
    max_m = by_size({"libsvm": 0}, {"libsvm": 20_000})
    expected_warnings = ((ConvergenceWarning, "Solver terminated early"),)  # SVC's max_iter notice, if any

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from sklearn.svm import SVC
        return SVC(C=C, gamma=self._gamma)
