"""Core Vector Machine formulations: kernel methods as MEB problems ([001], Sec. 3).

Each function builds the :class:`~refimpl.problem.MEBProblem` of one formulation and, after
the engine (``fit_meb``) has run, recovers the model from the core-set weights alpha.

* hard-margin SVDD / MEB (eqs. (1)-(3)): k~ = k, center c = sum alpha_i phi(x_i),
  R^2 = alpha'diag(K) - alpha'K alpha.  Any kernel (the linear term is diag(K)).
* one-class L2-SVM (eq. (7)): k~ = k + delta_ij / C, w = sum alpha_i phi(x_i),
  rho = alpha'K~alpha, xi_i = alpha_i / C, decision f(x) = w'phi(x) - rho.
* two-class L2-SVM (eqs. (8)-(11)): k~ = y_i y_j (k + 1) + delta_ij / C,
  w = sum alpha_i y_i phi(x_i), b = sum alpha_i y_i, xi_i = alpha_i / C,
  rho = y_i (w'phi(x_i) + b) + alpha_i / C for support vectors, which equals alpha'K~alpha at
  the optimum (the gradient of eq. (9) is -2 K~alpha and is constant on the support).
  Decision f(x) = w'phi(x) + b.

Weighted fits (scikit-learn's ``sample_weight``/``class_weight``): a per-point C_i = C w_i in the
xi_i^2 term, i.e. min ... + sum_i C_i xi_i^2, whose dual is the same with the ridge 1/C on K~'s
diagonal replaced by 1/C_i (the derivation of 001 eqs. (7)-(9) goes through point by point; xi_i =
alpha_i / C_i).  ``weights`` w_i > 0 give c_i = 1/C_i (``MEBProblem.point_diag``); a point of weight 0
has no slack penalty to trade against, and is left out of the problem by the estimators (as LIBSVM
does).  Equal weights w give the problem of C w exactly.

For kernels whose k(x, x) is not constant (linear, polynomial on raw inputs) the L2-SVMs use
the generalized CVM of [000] Sec. 3.2: Delta_i = eta - k~(z_i, z_i),
eta = max_i k~(z_i, z_i), which keeps the MEB dual equal to max -alpha'K~alpha.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels import KernelSpec
from .problem import MEBProblem


def svdd_problem(X, kernel: KernelSpec) -> MEBProblem:
    """Hard-margin SVDD = MEB of {phi(x_i)} (001 eqs. (1)-(3))."""
    return MEBProblem(X, kernel)


def ridge(C: float, weights=None, scale: float = 1.0):
    """(diag_add, point_diag) of the ridge scale / C_i with C_i = C w_i (``weights`` None: C_i = C).

    Equal weights give the scalar ridge scale / (C w) -- the problem of C w, bit for bit -- and
    unequal ones the per-point array (which makes the diagonal vary: generalized CVM, 000 Sec. 3.2)."""
    if weights is None:
        return scale / C, None
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be a 1-d array of finite positive values")
    if np.all(w == w[0]):
        return scale / (C * float(w[0])), None
    return 0.0, scale / (C * w)


def one_class_problem(X, kernel: KernelSpec, C: float, weights=None) -> MEBProblem:
    """One-class L2-SVM (001 eq. (7)): k~(z_i, z_j) = k(x_i, x_j) + delta_ij / C_i, C_i = C w_i."""
    diag_add, point_diag = ridge(C, weights)
    return MEBProblem(X, kernel, diag_add=diag_add, point_diag=point_diag, constant_linear_term=True)


def two_class_problem(X, y_pm, kernel: KernelSpec, C: float, weights=None) -> MEBProblem:
    """Two-class L2-SVM (001 eqs. (9)-(10)) for labels y in {-1, +1}.

    The labels serve both as the signs s_i = y_i of eq. (10) and as the classes of the
    initialisation (one int8 array, no copy when y_pm is int8 already).  ``weights``: C_i = C w_i."""
    sign = np.ascontiguousarray(y_pm, dtype=np.int8)
    # each s_i is -1 or +1: checked by min, max and a count of zeros, which need no temporary of m values
    # (np.abs(sign) == 1 made two: 190 MB at 10^8 rows, most of what a chunked fit's caller held)
    if sign.shape != (X.shape[0],) or (sign.size and (sign.min() < -1 or sign.max() > 1)) \
            or np.count_nonzero(sign) != sign.size:
        raise ValueError("y_pm must hold one label in {-1, +1} per row of X")
    diag_add, point_diag = ridge(C, weights)
    return MEBProblem(X, kernel, sign=sign, label_bias=1.0, diag_add=diag_add, point_diag=point_diag,
                      constant_linear_term=True, labels=sign)


@dataclass
class KernelExpansion:
    """A fitted model f(x) = sum_t coef_t k(sv_t, x) + intercept, plus the quantities of 001 Sec. 3."""

    support: np.ndarray      # indices into the training set of the support vectors (alpha > 0)
    coef: np.ndarray         # alpha_t (one-class, MEB) or alpha_t y_t (two-class)
    intercept: float         # b (two-class, eq. (11)); -rho (one-class); 0 (MEB)
    rho: float               # alpha'K~alpha
    xi: np.ndarray           # slacks alpha_t / C_t of the support vectors (eq. (11)); zeros for the MEB


def recover(problem: MEBProblem, result, C: float | None, kind: str) -> KernelExpansion:
    """Model from the engine's alpha: eq. (3) for the MEB, eq. (7) one-class, eq. (11) two-class."""
    sv = result.alpha > 0
    support = result.core_set[sv]
    alpha = result.alpha[sv]
    order = np.argsort(support, kind="stable")  # support vectors in training order, like LIBSVM
    support, alpha = support[order], alpha[order]
    rho = float(result.margin)
    xi = alpha * problem.diag_term(support) if C is not None else np.zeros_like(alpha)  # alpha_t / C_t
    if kind == "two_class":
        y = problem.sign[support]
        return KernelExpansion(support, alpha * y, float(alpha @ y), rho, xi)
    if kind == "one_class":
        return KernelExpansion(support, alpha, -rho, rho, xi)
    if kind == "meb":
        return KernelExpansion(support, alpha, 0.0, rho, xi)
    raise ValueError(f"unknown formulation {kind!r}")
