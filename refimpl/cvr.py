"""Core Vector Regression: the L2-SVR as a center-constrained MEB ([000], Sec. 3).

The L2-SVR primal (000 eq. (6)), with the bias penalised and squared slacks,

    min ||w||^2 + b^2 + C/(mu m) sum_i (xi_i^2 + xi*_i^2) + 2 C epsbar
    s.t. y_i - (w'phi(x_i) + b) <= epsbar + xi_i,   (w'phi(x_i) + b) - y_i <= epsbar + xi*_i,

has the dual (eq. (7)) over alpha~ = [lambda; lambda*] in the simplex,

    max alpha~' (2/C) [y; -y] - alpha~' K~ alpha~,
    K~ = [[K + 11' + (mu m / C) I, -(K + 11')], [-(K + 11'), K + 11' + (mu m / C) I]]     (eq. (8))

which is the MEB dual (14) of 2m augmented points z_i = (x_p(i), s_i), p(i) = i mod m,
s_i = +1 for i < m and -1 after, with Delta = eta 1 - diag(K~) + (2/C) [y; -y] (eq. (15)).  In the
engine's terms (:class:`~refimpl.problem.MEBProblem`) that is ``mirror=True``, ``label_bias=1``,
``diag_add = mu m / C`` and ``offset = (2/C) y``; eta is the smallest value with Delta >= 0.

Recovery (eqs. (9)-(10)):

    w = C sum_i (lambda_i - lambda*_i) phi(x_i),     b = C sum_i (lambda_i - lambda*_i),
    xi_i = lambda_i mu m,  xi*_i = lambda*_i mu m,   epsbar = alpha~'[y; -y] - C alpha~'K~alpha~,

so f(x) = sum_i beta_i (k(x_i, x) + 1) with beta_i = C (lambda_i - lambda*_i).

Property 3 relates the engine's radius to the primal optimum p* of (6):
R_tau^2 <= p*/C^2 + eta <= (1+eps)^2 R_tau^2, since p* = C^2 d* and r_MEB^2 = d* + eta.

Weighted fits (``sample_weight``): the slack weight C/(mu m) of point i becomes C_i/(mu m), C_i = C w_i,
for both of its slacks xi_i and xi*_i, so both copies z_i and z_{i+m} get the ridge mu m / C_i
(``MEBProblem.point_diag``), and xi_i = lambda_i mu m / w_i.  C in the tube term 2 C epsbar and in the
offsets (2/C) y stays the global one.

Evaluation (footnote 10): RMSE = sqrt(mean (f - y)^2) / max y and MRE = mean |(f - y) / y|.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .kernels import KernelSpec
from .cvm import ridge
from .problem import MEBProblem


def cvr_problem(X, y, kernel: KernelSpec, C: float, mu: float, weights=None) -> MEBProblem:
    """The center-constrained MEB of the L2-SVR (000 eqs. (7), (8), (15)); ``weights``: C_i = C w_i
    in the slack term (both copies of a point share it)."""
    # CSR rows stay sparse, chunked rows where they are (refimpl.problem)
    X = X if sp.issparse(X) or getattr(X, "chunked_rows", False) else np.asarray(X)
    y = np.ascontiguousarray(y, dtype=np.float64)
    m = X.shape[0]
    if y.shape != (m,):
        raise ValueError("y must hold one target per row of X")
    diag_add, point_diag = ridge(C, weights, scale=mu * m)
    return MEBProblem(X, kernel, label_bias=1.0, diag_add=diag_add, point_diag=point_diag,
                      constant_linear_term=True, mirror=True, offset=(2.0 / C) * y)


@dataclass
class CVRModel:
    """f(x) = sum_t coef_t k(x_support_t, x) + intercept, and the quantities of 000 eqs. (9)-(10)."""

    support: np.ndarray    # input rows with lambda_i != lambda*_i (training order)
    coef: np.ndarray       # beta_i = C (lambda_i - lambda*_i)
    intercept: float       # b = C sum_i (lambda_i - lambda*_i)
    epsilon_bar: float     # the tube width epsbar of eq. (10)
    xi: np.ndarray         # xi_i = lambda_i mu m of the support rows (eq. (9))
    xi_star: np.ndarray    # xi*_i = lambda*_i mu m (both / w_i in a weighted fit)
    dual_objective: float  # d = alpha~'(2/C)[y; -y] - alpha~'K~alpha~ (the dual (7) reached)


def recover(problem: MEBProblem, result, y, C: float) -> CVRModel:
    """Eqs. (9)-(10) from the engine's alpha~ over the 2m augmented points (mu enters through the
    problem's ridge, mu m / C_i)."""
    m = problem.m
    y = np.asarray(y, dtype=np.float64)
    core, alpha = result.core_set, result.alpha
    lam = np.zeros(m)
    lam_star = np.zeros(m)
    # a row may enter the core set as z_i (lambda) and as z_{i+m} (lambda*); sum each side
    np.add.at(lam, core[core < m], alpha[core < m])
    np.add.at(lam_star, core[core >= m] - m, alpha[core >= m])
    rows = np.union1d(core[core < m], core[core >= m] - m)
    diff = lam[rows] - lam_star[rows]
    keep = diff != 0
    support = rows[keep]
    coef = C * diff[keep]
    s_alpha_y = float(alpha @ (problem._s(core) * y[problem.base(core)]))  # alpha~'[y; -y]
    margin = float(result.margin)  # alpha~'K~alpha~
    slack_per_lambda = C * problem.diag_term(support)  # mu m / w_i (mu m unweighted): xi_i = lambda_i mu m / w_i
    return CVRModel(support=support, coef=coef, intercept=float(C * diff.sum()),
                    epsilon_bar=s_alpha_y - C * margin,
                    xi=lam[support] * slack_per_lambda, xi_star=lam_star[support] * slack_per_lambda,
                    dual_objective=(2.0 / C) * s_alpha_y - margin)


def normalized_rmse(y_true, y_pred) -> float:
    """RMSE / max y (000 footnote 10)."""
    y_true = np.asarray(y_true, dtype=np.float64)
    return float(np.sqrt(np.mean((np.asarray(y_pred) - y_true) ** 2)) / np.max(y_true))


def mean_relative_error(y_true, y_pred) -> float:
    """MRE = mean |(f(x) - y) / y| (000 footnote 10); undefined where y = 0 (raises)."""
    y_true = np.asarray(y_true, dtype=np.float64)
    if np.any(y_true == 0):
        raise ValueError("MRE is undefined when a target is 0")
    return float(np.mean(np.abs((np.asarray(y_pred) - y_true) / y_true)))
