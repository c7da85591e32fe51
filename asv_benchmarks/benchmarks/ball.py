"""The balls: CVDD (the one-class L2-SVM of 001 Sec. 3.1) and MEB (the minimum enclosing ball itself) on three
Gaussian blobs in the plane, over (impl, m).  Accuracy is that of ``predict`` on 2,000 held-out blob points
(+1) and the uniform points of the box around them farther than 3 standard deviations from every center (-1)."""
import numpy as np

from .common import M_GRID, N_TEST, SEED, CoreSetTracks, EstimatorBenchmark, by_size

CENTERS = np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 3.5]])


def blobs(m, seed):
    """m points of three unit Gaussians (CENTERS, equal shares); every label +1."""
    rng = np.random.default_rng(seed)
    return CENTERS[rng.integers(0, len(CENTERS), int(m))] + rng.normal(size=(int(m), 2)), np.ones(int(m), int)


def blobs_with_outliers(seed):
    """N_TEST blob points (+1) and the uniform points of [-4, 8]^2 among N_TEST farther than 3 from every
    center (-1)."""
    X, y = blobs(N_TEST, seed)
    U = np.random.default_rng(seed + 1).uniform(-4.0, 8.0, size=(N_TEST, 2))
    U = U[np.min(np.linalg.norm(U[:, None] - CENTERS[None], axis=2), axis=1) > 3.0]
    return np.vstack([X, U]), np.r_[y, -np.ones(len(U), int)]


class _Ball(CoreSetTracks, EstimatorBenchmark):
    dataset = staticmethod(blobs)

    def data(self, m):
        X, y = blobs(m, SEED)
        return (X, y) + blobs_with_outliers(SEED + 10_000)

    def track_test_accuracy(self, cache, impl, m):
        """Share of the held-out blob points predicted +1 and of the outliers predicted -1."""
        return float(np.mean(self.model.predict(self.Xt) == self.yt))
    track_test_accuracy.unit = "accuracy"


class CVDDBlobs(_Ball):
    """CVDD(C=100, gamma='scale') with its other defaults (eps = 1e-4, stop='margin')."""

    params = (["ref", "fast"], M_GRID)
    max_m = by_size({"ref": 10_000, "fast": 100_000}, {"ref": 10_000, "fast": 1_000_000})

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from corevector import CVDD
        return CVDD(C=100.0, gamma="scale", random_state=0, impl=impl)


class MEBBlobs(_Ball):
    """MEB(gamma='scale') with its defaults (eps = 1e-6, the paper's stop='radius'): the ball encloses every
    training point, so its accuracy counts how many outliers it also holds."""

    params = (["ref", "fast"], M_GRID)
    max_m = by_size({"ref": 10_000, "fast": 100_000}, {"ref": 100_000, "fast": 1_000_000})

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from corevector import MEB
        return MEB(gamma="scale", random_state=0, impl=impl)
