"""The one problem every MEB-based algorithm solves: a ball around "augmented points".

Following [001] Sec. 3.2 and [000] Sec. 3.2 (docs/layout.md: one engine, many formulations), each formulation is a
transformed kernel over n augmented points z_i,

    k~(z_i, z_j) = s_i s_j ( k(x_i, x_j) + beta_b ) + delta_ij * c            (001 eqs. (7), (10))

together with a per-point offset Delta_i >= 0 that makes the linear term of the dual
constant (the center-constrained MEB of [000], eqs. (11)-(14)).  The
engine then solves the MEB dual (001 eq. (2), with Delta added as in 000 eq. (12))

    max_alpha  alpha' (diag(K~) + Delta) - alpha' K~ alpha   s.t.  alpha >= 0, 1'alpha = 1

and squared distances to the center c = sum_i alpha_i phi~(z_i) are (001 eq. (12), 000 eq. (13))

    ||c - phi~(z_l)||^2 + Delta_l = alpha' K~ alpha - 2 (K~ alpha)_l + k~(z_l, z_l) + Delta_l.

| formulation                  | s_i  | beta_b | c   | Delta                   |
|------------------------------|------|--------|-----|-------------------------|
| MEB / hard-margin SVDD       | 1    | 0      | 0   | 0                       |
| one-class L2-SVM (001 (7))   | 1    | 0      | 1/C | eta - diag (0 if const) |
| two-class L2-SVM (001 (10))  | y_i  | 1      | 1/C | eta - diag (0 if const) |
| L2-SVR / CVR (000 (8), (15)) | +1 / -1 | 1   | mu m / C | eta - diag + (2/C) s_i y_p(i) |

For the L2-SVMs, ``Delta = eta - diag(K~)`` with eta = max diag(K~) is the generalized CVM of
000 Sec. 3.2: it makes diag(K~) + Delta = eta constant, so the MEB dual is exactly the
L2-SVM dual max -alpha' K~ alpha for *any* kernel; for constant-diagonal kernels Delta = 0.

CVR has n = 2m augmented points (``mirror=True``): z_i and z_{i+m} share the input x_p(i),
p(i) = i mod m, with s_i = +1 for i < m and -1 after (the two blocks of 000 eq. (8)), and the
linear term carries the targets: diag(K~) + Delta = eta 1 + (2/C) [y; -y] (``offset`` = (2/C) y), so
that the MEB dual is the L2-SVR dual (7) up to the constant eta (000 eqs. (14)-(15)).

Nothing here stores an n x n matrix: only rows and blocks on request.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .kernels import KernelSpec, compact_columns, kernel_block, kernel_diag


@dataclass
class MEBProblem:
    """Augmented-point MEB problem.  See the module docstring for the symbols.

    Attributes
    ----------
    X : (m, d) float64 array, C-contiguous, or a scipy.sparse CSR matrix -- the inputs x_i (CSR rows are
        never densified: kernels of sparse rows go through row norms and sparse products).
    kernel : KernelSpec -- the base kernel k.
    sign : (m,) int8 array of +-1 or None -- s_i (None means all +1); int8 keeps it at 1 byte a point.
    label_bias : float -- beta_b, 1 for the two-class L2-SVM (the b^2 term of 001 eq. (8)).
    diag_add : float -- c = 1/C for the L2-SVMs (the xi^2 term), 0 for the hard MEB.
    point_diag : (m,) float array or None -- per-input c_i replacing ``diag_add`` (weighted fits:
        c_i = c / w_i for the per-point penalty C_i = C w_i of the xi_i^2 term; both copies z_i and
        z_{i+m} of a mirrored input share c_p(i)).  Needs ``constant_linear_term``: the diagonal of K~
        then varies from point to point even for a constant-diagonal kernel, and Delta = eta - diag(K~)
        absorbs it exactly as it absorbs a varying k(x, x) (000 Sec. 3.2).
    constant_linear_term : bool -- if True, Delta = eta - diag(K~) (generalized CVM), else Delta = 0.
    labels : (m,) array or None -- class labels (e.g. the sign array itself), used only by the
        initialisation of 001 Sec. 4.1.1 to pick the second point from the other class.
    mirror : bool -- n = 2m points, z_{i+m} = (x_i, sign -s_i) (CVR, 000 eq. (8)); p(i) = i mod m.
    offset : (m,) float array or None -- t_i with linear term diag + Delta = eta + s_z t_p(z)
        (CVR: t = (2/C) y, 000 eq. (15)); needs ``constant_linear_term``.  eta is then the
        smallest value keeping every Delta_z >= 0.
    """

    X: np.ndarray
    kernel: KernelSpec
    sign: np.ndarray | None = None
    label_bias: float = 0.0
    diag_add: float = 0.0
    constant_linear_term: bool = False
    labels: np.ndarray | None = None
    mirror: bool = False
    offset: np.ndarray | None = None
    point_diag: np.ndarray | None = None
    eta: float = field(init=False)

    def __post_init__(self):
        self._rawdiag_all = None
        if sp.issparse(self.X):
            # only the stored columns when there are far more columns than entries (kernel values unchanged)
            self.X = compact_columns(sp.csr_matrix(self.X, dtype=np.float64))[0]
            # k(x, x) of every row once (O(nnz); ones for the radial kernels): rows of a CSR matrix are
            # copied when indexed
            self._rawdiag_all = kernel_diag(self.kernel, self.X)
        elif getattr(self.X, "chunked_rows", False):
            # rows that stay where they are (corevector.chunked): k(x, x) from one pass beside them
            self._rawdiag_all = self.X.kernel_diag(self.kernel)
        else:
            self.X = np.ascontiguousarray(self.X, dtype=np.float64)
        if self.sign is not None:
            self.sign = np.ascontiguousarray(self.sign, dtype=np.int8)
        if self.point_diag is not None:
            if not self.constant_linear_term:
                raise ValueError("point_diag needs constant_linear_term=True")
            self.point_diag = np.ascontiguousarray(self.point_diag, dtype=np.float64)
            if self.point_diag.shape != (self.m,) or not np.all(np.isfinite(self.point_diag)) \
                    or np.any(self.point_diag < 0):
                raise ValueError("point_diag must hold one finite value >= 0 per row of X")
            if self.diag_add:
                raise ValueError("give diag_add or point_diag, not both")
        if self.offset is not None:
            if not self.constant_linear_term:
                raise ValueError("offset needs constant_linear_term=True")
            self.offset = np.ascontiguousarray(self.offset, dtype=np.float64)
            if self.offset.shape != (self.m,):
                raise ValueError("offset must hold one value per row of X")
            # Delta_z = eta - diag_z + s_z t_p(z) >= 0 for every z (000 eq. (15), "eta large enough")
            z = np.arange(self.n)
            self.eta = float((self._raw_diag(z) - self._s(z) * self.offset[self.base(z)]).max())
        elif (self.kernel.constant_diagonal and self.point_diag is None) or not self.constant_linear_term:
            # eta is only used when constant_linear_term is set; for constant-diagonal kernels
            # it is known without looking at the data.
            self.eta = (self.kernel.diag_constant() if self.kernel.constant_diagonal else 0.0) \
                + self.label_bias + self.diag_add
        else:
            # One O(m d) pass: eta = max_i k~(z_i, z_i) (000 Sec. 3.2, generalized CVM).
            self.eta = float(self._raw_diag(np.arange(self.n)).max())

    @property
    def m(self) -> int:
        """Number of inputs x_i."""
        return self.X.shape[0]

    @property
    def n(self) -> int:
        """Number of augmented points z_i (2m for CVR)."""
        return 2 * self.X.shape[0] if self.mirror else self.X.shape[0]

    def base(self, idx):
        """p(i): the input row of augmented point i (i mod m)."""
        idx = np.asarray(idx, dtype=np.intp)
        return idx - self.m * (idx >= self.m) if self.mirror else idx

    @property
    def constant_term(self) -> float | None:
        """c0, the constant part of the linear term diag(K~) + Delta (eta, or kappa + beta_b + c for a
        constant-diagonal kernel); None when it varies from point to point (the stop rules'
        margin term is R^2 - c0, see refimpl.meb.STOPS)."""
        if self.has_delta or self.kernel.constant_diagonal:
            return float(self.eta)
        return None

    @property
    def has_delta(self) -> bool:
        return self.constant_linear_term and (self.offset is not None or self.point_diag is not None
                                              or not self.kernel.constant_diagonal)

    def diag_term(self, idx) -> np.ndarray:
        """c_z, the ridge of K~'s diagonal at the points ``idx``: ``diag_add``, or ``point_diag[p(z)]``."""
        idx = np.asarray(idx, dtype=np.intp)
        if self.point_diag is None:
            return np.full(len(idx), float(self.diag_add))
        return self.point_diag[self.base(idx)]

    @property
    def min_ridge(self) -> float:
        """The smallest c_z (what conditions K~, see corevector.engine_policy.auto_max_free)."""
        return float(self.diag_add) if self.point_diag is None else float(self.point_diag.min(initial=np.inf))

    def _s(self, idx):
        idx = np.asarray(idx, dtype=np.intp)
        s = np.ones(len(idx)) if self.sign is None else self.sign[self.base(idx)].astype(np.float64)
        if self.mirror:
            s = np.where(idx >= self.m, -s, s)
        return s

    def block(self, rows, cols) -> np.ndarray:
        """[k~(z_i, z_j)] for i in ``rows``, j in ``cols`` (001 eqs. (7), (10); 000 eq. (8))."""
        rows = np.asarray(rows, dtype=np.intp)
        cols = np.asarray(cols, dtype=np.intp)
        K = kernel_block(self.kernel, self.X[self.base(rows)], self.X[self.base(cols)]) + self.label_bias
        K *= np.outer(self._s(rows), self._s(cols))
        if self.point_diag is not None or self.diag_add:
            K += self.diag_term(rows)[:, None] * (rows[:, None] == cols[None, :])
        return K

    def _raw_diag(self, idx) -> np.ndarray:
        # s_i^2 = 1, so the sign drops out of the diagonal.
        c = self.diag_add if self.point_diag is None else self.diag_term(idx)
        if self._rawdiag_all is not None:
            return self._rawdiag_all[self.base(idx)] + self.label_bias + c
        return kernel_diag(self.kernel, self.X[self.base(idx)]) + self.label_bias + c

    def diag(self, idx) -> np.ndarray:
        """[k~(z_i, z_i)] for i in ``idx``."""
        return self._raw_diag(np.asarray(idx, dtype=np.intp))

    def delta(self, idx) -> np.ndarray:
        """Delta_i (000 eq. (12)); zero unless the generalized CVM or CVR needs it."""
        idx = np.asarray(idx, dtype=np.intp)
        if not self.has_delta:
            return np.zeros(len(idx))
        return self.linear_term(idx) - self.diag(idx)

    def shifted_linear_term(self, idx) -> np.ndarray:
        """diag(K~) + Delta - c0 with c0 = :attr:`constant_term` (0 if None), formed without
        cancellation: s_z t_p(z) for CVR, 0 for the generalized CVM and constant-diagonal kernels.

        The engines work with this shifted term.  On the simplex 1'alpha = 1 a constant shift of
        the linear term changes neither the solution nor any gradient difference, but it keeps
        the numbers small: with l ~ eta and a margin term of 1e-6, the active-set Newton step
        Q_FF^-1 l would otherwise lose six digits to cancellation."""
        idx = np.asarray(idx, dtype=np.intp)
        if self.has_delta:
            if self.offset is None:
                return np.zeros(len(idx))
            return self._s(idx) * self.offset[self.base(idx)]
        if self.kernel.constant_diagonal:
            return np.zeros(len(idx))
        return self.diag(idx)

    def linear_term(self, idx) -> np.ndarray:
        """diag(K~) + Delta: the linear term of the MEB dual (001 eq. (2)); eta + s_z t_p(z) for CVR
        (000 eq. (15)), eta for the generalized CVM."""
        idx = np.asarray(idx, dtype=np.intp)
        if not self.has_delta:
            return self.diag(idx)
        if self.offset is None:
            return np.full(len(idx), self.eta)
        return self.eta + self._s(idx) * self.offset[self.base(idx)]
