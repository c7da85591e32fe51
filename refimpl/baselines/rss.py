"""RSS: reduced set selection approximating a full SVR's weight vector ([002], eqs. (25)-(26)).

Given the SVR solution w = sum_{i in S} beta_i phi(x_i) (S its support vectors), RSS picks reduced
vectors z_j among the training points one at a time and sets their coefficients alpha_P to minimise

    || w - sum_{j in P} alpha_j phi(z_j) ||^2                                   (25)

i.e. alpha_P = K_PP^{-1} K_PS beta_S (a least-squares projection in feature space, solved with an
incrementally grown Cholesky factor of K_PP).  The next vector is, among a random subset O of the
unused points (the same draws as SSVR-SRS, :func:`refimpl.ssvr.draw_candidates`), the one whose
feature-space direction is best aligned with the current residual w - w_P (ties and numerically
dependent candidates are handled as in SSVR-SRS, :func:`refimpl.ssvr.pick_independent`):

    s = argmin_{j in O}  -( [beta_S', -alpha_P'] [K_Sj; K_Pj] )^2 / ( ||[beta_S', -alpha_P']||^2 k(x_j, x_j) )   (26)

It is the paper's post-processing baseline: "parallel to SSVR-SRS", but it approximates w rather
than the objective.  The SVR's bias b is kept: f(x) = sum_{j in P} alpha_j k(x, z_j) + b.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from ..kernels import kernel_block, kernel_diag
from ..meb import make_rng
from ..ssvr import chol_append, draw_candidates, pick_independent


@dataclass
class RSSResult:
    basis: np.ndarray          # indices of the reduced vectors in the training set, in order
    alpha: np.ndarray          # their coefficients alpha_P
    intercept: float           # b of the SVR
    explained: np.ndarray      # alpha_P'K_PS beta_S after each step (||w||^2 - (25) at the optimum)
    n_rejected: int = 0


def reduced_set_selection(X, sv_index, sv_coef, intercept, spec, n_basis, n_candidates=100, random_state=None,
                          callback=None):
    """RSS on the training inputs X for the SVR expansion w = sum_t sv_coef[t] phi(X[sv_index[t]]).

    ``callback(P, alpha_P)`` is called after every added vector.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    sv_index = np.asarray(sv_index, dtype=np.intp)
    beta = np.asarray(sv_coef, dtype=np.float64)
    if not 1 <= n_basis <= n:
        raise ValueError(f"n_basis must be in [1, n_samples={n}], got {n_basis}")
    if n_candidates < 1:
        raise ValueError(f"n_candidates must be >= 1, got {n_candidates}")
    rng = make_rng(random_state)
    XS = X[sv_index]
    available = np.ones(n, dtype=bool)
    basis, explained = [], []
    L = np.zeros((n_basis, n_basis))          # Cholesky factor of K_PP
    KPS = np.zeros((n_basis, len(sv_index)))  # rows k(z_j, x_S)
    KPS_beta = np.zeros(n_basis)              # K_PS beta_S
    alpha = np.zeros(0)
    n_rejected, m = 0, 0
    while m < n_basis:
        O = draw_candidates(rng, available, n_candidates)
        if len(O) == 0:
            break
        K_SO = kernel_block(spec, XS, X[O])                  # |S| x |O|
        K_PO = kernel_block(spec, X[basis], X[O]) if m else np.zeros((0, len(O)))
        kdiag = kernel_diag(spec, X[O])
        c = np.concatenate([beta, -alpha])
        corr = beta @ K_SO - alpha @ K_PO                    # [beta_S; -alpha_P]'[K_Sj; K_Pj]
        den = (c @ c) * kdiag
        scores = np.where(den > 0, corr * corr / np.where(den > 0, den, 1.0), 0.0)   # -(26)
        # the best candidate of (26) that is not numerically dependent on the reduced vectors (its row of
        # the Cholesky factor of K_PP has pivot^2 > DEP_RTOL k(x_j, x_j))
        j, rejected = pick_independent(
            scores, O, available, lambda j: (chol_append(L[:m, :m], K_PO[:, j], kdiag[j])[1], kdiag[j]))
        n_rejected += rejected
        if j < 0:
            break              # every candidate of the round is dependent: numerical rank reached
        l, piv2 = chol_append(L[:m, :m], K_PO[:, j], kdiag[j])
        L[m, :m] = l
        L[m, m] = np.sqrt(piv2)
        KPS[m] = K_SO[:, j]
        KPS_beta[m] = K_SO[:, j] @ beta
        basis.append(int(O[j]))
        m += 1
        # alpha_P = K_PP^{-1} K_PS beta_S: the minimiser of (25) over the current reduced vectors
        zz = solve_triangular(L[:m, :m], KPS_beta[:m], lower=True, check_finite=False)
        alpha = solve_triangular(L[:m, :m].T, zz, lower=False, check_finite=False)
        explained.append(float(alpha @ KPS_beta[:m]))
        if callback is not None:
            callback(np.array(basis), alpha.copy())
    return RSSResult(basis=np.array(basis, dtype=np.intp), alpha=alpha, intercept=float(intercept),
                     explained=np.array(explained), n_rejected=n_rejected)


def rss_from_svr(svr, X, spec, n_basis, n_candidates=100, random_state=None, callback=None):
    """RSS for a fitted scikit-learn ``SVR``/``NuSVR`` (its ``support_``, ``dual_coef_``, ``intercept_``);
    ``spec`` must be the kernel the SVR used."""
    return reduced_set_selection(X, svr.support_, svr.dual_coef_[0], float(svr.intercept_[0]), spec, n_basis,
                                 n_candidates=n_candidates, random_state=random_state, callback=callback)
