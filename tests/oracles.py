"""Independent primal oracles: every formulation solved in an explicit feature map by cvxopt.

Nothing here imports refimpl or fastimpl.  The kernels are scikit-learn's pairwise kernels (the
Laplacian, exp(-gamma ||x - y||_2) as in 000 Sec. 4.2, is written out from scikit-learn's
Euclidean distances), the feature maps are explicit, and each problem is the *primal* of a paper,
written out as a QP for cvxopt -- not the MEB dual the engines solve, no K~, no Delta, no eta:

* :func:`two_class_l2svm`  -- [001] eq. (8);
* :func:`one_class_l2svm`  -- 001 eq. (7) (its primal, Sec. 3.2.1);
* :func:`hard_meb`         -- 001 eq. (1), the hard-margin SVDD;
* :func:`l2svr`            -- [000] eq. (6);
* :func:`mmda_directions`  -- [004] eq. (2), one direction after another.

Feature maps (:class:`FeatureMap`): the identity for the linear kernel, the exact monomial map of
the degree-2 polynomial kernel, and for the Gaussian and Laplacian kernels the factor
K = L L' of the training kernel matrix (eigendecomposition) with its Nystrom extension
phi(x) = Lambda^-1/2 U' k(X, x) to new points (exact on the span of the training features, where
every solution lies by the representer theorem).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics.pairwise import euclidean_distances, linear_kernel, polynomial_kernel, rbf_kernel

#: cvxopt options: the oracles must be far more accurate than the tolerances they are used with
CVXOPT_OPTIONS = {"show_progress": False, "abstol": 1e-12, "reltol": 1e-12, "feastol": 1e-12, "maxiters": 300}


def sk_kernel(kernel, A, B, gamma=None, degree=2, coef0=1.0):
    """k(A, B) from scikit-learn's pairwise kernels (the Laplacian with the Euclidean norm)."""
    if kernel == "rbf":
        return rbf_kernel(A, B, gamma=gamma)
    if kernel == "laplacian":
        return np.exp(-gamma * euclidean_distances(A, B))
    if kernel == "poly":
        return polynomial_kernel(A, B, degree=degree, gamma=gamma, coef0=coef0)
    if kernel == "linear":  # gamma x'y (gamma None: x'y)
        return linear_kernel(A, B) * (1.0 if gamma is None else gamma)
    raise ValueError(kernel)


@dataclass
class FeatureMap:
    """An explicit feature map of a kernel fitted on training inputs X: ``phi(X)`` rows are features."""

    kernel: str
    X: np.ndarray
    gamma: float | None = None
    degree: int = 2
    coef0: float = 1.0

    def __post_init__(self):
        if self.kernel in ("rbf", "laplacian"):
            K = self.k(self.X, self.X)
            lam, U = np.linalg.eigh(0.5 * (K + K.T))
            keep = lam > 1e-12 * lam.max()
            self._lam, self._U = lam[keep], U[:, keep]
        elif self.kernel == "poly" and self.degree != 2:
            raise ValueError("the exact monomial map is written for degree 2")

    def k(self, A, B):
        return sk_kernel(self.kernel, A, B, self.gamma, self.degree, self.coef0)

    def __call__(self, Z):
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
        if self.kernel == "linear":  # gamma x'y = (sqrt(gamma) x)'(sqrt(gamma) y)
            return Z * np.sqrt(1.0 if self.gamma is None else self.gamma)
        if self.kernel == "poly":
            # (g x'z + c)^2 = c^2 + 2 c g x'z + g^2 (x'z)^2: features [c, sqrt(2 c g) x, g x_i x_j (all i, j)]
            g, c = self.gamma, self.coef0
            quad = (Z[:, :, None] * Z[:, None, :]).reshape(len(Z), -1)
            return np.hstack([np.full((len(Z), 1), c), np.sqrt(2 * c * g) * Z, g * quad])
        # Nystrom: phi(z) = Lambda^-1/2 U' k(X, z); on the training points this is L = U Lambda^1/2
        return self.k(Z, self.X) @ self._U / np.sqrt(self._lam)

    def coef_of(self, w):
        """beta with w = sum_i beta_i phi(x_i) for w in the span of the training features."""
        Phi = self(self.X)
        beta, *_ = np.linalg.lstsq(Phi.T, w, rcond=None)
        return beta


def _qp(P, q, G=None, h=None, A=None, b=None):
    """min 1/2 v'Pv + q'v s.t. Gv <= h, Av = b by cvxopt; asserts that it converged."""
    import cvxopt

    M = lambda a: None if a is None else cvxopt.matrix(np.asarray(a, dtype=np.float64))  # noqa: E731
    sol = cvxopt.solvers.qp(M(P), M(q), M(G), M(h), M(A), M(b), options=CVXOPT_OPTIONS)
    v = np.array(sol["x"]).ravel()
    value = float(0.5 * v @ P @ v + q @ v)
    # 'unknown' means the iteration limit or a stall; accept it only with a tiny relative gap
    assert sol["status"] == "optimal" or abs(sol["gap"]) <= 1e-9 * max(1.0, abs(value)), sol["status"]
    return v, value


def two_class_l2svm(Phi, y, C):
    """001 eq. (8): min ||w||^2 + b^2 - 2 rho + C sum xi^2  s.t.  y_i (w'phi_i + b) >= rho - xi_i.
    C may be an array: the weighted primal sum_i C_i xi_i^2 (scikit-learn's C_i = C sample_weight_i).

    Variables v = (w, b, rho, xi).  Returns dict(p, w, b, rho, xi)."""
    m, r = Phi.shape
    n = r + 2 + m
    iw, ib, ir, ix = slice(0, r), r, r + 1, slice(r + 2, n)
    P = np.zeros((n, n))
    P[iw, iw] = 2 * np.eye(r)
    P[ib, ib] = 2.0
    P[ix, ix] = 2 * np.diag(np.broadcast_to(np.asarray(C, dtype=np.float64), (m,)))
    q = np.zeros(n)
    q[ir] = -2.0
    G = np.zeros((m, n))  # rho - xi_i - y_i (w'phi_i + b) <= 0
    G[:, iw] = -y[:, None] * Phi
    G[:, ib] = -y
    G[:, ir] = 1.0
    G[:, ix] = -np.eye(m)
    v, p = _qp(P, q, G, np.zeros(m))
    return dict(p=p, w=v[iw], b=float(v[ib]), rho=float(v[ir]), xi=v[ix])


def one_class_l2svm(Phi, C):
    """001 Sec. 3.2.1 (dual (7)): min ||w||^2 - 2 rho + C sum xi^2  s.t.  w'phi_i >= rho - xi_i.
    C may be an array (the weighted primal sum_i C_i xi_i^2).

    Variables v = (w, rho, xi).  Returns dict(p, w, rho, xi)."""
    m, r = Phi.shape
    n = r + 1 + m
    iw, ir, ix = slice(0, r), r, slice(r + 1, n)
    P = np.zeros((n, n))
    P[iw, iw] = 2 * np.eye(r)
    P[ix, ix] = 2 * np.diag(np.broadcast_to(np.asarray(C, dtype=np.float64), (m,)))
    q = np.zeros(n)
    q[ir] = -2.0
    G = np.zeros((m, n))  # rho - xi_i - w'phi_i <= 0
    G[:, iw] = -Phi
    G[:, ir] = 1.0
    G[:, ix] = -np.eye(m)
    v, p = _qp(P, q, G, np.zeros(m))
    return dict(p=p, w=v[iw], rho=float(v[ir]), xi=v[ix])


def hard_meb(Phi):
    """001 eq. (1): min R^2 s.t. ||c - phi_i||^2 <= R^2, as the QP in (c, t = R^2 - ||c||^2):

        min ||c||^2 + t   s.t.   ||phi_i||^2 - 2 phi_i'c <= t.

    Returns dict(r2, c)."""
    m, r = Phi.shape
    P = np.zeros((r + 1, r + 1))
    P[:r, :r] = 2 * np.eye(r)
    q = np.zeros(r + 1)
    q[r] = 1.0
    G = np.hstack([-2 * Phi, -np.ones((m, 1))])
    h = -np.sum(Phi ** 2, axis=1)
    v, r2 = _qp(P, q, G, h)
    return dict(r2=r2, c=v[:r])


def l2svr(Phi, y, C, mu, weights=None):
    """000 eq. (6): min ||w||^2 + b^2 + C/(mu m) sum (xi^2 + xi*^2) + 2 C epsbar
    s.t. y_i - (w'phi_i + b) <= epsbar + xi_i,  (w'phi_i + b) - y_i <= epsbar + xi*_i.
    ``weights`` w_i: the slack term sum_i C w_i/(mu m) (xi_i^2 + xi*_i^2) (C_i = C w_i; the tube stays 2 C epsbar).

    Variables v = (w, b, epsbar, xi, xi*).  Returns dict(p, w, b, epsbar, xi, xi_star, f_train)."""
    m, r = Phi.shape
    nv = r + 2 + 2 * m
    iw, ib, ie, ixi, ixs = slice(0, r), r, r + 1, slice(r + 2, r + 2 + m), slice(r + 2 + m, nv)
    P = np.zeros((nv, nv))
    P[iw, iw] = 2 * np.eye(r)
    P[ib, ib] = 2.0
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    P[ixi, ixi] = 2 * C / (mu * m) * np.diag(w)
    P[ixs, ixs] = 2 * C / (mu * m) * np.diag(w)
    q = np.zeros(nv)
    q[ie] = 2 * C
    G = np.zeros((2 * m, nv))
    G[:m, iw], G[:m, ib], G[:m, ie], G[:m, ixi] = -Phi, -1.0, -1.0, -np.eye(m)
    G[m:, iw], G[m:, ib], G[m:, ie], G[m:, ixs] = Phi, 1.0, -1.0, -np.eye(m)
    v, p = _qp(P, q, G, np.concatenate([-y, y]))
    w, b = v[iw], float(v[ib])
    return dict(p=p, w=w, b=b, epsbar=float(v[ie]), xi=v[ixi], xi_star=v[ixs], f_train=Phi @ w + b)


def l2svm_margin_one(Phi, y, C, U=None):
    """004 eq. (2): min ||w||^2 + b^2 + C sum xi^2  s.t.  y_i (w'phi_i + b) >= 1 - xi_i,  U'w = 0.

    Variables v = (w, b, xi).  Returns dict(p, w, b, xi)."""
    m, r = Phi.shape
    n = r + 1 + m
    iw, ib, ix = slice(0, r), r, slice(r + 1, n)
    P = np.zeros((n, n))
    P[iw, iw] = 2 * np.eye(r)
    P[ib, ib] = 2.0
    P[ix, ix] = 2 * C * np.eye(m)
    G = np.zeros((m, n))  # 1 - xi_i - y_i (w'phi_i + b) <= 0
    G[:, iw] = -y[:, None] * Phi
    G[:, ib] = -y
    G[:, ix] = -np.eye(m)
    A = b = None
    if U is not None and U.shape[1]:
        A = np.zeros((U.shape[1], n))
        A[:, iw] = U.T
        b = np.zeros(U.shape[1])
    v, p = _qp(P, np.zeros(n), G, -np.ones(m), A, b)
    return dict(p=p, w=v[iw], b=float(v[ib]), xi=v[ix])


def mmda_directions(Phi, y, C, n_components):
    """MMDA (004 Sec. II): u_1 = w_1 / ||w_1|| of the L2-SVM (1), then u_{s+1} from (2) with
    u_1 .. u_s.  Returns (U (r, s), [per-direction optimum p of (2)])."""
    U = np.zeros((Phi.shape[1], 0))
    values = []
    for _ in range(n_components):
        sol = l2svm_margin_one(Phi, y, C, U)
        U = np.hstack([U, (sol["w"] / np.linalg.norm(sol["w"]))[:, None]])
        values.append(sol["p"])
    return U, values
