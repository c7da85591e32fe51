"""SSVR-SRS (002) on Friedman3 over (impl, m): the sparse primal SVR, RSVM and LIBSVM's SVR."""
import numpy as np

from .common import EstimatorBenchmark, RegressionTracks, by_size

#: the paper's Friedman3 setting (Table 2: 240 basis functions), inputs scaled to [-1, 1]
N_BASIS, LAM, EPSILON, DELTA, GAMMA = 240, 1e-3, 0.05, 0.3, 1.0
SIZES = by_size([1_000, 10_000], [1_000, 10_000, 30_000])


def friedman3(m, seed):
    from refimpl.datasets import friedman
    X, y = friedman(int(m), which=3, random_state=seed)
    # fixed bounds of Friedman's input box, so that train and test share the scaling
    lo = np.array([0.0, 40 * np.pi, 0.0, 1.0])
    hi = np.array([100.0, 560 * np.pi, 1.0, 11.0])
    return 2 * (X - lo) / (hi - lo) - 1, y


class _RegressionTracks(RegressionTracks):
    def track_test_accuracy(self, cache, impl, m):
        """Test R^2 (the regressor's ``score``)."""
        return float(self.model.score(self.Xt, self.yt))
    track_test_accuracy.unit = "R^2"

    def track_n_support(self, cache, impl, m):
        """Basis functions (SSVR-SRS, RSVM) or support vectors (SVR)."""
        model = self.model
        return int(model.n_basis_) if hasattr(model, "n_basis_") else int(len(model.support_))
    track_n_support.unit = "vectors"


class _BasisTracks:
    def track_core_set_size(self, cache, impl, m):
        """The basis the model expands in (SSVR-SRS: chosen by sampled greedy selection; RSVM: at random)."""
        return int(self.model.n_basis_)
    track_core_set_size.unit = "basis functions"


class _SparseSVROnFriedman3(_BasisTracks, _RegressionTracks, EstimatorBenchmark):
    dataset = staticmethod(friedman3)
    selection = "srs"

    def make_estimator(self, impl):
        from corevector import SparseSVR
        return SparseSVR(n_basis=N_BASIS, lam=LAM, epsilon=EPSILON, delta=DELTA, gamma=GAMMA,
                         selection=self.selection, tol=0.0, random_state=0, impl=impl)


class SSVRSRSFriedman3(_SparseSVROnFriedman3):
    """SparseSVR (SSVR-SRS), 240 basis functions, |O| = 100."""

    params = (["ref", "fast"], SIZES)
    max_m = by_size({"ref": 1_000, "fast": 10_000}, {"ref": 30_000, "fast": 30_000})

    def setup_cache(self):
        return self.prepare_cache()


class RSVMFriedman3(_SparseSVROnFriedman3):
    """RSVM: random basis of the same size, same primal solver (fast implementation)."""

    params = (["fast"], SIZES)
    max_m = by_size({"fast": 10_000}, {"fast": 30_000})
    selection = "random"

    def setup_cache(self):
        return self.prepare_cache()


class SVRFriedman3(_RegressionTracks, EstimatorBenchmark):
    """scikit-learn's SVR (LIBSVM), the paper's full-SVR baseline."""

    params = (["libsvm"], SIZES)
    max_m = by_size({"libsvm": 0}, {"libsvm": 30_000})
    dataset = staticmethod(friedman3)

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from sklearn.svm import SVR
        return SVR(C=10.0, gamma=GAMMA, epsilon=EPSILON, cache_size=500)
