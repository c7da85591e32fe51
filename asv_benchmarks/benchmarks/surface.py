"""The implicit surface of the Stanford bunny ([000] Sec. 4.2, Table 2): the three-level CVR fit of m of its
points and the narrow-band marching cubes, over (impl, m).  2,000 points are held out before the
subsample is drawn; ``track_test_rmse`` is the RMS of ``f - 1`` on them (0 on the modelled surface).

Needs the project's ``data`` extra (pymeshfix ships the bunny scan; scikit-image does marching cubes);
without it every combination is skipped.
"""
import numpy as np

from .common import N_TEST, SEED, CoreSetTracks, EstimatorBenchmark, by_size

RESOLUTION = 128
#: the bunny has 50,000 points, N_TEST of them held out
M_SURFACE = by_size([1_000, 5_000], [1_000, 5_000, 20_000, 48_000])


def bunny_split(m):
    """(m training points, None, N_TEST held-out points, None); ImportError without the data extra."""
    from refimpl.surface import load_bunny
    pts = load_bunny()
    order = np.random.default_rng(SEED).permutation(len(pts))
    return pts[order[N_TEST:N_TEST + int(m)]], None, pts[order[:N_TEST]], None


class BunnySurface(CoreSetTracks, EstimatorBenchmark):
    """ImplicitSurface (defaults: sigmas 0.15/0.07/0.035 of the diagonal, C 1/100/150, mu 1e-6, the papers'
    loop); track_core_set_size and track_n_support sum the three levels.  The reference runs in the full sizes
    only (8 s of CPU at m = 1,000)."""

    params = (["ref", "fast"], M_SURFACE)
    max_m = by_size({"ref": 0, "fast": 5_000}, {"ref": 5_000, "fast": 48_000})

    def setup_cache(self):
        try:
            return self.prepare_cache()
        except ImportError as exc:  # the data extra (pymeshfix, scikit-image) is not installed
            return {"owner": type(self).__name__, "missing": str(exc)}

    def setup(self, cache, impl, m):
        if "missing" in cache:
            raise NotImplementedError(cache["missing"])
        super().setup(cache, impl, m)

    def data(self, m):
        return bunny_split(m)

    def make_estimator(self, impl):
        from corevector import ImplicitSurface
        return ImplicitSurface(random_state=SEED, impl=impl)

    def predict(self, model, X):
        return model.decision_function(X)

    def time_mesh(self, cache, impl, m):
        self.model.mesh(resolution=RESOLUTION)

    def track_core_set_size(self, cache, impl, m):
        return int(self.model.n_core_vectors_)
    track_core_set_size.unit = "vectors"

    def track_n_support(self, cache, impl, m):
        return int(self.model.n_support_vectors_)
    track_n_support.unit = "vectors"

    track_test_accuracy = None  # (no classes: track_test_rmse says how well f fits)

    def track_certified_ratio(self, cache, impl, m):
        return float(max(level.certified_ratio for level in self.model.levels_))
    track_certified_ratio.unit = "ratio"

    def track_test_rmse(self, cache, impl, m):
        return float(np.sqrt(np.mean(self.model.decision_function(self.Xt) ** 2)))
    track_test_rmse.unit = "RMS of f - 1"
