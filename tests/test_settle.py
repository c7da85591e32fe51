"""The settle rule (refimpl.driver.Settle, CVMClassifier(settle=...)): the core-set loop also stops once more core
vectors no longer change the decisions on a probe sample.  Checked here: the rule's bookkeeping, that
settle='auto' leaves fits of at most SETTLE_MIN_ROWS points as they were, and, with the rule made to fire on
small data, that a settled fit reports it, certifies what it reached against an independent full computation,
and is the same fit in both implementations and from a zarr store."""
from __future__ import annotations

import numpy as np
import pytest

from corevector import CVMClassifier
from corevector.chunked import local_source, ops as chunked_ops
from refimpl import driver
from refimpl.driver import Ball, Scan, Settle

from helpers import optional


def _noisy_boundary(m, seed=0, flip=0.03):
    """A smooth boundary with a share ``flip`` of the labels flipped: 'hybrid' keeps adding the flipped
    points it samples, while the decisions settle."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(m, 2))
    y = np.where(np.sin(2 * X[:, 0]) > X[:, 1], 1, -1)
    y[rng.random(m) < flip] *= -1
    return X, y


@pytest.fixture
def eager_settle(monkeypatch):
    """The rule on small data: a probe of 1,024 points, checks from 50 core vectors after as much work as
    the check's own, settled at 2% moved."""
    monkeypatch.setattr(Settle.__init__, "__defaults__", (1024, 50, 1.15, 0.02, 1.0))


def test_checks_follow_the_core_set_and_count_the_probe_points_that_change_side():
    s = Settle(np.random.default_rng(0), 1000, probe=8, first=10, growth=1.5, changed=0.25, work=2.0)
    # due at 10 core vectors once the loop's work is twice the check's (8 probe points x 10 core vectors)
    assert s.probe.shape == (8,) and not s.due(9, 10**6) and not s.due(10, 159) and s.due(10, 160)
    ball = Ball.make(1.0, 0.5, 0.3, 0.9, 1.0)   # R^2 = 1, tau = 0.1: a point is on the near side at d^2 <= 1.2
    near = np.array([1.0, 1.1, 1.3, 1.5, 1.0, 1.0, 1.0, 1.0])
    assert not s.settled(10, Scan(0, 0.0, sample_d2=near), ball, 240)   # the first check: nothing to compare
    assert s.checks == [(10, -1)] and s.next == 15 and not s.due(14, 10**6)
    assert not s.due(15, 240 + 239) and s.due(15, 240 + 240)          # the work counts from the last check
    moved = near.copy()
    moved[[0, 2]] = [1.25, 1.15]                                    # two of eight change side
    assert s.settled(15, Scan(0, 0.0, sample_d2=moved), ball)       # 2 <= 0.25 * 8
    moved[[1, 3, 4]] = [1.3, 1.0, 1.4]                               # three more
    assert not s.settled(22, Scan(0, 0.0, sample_d2=moved), ball) and s.checks[-1] == (22, 3)


def test_auto_turns_the_rule_on_only_for_hybrid_pairs_beyond_settle_min_rows():
    class Pair:
        def __init__(self, m):
            self.m = m

    limit = CVMClassifier.SETTLE_MIN_ROWS
    assert limit == 100_000
    auto = CVMClassifier()
    assert not auto._settle(Pair(limit)) and auto._settle(Pair(limit + 1))
    assert not CVMClassifier(stop="radius")._settle(Pair(10 * limit))
    assert not CVMClassifier(sample_size=None)._settle(Pair(10 * limit))
    assert not CVMClassifier(settle=False)._settle(Pair(10 * limit))
    assert CVMClassifier(settle=True, stop="radius")._settle(Pair(10))


def test_auto_leaves_small_fits_bit_for_bit(eager_settle):
    """Below SETTLE_MIN_ROWS 'auto' draws no probe and checks nothing: the fit of the stop rule alone,
    even where the rule would fire (it does here with settle=True)."""
    X, y = _noisy_boundary(6000)
    auto = CVMClassifier(gamma=1.0, random_state=0).fit(X, y)
    off = CVMClassifier(gamma=1.0, settle=False, random_state=0).fit(X, y)
    on = CVMClassifier(gamma=1.0, settle=True, random_state=0).fit(X, y)
    assert np.array_equal(auto.core_set_, off.core_set_) and np.array_equal(auto.dual_coef_, off.dual_coef_)
    assert not auto.settled_ and auto.converged_
    assert on.settled_ and not np.array_equal(on.core_set_, off.core_set_)


def test_a_fit_reports_the_checks_that_settled_it(eager_settle):
    """settle_checks_: each check at least SETTLE_GROWTH beyond the last, nothing to compare at the first, every
    check before the last above the rule's share of the probe (else the loop had stopped there), the last at
    or below it; none where the rule is off."""
    X, y = _noisy_boundary(6000)
    est = CVMClassifier(gamma=1.0, settle=True, random_state=0).fit(X, y)
    probe, first, growth, changed, _ = Settle.__init__.__defaults__
    checks = est.settle_checks_
    assert est.settled_ and checks.dtype.kind == "i" and checks.shape[1] == 2 and len(checks) >= 3
    sizes, moved = checks[:, 0], checks[:, 1]
    assert sizes[0] >= first and (sizes[1:] >= np.maximum((sizes[:-1] * growth).astype(int), sizes[:-1] + 1)).all()
    assert moved[0] == -1 and (moved[1:-1] > changed * probe).all() and 0 <= moved[-1] <= changed * probe
    assert sizes[-1] <= est.core_set_.size
    off = CVMClassifier(gamma=1.0, settle=False, random_state=0).fit(X, y)
    assert off.settle_checks_.shape == (0, 2) and not off.settled_


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_a_settled_fit_says_so_and_certifies_what_it_reached(eager_settle, impl):
    X, y = _noisy_boundary(6000)
    full = CVMClassifier(gamma=1.0, settle=False, random_state=0, impl=impl).fit(X, y)
    est = CVMClassifier(gamma=1.0, settle=True, random_state=0, impl=impl).fit(X, y)
    assert est.settled_ and not est.converged_
    assert est.core_set_.size < full.core_set_.size
    # the certificate is the full scan's: max over all points of the squared distance to the centre, over R^2;
    # off the core set d^2 - R^2 = 2 (rho - y f(x)) (refimpl.driver.STOPS), computed here from the model
    s = np.where(y == est.classes_[1], 1.0, -1.0)
    R2 = est.radius_ ** 2
    d2 = R2 + 2.0 * (float(est.rho_) - s * est.decision_function(X))
    off = np.ones(len(X), bool)
    off[est.core_set_] = False
    assert est.certified_ratio_ >= d2[off].max() / R2 * (1 - 1e-9)
    # it stopped with points left that fail the hybrid cap (misclassified training points off the core set),
    # which the stop rule alone would have kept adding
    assert (d2[off] > R2 + 2.0 * float(est.rho_)).any()
    # its decisions are those the rule saw settle: within a few percent of the full fit's
    assert np.mean(est.predict(X) == full.predict(X)) > 0.97


def test_settled_fits_are_the_same_in_both_implementations(eager_settle):
    X, y = _noisy_boundary(6000)
    fast = CVMClassifier(gamma=1.0, settle=True, random_state=0).fit(X, y)
    ref = CVMClassifier(gamma=1.0, settle=True, random_state=0, impl="ref").fit(X, y)
    assert fast.settled_ and ref.settled_
    assert np.array_equal(fast.core_set_, ref.core_set_)
    np.testing.assert_allclose(fast.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-9 * np.abs(ref.dual_coef_).max())


@pytest.mark.parametrize("resident", [False, True])
def test_a_settled_fit_from_a_zarr_store_is_the_in_memory_fit(eager_settle, tmp_path, monkeypatch, resident):
    """The probe comes from the loop's stream, so a chunked fit reads it ahead with the other draws; its rows
    are held for the fit (ChunkedMEBOps.hold) and are not the model's unless they joined the core set (with
    every row in the buffer too, ``resident``)."""
    zarr = optional("zarr")
    monkeypatch.setattr(local_source, "BLOCK_BYTES", 16 * 1024)
    monkeypatch.setattr(chunked_ops, "WINDOW_START", 256)
    monkeypatch.setattr(chunked_ops, "RESIDENT_ROWS", resident)
    X, y = _noisy_boundary(6000)
    X = X.astype(np.float32)
    Z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(700, 2), dtype="f4")
    Z[:] = X
    a = CVMClassifier(gamma=1.0, settle=True, random_state=0).fit(X.astype(np.float64), y)
    b = CVMClassifier(gamma=1.0, settle=True, random_state=0).fit(zarr.open_array(str(tmp_path / "x.zarr"), mode="r"), y)
    assert a.settled_ and b.settled_
    assert np.array_equal(a.core_set_, b.core_set_) and np.array_equal(a.dual_coef_, b.dual_coef_)
    assert b.support_vectors_.shape[0] == len(b.support_)
    assert np.array_equal(a.predict(X.astype(np.float64)), b.predict(Z))


def test_settle_is_checked():
    X, y = _noisy_boundary(200)
    with pytest.raises(ValueError, match="settle"):
        CVMClassifier(settle="sometimes").fit(X, y)
    assert driver.SETTLE_CHANGED < 0.01 and driver.SETTLE_GROWTH > 1
