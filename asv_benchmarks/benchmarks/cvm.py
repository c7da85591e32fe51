"""CVM (001 Fig. 2 setting) and the sklearn SVC baseline on the checkerboard, binary and multi-class (one-vs-one),
and on overlapping Gaussians, over (impl, m)."""
import numpy as np

from .common import M_GRID, RADIUS_TOO_COARSE, CoreSetTracks, EstimatorBenchmark, by_size, checkerboard

C, GAMMA, EPS, SAMPLE_SIZE = 1e4, 1.0, 1e-6, 59


class _CVMOnCheckerboard(CoreSetTracks, EstimatorBenchmark):
    """CVMClassifier(gamma=1, C=1e4, eps=1e-6), 59 random candidates per iteration, under ``stop``."""

    params = (["ref", "fast"], M_GRID)
    stop = "radius"

    def make_estimator(self, impl):
        from corevector import CVMClassifier
        return CVMClassifier(C=C, gamma=GAMMA, eps=EPS, sample_size=SAMPLE_SIZE, random_state=0, impl=impl,
                             stop=self.stop)


class CVMCheckerboard(_CVMOnCheckerboard):
    """The paper's stop rule (stop='radius'); it warns that its slack is coarse at this width (expected)."""

    max_m = by_size({"ref": 10_000, "fast": 100_000}, {"ref": 100_000, "fast": 1_000_000})
    expected_warnings = (RADIUS_TOO_COARSE,)

    def setup_cache(self):
        return self.prepare_cache()


class CVMMarginCheckerboard(_CVMOnCheckerboard):
    """The margin-relative stop rule (converges to the exact L2-SVM: #SV grows with m)."""

    max_m = by_size({"ref": 10_000, "fast": 10_000}, {"ref": 10_000, "fast": 100_000})
    stop = "margin"

    def setup_cache(self):
        return self.prepare_cache()


class CVMBetaCheckerboard(CoreSetTracks, EstimatorBenchmark):
    """CVMClassifier(C=1e6, gamma='beta') with its other defaults: the papers' width 1/beta at the papers'
    C (a target of <= 2 s wall at m = 1M).  The d^2 of this wide kernel spread below single precision's
    error, so the fast engine screens its scans by the Taylor expansion of fastimpl/_taylor.h."""

    params = (["ref", "fast"], M_GRID)
    max_m = by_size({"ref": 10_000, "fast": 100_000}, {"ref": 10_000, "fast": 1_000_000})

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from corevector import CVMClassifier
        return CVMClassifier(C=1e6, gamma="beta", random_state=0, impl=impl)


def board_classes(m, seed, n_classes=4):
    """The checkerboard's cells labelled (floor(x1) + floor(x2)) mod n_classes: 4 classes in diagonal bands
    (6 one-vs-one pairs), each pair a checkerboard-like problem."""
    X, _ = checkerboard(m, seed)
    return X, ((np.floor(X[:, 0]) + np.floor(X[:, 1])) % n_classes).astype(int)


class CVMMulticlassBoard(CoreSetTracks, EstimatorBenchmark):
    """CVMClassifier(gamma=1, C=1e4) on 4 classes (one-vs-one: 6 pairs, fitted one after another on this one
    thread); the core set is the union of the pairs' core sets, the certified ratio the largest pair's."""

    params = (["ref", "fast"], M_GRID)
    max_m = by_size({"ref": 10_000, "fast": 100_000}, {"ref": 100_000, "fast": 1_000_000})
    dataset = staticmethod(board_classes)

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from corevector import CVMClassifier
        return CVMClassifier(C=C, gamma=GAMMA, random_state=0, impl=impl)


class SVCCheckerboard(EstimatorBenchmark):
    """sklearn.svm.SVC (LIBSVM, L1-SVM) with the same C and gamma: the baseline of 001 Fig. 2."""

    params = (["libsvm"], M_GRID)
    max_m = by_size({"libsvm": 0}, {"libsvm": 100_000})

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from sklearn.svm import SVC
        return SVC(C=C, gamma=GAMMA, cache_size=500)


def gaussians(m, seed):
    """Two overlapping Gaussians, x ~ N(2 y (1, 1), I_2), y in {0, 1} (Bayes accuracy ~92%)."""
    from refimpl.datasets import overlapping_gaussians
    return overlapping_gaussians(m, seed)


#: sizes of the overlapping-Gaussians benchmarks (m = 1k ... 100k)
M_GAUSS = by_size([1_000, 3_000, 10_000], [1_000, 3_000, 10_000, 30_000, 100_000])


class _CVMOnGaussians(CoreSetTracks, EstimatorBenchmark):
    dataset = staticmethod(gaussians)
    solver = "auto"

    def make_estimator(self, impl):
        from corevector import CVMClassifier
        return CVMClassifier(random_state=0, impl=impl, solver=self.solver)


class CVMGaussians(_CVMOnGaussians):
    """CVMClassifier() with its defaults on noisy, overlapping classes: the core set grows with m, so this
    tracks the cost of a new core vector (the default engine: batched violators, inexact inner QP)."""

    params = (["ref", "fast"], M_GAUSS)
    max_m = by_size({"ref": 1_000, "fast": 10_000}, {"ref": 3_000, "fast": 100_000})

    def setup_cache(self):
        return self.prepare_cache()


class CVMPapersLoopGaussians(_CVMOnGaussians):
    """The papers' loop on the same data (solver='smo': one core vector per iteration, the QP re-solved)."""

    params = (["fast"], M_GAUSS)
    max_m = by_size({"fast": 3_000}, {"fast": 10_000})
    solver = "smo"

    def setup_cache(self):
        return self.prepare_cache()


class SVCGaussians(EstimatorBenchmark):
    """sklearn.svm.SVC() with its defaults (LIBSVM): the baseline of the Gaussians targets."""

    params = (["libsvm"], M_GAUSS)
    max_m = by_size({"libsvm": 0}, {"libsvm": 100_000})
    dataset = staticmethod(gaussians)

    def setup_cache(self):
        return self.prepare_cache()

    def make_estimator(self, impl):
        from sklearn.svm import SVC
        return SVC(cache_size=500)
