"""The one problem every MEB-based algorithm solves: a ball around "augmented points".

Following ``ARCHITECTURE.md`` and 001_1b97d3ee98da12aa.txt Sec. 3.2, each formulation is a
transformed kernel over n augmented points z_i,

    k~(z_i, z_j) = s_i s_j ( k(x_i, x_j) + beta_b ) + delta_ij * c            (001 eqs. (7), (10))

together with a per-point offset Delta_i >= 0 that makes the linear term of the dual
constant (the center-constrained MEB of 000_88c8f8810bf6206d.txt, eqs. (11)-(14)).  The
engine then solves the MEB dual (001 eq. (2), with Delta added as in 000 eq. (12))

    max_alpha  alpha' (diag(K~) + Delta) - alpha' K~ alpha   s.t.  alpha >= 0, 1'alpha = 1

and squared distances to the center c = sum_i alpha_i phi~(z_i) are (001 eq. (12), 000 eq. (13))

    ||c - phi~(z_l)||^2 + Delta_l = alpha' K~ alpha - 2 (K~ alpha)_l + k~(z_l, z_l) + Delta_l.

| formulation                  | s_i  | beta_b | c   | Delta                   |
|------------------------------|------|--------|-----|-------------------------|
| MEB / hard-margin SVDD       | 1    | 0      | 0   | 0                       |
| one-class L2-SVM (001 (7))   | 1    | 0      | 1/C | eta - diag (0 if const) |
| two-class L2-SVM (001 (10))  | y_i  | 1      | 1/C | eta - diag (0 if const) |

For the L2-SVMs, ``Delta = eta - diag(K~)`` with eta = max diag(K~) is the generalized CVM of
000 Sec. 3.2: it makes diag(K~) + Delta = eta constant, so the MEB dual is exactly the
L2-SVM dual max -alpha' K~ alpha for *any* kernel; for constant-diagonal kernels Delta = 0.

Nothing here stores an n x n matrix: only rows and blocks on request.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernels import KernelSpec, kernel_block, kernel_diag


@dataclass
class MEBProblem:
    """Augmented-point MEB problem.  See the module docstring for the symbols.

    Attributes
    ----------
    X : (m, d) float64 array, C-contiguous -- the inputs x_i.
    kernel : KernelSpec -- the base kernel k.
    sign : (m,) int8 array of +-1 or None -- s_i (None means all +1); int8 keeps it at 1 byte a point.
    label_bias : float -- beta_b, 1 for the two-class L2-SVM (the b^2 term of 001 eq. (8)).
    diag_add : float -- c = 1/C for the L2-SVMs (the xi^2 term), 0 for the hard MEB.
    constant_linear_term : bool -- if True, Delta = eta - diag(K~) (generalized CVM), else Delta = 0.
    labels : (m,) array or None -- class labels (e.g. the sign array itself), used only by the
        initialisation of 001 Sec. 4.1.1 to pick the second point from the other class.
    """

    X: np.ndarray
    kernel: KernelSpec
    sign: np.ndarray | None = None
    label_bias: float = 0.0
    diag_add: float = 0.0
    constant_linear_term: bool = False
    labels: np.ndarray | None = None
    eta: float = field(init=False)

    def __post_init__(self):
        self.X = np.ascontiguousarray(self.X, dtype=np.float64)
        if self.sign is not None:
            self.sign = np.ascontiguousarray(self.sign, dtype=np.int8)
        if self.kernel.constant_diagonal or not self.constant_linear_term:
            # eta is only used when constant_linear_term is set; for constant-diagonal kernels
            # it is known without looking at the data.
            self.eta = (self.kernel.diag_constant() if self.kernel.constant_diagonal else 0.0) \
                + self.label_bias + self.diag_add
        else:
            # One O(m d) pass: eta = max_i k~(z_i, z_i) (000 Sec. 3.2, generalized CVM).
            self.eta = float(self._raw_diag(np.arange(self.n)).max())

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def has_delta(self) -> bool:
        return self.constant_linear_term and not self.kernel.constant_diagonal

    def _s(self, idx):
        return np.ones(len(idx)) if self.sign is None else self.sign[idx]

    def block(self, rows, cols) -> np.ndarray:
        """[k~(z_i, z_j)] for i in ``rows``, j in ``cols`` (001 eqs. (7), (10))."""
        rows = np.asarray(rows, dtype=np.intp)
        cols = np.asarray(cols, dtype=np.intp)
        K = kernel_block(self.kernel, self.X[rows], self.X[cols]) + self.label_bias
        K *= np.outer(self._s(rows), self._s(cols))
        if self.diag_add:
            K += self.diag_add * (rows[:, None] == cols[None, :])
        return K

    def _raw_diag(self, idx) -> np.ndarray:
        # s_i^2 = 1, so the sign drops out of the diagonal.
        return kernel_diag(self.kernel, self.X[idx]) + self.label_bias + self.diag_add

    def diag(self, idx) -> np.ndarray:
        """[k~(z_i, z_i)] for i in ``idx``."""
        return self._raw_diag(np.asarray(idx, dtype=np.intp))

    def delta(self, idx) -> np.ndarray:
        """Delta_i (000 eq. (12)); zero unless the generalized CVM needs it."""
        idx = np.asarray(idx, dtype=np.intp)
        if not self.has_delta:
            return np.zeros(len(idx))
        return self.eta - self.diag(idx)

    def linear_term(self, idx) -> np.ndarray:
        """diag(K~) + Delta: the linear term of the MEB dual (001 eq. (2))."""
        return self.diag(idx) + self.delta(idx)
