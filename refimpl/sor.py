"""SOR for the core-set sub-problem of MMDA ([004], Sec. IV-C, Algorithms 2-3).

On a core set S_t of t points and s previous directions, the constrained MEB of S_t is found
through the MMDA sub-problem (3) restricted to S_t, written as the bound-constrained QP (36)

    min_x  1/2 x' G_t x - b' x     s.t.  alpha_t >= 0,       x = [alpha_t; gamma_t],  b = [1; 0]

with G_t of eq. (38):  G_t = [[K~_t, Phi~_t'U~], [U~'Phi~_t, U~'U~]]  (pd by Property 1).  Unlike
the constrained MEB dual (21), (3) has no equality constraint 1'alpha = 1, so it can be solved
coordinate-wise by successive overrelaxation (Mangasarian & Musicant [28]).  With the gradient
g = G_t x - b, the change of coordinate i is (eqs. (37), (39)-(41))

    Delta x_i = -g_i / [G_t]_ii,

and Algorithm 3 evaluates the relaxed, projected changes of *all* coordinates

    delta alpha_i = max(0, alpha_i + omega Delta alpha_i) - alpha_i    (step 3, i <= t)
    delta gamma_q = omega Delta gamma_q                                 (step 4)

then moves only the one with the largest |delta| (step 5, the largest-change rule of [27];
near-ties within a relative TIE go to the lowest index, as in ``simplex_qp``) and updates g by
that column of G_t.  It stops when the KKT conditions of Sec. IV-C2 hold to ``tol``:

    g_alpha >= -tol,  alpha_i g_i ~ 0  (|g_i| <= tol where alpha_i > 0),  |g_gamma| <= tol,

measured as the natural residual |delta_i| [G_t]_ii / omega, which is |g_i| except at a bound.
The caller chooses ``tol`` in units of g (see ``constrained_meb``: |g_l| 2 / 1'alpha is the gap
between core vector l's squared distance to the center and R^2).  ``fastimpl._mmda.sor_solve``
runs the same steps in C.
"""
from __future__ import annotations

import numpy as np

from .simplex_qp import TIE

#: SOR steps allowed per core-set QP, as a multiple of the number of variables t + s
SOR_STEPS_PER_VARIABLE = 500


def sor_step_bound(n_vars: int) -> int:
    """The bound on SOR steps for one core-set QP (both implementations use it)."""
    return SOR_STEPS_PER_VARIABLE * n_vars + 1000


def sor_changes(x, g, diag, bounded, omega):
    """Steps 3-4 of Algorithm 3: the relaxed change of every coordinate, projected onto alpha >= 0."""
    delta = -omega * g / diag
    delta[bounded] = np.maximum(0.0, x[bounded] + delta[bounded]) - x[bounded]
    return delta


def sor_solve(G, g, x, bounded, omega, tol, max_steps):
    """Algorithm 3 from the warm start ``x``; ``x`` and ``g`` are updated in place.

    Parameters
    ----------
    G : (n, n) array -- G_t of eq. (38), n = t + s (any order of the coordinates).
    g : (n,) array -- the gradient G x - b at the warm start, b = [1; 0] (1 on alpha, 0 on gamma).
    x : (n,) array -- the warm start [alpha_{t-1}, 0; gamma_{t-1}] (Sec. IV-C2), feasible.
    bounded : (n,) bool array -- True for the alpha coordinates (alpha >= 0), False for gamma (free).
    omega : float in (0, 2) -- the relaxation factor.
    tol : float -- KKT tolerance on the natural residual, in units of g.
    max_steps : int -- bound on single-coordinate updates.

    Returns ``(n_steps, residual)``; the caller warns if the bound stopped it.
    """
    diag = np.diag(G).copy()
    n_steps = 0
    while True:
        delta = sor_changes(x, g, diag, bounded, omega)
        size = np.abs(delta)
        residual = float((size * diag).max()) / omega
        if residual <= tol or n_steps >= max_steps:
            return n_steps, residual
        best = size.max()
        i = int(np.flatnonzero(size >= best - TIE * best)[0])   # step 5, lowest index among near-ties
        x[i] += delta[i]                                          # step 6
        if bounded[i] and x[i] < 0.0:
            x[i] = 0.0
        g += delta[i] * G[:, i]
        n_steps += 1
