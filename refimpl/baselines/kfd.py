"""Multi-class kernel Fisher discriminant (KFD), the baseline of [004] Sec. V.

Mika et al.'s KFD [3] in its multi-class form [30] (generalized discriminant analysis): with the
m x m kernel matrix K of the training points, each direction is w = sum_j a_j phi(x_j) and

    max_a  a'M a / a'N_mu a,

    M = sum_c n_c (k_c - k_bar)(k_c - k_bar)',     k_c = K 1_c / n_c,  k_bar = K 1 / m
    N = sum_c K_c (I - 1 1'/n_c) K_c'  = K K - sum_c n_c k_c k_c',     N_mu = N + mu I.

M has rank at most N_c - 1, so (Sec. V) KFD extracts N_c - 1 features: the leading generalized
eigenvectors of (M, N_mu).  Writing M = Z Z' (Z's columns sqrt(n_c)(k_c - k_bar)) and N_mu = L L'
(Cholesky), they are a = L^-T V b with V = L^-1 Z and (V'V) b = lambda b, a small N_c x N_c
eigenproblem, so the cost is one m x m product and one Cholesky factorisation.  The
regulariser is mu = reg * trace(N) / m ("regularised", as Mika et al. add mu I).  Each feature
needs m kernel evaluations on new data (Table IV).

Like the paper (Sec. V-B), large training sets are subsampled with equal class sizes
(``max_samples``, 3500 in the paper).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, eigh, solve_triangular

from ..kernels import KernelSpec, kernel_block


def balanced_sample(y, max_samples, rng):
    """Indices of a random sample of at most ``max_samples`` points with equal class sizes (Sec. V-B)."""
    if max_samples is None or len(y) <= max_samples:
        return np.arange(len(y))
    classes = np.unique(y)
    per = max_samples // len(classes)
    idx = [rng.choice(np.flatnonzero(y == c), size=min(per, int(np.sum(y == c))), replace=False) for c in classes]
    return np.sort(np.concatenate(idx))


@dataclass
class KFDModel:
    X: np.ndarray          # the (possibly subsampled) training points, the expansion points
    coef: np.ndarray       # (m, N_c - 1): feature q = sum_j coef[j, q] k(x_j, x)
    eigenvalues: np.ndarray


def fit_kfd(X, y, spec: KernelSpec, reg=1e-3, max_samples=None, random_state=None, block=None) -> KFDModel:
    """Fit multi-class KFD; ``block(A, B)`` computes raw kernel blocks (default NumPy)."""
    block = block or (lambda A, B: kernel_block(spec, A, B))
    rng = np.random.default_rng(random_state)
    idx = balanced_sample(np.asarray(y), max_samples, rng)
    X, y = np.asarray(X, dtype=np.float64)[idx], np.asarray(y)[idx]
    classes = np.unique(y)
    if len(classes) < 2:
        raise ValueError("KFD needs at least 2 classes")
    m = len(y)
    K = block(X, X)
    K = 0.5 * (K + K.T)
    kbar = K.mean(axis=1)
    Z = np.empty((m, len(classes)))
    N = K @ K
    for c, cls in enumerate(classes):
        members = y == cls
        nc = int(members.sum())
        kc = K[:, members].mean(axis=1)
        Z[:, c] = np.sqrt(nc) * (kc - kbar)
        N -= nc * np.outer(kc, kc)
    N = 0.5 * (N + N.T)
    mu = reg * max(np.trace(N) / m, np.finfo(float).tiny)
    N[np.diag_indices(m)] += mu
    L = cho_factor(N, lower=True)
    V = solve_triangular(L[0], Z, lower=True)
    lam, b = eigh(V.T @ V)
    order = np.argsort(lam)[::-1][:len(classes) - 1]
    lam, b = lam[order], b[:, order]
    # a = L^-T V b, scaled to unit norm in feature space: a'K a = 1
    A = solve_triangular(L[0], V @ b, lower=True, trans="T")
    norms = np.sqrt(np.maximum(np.einsum("iq,iq->q", A, K @ A), np.finfo(float).tiny))
    return KFDModel(X, A / norms, lam)


def kfd_transform(model: KFDModel, spec: KernelSpec, X, block=None):
    block = block or (lambda A, B: kernel_block(spec, A, B))
    return block(np.asarray(X, dtype=np.float64), model.X) @ model.coef
