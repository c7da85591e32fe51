"""Pruning weightless core vectors in CVR's batched loop (issue 49; refimpl.driver.PRUNE_KAPPA): the two engines
prune the same vectors and keep the same core set, and the fast engine's state after a prune is the problem's."""
import numpy as np
import pytest

import fastimpl._engine as E
from corevector.engine_policy import with_policy
from refimpl import cvr, meb
from refimpl.kernels import KernelSpec


def _problem(m=600, C_paper=2e3, mu=0.02, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (m, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(m)
    y = (y - y.mean()) / y.std()
    return cvr.cvr_problem(X, y, KernelSpec("rbf", gamma=0.5), C_paper, mu)


class _CheckedOps(E.FastMEBOps):
    """FastMEBOps that checks alpha, the gradient, Q's diagonal and every cached row against the problem after
    each prune."""
    pruned = 0

    def prune(self, d2_below, min_count):
        k = super().prune(d2_below, min_count)
        if k:
            type(self).pruned += k
            S, a, g, Qd, lt, rows = E._debug_state(self)
            P = self.init_problem
            Q = P.block(S, S)
            np.testing.assert_allclose(g, 2 * Q @ a - P.shifted_linear_term(S), atol=1e-12)
            np.testing.assert_array_equal(Qd, np.diag(Q))
            for t, r in rows.items():
                np.testing.assert_allclose(r, Q[t, :len(r)], atol=1e-14)
        return k


def test_prune_keeps_the_fast_engine_consistent():
    _CheckedOps.pruned = 0
    out = with_policy(meb.fit_meb)(_problem(), 1e-2, stop="hybrid", solver="auto", random_state=0, ops_class=_CheckedOps,
                      n_confirm=100)
    assert _CheckedOps.pruned > 0
    assert out.converged


@pytest.mark.parametrize("C_paper", [2e3, 2e5])
def test_fast_and_ref_prune_alike(C_paper):
    kw = dict(stop="hybrid", solver="auto", random_state=0, n_confirm=100)
    a = with_policy(E.fit_meb)(_problem(C_paper=C_paper), 1e-2, **kw)
    b = with_policy(meb.fit_meb)(_problem(C_paper=C_paper), 1e-2, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-9)
    assert a.n_iter == b.n_iter
