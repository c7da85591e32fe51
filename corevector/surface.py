"""Implicit-surface modelling with CVR ([000], Sec. 4.2): the ``ImplicitSurface`` estimator.

The scheme (one-set f^-1(1), three Laplacian-kernel CVRs fitting successive residuals, marching
cubes) is documented in :mod:`refimpl.surface`; this module runs it with the :class:`~corevector.CVR`
estimator of either implementation and evaluates the model with the engine's parallel kernel
expansion.  Files are read and written by :mod:`refimpl.mesh_io`, meshes drawn by :mod:`refimpl.render`.

Example::

    from corevector.surface import ImplicitSurface
    from refimpl.mesh_io import load_bunny, write_mesh
    surf = ImplicitSurface(random_state=0).fit(load_bunny())
    verts, faces = surf.mesh(resolution=160)
    write_mesh("bunny.ply", verts, faces)
"""
from __future__ import annotations

import re
import time
import warnings
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, validate_parameter_constraints

from refimpl import isosurface
from refimpl import surface as _ref
from refimpl.meb import make_rng
from refimpl.progress import Steps

from ._validation import POSITIVE, check_eps, invalid_parameter, shared_constraints, store_params
from .regressor import CVR
from .numerics import numerics


def _check_points(points, name="points"):
    if sp.issparse(points):
        # 3-D points have no sparsity to exploit; scikit-learn's wording for estimators without sparse support
        raise TypeError(f"Sparse data was passed for {name}, but dense data is required (ImplicitSurface "
                        "fits (n, 3) points). Use '.toarray()' to convert to a dense numpy array.")
    try:
        P = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an (n, 3) array of numbers") from exc
    if P.ndim != 2 or P.shape[1] != 3:
        raise ValueError(f"{name} must have shape (n, 3), got {P.shape}")
    if not np.all(np.isfinite(P)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return np.ascontiguousarray(P)


def _check_extent(P):
    """ValueError when the points' bounding-box diagonal (the normalisation's scale) is not a normal float64:
    points * 1e300 gave scale = inf and a model that is 0 everywhere, points * 1e-300 "all points coincide"."""
    ext = np.ptp(P, axis=0)
    with np.errstate(over="ignore", under="ignore"):
        diag = float(np.sqrt(np.sum(ext * ext)))
    if np.any(ext > 0) and not np.finfo(np.float64).tiny <= diag <= np.finfo(np.float64).max:
        raise ValueError(f"points are of a scale float64 cannot hold: the bounding box's squared diagonal "
                         f"{float(np.sum(ext * ext)) if np.isfinite(diag) else float('inf'):.3g} over- or "
                         "underflows; rescale the points (the model is fitted on them scaled to a unit diagonal)")


class _LevelCVR(CVR):
    """The CVR of one level: the problems its fit finds are told in ImplicitSurface's parameters (the paper's C
    and mu of [000] eq. (6), one per level; ImplicitSurface has no normalize_y and no mu='auto'), and
    :meth:`ImplicitSurface._fit_level` puts the level in front of them."""

    #: a level whose fit removes less than this fraction of its targets' mean square is flat (the class
    #: example's levels remove 42% and 54%, the torus of the API page's 21% and 24%)
    FLAT_R2 = 0.01

    def _stall_hint(self):
        return "; this level's C is likely too large for these points: lower it"

    @staticmethod
    def _baseline_mse(y, weights):
        # a level is measured against leaving its targets as they are (predicting 0): level 1's one-set targets
        # are constant, and a residual level's worth is the residual it removes (Level.residual_rms_after)
        return float(np.average(y * y, weights=weights))

    def _warn_fit(self, kind, **f):
        m = f.get("m", f.get("M"))
        C = 2.0 * float(self.C) * float(self.mu) * m  # the paper's C of the level (CVR.from_paper)
        r2 = f"R^2 = {f['r2']:.3g} against predicting 0" if np.isfinite(f.get("r2", np.nan)) else ""
        if kind == "C_lowered":
            msg = (f"C={C:g} is beyond what float64 resolves in the MEB form for {m:g} points; the level was fitted "
                   f"with C={2.0 * f['C'] * f['mu'] * m:.3g}, where the fit no longer depends on C; pass a smaller C")
        elif kind == "degenerate":
            msg = (f"degenerate tube, epsilon_bar = {f['ebar']:.3g} < 0 (every point is a support vector with both "
                   f"slacks active): mu={f['mu']:g} exceeds the level's mean error; lower mu")
        elif kind == "unfinished":
            msg = (f"the fit ended far from its optimum: epsilon_bar = {f['ebar']:.3g} < 0 with {f['n_sv']} support "
                   f"vectors of {f['m']} points; use a smaller eps" + (" or stop='margin'" if self.stop == "radius"
                                                                       else ""))
        elif kind == "flat":
            msg = (f"the level leaves its targets almost as they are ({r2}, epsilon_bar = {f['ebar']:.3g} with "
                   f"{f['n_sv']} support vectors of {f['m']} points): its tube absorbs them because its weight "
                   f"C={C:g} is too small; raise C")
        else:  # worse_than_mean (here: worse than leaving the targets as they are)
            msg = (f"the level makes its targets' residual larger ({r2}); use a smaller eps, or change this "
                   "level's entry of sigmas or C")
        warnings.warn(msg, ConvergenceWarning, stacklevel=4)


#: what an engine warning says of an option ImplicitSurface does not have, and what it says instead
_ENGINE_TERMS = ((re.compile(r"max_iter=(\d+)"), r"its iteration bound (\1)"),
                 (re.compile(r"before reaching tol\b"), "before reaching its tolerance"))


class ImplicitSurface(BaseEstimator):
    """A 3-D point cloud modelled as the one-set of three multi-scale Laplacian CVRs ([000] Sec. 4.2).

    Only points on the surface are given, so every point gets the target 1 and the surface is the
    one-set ``f^-1(1)`` of ``f = f_1 + f_2 + f_3``: level 1 (the widest kernel) fits y = 1 on every
    point (the penalised bias of the L2-SVR rules out the degenerate w = 0, b = 0), levels 2 and 3 fit
    the residual ``1 - f`` with narrower kernels.  :meth:`mesh` extracts the surface by marching cubes
    on a narrow band of a grid.  scikit-learn style (``get_params``, ``set_params`` and ``clone`` work);
    ``fit(points)`` takes the (n, 3) surface points only: there are no targets.

    Parameters
    ----------
    sigmas : sequence of 3 floats, default=(0.15, 0.07, 0.035)
        Laplacian kernel widths (``k = exp(-||x - y|| / sigma)``) of the three levels, as fractions of
        the bounding-box diagonal of the points (which are centred and scaled to a unit diagonal
        first).
    C : float or sequence of 3 floats, default=(1, 100, 150)
        The L2-SVR C of [000] eq. (6), per level.  Each level fits its targets divided by their RMS
        (the residuals shrink from level to level).  Level 1 needs C of about 1 or more (below, the
        tube width absorbs the constant target and f shrinks towards 0); the residual levels need C
        of about 100 or more to fit anything.  Larger C: tighter fit, more core vectors, slower.
    mu : float or sequence of 3 floats, default=1e-6
        The mean slack of eqs. (6)-(9).  Keep it below the residual level (else ``epsbar = -mu/2`` and
        every point becomes a support vector, which warns).  There is no 'auto'.
    eps : float, default=1e-6
        The ``(1 + eps)`` tolerance of the core-set loop (the paper's value); in (0, 1), and in
        (0, sqrt(3) - 1) under ``stop='margin'``.
    stop : {'radius', 'margin', 'gap', 'hybrid'}, default='radius'
        The core-set loop's stopping rule (see :class:`CVR`).  'radius' is the paper's
        ``(1 + eps)``-ball test, used for the Table 2 reproduction and the defaults above; 'margin'
        measures eps against the margin term only: far stricter here (the one-set's margin term is
        small against ``R^2``) and several times slower on the bunny.
    sample_size : int or None, default=59
        Random candidates per core-set iteration (the paper's probabilistic speed-up).
    n_confirm : int, default=30
        Clean samples needed to stop (see :class:`CVR`).
    resolution : int, default=128
        Grid cells along the longest side of the (padded) bounding box for :meth:`mesh` (rounded up
        to a multiple of the narrow band's block on every axis).
    narrow_band : bool, default=True
        Evaluate f at full resolution only near the surface (``refimpl.isosurface.sample_grid``).
    random_state : int, RandomState instance, Generator or None, default=None
        Seed of the three levels' core-set loops.
    impl : {'fast', 'ref'}, default='fast'
        The CVR engine and kernel expansion: compiled (fast) or the NumPy reference.
    verbose : bool, default=False
        Show a progress bar over the three levels.

    Attributes
    ----------
    levels_ : list of Level
        Per level (``refimpl.surface.Level``): sigma, support vectors, coefficients, #CVs, #SVs, fit
        time, CPU time, certified ratio, residual RMS before and after.
    n_core_vectors_ : int
        Core vectors over the three levels (Table 2's #CVs).
    n_support_vectors_ : int
        Support vectors over the three levels (Table 2's #SVs).
    n_points_ : int
        Number of points fitted.
    fit_time_ : float
        Wall-clock seconds of the whole fit.
    fit_cpu_time_ : float
        CPU seconds (all threads) of the whole fit.
    center_ : ndarray of shape (3,)
        The normalisation's center: points are mapped to ``(x - center_) / scale_``.
    scale_ : float
        The normalisation's scale, the points' bounding-box diagonal.
    bounds_ : tuple of 2 ndarrays of shape (3,)
        The normalised points' bounding box (lower and upper corner), which :meth:`mesh` pads.
    mesh_info_ : dict
        Set by :meth:`mesh`: resolution, cell size, grid shape, grid nodes evaluated, timings,
        vertex and face counts.

    See Also
    --------
    CVR : The regressor each level is.

    Notes
    -----
    Defaults: sigma = (0.15, 0.07, 0.035) times the diagonal, C = (1, 100, 150), mu = 1e-6, and the
    paper's ``stop='radius'`` with its loop (``solver='smo'``, one core vector per iteration), chosen
    by measurement on the Stanford bunny (``refimpl.surface``).

    A level whose fit goes wrong warns with the level and its sigma, in this estimator's parameters: a
    tube of negative width (lower mu), a fit the loop ended far from its optimum (a smaller eps), a
    level that leaves its targets almost as they are, removing less than 1% of their mean square (its
    tube absorbs them: raise C), or one that makes the residual larger.  A level is judged against the
    residual it leaves, not the targets' mean: the example below has level-2 R^2 -0.13 against the
    mean while that level lowers the residual's RMS by a quarter.  Meshes are written and drawn by
    ``refimpl.mesh_io.write_mesh`` and ``refimpl.render.render``.

    References
    ----------
    .. [000] I. W. Tsang, J. T. Kwok and K. T. Lai. Core Vector Regression for Very Large Regression Problems.
       Proceedings of the 22nd International Conference on Machine Learning (ICML), pp. 912-919, 2005.

    Examples
    --------
    A scan of the unit sphere, with 1% noise:

    >>> import numpy as np
    >>> from corevector import ImplicitSurface
    >>> rng = np.random.default_rng(0)
    >>> u = rng.normal(size=(500, 3))
    >>> points = u / np.linalg.norm(u, axis=1, keepdims=True) * (1 + 0.01 * rng.normal(size=(500, 1)))
    >>> surf = ImplicitSurface(random_state=0).fit(points)
    >>> bool(surf.decision_function([[0.0, 0.0, 0.0]])[0] > 0)  # the center is inside
    True
    >>> verts, faces = surf.mesh(resolution=24)
    >>> verts.shape[1], faces.shape[1], len(faces) > 0
    (3, 3, True)
    >>> [row["level"] for row in surf.summary()]
    [1, 2, 3, 'total']
    """

    _parameter_constraints: dict = {
        **shared_constraints("eps", "stop", "sample_size", "n_confirm", "random_state", "impl", "verbose"),
        # sequences: each value is checked by _per_level
        "sigmas": ["array-like"],
        "C": [POSITIVE, "array-like"],
        "mu": [POSITIVE, "array-like"],
        "resolution": [Interval(Integral, 2, None, closed="left")],
        "narrow_band": ["boolean"],
    }

    def __init__(self, *, sigmas=_ref.DEFAULT_SIGMAS, C=_ref.DEFAULT_C, mu=_ref.DEFAULT_MU, eps=1e-6,
                 stop="radius", sample_size=59, n_confirm=30, resolution=128, narrow_band=True,
                 random_state=None, impl="fast", verbose=False):
        store_params(self, locals())

    # -- parameters ------------------------------------------------------------------------------
    def _per_level(self, name, value):
        """The 3 per-level values of ``name``: one per level, or (C, mu) one positive number for all."""
        scalar_ok = name != "sigmas"
        arr = np.asarray(value, dtype=object)
        vals = [value] * 3 if scalar_ok and arr.ndim == 0 else list(arr.ravel())
        if len(vals) != 3 or not all(POSITIVE.is_satisfied_by(v) for v in vals):
            scalar = f"{POSITIVE} or " if scalar_ok else ""
            raise invalid_parameter(self, name, f"{scalar}3 values (one per level), each {POSITIVE}", value)
        return [float(v) for v in vals]

    # -- fitting ---------------------------------------------------------------------------------
    def _fit_level(self, X, y, sigma, C, mu, random_state=None, level=None):
        # the papers' loop (one core vector per iteration, as in 000 Sec. 4.2): CVR's default solver='auto'
        # adds every violator of a sample at once, which on these Laplacian levels gave 1.5-1.7x the core
        # vectors for the same support vectors and 6.7x the CPU time (10,000 bunny points: 14.7 s against
        # 2.2 s; the 50,000-point fit took 149-165 s instead of the ~25 s measured with the earlier engine)
        # C and mu are the paper's (000 eq. (6)) on the raw targets
        cvr = _LevelCVR.from_paper(C, mu, X.shape[0], eps=self.eps, stop=self.stop, kernel="laplacian",
                                   gamma=1.0 / sigma, sample_size=self.sample_size, n_confirm=self.n_confirm,
                                   random_state=random_state, solver="smo", impl=self.impl)
        # CVR.fit rejects constant targets; the one-set targets y = 1 are this formulation's point
        # (the penalised bias rules out w = 0, b = 0), so call the validated-input entry point.  Its warnings
        # are the level's: each is told with the level, in ImplicitSurface's parameters
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cvr._fit(X, y)
        # the level's width is an entry of sigmas: told as a value, not as a parameter 'sigma' it does not have
        where = f"ImplicitSurface level {level} (sigmas[{level - 1}] = {sigma:g})" if level else \
            f"ImplicitSurface (sigma {sigma:g})"
        for w in caught:
            text = str(w.message)
            for pattern, repl in _ENGINE_TERMS:
                text = pattern.sub(repl, text)
            warnings.warn(f"{where}: {text}", w.category, stacklevel=5)
        return cvr.support_, cvr.dual_coef_[0], float(cvr.intercept_[0]), dict(
            n_core_vectors=len(cvr.core_set_), n_iter=int(cvr.n_iter_),
            certified_ratio=float(cvr.certified_ratio_), epsilon_bar=float(cvr.epsilon_bar_))

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, points, y=None):
        """Fit the three levels on the surface points.

        Parameters
        ----------
        points : array-like of shape (n_points, 3)
            Points on the surface (at least 2, finite).
        y : None
            Ignored; there are no targets (every point's target is 1).

        Returns
        -------
        ImplicitSurface
            The fitted estimator (``self``).
        """
        sigmas, Cs, mus = (self._per_level(name, getattr(self, name)) for name in ("sigmas", "C", "mu"))
        check_eps(self, self.eps, self.stop)
        P = _check_points(points)
        if P.shape[0] < 2:
            raise ValueError(f"points must hold at least 2 points, got {P.shape[0]}")
        _check_extent(P)
        self.center_, self.scale_ = _ref.normalization(P)
        X = np.ascontiguousarray((P - self.center_) / self.scale_)
        self.bounds_ = (X.min(axis=0), X.max(axis=0))
        # one seed per level, drawn up front, so ref and fast see the same draws
        seeds = make_rng(self.random_state).integers(0, 2**31 - 1, size=len(sigmas))
        expansion = numerics(self.impl).kernel_expansion
        t0, c0 = time.perf_counter(), time.process_time()
        it = iter(seeds)
        number = iter(range(1, len(sigmas) + 1))
        with Steps(self.verbose, f"ImplicitSurface ({self.impl}) levels", len(sigmas), unit="level") as bar:
            def fit_level(X_, y_, s_, C_, mu_):
                out = self._fit_level(X_, y_, s_, C_, mu_, int(next(it)), level=next(number))
                bar.step(sigma=s_, core_set=out[3]["n_core_vectors"])
                return out
            self.levels_ = _ref.fit_multiscale(X, sigmas, Cs, mus, expansion=expansion, fit_level=fit_level)
        self.fit_time_ = time.perf_counter() - t0
        self.fit_cpu_time_ = time.process_time() - c0
        levels = self.levels_
        self.n_core_vectors_ = int(sum(lv.n_core_vectors for lv in levels))
        self.n_support_vectors_ = int(sum(lv.n_support_vectors for lv in levels))
        self.n_points_ = P.shape[0]
        return self

    # -- evaluation ------------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "levels_"):
            raise ValueError("this ImplicitSurface is not fitted yet; call fit(points) first")

    def _f_normalised(self, X):
        expansion = numerics(self.impl).kernel_expansion
        return _ref.evaluate(self.levels_, X, expansion)

    def score_samples(self, X):
        """Evaluate the model f, the sum of the three levels.

        Parameters
        ----------
        X : array-like of shape (n_samples, 3)
            Points to evaluate, in the input's coordinates.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``f(X)``: 1 on the modelled surface, above 1 inside, below outside.
        """
        self._check_fitted()
        X = _check_points(X, "X")
        return self._f_normalised((X - self.center_) / self.scale_)

    def decision_function(self, X):
        """Evaluate ``f - 1``, the signed implicit function of the surface.

        Parameters
        ----------
        X : array-like of shape (n_samples, 3)
            Points to evaluate, in the input's coordinates.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``f(X) - 1``: zero on the modelled surface, positive inside, negative outside.
        """
        return self.score_samples(X) - 1.0

    def mesh(self, resolution=None):
        """Extract the surface ``f^-1(1)`` as a triangle mesh by marching cubes.

        The grid spans the points' bounding box padded by 5% of its diagonal, with ``resolution``
        cubic cells along its longest side; sets ``mesh_info_``.

        Parameters
        ----------
        resolution : int, default=None
            Grid cells along the longest side (at least 2); None uses the ``resolution`` parameter.

        Returns
        -------
        verts : ndarray of shape (n_vertices, 3)
            Vertex coordinates, in the input's coordinates.
        faces : ndarray of shape (n_faces, 3)
            Vertex indices of each triangle.
        """
        self._check_fitted()
        res = self.resolution if resolution is None else resolution
        validate_parameter_constraints({"resolution": self._parameter_constraints["resolution"]},
                                       {"resolution": res}, caller_name="ImplicitSurface.mesh")
        block = 8 if res >= 64 else 4
        axes, h = isosurface.grid_axes(*self.bounds_, res, multiple=block)
        t0 = time.perf_counter()
        values, n_eval = isosurface.sample_grid(lambda Z: self._f_normalised(Z) - 1.0, axes, block=block,
                                                narrow_band=self.narrow_band)
        t1 = time.perf_counter()
        verts, faces = isosurface.marching_cubes(values, axes, 0.0)
        t2 = time.perf_counter()
        self.mesh_info_ = dict(resolution=res, cell_size=h * self.scale_, grid_shape=values.shape,
                               grid_nodes=int(values.size), nodes_evaluated=int(n_eval),
                               grid_time=t1 - t0, marching_cubes_time=t2 - t1,
                               n_vertices=len(verts), n_faces=len(faces))
        if len(faces) == 0:
            warnings.warn(f"ImplicitSurface.mesh(resolution={res}) found no surface: f - 1 changes sign nowhere on "
                          f"the grid, whose cells ({h * self.scale_:.3g} wide) are coarser than the model's "
                          f"features; raise resolution (the default is {self.resolution})", UserWarning,
                          stacklevel=2)
        return verts * self.scale_ + self.center_, faces

    def summary(self):
        """Summarise the fit per level, as the paper's Table 2.

        Returns
        -------
        list of dict
            One dict per level (keys ``level``, ``sigma``, ``sigma_abs``, ``C``, ``mu``,
            ``target_rms``, ``n_cv``, ``n_sv``, ``n_iter``, ``fit_time``, ``cpu_time``,
            ``certified_ratio``, ``epsilon_bar``, ``residual_rms_after``) and a last one with
            ``level='total'`` (#CVs, #SVs, times, final residual RMS).
        """
        self._check_fitted()
        rows = [dict(level=i + 1, sigma=lv.sigma, sigma_abs=lv.sigma * self.scale_, C=lv.C, mu=lv.mu,
                     target_rms=lv.scale,
                     n_cv=lv.n_core_vectors, n_sv=lv.n_support_vectors, n_iter=lv.n_iter,
                     fit_time=lv.fit_time, cpu_time=lv.cpu_time, certified_ratio=lv.certified_ratio,
                     epsilon_bar=lv.epsilon_bar, residual_rms_after=lv.residual_rms_after)
                for i, lv in enumerate(self.levels_)]
        rows.append(dict(level="total", n_cv=self.n_core_vectors_, n_sv=self.n_support_vectors_,
                         fit_time=self.fit_time_, cpu_time=self.fit_cpu_time_,
                         residual_rms_after=self.levels_[-1].residual_rms_after))
        return rows
