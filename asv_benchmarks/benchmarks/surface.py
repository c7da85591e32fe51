"""The implicit surface of the Stanford bunny ([000] Sec. 4.2, Table 2): the
three-level CVR fit and the narrow-band marching cubes, on a random subsample and on all 50,000 points.

Needs the project's ``data`` extra (pymeshfix ships the bunny scan; scikit-image does marching cubes).
"""
import pickle

import numpy as np

from . import common  # noqa: F401  (puts the working tree on sys.path when needed)

SEED = 0
RESOLUTION = 128


def bunny(n):
    from refimpl.surface import load_bunny
    pts = load_bunny()
    if n < len(pts):
        pts = pts[np.random.default_rng(SEED).choice(len(pts), n, replace=False)]
    return pts


class BunnySurface:
    """ImplicitSurface (defaults: sigmas 0.15/0.07/0.035 of the diagonal, C 1/100/150, mu 1e-6), fast engine."""

    param_names = ["n_points"]
    params = [[5_000, 50_000]]
    timeout = 1200
    number = 1
    repeat = (1, 3, 120.0)
    warmup_time = 0.0

    def setup_cache(self):
        try:
            from corevector.surface import ImplicitSurface
            return {n: pickle.dumps(ImplicitSurface(random_state=SEED).fit(bunny(n))) for n in self.params[0]}
        except ImportError as exc:  # the data extra (pymeshfix, scikit-image) is not installed
            return {"missing": str(exc)}

    def setup(self, cache, n):
        if "missing" in cache:
            raise NotImplementedError(cache["missing"])
        self.points = bunny(n)
        self.model = pickle.loads(cache[n])

    def time_fit(self, cache, n):
        from corevector.surface import ImplicitSurface
        ImplicitSurface(random_state=SEED).fit(self.points)

    def time_mesh(self, cache, n):
        self.model.mesh(resolution=RESOLUTION)

    def track_n_core_vectors(self, cache, n):
        return int(self.model.n_core_vectors_)
    track_n_core_vectors.unit = "vectors"

    def track_n_support_vectors(self, cache, n):
        return int(self.model.n_support_vectors_)
    track_n_support_vectors.unit = "vectors"
