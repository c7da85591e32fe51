"""Implicit surfaces with CVR: a point cloud as the one-set f^-1(1) ([000], Sec. 4.2).

The scheme of the paper (after Schölkopf, Giesen & Spalinger 2005, as cited there):

* Only points *on* the surface are given.  Fitting the zero set f^-1(0) with an SVR is degenerate
  (w = 0, b = 0 fits every target 0), so the surface is modelled as the **one-set** f^-1(1): every
  point gets the target y = 1, and the bias b is penalised (the L2-SVR of eq. (6), see
  :mod:`refimpl.cvr`), so "f = 1 everywhere" through b alone costs b^2 = 1 and the kernel part
  carries the shape.  Away from the points the Laplacian expansion decays to b < 1, and inside the
  closed surface it sums the contributions of all sides (f > 1): f - 1 changes sign across the
  surface.
* **Multi-scale**: three CVRs with the Laplacian kernel k(x, y) = exp(-||x - y|| / sigma) and
  decreasing sigma.  Level 1 fits y = 1 with the largest sigma (a crude model); level l = 2, 3 fits
  the residual r_l(x_i) = 1 - f_{l-1}(x_i) of the sum of the previous levels, f_{l-1} = g_1 + ... +
  g_{l-1}.  The model is f = g_1 + g_2 + g_3 and the surface is the zero level of f - 1.
* **Target scale**.  The L2-SVR is not scale invariant (the 2 C epsbar term is linear in the
  targets, the rest quadratic): fitting targets s y with (C, mu) equals fitting y with (C / s,
  mu / s) up to the factor s.  Each level therefore fits its residual divided by its RMS s_l and
  the result is multiplied by s_l, so that a level's (C, mu) does not depend on how small the
  previous levels left the residual.
* **Parameters** (measured on the bunny, see ``reports/surface.py``; sigmas in units of the
  bounding-box diagonal): sigma = (0.15, 0.07, 0.035), C = (1, 100, 150), mu = 1e-6.
  - Level 1 needs C >~ 1: the one-set costs ||w||^2 + b^2 ~ 1 and the tube 2 C epsbar, so below
    C ~ 1 the tube width absorbs the constant target (epsbar -> 1, f -> 0: the degenerate
    solution the penalised bias is meant to avoid).  At C = 1 epsbar is a few 1e-3 and f exceeds 1
    inside the bunny by about 1e-2 (sigma 0.3), falling below 1 outside.  Larger C fits tighter
    with many more core vectors.
  - The residual levels fit zero-mean, rough targets: with C = 1 their tube covers everything
    (epsbar ~ 1.5, nothing fitted); C = 100-300 cuts the residual RMS 2-6x per level (C3 = 300
    instead of 150: residual RMS 4.1e-4 instead of 6.4e-4, 31% more CPU time on the 50,000-point
    bunny).
  - mu is the mean slack (eq. (9)).  If it exceeds the natural residual, epsbar = -mu/2 and every
    point is a support vector on both sides (kernel ridge regression); mu = 1e-6 keeps epsbar > 0
    and the model sparse.  Smaller mu barely changes the model and slows the QP.
  - Level-1 sigma 0.3 joins the ears by a membrane (the one-set has no off-surface points to say
    the gap between them is outside); 0.15 separates them.
* **Mesh**: f - 1 on a regular grid over the (padded) bounding box, then marching cubes
  (scikit-image).  Only blocks near the surface are evaluated at full resolution (see
  :func:`refimpl.isosurface.sample_grid`).

Coordinates are normalised before fitting (:func:`normalization`): centred on the bounding-box
centre and scaled to a unit bounding-box *diagonal*, so the sigmas are fractions of the diagonal
and the defaults work for any scan, whatever its units.

This module is the model: :func:`fit_multiscale` fits the levels, :func:`evaluate` sums them.  The
other steps live in their own modules and are imported here too, so that ``from refimpl.surface
import ...`` serves a whole script:

* :mod:`refimpl.mesh_io`: point clouds and meshes in PLY, XYZ, OFF and OBJ files, and the bunny
  (:func:`read_points`, :func:`read_mesh`, :func:`write_mesh`, :func:`load_bunny`);
* :mod:`refimpl.isosurface`: the grid, its narrow-band sampling and marching cubes
  (:func:`grid_axes`, :func:`sample_grid`, :func:`marching_cubes`) and mesh topology checks;
* :mod:`refimpl.render`: a mesh as a PNG (:func:`render`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .isosurface import (GRID_PADDING, boundary_edge_count, connected_components, grid_axes,
                         marching_cubes, sample_grid)
from .kernels import KernelSpec, kernel_expansion
from .mesh_io import bunny_path, load_bunny, read_mesh, read_points, write_mesh, write_obj, write_ply
from .render import render

#: default sigmas of the three levels, as fractions of the bounding-box diagonal
DEFAULT_SIGMAS = (0.15, 0.07, 0.035)
#: default C of the three levels and mu (each level fits its target divided by the target's RMS)
DEFAULT_C = (1.0, 100.0, 150.0)
DEFAULT_MU = 1e-6


def normalization(points):
    """(center, scale) with (points - center) / scale centred on the bounding box, unit diagonal."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    diag = float(np.linalg.norm(hi - lo))
    if not diag > 0:
        raise ValueError("points: all points coincide (the bounding box has zero size)")
    return (lo + hi) / 2.0, diag


@dataclass
class Level:
    """One CVR of the multi-scale model: g(x) = scale * (sum_t coef_t k_sigma(sv_t, x) + intercept)."""

    sigma: float
    support_vectors: np.ndarray
    coef: np.ndarray
    intercept: float
    scale: float              # the RMS of this level's targets (residuals); the CVR fits targets / scale
    n_core_vectors: int       # augmented points in the core set (as the paper's #CVs)
    n_support_vectors: int    # rows with lambda_i != lambda*_i (#SVs)
    fit_time: float           # seconds, wall clock, of the CVR fit
    cpu_time: float           # CPU seconds (all threads) of the CVR fit
    C: float = float("nan")
    mu: float = float("nan")
    n_iter: int = 0
    certified_ratio: float = float("nan")
    epsilon_bar: float = float("nan")
    residual_rms_before: float = float("nan")  # RMS of 1 - f on the points before this level
    residual_rms_after: float = float("nan")   # ... and after adding it

    @property
    def kernel(self) -> KernelSpec:
        return KernelSpec("laplacian", 1.0 / self.sigma)

    def evaluate(self, X, expansion=kernel_expansion):
        return self.scale * (expansion(self.kernel, self.support_vectors, self.coef, X) + self.intercept)


def fit_level_ref(X, y, sigma, C, mu, eps=1e-6, sample_size=59, random_state=None, n_confirm=30):
    """One CVR of the reference engine: (support, coef, intercept, diagnostics) for targets y."""
    from . import cvr
    from .meb import fit_meb
    spec = KernelSpec("laplacian", 1.0 / sigma)
    problem = cvr.cvr_problem(X, y, spec, C, mu)
    result = fit_meb(problem, eps, sample_size=sample_size, random_state=random_state, n_confirm=n_confirm)
    model = cvr.recover(problem, result, y, C)
    return model.support, model.coef, model.intercept, dict(
        n_core_vectors=len(result.core_set), n_iter=result.n_iter,
        certified_ratio=result.certified_ratio, epsilon_bar=model.epsilon_bar)


def fit_multiscale(X, sigmas, C, mu, fit_level=None, expansion=kernel_expansion, **fit_kwargs):
    """The three-level scheme of 000 Sec. 4.2 on normalised points X (n, 3); returns the list of Levels.

    ``C`` and ``mu`` are numbers or one per level.

    ``fit_level(X, y, sigma, C, mu, **fit_kwargs) -> (support, coef, intercept, diagnostics)`` fits one
    CVR (default :func:`fit_level_ref`); ``expansion`` evaluates kernel expansions.
    """
    fit_level = fit_level_ref if fit_level is None else fit_level
    X = np.ascontiguousarray(X, dtype=np.float64)
    f = np.zeros(X.shape[0])  # the model so far on the points
    levels = []
    Cs = np.broadcast_to(np.asarray(C, dtype=np.float64), (len(sigmas),))
    mus = np.broadcast_to(np.asarray(mu, dtype=np.float64), (len(sigmas),))
    for sigma, C_l, mu_l in zip(sigmas, Cs, mus):
        r = 1.0 - f  # level 1: the one-set targets y = 1
        scale = float(np.sqrt(np.mean(r * r)))
        if not scale > 0:  # the points are fitted exactly: nothing left for this level
            scale = 1.0
        t0, c0 = time.perf_counter(), time.process_time()
        support, coef, intercept, diag = fit_level(X, r / scale, float(sigma), float(C_l), float(mu_l),
                                                   **fit_kwargs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        lev = Level(sigma=float(sigma), support_vectors=X[support], coef=np.asarray(coef, dtype=np.float64),
                    intercept=float(intercept), scale=scale, n_support_vectors=len(support),
                    fit_time=wall, cpu_time=cpu, residual_rms_before=scale, C=float(C_l), mu=float(mu_l),
                    **diag)
        f = f + lev.evaluate(X, expansion)
        lev.residual_rms_after = float(np.sqrt(np.mean((1.0 - f) ** 2)))
        levels.append(lev)
    return levels


def evaluate(levels, X, expansion=kernel_expansion):
    """f(X) = sum of the levels (normalised coordinates)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    out = np.zeros(X.shape[0])
    for lev in levels:
        out += lev.evaluate(X, expansion)
    return out


__all__ = [
    # the model (this module)
    "DEFAULT_SIGMAS", "DEFAULT_C", "DEFAULT_MU", "Level", "normalization", "fit_level_ref", "fit_multiscale",
    "evaluate",
    # the other steps, from refimpl.mesh_io, refimpl.isosurface and refimpl.render
    "read_points", "read_mesh", "write_mesh", "write_ply", "write_obj", "bunny_path", "load_bunny",
    "GRID_PADDING", "grid_axes", "sample_grid", "marching_cubes", "boundary_edge_count", "connected_components",
    "render",
]
